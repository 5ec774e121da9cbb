//! The seam between the driver and a piece of work's sandbox: what the driver asks of it
//! ([`Sandboxed`]) and one agent turn's request ([`Turn`]). `work_sandbox.rs` is the real one; the
//! driver's tests script their own, so they run without Docker.
use anyhow::Result;
use sandcastle_core::agent::{AgentOutcome, SavedSession, TimeLimit};
use sandcastle_core::gate::GateOutcome;
use sandcastle_core::git::{Imported, WorkRepo};
use sandcastle_core::role::Role;

/// What the driver asks of a piece of work's sandbox.
pub trait Sandboxed {
    /// One agent turn. `Err` means the machinery broke; an agent that failed is an `Ending`.
    /// `heard` gets each ask the agent makes while the turn runs (`relay.rs`), unchecked, and
    /// each other event of its stream.
    fn turn(&mut self, turn: &Turn, heard: &mut dyn FnMut(Heard)) -> Result<AgentOutcome>;
    /// The `[commands] check` steps, run by the orchestrator in the sandbox.
    fn gate(&mut self) -> Result<GateOutcome>;
    /// `turn` and the gate at once, each in a container of its own, on the same commit (nothing
    /// is taken in until both end). The outer `Err` is the turn's broken machinery, the inner the
    /// gate's: a turn that ran is returned (its spend counted) whatever became of the gate.
    fn turn_beside_gate(
        &mut self,
        turn: &Turn,
        heard: &mut dyn FnMut(Heard),
    ) -> Result<(AgentOutcome, Result<GateOutcome>)>;
    /// The agent's commits, brought into the work repository (the new tip), or refused.
    fn take_commits(&mut self) -> Result<Imported>;
    /// The bytes of the ask the agent left in its outbox (`sandcastle ask`), unchecked.
    fn take_ask(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
    /// Checkouts of other work repositories (an issue's attempts, by letter) beside the next
    /// turn's own, read-only, in the container that turn runs in; nothing of them comes back.
    fn add_candidates(&mut self, candidates: &[(char, &WorkRepo)]) -> Result<()>;
    /// Lets the work's containers go, beside what follows: no turn runs after this.
    fn release(&mut self) {}
}

/// An ask relayed while a turn runs: its bytes, or why its record was refused.
pub type Relayed = Result<Vec<u8>, String>;

/// What the driver hears of a turn while it runs.
pub enum Heard {
    /// An ask the agent made.
    Ask(Relayed),
    /// Any other event of the turn's stream (a tool call, usage): the turn goes on, and an ask
    /// revision held back by its pace may go out now.
    Event,
}

pub struct Turn<'a> {
    pub role: Role,
    /// The role's turn on this work, from 1 (it names the transcript).
    pub iteration: u32,
    /// The iteration as `maxIterations` counts it (question turns left out), shown live.
    pub counted: u32,
    pub max_iterations: u32,
    pub prompt: &'a str,
    pub resume: Option<&'a SavedSession>,
    /// A tighter bound on the turn than `[sandbox] turnTimeout`, output or not.
    pub time_limit: Option<TimeLimit>,
    /// Start a fresh container beside this turn for the turn after it (the reviewer's, after the
    /// working role's), where none is ready yet: a head start only.
    pub fresh_ahead: bool,
}
