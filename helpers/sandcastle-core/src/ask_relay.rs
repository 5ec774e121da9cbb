//! An ask seen while the agent works: `sandcastle ask-relay OUTBOX PROGRAM ARGS…` runs inside the
//! agent's own `docker exec` (Claude Code is PROGRAM) and copies its output through, and each new
//! content of the outbox of `sandcastle ask` goes out on the same stdout as one framed record, at a
//! line boundary, so the host publishes it while the turn still runs and the turn stays one Docker
//! call. The end-of-turn trailer (`hand_out.rs`) still carries the outbox: the fallback.
//!
//! The record, between two lines of Claude Code's output (which are JSON, never starting so):
//!
//! ```text
//! sandcastle-ask <n>\n<n bytes>\n
//! ```
//!
//! Everything in it is untrusted (the agent can write into the exec's output): [`read`] parses it
//! strictly and bounds it, and the host checks the bytes with `ask::check` like the trailer's.
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// What starts a relayed record's line, followed by its size in bytes.
pub const PREFIX: &[u8] = b"sandcastle-ask ";

/// How often the outbox is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// How long output is still copied after the program exited (a process it left behind may hold
/// its output open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// The exec's stdout, shared by the copy of the program's output and the records.
struct Out {
    stdout: std::io::Stdout,
    /// Nothing half a line has been copied: a record may go out now.
    at_line_start: bool,
}

/// `sandcastle ask-relay`: runs `program` with its stdout copied through and the outbox watched; exits
/// with the program's status (128 + the signal that ended it).
pub fn command(outbox: &Path, program: &[String]) -> ExitCode {
    let Some((name, args)) = program.split_first() else {
        eprintln!("sandcastle ask-relay: no program to run");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(name).args(args).stdout(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("sandcastle ask-relay: cannot run {name}: {e}");
            return ExitCode::from(127);
        }
    };
    let out = Arc::new(Mutex::new(Out {
        stdout: std::io::stdout(),
        at_line_start: true,
    }));
    let mut output = child.stdout.take().expect("piped above");
    let copier = {
        let out = Arc::clone(&out);
        thread::spawn(move || {
            let mut chunk = vec![0u8; 64 * 1024];
            while let Ok(read @ 1..) = output.read(&mut chunk) {
                let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                if out.stdout.write_all(&chunk[..read]).is_err() || out.stdout.flush().is_err() {
                    return;
                }
                out.at_line_start = chunk[read - 1] == b'\n';
            }
        })
    };
    {
        let out = Arc::clone(&out);
        let outbox = outbox.to_path_buf();
        thread::spawn(move || watch(&outbox, &out));
    }
    let status = child.wait();
    let until = std::time::Instant::now() + DRAIN_AFTER_EXIT;
    while !copier.is_finished() && std::time::Instant::now() < until {
        thread::sleep(Duration::from_millis(10));
    }
    match status {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .or(status.signal().map(|signal| 128 + signal))
                .unwrap_or(1);
            ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
        }
        Err(e) => {
            eprintln!("sandcastle ask-relay: cannot wait for {name}: {e}");
            ExitCode::from(1)
        }
    }
}

/// Each new content of the outbox (a regular file of at most `MAX_ASK_BYTES`) as one record; what
/// it held when the turn began was handed out before.
fn watch(outbox: &Path, out: &Mutex<Out>) {
    let mut last = outbox_bytes(outbox);
    loop {
        thread::sleep(WATCH_EVERY);
        let now = outbox_bytes(outbox);
        if now.is_none() || now == last {
            continue;
        }
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        // In the middle of a line of Claude Code's: at the next look.
        if !out.at_line_start {
            continue;
        }
        let bytes = now.as_deref().unwrap_or_default();
        let mut record =
            format!("{}{}\n", String::from_utf8_lossy(PREFIX), bytes.len()).into_bytes();
        record.extend_from_slice(bytes);
        record.push(b'\n');
        if out.stdout.write_all(&record).is_err() || out.stdout.flush().is_err() {
            return;
        }
        last = now;
    }
}

fn outbox_bytes(outbox: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(outbox).ok()?;
    if !meta.is_file() || meta.len() > crate::ask::MAX_ASK_BYTES {
        return None;
    }
    std::fs::read(outbox).ok()
}

/// The rest of a record whose line `header` (without its newline) starts with [`PREFIX`]: its
/// bytes, unchecked. `Err` says in a few words what is wrong; the stream is then read on as lines.
pub fn read(header: &[u8], stream: &mut impl BufRead, max: u64) -> Result<Vec<u8>, String> {
    let size = header
        .strip_prefix(PREFIX)
        .and_then(|size| std::str::from_utf8(size).ok())
        .filter(|size| !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|size| size.parse::<u64>().ok())
        .ok_or("a relayed ask's size is not a number")?;
    if size > max {
        return Err(format!("a relayed ask of {size} bytes (at most {max})"));
    }
    let mut bytes = vec![0u8; size as usize + 1];
    stream
        .read_exact(&mut bytes)
        .map_err(|_| "a relayed ask is cut short".to_string())?;
    if bytes.pop() != Some(b'\n') {
        return Err("a relayed ask is longer than it says".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(stream: &[u8]) -> (Result<Vec<u8>, String>, Vec<u8>) {
        let mut reader = std::io::BufReader::new(stream);
        let mut header = Vec::new();
        reader.read_until(b'\n', &mut header).unwrap();
        header.pop();
        let result = read(&header, &mut reader, 16);
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        (result, rest)
    }

    #[test]
    fn a_record_is_its_size_then_exactly_those_bytes_and_a_newline() {
        let (ask, rest) = parsed(b"sandcastle-ask 5\n{\"a\"}\n{\"type\":\"x\"}\n");
        assert_eq!(ask.unwrap(), b"{\"a\"}");
        assert_eq!(rest, b"{\"type\":\"x\"}\n", "the stream goes on after it");
    }

    #[test]
    fn a_malformed_record_is_refused_in_a_few_words() {
        for (stream, why) in [
            (&b"sandcastle-ask five\n"[..], "is not a number"),
            (b"sandcastle-ask \n", "is not a number"),
            (b"sandcastle-ask +5\nabcde\n", "is not a number"),
            (b"sandcastle-ask 17\n", "at most 16"),
            (b"sandcastle-ask 5\nab", "cut short"),
            (b"sandcastle-ask 2\nabcde\n", "longer than it says"),
        ] {
            let (ask, _) = parsed(stream);
            let err = ask.unwrap_err();
            assert!(err.contains(why), "{err} for {stream:?}");
        }
    }
}
