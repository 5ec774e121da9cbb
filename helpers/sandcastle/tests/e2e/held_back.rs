//! What is held back is judged against the base branch: a change that touches what CI runs stays
//! unpushed on every attempt, however the attempt started, and local actions count as CI. Real
//! Docker, the real Claude Code CLI, the scripted model and forge.
use crate::harness::{Harness, REPO, docker_or_skip};
use sandcastle_testkit::git::git;
use serde_json::json;

const COMPLETE: &str = "<promise>COMPLETE</promise>";

/// Issue #1 worked on with one bash turn, `script`, then "done"; the reviewer approves.
fn issue_doing(script: &str) -> Harness {
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": script, "description": "work"},
                {"text": format!("Done. {COMPLETE}")}
            ]},
        ]),
        "",
    );
    assert_eq!(
        h.create_issue("The work", "Do it.", &["ready-for-agent"]),
        1
    );
    h
}

/// The commits on any ref of the forge's repository that hold `path`.
fn refs_carrying(h: &Harness, path: &str) -> String {
    let out = h.remote_git(&["log", "--all", "--format=%H %s", "--", path]);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Nothing reached the forge: no push, no branch of the work, no pull request.
fn nothing_pushed(h: &Harness) {
    assert_eq!(h.forge.push_count(), 0, "pushes: {:?}", h.forge.pushes());
    assert!(h.remote_log("sandcastle/issue-1").is_empty(), "no branch");
    assert!(h.pulls().is_empty());
}

/// Red-team finding: a give-up keeps the work repository and its unpushed branch; once a person
/// comments, the next attempt starts at the held-back commit. Judged against where that attempt
/// started, the workflow would no longer count and would be pushed with the next commit. Judged
/// against the base branch, it stays held back.
#[test]
fn a_held_back_workflow_stays_held_back_when_the_work_is_tried_again() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    // The first attempt plants the workflow; the retry (whose checkout already has it) adds work.
    let h = issue_doing(
        "if [ -e .forgejo/workflows/evil.yml ]; then \
           echo more > more.txt && git add more.txt && git commit -qm 'More work'; \
         else \
           mkdir -p .forgejo/workflows && printf 'on: push\\njobs: {}\\n' > .forgejo/workflows/evil.yml \
           && echo ok > work.txt && git add -A && git commit -qm 'Add the work'; \
         fi",
    );

    assert!(h.sandcastle(&["run", "--issue", "1"]).status.success());
    nothing_pushed(&h);
    assert_eq!(h.comments_of(1).len(), 1, "the give-up comment");

    // A person comments: the work is taken up again, from the kept branch.
    let bob = h.forge.add_user("bob");
    h.post_as(
        &bob,
        "/issues/1/comments",
        json!({"body": "Please try again."}),
    );
    let output = h.sandcastle(&["run", "--issue", "1"]);
    assert!(output.status.success());

    let work = h.project().join(".sandcastle/repos/issue-1.git");
    assert_eq!(
        git(
            &work,
            &[
                "log",
                "--format=%s",
                "refs/remotes/origin/main..refs/heads/sandcastle/issue-1"
            ]
        ),
        "More work\nAdd the work",
        "the retry ran and committed on top of the held-back commit"
    );
    nothing_pushed(&h);
    assert_eq!(refs_carrying(&h, ".forgejo/workflows/evil.yml"), "");
    let comments = h.comments_of(1);
    assert_eq!(
        comments.len(),
        3,
        "bob's and one per attempt: {comments:#?}"
    );
    assert!(
        comments[2].contains("CI workflow files (`.forgejo/workflows/evil.yml`)"),
        "{}",
        comments[2]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("issue #1: not published"), "{stderr}");
}

/// A local composite action (`uses: ./.forgejo/actions/setup`) runs in CI as a workflow does: a
/// change to it is held back too.
#[test]
fn a_local_action_is_held_back_like_a_workflow() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = issue_doing(
        "mkdir -p .forgejo/actions/setup && printf 'runs:\\n  using: composite\\n' > .forgejo/actions/setup/action.yml \
         && echo ok > work.txt && git add -A && git commit -qm 'Add the work'",
    );

    assert!(h.sandcastle(&["run", "--issue", "1"]).status.success());

    nothing_pushed(&h);
    let comments = h.comments_of(1);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(
        comments[0].contains("(`.forgejo/actions/setup/action.yml`)"),
        "{}",
        comments[0]
    );
}

