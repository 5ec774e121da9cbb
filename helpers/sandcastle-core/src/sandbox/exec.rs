//! One process run in a sandbox, attached, with the shape of a spawned `std::process::Child`:
//! `stdin` to write, `stdout`/`stderr` to read (plain OS pipes, so blocking callers read and write
//! them as before), `wait`/`try_wait` for its exit status and `kill` to let go of it. A task on the
//! engine's runtime moves the bytes between the pipes and the provider's connection; the provider
//! says how it ended ([`Ending`]). The Docker engine's exec is [`Exec::start`]; another provider
//! makes its own with [`Exec::attached`].
use super::AGENT_USER;
use super::engine::{self, Engine};
use crate::deadline::Watchdog;
use anyhow::Result;
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use futures_util::StreamExt;
use std::io::{PipeReader, PipeWriter};
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;

/// The most of an exec's stderr [`Exec::output_within`] keeps; the rest is read and dropped.
const MAX_STDERR_BYTES: u64 = 64 * 1024;
/// [`Exec::output`]'s bounds.
const OUTPUT_TIMEOUT: Duration = Duration::from_secs(600);
const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

/// The status [`Exec::wait`] gives after [`Exec::kill`]: killed by SIGKILL, as a killed `docker
/// exec` client was.
const KILLED: i32 = 9;

/// Where an exec runs, with what. It runs as the agent user, always: no exec runs as root (the
/// container's own process does its root set-up, `relay.rs`).
pub struct ExecSpec<'a> {
    pub container: &'a str,
    pub workdir: &'a str,
    /// `NAME`, value pairs: they go in the request's body, for this exec only (the container's
    /// own configuration holds none), never in an argument or a message.
    pub env: &'a [(String, String)],
    pub argv: &'a [&'a str],
}

/// A started exec. Its exit status is its provider's once its output ended.
pub struct Exec {
    pub stdin: Option<PipeWriter>,
    pub stdout: Option<PipeReader>,
    pub stderr: Option<PipeReader>,
    ending: Box<dyn Ending>,
    relay: Option<tokio::task::JoinHandle<()>>,
    status: Option<ExitStatus>,
}

/// What the provider that started an exec says of it once its output ended.
pub(crate) trait Ending: Send + Sync {
    /// The exit code once the process is over; `None` while it runs.
    fn exit_code(&self) -> std::io::Result<Option<i32>>;
    /// How long the provider may take to say so after the output ended.
    fn bound(&self) -> Duration;
    /// The provider, for the error when it does not say so in time.
    fn who(&self) -> String;
}

/// An exec of the Docker engine: its exit code is in the exec's inspection.
struct DockerExec {
    engine: Engine,
    id: String,
}

impl Ending for DockerExec {
    /// The exit code once the engine says the process is over.
    fn exit_code(&self) -> std::io::Result<Option<i32>> {
        let id = self.id.clone();
        let inspected = self
            .engine
            .call("docker exec inspect", |docker| async move {
                docker.inspect_exec(&id).await
            })
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        Ok(match (inspected.running, inspected.exit_code) {
            (Some(false), Some(code)) => Some(code as i32),
            _ => None,
        })
    }

    fn bound(&self) -> Duration {
        self.engine.bound()
    }

    fn who(&self) -> String {
        format!("the Docker engine at {}", self.engine.host())
    }
}

