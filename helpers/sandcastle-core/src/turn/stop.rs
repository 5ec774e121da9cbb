//! Stopping the agent's processes: every process of this user in the container but this one, so
//! that nothing of a turn goes on into the next. Processes of other users (the container's own,
//! root's) are not the agent's and are left alone; PID 1 reaps the orphans.
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long the killed processes are given to be gone (zombies count as gone).
const STOP_WITHIN: Duration = Duration::from_secs(5);
/// How long to wait between a kill and the next look.
const LOOK_AGAIN: Duration = Duration::from_millis(2);

/// `sandcastle stop-agent`: what the host runs when a turn did not stop the agent's processes
/// itself. Exits 1 with one line when some are still running.
pub fn stop_agent() -> ExitCode {
    match others() {
        Ok(()) => ExitCode::SUCCESS,
        Err(still_running) => {
            eprintln!("sandcastle stop-agent: {still_running}");
            ExitCode::from(1)
        }
    }
}

/// Kills every other live process of this user with SIGKILL until none is left, at most
/// [`STOP_WITHIN`]; `Err` names those still running.
pub(super) fn others() -> Result<(), String> {
    let until = Instant::now() + STOP_WITHIN;
    loop {
        let alive = live_others();
        if alive.is_empty() {
            return Ok(());
        }
        if Instant::now() >= until {
            let pids: Vec<String> = alive
                .iter()
                .map(|pid| pid.as_raw_nonzero().to_string())
                .collect();
            return Err(format!(
                "processes {} of the agent are still running after SIGKILL",
                pids.join(" ")
            ));
        }
        for pid in alive {
            // Gone already, or not ours after all: the next look tells.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        std::thread::sleep(LOOK_AGAIN);
    }
}

/// The processes of this user, this one and zombies aside.
fn live_others() -> Vec<rustix::process::Pid> {
    let me = rustix::process::getpid();
    let uid = rustix::process::getuid().as_raw().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let raw: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let pid = rustix::process::Pid::from_raw(raw)?;
            (pid != me && is_live_and_owned_by(raw, &uid)).then_some(pid)
        })
        .collect()
}

/// `/proc/PID/status` says the process runs (not a zombie) under the real uid `uid`.
fn is_live_and_owned_by(pid: i32, uid: &str) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
    };
    !matches!(field("State:"), None | Some("Z" | "X")) && field("Uid:") == Some(uid)
}
