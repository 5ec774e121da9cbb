//! The ending of a turn: the exec settled, the agent's processes stopped unless its own cleanup
//! vouched for itself, the session and the hand-out taken, and what was read turned into the
//! [`AgentOutcome`], or into `Err` when the machinery broke.
use super::command::AGENT_STATUS_MAX;
use super::pump::{FinalResult, Pipes, Seen, StreamEnd};
use super::{
    AgentOutcome, AgentRun, Ending, MAX_LINE_BYTES, SavedSession, kill_agent_processes, session,
    signals_completion,
};
use crate::hand_out::{Ask, Commits, Trailer};
use crate::sandbox::Exec;
use crate::sandbox::Sandbox;
use crate::secrets::Redactor;
use anyhow::Result;
use std::path::Path;
use std::process::ExitStatus;
use std::thread;
use std::time::{Duration, Instant};

/// One turn, as its ending needs it.
pub(super) struct Turn<'a> {
    pub sandbox: &'a Sandbox,
    pub run: &'a AgentRun<'a>,
    pub redact: &'a Redactor,
    /// `<role> iteration <n>`, which starts every message.
    pub label: &'a str,
    pub transcript: &'a Path,
    /// The session the host named for the turn.
    pub session_id: &'a str,
    pub sessions_dir: &'a Path,
}

/// The transcript could not be written: nothing may run unrecorded, so the agent is stopped, and
/// the machinery's error says whether that worked.
pub(super) fn unrecorded(turn: &Turn, child: &mut Exec, error: std::io::Error) -> anyhow::Error {
    let _ = child.kill();
    let _ = child.wait();
    let stopped = match kill_agent_processes(turn.sandbox) {
        Ok(()) => "the agent was stopped".to_string(),
        Err(kill) => format!("stopping the agent's processes failed: {kill:#}"),
    };
    anyhow::anyhow!(
        "{}: cannot write the transcript {} ({error}); {stopped}",
        turn.label,
        turn.transcript.display()
    )
}

/// The turn's outcome once its stream ended as `stream_end`, having said `seen`.
pub(super) fn end(
    turn: &Turn,
    child: &mut Exec,
    pipes: Pipes,
    stream_end: StreamEnd,
    seen: Seen,
) -> Result<AgentOutcome> {
    let status = settle(child, &stream_end, turn.run.exit_grace);
    // The exec's own cleanup ran and left nothing when it exits with Claude Code's status (at most
    // 125); anything else (the host gave up, the cleanup failed or was killed) stops them here, and
    // what it may have handed out is not used.
    let quiet = matches!(status.and_then(|s| s.code()), Some(0..=AGENT_STATUS_MAX));
    let killed = match quiet {
        true => Ok(()),
        false => kill_agent_processes(turn.sandbox),
    };
    let stderr = turn.redact.redact(&pipes.finish());
    let stopped = why_stopped(turn, &stream_end);
    let hand_out = HandOut::of(stream_end, quiet);
    let session = take_session(turn, &hand_out);
    if let (Ok(()), Some(saved)) = (&killed, &session) {
        // Nothing of the agent runs any more to change the file after it was taken out.
        turn.sandbox.note_session(&saved.session_id);
    }
    let (commits, ask, malformed) = hand_out.into_parts(turn);
    let (ending, result_text, sandbox_stopped) = match killed {
        Err(kill) => (
            Ending::Failed(sandbox_stopped(turn, kill)?),
            String::new(),
            true,
        ),
        Ok(()) => match malformed.or(stopped) {
            Some(why) => (Ending::Failed(why), String::new(), false),
            None => {
                let (ending, text) = agents_result(turn, seen.result.as_ref(), status, &stderr);
                (ending, text, false)
            }
        },
    };
    Ok(AgentOutcome {
        ending,
        session,
        result_text,
        usage: seen.result.map(|result| result.usage).unwrap_or_default(),
        transcript: turn.transcript.to_path_buf(),
        commits,
        ask,
        sandbox_stopped,
    })
}

/// The exec's exit status when its output closed by itself and it exited within `grace`;
/// otherwise (`None`) it is killed.
fn settle(child: &mut Exec, stream_end: &StreamEnd, grace: Duration) -> Option<ExitStatus> {
    let status = match stream_end {
        StreamEnd::StreamClosed | StreamEnd::HandedOut(_) => wait_or_kill(child, grace),
        StreamEnd::IdleTimeout
        | StreamEnd::GraceExpired
        | StreamEnd::TurnTimeout
        | StreamEnd::LineTooLong => None,
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// The exit status if the process ends within `grace`, else `None` (still running).
fn wait_or_kill(child: &mut Exec, grace: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            // Its output is closed, so it is exiting: a short poll keeps the turn short.
            Ok(None) if Instant::now() < until => thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => return None,
        }
    }
}

/// Why the host stopped the turn, if it did.
fn why_stopped(turn: &Turn, stream_end: &StreamEnd) -> Option<String> {
    let run = turn.run;
    let why = match stream_end {
        StreamEnd::IdleTimeout => format!(
            "gave no output for {} (idleTimeout)",
            short_duration(run.idle_timeout)
        ),
        StreamEnd::TurnTimeout => format!(
            "ran for {} ({})",
            short_duration(run.time_limit.after),
            run.time_limit.key
        ),
        StreamEnd::LineTooLong => format!(
            "printed a stream line longer than {} MiB (the cap on a line from the sandbox)",
            MAX_LINE_BYTES / (1024 * 1024)
        ),
        StreamEnd::StreamClosed | StreamEnd::HandedOut(_) | StreamEnd::GraceExpired => {
            return None;
        }
    };
    Some(format!(
        "{} ({}) {why} and was stopped; transcript: {}",
        turn.label,
        run.model,
        turn.transcript.display()
    ))
}

