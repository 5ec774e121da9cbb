//! The forge's in-memory state and the rules Forgejo applies when it changes.
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::clock::now;
use crate::records::{Comment, Label, Push, Review, ReviewComment};
use crate::scope::Scopes;

/// An error the API reports as `{"message": ...}` with an HTTP status.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(404, message)
    }
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(422, message)
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

pub struct User {
    pub id: i64,
    pub login: String,
    pub token: String,
    /// What the token may do (`all` unless a test asked for fewer).
    pub scopes: Scopes,
}

pub struct Repo {
    pub id: i64,
    ids: Ids,
    pub owner: String,
    pub name: String,
    pub default_branch: String,
    pub created: String,
    pub labels: Vec<Label>,
    pub issues: Vec<StoredIssue>,
    pub comments: Vec<Comment>,
    pub reviews: Vec<Review>,
    /// `owner/name` of the repository this one is a fork of.
    pub parent: Option<String>,
    /// `(login, permission)`: `read`, `write` or `admin` (the owner is `owner`).
    pub collaborators: Vec<(String, String)>,
    /// Labels added to and removed from issues, for their timelines.
    pub label_events: Vec<LabelEvent>,
    /// Commit statuses, oldest first.
    pub statuses: Vec<CommitStatus>,
}

/// A label added to or removed from an issue: one `label` entry of its timeline.
pub struct LabelEvent {
    pub id: i64,
    pub issue: u64,
    pub label: i64,
    pub added: bool,
    pub by: String,
    pub at: String,
}

/// How a pull request was merged.
pub struct Merged {
    pub at: String,
    pub by: String,
    /// The merge commit on the base branch.
    pub commit: String,
}

/// A status a CI reported for one commit under one context (`ci/test`); a later one with the same
/// context replaces it in the combined status.
#[derive(Debug, Clone)]
pub struct CommitStatus {
    pub id: i64,
    pub sha: String,
    /// `pending`, `success`, `error`, `failure` or `warning`.
    pub state: String,
    pub context: String,
    pub description: String,
    pub target_url: String,
    pub creator: String,
    pub created: String,
}

/// Forgejo's order of status states, worst first: a combined status is its worst state.
const STATES_WORST_FIRST: [&str; 5] = ["error", "failure", "warning", "pending", "success"];

/// An issue or a pull request: they share one number space, labels and comments.
pub struct StoredIssue {
    pub id: i64,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub closed: bool,
    pub label_ids: Vec<i64>,
    pub pull: Option<PullInfo>,
    pub created: String,
    /// Bumped, as Forgejo does, by comments, reviews and label changes.
    pub updated: String,
    pub closed_at: Option<String>,
    /// A merged pull request (it is closed too).
    pub merged: Option<Merged>,
}

pub struct PullInfo {
    pub head: String,
    /// The owner of the fork the head branch lives in; `None` for this repository.
    pub head_owner: Option<String>,
    pub base: String,
    /// The head commit when the pull request was opened; used if the branch is deleted later.
    pub head_sha: String,
}

pub struct NewIssue<'a> {
    pub author: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub label_ids: &'a [i64],
    pub pull: Option<PullInfo>,
    pub now: String,
}

/// A review as the API creates it.
pub struct NewReview<'a> {
    pub author: &'a str,
    pub event: &'a str,
    pub body: &'a str,
    pub commit_id: String,
    /// `(path, new line, old line, body)`.
    pub comments: Vec<(String, u64, u64, String)>,
    pub now: String,
}

/// Ids are unique across every kind of object and every repository of one forge.
#[derive(Clone, Default)]
struct Ids(Arc<AtomicI64>);

impl Ids {
    fn next(&self) -> i64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

#[derive(Default)]
pub struct State {
    pub users: Vec<User>,
    pub repos: Vec<Repo>,
    pub pushes: Vec<Push>,
    ids: Ids,
}

impl State {
    pub fn add_user(&mut self, login: &str, token: String) {
        let id = self.ids.next();
        self.users.push(User {
            id,
            login: login.to_string(),
            token,
            scopes: Scopes::all(),
        });
    }

    pub fn add_repo(&mut self, owner: &str, name: &str, default_branch: &str, now: String) {
        let repo = Repo {
            id: self.ids.next(),
            ids: self.ids.clone(),
            owner: owner.to_string(),
            name: name.to_string(),
            default_branch: default_branch.to_string(),
            created: now,
            labels: Vec::new(),
            issues: Vec::new(),
            comments: Vec::new(),
            reviews: Vec::new(),
            parent: None,
            collaborators: Vec::new(),
            label_events: Vec::new(),
            statuses: Vec::new(),
        };
        self.repos.push(repo);
    }

