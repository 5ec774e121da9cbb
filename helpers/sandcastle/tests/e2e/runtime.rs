//! `[sandbox] runtime` on the real engine: every container of a run (the agents', the warm-up's and
//! the gate's) is created under the runtime named, the start line and `doctor` say which, and a name
//! the engine does not know, or an engine that cannot be reached, is `doctor`'s one line with the fix.
use super::harness::{Harness, docker_or_skip, sigterm};
use super::{COMPLETE, commit, reviewer};
use serde_json::json;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// runc under another name, registered by `checks/docker/start-dockerd.sh`: a container created
/// under it says so in `HostConfig.Runtime`, where one created under the default says `runc`.
const TEST_RUNTIME: &str = "sandcastle-test-runc";

/// A `check` step that holds its container until the test has seen it (`/tmp/go`).
const HOLD: &str = "touch /tmp/checking; until [ -f /tmp/go ]; do sleep 0.1; done";

fn the_engine_knows_the_test_runtime() {
    let info = Command::new("docker")
        .args(["info", "--format", "{{json .Runtimes}}"])
        .output()
        .unwrap();
    let runtimes = String::from_utf8_lossy(&info.stdout);
    assert!(
        runtimes.contains(&format!("\"{TEST_RUNTIME}\"")),
        "the test engine lacks the runtime {TEST_RUNTIME} ({runtimes}): run checks/docker/start-dockerd.sh"
    );
}

fn config(runtime: &str) -> String {
    format!(
        "[commands]\ncheck = [[\"sh\", \"-c\", \"{HOLD}\"]]\n[sandbox]\nmemory = \"2g\"\npidsLimit = 512\nruntime = \"{runtime}\"\n"
    )
}

/// The name and runtime of container `id`, unless it is gone.
fn name_and_runtime(id: &str) -> Option<(String, String)> {
    let out = Command::new("docker")
        .args([
            "inspect",
            "--format",
            "{{.Name}} {{.HostConfig.Runtime}}",
            id,
        ])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let (name, runtime) = text.trim().split_once(' ')?;
    Some((
        name.trim_start_matches('/').to_string(),
        runtime.to_string(),
    ))
}

#[test]
fn every_container_of_a_run_gates_included_runs_under_the_runtime_named() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    the_engine_knows_the_test_runtime();
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": [
            commit("greeting.txt", "Add greeting"),
            {"text": format!("Done. {COMPLETE}")}]}]),
        &config(TEST_RUNTIME),
    );
    let issue = h.create_issue("Add greeting", "Write greeting.txt.", &["ready-for-agent"]);
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut run = h
        .command(&["run", "--issue", &issue.to_string()])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();

    // Each container is looked at before it is let go: a build container's `check` waits for it.
    let mut seen = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        for id in h.containers() {
            if let Some((name, runtime)) = name_and_runtime(&id) {
                seen.insert(name, runtime);
                let _ = Command::new("docker")
                    .args(["exec", &id, "touch", "/tmp/go"])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            // A stopped run removes its containers.
            sigterm(&run);
            let _ = run.wait();
            let stderr = std::fs::read_to_string(log.path()).unwrap_or_default();
            panic!("the run did not end: {seen:?}\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "sandboxes run under {TEST_RUNTIME} ([sandbox] runtime)"
        )),
        "the start line says the runtime: {stderr}"
    );
    assert_eq!(h.pulls().len(), 1, "{stderr}");

    for end in ["-issue-1", "-issue-1-gate"] {
        assert!(
            seen.keys().any(|name| name.ends_with(end)),
            "no container *{end} seen: {seen:?}"
        );
    }
    assert!(
        seen.keys().any(|name| name.contains("-warm-")),
        "no warm-up seen: {seen:?}"
    );
    eprintln!("containers seen: {seen:?}");
    let elsewhere: Vec<_> = seen.iter().filter(|(_, r)| *r != TEST_RUNTIME).collect();
    assert!(
        elsewhere.is_empty(),
        "not under {TEST_RUNTIME}: {elsewhere:?}"
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
}

#[test]
fn doctor_says_the_runtime_and_a_name_the_engine_does_not_know_is_one_line_that_stops_a_run() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    the_engine_knows_the_test_runtime();
    let h = Harness::new(json!([]), &config(TEST_RUNTIME));
    let doctor =
        |h: &Harness| String::from_utf8_lossy(&h.sandcastle(&["doctor"]).stdout).into_owned();

    let known = doctor(&h);
    assert!(
        known.lines().any(|l| l.starts_with("ok")
            && l.contains("runtime")
            && l.ends_with(&format!(
                "sandboxes run under {TEST_RUNTIME} ([sandbox] runtime)"
            ))),
        "{known}"
    );
    assert!(
        known
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("programs")),
        "the image is probed under the runtime: {known}"
    );

    let config = h.project().join(".sandcastle/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(TEST_RUNTIME, "sandcastle-no-such-runtime"),
    )
    .unwrap();
    let unknown = doctor(&h);
    let line = unknown
        .lines()
        .find(|l| l.starts_with("FAIL") && l.split_whitespace().nth(1) == Some("runtime"))
        .unwrap_or_else(|| panic!("no runtime line: {unknown}"));
    for part in [
        "does not know the runtime \"sandcastle-no-such-runtime\" of [sandbox] runtime",
        TEST_RUNTIME,
        "/etc/docker/daemon.json",
        "{\"runtimes\": {\"sandcastle-no-such-runtime\": {\"path\": \"/usr/bin/sandcastle-no-such-runtime\"}}}",
        "reload the engine",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
    assert!(
        !unknown
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("programs")),
        "no probe under a runtime the engine refuses: {unknown}"
    );

    // A run stops at its start with the same line, before any container is made.
    h.create_issue("Add greeting", "Write greeting.txt.", &["ready-for-agent"]);
    let run = h.sandcastle(&["run", "--once"]);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("does not know the runtime \"sandcastle-no-such-runtime\""),
        "{stderr}"
    );
    assert!(h.containers().is_empty(), "{:?}", h.containers());
}

#[test]
fn doctor_says_in_one_line_where_an_engine_that_cannot_be_reached_was_looked_for() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(json!([]), "");
    let gone = tempfile::tempdir().unwrap();
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = refused.local_addr().unwrap().port();
    drop(refused);
    for (host, why) in [
        (
            format!("unix://{}/docker.sock", gone.path().display()),
            "does not exist",
        ),
        (format!("tcp://127.0.0.1:{port}"), "Connection refused"),
    ] {
        let output = h
            .command(&["doctor"])
            .env("DOCKER_HOST", &host)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some("docker"))
            .unwrap_or_else(|| panic!("no docker line: {stdout}"));
        assert!(line.starts_with("FAIL"), "{line}");
        assert!(line.contains("DOCKER_HOST"), "{line}");
        assert!(line.contains(why), "{why}: {line}");
        assert!(line.contains(host.trim_start_matches("unix://")), "{line}");
        assert!(!output.status.success());
    }
}
