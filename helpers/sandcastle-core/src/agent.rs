//! One agent iteration: Claude Code in a sandbox, its stream parsed, its transcript and session saved.
//!
//! The stream is read on a thread and handed over a channel, so the loop here can give up after
//! `idle_timeout` without output, or `exit_grace` after the result. Giving up kills the `docker exec`
//! client; after every iteration, every process of the agent user inside the container is killed
//! too: killing the client alone would leave Claude Code (and whatever the agent started in the
//! background) running in a container that the next iteration reuses. When Claude Code exits by
//! itself, that cleanup runs in the same `docker exec`, after it, and so does the hand-out of the
//! session file and the checkout's commits (`hand_out.rs`): a turn is one Docker call. When the host
//! gave up, or the cleanup cannot vouch for itself, the cleanup, the session and the commits each
//! take their own exec.
use crate::ask_relay;
use crate::checkout;
use crate::hand_out::{self, Commits, Destination, Trailer};
use crate::role::Role;
use crate::sandbox::{Sandbox, WORKSPACE};
use crate::secrets::Redactor;
use crate::stream::{Event, Usage, parse_line, shorten};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

pub const COMPLETION_SIGNAL: &str = "<promise>COMPLETE</promise>";

/// How much of Claude Code's stderr is kept for an error message.
const STDERR_TAIL: usize = 4096;

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

