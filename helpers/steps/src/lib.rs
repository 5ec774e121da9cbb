//! `fmt` and `check`: each runs, in order, the steps a project lists under `[commands]` in
//! `.sandcastle/config.toml` (the Rust defaults without one), streaming their output and stopping
//! at the first failure.
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};

use sandcastle_config::Commands;

mod argv;

/// Which list of steps a binary runs.
#[derive(Clone, Copy)]
pub enum Steps {
    Fmt,
    Check,
}

impl Steps {
    fn name(self) -> &'static str {
        match self {
            Steps::Fmt => "fmt",
            Steps::Check => "check",
        }
    }

    fn select(self, commands: Commands) -> Vec<Vec<String>> {
        match self {
            Steps::Fmt => commands.fmt,
            Steps::Check => commands.check,
        }
    }

    fn about(self) -> &'static str {
        match self {
            Steps::Fmt => {
                "Format the project and apply lint fixes: run each configured fmt step in order."
            }
            Steps::Check => {
                "Check the project: run each configured check step in order; fail on the first that fails."
            }
        }
    }
}

/// The whole program for `fmt` and `check`: parse arguments, find the steps, run them.
pub fn main(steps: Steps) -> ExitCode {
    let name = steps.name();
    help(steps).get_matches();
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => {
            eprintln!("{name}: cannot read the current directory: {error}");
            return ExitCode::from(2);
        }
    };
    let (root, commands) = match project(&cwd) {
        Ok(found) => found,
        Err(error) => {
            eprintln!("{name}: {error}");
            return ExitCode::from(2);
        }
    };
    match run(name, &steps.select(commands), &root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{name}: {}", failure.message);
            ExitCode::from(failure.exit_code)
        }
    }
}

fn help(steps: Steps) -> clap::Command {
    let defaults = Commands::default();
    let listed = |steps: &[Vec<String>]| -> String {
        steps
            .iter()
            .map(|step| format!("  {}\n", argv::display(step)))
            .collect()
    };
    let name = steps.name();
    clap::Command::new(name)
        .version(env!("CARGO_PKG_VERSION"))
        .about(steps.about())
        .long_about(format!(
            "{}\n\n\
         The steps come from `{name} = [[...], ...]` under [commands] in .sandcastle/config.toml, \
         found in the current directory or its nearest ancestor that has one; each step is an argv \
         list, run without a shell in the directory that holds .sandcastle/. Without a config file \
         (or without that key) the steps are the Rust defaults:\n\n{}\n\
         Each step's output streams through. The first step that fails stops the run; it is named \
         on stderr (`{name}: step 2/3 failed: ... (exit 101)`) and its exit status is {name}'s. \
         An invalid config file exits with status 2.",
            steps.about(),
            listed(&steps.select(defaults)),
        ))
}

/// The directory to run in and the commands: from the nearest config, or the defaults here.
fn project(cwd: &Path) -> Result<(PathBuf, Commands), sandcastle_config::ConfigError> {
    let Some(path) = sandcastle_config::find(cwd) else {
        return Ok((cwd.to_path_buf(), Commands::default()));
    };
    let config = sandcastle_config::load(&path)?;
    // `<root>/.sandcastle/config.toml` -> `<root>`.
    let root = path
        .parent()
        .and_then(Path::parent)
        .unwrap_or(cwd)
        .to_path_buf();
    Ok((root, config.commands))
}

/// Why a run stopped: the line for stderr and the exit status to return.
pub struct Failure {
    pub message: String,
    pub exit_code: u8,
}

/// Runs each step in `dir` with inherited stdio, stopping at the first that fails.
pub fn run(name: &str, steps: &[Vec<String>], dir: &Path) -> Result<(), Failure> {
    let total = steps.len();
    for (index, step) in steps.iter().enumerate() {
        let number = index + 1;
        let shown = argv::display(step);
        let failed = |why: String, exit_code: u8| Failure {
            message: format!("step {number}/{total} failed: {shown} ({why})"),
            exit_code,
        };
        let Some((program, args)) = step.split_first() else {
            return Err(failed("empty step; give it a program to run".into(), 2));
        };
        eprintln!("{name}: step {number}/{total}: {shown}");
        let status = Command::new(program)
            .args(args)
            .current_dir(dir)
            .status()
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => failed(
                    format!(
                        "`{program}` not found; install it or change `{name}` under [commands] in \
                         .sandcastle/config.toml"
                    ),
                    127,
                ),
                _ => failed(format!("cannot start `{program}`: {error}"), 126),
            })?;
        if !status.success() {
            let (why, exit_code) = describe(status);
            return Err(failed(why, exit_code));
        }
    }
    Ok(())
}

/// `exit 101`, or `killed by signal 9` (exit status 137, as a shell reports it).
fn describe(status: ExitStatus) -> (String, u8) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("exit {code}"), u8::try_from(code).unwrap_or(1)),
        (None, Some(signal)) => (
            format!("killed by signal {signal}"),
            u8::try_from(128 + signal).unwrap_or(1),
        ),
        (None, None) => ("failed".into(), 1),
    }
}
