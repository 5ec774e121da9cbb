//! The REST API under `/api/v1`: each request is checked against the swagger on the way in and on
//! the way out; a mismatch becomes a 500 and a recorded violation.
use std::collections::HashMap;

use serde_json::{Value, json};
use tiny_http::{Header, Request, Response};

use crate::auth::{credentials, token_user};
use crate::clock::now;
use crate::git;
use crate::records::Review;
use crate::render::{PullGit, Render};
use crate::shared::{NewPull, Shared};
use crate::state::{ApiError, ApiResult, NewIssue, NewReview, Repo, State, StoredIssue};
use crate::swagger::Matched;

const DEFAULT_PAGE_SIZE: usize = 30;
const MAX_PAGE_SIZE: usize = 50;

/// A response before it is checked and sent.
struct Reply {
    status: u16,
    body: Option<Value>,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            body: Some(body),
            headers: Vec::new(),
        }
    }
    fn empty() -> Reply {
        Reply {
            status: 204,
            body: None,
            headers: Vec::new(),
        }
    }
}

pub fn handle(shared: &Shared, mut request: Request) {
    let method = request.method().as_str().to_ascii_uppercase();
    let url = request.url().to_string();
    let (path, raw_query) = url.split_once('?').unwrap_or((&url, ""));
    let api_path = path.strip_prefix("/api/v1").unwrap_or(path);
    let query = parse_query(raw_query);
    let body = read_body(&mut request);
    let reply = match shared.swagger.route(&method, api_path) {
        None => violation(
            shared,
            format!("{method} {path} is not an operation of Forgejo's swagger"),
        ),
        Some(matched) => {
            let call = Incoming {
                method: &method,
                api_path,
                query: &query,
                body,
            };
            serve(shared, &request, &matched, call)
        }
    };
    send(request, reply);
}

struct Incoming<'a> {
    method: &'a str,
    api_path: &'a str,
    query: &'a [(String, String)],
    body: Result<Option<Value>, String>,
}

fn serve(shared: &Shared, request: &Request, matched: &Matched, incoming: Incoming) -> Reply {
    let op = matched.operation;
    let where_ = format!("{} /api/v1{}", incoming.method, incoming.api_path);
    shared.receive(incoming.method, incoming.api_path);
    if let Some(fault) = shared.take_fault(incoming.method, &op.template) {
        let mut reply = error_reply(shared, fault.status, "fake-forge: an injected fault");
        if let Some(seconds) = fault.retry_after {
            reply
                .headers
                .push(("Retry-After".to_string(), seconds.to_string()));
        }
        return match shared
            .swagger
            .check_response(op, reply.status, reply.body.as_ref())
        {
            Ok(()) => reply,
            Err(e) => violation(shared, format!("{where_}: {e:#}")),
        };
    }
    let body = incoming.body.map_err(anyhow::Error::msg).and_then(|body| {
        shared.swagger.check_query(op, incoming.query)?;
        shared.swagger.check_request_body(op, body.as_ref())?;
        Ok(body)
    });
    let body = match body {
        Ok(body) => body.unwrap_or(Value::Null),
        Err(e) => return violation(shared, format!("{where_}: {e:#}")),
    };
    // The token's scope is checked before anything else of the route, as Forgejo does.
    let (caller, refusal) = match token_user(&shared.state(), &credentials(request)) {
        Ok(user) => (
            user.map(|u| u.login.clone()),
            user.and_then(|u| u.scopes.refusal(incoming.method, &op.template)),
        ),
        Err(reason) => return error_reply(shared, 401, &reason),
    };
    if let Some(message) = refusal {
        return error_reply(shared, 403, &message);
    }
    let call = Call {
        shared,
        params: &matched.params,
        query: incoming.query,
        body,
        caller,
        api_path: incoming.api_path,
    };
    let reply = match dispatch(incoming.method, &op.template, &call) {
        Ok(reply) => reply,
        Err(e) if e.status == 501 => {
            return violation(
                shared,
                format!("{where_}: fake-forge does not implement {}", e.message),
            );
        }
        Err(e) => error_reply(shared, e.status, &e.message),
    };
    match shared
        .swagger
        .check_response(op, reply.status, reply.body.as_ref())
    {
        Ok(()) => reply,
        Err(e) => violation(shared, format!("{where_}: {e:#}")),
    }
}

