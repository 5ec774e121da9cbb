//! One driver for every piece of work, an issue or a sent-back pull request, through its saved
//! phases: the working agent iterates, resuming its own session each time; when it says it is done
//! the orchestrator runs the gate itself, beside the reviewer where there is one (a verdict counts
//! only on a commit the gate passed); the reviewer's verdict can send the work back; then the
//! work publishes. A stopped run starts again where the saved state says.
//!
//! The driver reaches the sandbox only through [`Sandboxed`], so its tests run without Docker.
use crate::asking;
use crate::clarify;
use crate::context::Context;
use crate::forge_thread;
use crate::green;
use crate::outbox::{self, Due, Pace};
use crate::piece::Piece;
use crate::planning;
use crate::prompts::{self, turns};
use crate::publish::{self, Published};
use crate::reviews;
use crate::seam::{Heard, Sandboxed, Turn};
use crate::state::{Outcome, Phase, Verdict, WorkState};
use crate::work_sandbox::{First, WorkSandbox};
use anyhow::{Result, bail};
use sandcastle_core::agent::{AgentOutcome, Ending, SavedSession};
use sandcastle_core::gate::GateOutcome;
use sandcastle_core::git::{Imported, WorkRepo};
use sandcastle_core::proxy::Budget;
use sandcastle_core::questions::{self, BadQuestions, Questions};
use sandcastle_core::role::{Role, WorkKey};

mod best_of;

/// Works on `piece` from its saved state (or afresh) until it is published or given up.
pub fn work_on(ctx: &Context, piece: &Piece, base: &str) -> Result<Outcome> {
    work_under(ctx, piece, base, None)
}

