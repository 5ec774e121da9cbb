//! The model proxy on the host, inside `sandcastle run`: no model credential enters a sandbox.
//!
//! Each piece of work gets a Unix socket of its own in a fresh host directory, which its container
//! mounts read-only; `sandcastle relay` inside the container forwards its loopback port to it. A
//! request on that socket is the work's own: it must carry the work's placeholder key (so a
//! process that reached another work's relay, on a host network, is refused), and goes on to the
//! operator's `ANTHROPIC_BASE_URL` with the real credential added here. Responses stream back
//! chunk by chunk (server-sent events are never gathered whole).
//!
//! The proxy meters every answer from the API's own `usage` (`meter.rs`) per work, and refuses a
//! work's next request once its budget or the run's is spent, with an error Claude Code shows.
//!
//! hyper serves the socket on a small tokio runtime; the upstream call is ureq's, on tokio's
//! blocking pool, so the proxy shares the client (TLS roots, proxies) the rest of sandcastle uses.
mod egress;
mod meter;

use crate::stream::Usage;
use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use egress::{Blocked, PROXY_USER};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use meter::Scan;
use sandcastle_config::Egress;

pub use egress::BlockedRequest;
use std::convert::Infallible;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Where a container finds its work's socket directory (mounted read-only).
pub const SOCKET_DIR_IN_SANDBOX: &str = "/run/sandcastle";
/// The socket's name in its directory.
pub const SOCKET_NAME: &str = "proxy.sock";
/// The Anthropic API, when the operator sets no `ANTHROPIC_BASE_URL`.
const DEFAULT_UPSTREAM: &str = "https://api.anthropic.com";
/// The largest request body a sandbox may send (a long conversation with images is a few MiB).
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// Bytes read from upstream per chunk passed on.
const CHUNK_BYTES: usize = 16 * 1024;
/// The beta header an OAuth token needs on the Messages API (Claude Code sends it itself when it
/// holds the token; in a sandbox it holds a placeholder API key instead).
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// The operator's model credential, from `.sandcastle/.env` or the environment, with the header it
/// goes in.
#[derive(Clone)]
pub enum Credential {
    /// `ANTHROPIC_API_KEY`: `x-api-key`.
    ApiKey(String),
    /// `ANTHROPIC_AUTH_TOKEN`: `Authorization: Bearer`.
    AuthToken(String),
    /// `CLAUDE_CODE_OAUTH_TOKEN`: `Authorization: Bearer` and the OAuth beta.
    OAuth(String),
}

impl Credential {
    /// The first of `ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN` and `CLAUDE_CODE_OAUTH_TOKEN` that
    /// `get` finds set.
    pub fn from(get: impl Fn(&str) -> Option<String>) -> Result<Credential> {
        if let Some(key) = get("ANTHROPIC_API_KEY") {
            return Ok(Credential::ApiKey(key));
        }
        if let Some(token) = get("ANTHROPIC_AUTH_TOKEN") {
            return Ok(Credential::AuthToken(token));
        }
        if let Some(token) = get("CLAUDE_CODE_OAUTH_TOKEN") {
            return Ok(Credential::OAuth(token));
        }
        bail!(
            "none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN is set: add one to .sandcastle/.env"
        )
    }

    fn apply(&self, headers: &mut http::HeaderMap) -> Result<()> {
        let bearer = |token: &str| http::HeaderValue::from_str(&format!("Bearer {token}"));
        match self {
            Credential::ApiKey(key) => {
                headers.insert("x-api-key", http::HeaderValue::from_str(key)?);
            }
            Credential::AuthToken(token) => {
                headers.insert(http::header::AUTHORIZATION, bearer(token)?);
            }
            Credential::OAuth(token) => {
                headers.insert(http::header::AUTHORIZATION, bearer(token)?);
                let betas = headers
                    .get("anthropic-beta")
                    .and_then(|v| v.to_str().ok())
                    .filter(|v| !v.is_empty())
                    .map_or(OAUTH_BETA.to_string(), |v| format!("{v},{OAUTH_BETA}"));
                headers.insert("anthropic-beta", http::HeaderValue::from_str(&betas)?);
            }
        }
        Ok(())
    }
}

/// Where model requests go, and with what.
pub struct Upstream {
    /// `ANTHROPIC_BASE_URL` without a trailing `/`.
    base: String,
    credential: Credential,
    agent: ureq::Agent,
}