/// The operation `method` `template` names, each its own function.
fn dispatch(method: &str, template: &str, call: &Call) -> ApiResult<Reply> {
    match (method, template) {
        ("GET", "/version") => version(),
        ("GET", "/user") => current_user(call),
        ("GET", "/repos/{owner}/{repo}") => get_repo(call),
        ("POST", "/repos/migrate") => migrate(call),
        ("GET", "/repos/{owner}/{repo}/labels") => list_labels(call),
        ("POST", "/repos/{owner}/{repo}/labels") => create_label(call),
        ("GET", "/repos/{owner}/{repo}/issues") => list_issues(call),
        ("POST", "/repos/{owner}/{repo}/issues") => create_issue(call),
        ("GET", "/repos/{owner}/{repo}/issues/{index}") => get_issue(call),
        ("GET", "/repos/{owner}/{repo}/issues/{index}/labels") => list_issue_labels(call),
        ("POST", "/repos/{owner}/{repo}/issues/{index}/labels") => add_issue_labels(call),
        ("DELETE", "/repos/{owner}/{repo}/issues/{index}/labels/{id}") => remove_issue_label(call),
        ("GET", "/repos/{owner}/{repo}/issues/{index}/comments") => list_comments(call),
        ("POST", "/repos/{owner}/{repo}/issues/{index}/comments") => create_comment(call),
        ("GET", "/repos/{owner}/{repo}/issues/{index}/timeline") => timeline(call),
        ("GET", "/repos/{owner}/{repo}/commits") => list_commits(call),
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{id}") => edit_comment(call),
        ("DELETE", "/repos/{owner}/{repo}/issues/comments/{id}") => delete_comment(call),
        ("GET", "/repos/{owner}/{repo}/pulls") => list_pulls(call),
        ("POST", "/repos/{owner}/{repo}/pulls") => create_pull(call),
        ("GET", "/repos/{owner}/{repo}/pulls/{index}") => get_pull(call),
        ("GET", "/repos/{owner}/{repo}/pulls/{index}/reviews") => list_reviews(call),
        ("POST", "/repos/{owner}/{repo}/pulls/{index}/reviews") => create_review(call),
        ("GET", "/repos/{owner}/{repo}/pulls/{index}/merge") => is_merged(call),
        ("POST", "/repos/{owner}/{repo}/pulls/{index}/merge") => merge_pull(call),
        ("POST", "/repos/{owner}/{repo}/statuses/{sha}") => create_status(call),
        ("GET", "/repos/{owner}/{repo}/commits/{ref}/status") => combined_status(call),
        ("GET", "/repos/{owner}/{repo}/collaborators/{collaborator}/permission") => {
            collaborator_permission(call)
        }
        ("GET", "/repos/{owner}/{repo}/pulls/{index}/reviews/{id}") => get_review(call),
        ("GET", "/repos/{owner}/{repo}/pulls/{index}/reviews/{id}/comments") => {
            list_review_comments(call)
        }
        _ => Err(ApiError::new(501, format!("{method} {template}"))),
    }
}

fn version() -> ApiResult<Reply> {
    Ok(Reply::json(200, json!({"version": "12.0.0+gitea-1.22.0"})))
}

fn current_user(call: &Call) -> ApiResult<Reply> {
    let login = call.caller()?;
    let state = call.shared.state();
    Ok(Reply::json(200, call.render().login(&state.users, login)))
}

/// Only Forgejo's refusal of a migration without a source or a name (its `binding:"Required"`,
/// checked after the token's scope): the fake migrates nothing.
fn migrate(call: &Call) -> ApiResult<Reply> {
    call.caller()?;
    for (field, go_name) in [("clone_addr", "CloneAddr"), ("repo_name", "RepoName")] {
        if call.text(field).trim().is_empty() {
            return Err(ApiError::invalid(format!("[{go_name}]: Required")));
        }
    }
    Err(ApiError::new(501, "POST /repos/migrate of a repository"))
}

fn get_repo(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let caller = call.caller.as_deref();
        Ok(Reply::json(
            200,
            call.render().repo(&state.users, repo, caller),
        ))
    })
}

fn get_issue(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let issue = repo.issue(call.index()?)?;
        Ok(Reply::json(
            200,
            call.render().issue(&state.users, repo, issue),
        ))
    })
}

