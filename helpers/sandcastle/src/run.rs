//! `sandcastle run` and `sandcastle plan`: start-up checks, the loop, the signal handling and the
//! closing report.
use crate::asking;
use crate::context::{Context, Settings};
use crate::green::{self, Due};
use crate::handlers::Handlers;
use crate::pass::{PassSummary, run_pass};
use crate::planning;
use anyhow::{Result, anyhow};
use sandcastle_core::lock::RunLock;
use sandcastle_core::plan::branch_for;
use sandcastle_core::run_dir::{self, RunDir};
use sandcastle_core::sandbox;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Exit status of a run that stopped because an issue is too unclear to start and nobody can be
/// asked (`clarify.rs`): CI fails fast instead of hanging.
const UNCLEAR: u8 = 3;

/// Exit status of a `run --once` or `run --issue` whose pass saw a question time out (and no work
/// fail): the question still waits, and a script can tell that from a pass that did its work.
const QUESTION_TIMED_OUT: u8 = 4;

pub fn run(project: &Path, once: bool, only_issue: Option<u64>, yes: bool) -> Result<ExitCode> {
    let settings = Settings::load(project)?;
    let _lock = RunLock::acquire(&project.join(".sandcastle/logs/run.lock"))?;
    let single_pass = once || only_issue.is_some();
    let mut ctx = start(settings)?;
    ctx.handlers = Handlers::for_run(single_pass);
    asking::say_skipped(&ctx);
    ctx.clarifies &= !yes;
    let ctx = Arc::new(ctx);
    let _run_dir = RemovedOnReturn(&ctx.run_dir);
    let redact = |e: anyhow::Error| anyhow!("{}", ctx.redactor.error(&e));
    ctx.forge.ensure_labels().map_err(redact)?;
    stop_on_signal(Arc::clone(&ctx))?;

    let mut failed = false;
    let mut timed_out = false;
    loop {
        ctx.progress.note("pass: looking for work");
        let pass = run_pass(&ctx, only_issue);
        if ctx.is_stopping() {
            // The signal thread ends the process; do not start new work meanwhile.
            std::thread::park();
        }
        let summary = match pass {
            Ok(summary) => summary,
            Err(e) if single_pass => {
                finish(&ctx);
                return Err(redact(e));
            }
            Err(e) => {
                ctx.progress
                    .note(&format!("pass failed: {}", ctx.redactor.error(&e)));
                failed = true;
                PassSummary::default()
            }
        };
        failed |= summary.failed > 0;
        timed_out |= summary.timed_out > 0;
        if !summary.unclear.is_empty() {
            finish(&ctx);
            // sandcastle's guidance spans lines; each is one line of the view.
            for line in summary.unclear.iter().flat_map(|guidance| guidance.lines()) {
                ctx.progress.note(line);
            }
            return Ok(ExitCode::from(UNCLEAR));
        }
        if single_pass {
            break;
        }
        // Kept current while the loop runs, so `sandcastle report` sees this run before it ends.
        if summary.worked > 0
            && let Err(e) = ctx.report.write(&ctx.logs_dir())
        {
            ctx.progress
                .note(&format!("cannot write the run report: {e:#}"));
        }
        if let Some(limit) = ctx.config.budget.max_cost_per_run
            && ctx.report.total_cost() >= limit
        {
            ctx.progress.note(&format!(
                "this run has spent ${:.2}, which reaches [budget] maxCostPerRun (${limit:.2}): it ends here",
                ctx.report.total_cost()
            ));
            break;
        }
        // Wait after a pass with nothing to do, and after one with failures, so a lasting fault
        // (a forge that refuses pushes, say) is not retried in a tight loop.
        if summary.worked == 0 || summary.failed > 0 {
            let wait = ctx.config.poll_interval;
            let why = if summary.worked == 0 {
                "nothing to do"
            } else {
                "some work failed"
            };
            ctx.progress.note(&format!(
                "{why}; next pass in {}",
                humantime::format_duration(wait)
            ));
            sleep_unless(&ctx, wait);
        }
    }
    if let Err(e) = ctx.warm_cache.remove() {
        ctx.progress
            .note(&format!("could not remove the gates' warm cache: {e:#}"));
    }
    finish(&ctx);
    Ok(if failed {
        ExitCode::FAILURE
    } else if timed_out && single_pass {
        ExitCode::from(QUESTION_TIMED_OUT)
    } else {
        ExitCode::SUCCESS
    })
}

