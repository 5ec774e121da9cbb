//! Which write scopes a token holds, asked without writing anything: for each, a write the forge
//! refuses whatever the token may do. Forgejo checks a token's scope before anything else of a
//! route, so a token without the scope gets 403; one with it gets past the check and is refused
//! for what the request lacks (a body, an issue that cannot exist: 404 or 422).
use super::{Forge, Method};
use anyhow::Result;
use serde_json::json;
use std::fmt;

/// A token scope that lets its holder change the forge where an agent could reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteScope {
    /// Comments, issues, labels (`write:issue`).
    Issue,
    /// Forks, pull requests, reviews, repositories of its own (`write:repository`).
    Repository,
}

impl fmt::Display for WriteScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteScope::Issue => "write:issue",
            WriteScope::Repository => "write:repository",
        })
    }
}

/// The highest issue index Forgejo can hold: no issue has it.
const NO_ISSUE: i64 = i64::MAX;

impl Forge {
    /// The write scopes the token holds. Each probe is refused by the forge whatever the token
    /// may do (a comment with an empty body on an issue that cannot exist, a migration with no
    /// source and no name), so it never writes; only its status differs: 403 without the scope.
    pub fn write_scopes(&self) -> Result<Vec<WriteScope>> {
        let probes = [
            (
                WriteScope::Issue,
                self.repo_path(&format!("/issues/{NO_ISSUE}/comments")),
                json!({"body": ""}),
            ),
            (
                WriteScope::Repository,
                "/repos/migrate".to_string(),
                json!({"clone_addr": "", "repo_name": ""}),
            ),
        ];
        let mut held = Vec::new();
        for (scope, path, body) in probes {
            let reply = self.send(&path, Method::Probe(body))?;
            match reply.status {
                403 => {}
                // Past the scope check: refused for the missing issue or the empty fields (or,
                // on a forge that broke its own rules, done).
                200..=299 | 404 | 422 => held.push(scope),
                _ => return Err(self.failure("POST", &path, &reply)),
            }
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_forge::FakeForge;

    /// A token of `bob`, who may not push to `alice/demo`, with `scopes`.
    fn scopes_of(scopes: &[&str]) -> Vec<WriteScope> {
        let forge = FakeForge::start();
        forge.add_user("alice");
        let token = forge.add_user_with_scopes("bob", scopes);
        forge.create_repo("alice", "demo", "main").unwrap();
        forge
            .create_issue("alice/demo", "alice", "An issue", "body", &[])
            .unwrap();
        let held = Forge::new(forge.url(), "alice/demo", &token)
            .write_scopes()
            .unwrap();
        assert!(forge.comments("alice/demo", 1).is_empty());
        assert_eq!(forge.schema_violations(), Vec::<String>::new());
        held
    }

    #[test]
    fn read_only_scopes_hold_no_write_scope() {
        assert_eq!(
            scopes_of(&["read:issue", "read:repository", "read:user"]),
            []
        );
    }

    #[test]
    fn each_write_scope_is_found_and_nothing_is_written() {
        assert_eq!(
            scopes_of(&["write:issue", "read:repository"]),
            [WriteScope::Issue]
        );
        assert_eq!(
            scopes_of(&["read:issue", "write:repository"]),
            [WriteScope::Repository]
        );
        assert_eq!(
            scopes_of(&["all"]),
            [WriteScope::Issue, WriteScope::Repository]
        );
    }
}