fn list_issue_labels(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|_, repo| {
        let issue = repo.issue(call.index()?)?;
        Ok(Reply::json(200, issue_labels(call, repo, issue)))
    })
}

fn list_comments(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let issue = repo.issue(call.index()?)?;
        let render = call.render();
        let comments = repo
            .comments_on(issue.number)
            .map(|c| render.comment(&state.users, repo, issue, c));
        Ok(Reply::json(200, comments.collect()))
    })
}

fn get_pull(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let pull = repo.pull(call.index()?)?;
        Ok(Reply::json(200, render_pull(call, state, repo, pull)))
    })
}

fn list_reviews(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let pull = repo.pull(call.index()?)?;
        let render = call.render();
        let reviews = repo
            .reviews_on(pull.number)
            .map(|r| render.review(&state.users, repo, pull, r))
            .collect();
        Ok(call.page(reviews))
    })
}

/// 204 when the pull request is merged, 404 when not; both answers have no body.
fn is_merged(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|_, repo| {
        let pull = repo.pull(call.index()?)?;
        let merged = pull.merged.is_some();
        Ok(Reply {
            status: if merged { 204 } else { 404 },
            body: None,
            headers: Vec::new(),
        })
    })
}

fn get_review(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let pull = repo.pull(call.index()?)?;
        let review = find_review(call, repo, pull)?;
        Ok(Reply::json(
            200,
            call.render().review(&state.users, repo, pull, review),
        ))
    })
}

fn list_review_comments(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|state, repo| {
        let pull = repo.pull(call.index()?)?;
        let review = find_review(call, repo, pull)?;
        let render = call.render();
        let comments = review
            .comments
            .iter()
            .map(|c| render.review_comment(&state.users, repo, pull, review, c));
        Ok(Reply::json(200, comments.collect()))
    })
}

/// One API call: the matched path parameters, the query, the JSON body and the caller.
struct Call<'a> {
    shared: &'a Shared,
    params: &'a HashMap<String, String>,
    query: &'a [(String, String)],
    body: Value,
    caller: Option<String>,
    api_path: &'a str,
}

impl Call<'_> {
    fn render(&self) -> Render<'_> {
        Render {
            root: &self.shared.root_url,
        }
    }

    fn param(&self, name: &str) -> &str {
        self.params.get(name).map_or("", String::as_str)
    }

    fn owner_and_name(&self) -> (&str, &str) {
        (self.param("owner"), self.param("repo"))
    }

    fn index(&self) -> ApiResult<u64> {
        let index = self.param("index");
        index
            .parse()
            .map_err(|_| ApiError::not_found(format!("issue {index} does not exist")))
    }

    fn query(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The caller's login; anonymous callers may only read.
    fn caller(&self) -> ApiResult<&str> {
        self.caller
            .as_deref()
            .ok_or_else(|| ApiError::new(401, "token is required"))
    }

    fn with_repo<T>(&self, f: impl FnOnce(&State, &Repo) -> ApiResult<T>) -> ApiResult<T> {
        let state = self.shared.state();
        let (owner, name) = self.owner_and_name();
        let repo = state.repo(owner, name)?;
        f(&state, repo)
    }

    fn with_repo_mut<T>(&self, f: impl FnOnce(&mut Repo) -> ApiResult<T>) -> ApiResult<T> {
        let mut state = self.shared.state();
        let (owner, name) = self.owner_and_name();
        f(state.repo_mut(owner, name)?)
    }

    fn text(&self, field: &str) -> &str {
        self.body[field].as_str().unwrap_or_default()
    }

    fn ids(&self, field: &str) -> Vec<i64> {
        self.body[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_i64)
            .collect()
    }

    /// Refuses body fields the fake would otherwise ignore silently.
    fn unsupported_fields(&self, fields: &[&str]) -> ApiResult<()> {
        match fields.iter().find(|f| !self.body[**f].is_null()) {
            Some(field) => Err(ApiError::new(501, format!("the `{field}` field"))),
            None => Ok(()),
        }
    }

    fn unsupported_filters(&self, filters: &[&str]) -> ApiResult<()> {
        match filters.iter().find(|f| self.query(f).is_some()) {
            Some(filter) => Err(ApiError::new(
                501,
                format!("the `{filter}` query parameter"),
            )),
            None => Ok(()),
        }
    }

    /// Forgejo's pagination: `page` from 1, `limit` 30 by default and at most 50, the total in
    /// `X-Total-Count`, and `Link` URLs built from `ROOT_URL`.
    fn page(&self, items: Vec<Value>) -> Reply {
        let page = self
            .query("page")
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
        let limit = match self.query("limit").and_then(|l| l.parse::<usize>().ok()) {
            Some(0) | None => DEFAULT_PAGE_SIZE,
            Some(limit) => limit.min(MAX_PAGE_SIZE),
        };
        let total = items.len();
        let last = total.div_ceil(limit).max(1);
        let link_to = |page: usize, rel: &str| {
            let mut query: Vec<String> = self
                .query
                .iter()
                .filter(|(n, _)| n != "page")
                .map(|(n, v)| format!("{n}={}", encode(v)))
                .collect();
            query.push(format!("page={page}"));
            format!(
                "<{}api/v1{}?{}>; rel=\"{rel}\"",
                self.shared.root_url,
                self.api_path,
                query.join("&")
            )
        };
        let mut links = Vec::new();
        if page < last {
            links.push(link_to(page + 1, "next"));
            links.push(link_to(last, "last"));
        }
        if page > 1 {
            links.push(link_to(1, "first"));
            links.push(link_to(page - 1, "prev"));
        }
        let body: Vec<Value> = items
            .into_iter()
            .skip((page - 1) * limit)
            .take(limit)
            .collect();
        let mut reply = Reply::json(200, Value::Array(body));
        reply
            .headers
            .push(("X-Total-Count".to_string(), total.to_string()));
        if !links.is_empty() {
            reply.headers.push(("Link".to_string(), links.join(",")));
        }
        reply
    }
}

