//! `configure-tea`: installs a tea login for the sandbox's forge, so `tea` works with no `--repo`.
mod login;
mod tea_config;
mod write;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use clap::Parser;

use login::Login;

/// Write tea's config so `tea` talks to the sandbox's forge as the sandbox's user.
///
/// Reads the token from FORGEJO_TOKEN and the user name from FORGEJO_USER, and installs a
/// default login in ${XDG_CONFIG_HOME:-$HOME/.config}/tea/config.yml (mode 0600, replaced
/// atomically). Other logins and preferences in the file are kept; a login of the same name is
/// replaced, so running it again gives the same file. tea then finds the login for any clone of
/// `<forge-url>/<owner>/<repo>.git` and needs no --repo or --login. The token is never printed.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The forge: a host (`forge.example.dev`, meaning https) or a base URL
    /// (`http://127.0.0.1:3000`).
    #[arg(long, env = "SANDCASTLE_FORGE_URL", value_name = "URL")]
    url: Option<String>,

    /// The login's name [default: the forge's host, e.g. `forge.example.dev` or `127.0.0.1:3000`].
    #[arg(long)]
    name: Option<String>,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(summary) => {
            eprintln!("configure-tea: {summary}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("configure-tea: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<String> {
    let url = args.url.filter(|url| !url.is_empty()).ok_or_else(|| {
        anyhow!("no forge URL; pass --url https://forge.example.dev or set SANDCASTLE_FORGE_URL")
    })?;
    let forge_url = sandcastle_config::forge_url(&url)
        .map_err(|why| anyhow!("the forge URL \"{url}\" {why}"))?;
    let token = required_var("FORGEJO_TOKEN", "the forge API token")?;
    let user = required_var("FORGEJO_USER", "the forge user name")?;
    let name = args
        .name
        .unwrap_or_else(|| login::authority(&forge_url).to_string());
    if name.trim().is_empty() {
        return Err(anyhow!(
            "--name is empty; pass a login name or leave --name out"
        ));
    }

    let path = config_path()?;
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(anyhow!("cannot read {}: {error}", path.display())),
    };
    let login = Login::new(name.clone(), &forge_url, token, user.clone(), unix_now());
    let text = tea_config::with_login(existing.as_deref(), login)
        .with_context(|| format!("cannot update {}; fix or remove the file", path.display()))?;
    write::atomically(&path, &text)?;
    Ok(format!(
        "login `{name}` for {user} at {forge_url} written to {}",
        path.display()
    ))
}

/// A non-empty environment variable, or a one-line error naming it.
fn required_var(name: &str, meaning: &str) -> Result<String> {
    match std::env::var(name) {
        Ok(value) if !value.is_empty() => Ok(value),
        Ok(_) => Err(anyhow!("{name} is empty; set it to {meaning}")),
        Err(std::env::VarError::NotPresent) => {
            Err(anyhow!("{name} is not set; set it to {meaning}"))
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(anyhow!("{name} is not UTF-8; set it to {meaning}"))
        }
    }
}

/// `${XDG_CONFIG_HOME:-$HOME/.config}/tea/config.yml`, as tea resolves it.
fn config_path() -> Result<PathBuf> {
    let absolute =
        |value: Option<OsString>| value.map(PathBuf::from).filter(|path| path.is_absolute());
    let config_home = absolute(std::env::var_os("XDG_CONFIG_HOME"))
        .or_else(|| absolute(std::env::var_os("HOME")).map(|home| home.join(".config")))
        .ok_or_else(|| {
            anyhow!("HOME is not set; set HOME or XDG_CONFIG_HOME to an absolute path")
        })?;
    Ok(config_home.join("tea").join("config.yml"))
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}
