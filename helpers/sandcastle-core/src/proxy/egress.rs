//! A sandbox's way out: `HTTPS_PROXY` (CONNECT, then bytes both ways) and `HTTP_PROXY`
//! (absolute-form requests, forwarded) to exactly the hosts of `[sandbox] egress`. Everything else
//! is refused, and counted per work, host and port for the pull request and the run report.
use super::{Body, Target, Work, forward, refusal};
use base64::Engine;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The proxy user a sandbox's `HTTPS_PROXY` URL names; the password is the work's key.
pub const PROXY_USER: &str = "sandcastle";

/// One host and port a work was refused, and how often.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlockedRequest {
    pub host: String,
    pub port: u16,
    pub count: u32,
}

/// How often each host and port was refused.
type Counts = BTreeMap<(String, u16), u32>;

/// The refused requests of every work of the run, by work key.
#[derive(Default)]
pub struct Blocked(Mutex<BTreeMap<String, Counts>>);

impl Blocked {
    fn add(&self, key: &str, host: &str, port: u16) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *all.entry(key.to_string())
            .or_default()
            .entry((host.to_string(), port))
            .or_default() += 1;
    }

    /// `key`'s refused requests, by host and port.
    pub fn of(&self, key: &str) -> Vec<BlockedRequest> {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.get(key)
            .into_iter()
            .flatten()
            .map(|((host, port), count)| BlockedRequest {
                host: host.clone(),
                port: *port,
                count: *count,
            })
            .collect()
    }

    /// Every work's, by work key.
    pub fn all(&self) -> Vec<(String, Vec<BlockedRequest>)> {
        let keys: Vec<String> = {
            let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
            all.keys().cloned().collect()
        };
        keys.into_iter()
            .map(|key| {
                let blocked = self.of(&key);
                (key, blocked)
            })
            .collect()
    }
}

pub(super) async fn handle(work: &Arc<Work>, request: Request<Incoming>) -> Response<Body> {
    if !authorized(request.headers(), &work.token) {
        let mut response = refusal(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "authentication_error",
            "sandcastle's proxy: use this sandbox's HTTPS_PROXY, which carries its key",
        );
        response.headers_mut().insert(
            http::header::PROXY_AUTHENTICATE,
            http::HeaderValue::from_static("Basic realm=\"sandcastle\""),
        );
        return response;
    }
    let connect = request.method() == http::Method::CONNECT;
    let uri = request.uri();
    let default_port = if connect { 443 } else { 80 };
    let (Some(host), plain) = (uri.host(), uri.scheme_str() == Some("http")) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "sandcastle's proxy: the request names no host",
        );
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(default_port);
    let allowed = (connect || plain) && work.egress.iter().any(|rule| rule.allows(&host, port));
    if !allowed {
        work.blocked.add(&work.key, &host, port);
        return refusal(
            StatusCode::FORBIDDEN,
            "permission_error",
            &format!(
                "sandcastle's proxy: {host}:{port} is not in [sandbox] egress of .sandcastle/config.toml"
            ),
        );
    }
    if !connect {
        return match forward(work, request, Target::Web).await {
            Ok(response) => response,
            Err(error) => refusal(
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("sandcastle's proxy could not reach {host}:{port}: {error:#}"),
            ),
        };
    }
    let server = match tokio::net::TcpStream::connect((host.as_str(), port)).await {
        Ok(server) => server,
        Err(error) => {
            return refusal(
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("sandcastle's proxy could not reach {host}:{port}: {error}"),
            );
        }
    };
    tokio::spawn(async move {
        if let Ok(upgraded) = hyper::upgrade::on(request).await {
            let mut client = hyper_util::rt::TokioIo::new(upgraded);
            let mut server = server;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        }
    });
    Response::new(super::empty())
}

/// `Proxy-Authorization: Basic` of `sandcastle:<the work's key>`, as a client sends the user and
/// password of its proxy URL.
fn authorized(headers: &http::HeaderMap, token: &str) -> bool {
    let Some(encoded) = headers
        .get(http::header::PROXY_AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
    else {
        return false;
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .unwrap_or_default();
    decoded == format!("{PROXY_USER}:{token}").as_bytes()
}
