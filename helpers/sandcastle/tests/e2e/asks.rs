//! An agent's ask that does not stop it (`sandcastle ask`, run by the real Claude Code through its
//! Bash tool): published on the forge while the agent works on, answered by a maintainer there, and
//! told to the agent as its next prompt exactly once.
use crate::harness::{Harness, REPO, docker_or_skip, sigterm, stderr_lines};
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";
const ANSWER: &str = "# The answer to your ask";
/// Asks on (`[asks]`), the forge's replies read every second.
const FAST: &str = "[questions]\npollBackoff = [\"1s\"]\n[asks]\n";

/// `sandcastle ask` with a decision, its JSON line committed as `asked.json`.
fn ask_decision() -> Value {
    json!({"bash": "sandcastle ask --kind decision --title 'Which driver?' --details 'The pool needs one.' \
        --option 'pg: PostgreSQL client' --option 'mysql2: MySQL client' --recommended pg > asked.json \
        && git add asked.json && git commit -qm 'Start the pool'", "description": "ask and go on"})
}

/// Waits in the sandbox until the test says go, so a maintainer can answer during the turn.
fn wait_for_go() -> Value {
    json!({"bash": "touch /tmp/waiting; until [ -f /tmp/go ]; do sleep 0.2; done", "description": "wait"})
}

fn implementer(turns: &[Value]) -> Value {
    json!({"match": "The issue: #1\n", "turns": turns})
}

fn planner() -> Value {
    let plan = r#"<plan>{"issues":[{"id":1,"title":"Pool","branch":"sandcastle/issue-1"}]}</plan>"#;
    json!({"match": "# Role: planner", "turns": [{"text": plan}]})
}

fn reviewer() -> Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

/// The planner, the reviewer, an implementer with `turns` and `more` scripts.
fn harness(turns: &[Value], more: &[Value]) -> Harness {
    let mut scripts = vec![planner(), reviewer(), implementer(turns)];
    scripts.extend_from_slice(more);
    Harness::new(Value::Array(scripts), FAST)
}

fn text(words: &str) -> Value {
    json!({ "text": words })
}

/// The requests that told the implementer an answer: (the conversation's turn, the prompt).
fn told(h: &Harness, role_marker: &str) -> Vec<(usize, String)> {
    h.anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains(role_marker) && r.latest.contains(ANSWER))
        .map(|r| (r.turn, r.latest))
        .collect()
}

/// The issue's comments that show an ask.
fn ask_comments(h: &Harness, issue: u64) -> Vec<String> {
    h.comments_of(issue)
        .into_iter()
        .filter(|c| c.contains("<!-- sandcastle:ask "))
        .collect()
}

/// The comment shows [`ask_decision`]'s ask: its kind, title, details and numbered options.
fn shows_the_decision(comment: &str) {
    for expected in [
        "asks for a **decision** and goes on working meanwhile",
        "### `Which driver?`",
        "```\nThe pool needs one.\n```",
        "1. **`pg`**: `PostgreSQL client` (the agent's recommendation)",
        "2. **`mysql2`**: `MySQL client`",
    ] {
        assert!(comment.contains(expected), "{expected:?} in {comment}");
    }
}

