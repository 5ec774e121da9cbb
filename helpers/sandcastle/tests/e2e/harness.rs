//! A whole sandcastle set-up with real parts: the fake Forgejo (HTTP API and git smart HTTP), the
//! scripted Messages API, the real `sandcastle` binary, a real Docker engine and the test image with
//! the real Claude Code CLI.
use fake_anthropic::{FakeAnthropic, Scenario};
use fake_forge::FakeForge;
use sandcastle_testkit::World;
use sandcastle_testkit::git::git_output;
pub use sandcastle_testkit::world::{NAME, OWNER, REPO};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// End-to-end tests share one Docker engine and two cores: one at a time under `cargo test`. Under
/// nextest (checks/test.sh) each test is a process of its own, and its `e2e` test group
/// (.config/nextest.toml) bounds how many run at once.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn image() -> String {
    std::env::var("SANDCASTLE_TEST_IMAGE").unwrap_or_else(|_| "sandcastle-test:latest".to_string())
}

/// `None` (with the reason printed) when the suite was told to skip Docker tests; a missing engine
/// or image otherwise fails the test with the command that fixes it.
pub fn docker_or_skip() -> Option<MutexGuard<'static, ()>> {
    if std::env::var("SANDCASTLE_SKIP_DOCKER_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: SANDCASTLE_SKIP_DOCKER_TESTS=1");
        return None;
    }
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ok = |args: &[&str]| {
        Command::new("docker")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert!(
        ok(&["version"]),
        "no Docker engine answers: run checks/docker/start-dockerd.sh"
    );
    assert!(
        ok(&["image", "inspect", &image()]),
        "no test image {}: run checks/docker/build-test-image.sh",
        image()
    );
    Some(guard)
}

pub struct Harness {
    pub forge: FakeForge,
    pub anthropic: FakeAnthropic,
    pub token: String,
    pub project: tempfile::TempDir,
    agent: ureq::Agent,
}

impl Harness {
    /// `config` is appended to the generated `.sandcastle/config.toml` (top-level keys first). Without
    /// a `[commands]` table of its own, the gate is `true`: the test image has no cargo. Without a
    /// `[questions]` or `[clarify]` table, nobody is asked (the tests that ask opt in). Without a
    /// `[sandbox]` table, sandboxes are on the default network, `none`.
    pub fn new(scenario: Value, config: &str) -> Harness {
        let mut defaults = String::new();
        if !config.contains("[commands]") {
            defaults += "[commands]\ncheck = [[\"true\"]]\n";
        }
        // The default network: loopback only, the model through sandcastle's proxy.
        if !config.contains("[sandbox]") {
            defaults += "[sandbox]\nmemory = \"2g\"\npidsLimit = 512\n";
        }
        let World {
            forge,
            token,
            project,
        } = World::new(&format!(
            "imageName = \"{}\"\nidleTimeout = \"90s\"\npollInterval = \"1s\"\n{config}\n{defaults}",
            image()
        ));
        let anthropic = FakeAnthropic::start(
            Scenario::from_json(&scenario.to_string()).expect("valid scenario"),
        )
        .expect("fake anthropic starts");
        let harness = Harness {
            forge,
            anthropic,
            token,
            project,
            agent: ureq::Agent::new_with_defaults(),
        };
        harness.write_env(&harness.token.clone());
        harness
    }

    /// `.sandcastle/.env` with the given forge token.
    pub fn write_env(&self, token: &str) {
        self.write_env_with(token, "");
    }

    /// `.sandcastle/.env` with the given forge token and `extra` lines.
    pub fn write_env_with(&self, token: &str, extra: &str) {
        std::fs::write(
            self.project.path().join(".sandcastle/.env"),
            format!(
                "ANTHROPIC_BASE_URL={}\nANTHROPIC_API_KEY=sk-test-e2e-secret-key\nFORGEJO_USER={OWNER}\nFORGEJO_TOKEN={token}\n{extra}",
                self.anthropic.url()
            ),
        )
        .unwrap();
    }

