//! `[sandbox] runtime` on the real engine: a sandbox and the image's probe are created under the
//! runtime named, and a name the engine does not know is one line with the fix.
use super::test_support::*;
use super::*;
use std::process::Command;

fn runtime_of(id: &str) -> String {
    let out = Command::new("docker")
        .args(["inspect", "--format", "{{.HostConfig.Runtime}}", id])
        .output()
        .expect("docker inspect runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_sandbox_runs_under_the_runtime_named_and_the_default_is_the_engines() {
    if !docker_ready() {
        return;
    }
    let runtime = test_runtime();
    let run = TestRun::new("runtime");
    let named = Sandbox::start(&SandboxSpec {
        runtime: Some(runtime),
        ..spec(&run, "issue-1", &[])
    })
    .unwrap();
    assert_eq!(runtime_of(named.id()), runtime);
    assert_eq!(exec(&named, &["id", "-un"]), "agent", "it works as before");

    let default = Sandbox::start(&spec(&run, "issue-2", &[])).unwrap();
    let engines = Command::new("docker")
        .args(["info", "--format", "{{.DefaultRuntime}}"])
        .output()
        .unwrap();
    assert_eq!(
        runtime_of(default.id()),
        String::from_utf8_lossy(&engines.stdout).trim()
    );

    assert_eq!(
        runtime_says(Some(runtime)).unwrap(),
        format!("sandboxes run under {runtime} ([sandbox] runtime)")
    );
    assert!(
        runtime_says(None)
            .unwrap()
            .ends_with(", the engine's default runtime")
    );
}

#[test]
fn an_unknown_runtime_is_one_line_naming_it_and_the_fix_and_no_container_starts() {
    if !docker_ready() {
        return;
    }
    let unknown = "sandcastle-no-such-runtime";
    let said = runtime_says(Some(unknown)).unwrap_err().to_string();
    assert!(!said.contains('\n'), "{said}");
    for part in [
        "does not know the runtime \"sandcastle-no-such-runtime\" of [sandbox] runtime",
        "/etc/docker/daemon.json",
        "\"runtimes\": {\"sandcastle-no-such-runtime\": {\"path\":",
        "runc",
    ] {
        assert!(said.contains(part), "{part}: {said}");
    }

    let run = TestRun::new("unknown-runtime");
    let refused = Sandbox::start(&SandboxSpec {
        runtime: Some(unknown),
        ..spec(&run, "issue-1", &[])
    });
    assert!(refused.is_err());
    assert!(run.containers().is_empty(), "{:?}", run.containers());
    // The image's probe runs under the runtime too: the engine refuses it the same way.
    let probed = image_lacks(test_image(), Some(unknown), &["sh"]).unwrap_err();
    assert!(format!("{probed:#}").contains(unknown), "{probed:#}");
    assert_eq!(
        image_lacks(test_image(), Some(test_runtime()), &["sh"]).unwrap(),
        []
    );
}
