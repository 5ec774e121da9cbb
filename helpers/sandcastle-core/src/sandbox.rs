//! Sandboxes, reached through a [`Provider`] (`provider.rs`); here, the Docker Engine API's
//! (`engine.rs`: `DOCKER_HOST` and contexts work, as with the `docker` CLI, which sandcastle does
//! not need). Each exec is an [`Exec`] with the shape of a spawned process (`exec.rs`).
//!
//! Secrets never appear in an argument: a variable's value goes in the body of the one exec request
//! that needs it, and the container itself is created without any.
use crate::deadline::{self, Watchdog};
use crate::proxy;
use anyhow::{Context, Result, bail};
use bollard::errors::Error as EngineError;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, ListVolumesOptions, LogsOptions,
    RemoveContainerOptions, RemoveVolumeOptions,
};
use engine::Engine;
use engines::{EngineKind, EngineLack};
pub use exec::{Exec, ExecSpec};
use futures_util::StreamExt;
pub use provider::{Created, DOCKER, DockerApi, Provider, provider};
use std::collections::HashMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

mod engine;
mod engines;
mod exec;
mod provider;

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
/// The user every exec runs as (uid 1000 in the image). The container's own process runs as root
/// (with no capability), so no agent process can signal, trace or read it; it does the container's
/// root set-up itself, so no exec runs as root.
const AGENT_USER: &str = "agent";
/// A copy of the image's `sandcastle` that the agent user may run but not read, made at start by
/// the container's relay, as root (the owner of `/usr/local`, so no capability is needed): a
/// process that runs it is not dumpable, so the agent's processes, under the same uid, cannot trace
/// it, read its memory or open its files through `/proc`. The agent's turn runs in it
/// (`sandcastle turn`), and so does the host's stop of the agent's processes. No shell of the image
/// is copied: a multi-call `sh` (BusyBox) works as well as any.
pub const PROTECTED_SANDCASTLE: &str = "/usr/local/libexec/sandcastle-turn";
/// The longest an Engine API call may take (the agent's own `claude` exec has its idle timeout).
const DOCKER_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest moving a file into or out of a sandbox may take.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);
/// Test only: whole seconds replacing both bounds.
const TIMEOUT_VAR: &str = "SANDCASTLE_TEST_DOCKER_TIMEOUT";
/// The most an exec's output may be (it runs in the agent's container): what the host reads whole.
const MAX_DOCKER_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Limits and wiring from `[sandbox]` in the config, and where the sandbox runs.
pub struct SandboxSpec<'a> {
    /// What creates the sandbox and runs its execs ([`provider`]).
    pub provider: &'static dyn Provider,
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
    /// Variables every exec gets, in its request's body (never an argument). The container itself is
    /// created without any, so `docker inspect` shows none.
    pub env: &'a [(String, String)],
    /// The read-only forge login `configure-tea` sets up for `tea`, if the project has one.
    pub tea: Option<&'a TeaLogin<'a>>,
    /// A Docker volume (`create_volume`) mounted read-write at a container path, opened to the
    /// agent user by the relay: only the build containers (gates, warm-ups) get one, their cache.
    pub volume: Option<(&'a str, &'a str)>,
    /// A Docker volume mounted read-only at a container path: only a gate's container gets one,
    /// the warm build cache it copies from (`gate::WARM`).
    pub read_only_volume: Option<(&'a str, &'a str)>,
    /// The container's main process: the relay to the work's model proxy socket.
    pub relay: Relay<'a>,
    /// The OCI runtime the container runs under (`[sandbox] runtime`); the engine's default when
    /// `None`.
    pub runtime: Option<&'a str>,
}

/// The work's end of the host's model proxy (`proxy.rs`): the host directory holding its socket,
/// mounted read-only. `sandcastle relay` inside picks its loopback port as it binds and says which
/// (`Sandbox::relay_port`).
pub struct Relay<'a> {
    pub socket_dir: &'a Path,
}

/// What `configure-tea --url` gets, for one `docker exec` only.
pub struct TeaLogin<'a> {
    pub url: &'a str,
    pub user: &'a str,
    pub token: &'a str,
}