fn list_labels(call: &Call) -> ApiResult<Reply> {
    call.with_repo(|_, repo| {
        let render = call.render();
        Ok(call.page(repo.labels.iter().map(|l| render.label(repo, l)).collect()))
    })
}

fn create_label(call: &Call) -> ApiResult<Reply> {
    call.caller()?;
    call.unsupported_fields(&["exclusive", "is_archived"])?;
    let name = call.text("name");
    if name.trim().is_empty() {
        return Err(ApiError::invalid("name: Required"));
    }
    call.with_repo_mut(|repo| {
        let label = repo
            .add_label(name, call.text("color"), call.text("description"))?
            .clone();
        Ok(Reply::json(201, call.render().label(repo, &label)))
    })
}

/// Forgejo's issue list: `labels` keeps the issues that have ALL of the named labels, after
/// silently dropping names that are no label of the repository.
fn list_issues(call: &Call) -> ApiResult<Reply> {
    call.unsupported_filters(&[
        "q",
        "milestones",
        "since",
        "before",
        "created_by",
        "assigned_by",
        "mentioned_by",
    ])?;
    let oldest_first = match call.query("sort") {
        None | Some("latest") => false,
        Some("oldest") => true,
        Some(other) => return Err(ApiError::new(501, format!("sort={other}"))),
    };
    call.with_repo(|state, repo| {
        let wanted: Vec<&str> = call
            .query("labels")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|name| repo.labels.iter().any(|l| l.name == *name))
            .collect();
        let state_filter = call.query("state").unwrap_or("open");
        let kind = call.query("type");
        let render = call.render();
        let mut issues: Vec<&StoredIssue> = repo
            .issues
            .iter()
            .filter(|i| matches_state(i, state_filter))
            .filter(|i| match kind {
                Some("issues") => i.pull.is_none(),
                Some("pulls") => i.pull.is_some(),
                _ => true,
            })
            .filter(|i| {
                let names = repo.label_names(i);
                wanted.iter().all(|w| names.iter().any(|n| n == w))
            })
            .collect();
        issues.sort_by_key(|i| i.number);
        if !oldest_first {
            issues.reverse();
        }
        Ok(call.page(
            issues
                .into_iter()
                .map(|i| render.issue(&state.users, repo, i))
                .collect(),
        ))
    })
}

fn matches_state(issue: &StoredIssue, filter: &str) -> bool {
    match filter {
        "closed" => issue.closed,
        "all" => true,
        _ => !issue.closed,
    }
}

