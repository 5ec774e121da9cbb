//! A sandbox's way out: `HTTPS_PROXY` (CONNECT, then bytes both ways) and `HTTP_PROXY`
//! (absolute-form requests, forwarded) to exactly the hosts of `[sandbox] egress`, and plain HTTP
//! to the forge's name in sandboxes (`FORGE_IN_SANDBOX`) on to the run's forge. Everything else is
//! refused, and counted per work, host and port for the pull request and the run report.
use super::{Body, FORGE_IN_SANDBOX, Target, Work, forward, read_body, refusal};
use base64::Engine;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The proxy user a sandbox's `HTTPS_PROXY` URL names; the password is the work's key.
pub const PROXY_USER: &str = "sandcastle";

/// The most refusals kept by name per work; those past them are only counted.
const MAX_LISTED: usize = 100;
/// The longest host kept, a DNS name's (a longer one is cut there).
const MAX_HOST: usize = 253;
/// The longest refused model API call kept (`GET /v1/files`), cut there.
const MAX_CALL: usize = 100;

/// One host and port a work was refused, or one model API call, and how often.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlockedRequest {
    pub host: String,
    pub port: u16,
    /// A call to the model API the proxy does not forward, method and path (`GET /v1/files`);
    /// none for a host that is not in `[sandbox] egress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    pub count: u32,
}

/// A work's refused requests: the first `MAX_LISTED` by name, and how many more there were.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Refusals {
    pub listed: Vec<BlockedRequest>,
    pub unlisted: u64,
}

/// How often each host and port (and call) was refused, and the refusals past the names kept.
#[derive(Default)]
struct Counts {
    named: BTreeMap<(String, u16, Option<String>), u32>,
    unlisted: u64,
}

/// The refused requests of every work of the run, by work key.
#[derive(Default)]
pub struct Blocked(Mutex<BTreeMap<String, Counts>>);

impl Blocked {
    /// A host `[sandbox] egress` does not allow.
    fn add(&self, key: &str, host: &str, port: u16) {
        self.count(key, (cut(host, MAX_HOST), port, None));
    }

    /// A model API call the proxy does not forward, to `upstream`'s host and port.
    pub(super) fn add_call(&self, key: &str, upstream: (&str, u16), method: &str, path: &str) {
        // The path is the agent's text: only characters a plain path needs are kept.
        let path: String = path
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "/._~%-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let call = cut(&format!("{} {path}", cut(method, 16)), MAX_CALL);
        self.count(key, (upstream.0.to_string(), upstream.1, Some(call)));
    }

    fn count(&self, key: &str, name: (String, u16, Option<String>)) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let counts = all.entry(key.to_string()).or_default();
        let listed = counts.named.len();
        match counts.named.get_mut(&name) {
            Some(count) => *count = count.saturating_add(1),
            None if listed < MAX_LISTED => {
                counts.named.insert(name, 1);
            }
            None => counts.unlisted = counts.unlisted.saturating_add(1),
        }
    }

    /// `key`'s refused requests, by host and port.
    pub fn of(&self, key: &str) -> Refusals {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(counts) = all.get(key) else {
            return Refusals::default();
        };
        Refusals {
            listed: counts
                .named
                .iter()
                .map(|((host, port, call), count)| BlockedRequest {
                    host: host.clone(),
                    port: *port,
                    call: call.clone(),
                    count: *count,
                })
                .collect(),
            unlisted: counts.unlisted,
        }
    }

    /// Every work's, by work key.
    pub fn all(&self) -> Vec<(String, Refusals)> {
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

/// `text` up to `max` bytes, cut at a character's start.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
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
    // Host names are case-insensitive: no spelling of the name reaches anything else.
    if FORGE_IN_SANDBOX
        .strip_prefix("http://")
        .is_some_and(|name| name.eq_ignore_ascii_case(&host))
    {
        return to_forge(work, request, port).await;
    }
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
        let (parts, body) = request.into_parts();
        let body = match read_body(&parts.headers, body).await {
            Ok(body) => body,
            Err(refused) => return refused.response(),
        };
        return match forward(work, parts, body, Target::Web, None).await {
            Ok(response) => response,
            Err(error) => refusal(
                StatusCode::BAD_GATEWAY,
                "api_error",
                &format!("sandcastle's proxy could not reach {host}:{port}: {error:#}"),
            ),
        };
    }
    // A tunnel outlives its connection's request: it holds a connection of the work's own.
    let Ok(permit) = Arc::clone(&work.connections).try_acquire_owned() else {
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded_error",
            &format!(
                "sandcastle's proxy: this sandbox has {} connections open; retry when one closes",
                super::MAX_CONNECTIONS
            ),
        );
    };
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
        drop(permit);
    });
    Response::new(super::empty())
}

