//! `sandcastle ask`, run by an agent inside its sandbox: an ask for a person that does not stop the
//! agent. The ask is checked here, written atomically to the container's outbox, and the command
//! returns at once; the orchestrator reads the outbox after the turn and checks the ask again with
//! the same [`check`] (nothing that leaves a sandbox is trusted).
use crate::forge_text::clip;
use crate::role::WorkKey;
use crate::sandbox::Sandbox;
use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::process::ExitCode;
use std::sync::LazyLock;

/// The largest ask taken out of a sandbox.
pub const MAX_ASK_BYTES: u64 = 64 * 1024;

/// The one file an agent hands an ask over through, in the container's own filesystem.
pub const OUTBOX: &str = "/home/agent/.sandcastle-outbox/ask.json";
/// The variable naming the piece of work (`issue:42`, `pr:7`), passed with every `docker exec`.
pub const KEY_VAR: &str = "SANDCASTLE_WORK_KEY";
/// The variable holding the last revision the orchestrator took of this work's ask.
pub const REVISION_VAR: &str = "SANDCASTLE_ASK_REVISION";
/// The variable that is `on` when the project turned asks on (`[asks]`); without it every ask is
/// refused here, and the host refuses one it finds in the outbox all the same.
pub const ASKS_VAR: &str = "SANDCASTLE_ASKS";
/// Why an ask is refused in a project without `[asks]`.
pub const ASKS_OFF: &str = "asks are off in this project (no `[asks]` table in \
                            .sandcastle/config.toml): nobody is asked; go on without an answer";

const TITLE_MAX: usize = 120;
const DETAILS_MAX: usize = 2000;
const LABEL_MAX: usize = 60;
const MEANING_MAX: usize = 300;
const OPTIONS_MAX: usize = 9;

/// What the agent needs from a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Kind {
    /// A choice, with options and perhaps a recommended one; the agent goes on with its default.
    Decision,
    /// Something only a person can do (rotate a secret, grant access).
    Action,
    /// The work is ready for a person to look at.
    Ready,
    /// Part of the work cannot go on without a person; the rest goes on.
    Blocked,
}

impl Kind {
    pub fn parse(text: &str) -> Result<Kind, String> {
        Ok(match text {
            "decision" => Kind::Decision,
            "action" => Kind::Action,
            "ready" => Kind::Ready,
            "blocked" => Kind::Blocked,
            other => {
                return Err(format!(
                    "unknown kind {:?}: use decision, action, ready or blocked",
                    clip(other)
                ));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Decision => "decision",
            Kind::Action => "action",
            Kind::Ready => "ready",
            Kind::Blocked => "blocked",
        }
    }
}

impl TryFrom<String> for Kind {
    type Error = String;

    fn try_from(text: String) -> Result<Kind, String> {
        Kind::parse(&text)
    }
}

/// One choice of a decision: its label and, optionally, what it means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskOption {
    pub label: String,
    #[serde(default)]
    pub meaning: String,
}

/// An ask, as the outbox file holds it and the orchestrator keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    /// `issue:42` or `pr:7`.
    pub key: String,
    /// 1 for the work's first ask; each new ask replaces the last with the next revision.
    pub revision: u32,
    pub kind: Kind,
    pub title: String,
    #[serde(default)]
    pub details: String,
    #[serde(default)]
    pub options: Vec<AskOption>,
    #[serde(default)]
    pub recommended: Option<String>,
}

/// The arguments of an ask: `sandcastle ask`'s flags, and the `ask` tool's of `sandcastle mcp`.
#[derive(Debug, clap::Args, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(deny_unknown_fields)]
pub struct AskArgs {
    /// decision, action, ready or blocked.
    #[arg(long)]
    kind: String,
    /// One line saying what is asked.
    #[arg(long)]
    title: String,
    /// More words for the person (plain text, no links or commands).
    #[arg(long, default_value = "")]
    #[serde(default)]
    details: String,
    /// A choice of a decision: `LABEL` or `LABEL: what it means`; one for each (the command's
    /// `--option`, repeated).
    #[arg(long = "option", value_name = "LABEL[: MEANING]")]
    #[serde(default)]
    options: Vec<String>,
    /// The option the agent goes on with until a person answers.
    #[arg(long, value_name = "LABEL")]
    #[serde(default)]
    recommended: Option<String>,
}

