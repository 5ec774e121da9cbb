//! The stream pump: the exec's output read on a thread, a bounded line at a time, each line recorded
//! in the transcript and parsed for events, until the stream ends or the host stops waiting.
use super::{AgentEvent, AgentRun, MAX_LINE_BYTES};
use crate::ask_relay;
use crate::hand_out::{self, Destination, Trailer};
use crate::sandbox::Exec;
use crate::secrets::Redactor;
use crate::stream::{Event, Usage, parse_line, shorten};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

/// How much of Claude Code's stderr is kept for an error message.
const STDERR_TAIL: usize = 4096;

/// After the trailer began, how long handing out may take (a large bundle).
const HAND_OUT_TIMEOUT: Duration = Duration::from_secs(600);

/// How the stream ended, or why the host stopped reading it.
pub(super) enum StreamEnd {
    /// Claude Code closed its output: it exited (or is exiting).
    StreamClosed,
    /// The exec's hand-out trailer came, well-formed or not, and the output is over.
    HandedOut(Result<Trailer, String>),
    IdleTimeout,
    /// The turn ran for `turn_timeout`.
    TurnTimeout,
    /// A line longer than [`MAX_LINE_BYTES`].
    LineTooLong,
    /// The result came, but the process did not exit in time.
    GraceExpired,
}

/// What the stream said so far (texts redacted). The session ids it names are not kept: the host
/// names the session.
#[derive(Default)]
pub(super) struct Seen {
    pub result: Option<FinalResult>,
}

pub(super) struct FinalResult {
    pub is_error: bool,
    pub subtype: String,
    pub text: String,
    pub usage: Usage,
}

impl Seen {
    pub fn take(&mut self, event: Event, redact: &Redactor, on_event: &mut dyn FnMut(AgentEvent)) {
        match event {
            Event::ToolUse { name, summary } => {
                let call = if summary.is_empty() {
                    name
                } else {
                    format!("{name}: {summary}")
                };
                // Redacted whole, then shortened: a cut first could leave part of a secret.
                on_event(AgentEvent::ToolCall(&shorten(&redact.redact(&call))));
            }
            Event::Result {
                is_error,
                subtype,
                text,
                usage,
                ..
            } => {
                on_event(AgentEvent::Usage(&usage));
                self.result = Some(FinalResult {
                    is_error,
                    subtype,
                    text: redact.redact(&text),
                    usage,
                });
            }
            Event::Init { .. }
            | Event::AssistantText(_)
            | Event::ToolResult { .. }
            | Event::Other => {}
        }
    }
}

/// The turn's transcript (`<role>-<n>.jsonl`), written line by line as the stream comes.
pub(super) struct Transcript {
    path: PathBuf,
    file: std::fs::File,
}

