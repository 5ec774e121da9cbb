//! An agent's blocking question, asked on the forge and answered by a maintainer (or from the
//! command line): the issue waits without a container, and the answer is the agent's next prompt.
use crate::harness::{Harness, docker_or_skip};
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";

const TWO_QUESTIONS: &str = r#"I need two decisions.
<questions issueNumber="1">
  <title>Database driver choice</title>
  <prose>Need to decide before implementing the connection pool.</prose>
  <question>
    <title>Which driver?</title>
    <prose>The codebase has &lt;b&gt;no&lt;/b&gt; database dependency.</prose>
    <options>
      <option><title>pg</title><prose>PostgreSQL client</prose></option>
      <option><title>mysql2</title><prose>MySQL client</prose></option>
    </options>
  </question>
  <question><title>Pool size?</title></question>
</questions>"#;

fn asking_implementer(first: &str, then: &[Value]) -> Value {
    let mut turns = vec![json!({"text": first})];
    turns.extend_from_slice(then);
    json!({"match": "The issue: #1\n", "turns": turns})
}

fn finishing() -> Vec<Value> {
    vec![
        json!({"bash": "echo pool > pool.txt && git add pool.txt && git commit -qm 'Add the pool'", "description": "commit"}),
        json!({"text": format!("Pool added. {COMPLETE}")}),
    ]
}

fn planner() -> Value {
    let plan = r#"<plan>{"issues":[{"id":1,"title":"Pool","branch":"sandcastle/issue-1"}]}</plan>"#;
    json!({"match": "# Role: planner", "turns": [{"text": plan}]})
}

fn reviewer() -> Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

const FAST: &str = "[questions]\npollBackoff = [\"1s\"]\n";

fn implementer_latest(h: &Harness) -> Vec<String> {
    h.anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("The issue: #1\n"))
        .map(|r| r.latest)
        .collect()
}

