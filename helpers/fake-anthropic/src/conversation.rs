//! What a Messages API request says about its conversation: who it is and how far along.

use serde_json::Value;

/// The parts of a `POST /v1/messages` body that decide the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    pub model: String,
    /// Text of the first user message, without Claude Code's `<system-reminder>` blocks.
    pub prompt: String,
    /// Those `<system-reminder>` blocks of the first user message: the context Claude Code adds
    /// (a project's `CLAUDE.md` among it).
    pub reminders: String,
    /// Text of the last user message (a resumed session's new prompt), without reminders; empty
    /// when that message holds only tool results.
    pub latest: String,
    /// Every text the assistant already said in the conversation, one per line.
    pub said: String,
    /// Number of assistant messages already in the request: the index of the turn to answer.
    /// Counting instead of remembering keeps the server stateless, so concurrent agents,
    /// retries and resumed sessions all get the right turn.
    pub turn: usize,
    pub stream: bool,
    /// Whether the request offers the Bash tool: true for an agent's main loop,
    /// false for Claude Code's side requests (titles, summaries, quota probes).
    pub offers_bash: bool,
    /// The names of the tools the request offers.
    pub tools: Vec<String>,
}

impl Conversation {
    pub fn from_body(body: &Value) -> Result<Conversation, String> {
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .ok_or("request body has no \"model\" string")?
            .to_owned();
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("request body has no \"messages\" array")?;
        let first = messages
            .iter()
            .find(|message| message.get("role").and_then(Value::as_str) == Some("user"));
        let prompt = first
            .map(|message| prompt_text(message.get("content")))
            .unwrap_or_default();
        let reminders = first
            .map(|message| reminder_text(message.get("content")))
            .unwrap_or_default();
        let latest = messages
            .iter()
            .rfind(|message| message.get("role").and_then(Value::as_str) == Some("user"))
            .map(|message| prompt_text(message.get("content")))
            .unwrap_or_default();
        let assistant = || {
            messages
                .iter()
                .filter(|message| message.get("role").and_then(Value::as_str) == Some("assistant"))
        };
        let said = assistant()
            .map(|message| prompt_text(message.get("content")))
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        let turn = assistant().count();
        let tools: Vec<String> = body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| tool.get("name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect();
        let offers_bash = tools.iter().any(|name| name == "Bash");
        Ok(Conversation {
            model,
            prompt,
            reminders,
            latest,
            said,
            turn,
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            offers_bash,
            tools,
        })
    }
}

/// The user's own words in a message `content`, which is a string or a list of blocks.
fn prompt_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        _ => text_blocks(content, false),
    }
}

/// The `<system-reminder>` text blocks of a message `content`, one after another.
fn reminder_text(content: Option<&Value>) -> String {
    text_blocks(content, true)
}

fn text_blocks(content: Option<&Value>, reminders: bool) -> String {
    let Some(Value::Array(blocks)) = content else {
        return String::new();
    };
    blocks
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .filter(|text| text.trim_start().starts_with("<system-reminder>") == reminders)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_prompt_without_reminders_and_counts_assistant_turns() {
        let body = json!({
            "model": "claude-sonnet-4-6",
            "stream": true,
            "tools": [{"name": "Read"}, {"name": "Bash"}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>\nPlan agent\n</system-reminder>"},
                    {"type": "text", "text": "-\nWork on issue #1\n"}
                ]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
            ]
        });
        let conversation = Conversation::from_body(&body).unwrap();
        assert_eq!(conversation.prompt, "-\nWork on issue #1\n");
        assert_eq!(
            conversation.reminders,
            "<system-reminder>\nPlan agent\n</system-reminder>"
        );
        assert_eq!(
            conversation.latest, "",
            "the last user message holds a tool result only"
        );
        assert_eq!(conversation.said, "");
        assert!(!conversation.prompt.contains("Plan"));
        assert_eq!(conversation.turn, 1);
        assert!(conversation.stream);
        assert!(conversation.offers_bash);
        assert_eq!(conversation.tools, ["Read", "Bash"]);
    }

    #[test]
    fn a_resumed_conversation_shows_its_new_prompt_and_what_was_said() {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": "Work on issue #1"},
            {"role": "assistant", "content": [{"type": "text", "text": "MARKER said once"}]},
            {"role": "user", "content": [{"type": "text", "text": "Iteration 2: carry on"}]}
        ]});
        let conversation = Conversation::from_body(&body).unwrap();
        assert_eq!(conversation.prompt, "Work on issue #1");
        assert_eq!(conversation.latest, "Iteration 2: carry on");
        assert_eq!(conversation.said, "MARKER said once");
        assert_eq!(conversation.turn, 1);
    }

    #[test]
    fn string_content_and_missing_model() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let conversation = Conversation::from_body(&body).unwrap();
        assert_eq!((conversation.prompt.as_str(), conversation.turn), ("hi", 0));
        assert!(!conversation.offers_bash);
        let err = Conversation::from_body(&json!({"messages": []})).unwrap_err();
        assert_eq!(err, "request body has no \"model\" string");
    }
}
