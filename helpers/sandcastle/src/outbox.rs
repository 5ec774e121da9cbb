//! An agent's ask that does not stop it (`sandcastle ask`), from the orchestrator's side: taken out
//! of the sandbox's outbox after each turn (bytes only, checked again), published on the forge as
//! a [`conversation`] (one comment per piece of work, edited for each new revision), its replies
//! read from writers, and the answer told to the working agent as its next prompt, exactly once.
//! Nothing here saves the state: the driver (or the pass) saves after each step.
//!
//! Exactly once: a settled ask becomes a [`Telling`] keyed by the ask and the moment it was
//! settled; the "telling" mark is saved before the turn that carries it and the key is recorded in
//! `told` once that turn's session is saved. A kill in between tells it again in the retried turn,
//! whose resumed session never saw it; a key in `told` is never told again.
use crate::asking::{self, answers};
use crate::context::Context;
use crate::conversation::{self, Choice, Item, Outline, Replied, Subject};
use crate::prompts;
use crate::report::Asked;
use crate::state::{Channel, OpenAsk, Phase, Settled, Telling, WorkState};
use anyhow::Result;
use jiff::Timestamp;
use sandcastle_core::ask::{self, Ask, Kind};
use sandcastle_core::forge_text::quote_inline;
use sandcastle_core::role::WorkKey;
use std::time::Duration;

pub use crate::conversation::Due;

/// While a turn runs, an ask's comment changes at most once in this long, however often the agent
/// rewrites its ask: the revisions in between wait in the state, and the last of them goes out
/// with the turn's next event past the interval, or at the turn's end.
pub const ASK_EDIT_INTERVAL: Duration = Duration::from_secs(10);

/// When a kept revision may reach the forge.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// At once: the end of a turn, between turns, a pass's look.
    Now,
    /// Relayed while the turn runs: not within [`ASK_EDIT_INTERVAL`] of the comment's last change.
    Relayed,
}

/// The variables every `docker exec` of this work's sandbox gets, so `sandcastle ask` knows its
/// work, goes on from the revision the orchestrator last took, and whether asks are on (`[asks]`).
pub fn sandbox_env(ctx: &Context, key: WorkKey, state: &WorkState) -> Vec<(String, String)> {
    let revision = state.ask.as_ref().map_or(0, |open| open.subject.revision);
    let mut env = vec![
        (ask::KEY_VAR.to_string(), ask::key_text(key)),
        (ask::REVISION_VAR.to_string(), revision.to_string()),
    ];
    if ctx.config.asks.enabled {
        env.push((ask::ASKS_VAR.to_string(), "on".to_string()));
    }
    env
}

/// After a turn, or when a turn relays it: a new revision in the outbox is checked again and kept,
/// to be published by [`publish`] once it is saved (a kill in between publishes it from the saved
/// state; the sandbox's outbox would be gone); a refused one is said in one line.
pub fn take(ctx: &Context, key: WorkKey, state: &mut WorkState, handed: Result<Option<Vec<u8>>>) {
    let refused = |state: &mut WorkState, why: String| {
        // The outbox stays as it is until the agent writes it again: said once, not every turn.
        if state.refused_ask.as_ref() != Some(&why) {
            ctx.progress.note(&format!(
                "{key}: refused the agent's ask from its outbox: {why}; nothing published"
            ));
            state.refused_ask = Some(why);
        }
    };
    let bytes = match handed {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return,
        Err(e) => return refused(state, ctx.redactor.error(&e)),
    };
    // The sandbox refuses an ask when asks are off; an outbox written some other way is not
    // believed either.
    if !ctx.config.asks.enabled {
        let why = "asks are off (no `[asks]` table in .sandcastle/config.toml)";
        return refused(state, why.to_string());
    }
    let ask = match ask::from_outbox(&bytes, key) {
        Ok(ask) => ask,
        Err(why) => return refused(state, why),
    };
    state.refused_ask = None;
    let last = state.ask.as_ref().map_or(0, |open| open.subject.revision);
    if ask.revision <= last {
        return;
    }
    ctx.progress.note(&format!(
        "{key}: the agent asks ({}, revision {}) and goes on: {}",
        ask.kind.name(),
        ask.revision,
        ask.title
    ));
    let mut open = conversation::start(ask, &ctx.config.questions.poll_backoff);
    // A new revision keeps the work's one comment.
    if let Some(last) = &state.ask {
        open.id = last.id.clone();
        open.comment = last.comment;
        open.posted_at = last.posted_at;
    }
    ctx.report.record_ask(&key.to_string(), asked(&open));
    state.ask = Some(open);
}

