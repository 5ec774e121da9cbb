//! How finished work reaches the forge: an issue becomes a pull request that says whether the gate
//! passed, what it cost, what sandcastle saw, then what the implementer did and what the reviewer
//! said; a sent-back pull request gets its new commits and one comment. Work given up gets one
//! comment. sandcastle's own facts come first, and every word of an agent's (summaries, verdicts,
//! commit subjects, file names) is quoted (`forge_text::quote`), so it cannot fold, forge or reorder
//! them. Every step is idempotent, so a run stopped half-way publishes the same things again, never
//! twice.
use crate::context::Context;
use crate::forge_thread::post_once;
use crate::green_record;
use crate::piece::Piece;
use crate::state::{BestOf, Chosen, Trouble, WorkState};
use anyhow::{Result, bail};
use sandcastle_core::forge_text::{Post, quote, quote_inline, quote_names};
use sandcastle_core::git::WorkRepo;
use sandcastle_core::role::WorkKey;
use sandcastle_core::touches::Touches;

/// What became of work sent to [`publish`].
pub enum Published {
    /// Its pull request's number.
    Pull(u64),
    /// Nothing was pushed: why, for the give-up comment.
    HeldBack(String),
}

/// Publishes `piece`, unless the change touches CI workflow files the operator has not allowed.
/// `clarified` is what an issue's pull request says of its clarification (`clarify::pull_section`).
pub fn publish(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    state: &WorkState,
    clarified: &str,
) -> Result<Published> {
    let Some(tip) = gated_tip(ctx, repo, state)? else {
        bail!(
            "{}: the gate has not run on {}, the work branch's tip; nothing is pushed until it has",
            piece.key(),
            repo.tip()?
        );
    };
    let start = state.start_commit.clone().unwrap_or_default();
    if let Piece::Green(pull, _) = piece
        && !repo.contains(&start)?
    {
        bail!(
            "pull request #{}: the branch no longer contains {start}, which is on the forge; sandcastle pushes \
             fast-forward only",
            pull.number
        );
    }
    // Against the base branch on every attempt and in every lane: a retry starts where the
    // held-back work stopped, and a sent-back branch on the forge is under review, not reviewed.
    let touches = Touches::of(&repo.changed_paths()?);
    if !touches.workflows.is_empty() && !ctx.config.publish.allow_workflow_changes {
        return Ok(Published::HeldBack(format!(
            "the change touches CI workflow files ({}), which the forge would run with the \
             repository's secrets as soon as the branch is pushed, so nothing was pushed. The commits \
             are in .sandcastle/repos/{}.git on the orchestrator's host; to push such changes, set \
             `[publish] allowWorkflowChanges = true`",
            code_list(&touches.workflows),
            piece.key().slug()
        )));
    }
    repo.push(&ctx.creds, &tip)?;
    let host_run = host_run_section(&touches);
    Ok(Published::Pull(match piece {
        Piece::Issue(issue) => {
            let body = pull_body(ctx, issue.number, state, clarified, &host_run);
            let title = Post::new(&format!("#{}: {}", issue.number, issue.title));
            let pull =
                ctx.forge
                    .open_pull(&ctx.login, repo.published_branch(), base, &title, &body)?;
            green_record::pushed(ctx, pull.number, &tip)?;
            ctx.forge.add_labels(pull.number, &["ready-for-human"])?;
            ctx.forge.add_labels(issue.number, &["in-review"])?;
            ctx.forge.remove_label(issue.number, "ready-for-agent")?;
            pull.number
        }
        Piece::Pull(pull) => {
            green_record::pushed(ctx, pull.number, &tip)?;
            let body = rework_comment(ctx, pull.number, repo, &start, state, &host_run)?;
            let marker = format!("<!-- sandcastle:rework {} -->", state.attempt);
            post_once(ctx, pull.number, &marker, &body)?;
            ctx.forge.add_labels(pull.number, &["ready-for-human"])?;
            ctx.forge.remove_label(pull.number, "ready-for-agent")?;
            pull.number
        }
        Piece::Green(pull, trouble) => {
            green_record::pushed(ctx, pull.number, &tip)?;
            let body = green_comment(ctx, trouble, repo, &start, state, &host_run)?;
            // One comment per round: a round starts from its own head.
            let marker = format!("<!-- sandcastle:green {start} -->");
            post_once(ctx, pull.number, &marker, &body)?;
            pull.number
        }
        Piece::Attempt(issue, attempt) => bail!(
            "issue #{}: attempt {} is published only once chosen, as its issue's work",
            issue.number,
            attempt.letter
        ),
    }))
}

