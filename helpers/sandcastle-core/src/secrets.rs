//! `.sandcastle/.env` and redaction of secret values.
//!
//! Error messages and `Debug` output name keys and line numbers, never values.
use anyhow::{Result, bail};
use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use std::fmt;
use std::path::Path;

/// The keys `.sandcastle/.env` declares, with their values; an empty value falls back to the
/// process environment. Only these keys go into sandboxes.
#[derive(Clone, Default)]
pub struct EnvFile {
    pub vars: Vec<(String, String)>,
}

/// Secrets sandcastle knows by name, wherever they come from.
const SECRET_KEYS: [&str; 5] = [
    "FORGEJO_TOKEN",
    "FORGEJO_AGENT_TOKEN",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Shorter values would shred ordinary words when redacted ("1", "true", "debug"): they are not
/// treated as secrets.
const MIN_SECRET_CHARS: usize = 8;

/// Values long enough but too common to redact without garbling ordinary text.
const COMMON_VALUES: [&str; 6] = [
    "disabled",
    "production",
    "development",
    "localhost",
    "password",
    "changeme",
];

/// Words in a key's name that mark its value as a secret.
const SECRET_NAME_WORDS: [&str; 4] = ["TOKEN", "KEY", "SECRET", "PASSWORD"];

/// The shortest run of base64 worth decoding: the encoding of `MIN_SECRET_CHARS` bytes.
const MIN_BASE64_RUN: usize = MIN_SECRET_CHARS.div_ceil(3) * 4;

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
        let file = EnvFile { vars };
        file.refuse_weak_secrets(path, |key| std::env::var(key).ok())?;
        Ok(file)
    }

    /// A key whose name marks a secret (`*TOKEN*`, `*KEY*`, `*SECRET*`, `*PASSWORD*`) with a value too
    /// short or common to redact is an error naming the key: such a value would be shown in logs.
    fn refuse_weak_secrets(
        &self,
        path: &Path,
        process: impl Fn(&str) -> Option<String>,
    ) -> Result<()> {
        let keys = self.vars.iter().map(|(k, _)| k.as_str()).chain(SECRET_KEYS);
        for key in keys {
            let value = self.get_or(key, &process);
            if is_secret_name(key) && value.is_some_and(|v| !is_redactable(&v)) {
                bail!(
                    "{}: {key} is too short or common to keep out of logs (under {MIN_SECRET_CHARS} characters, or a common word); set the real secret, or rename the key if it is no secret",
                    path.display()
                );
            }
        }
        Ok(())
    }

    /// The keys whose values are redacted: the file's keys but `FORGEJO_USER`, then sandcastle's
    /// own secrets, each with a value long and unusual enough to redact.
    pub fn redacted_keys(&self) -> Vec<String> {
        self.secrets(|key| std::env::var(key).ok())
            .into_iter()
            .map(|(key, _)| key.to_string())
            .collect()
    }

    /// The secrets and their keys, each key once, with values from the file or `process`.
    fn secrets(&self, process: impl Fn(&str) -> Option<String>) -> Vec<(&str, String)> {
        let declared = self
            .vars
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !PUBLIC_KEYS.contains(k));
        let mut secrets: Vec<(&str, String)> = Vec::new();
        for key in declared.chain(SECRET_KEYS) {
            if secrets.iter().any(|(k, _)| *k == key) {
                continue;
            }
            if let Some(value) = self.get_or(key, &process).filter(|v| is_redactable(v)) {
                secrets.push((key, value));
            }
        }
        secrets
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

fn is_secret_name(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    SECRET_NAME_WORDS.iter().any(|word| key.contains(word))
}

/// Long and unusual enough to replace wherever it appears without garbling ordinary text.
fn is_redactable(value: &str) -> bool {
    value.chars().count() >= MIN_SECRET_CHARS
        && !COMMON_VALUES.contains(&value.to_ascii_lowercase().as_str())
}

/// Replaces every secret value with `[redacted]`: as written, JSON-escaped, URL-encoded, and inside
/// base64 (of the value, of `user:value` in an `Authorization: Basic` header, of anything holding it).
#[derive(Clone, Default)]
pub struct Redactor {
    /// The forms searched for literally, longest first, so a secret that contains another is
    /// replaced whole.
    secrets: Vec<String>,
    /// The values themselves, looked for in what base64 runs decode to.
    values: Vec<String>,
}

