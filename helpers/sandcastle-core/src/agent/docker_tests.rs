//! The real Claude Code CLI in a real sandbox against the scripted Messages API (`fake-anthropic`).
//! Set `SANDCASTLE_SKIP_DOCKER_TESTS=1` to skip them; otherwise a missing engine or image fails.
use super::*;
use crate::sandbox::WORKSPACE;
use crate::sandbox::test_support::{TestRun, docker_ready, exec, spec};
use crate::secrets::{EnvFile, Redactor};
use fake_anthropic::{FakeAnthropic, Scenario};
use std::process::Command;
use std::time::Instant;

const API_KEY: &str = "sk-ant-test-key-never-printed";

fn fake(scenario: serde_json::Value) -> FakeAnthropic {
    FakeAnthropic::start(Scenario::from_json(&scenario.to_string()).unwrap()).unwrap()
}

/// What a sandbox needs to reach the fake model; the key is a secret to redact.
fn env(base_url: &str) -> Vec<(String, String)> {
    vec![
        ("ANTHROPIC_BASE_URL".into(), base_url.into()),
        ("ANTHROPIC_API_KEY".into(), API_KEY.into()),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
    ]
}

fn redactor() -> Redactor {
    Redactor::new(&EnvFile {
        vars: vec![("ANTHROPIC_API_KEY".into(), API_KEY.into())],
    })
}

fn agent_run<'a>(prompt: &'a str, log_dir: &'a Path, iteration: u32) -> AgentRun<'a> {
    AgentRun {
        role: Role::Implementer,
        model: "claude-sonnet-4-6",
        prompt,
        resume: None,
        idle_timeout: Duration::from_secs(60),
        time_limit: TimeLimit {
            after: Duration::from_secs(600),
            key: "[sandbox] turnTimeout",
        },
        exit_grace: Duration::from_secs(5),
        log_dir,
        iteration,
        // A tip the checkout does not have: its commits come out as a bundle of HEAD.
        commits: CommitsOut {
            known_tip: "0".repeat(40),
            file: log_dir.join(format!("commits-{iteration}.handed-out")),
        },
        asks: true,
    }
}

/// A checkout in the sandbox's workspace with one commit, as `checkout::seed` leaves it.
fn workspace(sandbox: &Sandbox) {
    exec(
        sandbox,
        &[
            "sh",
            "-c",
            "git init -q -b main && git config user.name T && git config user.email t@localhost \
             && git commit -q --allow-empty -m start",
        ],
    );
}

