//! Pull requests that keep themselves green: a failing CI status or a merge conflict on one of
//! sandcastle's own `ready-for-human` pull requests goes back to the pr-fixer, within its rounds.
use crate::harness::Harness;
use crate::{COMPLETE, commit, docker_or_skip, reviewer};
use serde_json::{Value, json};

const KEEP_GREEN: &str = "keeping a pull request green";

/// The pr-fixer keeping a pull request green: one new commit a round, then done.
fn green_fixer() -> Value {
    json!({"match": KEEP_GREEN, "turns": [
        {"bash": "date +%s%N >> ci-fix.txt && git add ci-fix.txt && git commit -qm 'Fix CI'", "description": "fix"},
        {"text": format!("The test expected a trailing newline; fixed. {COMPLETE}")}]})
}

/// Conversations of the pr-fixer keeping a pull request green.
fn green_rounds(h: &Harness) -> usize {
    h.anthropic
        .requests()
        .iter()
        .filter(|r| r.prompt.contains(KEEP_GREEN) && r.turn == 0)
        .count()
}

fn head(h: &Harness, pull: u64) -> String {
    h.get(&format!("/pulls/{pull}"))["head"]["sha"]
        .as_str()
        .unwrap()
        .to_string()
}

fn set_status(h: &Harness, sha: &str, state: &str) {
    h.post(
        &format!("/statuses/{sha}"),
        json!({"state": state, "context": "ci/test", "description": format!("FAILING-TEST-7 says {state}"),
               "target_url": "http://127.0.0.1:9/ci/runs/7"}),
    );
}

fn is_ancestor(h: &Harness, ancestor: &str, descendant: &str) -> bool {
    h.remote_git(&["merge-base", "--is-ancestor", ancestor, descendant])
        .status
        .success()
}

/// Every call matched Forgejo's swagger, and no container is left.
fn finished_cleanly(h: &Harness) {
    let violations = h.forge.schema_violations();
    assert!(violations.is_empty(), "{violations:?}");
    assert!(h.containers().is_empty(), "no container left");
}

/// A set-up whose implementer answers issue #1 and whose reviewer approves, with `fixer` keeping
/// pull requests green.
fn answering(fixer: Value, config: &str) -> Harness {
    Harness::new(
        json!([reviewer(), fixer,
            {"match": "The issue: #1\n", "turns": [commit("answer.txt", "Answer"), {"text": format!("Answered. {COMPLETE}")}]}]),
        config,
    )
}

