//! `.sandcastle/config.toml` -> a resolved, validated [`Config`]. The one seam through which every
//! project setting flows: `load-config`, `fmt`, `check` and `sandcastle` all call [`load`].
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

mod defaults;
mod forge;
mod image;
mod mounts;
mod read;
pub mod reference;
mod source;
mod suggest;

pub use forge::forge_url;
pub use image::name_and_tag as image_name_and_tag;
pub use mounts::mount_refused;
pub use read::memory_size as memory_bytes;

/// The conventional location, relative to a project's root.
pub const DEFAULT_PATH: &str = ".sandcastle/config.toml";

/// Serialises as `load-config` prints it: keys spelled as in the TOML, plus `forgeUrl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// `owner/name`.
    pub repo: String,
    /// As written: a host (`forge.example.dev`) or a URL (`http://127.0.0.1:3000`).
    pub forge_host: String,
    /// The forge's base URL, no trailing slash: `https://forge.example.dev`, `http://127.0.0.1:3000`.
    pub forge_url: String,
    pub image_name: String,
    pub max_iterations: u32,
    pub max_concurrency: u32,
    /// No agent output for this long fails the iteration. `idleTimeout = "10m"`.
    #[serde(serialize_with = "human_duration")]
    pub idle_timeout: Duration,
    /// How long `sandcastle run` waits after a pass that found nothing to do. `pollInterval = "1m"`.
    #[serde(serialize_with = "human_duration")]
    pub poll_interval: Duration,
    pub models: Models,
    pub commands: Commands,
    pub sandbox: Sandbox,
    pub review: Review,
    pub implement: Implement,
    pub budget: Budget,
    pub cluster: Cluster,
    pub questions: Questions,
    pub asks: Asks,
    pub clarify: Clarify,
    pub publish: Publish,
    pub autopilot: Autopilot,
}

/// The most attempts one issue may get: `[implement] attempts`, and an issue's own override.
pub const MAX_ATTEMPTS: u32 = 4;

/// How an issue is implemented.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Implement {
    /// Independent implementers per issue (1 to [`MAX_ATTEMPTS`]); the reviewer chooses among
    /// those the gate passed.
    pub attempts: u32,
}

/// Keeping sandcastle's own pull requests mergeable: failing CI and merge conflicts go back to the
/// pr-fixer, at most so many rounds per pull request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Autopilot {
    pub enabled: bool,
    /// Rounds that fix a failing CI status, per pull request.
    pub ci_rounds: u32,
    /// Rounds that merge the default branch into a conflicting pull request, per pull request.
    pub conflict_rounds: u32,
}

/// What finished work may carry to the forge.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Publish {
    /// Push changes to what CI runs (the `workflows/` and `actions/` folders of `.forgejo/`,
    /// `.gitea/`, `.github/`, any `action.yml`), judged against the base branch, which run with the
    /// repository's secrets once pushed; `false`: such work stops with one comment naming them.
    pub allow_workflow_changes: bool,
}

/// Asks that do not stop the agent (`sandcastle ask`), put to a person through the question handlers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Asks {
    /// Off without an `[asks]` table: agents are not taught `sandcastle ask`, get no `ask` tool, and
    /// an ask made anyway is refused in the sandbox and never published.
    pub enabled: bool,
}

/// The assessment of an issue before work starts, and the questions it may ask a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Clarify {
    /// Off without a `[clarify]` table: issues start without an assessment.
    pub enabled: bool,
    /// Completeness (0 to 1) from which an issue is clear enough to start work.
    pub threshold: f64,
    /// At most this many questions, one a round, before work starts anyway.
    pub max_rounds: u32,
    /// An assessment that takes longer is stopped and counts as degraded: work starts.
    #[serde(serialize_with = "human_duration")]
    pub timeout: Duration,
}

/// Several orchestrators on one forge: each claims work with a lease the others can see.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// This orchestrator's name in claims, logs and reports; `None`: host name and process id.
    pub id: Option<String>,
    /// How long a claim holds without renewal: a crashed holder's work is free again after it.
    #[serde(serialize_with = "human_duration")]
    pub lease_ttl: Duration,
}

