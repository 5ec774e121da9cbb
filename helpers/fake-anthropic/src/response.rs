//! Renders one scripted assistant message the way the Messages API sends it:
//! a Server-Sent Events stream, or a single JSON message.

use serde_json::{Value, json};

use crate::scenario::Usage;

/// One assistant message: optional text, then optionally a tool call (Bash, or any named tool).
#[derive(Debug, Clone)]
pub struct Reply {
    pub id: String,
    pub model: String,
    pub text: Option<String>,
    pub tool: Option<ToolCall>,
    pub usage: Usage,
}

#[derive(Debug, Clone)]
pub struct ToolCall {
    pub tool_use_id: String,
    pub name: String,
    pub input: Value,
}

impl Reply {
    fn stop_reason(&self) -> &'static str {
        if self.tool.is_some() {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn blocks(&self) -> Vec<Value> {
        let mut blocks = Vec::new();
        if let Some(text) = &self.text {
            blocks.push(json!({"type": "text", "text": text}));
        }
        if let Some(tool) = &self.tool {
            blocks.push(json!({
                "type": "tool_use",
                "id": tool.tool_use_id,
                "name": tool.name,
                "input": tool.input,
            }));
        }
        blocks
    }

    fn usage_json(&self, output_tokens: u64) -> Value {
        json!({
            "input_tokens": self.usage.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
        })
    }

    /// The non-streaming answer: one `message` object.
    pub fn to_message_json(&self) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.blocks(),
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": self.usage_json(self.usage.output_tokens),
        })
    }

    /// The streaming answer: `message_start`, one start/delta/stop triple per content block
    /// (tool input sent as `input_json_delta` fragments), `message_delta`, `message_stop`.
    pub fn to_sse(&self) -> String {
        let mut events = vec![(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": self.usage_json(1),
            }}),
        )];
        let mut index = 0;
        if let Some(text) = &self.text {
            events.push(block_start(index, json!({"type": "text", "text": ""})));
            events.push(block_delta(
                index,
                json!({"type": "text_delta", "text": text}),
            ));
            events.push(block_stop(index));
            index += 1;
        }
        if let Some(tool) = &self.tool {
            let start =
                json!({"type": "tool_use", "id": tool.tool_use_id, "name": tool.name, "input": {}});
            events.push(block_start(index, start));
            let input = tool.input.to_string();
            // Two fragments, split on a char boundary, so clients must join partial JSON.
            let mid = (0..=input.len() / 2)
                .rev()
                .find(|&i| input.is_char_boundary(i))
                .unwrap_or(0);
            for part in [&input[..mid], &input[mid..]] {
                let delta = json!({"type": "input_json_delta", "partial_json": part});
                events.push(block_delta(index, delta));
            }
            events.push(block_stop(index));
        }
        events.push((
            "message_delta",
            json!({"type": "message_delta",
                "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                "usage": {"output_tokens": self.usage.output_tokens}}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        events
            .into_iter()
            .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
            .collect()
    }
}

fn block_start(index: usize, block: Value) -> (&'static str, Value) {
    let data = json!({"type": "content_block_start", "index": index, "content_block": block});
    ("content_block_start", data)
}

fn block_delta(index: usize, delta: Value) -> (&'static str, Value) {
    let data = json!({"type": "content_block_delta", "index": index, "delta": delta});
    ("content_block_delta", data)
}

fn block_stop(index: usize) -> (&'static str, Value) {
    let data = json!({"type": "content_block_stop", "index": index});
    ("content_block_stop", data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply() -> Reply {
        Reply {
            id: "msg_1".into(),
            model: "claude-sonnet-4-6".into(),
            text: Some("Editing.".into()),
            tool: Some(ToolCall {
                tool_use_id: "toolu_1".into(),
                name: "Bash".into(),
                input: json!({"command": "echo \"é\" > f", "description": "write f"}),
            }),
            usage: Usage {
                input_tokens: 7,
                output_tokens: 3,
            },
        }
    }

    #[test]
    fn sse_stream_rebuilds_the_tool_input_and_reports_usage() {
        let sse = reply().to_sse();
        let events: Vec<Value> = sse
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .map(|data| serde_json::from_str(data).unwrap())
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds.first(), Some(&"message_start"));
        assert_eq!(kinds.last(), Some(&"message_stop"));
        let partial: String = events
            .iter()
            .filter(|e| e["delta"]["type"] == "input_json_delta")
            .map(|e| e["delta"]["partial_json"].as_str().unwrap())
            .collect();
        let input: Value = serde_json::from_str(&partial).unwrap();
        assert_eq!(input["command"], "echo \"é\" > f");
        let delta = events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .unwrap();
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["output_tokens"], 3);
    }

    #[test]
    fn message_json_without_tool_ends_the_turn() {
        let mut reply = reply();
        reply.tool = None;
        let message = reply.to_message_json();
        assert_eq!(message["stop_reason"], "end_turn");
        assert_eq!(message["content"][0]["text"], "Editing.");
        assert_eq!(message["usage"]["input_tokens"], 7);
    }
}
