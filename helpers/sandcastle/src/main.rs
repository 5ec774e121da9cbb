//! `sandcastle`: the autonomous pull-request loop. Planner, implementer, reviewer and pr-fixer agents
//! (Claude Code) work on Forgejo issues in Docker sandboxes; the orchestrator owns every push and
//! every forge change.
mod asking;
mod clarify;
mod context;
mod conversation;
mod doctor;
mod driver;
mod forge_thread;
mod green;
mod green_record;
mod handlers;
mod json_file;
mod outbox;
mod pass;
mod piece;
mod planning;
mod pool;
mod prompts;
mod publish;
mod report;
mod report_cmd;
mod reviews;
mod run;
mod seam;
mod state;
mod waiting_cmd;
mod warm_cache;
mod work_sandbox;

use clap::{Parser, Subcommand};
use sandcastle_core::{ask, mcp, progress, relay, turn};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(version, about, long_about = None)]
#[command(after_help = "Without a command, `sandcastle` is `sandcastle run`.\n\
Everything a project tunes lives in .sandcastle/config.toml; secrets in .sandcastle/.env.\n\
Run `sandcastle doctor` first: it checks every prerequisite and says how to fix what is missing.")]
struct Cli {
    /// The project directory (default: the current directory or the nearest parent with .sandcastle/config.toml).
    #[arg(short = 'C', long, global = true, value_name = "DIR")]
    project: Option<PathBuf>,
    /// The command; none means `run`.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Work on the repository: rework sent-back pull requests, plan, implement, open pull requests.
    Run {
        /// Do one pass and exit (default: repeat, waiting `pollInterval` after a pass with nothing to do).
        #[arg(long)]
        once: bool,
        /// Work on this one issue only (no planner, no rework lane), then exit.
        #[arg(long, value_name = "N")]
        issue: Option<u64>,
        /// Start work on every issue at once, without assessing whether it is clear enough.
        #[arg(long)]
        yes: bool,
    },
    /// Show what a pass would do (the planner runs in a sandbox); changes nothing on the forge.
    Plan,
    /// Check config, .env, Docker, the image, the forge and its labels; one line each, with the fix.
    Doctor,
    /// List what waits for a person: questions (issue, age, channels, where to answer) and open asks.
    Questions,
    /// Answer the question waiting on issue or pull request N as the local maintainer: `1`,
    /// `2: because …` or free text, one line per question. With `--ask`, its open ask instead:
    /// an option's number or label, free text, or `close`.
    Answer {
        #[arg(value_name = "N")]
        issue: u64,
        /// Answer the agent's open ask at this revision (`sandcastle questions` shows it).
        #[arg(long, value_name = "REVISION")]
        ask: Option<u32>,
        /// The answer; several words are joined with spaces.
        #[arg(required = true, value_name = "TEXT")]
        text: Vec<String>,
    },
    /// What the loop achieved and what it cost: pull requests opened, merged, closed and reverted,
    /// cost per issue and per merged PR, times, iterations, gate and reviewer rounds, questions,
    /// give-ups; a table, `--json`, or a page with charts (`--html FILE`).
    Report(report_cmd::ReportArgs),
    /// Inside a sandbox: ask a person without stopping (the answer is a later prompt). Prints
    /// `{"key":…,"revision":…,"status":"open"}`; a refused ask exits 2 with one line.
    Ask(ask::AskArgs),
    /// Inside a sandbox: an MCP server on stdin and stdout whose `ask` tool is `sandcastle ask`
    /// (Claude Code starts it in each working turn).
    Mcp,
    /// Inside a sandbox, the agent's exec: the marker line from stdin, PROGRAM with its output
    /// copied through and each new ask in OUTBOX relayed on it, the agent's other processes
    /// stopped, then the hand-out trailer.
    #[command(hide = true)]
    Turn(turn::TurnArgs),
    /// Inside a sandbox: stop every process of the agent but this one.
    #[command(hide = true)]
    StopAgent,
    /// Inside a sandbox, as its main process: the container's root set-up, then pass the loopback
    /// port's connections to the host's model proxy socket.
    #[command(hide = true)]
    Relay(relay::RelayArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return bad_arguments(e),
    };
    match cli.command {
        Some(Command::Ask(args)) => return ask::command(args),
        Some(Command::Turn(args)) => return turn::command(args),
        Some(Command::StopAgent) => return turn::stop_agent(),
        Some(Command::Mcp) => return mcp::command(),
        _ => {}
    }
    if let Some(Command::Relay(args)) = cli.command {
        return relay::command(args);
    }
    let project = match cli.project {
        Some(dir) => std::fs::canonicalize(&dir).map_err(|e| {
            anyhow::anyhow!("cannot use the project directory {}: {e}", dir.display())
        }),
        None => std::env::current_dir()
            .map_err(anyhow::Error::from)
            .and_then(|cwd| context::find_project(&cwd)),
    };
    let result = project.and_then(|project| match cli.command {
        None => run::run(&project, false, None, false),
        Some(Command::Run { once, issue, yes }) => run::run(&project, once, issue, yes),
        Some(Command::Plan) => run::plan(&project),
        Some(Command::Doctor) => doctor::doctor(&project),
        Some(Command::Questions) => waiting_cmd::list(&project),
        Some(Command::Answer { issue, ask, text }) => match ask {
            Some(revision) => waiting_cmd::answer_ask(&project, issue, revision, &text.join(" ")),
            None => waiting_cmd::answer(&project, issue, &text.join(" ")),
        },
        Some(Command::Report(args)) => report_cmd::report(&project, &args),
        Some(
            Command::Ask(_)
            | Command::Turn(_)
            | Command::StopAgent
            | Command::Mcp
            | Command::Relay(_),
        ) => {
            unreachable!("answered above, without a project")
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "sandcastle: {}",
                progress::escape_controls(&format!("{e:#}"))
            );
            let config_error = e.downcast_ref::<sandcastle_config::ConfigError>().is_some();
            ExitCode::from(if config_error { 2 } else { 1 })
        }
    }
}

/// clap's own message, except for `sandcastle ask`, whose caller is an agent: one line, exit 2.
fn bad_arguments(error: clap::Error) -> ExitCode {
    let asking = std::env::args().nth(1).as_deref() == Some("ask");
    if !asking || !error.use_stderr() {
        error.exit();
    }
    let text = error.render().to_string();
    let line = text.lines().next().unwrap_or("bad arguments");
    eprintln!(
        "sandcastle ask: refused: {}",
        line.trim_start_matches("error: ")
    );
    ExitCode::from(2)
}