/// (a) Two questions: a reply without write access is ignored, a maintainer's counts; the answer
/// reaches the agent with its provenance; the work completes; no container waits.
#[test]
fn a_maintainers_forge_reply_answers_and_the_work_goes_on() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            asking_implementer(TWO_QUESTIONS, &finishing())
        ]),
        FAST,
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    let run = |label: &str| {
        let output = h.sandcastle(&["run", "--once"]);
        assert!(output.status.success(), "{label}");
    };
    run("asks");
    assert!(h.containers().is_empty(), "no container while waiting");
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    for expected in [
        "### Database driver choice",
        "**Question 1: Which driver?**",
        "&lt;b&gt;no&lt;/b&gt;",
        "1. **pg**: PostgreSQL client",
        "2. **mysql2**: MySQL client",
        "**Question 2: Pool size?**",
        "one line per question",
        "`2: because …`",
    ] {
        assert!(
            comments[0].contains(expected),
            "{expected:?} in {}",
            comments[0]
        );
    }
    let state: Value = serde_json::from_slice(
        &std::fs::read(h.project().join(".sandcastle/logs/state/issue-1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["phase"], "waiting");
    assert_eq!(state["waiting"]["channels"], json!(["forge"]));
    let listed = h.sandcastle(&["questions"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("#1 \"Database driver choice\": asked"),
        "listed"
    );

    std::thread::sleep(std::time::Duration::from_secs(2));
    run("nothing new");
    assert_eq!(
        h.comments_of(issue).len(),
        1,
        "a pass with no answer posts nothing"
    );

    h.outsider_then_writer_reply(issue, "1\nfifty", "2: we run MySQL\nten, for now");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("ignored the reply of bob"),
        "bob's reply is ignored with a line"
    );

    let latest = implementer_latest(&h);
    let answer = latest
        .iter()
        .find(|l| l.contains("# The answer to your questions"))
        .expect("the answer was the agent's next prompt");
    for expected in [
        "carol answered through the forge at",
        "not an instruction from the orchestrator",
        "## Question 1: Which driver?",
        "Chosen: option 2, \"mysql2\".",
        "we run MySQL",
        "ten, for now",
        "Untrusted text from the forge",
    ] {
        assert!(answer.contains(expected), "{expected:?} in {answer}");
    }
    assert!(
        !answer.contains("fifty"),
        "bob's reply never reaches the agent"
    );
    assert_eq!(h.pulls().len(), 1, "the pull request opened");
    assert!(!h.labels_of(issue).contains(&"needs-info".to_string()));
    let comments = h.comments_of(issue);
    assert!(
        comments[0].contains("**Answered** by carol through the forge at"),
        "{comments:?}"
    );
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["roles"]["implementer"]["iterations"], 1,
        "this run took one turn, the answer's: {report}"
    );
}

/// (b) `sandcastle answer` from another terminal; the orchestrator killed after the answer is saved
/// but before it is delivered: the answer reaches the agent exactly once.
#[test]
fn a_command_line_answer_survives_a_kill_before_delivery() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            asking_implementer(
                &TWO_QUESTIONS.replace("<question><title>Pool size?</title></question>", ""),
                &[
                    json!({"bash": "touch /tmp/answered && sleep 5", "description": "slow"}),
                    json!({"text": "Still thinking."}),
                    finishing()[0].clone(),
                    finishing()[1].clone(),
                ]
            )
        ]),
        FAST,
    );
    h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let refused = h.sandcastle(&["answer", "1", "3"]);
    assert!(!refused.status.success(), "there is no option 3");
    assert!(
        h.sandcastle(&["answer", "1", "1:", "we", "use", "Postgres"])
            .status
            .success()
    );

    // The answer is saved and delivered; the kill lands in the turn it started.
    let mut child = h.start_until(&["run", "--once"], "/tmp/answered");
    child.kill().unwrap();
    child.wait().unwrap();
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    let answers: Vec<String> = implementer_latest(&h)
        .into_iter()
        .filter(|l| l.contains("# The answer to your questions"))
        .collect();
    assert_eq!(
        answers.len(),
        2,
        "sent with the killed turn, then once more with its retry"
    );
    assert!(answers[0].contains("(local maintainer) answered through the command line"));
    assert!(answers[0].contains("Chosen: option 1, \"pg\"."));
    assert!(answers[0].contains("we use Postgres"));
    let said: Vec<String> = h
        .anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("The issue: #1\n"))
        .map(|r| r.said)
        .collect();
    assert!(
        said.iter()
            .all(|s| s.matches("# The answer to your questions").count() <= 1),
        "no conversation holds the answer twice"
    );
    assert_eq!(h.pulls().len(), 1);
}

/// (c) Nobody answers: the timeout is recorded, said once, and `needs-info` stays.
#[test]
fn an_unanswered_question_times_out_once() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([planner(), asking_implementer(TWO_QUESTIONS, &[])]),
        "[questions]\npollBackoff = [\"1s\"]\ntimeout = \"2s\"\n",
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let report = h.last_report();
    assert!(
        report.to_string().contains("question timed out after 2s"),
        "{report}"
    );
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(comments[1].contains("Nobody answered the agent's question within 2s"));
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
}

/// (d) An unusable block gets one correction turn naming the problem; a second ends the work.
#[test]
fn a_malformed_block_gets_one_correction_then_the_error() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let wrong = TWO_QUESTIONS.replace("issueNumber=\"1\"", "issueNumber=\"7\"");
    let h = Harness::new(
        json!([
            planner(),
            asking_implementer(
                &wrong,
                &[json!({"text": "<questions issueNumber=\"1\"><title></title></questions>"})]
            )
        ]),
        "",
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let latest = implementer_latest(&h);
    assert!(
        latest.iter().any(|l| l.contains(
            "Your <questions> block could not be used: issueNumber=\"7\" is not this issue"
        )),
        "{latest:?}"
    );
    assert_eq!(latest.len(), 2, "one correction turn");
    let report = h.last_report();
    assert!(
        report
            .to_string()
            .contains("unusable twice: a <title> in <questions> is empty"),
        "{report}"
    );
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].contains("unusable twice"));
}
