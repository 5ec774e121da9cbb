//! `sandcastle turn`: the agent's whole turn inside its own `docker exec`, run from the
//! execute-only copy of this binary (`sandbox::PROTECTED_SANDCASTLE`, so not dumpable: the agent's
//! processes, under the same uid, cannot trace it or read its memory or files through `/proc`).
//!
//! It reads the turn's marker line from stdin (a byte at a time, so the program gets the rest: the
//! prompt), runs the program (Claude Code) with its output copied through and each new ask in the
//! outbox relayed on it (`ask_relay::watch`), stops every other process of the agent once the
//! program has exited (`turn::stop`), then prints the hand-out trailer (`turn::trailer`) that `hand_out.rs`
//! reads. No shell of the image runs any of it.
use clap::Args;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

mod stop;
mod trailer;

pub use stop::stop_agent;

/// The highest exit status of a turn that says its cleanup left nothing running: the program's
/// own, a signal's 128 + n capped here.
pub const MAX_PROGRAM_STATUS: u8 = 125;
/// A turn's exit status, with no trailer, when the agent's processes could not all be stopped.
const STOP_FAILED: u8 = 126;
/// The longest marker line read from stdin.
const MAX_MARKER_BYTES: usize = 128;
/// How long output is still copied after the agent's processes were stopped (a process of another
/// user, or one that outlived its kill, may hold the pipe open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// `sandcastle turn SESSION WORKSPACE KNOWN OUTBOX -- PROGRAM ARGS…`, the turn's marker line then
/// the prompt on stdin.
#[derive(Debug, Args)]
pub struct TurnArgs {
    /// The session file handed out after the program (when it is a regular file).
    session: PathBuf,
    /// The agent's checkout, whose commits are handed out.
    workspace: PathBuf,
    /// The commit the host has: a HEAD at it hands out its id alone.
    known: String,
    /// The outbox of `sandcastle ask`, relayed while the program runs and handed out after it.
    outbox: PathBuf,
    /// Claude Code and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    program: Vec<String>,
}

/// The exec's stdout, shared by the copy of the program's output, the relayed asks and the
/// trailer.
struct Output<W> {
    stdout: W,
    /// Nothing half a line has been copied: a record may go out now.
    at_line_start: bool,
    /// A record that came while a line was half copied: it goes out at the line's end.
    waiting: Option<Vec<u8>>,
    /// The trailer has begun: no record goes out any more.
    closed: bool,
}

impl<W: Write> Output<W> {
    fn copy(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        self.stdout.write_all(chunk)?;
        self.at_line_start = chunk.ends_with(b"\n");
        if self.at_line_start
            && let Some(record) = self.waiting.take()
        {
            self.stdout.write_all(&record)?;
        }
        self.stdout.flush()
    }

    /// False once nothing more can go out.
    fn relay(&mut self, record: Vec<u8>) -> bool {
        if self.closed {
            return false;
        }
        if !self.at_line_start {
            self.waiting = Some(record);
            return true;
        }
        self.stdout.write_all(&record).is_ok() && self.stdout.flush().is_ok()
    }
}

/// `sandcastle turn`: exits with the program's status (capped at [`MAX_PROGRAM_STATUS`]) after
/// the trailer, or 126 (`STOP_FAILED`) without one.
pub fn command(args: TurnArgs) -> ExitCode {
    let Some(marker) = marker_line() else {
        eprintln!("sandcastle turn: no marker line on stdin");
        return ExitCode::from(STOP_FAILED);
    };
    let (status, output, copied) = run(&args);
    if let Err(still_running) = stop::others() {
        eprintln!("sandcastle turn: {still_running}");
        return ExitCode::from(STOP_FAILED);
    }
    // The program and whatever it left are gone: the pipe ends unless another user's process
    // holds it, which is not waited for long.
    let _ = copied.recv_timeout(DRAIN_AFTER_EXIT);
    let mut output = output.lock().unwrap_or_else(|e| e.into_inner());
    // A record still waiting for its line's end goes out as the trailer's `ask` instead.
    output.closed = true;
    let mut stdout = output.stdout.lock();
    // A host that is gone reads nothing, and the status says the rest.
    let _ = trailer::write(
        &mut stdout,
        &trailer::Parts {
            marker: &marker,
            session: &args.session,
            workspace: &args.workspace,
            known: &args.known,
            outbox: &args.outbox,
        },
    )
    .and_then(|()| stdout.flush());
    ExitCode::from(status)
}

