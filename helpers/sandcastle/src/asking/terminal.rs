//! The `terminal` handler: while `sandcastle run` is attached to a terminal, a question is asked
//! there with a prompt (pick an option, or write an answer), one question at a time on a thread
//! of its own, the live view paused meanwhile; the run's other work goes on. The answer takes the
//! path every answer takes. Agent text is shown redacted, its control characters escaped.
use super::answers;
use crate::context::Context;
use crate::handlers::{Queued, Terminal};
use crate::state::{Answer, Channel, Waiting};
use dialoguer::console::Term;
use dialoguer::{Input, Select};
use jiff::Timestamp;
use sandcastle_core::progress::Progress;
use sandcastle_core::questions::{self, Reply};
use sandcastle_core::role::WorkKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;

impl Terminal {
    pub fn ask(&self, ctx: &Context, key: WorkKey, waiting: &Waiting) {
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
        let _ = sender.send(Queued {
            key,
            id: waiting.conversation.id.clone(),
            questions: waiting.conversation.subject.clone(),
        });
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
        // Answered elsewhere while it waited in the queue: nothing to ask.
        if !matches!(
            answers::still_open(&self.project, key, &asked.id),
            Ok(Ok(()))
        ) {
            return;
        }
        let prompted = {
            let _paused = self.progress.pause();
            prompt(&self.progress, asked)
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
        match answers::leave(&self.project, key, &asked.id, &answer) {
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
}

/// The questions, one by one: `None` when the person leaves the prompt (Esc).
fn prompt(progress: &Progress, asked: &Queued) -> std::io::Result<Option<Vec<Reply>>> {
    let term = Term::stderr();
    let show = |text: &str| progress.printable(text);
    let questions = &asked.questions;
    term.write_line(&format!(
        "\nThe agent working on {} asks: {}",
        asked.key,
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
