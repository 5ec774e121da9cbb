//! The model proxy on the host, inside `sandcastle run`: no model credential enters a sandbox.
//!
//! Each piece of work gets a Unix socket of its own in a fresh host directory inside the run's own
//! (`run_dir.rs`), which its container mounts read-only; `sandcastle relay` inside the container forwards its loopback port to it. A
//! request on that socket is the work's own: it must carry the work's placeholder key (so a
//! process that reached another work's relay, on a host network, is refused), and goes on to the
//! operator's `ANTHROPIC_BASE_URL` with the real credential added here. Responses stream back
//! chunk by chunk (server-sent events are never gathered whole).
//!
//! It forwards the Messages API only (`POST /v1/messages` and `/v1/messages/count_tokens`): every
//! other call the operator's credential could make (files, batches, models) is refused and listed
//! with the refused hosts. The proxy meters every answer from the API's own `usage` (`meter.rs`)
//! per work; a request reserves its worst case first and settles when its answer ends
//! (`budget.rs`), so requests in flight cannot together pass a budget, and a spent budget refuses
//! the work's next request with an error Claude Code shows.
//!
//! What a sandbox can make the host hold is bounded: `MAX_CONNECTIONS` connections per work,
//! request heads of `MAX_HEAD_BYTES` and bodies of `MAX_REQUEST_BYTES`, and a request that
//! sends nothing for `IDLE` is dropped.
//!
//! hyper serves the socket on a current-thread tokio runtime driven by one thread of its own (the
//! proxy waits on sockets, it computes nothing: one thread is enough, and holds the least memory);
//! the upstream call is ureq's, on tokio's blocking pool, its HTTPS checked against the roots of
//! `tls.rs`.
mod budget;
mod egress;
mod meter;

use crate::stream::Usage;
use crate::tls::Roots;
use anyhow::{Context as _, Result, bail};
use budget::{Charge, Ledger, Reservation, Verdict};
use bytes::Bytes;
use egress::{Blocked, PROXY_USER};
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use meter::{Metered, Scan};
use sandcastle_config::Egress;

pub use egress::{BlockedRequest, Refusals};
use std::convert::Infallible;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Semaphore, mpsc};

/// Where a container finds its work's socket directory (mounted read-only).
pub const SOCKET_DIR_IN_SANDBOX: &str = "/run/sandcastle";
/// The socket's name in its directory.
pub const SOCKET_NAME: &str = "proxy.sock";
/// The forge's address in a sandbox (`tea`'s login): a name that never resolves (`.invalid`, RFC
/// 2606) and is not loopback, so clients send it to their `HTTP_PROXY`, the relay, and the proxy
/// sends it on to the forge the run uses, wherever that is (the host's own loopback included).
pub const FORGE_IN_SANDBOX: &str = "http://forge.sandcastle.invalid";
/// The Anthropic API, when the operator sets no `ANTHROPIC_BASE_URL`.
const DEFAULT_UPSTREAM: &str = "https://api.anthropic.com";
/// The largest request body a sandbox may send (a long conversation with images is a few MiB);
/// a larger one is answered 413 and nothing is forwarded.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
/// The largest request line and headers read.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Connections one work's socket serves at once, tunnels included; the next is answered 503.
const MAX_CONNECTIONS: usize = 16;
/// A request whose head or body sends no byte for this long is dropped.
const IDLE: Duration = Duration::from_secs(20);
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

/// The variables a [`Credential`] is read from, the one that wins first.
pub const CREDENTIAL_KEYS: [&str; 3] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

impl Credential {
    /// The first of [`CREDENTIAL_KEYS`] that `get` finds set.
    pub fn from(get: impl Fn(&str) -> Option<String>) -> Result<Credential> {
        let [api_key, auth_token, oauth] = CREDENTIAL_KEYS;
        if let Some(key) = get(api_key) {
            return Ok(Credential::ApiKey(key));
        }
        if let Some(token) = get(auth_token) {
            return Ok(Credential::AuthToken(token));
        }
        if let Some(token) = get(oauth) {
            return Ok(Credential::OAuth(token));
        }
        bail!(
            "none of ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN is set: add one to .sandcastle/.env"
        )
    }

