//! The figures of `sandcastle report`, computed from the run reports and what the forge says of
//! each pull request; no I/O here. What this computes is what `--json` prints (documented in
//! the user guide's `report.md`), and what the table and the page show.
use crate::report::{Asked, AttemptReport, RunRecord, WorkReport};
use jiff::{Timestamp, ToSpan};
use sandcastle_core::forge::{BranchCommit, PullFate};
use sandcastle_core::role::WorkKey;
use serde::Serialize;
use std::collections::BTreeMap;

/// The version of the `--json` document.
pub const VERSION: u32 = 1;

/// What the forge says of the pull requests and issues the runs name.
#[derive(Default)]
pub struct ForgeFacts {
    /// The pull requests sandcastle opened, by number.
    pub pulls: BTreeMap<u64, PullFate>,
    /// The merged ones a later commit on their base branch reverts: that commit.
    pub reverted: BTreeMap<u64, String>,
    /// When `ready-for-agent` was added to each issue, each time, oldest first.
    pub labelled: BTreeMap<u64, Vec<Timestamp>>,
    /// `<forge>/<owner>/<repo>/pulls/`: a pull request's page is this and its number.
    pub pulls_url: String,
}

/// A median and a 90th percentile (nearest rank) of `count` values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub count: usize,
    pub median: Option<f64>,
    pub p90: Option<f64>,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => None,
            _ if n % 2 == 1 => Some(sorted[n / 2]),
            _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
        };
        let p90 = (n > 0).then(|| sorted[(n * 9).div_ceil(10) - 1]);
        Spread {
            count: n,
            median,
            p90,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    pub version: u32,
    /// `--since`, as given.
    pub since: Option<String>,
    pub runs: usize,
    pub first_run: Option<Timestamp>,
    pub last_run: Option<Timestamp>,
    /// Issues the runs worked on.
    pub issues: usize,
    pub pulls: PullCounts,
    pub cost: Cost,
    pub time: Times,
    pub work: WorkFigures,
    pub questions: Answers,
    pub asks: Answers,
    pub gave_up: Vec<GaveUp>,
    pub weeks: Vec<Week>,
    pub pull_requests: Vec<PullRow>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullCounts {
    pub opened: usize,
    pub merged: usize,
    /// Closed without being merged.
    pub closed: usize,
    pub open: usize,
    /// Merged, then reverted by a later commit on the base branch.
    pub reverted: usize,
    /// merged / (merged + closed): of the pull requests a person decided on, the share merged.
    pub merge_rate: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub total_usd: f64,
    /// The planner's turns, which belong to no one issue.
    pub planning_usd: f64,
    /// Each issue's cost, its pull request's rework included.
    pub per_issue: CostSpread,
    pub per_merged_pull: CostSpread,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostSpread {
    pub all: Spread,
    pub by_role: BTreeMap<String, Spread>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Times {
    /// From the last time `ready-for-agent` was added to the issue before its pull request opened.
    pub ready_to_pull_seconds: Spread,
    pub pull_to_merge_seconds: Spread,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkFigures {
    /// The working agent's iterations per issue (implementer, and pr-fixer on its pull request).
    pub iterations: Spread,
    pub gate_runs: Spread,
    pub gate_runs_total: u64,
    /// Issues whose first gate run passed, of those the gate ran on.
    pub first_pass: usize,
    pub first_pass_of: usize,
    pub first_pass_rate: Option<f64>,
    pub reviewer_rounds: Spread,
    pub best_of: BestOfFigures,
}

/// Issues worked on by several attempts (best of N), as each one's last report says.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BestOfFigures {
    pub issues: usize,
    pub attempts: usize,
    /// Attempts the gate passed.
    pub passed: usize,
    /// What the attempts cost, over every run.
    pub cost_usd: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answers {
    pub asked: usize,
    pub answered: usize,
    pub seconds_to_answer: Spread,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GaveUp {
    /// `issue #4`, `pull request #9` (`pr #9` in older reports).
    pub key: String,
    /// The run that gave it up, and when that run took the work up.
    pub run_id: String,
    pub at: Timestamp,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Week {
    /// The Monday that starts the week (UTC).
    pub week: String,
    /// What the work started this week cost (by when each run first recorded it).
    pub cost_usd: f64,
    pub pulls_opened: usize,
    pub pulls_merged: usize,
    /// Medians over the pull requests opened (ready to PR) or merged (PR to merge) this week.
    pub ready_to_pull_seconds: Option<f64>,
    pub pull_to_merge_seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRow {
    pub number: u64,
    pub issue: u64,
    pub title: String,
    pub url: String,
    pub state: PullState,
    /// The commit that reverts it.
    pub reverted_by: Option<String>,
    pub created_at: Option<Timestamp>,
    pub merged_at: Option<Timestamp>,
    pub cost_usd: f64,
    pub iterations: u32,
    pub ready_to_pull_seconds: Option<f64>,
    pub pull_to_merge_seconds: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullState {
    Open,
    Merged,
    Closed,
    /// The forge no longer knows it.
    Unknown,
}

impl PullState {
    pub fn name(self) -> &'static str {
        match self {
            PullState::Open => "open",
            PullState::Merged => "merged",
            PullState::Closed => "closed",
            PullState::Unknown => "unknown",
        }
    }
}

/// One issue's or pull request's work over every run.
#[derive(Default)]
struct Tally {
    cost: f64,
    by_role: BTreeMap<String, f64>,
    iterations: u32,
    gate_runs: u32,
    gate_first_passed: Option<bool>,
    reviewer_rounds: u32,
    pull: Option<u64>,
    /// Its attempts, as the last report that had them says.
    attempts: Vec<AttemptReport>,
}

impl Tally {
    fn add(&mut self, work: &WorkReport) {
        self.cost += work.total.usage.cost_usd;
        for (role, tally) in &work.roles {
            *self.by_role.entry(role.clone()).or_default() += tally.usage.cost_usd;
            match role.as_str() {
                "implementer" | "pr-fixer" => self.iterations += tally.iterations,
                "reviewer" => self.reviewer_rounds += tally.iterations,
                _ => {}
            }
        }
        if self.gate_first_passed.is_none() && work.gate_runs > 0 {
            self.gate_first_passed = first_gate(work);
        }
        self.gate_runs += work.gate_runs;
        self.pull = pull_of(work).or(self.pull);
        if !work.attempts.is_empty() {
            self.attempts = work.attempts.clone();
        }
    }

    fn absorb(&mut self, rework: &Tally) {
        self.cost += rework.cost;
        for (role, cost) in &rework.by_role {
            *self.by_role.entry(role.clone()).or_default() += cost;
        }
        self.iterations += rework.iterations;
        self.gate_runs += rework.gate_runs;
    }
}

/// The pull requests the runs' issues opened, each with its issue.
pub fn opened_pulls(runs: &[RunRecord]) -> BTreeMap<u64, u64> {
    runs.iter()
        .flat_map(|r| &r.work)
        .filter_map(|work| match WorkKey::from_report(&work.key)? {
            WorkKey::Issue(issue) => Some((pull_of(work)?, issue)),
            _ => None,
        })
        .collect()
}

/// Whether the work's first gate run passed. A report from before `gateFirstPassed` says so only
/// when the gate ran once.
fn first_gate(work: &WorkReport) -> Option<bool> {
    work.gate_first_passed
        .or_else(|| (work.gate_runs == 1).then_some(work.gate_passed).flatten())
}

/// The pull request an issue's work opened; a report from before `pull` says it in its outcome.
fn pull_of(work: &WorkReport) -> Option<u64> {
    work.pull.or_else(|| {
        let rest = work.outcome.strip_prefix("pull request #")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// Why the work was given up, if it was; a report from before `gaveUp` says it in its outcome.
fn gave_up_reason(work: &WorkReport) -> Option<String> {
    if let Some(reason) = &work.gave_up {
        return Some(reason.clone());
    }
    let outcome = work.outcome.strip_suffix("; commented")?;
    match outcome.strip_prefix("stopped: ") {
        Some(why) => Some(why.to_string()),
        None => outcome
            .starts_with("not completed in ")
            .then(|| outcome.to_string()),
    }
}

/// The commit of `commits` that reverts the merged pull request `fate`: a message saying
/// `This reverts commit <sha>` of its merge commit or of its head (a rebase or fast-forward merge).
/// Naming the commit makes it later than the merge; no clock is compared.
pub fn reverting(fate: &PullFate, commits: &[BranchCommit]) -> Option<String> {
    fate.merged_at?;
    let ours = [fate.merge_commit.as_deref(), Some(fate.head_sha.as_str())];
    commits
        .iter()
        .find(|c| {
            reverted_shas(&c.message).any(|sha| {
                ours.iter()
                    .flatten()
                    .any(|ours| !ours.is_empty() && ours.starts_with(sha))
            })
        })
        .map(|c| c.sha.clone())
}

/// The commits a message says it reverts (`This reverts commit <sha>`, at least 7 hex digits).
fn reverted_shas(message: &str) -> impl Iterator<Item = &str> {
    message
        .match_indices("This reverts commit ")
        .filter_map(|(at, phrase)| {
            let rest = &message[at + phrase.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_hexdigit())
                .unwrap_or(rest.len());
            (end >= 7).then(|| &rest[..end])
        })
}

/// Every question (or ask) once, by id: asked in one run and answered in a later one is one.
fn merge_asked<'a>(all: impl Iterator<Item = &'a Asked>) -> Answers {
    let mut by_id: BTreeMap<&str, (Timestamp, Option<Timestamp>)> = BTreeMap::new();
    for asked in all {
        let entry = by_id
            .entry(&asked.id)
            .or_insert((asked.asked_at, asked.answered_at));
        entry.0 = entry.0.min(asked.asked_at);
        entry.1 = entry.1.or(asked.answered_at);
    }
    let waits: Vec<f64> = by_id
        .values()
        .filter_map(|(asked, answered)| Some(seconds(*asked, (*answered)?)))
        .collect();
    Answers {
        asked: by_id.len(),
        answered: waits.len(),
        seconds_to_answer: Spread::of(&waits),
    }
}

fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64()
}

/// The day (UTC) of `at`.
pub fn day_of(at: Timestamp) -> String {
    at.to_zoned(jiff::tz::TimeZone::UTC).date().to_string()
}

/// The Monday (UTC) of the week `at` falls in.
pub fn week_of(at: Timestamp) -> String {
    let date = at.to_zoned(jiff::tz::TimeZone::UTC).date();
    let back = i64::from(date.weekday().to_monday_zero_offset());
    date.checked_sub(back.days()).unwrap_or(date).to_string()
}

fn cost_spread(tallies: &[&Tally]) -> CostSpread {
    let mut roles: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for tally in tallies {
        for (role, cost) in &tally.by_role {
            roles.entry(role.clone()).or_default().push(*cost);
        }
    }
    CostSpread {
        all: Spread::of(&tallies.iter().map(|t| t.cost).collect::<Vec<_>>()),
        by_role: roles
            .into_iter()
            .map(|(role, costs)| (role, Spread::of(&costs)))
            .collect(),
    }
}

impl Figures {
    /// The figures of `runs` (any order) with what the forge said; `since` as the user gave it.
    pub fn compute(runs: &[RunRecord], facts: &ForgeFacts, since: Option<String>) -> Figures {
        let mut runs: Vec<&RunRecord> = runs.iter().collect();
        runs.sort_by_key(|r| r.started_at);
        let RunTotals {
            mut issues,
            reworks,
            mut weeks,
            total_usd,
            planning_usd,
            gave_up,
        } = RunTotals::of(&runs);
        charge_reworks(&mut issues, &reworks);
        let pulls = Pulls::of(&issues, facts, &mut weeks);
        let all: Vec<&Tally> = issues.values().collect();
        let merged: Vec<&Tally> = pulls
            .rows
            .iter()
            .filter(|r| r.state == PullState::Merged)
            .filter_map(|r| issues.get(&r.issue))
            .collect();
        let every = || runs.iter().flat_map(|r| &r.work);
        Figures {
            version: VERSION,
            since,
            runs: runs.len(),
            first_run: runs.first().map(|r| r.started_at),
            last_run: runs.last().map(|r| r.started_at),
            issues: issues.len(),
            pulls: pulls.counts,
            cost: Cost {
                total_usd,
                planning_usd,
                per_issue: cost_spread(&all),
                per_merged_pull: cost_spread(&merged),
            },
            time: Times {
                ready_to_pull_seconds: Spread::of(&pulls.ready_to_pull),
                pull_to_merge_seconds: Spread::of(&pulls.pull_to_merge),
            },
            work: work_figures(&all),
            questions: merge_asked(every().flat_map(|w| &w.questions)),
            asks: merge_asked(every().flat_map(|w| &w.asks)),
            gave_up,
            weeks: weeks.into_values().collect(),
            pull_requests: pulls.rows,
        }
    }
}

/// What the runs' work adds up to before the forge is asked: each issue's and each pull request's
/// tally, the cost by week, and the work given up.
struct RunTotals {
    issues: BTreeMap<u64, Tally>,
    reworks: BTreeMap<u64, Tally>,
    weeks: BTreeMap<String, Week>,
    total_usd: f64,
    planning_usd: f64,
    gave_up: Vec<GaveUp>,
}

impl RunTotals {
    /// `runs` oldest first.
    fn of(runs: &[&RunRecord]) -> RunTotals {
        let mut totals = RunTotals {
            issues: BTreeMap::new(),
            reworks: BTreeMap::new(),
            weeks: BTreeMap::new(),
            total_usd: 0.0,
            planning_usd: 0.0,
            gave_up: Vec::new(),
        };
        for run in runs {
            for work in &run.work {
                totals.add(run, work);
            }
        }
        totals
    }

    fn add(&mut self, run: &RunRecord, work: &WorkReport) {
        let spent = work.total.usage.cost_usd;
        self.total_usd += spent;
        let started = work.started_at.unwrap_or(run.started_at);
        week_entry(&mut self.weeks, started).cost_usd += spent;
        match WorkKey::from_report(&work.key) {
            Some(WorkKey::Plan) => self.planning_usd += spent,
            Some(WorkKey::Issue(n)) => self.issues.entry(n).or_default().add(work),
            Some(WorkKey::Pull(n)) => self.reworks.entry(n).or_default().add(work),
            None => {}
        }
        if let Some(reason) = gave_up_reason(work) {
            self.gave_up.push(GaveUp {
                key: work.key.clone(),
                run_id: run.run_id.clone(),
                at: started,
                reason,
            });
        }
    }
}

/// A pull request's rework is its issue's cost; one no issue here opened stays apart.
fn charge_reworks(issues: &mut BTreeMap<u64, Tally>, reworks: &BTreeMap<u64, Tally>) {
    let mut by_pull: BTreeMap<u64, u64> = BTreeMap::new();
    for (number, tally) in issues.iter() {
        if let Some(pull) = tally.pull {
            by_pull.insert(pull, *number);
        }
    }
    for (pull, rework) in reworks {
        if let Some(issue) = by_pull.get(pull) {
            issues.get_mut(issue).expect("listed above").absorb(rework);
        }
    }
}

/// The pull requests the issues opened, as the forge tells of them, with every wait.
struct Pulls {
    rows: Vec<PullRow>,
    counts: PullCounts,
    ready_to_pull: Vec<f64>,
    pull_to_merge: Vec<f64>,
}

impl Pulls {
    /// Also counts each pull request in the week it opened and the week it merged, and sets each
    /// week's median waits.
    fn of(
        issues: &BTreeMap<u64, Tally>,
        facts: &ForgeFacts,
        weeks: &mut BTreeMap<String, Week>,
    ) -> Pulls {
        let mut pulls = Pulls {
            rows: Vec::new(),
            counts: PullCounts {
                opened: 0,
                merged: 0,
                closed: 0,
                open: 0,
                reverted: 0,
                merge_rate: None,
            },
            ready_to_pull: Vec::new(),
            pull_to_merge: Vec::new(),
        };
        let mut week_waits: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for (issue, tally) in issues {
            let Some(number) = tally.pull else { continue };
            let row = pull_row(*issue, number, tally, facts);
            pulls.count(&row);
            if let (Some(wait), Some(created)) = (row.ready_to_pull_seconds, row.created_at) {
                pulls.ready_to_pull.push(wait);
                week_waits.entry(week_of(created)).or_default().0.push(wait);
            }
            if let Some(created) = row.created_at {
                week_entry(weeks, created).pulls_opened += 1;
            }
            if let (Some(wait), Some(merged)) = (row.pull_to_merge_seconds, row.merged_at) {
                pulls.pull_to_merge.push(wait);
                week_waits.entry(week_of(merged)).or_default().1.push(wait);
                week_entry(weeks, merged).pulls_merged += 1;
            }
            pulls.rows.push(row);
        }
        let counts = &mut pulls.counts;
        let decided = counts.merged + counts.closed;
        counts.merge_rate = (decided > 0).then(|| counts.merged as f64 / decided as f64);
        set_week_medians(weeks, week_waits);
        pulls
    }

    fn count(&mut self, row: &PullRow) {
        let counts = &mut self.counts;
        counts.opened += 1;
        match row.state {
            PullState::Merged => counts.merged += 1,
            PullState::Closed => counts.closed += 1,
            PullState::Open => counts.open += 1,
            PullState::Unknown => {}
        }
        counts.reverted += usize::from(row.reverted_by.is_some());
    }
}

/// Each week's median waits: ready to pull request over the pull requests opened that week, pull
/// request to merge over those merged that week.
fn set_week_medians(
    weeks: &mut BTreeMap<String, Week>,
    waits: BTreeMap<String, (Vec<f64>, Vec<f64>)>,
) {
    for (name, (ready, merge)) in waits {
        let week = week_entry(weeks, name_to_time(&name));
        week.ready_to_pull_seconds = Spread::of(&ready).median;
        week.pull_to_merge_seconds = Spread::of(&merge).median;
    }
}

/// The pull request `number` that `issue` opened, with what the forge says of it.
fn pull_row(issue: u64, number: u64, tally: &Tally, facts: &ForgeFacts) -> PullRow {
    let fate = facts.pulls.get(&number);
    let created_at = fate.and_then(|f| f.created_at);
    let merged_at = fate.and_then(|f| f.merged_at);
    let ready_at = created_at.and_then(|created| last_ready(facts, issue, created));
    PullRow {
        number,
        issue,
        title: fate.map(|f| f.title.clone()).unwrap_or_default(),
        url: format!("{}{number}", facts.pulls_url),
        state: pull_state(fate),
        reverted_by: facts.reverted.get(&number).cloned(),
        created_at,
        merged_at,
        cost_usd: tally.cost,
        iterations: tally.iterations,
        ready_to_pull_seconds: ready_at.zip(created_at).map(|(r, c)| seconds(r, c)),
        pull_to_merge_seconds: created_at.zip(merged_at).map(|(c, m)| seconds(c, m)),
    }
}

fn pull_state(fate: Option<&PullFate>) -> PullState {
    match fate {
        None => PullState::Unknown,
        Some(f) if f.merged_at.is_some() => PullState::Merged,
        Some(f) if f.closed => PullState::Closed,
        Some(_) => PullState::Open,
    }
}

/// The last time `ready-for-agent` was added to `issue` at or before `created`.
fn last_ready(facts: &ForgeFacts, issue: u64, created: Timestamp) -> Option<Timestamp> {
    let labelled = facts.labelled.get(&issue)?;
    labelled.iter().rev().find(|at| **at <= created).copied()
}

fn work_figures(all: &[&Tally]) -> WorkFigures {
    let gated: Vec<bool> = all.iter().filter_map(|t| t.gate_first_passed).collect();
    let first_pass = gated.iter().filter(|p| **p).count();
    let spread =
        |f: fn(&Tally) -> u32| Spread::of(&all.iter().map(|t| f(t) as f64).collect::<Vec<_>>());
    WorkFigures {
        iterations: spread(|t| t.iterations),
        gate_runs: spread(|t| t.gate_runs),
        gate_runs_total: all.iter().map(|t| u64::from(t.gate_runs)).sum(),
        first_pass,
        first_pass_of: gated.len(),
        first_pass_rate: (!gated.is_empty()).then(|| first_pass as f64 / gated.len() as f64),
        reviewer_rounds: spread(|t| t.reviewer_rounds),
        best_of: best_of_figures(all),
    }
}

fn best_of_figures(all: &[&Tally]) -> BestOfFigures {
    let attempts = || all.iter().flat_map(|t| &t.attempts);
    BestOfFigures {
        issues: all.iter().filter(|t| !t.attempts.is_empty()).count(),
        attempts: attempts().count(),
        passed: attempts().filter(|a| a.passed).count(),
        cost_usd: attempts().map(|a| a.cost_usd).sum(),
    }
}

fn week_entry(weeks: &mut BTreeMap<String, Week>, at: Timestamp) -> &mut Week {
    let name = week_of(at);
    weeks.entry(name.clone()).or_insert_with(|| Week {
        week: name,
        cost_usd: 0.0,
        pulls_opened: 0,
        pulls_merged: 0,
        ready_to_pull_seconds: None,
        pull_to_merge_seconds: None,
    })
}

/// Noon UTC of a `week_of` date, which falls in that week.
fn name_to_time(week: &str) -> Timestamp {
    format!("{week}T12:00:00Z")
        .parse()
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

#[cfg(test)]
mod tests;