/// The container's live processes, one `pid args` line each.
fn processes(sandbox: &Sandbox) -> String {
    let out = Command::new("docker")
        .args(["top", sandbox.id(), "-o", "pid,args"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        list.contains("sandcastle relay"),
        "docker top lists the container's init: {list}"
    );
    // A killed process the engine has not reaped yet is dead all the same.
    list.lines()
        .filter(|line| !line.ends_with("<defunct>"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn an_iteration_that_commits_and_completes() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([{
        "match": "TASK-commit",
        "turns": [
            {"bash": "echo hello > hello.txt && git add hello.txt && git commit -qm 'Add hello' && echo key=$ANTHROPIC_API_KEY"},
            {"text": "Committed hello.txt. <promise>COMPLETE</promise>"}
        ]
    }]));
    let run = TestRun::new("agent-commit");
    let env = env(&model.url());
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &env)).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();
    let mut calls = Vec::new();
    let mut costs = Vec::new();
    let mut agent = agent_run("Do TASK-commit now.", logs.path(), 1);
    agent.commits.known_tip = exec(&sandbox, &["git", "rev-parse", "HEAD"]);

    let outcome = super::run(&sandbox, &agent, &redactor(), &mut |event| match event {
        AgentEvent::ToolCall(call) => calls.push(call.to_string()),
        AgentEvent::Usage(usage) => costs.push(usage.cost_usd),
        AgentEvent::Ask(_) => panic!("this turn asks nothing"),
    })
    .unwrap();

    assert_eq!(outcome.ending, Ending::Completed);
    assert!(!outcome.sandbox_stopped);
    assert_eq!(
        outcome.result_text,
        "Committed hello.txt. <promise>COMPLETE</promise>"
    );
    assert!(outcome.usage.input_tokens > 0 && outcome.usage.output_tokens > 0);
    assert!(outcome.usage.cost_usd > 0.0);
    assert_eq!(costs, [outcome.usage.cost_usd]);
    assert_eq!(calls.len(), 1);
    assert!(
        calls[0].starts_with("Bash: echo hello > hello.txt"),
        "{calls:?}"
    );
    assert_eq!(
        exec(&sandbox, &["git", "log", "--format=%s"]),
        "Add hello\nstart"
    );

    let transcript = std::fs::read_to_string(&outcome.transcript).unwrap();
    assert_eq!(outcome.transcript, logs.path().join("implementer-1.jsonl"));
    assert!(
        transcript.contains("key=[redacted]"),
        "the tool output is in the transcript"
    );
    assert!(!transcript.contains(API_KEY));
    assert!(
        transcript
            .lines()
            .last()
            .unwrap()
            .contains(r#""type":"result""#)
    );

    let session = outcome.session.expect("session saved");
    assert_eq!(
        session.file,
        logs.path()
            .join(format!("sessions/{}.jsonl", session.session_id))
    );
    let saved = std::fs::read_to_string(&session.file).unwrap();
    assert!(saved.contains("TASK-commit") && !saved.contains(API_KEY));
    // The same exec handed out the new commit as a bundle after Claude Code.
    assert_eq!(outcome.commits, Some(Commits::InFile));
    let bundle = std::fs::read(&agent.commits.file).unwrap();
    assert!(
        bundle.starts_with(b"# v2 git bundle\n"),
        "{:?}",
        String::from_utf8_lossy(&bundle)
    );

    sandbox.remove().unwrap();
    assert!(run.containers().is_empty());
}

/// The outbox of `sandcastle ask` leaves with the turn's own exec: a regular file as its bytes, a
/// link (to a file the agent cannot hand out otherwise) as a refusal, never followed.
#[test]
fn the_outbox_comes_out_with_the_same_exec_and_a_link_is_refused() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([
        {"match": "TASK-ask", "turns": [
            {"bash": "mkdir -p ~/.sandcastle-outbox && printf '{\"ask\":1}' > ~/.sandcastle-outbox/ask.json"},
            {"text": "Asked."}
        ]},
        {"match": "TASK-link", "turns": [
            {"bash": "ln -sf /etc/passwd ~/.sandcastle-outbox/ask.json"},
            {"text": "Linked."}
        ]}
    ]));
    let run = TestRun::new("agent-outbox");
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &env(&model.url()))).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();
    let turn = |prompt: &str, iteration: u32| {
        let agent = agent_run(prompt, logs.path(), iteration);
        super::run(&sandbox, &agent, &redactor(), &mut |_| {}).unwrap()
    };

    let asked = turn("Do TASK-ask now.", 1);
    assert_eq!(
        asked.ask,
        Some(hand_out::Ask::Bytes(b"{\"ask\":1}".to_vec()))
    );
    let linked = turn("Do TASK-link now.", 2);
    assert_eq!(
        linked.ask,
        Some(hand_out::Ask::Refused(
            "the outbox is not a regular file".into()
        ))
    );
}

