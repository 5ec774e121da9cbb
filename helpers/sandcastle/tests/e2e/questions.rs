//! An agent's blocking question, asked on the forge and answered by a maintainer (or from the
//! command line): the issue waits without a container, and the answer is the agent's next prompt.
use crate::harness::{Harness, docker_or_skip, sigterm, stderr_lines};
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

/// Issue 1's saved state.
fn saved_state(h: &Harness) -> Value {
    let path = h.project().join(".sandcastle/logs/state/issue-1.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn implementer_latest(h: &Harness) -> Vec<String> {
    h.anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("The issue: #1\n"))
        .map(|r| r.latest)
        .collect()
}

/// A project whose implementer asks [`TWO_QUESTIONS`] on issue 1, then finishes the work once
/// answered; `config` is the `[questions]` table.
fn two_questions_then_done(config: &str) -> (Harness, u64) {
    let h = Harness::new(
        json!([
            planner(),
            reviewer(),
            asking_implementer(TWO_QUESTIONS, &finishing())
        ]),
        config,
    );
    let issue = h.create_issue("Pool", "Add a connection pool.", &["ready-for-agent"]);
    (h, issue)
}

/// (a) Two questions: a reply without write access is ignored, a maintainer's counts; the answer
/// reaches the agent with its provenance; the work completes; no container waits.
#[test]
fn a_maintainers_forge_reply_answers_and_the_work_goes_on() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = two_questions_then_done(FAST);
    let run = |label: &str| {
        let output = h.sandcastle(&["run", "--once"]);
        assert!(output.status.success(), "{label}");
    };
    run("asks");
    assert!(h.containers().is_empty(), "no container while waiting");
    let asked = h.last_report()["work"][0]["questions"].clone();
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{asked}");
    assert!(asked[0]["answeredAt"].is_null(), "{asked}");
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    for expected in [
        "### `Database driver choice`",
        "**Question 1: `Which driver?`**",
        "<b>no</b>",
        "1. **`pg`**: `PostgreSQL client`",
        "2. **`mysql2`**: `MySQL client`",
        "**Question 2: `Pool size?`**",
        "one line per question",
        "`2: because …`",
    ] {
        assert!(
            comments[0].contains(expected),
            "{expected:?} in {}",
            comments[0]
        );
    }
    let state = saved_state(&h);
    // The waiting phase carries its question.
    assert_eq!(state["phase"]["waiting"]["channels"], json!(["forge"]));
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
        "Untrusted text from carol through the forge",
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
        comments[0].contains("**Answered** by `carol` through the forge at"),
        "{comments:?}"
    );
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["roles"]["implementer"]["iterations"], 1,
        "this run took one turn, the answer's: {report}"
    );
    let answered = &report["work"][0]["questions"][0];
    assert_eq!(answered["id"], asked[0]["id"], "{report}");
    assert!(answered["answeredAt"].is_string(), "{report}");
    let pull = h.pulls()[0]["number"].as_u64().unwrap();
    assert_eq!(report["work"][0]["pull"], pull, "{report}");

    // `sandcastle report` over the three runs: one question, asked in one run, answered in another.
    let figures = h.sandcastle(&["report", "--json"]);
    assert!(
        figures.status.success(),
        "{}",
        String::from_utf8_lossy(&figures.stderr)
    );
    let figures: Value = serde_json::from_slice(&figures.stdout).unwrap();
    assert_eq!(figures["runs"], 3, "{figures}");
    assert_eq!(figures["questions"]["asked"], 1, "{figures}");
    assert_eq!(figures["questions"]["answered"], 1, "{figures}");
    assert!(
        figures["questions"]["secondsToAnswer"]["median"]
            .as_f64()
            .unwrap()
            >= 2.0
    );
    assert_eq!(figures["pulls"]["opened"], 1, "{figures}");
    assert_eq!(figures["pulls"]["open"], 1, "{figures}");
    assert_eq!(figures["pullRequests"][0]["number"], pull, "{figures}");
    assert_eq!(
        figures["time"]["readyToPullSeconds"]["count"], 1,
        "{figures}"
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
    assert!(
        answers[0]
            .contains("(local maintainer) through the command line (`sandcastle answer`) follows")
    );
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

/// (c) Nobody answers: the timeout is recorded, said once, and `needs-info` stays; every `--once`
/// run while it waits exits 4, and `sandcastle questions` shows it timed out.
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
    let timed_out = h.sandcastle(&["run", "--once"]);
    assert_eq!(
        timed_out.status.code(),
        Some(4),
        "a pass that saw a question time out has its own exit status"
    );
    let listed = h.sandcastle(&["questions"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("#1 \"Database driver choice\"") && listed.contains("; timed out;"),
        "{listed}"
    );
    let report = h.last_report();
    assert!(
        report.to_string().contains("question timed out after 2s"),
        "{report}"
    );
    let again = h.sandcastle(&["run", "--once"]);
    assert_eq!(
        again.status.code(),
        Some(4),
        "every later pass exits 4 while the timed-out question waits"
    );
    assert!(
        stderr_lines(&again)
            .iter()
            .any(|l| l.contains("issue #1: the question still waits past its timeout")),
        "{again:?}"
    );
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 2, "{comments:?}");
    assert!(comments[1].contains("Nobody answered the agent's question within 2s"));
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
}

