//! The sandbox of one piece of work, as the driver sees it: a container started when first needed,
//! with the agent's checkout of the work branch made inside it, in which agent turns run and from
//! which the commits come out; and, for each gate, a fresh container of its own with a checkout of
//! the tip the host took in and a fresh build cache volume (a copy of the run's warm cache, built
//! from the base branch's tip alone), both removed after it: no gate reads what another gate (an
//! earlier commit's build) wrote.
//! A role with tools never takes over a container another such role ran in: it gets a fresh one.
//! Nor does any turn run in a container that stopped (its relay exited): the turn that ran in it
//! failed, and the next one gets a fresh one.
//! No work is lost to a fresh container: before the old one goes (started again if it stopped), its
//! checkout's tree is taken out (`checkout::take_snapshot`), and the next container of the role
//! that wrote it gets it back as uncommitted changes, when the branch's tip is still the one it was
//! taken on; the agent is told so in its prompt.
//! A turn and the gate can run at once, on scoped threads, each in a container of its own; a gate
//! that fails there starts the working role's fresh container while the turn finishes.
//! No turn waits for a container to come or go: one a turn asks for (`Turn::fresh_ahead`, the
//! reviewer's after the working role's) starts beside it, and one the work leaves is removed on a
//! thread of its own (`remove_beside`); each has a name of its own (`fresh_key`), so one can start
//! while another still goes. Removed when dropped (on success, error or panic), every removal
//! waited for.
use crate::context::Context;
use crate::prompts::turns;
use crate::seam::{Heard, Sandboxed, Turn};
use crate::warm_cache::{self, WarmUp};
use anyhow::Result;
use sandcastle_core::agent::{self, AgentEvent, AgentOutcome, AgentRun, CommitsOut, TimeLimit};
use sandcastle_core::ask;
use sandcastle_core::checkout;
use sandcastle_core::gate::{self, GateOutcome};
use sandcastle_core::git::{Imported, WorkRepo};
use sandcastle_core::hand_out::{self, Commits};
use sandcastle_core::progress::Status;
use sandcastle_core::proxy::{Budget, WorkProxy};
use sandcastle_core::role::{Role, WorkKey};
use sandcastle_core::sandbox::{self, Relay, Sandbox, SandboxSpec};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::{JoinHandle, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// After the completion signal, how long the agent's process may take to exit.
const EXIT_GRACE: Duration = Duration::from_secs(30);

pub struct WorkSandbox<'a> {
    ctx: &'a Context,
    key: WorkKey,
    /// Its containers' and logs' name: the key's slug, or an attempt's (`issue-42-b`).
    slug: String,
    /// What the live view calls it: the key, or the key and the attempt.
    name: String,
    /// Transcripts and session files of this work in this run.
    log_dir: PathBuf,
    repo: &'a WorkRepo,
    /// Variables for this work's execs besides the run's (`outbox::sandbox_env`).
    work_env: Vec<(String, String)>,
    sandbox: Option<Sandbox>,
    /// A fresh container started ahead, with no checkout yet: the next turn that needs a fresh
    /// container takes it.
    ahead: Option<Sandbox>,
    /// This work's socket of the model proxy, opened with the sandbox; shared with a gate that
    /// runs beside a turn.
    proxy: Option<Arc<WorkProxy>>,
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
    /// The role with tools whose turns ran in `sandbox`: another such role gets a fresh one.
    written_by: Option<Role>,
    /// The checkout's tree as each role's last removed container left it, for its next one.
    carried: Vec<Carried>,
    /// Containers the work left, each being removed on a thread of its own: waited for when the
    /// work's sandbox is dropped.
    removals: Vec<JoinHandle<Result<()>>>,
    /// How many turn containers this work has named (`fresh_key`).
    named: u32,
}