    /// This project's containers (any run), stopped ones included: others may share the engine.
    pub fn containers(&self) -> Vec<String> {
        containers_of(self.project())
    }

    /// This project's containers but the gate's warm-ups (`-warm-` in the name), which run beside a
    /// work's first turn where there is a `check`: the works' own, for a test that counts them.
    pub fn work_containers(&self) -> Vec<String> {
        ids_and_names(&["ps", "-a"], self.project())
            .into_iter()
            .filter(|(_, name)| !name.contains("-warm-"))
            .map(|(id, _)| id)
            .collect()
    }

    /// This project's running containers as (id, name).
    pub fn named_containers(&self) -> Vec<(String, String)> {
        ids_and_names(&["ps"], self.project())
    }

    /// The id of this project's running container that holds `file`, if any: the one a turn that
    /// wrote it runs in, where a work has several.
    pub fn container_with(&self, file: &str) -> Option<String> {
        self.named_containers()
            .into_iter()
            .map(|(id, _)| id)
            .find(|id| {
                Command::new("docker")
                    .args(["exec", id, "test", "-f", file])
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
    }

    /// This project's Docker volumes (any run).
    pub fn volumes(&self) -> Vec<String> {
        labelled(&["volume", "ls", "-q"], self.project())
    }

    /// Another orchestrator's project on the same forge and model, as on a second host.
    pub fn another_host(&self) -> Host {
        let project = tempfile::tempdir().unwrap();
        let dir = project.path().join(".sandcastle");
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["config.toml", ".env"] {
            std::fs::copy(
                self.project().join(".sandcastle").join(file),
                dir.join(file),
            )
            .unwrap();
        }
        Host { project }
    }

    /// `sandcastle <args>` in the background, returned once `file` exists in one of this project's
    /// containers (the agent's checkout and files live there, not on the host).
    pub fn start_until(&self, args: &[&str], file: &str) -> std::process::Child {
        let mut child = self
            .command(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.wait_for_file(&mut child, file);
        child
    }

    /// Returns once `file` exists in one of this project's containers, while `child` (a
    /// `sandcastle` the test started) runs.
    pub fn wait_for_file(&self, child: &mut std::process::Child, file: &str) {
        let exists = || {
            self.containers().iter().any(|id| {
                Command::new("docker")
                    .args(["exec", id, "test", "-f", file])
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{file} never appeared in a sandbox"
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "sandcastle ended early"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Kills the relay (the container's own process) of `container` and returns once the container
    /// has stopped. The stop its death causes may cut the killing exec short, so that exec's status
    /// says nothing: what counts is that the container stopped.
    pub fn kill_relay(&self, container: &str) {
        let killed = Command::new("docker")
            .args(["exec", container, "sh", "-c"])
            .arg("ps -eo pid=,args=; kill $(ps -eo pid=,args= | awk '$2 ~ /sandcastle$/ && $3 == \"relay\" {print $1}')")
            .output()
            .unwrap();
        let stopped = (0..300).any(|_| {
            let stopped = !running(container);
            if !stopped {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            stopped
        });
        assert!(
            stopped,
            "the relay of {container} was not killed: {}{}",
            String::from_utf8_lossy(&killed.stdout),
            String::from_utf8_lossy(&killed.stderr)
        );
    }

    /// Creates `file` in every one of this project's containers (a signal to a scripted agent).
    pub fn touch_in_sandbox(&self, file: &str) {
        for id in self.containers() {
            let _ = Command::new("docker")
                .args(["exec", &id, "touch", file])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    /// A pull request sandcastle opened from `branch`, sent back: `review` requested by a user with
    /// write access (`reviewer`, created here), and labelled `ready-for-agent`. Its number.
    pub fn sent_back_pull(&self, branch: &str, reviewer: &str, review: Value) -> u64 {
        self.push_branch(branch, "draft.txt", "First draft");
        let pull = self.post(
            "/pulls",
            json!({"title": "Draft", "head": branch, "base": "main", "body": "Closes #9"}),
        )["number"]
            .as_u64()
            .unwrap();
        let token = self.forge.add_user(reviewer);
        self.forge
            .add_collaborator(REPO, reviewer, "write")
            .unwrap();
        self.post_as(&token, &format!("/pulls/{pull}/reviews"), review);
        let ready = self.label_id("ready-for-agent");
        self.post(
            &format!("/issues/{pull}/labels"),
            json!({"labels": [ready]}),
        );
        pull
    }

    /// Every implementer prompt the model was sent for `issue`.
    pub fn prompts_for_issue(&self, issue: u64) -> Vec<String> {
        self.anthropic
            .requests()
            .iter()
            .map(|r| r.prompt.clone())
            .filter(|p| p.contains(&format!("The issue: #{issue}\n")))
            .collect()
    }

    /// `git ARGS` in the forge's bare repository, whatever it exits with.
    pub fn remote_git(&self, args: &[&str]) -> Output {
        git_output(&self.forge.bare_repo_path(OWNER, NAME), args)
    }

    /// Every commit subject on every ref of the forge's repository.
    pub fn all_remote_subjects(&self) -> Vec<String> {
        let out = self.remote_git(&["log", "--all", "--format=%s"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A file's content on a branch of the forge's repository.
    pub fn remote_file(&self, branch: &str, path: &str) -> String {
        let out = self.remote_git(&["show", &format!("refs/heads/{branch}:{path}")]);
        assert!(out.status.success(), "{branch}:{path} is on the forge");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn project(&self) -> &Path {
        self.project.path()
    }

    /// The `sandcastle` command in the project, with no forge or Anthropic variables inherited.
    pub fn command(&self, args: &[&str]) -> Command {
        command_in(self.project(), args)
    }

    pub fn sandcastle(&self, args: &[&str]) -> Output {
        let output = self.command(args).output().expect("sandcastle runs");
        eprintln!(
            "--- sandcastle {args:?}: {}\n--- stdout\n{}--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn api(&self, method: &str, path: &str, body: Option<Value>, token: &str) -> Value {
        let url = format!("{}/api/v1{path}", self.forge.url());
        let auth = format!("token {token}");
        let response = match (method, body) {
            ("GET", _) => self.agent.get(&url).header("Authorization", &auth).call(),
            ("POST", Some(body)) => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send_json(body),
            (method, _) => panic!("unsupported {method}"),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let text = response.body_mut().read_to_string().unwrap();
        if text.is_empty() {
            return Value::Null;
        }
        serde_json::from_str(&text).unwrap()
    }

    pub fn get(&self, path: &str) -> Value {
        self.api("GET", &format!("/repos/{REPO}{path}"), None, &self.token)
    }

    pub fn post(&self, path: &str, body: Value) -> Value {
        self.api(
            "POST",
            &format!("/repos/{REPO}{path}"),
            Some(body),
            &self.token,
        )
    }

    pub fn post_as(&self, token: &str, path: &str, body: Value) -> Value {
        self.api("POST", &format!("/repos/{REPO}{path}"), Some(body), token)
    }

    /// `bob`, who has no write access, comments `outsider` on issue `number`; then `carol`, a
    /// collaborator with write access, comments `writer`.
    pub fn outsider_then_writer_reply(&self, number: u64, outsider: &str, writer: &str) {
        let path = format!("/issues/{number}/comments");
        let bob = self.forge.add_user("bob");
        self.post_as(&bob, &path, json!({ "body": outsider }));
        let carol = self.forge.add_user("carol");
        self.forge.add_collaborator(REPO, "carol", "write").unwrap();
        self.post_as(&carol, &path, json!({ "body": writer }));
    }

    pub fn label_id(&self, name: &str) -> i64 {
        let labels = self.get("/labels?limit=50");
        if let Some(label) = labels
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == name)
        {
            return label["id"].as_i64().unwrap();
        }
        self.post("/labels", json!({"name": name, "color": "#00aa00"}))["id"]
            .as_i64()
            .unwrap()
    }

    /// `sandcastle run --issue issue`, SIGKILLed once its pull request is open and its labels were
    /// asked for (held there by a `Retry-After`): returns the pull request, which has no label.
    pub fn run_killed_before_the_labels(&self, issue: u64) -> u64 {
        self.forge
            .inject_faults(
                "POST /repos/{owner}/{repo}/issues/{index}/labels",
                1,
                fake_forge::Fault {
                    status: 429,
                    retry_after: Some(30),
                },
            )
            .unwrap();
        let mut run = self
            .command(&["run", "--issue", &issue.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(180);
        while self.forge.pending_faults() > 0 {
            assert!(
                std::time::Instant::now() < until,
                "the labels were never asked for"
            );
            assert!(run.try_wait().unwrap().is_none(), "sandcastle ended early");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        run.kill().unwrap();
        run.wait().unwrap();
        let pulls = self.pulls();
        assert_eq!(pulls.len(), 1);
        let pull = pulls[0]["number"].as_u64().unwrap();
        assert!(self.labels_of(pull).is_empty(), "killed before the labels");
        pull
    }

    pub fn create_issue(&self, title: &str, body: &str, labels: &[&str]) -> u64 {
        let ids: Vec<i64> = labels.iter().map(|l| self.label_id(l)).collect();
        self.post(
            "/issues",
            json!({"title": title, "body": body, "labels": ids}),
        )["number"]
            .as_u64()
            .unwrap()
    }

    pub fn labels_of(&self, number: u64) -> Vec<String> {
        let issue = self.get(&format!("/issues/{number}"));
        let mut names: Vec<String> = issue["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    pub fn comments_of(&self, number: u64) -> Vec<String> {
        let comments = self.get(&format!("/issues/{number}/comments"));
        comments
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["body"].as_str().unwrap().to_string())
            .collect()
    }

    /// The body of the one pull request there is.
    pub fn only_pull_body(&self) -> String {
        let pulls = self.pulls();
        assert_eq!(pulls.len(), 1, "one pull request");
        pulls[0]["body"].as_str().unwrap().to_string()
    }

    pub fn pulls(&self) -> Vec<Value> {
        self.get("/pulls?state=all&limit=50")
            .as_array()
            .unwrap()
            .clone()
    }

    pub fn repo_labels(&self) -> Vec<String> {
        self.get("/labels?limit=50")
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// Commit subjects on a branch of the forge's bare repository, newest first; empty if no such branch.
    pub fn remote_log(&self, branch: &str) -> Vec<String> {
        let out = self.remote_git(&["log", "--format=%s", &format!("refs/heads/{branch}"), "--"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A branch with one more commit, straight in the forge's bare repository.
    pub fn push_branch(&self, branch: &str, file: &str, message: &str) {
        self.forge
            .commit_file(REPO, branch, file, "draft\n", message)
            .expect("the branch is committed");
    }

    /// Every file sandcastle wrote under `.sandcastle/logs`.
    pub fn log_files(&self) -> Vec<PathBuf> {
        log_files_of(self.project())
    }

    /// The text of the transcript whose file name ends with `name` (`implementer-1.jsonl`).
    pub fn transcript(&self, name: &str) -> String {
        let path = self
            .log_files()
            .into_iter()
            .find(|f| f.to_string_lossy().ends_with(name))
            .unwrap_or_else(|| panic!("no transcript {name}"));
        std::fs::read_to_string(path).unwrap()
    }

    /// The run report `sandcastle run` wrote last.
    pub fn last_report(&self) -> Value {
        let mut reports: Vec<PathBuf> = self
            .log_files()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
            })
            .collect();
        reports.sort();
        let path = reports.last().expect("a run report was written");
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }
}

impl Drop for Harness {
    /// Every request sandcastle sent, and every answer the forge gave, matched Forgejo's swagger.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_eq!(
                self.forge.schema_violations(),
                Vec::<String>::new(),
                "requests off Forgejo's swagger"
            );
        }
    }
}

/// Whether the engine says `container` runs.
pub fn running(container: &str) -> bool {
    let running = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", container])
        .output()
        .unwrap();
    String::from_utf8_lossy(&running.stdout).trim() == "true"
}

pub fn stderr_lines(output: &Output) -> Vec<String> {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A second orchestrator's project directory (see `Harness::another_host`).
pub struct Host {
    project: tempfile::TempDir,
}

impl Host {
    /// Changes this host's `.sandcastle/config.toml`.
    pub fn replace_in_config(&self, from: &str, to: &str) {
        let path = self.project.path().join(".sandcastle/config.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{from:?} is not in {text}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    }

    pub fn command(&self, args: &[&str]) -> Command {
        command_in(self.project.path(), args)
    }

    pub fn containers(&self) -> Vec<String> {
        containers_of(self.project.path())
    }

    pub fn log_files(&self) -> Vec<PathBuf> {
        log_files_of(self.project.path())
    }
}

/// `sandcastle <args>` in `project`, with no forge or Anthropic variables inherited.
fn command_in(project: &Path, args: &[&str]) -> Command {
    sandcastle_testkit::world::sandcastle(env!("CARGO_BIN_EXE_sandcastle"), project, args)
}

/// The containers (any run, stopped ones too) whose project is `project`.
fn containers_of(project: &Path) -> Vec<String> {
    labelled(&["ps", "-aq"], project)
}

/// The (id, name) of each container `docker <ps>` lists whose project label is `project`.
fn ids_and_names(ps: &[&str], project: &Path) -> Vec<(String, String)> {
    let format = [ps, &["--format", "{{.ID}}/{{.Names}}"]].concat();
    labelled(&format, project)
        .into_iter()
        .filter_map(|line| {
            let (id, name) = line.split_once('/')?;
            Some((id.to_string(), name.to_string()))
        })
        .collect()
}

/// The ids `docker <list>` prints for the objects whose project label is `project`.
fn labelled(list: &[&str], project: &Path) -> Vec<String> {
    let project = project.canonicalize().unwrap();
    let out = Command::new("docker")
        .args(list)
        .arg("--filter")
        .arg(format!("label=sandcastle.project={}", project.display()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Every file under `project`'s `.sandcastle/logs`.
fn log_files_of(project: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out)
            } else {
                out.push(path)
            }
        }
    }
    let mut files = Vec::new();
    walk(&project.join(".sandcastle/logs"), &mut files);
    files
}

/// Sends SIGTERM to a `sandcastle` the test started, as Ctrl-C or a service manager would.
pub fn sigterm(child: &std::process::Child) {
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).expect("a child's pid"),
        rustix::process::Signal::TERM,
    )
    .expect("the signal is sent");
}

/// `command` (a looping `sandcastle run`) until `done` holds for its stderr so far, then SIGTERM;
/// its whole stderr. Stops waiting after two minutes, or when it ends by itself.
pub fn run_until(mut command: Command, done: impl Fn(&str) -> bool) -> String {
    use std::io::BufRead;
    let mut run = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sandcastle starts");
    let seen = std::sync::Arc::new(Mutex::new(String::new()));
    let reader = {
        let seen = seen.clone();
        let stderr = std::io::BufReader::new(run.stderr.take().expect("piped stderr"));
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let mut seen = seen.lock().unwrap();
                seen.push_str(&line);
                seen.push('\n');
            }
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !done(&seen.lock().unwrap())
        && std::time::Instant::now() < deadline
        && run.try_wait().unwrap().is_none()
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if run.try_wait().unwrap().is_none() {
        sigterm(&run);
    }
    run.wait().expect("sandcastle ends");
    reader.join().expect("the stderr reader ends");
    seen.lock().unwrap().clone()
}