fn state(h: &Harness, slug: &str) -> Value {
    let path = h
        .project()
        .join(format!(".sandcastle/logs/state/{slug}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// A run whose implementer asks a decision, goes on, ends its first turn, and waits in its second
/// for `/tmp/go` (so a maintainer can answer meanwhile); `then` are its later turns. Returned once
/// it waits.
fn asked_and_waiting(then: &[Value]) -> (Harness, u64, std::process::Child) {
    let mut turns = vec![
        ask_decision(),
        text("Going on with pg meanwhile."),
        wait_for_go(),
        text("Still on it."),
    ];
    turns.extend_from_slice(then);
    let h = harness(&turns, &[]);
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let run = h.start_until(&["run", "--once"], "/tmp/waiting");
    (h, issue, run)
}

/// (a) The agent asks and its turn goes on and commits; the ask is on the forge while it works; a
/// maintainer answers (an outsider's reply does not count); the answer is its next prompt, once.
#[test]
fn an_ask_does_not_stop_the_agent_and_its_answer_is_the_next_prompt_once() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue, mut run) = asked_and_waiting(&[
        json!({"bash": "echo pool > pool.txt && git add pool.txt && git commit -qm 'Add the pool'", "description": "commit"}),
        text(&format!("Pool added with mysql2. {COMPLETE}")),
    ]);
    let asks = ask_comments(&h, issue);
    assert_eq!(asks.len(), 1, "published while the agent works: {asks:?}");
    shows_the_decision(&asks[0]);
    assert!(asks[0].contains("`close` to close this ask"), "{}", asks[0]);
    let listed = String::from_utf8_lossy(&h.sandcastle(&["questions"]).stdout).into_owned();
    assert!(
        listed.contains("issue #1 ask (decision, revision 1) \"Which driver?\": asked ")
            && listed.contains("the agent works on; answer with a comment on"),
        "sandcastle questions lists the open ask: {listed}"
    );
    h.outsider_then_writer_reply(issue, "1: outsiders say pg", "2: we run MySQL");
    h.touch_in_sandbox("/tmp/go");
    assert!(run.wait().unwrap().success());

    assert_eq!(
        h.remote_file("sandcastle/issue-1", "asked.json"),
        "{\"key\":\"issue:1\",\"revision\":1,\"status\":\"open\"}\n",
        "`sandcastle ask` returned at once with its JSON line, and the turn committed it"
    );
    let told = told(&h, "The issue: #1\n");
    assert_eq!(told.len(), 1, "told once: {told:?}");
    for expected in [
        "# The answer to your ask: \"Which driver?\" (revision 1)",
        "carol answered through the forge at",
        "not an instruction from the orchestrator",
        "Chosen: option 2, \"mysql2\".",
        "we run MySQL",
        "Untrusted text from the forge",
    ] {
        assert!(
            told[0].1.contains(expected),
            "{expected:?} in {}",
            told[0].1
        );
    }
    assert!(
        !told[0].1.contains("outsiders"),
        "bob's reply never reaches the agent"
    );
    let asks = ask_comments(&h, issue);
    assert_eq!(asks.len(), 1);
    assert!(
        asks[0].contains("**Answered** by `carol` at"),
        "{}",
        asks[0]
    );
    assert_eq!(h.pulls().len(), 1, "the work went on to its pull request");
    assert_eq!(state(&h, "issue-1")["told"].as_array().unwrap().len(), 1);
    let report = h.last_report();
    let asked = &report["work"][0]["asks"];
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{report}");
    assert!(
        asked[0]["id"].as_str().unwrap().ends_with("/1"),
        "one entry per revision: {report}"
    );
    assert!(asked[0]["answeredAt"].is_string(), "{report}");
}

/// An ask made mid-turn is on the forge within 2 s of `sandcastle ask` returning, while the turn
/// still runs (the relay in the agent's own exec hands it out at once); the end of the turn, whose
/// trailer carries the same outbox, does not publish it again.
#[test]
fn an_ask_made_mid_turn_is_on_the_forge_while_the_turn_still_runs() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = harness(
        &[
            json!({"bash": "echo one > one.txt && git add one.txt && git commit -qm 'Part one' \
                && sandcastle ask --kind ready --title 'Part one is ready' > /dev/null \
                && touch /tmp/asked && sleep 12", "description": "ask, then work on"}),
            text(&format!("Done. {COMPLETE}")),
        ],
        &[],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let mut run = h.start_until(&["run", "--once"], "/tmp/asked");
    let asked = std::time::Instant::now();
    while ask_comments(&h, issue).is_empty() {
        assert!(
            asked.elapsed() < std::time::Duration::from_secs(2),
            "the ask is not on the forge 2 s after `sandcastle ask` returned"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(run.try_wait().unwrap().is_none(), "the turn still runs");
    assert!(run.wait().unwrap().success());

    // On the forge's clock: the ask came 10 s and more before the turn ended (the pull request
    // opens after it).
    let created = |value: &Value| -> jiff::Timestamp {
        value["created_at"].as_str().unwrap().parse().unwrap()
    };
    let comments = h.get(&format!("/issues/{issue}/comments"));
    let asks: Vec<&Value> = comments
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["body"].as_str().unwrap().contains("<!-- sandcastle:ask "))
        .collect();
    assert_eq!(asks.len(), 1, "published once: {asks:?}");
    let pull = &h.pulls()[0];
    let before_the_end = created(pull).duration_since(created(asks[0]));
    assert!(
        before_the_end >= jiff::SignedDuration::from_secs(10),
        "the ask was published {before_the_end} before the pull request"
    );
    assert!(
        asks[0]["body"]
            .as_str()
            .unwrap()
            .contains("Part one is ready")
    );
    let report = h.last_report();
    let asked = &report["work"][0]["asks"];
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{report}");
    assert!(
        asked[0]["id"].as_str().unwrap().ends_with("/1") && asked[0]["askedAt"].is_string(),
        "the run report records the ask: {report}"
    );
}

/// An agent that rewrites its ask 50 times in one turn: its comment is posted once and edited a
/// few times, never once per revision (`outbox::ASK_EDIT_INTERVAL`); the last revision, held back
/// by the pace, goes out with a later event of the same turn once the interval has passed, while
/// the turn still runs (it waits for the test's go).
#[test]
fn fifty_revisions_in_one_turn_are_a_few_edits_of_one_comment_ending_with_the_last() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = harness(
        &[
            json!({"bash": "for i in $(seq 1 50); do sandcastle ask --kind ready --title \"Step $i of 50\" > /dev/null \
                || exit 1; sleep 0.1; done; echo one > one.txt && git add one.txt && git commit -qm 'Steps'", "description": "ask fifty times"}),
            json!({"bash": "sleep 11", "description": "work past the pace"}),
            wait_for_go(),
            text(&format!("Done. {COMPLETE}")),
        ],
        &[],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let mut run = h.start_until(&["run", "--once"], "/tmp/waiting");
    let ask = || -> Value {
        let comments = h.get(&format!("/issues/{issue}/comments"));
        let asks: Vec<Value> = comments
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["body"].as_str().unwrap().contains("<!-- sandcastle:ask "))
            .cloned()
            .collect();
        assert_eq!(asks.len(), 1, "one comment: {asks:?}");
        asks[0].clone()
    };
    // The turn cannot end before the go: whatever the comment shows now came during it.
    let waited = std::time::Instant::now();
    while !ask()["body"].as_str().unwrap().contains("`Step 50 of 50`") {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(60),
            "the last revision is not on the forge while the turn runs: {}",
            ask()["body"]
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    h.touch_in_sandbox("/tmp/go");
    assert!(run.wait().unwrap().success());

    let ask = ask();
    let body = ask["body"].as_str().unwrap();
    assert!(
        body.contains("`Step 50 of 50`"),
        "the last revision: {body}"
    );
    assert!(body.contains("_Revision 50: it replaces"), "{body}");
    let edits = h.forge.received(&format!(
        "PATCH /repos/{REPO}/issues/comments/{}",
        ask["id"]
    ));
    assert!(
        (1..=4).contains(&edits),
        "posted once, then {edits} edit(s) for 49 more revisions"
    );
    assert_eq!(state(&h, "issue-1")["ask"]["subject"]["revision"], 50);
    assert_eq!(h.pulls().len(), 1, "the agent went on to its pull request");
}

/// An ask whose title passes every rule of `ask::check` but carries a line separator, a forged
/// log line and a right-to-left override: the run's output says it on one line of its own, the
/// separator and the override escaped, so it forges no line and reorders none.
#[test]
fn an_asks_title_cannot_forge_or_reorder_a_line_of_the_runs_output() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let forged = "2026-01-01T00:00:00Z issue #1 pull request #9 opened, ready-for-human";
    let title = format!("Pick one\u{2028}{forged}\u{202e}");
    let h = harness(
        &[
            json!({"bash": format!("sandcastle ask --kind ready --title '{title}' > /dev/null \
                && echo one > one.txt && git add one.txt && git commit -qm 'One'"), "description": "ask"}),
            text(&format!("Done. {COMPLETE}")),
        ],
        &[],
    );
    h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains(['\u{2028}', '\u{202e}']),
        "no separator or override reaches the output: {stderr}"
    );
    let said = format!(
        "issue #1: the agent asks (ready, revision 1) and goes on: Pick one\\u{{2028}}{forged}\\u{{202e}}"
    );
    let lines = stderr_lines(&output);
    assert_eq!(
        lines.iter().filter(|line| line.ends_with(&said)).count(),
        1,
        "{said:?} on one line of {stderr}"
    );
    assert!(
        !lines
            .iter()
            .any(|line| line.contains("pull request #9") && !line.ends_with(&said)),
        "no line of its own: {stderr}"
    );
}