/// A checkout's tree taken out of a container that went while its work goes on.
struct Carried {
    /// The role whose turns wrote it: only its next container gets it.
    role: Role,
    /// The work branch's tip it was taken on: it goes back only onto the same tip.
    tip: String,
    /// The snapshot bundle, only bytes to the host.
    file: tempfile::NamedTempFile,
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
            slug: key.slug(),
            name: key.to_string(),
            log_dir: ctx.work_log_dir(&key.slug()),
            repo,
            work_env: Vec::new(),
            sandbox: None,
            ahead: None,
            proxy: None,
            budget: Budget::default(),
            handed_out: None,
            handed_ask: None,
            tip: None,
            written_by: None,
            carried: Vec::new(),
            removals: Vec::new(),
            named: 0,
        }
    }

    /// The sandbox of one of the key's attempts (best of N): containers and logs of its own under
    /// `slug`, shown live as `name`; its spend and refusals count toward the key's.
    pub fn for_attempt(mut self, slug: &str, name: &str) -> WorkSandbox<'a> {
        self.log_dir = self.ctx.work_log_dir(slug);
        self.slug = slug.to_string();
        self.name = name.to_string();
        self
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

    /// This work's socket of the model proxy, opened once for every container of the work (the
    /// agent's and the gate's), so its meter and budget span them all.
    fn open_proxy(&mut self) -> Result<&Arc<WorkProxy>> {
        if self.proxy.is_none() {
            let proxy = self
                .ctx
                .proxy
                .open(&self.key.to_string(), self.budget.clone())?;
            self.proxy = Some(Arc::new(proxy));
        }
        Ok(self.proxy.as_ref().expect("opened above"))
    }

    /// A sibling for a gate (or the warm-up ahead) beside this sandbox's turn: the same work,
    /// variables and proxy (one meter, one budget), no container of its own until its gate (or
    /// warm-up) starts one (and removes it).
    fn for_gate(&mut self) -> Result<WorkSandbox<'a>> {
        self.open_proxy()?;
        let mut gating = WorkSandbox::new(self.ctx, self.key, self.repo);
        gating.slug = self.slug.clone();
        gating.name = self.name.clone();
        gating.log_dir = self.log_dir.clone();
        gating.work_env = self.work_env.clone();
        gating.proxy = self.proxy.clone();
        Ok(gating)
    }

    /// A fresh container for a gate or a warm-up, `key`, with `cache` mounted read-write at
    /// `gate::CACHE` and the `warm` cache, if any, read-only at `gate::WARM`. It reaches the
    /// network as the agent does: through the work's proxy, as `egress` allows (a build fetches
    /// its dependencies).
    fn start_build_container(
        &mut self,
        key: &str,
        cache: &str,
        warm: Option<&str>,
    ) -> Result<Sandbox> {
        let proxy = Arc::clone(self.open_proxy()?);
        let mut env = self.ctx.sandbox_env();
        env.extend(gate::cache_env());
        started(
            &proxy,
            &SandboxSpec {
                volume: Some((cache, gate::CACHE)),
                read_only_volume: warm.map(|warm| (warm, gate::WARM)),
                ..spec(self.ctx, &proxy, key, &env)
            },
        )
    }

    /// The run's warm cache of the base branch's tip, built first (`warm_up`) when neither a gate
    /// nor a warm-up ahead asked for it yet, or waited for while one builds it; `None` when its
    /// warm-up failed.
    fn warm_volume(&mut self) -> Result<Option<String>> {
        let ctx = self.ctx;
        let base = self.repo.base_tip()?;
        Ok(ctx
            .warm_cache
            .volume(&ctx.run_id, &ctx.project, &base, &ctx.progress, |volume| {
                self.warm_up(&base, volume)
            }))
    }

    /// The run's warm cache of the base branch's tip, built by a sibling (this work, its proxy,
    /// a container of its own) on a thread beside the work's turns, so the work's first gate finds
    /// it built rather than building it first; `None` without `check`: no gate, nothing to warm.
    pub fn warm_ahead(&mut self) -> Result<Option<impl FnOnce() + Send + 'a>> {
        if self.ctx.config.commands.check.is_empty() {
            return Ok(None);
        }
        let mut warming = self.for_gate()?;
        Ok(Some(move || {
            // A base tip that cannot be read is the first gate's to say: it asks again.
            let _ = warming.warm_volume();
        }))
    }

    /// Builds the warm cache in `volume`: `check` on a checkout of the base branch's tip `base`
    /// (the forge's, no agent's commit), in a container of its own, removed after.
    fn warm_up(&mut self, base: &str, volume: &str) -> Result<WarmUp> {
        let ctx = self.ctx;
        let sandbox = self.start_build_container(&warm_cache::warm_key(base), volume, None)?;
        let outcome = self.check_in(&sandbox, |sandbox| {
            checkout::seed_base(sandbox, self.repo, &ctx.remote)
        });
        let removed = sandbox.remove();
        let outcome = outcome?;
        removed?;
        Ok(match outcome.failed_step {
            None => WarmUp::Built,
            Some(step) => WarmUp::StepFailed(step),
        })
    }

    /// `check` in a build container (its cache already opened to the agent user by its relay):
    /// `prepare` (the checkout, and for a gate the warm cache's copy first), then the steps.
    fn check_in(
        &self,
        sandbox: &Sandbox,
        prepare: impl FnOnce(&Sandbox) -> Result<()>,
    ) -> Result<GateOutcome> {
        let ctx = self.ctx;
        prepare(sandbox)?;
        gate::run(
            sandbox,
            &ctx.config.commands.check,
            self.gate_bounds(),
            &ctx.redactor,
        )
    }

    /// How long a gate's (and a warm-up's) step may stay silent, and run at all.
    fn gate_bounds(&self) -> gate::Bounds {
        gate::Bounds {
            idle: self.ctx.config.idle_timeout,
            step: self.ctx.config.sandbox.turn_timeout,
        }
    }

    /// Takes the first turn's container, started while the work's repository was prepared, and
    /// its proxy; a container that did not start is the first turn's to start again.
    pub fn take_first(&mut self, mut first: First) {
        let started = first.started.take().and_then(|started| started.join().ok());
        self.proxy = Some(Arc::clone(&first.proxy));
        // Its name was the first: the work's next one is `-2`.
        self.named = 1;
        if let Some(Ok(sandbox)) = started {
            self.ahead = Some(sandbox);
        }
    }

    /// How a container for this work's turns, with a name of its own and no checkout yet, is
    /// started: on this thread or beside a turn.
    fn starter(&mut self) -> Result<impl FnOnce() -> Result<Sandbox> + Send + 'a> {
        let proxy = Arc::clone(self.open_proxy()?);
        let (ctx, key, work_env) = (self.ctx, self.fresh_key(), self.work_env.clone());
        Ok(move || turn_container(ctx, &proxy, &key, &work_env))
    }

    /// The next name for a container of this work's turns: its slug, then `-2`, `-3`, … (one
    /// being removed may still hold the name before).
    fn fresh_key(&mut self) -> String {
        self.named += 1;
        match self.named {
            1 => self.slug.clone(),
            n => format!("{}-{n}", self.slug),
        }
    }

    fn get(&mut self) -> Result<&Sandbox> {
        if self.sandbox.is_none() {
            let sandbox = match self.ahead.take() {
                Some(sandbox) => sandbox,
                None => self.starter()?()?,
            };
            // Dropped (and so removed) if the checkout cannot be made.
            let sandbox = self.sandbox.insert(sandbox);
            checkout::seed(sandbox, self.repo, &self.ctx.sandbox_remote())?;
        }
        Ok(self.sandbox.as_ref().expect("started above"))
    }
}

