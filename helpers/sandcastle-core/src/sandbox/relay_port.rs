//! The port a container's relay bound: the relay says it as its first line on stdout
//! (`relay::LISTENING`), which only the container's main process writes, before any exec runs.
//! The host reads that line from the container's log with a bound, and names the port in the
//! variables of every exec after (`Sandbox::add_env`).
use super::{DOCKER_TIMEOUT, Sandbox, TIMEOUT_VAR};
use crate::deadline::{self, Watchdog};
use crate::relay::LISTENING;
use anyhow::{Context as _, Result, bail};
use std::io::{BufRead as _, Read as _};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

/// The longest first line read: the prefix and an address.
const MAX_LINE_BYTES: u64 = 128;

impl Sandbox {
    /// The loopback port the container's relay listens on.
    pub fn relay_port(&self) -> u16 {
        self.relay_port
    }

    /// Gives every later exec `vars` too (the relay's address, once its port is known).
    pub fn add_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        self.env.extend(vars);
    }
}

/// Follows the log of container `id` until its relay's first line, within `DOCKER_TIMEOUT`; a
/// relay that exits first (its log ends) is an error with what it printed on stderr.
pub(super) fn learn(id: &str) -> Result<u16> {
    let mut child = Command::new("docker")
        .args(["logs", "--follow", id])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run `docker logs`: {e}"))?;
    let bound = deadline::bound(TIMEOUT_VAR, DOCKER_TIMEOUT);
    let watchdog = Watchdog::start(&child, bound);
    let mut line = String::new();
    let read = std::io::BufReader::new(child.stdout.take().expect("piped").take(MAX_LINE_BYTES))
        .read_line(&mut line);
    // The line is all the host wants: the follow ends here.
    let _ = child.kill();
    let mut stderr = String::new();
    if let Some(pipe) = child.stderr.take() {
        let _ = pipe.take(4 * 1024).read_to_string(&mut stderr);
    }
    let _ = child.wait();
    if watchdog.finished() {
        bail!(
            "the sandbox's relay did not say its port within {}",
            humantime::format_duration(bound)
        );
    }
    read.context("cannot read the sandbox's log")?;
    match parse(&line) {
        Some(port) => Ok(port),
        None => {
            let reason = stderr
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("it printed nothing");
            bail!(
                "the sandbox's relay did not start ({reason}): check that the image's `sandcastle` has the relay"
            )
        }
    }
}

/// The port in the relay's first line, if it is one on the loopback.
fn parse(line: &str) -> Option<u16> {
    let addr: SocketAddr = line
        .strip_suffix('\n')?
        .strip_prefix(LISTENING)?
        .parse()
        .ok()?;
    (addr.ip().is_loopback() && addr.port() != 0).then_some(addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_loopback_line_names_a_port() {
        assert_eq!(parse(&format!("{LISTENING}127.0.0.1:41234\n")), Some(41234));
        for refused in [
            format!("{LISTENING}127.0.0.1:41234"),
            format!("{LISTENING}0.0.0.0:41234\n"),
            format!("{LISTENING}127.0.0.1:0\n"),
            format!("{LISTENING}127.0.0.1:99999\n"),
            "sandcastle relay: cannot listen on 127.0.0.1:0\n".to_string(),
            String::new(),
        ] {
            assert_eq!(parse(&refused), None, "{refused:?}");
        }
    }
}
