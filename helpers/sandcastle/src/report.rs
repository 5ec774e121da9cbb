//! Tokens, cost, iterations and outcomes per issue and per role; the closing summary table and
//! `.sandcastle/logs/run-<timestamp>.json`, and that file read back ([`RunRecord`]) for
//! `sandcastle report`.
use crate::state::{BestOf, Outcome};
use anyhow::{Context as _, Result};
use sandcastle_core::proxy::{BlockedRequest, Refusals};
use sandcastle_core::role::Role;
use sandcastle_core::secrets::Redactor;
use sandcastle_core::stream::Usage;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RoleTally {
    /// Turns that count against `maxIterations`.
    pub iterations: u32,
    /// Turns that ended with a question to a person: they do not count as iterations.
    pub question_turns: u32,
    pub usage: Usage,
    pub duration_seconds: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkReport {
    /// `issue #42`, `pull request #7`, `plan`.
    pub key: String,
    pub outcome: String,
    /// The pull request this work opened (an issue) or reworked (a pull request), if it did.
    #[serde(default)]
    pub pull: Option<u64>,
    /// Why the work was given up or stopped short, if it was.
    #[serde(default)]
    pub gave_up: Option<String>,
    #[serde(default)]
    pub roles: BTreeMap<String, RoleTally>,
    #[serde(default)]
    pub total: RoleTally,
    /// Times the orchestrator ran `check` on this work in this run, and whether the first and the
    /// last run passed.
    #[serde(default)]
    pub gate_runs: u32,
    #[serde(default)]
    pub gate_first_passed: Option<bool>,
    #[serde(default)]
    pub gate_passed: Option<bool>,
    /// How long each gate run took, its container's start and removal included.
    #[serde(default)]
    pub gate_seconds: Vec<f64>,
    /// What clarifying the issue before work came to in this run (`clarify.rs`), if it ran.
    #[serde(default)]
    pub clarification: Option<String>,
    /// The questions to a person (`<questions>`, clarification) asked or answered in this run.
    #[serde(default)]
    pub questions: Vec<Asked>,
    /// The asks (`sandcastle ask`) taken or settled in this run, one per revision.
    #[serde(default)]
    pub asks: Vec<Asked>,
    /// When this run first recorded the work (a long-running loop's report spans weeks).
    #[serde(default)]
    pub started_at: Option<jiff::Timestamp>,
    /// What the sandbox was refused through the proxy: host, port, count.
    #[serde(default)]
    pub blocked_requests: Vec<BlockedRequest>,
    /// Refusals past the names the proxy keeps (`Refusals::unlisted`): "and N more".
    #[serde(default)]
    pub blocked_unlisted: u64,
    /// Best of N: the attempts once they all ended, as their saved states say (their
    /// cost over every run), and which the reviewer chose.
    #[serde(default)]
    pub attempts: Vec<AttemptReport>,
    #[serde(skip)]
    started: Option<Instant>,
    #[serde(default)]
    pub duration_seconds: f64,
}

/// One of an issue's attempts (best of N), as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptReport {
    pub letter: char,
    /// The gate passed on its last commit.
    pub passed: bool,
    pub chosen: bool,
    pub iterations: u32,
    pub cost_usd: f64,
}

/// A question or an ask: when it went to a person and when one answered. The same `id` in several
/// run reports is one question asked in one run and answered in a later one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Asked {
    pub id: String,
    pub asked_at: jiff::Timestamp,
    #[serde(default)]
    pub answered_at: Option<jiff::Timestamp>,
}

/// A run report as read back: the parts of what [`Report::write`] wrote that `sandcastle report`
/// uses, older reports included (fields added since are optional; others are not read).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub run_id: String,
    pub started_at: jiff::Timestamp,
    #[serde(default)]
    pub work: Vec<WorkReport>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunFile<'a> {
    run_id: &'a str,
    orchestrator: &'a str,
    started_at: String,
    finished_at: String,
    work: Vec<&'a WorkReport>,
    total: RoleTally,
}

pub struct Report {
    run_id: String,
    /// The orchestrator that ran it (`[cluster] id`).
    orchestrator: String,
    /// The report file is one of the sinks: what it says passes this on the way out.
    redactor: Redactor,
    started_at: jiff::Timestamp,
    work: Mutex<BTreeMap<String, WorkReport>>,
}

impl Report {
    pub fn new(run_id: &str, orchestrator: &str, redactor: Redactor) -> Report {
        Report {
            run_id: run_id.to_string(),
            orchestrator: orchestrator.to_string(),
            redactor,
            started_at: jiff::Timestamp::now(),
            work: Mutex::new(BTreeMap::new()),
        }
    }