/// A request to the forge's name in sandboxes: sent on to the run's forge when it is plain HTTP
/// on port 80 (as [`FORGE_IN_SANDBOX`] says) and sandboxes have a forge login; refused and listed
/// otherwise, so the name reaches no other host, port or scheme.
async fn to_forge(work: &Arc<Work>, request: Request<Incoming>, port: u16) -> Response<Body> {
    let host = FORGE_IN_SANDBOX.trim_start_matches("http://");
    let plain =
        request.method() != http::Method::CONNECT && request.uri().scheme_str() == Some("http");
    if !(plain && port == 80 && work.forge.is_some()) {
        work.blocked.add(&work.key, host, port);
        return refusal(
            StatusCode::FORBIDDEN,
            "permission_error",
            &format!(
                "sandcastle's proxy: {host} is the forge only as {FORGE_IN_SANDBOX}, when FORGEJO_AGENT_TOKEN gives sandboxes a forge login"
            ),
        );
    }
    let (parts, body) = request.into_parts();
    let body = match read_body(&parts.headers, body).await {
        Ok(body) => body,
        Err(refused) => return refused.response(),
    };
    match forward(work, parts, body, Target::Forge, None).await {
        Ok(response) => response,
        Err(error) => refusal(
            StatusCode::BAD_GATEWAY,
            "api_error",
            &format!("sandcastle's proxy could not reach the forge: {error:#}"),
        ),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 20,000 distinct refused hosts of 1000 characters (80 MB of names before): the first
    /// [`MAX_LISTED`] are kept by name, each cut to [`MAX_HOST`], the rest counted; a host
    /// already listed still counts as itself.
    #[test]
    fn the_refused_hosts_kept_are_bounded_in_number_and_length() {
        let blocked = Blocked::default();
        for i in 0..20_000 {
            let host = format!("{i:05}{}", "x".repeat(995));
            blocked.add("issue #1", &host, 443);
        }
        let first = format!("00000{}", "x".repeat(995));
        blocked.add("issue #1", &first, 443);
        blocked.add_call("issue #1", ("api.example", 443), "GET", "/v1/files");

        let refusals = blocked.of("issue #1");
        assert_eq!(refusals.listed.len(), MAX_LISTED);
        assert!(refusals.listed.iter().all(|b| b.host.len() <= MAX_HOST));
        assert_eq!(refusals.listed[0].count, 2);
        assert_eq!(refusals.unlisted, 20_000 - MAX_LISTED as u64 + 1);
        let kept: usize = refusals.listed.iter().map(|b| b.host.len()).sum();
        assert!(kept <= MAX_LISTED * MAX_HOST);
        assert_eq!(blocked.of("issue #2"), Refusals::default());
    }

    #[test]
    fn a_refused_calls_path_keeps_plain_characters_only() {
        let blocked = Blocked::default();
        let path = format!("/v1/files/`x` <b>{}", "y".repeat(500));
        blocked.add_call("issue #1", ("api.example", 443), "GET", &path);
        let call = blocked.of("issue #1").listed[0].call.clone().unwrap();
        assert!(call.starts_with("GET /v1/files/_x__"), "{call}");
        assert!(call.len() <= MAX_CALL);
        let path = call.strip_prefix("GET ").unwrap();
        assert!(!path.contains(['`', '<', '>', ' ']), "{call}");
    }
}
