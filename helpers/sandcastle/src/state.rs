//! Each piece of work's progress as explicit, saved state (`.sandcastle/logs/state/<slug>.json`), so
//! a run that stops anywhere resumes where it was, and a paused issue can go on later.
mod best_of;
mod clarification;
mod conversation;

pub use best_of::{BestOf, Chosen, Ended};
pub use clarification::{Clarification, Round};
pub use conversation::{Answer, Channel, Conversation, OpenAsk, Settled, Telling, Waiting};

use crate::json_file;
use anyhow::{Context as _, Result};
use sandcastle_core::agent::SavedSession;
use sandcastle_core::forge::CommitStatus;
use sandcastle_core::role::Role;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Before an issue's first turn: the assessor judges whether it says enough (`clarify.rs`).
    Clarify,
    /// The implementer (or pr-fixer) iterates until it says it is done and the gate passes.
    Work,
    /// The reviewer gives its verdict on the commits, beside the gate if it has not seen them.
    Review,
    /// The orchestrator pushes and updates the forge.
    Publish,
    /// The working agent, or the clarification before it, asked a person this question; its
    /// container is gone until the answer comes.
    Waiting(Box<Waiting>),
    /// Best of N: the issue's attempts (each its own work, `issue-N-<letter>`) run until each
    /// passed the gate or dropped out.
    Attempts,
    /// Best of N: the reviewer chooses among the attempts the gate passed.
    Choose,
    /// Best of N: the chosen attempt goes on as the issue's work, reviewed and published.
    Chosen(char),
    /// An attempt the gate passed: it waits for the reviewer's choice.
    Passed,
    /// Published.
    Done,
    /// No completion within `maxIterations`; the forge has been told (`told_forge`).
    GaveUp,
}

impl std::fmt::Display for Phase {
    /// The phase's name (`Waiting`, not its question): in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Phase::Clarify => "Clarify",
            Phase::Work => "Work",
            Phase::Review => "Review",
            Phase::Publish => "Publish",
            Phase::Waiting(_) => "Waiting",
            Phase::Attempts => "Attempts",
            Phase::Choose => "Choose",
            Phase::Chosen(_) => "Chosen",
            Phase::Passed => "Passed",
            Phase::Done => "Done",
            Phase::GaveUp => "GaveUp",
        })
    }
}

/// How far people have moved an issue or pull request: when it last changed, and how many of its
/// comments are not sandcastle's. Sandcastle's own claims and comments come and go without moving it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct Revision {
    pub updated_at: String,
    pub comments: u64,
}

/// The reviewer's last word: approved (the completion signal) or not, with its summary or findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub approved: bool,
    pub summary: String,
}

/// What makes a pull request unmergeable, on which head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Trouble {
    /// The head's combined status is `failure` or `error`: the statuses that say so.
    Ci {
        head: String,
        failing: Vec<CommitStatus>,
    },
    /// The forge says it no longer merges into the default branch.
    Conflict { head: String },
}

impl Trouble {
    pub fn head(&self) -> &str {
        match self {
            Trouble::Ci { head, .. } | Trouble::Conflict { head } => head,
        }
    }

