//! One pass of the loop: the PR rework lane, then planning, then implementation, each lane running up
//! to `maxConcurrency` pieces of work at once.
use crate::asking::{self, Poll};
use crate::context::Context;
use crate::driver::work_on;
use crate::green;
use crate::outbox;
use crate::piece::Piece;
use crate::planning;
use crate::pool::pool;
use crate::state::{Outcome, WorkState};
use anyhow::{Context as _, Result};
use sandcastle_core::claims::{self, Claimed};
use sandcastle_core::forge::{Issue, Pull};
use sandcastle_core::role::WorkKey;

/// What one pass did.
#[derive(Debug, Default)]
pub struct PassSummary {
    /// Pull requests and issues worked on.
    pub worked: usize,
    /// Work that failed with an error (not an agent that merely did not complete).
    pub failed: usize,
    /// Issues too unclear to start with nobody to ask: the guidance for each.
    pub unclear: Vec<String>,
    /// Questions of the pass's scope (`only_issue`, or all) that wait past their `[questions]
    /// timeout`: counted on every pass until answered, not only the one that saw the timeout.
    pub timed_out: usize,
}

/// `only_issue` works on that issue alone, without the rework lane or the planner. Work that saved
/// state says is half-published is finished first.
pub fn run_pass(ctx: &Context, only_issue: Option<u64>) -> Result<PassSummary> {
    let base = ctx.forge.default_branch()?;
    let mut summary = PassSummary::default();
    finish_publishing(ctx, &base, &mut summary)?;
    answered_questions(ctx, &base, only_issue, &mut summary)?;
    let answered_asks = answered_asks(ctx)?;
    run_parallel(
        ctx,
        answered_asks.iter().map(Piece::Pull).collect(),
        &base,
        &mut summary,
    );
    let pulls = ctx.forge.open_pulls()?;

    if only_issue.is_none() {
        let rework = planning::sent_back(ctx, &pulls, &base)?;
        let pieces = rework.into_iter().map(Piece::Pull).collect();
        run_parallel(ctx, pieces, &base, &mut summary);
        if ctx.config.autopilot.enabled {
            let troubled = green::troubled(ctx, &pulls, &base)?;
            let pieces = troubled.iter().map(|(p, t)| Piece::Green(p, t)).collect();
            run_parallel(ctx, pieces, &base, &mut summary);
        }
    }

    let issues: Vec<Issue> = match only_issue {
        Some(number) => vec![
            ctx.forge
                .issue(number)
                .with_context(|| format!("cannot work on issue #{number}"))?,
        ],
        None => {
            let candidates = planning::candidates(ctx, &pulls, &base)?;
            let plan = planning::plan(ctx, &candidates, &base)?;
            plan.iter()
                .filter_map(|p| candidates.iter().find(|c| c.number == p.id).cloned())
                .collect()
        }
    };
    run_parallel(
        ctx,
        issues.iter().map(Piece::Issue).collect(),
        &base,
        &mut summary,
    );
    Ok(summary)
}

/// Work whose saved state stopped half-way through publishing (a kill, a forge that failed between
/// opening the pull request and labelling it), or given up without the forge being told: finished
/// before anything else, each step idempotent. The issue already has its pull request, so nothing
/// else would ever look at it again.
fn finish_publishing(ctx: &Context, base: &str, summary: &mut PassSummary) -> Result<()> {
    let mut issues = Vec::new();
    let mut pulls = Vec::new();
    for state in WorkState::unpublished(&ctx.state_dir())? {
        match WorkKey::from_slug(&state.slug) {
            Some(WorkKey::Issue(n)) => issues.push(ctx.forge.issue(n)?),
            Some(WorkKey::Pull(n)) => pulls.push((ctx.forge.pull(n)?, state.green)),
            _ => {}
        }
    }
    let pieces = pulls
        .iter()
        .map(|(pull, green)| match green {
            Some(trouble) => Piece::Green(pull, trouble),
            None => Piece::Pull(pull),
        })
        .chain(issues.iter().map(Piece::Issue))
        .collect();
    run_parallel(ctx, pieces, base, summary);
    Ok(())
}