/// Publishes the ask if its revision is not on the forge yet: one comment per piece of work,
/// posted once and edited for each revision, a relayed revision no sooner than `pace` allows
/// (it waits in the state); replies count from the newest comment on.
pub fn publish(ctx: &Context, key: WorkKey, state: &mut WorkState, pace: Pace) -> Result<()> {
    let Some(open) = state.ask.as_mut() else {
        return Ok(());
    };
    asking::put_ask(ctx, key, open);
    let now = Timestamp::now();
    if open.after != 0 || open.reply.is_some() || too_soon(open, pace, now) {
        return Ok(());
    }
    let number = key
        .number()
        .expect("asks come from issues and pull requests");
    // Tried counts: a forge that fails is not asked again at every event of the turn.
    open.posted_at = Some(now);
    conversation::publish(ctx, number, open)
}

/// A later revision of the ask waits for its pace: its comment shows an earlier one.
pub fn held_back(state: &WorkState) -> bool {
    state
        .ask
        .as_ref()
        .is_some_and(|open| open.after == 0 && open.reply.is_none() && open.comment.is_some())
}

/// A relayed revision of an ask whose comment changed less than [`ASK_EDIT_INTERVAL`] before
/// `now`. The first revision is never too soon.
fn too_soon(open: &OpenAsk, pace: Pace, now: Timestamp) -> bool {
    let Some(posted_at) = open.posted_at else {
        return false;
    };
    let interval = jiff::SignedDuration::try_from(ASK_EDIT_INTERVAL).unwrap_or_default();
    pace == Pace::Relayed && open.comment.is_some() && now.duration_since(posted_at) < interval
}

/// The ask's revision as the run report keeps it: when it was taken and settled.
fn asked(open: &OpenAsk) -> Asked {
    Asked {
        id: format!("{}/{}", open.id, open.subject.revision),
        asked_at: open.asked_at,
        answered_at: open.reply.as_ref().map(|s| s.at),
    }
}

/// Publishes a pending revision, reads the replies to the open ask when `due`; the first that
/// counts settles it, its answer kept to be told, and the forge's comment says so. A kill before
/// the state is saved reads the same reply again (nothing is told before that), and the comment's
/// edit repeats harmlessly.
pub fn poll(ctx: &Context, key: WorkKey, state: &mut WorkState, due: Due) -> Result<()> {
    publish(ctx, key, state, Pace::Now)?;
    let Some(number) = key.number() else {
        return Ok(());
    };
    let Some(open) = state.ask.as_mut() else {
        return Ok(());
    };
    let settled_before = open.reply.is_some();
    // An answer left on this machine (`sandcastle answer --ask`, the question command) comes
    // first; the forge's replies are read only while none is there.
    if !settled_before {
        open.reply = answers::take_ask(&ctx.project, open)?;
    }
    conversation::read(ctx, key, number, open, due)?;
    if let (false, Some(settled)) = (settled_before, &open.reply) {
        ctx.report.record_ask(&key.to_string(), asked(open));
        let telling = Telling {
            key: format!("{}/{}@{}", open.id, open.subject.revision, settled.at),
            prompt: prompts::ask_answer(&open.subject, settled),
            telling: false,
        };
        let how = if settled.closed { "closed" } else { "answered" };
        ctx.progress.note(&format!(
            "{key}: {} {how} the agent's ask (revision {}) through {}; it is told in its next turn",
            settled.by, open.subject.revision, settled.channel
        ));
        if !state.told.contains(&telling.key) {
            state.tell = Some(telling);
        }
    }
    if let Some(open) = state.ask.as_mut() {
        conversation::settle(ctx, number, open)?;
    }
    Ok(())
}

impl Subject for Ask {
    type Reply = Settled;
    const KIND: &'static str = "ask";
    const FIRST_READ_WAITS: bool = false;

