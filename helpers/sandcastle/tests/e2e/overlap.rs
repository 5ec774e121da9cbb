//! The gate and the reviewer at once, on the same commit, each in its own container (issue 30):
//! a verdict counts only where the gate passed, and a stop while both run loses no review and runs
//! none twice. That they overlap is shown by order, not time: a gate that waits until the test saw
//! the reviewer's request at the scripted model could never end if the reviewer waited for it.
use crate::harness::{Harness, docker_or_skip, sigterm};
use serde_json::{Value, json};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const COMPLETE: &str = "<promise>COMPLETE</promise>";

/// A gate step that, unless `fixed.txt` is committed, waits for `/tmp/review-seen` (which the test
/// creates only once the reviewer asked the model), then fails saying so.
const GATE_FAILS_AFTER_THE_REVIEW_STARTED: &str = r#"[commands]
check = [["sh", "-c", "test -f fixed.txt && exit 0; while ! test -f /tmp/review-seen; do sleep 0.2; done; echo 'GATE-SAYS: fixed.txt is missing'; exit 1"]]"#;

fn commit(file: &str, message: &str) -> Value {
    json!({"bash": format!("echo done > {file} && git add {file} && git commit -qm '{message}'"), "description": "commit"})
}

fn reviewer_asked(h: &Harness) -> bool {
    h.anthropic
        .requests()
        .iter()
        .any(|r| r.prompt.contains("# Role: reviewer"))
}

fn start(h: &Harness, issue: u64) -> Child {
    h.command(&["run", "--issue", &issue.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls `done` while `child` runs (a deadline against a hang, not a measurement).
fn wait_until(child: &mut Child, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "sandcastle ended before: {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The id of this project's container whose name ends in `suffix`, once it runs while `child` does.
fn running_named(h: &Harness, child: &mut Child, suffix: &str) -> String {
    let mut found = None;
    wait_until(child, &format!("a container named …{suffix}"), || {
        found = h
            .named_containers()
            .into_iter()
            .find(|(_, name)| name.ends_with(suffix));
        found.is_some()
    });
    found.unwrap().0
}

/// Creates `signals` in every sandbox until `child` ends, which must be a success.
fn signal_until_done(h: &Harness, child: &mut Child, signals: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run never ended");
        for signal in signals {
            h.touch_in_sandbox(signal);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(child.wait().unwrap().success());
}

/// The gate fails on the implementer's commit while the reviewer, beside it, approves that commit:
/// the review is discarded (no pull request, no comment with it), the gate's output goes to the
/// implementer, and only the review of the fixed commit reaches the forge. Both reviews' spend is
/// in the report.
#[test]
fn a_gate_that_fails_beside_an_approving_reviewer_discards_the_review() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": format!("REVIEW-APPROVES. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                commit("first.txt", "First try"),
                {"text": format!("Done, I think. {COMPLETE}")},
                commit("fixed.txt", "Fix what check said"),
                {"text": format!("Fixed it. {COMPLETE}")}]}]),
        GATE_FAILS_AFTER_THE_REVIEW_STARTED,
    );
    let issue = h.create_issue("Fix", "Make check pass.", &["ready-for-agent"]);
    let mut run = start(&h, issue);

    // The gate on the first commit is still waiting when the reviewer asks the model.
    wait_until(&mut run, "the reviewer asked the model", || {
        reviewer_asked(&h)
    });
    let told_the_gate = |h: &Harness| {
        h.anthropic.requests().iter().any(|r| {
            r.prompt.contains("The issue: #1\n") && r.latest.contains("GATE-SAYS: fixed.txt")
        })
    };
    wait_until(&mut run, "the implementer heard the gate", || {
        h.touch_in_sandbox("/tmp/review-seen");
        told_the_gate(&h)
    });
    assert!(
        h.pulls().is_empty(),
        "the discarded approval opened nothing"
    );
    assert!(
        !h.comments_of(issue)
            .iter()
            .any(|c| c.contains("REVIEW-APPROVES")),
        "{:?}",
        h.comments_of(issue)
    );
    let implementer = h
        .anthropic
        .requests()
        .into_iter()
        .find(|r| r.latest.contains("GATE-SAYS: fixed.txt"))
        .unwrap();
    assert!(implementer.latest.contains("(gate run 1)"));
    assert!(!implementer.latest.contains("REVIEW-APPROVES"));

    assert!(run.wait().unwrap().success());
    assert_eq!(
        h.remote_log("sandcastle/issue-1")[..2],
        ["Fix what check said".to_string(), "First try".to_string()]
    );
    let body = h.only_pull_body();
    assert!(body.contains("(gate runs: 2)"), "{body}");
    assert_eq!(body.matches("REVIEW-APPROVES").count(), 1, "{body}");
    let report = h.last_report();
    let work = &report["work"][0];
    assert_eq!(work["roles"]["reviewer"]["iterations"], 2, "{report}");
    assert_eq!(work["gateRuns"], 2, "{report}");
    assert_eq!(work["gateFirstPassed"], false, "{report}");
    assert!(h.containers().is_empty(), "{:?}", h.containers());
    assert!(h.volumes().is_empty(), "{:?}", h.volumes());
}

