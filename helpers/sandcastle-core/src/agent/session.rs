//! The turn's Claude Code session: restored into the sandbox before it, taken out (redacted) after.
use super::SavedSession;
use crate::sandbox::{Sandbox, WORKSPACE};
use crate::secrets::Redactor;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The largest session file taken out of a sandbox.
pub(super) const MAX_SESSION_BYTES: u64 = 256 * 1024 * 1024;

/// Prints the session file named by `$1` if it is a regular file (not a link, not anything else).
/// It runs in the sandbox, so a link could only point at the container's own files; the host
/// refuses it all the same and only ever receives bytes.
const PRINT_REGULAR_FILE: &str = r#"if [ -L "$1" ] || [ ! -f "$1" ]; then echo "$1 is not a regular file" >&2; exit 3; fi; exec cat -- "$1""#;

/// Where Claude Code keeps a session of a project in WORKSPACE: its projects directory is named
/// after the working directory with every `/` replaced by `-` (checked with Claude Code 2.1.197).
pub(super) fn path_in_container(session_id: &str) -> String {
    format!(
        "/home/agent/.claude/projects/{}/{session_id}.jsonl",
        WORKSPACE.replace('/', "-")
    )
}

/// `sessions/` under the log directory, created.
pub(super) fn create_dir(log_dir: &Path) -> Result<PathBuf> {
    let sessions_dir = log_dir.join("sessions");
    std::fs::create_dir_all(&sessions_dir)
        .with_context(|| format!("cannot create the log directory {}", sessions_dir.display()))?;
    Ok(sessions_dir)
}

/// Where a session's file arrives from the sandbox, raw, before it is redacted.
pub(super) fn raw_file(sessions_dir: &Path, session_id: &str) -> PathBuf {
    sessions_dir.join(format!(".{session_id}.jsonl.raw"))
}

/// Copies the session to resume into the sandbox, unless the container already holds it as the
/// host last took it out.
pub(super) fn restore(sandbox: &Sandbox, resume: Option<&SavedSession>, label: &str) -> Result<()> {
    let Some(saved) = resume.filter(|s| !sandbox.holds_session(&s.session_id)) else {
        return Ok(());
    };
    sandbox
        .copy_in(&saved.file, &path_in_container(&saved.session_id))
        .with_context(|| {
            format!(
                "{label}: cannot restore the saved session {} into the sandbox",
                saved.file.display()
            )
        })
}

/// Claude Code names sessions with UUIDs; anything else from the stream is refused, so it can never
/// become a path.
fn is_session_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|uuid| uuid.hyphenated().to_string() == id)
}

/// Takes the session file out of the container into `sessions_dir`, redacted. `None` when there is
/// none to take (Claude Code failed before its first turn, or the file is not a regular file): the
/// next iteration starts a fresh session.
pub(super) fn save(
    sandbox: &Sandbox,
    session_id: &str,
    sessions_dir: &Path,
    redact: &Redactor,
) -> Option<SavedSession> {
    if !is_session_id(session_id) {
        return None;
    }
    let raw = raw_file(sessions_dir, session_id);
    let argv = [
        "sh",
        "-c",
        PRINT_REGULAR_FILE,
        "sh",
        &path_in_container(session_id),
    ];
    let saved = sandbox
        .read_out(&argv, &raw, MAX_SESSION_BYTES)
        .ok()
        .and_then(|()| keep(session_id, &raw, sessions_dir, redact));
    let _ = std::fs::remove_file(&raw);
    saved
}

/// The session file the sandbox handed out as `raw` bytes, saved redacted as the session's file.
pub(super) fn keep(
    session_id: &str,
    raw: &Path,
    sessions_dir: &Path,
    redact: &Redactor,
) -> Option<SavedSession> {
    let file = sessions_dir.join(format!("{session_id}.jsonl"));
    let bytes = std::fs::read(raw).ok()?;
    std::fs::write(&file, redact.redact(&String::from_utf8_lossy(&bytes))).ok()?;
    Some(SavedSession {
        session_id: session_id.to_string(),
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_lives_where_claude_code_puts_it_for_the_workspace() {
        assert_eq!(
            path_in_container("3de6a402"),
            "/home/agent/.claude/projects/-home-agent-workspace/3de6a402.jsonl"
        );
    }

    /// A session id comes from the stream, which the agent controls: only a UUID can become part of a
    /// host path.
    #[test]
    fn session_ids_that_are_not_uuids_are_refused() {
        assert!(is_session_id("3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b"));
        for hostile in [
            "../../../../etc/passwd",
            "3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b/../../x",
            "3DE6A402-1C39-4B8E-9F3A-0C2D4E5F6A7B",
            "3de6a4021c394b8e9f3a0c2d4e5f6a7b",
            "{3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b}",
            "",
        ] {
            assert!(!is_session_id(hostile), "{hostile}");
        }
    }
}
