//! Clarifying an issue before work starts: the assessor (no tools, its own model) scores the issue;
//! an incomplete one gets one question a round on the forge, a maintainer's answer goes to the next
//! assessment, and the pull request lists the answers. A complete issue starts at once in the
//! assessment's session; an unusable assessment never blocks; nobody to ask is exit status 3.
use crate::harness::{Harness, REPO, docker_or_skip};
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";
const ASSESSOR_MODEL: &str = "claude-haiku-4-5";
const CLARIFY: &str = "[models]\nassessor = \"claude-haiku-4-5\"\n[questions]\npollBackoff = [\"1s\"]\n[clarify]\nenabled = true\n";

fn assessment(completeness: f64, question: &str, missing: &[&str]) -> Value {
    let block = json!({
        "completeness": completeness,
        "question": question,
        "missing": missing,
        "example": "The server listens on port 8080 and logs each request as a plain text line.",
    });
    json!({"text": format!("My judgement.\n<assessment>{block}</assessment>")})
}

fn implementing() -> Vec<Value> {
    vec![
        json!({"bash": "echo server > server.txt && git add server.txt && git commit -qm 'Add the server'", "description": "commit"}),
        json!({"text": format!("Server added. {COMPLETE}")}),
    ]
}

/// An assessor conversation (matched by `pattern` in its prompt) answering `first`, then the turns
/// of an implementer that resumes it.
fn assessor(pattern: &str, first: Value, then: Vec<Value>) -> Value {
    let mut turns = vec![first];
    turns.extend(then);
    json!({"match": pattern, "without_tools": true, "turns": turns})
}

fn planner() -> Value {
    json!({"match": "# Role: planner", "turns": [{"plan": 1}]})
}

fn reviewer() -> Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

/// The vague issue #1, an assessor answering `first`, and an implementer that completes afresh.
fn vague_issue(first: Value) -> (Harness, u64) {
    let h = clarifying(vec![
        assessor("# Role: assessor", first, vec![]),
        json!({"match": "# Role: implementer", "turns": implementing()}),
    ]);
    let issue = h.create_issue("Server", "Make a server.", &["ready-for-agent"]);
    (h, issue)
}

/// A project that clarifies issues, with a planner, an approving reviewer and `scripts`.
fn clarifying(scripts: Vec<Value>) -> Harness {
    let mut all = vec![planner(), reviewer()];
    all.extend(scripts);
    Harness::new(Value::Array(all), CLARIFY)
}

/// The prompts the assessor's model was sent, in order.
fn assessments(h: &Harness) -> Vec<String> {
    h.anthropic
        .requests()
        .into_iter()
        .filter(|r| r.model == ASSESSOR_MODEL)
        .map(|r| r.prompt)
        .collect()
}