fn create_issue(call: &Call) -> ApiResult<Reply> {
    let author = call.caller()?.to_string();
    call.unsupported_fields(&["assignee", "assignees", "due_date", "milestone", "ref"])?;
    let label_ids = call.ids("labels");
    let closed = call.body["closed"].as_bool().unwrap_or(false);
    let mut state = call.shared.state();
    let (owner, name) = call.owner_and_name();
    let repo = state.repo_mut(owner, name)?;
    let new = NewIssue {
        author: &author,
        title: call.text("title"),
        body: call.text("body"),
        label_ids: &label_ids,
        pull: None,
        now: now(),
    };
    let number = repo.add_issue(new)?.number;
    if closed {
        repo.close(number)?;
    }
    let repo = state.repo(owner, name)?;
    Ok(Reply::json(
        201,
        call.render().issue(&state.users, repo, repo.issue(number)?),
    ))
}

/// An issue's timeline: its comments and its label changes, oldest first (other events are not
/// kept).
fn timeline(call: &Call) -> ApiResult<Reply> {
    call.unsupported_filters(&["since", "before"])?;
    call.with_repo(|state, repo| {
        let issue = repo.issue(call.index()?)?;
        let render = call.render();
        let mut events: Vec<(&str, i64, Value)> = repo
            .comments_on(issue.number)
            .map(|c| {
                let value = render.comment_event(&state.users, repo, issue, c);
                (c.created.as_str(), c.id, value)
            })
            .collect();
        for event in repo.label_events.iter().filter(|e| e.issue == issue.number) {
            if let Some(label) = repo.label(event.label) {
                let value = render.label_event(&state.users, repo, issue, event, label);
                events.push((event.at.as_str(), event.id, value));
            }
        }
        events.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        Ok(call.page(events.into_iter().map(|(_, _, v)| v).collect()))
    })
}

/// Commits reachable from `sha` (a branch; the default branch without it), newest first.
fn list_commits(call: &Call) -> ApiResult<Reply> {
    call.unsupported_filters(&["path", "not"])?;
    call.with_repo(|_, repo| {
        let branch = call.query("sha").unwrap_or(&repo.default_branch);
        let dir = call.shared.repo_dir(&repo.owner, &repo.name);
        let commits = git::log(&dir, branch)
            .map_err(|e| ApiError::new(500, e.to_string()))?
            .ok_or_else(|| ApiError::not_found(format!("branch {branch} does not exist")))?;
        let render = call.render();
        Ok(call.page(commits.iter().map(|c| render.commit(repo, c)).collect()))
    })
}

fn issue_labels(call: &Call, repo: &Repo, issue: &StoredIssue) -> Value {
    let render = call.render();
    issue
        .label_ids
        .iter()
        .filter_map(|id| repo.label(*id))
        .map(|l| render.label(repo, l))
        .collect()
}

/// `labels` holds ids or names, not both; unknown ones are dropped as Forgejo drops them.
fn add_issue_labels(call: &Call) -> ApiResult<Reply> {
    let caller = call.caller()?.to_string();
    let given = call.body["labels"].as_array().cloned().unwrap_or_default();
    let numbers = given.iter().filter(|v| v.is_number()).count();
    let names = given.iter().filter(|v| v.is_string()).count();
    if numbers + names != given.len() {
        return Err(ApiError::new(400, "a label must be an integer or a string"));
    }
    if numbers > 0 && names > 0 {
        return Err(ApiError::new(
            400,
            "labels should be an array of strings or integers",
        ));
    }
    call.with_repo_mut(|repo| {
        let ids: Vec<i64> = given
            .iter()
            .flat_map(|v| match v {
                Value::String(name) => repo
                    .labels
                    .iter()
                    .filter(|l| l.name == *name)
                    .map(|l| l.id)
                    .collect(),
                other => other.as_i64().into_iter().collect::<Vec<_>>(),
            })
            .collect();
        let number = call.index()?;
        repo.label_issue(number, &ids, &caller)?;
        Ok(Reply::json(
            200,
            issue_labels(call, repo, repo.issue(number)?),
        ))
    })
}

fn remove_issue_label(call: &Call) -> ApiResult<Reply> {
    let caller = call.caller()?.to_string();
    let id = call.param("id");
    let id: i64 = id
        .parse()
        .map_err(|_| ApiError::invalid(format!("label does not exist [id: {id}]")))?;
    call.with_repo_mut(|repo| {
        repo.unlabel_issue(call.index()?, id, &caller)?;
        Ok(Reply::empty())
    })
}