    pub fn user_by_token(&self, token: &str) -> Option<&User> {
        self.users.iter().find(|u| u.token == token)
    }

    pub fn repo(&self, owner: &str, name: &str) -> ApiResult<&Repo> {
        self.repos
            .iter()
            .find(|r| r.owner == owner && r.name == name)
            .ok_or_else(|| ApiError::not_found(format!("repository {owner}/{name} does not exist")))
    }

    pub fn repo_mut(&mut self, owner: &str, name: &str) -> ApiResult<&mut Repo> {
        self.repos
            .iter_mut()
            .find(|r| r.owner == owner && r.name == name)
            .ok_or_else(|| ApiError::not_found(format!("repository {owner}/{name} does not exist")))
    }
}

impl Repo {
    /// What Forgejo's permission API says of `login` on this (public) repository.
    pub fn permission_of(&self, login: &str) -> &str {
        if login == self.owner {
            return "owner";
        }
        self.collaborators
            .iter()
            .find(|(user, _)| user == login)
            .map_or("read", |(_, permission)| permission.as_str())
    }

    pub fn issue(&self, number: u64) -> ApiResult<&StoredIssue> {
        self.issues
            .iter()
            .find(|i| i.number == number)
            .ok_or_else(|| ApiError::not_found(format!("issue #{number} does not exist")))
    }

    fn issue_mut(&mut self, number: u64) -> ApiResult<&mut StoredIssue> {
        self.issues
            .iter_mut()
            .find(|i| i.number == number)
            .ok_or_else(|| ApiError::not_found(format!("issue #{number} does not exist")))
    }

    pub fn pull(&self, number: u64) -> ApiResult<&StoredIssue> {
        self.issue(number)
            .ok()
            .filter(|i| i.pull.is_some())
            .ok_or_else(|| ApiError::not_found(format!("pull request #{number} does not exist")))
    }

    pub fn label(&self, id: i64) -> Option<&Label> {
        self.labels.iter().find(|l| l.id == id)
    }

    pub fn label_names(&self, issue: &StoredIssue) -> Vec<String> {
        issue
            .label_ids
            .iter()
            .filter_map(|id| self.label(*id))
            .map(|l| l.name.clone())
            .collect()
    }

    pub fn add_label(&mut self, name: &str, color: &str, description: &str) -> ApiResult<&Label> {
        let color = normalize_color(color)?;
        let id = self.ids.next();
        self.labels.push(Label {
            id,
            name: name.to_string(),
            color,
            description: description.to_string(),
        });
        Ok(self.labels.last().expect("just pushed"))
    }

    pub fn add_issue(&mut self, new: NewIssue) -> ApiResult<&StoredIssue> {
        if new.title.trim().is_empty() {
            return Err(ApiError::invalid("title: Required"));
        }
        if let Some(missing) = new.label_ids.iter().find(|id| self.label(**id).is_none()) {
            return Err(ApiError::invalid(format!(
                "label does not exist [label_id: {missing}]"
            )));
        }
        if let Some(pull) = &new.pull
            && let Some(existing) = self.open_pull_between(pull)
        {
            return Err(ApiError::new(
                409,
                format!(
                    "pull request already exists for these targets [id: {}, issue_id: {}, head_repo_id: {}, \
                     base_repo_id: {}, head_branch: {}, base_branch: {}]",
                    existing.id, existing.id, self.id, self.id, pull.head, pull.base
                ),
            ));
        }
        let number = self.issues.iter().map(|i| i.number).max().unwrap_or(0) + 1;
        let mut label_ids = new.label_ids.to_vec();
        label_ids.sort_unstable();
        label_ids.dedup();
        for label in &label_ids {
            self.record_label(number, *label, true, new.author, &new.now);
        }
        self.issues.push(StoredIssue {
            id: self.ids.next(),
            number,
            title: new.title.to_string(),
            body: new.body.to_string(),
            author: new.author.to_string(),
            closed: false,
            label_ids,
            pull: new.pull,
            created: new.now.clone(),
            updated: new.now,
            closed_at: None,
            merged: None,
        });
        Ok(self.issues.last().expect("just pushed"))
    }