/// Asking is opt-in: with no `[questions]`, `[asks]` or `[clarify]` table the agent is taught
/// neither the signal nor `sandcastle ask`, no assessment runs, and a `<questions>` block is just the end of a turn: nothing waits,
/// nothing is asked on the forge, and the work goes on to its pull request.
#[test]
fn without_questions_or_clarify_tables_nothing_waits_and_nothing_is_assessed() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = two_questions_then_done("");
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success(), "{output:?}");
    let requests = h.anthropic.requests();
    assert!(
        !requests
            .iter()
            .any(|r| r.prompt.contains("# Role: assessor")),
        "no assessment"
    );
    let first = h.prompts_for_issue(issue);
    assert!(
        !first[0].contains("sandcastle ask"),
        "asks are not taught without `[asks]`"
    );
    assert!(
        !first[0].contains("<questions") && !first[0].contains("a person's decision"),
        "the question signal is not taught"
    );
    assert!(
        implementer_latest(&h)[1].contains("did not end with <promise>COMPLETE</promise>"),
        "the block ended a turn like any other"
    );
    assert!(
        h.comments_of(issue).is_empty(),
        "nothing asked on the forge"
    );
    assert!(!h.labels_of(issue).contains(&"needs-info".to_string()));
    assert_eq!(saved_state(&h)["phase"], "done");
    assert_eq!(h.pulls().len(), 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("questions: the"),
        "no handler lines: {stderr}"
    );
}