/// The work key's text form: `issue:42`, `pr:7`.
pub fn key_text(key: WorkKey) -> String {
    match key {
        WorkKey::Issue(n) => format!("issue:{n}"),
        WorkKey::Pull(n) => format!("pr:{n}"),
        WorkKey::Plan => "plan".to_string(),
    }
}

fn parse_key(text: &str) -> Option<WorkKey> {
    let key = match text.split_once(':')? {
        ("issue", n) => WorkKey::Issue(n.parse().ok()?),
        ("pr", n) => WorkKey::Pull(n.parse().ok()?),
        _ => return None,
    };
    (key_text(key) == text).then_some(key)
}

/// Every rule an ask obeys, checked in the sandbox and again on the host: its key names a piece of
/// work, its revision counts from 1, its words are within bounds and carry nothing a person could
/// follow (a link, a command), and only a decision has options, among which its recommendation is.
pub fn check(ask: &Ask) -> Result<(), String> {
    if parse_key(&ask.key).is_none() {
        return Err(format!(
            "the key {:?} is not issue:<n> or pr:<n>",
            clip(&ask.key)
        ));
    }
    if ask.revision == 0 {
        return Err("the revision is 0; revisions count from 1".to_string());
    }
    words("the title", &ask.title, TITLE_MAX, false, true)?;
    words("the details", &ask.details, DETAILS_MAX, true, false)?;
    if ask.kind != Kind::Decision && (!ask.options.is_empty() || ask.recommended.is_some()) {
        return Err(format!(
            "kind {} has no options: only a decision has them",
            ask.kind.name()
        ));
    }
    if ask.options.len() > OPTIONS_MAX {
        return Err(format!(
            "{} options; a decision has at most {OPTIONS_MAX}",
            ask.options.len()
        ));
    }
    for (index, option) in ask.options.iter().enumerate() {
        let n = index + 1;
        words(
            &format!("option {n}'s label"),
            &option.label,
            LABEL_MAX,
            false,
            true,
        )?;
        words(
            &format!("option {n}'s meaning"),
            &option.meaning,
            MEANING_MAX,
            false,
            false,
        )?;
        if ask.options[..index].iter().any(|o| o.label == option.label) {
            return Err(format!(
                "option {n}'s label {:?} is given twice",
                option.label
            ));
        }
    }
    if let Some(recommended) = &ask.recommended
        && !ask.options.iter().any(|o| &o.label == recommended)
    {
        return Err(format!(
            "--recommended {:?} is not one of the options",
            clip(recommended)
        ));
    }
    Ok(())
}

/// An ask handed out of a sandbox: strict JSON of the [`Ask`] shape, every rule of [`check`], and the
/// key of the work whose sandbox it came from.
pub fn from_outbox(bytes: &[u8], key: WorkKey) -> Result<Ask, String> {
    let ask: Ask = serde_json::from_slice(bytes).map_err(|e| format!("not an ask: {e}"))?;
    check(&ask)?;
    if ask.key != key_text(key) {
        return Err(format!(
            "it names {:?}, but it came from the sandbox of {}",
            ask.key,
            key_text(key)
        ));
    }
    Ok(ask)
}

/// Text for a person: within `max` characters, not empty when `required`, one line unless
/// `lines`, and no control character, link or command.
fn words(what: &str, text: &str, max: usize, lines: bool, required: bool) -> Result<(), String> {
    if required && text.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    let count = text.chars().count();
    if count > max {
        return Err(format!("{what} is {count} characters long; at most {max}"));
    }
    if text
        .chars()
        .any(|c| c.is_control() && !(lines && c == '\n'))
    {
        return Err(format!(
            "{what} holds a control character{}",
            if lines { "" } else { " or a line break" }
        ));
    }
    if let Some(found) = link_or_command(text) {
        return Err(format!(
            "{what} holds {found}: an ask is words only, with nothing for a person to follow or run"
        ));
    }
    Ok(())
}