impl Upstream {
    /// `base` is the operator's `ANTHROPIC_BASE_URL` (default the Anthropic API).
    pub fn new(base: Option<String>, credential: Credential) -> Result<Upstream> {
        let base = base.unwrap_or_else(|| DEFAULT_UPSTREAM.to_string());
        let uri: http::Uri = base
            .parse()
            .ok()
            .filter(|u: &http::Uri| u.scheme().is_some() && u.host().is_some())
            .with_context(|| {
                format!(
                    "ANTHROPIC_BASE_URL {base:?} is not an http(s) URL: fix it in .sandcastle/.env"
                )
            })?;
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .new_agent();
        Ok(Upstream {
            base: uri.to_string().trim_end_matches('/').to_string(),
            credential,
            agent,
        })
    }
}

/// The proxy of one run: a runtime serving every work's socket.
pub struct Proxy {
    runtime: tokio::runtime::Runtime,
    upstream: Arc<Upstream>,
    run: Arc<RunMeter>,
    egress: Arc<Vec<Egress>>,
    blocked: Arc<Blocked>,
}

/// What the run allows every work.
pub struct Policy {
    /// `[budget] maxCostPerRun`.
    pub max_cost_per_run: Option<f64>,
    /// `[sandbox] egress`, and the forge when sandboxes have a login of their own.
    pub egress: Vec<Egress>,
}

/// What the whole run has spent through the proxy, against `[budget] maxCostPerRun`.
struct RunMeter {
    limit: Option<f64>,
    spent: Mutex<f64>,
}

/// What a work had spent before its socket opened (in earlier runs too), against
/// `[budget] maxCostPerIssue`; no limit for work that is no issue's (the planner).
#[derive(Clone, Copy, Default)]
pub struct Budget {
    pub spent: f64,
    pub limit: Option<f64>,
}

impl Proxy {
    pub fn start(upstream: Upstream, policy: Policy) -> Result<Proxy> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sandcastle-proxy")
            .enable_io()
            .build()
            .context("cannot start the model proxy's runtime")?;
        Ok(Proxy {
            runtime,
            upstream: Arc::new(upstream),
            run: Arc::new(RunMeter {
                limit: policy.max_cost_per_run,
                spent: Mutex::new(0.0),
            }),
            egress: Arc::new(policy.egress),
            blocked: Arc::default(),
        })
    }

    /// The requests `key`'s sandbox was refused in this run.
    pub fn blocked(&self, key: &str) -> Vec<BlockedRequest> {
        self.blocked.of(key)
    }

    /// Every work's refused requests in this run, by work key.
    pub fn all_blocked(&self) -> Vec<(String, Vec<BlockedRequest>)> {
        self.blocked.all()
    }

    /// A socket for the work `key`, in a new host directory that only this work's container
    /// mounts; closed and removed when the returned value drops.
    pub fn open(&self, key: &str, budget: Budget) -> Result<WorkProxy> {
        let dir = tempfile::Builder::new()
            .prefix("sandcastle-proxy-")
            .tempdir()
            .context("cannot create the model proxy's socket directory")?;
        // The container's root (no capabilities, so no override of file modes) connects to it.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let socket = dir.path().join(SOCKET_NAME);
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))?;
        listener.set_nonblocking(true)?;
        let work = Arc::new(Work {
            key: key.to_string(),
            token: format!("sandcastle-work-{}", uuid::Uuid::new_v4().simple()),
            upstream: Arc::clone(&self.upstream),
            run: Arc::clone(&self.run),
            budget,
            meter: Mutex::default(),
            egress: Arc::clone(&self.egress),
            blocked: Arc::clone(&self.blocked),
        });
        let task = {
            let _entered = self.runtime.enter();
            let listener = tokio::net::UnixListener::from_std(listener)?;
            self.runtime.spawn(serve(listener, Arc::clone(&work)))
        };
        Ok(WorkProxy { dir, task, work })
    }
}

/// One work's end of the proxy.
pub struct WorkProxy {
    dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
    work: Arc<Work>,
}

