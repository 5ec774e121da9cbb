//! Best of N end to end: several implementers on one issue, each in its own sandbox and branch;
//! the gate filters them, one reviewer turn chooses with `<choice>`, and the chosen attempt's
//! branch is what is pushed as the issue's.
use crate::harness::{Harness, docker_or_skip};
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";

/// A commit of `file`; the command also prints the sandbox's model key and container name.
fn commit(file: &str, message: &str) -> Value {
    json!({"bash": format!("echo KEY-$ANTHROPIC_API_KEY HOST-$(cat /etc/hostname); echo {file} > {file} && git add {file} && git commit -qm '{message}'"), "description": "commit"})
}

/// What `commit` printed in `transcript` after `marker` (`KEY-`, `HOST-`): one word.
fn printed<'t>(transcript: &'t str, marker: &str) -> &'t str {
    let at = transcript
        .match_indices(marker)
        .map(|(at, _)| at + marker.len())
        .find(|&at| !transcript[at..].starts_with('$'))
        .unwrap_or_else(|| panic!("no {marker} printed: {transcript}"));
    let word = &transcript[at..];
    &word[..word
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .unwrap_or(word.len())]
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
/// a's), chooses c; the chosen attempt is reviewed as any issue's work, its findings going back to
/// c's own implementer session, and c's commits alone are pushed as the issue's branch; the pull
/// request lists all three attempts, the choice and its reasons.
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
            {"match": "# Role: reviewer, choosing among attempts", "turns": [
                {"bash": "cat ~/attempts/b/b.txt ~/attempts/c/c.txt; { echo x > ~/attempts/c/c.txt; } 2>/dev/null || echo READ-ONLY-$((1+1)); test -e ~/attempts/a || echo NO-A-$((1+1))", "description": "read the candidates"},
                {"text": format!("Both pass. {choice}")}]},
            {"match": "# Role: reviewer\n", "turns": [
                {"text": "FINDING-C: c.txt needs a test."},
                {"text": format!("Reviewed again. {COMPLETE}")}]},
            {"match": "You are attempt a of 3", "turns": [
                commit("a.txt", "Attempt a"),
                {"text": format!("ATTEMPT-a-SUMMARY: done. {COMPLETE}")},
                {"text": format!("Still done. {COMPLETE}")},
                {"text": format!("Done again. {COMPLETE}")}]},
            attempt('b', 3),
            {"match": "You are attempt c of 3", "turns": [
                commit("c.txt", "Attempt c"),
                {"text": format!("ATTEMPT-c-SUMMARY: wrote c.txt. {COMPLETE}")},
                commit("c_test.txt", "Test c"),
                {"text": format!("ATTEMPT-c-FIXED: added the test. {COMPLETE}")}]},
        ]),
        &format!("maxIterations = 3\nmaxConcurrency = 2\n{check}"),
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
    // Each attempt had a container and a proxy key of its own.
    let (mut keys, mut hosts) = (Vec::new(), Vec::new());
    for letter in ['a', 'b', 'c'] {
        let transcript = h.transcript(&format!("/issue-{issue}-{letter}/implementer-1.jsonl"));
        keys.push(printed(&transcript, "KEY-").to_string());
        hosts.push(printed(&transcript, "HOST-").to_string());
    }
    assert!(
        keys.iter().all(|k| k.starts_with("sandcastle-work-")),
        "{keys:?}"
    );
    for seen in [&keys, &hosts] {
        let mut distinct = seen.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "{seen:?}");
    }

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
    // Its container held the passing attempts' checkouts, read-only, and not a's.
    let choosing_transcript = h.transcript(&format!("/issue-{issue}/reviewer-1.jsonl"));
    for seen in ["b.txt\\nc.txt", "READ-ONLY-2", "NO-A-2"] {
        assert!(
            choosing_transcript.contains(seen),
            "{seen}: {choosing_transcript}"
        );
    }
    assert!(
        !first.prompt.contains("ATTEMPT-a-SUMMARY"),
        "{}",
        first.prompt
    );

    // The reviewer's findings went back to c's own implementer, resuming its session.
    let findings = h
        .anthropic
        .requests()
        .into_iter()
        .find(|r| r.prompt.contains("You are attempt c of 3") && r.latest.contains("FINDING-C"))
        .expect("the findings reached attempt c's implementer");
    assert!(findings.said.contains("ATTEMPT-c-SUMMARY"), "{findings:?}");

    // Only the chosen attempt's commits are pushed, as the issue's branch; no attempt branch is.
    assert_eq!(
        h.remote_log(&format!("sandcastle/issue-{issue}"))[..2],
        ["Test c".to_string(), "Attempt c".to_string()]
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
        "| a | did not pass | 3 |",
        "| b | passed on ",
        "| c (chosen) | passed on ",
        "The reviewer chose attempt c. Its reasons, as it wrote them:",
        "CHOICE-WHY: c is the clearest.",
        "ATTEMPT-c-FIXED",
    ] {
        assert!(body.contains(fact), "{fact}: {body}");
    }
    assert!(body.find("## Attempts") < body.find("CHOICE-WHY"), "{body}");
    // The chosen attempt was reviewed as any issue's work: approved.
    assert!(body.contains("The reviewer approved it"), "{body}");

    // The run report counts the attempts and their cost under the issue.
    let report = h.last_report();
    let work = &report["work"][0];
    let attempts = work["attempts"].as_array().expect("attempts reported");
    let letters: Vec<(&str, bool, bool)> = attempts
        .iter()
        .map(|a| {
            (
                a["letter"].as_str().unwrap(),
                a["passed"] == true,
                a["chosen"] == true,
            )
        })
        .collect();
    assert_eq!(
        letters,
        [("a", false, false), ("b", true, false), ("c", true, true)],
        "{report}"
    );
    let attempts_cost: f64 = attempts
        .iter()
        .map(|a| a["costUsd"].as_f64().unwrap())
        .sum();
    assert!(attempts_cost > 0.0, "{report}");
    assert!(
        work["total"]["usage"]["cost_usd"].as_f64().unwrap() >= attempts_cost,
        "the issue's cost includes every attempt's: {report}"
    );
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
    let body = pushed_body(&h, issue, "Attempt a");
    assert_two_passed_and_chosen(&body, 'a');
}