    fn with_work<T>(&self, key: &str, f: impl FnOnce(&mut WorkReport) -> T) -> T {
        let mut work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        let entry = work.entry(key.to_string()).or_insert_with(|| WorkReport {
            key: key.to_string(),
            outcome: "unfinished".to_string(),
            pull: None,
            gave_up: None,
            roles: BTreeMap::new(),
            total: RoleTally::default(),
            gate_runs: 0,
            gate_first_passed: None,
            gate_passed: None,
            gate_seconds: Vec::new(),
            clarification: None,
            questions: Vec::new(),
            asks: Vec::new(),
            started_at: Some(jiff::Timestamp::now()),
            blocked_requests: Vec::new(),
            blocked_unlisted: 0,
            attempts: Vec::new(),
            started: Some(Instant::now()),
            duration_seconds: 0.0,
        });
        f(entry)
    }

    /// One agent iteration of `role` on `key`, finished or not.
    pub fn record_iteration(&self, key: &str, role: Role, usage: &Usage, took: Duration) {
        self.with_work(key, |work| {
            for tally in [
                work.roles.entry(role.name().to_string()).or_default(),
                &mut work.total,
            ] {
                tally.iterations += 1;
                tally.usage.add(usage);
                tally.duration_seconds += took.as_secs_f64();
            }
        });
    }

    /// The last turn of `role` on `key` asked a person: a question turn, not an iteration.
    pub fn record_question_turn(&self, key: &str, role: Role) {
        self.with_work(key, |work| {
            for tally in [
                work.roles.entry(role.name().to_string()).or_default(),
                &mut work.total,
            ] {
                tally.iterations = tally.iterations.saturating_sub(1);
                tally.question_turns += 1;
            }
        });
    }

    /// One run of the gate on `key`.
    pub fn record_gate(&self, key: &str, passed: bool, took: Duration) {
        self.with_work(key, |work| {
            if work.gate_runs == 0 {
                work.gate_first_passed = Some(passed);
            }
            work.gate_runs += 1;
            work.gate_passed = Some(passed);
            work.gate_seconds.push(took.as_secs_f64());
        });
    }

    /// A question to a person on `key` (`id`), asked at `asked_at`, answered at `answered_at`.
    pub fn record_question(&self, key: &str, asked: Asked) {
        self.with_work(key, |work| upsert(&mut work.questions, asked));
    }

    /// An ask of `key`'s agent (one revision), taken at `asked_at`, settled at `answered_at`.
    pub fn record_ask(&self, key: &str, asked: Asked) {
        self.with_work(key, |work| upsert(&mut work.asks, asked));
    }

    /// What clarifying `key` came to: degraded, waiting for an answer, clear enough to start.
    pub fn set_clarification(&self, key: &str, line: &str) {
        self.with_work(key, |work| work.clarification = Some(line.to_string()));
    }

    /// What `key`'s sandbox was refused through the proxy in this run.
    pub fn set_blocked(&self, key: &str, blocked: Refusals) {
        self.with_work(key, |work| {
            work.blocked_requests = blocked.listed;
            work.blocked_unlisted = blocked.unlisted;
        });
    }

    /// What `key`'s attempts came to (best of N), and which was chosen once one is.
    pub fn set_attempts(&self, key: &str, best_of: &BestOf) {
        let chosen = best_of.choice.as_ref().map(|c| c.letter);
        self.with_work(key, |work| {
            work.attempts = best_of
                .ended
                .iter()
                .map(|ended| AttemptReport {
                    letter: ended.letter,
                    passed: ended.passed,
                    chosen: chosen == Some(ended.letter),
                    iterations: ended.iterations,
                    cost_usd: ended.cost_usd,
                })
                .collect();
        });
    }

    /// What the whole run has cost so far.
    pub fn total_cost(&self) -> f64 {
        let work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        Self::total(&work).usage.cost_usd
    }

    /// Cost so far on `key`, for the progress view.
    pub fn cost(&self, key: &str) -> f64 {
        self.with_work(key, |work| work.total.usage.cost_usd)
    }

    /// How the work on `key` came out: the line, and the pull request or the reason it was given up.
    pub fn set_result(&self, key: &str, outcome: &Outcome) {
        self.set_outcome(key, &outcome.to_string());
        self.with_work(key, |work| match outcome {
            Outcome::PullRequest(number) => work.pull = Some(*number),
            Outcome::GaveUp { iterations } => {
                work.gave_up = Some(format!("not completed in {iterations} iteration(s)"))
            }
            Outcome::Stopped(why) => work.gave_up = Some(why.clone()),
            _ => {}
        });
    }

    pub fn set_outcome(&self, key: &str, outcome: &str) {
        self.with_work(key, |work| {
            work.outcome = outcome.to_string();
            if let Some(started) = work.started {
                work.duration_seconds = started.elapsed().as_secs_f64();
            }
        });
    }

    fn total(work: &BTreeMap<String, WorkReport>) -> RoleTally {
        let mut total = RoleTally::default();
        for w in work.values() {
            total.iterations += w.total.iterations;
            total.question_turns += w.total.question_turns;
            total.usage.add(&w.total.usage);
            total.duration_seconds += w.total.duration_seconds;
        }
        total
    }