/// Checks everything a run needs before it changes anything: Docker answers and knows the runtime,
/// the image exists, the forge accepts the token. The checks, and the look-up of containers that
/// runs killed outright left behind, are independent and run at once (start-up is on every run's
/// clock); their errors come in that order.
fn start(settings: Settings) -> Result<Context> {
    let (image, project) = (settings.config.image_name.clone(), settings.project.clone());
    let named_runtime = settings.config.sandbox.runtime.clone();
    let sandboxes = sandbox::provider();
    let (runtime, image, dead, ctx) = std::thread::scope(|scope| {
        let engine = scope.spawn(|| {
            sandboxes
                .endpoint()
                .and_then(|_| sandboxes.answers())
                .and_then(|()| sandboxes.runtime_says(named_runtime.as_deref()))
        });
        let image = scope.spawn(|| sandboxes.image_exists(&image));
        let dead = scope.spawn(|| sandboxes.dead_runs(&project));
        let ctx = Context::new(settings);
        (joined(engine), joined(image), joined(dead), ctx)
    });
    let runtime = runtime?;
    image?;
    let ctx = ctx?;
    match dead.and_then(|dead| sandboxes.remove_dead(&dead).map(|()| dead)) {
        Ok(dead) if !dead.is_empty() => {
            let names: Vec<&str> = dead.iter().map(|c| c.name.as_str()).collect();
            ctx.progress.note(&format!(
                "removed the containers of runs that are no longer alive: {}",
                names.join(", ")
            ))
        }
        Ok(_) => {}
        Err(e) => ctx.progress.note(&format!(
            "could not look for containers of runs that are no longer alive: {e:#}"
        )),
    }
    match run_dir::remove_dead() {
        Ok(runs) if !runs.is_empty() => ctx.progress.note(&format!(
            "removed the directories of runs that are no longer alive: {}",
            runs.join(", ")
        )),
        Ok(_) => {}
        Err(e) => ctx.progress.note(&format!(
            "could not look for directories of runs that are no longer alive: {e:#}"
        )),
    }
    let tea = match &ctx.agent_login {
        Some(login) => format!("tea in sandboxes reads as {}", login.user),
        None => "no forge login in sandboxes (FORGEJO_AGENT_TOKEN is not set)".to_string(),
    };
    ctx.progress.note(&format!(
        "run {} of orchestrator {}: {} on {} as {}, image {}; {tea}; {}; {runtime}",
        ctx.run_id,
        ctx.id,
        ctx.config.repo,
        ctx.config.forge_url,
        ctx.login,
        ctx.config.image_name,
        sandbox::network_says(ctx.config.sandbox.network)
    ));
    Ok(ctx)
}

/// A start-up check's result; a check that panicked is an error like any other.
fn joined<T>(check: std::thread::ScopedJoinHandle<Result<T>>) -> Result<T> {
    check
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("a start-up check panicked")))
}

/// The summary table on stdout and the run report on disk.
fn finish(ctx: &Context) {
    for (key, blocked) in ctx.proxy.all_blocked() {
        ctx.report.set_blocked(&key, blocked);
    }
    ctx.progress.print_stdout(&ctx.report.summary_table());
    match ctx.report.write(&ctx.logs_dir()) {
        Ok(path) => ctx
            .progress
            .note(&format!("run report: {}", path.display())),
        Err(e) => ctx
            .progress
            .note(&format!("cannot write the run report: {e:#}")),
    }
}

/// Removes the run's directory when `run` returns, however: the signal thread holds the context
/// (and so the directory) until the process exits.
struct RemovedOnReturn<'a>(&'a RunDir);

impl Drop for RemovedOnReturn<'_> {
    fn drop(&mut self) {
        self.0.remove();
    }
}

