//! Forgejo REST client (API v1), blocking, over ureq. The orchestrator owns every forge mutation.
//!
//! Forgejo facts this client relies on (see `shared/reference/README.md`): the issue list's
//! `labels` filter silently drops unknown names (with none left it returns every issue), so the
//! result is filtered again here; without `type` the list mixes issues and pull requests; pages
//! hold at most 50 items and `Link` URLs may name the wrong host, so paging counts pages itself;
//! labels are removed by numeric id only.
//!
//! Transient failures (5xx, 429, a dropped or refused connection) are retried with bounded
//! exponential backoff and jitter, honouring `Retry-After`, where a repeat cannot double anything:
//! reads, label adds and removals, and opening a pull request (looked up again before each try).
//! Creating a label or a comment is sent once.
use std::time::Duration;

mod history;
mod scopes;
pub use history::{BranchCommit, PullFate};
pub use scopes::WriteScope;

use crate::forge_text::Post;
use crate::secrets::Redactor;
use crate::tls::Roots;
use anyhow::{Context, Result, anyhow, bail};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

/// The lifecycle labels sandcastle makes sure exist, with their colours.
pub const LIFECYCLE_LABELS: [(&str, &str); 5] = [
    ("ready-for-agent", "#0e8a16"),
    ("in-review", "#fbca04"),
    ("ready-for-human", "#1d76db"),
    ("epic", "#5319e7"),
    ("needs-info", "#d93f0b"),
];

/// The page size asked for: Forgejo's maximum.
const PAGE_SIZE: usize = 50;
/// A bound on paging, against a server that never stops answering.
const MAX_PAGES: usize = 1000;
/// Tries of a request that fails transiently, the first included.
const ATTEMPTS: u32 = 4;
/// The wait before the second try; it doubles for each further one.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two tries, `Retry-After` included.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

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
    /// When it last changed (comments, edits, labels), to the second.
    pub updated_at: String,
}

#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    pub title: String,
    /// `user.login`: who opened it.
    pub author: String,
    /// `head.ref`, the branch name.
    pub head_branch: String,
    /// `head.repo.full_name`: the repository the head branch lives in (a fork's, or `None` when the
    /// forge no longer knows it).
    pub head_repo: Option<String>,
    /// `base.ref`, the branch it merges into.
    pub base_branch: String,
    pub labels: Vec<String>,
    pub updated_at: String,
    /// `head.sha`: the commit the pull request's branch is at.
    pub head_sha: String,
    /// `mergeable`: whether it merges into its base without conflicts (`None`: not said).
    pub mergeable: Option<bool>,
}

/// A commit's combined status: the latest status of each CI context, and the worst of them.
#[derive(Debug, Clone, Default)]
pub struct CombinedStatus {
    /// `pending`, `success`, `error`, `failure` or `warning`; empty when no CI reported anything.
    pub state: String,
    pub statuses: Vec<CommitStatus>,
}

/// One CI context's status of a commit: all of it is forge text.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
pub struct CommitStatus {
    #[serde(default, rename = "status", deserialize_with = "null_as_default")]
    pub state: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub description: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub target_url: String,
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

/// A client for one repository. The token only ever goes into the `Authorization` header.
#[derive(Clone)]
pub struct Forge {
    base_url: String,
    owner: String,
    name: String,
    token: String,
    /// The variable the token came from, for errors.
    token_name: &'static str,
    /// Every string the client sends passes it: the one sink for what the orchestrator writes to
    /// the forge, so no call site can forget redaction.
    redactor: Redactor,
    agent: ureq::Agent,
}

/// An HTTP answer: status, `X-Total-Count`, `Retry-After` in seconds, body.
struct Reply {
    status: u16,
    total: Option<usize>,
    retry_after: Option<u64>,
    text: String,
}

enum Method<'a> {
    Get(&'a [(&'a str, &'a str)]),
    /// A POST that creates something: sent once, since a lost answer may hide a success.
    Post(Value),
    /// A POST whose repeat changes nothing (adding labels an issue has).
    IdempotentPost(Value),
    /// An edit: its repeat changes nothing.
    Patch(Value),
    Delete,
    /// A POST the forge refuses whatever the token may do (`scopes.rs`): sent once, and its 403
    /// is an answer (the token lacks the scope), not a rejected token.
    Probe(Value),
}

impl Method<'_> {
    fn attempts(&self) -> u32 {
        match self {
            Method::Post(_) | Method::Probe(_) => 1,
            Method::Get(_) | Method::IdempotentPost(_) | Method::Patch(_) | Method::Delete => {
                ATTEMPTS
            }
        }
    }
}

/// A failure that may pass: a 5xx or 429 answer, or no answer at all. The message says what
/// failed; `error.downcast_ref::<Transient>()` tells it from the others.
#[derive(Debug)]
struct Transient(String);

impl std::fmt::Display for Transient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Transient {}

fn is_transient_status(status: u16) -> bool {
    status == 429 || (500..600).contains(&status)
}

/// The wait before try `attempt + 1`: `Retry-After` when the forge said, else exponential, with up
/// to a quarter more of jitter so that workers do not retry in step; never above `MAX_BACKOFF`.
fn backoff(attempt: u32, retry_after: Option<u64>) -> Duration {
    let wait = match retry_after {
        Some(seconds) => Duration::from_secs(seconds),
        None => {
            let base = FIRST_BACKOFF.saturating_mul(1 << (attempt - 1).min(16));
            base + base.mul_f64(jitter() / 4.0)
        }
    };
    wait.min(MAX_BACKOFF)
}

