//! An agent's ask that does not stop it (`sandcastle ask`), from the orchestrator's side: taken out
//! of the sandbox's outbox after each turn (bytes only, checked again), published on the forge (one
//! comment per piece of work, edited for each new revision), its replies read from writers, and the
//! answer told to the working agent as its next prompt, exactly once.
//!
//! Exactly once: a settled ask becomes a [`Telling`] keyed by the ask and the moment it was
//! settled; the "telling" mark is saved before the turn that carries it and the key is recorded in
//! `told` once that turn's session is saved. A kill in between tells it again in the retried turn,
//! whose resumed session never saw it; a key in `told` is never told again.
use crate::asking::{escape, next_poll, replies_after};
use crate::context::Context;
use crate::prompts;
use crate::publish::{self, post_once};
use crate::report::Asked;
use crate::state::{Phase, WorkState};
use anyhow::{Context as _, Result};
use jiff::Timestamp;
use sandcastle_core::ask::{self, Ask, Kind, MAX_ASK_BYTES};
use sandcastle_core::forge::Pull;
use sandcastle_core::forge_text::Post;
use sandcastle_core::role::WorkKey;
use sandcastle_core::sandbox::Sandbox;
use serde::{Deserialize, Serialize};

/// Prints the outbox if it is a regular file, nothing if there is none.
const PRINT_OUTBOX: &str = r#"if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit 0; fi
if [ -L "$1" ] || [ ! -f "$1" ]; then echo "the outbox is not a regular file" >&2; exit 3; fi
exec cat -- "$1""#;

/// The agent's latest ask on this work, as published.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAsk {
    /// Marks the forge comment, which every revision reuses.
    pub id: String,
    pub ask: Ask,
    /// When this revision was taken out of the sandbox.
    pub taken_at: Timestamp,
    /// The forge comment showing it, once posted.
    pub comment: Option<i64>,
    /// Replies count only after this comment (the newest when this revision was published).
    pub after: i64,
    pub polls: u32,
    pub next_poll: Timestamp,
    /// Replies that did not count, each said once.
    pub ignored: Vec<i64>,
    /// The first reply that counted.
    pub settled: Option<Settled>,
    /// The forge comment says it was settled.
    pub marked: bool,
}

/// How a person settled an ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settled {
    pub by: String,
    pub at: Timestamp,
    /// They replied `close`: no answer.
    pub closed: bool,
    /// The option of a decision they chose (from 1).
    pub option: Option<usize>,
    pub text: String,
}

/// An answer to tell the working agent in its next turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Telling {
    /// The ask and the moment it was settled.
    pub key: String,
    pub prompt: String,
    /// Saved before the turn that tells it.
    pub telling: bool,
}

/// The variables every `docker exec` of this work's sandbox gets, so `sandcastle ask` knows its
/// work and goes on from the revision the orchestrator last took.
pub fn sandbox_env(key: WorkKey, state: &WorkState) -> [(String, String); 2] {
    let revision = state.ask.as_ref().map_or(0, |open| open.ask.revision);
    [
        (ask::KEY_VAR.to_string(), ask::key_text(key)),
        (ask::REVISION_VAR.to_string(), revision.to_string()),
    ]
}

/// The outbox's bytes, if the agent left an ask there (the `Sandboxed` seam's real side).
pub fn read(sandbox: &Sandbox, scratch: &std::path::Path) -> Result<Option<Vec<u8>>> {
    sandbox.read_out(
        &["sh", "-c", PRINT_OUTBOX, "sh", ask::OUTBOX],
        scratch,
        MAX_ASK_BYTES,
    )?;
    let bytes =
        std::fs::read(scratch).with_context(|| format!("cannot read {}", scratch.display()))?;
    Ok((!bytes.is_empty()).then_some(bytes))
}

