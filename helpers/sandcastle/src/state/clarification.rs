//! What clarifying an issue before work came to, saved in its state (`clarify.rs` does it).
use super::conversation::Answer;
use serde::{Deserialize, Serialize};

/// What clarifying an issue came to, saved in its state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Clarification {
    /// The questions asked, one a round, each with its answer once it came.
    pub rounds: Vec<Round>,
    /// Why the assessment could not be used; work started without it.
    pub degraded: Option<String>,
    /// What the issue still did not say when the rounds ran out: the implementer decided it.
    pub unclear: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Round {
    pub question: String,
    pub answer: Option<Answer>,
}

impl Clarification {
    /// The questions and their answers so far, as plain text (fenced where it enters a prompt).
    pub fn transcript(&self) -> String {
        self.rounds
            .iter()
            .enumerate()
            .map(|(index, round)| {
                let answer = match &round.answer {
                    Some(answer) => format!(
                        "Answer (by {}): {}",
                        answer.by,
                        answer
                            .replies
                            .iter()
                            .map(|r| r.text.as_str())
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                    None => "No answer yet.".to_string(),
                };
                format!("Question {}: {}\n{answer}", index + 1, round.question)
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The questions asked so far.
    pub fn asked(&self) -> u32 {
        self.rounds.len() as u32
    }
}
