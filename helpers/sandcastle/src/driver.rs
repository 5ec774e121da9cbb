//! One driver for every piece of work, an issue or a sent-back pull request, through its saved
//! phases: the working agent iterates, resuming its own session each time; when it says it is done
//! the orchestrator runs the gate itself; the reviewer's verdict can send the work back; then the
//! work publishes. A stopped run starts again where the saved state says.
//!
//! The driver reaches the sandbox only through [`Sandboxed`], so its tests run without Docker.
use crate::asking;
use crate::clarify;
use crate::context::Context;
use crate::green;
use crate::outbox::{self, Due};
use crate::prompts;
use crate::publish::{self, Published};
use crate::reviews;
use crate::state::{Outcome, Phase, Trouble, Verdict, WorkState};
use crate::work_sandbox::WorkSandbox;
use anyhow::{Result, bail};
use sandcastle_core::agent::{AgentOutcome, Ending, SavedSession, TimeLimit};
use sandcastle_core::forge::{Issue, Pull};
use sandcastle_core::gate::GateOutcome;
use sandcastle_core::git::{Imported, WorkRepo};
use sandcastle_core::plan::branch_for;
use sandcastle_core::proxy::Budget;
use sandcastle_core::questions::{self, BadQuestions, Questions};
use sandcastle_core::role::{Role, WorkKey};

/// What the driver asks of a piece of work's sandbox.
pub trait Sandboxed {
    /// One agent turn. `Err` means the machinery broke; an agent that failed is an `Ending`.
    /// `relayed` gets each ask the agent makes while the turn runs (`relay.rs`), unchecked.
    fn turn(&mut self, turn: &Turn, relayed: &mut dyn FnMut(Relayed)) -> Result<AgentOutcome>;
    /// The `[commands] check` steps, run by the orchestrator in the sandbox.
    fn gate(&mut self) -> Result<GateOutcome>;
    /// The agent's commits, brought into the work repository (the new tip), or refused.
    fn take_commits(&mut self) -> Result<Imported>;
    /// The bytes of the ask the agent left in its outbox (`sandcastle ask`), unchecked.
    fn take_ask(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

/// An ask relayed while a turn runs: its bytes, or why its record was refused.
pub type Relayed = Result<Vec<u8>, String>;

pub struct Turn<'a> {
    pub role: Role,
    /// The role's turn on this work, from 1 (it names the transcript).
    pub iteration: u32,
    /// The iteration as `maxIterations` counts it (question turns left out), shown live.
    pub counted: u32,
    pub max_iterations: u32,
    pub prompt: &'a str,
    pub resume: Option<&'a SavedSession>,
    /// A tighter bound on the turn than `[sandbox] turnTimeout`, output or not.
    pub time_limit: Option<TimeLimit>,
}

/// A piece of work: what it is says its key, branch, working role, prompts and how it publishes.
pub enum Piece<'a> {
    Issue(&'a Issue),
    Pull(&'a Pull),
    /// One of sandcastle's own pull requests that a failing CI status or a conflict made
    /// unmergeable (`green.rs`).
    Green(&'a Pull, &'a Trouble),
}

impl Piece<'_> {
    pub fn key(&self) -> WorkKey {
        match self {
            Piece::Issue(issue) => WorkKey::Issue(issue.number),
            Piece::Pull(pull) | Piece::Green(pull, _) => WorkKey::Pull(pull.number),
        }
    }

    /// The issue's or pull request's number on the forge.
    pub fn number(&self) -> u64 {
        match self {
            Piece::Issue(issue) => issue.number,
            Piece::Pull(pull) | Piece::Green(pull, _) => pull.number,
        }
    }

    pub fn branch(&self) -> String {
        match self {
            Piece::Issue(issue) => branch_for(issue.number),
            Piece::Pull(pull) | Piece::Green(pull, _) => pull.head_branch.clone(),
        }
    }

    pub fn working_role(&self) -> Role {
        match self {
            Piece::Issue(_) => Role::Implementer,
            Piece::Pull(_) | Piece::Green(..) => Role::PrFixer,
        }
    }

    /// The prompt the working role starts from.
    fn prompt(&self) -> &'static str {
        match self {
            Piece::Green(..) => "keep-green",
            _ => self.working_role().prompt(),
        }
    }

