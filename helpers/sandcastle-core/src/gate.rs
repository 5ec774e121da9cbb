//! The gate: the orchestrator itself runs the project's `[commands] check` steps when the working
//! agent says it is done, in a sandbox of its own (`work_sandbox.rs`: a fresh container with a
//! checkout of the commit to be pushed). The steps come from the operator's config on the host,
//! never from the agent's branch, and each runs by `docker exec` with the image's own environment
//! (plus the sandbox's variables and the build cache's, [`cache_env`]), so the agent cannot talk
//! its way past it. Each step is bounded: silent for `idle`, or running for `step`, it is stopped.
use crate::agent::kill_agent_processes;
use crate::sandbox::Sandbox;
use crate::secrets::Redactor;
use anyhow::{Context, Result};
use std::io::Read;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How much of the output is kept: the end of it, where the failure usually is.
const TAIL_BYTES: usize = 3000;

/// Where a gate's own build cache volume is mounted in its container (never in the agent's, never
/// in another gate's).
pub const CACHE: &str = "/gate-cache";

/// Where the run's warm build cache (a volume built from the base branch's tip, never from an
/// agent's commit) is mounted read-only in a gate's container; [`copy_warm_script`] copies it into
/// the gate's own [`CACHE`], so what the gate's build writes reaches no other gate.
pub const WARM: &str = "/gate-warm";

/// The script that fills the gate's own cache ([`CACHE`], opened to the agent user) with a copy of
/// the warm cache mounted at [`WARM`], before anything of the commit runs: run as the agent user
/// (the warm cache's files are that user's) in the exec that makes the checkout
/// (`checkout::seed_after`), an entry at a time so the gate's own directory (root's) keeps its
/// times. Plain `cp -a`, so BusyBox's will do; GNU cp (9.0 on) shares blocks where the file system
/// can by itself.
pub fn copy_warm_script() -> String {
    format!("cd {WARM}\nfind . -mindepth 1 -maxdepth 1 -exec cp -a {{}} {CACHE}/ \\;")
}

/// The variables that point builds at the cache: cargo's target directory and the XDG cache.
pub fn cache_env() -> [(String, String); 2] {
    [
        ("CARGO_TARGET_DIR".into(), format!("{CACHE}/cargo-target")),
        ("XDG_CACHE_HOME".into(), format!("{CACHE}/xdg")),
    ]
}

/// How long a step may stay silent, and run at all.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub idle: Duration,
    pub step: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateOutcome {
    pub passed: bool,
    /// The step that failed, as a command line.
    pub failed_step: Option<String>,
    /// The end of the output of the last step that ran, redacted.
    pub tail: String,
    /// The commit the steps ran on; `None` when none ran.
    pub commit: Option<String>,
}

impl GateOutcome {
    /// `check = []`: nothing to run, nothing to fail.
    pub fn no_steps() -> GateOutcome {
        GateOutcome {
            passed: true,
            failed_step: None,
            tail: String::new(),
            commit: None,
        }
    }
}

/// Runs `steps` in order in the sandbox's checkout; the first failure stops. A step silent for
/// `bounds.idle`, or still running after `bounds.step`, is stopped and fails.
pub fn run(
    sandbox: &Sandbox,
    steps: &[Vec<String>],
    bounds: Bounds,
    redact: &Redactor,
) -> Result<GateOutcome> {
    let mut tail = String::new();
    for step in steps {
        let mut argv: Vec<&str> = vec!["sh", "-c", r#"exec "$@" 2>&1"#, "sh"];
        argv.extend(step.iter().map(String::as_str));
        let (passed, output) = run_step(sandbox, &argv, bounds)?;
        tail = redact.redact(&last_bytes(&output, TAIL_BYTES));
        if !passed {
            return Ok(GateOutcome {
                passed: false,
                failed_step: Some(redact.redact(&step.join(" "))),
                tail,
                commit: None,
            });
        }
    }
    Ok(GateOutcome {
        passed: true,
        failed_step: None,
        tail,
        commit: None,
    })
}

/// Why a step was stopped.
enum Stopped {
    Idle,
    TooLong,
}

/// Whether the step exited 0, and its output (the last 64 KiB).
fn run_step(sandbox: &Sandbox, argv: &[&str], bounds: Bounds) -> Result<(bool, String)> {
    let mut child = sandbox
        .exec_command(argv)
        .context("cannot start `docker exec` for the gate")?;
    drop(child.stdin.take());
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (sender, chunks) = mpsc::channel::<Vec<u8>>();
    let errors = sender.clone();
    let out = std::thread::spawn(move || forward(&mut stdout, &sender));
    let err = std::thread::spawn(move || forward(&mut stderr, &errors));
    let mut output: Vec<u8> = Vec::new();
    let until = Instant::now() + bounds.step;
    let stopped = loop {
        let left = until.saturating_duration_since(Instant::now());
        match chunks.recv_timeout(bounds.idle.min(left)) {
            Ok(chunk) => {
                output.extend_from_slice(&chunk);
                let excess = output.len().saturating_sub(64 * 1024);
                output.drain(..excess);
            }
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) if Instant::now() >= until => {
                break Some(Stopped::TooLong);
            }
            Err(RecvTimeoutError::Timeout) => break Some(Stopped::Idle),
        }
    };
    let timed_out = stopped.is_some();
    if timed_out {
        let _ = child.kill();
        kill_agent_processes(sandbox)?;
    }
    let status = child
        .wait()
        .context("cannot wait for `docker exec` of the gate")?;
    let _ = (out.join(), err.join());
    let mut text = String::from_utf8_lossy(&output).into_owned();
    match stopped {
        Some(Stopped::Idle) => text.push_str(&format!(
            "\n[sandcastle: no output for {}s (idleTimeout); the step was stopped]",
            bounds.idle.as_secs()
        )),
        Some(Stopped::TooLong) => text.push_str(&format!(
            "\n[sandcastle: still running after {}s ([sandbox] turnTimeout); the step was stopped]",
            bounds.step.as_secs()
        )),
        None => {}
    }
    Ok((status.success() && !timed_out, text))
}

fn forward(pipe: &mut impl Read, sender: &mpsc::Sender<Vec<u8>>) {
    let mut buffer = [0u8; 8192];
    while let Ok(read @ 1..) = pipe.read(&mut buffer) {
        if sender.send(buffer[..read].to_vec()).is_err() {
            break;
        }
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn last_bytes(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_end_cut_at_a_character() {
        assert_eq!(last_bytes("abcdef", 3), "def");
        assert_eq!(last_bytes("ab", 3), "ab");
        assert_eq!(last_bytes("aé", 1), "");
        assert_eq!(last_bytes("xé", 2), "é");
    }
}

#[cfg(test)]
mod docker_tests;
