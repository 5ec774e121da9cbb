//! Docker sandboxes through the `docker` CLI (so `DOCKER_HOST` and contexts work).
//! OWNER: helper H6. Interface fixed; bodies to implement.
use anyhow::Result;
use std::path::Path;

/// Where the checkout is mounted inside every sandbox, and the agent's working directory.
pub const WORKSPACE: &str = "/home/agent/workspace";
/// The docker label that marks every container of one run: `sandcastle.run=<run id>`.
pub const RUN_LABEL: &str = "sandcastle.run";

/// Limits and wiring from `[sandbox]` in the config.
pub struct SandboxSpec<'a> {
    pub image: &'a str,
    pub run_id: &'a str,
    /// `issue-42` or `pr-7`; part of the container name.
    pub key: &'a str,
    pub checkout: &'a Path,
    pub network: &'a str,
    pub memory: &'a str,
    pub pids_limit: u32,
    /// `host:container` pairs, mounted read-only.
    pub mounts: &'a [String],
    /// Variables passed into the container by name (values come from the docker CLI's environment,
    /// never from its arguments).
    pub env: &'a [(String, String)],
}

pub struct Sandbox {/* container id, env names */}

impl Sandbox {
    /// `docker run -d` with `--cap-drop ALL`, `--security-opt no-new-privileges`, `--pids-limit`,
    /// `--memory`, `--network`, `--label sandcastle.run=<id>`, the checkout at WORKSPACE, then runs
    /// `configure-tea` inside as the agent user.
    pub fn start(spec: &SandboxSpec) -> Result<Sandbox> { todo!() }
    pub fn id(&self) -> &str { todo!() }
    /// A `docker exec -i -u agent -w WORKSPACE [-e NAME ...] <id> <argv>` command, ready to spawn.
    pub fn exec_command(&self, argv: &[&str]) -> std::process::Command { todo!() }
    /// `docker cp` from the container to the host.
    pub fn copy_out(&self, container_path: &str, host_path: &Path) -> Result<()> { todo!() }
    /// `docker cp` from the host into the container (owned by the agent user afterwards).
    pub fn copy_in(&self, host_path: &Path, container_path: &str) -> Result<()> { todo!() }
    /// `docker rm -f`.
    pub fn remove(self) -> Result<()> { todo!() }
}

/// Removes every container labelled with this run id.
pub fn remove_run(run_id: &str) -> Result<()> { todo!() }
/// `docker version` answers.
pub fn engine_answers() -> Result<()> { todo!() }
/// The image exists locally; the error names the image and `nix run .#sandcastleImage | docker load`.
pub fn image_exists(image: &str) -> Result<()> { todo!() }
