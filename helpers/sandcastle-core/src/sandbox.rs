//! Docker sandboxes through the `docker` CLI (so `DOCKER_HOST` and contexts work).
//!
//! Secrets never appear in a docker argument: variables are passed by name (`-e NAME`) and their
//! values are set on the environment of the `docker` process itself, which hands them to the engine.
use crate::deadline::{self, Watchdog};
use crate::proxy;
use anyhow::{Context, Result, bail};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where the agent's checkout lives inside every sandbox (in the container's own filesystem, never a
/// host directory), and the agent's working directory.
pub const WORKSPACE: &str = "/home/agent/workspace";
/// The docker label that marks every container of one run: `sandcastle.run=<run id>`.
pub const RUN_LABEL: &str = "sandcastle.run";
/// The docker label naming the project directory a container works for.
pub const PROJECT_LABEL: &str = "sandcastle.project";
/// The docker label naming the host the run lives on: its pid (the run id's end) means something
/// only there.
pub const HOST_LABEL: &str = "sandcastle.host";
/// The user agents run as (uid 1000 in the image). The container's own process runs as root
/// (with no capability), so no agent process can signal, trace or read it.
const AGENT_USER: &str = "agent";
/// A copy of the image's `sh` that the agent user may run but not read, made at start: a process
/// that runs it is not dumpable, so the agent's processes, under the same uid, cannot trace it,
/// read its memory or open its files through `/proc`. The agent's turn runs in it. (So the image's
/// `sh` may not be a multi-call binary that goes by its name, as BusyBox does; both images have bash.)
pub const PROTECTED_SH: &str = "/usr/local/libexec/sandcastle-sh";
/// Makes [`PROTECTED_SH`], as root (the owner of `/usr/local`, so no capability is needed).
const MAKE_PROTECTED_SH: &str = r#"set -e
mkdir -p /usr/local/libexec
cp "$(command -v sh)" "$1.new"
chmod 0111 "$1.new"
mv -f "$1.new" "$1""#;
/// The longest a `docker` CLI call may take (the agent's own `claude` exec has its idle timeout).
const DOCKER_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest moving a file into or out of a sandbox may take.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);
/// Test only: whole seconds replacing both bounds.
const TIMEOUT_VAR: &str = "SANDCASTLE_TEST_DOCKER_TIMEOUT";
/// The most a `docker` command's output may be (an exec's runs in the agent's container): what
/// the host reads whole.
const MAX_DOCKER_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Limits and wiring from `[sandbox]` in the config.
pub struct SandboxSpec<'a> {
    pub image: &'a str,
    pub run_id: &'a str,
    /// The project directory, recorded as a label so a project's containers can be found.
    pub project: &'a Path,
    /// `issue-42` or `pr-7`; part of the container name.
    pub key: &'a str,
    pub network: sandcastle_config::Network,
    pub memory: &'a str,
    pub pids_limit: u32,
    /// `host:container` pairs, mounted read-only.
    pub mounts: &'a [String],
    /// Variables every `docker exec` passes by name (values come from the docker CLI's environment,
    /// never from its arguments). The container itself is created without any, so `docker inspect`
    /// shows none.
    pub env: &'a [(String, String)],
    /// The read-only forge login `configure-tea` sets up for `tea`, if the project has one.
    pub tea: Option<&'a TeaLogin<'a>>,
    /// A Docker volume (`create_volume`) mounted read-write at a container path: only the gate's
    /// containers get one, their build cache.
    pub volume: Option<(&'a str, &'a str)>,
    /// A Docker volume mounted read-only at a container path: only a gate's container gets one,
    /// the warm build cache it copies from (`gate::WARM`).
    pub read_only_volume: Option<(&'a str, &'a str)>,
    /// The container's main process: the relay to the work's model proxy socket.
    pub relay: Relay<'a>,
}

/// The work's end of the host's model proxy (`proxy.rs`): the host directory holding its socket,
/// mounted read-only, and the loopback port `sandcastle relay` listens on inside.
pub struct Relay<'a> {
    pub socket_dir: &'a Path,
    pub port: u16,
}