/// Work waiting for a person (issues, and pull requests whose pr-fixer asked): each question's
/// answer is looked for (with backoff), its timeout recorded; answered work goes on first. Waiting
/// work has `needs-info` and a saved `Waiting` phase, so nothing else would take it up again.
fn answered_questions(
    ctx: &Context,
    base: &str,
    only_issue: Option<u64>,
    summary: &mut PassSummary,
) -> Result<()> {
    let dir = ctx.state_dir();
    let mut issues = Vec::new();
    let mut pulls = Vec::new();
    for mut state in WorkState::all_waiting(&dir)? {
        let Some(key @ (WorkKey::Issue(number) | WorkKey::Pull(number))) =
            WorkKey::from_slug(&state.slug)
        else {
            continue;
        };
        let name = key.to_string();
        if let WorkKey::Issue(_) = key
            && !ctx.clarifies
            && crate::clarify::release(ctx, number, &mut state)?
        {
            state.save(&dir)?;
            issues.push(ctx.forge.issue(number)?);
            continue;
        }
        let Some(waiting) = state.waiting_mut() else {
            continue;
        };
        let polled = asking::poll(ctx, key, waiting)?;
        // A `--issue` run answers for its issue's question only.
        let in_scope = only_issue.is_none_or(|only| key == WorkKey::Issue(only));
        // An answer is saved before anything is done with it: settling removes its file.
        state.save(&dir)?;
        match polled {
            Poll::Answered => {
                if let Some(waiting) = state.waiting_mut() {
                    asking::settle(ctx, key, waiting)?;
                }
                state.save(&dir)?;
                match key {
                    WorkKey::Pull(_) => pulls.push(ctx.forge.pull(number)?),
                    _ => issues.push(ctx.forge.issue(number)?),
                }
            }
            Poll::Pending => {
                if let Some(line) = crate::clarify::still_waiting(ctx, &state) {
                    ctx.report.set_clarification(&name, &line);
                }
                if in_scope && state.waiting().is_some_and(|waiting| waiting.timed_out) {
                    summary.timed_out += 1;
                    ctx.progress.note(&format!(
                        "{name}: the question still waits past its timeout; `sandcastle answer {number} …` answers it"
                    ));
                }
            }
            Poll::TimedOut => {
                if in_scope {
                    summary.timed_out += 1;
                }
                let line = format!(
                    "question timed out after {} (commented; needs-info kept)",
                    humantime::format_duration(ctx.config.questions.timeout)
                );
                ctx.report.set_outcome(&name, &line);
                ctx.progress.finish(&name, &line);
            }
        }
    }
    let mut pieces: Vec<Piece> = issues.iter().map(Piece::Issue).collect();
    pieces.extend(pulls.iter().map(Piece::Pull));
    run_parallel(ctx, pieces, base, summary);
    Ok(())
}

/// A pass's look at every ask (`outbox::look`): the pull requests to work on now, for an answer to
/// published work handed to a pr-fixer turn. The ask's own state is saved before the answer is
/// handed over and again after it lets it go, so a kill anywhere hands it over once.
fn answered_asks(ctx: &Context) -> Result<Vec<Pull>> {
    let dir = ctx.state_dir();
    let mut pulls = Vec::new();
    for mut state in WorkState::with_asks(&dir)? {
        let Some(key) = WorkKey::from_slug(&state.slug) else {
            continue;
        };
        let handed = outbox::look(ctx, key, &mut state)?;
        state.save(&dir)?;
        let Some(pull) = handed else {
            continue;
        };
        if let Some(fixer) = outbox::hand_over(ctx, pull, &state)? {
            fixer.save(&dir)?;
        }
        outbox::told(&mut state);
        state.save(&dir)?;
        pulls.push(ctx.forge.pull(pull)?);
    }
    Ok(pulls)
}

/// Works on `piece` under a claim on the forge, or leaves it to the orchestrator that holds it.
fn claimed(ctx: &Context, piece: &Piece, base: &str) -> Result<Outcome> {
    let ttl = ctx.config.cluster.lease_ttl;
    match claims::claim(&ctx.forge, &ctx.login, &ctx.id, ttl, piece.number())? {
        Claimed::Theirs(theirs) => Ok(Outcome::HeldBy(theirs.holder)),
        // Released when the work returns (published, given up, waiting, or failed), or by a stop.
        Claimed::Ours(lease) => {
            let held = || ctx.held_claims.lock().unwrap_or_else(|e| e.into_inner());
            held().push(lease.comment());
            let outcome = work_on(ctx, piece, base);
            held().retain(|c| *c != lease.comment());
            outcome
        }
    }
}

/// Works on every piece, each under its claim, with at most `maxConcurrency` at once; a failure
/// stays with its piece. Work another orchestrator holds does not count as work done.
fn run_parallel(ctx: &Context, pieces: Vec<Piece>, base: &str, summary: &mut PassSummary) {
    let workers = ctx.config.max_concurrency as usize;
    let results = pool(&pieces, workers, &|| ctx.is_stopping(), &|piece| {
        let key = piece.key().to_string();
        let result = claimed(ctx, piece, base);
        let line = match &result {
            Ok(outcome) => {
                ctx.report.set_result(&key, outcome);
                outcome.to_string()
            }
            Err(e) => {
                let line = format!("failed: {}", ctx.redactor.error(e));
                ctx.report.set_outcome(&key, &line);
                line
            }
        };
        ctx.progress.finish(&key, &line);
        result
    });
    for result in results {
        match result {
            Ok(Outcome::HeldBy(_)) => {}
            Ok(Outcome::Unclear(guidance)) => summary.unclear.push(guidance),
            Ok(_) => summary.worked += 1,
            Err(_) => {
                summary.worked += 1;
                summary.failed += 1;
            }
        }
    }
}