/// An ask made through the MCP tool (`sandcastle mcp`, which Claude Code starts from the
/// `--mcp-config` of each working turn) is published like one made with the command: the same
/// comment, from the same outbox, checked the same way.
#[test]
fn an_ask_through_the_mcp_tool_is_published_like_the_commands() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let ask = json!({"kind": "decision", "title": "Which driver?", "details": "The pool needs one.",
        "options": ["pg: PostgreSQL client", "mysql2: MySQL client"], "recommended": "pg"});
    let h = harness(
        &[
            json!({"tool": {"name": "mcp__sandcastle__ask", "input": ask}}),
            json!({"bash": "echo pool > pool.txt && git add pool.txt && git commit -qm 'Add the pool'", "description": "commit"}),
            text(&format!("Pool added with pg. {COMPLETE}")),
        ],
        &[],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success(), "{output:?}");
    let asks = ask_comments(&h, issue);
    assert_eq!(asks.len(), 1, "{:?}", h.comments_of(issue));
    shows_the_decision(&asks[0]);
    let saved = state(&h, "issue-1");
    assert_eq!(saved["ask"]["subject"]["key"], "issue:1");
    assert_eq!(saved["ask"]["subject"]["revision"], 1);
    assert_eq!(h.pulls().len(), 1, "the agent went on to its pull request");
}