fn create_comment(call: &Call) -> ApiResult<Reply> {
    let author = call.caller()?.to_string();
    let mut state = call.shared.state();
    let (owner, name) = call.owner_and_name();
    let number = call.index()?;
    let comment = state
        .repo_mut(owner, name)?
        .add_comment(number, &author, call.text("body"), now())?
        .clone();
    let repo = state.repo(owner, name)?;
    Ok(Reply::json(
        201,
        call.render()
            .comment(&state.users, repo, repo.issue(number)?, &comment),
    ))
}

fn comment_id(call: &Call) -> ApiResult<i64> {
    call.param("id")
        .parse()
        .map_err(|_| ApiError::not_found(format!("comment {} does not exist", call.param("id"))))
}

fn edit_comment(call: &Call) -> ApiResult<Reply> {
    let caller = call.caller()?.to_string();
    let id = comment_id(call)?;
    let mut state = call.shared.state();
    let (owner, name) = call.owner_and_name();
    let comment = state
        .repo_mut(owner, name)?
        .edit_comment(id, &caller, call.text("body"), now())?
        .clone();
    let repo = state.repo(owner, name)?;
    Ok(Reply::json(
        200,
        call.render()
            .comment(&state.users, repo, repo.issue(comment.issue)?, &comment),
    ))
}

fn delete_comment(call: &Call) -> ApiResult<Reply> {
    let caller = call.caller()?.to_string();
    let id = comment_id(call)?;
    let mut state = call.shared.state();
    let (owner, name) = call.owner_and_name();
    state.repo_mut(owner, name)?.delete_comment(id, &caller)?;
    Ok(Reply::empty())
}

fn list_pulls(call: &Call) -> ApiResult<Reply> {
    call.unsupported_filters(&["sort", "milestone", "labels"])?;
    call.with_repo(|state, repo| {
        let filter = call.query("state").unwrap_or("open");
        let poster = call.query("poster");
        let mut pulls: Vec<&StoredIssue> = repo
            .issues
            .iter()
            .filter(|i| i.pull.is_some() && matches_state(i, filter))
            .filter(|i| poster.is_none_or(|p| p == i.author))
            .collect();
        pulls.sort_by_key(|i| std::cmp::Reverse(i.number));
        Ok(call.page(
            pulls
                .into_iter()
                .map(|p| render_pull(call, state, repo, p))
                .collect(),
        ))
    })
}

fn create_pull(call: &Call) -> ApiResult<Reply> {
    let author = call.caller()?.to_string();
    call.unsupported_fields(&["assignee", "assignees", "due_date", "milestone"])?;
    let label_ids = call.ids("labels");
    let (owner, name) = call.owner_and_name();
    let new = NewPull {
        author: &author,
        head: call.text("head"),
        base: call.text("base"),
        title: call.text("title"),
        body: call.text("body"),
        label_ids: &label_ids,
    };
    let number = call.shared.open_pull(owner, name, new)?;
    call.with_repo(|state, repo| {
        Ok(Reply::json(
            201,
            render_pull(call, state, repo, repo.pull(number)?),
        ))
    })
}

/// Reads the branches of a pull request from the bare repositories (the head's may be a fork's).
fn render_pull(call: &Call, state: &State, repo: &Repo, issue: &StoredIssue) -> Value {
    let dir = call.shared.repo_dir(&repo.owner, &repo.name);
    let git = match &issue.pull {
        Some(pull) => {
            let head_dir = match &pull.head_owner {
                Some(owner) => call.shared.repo_dir(owner, &repo.name),
                None => dir.clone(),
            };
            let head_sha = git::rev_parse(&head_dir, &pull.head)
                .ok()
                .flatten()
                .unwrap_or_else(|| pull.head_sha.clone());
            let base_sha = git::rev_parse(&dir, &pull.base)
                .ok()
                .flatten()
                .unwrap_or_default();
            let merge_base = git::merge_base(&dir, &base_sha, &head_sha)
                .ok()
                .flatten()
                .unwrap_or_default();
            // A fork's commits are not in this repository: such a pull request counts as mergeable.
            let mergeable = issue.merged.is_none()
                && (pull.head_owner.is_some()
                    || git::merges_cleanly(&dir, &base_sha, &head_sha).unwrap_or(false));
            PullGit {
                head_sha,
                base_sha,
                merge_base,
                mergeable,
            }
        }
        None => PullGit {
            head_sha: String::new(),
            base_sha: String::new(),
            merge_base: String::new(),
            mergeable: false,
        },
    };
    let head_repo = issue
        .pull
        .as_ref()
        .and_then(|p| p.head_owner.as_deref())
        .and_then(|owner| state.repo(owner, &repo.name).ok())
        .unwrap_or(repo);
    call.render()
        .pull(&state.users, repo, head_repo, issue, &git)
}

