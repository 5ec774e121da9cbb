//! Claude Code's `--output-format stream-json` events, parsed robustly.
//!
//! Every line is read as a loose JSON value: unknown event types, unknown fields and lines that are
//! not JSON at all become `Event::Other` instead of errors, so a newer CLI cannot break the loop.
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cost_usd: f64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.cost_usd += other.cost_usd;
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Init {
        session_id: String,
        model: String,
    },
    /// `name` is the tool (`Bash`, `Edit`, ...); `summary` the first line of its main argument (the
    /// command, the file path, ...), possibly empty, whole: shorten it with [`shorten`] only after
    /// redaction, so a cut never leaves part of a secret behind.
    ToolUse {
        name: String,
        summary: String,
    },
    ToolResult {
        is_error: bool,
        text: String,
    },
    AssistantText(String),
    Result {
        is_error: bool,
        subtype: String,
        text: String,
        session_id: String,
        usage: Usage,
    },
    /// Unknown types and unparsable lines are kept out of the way, not errors.
    Other,
}

/// The longest tool summary kept, in characters.
const SUMMARY_CHARS: usize = 80;

/// One line of the stream.
///
/// An assistant message with several content blocks gives its last tool call if it has one (what the
/// agent is doing now), else its text blocks joined; a user message with several tool results gives
/// one result that is an error if any of them is.
pub fn parse_line(line: &str) -> Event {
    let Ok(value) = serde_json::from_str::<Value>(line.trim()) else {
        return Event::Other;
    };
    match str_field(&value, "type") {
        "system" if str_field(&value, "subtype") == "init" => Event::Init {
            session_id: str_field(&value, "session_id").to_string(),
            model: str_field(&value, "model").to_string(),
        },
        "assistant" => assistant_event(&value),
        "user" => tool_result_event(&value),
        "result" => result_event(&value),
        _ => Event::Other,
    }
}

fn assistant_event(value: &Value) -> Event {
    if let Some(text) = value.pointer("/message/content").and_then(Value::as_str) {
        return Event::AssistantText(text.to_string());
    }
    let blocks = content_blocks(value);
    let last_tool = blocks
        .iter()
        .rev()
        .find(|block| str_field(block, "type") == "tool_use");
    if let Some(tool) = last_tool {
        return Event::ToolUse {
            name: str_field(tool, "name").to_string(),
            summary: tool_summary(tool.get("input").unwrap_or(&Value::Null)),
        };
    }
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|block| str_field(block, "type") == "text")
        .map(|block| str_field(block, "text"))
        .collect();
    if texts.is_empty() {
        Event::Other
    } else {
        Event::AssistantText(texts.join("\n"))
    }
}