/// (a) Two rounds, each one question on the forge answered by a maintainer; then the work, in the
/// last assessment's session, and a pull request whose body lists the answers.
#[test]
fn two_rounds_of_one_question_then_work_and_the_answers_in_the_pull_request() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = clarifying(vec![
        assessor(
            "Answer (by carol): plain text lines",
            assessment(0.9, "", &[]),
            implementing(),
        ),
        assessor(
            "Answer (by carol): 8080",
            assessment(0.6, "How should it log requests?", &["the log format"]),
            vec![],
        ),
        assessor(
            "# Role: assessor",
            assessment(0.3, "Which port should it listen on?", &["the port"]),
            vec![],
        ),
    ]);
    let issue = h.create_issue("Server", "Make a server.", &["ready-for-agent"]);
    let carol = h.forge.add_user("carol");
    h.forge.add_collaborator(REPO, "carol", "write").unwrap();
    let answer_and_run = |text: &str| {
        h.post_as(
            &carol,
            &format!("/issues/{issue}/comments"),
            json!({"body": text}),
        );
        // pollBackoff is one second.
        std::thread::sleep(std::time::Duration::from_secs(2));
        assert!(h.sandcastle(&["run", "--once"]).status.success());
    };

    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "one question: {comments:?}");
    for expected in [
        "Which port should it listen on?",
        "question 1 of at most 5",
        "What the issue does not say yet: the port.",
        "An example of a complete statement: The server listens on port 8080",
    ] {
        assert!(
            comments[0].contains(expected),
            "{expected:?} in {}",
            comments[0]
        );
    }
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
    assert!(h.containers().is_empty(), "no container while waiting");
    assert!(h.pulls().is_empty());
    let listed = String::from_utf8_lossy(&h.sandcastle(&["questions"]).stdout).into_owned();
    assert!(
        listed.contains("#1 \"Before work starts: clarification, question 1 of at most 5\""),
        "{listed}"
    );
    assert!(
        h.last_report()
            .to_string()
            .contains("waits for clarification: question 1 of at most 5"),
        "the run report shows the waiting issue"
    );

    answer_and_run("8080");
    let comments = h.comments_of(issue);
    assert_eq!(
        comments.len(),
        3,
        "the question, the answer, the next question: {comments:?}"
    );
    assert!(comments[0].contains("**Answered** by `carol` through the forge"));
    assert!(comments[2].contains("How should it log requests?"));
    assert!(comments[2].contains("question 2 of at most 5"));
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
    assert!(h.pulls().is_empty(), "no work before the issue is clear");

    answer_and_run("plain text lines");
    let prompts = assessments(&h);
    assert_eq!(prompts.len(), 3, "one assessment a round");
    assert!(prompts[0].contains("(none yet)"));
    assert!(
        prompts[1].contains("Question 1: Which port should it listen on?\nAnswer (by carol): 8080")
    );
    assert!(prompts[2].contains("Answer (by carol): plain text lines"));
    assert!(
        prompts[2].contains("Untrusted text from the forge"),
        "the answers are fenced"
    );

    // The implementer resumed the last assessment's session, with its own model and tools.
    let implementer: Vec<_> = h
        .anthropic
        .requests()
        .into_iter()
        .filter(|r| r.model != ASSESSOR_MODEL && r.prompt.contains("# Role: assessor"))
        .collect();
    assert_eq!(implementer.len(), 2, "the implementer's two turns");
    assert!(implementer[0].latest.contains("# Role: implementer"));
    assert!(
        implementer[0].said.contains("<assessment>"),
        "the assessment's reasoning is not paid twice"
    );

    let body = h.only_pull_body();
    for expected in [
        "## Clarification",
        "Question 1, as the assessor asked it:\n\n```\nWhich port should it listen on?\n```",
        "Answered by `carol` through the forge:\n\n```\n8080\n```",
        "Question 2, as the assessor asked it:\n\n```\nHow should it log requests?\n```",
        "Answered by `carol` through the forge:\n\n```\nplain text lines\n```",
    ] {
        assert!(body.contains(expected), "{expected:?} in {body}");
    }
    assert!(!h.labels_of(issue).contains(&"needs-info".to_string()));
}

/// (b) A complete issue starts work at once: no question, the implementer resumes the
/// assessment's session, the report says so.
#[test]
fn a_complete_issue_starts_at_once_in_the_assessments_session() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = clarifying(vec![assessor(
        "# Role: assessor",
        assessment(0.95, "", &[]),
        implementing(),
    )]);
    let issue = h.create_issue(
        "Server",
        "Serve HTTP on port 8080 and log each request as one plain text line.",
        &["ready-for-agent"],
    );
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(assessments(&h).len(), 1);
    assert!(h.comments_of(issue).is_empty(), "nothing asked");
    let body = h.only_pull_body();
    assert!(!body.contains("## Clarification"), "{body}");
    let report = h.last_report().to_string();
    assert!(
        report.contains("clear enough to start after 0 question(s); the implementer resumes the assessment's session"),
        "{report}"
    );
    assert!(
        report.contains("\"assessor\""),
        "the assessor's turn is tallied: {report}"
    );
}

/// (c) An unparsable assessment: the clarification is degraded, work starts afresh, the report and
/// the pull request say so.
#[test]
fn an_unparsable_assessment_degrades_and_work_starts() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = vague_issue(json!({"text": "Looks fine to me."}));
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("degraded"));
    assert!(h.comments_of(issue).is_empty());
    let report = h.last_report().to_string();
    assert!(
        report.contains("degraded: the answer has 0 <assessment> blocks"),
        "{report}"
    );
    assert!(
        h.only_pull_body()
            .contains("The clarification was degraded")
    );
}