/// The pr-fixer asks too: its `<questions>` block (its pull request's number) is one comment on the
/// pull request; a maintainer's reply there is its next prompt, and the rework is published.
#[test]
fn a_pr_fixers_question_round_trips_through_the_forge() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let question = r#"Which one?
<questions issueNumber="1"><title>Fix or revert</title><question><title>Fix it or revert it?</title>
<options><option><title>fix</title></option><option><title>revert</title></option></options>
</question></questions>"#;
    let h = Harness::new(
        json!([{"match": "# Role: pull-request fixer", "turns": [
            {"text": question},
            {"bash": "echo fix > fix.txt && git add fix.txt && git commit -qm 'Fix it'", "description": "commit"},
            {"text": format!("Fixed as asked. {COMPLETE}")}]}]),
        FAST,
    );
    let pull = h.sent_back_pull(
        "sandcastle/issue-4",
        "dave",
        json!({"event": "REQUEST_CHANGES", "body": "Fix it."}),
    );
    assert_eq!(
        pull, 1,
        "the pull request's number is the one the script asks with"
    );
    let draft = h.remote_log("sandcastle/issue-4");
    let asked = h.sandcastle(&["run", "--once"]);
    assert!(asked.status.success());
    assert!(
        stderr_lines(&asked)
            .iter()
            .any(|l| l.contains("pull request #1: the agent asked a person through")),
        "a pull request's question is said to be a pull request's: {asked:?}"
    );
    let listed = String::from_utf8_lossy(&h.sandcastle(&["questions"]).stdout).into_owned();
    assert!(
        listed.contains("pull request #1 \"Fix or revert\": asked "),
        "{listed}"
    );
    let refused = h.sandcastle(&["answer", "1", "3"]);
    let refused = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        refused.contains("pull request #1: your answer was not taken: that does not answer them"),
        "{refused}"
    );
    let prompt = h
        .anthropic
        .requests()
        .into_iter()
        .find(|r| r.prompt.contains("# Role: pull-request fixer"))
        .unwrap()
        .prompt;
    assert!(
        prompt.contains("<questions issueNumber=\"1\">"),
        "taught, with its number"
    );
    let comments = h.comments_of(pull);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].contains("Fix it or revert it?"), "{comments:?}");
    assert!(h.labels_of(pull).contains(&"needs-info".to_string()));
    assert_eq!(
        h.remote_log("sandcastle/issue-4"),
        draft,
        "nothing pushed yet"
    );

    h.outsider_then_writer_reply(pull, "2", "1: fix it");
    std::thread::sleep(std::time::Duration::from_secs(1)); // pollBackoff
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let latest: Vec<String> = h
        .anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("# Role: pull-request fixer"))
        .map(|r| r.latest)
        .collect();
    assert!(
        latest
            .iter()
            .any(|l| l.contains("carol answered through the forge at")
                && l.contains("Chosen: option 1, \"fix\".")),
        "{latest:?}"
    );
    assert_eq!(
        h.remote_log("sandcastle/issue-4")
            .first()
            .map(String::as_str),
        Some("Fix it")
    );
    assert!(!h.labels_of(pull).contains(&"needs-info".to_string()));
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
        "[questions]\n",
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

/// Waits until `done` holds, failing with `what` after two minutes or when `run` ended.
fn wait_for(what: &str, run: &mut std::process::Child, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} never happened"
        );
        assert!(run.try_wait().unwrap().is_none(), "sandcastle ended early");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The answer reached the agent once, naming `by` and `channel` in its header and its fence, with
/// the chosen option; the forge comment says who answered through which channel.
fn answered_with_provenance(h: &Harness, issue: u64, by: &str, channel: &str) {
    let answers: Vec<String> = implementer_latest(h)
        .into_iter()
        .filter(|l| l.contains("# The answer to your questions"))
        .collect();
    assert_eq!(answers.len(), 1, "delivered once: {answers:?}");
    for expected in [
        format!("{by} answered through {channel} at"),
        "Chosen: option 2, \"mysql2\".".to_string(),
        format!("Untrusted text from {by} through {channel} follows"),
        "we run MySQL".to_string(),
        "ten, for now".to_string(),
    ] {
        assert!(
            answers[0].contains(&expected),
            "{expected:?} in {}",
            answers[0]
        );
    }
    let comments = h.comments_of(issue);
    assert!(
        comments[0].contains(&format!("**Answered** by `{by}` through {channel} at")),
        "{comments:?}"
    );
}