#[test]
fn an_error_result_is_a_failure_even_with_subtype_success() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([]));
    let run = TestRun::new("agent-error");
    // Every Messages request gets a 404: Claude Code ends with `is_error: true, subtype: success`.
    let env = env(&format!("{}/nowhere", model.url()));
    let sandbox = Sandbox::start(&spec(&run, "issue-2", &env)).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();

    let outcome = super::run(
        &sandbox,
        &agent_run("Do it.", logs.path(), 3),
        &redactor(),
        &mut |_| {},
    )
    .unwrap();

    let Ending::Failed(message) = outcome.ending else {
        panic!("a failed turn: {:?}", outcome.ending);
    };
    assert!(
        message.starts_with("implementer iteration 3: Claude Code reported an error (success): "),
        "{message}"
    );
    assert!(!message.contains('\n'));
    let transcript_path = logs.path().join("implementer-3.jsonl");
    assert!(message.ends_with(&format!("transcript: {}", transcript_path.display())));
    let transcript = std::fs::read_to_string(transcript_path).unwrap();
    assert!(transcript.contains(r#""is_error":true"#));
}

/// The relay, the container's main process, dies mid-turn: the container stops, and the turn is
/// the agent's failed turn, marked so, not broken machinery.
#[test]
fn a_sandbox_that_stops_mid_turn_fails_the_turn_not_the_machinery() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([{
        "match": "TASK-wait",
        "turns": [{"bash": "touch /tmp/ready; sleep 60"}, {"text": "late <promise>COMPLETE</promise>"}]
    }]));
    let run = TestRun::new("agent-stopped");
    let env = env(&model.url());
    let sandbox = Sandbox::start(&spec(&run, "issue-5", &env)).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();
    let id = sandbox.id().to_string();
    let killer = std::thread::spawn(move || {
        let ready = || {
            Command::new("docker")
                .args(["exec", &id, "test", "-f", "/tmp/ready"])
                .status()
                .is_ok_and(|s| s.success())
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready() {
            assert!(
                Instant::now() < deadline,
                "the agent never got to its tool call"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let killed = Command::new("docker")
            .args(["exec", "-u", "0", &id, "sh", "-c"])
            .arg("kill $(ps -eo pid=,args= | awk '$2 ~ /sandcastle$/ && $3 == \"relay\" {print $1}')")
            .status()
            .unwrap();
        assert!(killed.success());
    });

    let started = Instant::now();
    let outcome = super::run(
        &sandbox,
        &agent_run("Do TASK-wait.", logs.path(), 4),
        &redactor(),
        &mut |_| {},
    )
    .unwrap();
    killer.join().unwrap();

    assert!(
        started.elapsed() < Duration::from_secs(50),
        "{:?}",
        started.elapsed()
    );
    assert!(outcome.sandbox_stopped);
    assert!(!sandbox.running().unwrap());
    let Ending::Failed(message) = &outcome.ending else {
        panic!("a failed turn: {:?}", outcome.ending);
    };
    assert!(
        message.starts_with("implementer iteration 4: the sandbox stopped during the turn"),
        "{message}"
    );
    assert!(outcome.commits.is_none() && outcome.session.is_none());
}

#[test]
fn an_agent_that_goes_quiet_fails_on_the_idle_timeout_and_is_stopped() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([{
        "match": "TASK-sleep",
        "turns": [{"bash": "sleep 30"}, {"text": "woke up <promise>COMPLETE</promise>"}]
    }]));
    let run = TestRun::new("agent-idle");
    let env = env(&model.url());
    let sandbox = Sandbox::start(&spec(&run, "issue-3", &env)).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();
    let mut agent = agent_run("Do TASK-sleep.", logs.path(), 2);
    // Long enough for Claude Code to start and open its session on a busy machine, well short of
    // the tool's 30 seconds.
    agent.idle_timeout = Duration::from_secs(10);

    let started = Instant::now();
    let outcome = super::run(&sandbox, &agent, &redactor(), &mut |_| {}).unwrap();

    // Before the tool's own 30 seconds end: the idle timeout cut the turn, however slow the machine.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let Ending::Failed(message) = &outcome.ending else {
        panic!("a failed turn: {:?}", outcome.ending);
    };
    assert!(
        message.starts_with(
            "implementer iteration 2 (claude-sonnet-4-6) gave no output for 10s (idleTimeout) and was stopped"
        ),
        "{message}"
    );
    let left = processes(&sandbox);
    assert!(
        !left.contains("claude") && !left.contains("sleep 30"),
        "{left}"
    );
    assert!(
        outcome.session.is_some(),
        "the session is saved for a later resume"
    );
}

#[test]
fn a_saved_session_resumes_in_a_fresh_container() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([{
        "match": "TASK-resume",
        "turns": [
            {"bash": "echo one > one.txt"},
            {"text": "Part one done; part two is left."},
            {"bash": "echo two > two.txt"},
            {"text": "Both parts done. <promise>COMPLETE</promise>"}
        ]
    }]));
    let run = TestRun::new("agent-resume");
    let env = env(&model.url());
    let logs = tempfile::tempdir().unwrap();

    let first_box = Sandbox::start(&spec(&run, "issue-4", &env)).unwrap();
    workspace(&first_box);
    let first = super::run(
        &first_box,
        &agent_run("Do TASK-resume.", logs.path(), 1),
        &redactor(),
        &mut |_| {},
    )
    .unwrap();
    first_box.remove().unwrap();
    assert_eq!(first.ending, Ending::Stopped);
    let session = first.session.expect("session saved");

    let second_box = Sandbox::start(&spec(&run, "issue-4", &env)).unwrap();
    workspace(&second_box);
    let mut agent = agent_run("Carry on.", logs.path(), 2);
    agent.resume = Some(&session);
    let second = super::run(&second_box, &agent, &redactor(), &mut |_| {}).unwrap();

    assert_eq!(second.ending, Ending::Completed, "{}", second.result_text);
    assert_eq!(second.session.unwrap().session_id, session.session_id);
    exec(&second_box, &["test", "-f", "two.txt"]);
    let turns: Vec<usize> = model.requests().iter().map(|r| r.turn).collect();
    assert_eq!(
        turns,
        [0, 1, 2, 3],
        "the resumed conversation went on from turn 2"
    );
    assert!(logs.path().join("implementer-2.jsonl").exists());
    second_box.remove().unwrap();
    assert!(run.containers().is_empty());
}