/// What `configure-tea --url` gets, for one `docker exec` only.
pub struct TeaLogin<'a> {
    pub url: &'a str,
    pub user: &'a str,
    pub token: &'a str,
}

pub struct Sandbox {
    id: String,
    env: Vec<(String, String)>,
    /// Sessions whose file in the container is the one the host last took out of it (so a resume
    /// in this container needs no copy in).
    sessions: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Sandbox {
    /// `docker run -d` with `--cap-drop ALL`, `--security-opt no-new-privileges`, `--pids-limit`,
    /// `--memory`, `--network`, the run and project labels, and no variable, then runs
    /// `configure-tea` inside as the agent user when the project gives sandboxes a forge login.
    pub fn start(spec: &SandboxSpec) -> Result<Sandbox> {
        let id = output(Command::new("docker").args(run_args(spec)?), "docker run")?;
        let sandbox = Sandbox {
            sessions: Default::default(),
            id,
            env: spec.env.to_vec(),
        };
        let protected = output(
            Command::new("docker")
                .args([
                    "exec",
                    "-u",
                    "0",
                    &sandbox.id,
                    "sh",
                    "-c",
                    MAKE_PROTECTED_SH,
                ])
                .args(["sh", PROTECTED_SH])
                .stdin(Stdio::null()),
            "docker exec (the agent's protected shell)",
        );
        let configured = match (protected, spec.tea) {
            (Err(error), _) => Err(error),
            (Ok(_), Some(tea)) => sandbox.configure_tea(tea),
            (Ok(_), None) => Ok(()),
        };
        if let Err(error) = configured {
            // Best effort: the error that matters is the one above.
            let _ = output(
                Command::new("docker").args(["rm", "-f", &sandbox.id]),
                "docker rm",
            );
            return Err(error);
        }
        Ok(sandbox)
    }

    #[cfg(test)]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A `docker exec -i -u agent -w WORKSPACE [-e NAME ...] <id> <argv>` command, ready to spawn.
    pub fn exec_command(&self, argv: &[&str]) -> Command {
        self.exec_at(WORKSPACE, argv)
    }

    /// `exec_command` in another working directory.
    pub fn exec_at(&self, workdir: &str, argv: &[&str]) -> Command {
        let mut command = Command::new("docker");
        command.args(["exec", "-i", "-u", AGENT_USER, "-w", workdir]);
        for (name, value) in &self.env {
            command.args(["-e", name]).env(name, value);
        }
        command.arg(&self.id).args(argv);
        command
    }

    /// Runs `argv` in the sandbox and writes what it prints to `dest`, a new file the host creates
    /// (never one the sandbox named, never a link), at most `limit` bytes. Only bytes cross: the
    /// host follows no path and runs nothing that comes out. A non-zero exit is an error with the
    /// first line the command printed on stderr.
    pub fn read_out(&self, argv: &[&str], dest: &Path, limit: u64) -> Result<()> {
        use std::io::{Read, Write};
        let mut file =
            create_host_file(dest).with_context(|| format!("cannot write {}", dest.display()))?;
        let mut child = self
            .exec_at("/", argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot run `docker exec`: {e}"))?;
        let bound = deadline::bound(TIMEOUT_VAR, TRANSFER_TIMEOUT);
        let watchdog = Watchdog::start(&child, bound);
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.by_ref().take(64 * 1024).read_to_string(&mut text);
                text
            })
        });
        let mut stdout = child.stdout.take().expect("piped").take(limit + 1);
        let copied = std::io::copy(&mut stdout, &mut file).and_then(|n| file.flush().map(|()| n));
        drop(stdout);
        if copied.as_ref().is_ok_and(|&n| n > limit) {
            let _ = child.kill();
        }
        let status = child.wait().context("cannot wait for `docker exec`")?;
        if watchdog.finished() {
            bail!(
                "`docker exec` handing out a file did not finish within {} and was stopped",
                humantime::format_duration(bound)
            );
        }
        let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        let copied = copied.with_context(|| format!("cannot write {}", dest.display()))?;
        if copied > limit {
            bail!("the sandbox handed out more than {limit} bytes; refused");
        }
        if !status.success() {
            let reason = stderr
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no error output");
            bail!("{reason} ({status})");
        }
        Ok(())
    }

    /// Copies one host file into the container (parent directories created), owned by the agent
    /// user afterwards. It is written by the agent user through `docker exec` rather than with
    /// `docker cp` plus `chown`: the container has no capabilities, so its root cannot chown.
    pub fn copy_in(&self, host_path: &Path, container_path: &str) -> Result<()> {
        let file = std::fs::File::open(host_path).with_context(|| {
            format!(
                "cannot read {} to copy into the sandbox",
                host_path.display()
            )
        })?;
        let mut command = Command::new("docker");
        command
            .args(["exec", "-i", "-u", AGENT_USER, &self.id, "sh", "-c"])
            .arg(r#"mkdir -p "$(dirname "$1")" && cat > "$1""#)
            .args(["sh", container_path])
            .stdin(file);
        let limit = deadline::bound(TIMEOUT_VAR, TRANSFER_TIMEOUT);
        output_within(&mut command, "docker exec (copy into the sandbox)", limit).map(drop)
    }

    /// Lets the agent user write into `path`, a directory root owns (a fresh volume's mount point):
    /// root, as the directory's owner, needs no capability for `chmod`.
    pub fn open_to_agent(&self, path: &str) -> Result<()> {
        output(
            Command::new("docker")
                .args(["exec", "-u", "0", &self.id, "chmod", "1777", path])
                .stdin(Stdio::null()),
            "docker exec (chmod)",
        )
        .map(drop)
    }

    /// Whether the container holds `session_id`'s file as the host last took it out.
    pub fn holds_session(&self, session_id: &str) -> bool {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.contains(session_id)
    }

    /// Records that the host took `session_id`'s file out of this container after its agent's
    /// processes were stopped.
    pub fn note_session(&self, session_id: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.insert(session_id.to_string());
    }

    /// Whether the container still runs: it stops when its main process, the relay, exits.
    pub fn running(&self) -> Result<bool> {
        let state = output(
            Command::new("docker").args([
                "container",
                "inspect",
                "--format",
                "{{.State.Running}}",
                &self.id,
            ]),
            "docker container inspect",
        )?;
        Ok(state == "true")
    }

    /// `docker rm -f`.
    pub fn remove(self) -> Result<()> {
        remove_containers(&[&self.id])
    }

    /// The login goes in for this one `docker exec`, by name: `tea`'s config in the sandbox then
    /// holds it, and no other process of the sandbox gets it in its environment.
    fn configure_tea(&self, tea: &TeaLogin) -> Result<()> {
        let mut command = Command::new("docker");
        command
            .args(["exec", "-i", "-u", AGENT_USER, "-w", "/"])
            .args(["-e", "FORGEJO_USER", "-e", "FORGEJO_TOKEN"])
            .env("FORGEJO_USER", tea.user)
            .env("FORGEJO_TOKEN", tea.token)
            .arg(&self.id)
            .args(["configure-tea", "--url", tea.url]);
        output(&mut command, "configure-tea").map(drop).map_err(|error| {
            anyhow::anyhow!(
                "{error} in the sandbox: check FORGEJO_AGENT_TOKEN and forgeHost, and that the image has configure-tea"
            )
        })
    }
}

