//! Tokens and cost from the Messages API's own answers, as they pass through the proxy: the
//! `usage` of `message_start` and `message_delta` in a stream, or of the message itself.
use crate::stream::Usage;
use serde_json::Value;

/// A line of a stream longer than this is not an event the meter reads (those are small); its
/// bytes are passed on, not kept.
const MAX_LINE: usize = 1024 * 1024;
/// The largest whole (non-streamed) answer the meter reads.
const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// What the meter read of one answer.
#[derive(Debug, PartialEq)]
pub enum Metered {
    /// Its final figures: the whole message's `usage`, or a stream's `message_delta`.
    Final(Usage),
    /// Less: a stream cut short or a line too long to read, an answer without `usage`; what was
    /// read of it, if anything.
    Partial(Option<Usage>),
}

/// Reads one answer as it passes, chunk by chunk.
pub struct Scan {
    streamed: bool,
    /// The current line of a stream, or the whole answer.
    pending: Vec<u8>,
    /// The pending bytes were cut short: skip to the next line (or read nothing, unstreamed).
    overlong: bool,
    model: Option<String>,
    usage: Option<Value>,
    /// A whole message's `usage` or a stream's `message_delta` was read.
    final_usage: bool,
}

impl Scan {
    /// `content_type` is the answer's: server-sent events are read line by line.
    pub fn new(content_type: &str) -> Scan {
        Scan {
            streamed: content_type.starts_with("text/event-stream"),
            pending: Vec::new(),
            overlong: false,
            model: None,
            usage: None,
            final_usage: false,
        }
    }

    pub fn feed(&mut self, mut chunk: &[u8]) {
        if !self.streamed {
            self.keep(chunk, MAX_MESSAGE);
            return;
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            self.keep(&chunk[..end], MAX_LINE);
            if !self.overlong {
                let line = std::mem::take(&mut self.pending);
                self.event(&line);
            }
            self.pending.clear();
            self.overlong = false;
            chunk = &chunk[end + 1..];
        }
        self.keep(chunk, MAX_LINE);
    }

    fn keep(&mut self, bytes: &[u8], limit: usize) {
        if self.overlong || self.pending.len() + bytes.len() > limit {
            self.overlong = true;
            self.pending.clear();
        } else {
            self.pending.extend_from_slice(bytes);
        }
    }

    /// One line of a stream: `data: {...}` of `message_start` or `message_delta` counts.
    fn event(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let Ok(event) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        match event["type"].as_str() {
            Some("message_start") => self.message(&event["message"]),
            Some("message_delta") => {
                self.merge(&event["usage"]);
                self.final_usage = event["usage"].is_object();
            }
            _ => {}
        }
    }

    fn message(&mut self, message: &Value) {
        if let Some(model) = message["model"].as_str() {
            self.model = Some(model.to_string());
        }
        self.merge(&message["usage"]);
    }

    /// Later figures replace earlier ones field by field (`message_delta`'s are cumulative).
    fn merge(&mut self, usage: &Value) {
        let Some(fields) = usage.as_object() else {
            return;
        };
        let merged = self
            .usage
            .get_or_insert_with(|| Value::Object(Default::default()));
        for (name, value) in fields {
            if value.is_u64() {
                merged[name] = value.clone();
            }
        }
    }

    /// What the answer cost, once it has passed whole.
    pub fn finish(mut self) -> Metered {
        if !self.streamed && !self.overlong {
            if let Ok(message) = serde_json::from_slice::<Value>(&self.pending) {
                self.message(&message);
                self.final_usage = message["usage"].is_object();
            }
        } else if self.streamed && !self.overlong && !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.event(&line);
        }
        let Some(usage) = self.usage else {
            return Metered::Partial(None);
        };
        let tokens = |name: &str| usage[name].as_u64().unwrap_or(0);
        let mut counted = Usage {
            input_tokens: tokens("input_tokens"),
            output_tokens: tokens("output_tokens"),
            cache_creation_input_tokens: tokens("cache_creation_input_tokens"),
            cache_read_input_tokens: tokens("cache_read_input_tokens"),
            cost_usd: 0.0,
        };
        counted.cost_usd = Price::of(self.model.as_deref().unwrap_or("")).cost(&counted);
        if self.final_usage {
            Metered::Final(counted)
        } else {
            Metered::Partial(Some(counted))
        }
    }
}

/// US dollars per million tokens, as Anthropic lists them.
#[derive(Debug, PartialEq)]
pub struct Price {
    input: f64,
    output: f64,
}

