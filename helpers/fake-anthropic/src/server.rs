//! The HTTP side: routes requests, answers from the scenario, records what was asked.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tiny_http::{Header, Method, Request, Response};

use crate::conversation::Conversation;
use crate::record::{RecordedRequest, Records};
use crate::response::{Reply, ToolCall};
use crate::scenario::{Scenario, Usage};

/// Tokens reported for Claude Code's side requests (titles, summaries, probes).
const SIDE_USAGE: Usage = Usage {
    input_tokens: 1,
    output_tokens: 1,
};

pub struct State {
    pub scenario: Scenario,
    pub records: Mutex<Records>,
    pub log_to_stderr: bool,
    /// Every distinct `x-api-key` and `Authorization` value received, for tests to check which
    /// credential reached the server; never logged.
    pub credentials: Mutex<BTreeSet<String>>,
    /// Every distinct `x-api-key`, `authorization` and `anthropic-beta` header received, as
    /// `name: value`: which header each credential came in, and the betas beside it.
    pub auth_headers: Mutex<BTreeSet<String>>,
    /// Every request's method and path (query included), in arrival order.
    pub routes: Mutex<Vec<String>>,
    next_id: AtomicU64,
    /// Set when the server stops: a turn's `delay_seconds` ends early then, so stopping the server
    /// does not wait out a slow model's answer.
    closing: (Mutex<bool>, Condvar),
}

impl State {
    pub fn new(scenario: Scenario, log_to_stderr: bool) -> State {
        State {
            scenario,
            records: Mutex::new(Records::default()),
            log_to_stderr,
            credentials: Mutex::new(BTreeSet::new()),
            auth_headers: Mutex::new(BTreeSet::new()),
            routes: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            closing: (Mutex::new(false), Condvar::new()),
        }
    }

    /// Ends every [`State::pause`] under way, and the ones to come, at once.
    pub fn close(&self) {
        *self.closing.0.lock().unwrap() = true;
        self.closing.1.notify_all();
    }

