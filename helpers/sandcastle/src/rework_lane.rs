//! A pull request a human sent back (`ready-for-agent` on the PR): the pr-fixer works on its branch
//! with the reviews in its prompt; the orchestrator pushes, relabels and says what changed.
use crate::context::Context;
use crate::forge::Pull;
use crate::issue_lane::give_up;
use crate::role::{self, LazySandbox, Work};
use crate::state::{Outcome, Phase};
use anyhow::Result;

pub fn rework_pull(ctx: &Context, pull: &Pull, base: &str) -> Result<Outcome> {
    let slug = format!("pr-{}", pull.number);
    let key = format!("pr #{}", pull.number);
    let branch = &pull.head_branch;
    let (mut state, repo) = role::begin(ctx, &key, &slug, branch, base)?;
    let log_dir = ctx.work_log_dir(&slug);
    let work = Work {
        key: &key,
        lane: "rework",
        log_dir: &log_dir,
    };
    let mut sandbox = LazySandbox::new(ctx, &slug, &repo);

    loop {
        match state.phase {
            Phase::Work => {
                let reviews = review_text(ctx, pull.number)?;
                let number = pull.number.to_string();
                let vars = [
                    ("PR_NUMBER", number.as_str()),
                    ("PR_TITLE", pull.title.as_str()),
                    ("BRANCH", branch.as_str()),
                    ("BASE_BRANCH", base),
                    ("REVIEWS", reviews.as_str()),
                ];
                let prompt = |_: u32| ctx.prompt("pr-fixer", &vars);
                let model = &ctx.config.models.pr_fixer;
                let completed = role::iterate(
                    ctx,
                    &mut sandbox,
                    &work,
                    &mut state,
                    "pr-fixer",
                    model,
                    &prompt,
                )?;
                state.phase = if completed {
                    Phase::Publish
                } else {
                    Phase::GaveUp
                };
                state.save(&ctx.state_dir())?;
            }
            // The rework lane has no review of its own: the human reviews again.
            Phase::Review | Phase::Publish => {
                let start = state.start_commit.clone().unwrap_or_default();
                let changes = repo.commits_since(&start)?;
                repo.push(&ctx.creds)?;
                let mut body = String::from("sandcastle addressed the review.\n\n");
                if changes.is_empty() {
                    body += "No new commits: the agent found nothing to change.\n";
                } else {
                    body += "New commits:\n";
                    for subject in &changes {
                        body += &format!("- {}\n", ctx.agent_text(subject));
                    }
                }
                body += &format!("\n{}", ctx.agent_text(&state.last_summary));
                ctx.forge.comment(pull.number, &body)?;
                ctx.forge.add_labels(pull.number, &["ready-for-human"])?;
                ctx.forge.remove_label(pull.number, "ready-for-agent")?;
                state.phase = Phase::Done;
                state.save(&ctx.state_dir())?;
            }
            Phase::Done => return Ok(Outcome::Reworked),
            Phase::GaveUp => {
                give_up(ctx, pull.number, &mut state)?;
                return Ok(Outcome::GaveUp {
                    number: pull.number,
                    iterations: state.iterations,
                });
            }
        }
    }
}

/// The review bodies and inline comments that asked for changes, for the pr-fixer's prompt. Only
/// reviews by people with write access count; the others are left out with a line saying so.
fn review_text(ctx: &Context, pull: u64) -> Result<String> {
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
                "pr #{pull}: left out the review by {}: no write access to {}",
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