    /// What it asks, options numbered, and how to reply.
    fn outline(&self, _number: u64) -> Outline {
        let what = match self.kind {
            Kind::Decision => "asks for a **decision**",
            Kind::Action => "asks a person to **act**",
            Kind::Ready => "says something is **ready** for a person",
            Kind::Blocked => "is **blocked** on part of the work",
        };
        let options = self
            .options
            .iter()
            .map(|option| Choice {
                label: option.label.clone(),
                meaning: option.meaning.clone(),
                note: match self.recommended.as_ref() == Some(&option.label) {
                    true => " (the agent's recommendation)",
                    false => "",
                },
            })
            .collect();
        let forms = if self.options.is_empty() {
            "your answer"
        } else {
            "an option's number or label (`1`, `2: because …`) or free text"
        };
        let mut how = format!(
            "\n**How to answer:** reply with {forms}, or `close` to close this ask without an answer. \
             Only replies from people with write access to this repository count; the answer reaches \
             the agent as its next prompt."
        );
        if self.revision > 1 {
            how += &format!(
                "\n\n_Revision {}: it replaces the agent's earlier ask._",
                self.revision
            );
        }
        Outline {
            intro: format!("sandcastle's agent {what} and goes on working meanwhile."),
            title: self.title.clone(),
            prose: self.details.clone(),
            items: vec![Item {
                options,
                ..Item::default()
            }],
            how,
        }
    }

    fn read(&self, by: &str, text: &str) -> Result<Settled, String> {
        Settled::read(self, by, Channel::Forge, text)
    }
}

impl Replied for Settled {
    fn line(&self) -> String {
        let through = match self.channel {
            Channel::Forge => String::new(),
            channel => format!(" through {channel}"),
        };
        format!(
            "**{}** by {}{through} at {}",
            if self.closed { "Closed" } else { "Answered" },
            quote_inline(&self.by),
            self.at.strftime("%Y-%m-%d %H:%M:%S UTC")
        )
    }
}

/// Before a working turn: the answer to tell, if any, marked "telling" (the driver saves the mark
/// before the turn).
pub fn telling(state: &mut WorkState) -> Option<String> {
    let tell = state.tell.as_mut()?;
    tell.telling = true;
    Some(tell.prompt.clone())
}

/// After the turn that told it, once its session is saved: told, never again.
pub fn told(state: &mut WorkState) {
    if let Some(tell) = state.tell.take() {
        state.told.push(tell.key);
    }
}

/// A finished state's asks go on in the fresh state of the same work (given-up work taken up
/// again), so nothing settled is lost and nothing told is told again.
pub fn carry(from: Option<WorkState>, to: &mut WorkState) {
    if let Some(from) = from {
        to.ask = from.ask;
        to.tell = from.tell;
        to.told = from.told;
    }
}

/// A pass's look at one work's ask: the ask of closed work is let go; an open one is polled (with
/// backoff); an answer to published work is to be handed to a pr-fixer turn on its pull request
/// (that pull request's number, once this state is saved: see [`hand_over`]), or let go if that is
/// closed.
pub fn look(ctx: &Context, key: WorkKey, state: &mut WorkState) -> Result<Option<u64>> {
    let number = key.number().expect("a work key");
    if !ctx.forge.is_open(number)? {
        let_go(ctx, key, state, &format!("{key} is closed"));
        return Ok(None);
    }
    poll(ctx, key, state, Due::Backoff)?;
    if state.tell.is_none() {
        return Ok(None);
    }
    let published = match key {
        _ if state.phase != Phase::Done => None,
        WorkKey::Issue(_) => state.pull,
        _ => Some(number),
    };
    match published {
        Some(pull) if !ctx.forge.is_open(pull)? => {
            let why = format!("its pull request #{pull} is closed");
            let_go(ctx, key, state, &why);
            Ok(None)
        }
        published => Ok(published),
    }
}

/// Closed work's open ask and untold answer are dropped, with one line.
fn let_go(ctx: &Context, key: WorkKey, state: &mut WorkState, why: &str) {
    ctx.progress.note(&format!(
        "{key}: let go of the agent's ask and its answer: {why}"
    ));
    state.ask.take_if(|open| open.reply.is_none());
    told(state);
}