impl Redactor {
    /// Secrets: `FORGEJO_TOKEN`, `FORGEJO_AGENT_TOKEN`, `ANTHROPIC_API_KEY`,
    /// `CLAUDE_CODE_OAUTH_TOKEN` and every key of the env file but `FORGEJO_USER` (values from the env
    /// file or the process environment), when the value is long and unusual enough to redact.
    pub fn new(env: &EnvFile) -> Redactor {
        Redactor::with_process_env(env, |key| std::env::var(key).ok())
    }

    fn with_process_env(env: &EnvFile, process: impl Fn(&str) -> Option<String>) -> Redactor {
        let mut values: Vec<String> = env.secrets(process).into_iter().map(|(_, v)| v).collect();
        values.sort();
        values.dedup();
        let mut secrets: Vec<String> = Vec::new();
        for value in &values {
            // Transcripts are JSON: a value with quotes or backslashes appears escaped there.
            secrets.extend(serde_json::to_string(value).map(|s| s[1..s.len() - 1].to_string()));
            for upper in [false, true] {
                let encoded = url_encoded(value, upper);
                secrets.push(encoded.replace("%20", "+"));
                secrets.push(encoded);
            }
            secrets.push(value.clone());
        }
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets, values }
    }

    /// An error with its causes, on one line, redacted.
    pub fn error(&self, error: &anyhow::Error) -> String {
        self.redact(&format!("{error:#}"))
    }

    /// One left-to-right pass (replacing secret by secret could match inside an earlier
    /// `[redacted]`): at each place a literal form of a secret, else, where a run of base64
    /// characters (standard or URL-safe alphabet, optional padding) starts, the whole run when it
    /// decodes to bytes holding a secret.
    pub fn redact(&self, text: &str) -> String {
        if self.secrets.is_empty() {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        let mut in_run = false;
        while let Some(c) = rest.chars().next() {
            let literal = self.secrets.iter().find(|s| rest.starts_with(s.as_str()));
            let secret_len = literal.map(String::len).or_else(|| {
                let run = base64_run(rest);
                (!in_run && run.len() >= MIN_BASE64_RUN && self.decodes_to_secret(run))
                    .then_some(run.len())
            });
            match secret_len {
                Some(len) => {
                    out.push_str(REDACTED);
                    rest = &rest[len..];
                    in_run = false;
                }
                None => {
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                    in_run = is_base64_char(c);
                }
            }
        }
        out
    }

    fn decodes_to_secret(&self, run: &str) -> bool {
        let indifferent =
            GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
        let engines = [
            GeneralPurpose::new(&base64::alphabet::STANDARD, indifferent),
            GeneralPurpose::new(&base64::alphabet::URL_SAFE, indifferent),
        ];
        engines.iter().any(|engine| {
            engine.decode(run).is_ok_and(|bytes| {
                self.values.iter().any(|value| {
                    let value = value.as_bytes();
                    bytes.windows(value.len()).any(|window| window == value)
                })
            })
        })
    }
}

/// The run of base64 characters `text` starts with, with at most two `=` of padding.
fn base64_run(text: &str) -> &str {
    let body = text.find(|c| !is_base64_char(c)).unwrap_or(text.len());
    let padding = text[body..].len() - text[body..].trim_start_matches('=').len();
    &text[..body + padding.min(2)]
}

fn is_base64_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "+/-_".contains(c)
}