    pub fn close(&mut self, number: u64) -> ApiResult<()> {
        let issue = self.issue_mut(number)?;
        if !issue.closed {
            issue.closed = true;
            issue.closed_at = Some(now());
        }
        Ok(())
    }

    /// Marks open pull request `number` merged (and closed) by `by` with `commit` on its base.
    pub fn mark_merged(&mut self, number: u64, by: &str, commit: String) -> ApiResult<()> {
        self.pull(number)?;
        let issue = self.issue_mut(number)?;
        if issue.closed {
            return Err(ApiError::new(405, "the pull request is closed"));
        }
        let now = now();
        issue.closed = true;
        issue.closed_at = Some(now.clone());
        issue.updated = now.clone();
        issue.merged = Some(Merged {
            at: now,
            by: by.to_string(),
            commit,
        });
        Ok(())
    }

    fn record_label(&mut self, issue: u64, label: i64, added: bool, by: &str, at: &str) {
        self.label_events.push(LabelEvent {
            id: self.ids.next(),
            issue,
            label,
            added,
            by: by.to_string(),
            at: at.to_string(),
        });
    }

    /// An open pull request from the same head (branch and repository) into the same base.
    fn open_pull_between(&self, new: &PullInfo) -> Option<&StoredIssue> {
        self.issues.iter().find(|i| {
            !i.closed
                && i.pull.as_ref().is_some_and(|p| {
                    p.head == new.head && p.head_owner == new.head_owner && p.base == new.base
                })
        })
    }

    /// Adds labels to an issue; ids that are not labels of this repository are dropped, as
    /// Forgejo drops them.
    pub fn label_issue(&mut self, number: u64, ids: &[i64], by: &str) -> ApiResult<&StoredIssue> {
        let carried = self.issue(number)?.label_ids.clone();
        let mut new: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|id| self.label(*id).is_some() && !carried.contains(id))
            .collect();
        new.sort_unstable();
        new.dedup();
        let now = now();
        for label in &new {
            self.record_label(number, *label, true, by, &now);
        }
        let issue = self.issue_mut(number)?;
        issue.label_ids.extend(new);
        issue.label_ids.sort_unstable();
        issue.updated = now;
        Ok(issue)
    }

    /// Removes a label from an issue. An id that is no label is a 422; a label the issue does not
    /// carry is fine.
    pub fn unlabel_issue(&mut self, number: u64, id: i64, by: &str) -> ApiResult<()> {
        if self.label(id).is_none() {
            return Err(ApiError::invalid(format!(
                "label does not exist [id: {id}]"
            )));
        }
        let now = now();
        if self.issue(number)?.label_ids.contains(&id) {
            self.record_label(number, id, false, by, &now);
        }
        let issue = self.issue_mut(number)?;
        issue.label_ids.retain(|l| *l != id);
        issue.updated = now;
        Ok(())
    }

    pub fn add_comment(
        &mut self,
        number: u64,
        author: &str,
        body: &str,
        now: String,
    ) -> ApiResult<&Comment> {
        if body.trim().is_empty() {
            return Err(ApiError::invalid("body: Required"));
        }
        self.issue_mut(number)?.updated = now.clone();
        self.comments.push(Comment {
            id: self.ids.next(),
            issue: number,
            author: author.to_string(),
            body: body.to_string(),
            created: now.clone(),
            updated: now,
        });
        Ok(self.comments.last().expect("just pushed"))
    }

