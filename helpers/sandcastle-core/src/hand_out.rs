//! The hand-out trailer: what the agent's own `docker exec` prints after Claude Code has exited and
//! the agent's processes are stopped — the session file and the checkout's commits — so that a turn
//! is one Docker call. Parsed strictly here, into files the host creates.
//!
//! Everything in it is untrusted: the agent can write into the exec's output through `/proc` while
//! it runs, so a trailer may be forged, cut or oversized. A trailer that does not parse is the
//! agent's failed turn; what one carries is checked like any hand-out (`WorkRepo::import` fetches a
//! bundle with every object checked, a session is only bytes in a host-named file).
//!
//! The format, after Claude Code's own output (lines of JSON, none of which is the marker):
//!
//! ```text
//! sandcastle-hand-out 1 <the turn's word>\n
//! session <n>\n<n bytes>            only when the session file is a regular file
//! commits <n>\n<n bytes>            a git bundle, or HEAD's id when the host has it
//!   | commits-refused <n>\n<n bytes> why there are none (a checkout without .git, …)
//! ask <n>\n<n bytes>                the outbox of `sandcastle ask`, when it is a regular file
//!   | ask-refused <n>\n<n bytes>     why it is not taken (a link, a directory)
//! end\n                              and nothing after it
//! ```
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// How the line that starts the trailer begins; the host ends it with a word of its own for each
/// turn, so the agent cannot print it early.
pub const MARKER: &[u8] = b"sandcastle-hand-out 1";

/// The longest header line, `commits-refused <n>` with room to spare.
const MAX_HEADER: u64 = 64;
/// The longest reason a refusal may give.
pub const MAX_REASON_BYTES: u64 = 512;

/// Where the trailer's contents go, and how much of each is accepted.
pub struct Destination {
    pub session: PathBuf,
    pub max_session: u64,
    pub commits: PathBuf,
    pub max_commits: u64,
    /// The outbox is read into memory, at most this much.
    pub max_ask: u64,
}

/// What a well-formed trailer carried.
#[derive(Debug, PartialEq)]
pub struct Trailer {
    /// The session file's bytes are in `Destination::session`.
    pub session: bool,
    pub commits: Commits,
    pub ask: Ask,
}

/// The outbox of `sandcastle ask` as the trailer handed it out.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// No ask in the outbox.
    None,
    /// Its bytes, unchecked.
    Bytes(Vec<u8>),
    /// The outbox is not a regular file: why, in one printable line.
    Refused(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Commits {
    /// A bundle or a commit id is in `Destination::commits`, unchecked.
    InFile,
    /// The checkout handed out none: why, in one printable line.
    Refused(String),
}

/// Reads the trailer that follows the marker line, up to the end of the stream. `Err` says in a few
/// words what is wrong with it.
pub fn read(stream: &mut impl BufRead, to: &Destination) -> Result<Trailer, String> {
    let mut header = next_header(stream)?;
    let session = match record(&header, "session")? {
        Some(size) => {
            copy_exactly(stream, size, &to.session, to.max_session, "session")?;
            header = next_header(stream)?;
            true
        }
        None => false,
    };
    let commits = if let Some(size) = record(&header, "commits")? {
        copy_exactly(stream, size, &to.commits, to.max_commits, "commits")?;
        Commits::InFile
    } else if let Some(size) = record(&header, "commits-refused")? {
        Commits::Refused(reason(stream, size)?)
    } else {
        return Err(format!("expected the commits, found {}", shown(&header)));
    };
    let mut header = next_header(stream)?;
    let ask = if let Some(size) = record(&header, "ask")? {
        if size > to.max_ask {
            return Err(format!("an ask of {size} bytes (at most {})", to.max_ask));
        }
        let bytes = read_exactly(stream, size, "ask")?;
        header = next_header(stream)?;
        Ask::Bytes(bytes)
    } else if let Some(size) = record(&header, "ask-refused")? {
        let why = reason(stream, size)?;
        header = next_header(stream)?;
        Ask::Refused(why)
    } else {
        Ask::None
    };
    if header != b"end" {
        return Err(format!("expected its end, found {}", shown(&header)));
    }
    let mut after = [0u8; 1];
    match stream.read(&mut after) {
        Ok(0) => Ok(Trailer {
            session,
            commits,
            ask,
        }),
        Ok(_) => Err("output after its end".into()),
        Err(e) => Err(format!("cannot read past its end: {e}")),
    }
}

/// A refusal's reason: one printable line of at most [`MAX_REASON_BYTES`].
fn reason(stream: &mut impl BufRead, size: u64) -> Result<String, String> {
    if size > MAX_REASON_BYTES {
        return Err(format!(
            "a refusal of {size} bytes (at most {MAX_REASON_BYTES})"
        ));
    }
    Ok(printable_line(&read_exactly(stream, size, "refusal")?))
}

/// Exactly `size` bytes (the caller bounds `size`).
fn read_exactly(stream: &mut impl BufRead, size: u64, what: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    stream
        .take(size)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the {what}: {e}"))?;
    if bytes.len() as u64 != size {
        return Err(format!("the {what} is cut short"));
    }
    Ok(bytes)
}

/// One header line, without its newline.
fn next_header(stream: &mut impl BufRead) -> Result<Vec<u8>, String> {
    let mut line = Vec::new();
    stream
        .take(MAX_HEADER + 1)
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("cannot read it: {e}"))?;
    match line.pop() {
        Some(b'\n') => Ok(line),
        _ if line.len() as u64 >= MAX_HEADER => Err("a header line too long".into()),
        _ => Err("it is cut short".into()),
    }
}

/// The size of a `<name> <n>` record; `None` when `header` is another record.
fn record(header: &[u8], name: &str) -> Result<Option<u64>, String> {
    let Some(rest) = header
        .strip_prefix(name.as_bytes())
        .and_then(|rest| rest.strip_prefix(b" "))
    else {
        return Ok(None);
    };
    // Digits only: no sign, no space, no leading zero but "0" itself.
    let digits = std::str::from_utf8(rest).unwrap_or_default();
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    match digits.parse::<u64>() {
        Ok(size) if canonical => Ok(Some(size)),
        _ => Err(format!("a bad size in {}", shown(header))),
    }
}

/// Copies exactly `size` bytes into a new file at `dest` (never through a link), refusing more
/// than `max`.
fn copy_exactly(
    stream: &mut impl BufRead,
    size: u64,
    dest: &Path,
    max: u64,
    what: &str,
) -> Result<(), String> {
    if size > max {
        return Err(format!("{what} of {size} bytes (at most {max})"));
    }
    let mut file = crate::sandbox::create_host_file(dest)
        .map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    let copied = std::io::copy(&mut stream.take(size), &mut file)
        .and_then(|n| file.flush().map(|()| n))
        .map_err(|e| format!("cannot copy the {what}: {e}"))?;
    if copied != size {
        return Err(format!(
            "the {what} is cut short ({copied} of {size} bytes)"
        ));
    }
    Ok(())
}

/// A header shown in an error: printable, short.
fn shown(header: &[u8]) -> String {
    format!("{:?}", printable_line(&header[..header.len().min(40)]))
}

fn printable_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests;
