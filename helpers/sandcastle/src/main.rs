//! `sandcastle`: the autonomous pull-request loop. OWNER of main/run/plan/state/report/lock/doctor: lead.
mod agent;
mod forge;
mod git;
mod progress;
mod prompts;
mod sandbox;
mod secrets;
mod stream;

fn main() {}