/// After a turn: a new revision in the outbox is checked again, kept and published at once; a
/// refused one is said in one line and nothing is published.
pub fn take(
    ctx: &Context,
    key: WorkKey,
    state: &mut WorkState,
    handed: Result<Option<Vec<u8>>>,
) -> Result<()> {
    let refused = |state: &mut WorkState, why: String| -> Result<()> {
        // The outbox stays as it is until the agent writes it again: said once, not every turn.
        if state.refused_ask.as_ref() != Some(&why) {
            ctx.progress.note(&format!(
                "{key}: refused the agent's ask from its outbox: {why}; nothing published"
            ));
            state.refused_ask = Some(why);
            state.save(&ctx.state_dir())?;
        }
        Ok(())
    };
    let bytes = match handed {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(()),
        Err(e) => return refused(state, ctx.redactor.error(&e)),
    };
    let ask = match ask::from_outbox(&bytes, key) {
        Ok(ask) => ask,
        Err(why) => return refused(state, why),
    };
    state.refused_ask = None;
    let last = state.ask.as_ref().map_or(0, |open| open.ask.revision);
    if ask.revision <= last {
        return Ok(());
    }
    let now = Timestamp::now();
    let (id, comment) = match &state.ask {
        Some(open) => (open.id.clone(), open.comment),
        None => (uuid::Uuid::new_v4().simple().to_string(), None),
    };
    ctx.progress.note(&format!(
        "{key}: the agent asks ({}, revision {}) and goes on: {}",
        ask.kind.name(),
        ask.revision,
        ask.title
    ));
    state.ask = Some(OpenAsk {
        id,
        ask,
        taken_at: now,
        comment,
        after: 0,
        polls: 0,
        next_poll: now,
        ignored: Vec::new(),
        settled: None,
        marked: false,
    });
    let open = state.ask.as_ref().expect("just set");
    ctx.report.record_ask(&key.to_string(), asked(open));
    state.save(&ctx.state_dir())?;
    publish_pending(ctx, key, state)?;
    Ok(())
}

/// Publishes the ask if its revision is not on the forge yet (a run killed between taking and
/// publishing it publishes it now).
fn publish_pending(ctx: &Context, key: WorkKey, state: &mut WorkState) -> Result<()> {
    let Some(open) = state.ask.as_mut() else {
        return Ok(());
    };
    if open.after != 0 || open.settled.is_some() {
        return Ok(());
    }
    let number = key
        .number()
        .expect("asks come from issues and pull requests");
    publish(ctx, number, open)?;
    state.save(&ctx.state_dir())
}

/// The forge handler: one comment per piece of work, posted once and edited for each revision;
/// replies count from the newest comment on.
pub fn publish(ctx: &Context, number: u64, open: &mut OpenAsk) -> Result<()> {
    let body = ask_comment(&open.ask);
    match open.comment {
        None => open.comment = Some(post_once(ctx, number, &marker(open), &body)?),
        Some(id) => ctx
            .forge
            .edit_comment(id, &signed(ctx, open, &body))
            .context("cannot edit the ask's comment on the forge")?,
    }
    let newest = ctx.forge.comments(number)?.iter().map(|c| c.id).max();
    open.after = newest.or(open.comment).unwrap_or(1);
    Ok(())
}

/// The ask's revision as the run report keeps it: when it was taken and settled.
fn asked(open: &OpenAsk) -> Asked {
    Asked {
        id: format!("{}/{}", open.id, open.ask.revision),
        asked_at: open.taken_at,
        answered_at: open.settled.as_ref().map(|s| s.at),
    }
}

fn marker(open: &OpenAsk) -> String {
    format!("<!-- sandcastle:ask {} -->", open.id)
}

/// A body as `post_once` signs it.
fn signed(ctx: &Context, open: &OpenAsk, body: &str) -> Post {
    publish::signed(ctx, body, &marker(open))
}

/// When to read the forge for replies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// Between two turns of the work: now.
    Now,
    /// In a pass: when `[questions] pollBackoff` says.
    Backoff,
}

/// Reads the replies to an open ask; the first that counts settles it, and its answer is saved to
/// be told (before the forge's comment says so).
pub fn poll(ctx: &Context, key: WorkKey, state: &mut WorkState, due: Due) -> Result<()> {
    publish_pending(ctx, key, state)?;
    let Some(number) = key.number() else {
        return Ok(());
    };
    let Some(open) = state.ask.as_mut() else {
        return Ok(());
    };
    let now = Timestamp::now();
    if open.settled.is_none() && (due == Due::Now || now >= open.next_poll) {
        open.settled = reply(ctx, key, number, open)?;
        open.polls += 1;
        // The first read is at once (between turns, or as soon as a pass sees it): then the waits.
        open.next_poll = next_poll(now, &ctx.config.questions.poll_backoff, open.polls - 1);
        if let Some(settled) = &open.settled {
            ctx.report.record_ask(&key.to_string(), asked(open));
            let telling = Telling {
                key: format!("{}/{}@{}", open.id, open.ask.revision, settled.at),
                prompt: prompts::ask_answer(&open.ask, settled),
                telling: false,
            };
            let how = if settled.closed { "closed" } else { "answered" };
            ctx.progress.note(&format!(
                "{key}: {} {how} the agent's ask (revision {}); it is told in its next turn",
                settled.by, open.ask.revision
            ));
            if !state.told.contains(&telling.key) {
                state.tell = Some(telling);
            }
        }
        state.save(&ctx.state_dir())?;
    }
    let Some(open) = state.ask.as_mut() else {
        return Ok(());
    };
    if let (Some(settled), false, Some(id)) = (&open.settled, open.marked, open.comment) {
        let how = if settled.closed { "Closed" } else { "Answered" };
        let body = format!(
            "{}\n\n**{how}** by {} at {}.",
            ask_comment(&open.ask),
            settled.by,
            settled.at.strftime("%Y-%m-%d %H:%M:%S UTC")
        );
        ctx.forge
            .edit_comment(id, &signed(ctx, open, &body))
            .context("cannot mark the ask settled on the forge")?;
        open.marked = true;
        state.save(&ctx.state_dir())?;
    }
    Ok(())
}

