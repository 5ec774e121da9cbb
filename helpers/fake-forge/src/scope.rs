//! Forgejo's token scopes: each API route sits in a category (`issue`, `repository`, `user`, …),
//! a GET needs `read:<category>` and anything else `write:<category>`; `write` includes `read`, and
//! `all` is every scope. Forgejo checks the scope before anything else of the route (the
//! repository, the body, the issue), so a token without it gets 403 whatever else is wrong.

/// A token's scopes as Forgejo stores them: `all`, or a list like `read:issue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scopes(Vec<String>);

impl Scopes {
    pub fn all() -> Scopes {
        Scopes(vec!["all".to_string()])
    }

    pub fn of(scopes: &[&str]) -> Scopes {
        Scopes(scopes.iter().map(|s| s.to_string()).collect())
    }

    /// Forgejo's 403 message when these scopes do not allow `method` on `template`.
    pub fn refusal(&self, method: &str, template: &str) -> Option<String> {
        let category = category(template)?;
        let level = if matches!(method, "GET" | "HEAD") {
            "read"
        } else {
            "write"
        };
        let required = format!("{level}:{category}");
        let write = format!("write:{category}");
        let allowed = self
            .0
            .iter()
            .any(|scope| scope == "all" || *scope == required || *scope == write);
        (!allowed).then(|| {
            format!(
                "token does not have at least one of required scope(s), required=[{required}], token scope={}",
                self.0.join(",")
            )
        })
    }
}

/// The scope category of a route, as Forgejo's router groups them (`routers/api/v1/api.go`);
/// `None` for routes outside any (`/version`).
fn category(template: &str) -> Option<&'static str> {
    let in_repo = |part: &str| template.starts_with(&format!("/repos/{{owner}}/{{repo}}/{part}"));
    if in_repo("issues") || in_repo("labels") || in_repo("milestones") {
        Some("issue")
    } else if template.starts_with("/repos") {
        Some("repository")
    } else if template.starts_with("/user") {
        Some("user")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_needs_read_or_write_and_writing_needs_write() {
        let reader = Scopes::of(&["read:issue", "read:repository", "read:user"]);
        assert_eq!(reader.refusal("GET", "/user"), None);
        assert_eq!(reader.refusal("GET", "/repos/{owner}/{repo}"), None);
        assert_eq!(
            reader.refusal("POST", "/repos/{owner}/{repo}/issues/{index}/comments"),
            Some(
                "token does not have at least one of required scope(s), required=[write:issue], \
                 token scope=read:issue,read:repository,read:user"
                    .to_string()
            )
        );
        assert!(reader.refusal("POST", "/repos/migrate").is_some());
        let writer = Scopes::of(&["write:issue"]);
        assert_eq!(
            writer.refusal("GET", "/repos/{owner}/{repo}/issues/{index}"),
            None
        );
        assert!(
            writer
                .refusal("GET", "/repos/{owner}/{repo}/pulls")
                .is_some()
        );
        assert_eq!(Scopes::all().refusal("POST", "/repos/migrate"), None);
        assert_eq!(Scopes::of(&[]).refusal("GET", "/version"), None);
    }
}
