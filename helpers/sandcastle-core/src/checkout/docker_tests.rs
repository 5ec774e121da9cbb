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
