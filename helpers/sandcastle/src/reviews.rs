//! What a pr-fixer is told of the review: the review bodies and inline comments that asked for
//! changes, from people with write access only.
use crate::context::Context;
use anyhow::Result;

/// The review bodies and inline comments that asked for changes, for the pr-fixer's prompt. Only
/// reviews by people with write access count; the others are left out with a line saying so.
pub fn for_pr_fixer(ctx: &Context, pull: u64) -> Result<String> {
    let mut text = String::new();
    let mut writers: Vec<(String, bool)> = Vec::new();
    for review in ctx.forge.reviews(pull)? {
        if !matches!(review.state.as_str(), "REQUEST_CHANGES" | "COMMENT") {
            continue;
        }
        let can_write = match writers.iter().find(|(login, _)| *login == review.author) {
            Some((_, can)) => *can,
            None => {
                let can = ctx.forge.can_write(&review.author)?;
                writers.push((review.author.clone(), can));
                can
            }
        };
        if !can_write {
            ctx.progress.note(&format!(
                "pull request #{pull}: left out the review by {}: no write access to {}",
                review.author, ctx.config.repo
            ));
            continue;
        }
        let comments = ctx.forge.review_comments(pull, review.id)?;
        if review.body.trim().is_empty() && comments.is_empty() {
            continue;
        }
        text += &format!(
            "### Review by {} ({})\n\n{}\n\n",
            review.author,
            review.state,
            review.body.trim()
        );
        for comment in comments {
            let at = match comment.line {
                Some(line) => format!("{}:{line}", comment.path),
                None => comment.path.clone(),
            };
            text += &format!("- `{at}` ({}): {}\n", comment.author, comment.body.trim());
        }
        text += "\n";
    }
    if text.is_empty() {
        text = "(No one with write access left written comments.)".to_string();
    }
    Ok(text)
}