/// Whether the exec's own hand-out is used, or the session and commits are taken separately.
enum HandOut {
    Trailer(Result<Trailer, String>),
    Separately,
}

impl HandOut {
    /// The exec's trailer counts only when its cleanup left nothing running (`quiet`).
    fn of(stream_end: StreamEnd, quiet: bool) -> HandOut {
        match stream_end {
            StreamEnd::HandedOut(trailer) if quiet => HandOut::Trailer(trailer),
            StreamEnd::StreamClosed if quiet => {
                HandOut::Trailer(Err("no hand-out after Claude Code".to_string()))
            }
            _ => HandOut::Separately,
        }
    }

    /// The commits and the ask it carried, or why it is malformed.
    fn into_parts(self, turn: &Turn) -> (Option<Commits>, Option<Ask>, Option<String>) {
        match self {
            HandOut::Trailer(Ok(trailer)) => (Some(trailer.commits), Some(trailer.ask), None),
            // Only the agent, writing into the exec's output, makes a trailer the script did not
            // print.
            HandOut::Trailer(Err(why)) => (
                None,
                None,
                Some(format!(
                    "{}: the hand-out after Claude Code is malformed ({}); transcript: {}",
                    turn.label,
                    turn.redact.redact(&why),
                    turn.transcript.display()
                )),
            ),
            HandOut::Separately => (None, None, None),
        }
    }
}

/// Only the session the host named for this turn is ever taken: a stream naming another (a forged
/// `init` or `result` event) changes nothing, so it can never overwrite the saved copy of another
/// role's session.
fn take_session(turn: &Turn, hand_out: &HandOut) -> Option<SavedSession> {
    let handed = session::raw_file(turn.sessions_dir, turn.session_id);
    let saved = match hand_out {
        HandOut::Trailer(Err(_)) => None,
        HandOut::Trailer(Ok(trailer)) => trailer
            .session
            .then(|| session::keep(turn.session_id, &handed, turn.sessions_dir, turn.redact))
            .flatten(),
        // The host gave up on the exec: the session is read out on its own.
        HandOut::Separately => session::save(
            turn.sandbox,
            turn.session_id,
            turn.sessions_dir,
            turn.redact,
        ),
    };
    let _ = std::fs::remove_file(&handed);
    saved
}

/// The agent's processes could not be stopped. Only then is the container asked whether it still
/// runs: a relay that exited stopped it, which fails this turn (why, `Ok`), not the machinery.
/// Otherwise the machinery broke: the container is not quiet for another turn.
fn sandbox_stopped(turn: &Turn, kill: anyhow::Error) -> Result<String> {
    if !turn.sandbox.running()? {
        return Ok(format!(
            "{}: the sandbox stopped during the turn (its relay, the container's main process, exited); transcript: {}",
            turn.label,
            turn.transcript.display()
        ));
    }
    anyhow::bail!(
        "{}: the agent's processes could not be stopped ({}); transcript: {}",
        turn.label,
        turn.redact.error(&kill),
        turn.transcript.display()
    )
}

/// How the turn ended by what Claude Code said (its final result, else how it exited), with the
/// result's text when it did not fail.
fn agents_result(
    turn: &Turn,
    result: Option<&FinalResult>,
    status: Option<ExitStatus>,
    stderr: &str,
) -> (Ending, String) {
    let (label, transcript) = (turn.label, turn.transcript.display());
    match result {
        Some(result) if result.is_error => (
            Ending::Failed(format!(
                "{label}: Claude Code reported an error ({}): {}; transcript: {transcript}",
                result.subtype,
                first_line(&result.text),
            )),
            String::new(),
        ),
        Some(result) if signals_completion(&result.text) => {
            (Ending::Completed, result.text.clone())
        }
        Some(result) => (Ending::Stopped, result.text.clone()),
        None => {
            let how = match status {
                Some(status) => format!("exited ({status})"),
                None => "hung".to_string(),
            };
            (
                Ending::Failed(format!(
                    "{label}: Claude Code {how} without a result: {}; transcript: {transcript}",
                    last_line(stderr).unwrap_or("no error output"),
                )),
                String::new(),
            )
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("no message")
}

fn last_line(text: &str) -> Option<&str> {
    text.lines()
        .map(str::trim)
        .rev()
        .find(|line| !line.is_empty())
}

/// `3s`, `10m`, `1m30s`: how the config spells durations.
fn short_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match (secs / 3600, secs % 3600 / 60, secs % 60) {
        (0, 0, 0) => format!("{}ms", duration.as_millis()),
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_the_config() {
        assert_eq!(short_duration(Duration::from_secs(3)), "3s");
        assert_eq!(short_duration(Duration::from_secs(600)), "10m");
        assert_eq!(short_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(short_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(short_duration(Duration::from_millis(250)), "250ms");
    }
}
