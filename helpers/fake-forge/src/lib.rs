//! A Forgejo-API-compatible server for tests, on 127.0.0.1 with in-memory state.
//!
//! It serves the parts of Forgejo's REST API v1 that sandcastle uses (users, repositories, labels,
//! issues, comments and their timelines, pull requests merged or not (with `mergeable` computed from
//! the hosted repository by `git merge-tree`, and merging them with a merge commit), reviews,
//! commits, commit statuses and the combined status (Go's zero value for a commit without statuses))
//! with Forgejo's behaviours, and each repository over
//! git's smart HTTP through `git http-backend`. Tokens carry Forgejo's scopes (`all` unless made
//! with [`FakeForge::add_user_with_scopes`]), checked first on every API request. Every request
//! and response is checked against Forgejo's swagger document; a mismatch answers 500 and is
//! recorded, so a test can assert that [`FakeForge::schema_violations`] is empty.
//!
//! ```no_run
//! let forge = fake_forge::FakeForge::start();
//! let token = forge.add_user("alice");
//! forge.create_repo("alice", "demo", "main");
//! // `forge.url()` is the `forgeHost` of a test's config; `alice` pushes with `token`.
//! ```
#![recursion_limit = "256"]

mod api;
mod auth;
mod clock;
mod git;
mod git_http;
mod records;
mod render;
mod scope;
mod server;
mod shared;
mod state;
mod swagger;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result, anyhow, bail};

use clock::now;
pub use records::{Comment, Issue, Label, Pull, Push, RefUpdate, Review, ReviewComment};
pub use scope::Scopes;
pub use shared::Fault;
use shared::{NewPull, Shared};
use state::{NewIssue, NewReview};

/// A running fake forge; dropping it stops the server and deletes its repositories.
pub struct FakeForge {
    shared: Arc<Shared>,
    server: Arc<tiny_http::Server>,
    accept: Option<JoinHandle<()>>,
    url: String,
    _repos: tempfile::TempDir,
}

impl FakeForge {
    /// Starts a forge on a random port of 127.0.0.1.
    ///
    /// # Panics
    /// If the port cannot be bound or the temporary directory cannot be made: test support has no
    /// better answer to a broken machine.
    pub fn start() -> FakeForge {
        FakeForge::try_start(0, None).expect("starting fake-forge")
    }

    /// Starts a forge whose API builds `Link`, `html_url` and `clone_url` from `root_url` (Forgejo's
    /// `ROOT_URL`) instead of its own address, like a forge behind a proxy that is configured with
    /// another host name.
    ///
    /// # Panics
    /// As [`FakeForge::start`].
    pub fn start_with_root_url(root_url: &str) -> FakeForge {
        FakeForge::try_start(0, Some(root_url)).expect("starting fake-forge")
    }

    /// Starts a forge on `port` of 127.0.0.1 (0 for a random one).
    pub fn try_start(port: u16, root_url: Option<&str>) -> Result<FakeForge> {
        let server = tiny_http::Server::from_listener(no_delay_listener(port)?, None)
            .map_err(|e| anyhow!("binding 127.0.0.1:{port}: {e}"))?;
        let address = server
            .server_addr()
            .to_ip()
            .context("the server has no IP address")?;
        let url = format!("http://{address}");
        let root_url = format!("{}/", root_url.unwrap_or(&url).trim_end_matches('/'));
        let repos = tempfile::Builder::new().prefix("fake-forge-").tempdir()?;
        let shared = Arc::new(Shared::new(
            swagger::Swagger::load()?,
            repos.path().to_path_buf(),
            root_url,
        ));
        let server = Arc::new(server);
        let accept = Some(server::serve(server.clone(), shared.clone()));
        Ok(FakeForge {
            shared,
            server,
            accept,
            url,
            _repos: repos,
        })
    }

    /// The base URL, like `http://127.0.0.1:41234` (no trailing slash).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Adds a user and returns a new API token for it.
    pub fn add_user(&self, login: &str) -> String {
        let mut state = self.shared.state();
        let token = format!("{:032x}{:08x}", random_u128(), state.users.len());
        state.add_user(login, token.clone());
        token
    }

