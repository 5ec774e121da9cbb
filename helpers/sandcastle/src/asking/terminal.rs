//! The `terminal` handler: while `sandcastle run` is attached to a terminal, a question is asked
//! there with a prompt (pick an option, or write an answer), one question at a time on a thread
//! of its own, the live view paused meanwhile; the run's other work goes on. The answer takes the
//! path every answer takes. Agent text is shown redacted, its control characters escaped.
use super::answers;
use crate::context::Context;
use crate::handlers::{Put, Queued, Terminal};
use crate::state::{Answer, Channel, OpenAsk, Settled, Waiting};
use dialoguer::console::Term;
use dialoguer::{Input, Select};
use jiff::Timestamp;
use sandcastle_core::ask::Ask;
use sandcastle_core::progress::Progress;
use sandcastle_core::questions::{self, Questions, Reply};
use sandcastle_core::role::WorkKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;

impl Terminal {
    pub fn ask(&self, ctx: &Context, key: WorkKey, waiting: &Waiting) {
        self.queue(
            ctx,
            Queued {
                key,
                put: Put::Questions(
                    waiting.conversation.id.clone(),
                    waiting.conversation.subject.clone(),
                ),
            },
        );
    }

    /// An ask's revision, in a few lines and one answer; the agent does not wait for it.
    pub fn put_ask(&self, ctx: &Context, key: WorkKey, open: &OpenAsk) {
        self.queue(
            ctx,
            Queued {
                key,
                put: Put::Ask(open.subject.clone()),
            },
        );
    }

    fn queue(&self, ctx: &Context, queued: Queued) {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let sender = queue.get_or_insert_with(|| {
            let (sender, asked) = channel::<Queued>();
            let desk = Desk {
                project: ctx.project.clone(),
                progress: ctx.progress.clone(),
                arrived: ctx.handlers.arrived.clone(),
            };
            std::thread::spawn(move || {
                for asked in asked {
                    desk.serve(&asked);
                }
            });
            sender
        });
        let _ = sender.send(queued);
    }
}

/// What the prompt thread holds of the run.
struct Desk {
    project: PathBuf,
    progress: Progress,
    arrived: Arc<AtomicBool>,
}

impl Desk {
    fn serve(&self, asked: &Queued) {
        let key = asked.key;
        let Some(number) = key.number() else {
            return;
        };
        let (id, questions) = match &asked.put {
            Put::Ask(ask) => return self.serve_ask(key, number, ask),
            Put::Questions(id, questions) => (id, questions),
        };
        // Answered elsewhere while it waited in the queue: nothing to ask.
        if !matches!(answers::still_open(&self.project, key, id), Ok(Ok(()))) {
            return;
        }
        let prompted = {
            let _paused = self.progress.pause();
            prompt(&self.progress, key, questions)
        };
        let replies = match prompted {
            Ok(Some(replies)) => replies,
            Ok(None) => {
                self.progress.note(&format!(
                    "{key}: not answered on the terminal; a comment on the forge or \
                     `sandcastle answer {number} …` still answers it"
                ));
                return;
            }
            Err(e) => {
                self.progress
                    .note(&format!("{key}: the terminal prompt failed: {e}"));
                return;
            }
        };
        let answer = Answer {
            by: answers::local_user(),
            channel: Channel::Terminal,
            at: Timestamp::now(),
            replies,
        };
        match answers::leave(&self.project, key, id, &answer) {
            Ok(Ok(())) => {
                self.progress.note(&format!(
                    "{key}: answered on the terminal; the agent goes on with the next pass"
                ));
                self.arrived.store(true, Ordering::SeqCst);
            }
            Ok(Err(why)) => self.progress.note(&format!(
                "{key}: the terminal's answer was not taken: {why}"
            )),
            Err(e) => self.progress.note(&format!(
                "{key}: the terminal's answer was not taken: {e:#}"
            )),
        }
    }