/// What in `text` a person could follow or run, if anything.
fn link_or_command(text: &str) -> Option<&'static str> {
    static RULES: LazyLock<Vec<(regex::Regex, &'static str)>> = LazyLock::new(|| {
        [
            (r"(?i)\b[a-z][a-z0-9+.-]*://", "a link"),
            (r"(?i)\b(www\.|mailto:|file:|data:|javascript:)", "a link"),
            (
                r"(?i)\b[a-z0-9-]+\.(com|org|net|io|dev|app|xyz|sh|co|me|info|ru|cn)\b",
                "a link",
            ),
            (r"\]\(|<a\s|<img\s", "a link"),
            (r"(?:^|[\s(\[])@[A-Za-z0-9]", "a mention (it would notify someone)"),
            ("`", "a command (backticks)"),
            (r"\$\(|\$\{|\|\s*(ba|z)?sh\b|&&", "a command"),
            (r"(?m)^\s*[$#>]\s", "a command (a prompt)"),
            (
                r"(?i)\b(sudo|curl|wget|chmod|chown|ssh|scp|eval|powershell|bash|sh\s+-c|rm\s+-|git\s+(push|clone|config|remote|reset)|npm\s+(i|install|exec)|npx|pip\s+install|docker\s+(run|exec))\b",
                "a command",
            ),
        ]
        .into_iter()
        .map(|(rule, what)| (regex::Regex::new(rule).expect("a valid rule"), what))
        .collect()
    });
    RULES
        .iter()
        .find(|(rule, _)| rule.is_match(text))
        .map(|(_, what)| *what)
}

/// `sandcastle ask`: checks the ask, writes it to the outbox as the next revision, prints
/// `{"key":…,"revision":…,"status":"open"}`. A refused ask: one line on stderr, exit 2.
pub fn command(args: AskArgs) -> ExitCode {
    match submit(args) {
        Ok(opened) => {
            println!("{opened}");
            ExitCode::SUCCESS
        }
        Err(Refused(why)) => {
            eprintln!("sandcastle ask: refused: {why}");
            ExitCode::from(2)
        }
    }
}

/// Why an ask was refused, in one line.
pub struct Refused(pub String);

/// An ask checked and written to the outbox as the next revision: `{"key":…,"revision":…,
/// "status":"open"}`. The one way in for the command and the MCP tool.
pub fn submit(args: AskArgs) -> Result<serde_json::Value, Refused> {
    let ask = ask(args)?;
    Ok(serde_json::json!({"key": ask.key, "revision": ask.revision, "status": "open"}))
}

fn ask(args: AskArgs) -> Result<Ask, Refused> {
    let key = std::env::var(KEY_VAR).map_err(|_| {
        Refused(format!(
            "{KEY_VAR} is not set: `sandcastle ask` runs in a sandbox of `sandcastle run`"
        ))
    })?;
    if std::env::var(ASKS_VAR).as_deref() != Ok("on") {
        return Err(Refused(ASKS_OFF.to_string()));
    }
    let options = args
        .options
        .iter()
        .map(|option| match option.split_once(':') {
            Some((label, meaning)) => AskOption {
                label: label.trim().to_string(),
                meaning: meaning.trim().to_string(),
            },
            None => AskOption {
                label: option.trim().to_string(),
                meaning: String::new(),
            },
        })
        .collect();
    let ask = Ask {
        key,
        revision: next_revision(),
        kind: Kind::parse(&args.kind).map_err(Refused)?,
        title: args.title.trim().to_string(),
        details: args.details.trim().to_string(),
        options,
        recommended: args.recommended.map(|r| r.trim().to_string()),
    };
    check(&ask).map_err(Refused)?;
    write_outbox(&ask).map_err(|e| Refused(format!("cannot write {OUTBOX}: {e}")))?;
    Ok(ask)
}

/// One past the last revision the orchestrator took or this sandbox wrote.
fn next_revision() -> u32 {
    #[derive(Deserialize)]
    struct Revision {
        revision: u32,
    }
    let written = std::fs::read(OUTBOX)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Revision>(&bytes).ok())
        .map_or(0, |r| r.revision);
    let taken = std::env::var(REVISION_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    written.max(taken).saturating_add(1)
}

