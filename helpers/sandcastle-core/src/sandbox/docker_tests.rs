//! Sandboxes on the real Docker engine with the test image (`checks/docker/build-test-image.sh`).
//! Set `SANDCASTLE_SKIP_DOCKER_TESTS=1` to skip them; otherwise a missing engine or image fails.
use super::test_support::*;
use super::*;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

fn inspect(id: &str, format: &str) -> String {
    let out = Command::new("docker")
        .args(["inspect", "--format", format, id])
        .output()
        .expect("docker inspect runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_sandbox_is_confined_labelled_and_gets_env_by_name_per_exec_only() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("confined");
    let env = [(
        "SANDCASTLE_TEST_SECRET".to_string(),
        "value-only-in-env".to_string(),
    )];
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &env)).unwrap();

    assert_eq!(run.containers().len(), 1);
    let config = inspect(
        sandbox.id(),
        "{{.HostConfig.SecurityOpt}} {{.HostConfig.PidsLimit}} \
         {{.HostConfig.Memory}} {{.HostConfig.NetworkMode}} {{len .Mounts}}",
    );
    assert_eq!(config, "[no-new-privileges] 512 2147483648 host 1");
    // No capability, measured inside (Podman's inspect lists the dropped ones, not `ALL`): none
    // in the container's own process, nor in its bounding set, nor in the agent's.
    assert_eq!(
        exec(
            &sandbox,
            &[
                "sh",
                "-c",
                "grep -E '^Cap(Eff|Prm|Bnd)' /proc/1/status /proc/self/status | awk '{print $2}' | sort -u"
            ]
        ),
        "0000000000000000"
    );
    let created = inspect(
        sandbox.id(),
        "{{.Path}} {{.Args}} {{.Config.Env}} {{.Config.Labels}}",
    );
    assert!(!created.contains("value-only-in-env"), "{created}");
    assert!(!created.contains("SANDCASTLE_TEST_SECRET"), "{created}");
    assert!(
        created.contains("sandcastle.project:/nonexistent/sandcastle-test-project"),
        "{created}"
    );

    assert_eq!(exec(&sandbox, &["id", "-un"]), "agent");
    assert_eq!(exec(&sandbox, &["pwd"]), WORKSPACE);
    assert_eq!(
        exec(&sandbox, &["sh", "-c", "echo $SANDCASTLE_TEST_SECRET"]),
        "value-only-in-env"
    );
    // The container's own process (PID 1) is root's: the agent cannot even read its environment.
    assert_eq!(
        exec(
            &sandbox,
            &["sh", "-c", "awk '/^Uid/ {print $2}' /proc/1/status"]
        ),
        "0"
    );
    assert!(
        !sandbox
            .exec_command(&["cat", "/proc/1/environ"])
            .unwrap()
            .output()
            .unwrap()
            .status
            .success()
    );

    sandbox.remove().unwrap();
    assert!(run.containers().is_empty());
}

/// Before it said its port, the relay made the protected copy: the image's `sandcastle`, root's
/// and execute-only, so the agent runs it but cannot read it.
#[test]
fn the_relay_makes_the_protected_copy_the_agent_runs_but_cannot_read() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("protected");
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    let stat = |format: &str, path: &str| exec(&sandbox, &["stat", "-L", "-c", format, path]);
    assert_eq!(stat("%a %u", PROTECTED_SANDCASTLE), "111 0");
    let image_sandcastle = exec(&sandbox, &["sh", "-c", "command -v sandcastle"]);
    assert_eq!(
        stat("%s", PROTECTED_SANDCASTLE),
        stat("%s", &image_sandcastle)
    );
    let version = exec(&sandbox, &[PROTECTED_SANDCASTLE, "--version"]);
    assert!(version.starts_with("sandcastle "), "{version}");
    let read = sandbox
        .exec_command(&["cat", PROTECTED_SANDCASTLE])
        .and_then(Exec::output)
        .unwrap();
    let said = String::from_utf8_lossy(&read.stderr);
    assert!(
        !read.status.success() && said.contains("Permission denied"),
        "{said}"
    );
    sandbox.remove().unwrap();
}

