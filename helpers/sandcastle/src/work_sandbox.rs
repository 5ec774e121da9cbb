//! The sandbox of one piece of work, as the driver sees it: a container started when first needed,
//! with the agent's checkout of the work branch made inside it, in which agent turns and the gate
//! run and from which the commits come out. Removed when dropped (on success, error or panic).
use crate::agent::{self, AgentEvent, AgentOutcome, AgentRun, CommitsOut};
use crate::checkout;
use crate::context::Context;
use crate::driver::{Sandboxed, Turn};
use crate::gate::{self, GateOutcome};
use crate::git::WorkRepo;
use crate::hand_out::{self, Commits};
use crate::outbox;
use crate::progress::Status;
use crate::proxy::{Budget, WorkProxy};
use crate::role::WorkKey;
use crate::sandbox::{Relay, Sandbox, SandboxSpec};
use anyhow::Result;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// After the completion signal, how long the agent's process may take to exit.
const EXIT_GRACE: Duration = Duration::from_secs(30);

pub struct WorkSandbox<'a> {
    ctx: &'a Context,
    key: WorkKey,
    /// Transcripts and session files of this work in this run.
    log_dir: PathBuf,
    repo: &'a WorkRepo,
    /// Variables for this work's execs besides the run's (`outbox::sandbox_env`).
    work_env: Vec<(String, String)>,
    sandbox: Option<Sandbox>,
    /// This work's socket of the model proxy, opened with the sandbox.
    proxy: Option<WorkProxy>,
    /// What the proxy lets this work spend.
    budget: Budget,
    /// What the last turn's own exec handed out of the checkout, until the commits are taken or
    /// anything else runs in the sandbox.
    handed_out: Option<HandedOut>,
    /// What the last turn's own exec handed out of the outbox of `sandcastle ask`, until it is
    /// taken; `None`: read the outbox with an exec of its own.
    handed_ask: Option<hand_out::Ask>,
    /// The work branch's tip as this sandbox last brought it in (only taking the commits moves
    /// it); `None`: ask the repository.
    tip: Option<String>,
}

/// A turn's hand-out of the checkout: the commits since `known_tip`, held in `file`.
struct HandedOut {
    commits: Commits,
    file: tempfile::NamedTempFile,
    known_tip: String,
}

impl<'a> WorkSandbox<'a> {
    pub fn new(ctx: &'a Context, key: WorkKey, repo: &'a WorkRepo) -> WorkSandbox<'a> {
        WorkSandbox {
            ctx,
            key,
            log_dir: ctx.work_log_dir(&key.slug()),
            repo,
            work_env: Vec::new(),
            sandbox: None,
            proxy: None,
            budget: Budget::default(),
            handed_out: None,
            handed_ask: None,
            tip: None,
        }
    }

    /// Gives every exec of this sandbox `vars` too.
    pub fn with_env(mut self, vars: &[(String, String)]) -> WorkSandbox<'a> {
        self.work_env = vars.to_vec();
        self
    }

    /// Lets the proxy refuse this work's model requests past `budget`.
    pub fn with_budget(mut self, budget: Budget) -> WorkSandbox<'a> {
        self.budget = budget;
        self
    }

    pub fn log_dir(&self) -> &PathBuf {
        &self.log_dir
    }

    fn get(&mut self) -> Result<&Sandbox> {
        if self.sandbox.is_none() {
            let ctx = self.ctx;
            let proxy = ctx.proxy.open(&self.key.to_string(), self.budget)?;
            let mut env = ctx.sandbox_env();
            env.extend(self.work_env.iter().cloned());
            env.extend(proxy.sandbox_env());
            let tea = ctx.tea_login();
            let limits = &ctx.config.sandbox;
            let spec = SandboxSpec {
                image: &ctx.config.image_name,
                run_id: &ctx.run_id,
                project: &ctx.project,
                key: &self.key.slug(),
                network: limits.network,
                memory: &limits.memory,
                pids_limit: limits.pids_limit,
                mounts: &limits.mounts,
                env: &env,
                tea: tea.as_ref(),
                relay: Relay {
                    socket_dir: proxy.dir(),
                    port: proxy.port,
                },
            };
            let sandbox = Sandbox::start(&spec)?;
            self.proxy = Some(proxy);
            // Dropped (and so removed) if the checkout cannot be made.
            let sandbox = self.sandbox.insert(sandbox);
            checkout::seed(sandbox, self.repo, &ctx.remote)?;
        }
        Ok(self.sandbox.as_ref().expect("started above"))
    }
}

