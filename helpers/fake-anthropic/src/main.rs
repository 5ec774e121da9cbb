//! `fake-anthropic SCENARIO.json [--port N]`: serve a scenario until killed.

use std::path::PathBuf;

use anyhow::{Context, bail};
use fake_anthropic::{FakeAnthropic, Scenario};

fn main() -> anyhow::Result<()> {
    let (scenario_path, port) = parse_args(std::env::args().skip(1))?;
    let scenario = Scenario::from_file(&scenario_path)?;
    let server = FakeAnthropic::start_on(port, scenario, true)?;
    println!("{}", server.url());
    loop {
        std::thread::park();
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> anyhow::Result<(PathBuf, u16)> {
    const USAGE: &str = "usage: fake-anthropic SCENARIO.json [--port N]";
    let mut scenario = None;
    let mut port = 0;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                let value = args.next().context(USAGE)?;
                port = value
                    .parse()
                    .with_context(|| format!("--port {value:?} is not a port number; {USAGE}"))?;
            }
            _ if scenario.is_none() && !arg.starts_with('-') => scenario = Some(PathBuf::from(arg)),
            _ => bail!("unexpected argument {arg:?}; {USAGE}"),
        }
    }
    Ok((scenario.context(USAGE)?, port))
}