/// The work branch's tip, if it is what may be pushed: the commit the gate last ran on (its
/// verdict is what the pull request says), or any tip when `[commands] check` is empty. `None`: the
/// gate has not seen the tip, which must be gated first.
pub fn gated_tip(ctx: &Context, repo: &WorkRepo, state: &WorkState) -> Result<Option<String>> {
    let tip = repo.tip()?;
    let gated =
        ctx.config.commands.check.is_empty() || state.gate_commit.as_deref() == Some(tip.as_str());
    Ok(gated.then_some(tip))
}

/// The comment on a sent-back pull request: its new commits, the agent's summary, the gate.
fn rework_comment(
    ctx: &Context,
    pull: u64,
    repo: &WorkRepo,
    start: &str,
    state: &WorkState,
    host_run: &str,
) -> Result<String> {
    let changes = repo.commits_since(start)?;
    let mut body = format!(
        "sandcastle addressed the review.\n\n{}{host_run}",
        gate_line(ctx, state)
    );
    body += &blocked_section(ctx, WorkKey::Pull(pull));
    body += &commits_section(
        &changes,
        "No new commits: the agent found nothing to change.",
    );
    body += &summary_section(state);
    Ok(body)
}

/// The comment on a pull request a round kept green: what it fixed, its commits, the summary, the
/// gate and the reviewer's verdict.
fn green_comment(
    ctx: &Context,
    trouble: &Trouble,
    repo: &WorkRepo,
    start: &str,
    state: &WorkState,
    host_run: &str,
) -> Result<String> {
    let mut body = format!(
        "sandcastle fixed {} on {}.\n\n{}{host_run}",
        trouble.what(),
        quote_inline(trouble.head()),
        gate_line(ctx, state)
    );
    if let Some(verdict) = &state.verdict {
        body += &format!(
            "\n\nThe reviewer {}.",
            if verdict.approved {
                "approved it"
            } else {
                "did not approve it; its findings are outstanding"
            }
        );
    }
    body += &commits_section(&repo.commits_since(start)?, "No new commits.");
    body += &summary_section(state);
    Ok(body)
}

/// The new commits' subjects (the agent's words), quoted, or `none` when there are none.
fn commits_section(subjects: &[String], none: &str) -> String {
    match subjects.is_empty() {
        true => format!("\n\n{none}"),
        false => format!("\n\nNew commits:\n\n{}", quote_names(subjects)),
    }
}

/// The agent's last summary, quoted: the last part of a comment.
fn summary_section(state: &WorkState) -> String {
    format!(
        "\n\nThe agent's summary, as it wrote it:\n\n{}",
        quote(&state.last_summary)
    )
}

/// The section that lists the files sandcastle's host runs, or nothing.
fn host_run_section(touches: &Touches) -> String {
    if touches.host_run.is_empty() {
        return String::new();
    }
    format!(
        "\n\n## Touches files sandcastle's host runs\n\nsandcastle reads or runs these on the \
         orchestrator's host once they reach the default branch; review them with that in mind:\n\n{}",
        quote_names(&touches.host_run)
    )
}

/// `a`, `b`: paths as inline code, each quoted.
fn code_list(paths: &[String]) -> String {
    let quoted: Vec<String> = paths.iter().map(|p| quote_inline(p)).collect();
    quoted.join(", ")
}

