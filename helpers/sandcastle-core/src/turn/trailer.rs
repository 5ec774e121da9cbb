//! Writing the hand-out trailer (`hand_out.rs` reads it and gives its format), once nothing of the
//! agent runs any more: the marker line, the session file, the checkout's commits, the outbox.
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;

/// The longest first line of `.git/HEAD` or of the ref it names that is read.
const MAX_HEAD_LINE: u64 = 256;

/// What the trailer is made from.
pub(super) struct Parts<'a> {
    pub marker: &'a [u8],
    pub session: &'a Path,
    pub workspace: &'a Path,
    pub known: &'a str,
    pub outbox: &'a Path,
}

/// Writes the whole trailer to `out`.
pub(super) fn write(out: &mut impl Write, parts: &Parts) -> std::io::Result<()> {
    out.write_all(b"\n")?;
    out.write_all(parts.marker)?;
    out.write_all(b"\n")?;
    if let Some(file) = regular_file(parts.session, false) {
        copy_record(out, "session", file)?;
    }
    commits(out, parts.workspace, parts.known)?;
    if std::fs::symlink_metadata(parts.outbox).is_ok_and(|meta| !meta.is_file()) {
        refusal(out, "ask-refused", b"the outbox is not a regular file")?;
    } else if let Some(file) = regular_file(parts.outbox, false) {
        copy_record(out, "ask", file)?;
    }
    out.write_all(b"end\n")
}

/// Most turns end at the commit the host has: its id alone, with no git call; anything else is
/// left to `checkout::HAND_OUT`, which runs git and makes a bundle. HEAD is read here without git:
/// `.git/HEAD`, and the loose ref it names. What it says is only the sandbox's claim, and it is
/// safe to believe: when it names the host's own tip the host takes no commits and keeps that tip,
/// so a checkout that lies here only loses the agent's own work. A ref git keeps elsewhere (packed,
/// reftable), a detached HEAD at another commit, or anything unreadable takes the bundle path.
fn commits(out: &mut impl Write, workspace: &Path, known: &str) -> std::io::Result<()> {
    if !known.is_empty() && head_claims(workspace).as_deref() == Some(known) {
        out.write_all(format!("commits {}\n{known}\n", known.len() + 1).as_bytes())?;
        return Ok(());
    }
    let Ok(scratch) = tempfile::tempdir() else {
        return refusal(
            out,
            "commits-refused",
            b"cannot make a scratch directory in the sandbox",
        );
    };
    let (bundle, why) = (scratch.path().join("out"), scratch.path().join("err"));
    let made = std::fs::File::create(&bundle)
        .and_then(|stdout| Ok((stdout, std::fs::File::create(&why)?)))
        .and_then(|(stdout, stderr)| {
            Command::new("sh")
                .args(["-c", crate::checkout::HAND_OUT, "sh"])
                .arg(workspace)
                .arg(known)
                .stdin(std::process::Stdio::null())
                .stdout(stdout)
                .stderr(stderr)
                .status()
        });
    match made {
        Ok(status) if status.success() => {
            copy_record(out, "commits", std::fs::File::open(&bundle)?)
        }
        Ok(_) => {
            let mut first = Vec::new();
            std::fs::File::open(&why)?
                .take(crate::hand_out::MAX_REASON_BYTES)
                .read_to_end(&mut first)?;
            let line = first.split(|&b| b == b'\n').next().unwrap_or_default();
            refusal(out, "commits-refused", line)
        }
        Err(e) => refusal(
            out,
            "commits-refused",
            format!("cannot run the hand-out in the sandbox: {e}").as_bytes(),
        ),
    }
}

/// The commit id `.git/HEAD` names, directly or through a loose branch ref.
fn head_claims(workspace: &Path) -> Option<String> {
    let git = workspace.join(".git");
    let head = first_line(&git.join("HEAD"))?;
    match head.strip_prefix("ref: ") {
        Some(name) if name.starts_with("refs/heads/") => first_line(&git.join(name)),
        Some(_) => None,
        None => Some(head),
    }
}

/// The first line of a regular file (links followed, as `[ -f ]` does), at most
/// [`MAX_HEAD_LINE`] bytes of it.
fn first_line(path: &Path) -> Option<String> {
    let mut bytes = Vec::new();
    regular_file(path, true)?
        .take(MAX_HEAD_LINE)
        .read_to_end(&mut bytes)
        .ok()?;
    let line = bytes.split(|&b| b == b'\n').next()?;
    String::from_utf8(line.to_vec()).ok()
}

