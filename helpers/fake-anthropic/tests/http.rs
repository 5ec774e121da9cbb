//! The server over real HTTP: routing, streaming and non-streaming answers, recording.

use fake_anthropic::{DEFAULT_USAGE, FakeAnthropic, Scenario, Usage};
use serde_json::{Value, json};

fn scenario() -> Scenario {
    Scenario::from_json(
        r#"[{"match": "issue #7", "turns": [
                {"bash": "git commit -am fix", "description": "commit"},
                {"text": "Done. <promise>COMPLETE</promise>", "usage": {"input_tokens": 5, "output_tokens": 2}}]},
            {"match": "never ends", "repeat_last": true, "turns": [{"text": "Still going."}]}]"#,
    )
    .unwrap()
}

fn agent_request(prompt: &str, assistant_turns: usize, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>issue #7 lives here too</system-reminder>"},
        {"type": "text", "text": prompt}]})];
    for i in 0..assistant_turns {
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "…"}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "ok"}]}));
    }
    json!({"model": "claude-sonnet-4-6", "stream": stream, "max_tokens": 100,
           "tools": [{"name": "Bash"}], "messages": messages})
}

fn post(fake: &FakeAnthropic, path: &str, body: &Value) -> (String, String) {
    let mut response = ureq::post(format!("{}{path}", fake.url()))
        .header("x-api-key", "secret-key")
        .send_json(body)
        .unwrap();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    (content_type, response.body_mut().read_to_string().unwrap())
}

fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[test]
fn streams_the_scripted_turn_for_the_conversation_so_far() {
    let fake = FakeAnthropic::start(scenario()).unwrap();
    let path = "/v1/messages?beta=true";

    let (content_type, body) = post(&fake, path, &agent_request("Fix issue #7", 0, true));
    assert_eq!(content_type, "text/event-stream");
    let events = sse_data(&body);
    assert_eq!(events[1]["content_block"]["name"], "Bash");
    let stop = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(stop["delta"]["stop_reason"], "tool_use");

    let (_, body) = post(&fake, path, &agent_request("Fix issue #7", 1, true));
    let text: String = sse_data(&body)
        .iter()
        .filter_map(|e| e["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "Done. <promise>COMPLETE</promise>");

    let turns: Vec<(usize, Option<usize>)> =
        fake.requests().iter().map(|r| (r.turn, r.script)).collect();
    assert_eq!(turns, [(0, Some(0)), (1, Some(0))]);
    assert_eq!(fake.requests()[0].prompt, "Fix issue #7");
    let expected = DEFAULT_USAGE
        + Usage {
            input_tokens: 5,
            output_tokens: 2,
        };
    assert_eq!(fake.total_usage(), expected);
}

#[test]
fn repeats_the_last_turn_and_records_unmatched_conversations() {
    let fake = FakeAnthropic::start(scenario()).unwrap();
    let (content_type, body) = post(
        &fake,
        "/v1/messages",
        &agent_request("never ends", 9, false),
    );
    assert_eq!(content_type, "application/json");
    let message: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(message["content"][0]["text"], "Still going.");
    assert_eq!(message["stop_reason"], "end_turn");

    let (_, body) = post(
        &fake,
        "/v1/messages",
        &agent_request("Fix issue #7", 2, false),
    );
    let message: Value = serde_json::from_str(&body).unwrap();
    assert!(
        message["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no scripted turn 2")
    );
    let unmatched = fake.unmatched();
    assert_eq!(unmatched.len(), 1);
    assert_eq!(
        (unmatched[0].turn, unmatched[0].prompt.as_str()),
        (2, "Fix issue #7")
    );
    assert!(!body.contains("secret-key"));
}

#[test]
fn answers_side_requests_probes_and_token_counts() {
    let fake = FakeAnthropic::start(scenario()).unwrap();
    let side = json!({"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "Title for: Fix issue #7"}]});
    let (_, body) = post(&fake, "/v1/messages", &side);
    let message: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(message["model"], "claude-haiku-4-5");
    assert!(fake.requests().is_empty());
    assert_eq!(fake.side_requests().len(), 1);

    let (_, body) = post(
        &fake,
        "/v1/messages/count_tokens",
        &agent_request("x", 0, false),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["input_tokens"],
        100
    );
    assert_eq!(ureq::head(fake.url()).call().unwrap().status(), 200);

    let bad = ureq::post(format!("{}/v1/messages", fake.url()))
        .config()
        .http_status_as_error(false)
        .build()
        .send("not json")
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[test]
fn a_without_tools_script_answers_a_tool_less_conversation_and_side_requests_stay_side() {
    let fake = FakeAnthropic::start(
        Scenario::from_json(
            r##"[{"match": "# Role: assessor", "without_tools": true, "turns": [
                    {"text": "<assessment>{\"completeness\": 1}</assessment>"},
                    {"text": "Resumed with tools."}]},
                {"match": "issue #7", "turns": [{"text": "no tools, no answer"}]}]"##,
        )
        .unwrap(),
    )
    .unwrap();
    let assess = json!({"model": "claude-sonnet-4-6", "max_tokens": 100, "tools": [],
        "messages": [{"role": "user", "content": "# Role: assessor\nissue #7"}]});
    let (_, body) = post(&fake, "/v1/messages", &assess);
    let message: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        message["content"][0]["text"],
        "<assessment>{\"completeness\": 1}</assessment>"
    );
    let side = json!({"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "Title for: issue #7"}]});
    post(&fake, "/v1/messages", &side);
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "the assessment is a main request");
    assert_eq!(requests[0].script, Some(0));
    assert_eq!(
        fake.side_requests().len(),
        1,
        "a script without the flag leaves tool-less requests to the side"
    );
}