    /// `failing CI`, `a merge conflict`: in logs, comments and the report.
    pub fn what(&self) -> &'static str {
        match self {
            Trouble::Ci { .. } => "failing CI",
            Trouble::Conflict { .. } => "a merge conflict",
        }
    }

    /// The `[autopilot]` key that bounds rounds of this kind.
    pub fn rounds_key(&self) -> &'static str {
        match self {
            Trouble::Ci { .. } => "ciRounds",
            Trouble::Conflict { .. } => "conflictRounds",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkState {
    /// `issue-42` or `pr-7`.
    pub slug: String,
    pub branch: String,
    pub phase: Phase,
    /// Turns finished in the `Work` phase; those that asked a question (`question_turns`) do not
    /// count against `maxIterations`.
    pub iterations: u32,
    #[serde(default)]
    pub question_turns: u32,
    /// Unusable `<questions>` blocks in a row: the first gets a correction turn, the second ends
    /// the work.
    #[serde(default)]
    pub bad_questions: u32,
    /// What clarifying the issue before work came to (issues only).
    #[serde(default)]
    pub clarification: Option<Clarification>,
    /// The agent's latest ask that did not stop it (`sandcastle ask`), as published.
    #[serde(default)]
    pub ask: Option<OpenAsk>,
    /// A settled ask's answer, told in the working agent's next turn.
    #[serde(default)]
    pub tell: Option<Telling>,
    /// The keys of answers already told: none is told twice.
    #[serde(default)]
    pub told: Vec<String>,
    /// Why the outbox was last refused: the same refusal is said once, not after every turn.
    #[serde(default)]
    pub refused_ask: Option<String>,
    /// The last result text of the working agent.
    pub last_summary: String,
    /// The latest saved session of each role, resumable in a fresh container.
    pub sessions: Vec<(Role, SavedSession)>,
    /// What the orchestrator tells the working agent next: the gate's failure or the reviewer's
    /// findings. `None`: it did not say it was done.
    #[serde(default)]
    pub nudge: Option<String>,
    /// Times the gate ran, and whether the last run passed.
    #[serde(default)]
    pub gate_runs: u32,
    #[serde(default)]
    pub gate_passed: Option<bool>,
    /// The commit the last gate ran on.
    #[serde(default)]
    pub gate_commit: Option<String>,
    /// Review rounds done, and the reviewer's last verdict.
    #[serde(default)]
    pub review_rounds: u32,
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// What the agents' turns on this work cost, over every run.
    #[serde(default)]
    pub cost_usd: f64,
    /// The forge's revision of the issue or pull request once sandcastle gave up on it and said so:
    /// it is not taken up again, by this run or a later one, until a person moves it.
    #[serde(default)]
    pub settled: Option<Revision>,
    /// Why the work stopped short of its iterations: a spent budget.
    #[serde(default)]
    pub stopped_by: Option<String>,
    /// The HEAD before the agents started; new commits are counted from it.
    pub start_commit: Option<String>,
    /// Marks the forge comment of this attempt, so a resumed run never posts it twice.
    pub attempt: String,
    pub pull: Option<u64>,
    pub told_forge: bool,
    /// A round that keeps one of sandcastle's pull requests green: what it fixes (`green.rs`).
    #[serde(default)]
    pub green: Option<Trouble>,
    /// Best of N: the issue's attempts (in the issue's state, and in the chosen attempt's for its
    /// pull request).
    #[serde(default)]
    pub best_of: Option<BestOf>,
}

impl WorkState {
    pub fn new(slug: &str, branch: &str, attempt: &str) -> WorkState {
        WorkState {
            slug: slug.to_string(),
            branch: branch.to_string(),
            phase: Phase::Work,
            iterations: 0,
            question_turns: 0,
            bad_questions: 0,
            clarification: None,
            ask: None,
            tell: None,
            told: Vec::new(),
            refused_ask: None,
            last_summary: String::new(),
            sessions: Vec::new(),
            nudge: None,
            gate_runs: 0,
            gate_passed: None,
            gate_commit: None,
            review_rounds: 0,
            verdict: None,
            cost_usd: 0.0,
            settled: None,
            stopped_by: None,
            start_commit: None,
            attempt: attempt.to_string(),
            pull: None,
            told_forge: false,
            green: None,
            best_of: None,
        }
    }

    fn path(dir: &Path, slug: &str) -> PathBuf {
        dir.join(format!("{slug}.json"))
    }

    /// The saved state of unfinished work on `slug`, if any; finished work starts afresh.
    pub fn resume(dir: &Path, slug: &str) -> Result<Option<WorkState>> {
        Ok(Self::load(dir, slug)?.filter(|state| !state.finished()))
    }

    /// The saved state of `slug`, finished or not.
    pub fn load(dir: &Path, slug: &str) -> Result<Option<WorkState>> {
        let path = Self::path(dir, slug);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let state = serde_json::from_str(&text)
            .map(upgrade)
            .and_then(serde_json::from_value)
            .with_context(|| {
                format!(
                    "{} is not a sandcastle state file: delete it to start that work afresh",
                    path.display()
                )
            })?;
        Ok(Some(state))
    }

    /// Every saved state whose work still has something to tell the forge: half-published work,
    /// and work given up whose comment is not known to be posted; an issue carried by its chosen
    /// attempt (best of N) when that attempt is so.
    pub fn unpublished(dir: &Path) -> Result<Vec<WorkState>> {
        let telling = |state: &WorkState| {
            state.phase == Phase::Publish || (state.phase == Phase::GaveUp && !state.told_forge)
        };
        Self::all_where(dir, |state| match state.phase {
            Phase::Chosen(letter) => Self::load(dir, &format!("{}-{letter}", state.slug))
                .ok()
                .flatten()
                .is_some_and(|chosen| telling(&chosen)),
            _ => telling(state),
        })
    }

    /// Every saved state that `keep` keeps, by slug.
    fn all_where(dir: &Path, keep: impl Fn(&WorkState) -> bool) -> Result<Vec<WorkState>> {
        let mut states = Vec::new();
        for slug in json_file::stems(dir)? {
            if let Some(state) = Self::load(dir, &slug)?
                && keep(&state)
            {
                states.push(state);
            }
        }
        states.sort_by(|a, b| a.slug.cmp(&b.slug));
        Ok(states)
    }

    /// Every saved state waiting for an answer.
    pub fn all_waiting(dir: &Path) -> Result<Vec<WorkState>> {
        Self::all_where(dir, |state| state.waiting().is_some())
    }

    /// The question the work waits for, in phase `Waiting`.
    pub fn waiting(&self) -> Option<&Waiting> {
        match &self.phase {
            Phase::Waiting(waiting) => Some(waiting),
            _ => None,
        }
    }

    pub fn waiting_mut(&mut self) -> Option<&mut Waiting> {
        match &mut self.phase {
            Phase::Waiting(waiting) => Some(waiting),
            _ => None,
        }
    }

    /// Every saved state with an ask that is open or an answer not yet told.
    pub fn with_asks(dir: &Path) -> Result<Vec<WorkState>> {
        Self::all_where(dir, |state| {
            state.tell.is_some() || state.ask.as_ref().is_some_and(|a| a.reply.is_none())
        })
    }

    /// Iterations that count against `maxIterations`.
    pub fn counted_iterations(&self) -> u32 {
        self.iterations.saturating_sub(self.question_turns)
    }

    fn finished(&self) -> bool {
        self.phase == Phase::Done || (self.phase == Phase::GaveUp && self.told_forge)
    }

    /// Given up on at exactly this revision of the forge's issue or pull request: nobody has moved
    /// it since, so it is not worked on again.
    pub fn settled_at(&self, revision: &Revision) -> bool {
        self.phase == Phase::GaveUp && self.told_forge && self.settled.as_ref() == Some(revision)
    }

    /// Written atomically, so a kill mid-write leaves the previous state.
    pub fn save(&self, dir: &Path) -> Result<()> {
        json_file::save(&Self::path(dir, &self.slug), self)
    }

    pub fn set_session(&mut self, role: Role, session: SavedSession) {
        self.sessions.retain(|(r, _)| *r != role);
        self.sessions.push((role, session));
    }

    pub fn session(&self, role: Role) -> Option<&SavedSession> {
        self.sessions
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, s)| s)
    }

    pub fn forget_session(&mut self, role: Role) {
        self.sessions.retain(|(r, _)| *r != role);
    }
}

