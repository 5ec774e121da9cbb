//! Running one role's agent in a sandbox: progress, the report, and the saved state after each
//! iteration.
use crate::agent::{self, AgentEvent, AgentFailure, AgentOutcome, AgentRun, SavedSession};
use crate::checkout;
use crate::context::Context;
use crate::git::WorkRepo;
use crate::progress::Status;
use crate::sandbox::{Sandbox, SandboxSpec};
use crate::state::WorkState;
use anyhow::{Result, bail};
use std::path::Path;
use std::time::{Duration, Instant};

/// After the completion signal, how long the agent's process may take to exit.
const EXIT_GRACE: Duration = Duration::from_secs(30);

/// The container of one piece of work: started when first needed (a resumed run that only has to
/// publish starts none), with the agent's checkout of the work branch made inside it; removed when
/// dropped (on success, error or panic).
pub struct LazySandbox<'a> {
    ctx: &'a Context,
    slug: String,
    repo: &'a WorkRepo,
    sandbox: Option<Sandbox>,
}

impl<'a> LazySandbox<'a> {
    pub fn new(ctx: &'a Context, slug: &str, repo: &'a WorkRepo) -> LazySandbox<'a> {
        LazySandbox {
            ctx,
            slug: slug.to_string(),
            repo,
            sandbox: None,
        }
    }

    pub fn get(&mut self) -> Result<&Sandbox> {
        if self.sandbox.is_none() {
            let ctx = self.ctx;
            let env = ctx.sandbox_env();
            let tea = ctx.tea_login();
            let limits = &ctx.config.sandbox;
            let spec = SandboxSpec {
                image: &ctx.config.image_name,
                run_id: &ctx.run_id,
                project: &ctx.project,
                key: &self.slug,
                network: &limits.network,
                memory: &limits.memory,
                pids_limit: limits.pids_limit,
                mounts: &limits.mounts,
                env: &env,
                tea: tea.as_ref(),
            };
            let sandbox = Sandbox::start(&spec)?;
            // Dropped (and so removed) if the checkout cannot be made.
            let sandbox = self.sandbox.insert(sandbox);
            checkout::seed(sandbox, self.repo, &ctx.remote)?;
        }
        Ok(self.sandbox.as_ref().expect("started above"))
    }

    /// The agent's commits, brought into the work repository; the new tip. Without a sandbox there
    /// is nothing new.
    pub fn take_commits(&self) -> Result<String> {
        match &self.sandbox {
            Some(sandbox) => checkout::take_commits(sandbox, self.repo),
            None => self.repo.tip(),
        }
    }
}

impl Drop for LazySandbox<'_> {
    fn drop(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            let _ = sandbox.remove();
        }
    }
}

/// The saved state of unfinished work on `slug` (else a fresh one) and its work repository with
/// `branch` in place; the first start records the commit the agents start from.
pub fn begin(
    ctx: &Context,
    key: &str,
    slug: &str,
    branch: &str,
    base: &str,
) -> Result<(WorkState, WorkRepo)> {
    let mut state = match WorkState::resume(&ctx.state_dir(), slug)? {
        Some(state) => {
            ctx.progress.note(&format!(
                "{key}: resuming saved work ({:?} phase)",
                state.phase
            ));
            state
        }
        None => WorkState::new(slug, branch, &ctx.run_id),
    };
    let repo = WorkRepo::prepare(&ctx.repo_dir(slug), &ctx.remote, &ctx.creds, branch, base)?;
    if state.start_commit.is_none() {
        state.start_commit = Some(repo.tip()?);
        state.save(&ctx.state_dir())?;
    }
    Ok((state, repo))
}

/// Which piece of work, in which lane, for the progress view and the report.
pub struct Work<'a> {
    /// `issue #42`, `pr #7`, `plan`.
    pub key: &'a str,
    pub lane: &'a str,
    pub log_dir: &'a Path,
}