/// Three attempts one at a time against `maxCostPerIssue = 1`: each of a's and b's model turns
/// is billed $0.315 (sonnet: 100k tokens in, 1000 out), so after two attempts the issue has cost
/// more than its budget. The third attempt never starts a turn, and nothing more is spent: the
/// issue stops with one comment listing every attempt, c as stopped by the budget.
#[test]
fn a_spent_issue_budget_stops_the_third_attempt() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let costly = json!({"input_tokens": 100_000, "output_tokens": 1000});
    let costly_attempt = |letter: char| {
        json!({"match": format!("You are attempt {letter} of 3"), "turns": [
            {"bash": format!("echo {letter} > {letter}.txt && git add {letter}.txt && git commit -qm 'Attempt {letter}'"),
             "description": "commit", "usage": costly},
            {"text": format!("Done. {COMPLETE}"), "usage": costly}]})
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": "<choice>{\"attempt\": \"a\", \"why\": \"x\"}</choice>"}]},
            costly_attempt('a'),
            costly_attempt('b'),
            costly_attempt('c'),
        ]),
        "maxConcurrency = 1\n[implement]\nattempts = 3\n[budget]\nmaxCostPerIssue = 1",
    );
    let issue = h.create_issue("Write a file", "Write one file.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    let started = |letter: char| {
        h.anthropic
            .requests()
            .into_iter()
            .filter(|r| r.prompt.contains(&format!("You are attempt {letter} of 3")))
            .count()
    };
    assert!(started('a') >= 2 && started('b') >= 2, "{stderr}");
    assert_eq!(started('c'), 0, "the third attempt sent nothing: {stderr}");
    assert!(
        choosing_requests(&h).is_empty(),
        "no choice past the budget"
    );
    assert!(h.pulls().is_empty());

    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    let comment = &comments[0];
    for said in [
        "sandcastle stopped this: this work has cost $",
        "which reaches [budget] maxCostPerIssue ($1.00)",
        "3 independent attempts ran; the gate passed 2 of them.",
        "| c | stopped by the budget | 0 | $0.00 |",
    ] {
        assert!(comment.contains(said), "{said}: {comment}");
    }
}