/// A state file of an earlier version in today's shape: its waiting question was a `waiting` field
/// beside `"phase": "waiting"` (now the phase carries it), whose replies counted after its comment
/// (now `after` says so). A `waiting` phase without its question stays unreadable.
fn upgrade(mut state: Value) -> Value {
    let Some(fields) = state.as_object_mut() else {
        return state;
    };
    let waiting = fields.remove("waiting").filter(|w| !w.is_null());
    if let (Some(mut waiting), Some("waiting")) =
        (waiting, fields.get("phase").and_then(Value::as_str))
    {
        if waiting.get("after").is_none() {
            waiting["after"] = waiting["comment"].as_i64().unwrap_or(0).into();
        }
        fields.insert("phase".into(), serde_json::json!({ "waiting": waiting }));
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_state_resumes_and_finished_state_does_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(WorkState::resume(dir.path(), "issue-1").unwrap().is_none());

        let mut state = WorkState::new("issue-1", "sandcastle/issue-1", "a1");
        state.iterations = 2;
        state.phase = Phase::Publish;
        state.set_session(
            Role::Implementer,
            SavedSession {
                session_id: "s".into(),
                file: "f".into(),
            },
        );
        state.save(dir.path()).unwrap();
        let back = WorkState::resume(dir.path(), "issue-1").unwrap().unwrap();
        assert_eq!((back.phase, back.iterations), (Phase::Publish, 2));
        assert_eq!(back.sessions[0].1.session_id, "s");

        state.phase = Phase::GaveUp;
        state.save(dir.path()).unwrap();
        assert!(
            WorkState::resume(dir.path(), "issue-1").unwrap().is_some(),
            "the forge was not told yet"
        );
        state.told_forge = true;
        state.save(dir.path()).unwrap();
        assert!(WorkState::resume(dir.path(), "issue-1").unwrap().is_none());
    }

    #[test]
    fn a_corrupt_state_file_says_how_to_recover() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("issue-1.json"), "{").unwrap();
        let err = WorkState::resume(dir.path(), "issue-1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("delete it"), "{err}");
    }

    /// A state file the previous version wrote: the waiting question beside `"phase": "waiting"`,
    /// the ask's `takenAt` and `settled`.
    const OLD_STATE: &str = r#"{
      "slug": "issue-1", "branch": "sandcastle/issue-1", "phase": "waiting", "iterations": 1,
      "questionTurns": 1, "badQuestions": 0,
      "waiting": {
        "id": "q1",
        "questions": {"title": "Driver?", "prose": "", "items": [
          {"title": "Which?", "prose": "", "options": [{"title": "pg", "prose": ""}]}]},
        "askedAt": "2026-01-01T00:00:00Z", "channels": ["forge"], "comment": 7, "polls": 2,
        "nextPoll": "2026-01-01T00:20:00Z", "ignored": [8], "timedOut": false, "answer": null
      },
      "clarification": null,
      "ask": {
        "id": "a1",
        "ask": {"key": "issue:1", "revision": 2, "kind": "decision", "title": "Port?",
                "details": "", "options": [], "recommended": null},
        "takenAt": "2026-01-01T00:00:00Z", "comment": 9, "after": 10, "polls": 1,
        "nextPoll": "2026-01-01T00:05:00Z", "ignored": [],
        "settled": {"by": "carol", "at": "2026-01-01T00:01:00Z", "closed": false,
                    "option": null, "text": "8080"},
        "marked": true
      },
      "tell": null, "told": [], "refusedAsk": null, "lastSummary": "", "sessions": [],
      "nudge": null, "gateRuns": 0, "gatePassed": null, "gateCommit": null, "reviewRounds": 0,
      "verdict": null, "costUsd": 0.5, "settled": null, "stoppedBy": null,
      "startCommit": "abc", "attempt": "r1", "pull": null, "toldForge": false, "green": null
    }"#;

    #[test]
    fn a_state_file_of_the_previous_version_loads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("issue-1.json"), OLD_STATE).unwrap();
        let state = WorkState::resume(dir.path(), "issue-1").unwrap().unwrap();
        let waiting = state.waiting().expect("the phase carries its question");
        let question = &waiting.conversation;
        assert_eq!(
            (question.id.as_str(), question.subject.title.as_str()),
            ("q1", "Driver?")
        );
        assert_eq!(
            (
                question.comment,
                question.after,
                question.polls,
                question.reply.is_none()
            ),
            (Some(7), 7, 2, true),
            "replies count after the question's comment, as they did"
        );
        assert_eq!(waiting.channels, [Channel::Forge]);
        let ask = state.ask.as_ref().unwrap();
        assert_eq!((ask.subject.revision, ask.after, ask.marked), (2, 10, true));
        assert_eq!(ask.asked_at, "2026-01-01T00:00:00Z".parse().unwrap());
        assert_eq!(ask.reply.as_ref().unwrap().text, "8080");
        assert_eq!(WorkState::all_waiting(dir.path()).unwrap().len(), 1);
        assert_eq!(
            WorkState::with_asks(dir.path()).unwrap().len(),
            0,
            "settled"
        );

        // Saved again in today's shape, it reads back the same.
        state.save(dir.path()).unwrap();
        let again = WorkState::load(dir.path(), "issue-1").unwrap().unwrap();
        assert_eq!(again.phase, state.phase);
    }

    /// A waiting phase without its question was a runtime error of the driver; now the file does not load.
    #[test]
    fn a_waiting_phase_without_its_question_does_not_load() {
        let dir = tempfile::tempdir().unwrap();
        let old = OLD_STATE.replacen("\"waiting\": {", "\"unused\": {", 1);
        std::fs::write(dir.path().join("issue-1.json"), old).unwrap();
        let err = WorkState::load(dir.path(), "issue-1").unwrap_err();
        assert!(format!("{err:#}").contains("delete it"), "{err:#}");
    }
}

