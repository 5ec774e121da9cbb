//! `.sandcastle/.env` and redaction of secret values.
//!
//! Error messages and `Debug` output name keys and line numbers, never values.
use anyhow::{Result, bail};
use std::fmt;
use std::path::Path;

/// The keys `.sandcastle/.env` declares, with their values; an empty value falls back to the
/// process environment. Only these keys go into sandboxes.
#[derive(Clone, Default)]
pub struct EnvFile {
    pub vars: Vec<(String, String)>,
}

/// Secrets sandcastle knows by name, wherever they come from.
const SECRET_KEYS: [&str; 4] = [
    "FORGEJO_TOKEN",
    "FORGEJO_AGENT_TOKEN",
    "ANTHROPIC_API_KEY",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Shorter values would shred ordinary words when redacted ("1", "yes", "dev").
const MIN_REDACTED_LEN: usize = 4;

const REDACTED: &str = "[redacted]";

impl EnvFile {
    /// A missing file is an empty set; a malformed line is an error naming the file and line.
    pub fn load(path: &Path) -> Result<EnvFile> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(EnvFile::default()),
            Err(e) => bail!("{}: cannot read: {e}", path.display()),
        };
        let mut vars: Vec<(String, String)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let at = || format!("{}:{}", path.display(), index + 1);
            let Some((key, value)) =
                parse_line(line).map_err(|why| anyhow::anyhow!("{}: {why}", at()))?
            else {
                continue;
            };
            if vars.iter().any(|(k, _)| *k == key) {
                bail!(
                    "{}: {key} is declared twice; keep one of the two lines",
                    at()
                );
            }
            vars.push((key, value));
        }
        Ok(EnvFile { vars })
    }

    /// The value of `key` from the file, else from the process environment.
    pub fn get(&self, key: &str) -> Option<String> {
        self.get_or(key, |key| std::env::var(key).ok())
    }

    /// `get` with the process environment given as `process`, so tests need not change it.
    fn get_or(&self, key: &str, process: impl Fn(&str) -> Option<String>) -> Option<String> {
        let declared = self
            .vars
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone());
        declared
            .filter(|v| !v.is_empty())
            .or_else(|| process(key).filter(|v| !v.is_empty()))
    }
}

impl fmt::Debug for EnvFile {
    /// Keys only: values are secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvFile")
            .field(
                "keys",
                &self.vars.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// One line of a `.env` file: `None` for blank lines and comments. The error text never
/// includes the line itself, which may hold a secret.
fn parse_line(line: &str) -> std::result::Result<Option<(String, String)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = line
        .strip_prefix("export ")
        .map(str::trim_start)
        .unwrap_or(line);
    let Some((key, rest)) = line.split_once('=') else {
        return Err("expected KEY=VALUE but found no '='; write KEY=VALUE or start the line with # to comment it out"
            .to_string());
    };
    let key = key.trim();
    let valid_key = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_key {
        return Err(
            "the key before '=' is not a variable name; use letters, digits and _ (not starting with a digit), e.g. FORGEJO_TOKEN=..."
                .to_string(),
        );
    }
    let value = parse_value(rest.trim_start()).map_err(|why| format!("{key}: {why}"))?;
    Ok(Some((key.to_string(), value)))
}

/// `'literal'`, `"with \" \\ \n escapes"`, or bare text up to an ` #` comment.
fn parse_value(raw: &str) -> std::result::Result<String, String> {
    let mut chars = raw.chars();
    let quote = match chars.next() {
        Some(q @ ('"' | '\'')) => q,
        _ => {
            let bare = match raw.find(" #").or_else(|| raw.find("\t#")) {
                Some(end) => &raw[..end],
                None => raw,
            };
            return Ok(bare.trim_end().to_string());
        }
    };
    let mut value = String::new();
    loop {
        match chars.next() {
            None => {
                return Err(format!(
                    "the value has no closing {quote}; close the quote on the same line"
                ));
            }
            Some(c) if c == quote => break,
            Some('\\') if quote == '"' => match chars.next() {
                Some('n') => value.push('\n'),
                Some(c @ ('"' | '\\' | '$')) => value.push(c),
                Some(c) => {
                    value.push('\\');
                    value.push(c);
                }
                None => {
                    return Err(
                        "the value ends with a lone \\; close the quote on the same line"
                            .to_string(),
                    );
                }
            },
            Some(c) => value.push(c),
        }
    }
    let after = chars.as_str().trim_start();
    if !(after.is_empty() || after.starts_with('#')) {
        return Err(format!(
            "text after the closing {quote}; put the whole value inside the quotes"
        ));
    }
    Ok(value)
}

/// Keys of `.sandcastle/.env` whose values are not secret: the forge login shows in repository
/// paths and in every commit, and hiding it would garble them (`alice/demo` -> `[redacted]/demo`).
const PUBLIC_KEYS: [&str; 1] = ["FORGEJO_USER"];

/// Replaces every secret value with `[redacted]`.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Redactor {
    /// Secrets: `FORGEJO_TOKEN`, `ANTHROPIC_API_KEY`, `CLAUDE_CODE_OAUTH_TOKEN` (from the env file or the
    /// process environment), and every value of the env file.
    pub fn new(env: &EnvFile) -> Redactor {
        Redactor::with_process_env(env, |key| std::env::var(key).ok())
    }

