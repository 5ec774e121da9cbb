//! `sandcastle report`: what the loop achieved and what it cost. Reads the run reports under
//! `.sandcastle/logs/` (a broken one is skipped with one warning line naming it, so one bad file
//! never hides the other runs), asks the forge what became of each pull request sandcastle
//! opened, and prints the figures as a table (at most 100 columns) or JSON, and optionally a page.
mod figures;
mod page;
mod table;

use crate::context::Settings;
use crate::report::RunRecord;
use anyhow::{Context as _, Result};
use figures::{Figures, ForgeFacts, Spread};
use jiff::Timestamp;
use sandcastle_core::forge::Forge;
use sandcastle_core::secrets::Redactor;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A run report larger than this is no report sandcastle wrote.
const MAX_REPORT_BYTES: u64 = 16 * 1024 * 1024;

#[derive(clap::Args)]
#[command(
    after_help = "Reads .sandcastle/logs/run-*.json (one per `sandcastle run`) and asks the forge \
about each pull request sandcastle opened: merged, closed without merging, open, reverted (a later \
commit on its base branch says `This reverts commit <sha>` of its merge commit or head). A run \
report that cannot be read is skipped with one warning line naming it.\n\
The JSON document (`--json`) is described in the user guide, docs/guide/src/report.md."
)]
pub struct ReportArgs {
    /// Only runs that started on or after this day (UTC), like 2026-11-01.
    #[arg(long, value_name = "DATE", value_parser = parse_day)]
    since: Option<jiff::civil::Date>,
    /// Print the figures as one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML page (charts per week, the pull requests) to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

fn parse_day(text: &str) -> Result<jiff::civil::Date, String> {
    text.parse()
        .map_err(|_| format!("`{text}` is not a day; write it as YYYY-MM-DD, like 2026-11-01"))
}

pub fn report(project: &Path, args: &ReportArgs) -> Result<ExitCode> {
    let logs = project.join(".sandcastle/logs");
    let since = match args.since {
        Some(day) => Some(
            day.to_zoned(jiff::tz::TimeZone::UTC)
                .context("--since is out of range")?
                .timestamp(),
        ),
        None => None,
    };
    let runs: Vec<RunRecord> = read_runs(&logs)?
        .into_iter()
        .filter(|run| since.is_none_or(|since| run.started_at >= since))
        .collect();
    if runs.is_empty() {
        match args.since {
            Some(day) => println!("no runs since {day} in {}", logs.display()),
            None => println!(
                "no runs yet: {} has no run report (`sandcastle run` writes one per run)",
                logs.display()
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::load(project)?;
    let creds = settings.credentials()?;
    let forge = Forge::new(
        &settings.config.forge_url,
        &settings.config.repo,
        &creds.token,
    )
    .redacting(Redactor::new(&settings.env))
    .trusting(&Settings::roots()?);
    let pulls_url = format!(
        "{}/{}/pulls/",
        settings.config.forge_url.trim_end_matches('/'),
        settings.config.repo
    );
    let facts = ask_forge(&forge, &runs, pulls_url)?;
    let figures = Figures::compute(&runs, &facts, args.since.map(|d| d.to_string()));
    if let Some(path) = &args.html {
        page::write(path, &figures, &settings.config.repo)?;
        eprintln!("sandcastle report: wrote {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
    } else {
        print!("{}", table::render(&figures));
    }
    Ok(ExitCode::SUCCESS)
}

/// Every readable `run-*.json` under `logs`, in no order; each unreadable one is one warning line.
fn read_runs(logs: &Path) -> Result<Vec<RunRecord>> {
    let entries = match std::fs::read_dir(logs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", logs.display())),
    };
    let mut runs = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", logs.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("run-") && name.ends_with(".json")) {
            continue;
        }
        let path = entry.path();
        match read_run(&path) {
            Ok(run) => runs.push(run),
            Err(why) => eprintln!(
                "sandcastle report: skipped {}: {why}; fix or delete it",
                path.display()
            ),
        }
    }
    Ok(runs)
}

/// One run report, read with a bound and parsed strictly into its types.
fn read_run(path: &Path) -> Result<RunRecord, String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_string());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_REPORT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(format!(
            "larger than {} MiB",
            MAX_REPORT_BYTES / 1024 / 1024
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("not a run report ({e})"))
}

/// The pull requests the runs' issues opened, what became of each, and when each issue got
/// `ready-for-agent`.
fn ask_forge(forge: &Forge, runs: &[RunRecord], pulls_url: String) -> Result<ForgeFacts> {
    let opened = figures::opened_pulls(runs);
    if std::io::stderr().is_terminal() && !opened.is_empty() {
        eprintln!(
            "sandcastle report: asking the forge about {} pull request(s)…",
            opened.len()
        );
    }
    let mut facts = ForgeFacts {
        pulls_url,
        ..ForgeFacts::default()
    };
    for (pull, issue) in &opened {
        let Some(fate) = forge
            .pull_fate(*pull)
            .with_context(|| format!("cannot read pull request #{pull} (of issue #{issue})"))?
        else {
            continue;
        };
        facts.pulls.insert(*pull, fate);
        let labelled = forge
            .labelled_at(*issue, "ready-for-agent")
            .with_context(|| format!("cannot read the timeline of issue #{issue}"))?;
        facts.labelled.insert(*issue, labelled);
    }
    // Reverts: the commits of each base branch since its first merge of ours.
    let mut first_merge: BTreeMap<&str, Timestamp> = BTreeMap::new();
    for fate in facts.pulls.values() {
        if let Some(merged) = fate.merged_at {
            let first = first_merge.entry(&fate.base_branch).or_insert(merged);
            *first = (*first).min(merged);
        }
    }
    let mut reverted = BTreeMap::new();
    for (branch, since) in first_merge {
        let commits = forge
            .commits_since(branch, since)
            .with_context(|| format!("cannot read the commits of {branch}"))?;
        for fate in facts.pulls.values().filter(|f| f.base_branch == branch) {
            if let Some(commit) = figures::reverting(fate, &commits) {
                reverted.insert(fate.number, commit);
            }
        }
    }
    facts.reverted = reverted;
    Ok(facts)
}

/// How a row shows its values.
type Show = fn(f64) -> String;

/// The rows of medians and p90s after the costs, the same in the table and on the page.
fn spread_rows(f: &Figures) -> [(&'static str, &Spread, Show); 7] {
    let count: Show = |v| v.to_string();
    [
        (
            "ready-for-agent → PR",
            &f.time.ready_to_pull_seconds,
            duration,
        ),
        ("PR → merge", &f.time.pull_to_merge_seconds, duration),
        ("iterations per issue", &f.work.iterations, count),
        ("gate runs per issue", &f.work.gate_runs, count),
        ("reviewer rounds per issue", &f.work.reviewer_rounds, count),
        (
            "questions: time to answer",
            &f.questions.seconds_to_answer,
            duration,
        ),
        ("asks: time to answer", &f.asks.seconds_to_answer, duration),
    ]
}

/// `$1.23`.
fn money(usd: f64) -> String {
    format!("${usd:.2}")
}

/// `45s`, `12m`, `3h 05m`, `2d 4h`.
fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// `67%`, or `-` without a value.
fn percent(rate: Option<f64>) -> String {
    rate.map_or("-".to_string(), |r| format!("{:.0}%", r * 100.0))
}

/// Text from a report or the forge, fit for one line of a terminal: line breaks, controls and
/// bidirectional controls escaped as the run's own lines have them (`progress::escape_controls`),
/// at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let clean = sandcastle_core::progress::escape_controls(text);
    match clean.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if clean.chars().count() > max => format!("{}…", &clean[..at]),
        _ => clean,
    }
}
