//! An agent's question to a person, from the orchestrator's side. The seam: `[questions] handlers`
//! name where a question goes; [`reachable`] says which of them can reach a person in this run
//! (the rest are skipped with one line); [`ask`] puts the question to each; every handler, and
//! `sandcastle answer`, leaves its answer on one path ([`answers`]), where the first valid answer
//! wins; [`poll`] takes it into the issue's state, saved before it is delivered, and says the
//! timeout once. Every step is saved, so a run killed anywhere goes on where it was.
//!
//! The handlers: [`forge`] (a comment and replies to it), [`terminal`] (a prompt while `sandcastle
//! run` has a terminal), [`command`] (`[questions] command`, JSON in and out). A terminal prompt
//! and a command run on threads of their own while the run's other work goes on; a restarted
//! run asks through them again.
mod answers;
mod command;
mod forge;
mod terminal;

pub use forge::{escape, replies_after};

use crate::context::Context;
use crate::publish::post_once;
use crate::report::Asked;
use crate::state::{Answer, Channel, Waiting, WorkState};
use anyhow::Result;
use jiff::Timestamp;
pub use sandcastle_config::Handler;
use sandcastle_core::questions::{self, Questions, Reply};
use sandcastle_core::role::WorkKey;
use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a look at a waiting question found.
#[derive(Debug, PartialEq)]
pub enum Poll {
    /// Saved in the state; the forge says who answered.
    Answered,
    Pending,
    /// The timeout passed just now: recorded and said once.
    TimedOut,
}

/// The run's side of the handlers: whether a terminal prompt can be used, which questions this
/// run has put to them, and whether an answer came in from a handler's thread.
pub struct Handlers {
    /// `run --once` or `run --issue`: the run ends after one pass.
    single_pass: bool,
    terminal: Result<terminal::Terminal, &'static str>,
    asked: Mutex<HashSet<String>>,
    arrived: Arc<AtomicBool>,
    children: command::Children,
}

impl Handlers {
    /// For a command that asks nobody (`plan`, `doctor`, tests).
    pub fn detached() -> Handlers {
        Handlers::with_terminal(true, Err("this command asks nobody"))
    }

    /// For `sandcastle run`: a terminal prompt only when it waits for people and has a terminal
    /// to ask on.
    pub fn for_run(single_pass: bool) -> Handlers {
        let terminal = if single_pass {
            Err(SINGLE_PASS)
        } else if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            Err("`sandcastle run` is not attached to a terminal")
        } else {
            Ok(terminal::Terminal::default())
        };
        Handlers::with_terminal(single_pass, terminal)
    }

    fn with_terminal(
        single_pass: bool,
        terminal: Result<terminal::Terminal, &'static str>,
    ) -> Handlers {
        Handlers {
            terminal,
            single_pass,
            asked: Mutex::new(HashSet::new()),
            arrived: Arc::new(AtomicBool::new(false)),
            children: command::Children::default(),
        }
    }

    /// A stopped run ends the question commands it started.
    pub fn stop(&self) {
        command::stop(&self.children);
    }

    /// Whether an answer came in since the last look (the loop's wait ends early for it).
    pub fn answer_arrived(&self) -> bool {
        self.arrived.swap(false, Ordering::SeqCst)
    }

    fn asked_in_this_run(&self, id: &str) -> bool {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(id)
    }

    fn mark_asked(&self, id: &str) {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string());
    }
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

const SINGLE_PASS: &str = "`run --once` and `run --issue` never wait for a person";

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

/// A new question, asked nowhere yet ([`ask`] asks it).
pub fn waiting(ctx: &Context, questions: Questions) -> Waiting {
    let now = Timestamp::now();
    Waiting {
        id: uuid::Uuid::new_v4().simple().to_string(),
        questions,
        asked_at: now,
        channels: Vec::new(),
        comment: None,
        polls: 0,
        next_poll: next_poll(now, &ctx.config.questions.poll_backoff, 0),
        ignored: Vec::new(),
        timed_out: false,
        answer: None,
    }
}

/// When to read the forge next, after `polls` reads: `[questions] pollBackoff` step by step, the
/// last step repeating.
pub fn next_poll(now: Timestamp, backoff: &[Duration], polls: u32) -> Timestamp {
    let wait = backoff
        .get(polls as usize)
        .or(backoff.last())
        .copied()
        .unwrap_or_default();
    now + jiff::SignedDuration::try_from(wait).unwrap_or(jiff::SignedDuration::MAX)
}

