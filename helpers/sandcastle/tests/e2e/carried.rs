//! No work lost to a fresh container: what an agent wrote and did not hand out (uncommitted files,
//! commits the host never took) comes with its work into the next container of its role. Real
//! Docker, the real Claude Code CLI, the scripted model and forge.
use crate::harness::{Harness, docker_or_skip};
use serde_json::{Value, json};

const COMPLETE: &str = "<promise>COMPLETE</promise>";
/// The heading `prompts::turns::TREE_CARRIED_OVER` adds to the prompt.
const CARRIED: &str = "## Your checkout was carried over";

/// The relay dies mid-turn after the agent committed once and wrote a file it did not commit: the
/// container stops, nothing is handed out, and the next turn's fresh container has both as
/// uncommitted changes (the agent is told so), which it commits and the branch carries.
#[test]
fn a_dead_relays_uncommitted_work_and_unhanded_commits_reach_the_fresh_container() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let write_then_wait = "echo handed-never > committed.txt && git add committed.txt \
        && git commit -qm 'Never handed out' && echo carried-work > notes.txt && touch /tmp/ready \
        && for i in $(seq 600); do [ -f /tmp/go ] && break; sleep 0.1; done";
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]},
            {"match": "the sandbox stopped during the turn", "turns": [
                {"bash": "grep -qx carried-work notes.txt && grep -qx handed-never committed.txt \
                          && git add -A && git commit -qm Carried", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": write_then_wait, "description": "write"},
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        "",
    );
    let issue = h.create_issue("One", "Write notes.", &["ready-for-agent"]);
    let mut run = h
        .command(&["run", "--issue", &issue.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    h.wait_for_file(&mut run, "/tmp/ready");
    // The turn's: the reviewer's container starts beside it.
    let turns = h
        .container_with("/tmp/ready")
        .expect("the turn's container");
    h.kill_relay(&turns);
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");

    assert!(output.status.success(), "the work published");
    assert!(
        stderr.contains("issue #1: the last sandbox's checkout was carried to the fresh one"),
        "{stderr}"
    );
    assert_eq!(
        h.remote_file("sandcastle/issue-1", "notes.txt"),
        "carried-work\n"
    );
    assert_eq!(
        h.remote_file("sandcastle/issue-1", "committed.txt"),
        "handed-never\n"
    );
    let subjects = h.remote_log("sandcastle/issue-1");
    assert!(subjects.contains(&"Carried".to_string()), "{subjects:?}");
    assert!(
        !subjects.contains(&"Never handed out".to_string()),
        "the unhanded commit comes as changes, not as a commit: {subjects:?}"
    );
    let told: Vec<String> = h
        .anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("the sandbox stopped during the turn"))
        .map(|r| r.prompt)
        .collect();
    assert!(
        !told.is_empty() && told.iter().all(|p| p.contains(CARRIED)),
        "{told:?}"
    );
}

fn bash(command: &str) -> Value {
    json!({"bash": command, "description": "step"})
}

/// The implementer leaves a draft uncommitted and says it is done; the reviewer, another role,
/// gets a fresh container without it and asks for more; the implementer's next fresh container
/// has its draft back, since the branch did not move in between.
#[test]
fn a_role_switch_carries_the_tree_back_to_the_role_that_wrote_it_only() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    // The reviewer records what it saw as an empty commit: an untracked draft in its checkout.
    let look = "if [ -e draft.txt ] && ! git ls-files --error-unmatch draft.txt >/dev/null 2>&1; \
                then git commit --allow-empty -qm 'Reviewer saw the draft'; fi";
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [
                bash(look),
                {"text": "Findings: the draft is missing from the branch."},
                {"text": format!("Fine now. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                bash("echo work > work.txt && git add work.txt && git commit -qm Work && echo draft > draft.txt"),
                {"text": format!("Done. {COMPLETE}")},
                bash("grep -qx draft draft.txt && git add draft.txt && git commit -qm Draft"),
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        "",
    );
    let issue = h.create_issue("One", "Work and draft.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(output.status.success(), "the work published");

    let subjects = h.remote_log("sandcastle/issue-1");
    assert!(subjects.contains(&"Draft".to_string()), "{subjects:?}");
    assert!(
        !subjects.contains(&"Reviewer saw the draft".to_string()),
        "the reviewer's container did not get the implementer's tree: {subjects:?}"
    );
    assert_eq!(h.remote_file("sandcastle/issue-1", "draft.txt"), "draft\n");
    let implementer: Vec<String> = h
        .anthropic
        .requests()
        .into_iter()
        .filter(|r| r.prompt.contains("The issue: #1\n") && r.latest.contains(CARRIED))
        .map(|r| r.latest)
        .collect();
    assert!(
        !implementer.is_empty(),
        "the implementer was told its tree came with it"
    );
}