impl WorkSandbox<'_> {
    /// Lets a container the work leaves while it goes on go, its checkout's tree taken out first
    /// for the next container of the role that wrote it (`stopped`: started again for that).
    /// A tree that cannot be taken is a note: the next container starts from the branch.
    fn retire(&mut self, sandbox: Sandbox, stopped: bool) {
        if let Some(role) = self.written_by {
            self.carried.retain(|c| c.role != role);
            match self.snapshot(&sandbox, stopped) {
                Ok(Some((tip, file))) => self.carried.push(Carried { role, tip, file }),
                Ok(None) => {}
                Err(error) => self.ctx.progress.note(&format!(
                    "{}: the checkout's tree is not carried to the next sandbox: {error:#}",
                    self.name
                )),
            }
        }
        self.remove_beside(sandbox);
    }

    /// Removes `sandbox` on a thread of its own: nothing waits for it but the work's end.
    fn remove_beside(&mut self, sandbox: Sandbox) {
        self.removals
            .push(std::thread::spawn(move || sandbox.remove()));
    }

    /// The checkout's tree on the branch's tip, if it is not the tip's own.
    fn snapshot(
        &self,
        sandbox: &Sandbox,
        stopped: bool,
    ) -> Result<Option<(String, tempfile::NamedTempFile)>> {
        if stopped {
            sandbox.restart()?;
        }
        let tip = self.repo.tip()?;
        let file = self.repo.scratch_file()?;
        let taken = checkout::take_snapshot(sandbox, &tip, file.path())?;
        Ok(taken.then_some((tip, file)))
    }

    /// Puts the tree `role`'s last container left into the fresh one's checkout; whether it did.
    /// A tree taken on another tip is dropped (the branch moved on without it), and one that
    /// cannot be put back is a note: the agent works from the branch.
    fn carry_in(&mut self, role: Role) -> bool {
        let Some(at) = self.carried.iter().position(|c| c.role == role) else {
            return false;
        };
        let carried = self.carried.swap_remove(at);
        let sandbox = self.sandbox.as_ref().expect("started first");
        let restored = match self.repo.tip() {
            Ok(tip) if tip == carried.tip => {
                checkout::restore_snapshot(sandbox, carried.file.path())
            }
            Ok(_) => Err(anyhow::anyhow!("the branch moved on since it was taken")),
            Err(error) => Err(error),
        };
        match restored {
            Ok(()) => {
                self.ctx.progress.note(&format!(
                    "{}: the last sandbox's checkout was carried to the fresh one",
                    self.name
                ));
                true
            }
            Err(error) => {
                self.ctx.progress.note(&format!(
                    "{}: the checkout's tree is not carried to the fresh sandbox: {error:#}",
                    self.name
                ));
                false
            }
        }
    }
}