    /// The ask in a few lines and one answer (empty: left to the other channels), taken like any.
    fn serve_ask(&self, key: WorkKey, number: u64, ask: &Ask) {
        // Answered elsewhere, or replaced, while it waited in the queue: nothing to ask.
        if !matches!(
            answers::ask_still_open(&self.project, key, ask.revision),
            Ok(Ok(_))
        ) {
            return;
        }
        let prompted = {
            let _paused = self.progress.pause();
            prompt_ask(&self.progress, key, ask)
        };
        let text = match prompted {
            Ok(text) if text.trim().is_empty() => return,
            Ok(text) => text,
            Err(e) => {
                return self
                    .progress
                    .note(&format!("{key}: the terminal prompt failed: {e}"));
            }
        };
        let taken = Settled::read(ask, &answers::local_user(), Channel::Terminal, &text)
            .map_err(|why| format!("that does not answer it: {why}"))
            .and_then(|settled| {
                answers::leave_ask(&self.project, key, ask.revision, &settled)
                    .map_err(|e| format!("{e:#}"))?
            });
        match taken {
            Ok(()) => {
                self.progress.note(&format!(
                    "{key}: answered the agent's ask on the terminal; it is told at its next turn"
                ));
                self.arrived.store(true, Ordering::SeqCst);
            }
            Err(why) => self.progress.note(&format!(
                "{key}: the terminal's answer to the ask was not taken: {why}; \
                 `sandcastle answer {number} --ask {} …` answers it",
                ask.revision
            )),
        }
    }
}

/// An ask: what it is, its options, one line of answer.
fn prompt_ask(progress: &Progress, key: WorkKey, ask: &Ask) -> std::io::Result<String> {
    let term = Term::stderr();
    let show = |text: &str| progress.printable(text);
    term.write_line(&format!(
        "\nThe agent working on {key} asks ({}, revision {}) and works on meanwhile: {}",
        ask.kind.name(),
        ask.revision,
        show(&ask.title)
    ))?;
    if !ask.details.is_empty() {
        term.write_line(&show(&ask.details))?;
    }
    for (n, option) in ask.options.iter().enumerate() {
        term.write_line(&match option.meaning.as_str() {
            "" => format!("{}. {}", n + 1, show(&option.label)),
            meaning => format!("{}. {}: {}", n + 1, show(&option.label), show(meaning)),
        })?;
    }
    Input::new()
        .with_prompt("Your answer (an option's number or label, text, or close; empty leaves it)")
        .allow_empty(true)
        .interact_text_on(&term)
        .map_err(std::io::Error::other)
}

/// The questions, one by one: `None` when the person leaves the prompt (Esc).
fn prompt(
    progress: &Progress,
    key: WorkKey,
    questions: &Questions,
) -> std::io::Result<Option<Vec<Reply>>> {
    let term = Term::stderr();
    let show = |text: &str| progress.printable(text);
    term.write_line(&format!(
        "\nThe agent working on {} asks: {}",
        key,
        show(&questions.title)
    ))?;
    if !questions.prose.is_empty() {
        term.write_line(&show(&questions.prose))?;
    }
    term.write_line("(Esc leaves the question to the other channels.)")?;
    let mut replies = Vec::new();
    for (index, question) in questions.items.iter().enumerate() {
        term.write_line(&format!(
            "\nQuestion {} of {}: {}",
            index + 1,
            questions.items.len(),
            show(&question.title)
        ))?;
        if !question.prose.is_empty() {
            term.write_line(&show(&question.prose))?;
        }
        let option = if question.options.is_empty() {
            None
        } else {
            let mut items: Vec<String> = question
                .options
                .iter()
                .enumerate()
                .map(|(n, option)| match option.prose.as_str() {
                    "" => format!("{}. {}", n + 1, show(&option.title)),
                    prose => format!("{}. {}: {}", n + 1, show(&option.title), show(prose)),
                })
                .collect();
            items.push("Write an answer instead".to_string());
            let Some(picked) = Select::new()
                .with_prompt("Pick one")
                .items(&items)
                .default(0)
                .interact_on_opt(&term)
                .map_err(std::io::Error::other)?
            else {
                return Ok(None);
            };
            (picked < question.options.len()).then_some(picked + 1)
        };
        let text: String = Input::new()
            .with_prompt(match option {
                Some(_) => "Why (optional)",
                None => "Your answer",
            })
            .allow_empty(option.is_some())
            .interact_text_on(&term)
            .map_err(std::io::Error::other)?;
        match questions::checked(questions, index, option, &text) {
            Ok(reply) => replies.push(reply),
            Err(why) => {
                term.write_line(&format!("That does not answer it: {why}"))?;
                return Ok(None);
            }
        }
    }
    Ok(Some(replies))
}
