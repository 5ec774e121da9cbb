//! The work driver end to end: agents that remember across iterations and runs, the gate the
//! orchestrator runs itself, the reviewer's verdict in the pull request, and one redacting sink.
use crate::harness::{Harness, docker_or_skip, sigterm};
use fake_anthropic::RecordedRequest;
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";

fn commit(file: &str, message: &str) -> Value {
    json!({"bash": format!("echo done > {file} && git add {file} && git commit -qm '{message}'"), "description": "commit"})
}

fn approving_reviewer() -> Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Reviewed. {COMPLETE}")}]})
}

/// The model requests of issue #1's implementer, in order.
fn implementer_requests(h: &Harness) -> Vec<RecordedRequest> {
    h.anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("The issue: #1\n"))
        .collect()
}

/// (a) An issue that takes two iterations: the second resumes the first's session, so its request
/// carries what the first iteration said (a marker only the first iteration's reply has).
#[test]
fn the_second_iteration_remembers_the_first() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([approving_reviewer(), {"match": "The issue: #1\n", "turns": [
            {"text": "MARKER-WORD-91 is where I stopped; not done yet."},
            commit("answer.txt", "Answer"),
            {"text": format!("Answered. {COMPLETE}")}]}]),
        "",
    );
    let issue = h.create_issue("Answer", "Write answer.txt.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(output.status.success());

    let requests = implementer_requests(&h);
    let second = requests
        .iter()
        .find(|r| r.latest.contains("# Iteration 2 of at most"))
        .expect("iteration 2 was a resumed session with a short prompt");
    assert!(second.said.contains("MARKER-WORD-91"), "{second:?}");
    assert!(
        second
            .latest
            .contains("did not end with <promise>COMPLETE</promise>")
    );
    assert!(!requests[0].said.contains("MARKER-WORD-91"));
    assert_eq!(
        h.remote_log("sandcastle/issue-1")
            .first()
            .map(String::as_str),
        Some("Answer")
    );
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["roles"]["implementer"]["iterations"], 2,
        "{report}"
    );
}

/// (b) The agent claims completion while `check` fails: the orchestrator runs `check`, its output
/// reaches the next iteration, the second claim passes the gate, and the pull request says so.
#[test]
fn a_claim_the_gate_refutes_goes_back_with_the_output() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let check = r#"[commands]
check = [["sh", "-c", "test -f fixed.txt || { echo 'GATE-SAYS: fixed.txt is missing'; exit 1; }"]]"#;
    let h = Harness::new(
        json!([approving_reviewer(), {"match": "The issue: #1\n", "turns": [
            commit("first.txt", "First try"),
            {"text": format!("Done, I think. {COMPLETE}")},
            commit("fixed.txt", "Fix what check said"),
            {"text": format!("Fixed it. {COMPLETE}")}]}]),
        check,
    );
    let issue = h.create_issue("Fix", "Make check pass.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(output.status.success());

    let requests = implementer_requests(&h);
    assert!(
        requests
            .iter()
            .any(|r| r.latest.contains("GATE-SAYS: fixed.txt is missing")
                && r.latest.contains("(gate run 1)")),
        "the gate's output reached the agent: {requests:?}"
    );
    let body = h.only_pull_body();
    assert!(
        body.contains("run by sandcastle itself in a fresh sandbox with a checkout of that commit (gate runs: 2)"),
        "{body}"
    );
    assert_eq!(
        h.remote_log("sandcastle/issue-1")[..2],
        ["Fix what check said".to_string(), "First try".to_string()]
    );
    let report = h.last_report();
    assert_eq!(report["work"][0]["gateRuns"], 2, "{report}");
    assert_eq!(report["work"][0]["gateFirstPassed"], false, "{report}");
    assert_eq!(report["work"][0]["gatePassed"], true, "{report}");
    assert_eq!(
        report["work"][0]["pull"],
        h.pulls()[0]["number"],
        "{report}"
    );
}

/// (c) A reviewer that does not approve on its first round: its findings reach the implementer,
/// the second review approves, and the pull request carries both summaries.
#[test]
fn the_reviewers_findings_go_back_and_the_second_review_approves() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [
                {"text": "FINDING-ALPHA: answer.txt has no test."},
                {"text": format!("REVIEW-OK: the test is there now. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                commit("answer.txt", "Answer"),
                {"text": format!("IMPL-ONE: wrote answer.txt. {COMPLETE}")},
                commit("answer_test.txt", "Test the answer"),
                {"text": format!("IMPL-TWO: added the test. {COMPLETE}")}]}]),
        "",
    );
    let issue = h.create_issue("Answer", "Write answer.txt, tested.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(output.status.success());

    assert!(
        implementer_requests(&h)
            .iter()
            .any(|r| r.latest.contains("FINDING-ALPHA: answer.txt has no test.")),
        "the findings reached the implementer"
    );
    let body = h.only_pull_body();
    for expected in [
        "IMPL-TWO: added the test.",
        "REVIEW-OK: the test is there now.",
        "round 2 of at most 2",
    ] {
        assert!(body.contains(expected), "{expected:?} not in {body}");
    }
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["roles"]["reviewer"]["iterations"], 2,
        "{report}"
    );
}

