//! An agent's question to a person, from the orchestrator's side. The seam: `[questions] handlers`
//! name where a question goes; [`reachable`] says which of them can reach a person in this run
//! (the rest are skipped with one line); [`ask`] puts the question to each; every handler, and
//! `sandcastle answer`, leaves its answer on one path ([`answers`]), where the first valid answer
//! wins; [`poll`] takes it into the question, and [`settle`] (once the caller saved it) tells the
//! forge and removes the answer's file; the timeout is said once. Nothing here saves the state: the
//! caller saves after each step, so a run killed anywhere goes on where it was.
//!
//! The handlers: [`forge`] (a comment and replies to it), [`terminal`] (a prompt while `sandcastle
//! run` has a terminal), [`command`] (`[questions] command`, JSON in and out). A terminal prompt
//! and a command run on threads of their own while the run's other work goes on; a restarted
//! run asks through them again.
pub(crate) mod answers;
mod command;
mod forge;
mod terminal;

use crate::context::Context;
use crate::conversation::{self, Due};
use crate::forge_thread::post_once;
use crate::handlers::SINGLE_PASS;
use crate::report::Asked;
use crate::state::{Answer, Channel, OpenAsk, Phase, Waiting};
use anyhow::Result;
use jiff::Timestamp;
pub use sandcastle_config::Handler;
use sandcastle_core::questions::{self, Questions, Reply};
use sandcastle_core::role::WorkKey;
use std::path::Path;

/// What a look at a waiting question found.
#[derive(Debug, PartialEq)]
pub enum Poll {
    /// Saved in the state; the forge says who answered.
    Answered,
    Pending,
    /// The timeout passed just now: recorded and said once.
    TimedOut,
}

/// The configured handlers that can reach a person in this run, in the configured order. Empty:
/// nobody is asked (only `sandcastle answer` can answer).
pub fn reachable(ctx: &Context) -> Vec<Handler> {
    ctx.config
        .questions
        .handlers
        .iter()
        .copied()
        .filter(|handler| unreachable(ctx, *handler).is_none())
        .collect()
}

/// Why `handler` cannot reach a person in this run. The terminal and the command wait for a
/// person while the run goes on, so only a looping run has them.
fn unreachable(ctx: &Context, handler: Handler) -> Option<&'static str> {
    match handler {
        Handler::Forge => None,
        Handler::Terminal => ctx.handlers.terminal.as_ref().err().copied(),
        Handler::Command if ctx.config.questions.command.is_none() => {
            Some("`[questions] command` is not set")
        }
        Handler::Command => ctx.handlers.single_pass.then_some(SINGLE_PASS),
    }
}

/// One line for each configured handler this run skips, at its start.
pub fn say_skipped(ctx: &Context) {
    if !(ctx.config.questions.enabled || ctx.config.clarify.enabled) {
        return;
    }
    for handler in &ctx.config.questions.handlers {
        if let Some(why) = unreachable(ctx, *handler) {
            ctx.progress.note(&format!(
                "questions: the {handler} handler is skipped in this run: {why}"
            ));
        }
    }
}

/// The phase that waits for a new question, asked nowhere yet ([`ask`] asks it).
pub fn waiting(ctx: &Context, questions: Questions) -> Phase {
    Phase::Waiting(Box::new(Waiting {
        conversation: conversation::start(questions, &ctx.config.questions.poll_backoff),
        channels: Vec::new(),
        timed_out: false,
    }))
}

/// Puts the question to each handler that can reach a person in this run, adding it to the
/// question's channels, and labels the issue `needs-info` (which keeps it from the planner while it
/// waits). The forge comment is posted once, ever (a failure is tried again by the next pass; a kill
/// before the caller saved it finds the comment by its marker); a terminal prompt and the command
/// are asked once per run, so a restarted run asks through them again, and a looping run on a
/// terminal asks there a question an earlier `--once` run asked.
pub fn ask(ctx: &Context, key: WorkKey, waiting: &mut Waiting) -> Result<()> {
    let Some(number) = key.number() else {
        return Ok(());
    };
    if waiting.conversation.reply.is_some() || waiting.timed_out {
        return Ok(());
    }
    let id = waiting.conversation.id.clone();
    let first_in_this_run = !ctx.handlers.asked_in_this_run(&id);
    if first_in_this_run {
        for channel in reachable(ctx).into_iter().map(Channel::from) {
            if !waiting.channels.contains(&channel) {
                waiting.channels.push(channel);
            }
        }
    }
    if waiting.channels.contains(&Channel::Forge) && waiting.conversation.after == 0 {
        conversation::publish(ctx, number, &mut waiting.conversation)?;
    }
    if !first_in_this_run {
        return Ok(());
    }
    ctx.forge.add_labels(number, &["needs-info"])?;
    ctx.handlers.mark_asked(&id);
    ctx.report.record_question(&key.to_string(), asked(waiting));
    for handler in reachable(ctx) {
        match handler {
            Handler::Terminal => {
                if let Ok(terminal) = &ctx.handlers.terminal {
                    terminal.ask(ctx, key, waiting);
                }
            }
            Handler::Command => command::ask(ctx, key, waiting),
            Handler::Forge => {}
        }
    }
    let through: Vec<String> = waiting.channels.iter().map(|c| c.to_string()).collect();
    ctx.progress.note(&format!(
        "{key}: the agent asked a person{}; `sandcastle answer {number} …` answers too",
        if through.is_empty() {
            String::new()
        } else {
            format!(" through {}", through.join(", "))
        }
    ));
    Ok(())
}