    /// The variable it came from and how it is sent; never its value.
    pub fn describe(&self) -> &'static str {
        match self {
            Credential::ApiKey(_) => "ANTHROPIC_API_KEY, sent as x-api-key",
            Credential::AuthToken(_) => "ANTHROPIC_AUTH_TOKEN, sent as Authorization: Bearer",
            Credential::OAuth(_) => {
                "CLAUDE_CODE_OAUTH_TOKEN, sent as Authorization: Bearer with anthropic-beta: oauth-2025-04-20"
            }
        }
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
    /// Its host and port, which a refused model API call is listed under.
    host: String,
    port: u16,
    credential: Credential,
    agent: ureq::Agent,
    /// The roots its HTTPS is checked against (`tls.rs`), for an error naming the fix.
    roots: Roots,
}

impl Upstream {
    /// `base` is the operator's `ANTHROPIC_BASE_URL` (default the Anthropic API); over HTTPS its
    /// certificate must be signed by one of `roots`.
    pub fn new(base: Option<String>, credential: Credential, roots: Roots) -> Result<Upstream> {
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
            .tls_config(roots.config())
            .build()
            .new_agent();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        Ok(Upstream {
            host: uri.host().unwrap_or_default().to_string(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            base: uri.to_string().trim_end_matches('/').to_string(),
            credential,
            agent,
            roots,
        })
    }

    /// The credential's kind, where it goes (scheme, host and port only) and, over HTTPS, the
    /// roots its certificate is checked against; for `doctor`.
    pub fn describe(&self) -> String {
        let scheme = self.base.split_once("://").map_or("http", |(s, _)| s);
        let checked = if scheme == "https" {
            format!(
                ", its certificate checked against {}",
                self.roots.describe()
            )
        } else {
            String::new()
        };
        format!(
            "{} to {scheme}://{}:{}{checked}",
            self.credential.describe(),
            self.host,
            self.port
        )
    }
}

/// The proxy of one run: a runtime serving every work's socket.
pub struct Proxy {
    /// The current-thread runtime that [`Driver`] runs.
    runtime: tokio::runtime::Handle,
    _driver: Driver,
    /// Where each work's socket directory is made: the run's own directory.
    sockets: PathBuf,
    upstream: Arc<Upstream>,
    run: Arc<RunMeter>,
    egress: Arc<Vec<Egress>>,
    forge: Option<Arc<str>>,
    blocked: Arc<Blocked>,
}

/// What the run allows every work.
pub struct Policy {
    /// `[budget] maxCostPerRun`.
    pub max_cost_per_run: Option<f64>,
    /// `[sandbox] egress`.
    pub egress: Vec<Egress>,
    /// The forge's URL (no trailing `/`) that [`FORGE_IN_SANDBOX`] stands for, when sandboxes
    /// have a forge login of their own; nothing answers under that name otherwise.
    pub forge: Option<String>,
}

/// What the whole run has spent and holds through the proxy, against `[budget] maxCostPerRun`.
struct RunMeter {
    limit: Option<f64>,
    ledger: Mutex<Ledger>,
}

/// What a work had spent before its socket opened (in earlier runs too), against
/// `[budget] maxCostPerIssue`; no limit for work that is no issue's (the planner).
#[derive(Clone, Default)]
pub struct Budget {
    pub spent: f64,
    pub limit: Option<f64>,
    /// Several works under one budget (an issue's attempts, side by side): what they spend and
    /// hold is one ledger, against `spent` (what they had spent before it) and `limit`, so their
    /// requests together never pass it. `None`: the work's own.
    pub shared: Option<SharedSpend>,
}

/// One ledger for several works' sockets (`Budget::shared`).
#[derive(Clone, Default)]
pub struct SharedSpend(Arc<Mutex<Ledger>>);

impl SharedSpend {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Proxy {
    /// Each work's socket directory is made in `sockets`, the run's own directory.
    pub fn start(upstream: Upstream, policy: Policy, sockets: &Path) -> Result<Proxy> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name("sandcastle-proxy")
            .enable_io()
            .enable_time()
            .build()
            .context("cannot start the model proxy's runtime")?;
        let handle = runtime.handle().clone();
        Ok(Proxy {
            runtime: handle,
            _driver: Driver::start(runtime)?,
            sockets: sockets.to_path_buf(),
            upstream: Arc::new(upstream),
            run: Arc::new(RunMeter {
                limit: policy.max_cost_per_run,
                ledger: Mutex::default(),
            }),
            egress: Arc::new(policy.egress),
            forge: policy.forge.map(Arc::from),
            blocked: Arc::default(),
        })
    }

