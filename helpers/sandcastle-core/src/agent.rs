//! One agent iteration: Claude Code in a sandbox, its stream parsed, its transcript and session saved.
//!
//! A turn is its command line (`command.rs`), the stream pump (`pump.rs`) and its ending
//! (`ending.rs`). The stream is read on a thread and handed over a channel, so the pump can give up
//! after `idle_timeout` without output, or `exit_grace` after the result. Giving up kills the `docker exec`
//! client; after every iteration, every process of the agent user inside the container is killed
//! too: killing the client alone would leave Claude Code (and whatever the agent started in the
//! background) running in a container that the next iteration reuses. When Claude Code exits by
//! itself, that cleanup runs in the same `docker exec`, after it, and so does the hand-out of the
//! session file and the checkout's commits (`hand_out.rs`): a turn is one Docker call. When the host
//! gave up, or the cleanup cannot vouch for itself, the cleanup, the session and the commits each
//! take their own exec.
use crate::checkout;
use crate::hand_out::{self, Commits, Destination};
use crate::role::Role;
use crate::sandbox::Sandbox;
use crate::secrets::Redactor;
use crate::stream::Usage;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

mod command;
mod ending;
mod pump;
mod session;

use command::CommandLine;
use pump::{Pipes, Transcript};

pub const COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

/// The longest stream line taken from a sandbox; a longer one fails the turn, and is never held
/// whole. Claude Code cuts tool output far below this.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// The longest a turn may run, output or not, and the config key that set it (named when a turn is
/// stopped at it).
#[derive(Debug, Clone, Copy)]
pub struct TimeLimit {
    pub after: Duration,
    pub key: &'static str,
}

pub struct AgentRun<'a> {
    pub role: Role,
    pub model: &'a str,
    pub prompt: &'a str,
    /// Resume this saved session (its file is copied into the container first).
    pub resume: Option<&'a SavedSession>,
    pub idle_timeout: Duration,
    /// The longest the turn may run, output or not, and the key that set it.
    pub time_limit: TimeLimit,
    /// How long to wait for the process to exit after the result event.
    pub exit_grace: Duration,
    /// Where the transcript (`<role>-<n>.jsonl`) and the session file go.
    pub log_dir: &'a Path,
    pub iteration: u32,
    /// Where the turn hands out the checkout's commits.
    pub commits: CommitsOut,
    /// A working role gets `sandcastle mcp`'s `ask` tool (the project's `[asks]`).
    pub asks: bool,
}

/// The checkout's commits a turn hands out after Claude Code: a bundle of those the host lacks
/// (`known_tip` is the work branch's tip on the host), or HEAD's id, into `file`, which the host
/// created.
pub struct CommitsOut {
    pub known_tip: String,
    pub file: PathBuf,
}

/// A session file saved on the host, resumable in a fresh container.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SavedSession {
    pub session_id: String,
    pub file: PathBuf,
}

/// How an agent's turn ended. A failed turn is the agent's result, not broken machinery: it still
/// has its cost, transcript and (maybe) session.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// The final result carries the completion signal.
    Completed,
    /// The turn ended without the completion signal.
    Stopped,
    /// An error result, an idle timeout or a crash: why, in one redacted line naming the transcript.
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct AgentOutcome {
    pub ending: Ending,
    pub session: Option<SavedSession>,
    /// The final `result` text (redacted).
    pub result_text: String,
    pub usage: Usage,
    pub transcript: PathBuf,
    /// What the turn's own exec handed out of the checkout (in `CommitsOut::file`, unchecked);
    /// `None` when it handed out nothing usable: they are taken with an exec of their own.
    pub commits: Option<Commits>,
    /// What the same hand-out carried of the outbox of `sandcastle ask`; `None` when there was no
    /// usable hand-out: the outbox is read with an exec of its own.
    pub ask: Option<hand_out::Ask>,
    /// The container stopped during the turn (its main process, the relay, exited): the turn
    /// failed, and the sandbox takes no other.
    pub sandbox_stopped: bool,
}

