//! A piece of work: an issue, a sent-back pull request, or a round keeping one of sandcastle's own
//! pull requests green. What it is says its key, branch, working role, prompt and reviewer.
use crate::state::Trouble;
use sandcastle_core::forge::{Issue, Pull};
use sandcastle_core::plan::branch_for;
use sandcastle_core::role::{Role, WorkKey};

/// A piece of work: what it is says its key, branch, working role, prompts and how it publishes.
pub enum Piece<'a> {
    Issue(&'a Issue),
    Pull(&'a Pull),
    /// One of sandcastle's own pull requests that a failing CI status or a conflict made
    /// unmergeable (`green.rs`).
    Green(&'a Pull, &'a Trouble),
}

impl Piece<'_> {
    pub fn key(&self) -> WorkKey {
        match self {
            Piece::Issue(issue) => WorkKey::Issue(issue.number),
            Piece::Pull(pull) | Piece::Green(pull, _) => WorkKey::Pull(pull.number),
        }
    }

    /// The issue's or pull request's number on the forge.
    pub fn number(&self) -> u64 {
        match self {
            Piece::Issue(issue) => issue.number,
            Piece::Pull(pull) | Piece::Green(pull, _) => pull.number,
        }
    }

    pub fn branch(&self) -> String {
        match self {
            Piece::Issue(issue) => branch_for(issue.number),
            Piece::Pull(pull) | Piece::Green(pull, _) => pull.head_branch.clone(),
        }
    }

    pub fn working_role(&self) -> Role {
        match self {
            Piece::Issue(_) => Role::Implementer,
            Piece::Pull(_) | Piece::Green(..) => Role::PrFixer,
        }
    }

    /// The prompt the working role starts from.
    pub fn prompt(&self) -> &'static str {
        match self {
            Piece::Green(..) => "keep-green",
            _ => self.working_role().prompt(),
        }
    }

    /// Issues and a green round get a reviewer; a sent-back pull request goes back to the human
    /// who reviewed it.
    pub fn reviewed(&self) -> bool {
        !matches!(self, Piece::Pull(_))
    }
}
