//! Everything a run resolves once at start and shares with every lane.
use crate::forge::Forge;
use crate::git::{self, Credentials};
use crate::progress::Progress;
use crate::report::Report;
use crate::secrets::{EnvFile, Redactor};
use anyhow::{Context as _, Result, bail};
use sandcastle_config::Config;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Context {
    /// The project's root: the directory holding `.sandcastle/`.
    pub project: PathBuf,
    pub config: Config,
    pub env: EnvFile,
    pub redactor: Redactor,
    pub creds: Credentials,
    pub forge: Forge,
    /// `<forge base URL>/<owner>/<repo>.git`
    pub remote: String,
    pub run_id: String,
    pub progress: Progress,
    pub report: Report,
    /// Set on Ctrl-C or SIGTERM: no new iteration or piece of work starts.
    pub stopping: AtomicBool,
}

/// The config and `.env` of the project at `project`, without touching the network.
pub struct Settings {
    pub project: PathBuf,
    pub config: Config,
    pub env: EnvFile,
}

impl Settings {
    pub fn load(project: &Path) -> Result<Settings> {
        let config_path = project.join(sandcastle_config::DEFAULT_PATH);
        let config = sandcastle_config::load(&config_path)?;
        let env = EnvFile::load(&project.join(".sandcastle/.env"))?;
        Ok(Settings {
            project: project.to_path_buf(),
            config,
            env,
        })
    }

    /// `FORGEJO_USER` / `FORGEJO_TOKEN` from `.sandcastle/.env` or the environment.
    pub fn credentials(&self) -> Result<Credentials> {
        let get = |key: &str| {
            self.env.get(key).filter(|v| !v.is_empty()).with_context(|| {
                format!("{key} is not set: add it to .sandcastle/.env or the environment (see .sandcastle/.env.example)")
            })
        };
        Ok(Credentials {
            user: get("FORGEJO_USER")?,
            token: get("FORGEJO_TOKEN")?,
        })
    }

    pub fn forge(&self, creds: &Credentials) -> Forge {
        Forge::new(&self.config.forge_url, &self.config.repo, &creds.token)
    }
}

impl Context {
    pub fn new(settings: Settings) -> Result<Context> {
        let creds = settings.credentials()?;
        let forge = settings.forge(&creds);
        let redactor = Redactor::new(&settings.env);
        let progress = Progress::new(redactor.clone());
        let run_id = run_id();
        let remote = git::remote_url(&settings.config.forge_url, &settings.config.repo);
        Ok(Context {
            project: settings.project,
            config: settings.config,
            env: settings.env,
            redactor,
            creds,
            forge,
            remote,
            report: Report::new(&run_id),
            run_id,
            progress,
            stopping: AtomicBool::new(false),
        })
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.project.join(".sandcastle/logs")
    }

    /// Transcripts and session files of one piece of work in this run.
    pub fn work_log_dir(&self, slug: &str) -> PathBuf {
        self.logs_dir().join(&self.run_id).join(slug)
    }

    pub fn checkout_dir(&self, slug: &str) -> PathBuf {
        self.project.join(".sandcastle/worktrees").join(slug)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.logs_dir().join("state")
    }

    /// What goes into every sandbox: the keys `.sandcastle/.env` declares (empty values filled from
    /// the environment), the forge login for `configure-tea`, the forge URL, and the settings that
    /// keep Claude Code from calling anything but the Messages API (without them it looks up and
    /// calls Anthropic's other hosts, and tries to update itself).
    pub fn sandbox_env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = vec![
            (
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".to_string(),
                "1".to_string(),
            ),
            ("DISABLE_AUTOUPDATER".to_string(), "1".to_string()),
        ];
        let mut set = |key: &str, value: String| {
            env.retain(|(k, _)| k != key);
            env.push((key.to_string(), value));
        };
        for (key, _) in &self.env.vars {
            if let Some(value) = self.env.get(key) {
                set(key, value);
            }
        }
        set("FORGEJO_USER", self.creds.user.clone());
        set("FORGEJO_TOKEN", self.creds.token.clone());
        set("SANDCASTLE_FORGE_URL", self.config.forge_url.clone());
        env
    }
}

/// `20261202T130405Z-1234`: sortable, unique per process, valid in docker names and labels.
fn run_id() -> String {
    let now = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ");
    format!("{now}-{}", std::process::id())
}

/// The directory holding `.sandcastle/config.toml`: `start` or its nearest ancestor.
pub fn find_project(start: &Path) -> Result<PathBuf> {
    match sandcastle_config::find(start) {
        // <project>/.sandcastle/config.toml
        Some(path) => Ok(path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(start)
            .to_path_buf()),
        None => bail!(
            "no .sandcastle/config.toml in {} or its parents: run sandcastle in a project set up with `nix flake init -t sandcastle#rust`",
            start.display()
        ),
    }
}
