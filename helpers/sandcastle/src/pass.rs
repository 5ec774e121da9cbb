//! One pass of the loop: the PR rework lane, then planning, then implementation, each lane running up
//! to `maxConcurrency` pieces of work at once.
use crate::context::Context;
use crate::driver::{Piece, work_on};
use crate::forge::{Issue, Pull};
use crate::planning;
use crate::role::WorkKey;
use crate::state::Outcome;
use anyhow::{Context as _, Result};
use std::collections::VecDeque;
use std::sync::Mutex;

/// What one pass did.
#[derive(Debug, Default)]
pub struct PassSummary {
    /// Pull requests and issues worked on.
    pub worked: usize,
    /// Work that failed with an error (not an agent that merely did not complete).
    pub failed: usize,
    /// Issues and pull requests whose agent did not complete: not taken up again by this process.
    pub gave_up: Vec<u64>,
}

/// `only_issue` works on that issue alone, without the rework lane or the planner. `skip` are issues
/// and pull requests not to take up again.
pub fn run_pass(ctx: &Context, only_issue: Option<u64>, skip: &[u64]) -> Result<PassSummary> {
    let base = ctx.forge.default_branch()?;
    let pulls = ctx.forge.open_pulls()?;
    let mut summary = PassSummary::default();

    if only_issue.is_none() {
        let rework: Vec<Pull> = planning::sent_back(ctx, &pulls, &base, skip)
            .into_iter()
            .cloned()
            .collect();
        run_parallel(
            ctx,
            rework,
            |p| WorkKey::Pull(p.number),
            |p| work_on(ctx, &Piece::Pull(p), &base),
            &mut summary,
        );
    }

    let issues: Vec<Issue> = match only_issue {
        Some(number) => vec![
            ctx.forge
                .issue(number)
                .with_context(|| format!("cannot work on issue #{number}"))?,
        ],
        None => {
            let candidates = planning::candidates(ctx, &pulls, &base, skip)?;
            let plan = planning::plan(ctx, &candidates, &base)?;
            plan.iter()
                .filter_map(|p| candidates.iter().find(|c| c.number == p.id).cloned())
                .collect()
        }
    };
    run_parallel(
        ctx,
        issues,
        |i| WorkKey::Issue(i.number),
        |i| work_on(ctx, &Piece::Issue(i), &base),
        &mut summary,
    );
    Ok(summary)
}

/// Runs `work` on every item with at most `maxConcurrency` at once; a failure stays with its item.
fn run_parallel<T: Sync>(
    ctx: &Context,
    items: Vec<T>,
    key: impl Fn(&T) -> WorkKey + Sync,
    work: impl Fn(&T) -> Result<Outcome> + Sync,
    summary: &mut PassSummary,
) {
    let queue = Mutex::new(items.iter().collect::<VecDeque<_>>());
    let results = Mutex::new(Vec::new());
    let workers = (ctx.config.max_concurrency as usize).min(items.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !ctx.is_stopping() {
                    let Some(item) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
                    else {
                        break;
                    };
                    let key = key(item).to_string();
                    let result = work(item);
                    let line = match &result {
                        Ok(outcome) => outcome.to_string(),
                        Err(e) => format!("failed: {}", ctx.redactor.error(e)),
                    };
                    ctx.report.set_outcome(&key, &line);
                    ctx.progress.finish(&key, &line);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(result);
                }
            });
        }
    });
    for result in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        summary.worked += 1;
        match result {
            Ok(Outcome::GaveUp { number, .. }) => summary.gave_up.push(number),
            Ok(_) => {}
            Err(_) => summary.failed += 1,
        }
    }
}
