//! An ask seen while the agent works: inside the agent's own `docker exec`, `sandcastle turn`
//! (`turn.rs`) watches the outbox of `sandcastle ask` ([`Watch`]) and sends each new content out on
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

/// The outbox watched: set up before the program starts, so that no ask it makes is missed.
pub struct Watch {
    outbox: std::path::PathBuf,
    events: Option<std::os::fd::OwnedFd>,
    /// What the outbox held when the watch began (handed out before) or last sent.
    last: Option<Vec<u8>>,
}

impl Watch {
    /// Woken by inotify when a file in the outbox's directory is written or renamed into it, or
    /// when that directory appears in its parent: no polling. Without inotify nothing is relayed;
    /// the trailer still carries the outbox.
    pub fn new(outbox: &Path) -> Watch {
        let events = inotify::init(CreateFlags::CLOEXEC).ok();
        if let (Some(events), Some(parent)) = (&events, outbox.parent().and_then(Path::parent)) {
            // The directory may not exist yet: `sandcastle ask` makes it.
            let _ = inotify::add_watch(
                events,
                parent,
                WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR,
            );
        }
        let mut watch = Watch {
            outbox: outbox.to_path_buf(),
            events,
            last: None,
        };
        watch.watch_dir();
        watch.last = outbox_bytes(outbox);
        watch
    }

    /// Calls `send` with the record of each new content of the outbox (a regular file of at most
    /// `MAX_ASK_BYTES`) until `send` says stop or inotify fails.
    pub fn run(mut self, mut send: impl FnMut(Vec<u8>) -> bool) {
        let Some(events) = self.events.take() else {
            return;
        };
        let mut buffer = [MaybeUninit::uninit(); 4096];
        let mut reader = inotify::Reader::new(&events, &mut buffer);
        loop {
            // Whatever the events, the outbox is read again.
            loop {
                match reader.next() {
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => return,
                }
                if reader.is_buffer_empty() {
                    break;
                }
            }
            // Watched again before the outbox is read, so no change after the read goes unseen:
            // the directory may have appeared or been replaced.
            if let Some(dir) = self.outbox.parent() {
                let _ = inotify::add_watch(&events, dir, DIR_EVENTS);
            }
            let now = outbox_bytes(&self.outbox);
            if let Some(bytes) = now.as_deref().filter(|_| now != self.last) {
                if !send(record(bytes)) {
                    return;
                }
                self.last = now;
            }
        }
    }

    fn watch_dir(&self) {
        if let (Some(events), Some(dir)) = (&self.events, self.outbox.parent()) {
            let _ = inotify::add_watch(events, dir, DIR_EVENTS);
        }
    }
}

/// What in the outbox's directory wakes the watch: a file written, or renamed into it.
const DIR_EVENTS: WatchFlags = WatchFlags::CLOSE_WRITE
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::ONLYDIR)
    .union(WatchFlags::DONT_FOLLOW);

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
    use std::sync::mpsc;
    use std::time::Duration;

    /// How long a record may take to come before the test fails (a bound, not a measure).
    const AT_MOST: Duration = Duration::from_secs(10);

    /// Written as `sandcastle ask` writes it: beside it, then renamed over it.
    fn ask(outbox: &Path, bytes: &str) {
        let tmp = outbox.with_extension("json.tmp");
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, outbox).unwrap();
    }

    /// Woken by inotify, not a clock: the outbox's directory made during the turn, each new content
    /// one record, the same content again none, a link none.
    #[test]
    fn each_new_content_of_the_outbox_is_one_record() {
        let home = tempfile::tempdir().unwrap();
        let outbox = home.path().join(".sandcastle-outbox/ask.json");
        let (records, received) = mpsc::channel();
        let watch = Watch::new(&outbox);
        let outbox_seen = outbox.clone();
        std::thread::scope(|scope| {
            scope.spawn(|| watch.run(|record| records.send(record).is_ok()));
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                made_during_the_turn(&outbox_seen, &received)
            }));
            drop(received);
            // The watch ends at its next record, which nobody takes.
            ask(&outbox_seen, "last");
            if let Err(failed) = checked {
                std::panic::resume_unwind(failed);
            }
        });
    }

    fn made_during_the_turn(outbox: &Path, received: &mpsc::Receiver<Vec<u8>>) {
        std::fs::create_dir(outbox.parent().unwrap()).unwrap();
        ask(outbox, "first");
        let first = received.recv_timeout(AT_MOST).unwrap();
        assert_eq!(first, b"sandcastle-ask 5\nfirst\n");

        ask(outbox, "first");
        ask(outbox, "second");
        assert_eq!(
            received.recv_timeout(AT_MOST).unwrap(),
            b"sandcastle-ask 6\nsecond\n"
        );
        std::fs::remove_file(outbox).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", outbox).unwrap();
        std::fs::remove_file(outbox).unwrap();
        ask(outbox, "third");
        assert_eq!(
            received.recv_timeout(AT_MOST).unwrap(),
            b"sandcastle-ask 5\nthird\n",
            "nothing came between: the repeat and the link were not records"
        );
    }

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
