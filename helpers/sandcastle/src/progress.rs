//! What the run shows while it works: a live view on a terminal (one line per issue with lane, role,
//! iteration n/max, last tool call, elapsed time, cost so far), plain timestamped lines otherwise.
//! Every line goes through the redactor.
//! OWNER: helper H6. Interface fixed; bodies to implement.
use crate::secrets::Redactor;

/// One issue's (or pull request's) current state, as the view shows it.
#[derive(Debug, Clone)]
pub struct Status {
    /// `issue #42`, `pr #7`.
    pub key: String,
    /// `rework`, `plan`, `implement`.
    pub lane: String,
    pub role: String,
    pub iteration: u32,
    pub max_iterations: u32,
    pub last_tool: String,
    pub cost_usd: f64,
}

/// Shared by every worker thread.
pub struct Progress {/* live or plain; Mutex inside */}

impl Progress {
    /// Live when stderr is a terminal, plain otherwise.
    pub fn new(redactor: Redactor) -> Progress { todo!() }
    /// Creates or updates the line for `status.key`.
    pub fn update(&self, status: &Status) { todo!() }
    /// The work on `key` is over; `outcome` is one short line.
    pub fn finish(&self, key: &str, outcome: &str) { todo!() }
    /// A message not tied to one line (timestamped when plain).
    pub fn note(&self, message: &str) { todo!() }
}