/// The program run to its end with its output copied and the outbox relayed: its status (capped at
/// [`MAX_PROGRAM_STATUS`]), the shared output, and what says the copy has ended.
fn run(args: &TurnArgs) -> (u8, Arc<Mutex<Output<std::io::Stdout>>>, mpsc::Receiver<()>) {
    let output = Arc::new(Mutex::new(Output {
        stdout: std::io::stdout(),
        at_line_start: true,
        waiting: None,
        closed: false,
    }));
    let (copied_tx, copied) = mpsc::channel();
    let (name, program_args) = args.program.split_first().expect("clap requires one");
    // Set up before the program starts, so no ask it makes is missed.
    let watch = crate::ask_relay::Watch::new(&args.outbox);
    let mut child = match Command::new(name)
        .args(program_args)
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            eprintln!("sandcastle turn: cannot run {name}: {e}");
            drop(copied_tx);
            return (MAX_PROGRAM_STATUS, output, copied);
        }
    };
    let mut pipe = child.stdout.take().expect("piped above");
    {
        let output = Arc::clone(&output);
        thread::spawn(move || {
            let mut chunk = vec![0u8; 64 * 1024];
            while let Ok(read @ 1..) = pipe.read(&mut chunk) {
                let mut output = output.lock().unwrap_or_else(|e| e.into_inner());
                if output.copy(&chunk[..read]).is_err() {
                    break;
                }
            }
            let _ = copied_tx.send(());
        });
    }
    {
        let output = Arc::clone(&output);
        thread::spawn(move || {
            watch.run(|record| {
                output
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .relay(record)
            })
        });
    }
    let status = match child.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .or(status.signal().map(|signal| 128 + signal))
                .unwrap_or(1)
        }
        Err(e) => {
            eprintln!("sandcastle turn: cannot wait for {name}: {e}");
            1
        }
    };
    let capped =
        u8::try_from(status.clamp(0, i32::from(MAX_PROGRAM_STATUS))).unwrap_or(MAX_PROGRAM_STATUS);
    (capped, output, copied)
}

/// The first line of stdin, without its newline, read a byte at a time so that the program
/// inherits the rest; `None` at the end of stdin or past [`MAX_MARKER_BYTES`].
fn marker_line() -> Option<Vec<u8>> {
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() <= MAX_MARKER_BYTES {
        match rustix::io::read(fd, &mut byte) {
            Ok(0) => return None,
            Ok(_) if byte[0] == b'\n' => return Some(line),
            Ok(_) => line.push(byte[0]),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> Output<Vec<u8>> {
        Output {
            stdout: Vec::new(),
            at_line_start: true,
            waiting: None,
            closed: false,
        }
    }

    /// A record never splits a line of Claude Code's: one that comes mid-line goes out at the
    /// line's end, and none once the trailer began.
    #[test]
    fn a_record_goes_out_only_between_lines() {
        let mut out = output();
        out.copy(b"{\"type\":").unwrap();
        assert!(out.relay(b"sandcastle-ask 2\n{}\n".to_vec()));
        assert_eq!(out.stdout, b"{\"type\":");
        out.copy(b"\"x\"}\n{\"type\":\"y\"}\n").unwrap();
        assert_eq!(
            out.stdout,
            b"{\"type\":\"x\"}\n{\"type\":\"y\"}\nsandcastle-ask 2\n{}\n"
        );
        assert!(out.relay(b"sandcastle-ask 0\n\n".to_vec()));
        assert!(out.stdout.ends_with(b"{}\nsandcastle-ask 0\n\n"));
        out.closed = true;
        assert!(!out.relay(b"sandcastle-ask 0\n\n".to_vec()));
    }
}