/// `Closes #N` first and only there: the rest is defused. sandcastle's facts (the gate, the cost,
/// the files its host runs, the refused requests) come before anything an agent wrote; the
/// clarification, the reviewer's verdict and the implementer's summary follow, each quoted.
fn pull_body(
    ctx: &Context,
    issue: u64,
    state: &WorkState,
    clarified: &str,
    host_run: &str,
) -> Post {
    let mut body = format!(
        "## Checks\n\n{}\n\nCost so far: ${:.2} over {} implementer iteration(s). Opened by sandcastle `{}`.",
        gate_line(ctx, state),
        state.cost_usd,
        state.iterations,
        ctx.id
    );
    if let Some(best_of) = &state.best_of {
        body += &attempts_section(best_of);
    }
    body += host_run;
    body += &blocked_section(ctx, WorkKey::Issue(issue));
    body += clarified;
    body += "\n\n## Review\n\n";
    let rounds = ctx.config.review.rounds;
    body += &match &state.verdict {
        Some(verdict) if verdict.approved => format!(
            "The reviewer approved it (round {} of at most {rounds}). Its verdict, as it wrote it:\n\n{}",
            state.review_rounds,
            quote(&verdict.summary)
        ),
        Some(verdict) => format!(
            "### Outstanding findings\n\nThe reviewer did not approve it after {} round(s); this is \
             open, as it wrote it:\n\n{}",
            state.review_rounds,
            quote(&verdict.summary)
        ),
        None if !ctx.config.review.enabled => {
            "No reviewer ran: the project turned review off (`[review] enabled = false`)."
                .to_string()
        }
        None => "No reviewer verdict was recorded.".to_string(),
    };
    body += &format!(
        "\n\n## What the implementer did\n\nIts summary, as it wrote it:\n\n{}\n",
        quote(&state.last_summary)
    );
    Post::closing(issue, &body)
}

/// The pull request's section on the attempts: sandcastle's facts (how many ran, which passed the
/// gate, each one's cost, which was chosen), then the reviewer's reasons, quoted.
fn attempts_section(best_of: &BestOf) -> String {
    let mut section = format!(
        "\n\n## Attempts\n\n{} independent attempts ran; the gate passed {} of them.\n\n| attempt | gate | iterations | cost |\n| --- | --- | --- | --- |\n",
        best_of.letters.len(),
        best_of.passed().len()
    );
    for ended in &best_of.ended {
        let chosen = best_of
            .choice
            .as_ref()
            .is_some_and(|c| c.letter == ended.letter);
        section += &format!(
            "| {}{} | {} | {} | ${:.2} |\n",
            ended.letter,
            if chosen { " (chosen)" } else { "" },
            match (&ended.commit, &ended.stopped) {
                (Some(commit), _) => format!("passed on {}", sandcastle_core::git::short(commit)),
                (None, Some(_)) => "stopped by the budget".to_string(),
                (None, None) => "did not pass".to_string(),
            },
            ended.iterations,
            ended.cost_usd
        );
    }
    match &best_of.choice {
        Some(Chosen {
            letter,
            why: Some(why),
        }) => {
            section += &format!(
                "\nThe reviewer chose attempt {letter}. Its reasons, as it wrote them:\n\n{}",
                quote(why)
            )
        }
        Some(Chosen { letter, why: None }) => {
            section += &format!("\nAttempt {letter} was the only one the gate passed.")
        }
        None => {}
    }
    section
}

/// The most refused hosts a pull request lists; the run report has them all.
const MAX_BLOCKED_LISTED: usize = 30;

/// "Blocked network requests": what the work's sandbox was refused through the proxy in this run,
/// so the operator sees what `[sandbox] egress` could allow; nothing when nothing was refused.
fn blocked_section(ctx: &Context, key: WorkKey) -> String {
    let refusals = ctx.proxy.blocked(&key.to_string());
    let blocked = &refusals.listed;
    if blocked.is_empty() {
        return String::new();
    }
    let mut section = String::from(
        "\n\n## Blocked network requests\n\nThe sandbox asked for these and was refused; allow a host with \
         `[sandbox] egress` in .sandcastle/config.toml if the work needs it:\n\n",
    );
    for request in blocked.iter().take(MAX_BLOCKED_LISTED) {
        // The host and the refused call are the agent's text.
        let host = format!("{}:{}", request.host, request.port);
        let call = request
            .call
            .as_ref()
            .map_or(String::new(), |call| format!(" {}", quote_inline(call)));
        section += &format!(
            "- {}{call} ({} time{})
",
            quote_inline(&host),
            request.count,
            if request.count == 1 { "" } else { "s" }
        );
    }
    if blocked.len() > MAX_BLOCKED_LISTED {
        section += &format!(
            "- and {} more (in the run report)\n",
            blocked.len() - MAX_BLOCKED_LISTED
        );
    }
    if refusals.unlisted > 0 {
        section += &format!(
            "- and {} more refused requests to other hosts, not kept by name\n",
            refusals.unlisted
        );
    }
    section
}