fn tool_result_event(value: &Value) -> Event {
    let results: Vec<&Value> = content_blocks(value)
        .iter()
        .filter(|block| str_field(block, "type") == "tool_result")
        .collect();
    if results.is_empty() {
        return Event::Other;
    }
    Event::ToolResult {
        is_error: results
            .iter()
            .any(|result| result.get("is_error").and_then(Value::as_bool) == Some(true)),
        text: results
            .iter()
            .map(|result| content_text(result.get("content").unwrap_or(&Value::Null)))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn result_event(value: &Value) -> Event {
    let subtype = str_field(value, "subtype").to_string();
    // `is_error: true` is a failure whatever the subtype says; `error_*` subtypes are failures too.
    let is_error = value.get("is_error").and_then(Value::as_bool) == Some(true)
        || subtype.starts_with("error");
    let text = match value.get("result") {
        Some(Value::String(text)) => text.clone(),
        _ => match value.get("errors") {
            Some(errors) => content_text(errors),
            None => String::new(),
        },
    };
    let usage = value.get("usage").unwrap_or(&Value::Null);
    Event::Result {
        is_error,
        subtype,
        text,
        session_id: str_field(value, "session_id").to_string(),
        usage: Usage {
            input_tokens: u64_field(usage, "input_tokens"),
            output_tokens: u64_field(usage, "output_tokens"),
            cache_creation_input_tokens: u64_field(usage, "cache_creation_input_tokens"),
            cache_read_input_tokens: u64_field(usage, "cache_read_input_tokens"),
            cost_usd: value
                .get("total_cost_usd")
                .or_else(|| value.get("cost_usd"))
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        },
    }
}

/// `message.content` as a list of blocks (empty when it is anything else).
fn content_blocks(value: &Value) -> &[Value] {
    value
        .get("message")
        .and_then(|message| message.get("content"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Tool-result content: a string, or a list of blocks (text blocks kept, others such as images
/// skipped), or a list of strings.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(text.as_str()),
                Value::Object(_) => item.get("text").and_then(Value::as_str),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The first line of the argument that says what a tool call does.
fn tool_summary(input: &Value) -> String {
    let main = [
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
        "prompt",
    ]
    .iter()
    .find_map(|key| input.get(*key).and_then(Value::as_str))
    .unwrap_or("");
    main.lines().next().unwrap_or("").trim().to_string()
}

/// `line` cut to `SUMMARY_CHARS` characters, with `…` when cut.
pub fn shorten(line: &str) -> String {
    if line.chars().count() > SUMMARY_CHARS {
        let cut: String = line.chars().take(SUMMARY_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

fn str_field<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn u64_field(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = include_str!("../tests/data/claude-code-2.1.197-stream-json.jsonl");

    #[test]
    fn real_transcript_gives_init_tool_call_result_and_completion() {
        let events: Vec<Event> = REAL.lines().map(parse_line).collect();
        assert_eq!(
            events,
            vec![
                Event::Init {
                    session_id: "3de6a402-e54a-41bc-a15d-d81513aad320".into(),
                    model: "claude-sonnet-4-6".into(),
                },
                Event::ToolUse {
                    name: "Bash".into(),
                    summary: "echo hello > hello.txt && ls -la hello.txt && id -un".into(),
                },
                Event::ToolResult {
                    is_error: false,
                    text: "-rw-r--r-- 1 agent agent 6 Dec  2 12:32 hello.txt\nagent".into(),
                },
                Event::AssistantText("Committed. <promise>COMPLETE</promise>".into()),
                Event::Result {
                    is_error: false,
                    subtype: "success".into(),
                    text: "Committed. <promise>COMPLETE</promise>".into(),
                    session_id: "3de6a402-e54a-41bc-a15d-d81513aad320".into(),
                    usage: Usage {
                        input_tokens: 200,
                        output_tokens: 40,
                        cache_creation_input_tokens: 0,
                        cache_read_input_tokens: 0,
                        cost_usd: 0.0012000000000000001,
                    },
                },
            ]
        );
    }

    #[test]
    fn unknown_types_and_garbage_are_other() {
        for line in [
            "",
            "not json",
            "[1,2]",
            r#"{"type":"stream_event","event":{}}"#,
            r#"{"type":"system","subtype":"hook_response"}"#,
            r#"{"no_type":true}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"x"}]}}"#,
            r#"{"type":"user","message":{"content":"plain user text"}}"#,
        ] {
            assert_eq!(parse_line(line), Event::Other, "{line:?}");
        }
    }

    #[test]
    fn tool_result_content_as_list_of_blocks() {
        let line = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t",
            "content":[{"type":"text","text":"line one"},{"type":"image","source":{}},{"type":"text","text":"line two"}]}]}}"#
            .replace('\n', "");
        assert_eq!(
            parse_line(&line),
            Event::ToolResult {
                is_error: false,
                text: "line one\nline two".into()
            }
        );
    }

    #[test]
    fn any_failed_tool_result_is_an_error() {
        let line = r#"{"type":"user","message":{"content":[
            {"type":"tool_result","content":"ok","is_error":false},
            {"type":"tool_result","content":"Exit code 1","is_error":true}]}}"#
            .replace('\n', "");
        assert_eq!(
            parse_line(&line),
            Event::ToolResult {
                is_error: true,
                text: "ok\nExit code 1".into()
            }
        );
    }

    #[test]
    fn is_error_wins_over_success_subtype() {
        let line = r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500","session_id":"s","total_cost_usd":0.5,"usage":{"input_tokens":3}}"#;
        let Event::Result {
            is_error,
            subtype,
            text,
            usage,
            ..
        } = parse_line(line)
        else {
            panic!("not a result");
        };
        assert!(is_error);
        assert_eq!(subtype, "success");
        assert_eq!(text, "API Error: 500");
        assert_eq!(usage.input_tokens, 3);
        assert_eq!(usage.cost_usd, 0.5);
    }

    #[test]
    fn error_subtype_without_result_text_uses_errors() {
        let line = r#"{"type":"result","subtype":"error_max_turns","errors":["Reached max turns"],"session_id":"s"}"#;
        let Event::Result {
            is_error,
            text,
            usage,
            ..
        } = parse_line(line)
        else {
            panic!("not a result");
        };
        assert!(is_error);
        assert_eq!(text, "Reached max turns");
        assert_eq!(usage, Usage::default());
    }

    #[test]
    fn last_tool_call_of_a_message_wins_and_summary_is_its_first_line() {
        let long = "x".repeat(200);
        let line = serde_json::json!({"type":"assistant","message":{"content":[
            {"type":"text","text":"let me look"},
            {"type":"tool_use","name":"Read","input":{"file_path":"src/main.rs"}},
            {"type":"tool_use","name":"Bash","input":{"command":format!("{long}\nsecond line")}}
        ]}})
        .to_string();
        let Event::ToolUse { name, summary } = parse_line(&line) else {
            panic!("not a tool call");
        };
        assert_eq!((name.as_str(), summary.as_str()), ("Bash", long.as_str()));
        let short = shorten(&summary);
        assert_eq!(short.chars().count(), SUMMARY_CHARS);
        assert!(short.ends_with('…'));
    }

    /// JSON shaped like the stream's events, with any values where they are looked for.
    fn event_like() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop_oneof![
                Just("system".to_string()),
                Just("assistant".to_string()),
                Just("user".to_string()),
                Just("result".to_string()),
                Just("tool_use".to_string()),
                Just("text".to_string()),
                ".*",
            ]
            .prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            let keys = prop_oneof![
                Just("type".to_string()),
                Just("subtype".to_string()),
                Just("message".to_string()),
                Just("content".to_string()),
                Just("input".to_string()),
                Just("result".to_string()),
                Just("errors".to_string()),
                Just("usage".to_string()),
                Just("is_error".to_string()),
                Just("command".to_string()),
                "[a-z_]{1,8}",
            ];
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::btree_map(keys, inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// No line, however broken, panics the parser.
        #[test]
        fn any_line_parses_without_panicking(line in "\\PC*", cut in 0usize..2000) {
            let _ = parse_line(&line);
            for real in REAL.lines() {
                let mut end = cut.min(real.len());
                while !real.is_char_boundary(end) {
                    end -= 1;
                }
                let _ = parse_line(&real[..end]);
                let _ = parse_line(&format!("{}{line}{}", &real[..end], &real[end..]));
            }
        }

        #[test]
        fn any_event_shaped_json_parses_without_panicking(value in event_like()) {
            if let Event::ToolUse { summary, .. } = parse_line(&value.to_string()) {
                proptest::prop_assert!(!summary.contains('\n'));
                proptest::prop_assert!(shorten(&summary).chars().count() <= SUMMARY_CHARS);
            }
        }
    }

    #[test]
    fn usage_adds_up() {
        let mut total = Usage::default();
        let one = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_creation_input_tokens: 3,
            cache_read_input_tokens: 4,
            cost_usd: 0.25,
        };
        total.add(&one);
        total.add(&one);
        assert_eq!(
            total,
            Usage {
                input_tokens: 2,
                output_tokens: 4,
                cache_creation_input_tokens: 6,
                cache_read_input_tokens: 8,
                cost_usd: 0.5,
            }
        );
    }
}
