//! Programs run with a time bound: one that hangs (a forge that never answers git, a Docker
//! engine that never answers its CLI) is killed, with every process it started, and the wait ends
//! in one clear error.
use anyhow::{Context as _, Result, bail};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Runs `command` to its end, as `Command::output` does, but for at most `limit`. The program
/// runs in a process group of its own, so a hang is ended for all of it (git's HTTP helper too).
pub fn output_within(command: &mut Command, limit: Duration, what: &str) -> Result<Output> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start `{what}`"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let until = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= until {
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let Some(status) = status else {
        if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = child.wait();
        bail!(
            "`{what}` did not finish within {} and was stopped",
            humantime::format_duration(limit)
        );
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
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
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let group = rustix::process::Pid::from_raw(child.id() as i32);
        let fired = thread::spawn(move || {
            let timed_out = matches!(
                wait.recv_timeout(limit),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            );
            if let (true, Some(group)) = (timed_out, group) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
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

    #[test]
    fn a_program_that_finishes_gives_its_output() {
        let out = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
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
            "sh hang",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "`sh hang` did not finish within 1s and was stopped"
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