/// `Do: merge` only: a merge commit on the base, the pull request closed and marked merged. A
/// pull request that conflicts is a 405, as Forgejo answers one not in a mergeable state.
fn merge_pull(call: &Call) -> ApiResult<Reply> {
    let caller = call.caller()?.to_string();
    if call.text("Do") != "merge" {
        return Err(ApiError::new(
            501,
            format!("merging with Do={:?}", call.text("Do")),
        ));
    }
    call.unsupported_fields(&[
        "MergeCommitID",
        "head_commit_id",
        "merge_when_checks_succeed",
    ])?;
    let (owner, name) = call.owner_and_name();
    let Some(_) = merge_pull_request(call.shared, owner, name, call.index()?, &caller)? else {
        return Ok(Reply {
            status: 405,
            body: None,
            headers: Vec::new(),
        });
    };
    Ok(Reply {
        status: 200,
        body: None,
        headers: Vec::new(),
    })
}

fn create_status(call: &Call) -> ApiResult<Reply> {
    let creator = call.caller()?.to_string();
    let (owner, name) = call.owner_and_name();
    let sha = git::resolve(&call.shared.repo_dir(owner, name), call.param("sha"))
        .map_err(|e| ApiError::new(500, e.to_string()))?
        .ok_or_else(|| {
            ApiError::not_found(format!("commit {} does not exist", call.param("sha")))
        })?;
    let mut state = call.shared.state();
    let fields = [
        call.text("context"),
        call.text("description"),
        call.text("target_url"),
    ];
    let status = state
        .repo_mut(owner, name)?
        .add_status(&sha, call.text("state"), fields, &creator)?
        .clone();
    let repo = state.repo(owner, name)?;
    Ok(Reply::json(
        201,
        call.render().status(&state.users, repo, &status),
    ))
}

fn combined_status(call: &Call) -> ApiResult<Reply> {
    let (owner, name) = call.owner_and_name();
    let sha = git::resolve(&call.shared.repo_dir(owner, name), call.param("ref"))
        .map_err(|e| ApiError::new(500, e.to_string()))?
        .ok_or_else(|| ApiError::not_found(format!("ref {} does not exist", call.param("ref"))))?;
    call.with_repo(|state, repo| {
        let (statuses, combined) = repo.combined_status(&sha);
        Ok(Reply::json(
            200,
            call.render()
                .combined_status(&state.users, repo, &sha, &statuses, combined),
        ))
    })
}

fn collaborator_permission(call: &Call) -> ApiResult<Reply> {
    let login = call.param("collaborator").to_string();
    call.with_repo(|state, repo| {
        if !state.users.iter().any(|u| u.login == login) {
            return Err(ApiError::not_found(format!("user {login} does not exist")));
        }
        let permission = repo.permission_of(&login);
        Ok(Reply::json(
            200,
            json!({
                "permission": permission,
                "role_name": permission,
                "user": call.render().login(&state.users, &login),
            }),
        ))
    })
}

