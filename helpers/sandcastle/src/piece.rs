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
    /// One of an issue's independent attempts (best of N): implemented and gated on a branch of
    /// its own, never pushed; the reviewer chooses among those the gate passed.
    Attempt(&'a Issue, Attempt),
}

/// Which of an issue's attempts, of how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attempt {
    pub letter: char,
    pub of: u32,
}

impl Attempt {
    /// `issue-42-b`: its saved state, work repository, containers and logs.
    pub fn slug(self, issue: u64) -> String {
        format!("{}-{}", WorkKey::Issue(issue).slug(), self.letter)
    }
}

impl Piece<'_> {
    pub fn key(&self) -> WorkKey {
        match self {
            Piece::Issue(issue) | Piece::Attempt(issue, _) => WorkKey::Issue(issue.number),
            Piece::Pull(pull) | Piece::Green(pull, _) => WorkKey::Pull(pull.number),
        }
    }

    /// The issue's or pull request's number on the forge.
    pub fn number(&self) -> u64 {
        match self {
            Piece::Issue(issue) | Piece::Attempt(issue, _) => issue.number,
            Piece::Pull(pull) | Piece::Green(pull, _) => pull.number,
        }
    }

    pub fn branch(&self) -> String {
        match self {
            Piece::Issue(issue) => branch_for(issue.number),
            Piece::Attempt(issue, attempt) => {
                format!("{}-{}", branch_for(issue.number), attempt.letter)
            }
            Piece::Pull(pull) | Piece::Green(pull, _) => pull.head_branch.clone(),
        }
    }

    pub fn working_role(&self) -> Role {
        match self {
            Piece::Issue(_) | Piece::Attempt(..) => Role::Implementer,
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

    /// Its saved state's name: the key's slug, an attempt's own.
    pub fn slug(&self) -> String {
        match self {
            Piece::Attempt(issue, attempt) => attempt.slug(issue.number),
            _ => self.key().slug(),
        }
    }

    /// Issues and a green round get a reviewer; a sent-back pull request goes back to the human
    /// who reviewed it; an attempt is reviewed only once chosen, as its issue's work.
    pub fn reviewed(&self) -> bool {
        matches!(self, Piece::Issue(_) | Piece::Green(..))
    }
}