/// The forge's HTTP client: answers of any status are read, and nothing waits long.
fn agent(tls: ureq::tls::TlsConfig) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_global(Some(Duration::from_secs(60)))
        .user_agent(concat!("sandcastle/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls)
        .build()
        .into()
}

/// A number in [0, 1) from std's per-process random hasher keys.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

impl Forge {
    /// `base_url` like `https://forge.example.dev` or `http://127.0.0.1:3000` (no trailing slash).
    pub fn new(base_url: &str, repo: &str, token: &str) -> Forge {
        let (owner, name) = repo.split_once('/').unwrap_or((repo, ""));
        Forge {
            base_url: base_url.trim_end_matches('/').to_string(),
            owner: owner.to_string(),
            name: name.to_string(),
            token: token.to_string(),
            token_name: "FORGEJO_TOKEN",
            redactor: Redactor::default(),
            agent: agent(ureq::tls::TlsConfig::default()),
        }
    }

    /// The same client, checking an HTTPS forge's certificate against `roots` (the model proxy's:
    /// `SSL_CERT_FILE` or the system's), not only Mozilla's.
    pub fn trusting(mut self, roots: &Roots) -> Forge {
        self.agent = agent(roots.config());
        self
    }

    /// The same client, redacting with `redactor` every string it sends.
    pub fn redacting(mut self, redactor: Redactor) -> Forge {
        self.redactor = redactor;
        self
    }

    /// The same client, naming `name` as the token's variable in its errors.
    pub fn token_name(mut self, name: &'static str) -> Forge {
        self.token_name = name;
        self
    }

    /// `GET /user`: the login the token belongs to. A rejected token gives a one-line error saying so.
    pub fn current_user(&self) -> Result<String> {
        let user: ApiUser = self.get_json("/user")?;
        Ok(user.login)
    }

    /// `GET /repos/{o}/{r}`: the default branch.
    pub fn default_branch(&self) -> Result<String> {
        let repo: ApiRepo = self.get_json(&self.repo_path(""))?;
        Ok(repo.default_branch)
    }

    /// `GET /repos/{o}/{r}`: whether the token's login may push to (or administer) the
    /// repository, as the repository's `permissions` say to that token.
    pub fn can_push(&self) -> Result<bool> {
        let repo: ApiRepo = self.get_json(&self.repo_path(""))?;
        Ok(repo.permissions.is_some_and(|p| p.push || p.admin))
    }

    /// Creates the missing lifecycle labels; returns every label of the repository.
    pub fn ensure_labels(&self) -> Result<Vec<Label>> {
        let mut labels = self.labels()?;
        for (name, color) in LIFECYCLE_LABELS {
            if labels.iter().any(|l| l.name == name) {
                continue;
            }
            let body = json!({"name": name, "color": color});
            let created: Label = self.post_json(&self.repo_path("/labels"), body, 201)?;
            labels.push(created);
        }
        Ok(labels)
    }

    /// Every label of the repository (all pages).
    pub fn labels(&self) -> Result<Vec<Label>> {
        self.get_all(&self.repo_path("/labels"), &[])
    }

    /// Open issues (not pulls) that have ALL of `labels` (all pages).
    pub fn open_issues(&self, labels: &[&str]) -> Result<Vec<Issue>> {
        let joined = labels.join(",");
        let mut query = vec![("state", "open"), ("type", "issues")];
        if !labels.is_empty() {
            query.push(("labels", joined.as_str()));
        }
        let issues: Vec<ApiIssue> = self.get_all(&self.repo_path("/issues"), &query)?;
        Ok(issues
            .into_iter()
            .filter(|i| i.pull_request.is_none())
            .map(Issue::from)
            // The server ignores label names it does not know; a missing label matches nothing.
            .filter(|i| {
                labels
                    .iter()
                    .all(|wanted| i.labels.iter().any(|l| l == wanted))
            })
            .collect())
    }

    pub fn issue(&self, number: u64) -> Result<Issue> {
        let issue: ApiIssue = self.get_json(&self.repo_path(&format!("/issues/{number}")))?;
        if issue.pull_request.is_some() {
            bail!(
                "#{number} in {}/{} is a pull request, not an issue",
                self.owner,
                self.name
            );
        }
        Ok(issue.into())
    }

    /// When issue or pull request `number` last changed.
    pub fn updated_at(&self, number: u64) -> Result<String> {
        let issue: ApiIssue = self.get_json(&self.repo_path(&format!("/issues/{number}")))?;
        Ok(issue.updated_at)
    }

    /// Whether issue or pull request `number` is open.
    pub fn is_open(&self, number: u64) -> Result<bool> {
        let issue: ApiIssue = self.get_json(&self.repo_path(&format!("/issues/{number}")))?;
        Ok(issue.state == "open")
    }

    /// `GET /repos/{o}/{r}/pulls/{index}`.
    pub fn pull(&self, number: u64) -> Result<Pull> {
        let pull: ApiPull = self.get_json(&self.repo_path(&format!("/pulls/{number}")))?;
        Ok(pull.into())
    }

    /// `GET /repos/{o}/{r}/commits/{sha}/status`: the combined CI status of commit `sha`.
    pub fn combined_status(&self, sha: &str) -> Result<CombinedStatus> {
        if !sha.bytes().all(|b| b.is_ascii_hexdigit()) || sha.is_empty() {
            bail!("{sha:?} is not a commit id");
        }
        let status: ApiCombinedStatus =
            self.get_json(&self.repo_path(&format!("/commits/{sha}/status")))?;
        Ok(CombinedStatus {
            state: status.state,
            statuses: status.statuses,
        })
    }

    /// Open pull requests (all pages).
    pub fn open_pulls(&self) -> Result<Vec<Pull>> {
        let pulls: Vec<ApiPull> = self.get_all(&self.repo_path("/pulls"), &[("state", "open")])?;
        Ok(pulls.into_iter().map(Pull::from).collect())
    }

    /// Creates a pull request, or returns the open one `author` opened from `branch` of this
    /// repository (never a duplicate, never someone else's).
    pub fn open_pull(
        &self,
        author: &str,
        branch: &str,
        base: &str,
        title: &Post,
        body: &Post,
    ) -> Result<Pull> {
        // A create whose answer was lost may have succeeded: look again before each try.
        let mut attempt = 1;
        loop {
            if let Some(existing) = self.open_pull_from(author, branch)? {
                return Ok(existing);
            }
            match self.create_pull(author, branch, base, title, body) {
                Err(error) if attempt < ATTEMPTS && error.is::<Transient>() => {
                    std::thread::sleep(backoff(attempt, None));
                    attempt += 1;
                }
                created => return created,
            }
        }
    }

    fn open_pull_from(&self, author: &str, branch: &str) -> Result<Option<Pull>> {
        let repo = format!("{}/{}", self.owner, self.name);
        Ok(self.open_pulls()?.into_iter().find(|p| {
            p.head_branch == branch && p.author == author && p.head_repo.as_deref() == Some(&repo)
        }))
    }

    /// `POST /pulls`; a 409 means another one for this head and base exists (created since the
    /// last look), so it is read back instead.
    fn create_pull(
        &self,
        author: &str,
        branch: &str,
        base: &str,
        title: &Post,
        body: &Post,
    ) -> Result<Pull> {
        let path = self.repo_path("/pulls");
        let request =
            json!({"head": branch, "base": base, "title": title.as_str(), "body": body.as_str()});
        let reply = self.send(&path, Method::Post(request))?;
        match reply.status {
            201 => Ok(parse::<ApiPull>(&reply, &path)?.into()),
            409 => self.open_pull_from(author, branch)?.ok_or_else(|| {
                anyhow!("the forge says a pull request for {branch} exists (HTTP 409), but {author} has no open one from it: close the other pull request")
            }),
            _ => Err(self.failure("POST", &path, &reply)),
        }
    }

    /// `GET /repos/{o}/{r}/collaborators/{login}/permission`: whether `login` may write to the
    /// repository (`write`, `admin` or `owner`).
    pub fn can_write(&self, login: &str) -> Result<bool> {
        // Forgejo logins are made of these; anything else is no login that can write.
        if login.is_empty()
            || !login
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Ok(false);
        }
        let path = self.repo_path(&format!("/collaborators/{login}/permission"));
        let permission: ApiPermission = self.get_json(&path)?;
        Ok(matches!(
            permission.permission.as_str(),
            "write" | "admin" | "owner"
        ))
    }

    /// Adds labels by name (looked up to ids).
    pub fn add_labels(&self, number: u64, names: &[&str]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let labels = self.labels()?;
        let ids = names
            .iter()
            .map(|name| {
                labels.iter().find(|l| l.name == *name).map(|l| l.id).with_context(|| {
                    format!(
                        "label {name:?} does not exist in {}/{}: `sandcastle run` creates the lifecycle labels",
                        self.owner, self.name
                    )
                })
            })
            .collect::<Result<Vec<i64>>>()?;
        let path = self.repo_path(&format!("/issues/{number}/labels"));
        let reply = self.send(&path, Method::IdempotentPost(json!({"labels": ids})))?;
        if reply.status != 200 {
            return Err(self.failure("POST", &path, &reply));
        }
        let _: Vec<Label> = parse(&reply, &path)?;
        Ok(())
    }

    /// Removes a label by name; absent is fine.
    pub fn remove_label(&self, number: u64, name: &str) -> Result<()> {
        for label in self.labels()?.into_iter().filter(|l| l.name == name) {
            let path = self.repo_path(&format!("/issues/{number}/labels/{}", label.id));
            let reply = self.send(&path, Method::Delete)?;
            if !matches!(reply.status, 200 | 204) {
                return Err(self.failure("DELETE", &path, &reply));
            }
        }
        Ok(())
    }

    pub fn comments(&self, number: u64) -> Result<Vec<Comment>> {
        let comments: Vec<ApiComment> =
            self.get_json(&self.repo_path(&format!("/issues/{number}/comments")))?;
        Ok(comments
            .into_iter()
            .map(|c| Comment {
                id: c.id,
                body: c.body,
                author: login(c.user),
            })
            .collect())
    }

    /// Posts a comment; its id.
    pub fn comment(&self, number: u64, body: &Post) -> Result<i64> {
        let path = self.repo_path(&format!("/issues/{number}/comments"));
        let comment: ApiComment = self.post_json(&path, json!({"body": body.as_str()}), 201)?;
        Ok(comment.id)
    }

    /// `PATCH /repos/{o}/{r}/issues/comments/{id}`: a comment of ours, rewritten.
    pub fn edit_comment(&self, id: i64, body: &Post) -> Result<()> {
        let path = self.repo_path(&format!("/issues/comments/{id}"));
        let reply = self.send(&path, Method::Patch(json!({"body": body.as_str()})))?;
        if !matches!(reply.status, 200 | 204) {
            return Err(self.failure("PATCH", &path, &reply));
        }
        Ok(())
    }

    /// `DELETE /repos/{o}/{r}/issues/comments/{id}`; one already gone is fine.
    pub fn delete_comment(&self, id: i64) -> Result<()> {
        let path = self.repo_path(&format!("/issues/comments/{id}"));
        let reply = self.send(&path, Method::Delete)?;
        if !matches!(reply.status, 204 | 404) {
            return Err(self.failure("DELETE", &path, &reply));
        }
        Ok(())
    }

    pub fn reviews(&self, pull: u64) -> Result<Vec<Review>> {
        let reviews: Vec<ApiReview> =
            self.get_all(&self.repo_path(&format!("/pulls/{pull}/reviews")), &[])?;
        Ok(reviews
            .into_iter()
            .map(|r| Review {
                id: r.id,
                state: r.state,
                body: r.body,
                author: login(r.user),
            })
            .collect())
    }

    pub fn review_comments(&self, pull: u64, review: i64) -> Result<Vec<ReviewComment>> {
        let path = self.repo_path(&format!("/pulls/{pull}/reviews/{review}/comments"));
        let comments: Vec<ApiReviewComment> = self.get_json(&path)?;
        Ok(comments
            .into_iter()
            .map(|c| ReviewComment {
                path: c.path,
                // `position` is the line in the new file, `original_position` in the old one; 0 is none.
                line: [c.position, c.original_position]
                    .into_iter()
                    .flatten()
                    .find(|line| *line > 0),
                body: c.body,
                author: login(c.user),
            })
            .collect())
    }

    fn repo_path(&self, rest: &str) -> String {
        format!("/repos/{}/{}{rest}", self.owner, self.name)
    }

    fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let reply = self.send(path, Method::Get(&[]))?;
        if reply.status != 200 {
            return Err(self.failure("GET", path, &reply));
        }
        parse(&reply, path)
    }

    fn post_json<T: DeserializeOwned>(&self, path: &str, body: Value, expected: u16) -> Result<T> {
        let reply = self.send(path, Method::Post(body))?;
        if reply.status != expected {
            return Err(self.failure("POST", path, &reply));
        }
        parse(&reply, path)
    }

    /// Every item of a paged list. Pages are counted here (never by following `Link`) until the
    /// server's `X-Total-Count` is reached or, without it, a page comes back short.
    fn get_all<T: DeserializeOwned>(&self, path: &str, query: &[(&str, &str)]) -> Result<Vec<T>> {
        let limit = PAGE_SIZE.to_string();
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let page = page.to_string();
            let mut paged = query.to_vec();
            paged.extend([("page", page.as_str()), ("limit", limit.as_str())]);
            let reply = self.send(path, Method::Get(&paged))?;
            if reply.status != 200 {
                return Err(self.failure("GET", path, &reply));
            }
            let items: Vec<T> = parse(&reply, path)?;
            let count = items.len();
            all.extend(items);
            let done = match reply.total {
                Some(total) => all.len() >= total || count == 0,
                None => count < PAGE_SIZE,
            };
            if done {
                return Ok(all);
            }
        }
        bail!(
            "the forge at {} kept answering GET {path} past {MAX_PAGES} pages",
            self.base_url
        )
    }

    /// Sends a request, again after a transient failure when `method` may be repeated. Transport
    /// failures and a rejected token are errors here; other statuses are for the caller to judge.
    fn send(&self, path: &str, method: Method) -> Result<Reply> {
        // Redacted once, before the first try: what is sent never holds a secret.
        let method = match method {
            Method::Post(body) => Method::Post(redact_json(&self.redactor, body)),
            Method::IdempotentPost(body) => {
                Method::IdempotentPost(redact_json(&self.redactor, body))
            }
            Method::Patch(body) => Method::Patch(redact_json(&self.redactor, body)),
            Method::Probe(body) => Method::Probe(redact_json(&self.redactor, body)),
            other => other,
        };
        let attempts = method.attempts();
        let mut attempt = 1;
        loop {
            let wait = match self.send_once(path, &method) {
                Ok(reply) if is_transient_status(reply.status) && attempt < attempts => {
                    backoff(attempt, reply.retry_after)
                }
                Err(error) if error.is::<Transient>() && attempt < attempts => {
                    backoff(attempt, None)
                }
                Err(error) if error.is::<Transient>() && attempts > 1 => {
                    return Err(anyhow!(Transient(format!(
                        "{error} (after {attempts} tries)"
                    ))));
                }
                done => return done,
            };
            std::thread::sleep(wait);
            attempt += 1;
        }
    }

    fn send_once(&self, path: &str, method: &Method) -> Result<Reply> {
        let url = format!("{}/api/v1{path}", self.base_url);
        let auth = format!("token {}", self.token);
        let result = match method {
            Method::Get(query) => self
                .agent
                .get(&url)
                .header("Authorization", &auth)
                .query_pairs(query.iter().copied())
                .call(),
            Method::Post(body) | Method::IdempotentPost(body) | Method::Probe(body) => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send_json(body),
            Method::Patch(body) => self
                .agent
                .patch(&url)
                .header("Authorization", &auth)
                .send_json(body),
            Method::Delete => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
        };
        let mut response = result.map_err(|e| self.unreachable(&e))?;
        let status = response.status().as_u16();
        let answers = status == 403 && matches!(method, Method::Probe(_));
        if matches!(status, 401 | 403) && !answers {
            bail!(
                "the forge rejected {} (HTTP {status}) at {}: check the token in .sandcastle/.env",
                self.token_name,
                self.base_url
            );
        }
        let total = response
            .headers()
            .get("X-Total-Count")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let retry_after = response
            .headers()
            .get("Retry-After")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let text = response.body_mut().read_to_string().map_err(|e| {
            anyhow!(Transient(format!(
                "reading the forge's answer to {path} from {}: {e}",
                self.base_url
            )))
        })?;
        Ok(Reply {
            status,
            total,
            retry_after,
            text,
        })
    }

    fn unreachable(&self, error: &ureq::Error) -> anyhow::Error {
        let refused = matches!(error, ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
            || matches!(error, ureq::Error::ConnectionFailed);
        let message = if refused {
            format!(
                "cannot reach the forge at {}: connection refused; check forgeHost in .sandcastle/config.toml",
                self.base_url
            )
        } else {
            format!(
                "cannot reach the forge at {}: {}",
                self.base_url,
                one_line(&error.to_string())
            )
        };
        anyhow!(Transient(message))
    }

    /// A one-line error for an unexpected status, with the forge's own message.
    fn failure(&self, method: &str, path: &str, reply: &Reply) -> anyhow::Error {
        let message = serde_json::from_str::<Value>(&reply.text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| reply.text.chars().take(200).collect());
        let message = format!(
            "the forge at {} answered {method} {path} with HTTP {}: {}",
            self.base_url,
            reply.status,
            one_line(&message)
        );
        if is_transient_status(reply.status) {
            anyhow!(Transient(message))
        } else {
            anyhow!(message)
        }
    }
}