    /// The requests `key`'s sandbox was refused in this run.
    pub fn blocked(&self, key: &str) -> Refusals {
        self.blocked.of(key)
    }

    /// Every work's refused requests in this run, by work key.
    pub fn all_blocked(&self) -> Vec<(String, Refusals)> {
        self.blocked.all()
    }

    /// A socket for the work `key`, in a new host directory that only this work's container
    /// mounts; closed and removed when the returned value drops.
    ///
    /// On the host, only this process's user reaches it: it lies in a directory of mode 0700.
    /// The container mounts the socket's own directory, where its root (without capabilities, so
    /// no override of file modes, and not the socket's owner when the engine is rootful and
    /// sandcastle is not root) must connect; there the socket is worth what the relay's port is.
    pub fn open(&self, key: &str, budget: Budget) -> Result<WorkProxy> {
        let private = tempfile::Builder::new()
            .prefix("proxy-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&self.sockets)
            .context("cannot create the model proxy's socket directory")?;
        let dir = private.path().join(MOUNTED_DIR);
        std::fs::create_dir(&dir)
            .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)))
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let socket = dir.join(SOCKET_NAME);
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
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            egress: Arc::clone(&self.egress),
            forge: self.forge.clone(),
            blocked: Arc::clone(&self.blocked),
        });
        let task = {
            let _entered = self.runtime.enter();
            let listener = tokio::net::UnixListener::from_std(listener)?;
            self.runtime.spawn(serve(listener, Arc::clone(&work)))
        };
        Ok(WorkProxy {
            _private: private,
            mounted: dir,
            task,
            work,
        })
    }
}

/// The one thread that drives the proxy's current-thread runtime (its tasks, sockets and timers)
/// until the proxy drops.
struct Driver {
    /// Dropped with the proxy: the thread's `block_on` returns and the runtime shuts down.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Driver {
    fn start(runtime: tokio::runtime::Runtime) -> Result<Driver> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("sandcastle-proxy".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .context("cannot start the model proxy's thread")?;
        Ok(Driver { _stop: stop })
    }
}

/// The directory inside a work's private one that holds its socket and is mounted.
const MOUNTED_DIR: &str = "mounted";

/// One work's end of the proxy.
pub struct WorkProxy {
    /// Mode 0700: holds the mounted directory with the socket; removed with it on drop.
    _private: tempfile::TempDir,
    mounted: PathBuf,
    task: tokio::task::JoinHandle<()>,
    work: Arc<Work>,
}

impl WorkProxy {
    /// The host directory holding the socket, which the work's container mounts.
    pub fn dir(&self) -> &Path {
        &self.mounted
    }

    /// What the sandbox is given instead of the credential and a network: the relay's address
    /// and the work's placeholder key for Claude Code, and the same relay as the proxy of every
    /// other program (the loopback itself excepted, where the relay is): on `port`, the one the
    /// container's relay bound (`Sandbox::relay_port`).
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
    pub fn socket(&self) -> PathBuf {
        self.mounted.join(SOCKET_NAME)
    }
}

