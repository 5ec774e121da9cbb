//! Best of N end to end: several implementers on one issue, each in its own sandbox and branch;
//! the gate filters them, one reviewer turn chooses with `<choice>`, and the chosen attempt's
//! branch is what is pushed as the issue's.
use crate::harness::{Harness, docker_or_skip};
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";

fn commit(file: &str, message: &str) -> Value {
    json!({"bash": format!("echo {file} > {file} && git add {file} && git commit -qm '{message}'"), "description": "commit"})
}

/// The attempt `letter`'s implementer: one commit of its own, then done.
fn attempt(letter: char, of: u32) -> Value {
    json!({"match": format!("You are attempt {letter} of {of}"), "turns": [
        commit(&format!("{letter}.txt"), &format!("Attempt {letter}")),
        {"text": format!("ATTEMPT-{letter}-SUMMARY: wrote {letter}.txt. {COMPLETE}")}]})
}

fn approving_reviewer() -> Value {
    json!({"match": "# Role: reviewer\n", "turns": [{"text": format!("Reviewed. {COMPLETE}")}]})
}

/// The model requests whose first prompt is the choosing reviewer's.
fn choosing_requests(h: &Harness) -> Vec<fake_anthropic::RecordedRequest> {
    h.anthropic
        .requests()
        .into_iter()
        .filter(|r| {
            r.prompt
                .contains("# Role: reviewer, choosing among attempts")
        })
        .collect()
}

/// The remote's branches.
fn remote_branches(h: &Harness) -> String {
    String::from_utf8(h.remote_git(&["branch", "--list"]).stdout).unwrap()
}

/// Three attempts, `maxConcurrency = 2`: attempt a commits what `check` refuses and drops out after
/// `maxIterations`; b and c pass. The choosing reviewer sees b's and c's diffs and summaries (not
/// a's), chooses c; the chosen attempt is reviewed, and its commit alone is pushed as the issue's
/// branch; the pull request lists all three attempts, the choice and its reasons.
#[test]
fn three_attempts_one_fails_the_gate_and_the_reviewers_choice_is_pushed() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let check = r#"[commands]
check = [["sh", "-c", "test ! -f a.txt || { echo 'GATE-SAYS: a.txt is not allowed'; exit 1; }"]]
[implement]
attempts = 3"#;
    let choice = r#"<choice>{"attempt": "c", "why": "CHOICE-WHY: c is the clearest."}</choice>"#;
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer, choosing among attempts", "turns": [{"text": format!("Both pass. {choice}")}]},
            approving_reviewer(),
            {"match": "You are attempt a of 3", "turns": [
                commit("a.txt", "Attempt a"),
                {"text": format!("ATTEMPT-a-SUMMARY: done. {COMPLETE}")},
                {"text": format!("Still done. {COMPLETE}")}]},
            attempt('b', 3),
            attempt('c', 3),
        ]),
        &format!("maxIterations = 2\nmaxConcurrency = 2\n{check}"),
    );
    let issue = h.create_issue("Write a file", "Write one file.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    // Each attempt was its own conversation, told which it is.
    for letter in ['a', 'b', 'c'] {
        let first = h
            .anthropic
            .requests()
            .into_iter()
            .filter(|r| r.prompt.contains(&format!("You are attempt {letter} of 3")) && r.turn == 0)
            .count();
        assert_eq!(first, 1, "attempt {letter} started once: {stderr}");
    }
    assert!(
        stderr.contains("2 of 3 attempts passed the gate (b, c)"),
        "{stderr}"
    );

    // The choosing reviewer saw the passing attempts only: diffs, summaries, gate and cost.
    let choosing = choosing_requests(&h);
    let first = choosing.first().expect("a choosing turn ran");
    for seen in [
        "### Attempt b",
        "### Attempt c",
        "+b.txt",
        "+c.txt",
        "ATTEMPT-c-SUMMARY",
        "`check` passed on",
    ] {
        assert!(first.prompt.contains(seen), "{seen}: {}", first.prompt);
    }
    assert!(!first.prompt.contains("### Attempt a"), "{}", first.prompt);
    assert!(
        !first.prompt.contains("ATTEMPT-a-SUMMARY"),
        "{}",
        first.prompt
    );

    // Only the chosen attempt's commit is pushed, as the issue's branch; no attempt branch is.
    assert_eq!(
        h.remote_log(&format!("sandcastle/issue-{issue}"))
            .first()
            .map(String::as_str),
        Some("Attempt c")
    );
    let subjects = h.all_remote_subjects();
    assert!(
        !subjects
            .iter()
            .any(|s| s == "Attempt a" || s == "Attempt b"),
        "{subjects:?}"
    );
    let branches = remote_branches(&h);
    assert!(!branches.contains(&format!("issue-{issue}-")), "{branches}");

    // The pull request: sandcastle's facts on every attempt, then the reasons, quoted.
    let body = h.only_pull_body();
    for fact in [
        "3 independent attempts ran; the gate passed 2 of them.",
        "| a | did not pass | 2 |",
        "| b | passed on ",
        "| c (chosen) | passed on ",
        "The reviewer chose attempt c. Its reasons, as it wrote them:",
        "CHOICE-WHY: c is the clearest.",
        "ATTEMPT-c-SUMMARY",
    ] {
        assert!(body.contains(fact), "{fact}: {body}");
    }
    assert!(body.find("## Attempts") < body.find("CHOICE-WHY"), "{body}");
    // The chosen attempt was reviewed as any issue's work: approved.
    assert!(body.contains("The reviewer approved it"), "{body}");
}

/// Two attempts by the issue's own `attempts-2` label: the reviewer's first `<choice>` names an
/// attempt it was not shown, which is a failed turn, not a crash: its session is told why and the
/// second answer chooses.
#[test]
fn a_malformed_choice_is_a_failed_turn_and_the_correction_chooses() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer, choosing among attempts", "turns": [
                {"text": r#"<choice>{"attempt": "z", "why": "no such one"}</choice>"#},
                {"text": r#"Sorry. <choice>{"attempt": "a", "why": "CHOICE-WHY: a it is."}</choice>"#}]},
            approving_reviewer(),
            attempt('a', 2),
            attempt('b', 2),
        ]),
        "",
    );
    let issue = h.create_issue(
        "Write a file",
        "Write one file.",
        &["ready-for-agent", "attempts-2"],
    );
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("the reviewer's choice was unusable (1 of 2)"),
        "{stderr}"
    );
    let choosing = choosing_requests(&h);
    assert!(
        choosing
            .iter()
            .any(|r| r.latest.contains("Your answer could not be used")
                && r.latest.contains("\"attempt\" must be one of \"a\", \"b\"")),
        "the correction told why: {choosing:?}"
    );
    assert_eq!(
        h.remote_log(&format!("sandcastle/issue-{issue}"))
            .first()
            .map(String::as_str),
        Some("Attempt a")
    );
    let body = h.only_pull_body();
    assert!(
        body.contains("2 independent attempts ran; the gate passed 2 of them."),
        "{body}"
    );
    assert!(body.contains("| a (chosen) |"), "{body}");
}
