//! The figures as one self-contained HTML page: inline CSS and SVG charts, no script, nothing
//! fetched (a Content-Security-Policy says so to the browser too). Every string from a report or
//! the forge passes [`escape`] on its way in.
use super::figures::{CostSpread, Figures, PullRow, PullState, Spread};
use super::{Show, duration, money, percent};
use anyhow::{Context as _, Result};
use std::fmt::Write as _;
use std::path::Path;

/// Text and attribute values: the five characters HTML gives meaning to.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes the page to `path` whole or not at all (a temporary file beside it, renamed).
pub fn write(path: &Path, figures: &Figures, repo: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| {
        format!(
            "cannot write {}: cannot create a file in {}",
            path.display(),
            dir.display()
        )
    })?;
    std::io::Write::write_all(&mut tmp, render(figures, repo).as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;\
color:#1f2328;padding:0 1em}h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;\
margin-top:2em}.sub{color:#59636e}.cards{display:flex;flex-wrap:wrap;gap:.8em}.card{border:1px \
solid #d1d9e0;border-radius:6px;padding:.6em 1em;min-width:9em}.card b{display:block;\
font-size:1.4em}table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3em \
.6em;border-bottom:1px solid #eee}td{white-space:nowrap}td.t{white-space:normal}td.n,th.n{text-align:right;\
font-variant-numeric:tabular-nums}\
.merged{color:#1a7f37}.closed{color:#cf222e}.open{color:#0969da}svg text{font:11px sans-serif;\
fill:#1f2328}.legend span{display:inline-block;width:.8em;height:.8em;margin:0 .3em 0 1em}";

const COST_COLOR: &str = "#0969da";
const READY_COLOR: &str = "#bf8700";
const MERGE_COLOR: &str = "#1a7f37";

/// The page: a heading, the headline cards, the weekly charts, then the tables.
pub fn render(f: &Figures, repo: &str) -> String {
    let mut page = String::new();
    heading(&mut page, f, repo);
    cards(&mut page, f);
    cost_chart(&mut page, f);
    time_chart(&mut page, f);
    figures_table(&mut page, f);
    pull_requests_table(&mut page, f);
    gave_up_table(&mut page, f);
    page += "</body></html>\n";
    page
}

/// The day of `at`, or `-` when there is none.
fn day(at: Option<jiff::Timestamp>) -> String {
    at.map_or("-".to_string(), super::figures::day_of)
}

/// The document's head and the title with the runs' span.
fn heading(page: &mut String, f: &Figures, repo: &str) {
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>sandcastle report: {repo}</title>\
<style>{STYLE}</style></head><body>\n<h1>sandcastle report: {repo}</h1>\
<p class=\"sub\">{} run(s) from {} to {}{}</p>\n",
        f.runs,
        day(f.first_run),
        day(f.last_run),
        f.since
            .as_ref()
            .map_or(String::new(), |s| format!(" (since {})", escape(s))),
        repo = escape(repo),
    );
}

/// The headline figures, one card each.
fn cards(page: &mut String, f: &Figures) {
    let p = &f.pulls;
    let cards = [
        ("pulls-opened", "pull requests opened", p.opened.to_string()),
        ("pulls-merged", "merged", p.merged.to_string()),
        ("pulls-closed", "closed unmerged", p.closed.to_string()),
        ("pulls-open", "open", p.open.to_string()),
        ("pulls-reverted", "reverted", p.reverted.to_string()),
        ("merge-rate", "merge rate", percent(p.merge_rate)),
        ("cost-total", "cost in all", money(f.cost.total_usd)),
        (
            "cost-per-merged",
            "median cost per merged PR",
            f.cost.per_merged_pull.all.median.map_or("-".into(), money),
        ),
        (
            "first-pass",
            "gate first-pass rate",
            percent(f.work.first_pass_rate),
        ),
    ];
    *page += "<div class=\"cards\">";
    for (id, label, value) in cards {
        let _ = write!(
            page,
            "<div class=\"card\" id=\"{id}\"><b>{}</b>{label}</div>",
            escape(&value)
        );
    }
    *page += "</div>\n";
}

fn week_names(f: &Figures) -> Vec<String> {
    f.weeks.iter().map(|w| w.week.clone()).collect()
}

fn cost_chart(page: &mut String, f: &Figures) {
    *page += "<h2>Cost per week</h2>\n";
    *page += &chart(
        "cost-chart",
        &week_names(f),
        &[Series {
            name: "cost (US dollars)",
            color: COST_COLOR,
            values: f.weeks.iter().map(|w| Some(w.cost_usd)).collect(),
        }],
        money,
    );
}

