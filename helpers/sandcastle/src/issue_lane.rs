//! One issue from `ready-for-agent` to a pull request labelled `ready-for-human`: implementer, reviewer,
//! then the orchestrator pushes and updates the forge. Each phase is saved, so a stopped run resumes.
use crate::context::Context;
use crate::forge::Issue;
use crate::git::WorkRepo;
use crate::plan::branch_for;
use crate::role::{self, LazySandbox, Turn, Work};
use crate::state::{Outcome, Phase, WorkState};
use anyhow::{Context as _, Result};

pub fn work_on_issue(ctx: &Context, issue: &Issue, base: &str) -> Result<Outcome> {
    let slug = format!("issue-{}", issue.number);
    let key = format!("issue #{}", issue.number);
    let branch = branch_for(issue.number);
    let (mut state, repo) = role::begin(ctx, &key, &slug, &branch, base)?;
    let log_dir = ctx.work_log_dir(&slug);
    let work = Work {
        key: &key,
        lane: "implement",
        log_dir: &log_dir,
    };
    let number = issue.number.to_string();
    let max = ctx.config.max_iterations.to_string();
    // The review prompt takes these; the implement prompt also the iteration.
    let issue_vars = [
        ("ISSUE_NUMBER", number.as_str()),
        ("ISSUE_TITLE", issue.title.as_str()),
        ("ISSUE_BODY", issue.body.as_str()),
        ("BRANCH", branch.as_str()),
        ("BASE_BRANCH", base),
    ];

    let mut sandbox = LazySandbox::new(ctx, &slug, &repo);

    loop {
        match state.phase {
            Phase::Work => {
                let models = &ctx.config.models;
                let prompt = |iteration: u32| {
                    let iteration = iteration.to_string();
                    let mut vars = issue_vars.to_vec();
                    vars.extend([
                        ("ITERATION", iteration.as_str()),
                        ("MAX_ITERATIONS", max.as_str()),
                    ]);
                    ctx.prompt("implement", &vars)
                };
                let completed = role::iterate(
                    ctx,
                    &mut sandbox,
                    &work,
                    &mut state,
                    "implementer",
                    &models.implementer,
                    &prompt,
                )?;
                let made_commits = state.start_commit.as_deref() != Some(repo.tip()?.as_str());
                state.phase = match (completed, made_commits) {
                    (true, true) => Phase::Review,
                    (true, false) if !repo.new_commits()?.is_empty() => Phase::Publish,
                    (true, false) => {
                        state.last_summary = format!(
                            "The agent said it was done but committed nothing.\n\n{}",
                            state.last_summary
                        );
                        Phase::GaveUp
                    }
                    (false, _) => Phase::GaveUp,
                };
                state.save(&ctx.state_dir())?;
            }
            Phase::Review => {
                // The reviewer may tidy up with commits of its own; its verdict goes into the PR.
                let prompt = ctx.prompt("review", &issue_vars)?;
                let turn = Turn {
                    role: "reviewer",
                    model: &ctx.config.models.reviewer,
                    prompt: &prompt,
                    resume: None,
                    iteration: 1,
                    max_iterations: 1,
                };
                match role::run_turn(ctx, sandbox.get()?, &work, &turn) {
                    Ok(outcome) => {
                        if let Some(session) = outcome.session {
                            state.set_session("reviewer", session);
                        }
                    }
                    Err(e) => ctx.progress.note(&format!(
                        "{key}: the reviewer failed, publishing anyway: {}",
                        ctx.redactor.error(&e)
                    )),
                }
                sandbox.take_commits()?;
                state.phase = Phase::Publish;
                state.save(&ctx.state_dir())?;
            }
            Phase::Publish => {
                let number = publish(ctx, issue, &repo, base, &state.last_summary)?;
                state.pull = Some(number);
                state.phase = Phase::Done;
                state.save(&ctx.state_dir())?;
            }
            Phase::Done => return Ok(Outcome::PullRequest(state.pull.unwrap_or_default())),
            Phase::GaveUp => {
                give_up(ctx, issue.number, &mut state)?;
                return Ok(Outcome::GaveUp {
                    number: issue.number,
                    iterations: state.iterations,
                });
            }
        }
    }
}

/// Push, open (or reuse) the pull request, and move the labels. Every step is idempotent, so a
/// run stopped half-way publishes the same pull request again, never a second one. Only the
/// orchestrator's own first line closes the issue: the agent's summary has its keywords defused.
fn publish(
    ctx: &Context,
    issue: &Issue,
    repo: &WorkRepo,
    base: &str,
    summary: &str,
) -> Result<u64> {
    repo.push(&ctx.creds)?;
    let body = format!("Closes #{}\n\n{}", issue.number, ctx.agent_text(summary));
    let pull = ctx
        .forge
        .open_pull(&ctx.login, &repo.branch, base, &issue.title, &body)?;
    ctx.forge.add_labels(pull.number, &["ready-for-human"])?;
    ctx.forge.add_labels(issue.number, &["in-review"])?;
    ctx.forge.remove_label(issue.number, "ready-for-agent")?;
    Ok(pull.number)
}

/// One comment with the agent's last summary; the labels stay. The comment carries the attempt's
/// marker, so a run stopped right after posting it does not post it again.
pub fn give_up(ctx: &Context, number: u64, state: &mut WorkState) -> Result<()> {
    if !state.told_forge {
        let marker = format!("<!-- sandcastle:attempt {} -->", state.attempt);
        let posted = ctx
            .forge
            .comments(number)?
            .iter()
            .any(|c| c.author == ctx.login && c.body.contains(&marker));
        if !posted {
            let body = format!(
                "sandcastle did not complete this in {} iteration(s). The agent's last summary:\n\n{}\n\n{marker}",
                state.iterations,
                ctx.agent_text(&state.last_summary)
            );
            ctx.forge
                .comment(number, &body)
                .context("cannot comment on the forge")?;
        }
        state.told_forge = true;
        state.save(&ctx.state_dir())?;
    }
    Ok(())
}
