//! Forgejo REST client (API v1), blocking, over ureq. The orchestrator owns every forge mutation.
//! OWNER: helper H5. Interface fixed; bodies to implement.
use anyhow::Result;
use serde::Deserialize;

/// The lifecycle labels sandcastle makes sure exist, with their colours.
pub const LIFECYCLE_LABELS: [(&str, &str); 5] = [
    ("ready-for-agent", "#0e8a16"),
    ("in-review", "#fbca04"),
    ("ready-for-human", "#1d76db"),
    ("epic", "#5319e7"),
    ("needs-info", "#d93f0b"),
];

#[derive(Debug, Clone, Deserialize)]
pub struct Label {
    pub id: i64,
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    pub title: String,
    pub body: String,
    /// `head.ref`, the branch name.
    pub head_branch: String,
    pub labels: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Review {
    pub id: i64,
    /// `REQUEST_CHANGES`, `APPROVED`, `COMMENT`, ...
    pub state: String,
    pub body: String,
    pub author: String,
}

#[derive(Debug, Clone)]
pub struct ReviewComment {
    pub path: String,
    pub line: Option<u64>,
    pub body: String,
    pub author: String,
}

#[derive(Debug, Clone)]
pub struct Comment {
    pub id: i64,
    pub body: String,
    pub author: String,
}

pub struct Forge {/* base url, owner, repo, token (never logged), ureq agent */}

impl Forge {
    /// `base_url` like `https://forge.example.dev` or `http://127.0.0.1:3000` (no trailing slash).
    pub fn new(base_url: &str, repo: &str, token: &str) -> Forge { todo!() }
    /// `GET /user`: the login the token belongs to. A rejected token gives a one-line error saying so.
    pub fn current_user(&self) -> Result<String> { todo!() }
    /// `GET /repos/{o}/{r}`: the default branch.
    pub fn default_branch(&self) -> Result<String> { todo!() }
    /// Creates the missing lifecycle labels; returns every label of the repository.
    pub fn ensure_labels(&self) -> Result<Vec<Label>> { todo!() }
    /// Every label of the repository (all pages).
    pub fn labels(&self) -> Result<Vec<Label>> { todo!() }
    /// Open issues (not pulls) that have ALL of `labels` (all pages).
    pub fn open_issues(&self, labels: &[&str]) -> Result<Vec<Issue>> { todo!() }
    pub fn issue(&self, number: u64) -> Result<Issue> { todo!() }
    /// Open pull requests (all pages).
    pub fn open_pulls(&self) -> Result<Vec<Pull>> { todo!() }
    /// Creates a pull request, or returns the open one whose head is `branch` (never a duplicate).
    pub fn open_pull(&self, branch: &str, base: &str, title: &str, body: &str) -> Result<Pull> { todo!() }
    /// Adds labels by name (looked up to ids).
    pub fn add_labels(&self, number: u64, names: &[&str]) -> Result<()> { todo!() }
    /// Removes a label by name; absent is fine.
    pub fn remove_label(&self, number: u64, name: &str) -> Result<()> { todo!() }
    pub fn comments(&self, number: u64) -> Result<Vec<Comment>> { todo!() }
    pub fn comment(&self, number: u64, body: &str) -> Result<()> { todo!() }
    pub fn reviews(&self, pull: u64) -> Result<Vec<Review>> { todo!() }
    pub fn review_comments(&self, pull: u64, review: i64) -> Result<Vec<ReviewComment>> { todo!() }
}
