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
}

fn main() -> ExitCode {
    let args = Args::parse();
    let config = match sandcastle_config::load(&args.path) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("load-config: {error}");
            return ExitCode::from(2);
        }
    };
    let written = serde_json::to_writer_pretty(std::io::stdout().lock(), &config)
        .map_err(std::io::Error::from)
        .and_then(|()| std::io::stdout().write_all(b"\n"));
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("load-config: cannot write to stdout: {error}");
            ExitCode::FAILURE
        }
    }
}
