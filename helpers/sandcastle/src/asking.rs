//! An agent's question to a person, from the orchestrator's side: asked once on the forge (a comment
//! and the `needs-info` label), its comments read with backoff until a writer (or a configured
//! responder) answers, or until `sandcastle answer` does; the answer saved before it is delivered;
//! the timeout said once. Every step is saved, so a run killed anywhere goes on where it was.
use crate::context::Context;
use crate::forge::Comment;
use crate::publish::post_once;
use crate::questions::{self, Questions, Reply};
use crate::state::{Answer, Channel, Waiting, WorkState};
use anyhow::{Context as _, Result};
use jiff::Timestamp;
use std::path::{Path, PathBuf};
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

/// A new question, asked nowhere yet.
pub fn waiting(questions: Questions, backoff: &[Duration]) -> Waiting {
    let now = Timestamp::now();
    Waiting {
        id: uuid::Uuid::new_v4().simple().to_string(),
        questions,
        asked_at: now,
        channels: vec![Channel::Forge],
        comment: None,
        polls: 0,
        next_poll: after(now, backoff, 0),
        ignored: Vec::new(),
        timed_out: false,
        answer: None,
    }
}

fn after(now: Timestamp, backoff: &[Duration], polls: u32) -> Timestamp {
    let wait = backoff
        .get(polls as usize)
        .or(backoff.last())
        .copied()
        .unwrap_or_default();
    now + jiff::SignedDuration::try_from(wait).unwrap_or(jiff::SignedDuration::MAX)
}

/// Asks on the forge: one comment (never twice) and `needs-info`.
pub fn ask(ctx: &Context, number: u64, state: &mut WorkState) -> Result<()> {
    let Some(waiting) = state.waiting.as_mut() else {
        return Ok(());
    };
    if waiting.comment.is_none() {
        let body = question_comment(ctx, number, &waiting.questions);
        let id = post_once(ctx, number, &marker(waiting), &body)?;
        waiting.comment = Some(id);
        ctx.progress.note(&format!(
            "issue #{number}: the agent asked a person; waiting for an answer on the forge or `sandcastle answer {number} …`"
        ));
        state.save(&ctx.state_dir())?;
    }
    ctx.forge.add_labels(number, &["needs-info"])
}

fn marker(waiting: &Waiting) -> String {
    format!("<!-- sandcastle:question {} -->", waiting.id)
}