pub struct Turn<'a> {
    pub role: &'a str,
    pub model: &'a str,
    pub prompt: &'a str,
    pub resume: Option<&'a SavedSession>,
    pub iteration: u32,
    pub max_iterations: u32,
}

/// One agent run, shown live and tallied.
pub fn run_turn(
    ctx: &Context,
    sandbox: &Sandbox,
    work: &Work,
    turn: &Turn,
) -> Result<AgentOutcome> {
    let mut status = Status {
        key: work.key.to_string(),
        lane: work.lane.to_string(),
        role: turn.role.to_string(),
        iteration: turn.iteration,
        max_iterations: turn.max_iterations,
        last_tool: String::new(),
        cost_usd: ctx.report.cost(work.key),
    };
    ctx.progress.update(&status);
    let cost_before = status.cost_usd;
    let run = AgentRun {
        role: turn.role,
        model: turn.model,
        prompt: turn.prompt,
        resume: turn.resume,
        idle_timeout: ctx.config.idle_timeout,
        exit_grace: EXIT_GRACE,
        log_dir: work.log_dir,
        iteration: turn.iteration,
    };
    let started = Instant::now();
    let outcome = agent::run(sandbox, &run, &ctx.redactor, &mut |event| {
        match event {
            AgentEvent::ToolCall(call) => status.last_tool = call.to_string(),
            AgentEvent::Usage(usage) => status.cost_usd = cost_before + usage.cost_usd,
        }
        ctx.progress.update(&status);
    });
    // A failed iteration still cost something.
    let usage = match &outcome {
        Ok(outcome) => outcome.usage.clone(),
        Err(e) => e
            .downcast_ref::<AgentFailure>()
            .map(|f| f.usage.clone())
            .unwrap_or_default(),
    };
    ctx.report
        .record_iteration(work.key, turn.role, &usage, started.elapsed());
    outcome
}

/// Iterates the working role (implementer or pr-fixer) until the completion signal or
/// `maxIterations`, taking the agent's commits out and saving the state after every iteration.
/// Returns whether it completed.
pub fn iterate(
    ctx: &Context,
    sandbox: &mut LazySandbox,
    work: &Work,
    state: &mut WorkState,
    role: &str,
    model: &str,
    prompt: &dyn Fn(u32) -> Result<String>,
) -> Result<bool> {
    let max = ctx.config.max_iterations;
    while state.iterations < max {
        if ctx.is_stopping() {
            bail!(
                "{}: stopped before iteration {}",
                work.key,
                state.iterations + 1
            );
        }
        let iteration = state.iterations + 1;
        let prompt = prompt(iteration)?;
        let turn = Turn {
            role,
            model,
            prompt: &prompt,
            resume: None,
            iteration,
            max_iterations: max,
        };
        let outcome = run_turn(ctx, sandbox.get()?, work, &turn);
        state.iterations = iteration;
        let completed = match outcome {
            Ok(outcome) => {
                state.last_summary = outcome.result_text.clone();
                if let Some(session) = outcome.session {
                    state.set_session(role, session);
                }
                if !outcome.completed {
                    ctx.progress.note(&format!(
                        "{}: {role} iteration {iteration}/{max} ended without the completion signal; transcript: {}",
                        work.key,
                        outcome.transcript.display()
                    ));
                }
                outcome.completed
            }
            // A failed iteration (idle timeout, crash, error result) counts; the next one starts afresh.
            Err(e) => {
                if let Some(session) = e
                    .downcast_ref::<AgentFailure>()
                    .and_then(|f| f.session.clone())
                {
                    state.set_session(role, session);
                }
                let message = ctx.redactor.error(&e);
                ctx.progress.note(&format!(
                    "{}: {role} iteration {iteration}/{max} failed: {message}",
                    work.key
                ));
                state.last_summary = format!("iteration {iteration} failed: {message}");
                false
            }
        };
        // Whatever the iteration's end, what it committed is kept.
        sandbox.take_commits()?;
        state.save(&ctx.state_dir())?;
        if completed {
            return Ok(true);
        }
    }
    Ok(false)
}
