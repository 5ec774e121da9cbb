//! The real Claude Code CLI, in a container from the test image, against the fake API.
//!
//! Needs a running Docker engine and the test image:
//! `checks/docker/start-dockerd.sh && checks/docker/build-test-image.sh`.
//! `SANDCASTLE_SKIP_DOCKER_TESTS=1` skips these tests; otherwise a missing engine or image fails.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_anthropic::{FakeAnthropic, Scenario};
use serde_json::Value;

const API_KEY: &str = "sk-fake-anthropic-test-key-7f3a";
const MODEL: &str = "claude-sonnet-4-6";
const WORKSPACE: &str = "/home/agent/workspace";
const SESSION_DIR: &str = "/home/agent/.claude/projects/-home-agent-workspace";
const EXEC_TIMEOUT: Duration = Duration::from_secs(180);

fn image() -> String {
    std::env::var("SANDCASTLE_TEST_IMAGE").unwrap_or_else(|_| "sandcastle-test:latest".into())
}

/// False (with the reason printed) when the tests are switched off; panics when Docker or the
/// image is missing, since a silently skipped test proves nothing.
fn docker_ready() -> bool {
    if std::env::var("SANDCASTLE_SKIP_DOCKER_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: SANDCASTLE_SKIP_DOCKER_TESTS=1");
        return false;
    }
    let engine = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output();
    assert!(
        engine.is_ok_and(|out| out.status.success()),
        "the Docker engine does not answer: run checks/docker/start-dockerd.sh \
         (or set SANDCASTLE_SKIP_DOCKER_TESTS=1 to skip)"
    );
    let image = image();
    let inspect = Command::new("docker")
        .args(["image", "inspect", &image])
        .output()
        .unwrap();
    assert!(
        inspect.status.success(),
        "image {image} is missing: run checks/docker/build-test-image.sh"
    );
    true
}

/// A container that is removed when the test ends, however it ends.
struct Container {
    name: String,
}

impl Container {
    fn start(workspace: &Path) -> Container {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("fake-anthropic-test-{}-{nanos}", std::process::id());
        let mount = format!("{}:{WORKSPACE}", workspace.display());
        let status = Command::new("docker")
            .args([
                "run",
                "-d",
                "--name",
                &name,
                "--network",
                "host",
                "--cap-drop",
                "ALL",
            ])
            .args([
                "--security-opt",
                "no-new-privileges",
                "-v",
                &mount,
                &image(),
            ])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "docker run failed for {name}");
        Container { name }
    }

    /// `docker exec -i` as the agent user in the workspace; secrets go by name (`-e NAME`),
    /// their values through the environment of the docker CLI, never as arguments.
    fn exec(&self, fake: &FakeAnthropic, args: &[&str], stdin: &[u8]) -> (bool, String) {
        let mut command = Command::new("docker");
        command.args(["exec", "-i", "-u", "agent", "-w", WORKSPACE]);
        for name in agent_env_names() {
            command.args(["-e", name]);
        }
        command
            .arg(&self.name)
            .args(args)
            .env("ANTHROPIC_BASE_URL", fake.url())
            .env("ANTHROPIC_API_KEY", API_KEY)
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("GIT_CONFIG_COUNT", "2")
            .env("GIT_CONFIG_KEY_0", "user.name")
            .env("GIT_CONFIG_VALUE_0", "Sandcastle Agent")
            .env("GIT_CONFIG_KEY_1", "user.email")
            .env("GIT_CONFIG_VALUE_1", "agent@sandcastle.invalid");
        run_with_timeout(command, stdin)
    }

    fn claude(&self, fake: &FakeAnthropic, prompt: &str, resume: Option<&str>) -> Vec<Value> {
        let mut args = vec![
            "claude",
            "--print",
            "--verbose",
            "--output-format",
            "stream-json",
        ];
        args.extend(["--model", MODEL, "--dangerously-skip-permissions"]);
        if let Some(session) = resume {
            args.extend(["--resume", session]);
        }
        args.extend(["-p", "-"]);
        let (ok, stdout) = self.exec(fake, &args, prompt.as_bytes());
        assert!(
            !stdout.contains(API_KEY),
            "the API key leaked into the stream"
        );
        assert!(ok, "claude exited with failure; stream:\n{stdout}");
        stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn agent_env_names() -> [&'static str; 9] {
    [
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_AUTOUPDATER",
        "GIT_CONFIG_COUNT",
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_0",
        "GIT_CONFIG_KEY_1",
        "GIT_CONFIG_VALUE_1",
    ]
}

/// Runs `command` with `stdin`, returning (success, stdout); kills it after `EXEC_TIMEOUT`.
fn run_with_timeout(mut command: Command, stdin: &[u8]) -> (bool, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let deadline = Instant::now() + EXEC_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("docker exec did not finish within {EXEC_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status.success(), reader.join().unwrap().unwrap())
}

/// A git repository with one commit, owned by the container's agent user (uid 1000).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README.md"), "test repo\n").unwrap();
    git(dir.path(), &["add", "README.md"]);
    git(dir.path(), &["commit", "-q", "-m", "Initial commit"]);
    let status = Command::new("chown")
        .args(["-R", "1000:1000"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "chown of the workspace failed");
    dir
}

/// Host-side git in a repository that may belong to another user.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "safe.directory=*",
            "-c",
            "user.name=Test",
            "-c",
            "user.email=t@t.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn result_event(events: &[Value]) -> &Value {
    let last = events.last().expect("claude printed no event");
    assert_eq!(
        last["type"], "result",
        "the stream does not end with a result: {last}"
    );
    last
}

fn container_exists(name: &str) -> bool {
    let out = Command::new("docker")
        .args(["ps", "-a", "-q", "--filter", &format!("name=^{name}$")])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

#[test]
fn claude_in_a_container_commits_through_bash_and_signals_completion() {
    if !docker_ready() {
        return;
    }
    let scenario = Scenario::from_json(
        r#"[{"match": "issue #1", "turns": [
            {"text": "I will add the file.", "description": "Add hello.txt and commit",
             "bash": "echo hello > hello.txt && git add hello.txt && git commit -q -m 'Add hello.txt' && git log --oneline"},
            {"text": "Added hello.txt. <promise>COMPLETE</promise>"}]}]"#,
    )
    .unwrap();
    let fake = FakeAnthropic::start(scenario).unwrap();
    let repo = workspace();
    let container = Container::start(repo.path());

    let events = container.claude(&fake, "Work on issue #1: add hello.txt", None);

    let result = result_event(&events);
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("<promise>COMPLETE</promise>")
    );
    let tool_result = events
        .iter()
        .find(|e| e["type"] == "user")
        .expect("no tool result in the stream");
    assert_eq!(
        tool_result["message"]["content"][0]["is_error"], false,
        "{tool_result}"
    );

    assert_eq!(
        std::fs::read_to_string(repo.path().join("hello.txt")).unwrap(),
        "hello\n"
    );
    let log = git(repo.path(), &["log", "--format=%s|%an"]);
    assert_eq!(log, "Add hello.txt|Sandcastle Agent\nInitial commit|Test\n");

    let turns: Vec<(usize, Option<usize>, String)> = fake
        .requests()
        .into_iter()
        .map(|r| (r.turn, r.script, r.model))
        .collect();
    assert_eq!(
        turns,
        [(0, Some(0), MODEL.into()), (1, Some(0), MODEL.into())]
    );
    assert!(fake.unmatched().is_empty());
    let usage = fake.total_usage();
    assert_eq!(result["usage"]["input_tokens"], usage.input_tokens);
    assert_eq!(result["usage"]["output_tokens"], usage.output_tokens);

    let name = container.name.clone();
    drop(container);
    assert!(!container_exists(&name), "container {name} was not removed");
}