#[test]
fn files_copy_in_owned_by_the_agent_and_come_out_as_bytes_into_a_file_of_the_hosts() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("copy");
    let sandbox = Sandbox::start(&spec(&run, "pr-7", &[])).unwrap();
    let host = tempfile::tempdir().unwrap();
    let original = host.path().join("in.jsonl");
    std::fs::write(&original, "{\"a\":1}\n").unwrap();

    let inside = "/home/agent/.claude/projects/-home-agent-workspace/s.jsonl";
    sandbox.copy_in(&original, inside).unwrap();
    assert_eq!(exec(&sandbox, &["stat", "-c", "%U", inside]), "agent");
    let back = host.path().join("out.jsonl");
    sandbox.read_out(&["cat", inside], &back, 1024).unwrap();
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "{\"a\":1}\n");

    // More than the limit: refused, and the process stopped.
    let err = sandbox
        .read_out(
            &["sh", "-c", "while :; do echo sandcastle; done"],
            &back,
            4096,
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than 4096 bytes"), "{err}");

    // A failure says what the command said.
    let err = sandbox
        .read_out(&["cat", "/nowhere/file"], &back, 1024)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("No such file or directory") && !err.contains('\n'),
        "{err}"
    );

    // The host's destination is never followed if something made it a link.
    let target = host.path().join("host-file");
    std::fs::write(&target, "host content").unwrap();
    let link = host.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(sandbox.read_out(&["cat", inside], &link, 1024).is_err());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "host content");
}

#[test]
fn remove_run_removes_every_container_of_the_run_only() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("remove-run");
    let other = TestRun::new("remove-run-other");
    let first = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    let _second = Sandbox::start(&spec(&run, "issue-2", &[])).unwrap();
    let _kept = Sandbox::start(&spec(&other, "issue-1", &[])).unwrap();
    let project = Path::new("/nonexistent/sandcastle-test-project");
    let (volume, kept_volume) = (format!("{}-cache", run.id), format!("{}-cache", other.id));
    create_volume(&volume, &run.id, project).unwrap();
    create_volume(&kept_volume, &other.id, project).unwrap();
    let volume_exists = |name: &str| {
        Command::new("docker")
            .args(["volume", "inspect", name])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert_eq!(run.containers().len(), 2);

    remove_run(&run.id).unwrap();
    assert!(run.containers().is_empty());
    assert_eq!(other.containers().len(), 1);
    assert!(!volume_exists(&volume), "the run's volumes go with it");
    assert!(volume_exists(&kept_volume));
    remove_run(&other.id).unwrap();
    assert!(!volume_exists(&kept_volume));
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

/// The test image changed by `script`, run as root, committed as `tag`.
fn derived_image(script: &str, tag: &str) {
    let name = tag.replace(':', "-");
    let ran = Command::new("docker")
        .args(["run", "--name", &name, "--network", "none", "--user", "0"])
        .args(["--entrypoint", "sh", test_image(), "-c", script])
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    // Through the Engine API with a body: Podman's `/commit` refuses the `docker` CLI's empty one.
    let (repo, tag) = tag.split_once(':').unwrap();
    let options = bollard::query_parameters::CommitContainerOptions {
        container: Some(name.clone()),
        repo: Some(repo.to_string()),
        tag: Some(tag.to_string()),
        ..Default::default()
    };
    let committed = engine()
        .unwrap()
        .call("docker commit", |docker| async move {
            let config = bollard::models::ContainerConfig::default();
            docker.commit_container(options, config).await
        });
    let _ = Command::new("docker").args(["rm", "-f", &name]).output();
    committed.unwrap();
}

/// `doctor` says each thing the image lacks: the agent user, a shell, each program; an image with
/// all of them (the test image, BusyBox's `sh` or bash's) lacks nothing.
#[test]
fn an_image_lacking_the_agent_a_shell_or_programs_says_each() {
    if !docker_ready() {
        return;
    }
    let wanted = ["claude", "git", "sandcastle"];
    assert_eq!(image_lacks(test_image(), None, &wanted).unwrap(), []);

    let tag = format!("sandcastle-test-lacks:{}", std::process::id());
    derived_image(
        "sed -i '/^agent:/d' /etc/passwd && rm /usr/local/bin/claude /usr/local/bin/sandcastle",
        &tag,
    );
    let no_agent = image_lacks(&tag, None, &wanted);
    derived_image("rm /usr/bin/sh", &tag);
    let no_shell = image_lacks(&tag, None, &wanted);
    let _ = Command::new("docker").args(["image", "rm", &tag]).output();

    assert_eq!(
        no_agent.unwrap(),
        [
            Lack::AgentUser,
            Lack::Program("claude".into()),
            Lack::Program("sandcastle".into())
        ]
    );
    assert_eq!(no_shell.unwrap(), [Lack::Shell]);
}

#[test]
fn configure_tea_gets_the_read_only_login_for_one_exec_only() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("tea");
    let tea = TeaLogin {
        url: "http://127.0.0.1:9",
        user: "sandcastle-reader",
        token: "tea-token-value",
    };
    let sandbox = Sandbox::start(&SandboxSpec {
        tea: Some(&tea),
        ..spec(&run, "issue-1", &[])
    })
    .unwrap();
    let config = exec(&sandbox, &["cat", "/home/agent/.config/tea/config.yml"]);
    assert!(config.contains("http://127.0.0.1:9"), "{config}");
    assert!(config.contains("sandcastle-reader"), "{config}");
    let env = exec(&sandbox, &["env"]);
    assert!(
        !env.contains("FORGEJO_TOKEN") && !env.contains("tea-token-value"),
        "{env}"
    );
    let created = inspect(sandbox.id(), "{{.Config.Env}}");
    assert!(!created.contains("tea-token-value"), "{created}");
}