    /// Issues and a green round get a reviewer; a sent-back pull request goes back to the human
    /// who reviewed it.
    fn reviewed(&self) -> bool {
        !matches!(self, Piece::Pull(_))
    }

    /// The prompt variables of its roles (the common ones come from `Context::prompt`).
    fn vars(&self, ctx: &Context, base: &str) -> Result<Vec<(&'static str, String)>> {
        Ok(match self {
            Piece::Issue(issue) => vec![
                ("ISSUE_NUMBER", issue.number.to_string()),
                ("ISSUE_TITLE", issue.title.clone()),
                ("ISSUE_BODY", issue.body.clone()),
                ("BRANCH", self.branch()),
                ("BASE_BRANCH", base.to_string()),
                (
                    "ASKING",
                    prompts::asking(ctx.config.questions.enabled, issue.number),
                ),
            ],
            Piece::Pull(pull) => vec![
                ("PR_NUMBER", pull.number.to_string()),
                ("PR_TITLE", pull.title.clone()),
                ("BRANCH", self.branch()),
                ("BASE_BRANCH", base.to_string()),
                ("REVIEWS", reviews::for_pr_fixer(ctx, pull.number)?),
                (
                    "ASKING",
                    prompts::asking(ctx.config.questions.enabled, pull.number),
                ),
            ],
            Piece::Green(pull, trouble) => {
                // The reviewer judges the branch against the issue it implements.
                let number = crate::planning::own_issue(pull, &ctx.login, &ctx.config.repo, base)
                    .map_err(|why| {
                    anyhow::anyhow!("pr #{}: not sandcastle's own: {why}", pull.number)
                })?;
                let issue = ctx.forge.issue(number)?;
                let (task, checks) = green::task(trouble, base);
                vec![
                    ("PR_NUMBER", pull.number.to_string()),
                    ("PR_TITLE", pull.title.clone()),
                    ("BRANCH", self.branch()),
                    ("BASE_BRANCH", base.to_string()),
                    ("TASK", task),
                    ("FAILING_CHECKS", checks),
                    ("ISSUE_NUMBER", issue.number.to_string()),
                    ("ISSUE_TITLE", issue.title),
                    ("ISSUE_BODY", issue.body),
                ]
            }
        })
    }
}

/// Works on `piece` from its saved state (or afresh) until it is published or given up.
pub fn work_on(ctx: &Context, piece: &Piece, base: &str) -> Result<Outcome> {
    let key = piece.key();
    let slug = key.slug();
    let mut state = match WorkState::resume(&ctx.state_dir(), &slug)? {
        Some(state) => {
            ctx.progress.note(&format!(
                "{key}: resuming saved work ({:?} phase)",
                state.phase
            ));
            state
        }
        None => {
            let mut state = WorkState::new(&slug, &piece.branch(), &ctx.run_id);
            outbox::carry(WorkState::load(&ctx.state_dir(), &slug)?, &mut state);
            match piece {
                Piece::Issue(_) => state.phase = Phase::Clarify,
                Piece::Green(_, trouble) => state.green = Some((*trouble).clone()),
                Piece::Pull(_) => {}
            }
            state
        }
    };
    let repo = WorkRepo::prepare(
        &ctx.repo_dir(&slug),
        &ctx.remote,
        &ctx.creds,
        &piece.branch(),
        base,
    )?;
    if state.start_commit.is_none() {
        state.start_commit = Some(repo.tip()?);
        state.save(&ctx.state_dir())?;
    }
    if let Piece::Green(pull, trouble) = piece {
        // After the state is saved: a round counted is a round that resumes.
        green::begin(ctx, pull.number, trouble)?;
    }
    let repo = repo.starting_at(state.start_commit.as_deref().expect("set above"));
    let budget = Budget {
        spent: state.cost_usd,
        limit: ctx.config.budget.max_cost_per_issue,
    };
    let mut sandbox = WorkSandbox::new(ctx, key, &repo)
        .with_env(&outbox::sandbox_env(key, &state))
        .with_budget(budget);
    drive(ctx, piece, &repo, base, &mut state, &mut sandbox)
}

