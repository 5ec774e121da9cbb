//! What tests of git work share (here and in the orchestrator, through the `test-support` feature).
use std::path::Path;
use std::process::Command;

/// `git ARGS` in `dir` as a fixed test user; panics with git's error when it fails.
pub fn fixture_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@localhost"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
