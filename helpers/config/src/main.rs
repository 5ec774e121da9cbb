//! `load-config [PATH]`: validates a sandcastle config and prints it resolved, as JSON.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Validate a sandcastle config file and print the resolved config as JSON.
///
/// The output has every setting, defaults filled in, with the keys spelled as in the TOML
/// (`repo`, `forgeHost`, `imageName`, `maxIterations`, `models.prFixer`, …) plus `forgeUrl`,
/// the forge's base URL. A bad file gets one line on stderr, `file:line:column: problem; fix`,
/// and exit status 2.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The config file.
    #[arg(default_value = sandcastle_config::DEFAULT_PATH)]
    path: PathBuf,
    /// Print the reference of every key (table, type, default, example, meaning) as Markdown
    /// instead, reading no file.
    #[arg(long, conflicts_with = "path")]
    reference: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.reference {
        return print(sandcastle_config::reference::markdown());
    }
    let config = match sandcastle_config::load(&args.path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("load-config: {error}");
            return ExitCode::from(2);
        }
    };
    let json = serde_json::to_string_pretty(&config).expect("a Config serialises");
    print(json + "\n")
}

fn print(text: String) -> ExitCode {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("load-config: cannot write to stdout: {error}");
            ExitCode::FAILURE
        }
    }
}