/// The gate passes beside a reviewer that asks for changes: as before, the findings go to the
/// implementer and the next review approves; the first gate ended only after the reviewer began.
#[test]
fn a_gate_that_passes_beside_the_reviewer_keeps_its_findings() {
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
        r#"[commands]
check = [["sh", "-c", "while ! test -f /tmp/review-seen; do sleep 0.2; done"]]"#,
    );
    let issue = h.create_issue("Answer", "Write answer.txt, tested.", &["ready-for-agent"]);
    let mut run = start(&h, issue);

    wait_until(&mut run, "the reviewer asked the model", || {
        reviewer_asked(&h)
    });
    signal_until_done(&h, &mut run, &["/tmp/review-seen"]);
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["gateFirstPassed"], true,
        "the first gate passed, so it ended after the reviewer asked the model: {report}"
    );

    assert!(
        h.anthropic.requests().iter().any(|r| r
            .latest
            .contains("FINDING-ALPHA: answer.txt has no test.")
            && r.prompt.contains("The issue: #1\n")),
        "the findings reached the implementer"
    );
    let body = h.only_pull_body();
    for expected in [
        "IMPL-TWO: added the test.",
        "REVIEW-OK: the test is there now.",
        "round 2 of at most 2",
        "(gate runs: 2)",
    ] {
        assert!(body.contains(expected), "{expected:?} not in {body}");
    }
    assert_eq!(
        report["work"][0]["roles"]["reviewer"]["iterations"], 2,
        "{report}"
    );
}

/// A stop while the gate and the reviewer both run: every container and the gate's cache go, the
/// saved work is still in review with no verdict, and the next run reviews it once, beside a gate,
/// and opens one pull request with that review.
#[test]
fn a_stop_while_the_gate_and_the_reviewer_run_reviews_once_after_the_restart() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [
                {"bash": "touch /tmp/reviewing && sleep 8", "description": "slow review"},
                {"text": format!("REVIEW-ONCE. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                commit("answer.txt", "Answer"),
                {"text": format!("Done. {COMPLETE}")}]}]),
        r#"[commands]
check = [["sh", "-c", "touch /tmp/gating && sleep 8"]]"#,
    );
    let issue = h.create_issue("Answer", "Write answer.txt.", &["ready-for-agent"]);
    let mut first = h.start_until(&["run", "--issue", &issue.to_string()], "/tmp/reviewing");
    h.wait_for_file(&mut first, "/tmp/gating");
    sigterm(&first);
    assert!(!first.wait().unwrap().success());
    assert!(h.containers().is_empty(), "{:?}", h.containers());
    assert!(h.volumes().is_empty(), "{:?}", h.volumes());
    let state_file = h.project().join(".sandcastle/logs/state/issue-1.json");
    let state: Value = serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
    assert_eq!(state["phase"], "review", "{state}");
    assert!(state["verdict"].is_null(), "{state}");
    assert!(h.pulls().is_empty());

    let again = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(again.status.success());
    assert_eq!(h.pulls().len(), 1);
    let body = h.only_pull_body();
    assert_eq!(body.matches("REVIEW-ONCE").count(), 1, "{body}");
    // The stopped gate never ended: only the one that did is counted.
    assert!(body.contains("(gate runs: 1)"), "{body}");
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["roles"]["reviewer"]["iterations"], 1,
        "{report}"
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
    assert!(h.volumes().is_empty(), "{:?}", h.volumes());
}