/// The arguments of `docker run` for `spec`: no variable and no mount but the read-only `mounts`
/// and the proxy's socket directory; the main process is the relay, as the container's root
/// without capabilities (every exec names the agent user).
fn run_args(spec: &SandboxSpec) -> Result<Vec<String>> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "-d".into(),
        "--name".into(),
        container_name(spec.run_id, spec.key),
        "--label".into(),
        format!("{RUN_LABEL}={}", spec.run_id),
        "--label".into(),
        format!("{PROJECT_LABEL}={}", spec.project.display()),
        "--label".into(),
        format!("{HOST_LABEL}={}", host_name()),
        // An init reaps the orphans the agent leaves, so zombies do not count against the pids limit.
        "--init".into(),
        // The container's own processes are root's, with no capability: every exec names the agent.
        "--user".into(),
        "0:0".into(),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--pids-limit".into(),
        spec.pids_limit.to_string(),
        "--memory".into(),
        spec.memory.into(),
        "--network".into(),
        spec.network.name().into(),
        "-v".into(),
        format!(
            "{}:{}:ro",
            spec.relay.socket_dir.display(),
            proxy::SOCKET_DIR_IN_SANDBOX
        ),
        "--entrypoint".into(),
        "sandcastle".into(),
    ];
    for mount in spec.mounts {
        let Some((host, container)) = mount.split_once(':') else {
            bail!(
                "[sandbox] mounts entry {mount:?} is not \"host-path:container-path\": fix it in .sandcastle/config.toml"
            );
        };
        let host = Path::new(host).canonicalize().with_context(|| {
            format!(
                "[sandbox] mounts entry {mount:?}: the host path {host} does not exist: create it or remove the entry"
            )
        })?;
        // Checked again after links are resolved: a link to `/` is `/`.
        let project = spec
            .project
            .canonicalize()
            .unwrap_or(spec.project.to_path_buf());
        if let Some(why) = sandcastle_config::mount_refused(&project, &host) {
            bail!("[sandbox] mounts entry {mount:?} {why}: remove it from .sandcastle/config.toml");
        }
        if !container.starts_with('/') || container.contains(':') {
            bail!(
                "[sandbox] mounts entry {mount:?}: the container path must be absolute with no options: fix it in .sandcastle/config.toml"
            );
        }
        args.extend(["-v".into(), format!("{}:{container}:ro", host.display())]);
    }
    if let Some((volume, container)) = spec.volume {
        args.extend(["-v".into(), format!("{volume}:{container}")]);
    }
    if let Some((volume, container)) = spec.read_only_volume {
        args.extend(["-v".into(), format!("{volume}:{container}:ro")]);
    }
    args.extend([
        spec.image.into(),
        "relay".into(),
        "--listen".into(),
        format!("127.0.0.1:{}", spec.relay.port),
        "--socket".into(),
        format!("{}/{}", proxy::SOCKET_DIR_IN_SANDBOX, proxy::SOCKET_NAME),
    ]);
    Ok(args)
}

