//! `fake-forge`: runs the test forge for manual use, with one user and one repository.
//!
//! Usage: `fake-forge [--port N] [--user LOGIN] [--repo OWNER/NAME] [--branch NAME]`.
use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let mut port = 0u16;
    let mut user = "sandcastle".to_string();
    let mut repo = None;
    let mut branch = "main".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" => port = value()?.parse().context("--port: not a port number")?,
            "--user" => user = value()?,
            "--repo" => repo = Some(value()?),
            "--branch" => branch = value()?,
            other => bail!(
                "unknown argument {other}; usage: fake-forge [--port N] [--user LOGIN] [--repo OWNER/NAME] [--branch NAME]"
            ),
        }
    }
    let forge = fake_forge::FakeForge::try_start(port, None)?;
    let token = forge.add_user(&user);
    let repo = repo.unwrap_or_else(|| format!("{user}/demo"));
    let (owner, name) = repo
        .split_once('/')
        .context("--repo: expected OWNER/NAME")?;
    forge.create_repo(owner, name, &branch)?;
    println!("forge:  {}", forge.url());
    println!("user:   {user}");
    println!("token:  {token}");
    println!("repo:   {}/{repo}.git", forge.url());
    println!("Ctrl-C stops the forge.");
    loop {
        std::thread::park();
    }
}