/// Live events for the progress view.
pub enum AgentEvent<'a> {
    ToolCall(&'a str),
    Usage(&'a Usage),
    /// An ask relayed while the agent works (`relay.rs`): its bytes, unchecked, or why the record
    /// was refused.
    Ask(Result<Vec<u8>, String>),
}

/// Runs `claude --print --verbose --output-format stream-json --model M --setting-sources user
/// --strict-mcp-config --dangerously-skip-permissions [--resume S] -p -` (a reasoning-only role: `--tools "" --max-turns N` instead of the permissions flag) in the sandbox with the prompt on stdin. An error result (`is_error: true`), an idle
/// timeout or a crash ends the turn as [`Ending::Failed`] with a clear message; `Err` is for broken
/// machinery (Docker, the log directory). The transcript is saved either way, line by line as it streams.
pub fn run(
    sandbox: &Sandbox,
    run: &AgentRun,
    redact: &Redactor,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AgentOutcome> {
    let label = format!("{} iteration {}", run.role, run.iteration);
    let sessions_dir = session::create_dir(run.log_dir)?;
    let mut transcript = Transcript::create(
        run.log_dir
            .join(format!("{}-{}.jsonl", run.role, run.iteration)),
    )?;
    session::restore(sandbox, run.resume, &label)?;
    let line = CommandLine::new(run);
    let mut child = line
        .spawn(sandbox)
        .with_context(|| format!("{label}: cannot start `docker exec` for Claude Code"))?;
    let hand_out_to = Destination {
        session: session::raw_file(&sessions_dir, &line.session_id),
        max_session: session::MAX_SESSION_BYTES,
        commits: run.commits.file.clone(),
        max_commits: checkout::MAX_BUNDLE_BYTES,
        max_ask: crate::ask::MAX_ASK_BYTES,
    };
    let pipes = Pipes::start(
        &mut child,
        line.stdin(run.prompt),
        line.marker.clone().into_bytes(),
        hand_out_to,
    );
    let pumped = pump::pump(&pipes, &mut transcript, run, redact, on_event);
    let turn = ending::Turn {
        sandbox,
        run,
        redact,
        label: &label,
        transcript: transcript.path(),
        session_id: &line.session_id,
        sessions_dir: &sessions_dir,
    };
    match pumped {
        Ok((stream_end, seen)) => ending::end(&turn, &mut child, pipes, stream_end, seen),
        Err(error) => Err(ending::unrecorded(&turn, &mut child, error)),
    }
}

/// The work is done only when the final result ends with the completion signal: anywhere else
/// ("I will not write <promise>COMPLETE</promise> yet") it is just words.
pub fn signals_completion(result_text: &str) -> bool {
    result_text.trim_end().ends_with(COMPLETION_SIGNAL)
}

/// Kills every process of the agent user in the container (`sandcastle stop-agent`, from the
/// protected copy): what a stopped Claude Code left running, and what the agent started in the
/// background, so that nothing of this iteration goes on into the next. An error when the agent's
/// processes may still be running: the caller must not hand this container to another turn as if
/// it were quiet.
///
/// When the host gave up on a turn, the turn's own stop (`sandcastle turn`) may be running at the
/// same time and kill this one as a process of the agent user: it is tried again, three times in
/// all, since that stop ends as soon as nothing else is left.
pub fn kill_agent_processes(sandbox: &Sandbox) -> Result<()> {
    let mut attempt = 1;
    loop {
        let result = sandbox.run(
            &[crate::sandbox::PROTECTED_SANDCASTLE, "stop-agent"],
            "docker exec (stop the agent's processes)",
        );
        match result {
            Ok(_) => return Ok(()),
            Err(_) if attempt < 3 => {
                attempt += 1;
                thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_very_end_of_the_final_result_signals_completion() {
        assert!(signals_completion("Done. <promise>COMPLETE</promise>\n"));
        assert!(signals_completion("<promise>COMPLETE</promise>"));
        for words in [
            "I will NOT write <promise>COMPLETE</promise> yet.",
            "<promise>COMPLETE</promise> was premature; tests fail",
            "<promise>COMPLETE</promise",
            "",
        ] {
            assert!(!signals_completion(words), "{words}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_signal_counts_at_the_end_and_nowhere_else(
            before in ".*",
            after in "\\s*[^\\s]\\PC*",
            space in "\\s*",
        ) {
            let signal_last = format!("{before}{COMPLETION_SIGNAL}{space}");
            proptest::prop_assert!(signals_completion(&signal_last));
            let text_after = format!("{before}{COMPLETION_SIGNAL}{after}");
            proptest::prop_assert_eq!(
                signals_completion(&text_after),
                text_after.trim_end().ends_with(COMPLETION_SIGNAL)
            );
        }
    }
}

#[cfg(test)]
mod docker_tests;