/// (d) The `command` handler: the template's file bridge gets the question as JSON on stdin, its
/// JSON answer goes through the saved-answer path to the agent, with its provenance; the forge
/// comment says who answered through which channel; the looping run never waits on it.
#[test]
fn the_question_command_answers_and_the_work_goes_on() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let bridge = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../templates/rust/.sandcastle/ask-by-file.sh")
        .canonicalize()
        .unwrap();
    let (h, issue) = two_questions_then_done(&format!(
        "[questions]\npollBackoff = [\"1s\"]\nhandlers = [\"command\", \"forge\"]\ncommand = [\"sh\", \"{}\"]\n",
        bridge.display()
    ));
    let mut run = h
        .command(&["run"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let questions = h.project().join(".sandcastle/questions");
    let asked = || {
        std::fs::read_dir(&questions)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .find(|dir| dir.join("request.json").is_file())
    };
    let mut here = None;
    wait_for("the question command", &mut run, || {
        here = asked();
        here.is_some()
    });
    let here = here.unwrap();
    let request: Value =
        serde_json::from_slice(&std::fs::read(here.join("request.json")).unwrap()).unwrap();
    let state = saved_state(&h);
    assert_eq!(
        state["phase"]["waiting"]["channels"],
        json!(["command", "forge"])
    );
    assert_eq!(request["version"], 1);
    assert_eq!(request["id"], state["phase"]["waiting"]["id"]);
    assert_eq!(request["issue"], issue);
    assert_eq!(request["title"], "Database driver choice");
    assert_eq!(
        request["questions"][0]["options"][1],
        json!({"number": 2, "title": "mysql2", "prose": "MySQL client"})
    );
    assert_eq!(request["questions"][1]["options"], json!([]));

    let answer = json!({
        "version": 1,
        "by": "Dana (ntfy)",
        "answers": [{"option": 2, "text": "we run MySQL"}, {"text": "ten, for now"}],
    });
    std::fs::write(here.join("answer.tmp"), answer.to_string()).unwrap();
    std::fs::rename(here.join("answer.tmp"), here.join("answer.json")).unwrap();
    wait_for("the pull request", &mut run, || h.pulls().len() == 1);
    // The pass that opened it leaves the run report current while the loop runs on.
    let logs = h.project().join(".sandcastle/logs");
    wait_for("the run report of that pass", &mut run, || {
        std::fs::read_dir(&logs)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
            .filter_map(|e| serde_json::from_slice::<Value>(&std::fs::read(e.path()).ok()?).ok())
            .any(|report| report["work"][0]["pull"].is_u64())
    });
    let figures = h.sandcastle(&["report", "--json"]);
    let figures: Value = serde_json::from_slice(&figures.stdout).unwrap();
    assert_eq!(figures["pulls"]["opened"], 1, "{figures}");
    assert_eq!(figures["questions"]["answered"], 1, "{figures}");
    sigterm(&run);
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("--- sandcastle run: stderr\n{stderr}");
    assert!(
        !stderr.contains("handler is skipped"),
        "nothing configured was skipped"
    );

    answered_with_provenance(
        &h,
        issue,
        "Dana (ntfy)",
        "the question command (`[questions] command`)",
    );
    assert!(!h.labels_of(issue).contains(&"needs-info".to_string()));
    assert!(
        !here.exists(),
        "the bridge cleaned up after printing its answer"
    );
    let report = h.last_report();
    assert_eq!(
        report["work"][0]["roles"]["implementer"]["iterations"], 1,
        "the asking turn is a question turn, not an iteration: {report}"
    );
    assert_eq!(
        report["work"][0]["roles"]["implementer"]["questionTurns"],
        1
    );
}

/// A tmux server of the test's own, ended with the test.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn start(command: &str) -> Tmux {
        // One server per test: tests of this process run side by side.
        static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let tmux = Tmux {
            socket: format!("sandcastle-e2e-{}-{n}", std::process::id()),
        };
        let status = tmux
            .cmd(&[
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
                "-s",
                "run",
                command,
            ])
            .status()
            .expect("tmux runs (apt-get install tmux)");
        assert!(status.success());
        tmux
    }

    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new("tmux");
        command.args(["-L", &self.socket]).args(args);
        command
    }

    pub(crate) fn screen(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "run"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "run"];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status().unwrap().success());
    }

    /// Waits until the screen shows `text`.
    pub(crate) fn shows(&self, text: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the terminal never showed {text:?}:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

/// (d) The `terminal` handler, driven through a pseudo-terminal (tmux): `run --once` skips it with
/// one line and asks on the forge; then, while `sandcastle run` loops on a terminal, the question
/// is asked there too; an option is picked for the first question
/// and text written for the second; the answer reaches the agent through the saved-answer path,
/// with the local maintainer and the terminal as its provenance, and the work completes.
#[test]
fn the_terminal_prompt_answers_and_the_work_goes_on() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = two_questions_then_done(
        "[questions]\npollBackoff = [\"1h\"]\nhandlers = [\"terminal\", \"forge\"]\n",
    );
    let once = h.sandcastle(&["run", "--once"]);
    assert!(once.status.success());
    let skipped: Vec<String> = stderr_lines(&once)
        .into_iter()
        .filter(|l| l.contains("handler is skipped"))
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0].contains(
            "questions: the terminal handler is skipped in this run: `run --once` and `run --issue` never wait for a person"
        ),
        "{skipped:?}"
    );
    let channels = || saved_state(&h)["phase"]["waiting"]["channels"].clone();
    assert_eq!(channels(), json!(["forge"]));

    let unset: Vec<String> = [
        "FORGEJO_TOKEN",
        "FORGEJO_USER",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ]
    .iter()
    .map(|key| format!("-u {key}"))
    .collect();
    let tmux = Tmux::start(&format!(
        "cd '{}' && env {} USER=dana SANDCASTLE_TEST_IMAGE='{}' '{}' run; echo sandcastle-exited-$?; sleep 600",
        h.project().display(),
        unset.join(" "),
        crate::harness::image(),
        env!("CARGO_BIN_EXE_sandcastle"),
    ));
    tmux.shows("Question 1 of 2: Which driver?");
    tmux.shows("2. mysql2: MySQL client");
    assert_eq!(
        channels(),
        json!(["forge", "terminal"]),
        "where it really went"
    );
    tmux.keys(&["Down", "Enter"]);
    tmux.shows("Why (optional)");
    tmux.keys(&["we run MySQL", "Enter"]);
    tmux.shows("Question 2 of 2: Pool size?");
    tmux.shows("Your answer");
    tmux.keys(&["ten, for now", "Enter"]);
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
    eprintln!("--- the terminal\n{}", tmux.screen());

    answered_with_provenance(
        &h,
        issue,
        "dana (local maintainer)",
        "the terminal of `sandcastle run`",
    );
}