impl Default for Cluster {
    fn default() -> Cluster {
        Cluster {
            id: None,
            lease_ttl: defaults::LEASE_TTL,
        }
    }
}

/// How an agent's question waits for a person.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Questions {
    /// Off without a `[questions]` table: agents are not taught the question signal, and nothing
    /// waits for a person.
    pub enabled: bool,
    /// The waits between reads of the issue's comments; the last repeats.
    #[serde(serialize_with = "human_durations")]
    pub poll_backoff: Vec<Duration>,
    /// How long a question waits before the run records a timeout and says so on the issue.
    #[serde(serialize_with = "human_duration")]
    pub timeout: Duration,
    /// Logins whose replies count besides those with write access to the repository.
    pub responders: Vec<String>,
    /// Where a question goes, in order; one that cannot reach a person in a run is skipped there.
    pub handlers: Vec<Handler>,
    /// The `command` handler's argv: questions as JSON on stdin, answers as JSON on stdout.
    pub command: Option<Vec<String>>,
}

/// A way to put an agent's question to a person (`[questions] handlers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Handler {
    /// A prompt on the terminal `sandcastle run` is attached to.
    Terminal,
    /// A comment on the issue, with `needs-info`; replies read back from its comments.
    Forge,
    /// `[questions] command`, run with the questions on stdin.
    Command,
}

impl Handler {
    pub const ALL: [Handler; 3] = [Handler::Terminal, Handler::Forge, Handler::Command];

    /// As written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Handler::Terminal => "terminal",
            Handler::Forge => "forge",
            Handler::Command => "command",
        }
    }
}

impl std::fmt::Display for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What work may cost, in US dollars as sandcastle's model proxy meters it from the API's answers;
/// no key, no limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    pub max_cost_per_issue: Option<f64>,
    pub max_cost_per_run: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Review {
    /// Whether an issue's work (and a green round's) goes to the reviewer before its pull
    /// request opens; without, the pull request opens once the gate passes.
    pub enabled: bool,
    /// How many times the reviewer may send the work back before the pull request opens anyway.
    pub rounds: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Models {
    pub planner: String,
    pub implementer: String,
    pub reviewer: String,
    pub pr_fixer: String,
    /// Scores how complete an issue is before work starts (`[clarify]`).
    pub assessor: String,
}

/// Each step is an argv list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Commands {
    pub check: Vec<Vec<String>>,
    pub fmt: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sandbox {
    /// `docker run --network`; default `none` (loopback only: the model and the allowed hosts are
    /// reached through sandcastle's proxy).
    pub network: Network,
    /// `docker run --memory`; default `4g`.
    pub memory: String,
    /// `docker run --pids-limit`; default 1024.
    pub pids_limit: u32,
    /// Extra read-only mounts, `host:container`.
    pub mounts: Vec<String>,
    /// The longest an agent turn, or one gate step, may run, output or not; default 60 minutes.
    #[serde(serialize_with = "human_duration")]
    pub turn_timeout: Duration,
    /// The hosts a sandbox may reach through sandcastle's proxy (`HTTPS_PROXY`/`HTTP_PROXY`);
    /// default none.
    pub egress: Vec<Egress>,
    /// `docker run --runtime` for every sandbox; default none: the engine's default runtime.
    pub runtime: Option<String>,
}

/// One `[sandbox] egress` entry: a host name (or IP address), or `*.suffix` for every name under
/// it, with an optional port; without one, ports 443 and 80.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Egress {
    /// Lower case; `*.example.com` as written.
    pub host: String,
    pub port: Option<u16>,
}

impl Egress {
    /// `name`, `*.suffix`, `name:port`; `None` for anything else.
    pub fn parse(entry: &str) -> Option<Egress> {
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port.parse::<u16>().ok().filter(|p| *p > 0)?)),
            None => (entry, None),
        };
        let name = host.strip_prefix("*.").unwrap_or(host);
        let valid = !name.is_empty()
            && name.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            });
        valid.then(|| Egress {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether a request to `host`:`port` is this entry's.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let named = match self.host.strip_prefix("*.") {
            Some(suffix) => host
                .strip_suffix(suffix)
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => host == self.host,
        };
        named && self.port.map_or(port == 443 || port == 80, |p| p == port)
    }
}