/// Runs `claude --print --verbose --output-format stream-json --model M --dangerously-skip-permissions
/// [--resume S] -p -` (a reasoning-only role: `--tools "" --max-turns N` instead of the permissions flag) in the sandbox with the prompt on stdin. An error result (`is_error: true`), an idle
/// timeout or a crash ends the turn as [`Ending::Failed`] with a clear message; `Err` is for broken
/// machinery (Docker, the log directory). The transcript is saved either way, line by line as it streams.
pub fn run(
    sandbox: &Sandbox,
    run: &AgentRun,
    redact: &Redactor,
    on_event: &mut dyn FnMut(AgentEvent),
) -> Result<AgentOutcome> {
    let label = format!("{} iteration {}", run.role, run.iteration);
    let sessions_dir = run.log_dir.join("sessions");
    std::fs::create_dir_all(&sessions_dir)
        .with_context(|| format!("cannot create the log directory {}", sessions_dir.display()))?;
    let transcript_path = run
        .log_dir
        .join(format!("{}-{}.jsonl", run.role, run.iteration));
    let mut transcript = std::fs::File::create(&transcript_path)
        .with_context(|| format!("cannot write the transcript {}", transcript_path.display()))?;

    // A session this container already holds as the host last took it out needs no copy in.
    if let Some(saved) = run.resume.filter(|s| !sandbox.holds_session(&s.session_id)) {
        sandbox
            .copy_in(&saved.file, &session_path_in_container(&saved.session_id))
            .with_context(|| {
                format!(
                    "{label}: cannot restore the saved session {} into the sandbox",
                    saved.file.display()
                )
            })?;
    }

    // The host names the session, so the exec can hand its file out without being told by the stream.
    let (session_flag, session_id) = match run.resume {
        Some(saved) => ("--resume", saved.session_id.clone()),
        None => (
            "--session-id",
            uuid::Uuid::new_v4().hyphenated().to_string(),
        ),
    };
    let session_in_container = session_path_in_container(&session_id);
    // The end of Claude Code's output is marked with a word only the host and the exec's shell
    // know: it comes in on stdin, never in an argument or a variable.
    let marker = format!(
        "{} {}",
        String::from_utf8_lossy(hand_out::MARKER),
        uuid::Uuid::new_v4().simple()
    );
    let mut argv = vec![
        crate::sandbox::PROTECTED_SH,
        "-c",
        RUN_AGENT,
        "sh",
        &session_in_container,
        checkout::HAND_OUT,
        WORKSPACE,
        &run.commits.known_tip,
        crate::ask::OUTBOX,
        "claude",
        "--print",
        "--verbose",
        "--output-format",
        "stream-json",
        "--model",
        run.model,
    ];
    // A reasoning-only role gets no tools and a few turns; the others work in the sandbox, with
    // `sandcastle mcp`'s `ask` tool besides the command.
    let max_turns = run.role.max_turns().map(|turns| turns.to_string());
    let mcp_config = crate::mcp::config();
    match &max_turns {
        Some(turns) => argv.extend(["--tools", "", "--max-turns", turns]),
        None => argv.extend([
            "--dangerously-skip-permissions",
            "--mcp-config",
            mcp_config.as_str(),
        ]),
    }
    argv.extend([session_flag, &session_id, "-p", "-"]);
    let mut child = sandbox
        .exec_command(&argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{label}: cannot start `docker exec` for Claude Code"))?;
    let handed_session = sessions_dir.join(format!(".{session_id}.jsonl.raw"));
    let destination = Destination {
        session: handed_session.clone(),
        max_session: MAX_SESSION_BYTES,
        commits: run.commits.file.clone(),
        max_commits: checkout::MAX_BUNDLE_BYTES,
        max_ask: crate::ask::MAX_ASK_BYTES,
    };
    let input = format!("{marker}\n{}", run.prompt);
    let pipes = Pipes::start(&mut child, input, marker.into_bytes(), destination);

    let mut seen = Seen::default();
    let mut grace_until: Option<Instant> = None;
    let turn_ends = Instant::now() + run.time_limit.after;
    let stream_end = loop {
        let wait = match grace_until {
            Some(until) => until.saturating_duration_since(Instant::now()),
            None => run
                .idle_timeout
                .min(turn_ends.saturating_duration_since(Instant::now())),
        };
        let line = match pipes.out.recv_timeout(wait) {
            Ok(FromExec::Line(line)) => line,
            Ok(FromExec::LineTooLong) => break StreamEnd::LineTooLong,
            Ok(FromExec::TrailerBegins) => {
                // Claude Code is gone and its output over; a large bundle may take a while.
                grace_until = Some(Instant::now() + HAND_OUT_TIMEOUT);
                continue;
            }
            Ok(FromExec::Trailer(trailer)) => break StreamEnd::HandedOut(trailer),
            Ok(FromExec::Ask(ask)) => {
                on_event(AgentEvent::Ask(ask));
                continue;
            }
            Err(RecvTimeoutError::Timeout) if grace_until.is_some() => {
                break StreamEnd::GraceExpired;
            }
            Err(RecvTimeoutError::Timeout) if Instant::now() >= turn_ends => {
                break StreamEnd::TurnTimeout;
            }
            Err(RecvTimeoutError::Timeout) => break StreamEnd::IdleTimeout,
            Err(RecvTimeoutError::Disconnected) => break StreamEnd::StreamClosed,
        };
        let redacted = redact.redact(&line);
        if let Err(error) = writeln!(transcript, "{redacted}").and_then(|()| transcript.flush()) {
            // Nothing may run unrecorded.
            let _ = child.kill();
            let _ = child.wait();
            let stopped = match kill_agent_processes(sandbox) {
                Ok(()) => "the agent was stopped".to_string(),
                Err(kill) => format!("stopping the agent's processes failed: {kill:#}"),
            };
            return Err(anyhow::anyhow!(
                "{label}: cannot write the transcript {} ({error}); {stopped}",
                transcript_path.display()
            ));
        }
        seen.take(parse_line(&line), redact, on_event);
        // Only the final result ends the work: text along the way may mention anything.
        if grace_until.is_none() && seen.result.is_some() {
            grace_until = Some(Instant::now() + run.exit_grace);
        }
    };

    let status = match stream_end {
        StreamEnd::StreamClosed | StreamEnd::HandedOut(_) => {
            wait_or_kill(&mut child, run.exit_grace)
        }
        StreamEnd::IdleTimeout
        | StreamEnd::GraceExpired
        | StreamEnd::TurnTimeout
        | StreamEnd::LineTooLong => None,
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    // The exec's own cleanup ran and left nothing when it exits with Claude Code's status (at most
    // 125); anything else (the host gave up, the cleanup failed or was killed) stops them here, and
    // what it may have handed out is not used.
    let quiet = matches!(status.and_then(|s| s.code()), Some(0..=AGENT_STATUS_MAX));
    let killed = match quiet {
        true => Ok(()),
        false => kill_agent_processes(sandbox),
    };
    let stderr = redact.redact(&pipes.finish());
    let stopped = match stream_end {
        StreamEnd::IdleTimeout => Some(format!(
            "gave no output for {} (idleTimeout)",
            short_duration(run.idle_timeout)
        )),
        StreamEnd::TurnTimeout => Some(format!(
            "ran for {} ({})",
            short_duration(run.time_limit.after),
            run.time_limit.key
        )),
        StreamEnd::LineTooLong => Some(format!(
            "printed a stream line longer than {} MiB (the cap on a line from the sandbox)",
            MAX_LINE_BYTES / (1024 * 1024)
        )),
        _ => None,
    };
    let hand_out = match stream_end {
        StreamEnd::HandedOut(trailer) if quiet => HandOut::Trailer(trailer),
        StreamEnd::StreamClosed if quiet => {
            HandOut::Trailer(Err("no hand-out after Claude Code".to_string()))
        }
        _ => HandOut::Separately,
    };
    // Only the session the host named for this turn is ever taken: a stream naming another (a
    // forged `init` or `result` event) changes nothing, so it can never overwrite the saved copy of
    // another role's session.
    let session = match &hand_out {
        HandOut::Trailer(Err(_)) => None,
        HandOut::Trailer(Ok(trailer)) => trailer
            .session
            .then(|| keep_session(&session_id, &handed_session, &sessions_dir, redact))
            .flatten(),
        // The host gave up on the exec: the session is read out on its own.
        HandOut::Separately => save_session(sandbox, &session_id, &sessions_dir, redact),
    };
    let _ = std::fs::remove_file(&handed_session);
    if let (Ok(()), Some(saved)) = (&killed, &session) {
        // Nothing of the agent runs any more to change the file after it was taken out.
        sandbox.note_session(&saved.session_id);
    }
    let (commits, ask, malformed) = match hand_out {
        HandOut::Trailer(Ok(trailer)) => (Some(trailer.commits), Some(trailer.ask), None),
        HandOut::Trailer(Err(why)) => (None, None, Some(why)),
        HandOut::Separately => (None, None, None),
    };

    let usage = seen
        .result
        .as_ref()
        .map(|result| result.usage.clone())
        .unwrap_or_default();
    let outcome = |ending: Ending, result_text: String| AgentOutcome {
        ending,
        session: session.clone(),
        result_text,
        usage: usage.clone(),
        transcript: transcript_path.clone(),
        commits: commits.clone(),
        ask: ask.clone(),
        sandbox_stopped: false,
    };
    let fail = |message: String| Ok(outcome(Ending::Failed(message), String::new()));
    // Only a turn whose cleanup failed asks whether the container still runs: a relay that exited
    // stopped it, which fails this turn, not the machinery.
    if killed.is_err() && !sandbox.running()? {
        return Ok(AgentOutcome {
            sandbox_stopped: true,
            ..outcome(
                Ending::Failed(format!(
                    "{label}: the sandbox stopped during the turn (its relay, the container's main process, exited); transcript: {}",
                    transcript_path.display()
                )),
                String::new(),
            )
        });
    }
    if let Err(kill) = killed {
        // Broken machinery, not the agent's result: the container is not quiet for another turn.
        anyhow::bail!(
            "{label}: the agent's processes could not be stopped ({}); transcript: {}",
            redact.error(&kill),
            transcript_path.display()
        );
    }
    if let Some(why) = malformed {
        // Only the agent, writing into the exec's output, makes a trailer the script did not print.
        return fail(format!(
            "{label}: the hand-out after Claude Code is malformed ({}); transcript: {}",
            redact.redact(&why),
            transcript_path.display()
        ));
    }
    if let Some(why) = stopped {
        return fail(format!(
            "{label} ({}) {why} and was stopped; transcript: {}",
            run.model,
            transcript_path.display()
        ));
    }
    let (text, completed) = match seen.result {
        Some(result) if result.is_error => {
            return fail(format!(
                "{label}: Claude Code reported an error ({}): {}; transcript: {}",
                result.subtype,
                first_line(&result.text),
                transcript_path.display()
            ));
        }
        Some(result) => {
            let completed = signals_completion(&result.text);
            (result.text, completed)
        }
        None => {
            let how = match status {
                Some(status) => format!("exited ({status})"),
                None => "hung".to_string(),
            };
            return fail(format!(
                "{label}: Claude Code {how} without a result: {}; transcript: {}",
                last_line(&stderr).unwrap_or("no error output"),
                transcript_path.display()
            ));
        }
    };
    let ending = if completed {
        Ending::Completed
    } else {
        Ending::Stopped
    };
    Ok(outcome(ending, text))
}

/// The work is done only when the final result ends with the completion signal: anywhere else
/// ("I will not write <promise>COMPLETE</promise> yet") it is just words.
pub fn signals_completion(result_text: &str) -> bool {
    result_text.trim_end().ends_with(COMPLETION_SIGNAL)
}

/// Where Claude Code keeps a session of a project in WORKSPACE: its projects directory is named
/// after the working directory with every `/` replaced by `-` (checked with Claude Code 2.1.197).
fn session_path_in_container(session_id: &str) -> String {
    format!(
        "/home/agent/.claude/projects/{}/{session_id}.jsonl",
        WORKSPACE.replace('/', "-")
    )
}

enum StreamEnd {
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
struct Seen {
    result: Option<FinalResult>,
}

struct FinalResult {
    is_error: bool,
    subtype: String,
    text: String,
    usage: Usage,
}

impl Seen {
    fn take(&mut self, event: Event, redact: &Redactor, on_event: &mut dyn FnMut(AgentEvent)) {
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

/// Whether the exec's own hand-out is used, or the session and commits are taken separately.
enum HandOut {
    Trailer(Result<Trailer, String>),
    Separately,
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

/// After the trailer began, how long handing out may take (a large bundle).
const HAND_OUT_TIMEOUT: Duration = Duration::from_secs(600);

/// The threads that feed the prompt in and read the output of one `docker exec`.
struct Pipes {
    out: mpsc::Receiver<FromExec>,
    threads: Vec<thread::JoinHandle<()>>,
    stderr: thread::JoinHandle<String>,
}

impl Pipes {
    fn start(child: &mut Child, input: String, marker: Vec<u8>, hand_out_to: Destination) -> Pipes {
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
        let stderr = thread::spawn(move || {
            let mut tail = Vec::new();
            let mut cut = false;
            if let Some(mut stderr) = stderr {
                let mut chunk = [0u8; 4096];
                while let Ok(read @ 1..) = stderr.read(&mut chunk) {
                    tail.extend_from_slice(&chunk[..read]);
                    let excess = tail.len().saturating_sub(STDERR_TAIL);
                    cut |= excess > 0;
                    tail.drain(..excess);
                }
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
        });
        Pipes {
            out,
            threads,
            stderr,
        }
    }

    /// Waits for the pipes to close (the process is gone by now); the tail of stderr.
    fn finish(self) -> String {
        drop(self.out);
        for thread in self.threads {
            let _ = thread.join();
        }
        self.stderr.join().unwrap_or_default()
    }
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

/// The exit status if the process ends within `grace`, else `None` (still running).
fn wait_or_kill(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
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

/// Kills every process of the agent user in the container: what a stopped Claude Code left
/// running, and what the agent started in the background, so that nothing of this iteration goes on
/// into the next. Spared are this shell, PID 1 (`docker-init`, which reaps orphans) and the
/// container's entrypoint (`sleep infinity`, the first process `docker-init` started: the lowest pid
/// whose parent is 1; `docker exec` processes have parent 0, and orphans, reparented to 1, come
/// later). Then it waits, up to five seconds, until none is left but zombies.
const KILL_AGENT_PROCESSES: &str = concat!(
    "failed_status=1\n",
    include_str!("agent/kill_agent_processes.sh")
);

/// The highest exit status of [`RUN_AGENT`] that says its cleanup left nothing running.
const AGENT_STATUS_MAX: i32 = 125;

/// `sh -c RUN_AGENT sh SESSION HAND_OUT WORKSPACE KNOWN OUTBOX claude ARGS…` with the turn's marker
/// line, then the prompt, on stdin: the marker read (a byte at a time, so Claude Code gets the rest),
/// Claude Code under `sandcastle ask-relay` (which relays each new ask in OUTBOX on the output at
/// once), then, once it has exited, the cleanup of [`KILL_AGENT_PROCESSES`] in the same `docker exec` (this shell is
/// spared, being `$$`), then the hand-out trailer (`agent/hand_out.sh`). Exits with Claude Code's
/// status, capped at 125 (a signal's 128+n becomes 125), when the cleanup left nothing; 126, with no
/// trailer, when it could not.
const RUN_AGENT: &str = concat!(
    "IFS= read -r marker || exit 126\nsession=$1 hand_out=$2 workspace=$3 known=$4 outbox=$5\nshift 5\n",
    "sandcastle ask-relay \"$outbox\" -- \"$@\"\ndone_status=$?\n[ \"$done_status\" -gt 125 ] && done_status=125\nfailed_status=126\n",
    include_str!("agent/kill_agent_processes.sh"),
    include_str!("agent/hand_out.sh")
);

/// An error when the agent's processes may still be running: the caller must not hand this
/// container to another turn as if it were quiet.
///
/// When the host gave up on a turn, the turn's own cleanup ([`RUN_AGENT`]) may be running at the
/// same time and kill this one as a process of the agent user: it is tried again, three times in
/// all, since that cleanup ends as soon as nothing else is left.
pub fn kill_agent_processes(sandbox: &Sandbox) -> Result<()> {
    let mut attempt = 1;
    loop {
        let result = crate::sandbox::output(
            sandbox
                .exec_command(&["sh", "-c", KILL_AGENT_PROCESSES])
                .stdin(Stdio::null()),
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

/// The largest session file taken out of a sandbox.
const MAX_SESSION_BYTES: u64 = 256 * 1024 * 1024;

/// Prints the session file named by `$1` if it is a regular file (not a link, not anything else).
/// It runs in the sandbox, so a link could only point at the container's own files; the host
/// refuses it all the same and only ever receives bytes.
const PRINT_REGULAR_FILE: &str = r#"if [ -L "$1" ] || [ ! -f "$1" ]; then echo "$1 is not a regular file" >&2; exit 3; fi; exec cat -- "$1""#;

/// Claude Code names sessions with UUIDs; anything else from the stream is refused, so it can never
/// become a path.
fn is_session_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|uuid| uuid.hyphenated().to_string() == id)
}

/// Takes the session file out of the container into `sessions_dir`, redacted. `None` when there is
/// none to take (Claude Code failed before its first turn, or the file is not a regular file): the
/// next iteration starts a fresh session.
fn save_session(
    sandbox: &Sandbox,
    session_id: &str,
    sessions_dir: &Path,
    redact: &Redactor,
) -> Option<SavedSession> {
    if !is_session_id(session_id) {
        return None;
    }
    let raw = sessions_dir.join(format!(".{session_id}.jsonl.raw"));
    let argv = [
        "sh",
        "-c",
        PRINT_REGULAR_FILE,
        "sh",
        &session_path_in_container(session_id),
    ];
    let saved = sandbox
        .read_out(&argv, &raw, MAX_SESSION_BYTES)
        .ok()
        .and_then(|()| keep_session(session_id, &raw, sessions_dir, redact));
    let _ = std::fs::remove_file(&raw);
    saved
}

/// The session file the sandbox handed out as `raw` bytes, saved redacted as the session's file.
fn keep_session(
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
    fn session_lives_where_claude_code_puts_it_for_the_workspace() {
        assert_eq!(
            session_path_in_container("3de6a402"),
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
    fn durations_read_like_the_config() {
        assert_eq!(short_duration(Duration::from_secs(3)), "3s");
        assert_eq!(short_duration(Duration::from_secs(600)), "10m");
        assert_eq!(short_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(short_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(short_duration(Duration::from_millis(250)), "250ms");
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

#[cfg(test)]
mod docker_tests;
