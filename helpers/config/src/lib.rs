//! `.sandcastle/config.toml` -> a resolved, validated [`Config`]. The one seam through which every
//! project setting flows: `load-config`, `fmt`, `check` and `sandcastle` all call [`load`].
//! OWNER: helper H1. Interface fixed (add fields, keep these); bodies to implement.
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The conventional location, relative to a project's root.
pub const DEFAULT_PATH: &str = ".sandcastle/config.toml";

#[derive(Debug, Clone, PartialEq)]
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
    pub idle_timeout: Duration,
    /// How long `sandcastle run` waits after a pass that found nothing to do. `pollInterval = "1m"`.
    pub poll_interval: Duration,
    pub models: Models,
    pub commands: Commands,
    pub sandbox: Sandbox,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Models {
    pub planner: String,
    pub implementer: String,
    pub reviewer: String,
    pub pr_fixer: String,
}

/// Each step is an argv list.
#[derive(Debug, Clone, PartialEq)]
pub struct Commands {
    pub check: Vec<Vec<String>>,
    pub fmt: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sandbox {
    /// `docker run --network`; default `bridge`.
    pub network: String,
    /// `docker run --memory`; default `4g`.
    pub memory: String,
    /// `docker run --pids-limit`; default 1024.
    pub pids_limit: u32,
    /// Extra read-only mounts, `host:container`.
    pub mounts: Vec<String>,
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
pub fn load(path: &Path) -> Result<Config, ConfigError> { todo!() }

/// Validates TOML text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> { todo!() }

/// `.sandcastle/config.toml` in `start` or its nearest ancestor that has one.
pub fn find(start: &Path) -> Option<PathBuf> { todo!() }

impl Config {
    /// The resolved config as JSON, keys spelled as in the TOML (plus `forgeUrl`).
    pub fn to_json(&self) -> serde_json::Value { todo!() }
}

impl Default for Commands {
    /// The seed's Rust commands.
    fn default() -> Commands { todo!() }
}