/// A gate that fails beside the reviewer starts the implementer's fresh container while the
/// reviewer's turn still runs (a container of its own: the reviewer's is not taken over), and the
/// implementer's next turn runs in it.
#[test]
fn a_failed_gate_starts_the_implementers_container_while_the_review_finishes() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [
                {"bash": "touch /tmp/reviewing; while ! test -f /tmp/review-go; do sleep 0.2; done", "description": "wait"},
                {"text": format!("Fine. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                commit("first.txt", "First try"),
                {"text": format!("Done, I think. {COMPLETE}")},
                {"bash": "touch /tmp/implementing-2; while ! test -f /tmp/implementer-go; do sleep 0.2; done; echo fixed > fixed.txt && git add fixed.txt && git commit -qm 'Fix what check said'", "description": "fix"},
                {"text": format!("Fixed it. {COMPLETE}")}]}]),
        r#"[commands]
check = [["sh", "-c", "test -f fixed.txt || { echo 'GATE-SAYS: fixed.txt is missing'; exit 1; }"]]"#,
    );
    let issue = h.create_issue("Fix", "Make check pass.", &["ready-for-agent"]);
    let mut run = start(&h, issue);

    h.wait_for_file(&mut run, "/tmp/reviewing");
    // The implementer's is `-issue-1`, the reviewer's, started beside it, `-issue-1-2`.
    let ahead = running_named(&h, &mut run, "-issue-1-3");
    let reviewer = h
        .container_with("/tmp/reviewing")
        .expect("the reviewer still runs");
    assert_ne!(
        reviewer, ahead,
        "the reviewer's container is not the one ahead"
    );

    h.touch_in_sandbox("/tmp/review-go");
    wait_until(&mut run, "the implementer's second turn", || {
        h.container_with("/tmp/implementing-2").is_some()
    });
    assert_eq!(
        h.container_with("/tmp/implementing-2").as_deref(),
        Some(ahead.as_str()),
        "the implementer's turn ran in the container started ahead"
    );
    signal_until_done(&h, &mut run, &["/tmp/implementer-go", "/tmp/review-go"]);
    assert_eq!(
        h.remote_log("sandcastle/issue-1")[0],
        "Fix what check said".to_string()
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
}

/// No turn waits for a container to come or go: the reviewer's starts while the implementer's turn
/// still runs, the reviewer's turn runs in it, and the implementer's is gone while the reviewer's
/// turn still runs.
#[test]
fn the_reviewers_container_comes_and_the_implementers_goes_beside_a_turn() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [
                {"bash": "touch /tmp/reviewing; while ! test -f /tmp/review-go; do sleep 0.2; done", "description": "wait"},
                {"text": format!("Fine. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": "echo one > one.txt && git add one.txt && git commit -qm One && touch /tmp/implementing; while ! test -f /tmp/implementer-go; do sleep 0.2; done", "description": "commit, wait"},
                {"text": format!("Done. {COMPLETE}")}]}]),
        "",
    );
    let issue = h.create_issue("One", "Commit.", &["ready-for-agent"]);
    let mut run = start(&h, issue);

    h.wait_for_file(&mut run, "/tmp/implementing");
    let implementer = h
        .container_with("/tmp/implementing")
        .expect("the implementer's turn");
    let ahead = running_named(&h, &mut run, "-issue-1-2");
    assert_ne!(ahead, implementer);
    assert!(
        h.container_with("/tmp/implementing").is_some(),
        "the implementer's turn still runs"
    );

    h.touch_in_sandbox("/tmp/implementer-go");
    wait_until(&mut run, "the reviewer's turn", || {
        h.container_with("/tmp/reviewing").is_some()
    });
    assert_eq!(
        h.container_with("/tmp/reviewing").as_deref(),
        Some(ahead.as_str()),
        "the reviewer's turn ran in the container started beside the implementer's"
    );
    wait_until(&mut run, "the implementer's container gone", || {
        !h.containers().contains(&implementer)
    });
    assert!(
        h.container_with("/tmp/reviewing").is_some(),
        "the reviewer's turn still runs"
    );

    signal_until_done(&h, &mut run, &["/tmp/review-go"]);
    assert_eq!(h.pulls().len(), 1);
    assert!(h.containers().is_empty(), "{:?}", h.containers());
}