/// (d) A run stopped in the middle of an iteration and started again resumes the same session.
#[test]
fn a_stopped_run_resumes_the_same_session() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([approving_reviewer(), {"match": "The issue: #1\n", "turns": [
            {"text": "Part one thought through; not done yet."},
            {"bash": "touch /tmp/started && sleep 8 && echo slow > slow.txt && git add slow.txt && git commit -qm 'Slow work'", "description": "slow"},
            {"text": format!("Done. {COMPLETE}")}]}]),
        "",
    );
    let issue = h.create_issue("Slow", "Take your time.", &["ready-for-agent"]);
    let mut first = h.start_until(&["run", "--issue", &issue.to_string()], "/tmp/started");
    sigterm(&first);
    assert!(!first.wait().unwrap().success());
    assert!(
        h.comments_of(issue).is_empty(),
        "the stop released its claim for other orchestrators"
    );
    let state_file = h.project().join(".sandcastle/logs/state/issue-1.json");
    let state: Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
    let session = state["sessions"][0][1]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(state["sessions"][0][0], "implementer");

    let again = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(again.status.success());
    let transcripts: Vec<String> = h
        .log_files()
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with("implementer-2.jsonl"))
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert_eq!(transcripts.len(), 2, "iteration 2 ran in each run");
    for transcript in &transcripts {
        assert!(
            transcript.contains(&format!("\"session_id\":\"{session}\"")),
            "{transcript}"
        );
    }
    assert_eq!(h.pulls().len(), 1);
    assert_eq!(
        h.remote_log("sandcastle/issue-1")
            .iter()
            .filter(|s| *s == "Slow work")
            .count(),
        1
    );
}

/// (e) A commit subject that carries a secret, in the rework lane: the forge never sees it.
#[test]
fn a_secret_in_a_commit_subject_never_reaches_the_forge() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([{"match": "# Role: pull-request fixer", "turns": [
            {"bash": "echo fix > fix.txt && git add fix.txt && git commit -qm \"Use key $DEPLOY_TOKEN\"", "description": "leaky commit"},
            {"text": format!("Fixed with $DEPLOY_TOKEN. {COMPLETE}")}]}]),
        "",
    );
    // A secret of the project's that sandboxes get (the model key no longer reaches them).
    h.write_env_with(&h.token, "DEPLOY_TOKEN=sk-deploy-e2e-secret-0000\n");
    let pull = h.sent_back_pull(
        "sandcastle/issue-4",
        "bob",
        json!({"event": "REQUEST_CHANGES", "body": "Fix it."}),
    );

    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let comments = h.comments_of(pull);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].contains("```\nUse key [redacted]\n```"),
        "{comments:?}"
    );
    assert!(
        !comments[0].contains("sk-deploy-e2e-secret-0000"),
        "{comments:?}"
    );
    assert!(
        h.remote_log("sandcastle/issue-4")[0].contains("sk-deploy-e2e-secret-0000"),
        "the commit itself is the agent's to write: only what sandcastle posts is redacted"
    );
}

/// With `[review] enabled = false` no reviewer runs: the gate passes and the pull request opens,
/// saying that review is off.
#[test]
fn with_review_off_the_pull_request_opens_once_the_gate_passes() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let config = r#"[commands]
check = [["sh", "-c", "test -f answer.txt"]]

[review]
enabled = false"#;
    let h = Harness::new(
        json!([approving_reviewer(), {"match": "The issue: #1\n", "turns": [
            commit("answer.txt", "Answer"),
            {"text": format!("Answered. {COMPLETE}")}]}]),
        config,
    );
    let issue = h.create_issue("Answer", "Write answer.txt.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    assert!(
        !h.anthropic
            .requests()
            .iter()
            .any(|r| r.prompt.contains("# Role: reviewer")),
        "no reviewer turn"
    );
    let body = h.only_pull_body();
    assert!(
        body.contains("No reviewer ran: the project turned review off"),
        "{body}"
    );
    let report = h.last_report();
    assert_eq!(report["work"][0]["gatePassed"], true, "{report}");
    assert_eq!(
        h.remote_log("sandcastle/issue-1")
            .first()
            .map(String::as_str),
        Some("Answer")
    );
}