fn parse<T: DeserializeOwned>(reply: &Reply, path: &str) -> Result<T> {
    serde_json::from_str(&reply.text)
        .with_context(|| format!("unexpected JSON from the forge for {path}"))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every string in `value`, redacted.
fn redact_json(redactor: &Redactor, value: Value) -> Value {
    match value {
        Value::String(text) => Value::String(redactor.redact(&text)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| redact_json(redactor, v))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, redact_json(redactor, v)))
                .collect(),
        ),
        other => other,
    }
}

fn login(user: Option<ApiUser>) -> String {
    user.map(|u| u.login).unwrap_or_default()
}

/// Go encodes nil slices and pointers as `null`; read those as the default.
fn null_as_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct ApiUser {
    login: String,
}

#[derive(Deserialize)]
struct ApiRepo {
    default_branch: String,
    #[serde(default)]
    permissions: Option<ApiRepoPermissions>,
}

/// A repository's `permissions` as the token's login has them.
#[derive(Deserialize)]
struct ApiRepoPermissions {
    #[serde(default)]
    admin: bool,
    #[serde(default)]
    push: bool,
}

#[derive(Deserialize)]
struct ApiIssue {
    number: u64,
    title: String,
    #[serde(default, deserialize_with = "null_as_default")]
    body: String,
    #[serde(default, deserialize_with = "null_as_default")]
    labels: Vec<Label>,
    #[serde(default)]
    pull_request: Option<Value>,
    #[serde(default, deserialize_with = "null_as_default")]
    updated_at: String,
    #[serde(default, deserialize_with = "null_as_default")]
    state: String,
}

