//! Which issues to work on now: the candidates, and the planner agent's choice among them.
use crate::context::Context;
use crate::forge_thread::revision_of;
use crate::seam::{Sandboxed, Turn};
use crate::state::WorkState;
use crate::work_sandbox::WorkSandbox;
use anyhow::{Context as _, Result, bail};
use sandcastle_core::agent::{AgentOutcome, Ending};
use sandcastle_core::claims;
use sandcastle_core::forge::{Issue, Pull};
use sandcastle_core::git::WorkRepo;
use sandcastle_core::plan::{self, PlanMemo, PlannedIssue, branch_for};
use sandcastle_core::role::{Role, WorkKey};

/// Open issues labelled `ready-for-agent`, not `epic` or `needs-info`, without an open pull request
/// of sandcastle's own, not given up on since a person last moved them, not waiting for a person's
/// answer, and not claimed by another orchestrator.
pub fn candidates(ctx: &Context, open_pulls: &[Pull], base: &str) -> Result<Vec<Issue>> {
    let issues: Vec<Issue> = ctx
        .forge
        .open_issues(&["ready-for-agent"])?
        .into_iter()
        .filter(|issue| {
            !issue
                .labels
                .iter()
                .any(|l| l == "epic" || l == "needs-info")
        })
        .filter(|issue| {
            !open_pulls
                .iter()
                .any(|p| own_issue(p, &ctx.login, &ctx.config.repo, base) == Ok(issue.number))
        })
        .collect();
    let mut free = Vec::new();
    for issue in issues {
        if is_free(ctx, WorkKey::Issue(issue.number), &issue.updated_at)? {
            free.push(issue);
        }
    }
    Ok(free)
}

/// Open pull requests a human sent back for rework (labelled `ready-for-agent`) that are
/// sandcastle's own, not given up on since a person last moved them, and not claimed by another
/// orchestrator. Every other one labelled so is left alone, with a line saying why.
pub fn sent_back<'a>(ctx: &Context, pulls: &'a [Pull], base: &str) -> Result<Vec<&'a Pull>> {
    let mut free = Vec::new();
    for pull in pulls
        .iter()
        .filter(|p| p.labels.iter().any(|l| l == "ready-for-agent"))
    {
        if let Err(why) = own_issue(pull, &ctx.login, &ctx.config.repo, base) {
            ctx.progress
                .note(&format!("pull request #{}: left alone: {why}", pull.number));
        } else if crate::green_record::in_progress(ctx, pull.number)?.is_some() {
            // A round keeping it green labelled it so; that lane goes on with it.
        } else if is_free(ctx, WorkKey::Pull(pull.number), &pull.updated_at)? {
            free.push(pull);
        }
    }
    Ok(free)
}

/// Whether sandcastle may take `key` up: no other orchestrator holds a live claim on it, and it was
/// not given up on at the revision it has now (nobody has commented, edited or relabelled it since,
/// so trying again would spend the same money on the same answer; saved, so restarts keep it).
fn is_free(ctx: &Context, key: WorkKey, updated_at: &str) -> Result<bool> {
    let Some(number) = key.number() else {
        return Ok(false);
    };
    let comments = ctx.forge.comments(number)?;
    if let Some(claim) = claims::held_by_other(&comments, &ctx.login, &ctx.id) {
        ctx.progress.note(&format!(
            "{key}: held by {} until {}",
            claim.holder, claim.until
        ));
        return Ok(false);
    }
    let revision = revision_of(&ctx.login, updated_at, &comments);
    let saved = WorkState::load(&ctx.state_dir(), &key.slug())?;
    // Waiting for a person (a clarification or an agent's question), even without `needs-info`.
    if saved
        .as_ref()
        .is_some_and(|state| state.waiting().is_some())
    {
        ctx.progress.note(&format!(
            "{key}: waits for an answer (`sandcastle questions`)"
        ));
        return Ok(false);
    }
    Ok(!saved.is_some_and(|state| state.settled_at(&revision)))
}

