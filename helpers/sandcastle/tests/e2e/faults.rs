//! Faults: a run killed outright, and secrets in the forms tools print them. Real Docker, the real
//! Claude Code CLI, the scripted model and forge.
use crate::harness::{Harness, docker_or_skip, run_until, sigterm, stderr_lines};
use base64::Engine;
use serde_json::json;
use std::time::{Duration, Instant};

const COMPLETE: &str = "<promise>COMPLETE</promise>";
/// The `ANTHROPIC_API_KEY` the harness writes into `.env`.
const KEY: &str = "sk-test-e2e-secret-key";

fn reviewer() -> serde_json::Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

/// A run killed with SIGKILL leaves its container and its directory (the proxy's socket
/// directory in it); the next start removes them, and only them.
#[test]
fn a_sigkilled_runs_containers_and_directory_are_removed_by_the_next_start() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": [
            {"bash": "touch /tmp/waiting; sleep 120", "description": "wait"}, {"text": COMPLETE}]}]),
        "",
    );
    let issue = h.create_issue("Slow", "Take your time.", &["ready-for-agent"]);
    // The runs' directories: `$XDG_RUNTIME_DIR/sandcastle/runs/<run id>`.
    let xdg = tempfile::tempdir().unwrap();
    let runs = xdg.path().join("sandcastle/runs");
    let listed = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let mut run = h
        .command(&["run", "--issue", &issue.to_string()])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The turn runs, and the reviewer's container, started beside it, is up too.
    h.wait_for_file(&mut run, "/tmp/waiting");
    let until = Instant::now() + Duration::from_secs(120);
    while h.work_containers().len() < 2 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    let left = h.work_containers();
    assert_eq!(left.len(), 2, "the run started its sandboxes");
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(h.work_containers(), left, "SIGKILL leaves the container");
    let killed = listed();
    assert_eq!(killed.len(), 1, "{killed:?}");
    assert!(killed[0].ends_with(&format!("-{}", run.id())), "{killed:?}");
    let sockets: Vec<_> = std::fs::read_dir(runs.join(&killed[0]))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        sockets.len() == 1 && sockets[0].join("mounted/proxy.sock").exists(),
        "the proxy's socket directory is left in the run's: {sockets:?}"
    );

    // The next start (here one that then fails: there is no issue 99) sweeps it.
    let next = h
        .command(&["run", "--issue", "99"])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .output()
        .unwrap();
    let lines = stderr_lines(&next);
    assert!(
        lines.iter().any(|l| l.contains(&format!(
            "removed the directories of runs that are no longer alive: {}",
            killed[0]
        ))),
        "{lines:?}"
    );
    assert!(
        listed().is_empty(),
        "the next run's own went as it ended: {:?}",
        listed()
    );
    assert!(
        lines
            .iter()
            .any(|l| l
                .contains("removed the containers of runs that are no longer alive: sandcastle-")),
        "{lines:?}"
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
    assert!(h.pulls().is_empty(), "nothing published");
}

