//! Best of N: an issue worked on by several independent attempts, each its own piece of work
//! (`Piece::Attempt`: its own state `issue-N-<letter>`, work repository, sandbox, proxy socket and
//! key, local branch `sandcastle/issue-N-<letter>`, never pushed), driven by the one driver until
//! the gate passes on its commit (`Phase::Passed`) or it drops out. The issue's own state waits
//! for every attempt (the barrier, `Phase::Attempts`), then one reviewer turn chooses among those
//! the gate passed (`Phase::Choose`, a strict `<choice>`), and the chosen attempt goes on as the
//! issue's work (`Phase::Chosen`): reviewed as any issue's, its findings back to its own
//! implementer's session, published as `sandcastle/issue-N`.
use super::{Step, drive, work_under};
use crate::context::Context;
use crate::outbox;
use crate::piece::{Attempt, Piece};
use crate::pool::pool;
use crate::prompts::turns;
use crate::seam::{Sandboxed, Turn};
use crate::state::{BestOf, Chosen, Ended, Outcome, Phase, WorkState};
use crate::work_sandbox::WorkSandbox;
use anyhow::{Context as _, Result, bail};
use sandcastle_config::MAX_ATTEMPTS;
use sandcastle_core::agent::Ending;
use sandcastle_core::choice;
use sandcastle_core::forge::Issue;
use sandcastle_core::forge_text::Fence;
use sandcastle_core::git::WorkRepo;
use sandcastle_core::plan::branch_for;
use sandcastle_core::proxy::{Budget, SharedSpend};
use sandcastle_core::role::{Role, WorkKey};

/// The label that sets an issue's attempts: `attempts-3`.
pub const LABEL_PREFIX: &str = "attempts-";
/// The line of an issue's body that sets its attempts when no label does: `sandcastle-attempts: 3`.
pub const BODY_KEY: &str = "sandcastle-attempts:";
/// The most of one attempt's diff the choosing reviewer is shown.
const MAX_DIFF_BYTES: usize = 48 * 1024;
/// Choosing turns whose `<choice>` is unusable before the issue is given up: the first gets a
/// correction turn.
const MAX_BAD_CHOICES: u32 = 2;

/// How many attempts `issue` gets: its `attempts-N` label, else a `sandcastle-attempts: N` line of
/// its body, else `configured` (`[implement] attempts`). Forge text, read strictly: N from 1 to
/// [`MAX_ATTEMPTS`] written plainly; anything else keeps `configured`, with one line saying why.
pub fn count(configured: u32, issue: &Issue) -> (u32, Option<String>) {
    let labels: Vec<&str> = issue
        .labels
        .iter()
        .filter_map(|label| label.strip_prefix(LABEL_PREFIX))
        .collect();
    let lines: Vec<&str> = issue
        .body
        .lines()
        .filter_map(|line| line.trim().strip_prefix(BODY_KEY))
        .map(str::trim)
        .collect();
    let (written, source) = match (labels.as_slice(), lines.as_slice()) {
        ([], []) => return (configured, None),
        ([one], _) => (*one, format!("the label `{LABEL_PREFIX}…`")),
        ([], [one]) => (*one, format!("the line `{BODY_KEY} …`")),
        ([], _) => ("", format!("more than one `{BODY_KEY}` line")),
        _ => ("", format!("more than one `{LABEL_PREFIX}…` label")),
    };
    match written.parse::<u32>() {
        Ok(n) if (1..=MAX_ATTEMPTS).contains(&n) && n.to_string() == written => (n, None),
        _ => (
            configured,
            Some(format!(
                "{}: {source} does not give a number from 1 to {MAX_ATTEMPTS} (found {:?}); \
                 [implement] attempts ({configured}) is used",
                WorkKey::Issue(issue.number),
                written.chars().take(20).collect::<String>()
            )),
        ),
    }
}

/// Whether [`begin`] will start attempts for `piece`'s work (an issue's, in `state`), rather than
/// its own first turn; says nothing (`begin` notes a malformed attempts label).
pub(super) fn begins(ctx: &Context, piece: &Piece, state: &WorkState) -> bool {
    let Piece::Issue(issue) = piece else {
        return false;
    };
    state.best_of.is_none()
        && state.iterations == 0
        && count(ctx.config.implement.attempts, issue).0 >= 2
}

