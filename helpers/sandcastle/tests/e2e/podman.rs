//! Podman as the engine, through its Docker-compatible API (`podman system service`), on services
//! of the test's own: what a Podman host lacks is said by `doctor` and by the run, with the fix.
//! The rest of the suite runs on Podman as it is with `DOCKER_HOST` at its socket (checks/test.sh).
use crate::harness::{Harness, docker_or_skip, image, stderr_lines};
use serde_json::json;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A rootful `podman system service` of this test's own on a socket in a directory of its own,
/// stopped when dropped. With `without_catatonit`, it runs in a mount namespace where Podman's
/// helper directory (the catatonit it runs as a container's init) is empty: a host without the
/// package.
struct PodmanService {
    child: Child,
    dir: tempfile::TempDir,
}

impl PodmanService {
    fn start(without_catatonit: bool) -> PodmanService {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("podman.sock");
        let serve = format!(
            "exec podman system service --time=0 unix://{}",
            socket.display()
        );
        let script = if without_catatonit {
            let empty = dir.path().join("empty");
            std::fs::create_dir(&empty).unwrap();
            format!(
                "mount --make-rprivate / && mount --bind {} /usr/libexec/podman && {serve}",
                empty.display()
            )
        } else {
            serve
        };
        let mut command = if without_catatonit {
            let mut unshare = Command::new("unshare");
            unshare.args(["-m", "sh", "-c", &script]);
            unshare
        } else {
            let mut sh = Command::new("sh");
            sh.args(["-c", &script]);
            sh
        };
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("podman runs: install podman and catatonit (checks/setup.sh)");
        let deadline = Instant::now() + Duration::from_secs(60);
        while UnixStream::connect(&socket).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "`podman system service` ended: install podman and catatonit, as root (checks/setup.sh)"
            );
            assert!(Instant::now() < deadline, "Podman never listened");
            std::thread::sleep(Duration::from_millis(100));
        }
        PodmanService { child, dir }
    }

    fn docker_host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("podman.sock")
    }
}

impl Drop for PodmanService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test image in Podman's store (rootful Podman shares one store between its services), copied
/// from the engine the suite runs on when it is not there yet.
fn image_in_podman() {
    let there = |image: &str| {
        Command::new("podman")
            .args(["image", "exists", image])
            .status()
            .is_ok_and(|s| s.success())
    };
    if there(&image()) {
        return;
    }
    let copied = Command::new("sh")
        .args(["-c", "docker save \"$1\" | podman load -q", "sh", &image()])
        .status()
        .unwrap();
    assert!(
        copied.success() && there(&image()),
        "cannot copy {} into Podman",
        image()
    );
}

fn said(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `doctor`'s line named `name` (`ok    engine     …`).
fn line<'a>(said: &'a str, name: &str) -> Option<&'a str> {
    said.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
}

/// `doctor` tells Podman from its version answer and checks a sandbox starts on it; on a host
/// without catatonit it says so in one line with the fix, and so does a run, which starts no work.
#[test]
fn doctor_and_the_run_name_what_a_podman_host_lacks() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    image_in_podman();
    let h = Harness::new(
        json!([{"match": "# Role: planner", "turns": [{"text": r#"<plan>{"issues":[{"id":1,"title":"Add greeting","branch":"sandcastle/issue-1"}]}</plan>"#}]}]),
        "",
    );
    h.create_issue("Add greeting", "Say hello.", &["ready-for-agent"]);

    let podman = PodmanService::start(false);
    let doctor = h
        .command(&["doctor"])
        .env("DOCKER_HOST", podman.docker_host())
        .output()
        .unwrap();
    let said_ok = said(&doctor);
    let engine = line(&said_ok, "engine").unwrap_or_else(|| panic!("{said_ok}"));
    assert!(
        engine.starts_with("ok")
            && engine.contains("Podman ")
            && engine.contains("a container shaped like a sandbox starts"),
        "{said_ok}"
    );
    assert!(
        line(&said_ok, "programs").is_some_and(|l| l.starts_with("ok")),
        "{said_ok}"
    );
    drop(podman);

    let bare = PodmanService::start(true);
    let doctor = h
        .command(&["doctor"])
        .env("DOCKER_HOST", bare.docker_host())
        .output()
        .unwrap();
    assert!(!doctor.status.success());
    let said_lack = said(&doctor);
    let engine = line(&said_lack, "engine").unwrap_or_else(|| panic!("{said_lack}"));
    assert!(
        engine.starts_with("FAIL")
            && engine.contains("Podman has no catatonit")
            && engine.contains("apt-get install catatonit"),
        "{said_lack}"
    );
    assert!(
        line(&said_lack, "programs").is_none(),
        "not checked: {said_lack}"
    );

    let run = h
        .command(&["run", "--once"])
        .env("DOCKER_HOST", bare.docker_host())
        .output()
        .unwrap();
    assert!(!run.status.success());
    let errors = stderr_lines(&run);
    assert!(
        errors
            .iter()
            .any(|l| l.contains("container-init binary not found")
                && l.contains("apt-get install catatonit")),
        "{errors:?}"
    );
    assert!(h.pulls().is_empty(), "no work was published");
}
