//! Which issues to work on now: the candidates, and the planner agent's choice among them.
use crate::agent::AgentOutcome;
use crate::context::Context;
use crate::forge::{Issue, Pull};
use crate::git;
use crate::plan::{self, PlannedIssue, branch_for};
use crate::prompts;
use crate::role::{self, LazySandbox, Turn, Work};
use anyhow::{Context as _, Result, bail};

/// Open issues labelled `ready-for-agent`, not `epic` or `needs-info`, with no open pull request
/// (`sandcastle/issue-N`, or one that says `Closes #N`), and not in `skip`.
pub fn candidates(ctx: &Context, open_pulls: &[Pull], skip: &[u64]) -> Result<Vec<Issue>> {
    let issues = ctx.forge.open_issues(&["ready-for-agent"])?;
    Ok(issues
        .into_iter()
        .filter(|issue| {
            !issue
                .labels
                .iter()
                .any(|l| l == "epic" || l == "needs-info")
        })
        .filter(|issue| !has_open_pull(issue.number, open_pulls))
        .filter(|issue| !skip.contains(&issue.number))
        .collect())
}

/// Open pull requests a human sent back for rework (labelled `ready-for-agent`), not in `skip`.
pub fn sent_back<'a>(pulls: &'a [Pull], skip: &'a [u64]) -> impl Iterator<Item = &'a Pull> {
    pulls.iter().filter(move |p| {
        p.labels.iter().any(|l| l == "ready-for-agent") && !skip.contains(&p.number)
    })
}

/// A pull request on the issue's branch, or one that says it closes the issue.
fn has_open_pull(issue: u64, pulls: &[Pull]) -> bool {
    let branch = branch_for(issue);
    let closes = format!("closes #{issue}");
    pulls.iter().any(|p| {
        let body = p.body.to_lowercase();
        p.head_branch == branch
            || body
                .match_indices(&closes)
                .any(|(at, _)| !body[at + closes.len()..].starts_with(|c: char| c.is_ascii_digit()))
    })
}

/// The planner agent's choice: at most `maxConcurrency` independent issues. An invalid answer gets
/// one correction turn in the same session; a second invalid answer fails the pass.
pub fn plan(ctx: &Context, candidates: &[Issue], base: &str) -> Result<Vec<PlannedIssue>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<u64> = candidates.iter().map(|i| i.number).collect();
    let max = ctx.config.max_concurrency as usize;
    let listing = serde_json::to_string_pretty(
        &candidates
            .iter()
            .map(|i| serde_json::json!({"id": i.number, "title": i.title, "body": i.body, "labels": i.labels}))
            .collect::<Vec<_>>(),
    )?;
    let max_text = max.to_string();
    let prompt = prompts::render(
        &ctx.project,
        "plan",
        &[
            ("REPO", &ctx.config.repo),
            ("FORGE_HOST", &ctx.config.forge_host),
            ("ISSUES", &listing),
            ("MAX_CONCURRENCY", &max_text),
        ],
    )?;
    let slug = "planner";
    let checkout =
        git::prepare_checkout(&ctx.checkout_dir(slug), &ctx.remote, &ctx.creds, base, base)?;
    let log_dir = ctx.work_log_dir(slug);
    let work = Work {
        key: "plan",
        lane: "plan",
        log_dir: &log_dir,
    };
    let mut sandbox = LazySandbox::new(ctx, slug, &checkout);
    let model = &ctx.config.models.planner;
    let turn = Turn {
        role: "planner",
        model,
        prompt: &prompt,
        resume: None,
        iteration: 1,
        max_iterations: 1,
    };
    let first = role::run_turn(ctx, sandbox.get()?, &work, &turn).context("the planner failed")?;
    let error = match plan::parse(&first.result_text, &ids, max) {
        Ok(plan) => return Ok(finish(ctx, plan)),
        Err(e) => e,
    };
    ctx.progress.note(&format!(
        "plan: the planner's answer was invalid ({error:#}); asking once more"
    ));
    let correction = correction_prompt(&error, &ids, max);
    let session = first.session.as_ref();
    let retry = Turn {
        resume: session,
        prompt: &correction,
        iteration: 2,
        max_iterations: 2,
        ..turn
    };
    let second: AgentOutcome =
        role::run_turn(ctx, sandbox.get()?, &work, &retry).context("the planner failed")?;
    match plan::parse(&second.result_text, &ids, max) {
        Ok(plan) => Ok(finish(ctx, plan)),
        Err(e) => {
            ctx.report.set_outcome("plan", "invalid plan");
            bail!(
                "the planner answered an invalid plan twice: {e:#} (transcripts in {})",
                log_dir.display()
            )
        }
    }
}

fn finish(ctx: &Context, plan: Vec<PlannedIssue>) -> Vec<PlannedIssue> {
    let ids: Vec<String> = plan.iter().map(|p| format!("#{}", p.id)).collect();
    let outcome = if ids.is_empty() {
        "nothing to do now".to_string()
    } else {
        format!("chose {}", ids.join(", "))
    };
    ctx.report.set_outcome("plan", &outcome);
    ctx.progress.finish("plan", &outcome);
    plan
}

fn correction_prompt(error: &anyhow::Error, ids: &[u64], max: usize) -> String {
    format!(
        "Your answer could not be used: {error:#}.\n\nAnswer again with exactly one block \
         <plan>{{\"issues\":[{{\"id\":N,\"title\":\"…\",\"branch\":\"sandcastle/issue-N\"}}]}}</plan> \
         choosing at most {max} of the issues {ids:?}, each with the branch sandcastle/issue-<id>, \
         or <plan>{{\"issues\":[]}}</plan> if none should be worked on now."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(branch: &str, body: &str) -> Pull {
        Pull {
            number: 9,
            title: "t".into(),
            body: body.into(),
            head_branch: branch.into(),
            labels: vec![],
        }
    }

    #[test]
    fn an_issue_with_an_open_pull_request_is_no_candidate() {
        assert!(has_open_pull(4, &[pull("sandcastle/issue-4", "")]));
        assert!(has_open_pull(
            4,
            &[pull("feature", "Fixes things.\n\nCloses #4")]
        ));
        assert!(!has_open_pull(4, &[pull("feature", "Closes #42")]));
        assert!(!has_open_pull(4, &[pull("sandcastle/issue-41", "")]));
    }
}
