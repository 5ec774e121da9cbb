//! One agent iteration: Claude Code in a sandbox, its stream parsed, its transcript and session saved.
//! OWNER: helper H6. Interface fixed; bodies to implement.
use crate::sandbox::Sandbox;
use crate::stream::Usage;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

pub struct AgentRun<'a> {
    /// `planner`, `implementer`, `reviewer`, `pr-fixer`.
    pub role: &'a str,
    pub model: &'a str,
    pub prompt: &'a str,
    /// Resume this saved session (its file is copied into the container first).
    pub resume: Option<&'a SavedSession>,
    pub idle_timeout: Duration,
    /// How long to wait for the process to exit after the completion signal or the result event.
    pub exit_grace: Duration,
    /// Where the transcript (`<role>-<n>.jsonl`) and the session file go.
    pub log_dir: &'a Path,
    pub iteration: u32,
}

/// A session file saved on the host, resumable in a fresh container.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SavedSession {
    pub session_id: String,
    pub file: PathBuf,
}

#[derive(Debug, Clone)]
pub struct AgentOutcome {
    pub session: Option<SavedSession>,
    /// The final `result` text (redacted).
    pub result_text: String,
    /// The completion signal appeared in the final result text and the result was not an error.
    pub completed: bool,
    pub usage: Usage,
    pub transcript: PathBuf,
}

/// Live events for the progress view.
pub enum AgentEvent<'a> {
    ToolCall(&'a str),
    Usage(&'a Usage),
}

/// Runs `claude --print --verbose --output-format stream-json --model M --dangerously-skip-permissions
/// [--resume S] -p -` in the sandbox with the prompt on stdin. An error result (`is_error: true`), an idle
/// timeout or a crash is an `Err` with a clear message; the transcript is saved either way.
pub fn run(sandbox: &Sandbox, run: &AgentRun, redact: &crate::secrets::Redactor, on_event: &mut dyn FnMut(AgentEvent)) -> Result<AgentOutcome> { todo!() }