pub struct Sandbox {
    provider: &'static dyn Provider,
    id: String,
    env: Vec<(String, String)>,
    /// The loopback port the container's relay bound, as it said.
    relay_port: u16,
    /// Sessions whose file in the container is the one the host last took out of it (so a resume
    /// in this container needs no copy in).
    sessions: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Sandbox {
    /// Creates and starts the container with no capability, `no-new-privileges`, the pids and
    /// memory limits (started only once the engine says it holds them), the network, the run and
    /// project labels, and no variable; once its relay says its port, its root set-up is done. Then
    /// runs `configure-tea` inside as the agent user when the project gives sandboxes a forge
    /// login: without one, a start makes no exec.
    pub fn start(spec: &SandboxSpec) -> Result<Sandbox> {
        let Created { id, relay_port } = spec.provider.create(spec)?;
        let sandbox = Sandbox {
            provider: spec.provider,
            sessions: Default::default(),
            id,
            env: spec.env.to_vec(),
            relay_port,
        };
        if let Some(tea) = spec.tea
            && let Err(error) = sandbox.configure_tea(tea)
        {
            // Best effort: the error that matters is the one above.
            let _ = sandbox.provider.remove(&[&sandbox.id]);
            return Err(error);
        }
        Ok(sandbox)
    }

    #[cfg(test)]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `argv` started as the agent user in [`WORKSPACE`], with the sandbox's variables, attached.
    pub fn exec_command(&self, argv: &[&str]) -> Result<Exec> {
        self.exec_at(WORKSPACE, argv)
    }

    /// `exec_command` in another working directory.
    pub fn exec_at(&self, workdir: &str, argv: &[&str]) -> Result<Exec> {
        self.exec_with(workdir, &self.env, argv)
    }

    /// `argv` started as the agent user in `workdir`, with `env` only.
    fn exec_with(&self, workdir: &str, env: &[(String, String)], argv: &[&str]) -> Result<Exec> {
        let spec = ExecSpec {
            container: &self.id,
            workdir,
            env,
            argv,
        };
        self.provider.exec(&spec)
    }

    /// Runs `argv` as [`Sandbox::exec_command`] does, stdin closed, to its end within the engine
    /// call's bound; its trimmed stdout, or an error naming `what` with the first stderr line.
    pub fn run(&self, argv: &[&str], what: &str) -> Result<String> {
        self.run_at(WORKSPACE, argv, what)
    }

    /// [`Sandbox::run`] in `workdir` (before the checkout exists, `/`).
    pub fn run_at(&self, workdir: &str, argv: &[&str], what: &str) -> Result<String> {
        self.exec_at(workdir, argv)?.finish(what)
    }

    /// Runs `argv` in the sandbox and writes what it prints to `dest`, a new file the host creates
    /// (never one the sandbox named, never a link), at most `limit` bytes. Only bytes cross: the
    /// host follows no path and runs nothing that comes out. A non-zero exit is an error with the
    /// first line the command printed on stderr.
    pub fn read_out(&self, argv: &[&str], dest: &Path, limit: u64) -> Result<()> {
        use std::io::{Read, Write};
        let mut file =
            create_host_file(dest).with_context(|| format!("cannot write {}", dest.display()))?;
        let mut child = self.exec_at("/", argv)?;
        drop(child.stdin.take());
        let bound = deadline::bound(TIMEOUT_VAR, TRANSFER_TIMEOUT);
        let watchdog = Watchdog::calling(bound, child.killer());
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
    /// user afterwards. It is written by the agent user through an exec rather than copied in as an
    /// archive plus `chown`: the container has no capabilities, so its root cannot chown.
    pub fn copy_in(&self, host_path: &Path, container_path: &str) -> Result<()> {
        let file = std::fs::File::open(host_path).with_context(|| {
            format!(
                "cannot read {} to copy into the sandbox",
                host_path.display()
            )
        })?;
        let script = r#"mkdir -p "$(dirname "$1")" && cat > "$1""#;
        let mut exec = self.exec_with("/", &[], &["sh", "-c", script, "sh", container_path])?;
        exec.feed(file);
        let limit = deadline::bound(TIMEOUT_VAR, TRANSFER_TIMEOUT);
        exec.finish_within("docker exec (copy into the sandbox)", limit)
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
        self.provider.running(&self.id)
    }

    /// Starts the container again after it stopped (its relay exited): its files are as they
    /// were, no process of the agent's runs, and an exec can take out what its checkout holds.
    pub fn restart(&self) -> Result<()> {
        self.provider.restart(&self.id)
    }

    /// Removes the container, running or not.
    pub fn remove(self) -> Result<()> {
        self.provider.remove(&[&self.id])
    }

    /// The login goes in for this one exec, in its request's body: `tea`'s config in the sandbox
    /// then holds it, and no other process of the sandbox gets it in its environment.
    fn configure_tea(&self, tea: &TeaLogin) -> Result<()> {
        let env = [
            ("FORGEJO_USER".to_string(), tea.user.to_string()),
            ("FORGEJO_TOKEN".to_string(), tea.token.to_string()),
        ];
        self.exec_with("/", &env, &["configure-tea", "--url", tea.url])
            .and_then(|exec| exec.finish("configure-tea"))
            .map(drop)
            .map_err(|error| {
                anyhow::anyhow!(
                    "{error} in the sandbox: check FORGEJO_AGENT_TOKEN and forgeHost, and that the image has configure-tea"
                )
            })
    }
}

impl Exec {
    /// Runs to the end within the engine call's bound: the trimmed stdout, or an error naming
    /// `what` with the first line of stderr.
    fn finish(self, what: &str) -> Result<String> {
        self.finish_within(what, deadline::bound(TIMEOUT_VAR, DOCKER_TIMEOUT))
    }

    fn finish_within(self, what: &str, limit: Duration) -> Result<String> {
        let result = self.output_within(limit, MAX_DOCKER_OUTPUT_BYTES, what)?;
        if !result.status.success() {
            let stderr = String::from_utf8_lossy(&result.stderr);
            let reason = stderr
                .lines()
                .find(|line| !line.trim().is_empty())
                .unwrap_or("no error output")
                .trim();
            bail!("`{what}` failed ({}): {reason}", result.status);
        }
        Ok(String::from_utf8_lossy(&result.stdout).trim().to_string())
    }
}

/// The engine the environment names, connected once per process (a failure is tried again next
/// time).
fn engine() -> Result<&'static Engine> {
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    if let Some(engine) = ENGINE.get() {
        return Ok(engine);
    }
    let engine = Engine::from_env(deadline::bound(TIMEOUT_VAR, DOCKER_TIMEOUT))?;
    Ok(ENGINE.get_or_init(|| engine))
}

/// Creates and starts the container of `spec` on the Docker engine, with no capability,
/// `no-new-privileges`, the pids and memory limits (started only once the engine says it holds
/// them), the network, the runtime, the run and project labels and no variable, and learns its
/// relay's port; removes it when that fails.
fn create_started(spec: &SandboxSpec) -> Result<Created> {
    let (name, config) = container_config(spec)?;
    let wanted = config.host_config.clone().unwrap_or_default();
    let engine = engine()?;
    let id = create_container(engine, Some(name), config, spec.runtime).map_err(with_fix)?;
    let started = limits_held(engine, &id, &wanted).and_then(|()| {
        let id = id.clone();
        engine
            .call("docker start", |docker| async move {
                docker.start_container(&id, None).await
            })
            .map_err(with_fix)
    });
    match started.and_then(|()| relay_port::learn(engine, &id)) {
        Ok(relay_port) => Ok(Created { id, relay_port }),
        Err(error) => {
            let _ = remove_containers(&[&id]);
            Err(error)
        }
    }
}

/// Whether container `id` runs.
fn running(id: &str) -> Result<bool> {
    let id = id.to_string();
    let state = engine()?.call("docker container inspect", |docker| async move {
        Ok(docker.inspect_container(&id, None).await?.state)
    })?;
    Ok(state.and_then(|s| s.running) == Some(true))
}

/// Starts container `id` again.
fn restart(id: &str) -> Result<()> {
    let id = id.to_string();
    engine()?.call("docker start", |docker| async move {
        docker.start_container(&id, None).await
    })
}

/// `sandcastle.run`, `sandcastle.project` and `sandcastle.host` for a container or volume of `run_id`.
fn run_labels(run_id: &str, project: &Path) -> HashMap<String, String> {
    HashMap::from([
        (RUN_LABEL.to_string(), run_id.to_string()),
        (PROJECT_LABEL.to_string(), project.display().to_string()),
        (HOST_LABEL.to_string(), host_name()),
    ])
}

/// The name and configuration of `spec`'s container: no variable and no mount but the read-only
/// `mounts`, the proxy's socket directory and `spec`'s volumes; the main process is the relay, as
/// the container's root without capabilities (every exec is the agent user's), which does the
/// root set-up ([`relay_args`]).
fn container_config(spec: &SandboxSpec) -> Result<(String, ContainerCreateBody)> {
    let mut binds = vec![format!(
        "{}:{}:ro",
        spec.relay.socket_dir.display(),
        proxy::SOCKET_DIR_IN_SANDBOX
    )];
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
        binds.push(format!("{}:{container}:ro", host.display()));
    }
    if let Some((volume, container)) = spec.volume {
        binds.push(format!("{volume}:{container}"));
    }
    if let Some((volume, container)) = spec.read_only_volume {
        binds.push(format!("{volume}:{container}:ro"));
    }
    let memory = sandcastle_config::memory_bytes(spec.memory).with_context(|| {
        format!(
            "[sandbox] memory {:?} is not a memory size: write e.g. \"4g\" in .sandcastle/config.toml",
            spec.memory
        )
    })?;
    let host_config = HostConfig {
        // An init reaps the orphans the agent leaves, so zombies do not count against the pids limit.
        init: Some(true),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        pids_limit: Some(spec.pids_limit.into()),
        memory: Some(memory as i64),
        network_mode: Some(spec.network.name().into()),
        binds: Some(binds),
        // The host reads the relay's port from the container's log (`relay_port.rs`): a log it can
        // read whatever the engine's default driver (`none`, or one that ships logs away), and
        // small, since only the relay writes to it.
        log_config: Some(HostConfigLogConfig {
            typ: Some("json-file".into()),
            config: Some(HashMap::from([("max-size".into(), "1m".into())])),
        }),
        ..Default::default()
    };
    let config = ContainerCreateBody {
        image: Some(spec.image.into()),
        labels: Some(run_labels(spec.run_id, spec.project)),
        // The container's own processes are root's, with no capability: every exec is the agent's.
        user: Some("0:0".into()),
        entrypoint: Some(vec!["sandcastle".into()]),
        cmd: Some(relay_args(spec)),
        host_config: Some(host_config),
        ..Default::default()
    };
    Ok((container_name(spec.run_id, spec.key), config))
}

