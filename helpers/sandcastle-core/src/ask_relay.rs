//! An ask seen while the agent works: inside the agent's own `docker exec`, `sandcastle turn`
//! (`turn.rs`) watches the outbox of `sandcastle ask` ([`watch`]) and sends each new content out on
//! the exec's stdout as one framed record, at a line boundary, so the host publishes it while the
//! turn still runs and the turn stays one Docker call. The end-of-turn trailer (`hand_out.rs`)
//! still carries the outbox: the fallback.
//!
//! The record, between two lines of Claude Code's output (which are JSON, never starting so):
//!
//! ```text
//! sandcastle-ask <n>\n<n bytes>\n
//! ```
//!
//! Everything in it is untrusted (the agent can write into the exec's output): [`read`] parses it
//! strictly and bounds it, and the host checks the bytes with `ask::check` like the trailer's.
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use std::io::{BufRead, Read};
use std::mem::MaybeUninit;
use std::path::Path;

/// What starts a relayed record's line, followed by its size in bytes.
pub const PREFIX: &[u8] = b"sandcastle-ask ";

/// Calls `send` with the record of each new content of `outbox` (a regular file of at most
/// `MAX_ASK_BYTES`; what it held when the watch began was handed out before) until `send` says
/// stop. Woken by inotify when a file in the outbox's directory is written or renamed into it, or
/// when that directory appears in its parent: no polling. Returns at once when inotify cannot be
/// had; the trailer still carries the outbox.
pub fn watch(outbox: &Path, mut send: impl FnMut(Vec<u8>) -> bool) {
    let (Some(dir), Ok(events)) = (outbox.parent(), inotify::init(CreateFlags::CLOEXEC)) else {
        return;
    };
    if let Some(parent) = dir.parent() {
        // The directory may not exist yet: `sandcastle ask` makes it.
        let _ = inotify::add_watch(
            &events,
            parent,
            WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR,
        );
    }
    let mut last = outbox_bytes(outbox);
    let mut buffer = [MaybeUninit::uninit(); 4096];
    let mut reader = inotify::Reader::new(&events, &mut buffer);
    loop {
        // Watched before the outbox is read, so no change after the read goes unseen; again on
        // every wake-up, since the directory may have appeared or been replaced.
        let _ = inotify::add_watch(
            &events,
            dir,
            WatchFlags::CLOSE_WRITE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR | WatchFlags::DONT_FOLLOW,
        );
        let now = outbox_bytes(outbox);
        if let Some(bytes) = now.as_deref().filter(|_| now != last) {
            if !send(record(bytes)) {
                return;
            }
            last = now;
        }
        loop {
            // Whatever the event, the outbox is read again.
            match reader.next() {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return,
            }
            if reader.is_buffer_empty() {
                break;
            }
        }
    }
}

/// `bytes` framed as one record.
fn record(bytes: &[u8]) -> Vec<u8> {
    let mut record = [PREFIX, bytes.len().to_string().as_bytes(), b"\n"].concat();
    record.extend_from_slice(bytes);
    record.push(b'\n');
    record
}

/// The outbox's bytes when it is a regular file of at most `MAX_ASK_BYTES`: opened without
/// following a link or waiting on a FIFO, then checked, so a swap after a look is no way around.
fn outbox_bytes(outbox: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(outbox)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > crate::ask::MAX_ASK_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(crate::ask::MAX_ASK_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= crate::ask::MAX_ASK_BYTES).then_some(bytes)
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