/// `sandcastle-<run>-<key>`, with characters docker does not allow in names replaced by `-`.
pub fn container_name(run_id: &str, key: &str) -> String {
    format!("sandcastle-{run_id}-{key}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Runs a docker command to the end, within `DOCKER_TIMEOUT`; its trimmed stdout, or an error
/// with its first stderr line.
pub fn output(command: &mut Command, what: &str) -> Result<String> {
    output_within(command, what, deadline::bound(TIMEOUT_VAR, DOCKER_TIMEOUT))
}

fn output_within(command: &mut Command, what: &str, limit: Duration) -> Result<String> {
    let result = deadline::output_within(command, limit, MAX_DOCKER_OUTPUT_BYTES, what).map_err(
        |error| match error.downcast_ref::<std::io::Error>() {
            Some(io) if io.kind() == std::io::ErrorKind::NotFound => {
                anyhow::anyhow!("the `docker` CLI is not on PATH: install Docker's client")
            }
            Some(io) => anyhow::anyhow!("cannot run `{what}`: {io}"),
            None => error,
        },
    )?;
    if !result.status.success() {
        let stderr = String::from_utf8_lossy(&result.stderr);
        // The first line says what went wrong; later ones are hints ("Run 'docker run --help'").
        let reason = stderr
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("no error output")
            .trim();
        bail!("`{what}` failed ({}): {reason}", result.status);
    }
    Ok(String::from_utf8_lossy(&result.stdout).trim().to_string())
}

/// Creates the Docker volume `name`, labelled like a container of the run, so that removing the
/// run's leftovers removes it too.
pub fn create_volume(name: &str, run_id: &str, project: &Path) -> Result<()> {
    output(
        Command::new("docker").args([
            "volume",
            "create",
            "--label",
            &format!("{RUN_LABEL}={run_id}"),
            "--label",
            &format!("{PROJECT_LABEL}={}", project.display()),
            "--label",
            &format!("{HOST_LABEL}={}", host_name()),
            name,
        ]),
        "docker volume create",
    )
    .map(drop)
}

/// `docker volume rm -f`: a volume already gone is no error.
pub fn remove_volumes(names: &[&str]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    output(
        Command::new("docker")
            .args(["volume", "rm", "-f"])
            .args(names),
        "docker volume rm",
    )
    .map(drop)
}

/// This machine's name, as the kernel knows it.
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// A container or volume of a run that is no longer alive: its id (a volume's is its name) and
/// name.
pub struct DeadContainer {
    id: String,
    pub name: String,
    volume: bool,
}

/// The containers of `project` left by runs on this host that are no longer alive (killed with
/// SIGKILL, out of memory, the machine rebooted); only looked up, so this can run beside the other
/// start-up checks. A run is alive while its process is (the run id ends in its pid); containers of
/// other hosts, of other projects, of live runs, and those without the labels to tell, are left
/// alone.
pub fn dead_runs(project: &Path) -> Result<Vec<DeadContainer>> {
    let filter = format!("label={PROJECT_LABEL}={}", project.display());
    let labels = format!("{{{{.Label \"{RUN_LABEL}\"}}}}\t{{{{.Label \"{HOST_LABEL}\"}}}}");
    let containers = output(
        Command::new("docker").args([
            "ps",
            "-a",
            "--filter",
            &filter,
            "--format",
            &format!("{{{{.ID}}}}\t{{{{.Names}}}}\t{labels}"),
        ]),
        "docker ps",
    )?;
    let volumes = output(
        Command::new("docker").args([
            "volume",
            "ls",
            "--filter",
            &filter,
            "--format",
            &format!("{{{{.Name}}}}\t{{{{.Name}}}}\t{labels}"),
        ]),
        "docker volume ls",
    )?;
    let host = host_name();
    let dead = |listed: &str, volume: bool| -> Vec<DeadContainer> {
        listed
            .lines()
            .filter_map(|line| {
                let mut fields = line.split('\t');
                let (id, name, run, on) = (
                    fields.next()?,
                    fields.next()?,
                    fields.next()?,
                    fields.next()?,
                );
                (on == host && run_is_dead(run)).then(|| DeadContainer {
                    id: id.to_string(),
                    name: name.to_string(),
                    volume,
                })
            })
            .collect()
    };
    let mut found = dead(&containers, false);
    found.extend(dead(&volumes, true));
    Ok(found)
}

/// Removes the containers [`dead_runs`] found, then their volumes.
pub fn remove_dead(dead: &[DeadContainer]) -> Result<()> {
    let (volumes, containers): (Vec<&DeadContainer>, Vec<&DeadContainer>) =
        dead.iter().partition(|c| c.volume);
    if !containers.is_empty() {
        output(
            Command::new("docker")
                .args(["rm", "-f"])
                .args(containers.iter().map(|c| &c.id)),
            "docker rm",
        )?;
    }
    let volumes: Vec<&str> = volumes.iter().map(|v| v.id.as_str()).collect();
    remove_volumes(&volumes)
}

/// A name ending in `-<pid>` (a run id, a default orchestrator id) whose process on this host is
/// gone. Unreadable names count as alive.
pub fn run_is_dead(run_id: &str) -> bool {
    let pid = run_id
        .rsplit_once('-')
        .and_then(|(_, pid)| pid.parse::<i32>().ok())
        .and_then(rustix::process::Pid::from_raw);
    match pid {
        Some(pid) => rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH),
        None => false,
    }
}

/// Removes every container labelled with this run id, then every volume.
pub fn remove_run(run_id: &str) -> Result<()> {
    let label = format!("label={RUN_LABEL}={run_id}");
    let ids = output(
        Command::new("docker").args(["ps", "-aq", "--filter", &label]),
        "docker ps",
    )?;
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if !ids.is_empty() {
        remove_containers(&ids)?;
    }
    let volumes = output(
        Command::new("docker").args(["volume", "ls", "-q", "--filter", &label]),
        "docker volume ls",
    )?;
    remove_volumes(&volumes.split_whitespace().collect::<Vec<_>>())
}

/// `docker rm -f`, idempotent: a container already gone, or being removed by another thread of
/// this run (a stop removes the run's containers while workers remove their own), is no error.
fn remove_containers(ids: &[&str]) -> Result<()> {
    match output(
        Command::new("docker").args(["rm", "-f"]).args(ids),
        "docker rm",
    ) {
        Err(e)
            if {
                let text = e.to_string();
                text.contains("is already in progress") || text.contains("No such container")
            } =>
        {
            Ok(())
        }
        done => done.map(drop),
    }
}

/// `docker version` answers.
pub fn engine_answers() -> Result<()> {
    output(
        Command::new("docker").args(["version", "--format", "{{.Server.Version}}"]),
        "docker version",
    )
    .map(drop)
    .map_err(|error| {
        anyhow::anyhow!(
            "the Docker engine does not answer ({error}): start it, or point DOCKER_HOST at one"
        )
    })
}

/// The engine runs on this host, where it can mount the proxy's socket directory: the endpoint the
/// `docker` CLI uses (`DOCKER_HOST`, else the current context) is a Unix socket. A remote engine
/// (`tcp://`, `ssh://`) is refused with the reason.
pub fn engine_is_local() -> Result<()> {
    let endpoint = output(
        Command::new("docker").args([
            "context",
            "inspect",
            "--format",
            "{{.Endpoints.docker.Host}}",
        ]),
        "docker context inspect",
    )?;
    if endpoint.is_empty() || endpoint.starts_with("unix://") {
        return Ok(());
    }
    bail!(
        "the Docker engine at {endpoint} is remote, and cannot mount the socket sandboxes reach the model through: run sandcastle on the engine's host"
    )
}

/// What a sandbox on `network` can reach, for the start line and `doctor`.
pub fn network_says(network: sandcastle_config::Network) -> String {
    if network.is_direct() {
        format!(
            "sandboxes have direct network access ([sandbox] network = \"{network}\"); the model key stays on the host"
        )
    } else {
        "sandboxes have no network but loopback; the model is reached through sandcastle's proxy"
            .to_string()
    }
}

/// The image exists locally; the error names the image and `nix run .#sandcastleImage | docker load`.
/// Meaningful only where the engine answers ([`engine_answers`]).
pub fn image_exists(image: &str) -> Result<()> {
    let found = output(
        Command::new("docker")
            .args(["image", "inspect", "--format", "{{.Id}}", image])
            .stdin(Stdio::null()),
        "docker image inspect",
    );
    if found.is_err() {
        bail!(
            "the image {image} is not in Docker: build and load it with `nix run .#sandcastleImage | docker load`"
        );
    }
    Ok(())
}

/// The image has every one of `programs` on its PATH (checked in a throwaway container without a
/// network); the error lists the missing ones.
pub fn image_has_programs(image: &str, programs: &[&str]) -> Result<()> {
    let script: Vec<String> = programs
        .iter()
        .map(|p| format!("command -v {p} >/dev/null || echo {p}"))
        .collect();
    let out = output(
        Command::new("docker")
            .args([
                "run",
                "--rm",
                "--network",
                "none",
                "--entrypoint",
                "/bin/sh",
                image,
                "-c",
            ])
            .arg(script.join("; ")),
        "docker run",
    )?;
    let missing: Vec<&str> = out.split_whitespace().collect();
    if !missing.is_empty() {
        bail!(
            "the image {image} lacks {}: rebuild it with `nix run .#sandcastleImage | docker load`",
            missing.join(", ")
        );
    }
    Ok(())
}

/// A file the host creates for bytes out of a sandbox: truncated, never opened through a link.
pub fn create_host_file(dest: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .create(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(
        project: &'a Path,
        mounts: &'a [String],
        env: &'a [(String, String)],
    ) -> SandboxSpec<'a> {
        SandboxSpec {
            image: "sandcastle:test",
            run_id: "20261202T130405Z-1",
            project,
            key: "issue-42",
            network: sandcastle_config::Network::Host,
            memory: "4g",
            pids_limit: 1024,
            mounts,
            env,
            tea: None,
            volume: None,
            read_only_volume: None,
            relay: Relay {
                socket_dir: Path::new("/tmp/sandcastle-proxy-x"),
                port: 41000,
            },
        }
    }

    #[test]
    fn run_args_confine_the_container_and_carry_no_variable_and_no_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let env = [("ANTHROPIC_API_KEY".to_string(), "s3cret-key".to_string())];
        let mounts = [format!("{}:/nix/store", cache.display())];
        let args = run_args(&spec(dir.path(), &mounts, &env)).unwrap();
        let joined = args.join(" ");
        for expected in [
            "run -d --name sandcastle-20261202T130405Z-1-issue-42",
            "--label sandcastle.run=20261202T130405Z-1",
            &format!("--label sandcastle.project={}", dir.path().display()),
            &format!("--label sandcastle.host={} --init --user 0:0", host_name()),
            "--cap-drop ALL --security-opt no-new-privileges",
            "--pids-limit 1024 --memory 4g --network host",
            "-v /tmp/sandcastle-proxy-x:/run/sandcastle:ro --entrypoint sandcastle",
            &format!(
                "-v {}:/nix/store:ro sandcastle:test relay --listen 127.0.0.1:41000 --socket /run/sandcastle/proxy.sock",
                cache.display()
            ),
        ] {
            assert!(joined.contains(expected), "{expected:?} not in {joined:?}");
        }
        assert!(
            !args.iter().any(|a| a == "-e"),
            "no variable at creation: {joined}"
        );
        assert_eq!(args.iter().filter(|a| *a == "-v").count(), 2, "{joined}");
        assert!(!joined.contains("s3cret-key"));
    }

    #[test]
    fn exec_command_passes_values_through_the_environment_only() {
        let sandbox = Sandbox {
            id: "abc123".into(),
            env: vec![("ANTHROPIC_API_KEY".into(), "sk-secret".into())],
            sessions: Default::default(),
        };
        let command = sandbox.exec_command(&["claude", "-p", "-"]);
        let args: Vec<_> = command.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "exec",
                "-i",
                "-u",
                "agent",
                "-w",
                WORKSPACE,
                "-e",
                "ANTHROPIC_API_KEY",
                "abc123",
                "claude",
                "-p",
                "-"
            ]
        );
        let envs: Vec<_> = command.get_envs().collect();
        assert_eq!(
            envs,
            [(
                std::ffi::OsStr::new("ANTHROPIC_API_KEY"),
                Some(std::ffi::OsStr::new("sk-secret"))
            )]
        );
    }

    #[test]
    fn bad_mounts_are_one_line_errors_naming_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        std::fs::create_dir(dir.path().join(".sandcastle")).unwrap();
        std::os::unix::fs::symlink(".sandcastle", dir.path().join("innocent")).unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        for (mount, says) in [
            (
                format!("{}/root:/x", dir.path().display()),
                "mounts the host's whole filesystem",
            ),
            (
                format!("{}/innocent:/x", dir.path().display()),
                "exposes the project's .sandcastle/",
            ),
            (
                "no-colon".to_string(),
                "is not \"host-path:container-path\"",
            ),
            ("/does/not/exist:/x".to_string(), "does not exist"),
            (
                format!("{}/src:relative", dir.path().display()),
                "must be absolute",
            ),
            (
                format!("{}/src:/x:rw", dir.path().display()),
                "must be absolute",
            ),
        ] {
            let mounts = [mount.clone()];
            let err = run_args(&spec(dir.path(), &mounts, &[]))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("{mount:?}")) && err.contains(says),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_run_is_dead_only_when_its_process_is_gone() {
        assert!(!run_is_dead(&format!(
            "20261202T130405Z-{}",
            std::process::id()
        )));
        assert!(!run_is_dead("20261202T130405Z-1"), "init lives");
        assert!(!run_is_dead("no-pid-here"));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(run_is_dead(&format!("20261202T130405Z-{pid}")));
    }

    #[test]
    fn container_names_are_valid_for_docker() {
        assert_eq!(
            container_name("2026-12-02T13:04:05Z", "pr #7"),
            "sandcastle-2026-12-02T13-04-05Z-pr--7"
        );
    }
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod docker_tests;