/// An assessment slower than `[clarify] timeout` is stopped: it is degraded and work starts.
#[test]
fn a_slow_assessment_is_cut_at_the_timeout_and_work_starts() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let slow = json!({"text": "Thinking.", "delay_seconds": 60});
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            assessor("# Role: assessor", slow, vec![]),
            json!({"match": "# Role: implementer", "turns": implementing()}),
        ]),
        &format!("{CLARIFY}timeout = \"3s\"\n"),
    );
    let issue = h.create_issue("Server", "Make a server.", &["ready-for-agent"]);
    let started = std::time::Instant::now();
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success(), "{output:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "the run did not wait for the slow assessor"
    );
    let report = h.last_report().to_string();
    assert!(
        report.contains("ran for 3s ([clarify] timeout) and was stopped"),
        "{report}"
    );
    assert!(h.comments_of(issue).is_empty());
    assert!(
        h.only_pull_body()
            .contains("The clarification was degraded")
    );
}

/// The assessor runs with `--max-turns 3`: one that keeps calling a tool it does not have is
/// stopped after its third request, and the assessment is degraded.
#[test]
fn the_assessor_gets_at_most_three_turns() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = clarifying(vec![
        json!({"match": "# Role: assessor", "without_tools": true, "repeat_last": true,
               "turns": [{"bash": "true", "description": "look around"}]}),
        json!({"match": "# Role: implementer", "turns": implementing()}),
    ]);
    h.create_issue("Server", "Make a server.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(assessments(&h).len(), 3, "three turns, no more");
    let report = h.last_report().to_string();
    assert!(report.contains("degraded"), "{report}");
    assert_eq!(h.pulls().len(), 1, "work started");
}

/// (d) No handler can reach a person: exit status 3, the guidance on stderr, nothing changed on
/// the forge.
#[test]
fn with_nobody_to_ask_the_run_stops_with_exit_3_and_guidance() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            planner(),
            assessor(
                "# Role: assessor",
                assessment(0.3, "Which port should it listen on?", &["the port"]),
                vec![]
            ),
        ]),
        // The terminal handler alone, and no terminal: nobody can be asked.
        "[questions]\nhandlers = [\"terminal\"]\n[clarify]\nenabled = true\n",
    );
    let issue = h.create_issue("Server", "Make a server.", &["ready-for-agent"]);
    let labels = h.labels_of(issue);
    let output = h.sandcastle(&["run"]);
    assert_eq!(output.status.code(), Some(3), "CI fails fast");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "issue #1 \"Server\" is not clear enough to start work",
        "What is missing:",
        "Z   - the port",
        "The question to answer: Which port should it listen on?",
        "An example of a complete statement: The server listens on port 8080",
        "sandcastle run --yes",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }
    assert!(h.comments_of(issue).is_empty(), "no comment left");
    assert_eq!(h.labels_of(issue), labels, "no label changed");
    assert!(h.pulls().is_empty());
    assert!(
        h.remote_log("sandcastle/issue-1").is_empty(),
        "no branch pushed"
    );
}

/// (e) `sandcastle run --yes` skips the assessment: work starts at once.
#[test]
fn run_yes_skips_the_clarification() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = vague_issue(assessment(0.1, "What should it do?", &["everything"]));
    assert!(h.sandcastle(&["run", "--once", "--yes"]).status.success());
    assert!(assessments(&h).is_empty(), "no assessment");
    assert!(h.comments_of(issue).is_empty());
    assert!(!h.only_pull_body().contains("## Clarification"));
}

/// `sandcastle run --yes` on an issue already waiting for a clarification answer: work starts
/// without it, `needs-info` goes, and the pull request lists the open question as an assumption.
#[test]
fn run_yes_releases_an_issue_waiting_for_clarification() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = vague_issue(assessment(
        0.2,
        "Which port should it listen on?",
        &["the port"],
    ));
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
    assert!(h.pulls().is_empty(), "it waits for an answer");

    assert!(h.sandcastle(&["run", "--once", "--yes"]).status.success());
    assert!(!h.labels_of(issue).contains(&"needs-info".to_string()));
    assert_eq!(assessments(&h).len(), 1, "no second assessment");
    let body = h.only_pull_body();
    assert!(body.contains("Which port should it listen on?"), "{body}");
    assert!(body.contains("## Assumptions"), "{body}");
}
