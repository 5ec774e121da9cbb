//! What the loop spends when nothing changes: the planner is asked again only when the candidates
//! change, and work given up is not taken up again, by this run or a later one, until a person
//! moves it.
use crate::harness::{Harness, docker_or_skip, run_for};
use serde_json::json;

/// An empty plan, `pollInterval = "1s"`, ten seconds of passes: one planner run, not ten.
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
    let stderr = run_for(h.command(&["run"]), 10);
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