/// The state machine over the saved phases; every step is saved before the next.
pub fn drive(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Outcome> {
    let key = piece.key();
    let vars = piece.vars(ctx, base)?;
    let max = ctx.config.max_iterations;
    loop {
        if matches!(state.phase, Phase::Clarify | Phase::Work | Phase::Review) {
            match budget_spent(ctx, state) {
                Some(Spent::Issue(why)) => {
                    ctx.progress.note(&format!("{key}: stopped: {why}"));
                    state.stopped_by = Some(why);
                    state.phase = Phase::GaveUp;
                }
                Some(Spent::Run(why)) => {
                    ctx.progress
                        .note(&format!("{key}: stopped for this run: {why}"));
                    publish::stopped_for_the_run(ctx, key, &why)?;
                    return Ok(Outcome::Stopped(why));
                }
                None => {}
            }
        }
        match state.phase {
            Phase::Work if state.counted_iterations() >= max => state.phase = Phase::GaveUp,
            Phase::Work => {
                if ctx.is_stopping() {
                    bail!("{key}: stopped before iteration {}", state.iterations + 1);
                }
                outbox::poll(ctx, key, state, Due::Now)?;
                let outcome = working_turn(ctx, piece, &vars, state, sandbox)?;
                // The session and the cost are kept even if taking the commits fails.
                state.save(&ctx.state_dir())?;
                let imported = sandbox.take_commits()?;
                let handed = sandbox.take_ask();
                outbox::take(ctx, key, state, handed)?;
                if let Imported::Refused(why) = imported {
                    ctx.progress
                        .note(&format!("{key}: the agent's commits were refused: {why}"));
                    state.last_summary = format!(
                        "iteration {} failed: its commits were refused: {why}",
                        state.iterations
                    );
                    state.nudge = Some(refused_nudge(&why));
                    state.save(&ctx.state_dir())?;
                    continue;
                }
                // Without `[questions]` the agent was not taught the signal: a block is just text.
                // A keep-green round is not held for a person: past its rounds one comment asks.
                let asked = match piece {
                    _ if !ctx.config.questions.enabled => None,
                    Piece::Green(..) => None,
                    Piece::Issue(_) | Piece::Pull(_) => {
                        questions::find(&outcome.result_text, piece.number())
                    }
                };
                if let Some(asked) = asked {
                    // A turn that asks does not count against maxIterations, nor in the report.
                    state.question_turns += 1;
                    ctx.report
                        .record_question_turn(&key.to_string(), piece.working_role());
                    asked_a_question(ctx, key, state, asked);
                    state.save(&ctx.state_dir())?;
                    continue;
                }
                state.bad_questions = 0;
                match outcome.ending {
                    Ending::Completed if !committed(piece, repo)? => {
                        state.last_summary = format!(
                            "The agent said it was done but committed nothing.\n\n{}",
                            state.last_summary
                        );
                        state.phase = Phase::GaveUp;
                    }
                    Ending::Completed if let Some(why) = green::unfinished(piece, repo, state)? => {
                        ctx.progress
                            .note(&format!("{key}: the agent said it was done, but {why}"));
                        state.nudge = Some(format!(
                            "You said you were done, but {why}. Fix that, commit, and say so again."
                        ));
                    }
                    Ending::Completed => {
                        let gate = run_gate(ctx, state, sandbox)?;
                        if gate.passed {
                            state.nudge = None;
                            state.phase = if piece.reviewed() {
                                Phase::Review
                            } else {
                                Phase::Publish
                            };
                        } else {
                            ctx.progress.note(&format!(
                                "{key}: the agent said it was done, but `check` failed (gate run {})",
                                state.gate_runs
                            ));
                            state.nudge = Some(gate_nudge(&gate, state.gate_runs));
                        }
                    }
                    Ending::Stopped => state.nudge = None,
                    Ending::Failed(why) => {
                        state.nudge = None;
                        state.last_summary =
                            format!("iteration {} failed: {why}", state.iterations);
                    }
                }
            }
            Phase::Clarify => match piece {
                Piece::Issue(issue) => {
                    if let Some(outcome) = clarify::step(ctx, issue, state, sandbox)? {
                        state.save(&ctx.state_dir())?;
                        return Ok(outcome);
                    }
                }
                Piece::Pull(_) | Piece::Green(..) => state.phase = Phase::Work,
            },
            Phase::Review => review(ctx, piece, repo, base, &vars, state, sandbox)?,
            Phase::Waiting => {
                let Some(waiting) = state.waiting.clone() else {
                    bail!(
                        "{key}: its saved state waits for no question: delete its state file to start afresh"
                    );
                };
                match waiting.answer {
                    Some(answer) => {
                        ctx.progress.note(&format!(
                            "{key}: {} answered through {}; the agent goes on",
                            answer.by, answer.channel
                        ));
                        state.waiting = None;
                        // A clarification's answer goes to the next assessment instead.
                        if !clarify::take_answer(state, &answer) {
                            state.nudge = Some(prompts::answer(&waiting.questions, &answer));
                            state.phase = Phase::Work;
                        }
                    }
                    None => {
                        asking::ask(ctx, piece.number(), state)?;
                        return Ok(Outcome::Waiting);
                    }
                }
            }
            Phase::Publish => match publish::publish(ctx, piece, repo, base, state)? {
                Published::Pull(pull) => {
                    state.pull = Some(pull);
                    state.phase = Phase::Done;
                }
                Published::HeldBack(why) => {
                    ctx.progress.note(&format!("{key}: not published: {why}"));
                    state.stopped_by = Some(why);
                    state.phase = Phase::GaveUp;
                }
            },
            Phase::Done => {
                return Ok(match piece {
                    Piece::Issue(_) => Outcome::PullRequest(state.pull.unwrap_or_default()),
                    Piece::Pull(_) => Outcome::Reworked,
                    Piece::Green(_, trouble) => Outcome::KeptGreen(trouble.what()),
                });
            }
            Phase::GaveUp => {
                publish::give_up(ctx, key, state)?;
                if let Piece::Green(pull, _) = piece {
                    green::end(ctx, pull.number)?;
                }
                if let Some(why) = &state.stopped_by {
                    return Ok(Outcome::Stopped(why.clone()));
                }
                return Ok(Outcome::GaveUp {
                    iterations: state.counted_iterations(),
                });
            }
        }
        state.save(&ctx.state_dir())?;
    }
}

/// The agent ended its turn with a `<questions>` block: a valid one waits for a person; the first
/// unusable one gets a correction turn in the same session, the second ends the work.
fn asked_a_question(
    ctx: &Context,
    key: WorkKey,
    state: &mut WorkState,
    asked: Result<Questions, BadQuestions>,
) {
    match asked {
        Ok(questions) => {
            state.bad_questions = 0;
            state.nudge = None;
            state.waiting = Some(asking::waiting(ctx, questions));
            state.phase = Phase::Waiting;
        }
        Err(why) if state.bad_questions == 0 => {
            ctx.progress.note(&format!(
                "{key}: the agent's <questions> block is unusable ({why}); asking once more"
            ));
            state.bad_questions = 1;
            state.nudge = Some(question_correction(&why));
        }
        Err(why) => {
            state.stopped_by = Some(format!(
                "the agent's <questions> block was unusable twice: {why}"
            ));
            state.phase = Phase::GaveUp;
        }
    }
}

fn question_correction(why: &BadQuestions) -> String {
    format!(
        "Your <questions> block could not be used: {why}. If you need a person's decision, end your \
         message with exactly one corrected block in the documented shape (`<questions issueNumber=\"N\">` \
         with a <title>, an optional <prose>, and one or more <question>s, each with a <title>, an \
         optional <prose> and optional <options> of <option>s with a <title> and an optional <prose>; \
         nothing else). Otherwise go on with the work."
    )
}

/// A budget that is spent, checked before every agent turn.
enum Spent {
    /// This work's own: it stops and waits for a person, like work given up.
    Issue(String),
    /// The run's: this run starts no more turns; a later run goes on.
    Run(String),
}

fn budget_spent(ctx: &Context, state: &WorkState) -> Option<Spent> {
    let budget = &ctx.config.budget;
    if let Some(limit) = budget.max_cost_per_issue
        && state.cost_usd >= limit
    {
        return Some(Spent::Issue(format!(
            "this work has cost ${:.2}, which reaches [budget] maxCostPerIssue (${limit:.2})",
            state.cost_usd
        )));
    }
    let spent = ctx.report.total_cost();
    match budget.max_cost_per_run {
        Some(limit) if spent >= limit => Some(Spent::Run(format!(
            "this run has spent ${spent:.2}, which reaches [budget] maxCostPerRun (${limit:.2})"
        ))),
        _ => None,
    }
}

/// One iteration of the working role: the saved session resumed with a short prompt, or, when
/// there is none to resume, a fresh session whose prompt carries the last summary.
fn working_turn(
    ctx: &Context,
    piece: &Piece,
    vars: &[(&'static str, String)],
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<AgentOutcome> {
    let key = piece.key();
    let role = piece.working_role();
    let max = ctx.config.max_iterations;
    let iteration = state.iterations + 1;
    let counted = state.counted_iterations() + 1;
    let tell = outbox::telling(ctx, state)?;
    let telling = |prompt: String| match &tell {
        Some(answer) => format!("{prompt}\n\n{answer}"),
        None => prompt,
    };
    let whole_prompt = |state: &WorkState| -> Result<String> {
        let iteration_text = counted.to_string();
        let max_text = max.to_string();
        let mut all: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        all.extend([
            ("ITERATION", iteration_text.as_str()),
            ("MAX_ITERATIONS", max_text.as_str()),
        ]);
        let mut prompt = ctx.prompt(piece.prompt(), &all)?;
        if iteration > 1 {
            prompt += &earlier_iterations(&state.last_summary, state.nudge.as_deref());
        }
        Ok(prompt)
    };
    let mut outcome = None;
    if let Some(saved) = state.session(role).cloned() {
        if saved.file.is_file() {
            // The first turn resumes the assessment's session (`clarify.rs`) with the whole prompt.
            let prompt = telling(match state.iterations {
                0 => whole_prompt(state)?,
                _ => continuation(counted, max, state.nudge.as_deref()),
            });
            let resumed = take_turn(ctx, state, sandbox, role, iteration, &prompt, Some(&saved))?;
            if refused_resume(&resumed) {
                ctx.progress.note(&format!(
                    "{key}: Claude Code could not resume session {}; starting a fresh session with the last summary",
                    saved.session_id
                ));
            } else {
                outcome = Some(resumed);
            }
        } else {
            ctx.progress.note(&format!(
                "{key}: the saved session {} is gone; starting a fresh session with the last summary",
                saved.file.display()
            ));
        }
    }
    let outcome = match outcome {
        Some(outcome) => outcome,
        None => {
            let mut prompt = whole_prompt(state)?;
            prompt += &clarify::for_implementer(state);
            take_turn(ctx, state, sandbox, role, iteration, &telling(prompt), None)?
        }
    };
    state.iterations = iteration;
    // Told once its session (which holds it) is saved; otherwise told again next turn.
    if tell.is_some() && outcome.session.is_some() {
        outbox::told(state);
    }
    match &outcome.ending {
        Ending::Completed => {}
        // A turn that asks a question says so itself.
        Ending::Stopped if outcome.result_text.contains("<questions") => {}
        Ending::Stopped => ctx.progress.note(&format!(
            "{key}: {role} iteration {counted}/{max} ended without the completion signal; transcript: {}",
            outcome.transcript.display()
        )),
        Ending::Failed(why) => ctx.progress.note(&format!(
            "{key}: {role} iteration {counted}/{max} failed: {why}"
        )),
    }
    if !matches!(outcome.ending, Ending::Failed(_)) {
        state.last_summary = outcome.result_text.clone();
    }
    Ok(outcome)
}

/// A turn, with its session and cost kept in the state.
fn take_turn(
    ctx: &Context,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
    role: Role,
    iteration: u32,
    prompt: &str,
    resume: Option<&SavedSession>,
) -> Result<AgentOutcome> {
    let turn = Turn {
        role,
        iteration,
        // The working role's turn is not counted in `state` until it ends.
        counted: match role {
            Role::Reviewer => iteration,
            _ => state.counted_iterations() + 1,
        },
        max_iterations: ctx.config.max_iterations,
        prompt,
        resume,
        time_limit: None,
    };
    // An ask made while the agent works is published at once; the end of the turn is the fallback.
    let key = WorkKey::from_slug(&state.slug);
    let mut relayed = |ask: Relayed| {
        let Some(key) = key else { return };
        let handed = ask.map(Some).map_err(anyhow::Error::msg);
        if let Err(e) = outbox::take(ctx, key, state, handed) {
            ctx.progress.note(&format!(
                "{key}: the ask made during the turn is not published yet ({}); the end of the turn tries again",
                ctx.redactor.error(&e)
            ));
        }
    };
    let outcome = sandbox.turn(&turn, &mut relayed)?;
    state.cost_usd += outcome.usage.cost_usd;
    match &outcome.session {
        Some(session) => state.set_session(role, session.clone()),
        // A resumed session that could not be read back is not resumed again.
        None if resume.is_some() => state.forget_session(role),
        None => {}
    }
    Ok(outcome)
}

/// Claude Code refused `--resume` when it failed before it even opened a session (not when its
/// sandbox stopped under it).
fn refused_resume(outcome: &AgentOutcome) -> bool {
    matches!(outcome.ending, Ending::Failed(_))
        && outcome.session.is_none()
        && !outcome.sandbox_stopped
}

/// Whether the work has something to publish: commits beyond the base for an issue. A sent-back
/// pull request always has its answer to publish, commits or not.
fn committed(piece: &Piece, repo: &WorkRepo) -> Result<bool> {
    Ok(match piece {
        Piece::Issue(_) => !repo.new_commits()?.is_empty(),
        Piece::Pull(_) | Piece::Green(..) => true,
    })
}

/// The gate, counted; `check = []` means no gate.
fn run_gate(
    ctx: &Context,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<GateOutcome> {
    if ctx.config.commands.check.is_empty() {
        return Ok(GateOutcome::no_steps());
    }
    state.gate_runs += 1;
    let gate = sandbox.gate()?;
    state.gate_passed = Some(gate.passed);
    state.gate_commit = gate.commit.clone();
    Ok(gate)
}

/// The reviewer's round: its verdict, and the gate again if it changed the branch.
fn review(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    vars: &[(&'static str, String)],
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<()> {
    let key = piece.key();
    let round = state.review_rounds + 1;
    let rounds = ctx.config.review.rounds;
    let saved = state
        .session(Role::Reviewer)
        .filter(|s| s.file.is_file())
        .cloned();
    let prompt = match &saved {
        Some(_) => review_again(base),
        None => {
            let all: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
            ctx.prompt(Role::Reviewer.prompt(), &all)?
        }
    };
    let before = repo.tip()?;
    let outcome = take_turn(
        ctx,
        state,
        sandbox,
        Role::Reviewer,
        round,
        &prompt,
        saved.as_ref(),
    )?;
    let (after, refused) = match sandbox.take_commits()? {
        Imported::Tip(tip) => (tip, None),
        Imported::Refused(why) => (before.clone(), Some(why)),
    };
    let mut verdict = match (refused, &outcome.ending) {
        (Some(why), _) => Verdict {
            approved: false,
            summary: format!("The reviewer's commits were refused: {why}"),
        },
        (None, Ending::Completed) => Verdict {
            approved: true,
            summary: outcome.result_text.clone(),
        },
        (None, Ending::Stopped) => Verdict {
            approved: false,
            summary: outcome.result_text.clone(),
        },
        (None, Ending::Failed(why)) => Verdict {
            approved: false,
            summary: format!("The review failed: {why}"),
        },
    };
    // Commits the reviewer made have not passed the gate yet.
    if after != before {
        let gate = run_gate(ctx, state, sandbox)?;
        if !gate.passed {
            verdict.approved = false;
            verdict.summary = format!(
                "{}\n\n{}",
                verdict.summary,
                gate_nudge(&gate, state.gate_runs)
            );
        }
    }
    state.review_rounds = round;
    let next = after_review(
        &verdict,
        round,
        rounds,
        state.counted_iterations(),
        ctx.config.max_iterations,
    );
    if !verdict.approved {
        ctx.progress.note(&format!(
            "{key}: the reviewer did not approve (round {round} of {rounds})"
        ));
    }
    if next == Phase::Work {
        state.nudge = Some(review_nudge(&verdict.summary, round, rounds));
    }
    state.verdict = Some(verdict);
    state.phase = next;
    Ok(())
}

/// After a review round: approved work publishes; findings go back to the working agent while
/// rounds and iterations are left; otherwise the pull request opens with the findings outstanding.
pub fn after_review(
    verdict: &Verdict,
    round: u32,
    rounds: u32,
    iterations: u32,
    max_iterations: u32,
) -> Phase {
    if !verdict.approved && round < rounds && iterations < max_iterations {
        Phase::Work
    } else {
        Phase::Publish
    }
}

/// A resumed reviewer's next prompt.
fn review_again(base: &str) -> String {
    format!(
        "The implementer worked on your findings; its new commits are on the branch \
         (`git log origin/{base}..HEAD`). Review the branch again as before. End with \
         <promise>COMPLETE</promise> only if you approve it now; otherwise end with your remaining findings."
    )
}

/// A resumed session's next prompt: the iteration, and what the orchestrator saw.
pub fn continuation(iteration: u32, max: u32, nudge: Option<&str>) -> String {
    let saw = nudge.unwrap_or(
        "Your last message did not end with <promise>COMPLETE</promise>, so the work is not done yet.",
    );
    format!(
        "# Iteration {iteration} of at most {max}\n\n{saw}\n\nGo on from where you are: your commits are \
         in the checkout. When the work is done, `check` passes and every change is committed, end your \
         final message with a short summary and <promise>COMPLETE</promise>."
    )
}

/// What a fresh session is told about the iterations before it.
fn earlier_iterations(last_summary: &str, nudge: Option<&str>) -> String {
    let mut text = String::from(
        "\n\n## Where the last iteration left off\n\nEarlier iterations worked on this; their commits are in \
         your checkout. The last one ended with:\n\n",
    );
    text += if last_summary.trim().is_empty() {
        "(no summary)"
    } else {
        last_summary.trim()
    };
    if let Some(nudge) = nudge {
        text += "\n\n";
        text += nudge;
    }
    text
}

pub fn gate_nudge(gate: &GateOutcome, runs: u32) -> String {
    format!(
        "You said you were done, so the orchestrator ran `check` (gate run {runs}). It failed at `{}`. \
         The end of its output:\n\n```\n{}\n```\n\nFix what it reports.",
        gate.failed_step.as_deref().unwrap_or("?"),
        gate.tail.trim_end()
    )
}

/// What an agent whose commits were refused is told next.
fn refused_nudge(why: &str) -> String {
    format!(
        "The orchestrator did not take the commits in your checkout: {why}. They are still there; \
         fix them, then go on. Nothing is published until they are taken."
    )
}

fn review_nudge(findings: &str, round: u32, rounds: u32) -> String {
    format!(
        "The reviewer did not approve the change (review round {round} of {rounds}). Its findings:\n\n{}\n\n\
         Address each finding, or say in your summary why one is wrong.",
        findings.trim()
    )
}

#[cfg(test)]
mod tests;