impl From<ApiIssue> for Issue {
    fn from(issue: ApiIssue) -> Issue {
        Issue {
            number: issue.number,
            title: issue.title,
            body: issue.body,
            labels: issue.labels.into_iter().map(|l| l.name).collect(),
            updated_at: issue.updated_at,
        }
    }
}

#[derive(Deserialize)]
struct ApiPull {
    number: u64,
    title: String,
    #[serde(default)]
    user: Option<ApiUser>,
    head: ApiBranch,
    base: ApiBranch,
    #[serde(default, deserialize_with = "null_as_default")]
    labels: Vec<Label>,
    #[serde(default, deserialize_with = "null_as_default")]
    updated_at: String,
    #[serde(default)]
    mergeable: Option<bool>,
}

#[derive(Deserialize)]
struct ApiCombinedStatus {
    #[serde(default, deserialize_with = "null_as_default")]
    state: String,
    #[serde(default, deserialize_with = "null_as_default")]
    statuses: Vec<CommitStatus>,
}

#[derive(Deserialize)]
struct ApiBranch {
    #[serde(rename = "ref")]
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    sha: String,
    #[serde(default)]
    repo: Option<ApiBranchRepo>,
}

#[derive(Deserialize)]
struct ApiBranchRepo {
    full_name: String,
}