/// What the gate said, for the forge and the report.
pub fn gate_line(ctx: &Context, state: &WorkState) -> String {
    if ctx.config.commands.check.is_empty() {
        return "No gate: `[commands] check` is empty.".to_string();
    }
    match (state.gate_passed, &state.gate_commit) {
        (Some(true), Some(commit)) => format!(
            "`check` passed on {commit}, run by sandcastle itself in a fresh sandbox with a checkout of that commit (gate runs: {}).",
            state.gate_runs
        ),
        (Some(true), None) => format!(
            "`check` passed, run by sandcastle itself (gate runs: {}).",
            state.gate_runs
        ),
        (Some(false), _) => format!(
            "`check` failed on the last of {} gate run(s).",
            state.gate_runs
        ),
        (None, _) => "`check` has not run.".to_string(),
    }
}

/// One comment on issue or pull request `number` with the agent's last summary; the labels stay.
pub fn give_up(ctx: &Context, number: u64, state: &WorkState) -> Result<()> {
    let marker = format!("<!-- sandcastle:attempt {} -->", state.attempt);
    let why = match (&state.stopped_by, &state.best_of) {
        (Some(budget), _) => format!("sandcastle stopped this: {budget}"),
        (None, Some(best_of)) if best_of.choice.is_none() => format!(
            "sandcastle did not complete this: none of its {} attempts passed the gate",
            best_of.letters.len()
        ),
        (None, _) => format!(
            "sandcastle did not complete this in {} iteration(s)",
            state.counted_iterations()
        ),
    };
    let body = match &state.best_of {
        // The issue's own state: the attempts' summaries stay in their logs.
        Some(best_of) if best_of.choice.is_none() => {
            format!("{why}.{}", attempts_section(best_of))
        }
        _ => format!(
            "{why}.\n\nThe agent's last summary, as it wrote it:\n\n{}",
            quote(&state.last_summary)
        ),
    };
    post_once(ctx, number, &marker, &body).map(|_| ())
}

/// The run's budget is spent: one comment on the work saying it stopped for now and a later run
/// goes on; the saved state stays where it is.
pub fn stopped_for_the_run(ctx: &Context, key: WorkKey, why: &str) -> Result<()> {
    let Some(number) = key.number() else {
        return Ok(());
    };
    let marker = format!("<!-- sandcastle:run-budget {} -->", ctx.run_id);
    let body =
        format!("sandcastle stopped work on this for now: {why}. A later run goes on from here.");
    post_once(ctx, number, &marker, &body).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Ended;

    #[test]
    fn the_pull_section_gives_facts_first_and_quotes_the_reasons() {
        let mut best_of = BestOf::new(3);
        let ended = |letter, commit: Option<&str>, stopped: Option<&str>| Ended {
            letter,
            passed: commit.is_some(),
            commit: commit.map(str::to_string),
            iterations: 1,
            gate_runs: 1,
            cost_usd: 0.25,
            stopped: stopped.map(str::to_string),
        };
        best_of.ended = vec![
            ended('a', None, None),
            ended('b', Some("0123456789abcdef"), None),
            ended('c', None, Some("budget")),
        ];
        best_of.choice = Some(Chosen {
            letter: 'b',
            why: Some("## Heading\n<!-- hidden -->".into()),
        });
        let section = attempts_section(&best_of);
        assert!(section.contains("3 independent attempts ran; the gate passed 1 of them"));
        assert!(
            section.contains("| a | did not pass | 1 | $0.25 |"),
            "{section}"
        );
        assert!(
            section.contains("| b (chosen) | passed on 0123456789ab |"),
            "{section}"
        );
        assert!(
            section.contains("| c | stopped by the budget |"),
            "{section}"
        );
        assert!(
            section.contains("```\n## Heading"),
            "the reasons are quoted: {section}"
        );
    }
}