impl Drop for WorkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
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
    /// One permit per connection served, [`MAX_CONNECTIONS`] in all.
    connections: Arc<Semaphore>,
    egress: Arc<Vec<Egress>>,
    /// What [`FORGE_IN_SANDBOX`] stands for.
    forge: Option<Arc<str>>,
    blocked: Arc<Blocked>,
}

#[derive(Default)]
struct WorkMeter {
    /// Spent and held since the socket opened (unless the budget is shared).
    ledger: Ledger,
    /// Since the host last took it (`WorkProxy::take_usage`).
    unread: Usage,
}

impl Work {
    /// Holds `worst` against the work's budget and the run's, or the refusal to answer: a spent
    /// budget (403, said as the driver says it), or one held by requests in flight (429, which
    /// Claude Code retries).
    fn reserve(self: &Arc<Work>, worst: f64) -> Result<Reservation, Refusal> {
        let mut meter = self.meter.lock().unwrap_or_else(|e| e.into_inner());
        let mut shared = self.budget.shared.as_ref().map(SharedSpend::lock);
        let mut run = self.run.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let ledger = match shared.as_deref_mut() {
            Some(shared) => shared,
            None => &mut meter.ledger,
        };
        let own = ledger.verdict(self.budget.spent, self.budget.limit, worst);
        let whole = run.verdict(0.0, self.run.limit, worst);
        let limit = |limit: Option<f64>| limit.unwrap_or_default();
        match (own, whole) {
            (Verdict::Reached { spent }, _) => Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                &format!(
                    "sandcastle stopped {}: it has cost ${spent:.2}, which reaches [budget] maxCostPerIssue (${:.2})",
                    self.key,
                    limit(self.budget.limit)
                ),
            )),
            (_, Verdict::Reached { spent }) => Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "permission_error",
                &format!(
                    "sandcastle stopped {}: this run has spent ${spent:.2}, which reaches [budget] maxCostPerRun (${:.2})",
                    self.key,
                    limit(self.run.limit)
                ),
            )),
            (Verdict::Held { left }, _) | (_, Verdict::Held { left }) => {
                let mut refused = Refusal::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_error",
                    &format!(
                        "sandcastle's proxy: the requests {} has in flight hold what is left of its budget (${left:.2}); this one may cost ${worst:.2}: retry when one ends",
                        self.key
                    ),
                );
                refused.retry_after = Some(2);
                Err(refused)
            }
            (Verdict::Go, Verdict::Go) => {
                ledger.reserve(worst);
                run.reserve(worst);
                Ok(Reservation::held(Arc::clone(self), worst))
            }
        }
    }

    /// A request reserved at `worst` ends, charged `usage`.
    fn settle(&self, worst: f64, usage: &Usage) {
        let mut meter = self.meter.lock().unwrap_or_else(|e| e.into_inner());
        match &self.budget.shared {
            Some(shared) => shared.lock().settle(worst, usage.cost_usd),
            None => meter.ledger.settle(worst, usage.cost_usd),
        }
        meter.unread.add(usage);
        let mut run = self.run.ledger.lock().unwrap_or_else(|e| e.into_inner());
        run.settle(worst, usage.cost_usd);
    }
}

async fn serve(listener: tokio::net::UnixListener, work: Arc<Work>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = Arc::clone(&work.connections).try_acquire_owned() else {
            tokio::spawn(turn_away(stream));
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
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(IDLE)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            drop(permit);
        });
    }
}

