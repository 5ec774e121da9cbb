//! `sandcastle relay`, the container's main process in place of `sleep infinity`: it listens on the
//! container's own 127.0.0.1 and passes every connection's bytes to the work's proxy socket, which
//! the host mounted read-only. It runs as the container's root (no capabilities), not as the agent,
//! so the agent can neither kill nor trace it; a relay that stops cuts only this sandbox's access.
//!
//! Only bytes pass: HTTP is the host proxy's to read.
//!
//! It listens where it is told, usually `127.0.0.1:0`: the kernel picks a free port as it binds
//! (containers sharing the host's network cannot race for one), and its first line on stdout,
//! [`LISTENING`] and the address, tells the host which (`Sandbox::relay_port`).
//!
//! Before it says so, it does the container's root set-up, so that no exec ever runs as root: the
//! execute-only copy of itself the agent's turn runs from (`--protect`), and the build cache opened
//! to the agent user (`--open`). A set-up that fails is the relay's exit before its port, which
//! fails the sandbox's start with what it printed.
use anyhow::{Context as _, Result};
use std::fs;
use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// What the relay's first line on stdout starts with, before the address it listens on.
pub const LISTENING: &str = "sandcastle relay: listening on ";
/// What the relay's line on stderr starts with when it stops, before what failed.
pub const FAILED: &str = "sandcastle relay: failed: ";

#[derive(clap::Args)]
pub struct RelayArgs {
    /// The loopback address to listen on, e.g. 127.0.0.1:0 (any free port).
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The proxy's Unix socket.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
    /// Where to make an execute-only copy of this binary (mode 0111) before listening.
    #[arg(long, value_name = "PATH")]
    protect: Option<PathBuf>,
    /// A directory to open to every user (mode 1777) before listening.
    #[arg(long, value_name = "DIR")]
    open: Vec<PathBuf>,
}

pub fn command(args: RelayArgs) -> ExitCode {
    match relay(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{FAILED}{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn relay(args: &RelayArgs) -> Result<()> {
    set_up(args)?;
    let listener = TcpListener::bind(args.listen)
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let bound = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{LISTENING}{bound}")
        .and_then(|()| stdout.flush())
        .context("cannot say the port on stdout")?;
    drop(stdout);
    serve(listener, Arc::from(args.socket.as_path()))
}

/// The container's root set-up, done by its own process (root's, with no capability: the owner of
/// what it changes needs none).
fn set_up(args: &RelayArgs) -> Result<()> {
    if let Some(dest) = &args.protect {
        let source = std::env::current_exe().context("cannot find the relay's own binary")?;
        protected_copy(&source, dest)?;
    }
    for dir in &args.open {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o1777))
            .with_context(|| format!("cannot open {} to every user (chmod 1777)", dir.display()))?;
    }
    Ok(())
}

/// Makes `dest` an execute-only copy of `source` (mode 0111), replacing what is there: written as
/// `dest.new`, created execute-only so that it is never readable, even while it is written, then
/// renamed over `dest`.
fn protected_copy(source: &Path, dest: &Path) -> Result<()> {
    let what = || {
        format!(
            "cannot make {}, the execute-only copy of {}",
            dest.display(),
            source.display()
        )
    };
    if let Some(parent) = dest.parent() {
        fs::create_dir_all(parent).with_context(what)?;
    }
    let mut binary = fs::File::open(source).with_context(what)?;
    let new = dest.with_added_extension("new");
    // A leftover `.new` is removed, never written into: without a capability, root cannot open an
    // execute-only file for writing.
    if let Err(e) = fs::remove_file(&new)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e).with_context(what);
    }
    let mut copy = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o111)
        .open(&new)
        .with_context(what)?;
    std::io::copy(&mut binary, &mut copy).with_context(what)?;
    // The umask may have taken bits from the creation's mode; none are added.
    copy.set_permissions(fs::Permissions::from_mode(0o111))
        .with_context(what)?;
    drop(copy);
    fs::rename(&new, dest).with_context(what)
}

/// Accepts connections for ever, each passed on in threads of its own.
pub fn serve(listener: TcpListener, socket: Arc<Path>) -> Result<()> {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let socket = Arc::clone(&socket);
        std::thread::spawn(move || {
            // A proxy that is gone is a refused connection, which the client reports.
            if let Ok(proxy) = UnixStream::connect(&*socket) {
                let _ = pass(client, proxy);
            }
        });
    }
    Ok(())
}

/// Copies both ways until each side has said all it has to say.
fn pass(client: TcpStream, proxy: UnixStream) -> std::io::Result<()> {
    let (mut client_in, mut proxy_out) = (client.try_clone()?, proxy.try_clone()?);
    let upward = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_in, &mut proxy_out);
        let _ = proxy_out.shutdown(Shutdown::Write);
    });
    let (mut proxy_in, mut client_out) = (proxy, client);
    let _ = std::io::copy(&mut proxy_in, &mut client_out);
    // The proxy is done with this connection: so is the client, which may keep it open for more.
    let _ = client_out.shutdown(Shutdown::Both);
    let _ = upward.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protected_copy_is_the_binary_execute_only_and_replaces_a_leftover() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("sandcastle");
        fs::write(&source, b"\x7fELF the binary's bytes").unwrap();
        let dest = dir.path().join("libexec/sandcastle-turn");
        fs::create_dir(dest.parent().unwrap()).unwrap();
        fs::write(&dest, b"a leftover").unwrap();
        fs::write(dest.with_added_extension("new"), b"a broken copy").unwrap();

        protected_copy(&source, &dest).unwrap();

        let mode = fs::metadata(&dest).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o111, "{mode:o}");
        // Readable again only to compare, whoever runs the test.
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), fs::read(&source).unwrap());
        let left: Vec<_> = fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, ["sandcastle-turn"]);
    }

    #[test]
    fn a_copy_that_cannot_be_made_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-binary");
        let dest = dir.path().join("sandcastle-turn");
        let error = format!("{:#}", protected_copy(&missing, &dest).unwrap_err());
        assert!(
            error.contains("cannot make") && error.contains("sandcastle-turn"),
            "{error}"
        );
        assert!(!dest.exists() && !dest.with_added_extension("new").exists());
    }
}
