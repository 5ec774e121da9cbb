//! Where sandboxes run: the one trait the orchestrator reaches them through, and the Docker Engine
//! API behind it ([`DOCKER`], which serves Podman's Docker-compatible socket too). A provider
//! creates a sandbox with its limits, labels, network, runtime and the proxy's socket, started, and
//! says the port its relay bound once the relay's root set-up is done; runs an exec in it, as the
//! agent user, with stdin and streamed stdout and stderr; says whether it runs, starts it again,
//! removes it; makes and removes build cache volumes; finds and removes what a run left, by label;
//! and answers the checks of the start and `doctor`.
//! Everything else of a sandbox (taking files out as bytes, copying in, the checkout, the turn, the
//! gate) is built on exec in [`Sandbox`], the same on every provider. A new backend is a module
//! with one more implementation of [`Provider`]; `docs/design/cluster.md` maps it onto Kubernetes.
use super::{DeadContainer, Exec, ExecSpec, Lack, SandboxSpec};
use anyhow::Result;
use std::path::Path;

/// A sandbox as its provider started it.
pub struct Created {
    pub id: String,
    /// The loopback port its relay bound, as it said (`relay::LISTENING`).
    pub relay_port: u16,
}

pub trait Provider: Sync {
    /// Where the backend is, for messages (`unix:///var/run/docker.sock`); an error naming the
    /// fix when it is not this host's, which must mount the proxy's socket.
    fn endpoint(&self) -> Result<String>;
    /// The backend answers; the error names where it was looked for and the fix.
    fn answers(&self) -> Result<()>;
    /// Which backend answers, and that a sandbox of `image` starts there held to its limits; an
    /// error naming what the backend lacks, with the fix.
    fn engine_says(&self, image: &str) -> Result<String>;
    /// Which runtime sandboxes run under (`[sandbox] runtime`, else the backend's default); an
    /// error with the fix when the backend does not know it.
    fn runtime_says(&self, runtime: Option<&str>) -> Result<String>;
    /// The image is there; the error says how to load it.
    fn image_exists(&self, image: &str) -> Result<()>;
    /// What the image lacks of what sandcastle runs in it.
    fn image_lacks(
        &self,
        image: &str,
        runtime: Option<&str>,
        programs: &[&str],
    ) -> Result<Vec<Lack>>;
    /// Creates and starts the sandbox of `spec`, and learns its relay's port; nothing is left
    /// behind when it fails.
    fn create(&self, spec: &SandboxSpec) -> Result<Created>;
    /// Starts `spec` attached, as the agent user: stdin, stdout and stderr as pipes.
    fn exec(&self, spec: &ExecSpec) -> Result<Exec>;
    /// Whether sandbox `id` still runs (it stops when its relay exits).
    fn running(&self, id: &str) -> Result<bool>;
    /// Starts sandbox `id` again, its files as they were.
    fn restart(&self, id: &str) -> Result<()>;
    /// Removes the sandboxes, running or not; one already gone is no error.
    fn remove(&self, ids: &[&str]) -> Result<()>;
    /// Makes the build cache volume `name`, empty, labelled as the run's.
    fn create_volume(&self, name: &str, run_id: &str, project: &Path) -> Result<()>;
    /// Removes the volumes; one already gone is no error.
    fn remove_volumes(&self, names: &[&str]) -> Result<()>;
    /// What runs of `project` on this host that are no longer alive left, by label.
    fn dead_runs(&self, project: &Path) -> Result<Vec<DeadContainer>>;
    /// Removes what [`Provider::dead_runs`] found.
    fn remove_dead(&self, dead: &[DeadContainer]) -> Result<()>;
    /// Removes every sandbox and volume labelled as `run_id`'s.
    fn remove_run(&self, run_id: &str) -> Result<()>;
    /// Creates nothing more from now on, and returns once no creation is under way.
    fn stop_creating(&self);
}

/// The provider this host's sandboxes run on.
pub fn provider() -> &'static dyn Provider {
    &DOCKER
}

/// The Docker Engine API, at `DOCKER_HOST` or the current Docker context (`engine.rs`).
pub struct DockerApi;

pub static DOCKER: DockerApi = DockerApi;

impl Provider for DockerApi {
    fn endpoint(&self) -> Result<String> {
        super::engine().map(|engine| engine.host().to_string())
    }

    fn answers(&self) -> Result<()> {
        super::engine_answers()
    }

    fn engine_says(&self, image: &str) -> Result<String> {
        super::engine_says(image)
    }

    fn runtime_says(&self, runtime: Option<&str>) -> Result<String> {
        super::runtime_says(runtime)
    }

    fn image_exists(&self, image: &str) -> Result<()> {
        super::image_exists(image)
    }

    fn image_lacks(
        &self,
        image: &str,
        runtime: Option<&str>,
        programs: &[&str],
    ) -> Result<Vec<Lack>> {
        super::image_lacks(image, runtime, programs)
    }

    fn create(&self, spec: &SandboxSpec) -> Result<Created> {
        super::create_started(spec)
    }

    fn exec(&self, spec: &ExecSpec) -> Result<Exec> {
        Exec::start(super::engine()?, spec)
    }

    fn running(&self, id: &str) -> Result<bool> {
        super::running(id)
    }

    fn restart(&self, id: &str) -> Result<()> {
        super::restart(id)
    }

    fn remove(&self, ids: &[&str]) -> Result<()> {
        super::remove_containers(ids)
    }

    fn create_volume(&self, name: &str, run_id: &str, project: &Path) -> Result<()> {
        super::create_volume(name, run_id, project)
    }

    fn remove_volumes(&self, names: &[&str]) -> Result<()> {
        super::remove_volumes(names)
    }

    fn dead_runs(&self, project: &Path) -> Result<Vec<DeadContainer>> {
        super::dead_runs(project)
    }

    fn remove_dead(&self, dead: &[DeadContainer]) -> Result<()> {
        super::remove_dead(dead)
    }

    fn remove_run(&self, run_id: &str) -> Result<()> {
        super::remove_run(run_id)
    }

    fn stop_creating(&self) {
        super::stop_creating()
    }
}
