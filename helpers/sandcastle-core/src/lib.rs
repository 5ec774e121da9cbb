//! sandcastle's machinery and strict parsers: the forge client, git, Docker sandboxes, the agent's
//! stream, the model proxy, secrets, and the parsers of what comes out of a sandbox or off the forge.
//!
//! Architecture Invariant: nothing here knows the orchestrator (its run `Context`, saved state,
//! phases or prompts). This crate does not depend on `sandcastle`, so the compiler keeps it so.
pub mod agent;
pub mod ask;
pub mod ask_relay;
pub mod assessment;
pub mod checkout;
pub mod choice;
pub mod claims;
pub mod deadline;
pub mod forge;
pub mod forge_text;
pub mod gate;
pub mod git;
pub mod hand_out;
pub mod lock;
pub mod mcp;
pub mod plan;
pub mod progress;
pub mod proxy;
pub mod questions;
pub mod relay;
pub mod role;
pub mod run_dir;
pub mod sandbox;
pub mod secrets;
pub mod stream;
pub mod tls;
pub mod touches;
pub mod turn;
