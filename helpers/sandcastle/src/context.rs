//! Everything a run resolves once at start and shares with every lane.
use crate::handlers::Handlers;
use crate::prompts;
use crate::report::Report;
use crate::warm_cache::WarmCache;
use anyhow::{Context as _, Result, bail};
use sandcastle_config::{Config, ConfigError};
use sandcastle_core::forge::Forge;
use sandcastle_core::git::{self, Credentials};
use sandcastle_core::plan::PlanMemo;
use sandcastle_core::progress::Progress;
use sandcastle_core::proxy::{Credential, FORGE_IN_SANDBOX, Policy, Proxy, Upstream};
use sandcastle_core::run_dir::RunDir;
use sandcastle_core::sandbox::{self, TeaLogin};
use sandcastle_core::secrets::{EnvFile, Redactor};
use sandcastle_core::tls::Roots;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Keys of `.sandcastle/.env` that are the orchestrator's own and never reach a sandbox: the forge
/// logins, and the model credential and endpoint, which only the model proxy uses (`proxy.rs`).
pub const HOST_ONLY_KEYS: [&str; 7] = [
    "FORGEJO_TOKEN",
    "FORGEJO_USER",
    "FORGEJO_AGENT_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

pub struct Context {
    /// The project's root: the directory holding `.sandcastle/`.
    pub project: PathBuf,
    pub config: Config,
    pub env: EnvFile,
    pub redactor: Redactor,
    pub creds: Credentials,
    pub forge: Forge,
    /// The login `FORGEJO_TOKEN` belongs to, as the forge says: the author of sandcastle's own pull
    /// requests and comments.
    pub login: String,
    /// The read-only login sandboxes get for `tea` (`FORGEJO_AGENT_TOKEN`), if the project has one.
    pub agent_login: Option<Credentials>,
    /// `<forge base URL>/<owner>/<repo>.git`
    pub remote: String,
    pub run_id: String,
    /// This orchestrator's name among several on one forge (`[cluster] id`, or host name and
    /// process id): in its claims, comments, logs and report.
    pub id: String,
    pub progress: Progress,
    pub report: Report,
    /// Set on Ctrl-C or SIGTERM: no new iteration or piece of work starts.
    pub stopping: AtomicBool,
    /// The planner's last answer, so it is asked again only when the candidates change.
    pub plan_memo: Mutex<Option<PlanMemo>>,
    /// The claim comments this run holds, released by a stop as well as when the work returns.
    pub held_claims: Mutex<Vec<i64>>,
    /// Issues are assessed before work starts: `[clarify] enabled`, unless `run --yes`.
    pub clarifies: bool,
    /// The question handlers' side of the run (`asking`).
    pub handlers: Handlers,
    /// The model proxy every sandbox reaches the model through; the only holder of the credential.
    pub proxy: Proxy,
    /// The run's own host directory, holding the proxy's sockets; removed as the run ends.
    pub run_dir: RunDir,
    /// The gates' warm build cache, built from the base branch's tip.
    pub warm_cache: WarmCache,
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

    /// The model proxy's upstream: `ANTHROPIC_BASE_URL` and the credential, from `.sandcastle/.env`
    /// or the environment; an HTTPS upstream checked against sandcastle's own environment's
    /// `SSL_CERT_FILE`, else the system's roots.
    pub fn upstream(&self) -> Result<Upstream> {
        let credential = Credential::from(|key| self.env.get(key))?;
        Upstream::new(
            self.env.get("ANTHROPIC_BASE_URL"),
            credential,
            Self::roots()?,
        )
    }

    /// What sandcastle's HTTPS trusts: `SSL_CERT_FILE` of its own environment, else the system's.
    /// Read once per process: the model proxy and both forge clients share them.
    pub fn roots() -> Result<Roots> {
        static ROOTS: std::sync::OnceLock<Roots> = std::sync::OnceLock::new();
        if let Some(roots) = ROOTS.get() {
            return Ok(roots.clone());
        }
        let roots = Roots::load(|key| std::env::var(key).ok().filter(|v| !v.is_empty()))?;
        Ok(ROOTS.get_or_init(|| roots).clone())
    }

    /// The forge client of the run: everything it sends is redacted.
    pub fn forge(&self, creds: &Credentials) -> Result<Forge> {
        Ok(
            Forge::new(&self.config.forge_url, &self.config.repo, &creds.token)
                .redacting(Redactor::new(&self.env))
                .trusting(&Self::roots()?),
        )
    }

    /// `FORGEJO_AGENT_TOKEN` with the login the forge says it belongs to, or `None` when the project
    /// gives sandboxes no forge access. Refused (a `ConfigError`, one line naming the key): the
    /// orchestrator's own token or login (what the agent posted would count as sandcastle's own), a
    /// login that may push to the repository (the repository's `permissions` as that token sees
    /// them), or a token with a write scope (`Forge::write_scopes`, which writes nothing).
    pub fn agent_login(&self, creds: &Credentials, login: &str) -> Result<Option<Credentials>> {
        let Some(token) = self
            .env
            .get("FORGEJO_AGENT_TOKEN")
            .filter(|t| !t.is_empty())
        else {
            return Ok(None);
        };
        let refuse = |why: String| -> anyhow::Error {
            ConfigError(format!(
                "FORGEJO_AGENT_TOKEN {why}; give sandboxes a token of another login with read access \
                 only to {}, with only the scopes read:issue, read:repository and read:user, or \
                 remove FORGEJO_AGENT_TOKEN from .sandcastle/.env",
                self.config.repo
            ))
            .into()
        };
        if token == creds.token {
            return Err(refuse(
                "is the same token as FORGEJO_TOKEN: sandboxes must never hold the orchestrator's token"
                    .to_string(),
            ));
        }
        let forge = Forge::new(&self.config.forge_url, &self.config.repo, &token)
            .token_name("FORGEJO_AGENT_TOKEN")
            .trusting(&Self::roots()?);
        let user = forge.current_user()?;
        if user == login {
            return Err(refuse(format!(
                "belongs to {user}, the orchestrator's own login: what the agent posts would count as sandcastle's own"
            )));
        }
        if forge.can_push()? {
            return Err(refuse(format!(
                "belongs to {user}, who may push to the repository"
            )));
        }
        let writes = forge.write_scopes()?;
        if !writes.is_empty() {
            let names: Vec<String> = writes.iter().map(ToString::to_string).collect();
            let noun = if names.len() == 1 { "scope" } else { "scopes" };
            return Err(refuse(format!(
                "belongs to {user} and has the {noun} {}: the agent could write on the forge",
                names.join(", ")
            )));
        }
        Ok(Some(Credentials { user, token }))
    }
}

impl Context {
    /// Everything a run needs; asks the forge whose tokens these are, so a rejected token stops
    /// the run before it changes anything.
    pub fn new(settings: Settings) -> Result<Context> {
        let creds = settings.credentials()?;
        let upstream = settings.upstream()?;
        let forge = settings.forge(&creds)?;
        let redactor = Redactor::new(&settings.env);
        let redacted = |e: anyhow::Error| anyhow::anyhow!("{}", redactor.error(&e));
        let login = forge.current_user().map_err(redacted)?;
        let agent_login = settings.agent_login(&creds, &login).map_err(|e| {
            match e.downcast::<ConfigError>() {
                Ok(refused) => refused.into(),
                Err(e) => redacted(e),
            }
        })?;
        // `tea` reads the forge with the sandboxes' own login, as `proxy::FORGE_IN_SANDBOX`.
        let forge_url = settings.config.forge_url.trim_end_matches('/').to_string();
        let run_id = run_id();
        let run_dir = RunDir::create(&run_id)?;
        let proxy = Proxy::start(
            upstream,
            Policy {
                max_cost_per_run: settings.config.budget.max_cost_per_run,
                egress: settings.config.sandbox.egress.clone(),
                forge: agent_login.is_some().then_some(forge_url),
            },
            run_dir.path(),
        )?;
        let progress = Progress::new(redactor.clone());
        let id = settings
            .config
            .cluster
            .id
            .clone()
            .unwrap_or_else(|| format!("{}-{}", sandbox::host_name(), std::process::id()));
        let report = Report::new(&run_id, &id, redactor.clone());
        let remote = git::remote_url(&settings.config.forge_url, &settings.config.repo);
        let clarifies = settings.config.clarify.enabled;
        Ok(Context {
            project: settings.project,
            config: settings.config,
            env: settings.env,
            redactor,
            creds,
            forge,
            login,
            agent_login,
            remote,
            report,
            run_id,
            id,
            progress,
            stopping: AtomicBool::new(false),
            plan_memo: Mutex::new(None),
            warm_cache: WarmCache::default(),
            held_claims: Mutex::new(Vec::new()),
            clarifies,
            handlers: Handlers::detached(),
            proxy,
            run_dir,
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

    /// The orchestrator's own bare repository for one piece of work; never mounted into a sandbox.
    pub fn repo_dir(&self, slug: &str) -> PathBuf {
        self.project
            .join(".sandcastle/repos")
            .join(format!("{slug}.git"))
    }

    pub fn state_dir(&self) -> PathBuf {
        self.logs_dir().join("state")
    }

    /// What every agent process in a sandbox gets, by name on each `docker exec`: the keys
    /// `.sandcastle/.env` declares but the orchestrator's own (`HOST_ONLY_KEYS`), with empty values
    /// filled from the environment, the forge URL (the model's address and placeholder key are
    /// each work's own: `proxy::WorkProxy::sandbox_env`), and the settings that keep Claude Code from
    /// calling anything but the Messages API (without them it looks up and calls Anthropic's other
    /// hosts, and tries to update itself).
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
            if HOST_ONLY_KEYS.contains(&key.as_str()) {
                continue;
            }
            if let Some(value) = self.env.get(key) {
                set(key, value);
            }
        }
        set("SANDCASTLE_FORGE_URL", self.config.forge_url.clone());
        env
    }

    /// The prompt `name` with `vars` and the placeholders every prompt has.
    pub fn prompt(&self, name: &str, vars: &[(&str, &str)]) -> Result<String> {
        let mut all = vec![
            ("REPO", self.config.repo.as_str()),
            ("FORGE_HOST", self.config.forge_host.as_str()),
            (
                "FORGE_ACCESS",
                prompts::forge_access(self.agent_login.is_some()),
            ),
        ];
        all.extend_from_slice(vars);
        prompts::render(&self.project, name, &all)
    }

    /// The `origin` of an agent's checkout: the repository under the forge's name in sandboxes
    /// when `tea` is configured there (tea picks its login for a checkout by the origin's host),
    /// else the forge's own URL.
    pub fn sandbox_remote(&self) -> String {
        match self.agent_login {
            Some(_) => git::remote_url(FORGE_IN_SANDBOX, &self.config.repo),
            None => self.remote.clone(),
        }
    }

    /// What `configure-tea` gets in each sandbox: the read-only login, never the orchestrator's.
    pub fn tea_login(&self) -> Option<TeaLogin<'_>> {
        self.agent_login.as_ref().map(|login| TeaLogin {
            url: FORGE_IN_SANDBOX,
            user: &login.user,
            token: &login.token,
        })
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