/// `value` with every byte but RFC 3986's unreserved ones written `%XX`.
fn url_encoded(value: &str, upper: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ if upper => format!("%{b:02X}"),
            _ => format!("%{b:02x}"),
        })
        .collect()
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
    fn redacts_every_env_value_longest_first_and_passes_weak_ones_on() {
        let file = env(&[
            ("SHORT", "abcdefgh"),
            ("LONG", "abcdefghijkl"),
            ("TINY", "yes"),
            ("FLAG", "true"),
            ("MODE", "production"),
            ("EMPTY", ""),
        ]);
        let redactor = Redactor::new(&file);
        assert_eq!(
            redactor.redact("x abcdefghijkl y abcdefgh z abc yes true production"),
            "x [redacted] y [redacted] z abc yes true production"
        );
        assert_eq!(file.redacted_keys(), ["SHORT", "LONG"]);
    }

    #[test]
    fn a_secret_named_key_with_a_weak_value_is_refused_naming_the_key() {
        for (text, key) in [
            ("GITHUB_TOKEN=true\n", "GITHUB_TOKEN"),
            ("OTHER=1\nmy_api_key=1\n", "my_api_key"),
            ("DB_PASSWORD=password\n", "DB_PASSWORD"),
            ("CLIENT_SECRET=short\n", "CLIENT_SECRET"),
        ] {
            let err = format!("{:#}", load(text).unwrap_err());
            assert!(
                err.contains(&format!(": {key} is too short or common")),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
        let file = load("DEBUG=1\nFEATURE=true\nAPI_TOKEN=long-enough-token\n").unwrap();
        assert_eq!(file.redacted_keys(), ["API_TOKEN"]);
    }

    #[test]
    fn redacts_base64_and_url_encoded_forms() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let token = "0123456789abcdef0123456789abcdef01234567";
        let password = "p@ss w/rd+more";
        let redactor = Redactor::new(&env(&[("FORGEJO_TOKEN", token), ("PASSWORD", password)]));
        let basic = STANDARD.encode(format!("someone:{token}"));
        assert_eq!(
            redactor.redact(&format!("> Authorization: Basic {basic}\r\n")),
            "> Authorization: Basic [redacted]\r\n"
        );
        for encoded in [
            STANDARD.encode(token),
            URL_SAFE_NO_PAD.encode(format!("x:{password}")),
            STANDARD.encode(format!("{{\"auth\":\"{password}\"}}")),
        ] {
            assert_eq!(redactor.redact(&format!("a {encoded} b")), "a [redacted] b");
        }
        assert_eq!(
            redactor.redact("u=p%40ss%20w%2Frd%2Bmore&v=p%40ss+w%2frd%2bmore"),
            "u=[redacted]&v=[redacted]"
        );
        let harmless = format!("{} aGVsbG8gd29ybGQ=", STANDARD.encode("no secret in here"));
        assert_eq!(redactor.redact(&harmless), harmless);
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
        let redactor = Redactor::new(&env(&[("A", "pa\"ss\\word"), ("B", "redacted")]));
        assert_eq!(
            redactor.redact(r#"{"v":"pa\"ss\\word"}"#),
            r#"{"v":"[redacted]"}"#
        );
        assert_eq!(
            redactor.redact("unredacted redacted"),
            "un[redacted] [redacted]"
        );
        assert_eq!(redactor.redact("üredacted€"), "ü[redacted]€");
    }

    proptest::proptest! {
        /// A secret anywhere in any text, as written or in base64 after any user name, is gone.
        #[test]
        fn no_secret_survives_wherever_it_sits(
            secret in "[a-z0-9]{8,48}",
            before in "[A-Z !:=\"/+_-]{0,40}",
            after in "[A-Z !:=\"/+_-]{0,40}",
            user in "[a-zA-Z]{0,12}",
        ) {
            use base64::engine::general_purpose::STANDARD;
            let redactor = Redactor::new(&env(&[("SOME_TOKEN", &secret)]));
            let basic = STANDARD.encode(format!("{user}:{secret}"));
            for text in [format!("{before}{secret}{after}"), format!("{before} {basic} {after}")] {
                let redacted = redactor.redact(&text);
                proptest::prop_assert!(!redacted.contains(&secret), "{redacted}");
                proptest::prop_assert!(!redacted.contains(&basic), "{redacted}");
            }
        }
    }

    #[test]
    fn debug_output_shows_no_values() {
        let file = env(&[("FORGEJO_TOKEN", "tok-1234567")]);
        let shown = format!("{file:?} {:?}", Redactor::new(&file));
        assert!(shown.contains("FORGEJO_TOKEN"));
        assert!(!shown.contains("tok-1234567"));
    }
}