#[derive(Deserialize)]
struct ApiPermission {
    #[serde(default, deserialize_with = "null_as_default")]
    permission: String,
}

impl From<ApiPull> for Pull {
    fn from(pull: ApiPull) -> Pull {
        Pull {
            number: pull.number,
            title: pull.title,
            author: login(pull.user),
            head_branch: pull.head.name,
            head_repo: pull.head.repo.map(|r| r.full_name),
            base_branch: pull.base.name,
            labels: pull.labels.into_iter().map(|l| l.name).collect(),
            updated_at: pull.updated_at,
            head_sha: pull.head.sha,
            mergeable: pull.mergeable,
        }
    }
}

#[derive(Deserialize)]
struct ApiComment {
    id: i64,
    #[serde(default, deserialize_with = "null_as_default")]
    body: String,
    #[serde(default)]
    user: Option<ApiUser>,
}

#[derive(Deserialize)]
struct ApiReview {
    id: i64,
    #[serde(default, deserialize_with = "null_as_default")]
    state: String,
    #[serde(default, deserialize_with = "null_as_default")]
    body: String,
    #[serde(default)]
    user: Option<ApiUser>,
}

#[derive(Deserialize)]
struct ApiReviewComment {
    #[serde(default, deserialize_with = "null_as_default")]
    path: String,
    #[serde(default)]
    position: Option<u64>,
    #[serde(default)]
    original_position: Option<u64>,
    #[serde(default, deserialize_with = "null_as_default")]
    body: String,
    #[serde(default)]
    user: Option<ApiUser>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use fake_forge::FakeForge;

    const REPO: &str = "alice/demo";

    /// A forge with users `alice` (who the client acts as) and `bob`, and the repository.
    fn setup() -> (FakeForge, Forge) {
        let forge = FakeForge::start();
        let token = forge.add_user("alice");
        forge.add_user("bob");
        forge.create_repo("alice", "demo", "main").unwrap();
        let client = Forge::new(forge.url(), REPO, &token);
        (forge, client)
    }

    fn assert_conforms(forge: &FakeForge) {
        assert_eq!(
            forge.schema_violations(),
            Vec::<String>::new(),
            "requests outside Forgejo's swagger"
        );
    }

    fn labelled(forge: &FakeForge, labels: &[&str]) -> Vec<u64> {
        let mut numbers = Vec::new();
        for n in 0..3 {
            numbers.push(
                forge
                    .create_issue(REPO, "bob", &format!("issue {n}"), "body", labels)
                    .unwrap(),
            );
        }
        numbers
    }

    #[test]
    fn reads_the_user_and_the_default_branch() {
        let forge = FakeForge::start();
        let token = forge.add_user("alice");
        forge.create_repo("alice", "demo", "trunk").unwrap();
        let client = Forge::new(&format!("{}/", forge.url()), REPO, &token);
        assert_eq!(client.current_user().unwrap(), "alice");
        assert_eq!(client.default_branch().unwrap(), "trunk");
        assert_conforms(&forge);
    }

    /// An HTTPS forge whose certificate a CA in `SSL_CERT_FILE` signed is read when the client
    /// trusts those roots, and refused without them (Mozilla's alone).
    #[test]
    fn an_https_forge_is_read_with_the_roots_of_ssl_cert_file() {
        use sandcastle_testkit::tls::{https_front, test_ca};
        let forge = FakeForge::start();
        let token = forge.add_user("alice");
        forge.create_repo("alice", "demo", "trunk").unwrap();
        let (ca, pem) = test_ca("sandcastle test CA");
        let port: u16 = forge.url().rsplit(':').next().unwrap().parse().unwrap();
        let https = https_front(port, &ca);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, pem).unwrap();
        let path = path.to_str().unwrap().to_string();
        let roots = Roots::load(|key| (key == "SSL_CERT_FILE").then(|| path.clone())).unwrap();

