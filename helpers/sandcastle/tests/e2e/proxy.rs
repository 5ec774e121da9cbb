//! The model proxy end to end: the key stays on the host, the model still answers through the
//! relay, and the proxy refuses what is not the work's own. Real Docker, the real Claude Code CLI.
use crate::harness::{Harness, docker_or_skip};
use serde_json::{Value, json};
use std::process::Command;

const COMPLETE: &str = "<promise>COMPLETE</promise>";
/// The harness's `.sandcastle/.env` key.
const KEY: &str = "sk-test-e2e-secret-key";
/// The key, put together by the shell, so that no command the agent runs holds it literally (a
/// search would find the command itself in Claude Code's session file).
const KEY_IN_SHELL: &str = "k=sk-test-e2e; k=\"$k-secret-key\"";

fn reviewer() -> Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

fn one_issue(turns: Value, config: &str) -> Harness {
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": turns}]),
        config,
    );
    assert_eq!(
        h.create_issue("The work", "Look around.", &["ready-for-agent"]),
        1
    );
    h
}

/// Everything the container holds of it: its configuration, and every file root can read.
fn container_holds_key(id: &str) -> String {
    let inspect = Command::new("docker")
        .args(["inspect", id])
        .output()
        .unwrap();
    let mut found = String::new();
    if String::from_utf8_lossy(&inspect.stdout).contains(KEY) {
        found += "docker inspect; ";
    }
    let grep = Command::new("docker")
        .args(["exec", id, "grep", "-rlF", KEY, "/"])
        .args([
            "--exclude-dir=proc",
            "--exclude-dir=sys",
            "--exclude-dir=dev",
        ])
        .output()
        .unwrap();
    found += &String::from_utf8_lossy(&grep.stdout);
    found
}

/// The agent looks everywhere for the key while the test looks at its container: nobody finds
/// it, the agent's model calls succeed, and the model server got the real key from the proxy.
#[test]
fn the_model_key_never_enters_a_sandbox() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let look = format!(
        "{KEY_IN_SHELL}; {{ env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done; \
         grep -rlF \"$k\" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | sed 's/^/FOUND IN /'; \
         tr '\\0' '\\n' < /proc/self/environ | grep -c \"$k\" | sed 's/^/own environment: /'; \
         }} > seen.txt; touch /tmp/looked; for i in $(seq 600); do [ -f /tmp/go ] && break; sleep 0.1; done; \
         git add seen.txt && git commit -qm 'What the sandbox saw'"
    );
    let h = one_issue(
        json!([{"bash": look, "description": "look"}, {"text": format!("Done. {COMPLETE}")}]),
        "",
    );

    let mut run = h.start_until(&["run", "--issue", "1"], "/tmp/looked");
    let containers = h.containers();
    assert_eq!(containers.len(), 1);
    let found = container_holds_key(&containers[0]);
    h.touch_in_sandbox("/tmp/go");
    assert!(run.wait().unwrap().success());

    assert_eq!(found, "", "the key is in the container");
    let seen = h.remote_file("sandcastle/issue-1", "seen.txt");
    assert!(!seen.contains(KEY), "{seen}");
    assert!(!seen.contains("FOUND IN"), "{seen}");
    assert!(seen.contains("own environment: 0"), "{seen}");
    assert!(
        seen.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:")
            && seen.contains("ANTHROPIC_API_KEY=sandcastle-work-"),
        "Claude Code is pointed at the relay with a placeholder:\n{seen}"
    );
    assert!(!h.anthropic.requests().is_empty());
    assert_eq!(h.anthropic.credentials(), [KEY.to_string()]);
    assert_eq!(h.pulls().len(), 1, "the work published");
}
