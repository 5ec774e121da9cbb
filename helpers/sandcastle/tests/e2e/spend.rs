//! What the loop spends when nothing changes: the planner is asked again only when the candidates
//! change, and work given up is not taken up again, by this run or a later one, until a person
//! moves it.
use crate::harness::{Harness, docker_or_skip, run_until};
use serde_json::json;

/// An empty plan, `pollInterval = "1s"`, three passes or more: one planner run, not one a pass.
#[test]
fn an_unchanged_candidate_set_is_planned_once() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([{"match": "# Role: planner", "turns": [{"text": "Nothing now. <plan>{\"issues\":[]}</plan>"}], "repeat_last": true}]),
        "",
    );
    h.create_issue("Later", "Not now.", &["ready-for-agent"]);
    let stderr = run_until(h.command(&["run"]), |stderr| {
        stderr.matches("pass: looking for work").count() >= 3
    });
    let passes = stderr.matches("pass: looking for work").count();
    assert!(passes >= 3, "the loop kept polling: {stderr}");
    let planner_runs = h
        .anthropic
        .requests()
        .iter()
        .filter(|r| r.prompt.contains("# Role: planner") && r.turn == 0)
        .count();
    assert_eq!(planner_runs, 1, "{stderr}");
    assert!(
        stderr.contains("the candidates have not changed since the last plan"),
        "{stderr}"
    );
}

/// An issue whose agent gave up is not retried by a restarted run until a person comments on it.
#[test]
fn a_given_up_issue_waits_for_a_person_across_restarts() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: planner", "turns": [{"text": "<plan>{\"issues\":[{\"id\":1,\"title\":\"Hard\",\"branch\":\"sandcastle/issue-1\"}]}</plan>"}]},
            {"match": "The issue: #1\n", "turns": [{"text": "Cannot do this yet."}], "repeat_last": true},
        ]),
        "maxIterations = 1",
    );
    let issue = h.create_issue("Hard", "Square the circle.", &["ready-for-agent"]);
    let implementer_runs = || {
        h.anthropic
            .requests()
            .iter()
            .filter(|r| r.prompt.contains("The issue: #1\n") && r.turn == 0)
            .count()
    };

    assert!(h.sandcastle(&["run", "--issue", "1"]).status.success());
    assert_eq!(implementer_runs(), 1);
    assert_eq!(h.comments_of(issue).len(), 1, "the give-up comment");

    // A new process: the saved state says nothing moved since it gave up.
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(implementer_runs(), 1, "not retried");
    assert_eq!(h.comments_of(issue).len(), 1, "no second comment");

    // A person answers: it is worked on again.
    let bob = h.forge.add_user("bob");
    h.post_as(
        &bob,
        &format!("/issues/{issue}/comments"),
        json!({"body": "Try a polygon with many sides."}),
    );
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(implementer_runs(), 2, "worked on again");
    let comments = h.comments_of(issue);
    assert_eq!(
        comments.len(),
        3,
        "bob's, and one give-up comment per attempt: {comments:?}"
    );
}

/// `[budget] maxCostPerRun` spent after the first turn: the work stops with one comment saying so,
/// the loop ends, and a later run goes on from the saved state with the same session.
#[test]
fn a_spent_run_budget_stops_the_run_and_a_later_run_goes_on() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": "Fine. <promise>COMPLETE</promise>"}]},
            {"match": "The issue: #1\n", "turns": [
                {"text": "Part one; not done yet."},
                {"bash": "echo done > done.txt && git add done.txt && git commit -qm 'Done'", "description": "commit"},
                {"text": "Done. <promise>COMPLETE</promise>"}]},
        ]),
        "[budget]\nmaxCostPerRun = 0.000001",
    );
    let issue = h.create_issue("Costly", "Do it.", &["ready-for-agent"]);
    let first = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(first.status.success());
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].starts_with("sandcastle stopped work on this for now: this run has spent $"),
        "{comments:?}"
    );
    assert!(
        comments[0].contains("reaches [budget] maxCostPerRun"),
        "{comments:?}"
    );
    let report = h.last_report();
    assert!(
        report["work"][0]["outcome"]
            .as_str()
            .unwrap()
            .starts_with("stopped: this run has spent"),
        "{report}"
    );
    assert!(h.pulls().is_empty());

    // Without the budget, the next run resumes the session and finishes.
    let config = h.project().join(".sandcastle/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("[budget]\nmaxCostPerRun = 0.000001", ""),
    )
    .unwrap();
    assert!(
        h.sandcastle(&["run", "--issue", &issue.to_string()])
            .status
            .success()
    );
    assert_eq!(h.pulls().len(), 1);
    assert_eq!(h.comments_of(issue).len(), 1, "no second comment");
}

/// Twenty model requests at once from the agent's Bash tool, through its relay, against
/// `maxCostPerIssue = 2`: each is billed $0.315 and may cost $0.765 (sonnet, 1000 tokens out, a
/// full context in). Before, each saw nothing spent yet and all twenty reached the model ($6.30);
/// now each reserves its worst case before it goes on, and what the model was asked stays within
/// the budget and one lone request past it.
#[test]
fn parallel_requests_from_a_sandbox_stay_within_the_budget() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let one = r#"body='{"model":"claude-sonnet-4-6","max_tokens":1000,"messages":[{"role":"user","content":"PARALLEL-SPEND"}]}'; exec 3<>/dev/tcp/127.0.0.1/${ANTHROPIC_BASE_URL##*:}; printf 'POST /v1/messages HTTP/1.1\r\nHost: model\r\nx-api-key: %s\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: %s\r\nconnection: close\r\n\r\n%s' "$ANTHROPIC_API_KEY" "${#body}" "$body" >&3; head -c 12 <&3"#;
    let spend = format!(
        "for i in $(seq 20); do ( {one} ) > /tmp/answer-$i 2>&1 & done; wait; cat /tmp/answer-*"
    );
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": "Fine. <promise>COMPLETE</promise>"}]},
            {"match": "PARALLEL-SPEND", "without_tools": true, "turns": [
                {"text": "spent", "delay_seconds": 2, "usage": {"input_tokens": 100_000, "output_tokens": 1000}}],
                "repeat_last": true},
            {"match": "The issue: #1\n", "turns": [
                {"bash": spend, "description": "spend"},
                {"text": "Done. <promise>COMPLETE</promise>"}]},
        ]),
        "[budget]\nmaxCostPerIssue = 2",
    );
    let issue = h.create_issue("Costly", "Spend.", &["ready-for-agent"]);
    assert!(
        h.sandcastle(&["run", "--issue", &issue.to_string()])
            .status
            .success()
    );

    let reached = h
        .anthropic
        .requests()
        .iter()
        .filter(|r| r.prompt.contains("PARALLEL-SPEND"))
        .count();
    let (billed, worst) = (0.315, 0.765);
    assert!(reached >= 1, "the first request went on");
    assert!(
        reached as f64 * billed <= 2.0 + worst,
        "{reached} of 20 parallel requests reached the model: ${:.2} against $2",
        reached as f64 * billed
    );
    let report = h.last_report();
    let cost = report["work"][0]["total"]["usage"]["cost_usd"]
        .as_f64()
        .unwrap();
    assert!(
        cost >= reached as f64 * billed,
        "the meter charged what reached the model: {report}"
    );
}
