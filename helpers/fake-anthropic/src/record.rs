//! What the fake model was asked, for tests to assert on.

use crate::scenario::Usage;

/// One `POST /v1/messages` the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub model: String,
    /// The conversation's first user prompt (system reminders excluded).
    pub prompt: String,
    /// The system reminders of that first user message (the context Claude Code adds).
    pub reminders: String,
    /// The conversation's last user message (a resumed session's new prompt), reminders excluded.
    pub latest: String,
    /// What the assistant already said in the conversation.
    pub said: String,
    /// Assistant messages already in the conversation: the turn that was answered.
    pub turn: usize,
    /// Index of the script that answered, `None` when no script had this turn.
    pub script: Option<usize>,
    /// Tokens reported in the answer.
    pub usage: Usage,
    /// The names of the tools the request offered (`Bash`, `mcp__sandcastle__ask`, …).
    pub tools: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Records {
    pub main: Vec<RecordedRequest>,
    pub side: Vec<RecordedRequest>,
}

impl Records {
    pub fn add(&mut self, record: RecordedRequest, main: bool) {
        if main {
            self.main.push(record);
        } else {
            self.side.push(record);
        }
    }
}
