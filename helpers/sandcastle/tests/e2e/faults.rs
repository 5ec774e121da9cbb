//! Faults: a run killed outright, and secrets in the forms tools print them. Real Docker, the real
//! Claude Code CLI, the scripted model and forge.
use crate::harness::{Harness, docker_or_skip, stderr_lines};
use base64::Engine;
use serde_json::json;
use std::time::{Duration, Instant};

const COMPLETE: &str = "<promise>COMPLETE</promise>";
/// The `ANTHROPIC_API_KEY` the harness writes into `.env`.
const KEY: &str = "sk-test-e2e-secret-key";

fn reviewer() -> serde_json::Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

/// A run killed with SIGKILL leaves its container; the next start removes it, and only it.
#[test]
fn a_sigkilled_runs_containers_are_removed_by_the_next_start() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": [
            {"bash": "sleep 120", "description": "wait"}, {"text": COMPLETE}]}]),
        "",
    );
    let issue = h.create_issue("Slow", "Take your time.", &["ready-for-agent"]);
    let mut run = h
        .command(&["run", "--issue", &issue.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(120);
    while h.containers().is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
    }
    let left = h.containers();
    assert_eq!(left.len(), 1, "the run started its sandbox");
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(h.containers(), left, "SIGKILL leaves the container");

    // The next start (here one that then fails: there is no issue 99) sweeps it.
    let next = h.sandcastle(&["run", "--issue", "99"]);
    let lines = stderr_lines(&next);
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
