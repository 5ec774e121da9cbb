//! What the request threads share: the state, the swagger, recorded violations and injected faults,
//! and opening a pull request (from the API and from a test's seeding).
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use crate::clock::now;
use crate::git;
use crate::state::{ApiError, ApiResult, NewIssue, PullInfo, State};
use crate::swagger::Swagger;

/// What the request threads share.
pub struct Shared {
    state: Mutex<State>,
    pub swagger: Swagger,
    violations: Mutex<Vec<String>>,
    /// `GIT_PROJECT_ROOT`: bare repositories live at `<root>/<owner>/<name>.git`.
    pub repos_root: PathBuf,
    /// Forgejo's `ROOT_URL`, ending with `/`.
    pub root_url: String,
    pub push_lock: Mutex<()>,
    faults: Mutex<Vec<Pending>>,
    /// Requests received per method and path, `PATCH /repos/alice/demo/issues/comments/5`.
    received: Mutex<HashMap<String, usize>>,
}

/// What the forge answers instead of serving a request: `status` with an `APIError` body, with
/// `Retry-After: <seconds>` when `retry_after` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    pub retry_after: Option<u64>,
}

/// A fault for the next `remaining` requests of one operation.
struct Pending {
    method: String,
    template: String,
    remaining: usize,
    fault: Fault,
}

/// A pull request to open, from the API or from a test's seeding.
pub struct NewPull<'a> {
    pub author: &'a str,
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
    pub label_ids: &'a [i64],
}

impl Shared {
    pub fn new(swagger: Swagger, repos_root: PathBuf, root_url: String) -> Shared {
        Shared {
            state: Mutex::new(State::default()),
            swagger,
            violations: Mutex::new(Vec::new()),
            repos_root,
            root_url,
            push_lock: Mutex::new(()),
            faults: Mutex::new(Vec::new()),
            received: Mutex::new(HashMap::new()),
        }
    }

    /// Answers the next `count` requests of the operation `method template` (as the swagger names
    /// it, e.g. `GET /repos/{owner}/{repo}/labels`) with `fault`.
    pub fn inject(&self, method: &str, template: &str, count: usize, fault: Fault) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Pending {
                method: method.to_ascii_uppercase(),
                template: template.to_string(),
                remaining: count,
                fault,
            });
    }

    /// The fault a request of `method template` gets now, if any; each use counts down.
    pub fn take_fault(&self, method: &str, template: &str) -> Option<Fault> {
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let pending = faults
            .iter_mut()
            .find(|p| p.remaining > 0 && p.method == method && p.template == template)?;
        pending.remaining -= 1;
        Some(pending.fault)
    }

    /// How many injected faults are still to be served.
    pub fn pending_faults(&self) -> usize {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|p| p.remaining)
            .sum()
    }

    /// Counts a request of `method` on `path` (under `/api/v1`).
    pub fn receive(&self, method: &str, path: &str) {
        let mut received = self.received.lock().unwrap_or_else(|e| e.into_inner());
        *received.entry(format!("{method} {path}")).or_default() += 1;
    }

    /// How many requests of `request` (`METHOD /path`) came in.
    pub fn received(&self, request: &str) -> usize {
        let received = self.received.lock().unwrap_or_else(|e| e.into_inner());
        received.get(request).copied().unwrap_or(0)
    }

    /// The state, even if a request thread panicked while holding it.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record_violation(&self, violation: String) {
        eprintln!("fake-forge: swagger violation: {violation}");
        self.violations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(violation);
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn repo_dir(&self, owner: &str, name: &str) -> PathBuf {
        self.repos_root.join(owner).join(format!("{name}.git"))
    }

    /// Opens a pull request the way Forgejo does: both branches must exist in the bare repository
    /// and differ, and an open pull request for the same head and base is a 409.
    pub fn open_pull(&self, owner: &str, name: &str, pull: NewPull) -> ApiResult<u64> {
        self.state().repo(owner, name)?;
        // `owner:branch` names the head repository: this one, or a fork of it.
        let (head_owner, head) = match pull.head.split_once(':') {
            Some((head_owner, branch)) if head_owner == owner => (None, branch),
            Some((head_owner, branch)) => {
                let state = self.state();
                let fork = state.repo(head_owner, name).ok();
                if fork.and_then(|f| f.parent.as_deref()) != Some(&format!("{owner}/{name}")) {
                    return Err(ApiError::not_found(format!(
                        "head repository of {head_owner} does not exist"
                    )));
                }
                (Some(head_owner.to_string()), branch)
            }
            None => (None, pull.head),
        };
        if head.is_empty() || pull.base.is_empty() {
            return Err(ApiError::invalid("head and base are required"));
        }
        let sha = |dir: &std::path::Path, branch: &str| {
            git::rev_parse(dir, branch)
                .map_err(|e| ApiError::new(500, e.to_string()))?
                .ok_or_else(|| ApiError::not_found(format!("branch {branch} does not exist")))
        };
        sha(&self.repo_dir(owner, name), pull.base)?;
        let head_dir = self.repo_dir(head_owner.as_deref().unwrap_or(owner), name);
        let head_sha = sha(&head_dir, head)?;
        if head == pull.base && head_owner.is_none() {
            return Err(ApiError::invalid(
                "Invalid PullRequest: There are no changes between the head and the base",
            ));
        }
        let mut state = self.state();
        let repo = state.repo_mut(owner, name)?;
        let issue = repo.add_issue(NewIssue {
            author: pull.author,
            title: pull.title,
            body: pull.body,
            label_ids: pull.label_ids,
            pull: Some(PullInfo {
                head: head.to_string(),
                head_owner,
                base: pull.base.to_string(),
                head_sha,
            }),
            now: now(),
        })?;
        let number = issue.number;
        drop(state);
        git::set_pull_head(&self.repo_dir(owner, name), number, &head_dir, head)
            .map_err(|e| ApiError::new(500, e.to_string()))?;
        Ok(number)
    }
}