/// A stop (Ctrl-C) while the terminal prompt is open ends the run as any stop does; the question
/// still waits, and the terminal is left usable (echo and line editing back on).
#[test]
fn a_stop_during_the_terminal_prompt_leaves_the_question_waiting() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = two_questions_then_done("[questions]\npollBackoff = [\"1h\"]\n");
    let tmux = Tmux::start(&format!(
        "cd '{}' && env -u FORGEJO_TOKEN -u ANTHROPIC_API_KEY '{}' run; echo sandcastle-exited-$?; stty -a; sleep 600",
        h.project().display(),
        env!("CARGO_BIN_EXE_sandcastle"),
    ));
    tmux.shows("Question 1 of 2: Which driver?");
    tmux.shows("2. mysql2: MySQL client");
    tmux.keys(&["C-c"]);
    tmux.shows("sandcastle-exited-130");
    let screen = tmux.screen();
    assert!(
        screen.contains(" icanon") && screen.contains(" echo"),
        "{screen}"
    );
    assert!(h.labels_of(issue).contains(&"needs-info".to_string()));
    let listed = String::from_utf8_lossy(&h.sandcastle(&["questions"]).stdout).into_owned();
    assert!(
        listed.contains(
            "through the terminal of `sandcastle run`, the forge; answer with the prompt of a looping \
             `sandcastle run` or a comment on"
        ),
        "{listed}"
    );
}
