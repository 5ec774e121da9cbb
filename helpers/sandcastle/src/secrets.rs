//! `.sandcastle/.env` and redaction of secret values.
//! OWNER: helper H5. Interface fixed; bodies to implement.
use anyhow::Result;
use std::path::Path;

/// The keys `.sandcastle/.env` declares, with their values; an empty value falls back to the
/// process environment. Only these keys go into sandboxes.
#[derive(Debug, Clone, Default)]
pub struct EnvFile {
    pub vars: Vec<(String, String)>,
}

impl EnvFile {
    /// A missing file is an empty set; a malformed line is an error naming the file and line.
    pub fn load(path: &Path) -> Result<EnvFile> { todo!() }
    /// The value of `key` from the file, else from the process environment.
    pub fn get(&self, key: &str) -> Option<String> { todo!() }
}

/// Replaces every secret value with `[redacted]`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {/* values, longest first */}

impl Redactor {
    /// Secrets: `FORGEJO_TOKEN`, `ANTHROPIC_API_KEY`, `CLAUDE_CODE_OAUTH_TOKEN` (from the env file or the
    /// process environment), and every value of the env file.
    pub fn new(env: &EnvFile) -> Redactor { todo!() }
    pub fn redact(&self, text: &str) -> String { todo!() }
}