/// The issue a pull request is sandcastle's own work for: opened by `login` from `sandcastle/issue-N`
/// of `repo` itself (not a fork) into the default branch `base`. Otherwise, why not.
pub fn own_issue(pull: &Pull, login: &str, repo: &str, base: &str) -> Result<u64, String> {
    let from_here = pull
        .head_repo
        .as_deref()
        .is_some_and(|head| head.eq_ignore_ascii_case(repo));
    if !from_here {
        let head = pull.head_repo.as_deref().unwrap_or("a deleted repository");
        return Err(format!("its branch lives in {head}, not in {repo}"));
    }
    if pull.author != login {
        return Err(format!("opened by {}, not by {login}", pull.author));
    }
    let issue = pull
        .head_branch
        .strip_prefix("sandcastle/issue-")
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|n| branch_for(*n) == pull.head_branch)
        .ok_or_else(|| format!("its branch {} is not sandcastle/issue-N", pull.head_branch))?;
    if pull.base_branch != base {
        return Err(format!(
            "it merges into {}, not into the default branch {base}",
            pull.base_branch
        ));
    }
    Ok(issue)
}

/// The planner agent's choice: the issues to work on now, independent of each other, in order (the
/// pass works through them `maxConcurrency` at a time). An invalid answer gets one correction turn
/// in the same session; a second invalid answer fails the pass.
pub fn plan(ctx: &Context, candidates: &[Issue], base: &str) -> Result<Vec<PlannedIssue>> {
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let seen: Vec<(u64, String)> = candidates
        .iter()
        .map(|i| (i.number, i.updated_at.clone()))
        .collect();
    let mut memo = ctx.plan_memo.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(last) = memo.as_ref().filter(|m| m.candidates == seen) {
        // Nothing moved since the planner's last answer: asking again would cost the same for the
        // same answer.
        ctx.progress.note(match last.plan {
            Some(_) => "plan: the candidates have not changed since the last plan; it stands",
            None => "plan: the candidates have not changed since the planner's last invalid answers; waiting for a change",
        });
        return Ok(last.plan.clone().unwrap_or_default());
    }
    let answer = ask_planner(ctx, candidates, base);
    match &answer {
        Ok(plan) => {
            *memo = Some(PlanMemo {
                candidates: seen,
                plan: Some(plan.clone()),
            })
        }
        Err(e) if e.is::<InvalidPlan>() => {
            *memo = Some(PlanMemo {
                candidates: seen,
                plan: None,
            })
        }
        // A failure of the machinery or the agent may pass: the next pass asks again.
        Err(_) => {}
    }
    answer
}

/// The planner answered an invalid plan twice.
#[derive(Debug)]
struct InvalidPlan(String);

impl std::fmt::Display for InvalidPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidPlan {}

fn ask_planner(ctx: &Context, candidates: &[Issue], base: &str) -> Result<Vec<PlannedIssue>> {
    let ids: Vec<u64> = candidates.iter().map(|i| i.number).collect();
    let listing = serde_json::to_string_pretty(
        &candidates
            .iter()
            .map(|i| serde_json::json!({"id": i.number, "title": i.title, "body": i.body, "labels": i.labels}))
            .collect::<Vec<_>>(),
    )?;
    let max_text = ctx.config.max_concurrency.to_string();
    let prompt = ctx.prompt(
        "plan",
        &[("ISSUES", &listing), ("MAX_CONCURRENCY", &max_text)],
    )?;
    let key = WorkKey::Plan;
    let repo = WorkRepo::prepare(
        &ctx.repo_dir(&key.slug()),
        &ctx.remote,
        &ctx.creds,
        base,
        base,
    )?;
    let mut sandbox = WorkSandbox::new(ctx, key, &repo);
    let log_dir = sandbox.log_dir().clone();
    let turn = Turn {
        role: Role::Planner,
        prompt: &prompt,
        resume: None,
        iteration: 1,
        counted: 1,
        max_iterations: 1,
        time_limit: None,
        fresh_ahead: false,
    };
    let first = planner_turn(&mut sandbox, &turn)?;
    let error = match plan::parse(&first.result_text, &ids) {
        Ok(plan) => return Ok(finish(ctx, plan)),
        Err(e) => e,
    };
    ctx.progress.note(&format!(
        "plan: the planner's answer was invalid ({error:#}); asking once more"
    ));
    let correction = correction_prompt(&error, &ids);
    let retry = Turn {
        resume: first.session.as_ref(),
        prompt: &correction,
        iteration: 2,
        counted: 2,
        max_iterations: 2,
        ..turn
    };
    let second = planner_turn(&mut sandbox, &retry)?;
    match plan::parse(&second.result_text, &ids) {
        Ok(plan) => Ok(finish(ctx, plan)),
        Err(e) => {
            ctx.report.set_outcome("plan", "invalid plan");
            Err(InvalidPlan(format!(
                "the planner answered an invalid plan twice: {e:#} (transcripts in {})",
                log_dir.display()
            ))
            .into())
        }
    }
}