impl Sandboxed for WorkSandbox<'_> {
    /// One agent run, shown live and tallied.
    fn turn(&mut self, turn: &Turn) -> Result<AgentOutcome> {
        let ctx = self.ctx;
        let key = self.key.to_string();
        let mut status = Status {
            key: key.clone(),
            lane: self.key.lane().to_string(),
            role: turn.role.to_string(),
            iteration: turn.counted,
            max_iterations: turn.max_iterations,
            last_tool: String::new(),
            cost_usd: ctx.report.cost(&key),
        };
        ctx.progress.update(&status);
        let cost_before = status.cost_usd;
        let log_dir = self.log_dir.clone();
        self.handed_out = None;
        self.handed_ask = None;
        let known_tip = match &self.tip {
            Some(tip) => tip.clone(),
            None => self.repo.tip()?,
        };
        let commits_file = self.repo.scratch_file()?;
        let run = AgentRun {
            role: turn.role,
            model: turn.role.model(&ctx.config.models),
            prompt: turn.prompt,
            resume: turn.resume,
            idle_timeout: ctx.config.idle_timeout,
            exit_grace: EXIT_GRACE,
            log_dir: &log_dir,
            iteration: turn.iteration,
            commits: CommitsOut {
                known_tip: known_tip.clone(),
                file: commits_file.path().to_path_buf(),
            },
        };
        let started = Instant::now();
        let sandbox = self.get()?;
        let mut outcome = agent::run(sandbox, &run, &ctx.redactor, &mut |event| {
            match event {
                AgentEvent::ToolCall(call) => status.last_tool = call.to_string(),
                AgentEvent::Usage(usage) => status.cost_usd = cost_before + usage.cost_usd,
            }
            ctx.progress.update(&status);
        })?;
        // What the API itself billed through the proxy, not what the agent's stream says.
        if let Some(proxy) = &self.proxy {
            outcome.usage = proxy.take_usage();
        }
        ctx.report
            .record_iteration(&key, turn.role, &outcome.usage, started.elapsed());
        self.handed_ask = outcome.ask.clone();
        self.handed_out = outcome.commits.clone().map(|commits| HandedOut {
            commits,
            file: commits_file,
            known_tip,
        });
        Ok(outcome)
    }

    fn gate(&mut self) -> Result<GateOutcome> {
        let ctx = self.ctx;
        self.handed_out = None;
        let sandbox = self.get()?;
        let outcome = gate::run(
            sandbox,
            &ctx.config.commands.check,
            ctx.config.idle_timeout,
            &ctx.redactor,
        )?;
        ctx.report
            .record_gate(&self.key.to_string(), outcome.passed);
        Ok(outcome)
    }

    /// What the last turn handed out, else with an exec of its own; without a sandbox no ask was
    /// made.
    fn take_ask(&mut self) -> Result<Option<Vec<u8>>> {
        match self.handed_ask.take() {
            Some(hand_out::Ask::None) => return Ok(None),
            Some(hand_out::Ask::Bytes(bytes)) => return Ok(Some(bytes)),
            Some(hand_out::Ask::Refused(why)) => anyhow::bail!("{why}"),
            None => {}
        }
        let Some(sandbox) = &self.sandbox else {
            return Ok(None);
        };
        let scratch = self.repo.scratch_file()?;
        outbox::read(sandbox, scratch.path())
    }

    /// What the last turn handed out, else with an exec of its own; without a sandbox there is
    /// nothing new.
    fn take_commits(&mut self) -> Result<String> {
        let tip = match (self.handed_out.take(), &self.sandbox) {
            (Some(out), _) => {
                checkout::take_handed_out(self.repo, out.commits, out.file.path(), &out.known_tip)
            }
            (None, Some(sandbox)) => checkout::take_commits(sandbox, self.repo),
            (None, None) => self.repo.tip(),
        }?;
        self.tip = Some(tip.clone());
        Ok(tip)
    }
}

impl Drop for WorkSandbox<'_> {
    fn drop(&mut self) {
        if let Some(sandbox) = self.sandbox.take() {
            let _ = sandbox.remove();
        }
    }
}