        let client = Forge::new(&https, REPO, &token).trusting(&roots);
        assert_eq!(client.default_branch().unwrap(), "trunk");
        let error = Forge::new(&https, REPO, &token)
            .default_branch()
            .unwrap_err();
        assert!(format!("{error:#}").contains("certificate"), "{error:#}");
    }

    #[test]
    fn a_rejected_token_is_one_line_naming_the_forge_and_not_the_token() {
        let (forge, _) = setup();
        let secret = "0123456789abcdef0123456789abcdef01234567";
        let client = Forge::new(forge.url(), REPO, secret);
        let error = format!("{:#}", client.current_user().unwrap_err());
        assert_eq!(
            error,
            format!(
                "the forge rejected FORGEJO_TOKEN (HTTP 401) at {}: check the token in .sandcastle/.env",
                forge.url()
            )
        );
        let error = format!("{:#}", client.ensure_labels().unwrap_err());
        assert!(
            error.contains("HTTP 401") && !error.contains(secret),
            "{error}"
        );
        assert!(forge.labels(REPO).is_empty());
    }

    #[test]
    fn a_forge_that_is_not_running_is_one_line_naming_its_url() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let client = Forge::new(&url, REPO, "token");
        let error = format!("{:#}", client.current_user().unwrap_err());
        assert!(
            error.contains(&url) && error.contains("connection refused") && !error.contains('\n'),
            "{error}"
        );
    }

    fn fault(status: u16, retry_after: Option<u64>) -> fake_forge::Fault {
        fake_forge::Fault {
            status,
            retry_after,
        }
    }

    #[test]
    fn reads_are_retried_after_429_with_retry_after_and_after_5xx() {
        let (forge, client) = setup();
        forge.create_label(REPO, "bug", "#ff0000").unwrap();
        forge
            .inject_faults("GET /repos/{owner}/{repo}/labels", 1, fault(429, Some(1)))
            .unwrap();
        forge
            .inject_faults("GET /repos/{owner}/{repo}/labels", 2, fault(503, None))
            .unwrap();
        let started = std::time::Instant::now();
        let labels = client.labels().unwrap();
        assert_eq!(labels.len(), 1, "read once, whole");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "Retry-After was honoured"
        );
        assert_eq!(forge.pending_faults(), 0);

        forge
            .inject_faults("GET /user", ATTEMPTS as usize, fault(502, None))
            .unwrap();
        let error = format!("{:#}", client.current_user().unwrap_err());
        assert!(error.contains("GET /user with HTTP 502"), "{error}");
        assert_eq!(forge.pending_faults(), 0, "bounded: {ATTEMPTS} tries");
        assert_eq!(client.current_user().unwrap(), "alice");
        assert_conforms(&forge);
    }

    #[test]
    fn writes_are_retried_only_where_a_repeat_doubles_nothing() {
        let (forge, client) = setup();
        client.ensure_labels().unwrap();
        let number = forge.create_issue(REPO, "bob", "t", "", &[]).unwrap();

        // Adding labels an issue has changes nothing: retried.
        forge
            .inject_faults(
                "POST /repos/{owner}/{repo}/issues/{index}/labels",
                1,
                fault(500, None),
            )
            .unwrap();
        client.add_labels(number, &["in-review"]).unwrap();
        assert_eq!(forge.issues(REPO)[0].labels, ["in-review"]);

        // A comment whose answer was lost may exist: sent once, the failure reported.
        forge
            .inject_faults(
                "POST /repos/{owner}/{repo}/issues/{index}/comments",
                1,
                fault(503, None),
            )
            .unwrap();
        let error = format!(
            "{:#}",
            client.comment(number, &Post::new("once")).unwrap_err()
        );
        assert!(error.contains("HTTP 503"), "{error}");
        assert!(forge.comments(REPO, number).is_empty());
        client.comment(number, &Post::new("once")).unwrap();
        assert_eq!(forge.comments(REPO, number).len(), 1);

        // Opening a pull request looks again before each try: one pull request.
        forge
            .commit_file(REPO, "sandcastle/issue-1", "a.txt", "a\n", "A")
            .unwrap();
        forge
            .inject_faults("POST /repos/{owner}/{repo}/pulls", 2, fault(502, None))
            .unwrap();
        let pull = client
            .open_pull(
                "alice",
                "sandcastle/issue-1",
                "main",
                &Post::new("Issue 1"),
                &Post::closing(1, ""),
            )
            .unwrap();
        assert_eq!(forge.pulls(REPO).len(), 1);
        assert_eq!(forge.pulls(REPO)[0].number, pull.number);
        assert_eq!(forge.pending_faults(), 0);
        assert_conforms(&forge);
    }

    #[test]
    fn an_operation_outside_the_swagger_cannot_be_faulted() {
        let (forge, _) = setup();
        let error = forge
            .inject_faults("GET /repos/{owner}/{repo}/nothing", 1, fault(500, None))
            .unwrap_err();
        assert!(format!("{error}").contains("not an operation"), "{error}");
    }

    #[test]
    fn ensure_labels_creates_only_the_missing_lifecycle_labels() {
        let (forge, client) = setup();
        forge.create_label(REPO, "in-review", "#fbca04").unwrap();
        forge.create_label(REPO, "bug", "#ff0000").unwrap();
        let labels = client.ensure_labels().unwrap();
        let mut names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "bug",
                "epic",
                "in-review",
                "needs-info",
                "ready-for-agent",
                "ready-for-human"
            ]
        );
        assert_eq!(
            client.ensure_labels().unwrap().len(),
            6,
            "a second call creates nothing"
        );
        assert_eq!(forge.labels(REPO).len(), 6);
        let agent = forge
            .labels(REPO)
            .into_iter()
            .find(|l| l.name == "ready-for-agent")
            .unwrap();
        assert_eq!(agent.color, "0e8a16");
        assert_conforms(&forge);
    }

    #[test]
    fn open_issues_have_all_labels_span_pages_and_exclude_pulls() {
        let (forge, client) = setup();
        client.ensure_labels().unwrap();
        let mut ready = Vec::new();
        for n in 0..60 {
            ready.push(
                forge
                    .create_issue(
                        REPO,
                        "bob",
                        &format!("issue {n}"),
                        "body",
                        &["ready-for-agent"],
                    )
                    .unwrap(),
            );
        }
        let epics = labelled(&forge, &["ready-for-agent", "epic"]);
        forge
            .create_issue(REPO, "bob", "unlabelled", "", &[])
            .unwrap();
        forge
            .commit_file(REPO, "sandcastle/issue-1", "a.txt", "a\n", "A")
            .unwrap();
        forge
            .create_pull(
                REPO,
                "alice",
                "sandcastle/issue-1",
                "main",
                "PR",
                &["ready-for-agent"],
            )
            .unwrap();

        let mut found: Vec<u64> = client
            .open_issues(&["ready-for-agent"])
            .unwrap()
            .iter()
            .map(|i| i.number)
            .collect();
        found.sort_unstable();
        let mut expected: Vec<u64> = ready.iter().chain(&epics).copied().collect();
        expected.sort_unstable();
        assert_eq!(found, expected, "every page, no pull request");

        let both = client.open_issues(&["ready-for-agent", "epic"]).unwrap();
        let mut both_numbers: Vec<u64> = both.iter().map(|i| i.number).collect();
        both_numbers.sort_unstable();
        assert_eq!(both_numbers, epics);
        assert!(
            both.iter()
                .all(|i| i.labels.contains(&"epic".to_string()) && i.body == "body")
        );
        assert!(
            client
                .open_issues(&["ready-for-agent", "no-such-label"])
                .unwrap()
                .is_empty(),
            "a label the forge does not know matches nothing, although the forge ignores it"
        );
        assert_conforms(&forge);
    }

    #[test]
    fn paging_never_follows_link_urls() {
        let forge = FakeForge::start_with_root_url("http://127.0.0.1:9/");
        let token = forge.add_user("alice");
        forge.create_repo("alice", "demo", "main").unwrap();
        for n in 0..120 {
            forge
                .create_issue(REPO, "alice", &format!("issue {n}"), "", &[])
                .unwrap();
        }
        let client = Forge::new(forge.url(), REPO, &token);
        assert_eq!(client.open_issues(&[]).unwrap().len(), 120);
        assert_conforms(&forge);
    }

    #[test]
    fn issue_reads_one_issue_and_refuses_a_pull_request() {
        let (forge, client) = setup();
        client.ensure_labels().unwrap();
        let number = forge
            .create_issue(REPO, "bob", "Fix it", "Details", &["ready-for-agent"])
            .unwrap();
        let issue = client.issue(number).unwrap();
        assert_eq!(
            (issue.title.as_str(), issue.body.as_str()),
            ("Fix it", "Details")
        );
        assert_eq!(issue.labels, ["ready-for-agent"]);
        forge
            .commit_file(REPO, "feature", "a.txt", "a\n", "A")
            .unwrap();
        let pull = forge
            .create_pull(REPO, "alice", "feature", "main", "PR", &[])
            .unwrap();
        assert!(format!("{:#}", client.issue(pull).unwrap_err()).contains("is a pull request"));
        assert!(format!("{:#}", client.issue(999).unwrap_err()).contains("HTTP 404"));
        assert_conforms(&forge);
    }

    #[test]
    fn open_pull_reuses_the_open_pull_request_of_the_branch() {
        let (forge, client) = setup();
        forge
            .commit_file(REPO, "sandcastle/issue-7", "a.txt", "a\n", "A")
            .unwrap();
        let first = client
            .open_pull(
                "alice",
                "sandcastle/issue-7",
                "main",
                &Post::new("Issue 7"),
                &Post::closing(7, ""),
            )
            .unwrap();
        assert_eq!(first.head_branch, "sandcastle/issue-7");
        let again = client
            .open_pull(
                "alice",
                "sandcastle/issue-7",
                "main",
                &Post::new("Issue 7"),
                &Post::closing(7, ""),
            )
            .unwrap();
        assert_eq!(again.number, first.number);
        // The race: the pull request appeared after the look, so the forge answers 409.
        let raced = client
            .create_pull(
                "alice",
                "sandcastle/issue-7",
                "main",
                &Post::new("Issue 7"),
                &Post::closing(7, ""),
            )
            .unwrap();
        assert_eq!(raced.number, first.number);
        let pulls = forge.pulls(REPO);
        assert_eq!(pulls.len(), 1);
        assert_eq!(
            (pulls[0].body.as_str(), pulls[0].author.as_str()),
            ("Closes #7\n\n", "alice")
        );
        assert_eq!(client.open_pulls().unwrap().len(), 1);
        let missing = client
            .open_pull(
                "alice",
                "no-such-branch",
                "main",
                &Post::new("x"),
                &Post::new("y"),
            )
            .unwrap_err();
        assert!(format!("{missing:#}").contains("HTTP 404"), "{missing:#}");
        assert_conforms(&forge);
    }

    /// Someone else's pull request from the same branch name, here or in a fork, is never taken
    /// for sandcastle's own; each says who opened it and where its head lives.
    #[test]
    fn only_the_authors_own_pull_request_from_this_repository_is_reused() {
        let (forge, client) = setup();
        let mallory = forge.add_user("mallory");
        forge.create_fork("mallory", REPO).unwrap();
        forge
            .commit_file(
                "mallory/demo",
                "sandcastle/issue-3",
                "a.txt",
                "evil\n",
                "Evil",
            )
            .unwrap();
        let theirs = Forge::new(forge.url(), REPO, &mallory);
        let fork_pull = theirs
            .create_pull(
                "mallory",
                "mallory:sandcastle/issue-3",
                "main",
                &Post::new("Fork"),
                &Post::closing(3, ""),
            )
            .unwrap();
        assert_eq!(fork_pull.author, "mallory");
        assert_eq!(fork_pull.head_repo.as_deref(), Some("mallory/demo"));
        assert_eq!(fork_pull.base_branch, "main");

        forge
            .commit_file(REPO, "sandcastle/issue-3", "b.txt", "ours\n", "Ours")
            .unwrap();
        let ours = client
            .open_pull(
                "alice",
                "sandcastle/issue-3",
                "main",
                &Post::new("Issue 3"),
                &Post::closing(3, ""),
            )
            .unwrap();
        assert_ne!(
            ours.number, fork_pull.number,
            "the fork's pull request is not reused"
        );
        assert_eq!(
            (ours.author.as_str(), ours.head_repo.as_deref()),
            ("alice", Some(REPO))
        );
        assert_conforms(&forge);
    }

    /// The forge is one of the sinks: a secret in anything sent is redacted, whoever forgot.
    #[test]
    fn every_string_sent_is_redacted() {
        let (forge, client) = setup();
        let redactor = Redactor::new(&crate::secrets::EnvFile {
            vars: vec![("ANTHROPIC_API_KEY".into(), "sk-forge-sink-secret".into())],
        });
        let client = client.redacting(redactor);
        let number = forge.create_issue(REPO, "bob", "t", "", &[]).unwrap();
        client
            .comment(number, &Post::new("- Commit sk-forge-sink-secret leaked\n"))
            .unwrap();
        let comments = forge.comments(REPO, number);
        assert_eq!(comments[0].body, "- Commit [redacted] leaked\n");
        assert_conforms(&forge);
    }

    #[test]
    fn write_access_is_read_from_the_permission_api() {
        let (forge, client) = setup();
        forge.add_user("carol");
        forge.add_collaborator(REPO, "bob", "write").unwrap();
        assert!(client.can_write("alice").unwrap(), "the owner");
        assert!(client.can_write("bob").unwrap(), "a writer");
        assert!(!client.can_write("carol").unwrap(), "a reader");
        assert!(!client.can_write("../../user").unwrap(), "no login");
        assert!(format!("{:#}", client.can_write("nobody").unwrap_err()).contains("HTTP 404"));
        assert_conforms(&forge);
    }

    #[test]
    fn labels_are_added_and_removed_by_name() {
        let (forge, client) = setup();
        client.ensure_labels().unwrap();
        let number = forge
            .create_issue(REPO, "bob", "t", "", &["ready-for-agent"])
            .unwrap();
        client.add_labels(number, &["in-review", "epic"]).unwrap();
        client.remove_label(number, "ready-for-agent").unwrap();
        client.remove_label(number, "ready-for-agent").unwrap();
        client.remove_label(number, "no-such-label").unwrap();
        let mut labels = forge.issues(REPO)[0].labels.clone();
        labels.sort_unstable();
        assert_eq!(labels, ["epic", "in-review"]);
        let unknown = client.add_labels(number, &["no-such-label"]).unwrap_err();
        assert!(
            format!("{unknown:#}").contains("\"no-such-label\" does not exist"),
            "{unknown:#}"
        );
        assert_conforms(&forge);
    }

    #[test]
    fn comments_are_written_and_read() {
        let (forge, client) = setup();
        let number = forge.create_issue(REPO, "bob", "t", "", &[]).unwrap();
        let id = client
            .comment(number, &Post::new("Could not finish: tests fail."))
            .unwrap();
        let comments = client.comments(number).unwrap();
        assert_eq!(comments.len(), 1);
        assert_eq!(
            (
                comments[0].id,
                comments[0].body.as_str(),
                comments[0].author.as_str()
            ),
            (id, "Could not finish: tests fail.", "alice")
        );
        client.edit_comment(id, &Post::new("Edited.")).unwrap();
        assert_eq!(client.comments(number).unwrap()[0].body, "Edited.");
        assert!(client.edit_comment(id + 100, &Post::new("x")).is_err());
        assert_conforms(&forge);
    }

    #[test]
    fn reviews_and_their_inline_comments_are_read() {
        let (forge, client) = setup();
        forge
            .commit_file(REPO, "sandcastle/issue-1", "src/lib.rs", "fn a() {}\n", "A")
            .unwrap();
        let pull = client
            .open_pull(
                "alice",
                "sandcastle/issue-1",
                "main",
                &Post::new("Issue 1"),
                &Post::closing(1, ""),
            )
            .unwrap()
            .number;
        let inline = [("src/lib.rs", 1, "Name this better.")];
        let id = forge
            .create_review(REPO, pull, "bob", "REQUEST_CHANGES", "Needs work.", &inline)
            .unwrap();
        forge
            .create_review(REPO, pull, "bob", "COMMENT", "Also a thought.", &[])
            .unwrap();

        let reviews = client.reviews(pull).unwrap();
        assert_eq!(reviews.len(), 2);
        assert_eq!(
            (reviews[0].id, reviews[0].state.as_str()),
            (id, "REQUEST_CHANGES")
        );
        assert_eq!(
            (reviews[0].body.as_str(), reviews[0].author.as_str()),
            ("Needs work.", "bob")
        );
        let comments = client.review_comments(pull, id).unwrap();
        assert_eq!(comments.len(), 1);
        assert_eq!(
            (comments[0].path.as_str(), comments[0].line),
            ("src/lib.rs", Some(1))
        );
        assert_eq!(
            (comments[0].body.as_str(), comments[0].author.as_str()),
            ("Name this better.", "bob")
        );
        assert!(
            client.comments(pull).unwrap().is_empty(),
            "review bodies are not comments"
        );
        assert_conforms(&forge);
    }
}