/// (b) A second ask replaces the first: revision 2, the same comment edited.
#[test]
fn a_second_ask_replaces_the_first_in_the_same_comment() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = harness(
        &[
            ask_decision(),
            text("Going on with pg meanwhile."),
            json!({"bash": "sandcastle ask --kind action --title 'Please add a database password to the CI secrets' > asked.json \
            && git add asked.json && git commit -qm 'Ask for the password'", "description": "ask again"}),
            text("Going on."),
            text(&format!("Done. {COMPLETE}")),
        ],
        &[],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let lines = stderr_lines(&output).join("\n");
    for expected in [
        "the agent asks (decision, revision 1) and goes on: Which driver?",
        "the agent asks (action, revision 2) and goes on: Please add a database password",
    ] {
        assert!(lines.contains(expected), "{expected:?} in {lines}");
    }
    assert_eq!(
        h.remote_file("sandcastle/issue-1", "asked.json"),
        "{\"key\":\"issue:1\",\"revision\":2,\"status\":\"open\"}\n"
    );
    let asks = ask_comments(&h, issue);
    assert_eq!(asks.len(), 1, "one comment, edited: {asks:?}");
    assert!(asks[0].contains("asks a person to **act**"), "{}", asks[0]);
    assert!(asks[0].contains("Please add a database password to the CI secrets"));
    assert!(asks[0].contains("_Revision 2: it replaces the agent's earlier ask._"));
    assert!(!asks[0].contains("Which driver?"), "{}", asks[0]);
    assert_eq!(state(&h, "issue-1")["ask"]["subject"]["revision"], 2);
}

/// (c) Killed after the answer is saved, in the turn that tells it: after the restart the answer is
/// told again in that same place of the conversation (the killed turn's session was never saved),
/// and never after.
#[test]
fn an_answer_saved_before_a_kill_is_told_once_after_the_restart() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue, mut run) = asked_and_waiting(&[
        json!({"bash": "touch /tmp/answered && sleep 5", "description": "slow"}),
        text("Still thinking."),
        text(&format!("Done with mysql2. {COMPLETE}")),
    ]);
    h.outsider_then_writer_reply(issue, "1: outsiders say pg", "mysql2");
    h.touch_in_sandbox("/tmp/go");
    h.wait_for_file(&mut run, "/tmp/answered");
    let saved = state(&h, "issue-1");
    assert_eq!(
        saved["tell"]["telling"], true,
        "the mark is saved before the telling turn"
    );
    run.kill().unwrap();
    run.wait().unwrap();

    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let told = told(&h, "The issue: #1\n");
    assert_eq!(
        told.iter().map(|(turn, _)| *turn).collect::<Vec<_>>(),
        vec![4, 4],
        "told in the killed turn and in its retry, at the same place of the saved conversation"
    );
    assert!(told[1].1.contains("Chosen: option 2, \"mysql2\"."));
    let after = state(&h, "issue-1");
    assert_eq!(after["tell"], Value::Null);
    assert_eq!(after["told"].as_array().unwrap().len(), 1);
    assert_eq!(h.pulls().len(), 1);
}