/// A run stopped with SIGTERM mid-turn removes its own directory, the proxy's socket directory
/// in it included, before it exits.
#[test]
fn a_stopped_run_removes_its_directory() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": [
            {"bash": "touch /tmp/started && sleep 120", "description": "wait"}, {"text": COMPLETE}]}]),
        "",
    );
    let issue = h.create_issue("Slow", "Take your time.", &["ready-for-agent"]);
    let xdg = tempfile::tempdir().unwrap();
    let runs = xdg.path().join("sandcastle/runs");
    let mut run = h
        .command(&["run", "--issue", &issue.to_string()])
        .env("XDG_RUNTIME_DIR", xdg.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    h.wait_for_file(&mut run, "/tmp/started");
    let during: Vec<_> = std::fs::read_dir(&runs).unwrap().collect();
    assert_eq!(during.len(), 1, "the run's directory while it works");
    sigterm(&run);
    assert!(!run.wait().unwrap().success());
    let left: Vec<_> = std::fs::read_dir(&runs).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A secret in a tool call longer than the progress line, and in `curl -v -u`'s
/// `Authorization: Basic` header, shows nowhere: not in progress lines, transcripts or sessions.
#[test]
fn a_secret_never_shows_across_the_cut_or_in_basic_auth() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("alice:{KEY}"));
    // The progress line keeps 79 characters of the command: the key starts at the 70th.
    let padding = "x".repeat(63);
    let turns = json!([
        {"bash": format!("echo {padding} {KEY} > /dev/null"), "description": "long"},
        {"bash": format!("printf '> Authorization: Basic {basic}\\r\\n' && echo done > a.txt && git add a.txt && git commit -qm A"), "description": "curl -v"},
        {"text": format!("Done. {COMPLETE}")}
    ]);
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": turns}]),
        "",
    );
    let issue = h.create_issue("Secrets", "Print things.", &["ready-for-agent"]);
    let out = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[redacted]"),
        "the call was shown, redacted"
    );
    let key_start = &KEY[..8];
    let mut seen_basic_header = false;
    for (what, text) in std::iter::once(("stderr".to_string(), stderr.to_string())).chain(
        h.log_files().into_iter().map(|f| {
            (
                f.display().to_string(),
                std::fs::read_to_string(&f).unwrap_or_default(),
            )
        }),
    ) {
        assert!(!text.contains(key_start), "{what} shows part of the key");
        assert!(
            !text.contains(&basic[..16]),
            "{what} shows the Basic credentials"
        );
        seen_basic_header |= text.contains("Authorization: Basic [redacted]");
    }
    assert!(seen_basic_header, "the header was logged, redacted");
    assert_eq!(h.pulls().len(), 1, "the work published once");
}

fn one_completing_issue() -> (Harness, u64) {
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": [
            {"bash": "echo done > done.txt && git add done.txt && git commit -qm 'Do it'", "description": "commit"},
            {"text": format!("Done. {COMPLETE}")}]}]),
        "",
    );
    let issue = h.create_issue("Do it", "Write done.txt.", &["ready-for-agent"]);
    (h, issue)
}

const ADD_LABELS: &str = "POST /repos/{owner}/{repo}/issues/{index}/labels";

/// Every label request fails for longer than the client retries, right after the pull request
/// opened: the next run finishes publishing from the saved state. One pull request, one set of
/// labels, no comment, and no agent runs again.
#[test]
fn publishing_that_failed_half_way_is_finished_by_the_next_pass() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = one_completing_issue();
    h.forge
        .inject_faults(
            ADD_LABELS,
            4,
            fake_forge::Fault {
                status: 500,
                retry_after: None,
            },
        )
        .unwrap();
    let first = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(!first.status.success(), "the labels failed");
    let pulls = h.pulls();
    assert_eq!(pulls.len(), 1, "the pull request opened");
    let pull = pulls[0]["number"].as_u64().unwrap();
    assert!(h.labels_of(pull).is_empty());
    assert_eq!(h.labels_of(issue), ["ready-for-agent"]);
    let requests = h.anthropic.requests().len();

    // The issue has its pull request now, so it is no candidate: only the saved state knows.
    let second = h.sandcastle(&["run", "--once"]);
    assert!(second.status.success());
    assert_eq!(h.pulls().len(), 1, "no second pull request");
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
    assert_eq!(h.labels_of(issue), ["in-review"]);
    assert!(h.comments_of(issue).is_empty() && h.comments_of(pull).is_empty());
    assert_eq!(h.anthropic.requests().len(), requests, "no agent ran again");
}

/// The orchestrator SIGKILLed between opening the pull request and labelling it (held there by a
/// `Retry-After`), then run again: the same pull request, labelled once.
#[test]
fn a_run_killed_between_the_pull_request_and_its_labels_is_finished_by_the_next() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let (h, issue) = one_completing_issue();
    let pull = h.run_killed_before_the_labels(issue);

    let again = h.sandcastle(&["run", "--once"]);
    assert!(again.status.success());
    assert_eq!(h.pulls().len(), 1);
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
    assert_eq!(h.labels_of(issue), ["in-review"]);
    assert!(h.comments_of(issue).is_empty());
}

