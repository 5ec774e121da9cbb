//! The checkout inside a real sandbox: seeded from a work repository, its commits taken back out.
use super::*;
use crate::git::tests::{Remote, WorkRepoOf, taken};
use crate::sandbox::test_support::{TestRun, docker_ready, exec, spec};

#[test]
fn the_checkout_is_made_inside_and_its_commits_come_out_as_data() {
    if !docker_ready() {
        return;
    }
    let remote = Remote::new();
    let repo = remote.repo("work.git", "sandcastle/issue-1").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = TestRun::new("checkout");
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    seed(&sandbox, &repo, "http://127.0.0.1:9/owner/name.git").unwrap();

    assert_eq!(
        exec(&sandbox, &["git", "symbolic-ref", "--short", "HEAD"]),
        "sandcastle/issue-1"
    );
    assert_eq!(exec(&sandbox, &["cat", "initial"]), "initial");
    assert_eq!(
        exec(
            &sandbox,
            &["git", "log", "--format=%s", "origin/main..HEAD"]
        ),
        ""
    );
    assert_eq!(
        exec(&sandbox, &["git", "remote", "get-url", "origin"]),
        "http://127.0.0.1:9/owner/name.git"
    );
    assert_eq!(
        exec(&sandbox, &["stat", "-c", "%U", "initial", ".git/HEAD"]),
        "agent\nagent"
    );

    // Nothing new yet: the same tip.
    let start = repo.tip().unwrap();
    assert_eq!(take_commits(&sandbox, &repo).unwrap(), Imported::Tip(start));

    // The agent commits, and plants everything that would run on a host that used its checkout.
    let marker = tmp.path().join("host-ran-agent-code");
    let hook = format!("#!/bin/sh\ntouch {}\n", marker.display());
    exec(
        &sandbox,
        &[
            "sh",
            "-c",
            &format!(
                "echo change > change.txt && git add change.txt && git commit -qm 'Agent change' \
                 && for h in pre-push post-checkout reference-transaction pre-commit; do \
                 printf '%s' '{hook}' > .git/hooks/$h && chmod +x .git/hooks/$h; done \
                 && git config core.fsmonitor {m} && git config core.hooksPath /tmp \
                 && git config remote.origin.pushurl http://127.0.0.1:9/evil.git",
                m = marker.display()
            ),
        ],
    );
    let tip = taken(take_commits(&sandbox, &repo).unwrap());
    assert_eq!(repo.tip().unwrap(), tip);
    assert_eq!(repo.new_commits().unwrap(), ["Agent change"]);
    assert!(
        !marker.exists(),
        "a hook or fsmonitor of the agent's ran on the host"
    );

    // A checkout without .git is a clear error, and the work branch stays where it was.
    exec(&sandbox, &["rm", "-rf", ".git"]);
    let err = format!("{:#}", take_commits(&sandbox, &repo).unwrap_err());
    assert!(
        err.contains("cannot take the agent's commits out of the sandbox"),
        "{err}"
    );
    assert!(
        err.contains("the checkout has no .git directory any more"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err:?}");
    assert_eq!(repo.tip().unwrap(), tip);

    // A fresh sandbox starts from what the host has.
    sandbox.remove().unwrap();
    let again = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    seed(&again, &repo, "http://127.0.0.1:9/owner/name.git").unwrap();
    assert_eq!(
        exec(&again, &["git", "log", "--format=%s", "origin/main..HEAD"]),
        "Agent change"
    );
    let hooks_path = again
        .exec_command(&["git", "config", "core.hooksPath"])
        .unwrap()
        .output()
        .unwrap();
    assert!(
        !hooks_path.status.success(),
        "the agent's config did not come back"
    );
}

/// `git status --porcelain` with its spaces shown (`exec` trims the output).
const STATUS: &str = "git status --porcelain | tr ' ' _";

/// The tree of a checkout that goes away while its work goes on comes back in a fresh container as
/// uncommitted changes on the host's tip: tracked changes, a deletion, untracked files and a commit
/// the host never took; ignored files stay behind, and a clean tree carries nothing.
#[test]
fn a_checkouts_tree_is_carried_to_a_fresh_container_as_uncommitted_changes() {
    if !docker_ready() {
        return;
    }
    let remote = Remote::new();
    let repo = remote.repo("work.git", "sandcastle/issue-1").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let snapshot = tmp.path().join("snapshot");
    let run = TestRun::new("snapshot");
    let old = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    seed(&old, &repo, "http://127.0.0.1:9/owner/name.git").unwrap();
    let tip = repo.tip().unwrap();
    assert!(
        !take_snapshot(&old, &tip, &snapshot).unwrap(),
        "nothing to carry"
    );

    exec(
        &old,
        &[
            "sh",
            "-c",
            "echo kept > committed.txt && git add committed.txt && git commit -qm 'Not handed out' \
             && echo edited > initial && echo new > untracked.txt && mkdir -p dir && echo deep > dir/file \
             && echo scratch.log >> .git/info/exclude && echo ignored > scratch.log",
        ],
    );
    let head = exec(&old, &["git", "rev-parse", "HEAD"]);
    assert!(take_snapshot(&old, &tip, &snapshot).unwrap());
    assert_eq!(
        exec(&old, &["sh", "-c", STATUS]),
        "_M_initial\n??_dir/\n??_untracked.txt",
        "the old checkout is left as it was"
    );
    assert_eq!(exec(&old, &["git", "rev-parse", "HEAD"]), head);
    old.remove().unwrap();

    let fresh = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    seed(&fresh, &repo, "http://127.0.0.1:9/owner/name.git").unwrap();
    restore_snapshot(&fresh, &snapshot).unwrap();
    assert_eq!(exec(&fresh, &["git", "rev-parse", "HEAD"]), tip);
    assert_eq!(
        exec(&fresh, &["sh", "-c", STATUS]),
        "_M_initial\n??_committed.txt\n??_dir/\n??_untracked.txt"
    );
    assert_eq!(
        exec(&fresh, &["cat", "initial", "committed.txt", "dir/file"]),
        "edited\nkept\ndeep"
    );
    assert!(
        fresh
            .exec_command(&["test", "-e", "scratch.log"])
            .and_then(|exec| exec.output())
            .unwrap()
            .status
            .code()
            == Some(1),
        "an ignored file is not carried"
    );
    assert_eq!(
        exec(&fresh, &["git", "for-each-ref", "refs/sandcastle"]),
        "",
        "no snapshot ref is left"
    );
    assert_eq!(repo.tip().unwrap(), tip, "the host's branch did not move");
}

/// `seed_after` runs its first script, then makes the checkout, in one exec; a first script that
/// fails fails the call before any checkout is made, however the bundle on stdin would have seeded.
#[test]
fn a_script_run_before_the_checkout_in_its_exec_fails_the_seed_when_it_fails() {
    if !docker_ready() {
        return;
    }
    let remote = Remote::new();
    let repo = remote.repo("work.git", "sandcastle/issue-1").unwrap();
    let run = TestRun::new("seed-after");
    let url = "http://127.0.0.1:9/owner/name.git";
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    seed_after(&sandbox, &repo, url, "echo first > /tmp/first").unwrap();
    assert_eq!(exec(&sandbox, &["cat", "/tmp/first"]), "first");
    assert_eq!(exec(&sandbox, &["cat", "initial"]), "initial");

    let failing = Sandbox::start(&spec(&run, "issue-2", &[])).unwrap();
    let err = seed_after(&failing, &repo, url, "echo cannot copy >&2; false")
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot copy"), "{err}");
    let checked_out = failing
        .exec_at("/", &["test", "-e", &format!("{WORKSPACE}/initial")])
        .and_then(|exec| exec.output())
        .unwrap();
    assert!(!checked_out.status.success(), "a checkout was made");
}