impl Sandboxed for WorkSandbox<'_> {
    /// One agent run, shown live and tallied.
    fn turn(&mut self, turn: &Turn, heard: &mut dyn FnMut(Heard)) -> Result<AgentOutcome> {
        let ctx = self.ctx;
        let key = self.key.to_string();
        let mut status = Status {
            key: self.name.clone(),
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
            // The turn's own bound (the assessor's), where it is the tighter one.
            time_limit: turn
                .time_limit
                .filter(|limit| limit.after < ctx.config.sandbox.turn_timeout)
                .unwrap_or(TimeLimit {
                    after: ctx.config.sandbox.turn_timeout,
                    key: "[sandbox] turnTimeout",
                }),
            exit_grace: EXIT_GRACE,
            log_dir: &log_dir,
            iteration: turn.iteration,
            commits: CommitsOut {
                known_tip: known_tip.clone(),
                file: commits_file.path().to_path_buf(),
            },
            asks: ctx.config.asks.enabled,
        };
        let started = Instant::now();
        // Roles do not share a container: nothing one wrote (its `$HOME`, its sessions, files it
        // left uncommitted) reaches another but through the commits the host took in.
        let writes = turn.role.max_turns().is_none();
        if self.written_by.is_some_and(|role| role != turn.role)
            && let Some(sandbox) = self.sandbox.take()
        {
            self.retire(sandbox, false);
        }
        if writes {
            self.written_by = Some(turn.role);
        }
        let fresh = self.sandbox.is_none();
        self.get()?;
        let prompt;
        let run = if fresh && self.carry_in(turn.role) {
            prompt = format!("{}{}", turn.prompt, turns::TREE_CARRIED_OVER);
            AgentRun {
                prompt: &prompt,
                ..run
            }
        } else {
            run
        };
        let ahead = match turn.fresh_ahead && self.ahead.is_none() {
            true => Some(self.starter()?),
            false => None,
        };
        let sandbox = self.sandbox.as_ref().expect("started above");
        let (outcome, ahead) = std::thread::scope(|scope| {
            let ahead = ahead.map(|start| scope.spawn(start));
            let outcome = agent::run(sandbox, &run, &ctx.redactor, &mut |event| {
                match event {
                    AgentEvent::ToolCall(call) => status.last_tool = call.to_string(),
                    AgentEvent::Usage(usage) => status.cost_usd = cost_before + usage.cost_usd,
                    AgentEvent::Ask(ask) => return heard(Heard::Ask(ask)),
                }
                ctx.progress.update(&status);
                heard(Heard::Event);
            });
            // A head start only: a container that did not start is the next turn's to start.
            (outcome, ahead.and_then(|ahead| ahead.join().ok()?.ok()))
        });
        if ahead.is_some() {
            self.ahead = ahead;
        }
        let mut outcome = outcome?;
        // What the API itself billed through the proxy, not what the agent's stream says.
        if let Some(proxy) = &self.proxy {
            outcome.usage = proxy.take_usage();
        }
        if outcome.sandbox_stopped
            && let Some(sandbox) = self.sandbox.take()
        {
            // Let go now: nothing but its tree comes out of it.
            self.retire(sandbox, true);
            ctx.progress.note(&format!(
                "{}: the sandbox stopped during {} iteration {}; the next turn starts a fresh one from the work branch",
                self.name, turn.role, turn.counted
            ));
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

    /// The work branch's tip, checked in a fresh container from the image: a checkout made from
    /// the work repository, a fresh `$HOME`, nothing the agent's container wrote, and a build
    /// cache volume of its own, removed with the container, filled first with a copy of the
    /// run's warm cache of the base branch (`warm_cache.rs`), which it mounts read-only: nothing
    /// carries over from an earlier gate, whose commit the agent wrote too.
    fn gate(&mut self) -> Result<GateOutcome> {
        let ctx = self.ctx;
        // The commit the checkout below is made of: the branch's tip, as the seed bundles it.
        let commit = self.repo.tip()?;
        let started = Instant::now();
        let warm = self.warm_volume()?;
        let key = format!("{}-gate", self.slug);
        let cache = format!("{}-cache", sandbox::container_name(&ctx.run_id, &key));
        sandbox::provider().create_volume(&cache, &ctx.run_id, &ctx.project)?;
        let sandbox = match self.start_build_container(&key, &cache, warm.as_deref()) {
            Ok(sandbox) => sandbox,
            Err(error) => {
                let _ = sandbox::provider().remove_volumes(&[&cache]);
                return Err(error);
            }
        };
        let outcome = self.check_in(&sandbox, |sandbox| match warm {
            Some(_) => {
                checkout::seed_after(sandbox, self.repo, &ctx.remote, &gate::copy_warm_script())
            }
            None => checkout::seed(sandbox, self.repo, &ctx.remote),
        });
        let removed = sandbox
            .remove()
            .and_then(|()| sandbox::provider().remove_volumes(&[&cache]));
        let outcome = GateOutcome {
            commit: Some(commit),
            ..outcome?
        };
        removed?;
        ctx.report
            .record_gate(&self.key.to_string(), outcome.passed, started.elapsed());
        Ok(outcome)
    }

    /// The gate on a scoped thread while the turn runs here: each starts its own container, so
    /// neither waits for the other's to be created, and nothing is taken in until both end.
    fn turn_beside_gate(
        &mut self,
        turn: &Turn,
        heard: &mut dyn FnMut(Heard),
    ) -> Result<(AgentOutcome, Result<GateOutcome>)> {
        let mut gating = self.for_gate()?;
        let start_ahead = self.starter()?;
        std::thread::scope(|scope| {
            let gate = scope.spawn(move || {
                let gated = gating.gate();
                // A failed gate sends the work back to its working role, which never takes over
                // the reviewer's container: its fresh one starts now. A head start only: without
                // it, the turn starts its own.
                let ahead = match &gated {
                    Ok(gate) if !gate.passed => start_ahead().ok(),
                    _ => None,
                };
                (gated, ahead)
            });
            let outcome = self.turn(turn, heard);
            let (gated, ahead) = gate
                .join()
                .unwrap_or_else(|_| (Err(anyhow::anyhow!("the gate's thread panicked")), None));
            if let Some(ahead) = ahead
                && let Some(unused) = self.ahead.replace(ahead)
            {
                self.remove_beside(unused);
            }
            Ok((outcome?, gated))
        })
    }

    /// Into this work's own container (started, with its checkout, if it is not yet): the turn
    /// that follows runs there unless another role with tools wrote in it.
    fn add_candidates(&mut self, candidates: &[(char, &WorkRepo)]) -> Result<()> {
        let sandbox = self.get()?;
        for (letter, repo) in candidates {
            checkout::add_candidate(sandbox, repo, *letter)?;
        }
        Ok(())
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
        ask::read_outbox(sandbox, scratch.path())
    }

    /// What the last turn handed out, else with an exec of its own; without a sandbox there is
    /// nothing new.
    fn take_commits(&mut self) -> Result<Imported> {
        let imported = match (self.handed_out.take(), &self.sandbox) {
            (Some(out), _) => {
                checkout::take_handed_out(self.repo, out.commits, out.file.path(), &out.known_tip)
            }
            (None, Some(sandbox)) => checkout::take_commits(sandbox, self.repo),
            (None, None) => self.repo.tip().map(Imported::Tip),
        }?;
        if let Imported::Tip(tip) = &imported {
            self.tip = Some(tip.clone());
        }
        Ok(imported)
    }

    /// The work's containers go beside what follows (publishing, giving up).
    fn release(&mut self) {
        for sandbox in [self.sandbox.take(), self.ahead.take()]
            .into_iter()
            .flatten()
        {
            self.remove_beside(sandbox);
        }
    }
}

impl Drop for WorkSandbox<'_> {
    /// Every container of the work removed, each removal waited for: a work leaves no container.
    fn drop(&mut self) {
        self.release();
        for removal in self.removals.drain(..) {
            let removed = removal
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("its thread panicked")));
            if let Err(error) = removed {
                self.ctx.progress.note(&format!(
                    "{}: a sandbox was not removed: {error:#}",
                    self.name
                ));
            }
        }
    }
}

