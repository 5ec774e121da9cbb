//! A kept-green pull request's saved record (`.sandcastle/logs/state/green/pr-N.json`): the head
//! sandcastle last pushed, the rounds spent, whom it asked; and whether a round is in progress.
//! Below the green lane, so publishing and planning read and write it without the lane itself.
use crate::context::Context;
use crate::json_file;
use crate::state::{Trouble, WorkState};
use anyhow::{Context as _, Result};
use sandcastle_core::role::WorkKey;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One pull request's record, saved across runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The head sandcastle pushed last; another head is a person's.
    pub ours: Option<String>,
    pub ci_rounds: u32,
    pub conflict_rounds: u32,
    /// Heads a round started on: one round per head, whatever became of it.
    pub tried: Vec<String>,
    /// A person was asked once the rounds of this kind ran out (`ciRounds`, `conflictRounds`).
    pub asked: Vec<String>,
}

impl Record {
    fn path(dir: &Path, pull: u64) -> PathBuf {
        dir.join("green").join(format!("pr-{pull}.json"))
    }

    pub fn load(dir: &Path, pull: u64) -> Result<Record> {
        let path = Self::path(dir, pull);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is not a sandcastle record: delete it to start keeping that pull request green afresh",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Record::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Written atomically.
    pub fn save(&self, dir: &Path, pull: u64) -> Result<()> {
        json_file::save(&Self::path(dir, pull), self)
    }

    /// Every pull request's record, by number.
    pub fn all(dir: &Path) -> Result<Vec<(u64, Record)>> {
        let mut all = Vec::new();
        for stem in json_file::stems(&dir.join("green"))? {
            let number = stem.strip_prefix("pr-").and_then(|n| n.parse().ok());
            if let Some(number) = number {
                all.push((number, Record::load(dir, number)?));
            }
        }
        all.sort_by_key(|(number, _)| *number);
        Ok(all)
    }

    pub fn rounds(&self, trouble: &Trouble) -> u32 {
        match trouble {
            Trouble::Ci { .. } => self.ci_rounds,
            Trouble::Conflict { .. } => self.conflict_rounds,
        }
    }
}

/// Sandcastle pushed `head` to pull request `pull`: the head it answers for.
pub fn pushed(ctx: &Context, pull: u64, head: &str) -> Result<()> {
    let dir = ctx.state_dir();
    let mut record = Record::load(&dir, pull)?;
    if record.ours.as_deref() != Some(head) {
        record.ours = Some(head.to_string());
        record.save(&dir, pull)?;
    }
    Ok(())
}

/// The round in progress on `pull`, if any: its saved work, unfinished.
pub fn in_progress(ctx: &Context, pull: u64) -> Result<Option<Trouble>> {
    let state = WorkState::resume(&ctx.state_dir(), &WorkKey::Pull(pull).slug())?;
    Ok(state.and_then(|state| state.green))
}
