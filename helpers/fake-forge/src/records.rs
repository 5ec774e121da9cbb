//! The forge's objects as the state stores them and tests read them back: labels, issues, pull
//! requests, comments, reviews and pushes.

/// A label of a repository. `color` is six hex digits without `#`, as Forgejo stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub id: i64,
    pub name: String,
    pub color: String,
    pub description: String,
}

/// An issue (not a pull request), with its label names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub closed: bool,
    pub labels: Vec<String>,
}

/// A pull request, with its label names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub closed: bool,
    pub labels: Vec<String>,
    /// The head branch.
    pub head: String,
    /// The fork's owner when the head branch lives in a fork.
    pub head_owner: Option<String>,
    /// The base branch.
    pub base: String,
}

/// A comment on an issue or a pull request (review bodies are not comments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub id: i64,
    /// The number of the issue or pull request.
    pub issue: u64,
    pub author: String,
    pub body: String,
    pub created: String,
    pub updated: String,
}

/// A pull request review with its inline comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub id: i64,
    pub pull: u64,
    pub author: String,
    /// `APPROVED`, `REQUEST_CHANGES`, `COMMENT` or `PENDING`.
    pub state: String,
    pub body: String,
    pub commit_id: String,
    pub comments: Vec<ReviewComment>,
    pub submitted: String,
}

/// An inline review comment. A line number is 0 when the comment is not on that side of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: i64,
    pub review: i64,
    pub path: String,
    pub new_line: u64,
    pub old_line: u64,
    pub body: String,
    pub author: String,
}

/// One `git push` over HTTP that changed at least one ref (rejected and empty pushes change none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    /// The login that authenticated the push.
    pub user: String,
    /// `owner/name`.
    pub repo: String,
    pub updates: Vec<RefUpdate>,
}

/// A ref a push changed: `old` is `None` for a created ref, `new` is `None` for a deleted one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefUpdate {
    pub name: String,
    pub old: Option<String>,
    pub new: Option<String>,
}