    /// Adds a user and returns a new API token for it with only `scopes` (like `read:issue`);
    /// [`FakeForge::add_user`]'s tokens have every scope (`all`).
    pub fn add_user_with_scopes(&self, login: &str, scopes: &[&str]) -> String {
        let mut state = self.shared.state();
        let token = format!("{:032x}{:08x}", random_u128(), state.users.len());
        state.add_user(login, token.clone());
        state.users.last_mut().expect("added above").scopes = Scopes::of(scopes);
        token
    }

    /// Another token of the existing user `login` (as a person may create several).
    pub fn add_token(&self, login: &str) -> Result<String> {
        let mut state = self.shared.state();
        let Some(id) = state.users.iter().find(|u| u.login == login).map(|u| u.id) else {
            bail!("no user {login}");
        };
        let token = format!("{:032x}{:08x}", random_u128(), state.users.len());
        state.users.push(state::User {
            id,
            login: login.to_string(),
            token: token.clone(),
            scopes: Scopes::all(),
        });
        Ok(token)
    }

    /// Creates a repository with one commit on `default_branch`, served at `{url}/{owner}/{name}.git`.
    pub fn create_repo(&self, owner: &str, name: &str, default_branch: &str) -> Result<()> {
        if self.shared.state().repo(owner, name).is_ok() {
            bail!("repository {owner}/{name} exists already");
        }
        let dir = self.bare_repo_path(owner, name);
        std::fs::create_dir_all(dir.parent().context("repository path has a parent")?)?;
        git::init_bare(&dir, default_branch, name)?;
        self.shared
            .state()
            .add_repo(owner, name, default_branch, now());
        Ok(())
    }

    /// Forks `repo` (`owner/name`) into `{owner}/{name}`: a copy of its bare repository, marked as a
    /// fork, from which `owner` can open pull requests on `repo` (head `owner:branch`).
    pub fn create_fork(&self, owner: &str, repo: &str) -> Result<()> {
        let (parent_owner, name) = split_repo(repo)?;
        let default_branch = self
            .shared
            .state()
            .repo(parent_owner, name)
            .map_err(api_error)?
            .default_branch
            .clone();
        let dir = self.bare_repo_path(owner, name);
        std::fs::create_dir_all(dir.parent().context("repository path has a parent")?)?;
        git::clone_bare(&self.bare_repo_path(parent_owner, name), &dir)?;
        let mut state = self.shared.state();
        state.add_repo(owner, name, &default_branch, now());
        state.repo_mut(owner, name).map_err(api_error)?.parent = Some(repo.to_string());
        Ok(())
    }

    /// Gives `login` `permission` (`read`, `write` or `admin`) on `repo`.
    pub fn add_collaborator(&self, repo: &str, login: &str, permission: &str) -> Result<()> {
        let (owner, name) = split_repo(repo)?;
        let mut state = self.shared.state();
        let repo = state.repo_mut(owner, name).map_err(api_error)?;
        repo.collaborators.retain(|(user, _)| user != login);
        repo.collaborators
            .push((login.to_string(), permission.to_string()));
        Ok(())
    }

    /// Closes issue or pull request `number` of `repo`, as a person would on the forge's page.
    pub fn close(&self, repo: &str, number: u64) -> Result<()> {
        let (owner, name) = split_repo(repo)?;
        let mut state = self.shared.state();
        let repo = state.repo_mut(owner, name).map_err(api_error)?;
        repo.close(number).map_err(api_error)
    }

    /// Merges pull request `number` of `repo` as `by` would on the forge's page: a merge commit on
    /// its base branch, the pull request closed and merged. Returns the merge commit.
    pub fn merge(&self, repo: &str, number: u64, by: &str) -> Result<String> {
        let (owner, name) = split_repo(repo)?;
        api::merge_pull_request(&self.shared, owner, name, number, by)
            .map_err(api_error)?
            .with_context(|| format!("pull request #{number} conflicts with its base"))
    }

    /// The bare repository behind `{owner}/{name}.git`.
    pub fn bare_repo_path(&self, owner: &str, name: &str) -> PathBuf {
        self.shared.repo_dir(owner, name)
    }

    /// Commits a file on `branch` of the bare repository directly (not a push: it is not recorded).
    /// A missing branch starts from the default branch. Returns the commit.
    pub fn commit_file(
        &self,
        repo: &str,
        branch: &str,
        path: &str,
        content: &str,
        message: &str,
    ) -> Result<String> {
        let (owner, name) = split_repo(repo)?;
        let default_branch = self
            .shared
            .state()
            .repo(owner, name)
            .map_err(api_error)?
            .default_branch
            .clone();
        git::commit_file(
            &self.bare_repo_path(owner, name),
            branch,
            &default_branch,
            path,
            content,
            message,
        )
    }

