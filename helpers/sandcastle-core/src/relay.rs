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
use anyhow::{Context as _, Result};
use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// What the relay's first line on stdout starts with, before the address it listens on.
pub const LISTENING: &str = "sandcastle relay: listening on ";

#[derive(clap::Args)]
pub struct RelayArgs {
    /// The loopback address to listen on, e.g. 127.0.0.1:0 (any free port).
    #[arg(long, value_name = "ADDR")]
    listen: SocketAddr,
    /// The proxy's Unix socket.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
}

pub fn command(args: RelayArgs) -> ExitCode {
    match relay(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandcastle relay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn relay(args: &RelayArgs) -> Result<()> {
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
