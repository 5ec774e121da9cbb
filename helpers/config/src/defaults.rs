//! The values a config gets for the keys it omits (the rows of `read::KEYS` show them in the
//! configuration reference, and a test holds them to these).
use std::time::Duration;

use crate::{Autopilot, Clarify, Handler, Models, Network, Questions, Sandbox};

pub(crate) const MAX_ITERATIONS: u32 = 5;
pub(crate) const MAX_CONCURRENCY: u32 = 1;
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(60);
pub(crate) const REVIEW_ROUNDS: u32 = 2;
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(10 * 60);

pub(crate) fn models() -> Models {
    Models {
        planner: "claude-opus-4-8".into(),
        implementer: "claude-sonnet-4-6".into(),
        reviewer: "claude-opus-4-8".into(),
        pr_fixer: "claude-sonnet-4-6".into(),
        assessor: "claude-sonnet-4-6".into(),
    }
}

pub(crate) fn sandbox() -> Sandbox {
    Sandbox {
        network: Network::None,
        memory: "4g".into(),
        pids_limit: 1024,
        mounts: Vec::new(),
        turn_timeout: Duration::from_secs(60 * 60),
        egress: Vec::new(),
        runtime: None,
    }
}

pub(crate) fn questions() -> Questions {
    Questions {
        enabled: false,
        poll_backoff: [5 * 60, 15 * 60, 30 * 60, 60 * 60]
            .map(Duration::from_secs)
            .to_vec(),
        timeout: Duration::from_secs(24 * 60 * 60),
        responders: Vec::new(),
        handlers: vec![Handler::Terminal, Handler::Forge],
        command: None,
    }
}

pub(crate) fn clarify() -> Clarify {
    Clarify {
        enabled: false,
        threshold: 0.8,
        max_rounds: 5,
        timeout: Duration::from_secs(180),
    }
}

pub(crate) fn autopilot() -> Autopilot {
    Autopilot {
        enabled: true,
        ci_rounds: 2,
        conflict_rounds: 2,
    }
}