/// Where an issue's work would start its first iteration: with more than one attempt, the
/// attempts are fixed, each with a fresh state of its own (an earlier try's, given up, is
/// replaced) told what was clarified, before the issue's state saves them: a resumed run starts
/// none twice. Whether it did.
pub(super) fn begin(ctx: &Context, issue: &Issue, state: &mut WorkState) -> Result<bool> {
    if state.best_of.is_some() || state.iterations > 0 {
        return Ok(false);
    }
    let (attempts, refused) = count(ctx.config.implement.attempts, issue);
    if let Some(line) = refused {
        ctx.progress.note(&line);
    }
    if attempts < 2 {
        return Ok(false);
    }
    ctx.progress.note(&format!(
        "{}: {attempts} attempts, at most {} at once; the reviewer chooses among those the gate passes",
        WorkKey::Issue(issue.number),
        ctx.config.max_concurrency.min(attempts)
    ));
    let best_of = BestOf::new(attempts);
    for attempt in attempts_of(&best_of) {
        let piece = Piece::Attempt(issue, attempt);
        let mut fresh = WorkState::new(&piece.slug(), &piece.branch(), &ctx.run_id);
        fresh.clarification = state.clarification.clone();
        fresh.save(&ctx.state_dir())?;
    }
    state.best_of = Some(best_of);
    state.phase = Phase::Attempts;
    Ok(true)
}

/// What every attempt of `issue` cost so far, as their saved states say, with the issue's own
/// turns (its clarification, the choice): what `[budget] maxCostPerIssue` covers.
pub(super) fn spent(ctx: &Context, issue: u64) -> Result<f64> {
    let dir = ctx.state_dir();
    let Some(state) = WorkState::load(&dir, &WorkKey::Issue(issue).slug())? else {
        return Ok(0.0);
    };
    let mut spent = state.cost_usd;
    if let Some(best_of) = &state.best_of {
        for attempt in attempts_of(best_of) {
            if let Some(attempt) = WorkState::load(&dir, &attempt.slug(issue))? {
                spent += attempt.cost_usd;
            }
        }
    }
    Ok(spent)
}

fn attempts_of(best_of: &BestOf) -> impl Iterator<Item = Attempt> + '_ {
    let of = best_of.letters.len() as u32;
    best_of
        .letters
        .iter()
        .map(move |&letter| Attempt { letter, of })
}

