//! `fake-anthropic`: serves a scenario file as the Anthropic Messages API until killed.
use std::convert::Infallible;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use fake_anthropic::{FakeAnthropic, Scenario};

/// A scripted Anthropic Messages API (streamed SSE) on 127.0.0.1, for running the real Claude
/// Code CLI without a model.
///
/// The scenario is a JSON list of scripts:
///   [{"match": "The issue: #1\n", "turns": [{"bash": "git commit ...", "description": "commit"},
///     {"text": "Done. <promise>COMPLETE</promise>"}], "repeat_last": false}]
/// A conversation follows the first script whose `match` occurs in its first user prompt; its
/// n-th answer is the script's n-th turn (a Bash tool call, or text that ends the turn).
/// Requests that offer no Bash tool (Claude Code's side requests) get a short text, unless a script
/// with "without_tools": true matches them (a role run with --tools ""). A turn with
/// "delay_seconds": N is answered N seconds late (a slow model).
#[derive(Parser)]
#[command(version, long_about, verbatim_doc_comment)]
#[command(
    after_help = "Prints its base URL (for ANTHROPIC_BASE_URL) on stdout, then one line per request on \
stderr (method, path, model, turn; never headers)."
)]
struct Args {
    /// The scenario file (JSON).
    #[arg(value_name = "SCENARIO.json")]
    scenario: PathBuf,
    /// The port on 127.0.0.1 (0: a free one, see the printed URL).
    #[arg(long, default_value_t = 0, value_name = "N")]
    port: u16,
}

fn main() -> ExitCode {
    match serve(Args::parse()) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("fake-anthropic: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> anyhow::Result<Infallible> {
    let scenario = Scenario::from_file(&args.scenario)?;
    let server = FakeAnthropic::start_on(args.port, scenario, true)?;
    println!("{}", server.url());
    loop {
        std::thread::park();
    }
}
