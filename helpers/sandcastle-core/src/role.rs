//! Who works, and on what: the agent roles and the keys of the pieces of work, as types.
use sandcastle_config::Models;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Planner,
    Implementer,
    Reviewer,
    PrFixer,
    /// Scores an issue's completeness before work starts; reasons only, with no tools.
    Assessor,
}

impl Role {
    /// `planner`, `implementer`, `reviewer`, `pr-fixer`, `assessor`: in logs, reports and file names.
    pub fn name(self) -> &'static str {
        match self {
            Role::Planner => "planner",
            Role::Implementer => "implementer",
            Role::Reviewer => "reviewer",
            Role::PrFixer => "pr-fixer",
            Role::Assessor => "assessor",
        }
    }

    /// The prompt it starts from (`prompts/<name>.md`).
    pub fn prompt(self) -> &'static str {
        match self {
            Role::Planner => "plan",
            Role::Implementer => "implement",
            Role::Reviewer => "review",
            Role::PrFixer => "pr-fixer",
            Role::Assessor => "assess",
        }
    }

    /// Its model from `[models]`.
    pub fn model(self, models: &Models) -> &str {
        match self {
            Role::Planner => &models.planner,
            Role::Implementer => &models.implementer,
            Role::Reviewer => &models.reviewer,
            Role::PrFixer => &models.pr_fixer,
            Role::Assessor => &models.assessor,
        }
    }

    /// Turns a role without tools may take: it only reasons, so it never needs many.
    pub fn max_turns(self) -> Option<u32> {
        match self {
            Role::Assessor => Some(3),
            Role::Planner | Role::Implementer | Role::Reviewer | Role::PrFixer => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One piece of work: the planner's pass, an issue, or a sent-back pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkKey {
    Plan,
    Issue(u64),
    Pull(u64),
}

impl WorkKey {
    /// `planner`, `issue-42`, `pr-7`: in file and container names.
    pub fn slug(self) -> String {
        match self {
            WorkKey::Plan => "planner".to_string(),
            WorkKey::Issue(n) => format!("issue-{n}"),
            WorkKey::Pull(n) => format!("pr-{n}"),
        }
    }

    /// The key a slug names (`issue-42`, `pr-7`), if any.
    pub fn from_slug(slug: &str) -> Option<WorkKey> {
        let key = match slug.strip_prefix("issue-") {
            Some(n) => WorkKey::Issue(n.parse().ok()?),
            None => WorkKey::Pull(slug.strip_prefix("pr-")?.parse().ok()?),
        };
        // `issue-04` or `issue-+4` is no slug sandcastle writes.
        (key.slug() == slug).then_some(key)
    }

    /// The key a report names (`plan`, `issue #42`, `pull request #7`), if any: its `Display` read
    /// back, and `pr #7`, as reports before it named a pull request.
    pub fn from_report(text: &str) -> Option<WorkKey> {
        let number = |prefix: &str| {
            let digits = text.strip_prefix(prefix)?;
            // `#04` or `#+4` is no number sandcastle writes.
            let n: u64 = digits.parse().ok()?;
            (n.to_string() == digits).then_some(n)
        };
        if text == "plan" {
            return Some(WorkKey::Plan);
        }
        number("issue #")
            .map(WorkKey::Issue)
            .or_else(|| number("pull request #").map(WorkKey::Pull))
            .or_else(|| number("pr #").map(WorkKey::Pull))
    }

    /// The issue's or pull request's number; the planner's pass has none.
    pub fn number(self) -> Option<u64> {
        match self {
            WorkKey::Issue(n) | WorkKey::Pull(n) => Some(n),
            WorkKey::Plan => None,
        }
    }

    /// `plan`, `implement`, `rework`: the lane the progress view shows.
    pub fn lane(self) -> &'static str {
        match self {
            WorkKey::Plan => "plan",
            WorkKey::Issue(_) => "implement",
            WorkKey::Pull(_) => "rework",
        }
    }
}

impl fmt::Display for WorkKey {
    /// `plan`, `issue #42`, `pull request #7`: in every message, logs and the report.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkKey::Plan => f.write_str("plan"),
            WorkKey::Issue(n) => write!(f, "issue #{n}"),
            WorkKey::Pull(n) => write!(f, "pull request #{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_keys_read_as_before_in_files_and_reports() {
        let names: Vec<&str> = [
            Role::Planner,
            Role::Implementer,
            Role::Reviewer,
            Role::PrFixer,
            Role::Assessor,
        ]
        .iter()
        .map(|r| r.name())
        .collect();
        assert_eq!(
            names,
            ["planner", "implementer", "reviewer", "pr-fixer", "assessor"]
        );
        assert_eq!(
            serde_json::to_string(&Role::PrFixer).unwrap(),
            "\"pr-fixer\""
        );
        assert_eq!(WorkKey::Issue(42).to_string(), "issue #42");
        assert_eq!(WorkKey::Pull(7).slug(), "pr-7");
        assert_eq!(WorkKey::Plan.to_string(), "plan");
        for key in [WorkKey::Issue(42), WorkKey::Pull(7)] {
            assert_eq!(WorkKey::from_slug(&key.slug()), Some(key));
        }
        for slug in ["planner", "issue-", "issue-04", "pr-x", "issue-1-2"] {
            assert_eq!(WorkKey::from_slug(slug), None, "{slug}");
        }
        assert_eq!(WorkKey::Pull(7).to_string(), "pull request #7");
        for key in [WorkKey::Plan, WorkKey::Issue(42), WorkKey::Pull(7)] {
            assert_eq!(WorkKey::from_report(&key.to_string()), Some(key));
        }
        assert_eq!(
            WorkKey::from_report("pr #7"),
            Some(WorkKey::Pull(7)),
            "an older report"
        );
        for text in [
            "issue #",
            "issue #04",
            "pr 7",
            "issue #1 ",
            "planner",
            "pull request #+7",
        ] {
            assert_eq!(WorkKey::from_report(text), None, "{text}");
        }
    }
}
