//! Programs run with a time bound: one that hangs (a forge that never answers git) is killed, with
//! every process it started, and the wait ends in one clear error. The [`Watchdog`] also stops a
//! sandbox's exec at its bound (the engine's own calls are bounded in `sandbox/engine.rs`).
use anyhow::{Context as _, Result, bail};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::Duration;

/// The most of a program's stderr kept; the rest is read and dropped.
const MAX_STDERR_BYTES: u64 = 64 * 1024;

/// Runs `command` to its end, as `Command::output` does, but for at most `limit`, keeping at most
/// `max_stdout` bytes of what it prints: a program that prints more is stopped, one clear error.
/// The program runs in a process group of its own, so a hang is ended for all of it (git's HTTP
/// helper too).
pub fn output_within(
    command: &mut Command,
    limit: Duration,
    max_stdout: u64,
    what: &str,
) -> Result<Output> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start `{what}`"))?;
    let group = rustix::process::Pid::from_raw(child.id() as i32);
    let stdout = child.stdout.take().map(|pipe| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.take(max_stdout + 1).read_to_end(&mut bytes);
            if bytes.len() as u64 > max_stdout
                && let Some(group) = group
            {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            bytes
        })
    });
    let stderr = child.stderr.take().map(|mut pipe| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.by_ref().take(MAX_STDERR_BYTES).read_to_end(&mut bytes);
            let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            bytes
        })
    });
    // A blocking wait, and a watchdog that ends it at the bound: no poll, so a program that takes
    // 3 ms costs 3 ms (a 20 ms poll made each of a work's dozens of git calls cost 20).
    let watchdog = Watchdog::start(&child, limit);
    let status = child.wait();
    if watchdog.finished() {
        bail!(
            "`{what}` did not finish within {} and was stopped",
            humantime::format_duration(limit)
        );
    }
    let status = status.with_context(|| format!("cannot wait for `{what}`"))?;
    let joined = |pipe: Option<thread::JoinHandle<Vec<u8>>>| {
        pipe.and_then(|p| p.join().ok()).unwrap_or_default()
    };
    let stdout = joined(stdout);
    if stdout.len() as u64 > max_stdout {
        bail!("`{what}` printed more than {max_stdout} bytes and was stopped");
    }
    Ok(Output {
        status,
        stdout,
        stderr: joined(stderr),
    })
}

/// Kills a spawned process group when it outlives its bound, for programs whose output is
/// streamed rather than collected. Dropping it (or `finished`) calls the kill off.
pub struct Watchdog {
    done: std::sync::mpsc::Sender<()>,
    fired: thread::JoinHandle<bool>,
}

impl Watchdog {
    /// Watches `child`, which must have been spawned with `process_group(0)`.
    pub fn start(child: &std::process::Child, limit: Duration) -> Watchdog {
        let group = rustix::process::Pid::from_raw(child.id() as i32);
        Watchdog::calling(limit, move || {
            if let Some(group) = group {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
        })
    }

    /// Calls `stop` when `limit` passes first (a sandbox's exec lets go of its streams).
    pub fn calling(limit: Duration, stop: impl FnOnce() + Send + 'static) -> Watchdog {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let fired = thread::spawn(move || {
            let timed_out = matches!(
                wait.recv_timeout(limit),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            );
            if timed_out {
                stop();
            }
            timed_out
        });
        Watchdog { done, fired }
    }

    /// Whether the bound passed and the program was killed.
    pub fn finished(self) -> bool {
        let _ = self.done.send(());
        self.fired.join().unwrap_or(false)
    }
}

/// `default`, or for tests the whole seconds in the variable `name` (documented as test-only).
pub fn bound(name: &str, default: Duration) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(default, Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_program_that_finishes_gives_its_output() {
        let out = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
            4,
            "sh",
        )
        .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    /// The child holds the pipes open too: only killing the whole group ends the wait.
    #[test]
    fn a_hang_is_stopped_with_everything_it_started() {
        let started = Instant::now();
        let error = output_within(
            Command::new("sh").args(["-c", "sleep 60 & sleep 60; wait"]),
            Duration::from_secs(1),
            1024,
            "sh hang",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`sh hang` did not finish within 1s and was stopped"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    /// A program that prints without end is stopped at the bound, not read whole.
    #[test]
    fn output_past_the_bound_stops_the_program() {
        let error = output_within(
            Command::new("sh").args(["-c", "yes; sleep 60"]),
            Duration::from_secs(60),
            64 * 1024,
            "yes",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`yes` printed more than 65536 bytes and was stopped"
        );
    }
}
