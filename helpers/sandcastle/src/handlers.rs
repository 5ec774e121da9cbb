//! The run's side of the question handlers, below the behaviour that uses them (`asking/`): whether
//! a terminal prompt can be used and its queue, the question commands running, which questions this
//! run has put to them, and whether an answer came in from a handler's thread. `Context` holds one.
use sandcastle_core::ask::Ask;
use sandcastle_core::questions::Questions;
use sandcastle_core::role::WorkKey;
use std::collections::HashSet;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

/// Why the terminal and the question command are not used by a run of one pass.
pub const SINGLE_PASS: &str = "`run --once` and `run --issue` never wait for a person";

/// The run's side of the handlers: whether a terminal prompt can be used, which questions this
/// run has put to them, and whether an answer came in from a handler's thread.
pub struct Handlers {
    /// `run --once` or `run --issue`: the run ends after one pass.
    pub single_pass: bool,
    pub terminal: Result<Terminal, &'static str>,
    asked: Mutex<HashSet<String>>,
    /// Set by a handler's thread when an answer came in.
    pub arrived: Arc<AtomicBool>,
    pub children: Children,
}

impl Handlers {
    /// For a command that asks nobody (`plan`, `doctor`, tests).
    pub fn detached() -> Handlers {
        Handlers::with_terminal(true, Err("this command asks nobody"))
    }

    /// For `sandcastle run`: a terminal prompt only when it waits for people and has a terminal
    /// to ask on.
    pub fn for_run(single_pass: bool) -> Handlers {
        let terminal = if single_pass {
            Err(SINGLE_PASS)
        } else if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            Err("`sandcastle run` is not attached to a terminal")
        } else {
            Ok(Terminal::default())
        };
        Handlers::with_terminal(single_pass, terminal)
    }

    fn with_terminal(single_pass: bool, terminal: Result<Terminal, &'static str>) -> Handlers {
        Handlers {
            terminal,
            single_pass,
            asked: Mutex::new(HashSet::new()),
            arrived: Arc::new(AtomicBool::new(false)),
            children: Children::default(),
        }
    }

    /// A stopped run ends the question commands it started.
    pub fn stop(&self) {
        stop(&self.children);
    }

    /// Whether an answer came in since the last look (the loop's wait ends early for it).
    pub fn answer_arrived(&self) -> bool {
        self.arrived.swap(false, Ordering::SeqCst)
    }

    pub fn asked_in_this_run(&self, id: &str) -> bool {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(id)
    }

    pub fn mark_asked(&self, id: &str) {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string());
    }
}

/// The prompt thread's queue, started with the first question.
#[derive(Default)]
pub struct Terminal {
    pub queue: Mutex<Option<Sender<Queued>>>,
}

/// One question, or one revision of an ask, queued for the prompt.
pub struct Queued {
    pub key: WorkKey,
    pub put: Put,
}

/// What the prompt puts to the person.
pub enum Put {
    /// A question (its id and its questions): the agent waits.
    Questions(String, Questions),
    /// An ask: the agent works on meanwhile; its answer goes to this revision.
    Ask(Ask),
}

/// The process ids (and groups) of the question commands running now.
pub type Children = Arc<Mutex<Vec<u32>>>;

/// Ends every question command still running (a stopped run).
fn stop(children: &Children) {
    for pid in children.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        if let Some(group) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
}