/// A connection past [`MAX_CONNECTIONS`]: one 503 in the API's shape, which Claude Code retries,
/// and closed unread.
async fn turn_away(mut stream: tokio::net::UnixStream) {
    let body = serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": format!(
        "sandcastle's proxy: this sandbox has {MAX_CONNECTIONS} connections open; retry when one closes"
    )}})
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(IDLE, stream.write_all(answer.as_bytes())).await;
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
    let Some(call) = Call::of(request.method(), request.uri()) else {
        let upstream = (work.upstream.host.as_str(), work.upstream.port);
        let (method, path) = (request.method().as_str(), request.uri().path());
        work.blocked.add_call(&work.key, upstream, method, path);
        return refusal(
            StatusCode::FORBIDDEN,
            "permission_error",
            "sandcastle's proxy forwards only POST /v1/messages and POST /v1/messages/count_tokens",
        );
    };
    let (parts, body) = request.into_parts();
    let body = match read_body(&parts.headers, body).await {
        Ok(body) => body,
        Err(refused) => return refused.response(),
    };
    let worst = match call {
        Call::Messages => {
            let betas = parts.headers.get("anthropic-beta");
            let betas = betas.and_then(|v| v.to_str().ok()).unwrap_or("");
            match budget::worst_case(&body, betas) {
                Ok(worst) => worst,
                Err(why) => {
                    let why = format!("sandcastle's proxy: {why}");
                    return refusal(StatusCode::BAD_REQUEST, "invalid_request_error", &why);
                }
            }
        }
        // Counting tokens is free.
        Call::CountTokens => 0.0,
    };
    let reservation = match work.reserve(worst) {
        Ok(reservation) => reservation,
        Err(refused) => return refused.response(),
    };
    match forward(work, parts, body, Target::Model, Some(reservation)).await {
        Ok(response) => response,
        Err(error) => refusal(
            StatusCode::BAD_GATEWAY,
            "api_error",
            &format!("sandcastle's proxy could not reach the model API: {error:#}"),
        ),
    }
}

/// The model API calls the proxy forwards: what Claude Code asks, and nothing else the
/// operator's credential could do.
#[derive(Clone, Copy)]
enum Call {
    /// `POST /v1/messages`, metered.
    Messages,
    /// `POST /v1/messages/count_tokens`, free.
    CountTokens,
}

impl Call {
    /// Any query (`?beta=true`) goes along.
    fn of(method: &http::Method, uri: &http::Uri) -> Option<Call> {
        if method != http::Method::POST {
            return None;
        }
        match uri.path() {
            "/v1/messages" => Some(Call::Messages),
            "/v1/messages/count_tokens" => Some(Call::CountTokens),
            _ => None,
        }
    }
}

/// A request's body within the proxy's bounds: [`MAX_REQUEST_BYTES`] (413 past it, before a byte
/// is forwarded), and no pause longer than [`IDLE`] (408).
async fn read_body(headers: &http::HeaderMap, mut body: Incoming) -> Result<Vec<u8>, Refusal> {
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            &format!(
                "sandcastle's proxy takes request bodies up to {} MiB",
                MAX_REQUEST_BYTES >> 20
            ),
        )
    };
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let declared = match declared {
        Some(length) if length > MAX_REQUEST_BYTES as u64 => return Err(too_large()),
        Some(length) => length as usize,
        None => 0,
    };
    // Sized once: growing by doubling would leave the smaller copies resident. Only the pages
    // written are resident, so a client that declares much and sends little holds little.
    let mut bytes = Vec::with_capacity(declared);
    loop {
        let frame = match tokio::time::timeout(IDLE, body.frame()).await {
            Ok(Some(Ok(frame))) => frame,
            Ok(None) => return Ok(bytes),
            Ok(Some(Err(error))) => {
                let why = format!("sandcastle's proxy cannot read the request: {error}");
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    &why,
                ));
            }
            Err(_) => {
                let why = format!(
                    "sandcastle's proxy: the request sent nothing for {} s",
                    IDLE.as_secs()
                );
                return Err(Refusal::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout_error",
                    &why,
                ));
            }
        };
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_REQUEST_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
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
    /// The run's forge, for a request to [`FORGE_IN_SANDBOX`]: its path and query on the forge's
    /// URL, headers as the sandbox sent them (the agent's own read-only login).
    Forge,
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