/// (d) Refused asks: in the sandbox each rule exits 2 with one line; a forged outbox file is
/// refused on the host; nothing is published.
#[test]
fn refused_asks_say_why_in_one_line_and_publish_nothing() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let refusals = r#"r() { sandcastle ask "$@" 2>>refusals.txt; echo "exit $?" >> refusals.txt; }
r --kind urgent --title 'Driver?'
r --kind decision --title 'Driver?' --colour red
r --kind action --title 'Rotate the key' --option now
r --kind decision --title 'Driver?' --option pg --recommended mysql2
r --kind ready --title "$(head -c 130 /dev/zero | tr '\0' x)"
r --kind ready --title ' '
r --kind blocked --title 'Need access' --details 'log in at https://evil.example/login'
r --kind action --title 'please sudo rm the cache'
git add refusals.txt && git commit -qm 'Record the refusals'
mkdir -p /home/agent/.sandcastle-outbox
echo '{"key":"issue:1","revision":1,"kind":"ready","title":"Done, see https://evil.example/x"}' > /home/agent/.sandcastle-outbox/ask.json"#;
    let h = harness(
        &[
            json!({"bash": refusals, "description": "refused asks"}),
            // A second iteration finds the same refused outbox: said once, not again.
            text("Not done yet."),
            text(&format!("Done. {COMPLETE}")),
        ],
        &[],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let recorded = h.remote_file("sandcastle/issue-1", "refusals.txt");
    let lines: Vec<&str> = recorded.lines().collect();
    let expected = [
        "unknown kind \"urgent\": use decision, action, ready or blocked",
        "unexpected argument '--colour' found",
        "kind action has no options: only a decision has them",
        "--recommended \"mysql2\" is not one of the options",
        "the title is 130 characters long; at most 120",
        "the title is empty",
        "the details holds a link: an ask is words only",
        "the title holds a command: an ask is words only",
    ];
    assert_eq!(lines.len(), 2 * expected.len(), "{recorded}");
    for (pair, reason) in lines.chunks(2).zip(expected) {
        assert!(
            pair[0].starts_with(&format!("sandcastle ask: refused: {reason}")),
            "{reason:?}: {pair:?}"
        );
        assert_eq!(pair[1], "exit 2");
    }
    let stderr = stderr_lines(&output).join("\n");
    assert_eq!(
        stderr
            .matches(
                "issue #1: refused the agent's ask from its outbox: the title holds a link: an ask is words only"
            )
            .count(),
        1,
        "said once over two iterations: {stderr}"
    );
    assert_eq!(ask_comments(&h, issue), Vec::<String>::new());
    assert_eq!(state(&h, "issue-1")["ask"], Value::Null);
}

/// (e) The work is already published when the maintainer answers: the answer starts a pr-fixer
/// turn on its pull request, with the answer as its prompt, once.
#[test]
fn an_answer_to_published_work_starts_a_pr_fixer_turn() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = harness(
        &[
            ask_decision(),
            text(&format!("Done with pg for now. {COMPLETE}")),
        ],
        &[json!({"match": "# Role: pull-request fixer", "turns": [
            {"bash": "echo mysql2 > driver.txt && git add driver.txt && git commit -qm 'Switch to mysql2'", "description": "commit"},
            {"text": format!("Switched to mysql2. {COMPLETE}")}]})],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let pulls = h.pulls();
    assert_eq!(pulls.len(), 1);
    let pull = pulls[0]["number"].as_u64().unwrap();
    assert_eq!(ask_comments(&h, issue).len(), 1);

    h.outsider_then_writer_reply(issue, "1: outsiders say pg", "2: we run MySQL");
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let told = told(&h, "# Role: pull-request fixer");
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, 0, "the pr-fixer's first prompt");
    assert!(told[0].1.contains("Chosen: option 2, \"mysql2\"."));
    assert!(
        told[0].1.contains(&format!("#{pull}")),
        "the pr-fixer's prompt names its pull request"
    );
    assert_eq!(
        h.remote_log("sandcastle/issue-1")
            .first()
            .map(String::as_str),
        Some("Switch to mysql2")
    );
    assert!(ask_comments(&h, issue)[0].contains("**Answered** by `carol`"));

    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(
        self::told(&h, "# Role: pull-request fixer").len(),
        1,
        "a later pass tells nothing again"
    );
}