/// Two attempts one at a time; the run is killed while attempt b works (a has passed the gate).
/// The next run resumes from the saved states: a is not started again, b goes on, and the
/// reviewer's choice is pushed.
#[test]
fn a_kill_during_the_attempts_resumes_without_starting_them_twice() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    // A read-only mount tells attempt b whether it runs after the kill.
    let signal = tempfile::tempdir().unwrap();
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer, choosing among attempts", "turns": [
                {"text": r#"<choice>{"attempt": "b", "why": "CHOICE-WHY: b."}</choice>"#}]},
            approving_reviewer(),
            attempt('a', 2),
            {"match": "You are attempt b of 2", "turns": [
                {"bash": "test -f /signal/resumed || { touch /tmp/b-started; sleep 120; }; echo b > b.txt && git add b.txt && git commit -qm 'Attempt b'", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        &format!(
            "maxConcurrency = 1\n[implement]\nattempts = 2\n[sandbox]\nmemory = \"2g\"\npidsLimit = 512\nmounts = [\"{}:/signal\"]",
            signal.path().display()
        ),
    );
    let issue = h.create_issue("Write a file", "Write one file.", &["ready-for-agent"]);
    let mut run = h.start_until(&["run", "--issue", &issue.to_string()], "/tmp/b-started");
    run.kill().unwrap();
    run.wait().unwrap();
    let started = |letter: char| {
        h.anthropic
            .requests()
            .into_iter()
            .filter(|r| r.prompt.contains(&format!("You are attempt {letter} of 2")) && r.turn == 0)
            .count()
    };
    assert_eq!((started('a'), started('b')), (1, 1));

    std::fs::write(signal.path().join("resumed"), "").unwrap();
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("resuming saved work (Attempts phase)"),
        "{stderr}"
    );
    assert_eq!(
        (started('a'), started('b')),
        (1, 2),
        "a is not started again; b's killed turn runs again: {stderr}"
    );
    let body = pushed_body(&h, issue, "Attempt b");
    assert_two_passed_and_chosen(&body, 'b');
}

/// The pull request's body, once the issue's branch on the forge ends in the commit `subject`.
fn pushed_body(h: &Harness, issue: u64, subject: &str) -> String {
    assert_eq!(
        h.remote_log(&format!("sandcastle/issue-{issue}"))
            .first()
            .map(String::as_str),
        Some(subject)
    );
    h.only_pull_body()
}

/// The body says both attempts passed the gate and `letter` was chosen.
fn assert_two_passed_and_chosen(body: &str, letter: char) {
    assert!(
        body.contains("2 independent attempts ran; the gate passed 2 of them."),
        "{body}"
    );
    assert!(body.contains(&format!("| {letter} (chosen) |")), "{body}");
}

/// The attempt `letter` of `of` whose commit `check` refuses (`maxIterations = 1`): it drops out.
fn refused_attempt(letter: char, of: u32) -> Value {
    json!({"match": format!("You are attempt {letter} of {of}"), "turns": [
        commit("refused.txt", &format!("Attempt {letter}")),
        {"text": format!("Done. {COMPLETE}")}]})
}

const REFUSING_CHECK: &str = r#"maxIterations = 1
[commands]
check = [["sh", "-c", "test ! -f refused.txt"]]
[implement]
attempts = 2"#;

/// Two attempts, one of which the gate passes: it is chosen without a choosing turn, reviewed and
/// pushed, and the pull request says it was the only one.
#[test]
fn a_single_passing_attempt_is_chosen_without_a_turn() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            approving_reviewer(),
            refused_attempt('a', 2),
            attempt('b', 2)
        ]),
        REFUSING_CHECK,
    );
    let issue = h.create_issue("Write a file", "Write one file.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(choosing_requests(&h).is_empty());
    let body = pushed_body(&h, issue, "Attempt b");
    assert!(body.contains("| a | did not pass | 1 |"), "{body}");
    assert!(
        body.contains("Attempt b was the only one the gate passed."),
        "{body}"
    );
}

/// Two attempts the gate refuses: the issue is given up with one comment on both, and nothing is
/// pushed.
#[test]
fn when_no_attempt_passes_one_comment_lists_them_all() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([refused_attempt('a', 2), refused_attempt('b', 2)]),
        REFUSING_CHECK,
    );
    let issue = h.create_issue("Write a file", "Write one file.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(h.pulls().is_empty());
    assert!(
        h.all_remote_subjects()
            .iter()
            .all(|s| !s.starts_with("Attempt"))
    );
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    for said in [
        "sandcastle did not complete this: none of its 2 attempts passed the gate.",
        "2 independent attempts ran; the gate passed 0 of them.",
        "| a | did not pass | 1 |",
        "| b | did not pass | 1 |",
    ] {
        assert!(comments[0].contains(said), "{said}: {}", comments[0]);
    }
    assert!(
        h.labels_of(issue).contains(&"ready-for-agent".to_string()),
        "labels kept"
    );
}

/// Killed between opening the chosen attempt's pull request and labelling it (held there by a
/// `Retry-After`): the next run finishes publishing it first, as it does for any issue, though
/// the issue's own state says only which attempt carries it.
#[test]
fn a_chosen_attempt_killed_half_published_is_finished_by_the_next_run() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            approving_reviewer(),
            refused_attempt('a', 2),
            attempt('b', 2)
        ]),
        REFUSING_CHECK,
    );
    let issue = h.create_issue("Write a file", "Write one file.", &["ready-for-agent"]);
    let pull = h.run_killed_before_the_labels(issue);
    let requests = h.anthropic.requests().len();

    let again = h.sandcastle(&["run", "--once"]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(h.pulls().len(), 1);
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
    assert_eq!(h.labels_of(issue), ["in-review"]);
    assert_eq!(h.anthropic.requests().len(), requests, "no agent ran again");
}
