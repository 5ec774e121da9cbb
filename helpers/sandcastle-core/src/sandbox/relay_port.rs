//! The port a container's relay bound: the relay says it as its first line on stdout
//! (`relay::LISTENING`) once its root set-up is done, which only the container's main process
//! writes, before any exec runs.
//! The host reads that line from the container's log with a bound, and names the port in the
//! variables of every exec after (`Sandbox::add_env`).
use super::Sandbox;
use super::engine::Engine;
use crate::relay::{FAILED, LISTENING};
use anyhow::Result;
use bollard::container::LogOutput;
use bollard::query_parameters::LogsOptions;
use futures_util::StreamExt as _;
use std::net::SocketAddr;

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

/// Follows the log of container `id` until its relay's first line, within the engine's bound; a
/// relay that exits first (its log ends), its set-up failed or it never ran, is an error with what
/// it printed on stderr.
pub(super) fn learn(engine: &Engine, id: &str) -> Result<u16> {
    let id = id.to_string();
    let (stdout, stderr) = engine.call("docker logs --follow", |docker| async move {
        let options = LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            ..Default::default()
        };
        let mut logs = docker.logs(&id, Some(options));
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        // The first line is all the host wants: the follow ends there, or at the bound.
        while !stdout.contains(&b'\n') && (stdout.len() as u64) < MAX_LINE_BYTES {
            match logs.next().await {
                Some(chunk) => match chunk? {
                    LogOutput::StdOut { message } => stdout.extend_from_slice(&message),
                    LogOutput::StdErr { message } if stderr.len() < 4 * 1024 => {
                        stderr.extend_from_slice(&message)
                    }
                    _ => {}
                },
                None => break,
            }
        }
        Ok((stdout, stderr))
    })?;
    let line = String::from_utf8_lossy(&stdout);
    let first = line.split_inclusive('\n').next().unwrap_or("");
    match parse(first) {
        Some(port) => Ok(port),
        None => Err(not_started(&String::from_utf8_lossy(&stderr))),
    }
}

/// The error of a relay that said no port, from its `stderr`: what its set-up said failed, or, when
/// it did not run as this sandcastle's relay, what stopped it and the fix.
fn not_started(stderr: &str) -> anyhow::Error {
    let said = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("it printed nothing");
    match said.strip_prefix(FAILED) {
        Some(failed) => anyhow::anyhow!("the sandbox's relay stopped before listening: {failed}"),
        None => anyhow::anyhow!(
            "the sandbox's relay did not start ({said}): check that the image's `sandcastle` is as \
             new as this one, with the relay and its --protect and --open"
        ),
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

    #[test]
    fn a_relay_that_said_no_port_is_an_error_saying_what_stopped_it() {
        let failed = format!("\n{FAILED}cannot open /gate-cache to every user (chmod 1777)\n");
        assert_eq!(
            not_started(&failed).to_string(),
            "the sandbox's relay stopped before listening: cannot open /gate-cache to every user (chmod 1777)"
        );
        let old = not_started("error: unexpected argument '--protect' found\n").to_string();
        assert!(
            old.starts_with("the sandbox's relay did not start (error: unexpected argument")
                && old.contains("--protect"),
            "{old}"
        );
        assert!(not_started("").to_string().contains("(it printed nothing)"));
    }
}