/// As [`work_on`], its proxy under `shared` when several works spend one budget (an issue's
/// attempts), else under its own.
fn work_under(
    ctx: &Context,
    piece: &Piece,
    base: &str,
    shared: Option<&Budget>,
) -> Result<Outcome> {
    let key = piece.key();
    let slug = piece.slug();
    let saved = match piece {
        // An attempt that ended stays ended: its issue's barrier reads it.
        Piece::Attempt(..) => WorkState::load(&ctx.state_dir(), &slug)?,
        _ => WorkState::resume(&ctx.state_dir(), &slug)?,
    };
    let mut state = match saved {
        Some(state) => {
            ctx.progress.note(&format!(
                "{key}: resuming saved work ({} phase)",
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
                Piece::Pull(_) | Piece::Attempt(..) => {}
            }
            state
        }
    };
    let budget = match shared {
        Some(shared) => shared.clone(),
        None => Budget {
            spent: state.cost_usd,
            limit: ctx.config.budget.max_cost_per_issue,
            shared: None,
        },
    };
    let work_env = outbox::sandbox_env(ctx, key, &state);
    std::thread::scope(|scope| {
        // The first turn's container starts while the work's repository is fetched.
        let first = match works_next(ctx, piece, &state) && !best_of::begins(ctx, piece, &state) {
            true => Some(First::start(
                scope,
                ctx,
                key,
                &slug,
                &work_env,
                budget.clone(),
            )?),
            false => None,
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
        let mut sandbox = WorkSandbox::new(ctx, key, &repo)
            .with_env(&work_env)
            .with_budget(budget);
        if let Piece::Attempt(_, attempt) = piece {
            sandbox = sandbox.for_attempt(&slug, &format!("{key} attempt {}", attempt.letter));
        }
        if let Some(first) = first {
            sandbox.take_first(first);
        }
        let warm_ahead = match works_next(ctx, piece, &state) {
            true => sandbox.warm_ahead()?,
            false => None,
        };
        std::thread::scope(|scope| {
            if let Some(warm_ahead) = warm_ahead {
                scope.spawn(warm_ahead);
            }
            drive(ctx, piece, &repo, base, &mut state, &mut sandbox)
        })
    })
}

/// Whether the work's next turn is its working role's, which a gate follows when it is done: the
/// gate's warm cache is then built beside it. Not before an assessment, which may leave the issue
/// waiting for a person.
fn works_next(ctx: &Context, piece: &Piece, state: &WorkState) -> bool {
    match state.phase {
        Phase::Work => true,
        Phase::Clarify => !(ctx.clarifies && matches!(piece, Piece::Issue(_))),
        _ => false,
    }
}

/// What a phase's step ends in: `Some` when the work stops here for now (published, waiting,
/// given up, stopped), `None` when the next phase goes on.
type Step = Option<Outcome>;

/// The state machine over the saved phases, one function each; every step is saved before the
/// next.
pub fn drive(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Outcome> {
    let vars = vars(ctx, piece, base, waits(piece, state))?;
    loop {
        if let Some(outcome) = budget_check(ctx, piece, state)? {
            return Ok(outcome);
        }
        // The phase is matched by value: a step changes the state it carries.
        let step = match (state.phase.clone(), piece) {
            (Phase::Clarify, _) => clarify(ctx, piece, state, sandbox)?,
            (Phase::Work, _) => {
                let began = match piece {
                    Piece::Issue(issue) => best_of::begin(ctx, issue, state)?,
                    _ => false,
                };
                match began {
                    true => None,
                    false => work(ctx, piece, repo, &vars, state, sandbox)?,
                }
            }
            (Phase::Review, _) => review(ctx, piece, repo, base, &vars, state, sandbox)?,
            (Phase::Waiting(_), _) => waiting(ctx, piece, state)?,
            (Phase::Attempts, Piece::Issue(issue)) => best_of::attempts(ctx, issue, base, state)?,
            (Phase::Choose, Piece::Issue(issue)) => {
                best_of::choose(ctx, issue, base, state, sandbox)?
            }
            (Phase::Chosen(letter), Piece::Issue(issue)) => {
                best_of::chosen(ctx, issue, base, state, letter)?
            }
            (Phase::Attempts | Phase::Choose | Phase::Chosen(_), _) => {
                bail!("{}: only an issue has attempts", piece.key())
            }
            (Phase::Passed, _) => Some(Outcome::Passed),
            (Phase::Publish, _) => publish(ctx, piece, repo, base, state, sandbox)?,
            (Phase::Done, _) => done(piece, state),
            (Phase::GaveUp, _) => {
                // No turn follows: the work's containers go while the forge is told.
                sandbox.release();
                gave_up(ctx, piece, state)?
            }
        };
        state.save(&ctx.state_dir())?;
        if let Some(outcome) = step {
            return Ok(outcome);
        }
    }
}

/// Before a phase that starts an agent turn: this work's spent budget gives it up; the run's
/// stops it for this run (one comment; a later run goes on).
fn budget_check(ctx: &Context, piece: &Piece, state: &mut WorkState) -> Result<Step> {
    if !matches!(
        state.phase,
        Phase::Clarify | Phase::Work | Phase::Review | Phase::Choose
    ) {
        return Ok(None);
    }
    let key = piece.key();
    match budget_spent(ctx, spent(ctx, piece, state)?) {
        Some(Spent::Issue(why)) => {
            ctx.progress.note(&format!("{key}: stopped: {why}"));
            state.stopped_by = Some(why);
            state.phase = Phase::GaveUp;
        }
        Some(Spent::Run(why)) => {
            ctx.progress
                .note(&format!("{key}: stopped for this run: {why}"));
            publish::stopped_for_the_run(ctx, key, &why)?;
            return Ok(Some(Outcome::Stopped(why)));
        }
        None => {}
    }
    Ok(None)
}

/// An issue is assessed (and clarified) before its first turn; other work goes straight to work.
fn clarify(
    ctx: &Context,
    piece: &Piece,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Step> {
    match piece {
        Piece::Issue(issue) => clarify::step(ctx, issue, state, sandbox),
        // An issue is clarified before its attempts start.
        Piece::Pull(_) | Piece::Green(..) | Piece::Attempt(..) => {
            state.phase = Phase::Work;
            Ok(None)
        }
    }
}

/// One iteration of the working role, then what its turn ended in: its commits refused, a
/// question asked, the work said done (the gate decides), or another iteration.
fn work(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    vars: &[(&'static str, String)],
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Step> {
    let key = piece.key();
    if state.counted_iterations() >= ctx.config.max_iterations {
        state.phase = Phase::GaveUp;
        return Ok(None);
    }
    if ctx.is_stopping() {
        bail!("{key}: stopped before iteration {}", state.iterations + 1);
    }
    outbox::poll(ctx, key, state, Due::Now)?;
    let outcome = working_turn(ctx, piece, vars, state, sandbox)?;
    // The session and the cost are kept even if taking the commits fails.
    state.save(&ctx.state_dir())?;
    let imported = sandbox.take_commits()?;
    let handed = sandbox.take_ask();
    take_ask(ctx, key, state, handed, Pace::Now)?;
    if let Imported::Refused(why) = imported {
        ctx.progress
            .note(&format!("{key}: the agent's commits were refused: {why}"));
        state.last_summary = format!(
            "iteration {} failed: its commits were refused: {why}",
            state.iterations
        );
        state.nudge = Some(turns::refused_nudge(&why));
        return Ok(None);
    }
    // Without `[questions]` the agent was not taught the signal: a block is just text.
    let asked = match waits(piece, state) && ctx.config.questions.enabled {
        true => questions::find(&outcome.result_text, piece.number()),
        false => None,
    };
    if let Some(asked) = asked {
        // A turn that asks does not count against maxIterations, nor in the report.
        state.question_turns += 1;
        ctx.report
            .record_question_turn(&key.to_string(), piece.working_role());
        asked_a_question(ctx, key, state, asked);
        return Ok(None);
    }
    state.bad_questions = 0;
    match outcome.ending {
        Ending::Completed => said_done(ctx, piece, repo, state, sandbox)?,
        Ending::Stopped => state.nudge = None,
        Ending::Failed(why) => {
            state.nudge = None;
            state.last_summary = format!("iteration {} failed: {why}", state.iterations);
        }
    }
    Ok(None)
}

/// The agent said the work is done: an issue without commits is given up, unfinished work goes
/// back to the agent with why, reviewed work goes to the reviewer (the gate runs beside it), and
/// otherwise the gate decides between publishing and another iteration.
fn said_done(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<()> {
    let key = piece.key();
    if !committed(piece, repo)? {
        state.last_summary = format!(
            "The agent said it was done but committed nothing.\n\n{}",
            state.last_summary
        );
        state.phase = Phase::GaveUp;
        return Ok(());
    }
    if let Some(why) = green::unfinished(piece, repo, state)? {
        ctx.progress
            .note(&format!("{key}: the agent said it was done, but {why}"));
        state.nudge = Some(turns::unfinished_nudge(&why));
        return Ok(());
    }
    if reviewed(ctx, piece) {
        state.nudge = None;
        state.phase = Phase::Review;
        return Ok(());
    }
    let gate = run_gate(ctx, state, sandbox)?;
    if gate.passed {
        state.nudge = None;
        state.phase = match piece {
            Piece::Attempt(..) => Phase::Passed,
            _ => Phase::Publish,
        };
    } else {
        gate_refuted(ctx, key, state, &gate, "");
    }
    Ok(())
}

/// Whether a review follows the working role's turns once it says it is done.
fn reviewed(ctx: &Context, piece: &Piece) -> bool {
    piece.reviewed() && ctx.config.review.enabled
}

/// Waiting for a person's answer: asked (again) until it comes; then the agent goes on with it.
fn waiting(ctx: &Context, piece: &Piece, state: &mut WorkState) -> Result<Step> {
    let key = piece.key();
    // `drive` calls this only in the Waiting phase, which carries its question.
    let Phase::Waiting(waiting) = &mut state.phase else {
        return Ok(None);
    };
    let Some(answer) = waiting.conversation.reply.clone() else {
        asking::ask(ctx, key, waiting)?;
        return Ok(Some(Outcome::Waiting));
    };
    ctx.progress.note(&format!(
        "{key}: {} answered through {}; the agent goes on",
        answer.by, answer.channel
    ));
    let questions = waiting.conversation.subject.clone();
    state.phase = Phase::Work;
    // A clarification's answer goes to the next assessment instead.
    if !clarify::take_answer(state, &answer) {
        state.nudge = Some(prompts::answer(&questions, &answer));
    }
    Ok(None)
}

/// Publishing: a pull request (or a sent-back one's new commits), unless held back, which gives
/// the work up. A tip the gate has not seen (a gate run broke after it came in) is gated first,
/// and one it fails goes back to the working agent.
fn publish(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Step> {
    let key = piece.key();
    if publish::gated_tip(ctx, repo, state)?.is_none() {
        ctx.progress.note(&format!(
            "{key}: the gate has not run on the work branch's tip; it runs before anything is pushed"
        ));
        let gate = run_gate(ctx, state, sandbox)?;
        if !gate.passed {
            state.nudge = Some(turns::gate_nudge(&gate, state.gate_runs));
            state.phase = Phase::Work;
            return Ok(None);
        }
    }
    // No turn follows: the work's containers go while it publishes.
    sandbox.release();
    let clarified = clarify::pull_section(state);
    match publish::publish(ctx, piece, repo, base, state, &clarified)? {
        Published::Pull(pull) => {
            if let Piece::Green(green_pull, _) = piece {
                green::end(ctx, green_pull.number)?;
            }
            state.pull = Some(pull);
            state.phase = Phase::Done;
        }
        Published::HeldBack(why) => {
            ctx.progress.note(&format!("{key}: not published: {why}"));
            state.stopped_by = Some(why);
            state.phase = Phase::GaveUp;
        }
    }
    Ok(None)
}

/// Published: what became of the work.
fn done(piece: &Piece, state: &WorkState) -> Step {
    Some(match piece {
        Piece::Issue(_) | Piece::Attempt(..) => {
            Outcome::PullRequest(state.pull.unwrap_or_default())
        }
        Piece::Pull(_) => Outcome::Reworked,
        Piece::Green(_, trouble) => Outcome::KeptGreen(trouble.what()),
    })
}

/// Given up (or stopped by its budget): one comment, once, and the issue's or pull request's
/// revision after it kept, so it is not worked on again until a person moves it; a green round's
/// labels back.
fn gave_up(ctx: &Context, piece: &Piece, state: &mut WorkState) -> Result<Step> {
    // An attempt that drops out tells nothing: its issue's comment covers every attempt.
    if let Piece::Attempt(..) = piece {
        state.told_forge = true;
    }
    if !state.told_forge {
        let number = piece.number();
        publish::give_up(ctx, number, state)?;
        state.settled = Some(forge_thread::revision(ctx, number)?);
        state.told_forge = true;
        state.save(&ctx.state_dir())?;
    }
    if let Piece::Green(pull, _) = piece {
        green::end(ctx, pull.number)?;
    }
    Ok(Some(match &state.stopped_by {
        Some(why) => Outcome::Stopped(why.clone()),
        None => Outcome::GaveUp {
            iterations: state.counted_iterations(),
        },
    }))
}

/// Whether `piece`'s working agent may stop for a person's answer (with `[questions]`). A
/// keep-green round is not held for a person: past its rounds one comment asks. Nor is an issue's
/// attempt, or the chosen one: its issue's state, not its own, is what a pass looks at.
fn waits(piece: &Piece, state: &WorkState) -> bool {
    match piece {
        Piece::Issue(_) => state.best_of.is_none(),
        Piece::Pull(_) => true,
        Piece::Green(..) | Piece::Attempt(..) => false,
    }
}

/// The prompt variables of `piece`'s roles (the common ones come from `Context::prompt`); the
/// question signal is taught only where the agent `waits` for an answer.
fn vars(
    ctx: &Context,
    piece: &Piece,
    base: &str,
    waits: bool,
) -> Result<Vec<(&'static str, String)>> {
    Ok(match piece {
        Piece::Issue(issue) | Piece::Attempt(issue, _) => vec![
            ("ISSUE_NUMBER", issue.number.to_string()),
            ("ISSUE_TITLE", issue.title.clone()),
            ("ISSUE_BODY", issue.body.clone()),
            ("BRANCH", piece.branch()),
            ("BASE_BRANCH", base.to_string()),
            ("ASKING", prompts::asking(&ctx.config, issue.number, waits)),
        ],
        Piece::Pull(pull) => vec![
            ("PR_NUMBER", pull.number.to_string()),
            ("PR_TITLE", pull.title.clone()),
            ("BRANCH", piece.branch()),
            ("BASE_BRANCH", base.to_string()),
            ("REVIEWS", reviews::for_pr_fixer(ctx, pull.number)?),
            ("ASKING", prompts::asking(&ctx.config, pull.number, waits)),
        ],
        Piece::Green(pull, trouble) => {
            // The reviewer judges the branch against the issue it implements.
            let number =
                planning::own_issue(pull, &ctx.login, &ctx.config.repo, base).map_err(|why| {
                    anyhow::anyhow!("pull request #{}: not sandcastle's own: {why}", pull.number)
                })?;
            let issue = ctx.forge.issue(number)?;
            let (task, checks) = green::task(trouble, base);
            vec![
                ("PR_NUMBER", pull.number.to_string()),
                ("PR_TITLE", pull.title.clone()),
                ("BRANCH", piece.branch()),
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

/// An ask out of the sandbox: kept and saved, then published as `pace` allows, so a kill in
/// between publishes it from the saved state (the sandbox's outbox goes with its container).
fn take_ask(
    ctx: &Context,
    key: WorkKey,
    state: &mut WorkState,
    handed: Result<Option<Vec<u8>>>,
    pace: Pace,
) -> Result<()> {
    outbox::take(ctx, key, state, handed);
    state.save(&ctx.state_dir())?;
    outbox::publish(ctx, key, state, pace)?;
    state.save(&ctx.state_dir())
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
            state.phase = asking::waiting(ctx, questions);
        }
        Err(why) if state.bad_questions == 0 => {
            ctx.progress.note(&format!(
                "{key}: the agent's <questions> block is unusable ({why}); asking once more"
            ));
            state.bad_questions = 1;
            state.nudge = Some(turns::question_correction(&why));
        }
        Err(why) => {
            state.stopped_by = Some(format!(
                "the agent's <questions> block was unusable twice: {why}"
            ));
            state.phase = Phase::GaveUp;
        }
    }
}

/// A budget that is spent, checked before every agent turn.
enum Spent {
    /// This work's own: it stops and waits for a person, like work given up.
    Issue(String),
    /// The run's: this run starts no more turns; a later run goes on.
    Run(String),
}

/// What `piece` has cost so far: its own turns, or for an attempt its issue's (every attempt's,
/// as saved), which `[budget] maxCostPerIssue` covers.
fn spent(ctx: &Context, piece: &Piece, state: &WorkState) -> Result<f64> {
    match piece {
        Piece::Attempt(issue, _) => best_of::spent(ctx, issue.number),
        _ => Ok(state.cost_usd),
    }
}

fn budget_spent(ctx: &Context, cost: f64) -> Option<Spent> {
    let budget = &ctx.config.budget;
    if let Some(limit) = budget.max_cost_per_issue
        && cost >= limit
    {
        return Some(Spent::Issue(format!(
            "this work has cost ${cost:.2}, which reaches [budget] maxCostPerIssue (${limit:.2})"
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
    // The reviewer's container starts beside the turn that may hand the work to it.
    let alongside = match reviewed(ctx, piece) {
        true => Alongside::ReviewersContainer,
        false => Alongside::Nothing,
    };
    let max = ctx.config.max_iterations;
    let iteration = state.iterations + 1;
    let counted = state.counted_iterations() + 1;
    let tell = outbox::telling(state);
    if tell.is_some() {
        // The "telling" mark is saved before the turn that carries it.
        state.save(&ctx.state_dir())?;
    }
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
        if let Piece::Attempt(_, attempt) = piece {
            prompt += &turns::attempt_note(attempt.letter, attempt.of);
        }
        if iteration > 1 {
            prompt += &turns::earlier_iterations(&state.last_summary, state.nudge.as_deref());
        }
        Ok(prompt)
    };
    let mut outcome = None;
    if let Some(saved) = state.session(role).cloned() {
        if saved.file.is_file() {
            // The first turn resumes the assessment's session (`clarify.rs`) with the whole prompt.
            let prompt = telling(match state.iterations {
                0 => whole_prompt(state)?,
                _ => turns::continuation(counted, max, state.nudge.as_deref()),
            });
            let resumed = take_turn(
                alongside,
                ctx,
                state,
                sandbox,
                role,
                iteration,
                &prompt,
                Some(&saved),
            )?;
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
            let prompt = telling(prompt);
            take_turn(
                alongside, ctx, state, sandbox, role, iteration, &prompt, None,
            )?
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

/// A turn (`alongside` it nothing, or a container's start), with its session and cost kept in
/// the state.
#[allow(clippy::too_many_arguments)]
fn take_turn(
    alongside: Alongside,
    ctx: &Context,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
    role: Role,
    iteration: u32,
    prompt: &str,
    resume: Option<&SavedSession>,
) -> Result<AgentOutcome> {
    let (outcome, _) = turn_and(
        alongside, ctx, state, sandbox, role, iteration, prompt, resume,
    )?;
    Ok(outcome)
}

/// What runs beside a turn, in a container of its own.
#[derive(Clone, Copy, PartialEq)]
enum Alongside {
    Nothing,
    /// The gate, on the commit the turn starts from.
    Gate,
    /// The start of the reviewer's fresh container, for the review that follows the working
    /// role's turn when it says it is done.
    ReviewersContainer,
}

/// A turn, and the gate at once when `alongside` says so (`Some` then: what became of it); the
/// turn's session and cost are kept in the state whatever became of the gate.
#[allow(clippy::too_many_arguments)]
fn turn_and(
    alongside: Alongside,
    ctx: &Context,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
    role: Role,
    iteration: u32,
    prompt: &str,
    resume: Option<&SavedSession>,
) -> Result<(AgentOutcome, Option<Result<GateOutcome>>)> {
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
        fresh_ahead: alongside == Alongside::ReviewersContainer,
    };
    // An ask made while the agent works is published at once, its later revisions paced
    // (`outbox::ASK_EDIT_INTERVAL`): one held back goes out with a later event of the turn past
    // the interval, or at the turn's end.
    let key = WorkKey::from_slug(&state.slug);
    let mut heard = |heard: Heard| {
        let Some(key) = key else { return };
        let handed = match heard {
            Heard::Ask(ask) => ask.map(Some).map_err(anyhow::Error::msg),
            Heard::Event if outbox::held_back(state) => Ok(None),
            Heard::Event => return,
        };
        if let Err(e) = take_ask(ctx, key, state, handed, Pace::Relayed) {
            ctx.progress.note(&format!(
                "{key}: the ask made during the turn is not published yet ({}); the end of the turn tries again",
                ctx.redactor.error(&e)
            ));
        }
    };
    let (outcome, gate) = match alongside {
        Alongside::Nothing | Alongside::ReviewersContainer => {
            (sandbox.turn(&turn, &mut heard)?, None)
        }
        Alongside::Gate => {
            let (outcome, gate) = sandbox.turn_beside_gate(&turn, &mut heard)?;
            (outcome, Some(gate))
        }
    };
    state.cost_usd += outcome.usage.cost_usd;
    match &outcome.session {
        Some(session) => state.set_session(role, session.clone()),
        // A resumed session that could not be read back is not resumed again.
        None if resume.is_some() => state.forget_session(role),
        None => {}
    }
    Ok((outcome, gate))
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
        Piece::Issue(_) | Piece::Attempt(..) => !repo.new_commits()?.is_empty(),
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
    record_gate(state, &gate);
    Ok(gate)
}

/// The gate failed on the commit the agent called done: said (`more` after the gate run), and its
/// output is what the working agent is told next.
fn gate_refuted(
    ctx: &Context,
    key: WorkKey,
    state: &mut WorkState,
    gate: &GateOutcome,
    more: &str,
) {
    ctx.progress.note(&format!(
        "{key}: the agent said it was done, but `check` failed (gate run {}){more}",
        state.gate_runs
    ));
    state.nudge = Some(turns::gate_nudge(gate, state.gate_runs));
}

fn record_gate(state: &mut WorkState, gate: &GateOutcome) {
    state.gate_passed = Some(gate.passed);
    state.gate_commit = gate.commit.clone();
}

/// The reviewer's round, beside the gate when the gate has not seen the tip: a verdict counts only
/// on a commit the gate passed, so a failing gate discards it (its spend is kept) and sends the
/// work back with the gate's output, as if it had run first. Then the gate again if the reviewer
/// changed the branch.
fn review(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    vars: &[(&'static str, String)],
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Step> {
    let key = piece.key();
    let round = state.review_rounds + 1;
    let rounds = ctx.config.review.rounds;
    let saved = state
        .session(Role::Reviewer)
        .filter(|s| s.file.is_file())
        .cloned();
    let prompt = match &saved {
        Some(_) => turns::review_again(base),
        None => {
            let all: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
            ctx.prompt(Role::Reviewer.prompt(), &all)?
        }
    };
    let alongside = match publish::gated_tip(ctx, repo, state)? {
        Some(_) => Alongside::Nothing,
        None => Alongside::Gate,
    };
    if alongside == Alongside::Gate {
        ctx.progress.note(&format!(
            "{key}: the reviewer (round {round}) and the gate (gate run {}) run at once on {}",
            state.gate_runs + 1,
            repo.tip()?
        ));
    }
    let (outcome, gated) = turn_and(
        alongside,
        ctx,
        state,
        sandbox,
        Role::Reviewer,
        round,
        &prompt,
        saved.as_ref(),
    )?;
    if let Some(gated) = gated
        && !review_counts(ctx, key, state, saved.as_ref(), gated)?
    {
        return Ok(None);
    }
    // The turn and the gate beside it are kept even if taking the commits or a later gate breaks.
    state.save(&ctx.state_dir())?;
    let refused = match sandbox.take_commits()? {
        Imported::Tip(_) => None,
        Imported::Refused(why) => Some(why),
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
    // Commits the gate has not seen: the reviewer's, or any a broken gate run left unchecked.
    if publish::gated_tip(ctx, repo, state)?.is_none() {
        let gate = run_gate(ctx, state, sandbox)?;
        if !gate.passed {
            verdict.approved = false;
            verdict.summary = format!(
                "{}\n\n{}",
                verdict.summary,
                turns::gate_nudge(&gate, state.gate_runs)
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
        state.nudge = Some(turns::review_nudge(&verdict.summary, round, rounds));
    }
    state.verdict = Some(verdict);
    state.phase = next;
    Ok(None)
}

/// Whether a review made beside the gate counts: only when the gate passed on its commit. A
/// failing gate discards it and sends the gate's output to the working agent; one that broke is
/// `Err`, with the reviewer's spend saved and the work left in review, so both run again. Either
/// way the reviewer's session from before it is what the next round resumes.
fn review_counts(
    ctx: &Context,
    key: WorkKey,
    state: &mut WorkState,
    saved: Option<&SavedSession>,
    gated: Result<GateOutcome>,
) -> Result<bool> {
    if !gated.as_ref().is_ok_and(|gate| gate.passed) {
        match saved {
            Some(session) => state.set_session(Role::Reviewer, session.clone()),
            None => state.forget_session(Role::Reviewer),
        }
    }
    // Only a gate that ended is counted.
    let gate = match gated {
        Ok(gate) => gate,
        Err(broke) => {
            state.save(&ctx.state_dir())?;
            return Err(broke);
        }
    };
    state.gate_runs += 1;
    record_gate(state, &gate);
    if !gate.passed {
        gate_refuted(
            ctx,
            key,
            state,
            &gate,
            "; the review beside it is discarded",
        );
        state.phase = Phase::Work;
    }
    Ok(gate.passed)
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

#[cfg(test)]
mod tests;