/// The weekly medians of ready-for-agent to pull request and of pull request to merge, in hours.
fn time_chart(page: &mut String, f: &Figures) {
    *page += "<h2>Time per week (medians)</h2>\n";
    let hours = |v: Option<f64>| v.map(|s| s / 3600.0);
    *page += &chart(
        "time-chart",
        &week_names(f),
        &[
            Series {
                name: "ready-for-agent → PR (opened that week)",
                color: READY_COLOR,
                values: f
                    .weeks
                    .iter()
                    .map(|w| hours(w.ready_to_pull_seconds))
                    .collect(),
            },
            Series {
                name: "PR → merge (merged that week)",
                color: MERGE_COLOR,
                values: f
                    .weeks
                    .iter()
                    .map(|w| hours(w.pull_to_merge_seconds))
                    .collect(),
            },
        ],
        |h| duration(h * 3600.0),
    );
}

/// The spreads (median, p90, count), then the totals in a sentence.
fn figures_table(page: &mut String, f: &Figures) {
    *page += "<h2>Figures</h2>\n<table id=\"figures\"><tr><th></th><th class=\"n\">median</th>\
<th class=\"n\">p90</th><th class=\"n\">n</th></tr>\n";
    cost_rows(page, "cost per issue", &f.cost.per_issue);
    cost_rows(page, "cost per merged PR", &f.cost.per_merged_pull);
    for (label, spread, show) in super::spread_rows(f) {
        spread_row(page, label, spread, show);
    }
    let _ = write!(
        page,
        "</table>\n<p>Planning cost ${:.2}. Gate: {} run(s), {} of {} issues passed at the first run. \
Questions: {} asked, {} answered. Asks: {} asked, {} answered.</p>\n",
        f.cost.planning_usd,
        f.work.gate_runs_total,
        f.work.first_pass,
        f.work.first_pass_of,
        f.questions.asked,
        f.questions.answered,
        f.asks.asked,
        f.asks.answered
    );
}

fn pull_requests_table(page: &mut String, f: &Figures) {
    *page += "<h2>Pull requests</h2>\n<table id=\"pulls\"><tr><th>#</th><th>title</th><th>issue</th>\
<th>state</th><th>opened</th><th>merged</th><th class=\"n\">cost</th><th class=\"n\">iterations</th>\
<th class=\"n\">ready → PR</th><th class=\"n\">PR → merge</th></tr>\n";
    for row in &f.pull_requests {
        pull_row(page, row);
    }
    *page += "</table>\n";
}

/// One pull request; its number and title link to its page when that is a web address.
fn pull_row(page: &mut String, row: &PullRow) {
    let state = match (row.state, &row.reverted_by) {
        (PullState::Merged, Some(_)) => "merged, reverted".to_string(),
        (state, _) => state.name().to_string(),
    };
    let link = |text: &str| {
        if row.url.starts_with("https://") || row.url.starts_with("http://") {
            format!("<a href=\"{}\">{}</a>", escape(&row.url), escape(text))
        } else {
            escape(text)
        }
    };
    let time = |v: Option<f64>| v.map_or("-".to_string(), duration);
    let _ = writeln!(
        page,
        "<tr><td>{}</td><td class=\"t\">{}</td><td>#{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
        link(&format!("#{}", row.number)),
        link(&row.title),
        row.issue,
        row.state.name(),
        escape(&state),
        day(row.created_at),
        day(row.merged_at),
        money(row.cost_usd),
        row.iterations,
        time(row.ready_to_pull_seconds),
        time(row.pull_to_merge_seconds),
    );
}

/// The work given up and why; nothing when none was.
fn gave_up_table(page: &mut String, f: &Figures) {
    if f.gave_up.is_empty() {
        return;
    }
    let _ = write!(
        page,
        "<h2>Given up ({})</h2>\n<table id=\"gave-up\"><tr><th>work</th><th>day</th><th>why</th></tr>\n",
        f.gave_up.len()
    );
    for g in &f.gave_up {
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            escape(&g.key),
            super::figures::day_of(g.at),
            escape(&g.reason)
        );
    }
    *page += "</table>\n";
}

fn spread_row(page: &mut String, label: &str, spread: &Spread, show: Show) {
    let cell = |v: Option<f64>| v.map_or("-".to_string(), show);
    let _ = writeln!(
        page,
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
        escape(label),
        escape(&cell(spread.median)),
        escape(&cell(spread.p90)),
        spread.count
    );
}

