//! What the orchestrator tells an agent between its turns: the next prompt of a resumed session,
//! what a fresh one is told of the iterations before it, and the nudges (the gate failed, the
//! commits were refused, the reviewer did not approve, a `<questions>` block could not be used).
use sandcastle_core::gate::GateOutcome;
use sandcastle_core::questions::BadQuestions;

/// A resumed reviewer's next prompt.
pub fn review_again(base: &str) -> String {
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
pub fn earlier_iterations(last_summary: &str, nudge: Option<&str>) -> String {
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

/// What an agent that said it was done is told when the gate failed.
pub fn gate_nudge(gate: &GateOutcome, runs: u32) -> String {
    format!(
        "You said you were done, so the orchestrator ran `check` (gate run {runs}). It failed at `{}`. \
         The end of its output:\n\n```\n{}\n```\n\nFix what it reports.",
        gate.failed_step.as_deref().unwrap_or("?"),
        gate.tail.trim_end()
    )
}

/// What an agent whose commits were refused is told next.
pub fn refused_nudge(why: &str) -> String {
    format!(
        "The orchestrator did not take the commits in your checkout: {why}. They are still there; \
         fix them, then go on. Nothing is published until they are taken."
    )
}

/// What the working agent is told of a review that did not approve.
pub fn review_nudge(findings: &str, round: u32, rounds: u32) -> String {
    format!(
        "The reviewer did not approve the change (review round {round} of {rounds}). Its findings:\n\n{}\n\n\
         Address each finding, or say in your summary why one is wrong.",
        findings.trim()
    )
}

/// What an agent whose `<questions>` block could not be used is told, once.
pub fn question_correction(why: &BadQuestions) -> String {
    format!(
        "Your <questions> block could not be used: {why}. If you need a person's decision, end your \
         message with exactly one corrected block in the documented shape (`<questions issueNumber=\"N\">` \
         with a <title>, an optional <prose>, and one or more <question>s, each with a <title>, an \
         optional <prose> and optional <options> of <option>s with a <title> and an optional <prose>; \
         nothing else). Otherwise go on with the work."
    )
}

/// What an agent that said it was done is told when the orchestrator sees it is not (`why`).
pub fn unfinished_nudge(why: &str) -> String {
    format!("You said you were done, but {why}. Fix that, commit, and say so again.")
}

/// Added to a turn's prompt when its fresh container's checkout got the tree the role's last
/// container left (`checkout::restore_snapshot`).
pub const TREE_CARRIED_OVER: &str = "\n\n## Your checkout was carried over\n\nThis turn runs in a fresh \
    sandbox. The files of your last one came with it as uncommitted changes on the branch's tip (see \
    `git status`): what you had not committed, and any commits the orchestrator did not take. Commit \
    what you keep.";

/// Told to each of an issue's attempts (best of N) in its whole prompt: which it is, and that the
/// others work on the same issue unseen.
pub fn attempt_note(letter: char, of: u32) -> String {
    format!(
        "\n\n## You are attempt {letter} of {of}\n\nThe orchestrator runs {of} independent attempts at \
         this issue, each with this prompt in a sandbox and on a branch of its own; you cannot see the \
         others. The gate runs on each attempt's last commit, and a reviewer chooses one of those it \
         passed for the pull request. Work as if yours were the only one.\n"
    )
}

/// The choosing reviewer's `<choice>` block was unusable: the correction its session is told.
pub fn choice_correction(why: &str) -> String {
    format!(
        "Your answer could not be used: {why}. End your final message with exactly one block \
         <choice>{{\"attempt\": \"<letter>\", \"why\": \"<your reasons>\"}}</choice> naming one of the \
         attempts shown."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompts_a_resumed_session_gets() {
        let plain = continuation(3, 5, None);
        assert!(
            plain.starts_with("# Iteration 3 of at most 5\n\nYour last message did not end with")
        );
        assert!(plain.ends_with("<promise>COMPLETE</promise>."));
        let gate = GateOutcome {
            passed: false,
            failed_step: Some("cargo test".into()),
            tail: "test x ... FAILED\n".into(),
            commit: None,
        };
        let nudge = gate_nudge(&gate, 2);
        assert!(nudge.contains("(gate run 2). It failed at `cargo test`."));
        assert!(nudge.contains("```\ntest x ... FAILED\n```"));
        assert!(continuation(2, 5, Some(&nudge)).contains(&nudge));
    }
}