/// A forge whose API answers but whose git endpoint accepts connections and never answers: each
/// pass fails with one clear timeout error, and the loop goes on.
#[test]
fn git_against_a_forge_that_never_answers_times_out_and_the_loop_goes_on() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([{"match": "never", "turns": [{"text": "unused"}]}]),
        "",
    );
    h.create_issue("Anything", "", &["ready-for-agent"]);
    let proxy = StallingGitProxy::between(&h);

    let mut run = h.command(&["run"]);
    run.env("SANDCASTLE_TEST_GIT_TIMEOUT", "3");
    let stderr = run_until(run, |stderr| stderr.matches("pass failed").count() >= 2);
    let failures: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("pass failed"))
        .collect();
    assert!(
        failures.len() >= 2,
        "the loop went on after the first timeout: {stderr}"
    );
    for failure in &failures {
        assert!(
            failure.contains("did not finish within 3s and was stopped"),
            "{failure}"
        );
    }
    assert!(proxy.stalled() >= 2, "git reached the stalling endpoint");
}

/// The first turn's container starts while the work's repository is fetched: with the forge's git
/// never answering, a container of the work is up all the same; when the fetch times out, it goes.
#[test]
fn the_first_turns_container_starts_while_the_repository_is_fetched() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([{"match": "never", "turns": [{"text": "unused"}]}]),
        "",
    );
    let issue = h.create_issue("Anything", "", &["ready-for-agent"]);
    let proxy = StallingGitProxy::between(&h);

    let mut run = h
        .command(&["run", "--issue", &issue.to_string()])
        .env("SANDCASTLE_TEST_GIT_TIMEOUT", "15")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    // The fetch stalls for 15 s: a container seen before the run ends came while it was held.
    while h.work_containers().is_empty() || proxy.stalled() == 0 {
        assert!(Instant::now() < until, "no container of the work appeared");
        assert!(run.try_wait().unwrap().is_none(), "sandcastle ended early");
        std::thread::sleep(Duration::from_millis(200));
    }

    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("did not finish within 15s and was stopped"),
        "{stderr}"
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
}

/// Forwards the forge's API; accepts git's requests (`*.git/...`) and never answers them.
struct StallingGitProxy {
    url: String,
    stalled: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl StallingGitProxy {
    /// One in front of `h`'s forge, the project pointed at it.
    fn between(h: &Harness) -> StallingGitProxy {
        let proxy = StallingGitProxy::start(h.forge.url());
        let config = h.project().join(".sandcastle/config.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace(h.forge.url(), &proxy.url)).unwrap();
        proxy
    }

    fn start(forge: &str) -> StallingGitProxy {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = forge.trim_start_matches("http://").to_string();
        let stalled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = stalled.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let upstream = upstream.clone();
                let count = count.clone();
                std::thread::spawn(move || {
                    let mut client = client;
                    let mut head = [0u8; 1024];
                    let Ok(read) = client.peek(&mut head) else {
                        return;
                    };
                    let line = String::from_utf8_lossy(&head[..read])
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    if line.contains(".git/") {
                        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        // Hold the connection open, answering nothing.
                        std::thread::sleep(Duration::from_secs(60));
                        return;
                    }
                    let Ok(mut server) = std::net::TcpStream::connect(&upstream) else {
                        return;
                    };
                    let mut to_server = client.try_clone().unwrap();
                    let mut from_server = server.try_clone().unwrap();
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut to_server, &mut server);
                    });
                    let mut buffer = [0u8; 8192];
                    while let Ok(n @ 1..) = from_server.read(&mut buffer) {
                        if client.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        StallingGitProxy { url, stalled }
    }

    fn stalled(&self) -> usize {
        self.stalled.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A Docker engine socket in front of the real one (in the returned directory, as `docker.sock`)
/// that fails the second gate container's creation as an engine that went away does: the gate
/// run after the reviewer's commit breaks (an `Err`, not a verdict).
fn engine_breaking_the_second_gate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let listener = std::os::unix::net::UnixListener::bind(dir.path().join("docker.sock")).unwrap();
    let real = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|host| host.strip_prefix("unix://").map(std::path::PathBuf::from))
        .unwrap_or_else(|| "/var/run/docker.sock".into());
    let gates = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let (real, gates) = (real.clone(), gates.clone());
            std::thread::spawn(move || relay_to_engine(client, &real, &gates));
        }
    });
    dir
}

