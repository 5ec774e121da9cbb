//! What became of pull requests, for `sandcastle report`: their state and times, when an issue was
//! labelled, and the commits of a branch (to find reverts). Reads only.
use super::{Forge, MAX_PAGES, Method, PAGE_SIZE, null_as_default, parse};
use anyhow::Result;
use jiff::Timestamp;
use serde::Deserialize;

/// A pull request's fate as the forge tells it.
#[derive(Debug, Clone, PartialEq)]
pub struct PullFate {
    pub number: u64,
    pub title: String,
    pub created_at: Option<Timestamp>,
    /// Set when it was merged.
    pub merged_at: Option<Timestamp>,
    pub closed: bool,
    /// The commit its merge made on the base branch, and its head when merged (a rebase or
    /// fast-forward merge puts the head on the base branch).
    pub merge_commit: Option<String>,
    pub head_sha: String,
    pub base_branch: String,
}

/// A commit of a branch: its id and message.
#[derive(Debug, Clone)]
pub struct BranchCommit {
    pub sha: String,
    pub message: String,
}

#[derive(Deserialize)]
struct ApiFate {
    number: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    title: String,
    #[serde(default, deserialize_with = "null_as_default")]
    state: String,
    #[serde(default)]
    merged: Option<bool>,
    #[serde(default)]
    merged_at: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    head: ApiRef,
    base: ApiRef,
}

#[derive(Deserialize)]
struct ApiRef {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    sha: String,
}

#[derive(Deserialize)]
struct ApiTimelineEvent {
    #[serde(default, rename = "type", deserialize_with = "null_as_default")]
    kind: String,
    #[serde(default, deserialize_with = "null_as_default")]
    body: String,
    #[serde(default)]
    label: Option<ApiLabelName>,
    #[serde(default)]
    created_at: Option<String>,
}

#[derive(Deserialize)]
struct ApiLabelName {
    name: String,
}

#[derive(Deserialize)]
struct ApiCommit {
    sha: String,
    #[serde(default)]
    created: Option<String>,
    commit: ApiCommitMeta,
}

#[derive(Deserialize)]
struct ApiCommitMeta {
    #[serde(default, deserialize_with = "null_as_default")]
    message: String,
}

/// A forge time; one the forge did not send (or Go's zero time) is none.
fn time(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|t| t.parse().ok())
        .filter(|t: &Timestamp| t.as_second() > 0)
}

impl Forge {
    /// `GET /repos/{o}/{r}/pulls/{index}`: open, closed or merged, and when; `None` when the forge
    /// does not know it (deleted).
    pub fn pull_fate(&self, number: u64) -> Result<Option<PullFate>> {
        let path = self.repo_path(&format!("/pulls/{number}"));
        let reply = self.send(&path, Method::Get(&[]))?;
        match reply.status {
            200 => {}
            404 => return Ok(None),
            _ => return Err(self.failure("GET", &path, &reply)),
        }
        let pull: ApiFate = parse(&reply, &path)?;
        let merged_at = time(pull.merged_at.as_deref());
        Ok(Some(PullFate {
            number: pull.number,
            title: pull.title,
            created_at: time(pull.created_at.as_deref()),
            merged_at: merged_at.filter(|_| pull.merged != Some(false)),
            closed: pull.state == "closed",
            merge_commit: pull.merge_commit_sha.filter(|sha| !sha.is_empty()),
            head_sha: pull.head.sha,
            base_branch: pull.base.name,
        }))
    }

    /// When `label` was added to issue `number`, each time, oldest first (its timeline).
    pub fn labelled_at(&self, number: u64, label: &str) -> Result<Vec<Timestamp>> {
        let path = self.repo_path(&format!("/issues/{number}/timeline"));
        let events: Vec<ApiTimelineEvent> = self.get_all(&path, &[])?;
        Ok(events
            .into_iter()
            .filter(|e| e.kind == "label" && e.body == "1")
            .filter(|e| e.label.as_ref().is_some_and(|l| l.name == label))
            .filter_map(|e| time(e.created_at.as_deref()))
            .collect())
    }

    /// The commits of `branch`, newest first, down to the first made before `since` (a branch's
    /// history can be long; what came before is not needed); none when the branch is gone.
    pub fn commits_since(&self, branch: &str, since: Timestamp) -> Result<Vec<BranchCommit>> {
        let path = self.repo_path("/commits");
        let limit = PAGE_SIZE.to_string();
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let page = page.to_string();
            let query = [
                ("sha", branch),
                ("stat", "false"),
                ("verification", "false"),
                ("files", "false"),
                ("page", page.as_str()),
                ("limit", limit.as_str()),
            ];
            let reply = self.send(&path, Method::Get(&query))?;
            match reply.status {
                200 => {}
                // The branch is gone, or the repository empty: nothing there reverts anything.
                404 | 409 => return Ok(all),
                _ => return Err(self.failure("GET", &path, &reply)),
            }
            let commits: Vec<ApiCommit> = parse(&reply, &path)?;
            let count = commits.len();
            let mut older = false;
            for commit in commits {
                older |= time(commit.created.as_deref()).is_some_and(|c| c < since);
                all.push(BranchCommit {
                    sha: commit.sha,
                    message: commit.commit.message,
                });
            }
            let last = reply
                .total
                .map_or(count < PAGE_SIZE, |total| all.len() >= total);
            if older || last || count == 0 {
                return Ok(all);
            }
        }
        Ok(all)
    }
}