impl Price {
    /// By the model's family; a model the table does not know is priced as the dearest, so a
    /// budget is never reached late.
    pub fn of(model: &str) -> Price {
        let (input, output) = if model.contains("haiku") {
            if model.contains("3-5") {
                (0.8, 4.0)
            } else if model.contains("claude-3-haiku") {
                (0.25, 1.25)
            } else {
                (1.0, 5.0)
            }
        } else if model.contains("sonnet") {
            (3.0, 15.0)
        } else if model.contains("opus")
            && !["claude-3-opus", "opus-4-0", "opus-4-1", "opus-4-2025"]
                .iter()
                .any(|old| model.contains(old))
        {
            (5.0, 25.0)
        } else {
            (15.0, 75.0)
        };
        Price { input, output }
    }

    /// Cache writes cost 1.25 times input, cache reads a tenth of it.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let million = 1_000_000.0;
        (usage.input_tokens as f64 * self.input
            + usage.cache_creation_input_tokens as f64 * self.input * 1.25
            + usage.cache_read_input_tokens as f64 * self.input * 0.1
            + usage.output_tokens as f64 * self.output)
            / million
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(content_type: &str, chunks: &[&str]) -> Metered {
        let mut scan = Scan::new(content_type);
        for chunk in chunks {
            scan.feed(chunk.as_bytes());
        }
        scan.finish()
    }

    #[test]
    fn a_stream_counts_message_start_and_the_last_message_delta_across_chunk_cuts() {
        let stream = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-6\",\"usage\":{\"input_tokens\":1000,\"cache_read_input_tokens\":2000,\"cache_creation_input_tokens\":400,\"output_tokens\":1}}}\n\n",
            "event: content_block_delta\n",
            "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage: lies\"}}\n\n",
            "event: message_delta\n",
            "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":300}}\n\n",
        );
        for cut in [1, 7, 50, stream.len()] {
            let chunks: Vec<&str> = stream
                .as_bytes()
                .chunks(cut)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            let Metered::Final(usage) = scan("text/event-stream; charset=utf-8", &chunks) else {
                panic!("the stream's final usage is read");
            };
            assert_eq!(
                (
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_input_tokens,
                    usage.cache_creation_input_tokens
                ),
                (1000, 300, 2000, 400)
            );
            let expected = (1000.0 * 3.0 + 400.0 * 3.75 + 2000.0 * 0.3 + 300.0 * 15.0) / 1e6;
            assert!((usage.cost_usd - expected).abs() < 1e-12, "{usage:?}");
        }
    }

    #[test]
    fn a_whole_message_counts_its_usage_and_an_error_counts_nothing() {
        let Metered::Final(usage) = scan(
            "application/json",
            &[
                r#"{"model":"claude-opus-4-8","usage":{"input_tokens":10,"#,
                r#""output_tokens":20}}"#,
            ],
        ) else {
            panic!("the message's usage is read");
        };
        assert_eq!((usage.input_tokens, usage.output_tokens), (10, 20));
        assert!((usage.cost_usd - (10.0 * 5.0 + 20.0 * 25.0) / 1e6).abs() < 1e-12);
        assert_eq!(
            scan("application/json", &[r#"{"type":"error","error":{}}"#]),
            Metered::Partial(None)
        );
        assert_eq!(
            scan("text/event-stream", &["data: not json\n"]),
            Metered::Partial(None)
        );
    }

    #[test]
    fn a_stream_cut_before_its_message_delta_or_a_huge_message_is_partial() {
        let start = "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-6\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n";
        let Metered::Partial(Some(usage)) = scan("text/event-stream", &[start]) else {
            panic!("message_start alone is not the final usage");
        };
        assert_eq!(usage.input_tokens, 7);
        let huge = format!(
            r#"{{"model":"m","usage":{{"output_tokens":1}},"content":"{}"}}"#,
            "x".repeat(MAX_MESSAGE)
        );
        assert_eq!(scan("application/json", &[&huge]), Metered::Partial(None));
    }

    #[test]
    fn unknown_models_are_priced_as_the_dearest() {
        assert_eq!(
            Price::of("claude-test"),
            Price::of("claude-opus-4-1-20250805")
        );
        assert_eq!(
            Price::of("claude-haiku-4-5"),
            Price {
                input: 1.0,
                output: 5.0
            }
        );
        assert_eq!(
            Price::of("claude-3-5-haiku-latest"),
            Price {
                input: 0.8,
                output: 4.0
            }
        );
    }
}