/// On Ctrl-C or SIGTERM: stop starting work, remove every container of the run (which ends the
/// agents in them), leave the checkouts, write the report, exit.
fn stop_on_signal(ctx: Arc<Context>) -> Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            ctx.stopping.store(true, Ordering::SeqCst);
            let name = if signal == SIGINT {
                "interrupt"
            } else {
                "SIGTERM"
            };
            ctx.progress.note(&format!(
                "{name}: removing this run's containers; committed work stays in .sandcastle/repos"
            ));
            ctx.handlers.stop();
            // No container is made after the removal below looks: a gate or a warm-up on
            // another thread may be creating one right now.
            sandbox::provider().stop_creating();
            if let Err(e) = sandbox::provider().remove_run(&ctx.run_id) {
                ctx.progress
                    .note(&format!("could not remove every container: {e:#}"));
            }
            // Other orchestrators need not wait for these leases to run out.
            for claim in ctx
                .held_claims
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                if let Err(e) = ctx.forge.delete_comment(*claim) {
                    ctx.progress.note(&format!(
                        "could not release a claim: {}",
                        ctx.redactor.error(&e)
                    ));
                }
            }
            finish(&ctx);
            ctx.run_dir.remove();
            std::process::exit(128 + signal);
        }
    });
    Ok(())
}

/// Sleeps `wait`, waking early when a stop is under way or a person answered a question.
fn sleep_unless(ctx: &Context, wait: Duration) {
    let until = Instant::now() + wait;
    while Instant::now() < until && !ctx.is_stopping() && !ctx.handlers.answer_arrived() {
        std::thread::sleep(Duration::from_millis(200).min(until - Instant::now()));
    }
}

/// `sandcastle plan`: the rework lane's pull requests, the candidates, and the planner's choice.
pub fn plan(project: &Path) -> Result<ExitCode> {
    let settings = Settings::load(project)?;
    let ctx = start(settings)?;
    let base = ctx.forge.default_branch()?;
    let pulls = ctx.forge.open_pulls()?;
    let labels = ctx.forge.labels()?;
    for (name, _) in sandcastle_core::forge::LIFECYCLE_LABELS {
        if !labels.iter().any(|l| l.name == name) {
            println!("label {name:?} is missing: `sandcastle run` will create it");
        }
    }
    let rework = planning::sent_back(&ctx, &pulls, &base)?;
    if rework.is_empty() {
        println!("rework: no pull request of sandcastle's own is labelled ready-for-agent");
    }
    for pull in rework {
        println!(
            "rework: pull request #{} {:?} on {}",
            pull.number, pull.title, pull.head_branch
        );
    }
    if ctx.config.autopilot.enabled {
        for due in green::survey(&ctx, &pulls, &base)? {
            let line = match due {
                Due::Round {
                    pull,
                    trouble,
                    resumed,
                } => format!(
                    "keep green: pull request #{} {:?}: {} ({})",
                    pull.number,
                    pull.title,
                    trouble.what(),
                    if resumed {
                        "the round in progress goes on"
                    } else {
                        "a round for the pr-fixer"
                    }
                ),
                Due::Person { pull, trouble } => format!(
                    "keep green: pull request #{} {:?}: {} again, and `[autopilot] {}` are spent: a run asks a person",
                    pull.number,
                    pull.title,
                    trouble.what(),
                    trouble.rounds_key()
                ),
            };
            println!("{line}");
        }
    }
    let candidates = planning::candidates(&ctx, &pulls, &base)?;
    if candidates.is_empty() {
        println!(
            "plan: no open issue is labelled ready-for-agent (without epic, needs-info or an open pull request)"
        );
        return Ok(ExitCode::SUCCESS);
    }
    for issue in &candidates {
        println!("candidate: #{} {:?}", issue.number, issue.title);
    }
    let plan = planning::plan(&ctx, &candidates, &base)?;
    if plan.is_empty() {
        println!("plan: the planner chose nothing to work on now");
    }
    for issue in plan {
        println!(
            "plan: would work on #{} {:?} on {}",
            issue.id,
            issue.title,
            branch_for(issue.id)
        );
    }
    Ok(ExitCode::SUCCESS)
}