/// A planner turn; a planner that failed fails the pass.
fn planner_turn(sandbox: &mut WorkSandbox, turn: &Turn) -> Result<AgentOutcome> {
    let outcome = sandbox
        .turn(turn, &mut |_| {})
        .context("the planner failed")?;
    if let Ending::Failed(why) = &outcome.ending {
        bail!("the planner failed: {why}");
    }
    Ok(outcome)
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

fn correction_prompt(error: &anyhow::Error, ids: &[u64]) -> String {
    format!(
        "Your answer could not be used: {error:#}.\n\nAnswer again with exactly one block \
         <plan>{{\"issues\":[{{\"id\":N,\"title\":\"…\",\"branch\":\"sandcastle/issue-N\"}}]}}</plan> \
         choosing among the issues {ids:?}, each with the branch sandcastle/issue-<id>, \
         or <plan>{{\"issues\":[]}}</plan> if none should be worked on now."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(author: &str, head_repo: Option<&str>, branch: &str, base: &str) -> Pull {
        Pull {
            number: 9,
            title: "t".into(),
            author: author.into(),
            head_branch: branch.into(),
            head_repo: head_repo.map(str::to_string),
            base_branch: base.into(),
            labels: vec![],
            updated_at: String::new(),
            head_sha: String::new(),
            mergeable: None,
        }
    }

    #[test]
    fn only_a_pull_request_sandcastle_opened_from_its_own_branch_here_is_its_own() {
        let own = |p: &Pull| own_issue(p, "bot", "alice/demo", "main");
        assert_eq!(
            own(&pull(
                "bot",
                Some("alice/demo"),
                "sandcastle/issue-4",
                "main"
            )),
            Ok(4)
        );
        assert_eq!(
            own(&pull(
                "bot",
                Some("Alice/Demo"),
                "sandcastle/issue-4",
                "main"
            )),
            Ok(4)
        );
        for (p, says) in [
            (
                pull("mallory", Some("alice/demo"), "sandcastle/issue-4", "main"),
                "opened by mallory",
            ),
            (
                pull("bot", Some("mallory/demo"), "sandcastle/issue-4", "main"),
                "lives in mallory/demo",
            ),
            (
                pull("bot", None, "sandcastle/issue-4", "main"),
                "lives in a deleted repository",
            ),
            (
                pull("bot", Some("alice/demo"), "main", "main"),
                "branch main is not",
            ),
            (
                pull("bot", Some("alice/demo"), "feature", "main"),
                "branch feature is not",
            ),
            (
                pull("bot", Some("alice/demo"), "sandcastle/issue-04", "main"),
                "is not sandcastle/issue-N",
            ),
            (
                pull("bot", Some("alice/demo"), "sandcastle/issue-4", "release"),
                "merges into release",
            ),
        ] {
            let why = own(&p).unwrap_err();
            assert!(why.contains(says), "{why}");
        }
    }
}