/// The first turn's container of a work, starting on a thread of `scope` while the work's
/// repository is fetched (before the work's sandbox exists): [`WorkSandbox::take_first`] takes it,
/// and one dropped untaken is removed.
pub struct First<'scope> {
    proxy: Arc<WorkProxy>,
    started: Option<ScopedJoinHandle<'scope, Result<Sandbox>>>,
}

impl<'scope> First<'scope> {
    /// Opens the work's proxy (under `budget`) and starts the container named `slug` for the
    /// work `key`, with the work's variables `work_env`.
    pub fn start<'env>(
        scope: &'scope Scope<'scope, 'env>,
        ctx: &'env Context,
        key: WorkKey,
        slug: &str,
        work_env: &[(String, String)],
        budget: Budget,
    ) -> Result<First<'scope>> {
        let proxy = Arc::new(ctx.proxy.open(&key.to_string(), budget)?);
        let (on_thread, slug, work_env) = (Arc::clone(&proxy), slug.to_string(), work_env.to_vec());
        let started = scope.spawn(move || turn_container(ctx, &on_thread, &slug, &work_env));
        Ok(First {
            proxy,
            started: Some(started),
        })
    }
}

impl Drop for First<'_> {
    fn drop(&mut self) {
        if let Some(Ok(Ok(sandbox))) = self.started.take().map(ScopedJoinHandle::join) {
            let _ = sandbox.remove();
        }
    }
}

