//! The command line itself: `sandcastle` alone is `sandcastle run`, and the other commands stay.
use std::path::Path;
use std::process::Output;

fn sandcastle(project: &Path, args: &[&str]) -> Output {
    sandcastle_testkit::world::sandcastle(env!("CARGO_BIN_EXE_sandcastle"), project, args)
        .output()
        .expect("run sandcastle")
}

/// A project whose `.env` has a broken line: `run` reads it first thing and stops there, with no
/// Docker and no forge involved, so the error says which command ran.
fn project_with_a_broken_env() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".sandcastle")).unwrap();
    std::fs::write(
        dir.path().join(".sandcastle/config.toml"),
        "repo = \"owner/name\"\nforgeHost = \"http://127.0.0.1:9\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".sandcastle/.env"), "not a variable line\n").unwrap();
    dir
}

#[test]
fn sandcastle_alone_runs_the_loop() {
    let project = project_with_a_broken_env();
    let alone = sandcastle(project.path(), &[]);
    let run = sandcastle(project.path(), &["run"]);
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(!stderr.contains("Usage:"), "no usage text:\n{stderr}");
    assert!(
        stderr.contains(".sandcastle/.env:1: expected KEY=VALUE"),
        "`run` read the .env:\n{stderr}"
    );
    assert_eq!(alone.status.code(), run.status.code());
    assert_eq!(alone.stderr, run.stderr, "`sandcastle` is `sandcastle run`");
}

#[test]
fn help_still_lists_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let help = sandcastle(dir.path(), &["--help"]);
    assert!(help.status.success());
    let stdout = String::from_utf8_lossy(&help.stdout);
    for command in ["run", "plan", "doctor"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(command)),
            "{command} listed:\n{stdout}"
        );
    }
    assert!(stdout.contains("Without a command, `sandcastle` is `sandcastle run`."));
}