#[test]
fn a_saved_session_resumes_in_a_fresh_container() {
    if !docker_ready() {
        return;
    }
    let scenario = Scenario::from_json(
        r#"[{"match": "issue #2", "turns": [
            {"bash": "echo one > notes.txt && git add notes.txt && git commit -q -m 'First note'"},
            {"text": "I need an answer before going on."},
            {"bash": "echo two >> notes.txt && git commit -q -am 'Second note'"},
            {"text": "Both notes written. <promise>COMPLETE</promise>"}]}]"#,
    )
    .unwrap();
    let fake = FakeAnthropic::start(scenario).unwrap();
    let repo = workspace();

    let first = Container::start(repo.path());
    let events = first.claude(&fake, "Work on issue #2", None);
    let session = result_event(&events)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !result_event(&events)["result"]
            .as_str()
            .unwrap()
            .contains("COMPLETE")
    );
    let session_file = format!("{SESSION_DIR}/{session}.jsonl");
    let (ok, transcript) = first.exec(&fake, &["cat", &session_file], b"");
    assert!(ok, "no session file at {session_file}");
    drop(first);

    // The file must belong to the agent user: write it as that user (a root-owned copy,
    // as `docker cp` makes, is not found by --resume).
    let second = Container::start(repo.path());
    let save = format!("mkdir -p {SESSION_DIR} && cat > {session_file}");
    let (ok, _) = second.exec(&fake, &["sh", "-c", &save], transcript.as_bytes());
    assert!(ok, "could not restore the session file");
    let events = second.claude(&fake, "The answer is yes. Continue.", Some(&session));

    let result = result_event(&events);
    assert_eq!(result["session_id"], session);
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("<promise>COMPLETE</promise>")
    );
    let turns: Vec<usize> = fake.requests().iter().map(|r| r.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3]);
    assert!(fake.unmatched().is_empty());
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    let log = git(repo.path(), &["log", "--format=%s"]);
    assert_eq!(log, "Second note\nFirst note\nInitial commit\n");
}