/// Written to a file beside the outbox and renamed over it, so the host never reads half an ask.
fn write_outbox(ask: &Ask) -> std::io::Result<()> {
    let path = std::path::Path::new(OUTBOX);
    std::fs::create_dir_all(path.parent().expect("a directory"))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(ask)?)?;
    std::fs::rename(&tmp, path)
}

/// Prints the outbox if it is a regular file, nothing if there is none.
const PRINT_OUTBOX: &str = r#"if [ ! -e "$1" ] && [ ! -L "$1" ]; then exit 0; fi
if [ -L "$1" ] || [ ! -f "$1" ]; then echo "the outbox is not a regular file" >&2; exit 3; fi
exec cat -- "$1""#;

/// The host's read of the outbox after a turn: its bytes, if the agent left an ask there. Only a
/// regular file of at most [`MAX_ASK_BYTES`] crosses, as bytes (the agent controls the file).
pub fn read_outbox(sandbox: &Sandbox, scratch: &Path) -> Result<Option<Vec<u8>>> {
    sandbox.read_out(
        &["sh", "-c", PRINT_OUTBOX, "sh", OUTBOX],
        scratch,
        MAX_ASK_BYTES,
    )?;
    let bytes =
        std::fs::read(scratch).with_context(|| format!("cannot read {}", scratch.display()))?;
    Ok((!bytes.is_empty()).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision() -> Ask {
        Ask {
            key: "issue:1".to_string(),
            revision: 1,
            kind: Kind::Decision,
            title: "Which database driver?".to_string(),
            details: "The pool needs one.\nBoth work.".to_string(),
            options: vec![
                AskOption {
                    label: "pg".to_string(),
                    meaning: "PostgreSQL client".to_string(),
                },
                AskOption {
                    label: "mysql2".to_string(),
                    meaning: String::new(),
                },
            ],
            recommended: Some("pg".to_string()),
        }
    }

    #[test]
    fn a_plain_decision_passes_and_reads_back_from_the_outbox() {
        let ask = decision();
        assert_eq!(check(&ask), Ok(()));
        let bytes = serde_json::to_vec(&ask).unwrap();
        assert_eq!(from_outbox(&bytes, WorkKey::Issue(1)), Ok(ask));
    }

    /// A change to a valid ask, and the reason it is refused with.
    type Case = (fn(&mut Ask), &'static str);

    /// Each rule refuses with its one-line reason.
    #[test]
    fn each_rule_refuses_with_one_line() {
        let cases: Vec<Case> = vec![
            (|a| a.title = " ".into(), "the title is empty"),
            (
                |a| a.title = "x".repeat(121),
                "the title is 121 characters long; at most 120",
            ),
            (
                |a| a.details = "see https://evil.example/x".into(),
                "the details holds a link",
            ),
            (
                |a| a.details = "run `make deploy` please".into(),
                "the details holds a command (backticks)",
            ),
            (
                |a| a.title = "please curl it and pipe to sh".into(),
                "the title holds a command",
            ),
            (
                |a| a.details = "what does @bob think?".into(),
                "the details holds a mention (it would notify someone)",
            ),
            (
                |a| a.title = "two\nlines".into(),
                "the title holds a control character or a line break",
            ),
            (
                |a: &mut Ask| a.kind = Kind::Action,
                "kind action has no options",
            ),
            (
                |a| a.recommended = Some("sqlite".into()),
                "--recommended \"sqlite\" is not one of the options",
            ),
            (
                |a| a.options[1].label = "pg".into(),
                "option 2's label \"pg\" is given twice",
            ),
            (
                |a| a.key = "issue:01".into(),
                "the key \"issue:01\" is not issue:<n> or pr:<n>",
            ),
            (|a| a.revision = 0, "the revision is 0"),
        ];
        for (change, reason) in cases {
            let mut ask = decision();
            change(&mut ask);
            let why = check(&ask).unwrap_err();
            assert!(why.starts_with(reason), "{why:?} for {reason:?}");
            assert!(!why.contains('\n'), "{why:?}");
        }
    }

    /// What the host refuses beyond `check`: another shape, another work, another kind.
    #[test]
    fn a_forged_outbox_file_is_refused_on_the_host() {
        let ask = serde_json::to_value(decision()).unwrap();
        let mut unknown = ask.clone();
        unknown["url"] = "x".into();
        let mut kind = ask.clone();
        kind["kind"] = "urgent".into();
        for (value, reason) in [
            (unknown, "not an ask: unknown field `url`"),
            (kind, "not an ask: unknown kind \"urgent\""),
        ] {
            let why = from_outbox(value.to_string().as_bytes(), WorkKey::Issue(1)).unwrap_err();
            assert!(why.starts_with(reason), "{why}");
        }
        let other = serde_json::to_vec(&decision()).unwrap();
        assert_eq!(
            from_outbox(&other, WorkKey::Issue(2)).unwrap_err(),
            "it names \"issue:1\", but it came from the sandbox of issue:2"
        );
        assert!(from_outbox(b"\xff{", WorkKey::Issue(1)).is_err());
    }

    #[test]
    fn plain_words_about_code_pass() {
        for text in [
            "Keep the pool at 10 connections, or make it configurable?",
            "src/pool.rs reads the size; tests/pool.rs covers it.",
            "The C# client and the 2.0 release: which first?",
        ] {
            assert_eq!(link_or_command(text), None, "{text}");
        }
    }

    proptest::proptest! {
        /// No input makes the validator panic, on either side of the sandbox.
        #[test]
        fn the_validator_never_panics(
            title in "\\PC{0,200}",
            details in ".{0,300}",
            labels in proptest::collection::vec(".{0,70}", 0..12),
            recommended in proptest::option::of(".{0,10}"),
            key in ".{0,12}",
            revision in 0u32..4,
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        ) {
            let ask = Ask {
                key,
                revision,
                kind: Kind::Decision,
                title,
                details,
                options: labels.into_iter().map(|label| AskOption { label, meaning: String::new() }).collect(),
                recommended,
            };
            let _ = check(&ask);
            let _ = from_outbox(&serde_json::to_vec(&ask).unwrap(), WorkKey::Issue(1));
            let _ = from_outbox(&bytes, WorkKey::Issue(1));
        }
    }

    /// The agent controls its outbox: only a regular file within the size cap crosses, as bytes.
    #[test]
    fn only_a_regular_file_of_bounded_size_leaves_the_outbox() {
        use crate::sandbox::test_support::{TestRun, docker_ready, exec, spec};
        if !docker_ready() {
            return;
        }
        let run = TestRun::new("outbox");
        let sandbox = Sandbox::start(&spec(&run, "issue-1", &[])).unwrap();
        let host = tempfile::tempdir().unwrap();
        let scratch = host.path().join("ask");
        assert_eq!(read_outbox(&sandbox, &scratch).unwrap(), None, "no ask");

        let dir = std::path::Path::new(OUTBOX)
            .parent()
            .unwrap()
            .to_str()
            .unwrap();
        exec(&sandbox, &["mkdir", "-p", dir]);
        exec(&sandbox, &["ln", "-s", "/etc/passwd", OUTBOX]);
        let err = read_outbox(&sandbox, &scratch).unwrap_err().to_string();
        assert!(err.contains("the outbox is not a regular file"), "{err}");

        exec(&sandbox, &["rm", OUTBOX]);
        exec(&sandbox, &["mkdir", OUTBOX]);
        assert!(
            read_outbox(&sandbox, &scratch).is_err(),
            "a directory is refused"
        );

        exec(&sandbox, &["rmdir", OUTBOX]);
        let big = format!("head -c {} /dev/zero > {}", MAX_ASK_BYTES + 1, OUTBOX);
        exec(&sandbox, &["sh", "-c", &big]);
        let err = read_outbox(&sandbox, &scratch).unwrap_err().to_string();
        assert!(err.contains("more than 65536 bytes"), "{err}");

        exec(
            &sandbox,
            &["sh", "-c", &format!("echo '{{}}' > {}", OUTBOX)],
        );
        assert_eq!(
            read_outbox(&sandbox, &scratch).unwrap(),
            Some(b"{}\n".to_vec())
        );
    }
}