impl WorkProxy {
    /// The host directory holding the socket.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// What the sandbox is given instead of the credential and a network: the relay's address
    /// and the work's placeholder key for Claude Code, and the same relay as the proxy of every
    /// other program (the loopback itself excepted, where the relay is): on `port`, the
    /// container's own (`relay_port`).
    pub fn sandbox_env(&self, port: u16) -> Vec<(String, String)> {
        let relay = format!("127.0.0.1:{port}");
        let proxy = format!("http://{PROXY_USER}:{}@{relay}", self.work.token);
        let mut env = vec![
            ("ANTHROPIC_BASE_URL".to_string(), format!("http://{relay}")),
            ("ANTHROPIC_API_KEY".to_string(), self.work.token.clone()),
        ];
        for name in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
            env.push((name.to_string(), proxy.clone()));
        }
        for name in ["NO_PROXY", "no_proxy"] {
            env.push((name.to_string(), "127.0.0.1,localhost".to_string()));
        }
        env
    }

    /// What the work spent through the proxy since the last call: the turn's own figures.
    pub fn take_usage(&self) -> Usage {
        let mut meter = self.work.meter.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut meter.unread)
    }

    #[cfg(test)]
    pub fn socket(&self) -> std::path::PathBuf {
        self.dir.path().join(SOCKET_NAME)
    }
}

impl Drop for WorkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port for one container's relay: one nothing on this host's 127.0.0.1 listens on now, so the
/// relays of containers sharing the host's network (a work's agent and gate among them) do not
/// collide.
pub fn relay_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .context("cannot find a free port on 127.0.0.1")?;
    Ok(listener.local_addr()?.port())
}

/// What the proxy knows of the work a socket belongs to.
struct Work {
    /// `issue #42`: named in a refusal.
    key: String,
    /// The placeholder key the work's sandbox holds: the only key its requests may carry.
    token: String,
    upstream: Arc<Upstream>,
    run: Arc<RunMeter>,
    budget: Budget,
    meter: Mutex<WorkMeter>,
    egress: Arc<Vec<Egress>>,
    blocked: Arc<Blocked>,
}

#[derive(Default)]
struct WorkMeter {
    /// Since the socket opened.
    cost_usd: f64,
    /// Since the host last took it (`WorkProxy::take_usage`).
    unread: Usage,
}

impl Work {
    fn record(&self, usage: &Usage) {
        let mut meter = self.meter.lock().unwrap_or_else(|e| e.into_inner());
        meter.cost_usd += usage.cost_usd;
        meter.unread.add(usage);
        *self.run.spent.lock().unwrap_or_else(|e| e.into_inner()) += usage.cost_usd;
    }

    /// Why the next request may not go on: a spent budget, said as the driver says it.
    fn spent_budget(&self) -> Option<String> {
        let own = self.budget.spent
            + self
                .meter
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .cost_usd;
        if let Some(limit) = self.budget.limit
            && own >= limit
        {
            return Some(format!(
                "sandcastle stopped {}: it has cost ${own:.2}, which reaches [budget] maxCostPerIssue (${limit:.2})",
                self.key
            ));
        }
        let run = *self.run.spent.lock().unwrap_or_else(|e| e.into_inner());
        match self.run.limit {
            Some(limit) if run >= limit => Some(format!(
                "sandcastle stopped {}: this run has spent ${run:.2}, which reaches [budget] maxCostPerRun (${limit:.2})",
                self.key
            )),
            _ => None,
        }
    }
}

async fn serve(listener: tokio::net::UnixListener, work: Arc<Work>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let work = Arc::clone(&work);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let work = Arc::clone(&work);
                async move { Ok::<_, Infallible>(handle(&work, request).await) }
            });
            // A client that hangs up mid-request is its own business.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

async fn handle(work: &Arc<Work>, request: Request<Incoming>) -> Response<Body> {
    // `HTTP_PROXY`/`HTTPS_PROXY` requests name their host; the model's are origin-form.
    if request.method() == http::Method::CONNECT || request.uri().scheme().is_some() {
        return egress::handle(work, request).await;
    }
    if !carries_token(request.headers(), &work.token) {
        return refusal(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "sandcastle's proxy refused the request: it does not carry this sandbox's key",
        );
    }
    if let Some(why) = work.spent_budget() {
        return refusal(StatusCode::FORBIDDEN, "permission_error", &why);
    }
    match forward(work, request, Target::Model).await {
        Ok(response) => response,
        Err(error) => refusal(
            StatusCode::BAD_GATEWAY,
            "api_error",
            &format!("sandcastle's proxy could not reach the model API: {error:#}"),
        ),
    }
}

