//! A sandbox reaches its container only through the provider it was started on: a provider that
//! counts each call and hands it to the Docker engine's sees every one.
use super::test_support::*;
use super::*;
use std::sync::Mutex;

/// [`DOCKER`], with every call counted by name.
struct Counting {
    calls: Mutex<Vec<&'static str>>,
}

static COUNTING: Counting = Counting {
    calls: Mutex::new(Vec::new()),
};

impl Counting {
    fn count(&self, call: &'static str) {
        self.calls.lock().unwrap().push(call);
    }

    fn calls(&self, call: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| **c == call)
            .count()
    }
}

impl Provider for Counting {
    fn endpoint(&self) -> Result<String> {
        self.count("endpoint");
        DOCKER.endpoint()
    }
    fn answers(&self) -> Result<()> {
        self.count("answers");
        DOCKER.answers()
    }
    fn engine_says(&self, image: &str) -> Result<String> {
        self.count("engine_says");
        DOCKER.engine_says(image)
    }
    fn runtime_says(&self, runtime: Option<&str>) -> Result<String> {
        self.count("runtime_says");
        DOCKER.runtime_says(runtime)
    }
    fn image_exists(&self, image: &str) -> Result<()> {
        self.count("image_exists");
        DOCKER.image_exists(image)
    }
    fn image_lacks(
        &self,
        image: &str,
        runtime: Option<&str>,
        programs: &[&str],
    ) -> Result<Vec<Lack>> {
        self.count("image_lacks");
        DOCKER.image_lacks(image, runtime, programs)
    }
    fn create(&self, spec: &SandboxSpec) -> Result<Created> {
        self.count("create");
        DOCKER.create(spec)
    }
    fn exec(&self, spec: &ExecSpec) -> Result<Exec> {
        self.count("exec");
        DOCKER.exec(spec)
    }
    fn running(&self, id: &str) -> Result<bool> {
        self.count("running");
        DOCKER.running(id)
    }
    fn restart(&self, id: &str) -> Result<()> {
        self.count("restart");
        DOCKER.restart(id)
    }
    fn remove(&self, ids: &[&str]) -> Result<()> {
        self.count("remove");
        DOCKER.remove(ids)
    }
    fn create_volume(&self, name: &str, run_id: &str, project: &Path) -> Result<()> {
        self.count("create_volume");
        DOCKER.create_volume(name, run_id, project)
    }
    fn remove_volumes(&self, names: &[&str]) -> Result<()> {
        self.count("remove_volumes");
        DOCKER.remove_volumes(names)
    }
    fn dead_runs(&self, project: &Path) -> Result<Vec<DeadContainer>> {
        self.count("dead_runs");
        DOCKER.dead_runs(project)
    }
    fn remove_dead(&self, dead: &[DeadContainer]) -> Result<()> {
        self.count("remove_dead");
        DOCKER.remove_dead(dead)
    }
    fn remove_run(&self, run_id: &str) -> Result<()> {
        self.count("remove_run");
        DOCKER.remove_run(run_id)
    }
    fn stop_creating(&self) {
        self.count("stop_creating");
    }
}

#[test]
fn a_sandbox_reaches_its_container_only_through_its_provider() {
    if !docker_ready() {
        return;
    }
    let run = TestRun::new("provider");
    let sandbox = Sandbox::start(&SandboxSpec {
        provider: &COUNTING,
        ..spec(&run, "issue-1", &[])
    })
    .unwrap();
    assert_eq!(COUNTING.calls("create"), 1);
    assert_eq!(
        COUNTING.calls("exec"),
        0,
        "without a forge login a start makes no exec: the relay did the root set-up"
    );

    assert_eq!(exec(&sandbox, &["id", "-un"]), "agent");
    let dest = tempfile::NamedTempFile::new().unwrap();
    sandbox
        .read_out(&["echo", "bytes"], dest.path(), 64)
        .unwrap();
    assert_eq!(std::fs::read_to_string(dest.path()).unwrap(), "bytes\n");
    assert_eq!(COUNTING.calls("exec"), 2);

    assert!(sandbox.running().unwrap());
    sandbox.restart().unwrap();
    assert_eq!(
        (COUNTING.calls("running"), COUNTING.calls("restart")),
        (1, 1)
    );
    sandbox.remove().unwrap();
    assert_eq!(COUNTING.calls("remove"), 1);
    assert!(run.containers().is_empty(), "{:?}", run.containers());
}