/// Puts the question to each handler that can reach a person in this run, adding it to the
/// question's channels, and labels the issue `needs-info` (which keeps it from the planner while it
/// waits). The forge comment is posted once, ever (a failure is tried again by the next pass); a
/// terminal prompt and the command are asked once per run, so a restarted run asks through them
/// again, and a looping run on a terminal asks there a question an earlier `--once` run asked.
pub fn ask(ctx: &Context, number: u64, state: &mut WorkState) -> Result<()> {
    let Some(waiting) = state.waiting.as_mut() else {
        return Ok(());
    };
    if waiting.answer.is_some() || waiting.timed_out {
        return Ok(());
    }
    let first_in_this_run = !ctx.handlers.asked_in_this_run(&waiting.id);
    if first_in_this_run {
        for channel in reachable(ctx).into_iter().map(Channel::from) {
            if !waiting.channels.contains(&channel) {
                waiting.channels.push(channel);
            }
        }
    }
    if waiting.channels.contains(&Channel::Forge) && waiting.comment.is_none() {
        forge::ask(ctx, number, waiting)?;
    }
    state.save(&ctx.state_dir())?;
    if !first_in_this_run {
        return Ok(());
    }
    ctx.forge.add_labels(number, &["needs-info"])?;
    let waiting = state.waiting.as_ref().expect("read above");
    ctx.handlers.mark_asked(&waiting.id);
    ctx.report
        .record_question(&WorkKey::Issue(number).to_string(), asked(waiting));
    for handler in reachable(ctx) {
        match handler {
            Handler::Terminal => {
                if let Ok(terminal) = &ctx.handlers.terminal {
                    terminal.ask(ctx, number, waiting);
                }
            }
            Handler::Command => command::ask(ctx, number, waiting),
            Handler::Forge => {}
        }
    }
    let through: Vec<String> = waiting.channels.iter().map(|c| c.to_string()).collect();
    let work = WorkKey::from_slug(&state.slug).unwrap_or(WorkKey::Issue(number));
    ctx.progress.note(&format!(
        "{work}: the agent asked a person{}; `sandcastle answer {number} …` answers too",
        if through.is_empty() {
            String::new()
        } else {
            format!(" through {}", through.join(", "))
        }
    ));
    Ok(())
}

/// Looks for the answer: one a handler or `sandcastle answer` left at once, the forge's
/// comments when the backoff says; then the timeout. An answer is saved before anything else
/// happens with it.
pub fn poll(ctx: &Context, number: u64, state: &mut WorkState) -> Result<Poll> {
    ask(ctx, number, state)?;
    let Some(waiting) = state.waiting.as_mut() else {
        return Ok(Poll::Pending);
    };
    let now = Timestamp::now();
    if waiting.answer.is_none() {
        waiting.answer = answers::take(&ctx.project, &waiting.id)?;
    }
    if waiting.answer.is_none() && waiting.comment.is_some() && now >= waiting.next_poll {
        waiting.answer = forge::answer(ctx, number, waiting)?;
        waiting.polls += 1;
        waiting.next_poll = next_poll(now, &ctx.config.questions.poll_backoff, waiting.polls);
    }
    if let Some(answer) = waiting.answer.clone() {
        state.save(&ctx.state_dir())?;
        let waiting = state.waiting.as_ref().expect("just read");
        ctx.report
            .record_question(&WorkKey::Issue(number).to_string(), asked(waiting));
        forge::settle(ctx, number, waiting, &answer)?;
        ctx.forge.remove_label(number, "needs-info")?;
        answers::remove(&ctx.project, &waiting.id)?;
        return Ok(Poll::Answered);
    }
    let timed_out = !waiting.timed_out
        && now.duration_since(waiting.asked_at)
            >= jiff::SignedDuration::try_from(ctx.config.questions.timeout)
                .unwrap_or(jiff::SignedDuration::MAX);
    if timed_out {
        let timeout = humantime::format_duration(ctx.config.questions.timeout);
        post_once(
            ctx,
            number,
            &format!("<!-- sandcastle:question-timeout {} -->", waiting.id),
            &format!(
                "Nobody answered the agent's question within {timeout} (`[questions] timeout`). The issue \
                 keeps `needs-info`; an answer is still taken up by a later pass."
            ),
        )?;
        waiting.timed_out = true;
    }
    state.save(&ctx.state_dir())?;
    Ok(if timed_out {
        Poll::TimedOut
    } else {
        Poll::Pending
    })
}

/// The question as the run report keeps it: when it was asked and answered.
fn asked(waiting: &Waiting) -> Asked {
    Asked {
        id: waiting.id.clone(),
        asked_at: waiting.asked_at,
        answered_at: waiting.answer.as_ref().map(|a| a.at),
    }
}

/// `sandcastle answer`: checks `text` against the waiting questions and leaves the answer for
/// the run. `Ok(Err(why))`: it does not answer them, or another answer came first.
pub fn answer_locally(
    project: &Path,
    waiting: &Waiting,
    number: u64,
    text: &str,
) -> Result<Result<Vec<Reply>, String>> {
    let replies = match questions::read_reply(&waiting.questions, text) {
        Ok(replies) => replies,
        Err(why) => return Ok(Err(format!("that does not answer them: {why}"))),
    };
    let answer = Answer {
        by: answers::local_user(),
        channel: Channel::CommandLine,
        at: Timestamp::now(),
        replies: replies.clone(),
    };
    Ok(answers::leave(project, number, &waiting.id, &answer)?.map(|()| replies))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The waits step through `pollBackoff` and stay on the last step.
    #[test]
    fn the_poll_backoff_steps_through_and_stays_on_the_last_step() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let backoff = [5, 15, 30].map(Duration::from_secs);
        let waits: Vec<i64> = (0..6)
            .map(|polls| {
                next_poll(now, &backoff, polls)
                    .duration_since(now)
                    .as_secs()
            })
            .collect();
        assert_eq!(waits, [5, 15, 30, 30, 30, 30]);
        assert_eq!(next_poll(now, &[], 3), now, "no backoff: at once");
    }
}