/// The exec's three streams and its exit code cross the Engine API as a spawned process's would:
/// stdin in (its end is the exec's EOF), stdout and stderr apart, the exit code from the engine.
#[test]
fn an_exec_takes_stdin_and_gives_stdout_stderr_and_its_exit_code() {
    if !docker_ready() {
        return;
    }
    use std::io::{Read, Write};
    let run = TestRun::new("exec-streams");
    let env = [(
        "SANDCASTLE_TEST_SECRET".to_string(),
        "value-only-in-the-request".to_string(),
    )];
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &env)).unwrap();
    let script = "tr a-z A-Z; echo \"to stderr $SANDCASTLE_TEST_SECRET\" >&2; exit 7";
    let mut exec = sandbox.exec_command(&["sh", "-c", script]).unwrap();
    let mut stdin = exec.stdin.take().unwrap();
    let stderr = exec.stderr.take().unwrap();
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap());
    stdin.write_all(b"marker line\nthe prompt").unwrap();
    drop(stdin);
    let mut out = String::new();
    exec.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, "MARKER LINE\nTHE PROMPT");
    assert_eq!(
        errors.join().unwrap(),
        "to stderr value-only-in-the-request\n"
    );
    assert_eq!(exec.wait().unwrap().code(), Some(7));
    assert_eq!(exec.try_wait().unwrap().and_then(|s| s.code()), Some(7));

    // The value went to that exec only: the container's configuration never had it.
    let whole = Command::new("docker")
        .args(["inspect", sandbox.id()])
        .output()
        .unwrap();
    assert!(whole.status.success());
    let whole = String::from_utf8_lossy(&whole.stdout);
    assert!(!whole.contains("value-only-in-the-request"), "{whole}");
}

/// Killing an exec lets go of it at once: its output ends for the reader, even while the process
/// in the container still holds it open, and its status is SIGKILL's.
#[test]
fn a_killed_exec_ends_its_output_and_says_it_was_killed() {
    if !docker_ready() {
        return;
    }
    use std::io::{BufRead, Read};
    let run = TestRun::new("exec-kill");
    let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
    let mut exec = sandbox
        .exec_command(&["sh", "-c", "echo started; exec sleep 600"])
        .unwrap();
    let mut stdout = std::io::BufReader::new(exec.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "started\n");
    assert!(exec.try_wait().unwrap().is_none(), "it still runs");
    exec.kill().unwrap();
    let mut rest = Vec::new();
    assert_eq!(stdout.read_to_end(&mut rest).unwrap(), 0);
    let status = exec.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    sandbox.remove().unwrap();
}

/// A stand-in for a work's proxy socket in a directory of its own: every connection is answered
/// with `name` and closed.
fn answering_socket(name: &'static str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.path().join(proxy::SOCKET_NAME);
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = std::io::Write::write_all(&mut stream, name.as_bytes());
        }
    });
    dir
}

/// Two works' containers on the host's network: each relay binds a free port itself and says
/// which; the host learns two different ports, and each leads to its own container's relay (and
/// so to its own work's socket).
#[test]
fn relays_on_the_host_network_bind_their_own_ports_and_the_host_learns_them() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("relay-ports");
    let (one_dir, two_dir) = (answering_socket("one"), answering_socket("two"));
    let start = |key: &'static str, dir: &tempfile::TempDir| {
        Sandbox::start(&SandboxSpec {
            relay: Relay {
                socket_dir: dir.path(),
            },
            ..spec(&run, key, &[])
        })
        .unwrap()
    };
    let (one, two) = (start("issue-1", &one_dir), start("issue-2", &two_dir));
    assert_ne!(one.relay_port(), two.relay_port());
    for (sandbox, name) in [(&one, "one"), (&two, "two")] {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", sandbox.relay_port())).unwrap();
        let mut heard = String::new();
        std::io::Read::read_to_string(&mut stream, &mut heard).unwrap();
        assert_eq!(
            heard,
            name,
            "port {} reaches {name}'s socket",
            sandbox.relay_port()
        );
    }
}