/// Published work's answer (`from`'s, saved) becomes the next prompt of a pr-fixer on its pull
/// request: that work's state with it to save, unless it already has it (its key is looked for);
/// then `from` lets it go ([`told`]).
pub fn hand_over(ctx: &Context, pull: u64, from: &WorkState) -> Result<Option<WorkState>> {
    let Some(tell) = &from.tell else {
        return Ok(None);
    };
    let dir = ctx.state_dir();
    let slug = WorkKey::Pull(pull).slug();
    let saved = WorkState::load(&dir, &slug)?;
    let known = |s: &WorkState| {
        s.told.contains(&tell.key) || s.tell.as_ref().is_some_and(|t| t.key == tell.key)
    };
    if saved.as_ref().is_some_and(known) {
        return Ok(None);
    }
    let mut state = match WorkState::resume(&dir, &slug)? {
        Some(state) => state,
        None => {
            let branch = ctx.forge.pull(pull)?.head_branch;
            let mut state = WorkState::new(&slug, &branch, &ctx.run_id);
            carry(saved, &mut state);
            state
        }
    };
    ctx.progress.note(&format!(
        "pull request #{pull}: the answer to the agent's ask starts a pr-fixer turn"
    ));
    state.tell = Some(Telling {
        telling: false,
        ..tell.clone()
    });
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandcastle_core::ask::AskOption;

    fn decision() -> Ask {
        Ask {
            key: "issue:1".into(),
            revision: 1,
            kind: Kind::Decision,
            title: "Driver?".into(),
            details: String::new(),
            options: vec![
                AskOption {
                    label: "pg".into(),
                    meaning: String::new(),
                },
                AskOption {
                    label: "mysql2".into(),
                    meaning: String::new(),
                },
            ],
            recommended: None,
        }
    }

    /// A relayed revision waits while the comment changed less than the interval ago; the first
    /// revision, and any at the turn's end, go at once.
    #[test]
    fn relayed_revisions_are_paced_by_the_comments_last_change() {
        let now = Timestamp::now();
        let mut open = conversation::start(decision(), &[]);
        assert!(
            !too_soon(&open, Pace::Relayed, now),
            "the first goes at once"
        );
        open.comment = Some(7);
        open.posted_at = Some(now - jiff::SignedDuration::from_secs(3));
        assert!(too_soon(&open, Pace::Relayed, now));
        assert!(!too_soon(&open, Pace::Now, now), "the turn's end");
        let later = now + jiff::SignedDuration::try_from(ASK_EDIT_INTERVAL).unwrap();
        assert!(!too_soon(&open, Pace::Relayed, later));
    }

    #[test]
    fn a_reply_closes_chooses_or_answers_freely() {
        let ask = decision();
        let read = |text| {
            let s = Settled::read(&ask, "carol", Channel::Forge, text).unwrap();
            (s.closed, s.option, s.text)
        };
        assert_eq!(read("close"), (true, None, String::new()));
        assert_eq!(
            read("2: we run MySQL"),
            (false, Some(2), "we run MySQL".into())
        );
        assert_eq!(read("PG"), (false, Some(1), String::new()));
        assert_eq!(read("3"), (false, None, "3".into()));
        assert_eq!(
            read("neither, use sqlite"),
            (false, None, "neither, use sqlite".into())
        );
    }

    #[test]
    fn an_answer_is_recorded_as_told_once() {
        let mut state = WorkState::new("issue-1", "b", "a");
        state.tell = Some(Telling {
            key: "k".into(),
            prompt: "p".into(),
            telling: true,
        });
        told(&mut state);
        assert_eq!(
            (state.tell.clone(), state.told.clone()),
            (None, vec!["k".to_string()])
        );
        told(&mut state);
        assert_eq!(state.told, vec!["k".to_string()]);
    }

    #[test]
    fn a_reply_that_is_empty_does_not_count() {
        assert_eq!(
            decision().read("carol", " \n "),
            Err("it is empty".to_string())
        );
        assert_eq!(decision().read("carol", " 1 ").unwrap().option, Some(1));
    }
}
