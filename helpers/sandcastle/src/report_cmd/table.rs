//! The figures as a terminal table, at most [`WIDTH`] columns.
use super::figures::{CostSpread, Figures, Spread};
use super::{Show, money, one_line, percent};

pub const WIDTH: usize = 100;

/// One row: a label, the median, the p90 and the count.
fn row(label: &str, spread: &Spread, show: Show) -> String {
    let cell = |v: Option<f64>| v.map_or("-".to_string(), show);
    let line = format!(
        "{label:<26}{:>11}{:>11}{:>7}",
        cell(spread.median),
        cell(spread.p90),
        spread.count
    );
    one_line(&line, WIDTH) + "\n"
}

fn costs(out: &mut String, label: &str, spread: &CostSpread) {
    *out += &row(label, &spread.all, money);
    for (role, by_role) in &spread.by_role {
        *out += &row(&format!("  {}", one_line(role, 22)), by_role, money);
    }
}

pub fn render(f: &Figures) -> String {
    let day = |t: Option<jiff::Timestamp>| t.map_or("-".to_string(), super::figures::day_of);
    let mut out = format!(
        "sandcastle report: {} run(s) from {} to {}{}\n\n",
        f.runs,
        day(f.first_run),
        day(f.last_run),
        f.since
            .as_ref()
            .map_or(String::new(), |s| format!(" (since {s})"))
    );
    let p = &f.pulls;
    out += &format!(
        "pull requests  opened {} · merged {} · closed {} · open {} · reverted {} · merge rate {}\n",
        p.opened,
        p.merged,
        p.closed,
        p.open,
        p.reverted,
        percent(p.merge_rate)
    );
    out += &format!(
        "issues         {} worked on · cost ${:.2} in all, ${:.2} of it planning\n",
        f.issues, f.cost.total_usd, f.cost.planning_usd
    );
    let b = &f.work.best_of;
    if b.issues > 0 {
        out += &format!(
            "best of N      {} issue(s) · {} attempt(s), {} passed the gate · ${:.2}\n",
            b.issues, b.attempts, b.passed, b.cost_usd
        );
    }
    out += &format!(
        "gate           {} run(s) · first pass {} ({} of {} issues passed at the first run)\n\n",
        f.work.gate_runs_total,
        percent(f.work.first_pass_rate),
        f.work.first_pass,
        f.work.first_pass_of
    );
    out += &format!("{:<26}{:>11}{:>11}{:>7}\n", "", "median", "p90", "n");
    costs(&mut out, "cost per issue", &f.cost.per_issue);
    costs(&mut out, "cost per merged PR", &f.cost.per_merged_pull);
    for (label, spread, show) in super::spread_rows(f) {
        out += &row(label, spread, show);
    }
    out += &format!(
        "\nquestions      {} asked, {} answered · asks {} asked, {} answered\n",
        f.questions.asked, f.questions.answered, f.asks.asked, f.asks.answered
    );
    if !f.gave_up.is_empty() {
        out += &format!("\ngave up ({})\n", f.gave_up.len());
        for g in &f.gave_up {
            let line = format!(
                "  {:<10} {}  {}",
                one_line(&g.key, 10),
                super::figures::day_of(g.at),
                one_line(&g.reason, WIDTH)
            );
            out += &(one_line(&line, WIDTH) + "\n");
        }
    }
    out
}