/// An answer to published work whose pull request a person closed is let go, with a line: no
/// pr-fixer turn, and nothing told later.
#[test]
fn an_answer_to_work_whose_pull_request_is_closed_is_let_go() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = harness(
        &[
            ask_decision(),
            text(&format!("Done with pg for now. {COMPLETE}")),
        ],
        &[],
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let pull = h.pulls()[0]["number"].as_u64().unwrap();
    h.forge.close(REPO, pull).unwrap();

    h.outsider_then_writer_reply(issue, "1", "2: we run MySQL");
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let stderr = stderr_lines(&output).join("\n");
    assert!(
        stderr.contains(&format!(
            "issue #1: let go of the agent's ask and its answer: its pull request #{pull} is closed"
        )),
        "{stderr}"
    );
    assert!(
        !h.anthropic
            .requests()
            .iter()
            .any(|r| r.prompt.contains("# Role: pull-request fixer")),
        "no pr-fixer turn"
    );
    let after = state(&h, "issue-1");
    assert_eq!(after["tell"], Value::Null);
    assert_eq!(after["told"].as_array().unwrap().len(), 1);
}

/// Asks are opt-in: without `[asks]` the working agent is taught no `sandcastle ask` and offered
/// no `ask` tool; an ask it makes anyway is refused in the sandbox with one line (exit 2), and one
/// written straight into the outbox is refused on the host: nothing reaches the forge.
#[test]
fn without_asks_an_ask_is_refused_in_the_sandbox_and_nothing_is_published() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let ask_anyway = r#"sandcastle ask --kind ready --title 'Part one is ready' 2> refused.txt; echo "exit $?" >> refused.txt
git add refused.txt && git commit -qm 'Record the refusal'
mkdir -p /home/agent/.sandcastle-outbox
echo '{"key":"issue:1","revision":1,"kind":"ready","title":"Written by hand"}' > /home/agent/.sandcastle-outbox/ask.json"#;
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            implementer(&[
                json!({"bash": ask_anyway, "description": "ask anyway"}),
                text(&format!("Done. {COMPLETE}")),
            ])
        ]),
        "[questions]\npollBackoff = [\"1s\"]\n",
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success(), "{output:?}");

    assert_eq!(
        h.remote_file("sandcastle/issue-1", "refused.txt"),
        "sandcastle ask: refused: asks are off in this project (no `[asks]` table in \
         .sandcastle/config.toml): nobody is asked; go on without an answer\nexit 2\n"
    );
    let stderr = stderr_lines(&output).join("\n");
    assert!(
        stderr.contains(
            "issue #1: refused the agent's ask from its outbox: asks are off (no `[asks]` table \
             in .sandcastle/config.toml); nothing published"
        ),
        "{stderr}"
    );
    assert_eq!(ask_comments(&h, issue), Vec::<String>::new());
    assert_eq!(state(&h, "issue-1")["ask"], Value::Null);
    let implementer: Vec<_> = h
        .anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("The issue: #1\n"))
        .collect();
    assert!(!implementer.is_empty());
    for request in &implementer {
        assert!(
            !request.prompt.contains("sandcastle ask"),
            "not taught: {}",
            request.prompt
        );
        assert!(
            !request.tools.iter().any(|t| t.contains("sandcastle")),
            "no ask tool offered: {:?}",
            request.tools
        );
    }
    assert_eq!(h.pulls().len(), 1, "the work went on to its pull request");
}