/// The attempts run (at most `maxConcurrency` at once, each resumed from its saved state: one that
/// ended stays ended) until each passed the gate or dropped out; then the reviewer chooses, or,
/// when none passed, the issue is given up with one comment on them all.
pub(super) fn attempts(
    ctx: &Context,
    issue: &Issue,
    base: &str,
    state: &mut WorkState,
) -> Result<Step> {
    let key = WorkKey::Issue(issue.number);
    let mut best_of = state.best_of.clone().context("no attempts saved")?;
    let dir = ctx.state_dir();
    let attempts: Vec<Attempt> = attempts_of(&best_of).collect();
    let pieces: Vec<Piece> = attempts
        .iter()
        .map(|attempt| Piece::Attempt(issue, *attempt))
        .collect();
    // One ledger in the proxy for every attempt's requests, side by side, against the issue's
    // budget and what the issue had spent before.
    let budget = Budget {
        spent: spent(ctx, issue.number)?,
        limit: ctx.config.budget.max_cost_per_issue,
        shared: Some(SharedSpend::default()),
    };
    let workers = ctx.config.max_concurrency as usize;
    let outcomes = pool(&pieces, workers, &|| ctx.is_stopping(), &|piece| {
        work_under(ctx, piece, base, Some(&budget))
    });
    let mut ended = Vec::new();
    for attempt in &attempts {
        let slug = attempt.slug(issue.number);
        let attempt_state = WorkState::load(&dir, &slug)?.context("saved as it began")?;
        if matches!(attempt_state.phase, Phase::Passed | Phase::GaveUp) {
            ended.push(ended_as(attempt.letter, &attempt_state));
        }
    }
    // Not at the barrier yet (a stop, broken machinery, the run's budget): a later pass goes on
    // from the saved states, and no attempt that ended runs again.
    if ended.len() < attempts.len() {
        for outcome in outcomes {
            if let outcome @ Outcome::Stopped(_) = outcome? {
                return Ok(Some(outcome));
            }
        }
        bail!("{key}: stopped before every attempt ended");
    }
    state.cost_usd += ended.iter().map(|e| e.cost_usd).sum::<f64>();
    best_of.ended = ended;
    ctx.report.set_attempts(&key.to_string(), &best_of);
    let passed = best_of.passed();
    ctx.progress.note(&format!(
        "{key}: {} of {} attempts passed the gate{}",
        passed.len(),
        best_of.letters.len(),
        match passed.as_slice() {
            [] => String::new(),
            letters => format!(
                " ({})",
                letters
                    .iter()
                    .map(char::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    ));
    if passed.is_empty() {
        state.stopped_by = best_of.ended.iter().find_map(|e| e.stopped.clone());
        state.phase = Phase::GaveUp;
    } else {
        state.phase = Phase::Choose;
    }
    state.best_of = Some(best_of);
    Ok(None)
}

/// What an attempt came to, from its saved state.
fn ended_as(letter: char, state: &WorkState) -> Ended {
    let passed = state.phase == Phase::Passed;
    Ended {
        letter,
        passed,
        commit: state.gate_commit.clone().filter(|_| passed),
        iterations: state.counted_iterations(),
        gate_runs: state.gate_runs,
        cost_usd: state.cost_usd,
        stopped: state.stopped_by.clone().filter(|_| !passed),
    }
}

/// One reviewer turn sees every attempt the gate passed and chooses one with its reasons; a
/// single one is chosen without a turn. An unusable `<choice>` is a failed turn: the next gets
/// told why, and a second gives the issue up. The chosen attempt then goes on as the issue's work.
pub(super) fn choose(
    ctx: &Context,
    issue: &Issue,
    base: &str,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Step> {
    let key = WorkKey::Issue(issue.number);
    let mut best_of = state.best_of.clone().context("no attempts saved")?;
    let passed = best_of.passed();
    let choice = match passed.as_slice() {
        [] => bail!("{key}: no attempt passed the gate; nothing to choose"),
        [only] => Chosen {
            letter: *only,
            why: None,
        },
        _ => match choosing_turn(ctx, issue, base, state, &best_of, sandbox)? {
            Ok(chosen) => chosen,
            Err(why) => {
                best_of.bad_choices += 1;
                ctx.progress.note(&format!(
                    "{key}: the reviewer's choice was unusable ({} of {MAX_BAD_CHOICES}): {why}",
                    best_of.bad_choices
                ));
                if best_of.bad_choices >= MAX_BAD_CHOICES {
                    state.stopped_by = Some(format!(
                        "the reviewer could not choose among the attempts: {why}"
                    ));
                    state.phase = Phase::GaveUp;
                } else {
                    state.nudge = Some(turns::choice_correction(&why));
                }
                state.best_of = Some(best_of);
                return Ok(None);
            }
        },
    };
    ctx.progress.note(&format!(
        "{key}: the reviewer chose attempt {}",
        choice.letter
    ));
    state.nudge = None;
    let chosen_attempt = Attempt {
        letter: choice.letter,
        of: best_of.letters.len() as u32,
    };
    best_of.choice = Some(choice);
    ctx.report.set_attempts(&key.to_string(), &best_of);
    state.best_of = Some(best_of);
    // The chosen attempt's state carries the issue from here: its cost is the issue's so far.
    let dir = ctx.state_dir();
    let slug = chosen_attempt.slug(issue.number);
    let mut chosen = WorkState::load(&dir, &slug)?.context("the chosen attempt has no state")?;
    chosen.best_of = state.best_of.clone();
    chosen.cost_usd = state.cost_usd;
    chosen.phase = match ctx.config.review.enabled {
        true => Phase::Review,
        false => Phase::Publish,
    };
    chosen.save(&dir)?;
    state.phase = Phase::Chosen(chosen_attempt.letter);
    Ok(None)
}

/// The choosing turn: the reviewer's session resumed with the correction, or a fresh one with
/// every passing attempt; what its `<choice>` says, or why it is unusable.
fn choosing_turn(
    ctx: &Context,
    issue: &Issue,
    base: &str,
    state: &mut WorkState,
    best_of: &BestOf,
    sandbox: &mut dyn Sandboxed,
) -> Result<Result<Chosen, String>> {
    let passed = best_of.passed();
    let saved = state
        .session(Role::Reviewer)
        .filter(|s| s.file.is_file())
        .cloned();
    let dir = ctx.state_dir();
    let mut repos = Vec::new();
    for ended in best_of.ended.iter().filter(|e| e.passed) {
        let attempt = Attempt {
            letter: ended.letter,
            of: best_of.letters.len() as u32,
        };
        let attempt_state = WorkState::load(&dir, &attempt.slug(issue.number))?
            .context("an attempt that ended has a state")?;
        let repo = attempt_repo(ctx, issue, attempt, base, &attempt_state)?;
        repos.push((ended, repo, attempt_state.last_summary));
    }
    let prompt = match (&saved, &state.nudge) {
        (Some(_), Some(correction)) => correction.clone(),
        _ => {
            let candidates = candidates(&repos)?;
            let number = issue.number.to_string();
            ctx.prompt(
                "choose",
                &[
                    ("ISSUE_NUMBER", number.as_str()),
                    ("ISSUE_TITLE", issue.title.as_str()),
                    ("ISSUE_BODY", issue.body.as_str()),
                    ("BASE_BRANCH", base),
                    ("CANDIDATES", candidates.as_str()),
                ],
            )?
        }
    };
    let resume = saved.as_ref().filter(|_| state.nudge.is_some());
    let checkouts: Vec<(char, &WorkRepo)> = repos
        .iter()
        .map(|(ended, repo, _)| (ended.letter, repo))
        .collect();
    sandbox.add_candidates(&checkouts)?;
    let round = best_of.bad_choices + 1;
    let turn = Turn {
        role: Role::Reviewer,
        iteration: round,
        counted: round,
        max_iterations: MAX_BAD_CHOICES,
        prompt: &prompt,
        resume,
        time_limit: None,
        fresh_ahead: false,
    };
    let outcome = sandbox.turn(&turn, &mut |_| {})?;
    state.cost_usd += outcome.usage.cost_usd;
    if let Some(session) = &outcome.session {
        state.set_session(Role::Reviewer, session.clone());
    }
    Ok(match &outcome.ending {
        Ending::Failed(why) => Err(format!("the turn failed: {why}")),
        Ending::Completed | Ending::Stopped => {
            choice::parse(&outcome.result_text, &passed).map(|choice| Chosen {
                letter: choice.attempt,
                why: Some(choice.why),
            })
        }
    })
}

/// Each passing attempt as the choosing reviewer sees it: its diff against the base and its
/// implementer's summary (agent text, fenced as untrusted, the diff cut at [`MAX_DIFF_BYTES`]),
/// then sandcastle's facts: the gate's result and the attempt's cost.
fn candidates(repos: &[(&Ended, WorkRepo, String)]) -> Result<String> {
    let mut texts = Vec::new();
    for (ended, repo, summary) in repos {
        let (diff, cut) = repo.diff_against_base(MAX_DIFF_BYTES)?;
        texts.push((*ended, diff, cut, summary));
    }
    let all: Vec<&str> = texts
        .iter()
        .flat_map(|(_, diff, _, summary)| [diff.as_str(), summary.as_str()])
        .collect();
    let fence = Fence::around(&all);
    let mut text = String::new();
    for (ended, diff, cut, summary) in &texts {
        let letter = ended.letter;
        text += &format!(
            "### Attempt {letter}\n\n{} Its turns cost ${:.2} over {} iteration(s). Its checkout: `~/attempts/{letter}` (read-only).\n\nIts diff{}:\n\n{}\n\nIts implementer's summary:\n\n{}\n\n",
            match &ended.commit {
                Some(commit) => format!("`check` passed on {commit}."),
                None => "`check` passed.".to_string(),
            },
            ended.cost_usd,
            ended.iterations,
            if *cut {
                format!(" (cut at {MAX_DIFF_BYTES} bytes)")
            } else {
                String::new()
            },
            fence.wrap_from(diff, &format!("attempt {letter}'s commits")),
            fence.wrap_from(summary, &format!("attempt {letter}'s implementer")),
        );
    }
    Ok(text)
}

/// The work repository of `attempt`: its own, under its slug; its local branch
/// `sandcastle/issue-N-<letter>` is published, if chosen, as the issue's.
pub(super) fn attempt_repo(
    ctx: &Context,
    issue: &Issue,
    attempt: Attempt,
    base: &str,
    state: &WorkState,
) -> Result<WorkRepo> {
    let piece = Piece::Attempt(issue, attempt);
    let repo = WorkRepo::prepare(
        &ctx.repo_dir(&piece.slug()),
        &ctx.remote,
        &ctx.creds,
        &piece.branch(),
        base,
    )?
    .publishing_as(&branch_for(issue.number))?;
    Ok(match &state.start_commit {
        Some(start) => repo.starting_at(start),
        None => repo,
    })
}

/// The chosen attempt goes on as the issue's work, from its own saved state, in a sandbox of its
/// own: reviewed (its findings to its own implementer's session) and published as the issue's
/// branch. The issue's state follows it.
pub(super) fn chosen(
    ctx: &Context,
    issue: &Issue,
    base: &str,
    state: &mut WorkState,
    letter: char,
) -> Result<Step> {
    let key = WorkKey::Issue(issue.number);
    let best_of = state.best_of.as_ref().context("no attempts saved")?;
    let attempt = Attempt {
        letter,
        of: best_of.letters.len() as u32,
    };
    let dir = ctx.state_dir();
    let slug = attempt.slug(issue.number);
    let mut chosen = WorkState::load(&dir, &slug)?.context("the chosen attempt has no state")?;
    let repo = attempt_repo(ctx, issue, attempt, base, &chosen)?;
    let budget = Budget {
        spent: chosen.cost_usd,
        limit: ctx.config.budget.max_cost_per_issue,
        shared: None,
    };
    let mut sandbox = WorkSandbox::new(ctx, key, &repo)
        .for_attempt(&slug, &format!("{key} attempt {letter}"))
        .with_env(&outbox::sandbox_env(ctx, key, &chosen))
        .with_budget(budget);
    let outcome = drive(
        ctx,
        &Piece::Issue(issue),
        &repo,
        base,
        &mut chosen,
        &mut sandbox,
    )?;
    state.cost_usd = chosen.cost_usd;
    state.pull = chosen.pull;
    match chosen.phase {
        Phase::Done => state.phase = Phase::Done,
        Phase::GaveUp if chosen.told_forge => {
            state.stopped_by = chosen.stopped_by.clone();
            state.settled = chosen.settled.clone();
            state.told_forge = true;
            state.phase = Phase::GaveUp;
        }
        _ => {}
    }
    Ok(Some(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(labels: &[&str], body: &str) -> Issue {
        Issue {
            number: 7,
            title: "t".into(),
            body: body.into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            updated_at: String::new(),
        }
    }

    #[test]
    fn the_label_then_the_body_line_override_the_config() {
        assert_eq!(count(1, &issue(&[], "")), (1, None));
        assert_eq!(count(2, &issue(&["bug", "attempts-3"], "")), (3, None));
        assert_eq!(
            count(1, &issue(&["attempts-4"], "sandcastle-attempts: 2")),
            (4, None),
            "the label wins"
        );
        assert_eq!(
            count(1, &issue(&[], "Fix it.\n\n  sandcastle-attempts: 2  \n")),
            (2, None)
        );
        assert_eq!(count(3, &issue(&["attempts-1"], "")), (1, None));
    }

    #[test]
    fn an_invalid_override_keeps_the_config_and_says_why() {
        let cases = [
            (issue(&["attempts-5"], ""), "the label `attempts-…`"),
            (issue(&["attempts-0"], ""), "found \"0\""),
            (issue(&["attempts-03"], ""), "found \"03\""),
            (issue(&["attempts-+2"], ""), "found \"+2\""),
            (issue(&["attempts-"], ""), "found \"\""),
            (issue(&["attempts-2", "attempts-3"], ""), "more than one"),
            (issue(&[], "sandcastle-attempts: lots"), "the line"),
            (issue(&[], "sandcastle-attempts: 9"), "found \"9\""),
            (
                issue(&[], "sandcastle-attempts: 2\nsandcastle-attempts: 3"),
                "more than one",
            ),
        ];
        for (issue, want) in cases {
            let (n, why) = count(2, &issue);
            let why = why.unwrap_or_default();
            assert_eq!(n, 2, "{why}");
            assert!(why.contains(want), "{why}");
            assert!(why.contains("[implement] attempts (2) is used"), "{why}");
            assert!(why.starts_with("issue #7: "), "{why}");
        }
    }
}