/// Looks for the answer: a local one from `sandcastle answer` at once, the forge's comments when
/// the backoff says; then the timeout. An answer is saved before anything else happens with it.
pub fn poll(ctx: &Context, number: u64, state: &mut WorkState) -> Result<Poll> {
    if state.waiting.as_ref().is_some_and(|w| w.comment.is_none()) {
        ask(ctx, number, state)?;
    }
    let Some(waiting) = state.waiting.as_mut() else {
        return Ok(Poll::Pending);
    };
    let now = Timestamp::now();
    let local = local_answer_path(&ctx.project, number);
    if waiting.answer.is_none() {
        waiting.answer = read_local_answer(&local)?;
    }
    if waiting.answer.is_none() && now >= waiting.next_poll {
        waiting.answer = forge_answer(ctx, number, waiting)?;
        waiting.polls += 1;
        waiting.next_poll = after(now, &ctx.config.questions.poll_backoff, waiting.polls);
    }
    if let Some(answer) = waiting.answer.clone() {
        state.save(&ctx.state_dir())?;
        let waiting = state.waiting.as_ref().expect("just read");
        settle_forge(ctx, number, waiting, &answer)?;
        remove_if_present(&local)?;
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

/// The first reply after the question from someone allowed to answer that answers every question.
/// Others are ignored with one line each.
fn forge_answer(ctx: &Context, number: u64, waiting: &mut Waiting) -> Result<Option<Answer>> {
    let Some(asked) = waiting.comment else {
        return Ok(None);
    };
    for (comment, allowed) in replies_after(ctx, number, asked, &waiting.ignored)? {
        let verdict = if allowed {
            questions::read_reply(&waiting.questions, &comment.body)
        } else {
            Err(
                "they have no write access to the repository and are not in [questions] responders"
                    .to_string(),
            )
        };
        match verdict {
            Ok(replies) => {
                return Ok(Some(Answer {
                    by: comment.author,
                    channel: Channel::Forge,
                    at: Timestamp::now(),
                    replies,
                }));
            }
            Err(why) => {
                ctx.progress.note(&format!(
                    "issue #{number}: ignored the reply of {} (comment {}): {why}",
                    comment.author, comment.id
                ));
                waiting.ignored.push(comment.id);
            }
        }
    }
    Ok(None)
}

/// The comments on `number` after comment `after` that are not the orchestrator's own or in
/// `ignored`, each with whether its author may answer: write access to the repository (the
/// forge's permission API) or a place in `[questions] responders`.
pub fn replies_after(
    ctx: &Context,
    number: u64,
    after: i64,
    ignored: &[i64],
) -> Result<Vec<(Comment, bool)>> {
    let mut replies = Vec::new();
    for comment in ctx.forge.comments(number)? {
        if comment.id <= after || comment.author == ctx.login || ignored.contains(&comment.id) {
            continue;
        }
        let allowed = ctx.config.questions.responders.contains(&comment.author)
            || ctx.forge.can_write(&comment.author)?;
        replies.push((comment, allowed));
    }
    Ok(replies)
}

/// The question comment says who answered, through which channel and when; `needs-info` goes.
/// Both steps repeat harmlessly.
fn settle_forge(ctx: &Context, number: u64, waiting: &Waiting, answer: &Answer) -> Result<()> {
    if let Some(id) = waiting.comment {
        let body = format!(
            "{}\n\n**Answered** by {} through {} at {}.\n\n{}",
            question_comment(ctx, number, &waiting.questions),
            answer.by,
            answer.channel,
            answer.at.strftime("%Y-%m-%d %H:%M:%S UTC"),
            marker(waiting)
        );
        ctx.forge
            .edit_comment(id, &body)
            .context("cannot mark the question answered on the forge")?;
    }
    ctx.forge.remove_label(number, "needs-info")
}

/// The questions as a comment: agent text escaped (no HTML, no closing keywords), options
/// numbered, and how to reply.
fn question_comment(ctx: &Context, number: u64, questions: &Questions) -> String {
    let text = |s: &str| escape(&ctx.agent_text(s));
    let mut body = format!(
        "sandcastle's agent has a question before it goes on with this issue.\n\n### {}\n",
        text(&questions.title)
    );
    if !questions.prose.is_empty() {
        body += &format!("\n{}\n", text(&questions.prose));
    }
    for (index, question) in questions.items.iter().enumerate() {
        body += &format!("\n**Question {}: {}**\n", index + 1, text(&question.title));
        if !question.prose.is_empty() {
            body += &format!("\n{}\n", text(&question.prose));
        }
        if !question.options.is_empty() {
            body += "\n";
        }
        for (n, option) in question.options.iter().enumerate() {
            body += &format!("{}. **{}**", n + 1, text(&option.title));
            if !option.prose.is_empty() {
                body += &format!(": {}", text(&option.prose));
            }
            body += "\n";
        }
    }
    let forms = "an option's number (`1`), a number and a reason (`2: because …`), or free text";
    body += &if questions.items.len() == 1 {
        format!("\n**How to answer:** reply with a comment holding {forms}.")
    } else {
        format!(
            "\n**How to answer:** reply with a comment of one line per question, in order, each {forms}."
        )
    };
    body += &format!(
        " Only replies from people with write access to this repository count. On the maintainer's \
         machine, `sandcastle answer {number} <text>` answers too."
    );
    body
}

/// No HTML from agent text reaches the forge.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where `sandcastle answer` leaves an answer for the run to take up.
pub fn local_answer_path(project: &Path, number: u64) -> PathBuf {
    project
        .join(".sandcastle/logs/answers")
        .join(format!("issue-{number}.json"))
}

fn read_local_answer(path: &Path) -> Result<Option<Answer>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).with_context(|| {
            format!(
                "{} is not an answer: delete it and answer again",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// `sandcastle answer`: checks `text` against the waiting questions (`Ok(Err(why))` when it does
/// not answer them) and leaves the answer for the run, atomically, so a run never reads half of it.
pub fn answer_locally(
    project: &Path,
    waiting: &Waiting,
    number: u64,
    text: &str,
) -> Result<Result<Vec<Reply>, String>> {
    let replies = match questions::read_reply(&waiting.questions, text) {
        Ok(replies) => replies,
        Err(why) => return Ok(Err(why)),
    };
    let by = std::env::var("USER").unwrap_or_else(|_| "the local maintainer".to_string());
    let answer = Answer {
        by: format!("{by} (local maintainer)"),
        channel: Channel::CommandLine,
        at: Timestamp::now(),
        replies: replies.clone(),
    };
    let path = local_answer_path(project, number);
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(path.parent().expect("a directory"))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&answer)?)?;
        std::fs::rename(&tmp, &path)
    };
    write().with_context(|| format!("cannot write {}", path.display()))?;
    Ok(Ok(replies))
}
