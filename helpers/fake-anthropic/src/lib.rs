//! A scripted Anthropic Messages API server on 127.0.0.1 for tests that run the real
//! Claude Code CLI.
//!
//! A scenario is a JSON list of scripts:
//! `[{"match": "issue #1", "turns": [{"bash": "git commit ...", "description": "..."},
//! {"text": "Done. <promise>COMPLETE</promise>"}], "repeat_last": false}]`.
//! A conversation follows the first script whose `match` occurs in its first user prompt; the
//! turn answered is the number of assistant messages already in the request, so the server
//! keeps no per-conversation state. Requests without the Bash tool are Claude Code's side
//! requests and get a short text, unless a script marked `"without_tools": true` matches them (a
//! reasoning-only role run with `--tools ""`). Requests that no script answers get an explanatory text and
//! are listed by [`FakeAnthropic::unmatched`]. A turn with `"delay_seconds": N` is answered N seconds
//! late (a slow model); `"tool": {"name": …, "input": {…}}` calls any other tool (an MCP server's).

mod conversation;
mod record;
mod response;
mod scenario;
mod server;

use std::net::SocketAddr;
use std::sync::{Arc, MutexGuard};
use std::thread::JoinHandle;

use anyhow::anyhow;

pub use record::RecordedRequest;
pub use scenario::{DEFAULT_USAGE, Scenario, Script, Turn, Usage};

use record::Records;
use server::State;

const WORKER_THREADS: usize = 8;

/// A running server; stops when dropped.
pub struct FakeAnthropic {
    server: Arc<tiny_http::Server>,
    state: Arc<State>,
    addr: SocketAddr,
    workers: Vec<JoinHandle<()>>,
}

impl FakeAnthropic {
    /// Starts on a random port of 127.0.0.1.
    pub fn start(scenario: Scenario) -> anyhow::Result<FakeAnthropic> {
        FakeAnthropic::start_on(0, scenario, false)
    }

    /// Starts on `port` of 127.0.0.1 (0: random); `log_to_stderr` prints one line per request
    /// (method, path, model, turn; never headers).
    pub fn start_on(
        port: u16,
        scenario: Scenario,
        log_to_stderr: bool,
    ) -> anyhow::Result<FakeAnthropic> {
        // Answers go out at once, as a real API's do: tiny_http writes an answer's head and body
        // apart, and with Nagle's algorithm the body waits for the client's delayed ACK (~40 ms).
        let listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|err| anyhow!("fake-anthropic cannot listen on 127.0.0.1:{port}: {err}"))?;
        rustix::net::sockopt::set_tcp_nodelay(&listener, true)
            .map_err(|err| anyhow!("fake-anthropic cannot set TCP_NODELAY: {err}"))?;
        let server = tiny_http::Server::from_listener(listener, None)
            .map_err(|err| anyhow!("fake-anthropic cannot listen on 127.0.0.1:{port}: {err}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| anyhow!("fake-anthropic is not listening on an IP address"))?;
        let server = Arc::new(server);
        let state = Arc::new(State::new(scenario, log_to_stderr));
        let workers = (0..WORKER_THREADS)
            .map(|_| {
                let (server, state) = (Arc::clone(&server), Arc::clone(&state));
                std::thread::spawn(move || server::serve(server, state))
            })
            .collect();
        Ok(FakeAnthropic {
            server,
            state,
            addr,
            workers,
        })
    }

    /// The base URL for `ANTHROPIC_BASE_URL`, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every agent-loop request (one offering the Bash tool, or answered by a `without_tools`
    /// script), in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.records().main.clone()
    }

    /// Agent-loop requests that no script had a turn for.
    pub fn unmatched(&self) -> Vec<RecordedRequest> {
        let records = self.records();
        records
            .main
            .iter()
            .filter(|r| r.script.is_none())
            .cloned()
            .collect()
    }

    /// Claude Code's side requests (no Bash tool offered), answered with a short text.
    pub fn side_requests(&self) -> Vec<RecordedRequest> {
        self.records().side.clone()
    }

    /// Tokens reported across every answer, side requests included: what Claude Code's
    /// `result` events add up to.
    pub fn total_usage(&self) -> Usage {
        let records = self.records();
        records
            .main
            .iter()
            .chain(&records.side)
            .fold(Usage::default(), |sum, r| sum + r.usage)
    }

    /// Every distinct credential received (`x-api-key` values, `Authorization` values whole).
    pub fn credentials(&self) -> Vec<String> {
        let credentials = self
            .state
            .credentials
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        credentials.iter().cloned().collect()
    }

    /// Every distinct `x-api-key`, `authorization` and `anthropic-beta` header received, as
    /// `name: value` (the name in lower case).
    pub fn auth_headers(&self) -> Vec<String> {
        let headers = self
            .state
            .auth_headers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        headers.iter().cloned().collect()
    }

    /// Every request received, whatever it asked: `"POST /v1/messages?beta=true"`, in arrival order.
    pub fn routes(&self) -> Vec<String> {
        self.state
            .routes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        self.state
            .records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        self.state.close();
        for _ in &self.workers {
            self.server.unblock();
        }
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}