/// A sent-back pull request whose branch on the forge already carries a workflow change: the
/// rework is judged against the base branch too, not against what the forge branch has. That
/// branch is under review, not reviewed (an earlier push under `allowWorkflowChanges`, or anyone
/// who can push it), and every push runs its workflows again; so nothing is pushed.
#[test]
fn a_rework_is_judged_against_the_base_not_the_forge_branch() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([{"match": "# Role: pull-request fixer", "turns": [
            {"bash": "echo fix > fix.txt && git add fix.txt && git commit -qm 'Fix as asked'", "description": "fix"},
            {"text": format!("Fixed. {COMPLETE}")}
        ]}]),
        "",
    );
    let branch = "sandcastle/issue-9";
    let pull = h.sent_back_pull(
        branch,
        "bob",
        json!({"event": "REQUEST_CHANGES", "body": "Please fix it."}),
    );
    h.push_branch(branch, ".forgejo/workflows/ci.yml", "Add a workflow");

    let output = h.sandcastle(&["run", "--once"]);
    assert!(output.status.success());

    assert_eq!(h.forge.push_count(), 0, "pushes: {:?}", h.forge.pushes());
    assert_eq!(
        h.remote_log(branch),
        ["Add a workflow", "First draft", "Initial commit"]
    );
    let comments = h.comments_of(pull);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(
        comments[0].contains("CI workflow files (`.forgejo/workflows/ci.yml`)"),
        "{}",
        comments[0]
    );
    let work = h.project().join(format!(".sandcastle/repos/pr-{pull}.git"));
    assert_eq!(
        git(
            &work,
            &["log", "-1", "--format=%s", &format!("refs/heads/{branch}")]
        ),
        "Fix as asked",
        "the pr-fixer's commit is kept on the host"
    );
}

/// A keep-green round merges the base branch, which brought its own workflow change and a
/// conflict: what the merge brings in is the base's, not the work's, so the round is pushed.
#[test]
fn a_keep_green_merge_of_the_bases_own_workflow_is_pushed() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(
        json!([
            {"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]},
            {"match": "# Role: planner", "turns": [{"text": "<plan>{\"issues\":[]}</plan>"}]},
            {"match": "keeping a pull request green", "turns": [
                {"bash": "git merge -q origin/main; echo both > answer.txt && git add answer.txt && git commit -q --no-edit", "description": "merge"},
                {"text": format!("Merged main. {COMPLETE}")}
            ]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": "echo ours > answer.txt && git add answer.txt && git commit -qm 'Answer'", "description": "work"},
                {"text": format!("Done. {COMPLETE}")}
            ]},
        ]),
        "",
    );
    h.create_issue("The work", "Do it.", &["ready-for-agent"]);
    assert!(h.sandcastle(&["run", "--issue", "1"]).status.success());
    let pull = h.pulls()[0]["number"].as_u64().unwrap();
    for (file, content) in [
        (".forgejo/workflows/ci.yml", "on: push\n"),
        ("answer.txt", "theirs\n"),
    ] {
        h.forge
            .commit_file(REPO, "main", file, content, "The base moves on")
            .unwrap();
    }
    assert_eq!(h.get(&format!("/pulls/{pull}"))["mergeable"], false);

    assert!(h.sandcastle(&["run", "--once"]).status.success());

    assert_eq!(h.forge.push_count(), 2, "the pull request, then the round");
    let main = h.remote_git(&["rev-parse", "refs/heads/main"]);
    let main = String::from_utf8_lossy(&main.stdout).trim().to_string();
    let merged = h.remote_git(&[
        "merge-base",
        "--is-ancestor",
        &main,
        "refs/heads/sandcastle/issue-1",
    ]);
    assert!(
        merged.status.success(),
        "the round merged main and was pushed"
    );
    let comments = h.comments_of(pull);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(
        comments[0].contains("sandcastle fixed a merge conflict"),
        "{}",
        comments[0]
    );
}