/// Issue #1 implemented and published by one run: its pull request's number.
fn published(h: &Harness) -> u64 {
    let issue = h.create_issue("Answer", "Write answer.txt.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(output.status.success());
    let pulls = h.pulls();
    assert_eq!(pulls.len(), 1);
    pulls[0]["number"].as_u64().unwrap()
}

/// Pending is waited for; each failure on sandcastle's own head gets one round (a pr-fixer turn,
/// the reviewer, a fast-forward push, `ready-for-human` back and one comment); after `ciRounds`
/// rounds one comment asks a person, once.
#[test]
fn failing_ci_gets_a_round_each_until_the_rounds_run_out() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = answering(green_fixer(), "");
    let pull = published(&h);
    let first = head(&h, pull);

    set_status(&h, &first, "pending");
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(green_rounds(&h), 0, "a pending status is waited for");
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);

    set_status(&h, &first, "failure");
    let plan = String::from_utf8_lossy(&h.sandcastle(&["plan"]).stdout).into_owned();
    assert!(
        plan.contains(&format!(
            "keep green: pull request #{pull} \"#1: Answer\": failing CI (a round for the pr-fixer)"
        )),
        "{plan}"
    );
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(green_rounds(&h), 1);
    let prompt = h
        .anthropic
        .requests()
        .into_iter()
        .find(|r| r.prompt.contains(KEEP_GREEN))
        .unwrap()
        .prompt;
    let fenced = |part: &str| {
        let inside = part.split("<<<end untrusted").next().unwrap_or_default();
        inside.contains("FAILING-TEST-7 says failure") && inside.contains("ci/runs/7")
    };
    assert!(
        prompt.split("<<<untrusted").skip(1).any(fenced),
        "the failing status reaches the prompt fenced: {prompt}"
    );
    let second = head(&h, pull);
    assert_ne!(second, first);
    assert!(is_ancestor(&h, &first, &second), "pushed fast-forward");
    assert_eq!(h.remote_log("sandcastle/issue-1")[0], "Fix CI");
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
    let comments = h.comments_of(pull);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].contains("sandcastle fixed failing CI"),
        "{comments:?}"
    );
    assert!(
        comments[0].contains("The reviewer approved it"),
        "{comments:?}"
    );

    set_status(&h, &second, "error");
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(green_rounds(&h), 2, "the second round");
    let third = head(&h, pull);
    assert!(is_ancestor(&h, &second, &third));
    assert_eq!(h.comments_of(pull).len(), 2);

    set_status(&h, &third, "failure");
    let plan = String::from_utf8_lossy(&h.sandcastle(&["plan"]).stdout).into_owned();
    assert!(
        plan.contains("`[autopilot] ciRounds` are spent: a run asks a person"),
        "{plan}"
    );
    assert_eq!(h.comments_of(pull).len(), 2, "plan changes nothing");
    for run in 0..2 {
        assert!(h.sandcastle(&["run", "--once"]).status.success());
        assert_eq!(green_rounds(&h), 2, "no third round: ciRounds = 2");
        let comments = h.comments_of(pull);
        assert_eq!(comments.len(), 3, "one comment asks a person: {comments:?}");
        assert!(comments[2].contains("please take a look"), "{comments:?}");
        assert_eq!(head(&h, pull), third);
        assert_eq!(h.labels_of(pull), ["ready-for-human"]);
        if run == 0 {
            let report = h.last_report();
            assert!(report.to_string().contains("asked a person"), "{report}");
        }
    }
    assert!(
        h.forge
            .pushes()
            .iter()
            .all(|p| p.updates.iter().all(|u| u.old.is_none()
                || is_ancestor(&h, u.old.as_deref().unwrap(), u.new.as_deref().unwrap())))
    );
    finished_cleanly(&h);
}

/// A person pushed to the branch after CI failed on sandcastle's head: the pull request is theirs.
#[test]
fn a_pull_request_a_person_pushed_to_is_left_alone() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = answering(green_fixer(), "");
    let pull = published(&h);
    set_status(&h, &head(&h, pull), "failure");
    let theirs = h
        .forge
        .commit_file(
            crate::harness::REPO,
            "sandcastle/issue-1",
            "mine.txt",
            "mine\n",
            "A person's fix",
        )
        .unwrap();
    set_status(&h, &theirs, "failure");
    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());
    assert_eq!(green_rounds(&h), 0);
    assert_eq!(head(&h, pull), theirs);
    assert!(h.comments_of(pull).is_empty());
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("left to whoever pushed it"),
        "said why"
    );
}

/// Adding `ready-for-human` back fails after the push and the comment (every retry): the run
/// fails that work, and the next run finishes it from the saved state with no second comment,
/// round or push.
#[test]
fn a_round_stopped_between_the_push_and_the_relabel_finishes_on_the_next_run() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = answering(
        json!({"match": KEEP_GREEN, "turns": [
            {"bash": "touch started && sleep 5 && echo fixed > ci-fix.txt && git add ci-fix.txt && git commit -qm 'Fix CI'", "description": "fix"},
            {"text": format!("Fixed. {COMPLETE}")}]}),
        "",
    );
    let pull = published(&h);
    set_status(&h, &head(&h, pull), "failure");
    let mut run = h.start_until(&["run", "--once"], "/home/agent/workspace/started");
    // `ready-for-agent` is on by now; the next label added is `ready-for-human`, after the comment.
    assert_eq!(h.labels_of(pull), ["ready-for-agent"]);
    h.forge
        .inject_faults(
            "POST /repos/{owner}/{repo}/issues/{index}/labels",
            4,
            fake_forge::Fault {
                status: 500,
                retry_after: None,
            },
        )
        .unwrap();
    run.wait().unwrap();
    assert_eq!(h.forge.pending_faults(), 0, "every retry failed");
    assert_eq!(h.remote_log("sandcastle/issue-1")[0], "Fix CI", "pushed");
    assert_eq!(h.comments_of(pull).len(), 1);
    assert_eq!(h.labels_of(pull), ["ready-for-agent"]);
    let pushes = h.forge.push_count();

    let again = h.sandcastle(&["run", "--once"]);
    assert!(again.status.success());
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
    let comments = h.comments_of(pull);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].contains("sandcastle fixed failing CI"));
    assert_eq!(h.forge.push_count(), pushes, "nothing pushed twice");
    assert_eq!(green_rounds(&h), 1, "no second round");
    assert!(h.containers().is_empty(), "no container left");
}