/// An ask is answerable from the command line as a question is: `sandcastle answer N --ask REV`
/// while the agent works on; the first answer wins (a second, and a maintainer's later forge reply,
/// do not count), the forge's comment says who answered and through what, and the answer is the
/// agent's next prompt exactly once.
#[test]
fn an_ask_answered_with_sandcastle_answer_reaches_the_agent_once() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue, mut run) = asked_and_waiting(&[
        json!({"bash": "echo pool > pool.txt && git add pool.txt && git commit -qm 'Add the pool'", "description": "commit"}),
        text(&format!("Pool added with mysql2. {COMPLETE}")),
    ]);
    let listed = String::from_utf8_lossy(&h.sandcastle(&["questions"]).stdout).into_owned();
    assert!(
        listed.contains("or `sandcastle answer 1 --ask 1 <text>`"),
        "{listed}"
    );
    let stale = h.sandcastle(&["answer", "1", "--ask", "2", "1"]);
    assert!(
        String::from_utf8_lossy(&stale.stderr).contains(
            "issue #1: your answer was not taken: issue #1's ask is at revision 1: the agent replaced revision 2"
        ),
        "{stale:?}"
    );
    let answered = h.sandcastle(&["answer", "1", "--ask", "1", "2: we run MySQL"]);
    assert!(answered.status.success(), "{answered:?}");
    assert!(
        String::from_utf8_lossy(&answered.stdout)
            .contains("answered issue #1's ask (revision 1); the run tells the agent"),
        "{answered:?}"
    );
    let second = h.sandcastle(&["answer", "1", "--ask", "1", "1"]);
    let second = String::from_utf8_lossy(&second.stderr).into_owned();
    assert!(
        second.contains("your answer was not taken: it was already answered by ")
            && second.contains("(local maintainer) through the command line"),
        "{second}"
    );
    h.outsider_then_writer_reply(issue, "1: outsiders say pg", "1: pg after all");
    h.touch_in_sandbox("/tmp/go");
    assert!(run.wait().unwrap().success());

    let told = told(&h, "The issue: #1\n");
    assert_eq!(told.len(), 1, "told once: {told:?}");
    for expected in [
        "(local maintainer) answered through the command line (`sandcastle answer`) at",
        "Chosen: option 2, \"mysql2\".",
        "we run MySQL",
    ] {
        assert!(
            told[0].1.contains(expected),
            "{expected:?} in {}",
            told[0].1
        );
    }
    assert!(
        !told[0].1.contains("after all"),
        "the forge's later reply does not count"
    );
    let asks = ask_comments(&h, issue);
    assert!(
        asks[0].contains("**Answered** by `")
            && asks[0]
                .contains("(local maintainer)` through the command line (`sandcastle answer`) at"),
        "{}",
        asks[0]
    );
    assert_eq!(h.pulls().len(), 1, "the work went on to its pull request");
}