#[test]
fn the_grace_after_the_result_is_bounded_and_nothing_is_left_running() {
    if !docker_ready() {
        return;
    }
    // Claude Code takes a moment to exit after its result: with no grace at all it is stopped,
    // with a long one it exits by itself. Either way the background process the agent started
    // does not outlive the iteration.
    let model = fake(serde_json::json!([{
        "match": "TASK-linger",
        "turns": [
            {"bash": "sleep 47 > /dev/null 2>&1 < /dev/null & echo started"},
            {"text": "Done. <promise>COMPLETE</promise>"}
        ]
    }]));
    let run = TestRun::new("agent-grace");
    let env = env(&model.url());
    let sandbox = Sandbox::start(&spec(&run, "issue-5", &env)).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();
    for (iteration, grace) in [(1, 0), (2, 30)] {
        let mut agent = agent_run("Do TASK-linger.", logs.path(), iteration);
        agent.exit_grace = Duration::from_secs(grace);

        let started = Instant::now();
        let outcome = super::run(&sandbox, &agent, &redactor(), &mut |_| {}).unwrap();

        assert_eq!(outcome.ending, Ending::Completed, "grace {grace}s");
        assert!(outcome.session.is_some(), "grace {grace}s");
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "grace {grace}s: {:?}",
            started.elapsed()
        );
        let left = processes(&sandbox);
        assert!(
            !left.contains("sleep 47") && !left.contains("claude"),
            "grace {grace}s: {left}"
        );
    }
}

#[test]
fn a_prompt_line_naming_the_coding_standards_brings_them_in() {
    if !docker_ready() {
        return;
    }
    // fake-anthropic matches the first text of the request, which is here the reminder Claude Code
    // puts before the prompt when it has read a file named with `@`.
    let model = fake(serde_json::json!([{
        "match": "Called the Read tool with the following input: {\"file_path\":\"/home/agent/workspace/.sandcastle/CODING_STANDARDS.md\"}",
        "turns": [{"text": "Reviewed. <promise>COMPLETE</promise>"}]
    }]));
    let run = TestRun::new("agent-review");
    let env = env(&model.url());
    let sandbox = Sandbox::start(&spec(&run, "issue-6", &env)).unwrap();
    workspace(&sandbox);
    let host = tempfile::tempdir().unwrap();
    let standards = host.path().join("CODING_STANDARDS.md");
    std::fs::write(&standards, "Rule STANDARD-7: no panics on bad input.\n").unwrap();
    sandbox
        .copy_in(
            &standards,
            "/home/agent/workspace/.sandcastle/CODING_STANDARDS.md",
        )
        .unwrap();
    let logs = tempfile::tempdir().unwrap();
    // The review prompt's own line (prompts.rs checks that `review.md` has it).
    let prompt =
        "Review the branch against the project's standards:\n\n@.sandcastle/CODING_STANDARDS.md\n";
    let mut agent = agent_run(prompt, logs.path(), 1);
    agent.role = Role::Reviewer;

    let outcome = super::run(&sandbox, &agent, &redactor(), &mut |_| {}).unwrap();

    assert_eq!(outcome.ending, Ending::Completed, "{}", outcome.result_text);
    // Claude Code attached the file named by `@.sandcastle/CODING_STANDARDS.md` to the prompt.
    let session = std::fs::read_to_string(outcome.session.unwrap().file).unwrap();
    assert!(session.contains("Rule STANDARD-7"));
}

