//! What the Docker tests of the machinery share: the test image (`checks/docker/build-test-image.sh`), whether Docker tests run, a run
//! whose containers go when it ends, a sandbox's spec and a checked `docker exec`.
use super::*;

/// The test image: `SANDCASTLE_TEST_IMAGE`, as the e2e tests read it, else `sandcastle-test:latest`
/// (so parallel checkouts can each test their own build).
pub fn test_image() -> &'static str {
    static IMAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        std::env::var("SANDCASTLE_TEST_IMAGE").unwrap_or_else(|_| "sandcastle-test:latest".into())
    });
    &IMAGE
}

/// `false` (after saying why) when Docker tests are switched off; panics with the fix when Docker
/// or the test image is missing.
pub fn docker_ready() -> bool {
    if std::env::var("SANDCASTLE_SKIP_DOCKER_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: SANDCASTLE_SKIP_DOCKER_TESTS=1");
        return false;
    }
    if let Err(error) = engine_answers().and_then(|()| image_exists(test_image())) {
        panic!(
            "{error:#}\nDocker tests need the engine and {}: run checks/docker/start-dockerd.sh \
             and checks/docker/build-test-image.sh (or set SANDCASTLE_SKIP_DOCKER_TESTS=1 to skip them)",
            test_image()
        );
    }
    true
}

/// A run id of its own per test, and every container of it removed when the test ends, however.
pub struct TestRun {
    pub id: String,
    /// Stands for the model proxy's socket directory; nothing listens in it.
    proxy_dir: tempfile::TempDir,
}

impl TestRun {
    pub fn new(name: &str) -> TestRun {
        TestRun {
            id: format!("test-{name}-{}", std::process::id()),
            proxy_dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Ids of this run's containers, stopped ones included.
    pub fn containers(&self) -> Vec<String> {
        let out = std::process::Command::new("docker")
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

pub fn spec<'a>(run: &'a TestRun, key: &'a str, env: &'a [(String, String)]) -> SandboxSpec<'a> {
    SandboxSpec {
        image: test_image(),
        run_id: &run.id,
        project: Path::new("/nonexistent/sandcastle-test-project"),
        key,
        // The tests' model and forge servers are on the host's 127.0.0.1.
        network: sandcastle_config::Network::Host,
        memory: "2g",
        pids_limit: 512,
        mounts: &[],
        env,
        tea: None,
        volume: None,
        read_only_volume: None,
        relay: Relay {
            socket_dir: run.proxy_dir.path(),
        },
        runtime: None,
        provider: provider(),
    }
}

pub fn exec(sandbox: &Sandbox, argv: &[&str]) -> String {
    let out = sandbox
        .exec_command(argv)
        .and_then(Exec::output)
        .expect("docker exec runs");
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The runtime `checks/docker/start-dockerd.sh` registers on the test engine: runc by another
/// name, so a test can tell a container created under `[sandbox] runtime` from one that was not.
pub const TEST_RUNTIME: &str = "sandcastle-test-runc";

/// [`TEST_RUNTIME`], once the engine is seen to know it; a test that needs it fails with the fix.
pub fn test_runtime() -> &'static str {
    let known = runtime_says(Some(TEST_RUNTIME));
    assert!(
        known.is_ok(),
        "{:#}\nthe test engine lacks the runtime {TEST_RUNTIME}: run checks/docker/start-dockerd.sh",
        known.unwrap_err()
    );
    TEST_RUNTIME
}
