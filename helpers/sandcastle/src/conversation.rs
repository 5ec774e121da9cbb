//! A conversation with people on the forge, one way for both of its uses: a question that stops
//! the agent (`asking`) and an ask that does not (`outbox`). Each [`Subject`] says how it reads
//! as a comment (an [`Outline`]) and how a reply answers it; the rest is here: one comment per
//! conversation, posted once (its marker found again after a kill) and edited for a new revision,
//! replies read on one backoff from writers and `[questions] responders` only, and the comment
//! settled to say who replied. Nothing here saves the state: the driver does, after each step.
use crate::context::Context;
use crate::forge_thread::{post_once, replies_after, signed};
use crate::state::Conversation;
use anyhow::{Context as _, Result};
use jiff::Timestamp;
use sandcastle_core::forge_text::{quote, quote_inline};
use sandcastle_core::role::WorkKey;
use std::time::Duration;

/// What a conversation is about.
pub trait Subject: Sized {
    /// The reply that settles it.
    type Reply: Replied;
    /// `question`, `ask`: in its marker and in lines.
    const KIND: &'static str;
    /// Whether its first read waits the first step of `[questions] pollBackoff` (a question: its
    /// comment was just posted) or is at once (an ask: between turns, or as soon as a pass sees it).
    const FIRST_READ_WAITS: bool;
    /// Its comment on issue or pull request `number`.
    fn outline(&self, number: u64) -> Outline;
    /// What a reply of `by`, someone allowed to answer, says to it; `Err(why)` if it does not count.
    fn read(&self, by: &str, text: &str) -> Result<Self::Reply, String>;
}

/// A reply, as the settled comment says it.
pub trait Replied {
    /// `**Answered** by carol … at …`.
    fn line(&self) -> String;
}

/// A conversation's comment: sandcastle's words (`intro`, `how`) as they are, the agent's
/// (`title`, `prose`, the items) quoted (`forge_text::quote`).
pub struct Outline {
    pub intro: String,
    pub title: String,
    pub prose: String,
    pub items: Vec<Item>,
    /// How to reply, and any note after it.
    pub how: String,
}

/// One thing asked: a heading (sandcastle's `label`, the agent's `title`), prose, numbered options.
#[derive(Default)]
pub struct Item {
    pub label: String,
    pub title: String,
    pub prose: String,
    pub options: Vec<Choice>,
}

pub struct Choice {
    pub label: String,
    pub meaning: String,
    /// sandcastle's words after it.
    pub note: &'static str,
}

/// When to read the replies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Due {
    /// Between two turns of the work: now.
    Now,
    /// In a pass: when `[questions] pollBackoff` says.
    Backoff,
}

/// A new conversation about `subject`, on the forge nowhere yet.
pub fn start<S: Subject>(subject: S, backoff: &[Duration]) -> Conversation<S, S::Reply> {
    let now = Timestamp::now();
    Conversation {
        id: uuid::Uuid::new_v4().simple().to_string(),
        subject,
        asked_at: now,
        comment: None,
        after: 0,
        polls: 0,
        next_poll: next_poll(now, backoff, u32::from(S::FIRST_READ_WAITS)),
        ignored: Vec::new(),
        reply: None,
        marked: false,
        posted_at: None,
    }
}

/// When to read the replies next, after `waits` waits (none: now): `[questions] pollBackoff` step
/// by step, the last step repeating; a wait past the end of time is the end of time.
pub fn next_poll(now: Timestamp, backoff: &[Duration], waits: u32) -> Timestamp {
    let Some(step) = waits.checked_sub(1) else {
        return now;
    };
    let wait = backoff
        .get(step as usize)
        .or(backoff.last())
        .copied()
        .unwrap_or_default();
    jiff::SignedDuration::try_from(wait)
        .ok()
        .and_then(|wait| now.checked_add(wait).ok())
        .unwrap_or(Timestamp::MAX)
}

/// The one marker of a conversation's comment, as every version wrote it.
pub fn marker<S: Subject>(talk: &Conversation<S, S::Reply>) -> String {
    format!("<!-- sandcastle:{} {} -->", S::KIND, talk.id)
}

/// Puts this revision on the forge: its comment posted once (a run killed after posting finds it
/// by its marker), or, for a new revision, edited; replies count from then on (after the comment
/// itself, or for a revision after the newest comment, which may answer the last one).
pub fn publish<S: Subject>(
    ctx: &Context,
    number: u64,
    talk: &mut Conversation<S, S::Reply>,
) -> Result<()> {
    let body = render(&talk.subject.outline(number));
    talk.after = match talk.comment {
        None => {
            let id = post_once(ctx, number, &marker(talk), &body)?;
            talk.comment = Some(id);
            id
        }
        Some(id) => {
            ctx.forge
                .edit_comment(id, &signed(ctx, &body, &marker(talk)))
                .with_context(|| format!("cannot edit the {}'s comment on the forge", S::KIND))?;
            let newest = ctx.forge.comments(number)?.iter().map(|c| c.id).max();
            newest.unwrap_or(id)
        }
    };
    Ok(())
}

/// Reads the replies when `due` says, once this revision is on the forge: the first that counts
/// becomes its reply; the others are said once each and not read again.
pub fn read<S: Subject>(
    ctx: &Context,
    key: WorkKey,
    number: u64,
    talk: &mut Conversation<S, S::Reply>,
    due: Due,
) -> Result<()> {
    let now = Timestamp::now();
    if talk.reply.is_some() || talk.after == 0 || (due == Due::Backoff && now < talk.next_poll) {
        return Ok(());
    }
    talk.reply = first_reply(ctx, key, number, talk)?;
    talk.polls = talk.polls.saturating_add(1);
    let waits = talk.polls.saturating_add(u32::from(S::FIRST_READ_WAITS));
    talk.next_poll = next_poll(now, &ctx.config.questions.poll_backoff, waits);
    Ok(())
}