impl Transcript {
    pub fn create(path: PathBuf) -> Result<Transcript> {
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot write the transcript {}", path.display()))?;
        Ok(Transcript { path, file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one (redacted) line through to the file.
    fn record(&mut self, line: &str) -> std::io::Result<()> {
        writeln!(self.file, "{line}").and_then(|()| self.file.flush())
    }
}

/// When the host stops waiting for the next line: after `idle_timeout` of silence, at the turn's
/// time limit, and, once the result came or the hand-out began, at the end of a grace period.
struct Waiting {
    idle_timeout: Duration,
    turn_ends: Instant,
    exit_grace: Duration,
    grace_until: Option<Instant>,
}

impl Waiting {
    fn new(run: &AgentRun) -> Waiting {
        Waiting {
            idle_timeout: run.idle_timeout,
            turn_ends: Instant::now() + run.time_limit.after,
            exit_grace: run.exit_grace,
            grace_until: None,
        }
    }

    /// How long to wait for the next line.
    fn wait(&self) -> Duration {
        match self.grace_until {
            Some(until) => until.saturating_duration_since(Instant::now()),
            None => self
                .idle_timeout
                .min(self.turn_ends.saturating_duration_since(Instant::now())),
        }
    }

    /// Why nothing came in time.
    fn timed_out(&self) -> StreamEnd {
        if self.grace_until.is_some() {
            StreamEnd::GraceExpired
        } else if Instant::now() >= self.turn_ends {
            StreamEnd::TurnTimeout
        } else {
            StreamEnd::IdleTimeout
        }
    }

    /// Only the final result ends the work (text along the way may mention anything): from it on,
    /// the process has `exit_grace` to exit.
    fn result_came(&mut self) {
        if self.grace_until.is_none() {
            self.grace_until = Some(Instant::now() + self.exit_grace);
        }
    }

    /// Claude Code is gone and its output over; a large bundle may take a while.
    fn hand_out_began(&mut self) {
        self.grace_until = Some(Instant::now() + HAND_OUT_TIMEOUT);
    }
}

/// Reads the exec's output until it ends or the host stops waiting: each line recorded, redacted,
/// in the transcript, then taken for its events. `Err` when the transcript cannot be written:
/// nothing may run unrecorded, so the caller stops the agent.
pub(super) fn pump(
    pipes: &Pipes,
    transcript: &mut Transcript,
    run: &AgentRun,
    redact: &Redactor,
    on_event: &mut dyn FnMut(AgentEvent),
) -> std::io::Result<(StreamEnd, Seen)> {
    let mut seen = Seen::default();
    let mut waiting = Waiting::new(run);
    loop {
        let line = match pipes.out.recv_timeout(waiting.wait()) {
            Ok(FromExec::Line(line)) => line,
            Ok(FromExec::LineTooLong) => return Ok((StreamEnd::LineTooLong, seen)),
            Ok(FromExec::TrailerBegins) => {
                waiting.hand_out_began();
                continue;
            }
            Ok(FromExec::Trailer(trailer)) => return Ok((StreamEnd::HandedOut(trailer), seen)),
            Ok(FromExec::Ask(ask)) => {
                on_event(AgentEvent::Ask(ask));
                continue;
            }
            Err(RecvTimeoutError::Timeout) => return Ok((waiting.timed_out(), seen)),
            Err(RecvTimeoutError::Disconnected) => return Ok((StreamEnd::StreamClosed, seen)),
        };
        transcript.record(&redact.redact(&line))?;
        seen.take(parse_line(&line), redact, on_event);
        if seen.result.is_some() {
            waiting.result_came();
        }
    }
}

/// What the reader of the exec's output hands over.
enum FromExec {
    /// One line of Claude Code's output (lossy UTF-8, without its newline).
    Line(String),
    /// A line longer than [`MAX_LINE_BYTES`]: the rest of the output is drained unread.
    LineTooLong,
    /// The hand-out trailer began: Claude Code's output is over.
    TrailerBegins,
    /// The trailer was read to the end of the output.
    Trailer(Result<Trailer, String>),
    /// An ask relayed while Claude Code runs (`relay.rs`).
    Ask(Result<Vec<u8>, String>),
}

/// The threads that feed the prompt in and read the output of one `docker exec`.
pub(super) struct Pipes {
    out: mpsc::Receiver<FromExec>,
    threads: Vec<thread::JoinHandle<()>>,
    stderr: thread::JoinHandle<String>,
}

impl Pipes {
    pub fn start(
        child: &mut Exec,
        input: String,
        marker: Vec<u8>,
        hand_out_to: Destination,
    ) -> Pipes {
        let (sender, out) = mpsc::channel();
        let mut threads = Vec::new();
        if let Some(mut stdin) = child.stdin.take() {
            // A process that dies before reading everything makes this write fail; its exit is
            // what gets reported, not the broken pipe.
            threads.push(thread::spawn(move || {
                let _ = stdin.write_all(input.as_bytes());
            }));
        }
        if let Some(stdout) = child.stdout.take() {
            threads.push(thread::spawn(move || {
                read_output(BufReader::new(stdout), &marker, &hand_out_to, &sender);
            }));
        }
        let stderr = child.stderr.take();
        let stderr = thread::spawn(move || stderr.map(tail).unwrap_or_default());
        Pipes {
            out,
            threads,
            stderr,
        }
    }

    /// Waits for the pipes to close (the process is gone by now); the tail of stderr.
    pub fn finish(self) -> String {
        drop(self.out);
        for thread in self.threads {
            let _ = thread.join();
        }
        self.stderr.join().unwrap_or_default()
    }
}

/// The last [`STDERR_TAIL`] bytes of `stderr`, from a line's start.
fn tail(mut stderr: impl Read) -> String {
    let mut tail = Vec::new();
    let mut cut = false;
    let mut chunk = [0u8; 4096];
    while let Ok(read @ 1..) = stderr.read(&mut chunk) {
        tail.extend_from_slice(&chunk[..read]);
        let excess = tail.len().saturating_sub(STDERR_TAIL);
        cut |= excess > 0;
        tail.drain(..excess);
    }
    // A cut line could hold the end of a secret the redactor no longer recognises.
    if cut {
        let first_line = tail
            .iter()
            .position(|&b| b == b'\n')
            .map_or(tail.len(), |n| n + 1);
        tail.drain(..first_line);
    }
    String::from_utf8_lossy(&tail).into_owned()
}

/// Claude Code's lines, then, from the marker on (the host's own line for this turn, which the
/// agent does not know), the hand-out trailer, read to the end of the output. A trailer that does not
/// parse has the rest of the output drained, so the exec can end.
fn read_output(
    mut stdout: impl BufRead,
    marker: &[u8],
    hand_out_to: &Destination,
    sender: &mpsc::Sender<FromExec>,
) {
    let mut line = Vec::new();
    loop {
        line.clear();
        // One byte past the cap tells a line at the cap from a longer one.
        match (&mut stdout)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > MAX_LINE_BYTES {
            drop(std::mem::take(&mut line));
            if sender.send(FromExec::LineTooLong).is_ok() {
                let _ = std::io::copy(&mut stdout, &mut std::io::sink());
            }
            return;
        }
        if line == marker {
            break;
        }
        if line.starts_with(ask_relay::PREFIX) {
            let ask = ask_relay::read(&line, &mut stdout, hand_out_to.max_ask);
            if sender.send(FromExec::Ask(ask)).is_err() {
                return;
            }
            continue;
        }
        // The exec puts a newline before the marker, in case Claude Code's output lacked one.
        if !line.is_empty()
            && sender
                .send(FromExec::Line(String::from_utf8_lossy(&line).into_owned()))
                .is_err()
        {
            return;
        }
    }
    if sender.send(FromExec::TrailerBegins).is_err() {
        return;
    }
    let trailer = hand_out::read(&mut stdout, hand_out_to);
    if trailer.is_err() {
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    }
    let _ = sender.send(FromExec::Trailer(trailer));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::COMPLETION_SIGNAL;

    proptest::proptest! {
        /// Whatever the agent streams before its result, nothing but a result event is taken as
        /// the end of the work.
        #[test]
        fn only_a_result_event_ends_the_work(lines in proptest::collection::vec(".*", 0..20)) {
            let redact = Redactor::new(&crate::secrets::EnvFile::default());
            let mut seen = Seen::default();
            for line in &lines {
                let text = serde_json::json!({"type": "assistant", "message": {"content": [
                    {"type": "text", "text": format!("{line} {COMPLETION_SIGNAL}")}
                ]}});
                seen.take(parse_line(&text.to_string()), &redact, &mut |_| {});
                seen.take(parse_line(line), &redact, &mut |_| {});
            }
            let results = lines.iter().filter(|l| matches!(parse_line(l), Event::Result { .. })).count();
            proptest::prop_assert_eq!(seen.result.is_some(), results > 0);
        }
    }

    #[test]
    fn seen_tracks_session_tool_calls_and_result_redacted() {
        let redact = Redactor::new(&crate::secrets::EnvFile {
            vars: vec![("SECRET_THING".into(), "hunter2-value".into())],
        });
        let mut calls = Vec::new();
        let mut costs = Vec::new();
        let mut seen = Seen::default();
        let lines = [
            r#"{"type":"system","subtype":"init","session_id":"3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b","model":"m"}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"echo hunter2-value"}}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok hunter2-value <promise>COMPLETE</promise>"}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"done hunter2-value","session_id":"3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b","total_cost_usd":0.25}"#,
        ];
        for line in lines {
            seen.take(parse_line(line), &redact, &mut |event| match event {
                AgentEvent::ToolCall(call) => calls.push(call.to_string()),
                AgentEvent::Usage(usage) => costs.push(usage.cost_usd),
                AgentEvent::Ask(_) => unreachable!("no ask is relayed in these lines"),
            });
        }
        assert_eq!(calls, ["Bash: echo [redacted]"]);
        assert_eq!(costs, [0.25]);
        assert_eq!(seen.result.unwrap().text, "done [redacted]");
    }
}