/// `x-api-key: <token>` or `Authorization: Bearer <token>`, as Claude Code sends its key.
fn carries_token(headers: &http::HeaderMap, token: &str) -> bool {
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    api_key == Some(token) || bearer == Some(token)
}

/// Where a request goes on to.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// The operator's `ANTHROPIC_BASE_URL`, with the credential, metered.
    Model,
    /// The URL the request names (an allowed host of `[sandbox] egress`), as the sandbox sent it.
    Web,
}

/// Headers that describe one hop, or that the proxy sets itself (on the model's way, the
/// sandbox's placeholder key is one).
fn passes_on(name: &http::HeaderName, target: Target) -> bool {
    let hop = matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "proxy-authenticate"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
            | "accept-encoding"
    );
    let key = matches!(name.as_str(), "x-api-key" | "authorization");
    let own_key = key && target == Target::Model;
    !(hop || own_key)
}

async fn forward(
    work: &Arc<Work>,
    request: Request<Incoming>,
    target: Target,
) -> Result<Response<Body>> {
    let (parts, body) = request.into_parts();
    let body = http_body_util::Limited::new(body, MAX_REQUEST_BYTES)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("cannot read the request: {e}"))?
        .to_bytes();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = match target {
        Target::Model => format!("{}{path}", work.upstream.base),
        Target::Web => parts.uri.to_string(),
    };
    let mut outgoing = http::Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(body.to_vec())?;
    for (name, value) in parts.headers.iter().filter(|(n, _)| passes_on(n, target)) {
        outgoing.headers_mut().append(name, value.clone());
    }
    if target == Target::Model {
        work.upstream.credential.apply(outgoing.headers_mut())?;
    }
    // One blocking task calls upstream and then pumps its body: the head comes back first, on its
    // own channel, so the answer starts streaming at once.
    let (head_sender, head_receiver) = tokio::sync::oneshot::channel();
    let (sender, receiver) = mpsc::channel(16);
    let work = Arc::clone(work);
    tokio::task::spawn_blocking(move || {
        let (head, body) = match work.upstream.agent.run(outgoing) {
            Ok(answer) => answer.into_parts(),
            Err(error) => {
                let _ = head_sender.send(Err(error));
                return;
            }
        };
        // Only answers the API bills carry usage; an error's body is passed on unread.
        let scan = (target == Target::Model && head.status.is_success()).then(|| {
            let content_type = head.headers.get(http::header::CONTENT_TYPE);
            Scan::new(content_type.and_then(|v| v.to_str().ok()).unwrap_or(""))
        });
        // A sandbox gone by now has still been billed: the meter reads on.
        let _ = head_sender.send(Ok(head));
        if let Some(usage) = pump(body.into_reader(), &sender, scan) {
            work.record(&usage);
        }
    });
    let head = head_receiver.await?.map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut response = Response::builder().status(head.status);
    for (name, value) in head
        .headers
        .iter()
        .filter(|(n, _)| passes_on(n, Target::Web))
    {
        response = response.header(name, value);
    }
    Ok(response.body(ChannelBody(receiver).boxed())?)
}

/// Passes the upstream body on chunk by chunk as it arrives, until it ends or the sandbox hangs
/// up; what it cost, when `scan` read it whole (a sandbox that hangs up early has still been
/// billed for what was sent: the meter reads on to the end).
fn pump(
    mut reader: impl Read,
    sender: &mpsc::Sender<std::io::Result<Bytes>>,
    mut scan: Option<Scan>,
) -> Option<Usage> {
    let mut buffer = vec![0; CHUNK_BYTES];
    let mut listening = true;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => return scan.and_then(Scan::finish),
            Ok(n) => n,
            Err(e) => {
                let _ = sender.blocking_send(Err(e));
                return scan.and_then(Scan::finish);
            }
        };
        if let Some(scan) = &mut scan {
            scan.feed(&buffer[..n]);
        }
        listening = listening
            && sender
                .blocking_send(Ok(Bytes::copy_from_slice(&buffer[..n])))
                .is_ok();
        if !listening && scan.is_none() {
            return None;
        }
    }
}

/// A response body fed by [`pump`].
struct ChannelBody(mpsc::Receiver<std::io::Result<Bytes>>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| c.map(Frame::data)))
    }
}

fn empty() -> Body {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// An error in the Messages API's own shape, so Claude Code shows its message.
fn refusal(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
    let body = http_body_util::Full::new(Bytes::from(body.to_string()))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests;
