//! `fake-forge`: runs the test forge for manual use and demos, with one user and one repository.
use std::convert::Infallible;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

/// A Forgejo-API-compatible forge on 127.0.0.1, in memory, with git smart HTTP.
///
/// Starts with one user (with an API token) and one repository holding a single commit on its
/// default branch. Every request and response is checked against Forgejo's swagger document.
/// The repositories live in a temporary directory under $TMPDIR, removed on a clean exit.
#[derive(Parser)]
#[command(version, long_about)]
#[command(
    after_help = "Prints `forge: URL`, `user:`, `token:` (or where it was written) and `repo:` \
lines on stdout, then serves until killed.\n\
Seed it through its REST API, e.g.:\n  \
curl -H \"Authorization: token $TOKEN\" -H 'Content-Type: application/json' \\\n    \
-d '{\"title\":\"Add greeting\"}' URL/api/v1/repos/OWNER/NAME/issues"
)]
struct Args {
    /// The port on 127.0.0.1 (0: a free one, see the `forge:` line).
    #[arg(long, default_value_t = 0, value_name = "N")]
    port: u16,
    /// The login of the user the token belongs to.
    #[arg(long, default_value = "sandcastle", value_name = "LOGIN")]
    user: String,
    /// The repository to create [default: LOGIN/demo].
    #[arg(long, value_name = "OWNER/NAME", value_parser = parse_repo)]
    repo: Option<(String, String)>,
    /// The repository's default branch.
    #[arg(long, default_value = "main", value_name = "NAME")]
    branch: String,
    /// Write the user's API token to this file (created with mode 0600, replaced if it exists)
    /// instead of printing it.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
}

fn parse_repo(value: &str) -> Result<(String, String), String> {
    match value.split_once('/') {
        Some((owner, name)) if !owner.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((owner.to_string(), name.to_string()))
        }
        _ => Err(format!("{value:?} is not OWNER/NAME, e.g. demo/hello")),
    }
}

fn main() -> ExitCode {
    match serve(Args::parse()) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("fake-forge: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: Args) -> Result<Infallible> {
    let forge = fake_forge::FakeForge::try_start(args.port, None)?;
    let token = forge.add_user(&args.user);
    let (owner, name) = args
        .repo
        .unwrap_or_else(|| (args.user.clone(), "demo".to_string()));
    forge.create_repo(&owner, &name, &args.branch)?;
    if let Some(path) = &args.token_file {
        write_secret(path, &token)?;
    }
    println!("forge:  {}", forge.url());
    println!("user:   {}", args.user);
    match &args.token_file {
        Some(path) => println!("token:  written to {}", path.display()),
        None => println!("token:  {token}"),
    }
    println!("repo:   {}/{owner}/{name}.git", forge.url());
    println!("Ctrl-C stops the forge.");
    loop {
        std::thread::park();
    }
}

/// Writes `secret` to a file only its owner can read, without a moment where it is readable by others.
fn write_secret(path: &Path, secret: &str) -> Result<()> {
    let context = || format!("--token-file {}: cannot write the token", path.display());
    // An existing file keeps its mode on open; remove it so the new one is created 0600.
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(context)?,
        _ => {}
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(context)?;
    writeln!(file, "{secret}").with_context(context)
}