/// Sends a request on (its body read by [`read_body`]) and streams the answer back; a model
/// request's `reservation` settles when the answer ends.
async fn forward(
    work: &Arc<Work>,
    parts: http::request::Parts,
    body: Vec<u8>,
    target: Target,
    reservation: Option<Reservation>,
) -> Result<Response<Body>> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = match target {
        Target::Model => format!("{}{path}", work.upstream.base),
        Target::Web => parts.uri.to_string(),
        Target::Forge => format!("{}{path}", work.forge.as_deref().context("no forge")?),
    };
    let mut outgoing = http::Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .body(body)?;
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
    let upstream = Arc::clone(&work.upstream);
    let work = Arc::clone(work);
    tokio::task::spawn_blocking(move || {
        let (head, body) = match work.upstream.agent.run(outgoing) {
            Ok(answer) => answer.into_parts(),
            Err(error) => {
                // Only a request that never reached the API is surely not billed; dropped
                // unsettled, the reservation is charged whole.
                if let Some(reservation) = reservation
                    && matches!(
                        error,
                        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound
                    )
                {
                    reservation.settle(Charge::Nothing);
                }
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
        let metered = pump(body.into_reader(), &sender, scan);
        if let Some(reservation) = reservation {
            reservation.settle(metered.map_or(Charge::Nothing, Charge::Read));
        }
    });
    let head = head_receiver.await?.map_err(|e| {
        if is_tls_refusal(&e) {
            anyhow::anyhow!("{e}: {}", upstream.roots.fix())
        } else {
            anyhow::anyhow!("{e}")
        }
    })?;
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

/// A handshake the upstream's certificate failed (rustls says why, directly or through the
/// connection's I/O).
fn is_tls_refusal(error: &ureq::Error) -> bool {
    match error {
        ureq::Error::Rustls(_) => true,
        ureq::Error::Io(io) => io.get_ref().is_some_and(|e| e.is::<rustls::Error>()),
        _ => false,
    }
}

/// Passes the upstream body on chunk by chunk as it arrives, until it ends or the sandbox hangs
/// up; what `scan` read of it (a sandbox that hangs up early has still been billed for what was
/// sent: the meter reads on to the end).
fn pump(
    mut reader: impl Read,
    sender: &mpsc::Sender<std::io::Result<Bytes>>,
    mut scan: Option<Scan>,
) -> Option<Metered> {
    let mut buffer = vec![0; CHUNK_BYTES];
    let mut listening = true;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => return scan.map(Scan::finish),
            Ok(n) => n,
            Err(e) => {
                if listening {
                    hand_on(sender, Err(e));
                }
                return scan.map(Scan::finish);
            }
        };
        if let Some(scan) = &mut scan {
            scan.feed(&buffer[..n]);
        }
        listening = listening && hand_on(sender, Ok(Bytes::copy_from_slice(&buffer[..n])));
        if !listening && scan.is_none() {
            return None;
        }
    }
}

/// Hands a chunk to the sandbox's side of the answer; false once it hung up, or took nothing for
/// [`IDLE`] (then the meter reads on without it, and its connection is its own to close).
fn hand_on(sender: &mpsc::Sender<std::io::Result<Bytes>>, chunk: std::io::Result<Bytes>) -> bool {
    let send = tokio::time::timeout(IDLE, sender.send(chunk));
    matches!(tokio::runtime::Handle::current().block_on(send), Ok(Ok(())))
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

/// A request the proxy answers itself rather than forward: a [`refusal`] once answered.
struct Refusal {
    status: StatusCode,
    kind: &'static str,
    message: String,
    /// Seconds after which a retry may go on.
    retry_after: Option<u16>,
}

impl Refusal {
    fn new(status: StatusCode, kind: &'static str, message: &str) -> Refusal {
        Refusal {
            status,
            kind,
            message: message.to_string(),
            retry_after: None,
        }
    }

    fn response(self) -> Response<Body> {
        let mut response = refusal(self.status, self.kind, &self.message);
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        response
    }
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
