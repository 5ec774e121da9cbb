//! The comment thread of an issue or pull request, as sandcastle uses it: a comment posted once
//! (found again by its marker), the replies after a comment and whether their authors may answer,
//! and how far people have moved the thread ([`Revision`]).
use crate::context::Context;
use crate::state::Revision;
use anyhow::{Context as _, Result};
use sandcastle_core::forge::Comment;
use sandcastle_core::forge_text::Post;

/// Posts `body` with `marker` on `number`, unless a comment of sandcastle's already carries the
/// marker: a run stopped right after posting never posts it twice. The comment's id.
pub fn post_once(ctx: &Context, number: u64, marker: &str, body: &str) -> Result<i64> {
    let posted = ctx
        .forge
        .comments(number)?
        .into_iter()
        .find(|c| c.author == ctx.login && c.body.contains(marker));
    match posted {
        Some(comment) => Ok(comment.id),
        None => ctx
            .forge
            .comment(number, &signed(ctx, body, marker))
            .context("cannot comment on the forge"),
    }
}

/// `body` defused and signed by this orchestrator, with sandcastle's `marker` last.
pub fn signed(ctx: &Context, body: &str, marker: &str) -> Post {
    Post::new(&format!("{body}\n\n— sandcastle `{}`", ctx.id)).marked(marker)
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

/// Where people have taken issue or pull request `number` (see [`Revision`]).
pub fn revision(ctx: &Context, number: u64) -> Result<Revision> {
    let updated_at = ctx.forge.updated_at(number)?;
    Ok(revision_of(
        &ctx.login,
        &updated_at,
        &ctx.forge.comments(number)?,
    ))
}

/// The revision of a thread last updated at `updated_at` with `comments`: sandcastle's own
/// comments (`login`'s) do not count.
pub fn revision_of(login: &str, updated_at: &str, comments: &[Comment]) -> Revision {
    Revision {
        updated_at: updated_at.to_string(),
        comments: comments.iter().filter(|c| c.author != login).count() as u64,
    }
}