/// One connection: requests read a head and a body at a time (the client waits for each
/// response), the engine's answers copied back as they come; after an upgrade (an attached
/// exec), bytes both ways.
fn relay_to_engine(
    client: std::os::unix::net::UnixStream,
    real: &std::path::Path,
    gates: &std::sync::atomic::AtomicUsize,
) -> std::io::Result<()> {
    use std::io::{BufRead, Read, Write};
    let mut engine = std::os::unix::net::UnixStream::connect(real)?;
    let (mut from_engine, mut to_client) = (engine.try_clone()?, client.try_clone()?);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_engine, &mut to_client);
        let _ = to_client.shutdown(std::net::Shutdown::Write);
    });
    let mut answer = client.try_clone()?;
    let mut requests = std::io::BufReader::new(client);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if requests.read_line(&mut line)? == 0 {
                return Ok(());
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let lower = head.to_ascii_lowercase();
        let length = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        requests.read_exact(&mut body)?;
        let creates_a_gate = head.lines().next().is_some_and(|line| {
            line.starts_with("POST ")
                && line.contains("/containers/create?")
                && line
                    .split(['?', '&', ' '])
                    .any(|p| p.starts_with("name=") && p.ends_with("-gate"))
        });
        if creates_a_gate && gates.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            let message = r#"{"message":"Cannot connect to the Docker daemon (test fault)"}"#;
            write!(
                answer,
                "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{message}",
                message.len()
            )?;
            continue;
        }
        engine.write_all(head.as_bytes())?;
        engine.write_all(&body)?;
        if lower.contains("\r\nupgrade:") {
            std::io::copy(&mut requests, &mut engine)?;
            return engine.shutdown(std::net::Shutdown::Write);
        }
    }
}

/// The gate passes on the implementer's commit; the reviewer adds one and the gate run on it
/// breaks. The next run's reviewer approves without new commits: the gate runs on the reviewer's
/// commit before the push, and the pull request's "passed on" names the commit on the forge (the
/// broken run, which gave no verdict, is not counted).
#[test]
fn a_gate_that_broke_after_the_reviewers_commit_runs_before_the_push() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [
                {"bash": "echo fixed > typo.txt && git add typo.txt && git commit -qm 'Reviewer fix'", "description": "commit"},
                {"text": format!("Fixed a typo. {COMPLETE}")},
                {"text": format!("Fine now. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": "echo done > done.txt && git add done.txt && git commit -qm 'Do it'", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]}]),
        "",
    );
    let issue = h.create_issue("Do it", "Write done.txt.", &["ready-for-agent"]);
    let breaking = engine_breaking_the_second_gate();
    let engine = format!("unix://{}/docker.sock", breaking.path().display());
    let first = h
        .command(&["run", "--issue", &issue.to_string()])
        .env("DOCKER_HOST", &engine)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(!first.status.success(), "{stderr}");
    assert!(stderr.contains("test fault"), "{stderr}");
    assert!(h.pulls().is_empty(), "nothing published: {stderr}");

    let second = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(second.status.success());
    assert_eq!(
        h.remote_log("sandcastle/issue-1")[..2],
        ["Reviewer fix", "Do it"]
    );
    let pulls = h.pulls();
    let pushed = pulls[0]["head"]["sha"].as_str().unwrap();
    let body = h.only_pull_body();
    assert!(
        body.contains(&format!("`check` passed on {pushed}, ")) && body.contains("(gate runs: 2)"),
        "{body}"
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
    assert!(h.volumes().is_empty(), "{:?}", h.volumes());
}