/// The first reply after the ask's revision from a writer (or a configured responder), never the
/// orchestrator's own; others are ignored with one line each.
fn reply(ctx: &Context, key: WorkKey, number: u64, open: &mut OpenAsk) -> Result<Option<Settled>> {
    for (comment, allowed) in replies_after(ctx, number, open.after, &open.ignored)? {
        let text = comment.body.trim();
        if allowed && !text.is_empty() {
            return Ok(Some(read_reply(&open.ask, &comment.author, text)));
        }
        ctx.progress.note(&format!(
            "{key}: ignored the reply of {} (comment {}) to the agent's ask: {}",
            comment.author,
            comment.id,
            if allowed {
                "it is empty"
            } else {
                "they have no write access to the repository and are not in [questions] responders"
            }
        ));
        open.ignored.push(comment.id);
    }
    Ok(None)
}

/// `close` closes the ask; for a decision, an option's number or label (then `: why`) chooses it;
/// anything else is a free answer.
fn read_reply(ask: &Ask, by: &str, text: &str) -> Settled {
    let mut settled = Settled {
        by: by.to_string(),
        at: Timestamp::now(),
        closed: text.eq_ignore_ascii_case("close"),
        option: None,
        text: text.to_string(),
    };
    if settled.closed {
        settled.text.clear();
        return settled;
    }
    let (head, rest) = text.split_once(':').unwrap_or((text, ""));
    let head = head.trim();
    let chosen = ask
        .options
        .iter()
        .position(|o| o.label.eq_ignore_ascii_case(head));
    let numbered = head
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=ask.options.len()).contains(n));
    if let Some(option) = numbered.or(chosen.map(|i| i + 1)) {
        settled.option = Some(option);
        settled.text = rest.trim().to_string();
    }
    settled
}

/// The ask as a comment: agent text escaped (no HTML, no closing keywords), options numbered, and
/// how to reply.
fn ask_comment(ask: &Ask) -> String {
    let text = escape;
    let what = match ask.kind {
        Kind::Decision => "asks for a **decision**",
        Kind::Action => "asks a person to **act**",
        Kind::Ready => "says something is **ready** for a person",
        Kind::Blocked => "is **blocked** on part of the work",
    };
    let mut body = format!(
        "sandcastle's agent {what} and goes on working meanwhile.\n\n### {}\n",
        text(&ask.title)
    );
    if !ask.details.is_empty() {
        body += &format!("\n{}\n", text(&ask.details));
    }
    if !ask.options.is_empty() {
        body += "\n";
    }
    for (n, option) in ask.options.iter().enumerate() {
        body += &format!("{}. **{}**", n + 1, text(&option.label));
        if !option.meaning.is_empty() {
            body += &format!(": {}", text(&option.meaning));
        }
        if ask.recommended.as_ref() == Some(&option.label) {
            body += " (the agent's recommendation)";
        }
        body += "\n";
    }
    let forms = if ask.options.is_empty() {
        "your answer"
    } else {
        "an option's number or label (`1`, `2: because …`) or free text"
    };
    body += &format!(
        "\n**How to answer:** reply with {forms}, or `close` to close this ask without an answer. \
         Only replies from people with write access to this repository count; the answer reaches \
         the agent as its next prompt."
    );
    if ask.revision > 1 {
        body += &format!(
            "\n\n_Revision {}: it replaces the agent's earlier ask._",
            ask.revision
        );
    }
    body
}