#[test]
fn an_unwritable_transcript_stops_the_agent() {
    if !docker_ready() {
        return;
    }
    let model = fake(serde_json::json!([{
        "match": "TASK-full",
        "turns": [{"bash": "sleep 40"}, {"text": "<promise>COMPLETE</promise>"}]
    }]));
    let run = TestRun::new("agent-full");
    let env = env(&model.url());
    let sandbox = Sandbox::start(&spec(&run, "issue-7", &env)).unwrap();
    workspace(&sandbox);
    let logs = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/full", logs.path().join("implementer-1.jsonl")).unwrap();

    let started = Instant::now();
    let error = super::run(
        &sandbox,
        &agent_run("Do TASK-full.", logs.path(), 1),
        &redactor(),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();

    assert!(
        error.starts_with("implementer iteration 1: cannot write the transcript"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let left = processes(&sandbox);
    assert!(!left.contains("claude"), "{left}");
}

/// What the turn's exec hands out of the checkout when the agent (here `true`) leaves it as it is.
fn commits_after_a_quiet_turn(sandbox: &Sandbox, known: &str, dir: &Path) -> Vec<u8> {
    let argv = [
        crate::sandbox::PROTECTED_SANDCASTLE,
        "turn",
        "/nonexistent/session.jsonl",
        WORKSPACE,
        known,
        crate::ask::OUTBOX,
        "--",
        "true",
    ];
    let mut child = sandbox.exec_command(&argv).unwrap();
    let word = b" the-turns-word";
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, &[hand_out::MARKER, word, b"\n"].concat()).unwrap();
    drop(stdin);
    let out = child.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let marker = [b"\n", hand_out::MARKER, word, b"\n"].concat();
    let at = out
        .stdout
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("a trailer");
    let to = Destination {
        session: dir.join("session"),
        max_session: 1024,
        commits: dir.join("commits"),
        max_commits: checkout::MAX_BUNDLE_BYTES,
        max_ask: 1024,
    };
    let trailer = hand_out::read(&mut &out.stdout[at + marker.len()..], &to).unwrap();
    assert_eq!(trailer.commits, Commits::InFile);
    std::fs::read(&to.commits).unwrap()
}

/// HEAD is read without git when it names the host's tip through a loose ref or directly;
/// a packed ref takes git's path and hands out the same id; a new commit comes out as a bundle. A
/// HEAD that only claims the host's tip (a ref name git refuses) hands out that tip: the host then
/// takes no commits, which loses nothing but the agent's own work.
#[test]
fn a_turn_that_ends_at_the_hosts_tip_hands_out_its_id_however_head_names_it() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("agent-head");
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    workspace(&sandbox);
    let dir = tempfile::tempdir().unwrap();
    let known = exec(&sandbox, &["git", "rev-parse", "HEAD"]);
    let id_line = format!("{known}\n").into_bytes();

    assert_eq!(
        commits_after_a_quiet_turn(&sandbox, &known, dir.path()),
        id_line
    );
    exec(&sandbox, &["git", "pack-refs", "--all", "--prune"]);
    assert_eq!(
        exec(
            &sandbox,
            &["sh", "-c", "test ! -e .git/refs/heads/main && echo packed"]
        ),
        "packed"
    );
    assert_eq!(
        commits_after_a_quiet_turn(&sandbox, &known, dir.path()),
        id_line
    );
    exec(&sandbox, &["git", "checkout", "-q", "--detach"]);
    assert_eq!(
        commits_after_a_quiet_turn(&sandbox, &known, dir.path()),
        id_line
    );
    exec(
        &sandbox,
        &[
            "sh",
            "-c",
            "git rev-parse HEAD > .git/claim && echo 'ref: refs/heads/../../claim' > .git/HEAD",
        ],
    );
    assert_eq!(
        commits_after_a_quiet_turn(&sandbox, &known, dir.path()),
        id_line
    );

    exec(
        &sandbox,
        &[
            "sh",
            "-c",
            "git checkout -q main && git commit -q --allow-empty -m next",
        ],
    );
    let bundle = commits_after_a_quiet_turn(&sandbox, &known, dir.path());
    assert!(bundle.starts_with(b"# v2 git bundle\n"), "{bundle:?}");

    sandbox.remove().unwrap();
    assert!(run.containers().is_empty());
}
