//! What sandcastle's tests share: git run as a test user in a fixture repository, a checkout that
//! hands its commits out as a sandbox does ([`mod@git`]), a post read as the forge renders it
//! ([`markdown`]), and the world every forge test starts from, a fake forge with `alice/demo` and a
//! project configured for it ([`world`]), and an HTTPS front of a test CA ([`tls`]).
//!
//! A dev-dependency only; it depends on no sandcastle crate, so the orchestrator's tests and the
//! library's alike can use it.
pub mod git;
pub mod markdown;
pub mod tls;
pub mod world;

pub use git::git;
pub use world::World;