    /// The table printed when the run ends, a row a line.
    pub fn summary_table(&self) -> Vec<String> {
        fn row(
            work: &str,
            role: &str,
            iterations: &str,
            tokens: (&str, &str),
            cost: &str,
            outcome: &str,
        ) -> String {
            let (input, output) = tokens;
            format!("{work:<12} {role:<14} {iterations:>5} {input:>10} {output:>10} {cost:>9}  {outcome}")
                .trim_end()
                .to_string()
        }
        fn tally_row(work: &str, role: &str, t: &RoleTally, outcome: &str) -> String {
            let (input, output) = (
                t.usage.input_tokens.to_string(),
                t.usage.output_tokens.to_string(),
            );
            let cost = format!("${:.4}", t.usage.cost_usd);
            row(
                work,
                role,
                &t.iterations.to_string(),
                (&input, &output),
                &cost,
                outcome,
            )
        }
        let work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = vec![row(
            "work",
            "role",
            "iter",
            ("in tok", "out tok"),
            "cost",
            "outcome",
        )];
        for w in work.values() {
            for (role, t) in &w.roles {
                out.push(tally_row(&w.key, role, t, &w.outcome));
            }
            if w.roles.is_empty() {
                out.push(tally_row(&w.key, "-", &RoleTally::default(), &w.outcome));
            }
        }
        out.push(tally_row("total", "", &Self::total(&work), ""));
        out
    }

    /// Writes `<dir>/run-<run id>.json` (again: it is replaced whole) and returns its path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf> {
        let work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        let file = RunFile {
            run_id: &self.run_id,
            orchestrator: &self.orchestrator,
            started_at: self.started_at.to_string(),
            finished_at: jiff::Timestamp::now().to_string(),
            work: work.values().collect(),
            total: Self::total(&work),
        };
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("run-{}.json", self.run_id));
        let text = self.redactor.redact(&serde_json::to_string_pretty(&file)?);
        // A file of its own for each write (a pass and a stop may write at once), renamed whole.
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write {}", path.display()))?;
        std::io::Write::write_all(&mut tmp, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        tmp.persist(&path)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

/// Adds `asked`, or completes the entry with its id (an answer seen after the question).
fn upsert(list: &mut Vec<Asked>, asked: Asked) {
    match list.iter_mut().find(|a| a.id == asked.id) {
        Some(known) => known.answered_at = asked.answered_at.or(known.answered_at),
        None => list.push(asked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cost: f64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: 1,
            cost_usd: cost,
            ..Usage::default()
        }
    }

    #[test]
    fn sums_per_role_and_per_run() {
        let redactor = Redactor::new(&sandcastle_core::secrets::EnvFile {
            vars: vec![("ANTHROPIC_API_KEY".into(), "sk-report-secret".into())],
        });
        let report = Report::new("r1", "host-a", redactor);
        report.record_iteration(
            "issue #1",
            Role::Implementer,
            &usage(100, 0.5),
            Duration::from_secs(2),
        );
        report.record_iteration(
            "issue #1",
            Role::Implementer,
            &usage(50, 0.25),
            Duration::from_secs(1),
        );
        report.record_iteration(
            "issue #1",
            Role::Reviewer,
            &usage(10, 0.125),
            Duration::from_secs(1),
        );
        report.record_iteration(
            "issue #2",
            Role::Implementer,
            &usage(1, 1.0),
            Duration::from_secs(1),
        );
        report.set_outcome("issue #1", "pull request #3");
        let asked_at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        report.record_ask(
            "issue #1",
            Asked {
                id: "ask-1/1".into(),
                asked_at,
                answered_at: None,
            },
        );
        report.set_outcome("issue #2", "failed: the key sk-report-secret was refused");
        assert_eq!(report.cost("issue #1"), 0.875);

        let dir = tempfile::tempdir().unwrap();
        let path = report.write(dir.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["runId"], "r1");
        assert_eq!(json["orchestrator"], "host-a");
        assert_eq!(json["total"]["usage"]["cost_usd"], 1.875);
        assert_eq!(json["total"]["iterations"], 4);
        let first = &json["work"][0];
        assert_eq!(first["key"], "issue #1");
        assert_eq!(first["outcome"], "pull request #3");
        assert_eq!(first["roles"]["implementer"]["iterations"], 2);
        assert_eq!(first["roles"]["implementer"]["usage"]["input_tokens"], 150);
        assert_eq!(
            first["asks"],
            serde_json::json!([{"id": "ask-1/1", "askedAt": asked_at.to_string(), "answeredAt": null}])
        );
        assert_eq!(
            json["work"][1]["outcome"],
            "failed: the key [redacted] was refused"
        );

        let table = report.summary_table().join("\n");
        assert!(
            table.contains("issue #1     implementer        2"),
            "{table}"
        );
        assert!(table.contains("$1.8750"), "{table}");
    }
}