    /// Waits `length`, or until the server stops.
    fn pause(&self, length: Duration) {
        let closing = self.closing.0.lock().unwrap();
        let _ = self
            .closing
            .1
            .wait_timeout_while(closing, length, |closing| !*closing);
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn log(&self, line: &str) {
        // Only method, path and what the scenario made of the request: never headers,
        // so the x-api-key value cannot appear.
        if self.log_to_stderr {
            eprintln!("fake-anthropic: {line}");
        }
    }
}

/// Answers requests until the server is unblocked.
pub fn serve(server: Arc<tiny_http::Server>, state: Arc<State>) {
    while let Ok(request) = server.recv() {
        handle(request, &state);
    }
}

fn handle(mut request: Request, state: &State) {
    let method = request.method().clone();
    let sent: Vec<String> = request
        .headers()
        .iter()
        .filter(|h| h.field.equiv("x-api-key") || h.field.equiv("authorization"))
        .map(|h| h.value.to_string())
        .collect();
    state
        .credentials
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .extend(sent);
    let auth = ["x-api-key", "authorization", "anthropic-beta"];
    let auth_headers = request.headers().iter().filter_map(|h| {
        let name = auth.into_iter().find(|name| h.field.equiv(name))?;
        Some(format!("{name}: {}", h.value))
    });
    state
        .auth_headers
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .extend(auth_headers);
    state
        .routes
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(format!("{method} {}", request.url()));
    // The query (`?beta=true`) does not change the answer.
    let path = request.url().split('?').next().unwrap_or("").to_owned();
    let mut body = String::new();
    let response = match request.as_reader().read_to_string(&mut body) {
        Err(err) => error(400, &format!("unreadable request body: {err}")),
        Ok(_) => route(&method, &path, &body, state),
    };
    state.log(&format!("{method} {path} -> {}", response.0));
    let (status, content_type, payload) = response;
    let header = Header::from_bytes("content-type", content_type).expect("static header is valid");
    let reply = Response::from_string(payload)
        .with_status_code(status)
        .with_header(header);
    // A client that hung up is not the server's problem.
    let _ = request.respond(reply);
}

type Answer = (u16, &'static str, String);

fn route(method: &Method, path: &str, body: &str, state: &State) -> Answer {
    match (method, path) {
        (Method::Post, "/v1/messages/count_tokens") => json_answer(&json!({"input_tokens": 100})),
        (Method::Post, "/v1/messages") => match serde_json::from_str::<Value>(body)
            .map_err(|err| format!("request body is not JSON: {err}"))
            .and_then(|body| Conversation::from_body(&body))
        {
            Ok(conversation) => messages(conversation, state),
            Err(message) => error(400, &message),
        },
        // Connectivity probes (Claude Code sends `HEAD /` first).
        (Method::Head | Method::Get, _) => (200, "application/json", "{}".to_owned()),
        _ => error(
            404,
            &format!("fake-anthropic does not serve {method} {path}"),
        ),
    }
}

fn messages(conversation: Conversation, state: &State) -> Answer {
    let id = state.next_id();
    let mut reply = Reply {
        id: format!("msg_fake_{id}"),
        model: conversation.model.clone(),
        text: None,
        tool: None,
        usage: SIDE_USAGE,
    };
    let mut script_index = None;
    let script = state
        .scenario
        .script_for(&conversation.prompt)
        .filter(|(_, script)| conversation.offers_bash || script.without_tools);
    let main = conversation.offers_bash || script.is_some();
    if !main {
        reply.text = Some("Sandcastle test".to_owned());
    } else if let Some((index, turn)) =
        script.and_then(|(index, script)| Some((index, script.turn(conversation.turn)?)))
    {
        script_index = Some(index);
        if let Some(seconds) = turn.delay_seconds {
            state.pause(Duration::from_secs(seconds));
        }
        reply.text = turn.text_for(&conversation.prompt);
        let bash = turn.bash.as_ref().map(|command| {
            let description = turn.description.as_deref().unwrap_or("Run a command");
            (
                "Bash".to_string(),
                json!({"command": command, "description": description}),
            )
        });
        let named = turn
            .tool
            .as_ref()
            .map(|tool| (tool.name.clone(), tool.input.clone()));
        reply.tool = bash.or(named).map(|(name, input)| ToolCall {
            tool_use_id: format!("toolu_fake_{id}"),
            name,
            input,
        });
        reply.usage = turn.usage();
    } else {
        reply.text = Some(unmatched_text(&conversation));
        reply.usage = Usage::default();
    }
    state.log(&format!(
        "model={} turn={} script={script_index:?} side={}",
        conversation.model, conversation.turn, !main
    ));
    let record = RecordedRequest {
        model: conversation.model.clone(),
        prompt: conversation.prompt.clone(),
        reminders: conversation.reminders.clone(),
        latest: conversation.latest.clone(),
        said: conversation.said.clone(),
        turn: conversation.turn,
        script: script_index,
        usage: reply.usage,
        tools: conversation.tools.clone(),
    };
    state
        .records
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .add(record, main);
    if conversation.stream {
        (200, "text/event-stream", reply.to_sse())
    } else {
        json_answer(&reply.to_message_json())
    }
}

fn unmatched_text(conversation: &Conversation) -> String {
    let start: String = conversation.prompt.chars().take(200).collect();
    format!(
        "fake-anthropic: no scripted turn {} for this conversation; no script's \"match\" \
         occurs in its prompt, or the script has fewer turns. Prompt starts: {start:?}",
        conversation.turn
    )
}

fn json_answer(value: &Value) -> Answer {
    (200, "application/json", value.to_string())
}

fn error(status: u16, message: &str) -> Answer {
    let body =
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
    (status, "application/json", body.to_string())
}
