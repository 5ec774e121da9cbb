//! Best of N: an issue's attempts as its saved state keeps them, and what each came to.
use serde::{Deserialize, Serialize};

/// An issue worked on by several independent attempts (`[implement] attempts` or the issue's
/// override): fixed and saved before the first attempt starts, so a resumed run starts none twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BestOf {
    /// The attempts' letters, `a` on.
    pub letters: Vec<char>,
    /// What each attempt came to, once all have ended (sandcastle's facts, in letter order).
    #[serde(default)]
    pub ended: Vec<Ended>,
    /// The reviewer's choice, once made.
    #[serde(default)]
    pub choice: Option<Chosen>,
    /// Choosing turns whose `<choice>` block was unusable; the second ends the issue.
    #[serde(default)]
    pub bad_choices: u32,
}

/// One attempt, as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    pub letter: char,
    /// The gate passed on `commit`, which is what the reviewer saw.
    pub passed: bool,
    pub commit: Option<String>,
    pub iterations: u32,
    pub gate_runs: u32,
    /// What its turns cost (the proxy's meter).
    pub cost_usd: f64,
    /// Why it stopped short of its iterations, when it did: a spent budget (sandcastle's words).
    pub stopped: Option<String>,
}

/// The attempt the reviewer chose, and its reasons (agent text: quoted wherever it is shown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Chosen {
    pub letter: char,
    /// `None`: the only attempt the gate passed, chosen without a turn.
    pub why: Option<String>,
}

impl BestOf {
    /// `count` attempts, `a` on.
    pub fn new(count: u32) -> BestOf {
        BestOf {
            letters: ('a'..).take(count as usize).collect(),
            ended: Vec::new(),
            choice: None,
            bad_choices: 0,
        }
    }

    /// The letters of the attempts the gate passed.
    pub fn passed(&self) -> Vec<char> {
        self.ended
            .iter()
            .filter(|e| e.passed)
            .map(|e| e.letter)
            .collect()
    }
}
