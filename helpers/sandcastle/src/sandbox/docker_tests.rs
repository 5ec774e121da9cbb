//! Sandboxes on the real Docker engine with the test image (`checks/docker/build-test-image.sh`).
//! Set `SANDCASTLE_SKIP_DOCKER_TESTS=1` to skip them; otherwise a missing engine or image fails.
use super::*;
use std::os::unix::fs::MetadataExt;

pub const TEST_IMAGE: &str = "sandcastle-test:latest";

/// `false` (after saying why) when Docker tests are switched off; panics with the fix when Docker
/// or the test image is missing.
pub fn docker_ready() -> bool {
    if std::env::var("SANDCASTLE_SKIP_DOCKER_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: SANDCASTLE_SKIP_DOCKER_TESTS=1");
        return false;
    }
    if let Err(error) = engine_answers().and_then(|()| image_exists(TEST_IMAGE)) {
        panic!(
            "{error:#}\nDocker tests need the engine and {TEST_IMAGE}: run checks/docker/start-dockerd.sh \
             and checks/docker/build-test-image.sh (or set SANDCASTLE_SKIP_DOCKER_TESTS=1 to skip them)"
        );
    }
    true
}

/// A run id of its own per test, and every container of it removed when the test ends, however.
pub struct TestRun {
    pub id: String,
}

impl TestRun {
    pub fn new(name: &str) -> TestRun {
        TestRun {
            id: format!("test-{name}-{}", std::process::id()),
        }
    }

    /// Ids of this run's containers, stopped ones included.
    pub fn containers(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label={RUN_LABEL}={}", self.id),
            ])
            .output()
            .expect("docker ps runs");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for TestRun {
    fn drop(&mut self) {
        let _ = remove_run(&self.id);
    }
}

/// An empty git repository the agent user (uid 1000) owns, as `git::prepare_checkout` leaves it.
pub fn checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir.path())
            .args(args)
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.name", "Sandcastle Test"]);
    git(&["config", "user.email", "test@sandcastle.invalid"]);
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let status = Command::new("chown")
        .args(["-R", "1000:1000"])
        .arg(dir.path())
        .status()
        .expect("chown runs");
    assert!(status.success(), "chown the checkout to the agent user");
    dir
}

pub fn spec<'a>(
    run: &'a TestRun,
    key: &'a str,
    checkout: &'a Path,
    env: &'a [(String, String)],
) -> SandboxSpec<'a> {
    SandboxSpec {
        image: TEST_IMAGE,
        run_id: &run.id,
        key,
        checkout,
        network: "host",
        memory: "2g",
        pids_limit: 512,
        mounts: &[],
        env,
        forge_url: "http://127.0.0.1:9",
    }
}

fn exec(sandbox: &Sandbox, argv: &[&str]) -> String {
    let out = sandbox
        .exec_command(argv)
        .output()
        .expect("docker exec runs");
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn inspect(id: &str, format: &str) -> String {
    let out = Command::new("docker")
        .args(["inspect", "--format", format, id])
        .output()
        .expect("docker inspect runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_sandbox_is_confined_labelled_and_gets_env_by_name() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("confined");
    let dir = checkout();
    let env = [(
        "SANDCASTLE_TEST_SECRET".to_string(),
        "value-only-in-env".to_string(),
    )];
    let sandbox = Sandbox::start(&spec(&run, "issue-1", dir.path(), &env)).unwrap();

    assert_eq!(run.containers().len(), 1);
    let config = inspect(
        sandbox.id(),
        "{{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}} {{.HostConfig.PidsLimit}} \
         {{.HostConfig.Memory}} {{.HostConfig.NetworkMode}}",
    );
    assert_eq!(config, "[ALL] [no-new-privileges] 512 2147483648 host");
    let args = inspect(sandbox.id(), "{{.Path}} {{.Args}}");
    assert!(!args.contains("value-only-in-env"), "{args}");

    assert_eq!(exec(&sandbox, &["id", "-un"]), "agent");
    assert_eq!(exec(&sandbox, &["pwd"]), WORKSPACE);
    assert_eq!(
        exec(&sandbox, &["sh", "-c", "echo $SANDCASTLE_TEST_SECRET"]),
        "value-only-in-env"
    );
    exec(&sandbox, &["sh", "-c", "echo from-agent > made-inside.txt"]);
    let made = std::fs::metadata(dir.path().join("made-inside.txt")).unwrap();
    assert_eq!(made.uid(), 1000);

    sandbox.remove().unwrap();
    assert!(run.containers().is_empty());
}

#[test]
fn files_copy_in_owned_by_the_agent_and_back_out() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("copy");
    let dir = checkout();
    let sandbox = Sandbox::start(&spec(&run, "pr-7", dir.path(), &[])).unwrap();
    let host = tempfile::tempdir().unwrap();
    let original = host.path().join("in.jsonl");
    std::fs::write(&original, "{\"a\":1}\n").unwrap();

    let inside = "/home/agent/.claude/projects/-home-agent-workspace/s.jsonl";
    sandbox.copy_in(&original, inside).unwrap();
    assert_eq!(exec(&sandbox, &["stat", "-c", "%U", inside]), "agent");
    let back = host.path().join("deep/out.jsonl");
    sandbox.copy_out(inside, &back).unwrap();
    assert_eq!(std::fs::read_to_string(back).unwrap(), "{\"a\":1}\n");

    let missing = sandbox
        .copy_out("/nowhere/file", &host.path().join("x"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("docker cp") && !missing.contains('\n'),
        "{missing}"
    );
}

#[test]
fn remove_run_removes_every_container_of_the_run_only() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("remove-run");
    let other = TestRun::new("remove-run-other");
    let dir = checkout();
    let first = Sandbox::start(&spec(&run, "issue-1", dir.path(), &[])).unwrap();
    let _second = Sandbox::start(&spec(&run, "issue-2", dir.path(), &[])).unwrap();
    let _kept = Sandbox::start(&spec(&other, "issue-1", dir.path(), &[])).unwrap();
    assert_eq!(run.containers().len(), 2);

    remove_run(&run.id).unwrap();
    assert!(run.containers().is_empty());
    assert_eq!(other.containers().len(), 1);
    // Both are idempotent: Ctrl-C removes the run while workers still hold their sandboxes.
    remove_run(&run.id).unwrap();
    first.remove().unwrap();
}

#[test]
fn a_missing_image_names_the_image_and_the_fix() {
    if !docker_ready() {
        return;
    }
    let error = image_exists("sandcastle-test:no-such-tag")
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "the image sandcastle-test:no-such-tag is not in Docker: build and load it with \
         `nix run .#sandcastleImage | docker load`"
    );
}

#[test]
fn configure_tea_runs_when_forgejo_credentials_are_passed() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("tea");
    let dir = checkout();
    let env = [
        ("FORGEJO_TOKEN".to_string(), "tea-token-value".to_string()),
        ("FORGEJO_USER".to_string(), "sandcastle-bot".to_string()),
    ];
    let sandbox = Sandbox::start(&spec(&run, "issue-1", dir.path(), &env)).unwrap();
    let config = exec(&sandbox, &["cat", "/home/agent/.config/tea/config.yml"]);
    assert!(config.contains("http://127.0.0.1:9"), "{config}");
    assert!(config.contains("sandcastle-bot"), "{config}");
}