/// `sandcastle relay`'s arguments: the proxy's socket, a port of its own, and the container's root
/// set-up, done before it says the port: [`PROTECTED_SANDCASTLE`] in every container (a gate's
/// step is stopped from it too), and a build container's read-write cache opened to the agent.
fn relay_args(spec: &SandboxSpec) -> Vec<String> {
    let mut args = vec![
        "relay".into(),
        "--listen".into(),
        // Any free port, bound by the relay itself: no other container can take it first.
        "127.0.0.1:0".into(),
        "--socket".into(),
        format!("{}/{}", proxy::SOCKET_DIR_IN_SANDBOX, proxy::SOCKET_NAME),
        "--protect".into(),
        PROTECTED_SANDCASTLE.into(),
    ];
    if let Some((_, container)) = spec.volume {
        args.extend(["--open".into(), container.into()]);
    }
    args
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

/// Creates the Docker volume `name`, empty, labelled like a container of the run, so that removing
/// the run's leftovers removes it too. `docker volume create` would reuse a volume of that name: one
/// a broken gate or warm-up left goes first.
pub(crate) fn create_volume(name: &str, run_id: &str, project: &Path) -> Result<()> {
    remove_volumes(&[name])?;
    let request = VolumeCreateRequest {
        name: Some(name.to_string()),
        labels: Some(run_labels(run_id, project)),
        ..Default::default()
    };
    let engine = engine()?;
    creating("volume", || {
        engine.call("docker volume create", |docker| async move {
            docker.create_volume(request).await
        })
    })
    .map(drop)
}

/// Creates a container of `config`, named `name` or by the engine, under `runtime` (the engine's
/// default when `None`), unless creating has stopped. Every container sandcastle makes is created
/// here, so `[sandbox] runtime` covers them all: the turns', the gates', the warm-ups' and the
/// image's probe.
fn create_container(
    engine: &Engine,
    name: Option<String>,
    mut config: ContainerCreateBody,
    runtime: Option<&str>,
) -> Result<String> {
    config.host_config.get_or_insert_default().runtime = runtime.map(str::to_string);
    creating("container", || {
        engine.call("docker create", |docker| async move {
            let options = name.map(|name| CreateContainerOptions {
                name: Some(name),
                ..Default::default()
            });
            Ok(docker.create_container(options, config).await?.id)
        })
    })
}

/// Which OCI runtime sandboxes run under, for the start line and `doctor`: `runtime` (`[sandbox]
/// runtime`) when the engine knows it, else the engine's default. A name the engine does not know
/// is an error naming the key and the `daemon.json` fix.
pub(crate) fn runtime_says(runtime: Option<&str>) -> Result<String> {
    let info = engine()?.call("docker info", |docker| async move { docker.info().await })?;
    let default = info.default_runtime.unwrap_or_else(|| "runc".into());
    let Some(name) = runtime else {
        return Ok(format!(
            "sandboxes run under {default}, the engine's default runtime"
        ));
    };
    let mut known: Vec<String> = info.runtimes.unwrap_or_default().into_keys().collect();
    if known.iter().any(|known| known == name) {
        return Ok(format!("sandboxes run under {name} ([sandbox] runtime)"));
    }
    known.sort();
    bail!(
        "the Docker engine does not know the runtime \"{name}\" of [sandbox] runtime (it knows {}): \
         add it to /etc/docker/daemon.json, e.g. {{\"runtimes\": {{\"{name}\": {{\"path\": \"/usr/bin/{name}\"}}}}}}, \
         and reload the engine (`systemctl reload docker`), or change [sandbox] runtime in .sandcastle/config.toml",
        known.join(", ")
    )
}

/// Whether this process still creates containers and volumes; [`stop_creating`] closes it.
static CREATING: std::sync::RwLock<bool> = std::sync::RwLock::new(true);

/// Runs `create` (one Engine API creation) unless creating has stopped. The read lock is held
/// for the call, so [`stop_creating`] returns only once no creation is under way.
fn creating<T>(what: &str, create: impl FnOnce() -> Result<T>) -> Result<T> {
    let open = CREATING.read().unwrap_or_else(|e| e.into_inner());
    if !*open {
        bail!("the run is stopping: no {what} is created");
    }
    create()
}

/// No container or volume is created by this process from now on, and none is being created
/// when this returns: a stop calls it before it removes the run's (`remove_run`), so the removal
/// sees every one the run will ever have. Waits at most for one Engine API call's bound.
pub(crate) fn stop_creating() {
    *CREATING.write().unwrap_or_else(|e| e.into_inner()) = false;
}

/// Removes the volumes, in use or not: a volume already gone is no error.
pub(crate) fn remove_volumes(names: &[&str]) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    engine()?.call("docker volume rm", |docker| async move {
        for name in names {
            let options = RemoveVolumeOptions { force: true };
            match docker.remove_volume(&name, Some(options)).await {
                Err(EngineError::DockerResponseServerError {
                    status_code: 404, ..
                }) => {}
                done => done?,
            }
        }
        Ok(())
    })
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
pub(crate) fn dead_runs(project: &Path) -> Result<Vec<DeadContainer>> {
    let filter = label_filter(&format!("{PROJECT_LABEL}={}", project.display()));
    let (containers, volumes) = listed(filter, "docker ps")?;
    let host = host_name();
    let dead = |labels: &HashMap<String, String>| {
        labels.get(HOST_LABEL) == Some(&host)
            && labels.get(RUN_LABEL).is_some_and(|run| run_is_dead(run))
    };
    let mut found: Vec<DeadContainer> = containers
        .into_iter()
        .filter(|c| c.labels.as_ref().is_some_and(dead))
        .filter_map(|c| {
            let name = c.names?.first()?.trim_start_matches('/').to_string();
            Some(DeadContainer {
                id: c.id?,
                name,
                volume: false,
            })
        })
        .collect();
    found.extend(
        volumes
            .into_iter()
            .filter(|v| dead(&v.labels))
            .map(|v| DeadContainer {
                id: v.name.clone(),
                name: v.name,
                volume: true,
            }),
    );
    Ok(found)
}

/// A `label=…` filter for the list calls.
fn label_filter(label: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_string(), vec![label.to_string()])])
}