    /// Posts a comment as `author` (a user the forge knows or not); returns its id.
    pub fn create_comment_as(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        body: &str,
    ) -> Result<i64> {
        let (owner, name) = split_repo(repo)?;
        let mut state = self.shared.state();
        let repo = state.repo_mut(owner, name).map_err(api_error)?;
        Ok(repo
            .add_comment(number, author, body, now())
            .map_err(api_error)?
            .id)
    }

    /// Creates a label; returns its id.
    pub fn create_label(&self, repo: &str, name: &str, color: &str) -> Result<i64> {
        let (owner, repo_name) = split_repo(repo)?;
        let mut state = self.shared.state();
        let repo = state.repo_mut(owner, repo_name).map_err(api_error)?;
        Ok(repo.add_label(name, color, "").map_err(api_error)?.id)
    }

    /// Creates an issue with labels given by name; returns its number.
    pub fn create_issue(
        &self,
        repo: &str,
        author: &str,
        title: &str,
        body: &str,
        labels: &[&str],
    ) -> Result<u64> {
        let (owner, name) = split_repo(repo)?;
        let mut state = self.shared.state();
        let repo = state.repo_mut(owner, name).map_err(api_error)?;
        let label_ids = label_ids(&repo.labels, labels)?;
        let new = NewIssue {
            author,
            title,
            body,
            label_ids: &label_ids,
            pull: None,
            now: now(),
        };
        Ok(repo.add_issue(new).map_err(api_error)?.number)
    }

    /// Opens a pull request from `head` to `base` (both must exist in the bare repository); returns
    /// its number.
    pub fn create_pull(
        &self,
        repo: &str,
        author: &str,
        head: &str,
        base: &str,
        title: &str,
        labels: &[&str],
    ) -> Result<u64> {
        let (owner, name) = split_repo(repo)?;
        let label_ids = label_ids(
            &self
                .shared
                .state()
                .repo(owner, name)
                .map_err(api_error)?
                .labels,
            labels,
        )?;
        let new = NewPull {
            author,
            head,
            base,
            title,
            body: "",
            label_ids: &label_ids,
        };
        self.shared.open_pull(owner, name, new).map_err(api_error)
    }