    fn with_process_env(env: &EnvFile, process: impl Fn(&str) -> Option<String>) -> Redactor {
        let named = SECRET_KEYS
            .iter()
            .filter_map(|key| env.get_or(key, &process));
        let declared = env
            .vars
            .iter()
            .filter(|(k, _)| !PUBLIC_KEYS.contains(&k.as_str()))
            .map(|(_, v)| v.clone());
        let mut secrets: Vec<String> = Vec::new();
        for value in named.chain(declared) {
            // Transcripts are JSON: a value with quotes or backslashes appears escaped there.
            let escaped = serde_json::to_string(&value).map(|s| s[1..s.len() - 1].to_string());
            secrets.push(value);
            secrets.extend(escaped);
        }
        secrets.retain(|s| s.len() >= MIN_REDACTED_LEN);
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// An error with its causes, on one line, redacted.
    pub fn error(&self, error: &anyhow::Error) -> String {
        self.redact(&format!("{error:#}"))
    }

    pub fn redact(&self, text: &str) -> String {
        if self.secrets.is_empty() {
            return text.to_string();
        }
        // One left-to-right pass: replacing secret by secret could match inside an
        // earlier "[redacted]".
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            match self.secrets.iter().find(|s| rest.starts_with(s.as_str())) {
                Some(secret) => {
                    out.push_str(REDACTED);
                    rest = &rest[secret.len()..];
                }
                None => {
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
        out
    }
}

impl fmt::Debug for Redactor {
    /// A count only: the values are the secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<EnvFile> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(&path, text).unwrap();
        EnvFile::load(&path)
    }

    fn env(vars: &[(&str, &str)]) -> EnvFile {
        EnvFile {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn parses_the_dotenv_forms() {
        let file = load(
            "# comment\n\nPLAIN=abc def  # trailing comment\nexport EXPORTED=x1\nSINGLE='a \"b\" #c'\n\
             DOUBLE=\"say \\\"hi\\\"\\nnext\" # note\nEMPTY=\n  SPACED = v \nHASH=a#b\n",
        )
        .unwrap();
        let pairs: Vec<(&str, &str)> = file
            .vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("PLAIN", "abc def"),
                ("EXPORTED", "x1"),
                ("SINGLE", "a \"b\" #c"),
                ("DOUBLE", "say \"hi\"\nnext"),
                ("EMPTY", ""),
                ("SPACED", "v"),
                ("HASH", "a#b"),
            ]
        );
    }

    #[test]
    fn a_missing_file_is_empty() {
        let file = EnvFile::load(Path::new("/nonexistent/sandcastle/.env")).unwrap();
        assert!(file.vars.is_empty());
    }

    #[test]
    fn malformed_lines_name_file_and_line_but_not_the_value() {
        let cases = [
            ("OK=1\nsecretvalue-no-equals\n", ":2: expected KEY=VALUE"),
            ("1KEY=secretvalue\n", ":1: the key before '='"),
            (
                "KEY=\"secretvalue\n",
                ":1: KEY: the value has no closing \"",
            ),
            (
                "KEY='secretvalue' extra\n",
                ":1: KEY: text after the closing '",
            ),
            ("KEY=a\nKEY=secretvalue\n", ":2: KEY is declared twice"),
        ];
        for (text, expected) in cases {
            let err = load(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{err:?} lacks {expected:?}");
            assert!(err.contains(".env:"), "{err:?} names no file");
            assert!(!err.contains("secretvalue"), "{err:?} leaks the value");
            assert!(!err.contains('\n'), "{err:?} is not one line");
        }
    }

    #[test]
    fn get_falls_back_to_the_process_environment() {
        // Unique names: tests run in parallel within one process.
        // SAFETY: no other test reads or writes these variables.
        unsafe {
            std::env::set_var("SANDCASTLE_TEST_FALLBACK_EMPTY", "from-process");
            std::env::set_var("SANDCASTLE_TEST_FALLBACK_SET", "from-process");
            std::env::set_var("SANDCASTLE_TEST_FALLBACK_UNDECLARED", "from-process");
        }
        let file = env(&[
            ("SANDCASTLE_TEST_FALLBACK_EMPTY", ""),
            ("SANDCASTLE_TEST_FALLBACK_SET", "from-file"),
        ]);
        assert_eq!(
            file.get("SANDCASTLE_TEST_FALLBACK_EMPTY").as_deref(),
            Some("from-process")
        );
        assert_eq!(
            file.get("SANDCASTLE_TEST_FALLBACK_SET").as_deref(),
            Some("from-file")
        );
        assert_eq!(
            file.get("SANDCASTLE_TEST_FALLBACK_UNDECLARED").as_deref(),
            Some("from-process")
        );
        assert_eq!(file.get("SANDCASTLE_TEST_FALLBACK_NOWHERE"), None);
    }

    #[test]
    fn redacts_every_env_value_longest_first() {
        let file = env(&[
            ("SHORT", "abcd"),
            ("LONG", "abcdefgh"),
            ("TINY", "yes"),
            ("EMPTY", ""),
        ]);
        let redactor = Redactor::new(&file);
        assert_eq!(
            redactor.redact("x abcdefgh y abcd z abc yes"),
            "x [redacted] y [redacted] z abc yes"
        );
    }

    #[test]
    fn the_forge_login_is_not_a_secret() {
        let file = env(&[("FORGEJO_USER", "alice"), ("FORGEJO_TOKEN", "tok-12345")]);
        let redactor = Redactor::new(&file);
        assert_eq!(
            redactor.redact("alice/demo tok-12345"),
            "alice/demo [redacted]"
        );
    }

    #[test]
    fn redacts_named_secrets_from_the_file_or_the_process_environment() {
        let process = |key: &str| match key {
            "CLAUDE_CODE_OAUTH_TOKEN" => Some("oauth-from-process".to_string()),
            "FORGEJO_TOKEN" => Some("forgejo-from-process".to_string()),
            "UNDECLARED_OTHER" => Some("not-a-secret".to_string()),
            _ => None,
        };
        let file = env(&[("FORGEJO_TOKEN", ""), ("ANTHROPIC_API_KEY", "sk-from-file")]);
        let redactor = Redactor::with_process_env(&file, process);
        assert_eq!(
            redactor.redact("oauth-from-process forgejo-from-process sk-from-file not-a-secret"),
            "[redacted] [redacted] [redacted] not-a-secret"
        );
    }

    #[test]
    fn redacts_json_escaped_values_and_not_inside_the_marker() {
        let redactor = Redactor::new(&env(&[("A", "pa\"ss\\word"), ("B", "acted")]));
        assert_eq!(
            redactor.redact(r#"{"v":"pa\"ss\\word"}"#),
            r#"{"v":"[redacted]"}"#
        );
        assert_eq!(redactor.redact("reacted acted"), "re[redacted] [redacted]");
        assert_eq!(redactor.redact("üacted€"), "ü[redacted]€");
    }

    #[test]
    fn debug_output_shows_no_values() {
        let file = env(&[("FORGEJO_TOKEN", "tok-1234567")]);
        let shown = format!("{file:?} {:?}", Redactor::new(&file));
        assert!(shown.contains("FORGEJO_TOKEN"));
        assert!(!shown.contains("tok-1234567"));
    }
}