fn create_review(call: &Call) -> ApiResult<Reply> {
    let author = call.caller()?.to_string();
    let mut comments = Vec::new();
    for comment in call.body["comments"].as_array().into_iter().flatten() {
        let path = comment["path"].as_str().unwrap_or_default();
        if path.is_empty() {
            return Err(ApiError::invalid("a review comment needs a path"));
        }
        let line = |field: &str| comment[field].as_u64().unwrap_or(0);
        let body = comment["body"].as_str().unwrap_or_default().to_string();
        comments.push((
            path.to_string(),
            line("new_position"),
            line("old_position"),
            body,
        ));
    }
    let (owner, name) = call.owner_and_name();
    let number = call.index()?;
    let commit_id = match call.text("commit_id") {
        "" => {
            let state = call.shared.state();
            let repo = state.repo(owner, name)?;
            let pull = repo.pull(number)?.pull.as_ref().expect("a pull request");
            let dir = call.shared.repo_dir(owner, name);
            git::rev_parse(&dir, &pull.head)
                .ok()
                .flatten()
                .unwrap_or_else(|| pull.head_sha.clone())
        }
        given => given.to_string(),
    };
    let new = NewReview {
        author: &author,
        event: call.text("event"),
        body: call.text("body"),
        commit_id,
        comments,
        now: now(),
    };
    let mut state = call.shared.state();
    let review = state
        .repo_mut(owner, name)?
        .add_review(number, new)?
        .clone();
    let repo = state.repo(owner, name)?;
    Ok(Reply::json(
        200,
        call.render()
            .review(&state.users, repo, repo.pull(number)?, &review),
    ))
}

fn find_review<'r>(call: &Call, repo: &'r Repo, pull: &StoredIssue) -> ApiResult<&'r Review> {
    let id = call.param("id");
    repo.reviews_on(pull.number)
        .find(|r| r.id.to_string() == id)
        .ok_or_else(|| ApiError::not_found(format!("review {id} does not exist")))
}

fn error_reply(shared: &Shared, status: u16, message: &str) -> Reply {
    Reply::json(
        status,
        json!({"message": message, "url": format!("{}api/swagger", shared.root_url)}),
    )
}

fn violation(shared: &Shared, message: String) -> Reply {
    shared.record_violation(message.clone());
    Reply::json(500, json!({"message": format!("fake-forge: {message}")}))
}

fn send(request: Request, reply: Reply) {
    let text = reply.body.map(|b| b.to_string()).unwrap_or_default();
    let mut response = Response::from_string(text).with_status_code(reply.status);
    if reply.status != 204 {
        response.add_header(
            Header::from_bytes("Content-Type", "application/json;charset=utf-8")
                .expect("static header"),
        );
    }
    for (name, value) in reply.headers {
        if let Ok(header) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(header);
        }
    }
    let _ = request.respond(response);
}

/// The JSON body, `None` when there is none. Bodies that are not JSON are an error.
fn read_body(request: &mut Request) -> Result<Option<Value>, String> {
    let mut text = String::new();
    request
        .as_reader()
        .read_to_string(&mut text)
        .map_err(|e| format!("reading the request body: {e}"))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let json_content = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Content-Type"))
        .is_some_and(|h| h.value.as_str().starts_with("application/json"));
    if !json_content {
        return Err("a request body needs `Content-Type: application/json`".to_string());
    }
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("the request body is not JSON: {e}"))
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Merges open pull request `number` of `owner/name` into its base with a merge commit, as `by`:
/// the pull request closed and marked merged. `None` (nothing changed) when it conflicts; closed,
/// merged or from a fork is a 405. Returns the merge commit. Both the API and
/// [`crate::FakeForge::merge`] merge through here.
pub(crate) fn merge_pull_request(
    shared: &Shared,
    owner: &str,
    name: &str,
    number: u64,
    by: &str,
) -> ApiResult<Option<String>> {
    let dir = shared.repo_dir(owner, name);
    let _push = shared.push_lock.lock().unwrap_or_else(|e| e.into_inner());
    let (head, base, title) = {
        let state = shared.state();
        let issue = state.repo(owner, name)?.pull(number)?;
        let pull = issue.pull.as_ref().expect("a pull request");
        if issue.closed || issue.merged.is_some() || pull.head_owner.is_some() {
            return Err(ApiError::new(
                405,
                "pull request is closed, merged or from a fork",
            ));
        }
        (pull.head.clone(), pull.base.clone(), issue.title.clone())
    };
    let internal = |e: anyhow::Error| ApiError::new(500, e.to_string());
    let head_sha = git::rev_parse(&dir, &head)
        .map_err(internal)?
        .ok_or_else(|| ApiError::not_found(format!("branch {head} does not exist")))?;
    let message = format!("Merge pull request '{title}' (#{number}) from {head} into {base}");
    let Some(sha) = git::merge(&dir, &base, &head_sha, &message).map_err(internal)? else {
        return Ok(None);
    };
    let mut state = shared.state();
    state
        .repo_mut(owner, name)?
        .mark_merged(number, by, sha.clone())?;
    Ok(Some(sha))
}