    /// Submits a review; `event` is `APPROVED`, `REQUEST_CHANGES` or `COMMENT`, `comments` are
    /// `(path, new line, body)`.
    pub fn create_review(
        &self,
        repo: &str,
        pull: u64,
        author: &str,
        event: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> Result<i64> {
        let (owner, name) = split_repo(repo)?;
        let mut state = self.shared.state();
        let repo = state.repo_mut(owner, name).map_err(api_error)?;
        let head_sha = repo
            .pull(pull)
            .map_err(api_error)?
            .pull
            .as_ref()
            .map(|p| p.head_sha.clone())
            .unwrap_or_default();
        let comments = comments
            .iter()
            .map(|(path, line, text)| (path.to_string(), *line, 0, text.to_string()))
            .collect();
        let new = NewReview {
            author,
            event,
            body,
            commit_id: head_sha,
            comments,
            now: now(),
        };
        Ok(repo.add_review(pull, new).map_err(api_error)?.id)
    }

    /// The labels of a repository (`owner/name`).
    ///
    /// # Panics
    /// If the repository does not exist (a broken test).
    pub fn labels(&self, repo: &str) -> Vec<Label> {
        self.read(repo, |repo| repo.labels.clone())
    }

    /// The issues of a repository, pull requests excluded, by number.
    ///
    /// # Panics
    /// If the repository does not exist.
    pub fn issues(&self, repo: &str) -> Vec<Issue> {
        self.read(repo, |repo| {
            repo.issues
                .iter()
                .filter(|i| i.pull.is_none())
                .map(|i| Issue {
                    number: i.number,
                    title: i.title.clone(),
                    body: i.body.clone(),
                    author: i.author.clone(),
                    closed: i.closed,
                    labels: repo.label_names(i),
                })
                .collect()
        })
    }

    /// The pull requests of a repository, by number.
    ///
    /// # Panics
    /// If the repository does not exist.
    pub fn pulls(&self, repo: &str) -> Vec<Pull> {
        self.read(repo, |repo| {
            repo.issues
                .iter()
                .filter_map(|i| {
                    let pull = i.pull.as_ref()?;
                    Some(Pull {
                        number: i.number,
                        title: i.title.clone(),
                        body: i.body.clone(),
                        author: i.author.clone(),
                        closed: i.closed,
                        labels: repo.label_names(i),
                        head: pull.head.clone(),
                        head_owner: pull.head_owner.clone(),
                        base: pull.base.clone(),
                    })
                })
                .collect()
        })
    }

    /// The comments on issue or pull request `number`, oldest first.
    ///
    /// # Panics
    /// If the repository does not exist.
    pub fn comments(&self, repo: &str, number: u64) -> Vec<Comment> {
        self.read(repo, |repo| repo.comments_on(number).cloned().collect())
    }

    /// The reviews of pull request `number`, oldest first.
    ///
    /// # Panics
    /// If the repository does not exist.
    pub fn reviews(&self, repo: &str, number: u64) -> Vec<Review> {
        self.read(repo, |repo| repo.reviews_on(number).cloned().collect())
    }

    /// Answers the next `count` requests of one API operation with `fault` instead of serving
    /// them. `operation` is as Forgejo's swagger names it, e.g. `GET /repos/{owner}/{repo}/labels`;
    /// one it does not name is an error.
    pub fn inject_faults(&self, operation: &str, count: usize, fault: Fault) -> Result<()> {
        let (method, template) = operation
            .split_once(' ')
            .with_context(|| format!("{operation:?} is not `METHOD /path/{{param}}`"))?;
        let method = method.to_ascii_uppercase();
        let known = self
            .shared
            .swagger
            .route(&method, template)
            .is_some_and(|matched| matched.operation.template == template);
        if !known {
            bail!("{operation} is not an operation of Forgejo's swagger");
        }
        self.shared.inject(&method, template, count, fault);
        Ok(())
    }

    /// How many API requests of one method on one path (under `/api/v1`) came in, e.g.
    /// `PATCH /repos/alice/demo/issues/comments/5`: an edit of comment 5.
    pub fn received(&self, request: &str) -> usize {
        self.shared.received(request)
    }

    /// How many injected faults have not been served yet.
    pub fn pending_faults(&self) -> usize {
        self.shared.pending_faults()
    }

    /// Every push received over HTTP, in order.
    pub fn pushes(&self) -> Vec<Push> {
        self.shared.state().pushes.clone()
    }

    pub fn push_count(&self) -> usize {
        self.shared.state().pushes.len()
    }

    /// Every request or response that did not match Forgejo's swagger, or used an operation the
    /// fake does not implement. Tests assert it is empty.
    pub fn schema_violations(&self) -> Vec<String> {
        self.shared.violations()
    }

    fn read<T>(&self, repo: &str, f: impl FnOnce(&state::Repo) -> T) -> T {
        let (owner, name) = repo.split_once('/').unwrap_or((repo, ""));
        let state = self.shared.state();
        match state.repo(owner, name) {
            Ok(found) => f(found),
            Err(e) => panic!("fake-forge: {}", e.message),
        }
    }
}

impl Drop for FakeForge {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn split_repo(repo: &str) -> Result<(&str, &str)> {
    repo.split_once('/')
        .with_context(|| format!("repository {repo:?} is not owner/name"))
}

fn api_error(e: state::ApiError) -> anyhow::Error {
    anyhow!("HTTP {}: {}", e.status, e.message)
}

fn label_ids(labels: &[Label], names: &[&str]) -> Result<Vec<i64>> {
    names
        .iter()
        .map(|name| {
            labels
                .iter()
                .find(|l| l.name == *name)
                .map(|l| l.id)
                .with_context(|| format!("no label named {name:?}"))
        })
        .collect()
}

/// Token material without a dependency: std's per-process random hasher keys.
fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        hasher.finish() as u128
    };
    (half() << 64) | half()
}

/// A listener on `port` of 127.0.0.1 whose connections send at once (`TCP_NODELAY`, which accepted
/// sockets inherit), as Forgejo's Go server does: tiny_http writes an answer's head and body apart,
/// and with Nagle's algorithm the body waits for the client's delayed ACK, about 40 ms an answer.
fn no_delay_listener(port: u16) -> Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    rustix::net::sockopt::set_tcp_nodelay(&listener, true)
        .context("setting TCP_NODELAY on the forge's socket")?;
    Ok(listener)
}