/// Looks for the answer: one a handler or `sandcastle answer` left at once, the forge's
/// comments when the backoff says; then the timeout. `Answered`: the answer is in the question,
/// for the caller to save before [`settle`] removes the file it came from.
pub fn poll(ctx: &Context, key: WorkKey, waiting: &mut Waiting) -> Result<Poll> {
    ask(ctx, key, waiting)?;
    let Some(number) = key.number() else {
        return Ok(Poll::Pending);
    };
    let talk = &mut waiting.conversation;
    if talk.reply.is_none() {
        talk.reply = answers::take(&ctx.project, &talk.id)?;
    }
    conversation::read(ctx, key, number, talk, Due::Backoff)?;
    if talk.reply.is_some() {
        ctx.report.record_question(&key.to_string(), asked(waiting));
        return Ok(Poll::Answered);
    }
    let timed_out = !waiting.timed_out
        && jiff::Timestamp::now().duration_since(talk.asked_at)
            >= jiff::SignedDuration::try_from(ctx.config.questions.timeout)
                .unwrap_or(jiff::SignedDuration::MAX);
    if timed_out {
        let timeout = humantime::format_duration(ctx.config.questions.timeout);
        post_once(
            ctx,
            number,
            &format!("<!-- sandcastle:question-timeout {} -->", talk.id),
            &format!(
                "Nobody answered the agent's question within {timeout} (`[questions] timeout`). It \
                 keeps `needs-info`; an answer is still taken up by a later pass."
            ),
        )?;
        waiting.timed_out = true;
    }
    Ok(if timed_out {
        Poll::TimedOut
    } else {
        Poll::Pending
    })
}

/// An answered question, once saved: its forge comment says who answered, `needs-info` goes, and
/// the answer's file with it. Repeats harmlessly.
pub fn settle(ctx: &Context, key: WorkKey, waiting: &mut Waiting) -> Result<()> {
    let Some(number) = key.number() else {
        return Ok(());
    };
    conversation::settle(ctx, number, &mut waiting.conversation)?;
    ctx.forge.remove_label(number, "needs-info")?;
    answers::remove(&ctx.project, &waiting.conversation.id)
}

/// Puts revision `open.subject.revision` of `key`'s ask, once saved, to the handlers that can
/// reach a person, once per run: the terminal (a few lines and one answer on the prompt's thread)
/// and the question command (marked non-blocking); the agent waits for neither. The forge's
/// comment is the ask's own (`outbox::publish`); `sandcastle answer --ask` answers it anywhere.
pub fn put_ask(ctx: &Context, key: WorkKey, open: &OpenAsk) {
    let id = answers::ask_id(open);
    if open.reply.is_some() || ctx.handlers.asked_in_this_run(&id) {
        return;
    }
    ctx.handlers.mark_asked(&id);
    for handler in reachable(ctx) {
        match handler {
            Handler::Terminal => {
                if let Ok(terminal) = &ctx.handlers.terminal {
                    terminal.put_ask(ctx, key, open);
                }
            }
            Handler::Command => command::put_ask(ctx, key, open),
            Handler::Forge => {}
        }
    }
}

/// The question as the run report keeps it: when it was asked and answered.
fn asked(waiting: &Waiting) -> Asked {
    let talk = &waiting.conversation;
    Asked {
        id: talk.id.clone(),
        asked_at: talk.asked_at,
        answered_at: talk.reply.as_ref().map(|a| a.at),
    }
}

/// `sandcastle answer`: checks `text` against the waiting questions and leaves the answer for
/// the run. `Ok(Err(why))`: it does not answer them, or another answer came first.
pub fn answer_locally(
    project: &Path,
    waiting: &Waiting,
    key: WorkKey,
    text: &str,
) -> Result<Result<Vec<Reply>, String>> {
    let replies = match questions::read_reply(&waiting.conversation.subject, text) {
        Ok(replies) => replies,
        Err(why) => return Ok(Err(format!("that does not answer them: {why}"))),
    };
    let answer = Answer {
        by: answers::local_user(),
        channel: Channel::CommandLine,
        at: Timestamp::now(),
        replies: replies.clone(),
    };
    Ok(answers::leave(project, key, &waiting.conversation.id, &answer)?.map(|()| replies))
}