/// The limits and wiring every container of a work gets, its proxy `proxy`.
fn spec<'s>(
    ctx: &'s Context,
    proxy: &'s WorkProxy,
    key: &'s str,
    env: &'s [(String, String)],
) -> SandboxSpec<'s> {
    let limits = &ctx.config.sandbox;
    SandboxSpec {
        provider: sandbox::provider(),
        image: &ctx.config.image_name,
        run_id: &ctx.run_id,
        project: &ctx.project,
        key,
        network: limits.network,
        memory: &limits.memory,
        pids_limit: limits.pids_limit,
        mounts: &limits.mounts,
        env,
        tea: None,
        volume: None,
        read_only_volume: None,
        relay: Relay {
            socket_dir: proxy.dir(),
        },
        runtime: limits.runtime.as_deref(),
    }
}

/// Starts the container of `spec` (made by [`spec`]) and names its relay's port, once the relay
/// said it, in the variables of its execs.
fn started(proxy: &WorkProxy, spec: &SandboxSpec) -> Result<Sandbox> {
    let mut sandbox = Sandbox::start(spec)?;
    sandbox.add_env(proxy.sandbox_env(sandbox.relay_port()));
    Ok(sandbox)
}

/// A container for a work's turns, named by `key`, with no checkout yet: the run's variables and
/// the work's `work_env`, and the agent's forge login where the project has one.
fn turn_container(
    ctx: &Context,
    proxy: &WorkProxy,
    key: &str,
    work_env: &[(String, String)],
) -> Result<Sandbox> {
    let mut env = ctx.sandbox_env();
    env.extend(work_env.iter().cloned());
    let tea = ctx.tea_login();
    started(
        proxy,
        &SandboxSpec {
            tea: tea.as_ref(),
            ..spec(ctx, proxy, key, &env)
        },
    )
}