    /// Forgejo's rule: only the author edits a comment; the body may not be empty.
    pub fn edit_comment(
        &mut self,
        id: i64,
        caller: &str,
        body: &str,
        now: String,
    ) -> ApiResult<&Comment> {
        if body.trim().is_empty() {
            return Err(ApiError::invalid("body: Required"));
        }
        let comment = self
            .comments
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| ApiError::not_found(format!("comment {id} does not exist")))?;
        if comment.author != caller {
            return Err(ApiError::new(403, "only the author may edit a comment"));
        }
        comment.body = body.to_string();
        comment.updated = now;
        Ok(comment)
    }

    /// The author or the repository's owner deletes a comment.
    pub fn delete_comment(&mut self, id: i64, caller: &str) -> ApiResult<()> {
        let at = self
            .comments
            .iter()
            .position(|c| c.id == id)
            .ok_or_else(|| ApiError::not_found(format!("comment {id} does not exist")))?;
        if self.comments[at].author != caller && self.owner != caller {
            return Err(ApiError::new(
                403,
                "only the author or the owner may delete a comment",
            ));
        }
        self.comments.remove(at);
        Ok(())
    }

    /// Records a status of commit `sha` (a full id the caller resolved).
    pub fn add_status(
        &mut self,
        sha: &str,
        state: &str,
        fields: [&str; 3],
        creator: &str,
    ) -> ApiResult<&CommitStatus> {
        if !STATES_WORST_FIRST.contains(&state) {
            return Err(ApiError::new(
                400,
                format!(
                    "invalid state {state:?}: want pending, success, error, failure or warning"
                ),
            ));
        }
        let [context, description, target_url] = fields;
        self.statuses.push(CommitStatus {
            id: self.ids.next(),
            sha: sha.to_string(),
            state: state.to_string(),
            context: if context.is_empty() {
                "default"
            } else {
                context
            }
            .to_string(),
            description: description.to_string(),
            target_url: target_url.to_string(),
            creator: creator.to_string(),
            created: now(),
        });
        Ok(self.statuses.last().expect("just pushed"))
    }

    /// The latest status of each context on `sha`, by context, and their combined state (the
    /// worst); `None` without statuses, which Forgejo answers with an empty combined status.
    pub fn combined_status(&self, sha: &str) -> (Vec<&CommitStatus>, Option<&'static str>) {
        let mut latest: Vec<&CommitStatus> = Vec::new();
        for status in self.statuses.iter().filter(|s| s.sha == sha) {
            latest.retain(|s| s.context != status.context);
            latest.push(status);
        }
        latest.sort_by(|a, b| a.context.cmp(&b.context));
        let state = STATES_WORST_FIRST
            .into_iter()
            .find(|state| latest.iter().any(|s| s.state == *state));
        (latest, state)
    }

    pub fn comments_on(&self, number: u64) -> impl Iterator<Item = &Comment> {
        self.comments.iter().filter(move |c| c.issue == number)
    }

    pub fn reviews_on(&self, number: u64) -> impl Iterator<Item = &Review> {
        self.reviews.iter().filter(move |r| r.pull == number)
    }

    /// Forgejo's review rules: a known event, a body or comments when asking for changes or
    /// commenting, and no approving or rejecting one's own pull request.
    pub fn add_review(&mut self, number: u64, new: NewReview) -> ApiResult<&Review> {
        let pull = self.pull(number)?;
        let state = match new.event {
            "APPROVED" | "APPROVE" => "APPROVED",
            "REQUEST_CHANGES" => "REQUEST_CHANGES",
            "COMMENT" => "COMMENT",
            "" | "PENDING" => "PENDING",
            other => return Err(ApiError::invalid(format!("unknown review event {other:?}"))),
        };
        if pull.author == new.author {
            match state {
                "APPROVED" => {
                    return Err(ApiError::invalid("approve your own pull is not allowed"));
                }
                "REQUEST_CHANGES" => {
                    return Err(ApiError::invalid("reject your own pull is not allowed"));
                }
                _ => {}
            }
        }
        if matches!(state, "REQUEST_CHANGES" | "COMMENT")
            && new.body.trim().is_empty()
            && new.comments.is_empty()
        {
            return Err(ApiError::invalid(format!(
                "review event {state} requires a body or comments"
            )));
        }
        let review_id = self.ids.next();
        let comments = new
            .comments
            .into_iter()
            .map(|(path, new_line, old_line, body)| ReviewComment {
                id: self.ids.next(),
                review: review_id,
                path,
                new_line,
                old_line,
                body,
                author: new.author.to_string(),
            })
            .collect();
        self.reviews.push(Review {
            id: review_id,
            pull: number,
            author: new.author.to_string(),
            state: state.to_string(),
            body: new.body.to_string(),
            commit_id: new.commit_id,
            comments,
            submitted: new.now.clone(),
        });
        self.issue_mut(number)?.updated = new.now;
        Ok(self.reviews.last().expect("just pushed"))
    }
}

/// Forgejo stores colours as six lowercase hex digits and accepts them with or without `#`.
fn normalize_color(color: &str) -> ApiResult<String> {
    let hex = color.strip_prefix('#').unwrap_or(color);
    if hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(hex.to_ascii_lowercase())
    } else {
        Err(ApiError::invalid(format!(
            "color: invalid color {color:?}, want #rrggbb"
        )))
    }
}