/// Before a working turn: the answer to tell, if any, with the "telling" mark saved first.
pub fn telling(ctx: &Context, state: &mut WorkState) -> Result<Option<String>> {
    let Some(tell) = state.tell.as_mut() else {
        return Ok(None);
    };
    tell.telling = true;
    let prompt = tell.prompt.clone();
    state.save(&ctx.state_dir())?;
    Ok(Some(prompt))
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

/// A pass's look at every ask: the asks of closed work are let go; open ones are polled (with
/// backoff); an answer to published work is handed to a pr-fixer turn on its pull request, or let
/// go if that is closed. The pull requests to work on now.
pub fn pass(ctx: &Context) -> Result<Vec<Pull>> {
    let dir = ctx.state_dir();
    let mut pulls = Vec::new();
    for mut state in WorkState::with_asks(&dir)? {
        let Some(key) = WorkKey::from_slug(&state.slug) else {
            continue;
        };
        let number = key.number().expect("a work key");
        if !ctx.forge.is_open(number)? {
            let_go(ctx, key, &mut state, &format!("{key} is closed"))?;
            continue;
        }
        poll(ctx, key, &mut state, Due::Backoff)?;
        let Some(tell) = state.tell.clone() else {
            continue;
        };
        let published = match key {
            _ if state.phase != Phase::Done => None,
            WorkKey::Issue(_) => state.pull,
            _ => Some(number),
        };
        match published {
            Some(pull) if !ctx.forge.is_open(pull)? => {
                let why = format!("its pull request #{pull} is closed");
                let_go(ctx, key, &mut state, &why)?;
            }
            Some(pull) => {
                hand_over(ctx, pull, &tell)?;
                told(&mut state);
                state.save(&dir)?;
                pulls.push(ctx.forge.pull(pull)?);
            }
            None => {}
        }
    }
    Ok(pulls)
}

/// Closed work's open ask and untold answer are dropped, with one line.
fn let_go(ctx: &Context, key: WorkKey, state: &mut WorkState, why: &str) -> Result<()> {
    ctx.progress.note(&format!(
        "{key}: let go of the agent's ask and its answer: {why}"
    ));
    state.ask.take_if(|open| open.settled.is_none());
    told(state);
    state.save(&ctx.state_dir())
}

/// Published work's answer becomes the next prompt of a pr-fixer on its pull request: saved in
/// that work's state (once: its key is looked for) before the ask's own state lets it go.
fn hand_over(ctx: &Context, pull: u64, tell: &Telling) -> Result<()> {
    let dir = ctx.state_dir();
    let slug = WorkKey::Pull(pull).slug();
    let saved = WorkState::load(&dir, &slug)?;
    let known = |s: &WorkState| {
        s.told.contains(&tell.key) || s.tell.as_ref().is_some_and(|t| t.key == tell.key)
    };
    if saved.as_ref().is_some_and(known) {
        return Ok(());
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
        "pr #{pull}: the answer to the agent's ask starts a pr-fixer turn"
    ));
    state.tell = Some(Telling {
        telling: false,
        ..tell.clone()
    });
    state.save(&dir)
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

    #[test]
    fn a_reply_closes_chooses_or_answers_freely() {
        let ask = decision();
        let read = |text| {
            let s = read_reply(&ask, "carol", text);
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

    /// The agent controls its outbox: only a regular file within the size cap crosses, as bytes.
    #[test]
    fn only_a_regular_file_of_bounded_size_leaves_the_outbox() {
        use sandcastle_core::sandbox::test_support::{TestRun, docker_ready, exec, spec};
        if !docker_ready() {
            return;
        }
        let run = TestRun::new("outbox");
        let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
        let host = tempfile::tempdir().unwrap();
        let scratch = host.path().join("ask");
        assert_eq!(read(&sandbox, &scratch).unwrap(), None, "no ask");

        let dir = std::path::Path::new(ask::OUTBOX)
            .parent()
            .unwrap()
            .to_str()
            .unwrap();
        exec(&sandbox, &["mkdir", "-p", dir]);
        exec(&sandbox, &["ln", "-s", "/etc/passwd", ask::OUTBOX]);
        let err = read(&sandbox, &scratch).unwrap_err().to_string();
        assert!(err.contains("the outbox is not a regular file"), "{err}");

        exec(&sandbox, &["rm", ask::OUTBOX]);
        exec(&sandbox, &["mkdir", ask::OUTBOX]);
        assert!(read(&sandbox, &scratch).is_err(), "a directory is refused");

        exec(&sandbox, &["rmdir", ask::OUTBOX]);
        let big = format!("head -c {} /dev/zero > {}", MAX_ASK_BYTES + 1, ask::OUTBOX);
        exec(&sandbox, &["sh", "-c", &big]);
        let err = read(&sandbox, &scratch).unwrap_err().to_string();
        assert!(err.contains("more than 65536 bytes"), "{err}");

        exec(
            &sandbox,
            &["sh", "-c", &format!("echo '{{}}' > {}", ask::OUTBOX)],
        );
        assert_eq!(read(&sandbox, &scratch).unwrap(), Some(b"{}\n".to_vec()));
    }
}