/// Two issues worked in parallel edit the same line; once the first pull request merges, the
/// second conflicts: the pr-fixer merges the default branch into it and resolves the conflict,
/// and sandcastle pushes that on top (no force), with `ready-for-human` back and one comment.
#[test]
fn a_conflict_after_the_other_pull_request_merged_is_merged_away_without_a_force_push() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let plan = r#"<plan>{"issues":[{"id":1,"title":"One","branch":"sandcastle/issue-1"},{"id":2,"title":"Two","branch":"sandcastle/issue-2"}]}</plan>"#;
    let edit = |word: &str| json!({"bash": format!("echo {word} > same.txt && git add same.txt && git commit -qm 'Say {word}'"), "description": "edit"});
    let h = Harness::new(
        json!([
            {"match": "# Role: planner", "turns": [{"text": plan}]},
            reviewer(),
            {"match": KEEP_GREEN, "turns": [
                {"bash": "git merge -q origin/main; printf 'one\\ntwo\\n' > same.txt && git add same.txt && git commit -q --no-edit", "description": "merge"},
                {"text": format!("Merged main and kept both lines. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [edit("one"), {"text": COMPLETE}]},
            {"match": "The issue: #2\n", "turns": [edit("two"), {"text": COMPLETE}]},
        ]),
        "maxConcurrency = 2",
    );
    h.create_issue("One", "Write one.", &["ready-for-agent"]);
    h.create_issue("Two", "Write two.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    let pull_of = |branch: &str| {
        h.pulls()
            .iter()
            .find(|p| p["head"]["ref"] == branch)
            .unwrap()["number"]
            .as_u64()
            .unwrap()
    };
    let (first, second) = (pull_of("sandcastle/issue-1"), pull_of("sandcastle/issue-2"));
    h.post(&format!("/pulls/{first}/merge"), json!({"Do": "merge"}));
    assert_eq!(h.get(&format!("/pulls/{second}"))["mergeable"], false);
    let before = head(&h, second);

    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(green_rounds(&h), 1);
    let after = head(&h, second);
    assert!(is_ancestor(&h, &before, &after), "no force-push");
    let main = h.remote_log("main");
    assert!(main[0].starts_with("Merge pull request"), "{main:?}");
    assert_eq!(
        h.remote_file("sandcastle/issue-2", "same.txt"),
        "one\ntwo\n"
    );
    let pull = h.get(&format!("/pulls/{second}"));
    assert_eq!(pull["mergeable"], true, "{pull}");
    assert_eq!(h.labels_of(second), ["ready-for-human"]);
    let comments = h.comments_of(second);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].contains("sandcastle fixed a merge conflict"),
        "{comments:?}"
    );
    finished_cleanly(&h);
}

/// `[autopilot] enabled = false`: a failing pull request is left to people.
#[test]
fn with_autopilot_off_a_failing_pull_request_is_left_alone() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = answering(green_fixer(), "[autopilot]\nenabled = false");
    let pull = published(&h);
    let first = head(&h, pull);
    set_status(&h, &first, "failure");
    assert!(h.sandcastle(&["run", "--once"]).status.success());
    assert_eq!(green_rounds(&h), 0);
    assert_eq!(head(&h, pull), first);
    assert!(h.comments_of(pull).is_empty());
    assert_eq!(h.labels_of(pull), ["ready-for-human"]);
}
