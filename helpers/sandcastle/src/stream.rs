//! Claude Code's `--output-format stream-json` events, parsed robustly.
//! OWNER: helper H6. Interface fixed; bodies to implement.
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cost_usd: f64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) { todo!() }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Init { session_id: String, model: String },
    ToolUse { name: String, summary: String },
    ToolResult { is_error: bool, text: String },
    AssistantText(String),
    Result { is_error: bool, subtype: String, text: String, session_id: String, usage: Usage },
    /// Unknown types and unparsable lines are kept out of the way, not errors.
    Other,
}

/// One line of the stream.
pub fn parse_line(line: &str) -> Event { todo!() }