/// `path` opened when it is a regular file: never waiting on a FIFO, and not through a link unless
/// `follow`.
fn regular_file(path: &Path, follow: bool) -> Option<std::fs::File> {
    let mut flags = rustix::fs::OFlags::NONBLOCK;
    if !follow {
        flags |= rustix::fs::OFlags::NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// `<name> <n>\n` and the file's `n` bytes, `n` its size when opened: a file that grows meanwhile
/// is cut there, one that shrinks gives a record the host finds cut short.
fn copy_record(out: &mut impl Write, name: &str, file: std::fs::File) -> std::io::Result<()> {
    let size = file.metadata()?.len();
    out.write_all(format!("{name} {size}\n").as_bytes())?;
    std::io::copy(&mut file.take(size), out).map(drop)
}

/// `<name> <n>\n` and a reason of `n` bytes.
fn refusal(out: &mut impl Write, name: &str, why: &[u8]) -> std::io::Result<()> {
    out.write_all(format!("{name} {}\n", why.len()).as_bytes())?;
    out.write_all(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hand_out::{self, Ask, Commits, Destination};

    /// What `write` prints, read back by the host's own reader.
    fn read_back(parts: &Parts, dir: &Path) -> hand_out::Trailer {
        let mut printed = Vec::new();
        write(&mut printed, parts).unwrap();
        let mut stream = &printed[..];
        let mut marker = Vec::new();
        std::io::BufRead::read_until(&mut stream, b'\n', &mut marker).unwrap();
        assert_eq!(marker, b"\n");
        marker.clear();
        std::io::BufRead::read_until(&mut stream, b'\n', &mut marker).unwrap();
        assert_eq!(marker, [parts.marker, b"\n"].concat());
        let to = Destination {
            session: dir.join("session.out"),
            max_session: 1024,
            commits: dir.join("commits.out"),
            max_commits: 1024,
            max_ask: 1024,
        };
        hand_out::read(&mut stream, &to).unwrap()
    }

    /// The trailer is the protocol `hand_out.rs` reads: the session when it is a regular file,
    /// HEAD's id alone when a loose branch ref names the host's tip, the outbox's bytes, or its
    /// refusal when it is a link.
    #[test]
    fn the_trailer_reads_back_as_the_host_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        let known = "a".repeat(40);
        std::fs::create_dir_all(workspace.join(".git/refs/heads")).unwrap();
        std::fs::write(workspace.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(workspace.join(".git/refs/heads/main"), format!("{known}\n")).unwrap();
        let session = dir.path().join("session.jsonl");
        std::fs::write(&session, "{\"type\":\"user\"}\n").unwrap();
        let outbox = dir.path().join("ask.json");
        std::fs::write(&outbox, "{\"key\":\"issue:1\"}").unwrap();
        let parts = Parts {
            marker: b"sandcastle-hand-out 1 word",
            session: &session,
            workspace: &workspace,
            known: &known,
            outbox: &outbox,
        };

        let trailer = read_back(&parts, dir.path());
        assert!(trailer.session);
        assert_eq!(
            std::fs::read(dir.path().join("session.out")).unwrap(),
            b"{\"type\":\"user\"}\n"
        );
        assert_eq!(trailer.commits, Commits::InFile);
        assert_eq!(
            std::fs::read(dir.path().join("commits.out")).unwrap(),
            format!("{known}\n").as_bytes()
        );
        assert_eq!(trailer.ask, Ask::Bytes(b"{\"key\":\"issue:1\"}".to_vec()));

        std::fs::remove_file(&outbox).unwrap();
        std::os::unix::fs::symlink(&session, &outbox).unwrap();
        std::fs::remove_file(&session).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &session).unwrap();
        let trailer = read_back(&parts, dir.path());
        assert!(!trailer.session, "a linked session is not handed out");
        assert_eq!(
            trailer.ask,
            Ask::Refused("the outbox is not a regular file".into())
        );
    }

    /// A checkout that is no git repository hands out the hand-out's own first line of why.
    #[test]
    fn a_checkout_without_git_says_why_in_the_trailer() {
        let dir = tempfile::tempdir().unwrap();
        let parts = Parts {
            marker: b"sandcastle-hand-out 1 word",
            session: &dir.path().join("none"),
            workspace: dir.path(),
            known: "0000000000000000000000000000000000000000",
            outbox: &dir.path().join("none"),
        };
        let trailer = read_back(&parts, dir.path());
        assert_eq!(
            trailer.commits,
            Commits::Refused("the checkout has no .git directory any more".into())
        );
        assert_eq!(trailer.ask, Ask::None);
    }
}
