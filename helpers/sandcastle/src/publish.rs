//! How finished work reaches the forge: an issue becomes a pull request that says what the
//! implementer did, what the reviewer said, whether the gate passed and what it cost; a sent-back
//! pull request gets its new commits and one comment. Work given up gets one comment. Every step is
//! idempotent, so a run stopped half-way publishes the same things again, never twice.
use crate::context::Context;
use crate::driver::Piece;
use crate::git::WorkRepo;
use crate::planning;
use crate::role::WorkKey;
use crate::state::WorkState;
use anyhow::{Context as _, Result};

/// Publishes `piece`; the number of its pull request.
pub fn publish(
    ctx: &Context,
    piece: &Piece,
    repo: &WorkRepo,
    base: &str,
    state: &WorkState,
) -> Result<u64> {
    repo.push(&ctx.creds)?;
    match piece {
        Piece::Issue(issue) => {
            let body = pull_body(ctx, issue.number, state);
            let pull = ctx
                .forge
                .open_pull(&ctx.login, &repo.branch, base, &issue.title, &body)?;
            ctx.forge.add_labels(pull.number, &["ready-for-human"])?;
            ctx.forge.add_labels(issue.number, &["in-review"])?;
            ctx.forge.remove_label(issue.number, "ready-for-agent")?;
            Ok(pull.number)
        }
        Piece::Pull(pull) => {
            let start = state.start_commit.clone().unwrap_or_default();
            let changes = repo.commits_since(&start)?;
            let mut body = String::from("sandcastle addressed the review.\n\n");
            if changes.is_empty() {
                body += "No new commits: the agent found nothing to change.\n";
            } else {
                body += "New commits:\n";
                for subject in &changes {
                    body += &format!("- {}\n", ctx.agent_text(subject));
                }
            }
            body += &format!(
                "\n{}\n\n{}",
                ctx.agent_text(&state.last_summary),
                gate_line(ctx, state)
            );
            body += &blocked_section(ctx, WorkKey::Pull(pull.number));
            let marker = format!("<!-- sandcastle:rework {} -->", state.attempt);
            post_once(ctx, pull.number, &marker, &body)?;
            ctx.forge.add_labels(pull.number, &["ready-for-human"])?;
            ctx.forge.remove_label(pull.number, "ready-for-agent")?;
            Ok(pull.number)
        }
    }
}

/// `Closes #N` first and only there: the agents' texts have their keywords defused.
fn pull_body(ctx: &Context, issue: u64, state: &WorkState) -> String {
    let mut body = format!(
        "Closes #{issue}\n\n## What the implementer did\n\n{}\n\n## Review\n\n",
        ctx.agent_text(&state.last_summary)
    );
    let rounds = ctx.config.review.rounds;
    body += &match &state.verdict {
        Some(verdict) if verdict.approved => format!(
            "The reviewer approved it (round {} of at most {rounds}):\n\n{}",
            state.review_rounds,
            ctx.agent_text(&verdict.summary)
        ),
        Some(verdict) => format!(
            "### Outstanding findings\n\nThe reviewer did not approve it after {} round(s); this is open:\n\n{}",
            state.review_rounds,
            ctx.agent_text(&verdict.summary)
        ),
        None => "No reviewer verdict was recorded.".to_string(),
    };
    body += &crate::clarify::pull_section(ctx, state);
    body += &blocked_section(ctx, WorkKey::Issue(issue));
    body += &format!(
        "\n\n## Checks\n\n{}\n\nCost so far: ${:.2} over {} implementer iteration(s). Opened by sandcastle `{}`.\n",
        gate_line(ctx, state),
        state.cost_usd,
        state.iterations,
        ctx.id
    );
    body
}

/// The most refused hosts a pull request lists; the run report has them all.
const MAX_BLOCKED_LISTED: usize = 30;

/// "Blocked network requests": what the work's sandbox was refused through the proxy in this run,
/// so the operator sees what `[sandbox] egress` could allow; nothing when nothing was refused.
fn blocked_section(ctx: &Context, key: WorkKey) -> String {
    let blocked = ctx.proxy.blocked(&key.to_string());
    if blocked.is_empty() {
        return String::new();
    }
    let mut section = String::from(
        "\n\n## Blocked network requests\n\nThe sandbox asked for these and was refused; allow a host with \
         `[sandbox] egress` in .sandcastle/config.toml if the work needs it:\n\n",
    );
    for request in blocked.iter().take(MAX_BLOCKED_LISTED) {
        // The host is the agent's text: the proxy read it as a URI's host, so it has no spaces.
        section += &format!(
            "- `{}:{}` ({} time{})\n",
            ctx.agent_text(&request.host),
            request.port,
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
    section
}

/// What the gate said, for the forge and the report.
pub fn gate_line(ctx: &Context, state: &WorkState) -> String {
    if ctx.config.commands.check.is_empty() {
        return "No gate: `[commands] check` is empty.".to_string();
    }
    match state.gate_passed {
        Some(true) => format!(
            "`check` passed, run by sandcastle itself (gate runs: {}).",
            state.gate_runs
        ),
        Some(false) => format!(
            "`check` failed on the last of {} gate run(s).",
            state.gate_runs
        ),
        None => "`check` has not run.".to_string(),
    }
}

/// One comment with the agent's last summary; the labels stay. The issue or pull request's revision
/// after it is kept, so it is not worked on again until a person moves it.
pub fn give_up(ctx: &Context, key: WorkKey, state: &mut WorkState) -> Result<()> {
    let Some(number) = key.number() else {
        return Ok(());
    };
    if !state.told_forge {
        let marker = format!("<!-- sandcastle:attempt {} -->", state.attempt);
        let why = match &state.stopped_by {
            Some(budget) => format!("sandcastle stopped this: {budget}"),
            None => format!(
                "sandcastle did not complete this in {} iteration(s)",
                state.counted_iterations()
            ),
        };
        let body = format!(
            "{why}. The agent's last summary:\n\n{}",
            ctx.agent_text(&state.last_summary)
        );
        post_once(ctx, number, &marker, &body)?;
        state.settled = Some(planning::revision(ctx, number)?);
        state.told_forge = true;
        state.save(&ctx.state_dir())?;
    }
    Ok(())
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

/// Posts `body` with `marker` on `number`, unless a comment of sandcastle's already carries the
/// marker: a run stopped right after posting never posts it twice. The comment's id.
pub fn post_once(ctx: &Context, number: u64, marker: &str, body: &str) -> Result<i64> {
    let posted = ctx
        .forge
        .comments(number)?
        .into_iter()
        .find(|c| c.author == ctx.login && c.body.contains(marker));
    match posted {
        Some(comment) => Ok(comment.id),
        None => ctx
            .forge
            .comment(
                number,
                &format!("{body}\n\n— sandcastle `{}`\n{marker}", ctx.id),
            )
            .context("cannot comment on the forge"),
    }
}