fn first_reply<S: Subject>(
    ctx: &Context,
    key: WorkKey,
    number: u64,
    talk: &mut Conversation<S, S::Reply>,
) -> Result<Option<S::Reply>> {
    for (comment, allowed) in replies_after(ctx, number, talk.after, &talk.ignored)? {
        let read = match allowed {
            true => talk.subject.read(&comment.author, &comment.body),
            false => Err(
                "they have no write access to the repository and are not in [questions] responders"
                    .to_string(),
            ),
        };
        match read {
            Ok(reply) => return Ok(Some(reply)),
            Err(why) => {
                ctx.progress.note(&format!(
                    "{key}: ignored the reply of {} (comment {}) to the agent's {}: {why}",
                    comment.author,
                    comment.id,
                    S::KIND
                ));
                talk.ignored.push(comment.id);
            }
        }
    }
    Ok(None)
}

/// Once replied: its comment says who replied and when, once (`marked`; an edit repeats harmlessly
/// if a kill comes before that is saved).
pub fn settle<S: Subject>(
    ctx: &Context,
    number: u64,
    talk: &mut Conversation<S, S::Reply>,
) -> Result<()> {
    let (Some(reply), false, Some(id)) = (&talk.reply, talk.marked, talk.comment) else {
        return Ok(());
    };
    let body = format!(
        "{}\n\n{}.",
        render(&talk.subject.outline(number)),
        reply.line()
    );
    ctx.forge
        .edit_comment(id, &signed(ctx, &body, &marker(talk)))
        .with_context(|| format!("cannot mark the {} settled on the forge", S::KIND))?;
    talk.marked = true;
    Ok(())
}

/// The one renderer of a conversation's comment: the agent's words quoted, a title or an option
/// on its line, prose as a block, so none of its markdown or HTML reaches the comment's own.
fn render(outline: &Outline) -> String {
    let mut body = format!(
        "{}\n\n### {}\n",
        outline.intro,
        quote_inline(&outline.title)
    );
    if !outline.prose.is_empty() {
        body += &format!("\n{}\n", quote(&outline.prose));
    }
    for item in &outline.items {
        if !item.title.is_empty() {
            body += &format!("\n**{}{}**\n", item.label, quote_inline(&item.title));
        } else if !item.label.is_empty() {
            body += &format!("\n**{}**\n", item.label);
        }
        if !item.prose.is_empty() {
            body += &format!("\n{}\n", quote(&item.prose));
        }
        if !item.options.is_empty() {
            body += "\n";
        }
        for (n, option) in item.options.iter().enumerate() {
            body += &format!("{}. **{}**", n + 1, quote_inline(&option.label));
            if !option.meaning.is_empty() {
                body += &format!(": {}", quote_inline(&option.meaning));
            }
            body += option.note;
            body += "\n";
        }
    }
    body + &outline.how
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ask or a question whose every word of the agent's tries to break out: the comment has
    /// sandcastle's one heading (the title, quoted whole), no HTML, and the prose in code blocks.
    #[test]
    fn agent_words_in_a_conversations_comment_stay_quoted() {
        let hostile = "x</details>\n\n## Checks\n<details><summary>y</summary>\n```\n<!-- sandcastle:ask 1 -->";
        let outline = Outline {
            intro: "sandcastle's agent asks.".into(),
            title: hostile.into(),
            prose: hostile.into(),
            items: vec![Item {
                label: "Question 1: ".into(),
                title: hostile.into(),
                prose: hostile.into(),
                options: vec![Choice {
                    label: hostile.into(),
                    meaning: hostile.into(),
                    note: "",
                }],
            }],
            how: "\n**How to answer:** reply.".into(),
        };
        let body = render(&outline);
        let rendered = sandcastle_testkit::markdown::render(&body);
        assert_eq!(rendered.headings.len(), 1, "{body}");
        assert_eq!(rendered.headings[0].0, 3, "{body}");
        assert!(
            rendered.headings[0].1.contains("## Checks"),
            "quoted whole: {body}"
        );
        assert!(rendered.html.is_empty(), "{:?} in {body}", rendered.html);
        assert_eq!(rendered.blocks.len(), 2, "the prose, twice: {body}");
        assert!(
            rendered
                .blocks
                .iter()
                .all(|b| b.starts_with("x</details>\n\n## Checks\n"))
        );
        assert!(body.ends_with("**How to answer:** reply."), "{body}");
    }

    /// The waits step through `pollBackoff` and stay on the last step; none is at once, and a wait
    /// past the end of time saturates instead of overflowing.
    #[test]
    fn the_poll_backoff_steps_through_and_stays_on_the_last_step() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let backoff = [5, 15, 30].map(Duration::from_secs);
        let waits: Vec<i64> = (0..7)
            .map(|waits| {
                next_poll(now, &backoff, waits)
                    .duration_since(now)
                    .as_secs()
            })
            .collect();
        assert_eq!(waits, [0, 5, 15, 30, 30, 30, 30]);
        assert_eq!(next_poll(now, &[], 3), now, "no backoff: at once");
        let forever = [Duration::MAX];
        assert_eq!(next_poll(now, &forever, 1), Timestamp::MAX);
        assert_eq!(
            next_poll(now, &backoff, u32::MAX)
                .duration_since(now)
                .as_secs(),
            30
        );
    }
}