impl std::fmt::Display for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// The network a sandbox's container is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Network {
    /// Loopback only: everything goes through sandcastle's proxy.
    None,
    /// Docker's default bridge: direct network access.
    Bridge,
    /// The host's network: direct network access, and the host's own loopback services.
    Host,
}

impl Network {
    pub const ALL: [Network; 3] = [Network::None, Network::Bridge, Network::Host];

    /// As written in the config and given to `docker run --network`.
    pub fn name(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Bridge => "bridge",
            Network::Host => "host",
        }
    }

    /// Whether a sandbox on it reaches other hosts without the proxy.
    pub fn is_direct(self) -> bool {
        self != Network::None
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A one-line error naming the file, `line:column` where known, and the fix.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

/// Reads and validates the file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigError(match error.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{shown}: no such file; create it with at least `repo = \"owner/name\"` and \
                 `forgeHost = \"forge.example.dev\"`"
            ),
            std::io::ErrorKind::InvalidData => format!("{shown}: not UTF-8 text; save it as UTF-8"),
            _ => format!("{shown}: cannot read it ({error}); make it a readable file"),
        })
    })?;
    parse(path, &text)
}

/// Validates TOML text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let source = source::Source { path, text };
    let document = toml_edit::Document::parse(text).map_err(|error| {
        source.error(
            error.span(),
            format!(
                "TOML syntax error: {}; correct the TOML at this line:column",
                error.message().trim()
            ),
        )
    })?;
    read::config(&source, document.as_table())
}

/// `.sandcastle/config.toml` in `start` or its nearest ancestor that has one.
pub fn find(start: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(start).ok()?;
    start
        .ancestors()
        .map(|directory| directory.join(DEFAULT_PATH))
        // `exists`, not `is_file`: a broken config should be reported, not skipped.
        .find(|candidate| candidate.exists())
}

/// `"10m"`, `"1h 30m"`: the form the TOML takes.
fn human_duration<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*duration))
}

fn human_durations<S: serde::Serializer>(
    durations: &[Duration],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(
        durations
            .iter()
            .map(|d| humantime::format_duration(*d).to_string()),
    )
}

impl Default for Commands {
    /// The seed's Rust commands.
    fn default() -> Commands {
        let argv = |words: &[&str]| words.iter().map(|word| word.to_string()).collect();
        Commands {
            check: vec![
                argv(&["cargo", "fmt", "--check"]),
                argv(&["cargo", "clippy", "--all-targets", "--", "-D", "warnings"]),
                argv(&["cargo", "test"]),
            ],
            fmt: vec![
                argv(&[
                    "cargo",
                    "clippy",
                    "--fix",
                    "--allow-dirty",
                    "--allow-staged",
                    "--",
                    "-D",
                    "warnings",
                ]),
                argv(&["cargo", "fmt"]),
            ],
        }
    }
}

#[cfg(test)]
mod egress_tests {
    use super::Egress;

    #[test]
    fn an_entry_allows_its_names_on_its_port_or_the_web_ports() {
        let exact = Egress::parse("index.crates.io").unwrap();
        assert!(exact.allows("index.crates.io", 443) && exact.allows("INDEX.crates.io.", 80));
        assert!(!exact.allows("index.crates.io", 22) && !exact.allows("crates.io", 443));
        let suffix = Egress::parse("*.example.com:8443").unwrap();
        assert!(suffix.allows("a.b.example.com", 8443));
        assert!(!suffix.allows("example.com", 8443) && !suffix.allows("badexample.com", 8443));
        assert!(!suffix.allows("a.example.com", 443));
        let address = Egress::parse("127.0.0.1:3000").unwrap();
        assert!(address.allows("127.0.0.1", 3000) && !address.allows("127.0.0.2", 3000));
        for bad in [
            "",
            "*.",
            "a..b",
            "x.org:",
            "x.org:99999",
            "http://x.org",
            "-x.org",
            "a b",
        ] {
            assert_eq!(Egress::parse(bad), None, "{bad:?}");
        }
    }
}