/// The containers, stopped ones too, and the volumes that match `filters`.
fn listed(
    filters: HashMap<String, Vec<String>>,
    what: &str,
) -> Result<(
    Vec<bollard::models::ContainerSummary>,
    Vec<bollard::models::Volume>,
)> {
    engine()?.call(what, |docker| async move {
        let containers = ListContainersOptions {
            all: true,
            filters: Some(filters.clone()),
            ..Default::default()
        };
        let containers = docker.list_containers(Some(containers)).await?;
        let volumes = ListVolumesOptions {
            filters: Some(filters),
        };
        let volumes = docker.list_volumes(Some(volumes)).await?;
        Ok((containers, volumes.volumes.unwrap_or_default()))
    })
}

/// Removes the containers [`dead_runs`] found, then their volumes.
pub(crate) fn remove_dead(dead: &[DeadContainer]) -> Result<()> {
    let (volumes, containers): (Vec<&DeadContainer>, Vec<&DeadContainer>) =
        dead.iter().partition(|c| c.volume);
    let containers: Vec<&str> = containers.iter().map(|c| c.id.as_str()).collect();
    remove_containers(&containers)?;
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
pub(crate) fn remove_run(run_id: &str) -> Result<()> {
    let (containers, volumes) =
        listed(label_filter(&format!("{RUN_LABEL}={run_id}")), "docker ps")?;
    let ids: Vec<String> = containers.into_iter().filter_map(|c| c.id).collect();
    remove_containers(&ids.iter().map(String::as_str).collect::<Vec<_>>())?;
    let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
    remove_volumes(&names)
}

/// Removes the containers, running or not, idempotently: a container already gone, or being removed
/// by another thread of this run (a stop removes the run's containers while workers remove their
/// own), is no error.
fn remove_containers(ids: &[&str]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
    engine()?.call("docker rm", |docker| async move {
        for id in ids {
            let options = RemoveContainerOptions {
                force: true,
                ..Default::default()
            };
            match docker.remove_container(&id, Some(options)).await {
                Err(EngineError::DockerResponseServerError {
                    status_code: 404, ..
                }) => {}
                Err(EngineError::DockerResponseServerError {
                    status_code: 409,
                    message,
                }) if message.contains("is already in progress") => {}
                done => done?,
            }
        }
        Ok(())
    })
}

/// The engine answers; the error names where it was looked for and the fix.
pub(crate) fn engine_answers() -> Result<()> {
    engine()
        .and_then(|engine| {
            engine.call(
                "docker version",
                |docker| async move { docker.ping().await },
            )
        })
        .map(drop)
}

/// Which engine answers (Docker, or Podman through its Docker-compatible API, by its version
/// answer), and whether a container of `image` shaped like a sandbox starts there, held to its
/// limits; an error naming what the engine lacks (a known [`EngineLack`]), with the fix.
pub(crate) fn engine_says(image: &str) -> Result<String> {
    let engine = engine()?;
    let answer = engine.call(
        "docker version",
        |docker| async move { docker.version().await },
    )?;
    let kind = EngineKind::of(&answer);
    match probe_image(engine, image, None, None, "true", Probe::SandboxShaped) {
        Ok(_) => Ok(format!(
            "{kind}; a container shaped like a sandbox starts, held to its memory and pids limits"
        )),
        Err(error) => match error
            .downcast_ref::<EngineLack>()
            .copied()
            .or_else(|| EngineLack::of(&format!("{error:#}")))
        {
            Some(lack) => bail!("{kind}: {lack}"),
            None => Err(error),
        },
    }
}

/// The engine holds container `id` to `wanted`'s memory and pids limits, as its inspect says:
/// rootless Podman on cgroups v1 takes them and drops them, which would leave a sandbox unbounded.
fn limits_held(engine: &Engine, id: &str, wanted: &HostConfig) -> Result<()> {
    let id = id.to_string();
    let held = engine.call("docker container inspect", |docker| async move {
        Ok(docker.inspect_container(&id, None).await?.host_config)
    })?;
    let held = held.unwrap_or_default();
    if held.memory != wanted.memory || held.pids_limit != wanted.pids_limit {
        return Err(EngineLack::Limits.into());
    }
    Ok(())
}

/// An engine's refusal to create or start a sandbox, with the fix when it is a known [`EngineLack`].
fn with_fix(error: anyhow::Error) -> anyhow::Error {
    match EngineLack::of(&format!("{error:#}")) {
        Some(lack) => anyhow::anyhow!("{error:#}: {lack}"),
        None => error,
    }
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
pub(crate) fn image_exists(image: &str) -> Result<()> {
    let name = image.to_string();
    let found = engine().and_then(|engine| {
        engine.call("docker image inspect", |docker| async move {
            docker.inspect_image(&name).await
        })
    });
    if found.is_err() {
        bail!(
            "the image {image} is not in Docker: build and load it with `nix run .#sandcastleImage | docker load`"
        );
    }
    Ok(())
}

/// Something sandcastle needs in the image that it does not have.
#[derive(Debug, Clone, PartialEq)]
pub enum Lack {
    /// The user agents run as.
    AgentUser,
    /// A POSIX shell, `sh` on the PATH.
    Shell,
    /// A program on the PATH.
    Program(String),
}

/// What the image lacks of the agent user, a shell and `programs` (checked in a throwaway
/// container without a network, under `runtime` as every sandbox, as the agent user when there
/// is one).
pub(crate) fn image_lacks(
    image: &str,
    runtime: Option<&str>,
    programs: &[&str],
) -> Result<Vec<Lack>> {
    let script = programs
        .iter()
        .map(|p| format!("command -v {p} >/dev/null || echo {p}"))
        .collect::<Vec<_>>()
        .join("; ");
    let engine = engine()?;
    let mut lacks = Vec::new();
    let probe = |user| probe_image(engine, image, runtime, user, &script, Probe::Plain);
    let mut found = probe(Some(AGENT_USER));
    if found
        .as_ref()
        .is_err_and(|e| e.to_string().contains("unable to find user"))
    {
        lacks.push(Lack::AgentUser);
        found = probe(None);
    }
    match found {
        Ok(out) => lacks.extend(out.split_whitespace().map(|p| Lack::Program(p.to_string()))),
        Err(e) if e.to_string().contains("executable file not found") => lacks.push(Lack::Shell),
        Err(e) => return Err(e),
    }
    Ok(lacks)
}

/// How [`probe_image`]'s container is made.
#[derive(Clone, Copy, PartialEq)]
enum Probe {
    /// No init: a missing shell is the engine's refusal to start it, which says so.
    Plain,
    /// As a sandbox is: an init, no capability, `no-new-privileges`, memory and pids limits the
    /// engine must hold (what an engine may lack shows only then).
    SandboxShaped,
}

/// Runs `sh -c script` in a throwaway container of `image` without a network, under `runtime`, as
/// `user` (the image's own user when `None`), and returns what it printed on stdout. A non-zero
/// exit is not an error: the output says what is missing.
fn probe_image(
    engine: &Engine,
    image: &str,
    runtime: Option<&str>,
    user: Option<&str>,
    script: &str,
    probe: Probe,
) -> Result<String> {
    let shaped = probe == Probe::SandboxShaped;
    let host_config = HostConfig {
        init: shaped.then_some(true),
        cap_drop: shaped.then(|| vec!["ALL".into()]),
        security_opt: shaped.then(|| vec!["no-new-privileges".into()]),
        memory: shaped.then_some(256 * 1024 * 1024),
        pids_limit: shaped.then_some(64),
        network_mode: Some("none".into()),
        ..Default::default()
    };
    let config = ContainerCreateBody {
        image: Some(image.to_string()),
        user: user.map(str::to_string),
        entrypoint: Some(vec!["sh".into()]),
        cmd: Some(vec!["-c".into(), script.to_string()]),
        host_config: Some(host_config.clone()),
        ..Default::default()
    };
    let id = create_container(engine, None, config, runtime)?;
    let held = match probe {
        Probe::SandboxShaped => limits_held(engine, &id, &host_config),
        Probe::Plain => Ok(()),
    };
    let printed = held.and_then(|()| {
        let id = id.clone();
        engine.call("docker run", |docker| async move {
            docker.start_container(&id, None).await?;
            let mut waited = docker.wait_container(&id, None);
            while let Some(status) = waited.next().await {
                // A non-zero exit comes as an error: the output says what is missing.
                if let Err(error) = status
                    && !matches!(error, EngineError::DockerContainerWaitError { .. })
                {
                    return Err(error);
                }
            }
            let options = LogsOptions {
                stdout: true,
                ..Default::default()
            };
            let mut logs = docker.logs(&id, Some(options));
            let mut printed = Vec::new();
            while let Some(chunk) = logs.next().await {
                printed.extend_from_slice(&chunk?.into_bytes());
                if printed.len() as u64 > MAX_DOCKER_OUTPUT_BYTES {
                    break;
                }
            }
            Ok(String::from_utf8_lossy(&printed).into_owned())
        })
    });
    let removed = remove_containers(&[&id]);
    let printed = printed?;
    removed?;
    Ok(printed)
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
            },
            runtime: None,
            provider: provider(),
        }
    }

    #[test]
    fn the_container_is_confined_and_carries_no_variable_and_no_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let env = [("ANTHROPIC_API_KEY".to_string(), "s3cret-key".to_string())];
        let mounts = [format!("{}:/nix/store", cache.display())];
        let (name, config) = container_config(&spec(dir.path(), &mounts, &env)).unwrap();
        assert_eq!(name, "sandcastle-20261202T130405Z-1-issue-42");
        assert_eq!(
            config.labels.clone().unwrap(),
            HashMap::from([
                (RUN_LABEL.to_string(), "20261202T130405Z-1".to_string()),
                (PROJECT_LABEL.to_string(), dir.path().display().to_string()),
                (HOST_LABEL.to_string(), host_name()),
            ])
        );
        assert_eq!(config.user.as_deref(), Some("0:0"));
        assert_eq!(config.image.as_deref(), Some("sandcastle:test"));
        assert_eq!(config.entrypoint, Some(vec!["sandcastle".to_string()]));
        assert_eq!(
            config.cmd.clone().unwrap().join(" "),
            "relay --listen 127.0.0.1:0 --socket /run/sandcastle/proxy.sock \
             --protect /usr/local/libexec/sandcastle-turn"
        );
        let host = config.host_config.clone().unwrap();
        assert_eq!(host.init, Some(true));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges".to_string()])
        );
        assert_eq!(host.pids_limit, Some(1024));
        assert_eq!(host.memory, Some(4 * 1024 * 1024 * 1024));
        assert_eq!(host.network_mode.as_deref(), Some("host"));
        let log = host.log_config.clone().unwrap();
        assert_eq!(
            log.typ.as_deref(),
            Some("json-file"),
            "readable whatever the default"
        );
        assert_eq!(
            host.binds.unwrap(),
            [
                "/tmp/sandcastle-proxy-x:/run/sandcastle:ro".to_string(),
                format!("{}:/nix/store:ro", cache.display())
            ]
        );
        assert_eq!(config.env, None, "no variable at creation");
        let whole = serde_json::to_string(&config).unwrap();
        assert!(!whole.contains("s3cret-key"), "{whole}");
    }

    #[test]
    fn a_build_containers_relay_opens_its_read_write_cache_only() {
        let dir = tempfile::tempdir().unwrap();
        let build = SandboxSpec {
            volume: Some(("run-cache", "/gate-cache")),
            read_only_volume: Some(("run-warm", "/gate-warm")),
            ..spec(dir.path(), &[], &[])
        };
        let (_, config) = container_config(&build).unwrap();
        assert_eq!(
            config.cmd.unwrap().join(" "),
            "relay --listen 127.0.0.1:0 --socket /run/sandcastle/proxy.sock \
             --protect /usr/local/libexec/sandcastle-turn --open /gate-cache"
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
            let err = container_config(&spec(dir.path(), &mounts, &[]))
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
        let mut child = std::process::Command::new("true").spawn().unwrap();
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

mod relay_port;

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod docker_tests;

#[cfg(test)]
mod runtime_tests;

#[cfg(test)]
mod provider_tests;