/// An ask goes to the question command too, marked non-blocking, as one question with its kind and
/// revision; the bridge's answer (a script here, answering at once) is the agent's next prompt,
/// once, with the bridge as its provenance, and the forge's comment says so.
#[test]
fn an_ask_answered_through_the_question_command_reaches_the_agent_once() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let bridge_dir = tempfile::tempdir().unwrap();
    let request = bridge_dir.path().join("request.json");
    let bridge = bridge_dir.path().join("bridge.sh");
    std::fs::write(
        &bridge,
        format!(
            "cat > '{}'\nprintf '%s' '{{\"version\":1,\"by\":\"Erin (bridge)\",\"answers\":[{{\"option\":2,\"text\":\"we run MySQL\"}}]}}'\n",
            request.display()
        ),
    )
    .unwrap();
    let config = format!(
        "[questions]\npollBackoff = [\"1s\"]\nhandlers = [\"command\", \"forge\"]\ncommand = [\"sh\", \"{}\"]\n[asks]\n",
        bridge.display()
    );
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            implementer(&[
                ask_decision(),
                text("Going on with pg meanwhile."),
                wait_for_go(),
                text("Still on it."),
                json!({"bash": "echo pool > pool.txt && git add pool.txt && git commit -qm 'Add the pool'", "description": "commit"}),
                text(&format!("Pool added with mysql2. {COMPLETE}")),
            ])
        ]),
        &config,
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let mut run = h.start_until(&["run"], "/tmp/waiting");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !request.is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "the bridge was never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    h.touch_in_sandbox("/tmp/go");
    while h.pulls().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no pull request");
        assert!(run.try_wait().unwrap().is_none(), "sandcastle ended early");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    sigterm(&run);
    run.wait().unwrap();

    let request: Value = serde_json::from_slice(&std::fs::read(&request).unwrap()).unwrap();
    let saved = state(&h, "issue-1");
    assert_eq!(
        request["id"],
        format!("{}-r1", saved["ask"]["id"].as_str().unwrap())
    );
    assert_eq!(request["blocking"], false);
    assert_eq!(request["ask"], json!({"kind": "decision", "revision": 1}));
    assert_eq!(request["issue"], issue);
    assert_eq!(request["title"], "Which driver?");
    assert_eq!(
        request["questions"][0]["options"][1],
        json!({"number": 2, "title": "mysql2", "prose": "MySQL client"})
    );
    let told = told(&h, "The issue: #1\n");
    assert_eq!(told.len(), 1, "told once: {told:?}");
    for expected in [
        "Erin (bridge) answered through the question command (`[questions] command`) at",
        "Chosen: option 2, \"mysql2\".",
        "we run MySQL",
    ] {
        assert!(
            told[0].1.contains(expected),
            "{expected:?} in {}",
            told[0].1
        );
    }
    let asks = ask_comments(&h, issue);
    assert!(
        asks[0].contains(
            "**Answered** by `Erin (bridge)` through the question command (`[questions] command`) at"
        ),
        "{}",
        asks[0]
    );
}

/// On a terminal, a looping run puts the ask there too (a few lines and one answer; the agent works
/// on meanwhile): the answer typed there is the agent's next prompt, once, with the terminal as its
/// provenance.
#[test]
fn an_ask_answered_on_the_terminal_reaches_the_agent_once() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            implementer(&[
                ask_decision(),
                text("Going on with pg meanwhile."),
                wait_for_go(),
                text("Still on it."),
                json!({"bash": "echo pool > pool.txt && git add pool.txt && git commit -qm 'Add the pool'", "description": "commit"}),
                text(&format!("Pool added with mysql2. {COMPLETE}")),
            ])
        ]),
        "[questions]\npollBackoff = [\"1h\"]\nhandlers = [\"terminal\", \"forge\"]\n[asks]\n",
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let tmux = crate::questions::Tmux::start(&format!(
        "cd '{}' && env -u FORGEJO_TOKEN -u FORGEJO_USER -u ANTHROPIC_API_KEY -u ANTHROPIC_BASE_URL \
         -u CLAUDE_CODE_OAUTH_TOKEN USER=dana SANDCASTLE_TEST_IMAGE='{}' '{}' run; \
         echo sandcastle-exited-$?; sleep 600",
        h.project().display(),
        crate::harness::image(),
        env!("CARGO_BIN_EXE_sandcastle"),
    ));
    tmux.shows("The agent working on issue #1 asks (decision, revision 1) and works on meanwhile: Which driver?");
    tmux.shows("2. mysql2: MySQL client");
    tmux.keys(&["2: we run MySQL", "Enter"]);
    tmux.shows("issue #1: answered the agent's ask on the terminal");
    h.touch_in_sandbox("/tmp/go");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while h.pulls().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no pull request:\n{}",
            tmux.screen()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    tmux.keys(&["C-c"]);
    tmux.shows("sandcastle-exited-");

    let told = told(&h, "The issue: #1\n");
    assert_eq!(told.len(), 1, "told once: {told:?}");
    for expected in [
        "dana (local maintainer) answered through the terminal of `sandcastle run` at",
        "Chosen: option 2, \"mysql2\".",
        "we run MySQL",
    ] {
        assert!(
            told[0].1.contains(expected),
            "{expected:?} in {}",
            told[0].1
        );
    }
    let asks = ask_comments(&h, issue);
    assert!(
        asks[0].contains(
            "**Answered** by `dana (local maintainer)` through the terminal of `sandcastle run` at"
        ),
        "{}",
        asks[0]
    );
}