impl Exec {
    /// Creates and starts the exec on the Docker engine, attached to all three streams.
    pub(super) fn start(engine: &Engine, spec: &ExecSpec) -> Result<Exec> {
        let config = ExecConfig {
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(false),
            env: Some(spec.env.iter().map(|(n, v)| format!("{n}={v}")).collect()),
            cmd: Some(spec.argv.iter().map(|a| a.to_string()).collect()),
            user: Some(AGENT_USER.to_string()),
            working_dir: Some(spec.workdir.to_string()),
            ..Default::default()
        };
        let container = spec.container.to_string();
        let (id, attached) = engine.call("docker exec", |docker| async move {
            let id = docker.create_exec(&container, config).await?.id;
            let options = StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: Some(64 * 1024),
            };
            let attached = docker.start_exec(&id, Some(options)).await?;
            Ok((id, attached))
        })?;
        let StartExecResults::Attached { output, input } = attached else {
            anyhow::bail!("`docker exec` started detached");
        };
        let (stdin, stdin_writer) = std::io::pipe()?;
        let (stdout_reader, stdout) = std::io::pipe()?;
        let (stderr_reader, stderr) = std::io::pipe()?;
        let relay = engine::spawn(relay(output, input, stdin, stdout, stderr))?;
        let ending = DockerExec {
            engine: engine.clone(),
            id,
        };
        Ok(Exec::attached(
            (stdin_writer, stdout_reader, stderr_reader),
            relay,
            Box::new(ending),
        ))
    }

    /// An exec a provider started: the host's ends of its stdin, stdout and stderr pipes, the
    /// task (on the runtime of `engine.rs`) that moves their bytes to and from the provider until
    /// the output ends, and what the provider says of its end.
    pub(crate) fn attached(
        (stdin, stdout, stderr): (PipeWriter, PipeReader, PipeReader),
        relay: tokio::task::JoinHandle<()>,
        ending: Box<dyn Ending>,
    ) -> Exec {
        Exec {
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
            ending,
            relay: Some(relay),
            status: None,
        }
    }

    /// Writes `input` to the exec's stdin on a thread of its own, then closes it.
    pub fn feed(&mut self, mut input: impl std::io::Read + Send + 'static) {
        if let Some(mut stdin) = self.stdin.take() {
            // An exec that ends before reading everything makes this write fail; its exit is what
            // counts.
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut input, &mut stdin);
            });
        }
    }

    /// What [`Exec::kill`] does, callable from another thread (a watchdog).
    pub fn killer(&self) -> impl FnOnce() + Send + 'static {
        let relay = self.relay.as_ref().map(|r| r.abort_handle());
        move || {
            if let Some(relay) = relay {
                relay.abort();
            }
        }
    }

    /// Runs to the end, as `Command::output` does (stdin closed unless fed): at most `max_stdout`
    /// bytes of stdout and 64 KiB of stderr kept, within `limit`. More output, or more time, stops
    /// it with one error naming `what`.
    pub fn output_within(
        mut self,
        limit: Duration,
        max_stdout: u64,
        what: &str,
    ) -> Result<std::process::Output> {
        use std::io::Read;
        drop(self.stdin.take());
        let stderr = self.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.by_ref().take(MAX_STDERR_BYTES).read_to_end(&mut bytes);
                let _ = std::io::copy(&mut pipe, &mut std::io::sink());
                bytes
            })
        });
        let watchdog = Watchdog::calling(limit, self.killer());
        let mut stdout = Vec::new();
        if let Some(pipe) = self.stdout.take() {
            let _ = pipe.take(max_stdout + 1).read_to_end(&mut stdout);
        }
        let too_much = stdout.len() as u64 > max_stdout;
        if too_much {
            self.kill()?;
        }
        let status = self.wait();
        let stopped = watchdog.finished();
        let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        if stopped {
            anyhow::bail!(
                "`{what}` did not finish within {} and was stopped",
                humantime::format_duration(limit)
            );
        }
        if too_much {
            anyhow::bail!("`{what}` printed more than {max_stdout} bytes and was stopped");
        }
        Ok(std::process::Output {
            status: status?,
            stdout,
            stderr,
        })
    }

    /// [`Exec::output_within`] with the bounds of a transfer.
    pub fn output(self) -> Result<std::process::Output> {
        self.output_within(OUTPUT_TIMEOUT, MAX_OUTPUT_BYTES, "docker exec")
    }

    /// The exit status, if the output has ended and the engine says the process exited.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if self.relay.as_ref().is_some_and(|r| !r.is_finished()) {
            return Ok(None);
        }
        self.reap()?;
        if self.status.is_none() {
            // Shifted as a wait status.
            self.status = self
                .ending
                .exit_code()?
                .map(|code| ExitStatus::from_raw((code & 0xff) << 8));
        }
        Ok(self.status)
    }

    /// Waits for the output to end, then for the provider's exit code (a killed exec: SIGKILL).
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.reap()?;
        let until = Instant::now() + self.ending.bound();
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= until {
                return Err(std::io::Error::other(format!(
                    "{} still says the exec runs after its output ended",
                    self.ending.who()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Lets go of the exec: its streams close (its pipes end for the reader), and [`Exec::wait`]
    /// says it was killed. The Engine API cannot signal an exec's process: what it started is
    /// stopped in the container (`agent::kill_agent_processes`), as with a killed `docker exec`.
    pub fn kill(&mut self) -> std::io::Result<()> {
        (self.killer())();
        self.reap()
    }

    /// Waits for the relay to end; one that was stopped makes the status SIGKILL's.
    fn reap(&mut self) -> std::io::Result<()> {
        if let Some(relay) = self.relay.take() {
            let ended = engine::block_on(relay).map_err(std::io::Error::other)?;
            if ended.is_err_and(|e| e.is_cancelled()) {
                self.status.get_or_insert(ExitStatus::from_raw(KILLED));
            }
        }
        Ok(())
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.abort();
        }
    }
}

type Output =
    Pin<Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// Moves what is written to `stdin` to the exec (its end closes the exec's stdin), and the exec's
/// output to the `stdout` and `stderr` pipes, until the output ends. A pipe whose reader is gone
/// gets nothing more; the rest is read and dropped, so the exec is never held up by it.
async fn relay(
    mut output: Output,
    mut input: Pin<Box<dyn AsyncWrite + Send>>,
    stdin: PipeReader,
    stdout: PipeWriter,
    stderr: PipeWriter,
) {
    let feed = async {
        if let Ok(mut stdin) = pipe::Receiver::from_owned_fd(OwnedFd::from(stdin)) {
            let _ = tokio::io::copy(&mut stdin, &mut input).await;
        }
        let _ = input.shutdown().await;
        std::future::pending::<()>().await
    };
    let drain = async {
        let mut stdout = pipe::Sender::from_owned_fd(OwnedFd::from(stdout)).ok();
        let mut stderr = pipe::Sender::from_owned_fd(OwnedFd::from(stderr)).ok();
        while let Some(Ok(chunk)) = output.next().await {
            let (pipe, bytes) = match chunk {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    (&mut stdout, message)
                }
                LogOutput::StdErr { message } => (&mut stderr, message),
                LogOutput::StdIn { .. } => continue,
            };
            if let Some(sender) = pipe
                && sender.write_all(&bytes).await.is_err()
            {
                *pipe = None;
            }
        }
    };
    tokio::select! {
        () = drain => {}
        () = feed => {}
    }
}
