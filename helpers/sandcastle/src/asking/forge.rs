//! The `forge` handler: the question as one comment on the issue (never posted twice), replies
//! read from the comments (writers and `[questions] responders` only), and the comment
//! edited to say who answered, through which channel and when.
use crate::context::Context;
use crate::publish::post_once;
use crate::state::{Answer, Channel, Waiting};
use anyhow::{Context as _, Result};
use jiff::Timestamp;
use sandcastle_core::forge::Comment;
use sandcastle_core::forge_text::Post;
use sandcastle_core::questions::{self, Questions};

/// Posts the question comment unless this question has one.
pub fn ask(ctx: &Context, number: u64, waiting: &mut Waiting) -> Result<()> {
    if waiting.comment.is_none() {
        let body = comment(number, &waiting.questions);
        waiting.comment = Some(post_once(ctx, number, &marker(waiting), &body)?);
    }
    Ok(())
}

fn marker(waiting: &Waiting) -> String {
    format!("<!-- sandcastle:question {} -->", waiting.id)
}

/// The first reply after the question from someone allowed to answer that answers every question.
/// Others are ignored with one line each.
pub fn answer(ctx: &Context, number: u64, waiting: &mut Waiting) -> Result<Option<Answer>> {
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
                    "#{number}: ignored the reply of {} (comment {}): {why}",
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

/// The question comment, if there is one, says who answered, through which channel and when.
/// Repeats harmlessly.
pub fn settle(ctx: &Context, number: u64, waiting: &Waiting, answer: &Answer) -> Result<()> {
    let Some(id) = waiting.comment else {
        return Ok(());
    };
    let body = format!(
        "{}\n\n**Answered** by {} through {} at {}.\n",
        comment(number, &waiting.questions),
        escape(&answer.by),
        answer.channel,
        answer.at.strftime("%Y-%m-%d %H:%M:%S UTC"),
    );
    ctx.forge
        .edit_comment(id, &Post::new(&body).marked(&marker(waiting)))
        .context("cannot mark the question answered on the forge")
}

/// The questions as a comment: agent text escaped (no HTML, no closing keywords), options
/// numbered, and how to reply.
fn comment(number: u64, questions: &Questions) -> String {
    let text = escape;
    let mut body = format!(
        "sandcastle has a question before it goes on with this issue.\n\n### {}\n",
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