fn cost_rows(page: &mut String, label: &str, spread: &CostSpread) {
    spread_row(page, label, &spread.all, money);
    for (role, by_role) in &spread.by_role {
        spread_row(page, &format!("  {label}: {role}"), by_role, money);
    }
}

/// The axis's top: the smallest of 1, 2, 2.5 or 5 times a power of ten at or above `x`.
fn round_up(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|top| *top >= x)
        .unwrap_or(10.0 * power)
}

struct Series<'a> {
    name: &'a str,
    color: &'a str,
    values: Vec<Option<f64>>,
}

/// The charts' size and margins, in SVG units.
const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 70.0;
const BOTTOM: f64 = 40.0;
const TOP: f64 = 20.0;

/// A bar chart, one group of bars per week; each bar carries its value (`data-value`) and a
/// tooltip.
fn chart(id: &str, weeks: &[String], series: &[Series], show: impl Fn(f64) -> String) -> String {
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(0.0_f64, |a, b| a.max(*b));
    let scale = round_up(top * 1.05);
    let plot = HEIGHT - BOTTOM - TOP;
    let slot = (WIDTH - LEFT - 10.0) / weeks.len().max(1) as f64;
    let bar = (slot * 0.8 / series.len().max(1) as f64).min(60.0);
    let mut svg = axes(id, scale, &show);
    let every = weeks.len().div_ceil(12).max(1);
    for (i, week) in weeks.iter().enumerate() {
        let middle = LEFT + i as f64 * slot + slot / 2.0;
        let x0 = middle - bar * series.len() as f64 / 2.0;
        for (k, s) in series.iter().enumerate() {
            let Some(value) = s.values.get(i).copied().flatten() else {
                continue;
            };
            let h = value / scale * plot;
            let x = x0 + k as f64 * bar;
            let y = HEIGHT - BOTTOM - h;
            let label = escape(&show(value));
            let _ = writeln!(
                svg,
                "<rect class=\"bar\" data-week=\"{week}\" data-series=\"{name}\" data-value=\"{value}\" \
x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{color}\">\
<title>{week}: {label}</title></rect><text x=\"{cx:.1}\" y=\"{ly:.1}\" text-anchor=\"middle\">{label}</text>",
                week = escape(week),
                name = escape(s.name),
                w = (bar - 2.0).max(1.0),
                color = s.color,
                cx = x + bar / 2.0,
                ly = y - 4.0,
            );
        }
        if i % every == 0 {
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                middle,
                HEIGHT - BOTTOM + 16.0,
                escape(week)
            );
        }
    }
    svg + &legend(series)
}

/// The chart's opening: the axes, the grid lines at half and full `scale`, and their labels.
fn axes(id: &str, scale: f64, show: impl Fn(f64) -> String) -> String {
    let plot = HEIGHT - BOTTOM - TOP;
    format!(
        "<svg id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
width=\"100%\" role=\"img\">\n<line x1=\"{LEFT}\" y1=\"{base}\" x2=\"{right}\" y2=\"{base}\" stroke=\"#888\"/>\
<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{base}\" stroke=\"#888\"/>\
<line x1=\"{LEFT}\" y1=\"{mid}\" x2=\"{right}\" y2=\"{mid}\" stroke=\"#e5e5e5\"/>\
<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{right}\" y2=\"{TOP}\" stroke=\"#e5e5e5\"/>\
<text x=\"{tx}\" y=\"{base}\" text-anchor=\"end\">{zero}</text>\
<text x=\"{tx}\" y=\"{mid_label}\" text-anchor=\"end\">{half}</text>\
<text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{max}</text>\n",
        base = HEIGHT - BOTTOM,
        mid = TOP + plot / 2.0,
        mid_label = TOP + plot / 2.0 + 4.0,
        right = WIDTH - 10.0,
        tx = LEFT - 6.0,
        ty = TOP + 4.0,
        zero = escape(&show(0.0)),
        half = escape(&show(scale / 2.0)),
        max = escape(&show(scale)),
    )
}

/// The chart's closing and its legend: each series' color and name.
fn legend(series: &[Series]) -> String {
    let mut legend = "</svg>\n<div class=\"legend\">".to_string();
    for s in series {
        let _ = write!(
            legend,
            "<span style=\"background:{}\"></span>{}",
            s.color,
            escape(s.name)
        );
    }
    legend + " (weeks start on Monday, UTC)</div>\n"
}
