//! Two orchestrators with separate project directories on one forge, as on two hosts: claims on the
//! forge keep them from doubling work. (Claims racing from three orchestrators, twenty rounds, are
//! `claims::tests`.)
use crate::harness::{Harness, docker_or_skip, sigterm};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const COMPLETE: &str = "<promise>COMPLETE</promise>";

/// The issues whose implementer ran in a project, from its transcripts.
fn implemented(files: &[std::path::PathBuf]) -> BTreeSet<String> {
    files
        .iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("implementer-"))
        })
        .filter_map(|f| Some(f.parent()?.file_name()?.to_string_lossy().into_owned()))
        .collect()
}

/// Six issues, two orchestrators at `maxConcurrency = 2` each: every issue gets exactly one pull
/// request, each issue's implementer ran in one orchestrator only, and no run fails.
#[test]
fn two_orchestrators_share_six_issues_without_doubling_work() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: planner", "turns": [{"plan": 2}], "repeat_last": true},
            {"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]},
            {"match": "# Role: implementer", "turns": [
                {"bash": "echo done > done.txt && git add done.txt && git commit -qm 'Do it'", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        "maxConcurrency = 2",
    );
    for n in 1..=6 {
        h.create_issue(
            &format!("Task {n}"),
            "Write done.txt.",
            &["ready-for-agent"],
        );
    }
    let second = h.another_host();
    let runs = [
        h.command(&["run"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        second
            .command(&["run"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    ];
    let until = Instant::now() + Duration::from_secs(300);
    while h.pulls().len() < 6 {
        assert!(
            Instant::now() < until,
            "six pull requests in time: {:?}",
            h.pulls().len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut stderr = String::new();
    for run in runs {
        sigterm(&run);
        let output = run.wait_with_output().unwrap();
        stderr += &String::from_utf8_lossy(&output.stderr);
    }

    let pulls = h.pulls();
    let heads: BTreeSet<&str> = pulls
        .iter()
        .map(|p| p["head"]["ref"].as_str().unwrap())
        .collect();
    assert_eq!(pulls.len(), 6, "{heads:?}");
    assert_eq!(heads.len(), 6, "one pull request per issue: {heads:?}");
    let first = implemented(&h.log_files());
    let other = implemented(&second.log_files());
    assert_eq!(first.union(&other).count(), 6, "{first:?} {other:?}");
    assert!(
        first.is_disjoint(&other),
        "an issue was implemented twice: {first:?} {other:?}"
    );
    assert!(
        !stderr.lines().any(|l| l.contains(" failed: ")),
        "no work failed:\n{stderr}"
    );
    for n in 1..=6 {
        assert!(
            h.comments_of(n).is_empty(),
            "claims are gone, nothing else was said on #{n}"
        );
    }
}

/// One orchestrator SIGKILLed mid-iteration: its claim holds until its lease runs out, then the
/// other takes the work over and finishes it: one pull request, no comment left behind.
#[test]
fn a_crashed_holders_work_is_taken_over_after_its_lease() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": "touch /tmp/started && sleep 8", "description": "slow"},
                {"bash": "echo done > done.txt && git add done.txt && git commit -qm 'Do it'", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        "[cluster]\nid = \"host-a\"\nleaseTtl = \"3s\"",
    );
    let issue = h.create_issue("Slow", "Take your time.", &["ready-for-agent"]);
    // Two named hosts: on one machine, a default id's dead process would free its claim at once.
    let second = h.another_host();
    second.replace_in_config("id = \"host-a\"", "id = \"host-b\"");
    let mut first = h.start_until(&["run", "--issue", "1"], "/tmp/started");
    first.kill().unwrap();
    first.wait().unwrap();
    let claim: Value = json!(h.comments_of(issue));
    assert!(
        claim.to_string().contains("sandcastle:claim"),
        "the crashed holder's claim: {claim}"
    );

    // Still within the lease: left to the holder.
    let held = second.command(&["run", "--issue", "1"]).output().unwrap();
    assert!(held.status.success());
    assert!(
        String::from_utf8_lossy(&held.stderr).contains("which holds its claim"),
        "{}",
        String::from_utf8_lossy(&held.stderr)
    );
    assert!(h.pulls().is_empty());

    std::thread::sleep(Duration::from_secs(4));
    let took_over = second.command(&["run", "--issue", "1"]).output().unwrap();
    assert!(
        took_over.status.success(),
        "{}",
        String::from_utf8_lossy(&took_over.stderr)
    );
    assert_eq!(h.pulls().len(), 1);
    assert!(
        h.comments_of(issue).is_empty(),
        "the lapsed claim and the new one are gone"
    );
    assert_eq!(h.labels_of(issue), ["in-review"]);
    assert!(
        second.containers().is_empty(),
        "the second host left no container"
    );

    // The killed run's own container and volume (the gate's warm cache, built beside its first
    // turn): removed here, as its next start would.
    for id in h.containers() {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &id])
            .output();
    }
    for volume in h.volumes() {
        let _ = std::process::Command::new("docker")
            .args(["volume", "rm", "-f", &volume])
            .output();
    }
}