/// What became of one piece of work.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    PullRequest(u64),
    Reworked,
    /// A pull request's failing CI or conflict was fixed: which.
    KeptGreen(&'static str),
    GaveUp {
        iterations: u32,
    },
    /// Stopped short by a budget or an unusable question: why.
    Stopped(String),
    /// Another orchestrator holds the work's claim: its id.
    HeldBy(String),
    /// The agent asked a person; the work goes on when the answer comes.
    Waiting,
    /// The issue is too unclear to start and no handler can reach a person: the guidance to show.
    Unclear(String),
    /// One of an issue's attempts passed the gate: it waits for the reviewer's choice.
    Passed,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::PullRequest(n) => write!(f, "pull request #{n} ready for a human"),
            Outcome::Reworked => f.write_str("reworked; ready for a human"),
            Outcome::KeptGreen(what) => write!(f, "fixed {what}; ready for a human"),
            Outcome::GaveUp { iterations, .. } => {
                write!(f, "not completed in {iterations} iteration(s); commented")
            }
            Outcome::Stopped(why) => write!(f, "stopped: {why}; commented"),
            Outcome::HeldBy(holder) => write!(f, "left to {holder}, which holds its claim"),
            Outcome::Waiting => f.write_str("asked a person; waiting for the answer"),
            Outcome::Passed => {
                f.write_str("passed the gate; the reviewer chooses among the attempts")
            }
            Outcome::Unclear(_) => {
                f.write_str("not clear enough to start, and nobody can be asked; see the guidance")
            }
        }
    }
}
