//! The proxy with the relay in front of it, against the scripted Messages API: what a sandbox's
//! Claude Code sends, over TCP to the relay and on through the work's socket.
use super::*;
use fake_anthropic::{FakeAnthropic, Scenario};
use sandcastle_config::Egress;
use sandcastle_testkit::tls::{https_front, test_ca};
use serde_json::json;

const REAL_KEY: &str = "sk-ant-real-operator-key";

fn model() -> FakeAnthropic {
    let scenario = json!([{"match": "hello", "turns": [{"text": "hi there"}]}]);
    FakeAnthropic::start(Scenario::from_json(&scenario.to_string()).unwrap()).unwrap()
}

/// Stands for the run's directory, for as long as the test process runs.
fn sockets() -> &'static Path {
    static DIR: std::sync::LazyLock<tempfile::TempDir> =
        std::sync::LazyLock::new(|| tempfile::tempdir().unwrap());
    DIR.path()
}

/// The roots a run without `SSL_CERT_FILE` trusts.
fn system_roots() -> Roots {
    Roots::load(|_| None).unwrap()
}

fn proxy_to(model: &FakeAnthropic, credential: Credential) -> Proxy {
    Proxy::start(
        Upstream::new(Some(model.url()), credential, system_roots()).unwrap(),
        Policy {
            max_cost_per_run: None,
            egress: Vec::new(),
            forge: None,
        },
        sockets(),
    )
    .unwrap()
}

/// A relay on a port of 127.0.0.1 passing to `work`'s socket, as in a sandbox; its base URL.
fn relay_to(work: &WorkProxy) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let socket: Arc<Path> = Arc::from(work.socket().as_path());
    std::thread::spawn(move || crate::relay::serve(listener, socket));
    url
}

fn ask(base: &str, key: Option<&str>, stream: bool) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut request = agent
        .post(format!("{base}/v1/messages"))
        .header("anthropic-version", "2023-06-01");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let body = json!({
        "model": "claude-test", "max_tokens": 10, "stream": stream,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}]
    });
    let mut response = request.send_json(body).unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

fn placeholder(work: &WorkProxy) -> String {
    let env = work.sandbox_env(1);
    env.iter()
        .find(|(k, _)| k == "ANTHROPIC_API_KEY")
        .map(|(_, v)| v.clone())
        .unwrap()
}

#[test]
fn a_request_with_the_works_key_reaches_the_model_with_the_real_credential_only() {
    let model = model();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let key = placeholder(&work);
    assert!(!key.contains(REAL_KEY));

    let (status, body) = ask(&base, Some(&key), false);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hi there"), "{body}");
    let (status, body) = ask(&base, Some(&key), true);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("event: message_start"), "{body}");
    assert!(body.contains("hi there"), "{body}");

    assert_eq!(model.credentials(), [REAL_KEY.to_string()]);
}

#[test]
fn another_works_key_or_none_is_refused_before_the_model_hears_of_it() {
    let model = model();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let other = proxy.open("issue #2", Budget::default()).unwrap();
    let base = relay_to(&work);

    for key in [Some(placeholder(&other)), None, Some(REAL_KEY.to_string())] {
        let (status, body) = ask(&base, key.as_deref(), false);
        assert_eq!(status, 401, "{body}");
        assert!(body.contains("authentication_error"), "{body}");
    }
    assert!(model.credentials().is_empty());
    assert!(model.requests().is_empty());
}

/// What `credential` sent the model for one request of the sandbox's, which carries the
/// placeholder key and a beta of Claude Code's own: each header as `name: value`.
fn sent_for(credential: Credential) -> Vec<String> {
    let model = model();
    let proxy = proxy_to(&model, credential);
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let body = json!({
        "model": "claude-test", "max_tokens": 10,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}]
    });
    let response = agent
        .post(format!("{base}/v1/messages"))
        .header("x-api-key", placeholder(&work))
        .header("anthropic-beta", "claude-code-20250219")
        .send_json(body)
        .unwrap();
    assert_eq!(response.status(), 200);
    model.auth_headers()
}

/// `ANTHROPIC_API_KEY` goes as `x-api-key`, and nothing else of a credential.
#[test]
fn an_api_key_goes_as_x_api_key() {
    assert_eq!(
        sent_for(Credential::ApiKey(REAL_KEY.into())),
        [
            "anthropic-beta: claude-code-20250219".to_string(),
            format!("x-api-key: {REAL_KEY}")
        ]
    );
}

/// `ANTHROPIC_AUTH_TOKEN` goes as `Authorization: Bearer`, with no OAuth beta.
#[test]
fn an_auth_token_goes_as_a_bearer() {
    assert_eq!(
        sent_for(Credential::AuthToken("tok-auth-123456".into())),
        [
            "anthropic-beta: claude-code-20250219",
            "authorization: Bearer tok-auth-123456"
        ]
    );
}

/// `CLAUDE_CODE_OAUTH_TOKEN` goes as `Authorization: Bearer` with the OAuth beta Claude Code
/// itself adds (`oauth-2025-04-20`), after the request's own betas.
#[test]
fn an_oauth_token_goes_as_a_bearer_with_the_oauth_beta() {
    assert_eq!(
        sent_for(Credential::OAuth("tok-oauth-123456".into())),
        [
            "anthropic-beta: claude-code-20250219,oauth-2025-04-20",
            "authorization: Bearer tok-oauth-123456"
        ]
    );
}

#[test]
fn a_closed_work_socket_is_gone_and_a_dead_upstream_is_an_api_error() {
    let model = model();
    let proxy = Proxy::start(
        Upstream::new(
            Some("http://127.0.0.1:1".into()),
            Credential::ApiKey(REAL_KEY.into()),
            system_roots(),
        )
        .unwrap(),
        Policy {
            max_cost_per_run: None,
            egress: Vec::new(),
            forge: None,
        },
        sockets(),
    )
    .unwrap();
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let (status, body) = ask(&base, Some(&placeholder(&work)), false);
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains("api_error") && !body.contains(REAL_KEY),
        "{body}"
    );

    let dir = work.dir().to_path_buf();
    drop(work);
    assert!(!dir.exists());
    drop(model);
}

#[test]
fn credentials_are_taken_in_order_and_a_missing_one_names_the_keys() {
    let pick = |set: &[&str]| {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        Credential::from(|key| set.contains(&key.to_string()).then(|| format!("v-{key}")))
    };
    assert!(matches!(
        pick(&["CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_API_KEY"]),
        Ok(Credential::ApiKey(_))
    ));
    assert!(matches!(
        pick(&["CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"]),
        Ok(Credential::AuthToken(_))
    ));
    let Err(error) = pick(&[]) else {
        panic!("no credential is an error")
    };
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
    let Err(error) = Upstream::new(
        Some("not a url".into()),
        Credential::ApiKey("k".into()),
        system_roots(),
    ) else {
        panic!("a bad URL is an error")
    };
    assert!(error.to_string().contains("ANTHROPIC_BASE_URL"), "{error}");
}

/// A model whose every answer to "hello" costs 100k tokens in and 1000 out, and a proxy to it.
fn costly_model() -> (FakeAnthropic, Proxy) {
    let scenario = json!([{"match": "hello", "turns": [
        {"text": "costly", "usage": {"input_tokens": 100000, "output_tokens": 1000}}
    ], "repeat_last": true}]);
    let model = FakeAnthropic::start(Scenario::from_json(&scenario.to_string()).unwrap()).unwrap();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    (model, proxy)
}

#[test]
fn the_work_is_metered_from_the_answers_and_refused_once_its_budget_is_spent() {
    let (model, proxy) = costly_model();
    // Priced as the dearest model: 100k in at $15/M and 1k out at $75/M is $1.575.
    let budget = Budget {
        spent: 1.0,
        limit: Some(2.5),
        shared: None,
    };
    let work = proxy.open("issue #1", budget).unwrap();
    let base = relay_to(&work);
    let key = placeholder(&work);

    assert_eq!(ask(&base, Some(&key), true).0, 200);
    let usage = work.take_usage();
    assert_eq!((usage.input_tokens, usage.output_tokens), (100_000, 1000));
    assert!((usage.cost_usd - 1.575).abs() < 1e-9, "{usage:?}");
    assert_eq!(work.take_usage().cost_usd, 0.0, "taken once");

    let (status, body) = ask(&base, Some(&key), false);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("permission_error")
            && body.contains("issue #1")
            && body.contains("maxCostPerIssue ($2.50)"),
        "{body}"
    );
    assert_eq!(model.requests().len(), 1, "the refused request never left");
}

/// Two sockets under one shared budget (an issue's attempts): what one spent counts for the
/// other, and what they had spent before counts once.
#[test]
fn works_under_a_shared_budget_spend_it_together() {
    let (model, proxy) = costly_model();
    // $1.575 a request (as above), against $3.00 with $1.00 spent before.
    let budget = Budget {
        spent: 1.0,
        limit: Some(3.0),
        shared: Some(SharedSpend::default()),
    };
    let a = proxy.open("issue #1", budget.clone()).unwrap();
    let b = proxy.open("issue #1", budget).unwrap();
    assert_eq!(ask(&relay_to(&a), Some(&placeholder(&a)), true).0, 200);
    // Alone, b would have $2.00 left; together, $0.425: a lone request still goes on.
    assert_eq!(ask(&relay_to(&b), Some(&placeholder(&b)), true).0, 200);
    for work in [&a, &b] {
        let (status, body) = ask(&relay_to(work), Some(&placeholder(work)), false);
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("it has cost $4.15"), "{body}");
    }
    assert_eq!(model.requests().len(), 2, "the refused requests never left");
    assert!(
        (a.take_usage().cost_usd - 1.575).abs() < 1e-9,
        "each its own meter"
    );
}

#[test]
fn a_spent_run_budget_refuses_every_work() {
    let model = model();
    let proxy = Proxy::start(
        Upstream::new(
            Some(model.url()),
            Credential::ApiKey(REAL_KEY.into()),
            system_roots(),
        )
        .unwrap(),
        Policy {
            max_cost_per_run: Some(0.000001),
            egress: Vec::new(),
            forge: None,
        },
        sockets(),
    )
    .unwrap();
    let one = proxy.open("issue #1", Budget::default()).unwrap();
    let two = proxy.open("issue #2", Budget::default()).unwrap();
    assert_eq!(ask(&relay_to(&one), Some(&placeholder(&one)), false).0, 200);
    let (status, body) = ask(&relay_to(&two), Some(&placeholder(&two)), false);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("maxCostPerRun"), "{body}");
}

fn proxy_with_egress(model: &FakeAnthropic, egress: &[&str]) -> Proxy {
    Proxy::start(
        Upstream::new(
            Some(model.url()),
            Credential::ApiKey(REAL_KEY.into()),
            system_roots(),
        )
        .unwrap(),
        Policy {
            max_cost_per_run: None,
            egress: egress.iter().map(|e| Egress::parse(e).unwrap()).collect(),
            forge: None,
        },
        sockets(),
    )
    .unwrap()
}

/// `CONNECT host:port` through the relay, with the proxy URL's user and password; what the
/// proxy answered, and the connection for what follows.
fn connect(base: &str, target: &str, token: &str) -> (String, std::net::TcpStream) {
    use base64::Engine;
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("sandcastle:{token}"));
    write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {auth}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap() == 1 {
        head.push(byte[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), stream)
}

#[test]
fn connect_tunnels_to_an_allowed_host_only_and_counts_the_refusals() {
    use std::io::{Read, Write};
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in echo.incoming().flatten() {
            let mut buffer = [0u8; 5];
            if stream.read_exact(&mut buffer).is_ok() {
                let _ = stream.write_all(&buffer);
            }
        }
    });
    let model = model();
    let proxy = proxy_with_egress(&model, &[&format!("127.0.0.1:{echo_port}")]);
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let token = placeholder(&work);

    let (head, mut tunnel) = connect(&base, &format!("127.0.0.1:{echo_port}"), &token);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tunnel.write_all(b"hello").unwrap();
    let mut echoed = [0u8; 5];
    tunnel.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"hello");

    for _ in 0..2 {
        let (head, _) = connect(&base, "evil.example:443", &token);
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    }
    let (head, _) = connect(&base, &format!("127.0.0.1:{echo_port}"), "wrong");
    assert!(head.starts_with("HTTP/1.1 407"), "{head}");
    assert_eq!(
        proxy.blocked("issue #1").listed,
        [BlockedRequest {
            host: "evil.example".into(),
            port: 443,
            call: None,
            count: 2
        }]
    );
    assert_eq!(proxy.blocked("issue #2"), Refusals::default());
}

/// One request written by hand through the relay, `connection: close`; the status and the body.
fn raw(base: &str, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    // A refusal may close the connection before the body is all written: its answer is read.
    let _ = write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: model\r\nx-api-key: {key}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// The operator's key could list and delete files, run batches (never metered) or anything else
/// the API offers: only the two Messages calls Claude Code makes go on; every other call is a 403
/// that the model never hears of, listed like a refused host.
#[test]
fn only_the_messages_api_is_forwarded_and_every_other_call_is_refused_and_listed() {
    let model = model();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let key = placeholder(&work);
    let message = json!({"model": "claude-test", "max_tokens": 10,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}]})
    .to_string();

    let refused = [
        ("GET", "/v1/files", ""),
        ("DELETE", "/v1/files/file_123", ""),
        ("POST", "/v1/messages/batches", message.as_str()),
        ("TRACE", "/", ""),
        ("GET", "/v1/messages?beta=true", ""),
        ("POST", "/v1/messages/extra", message.as_str()),
    ];
    for (method, path, body) in refused {
        let (status, answer) = raw(&base, method, path, &key, body);
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert!(
            answer.contains("forwards only POST /v1/messages"),
            "{answer}"
        );
    }
    assert!(model.routes().is_empty(), "{:?}", model.routes());

    let (status, answer) = raw(&base, "POST", "/v1/messages?beta=true", &key, &message);
    assert_eq!(status, 200, "{answer}");
    let count = json!({"model": "claude-test", "messages": []}).to_string();
    let (status, answer) = raw(
        &base,
        "POST",
        "/v1/messages/count_tokens?beta=true",
        &key,
        &count,
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        model.routes(),
        [
            "POST /v1/messages?beta=true",
            "POST /v1/messages/count_tokens?beta=true"
        ]
    );

    let port = model.port();
    let listed: Vec<(String, u16, Option<String>, u32)> = proxy
        .blocked("issue #1")
        .listed
        .into_iter()
        .map(|b| (b.host, b.port, b.call, b.count))
        .collect();
    let call = |c: &str| ("127.0.0.1".to_string(), port, Some(c.to_string()), 1);
    assert_eq!(
        listed,
        [
            call("DELETE /v1/files/file_123"),
            call("GET /v1/files"),
            call("GET /v1/messages"),
            call("POST /v1/messages/batches"),
            call("POST /v1/messages/extra"),
            call("TRACE /"),
        ]
    );
}

/// Twenty requests at once against a $1 budget, each of which the model bills $0.315 and may cost
/// $0.765 (sonnet, 1000 tokens out, a full context in): before, each saw nothing spent yet and all
/// twenty went on ($6.30). Now each reserves its worst case first: what goes on alongside others
/// fits in what is left, and only a request alone may pass the limit, by at most itself.
#[test]
fn parallel_requests_cannot_pass_the_budget_together() {
    let scenario = json!([{"match": "hello", "turns": [
        {"text": "costly", "delay_seconds": 1, "usage": {"input_tokens": 100000, "output_tokens": 1000}}
    ], "repeat_last": true}]);
    let model = FakeAnthropic::start(Scenario::from_json(&scenario.to_string()).unwrap()).unwrap();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let limit = 1.0;
    let budget = Budget {
        spent: 0.0,
        limit: Some(limit),
        shared: None,
    };
    let work = proxy.open("issue #1", budget).unwrap();
    let base = relay_to(&work);
    let key = placeholder(&work);
    let message = json!({"model": "claude-sonnet-4-6", "max_tokens": 1000,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}]})
    .to_string();
    let worst = (200_000.0 * 3.0 * 1.25 + 1000.0 * 15.0) / 1e6;
    let billed = (100_000.0 * 3.0 + 1000.0 * 15.0) / 1e6;

    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let asks: Vec<_> = (0..20)
            .map(|_| scope.spawn(|| raw(&base, "POST", "/v1/messages", &key, &message).0))
            .collect();
        asks.into_iter().map(|a| a.join().unwrap()).collect()
    });

    let answered = statuses.iter().filter(|&&s| s == 200).count();
    // 429: held by the requests in flight; 503: past the connections a work is served at once.
    assert!(
        statuses.iter().all(|s| [200, 403, 429, 503].contains(s)),
        "{statuses:?}"
    );
    assert!(answered >= 1, "{statuses:?}");
    assert_eq!(
        model.requests().len(),
        answered,
        "a refused request never left"
    );
    let spent = work.take_usage().cost_usd;
    assert!((spent - answered as f64 * billed).abs() < 1e-9, "{spent}");
    assert!(
        spent <= limit + worst,
        "{answered} requests went on, ${spent:.2} against ${limit:.2}: {statuses:?}"
    );
}

/// This process's resident memory in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Forty uploads on one work's socket, each declaring the largest body the proxy takes, sending
/// all of it but the last byte, and stalling. Before, the proxy held every one of them (and a
/// body of up to 64 MiB each) for ever. Now it serves [`MAX_CONNECTIONS`] and answers the rest 503
/// at once, so what it holds is at most that many bodies; each stalled one is answered 408 and
/// dropped after [`IDLE`] without a byte, and the model never hears of any.
#[test]
fn stalled_uploads_hold_bounded_memory_and_are_dropped() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    const UPLOADS: usize = 40;
    let model = model();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let key = placeholder(&work);
    let body = vec![b' '; MAX_REQUEST_BYTES - 1];
    let before = resident_kib();

    let mut streams: Vec<UnixStream> = (0..UPLOADS)
        .map(|_| UnixStream::connect(work.socket()).unwrap())
        .collect();
    std::thread::scope(|scope| {
        for stream in &mut streams {
            let (key, body) = (&key, &body);
            scope.spawn(move || {
                let head = format!(
                    "POST /v1/messages HTTP/1.1\r\nhost: model\r\nx-api-key: {key}\r\ncontent-length: {MAX_REQUEST_BYTES}\r\n\r\n"
                );
                // One turned away is closed under the writer: its answer is read below.
                let _ = stream
                    .write_all(head.as_bytes())
                    .and_then(|()| stream.write_all(body));
            });
        }
    });
    let held_kib = resident_kib().saturating_sub(before);
    // The bodies the proxy may hold, and room for the other tests of this process.
    let bound_kib = (MAX_CONNECTIONS * MAX_REQUEST_BYTES / 1024 * 5 / 4 + 32 * 1024) as u64;
    assert!(
        held_kib <= bound_kib,
        "{UPLOADS} stalled uploads of {} MiB grew the proxy by {held_kib} KiB, over {bound_kib} KiB",
        MAX_REQUEST_BYTES >> 20
    );

    let statuses: Vec<String> = streams
        .iter_mut()
        .map(|stream| {
            let mut answer = String::new();
            let _ = stream.read_to_string(&mut answer);
            answer.split(' ').nth(1).unwrap_or("closed").to_string()
        })
        .collect();
    let count = |status: &str| statuses.iter().filter(|s| *s == status).count();
    assert_eq!(count("408"), MAX_CONNECTIONS, "{statuses:?}");
    assert_eq!(count("503"), UPLOADS - MAX_CONNECTIONS, "{statuses:?}");
    assert!(model.routes().is_empty(), "{:?}", model.routes());

    // The dropped connections freed their places.
    let base = relay_to(&work);
    assert_eq!(ask(&base, Some(&key), false).0, 200);
}

/// A body declared larger than the proxy takes is refused before it is read or forwarded.
#[test]
fn an_oversized_body_is_refused_before_anything_is_forwarded() {
    let model = model();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let key = placeholder(&work);
    let huge = format!(
        r#"{{"model":"claude-test","max_tokens":1,"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(MAX_REQUEST_BYTES)
    );
    let (status, answer) = raw(&base, "POST", "/v1/messages", &key, &huge);
    assert_eq!(status, 413, "{answer}");
    assert!(answer.contains("request_too_large"), "{answer}");
    assert!(model.routes().is_empty());
}

/// On the host only this process's user reaches a work's socket: its directory is mode 0700,
/// and another user's `curl` cannot connect, while the relay (here the same user) does.
#[test]
fn only_the_proxys_own_user_reaches_the_socket_on_the_host() {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    let model = model();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let private = work.dir().parent().unwrap().metadata().unwrap();
    assert_eq!(private.mode() & 0o777, 0o700);
    assert_eq!(private.uid(), rustix::process::geteuid().as_raw());

    let other = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
        ])
        .arg(work.socket())
        .args(["-X", "POST", "http://model/v1/messages"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&other.stdout),
        "000",
        "another user reached the socket"
    );
    assert!(!other.status.success());
    assert_eq!(
        ask(&relay_to(&work), Some(&placeholder(&work)), false).0,
        200
    );
}

/// A CONNECT to a host of 30 KiB is refused and kept cut to a DNS name's length; a head larger than
/// the proxy reads (a host of 64 KiB) is refused whole.
#[test]
fn a_huge_host_is_kept_cut_and_a_huge_head_is_refused() {
    use std::io::{Read, Write};
    let model = model();
    let proxy = proxy_with_egress(&model, &[]);
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let token = placeholder(&work);

    let host = format!("{}.example", "a".repeat(30 * 1024));
    let (head, _) = connect(&base, &format!("{host}:443"), &token);
    assert!(head.starts_with("HTTP/1.1 403"), "{}", &head[..80]);
    let listed = proxy.blocked("issue #1").listed;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].host.len(), 253);

    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    let padding = "x".repeat(2 * MAX_HEAD_BYTES);
    let _ = write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nx-api-key: {token}\r\nx-padding: {padding}\r\n\r\n"
    );
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert!(model.routes().is_empty());
}

/// A sandbox that asks for a long streamed answer and never reads it: before, the proxy's pump
/// waited on it for ever, holding a thread, and the answer was never metered. Now the sandbox is
/// hung up on after [`IDLE`], and the meter reads the answer to its end.
#[test]
fn an_answer_the_sandbox_never_reads_is_still_metered() {
    use std::io::Write;
    let scenario = json!([{"match": "hello", "turns": [
        {"text": "x".repeat(4 * 1024 * 1024), "usage": {"input_tokens": 100, "output_tokens": 1_000_000}}
    ]}]);
    let model = FakeAnthropic::start(Scenario::from_json(&scenario.to_string()).unwrap()).unwrap();
    let proxy = proxy_to(&model, Credential::ApiKey(REAL_KEY.into()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let key = placeholder(&work);
    let body = json!({"model": "claude-test", "max_tokens": 10, "stream": true,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}]})
    .to_string();
    let mut stream = std::os::unix::net::UnixStream::connect(work.socket()).unwrap();
    write!(
        stream,
        "POST /v1/messages HTTP/1.1\r\nhost: model\r\nx-api-key: {key}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();

    // Waits for the meter (IDLE and the rest of the answer), never asserting on time.
    let mut usage = work.take_usage();
    for _ in 0..600 {
        if usage.output_tokens > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        usage = work.take_usage();
    }
    assert_eq!(usage.output_tokens, 1_000_000, "{usage:?}");
    drop(stream);
}

/// A PEM file holding `pem`, as the operator's `SSL_CERT_FILE`.
fn cert_file(dir: &Path, pem: &str) -> Roots {
    let path = dir.join("ca.pem");
    std::fs::write(&path, pem).unwrap();
    let path = path.to_str().unwrap().to_string();
    Roots::load(|key| (key == "SSL_CERT_FILE").then(|| path.clone())).unwrap()
}

/// An HTTPS `ANTHROPIC_BASE_URL` whose certificate a CA in `SSL_CERT_FILE` signed: the work's
/// request reaches the model over TLS with the real credential, streamed or not.
#[test]
fn an_https_upstream_signed_by_the_cert_files_ca_is_reached() {
    let model = model();
    let (ca, pem) = test_ca("sandcastle test CA");
    let front = https_front(model.port(), &ca);
    let dir = tempfile::tempdir().unwrap();
    let upstream = Upstream::new(
        Some(front),
        Credential::ApiKey(REAL_KEY.into()),
        cert_file(dir.path(), &pem),
    )
    .unwrap();
    let policy = Policy {
        max_cost_per_run: None,
        egress: Vec::new(),
        forge: None,
    };
    let proxy = Proxy::start(upstream, policy, sockets()).unwrap();
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);

    let (status, body) = ask(&base, Some(&placeholder(&work)), false);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hi there"), "{body}");
    let (status, body) = ask(&base, Some(&placeholder(&work)), true);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("event: message_start"), "{body}");
    assert_eq!(model.credentials(), [REAL_KEY.to_string()]);
}

/// A certificate no trusted CA signed (another CA in `SSL_CERT_FILE`, or the system's roots): one
/// error naming the fix, and nothing reaches the model, in plain text or otherwise.
#[test]
fn an_https_upstream_no_trusted_ca_signed_is_one_clear_error_and_never_plain_text() {
    let model = model();
    let (ca, _) = test_ca("sandcastle test CA");
    let (_, other_pem) = test_ca("another test CA");
    let front = https_front(model.port(), &ca);
    let dir = tempfile::tempdir().unwrap();
    for (roots, fix) in [
        (cert_file(dir.path(), &other_pem), "SSL_CERT_FILE ("),
        (system_roots(), "set SSL_CERT_FILE to a PEM file"),
    ] {
        let upstream = Upstream::new(
            Some(front.clone()),
            Credential::ApiKey(REAL_KEY.into()),
            roots,
        )
        .unwrap();
        let policy = Policy {
            max_cost_per_run: None,
            egress: Vec::new(),
            forge: None,
        };
        let proxy = Proxy::start(upstream, policy, sockets()).unwrap();
        let work = proxy.open("issue #1", Budget::default()).unwrap();
        let (status, body) = ask(&relay_to(&work), Some(&placeholder(&work)), false);
        assert_eq!(status, 502, "{body}");
        let message = serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.contains("invalid peer certificate") && message.contains(fix),
            "{message}"
        );
        assert!(
            !message.contains('\n') && !message.contains(REAL_KEY),
            "{message}"
        );
    }
    assert!(model.routes().is_empty(), "{:?}", model.routes());
}

/// A request through the relay as a client with `HTTP_PROXY` sends it: absolute-form, with the
/// proxy URL's user and password and `authorization` as given; the status and the body.
fn through_proxy(
    base: &str,
    method: &str,
    url: &str,
    proxy_key: &str,
    authorization: &str,
) -> (u16, String) {
    use base64::Engine;
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("sandcastle:{proxy_key}"));
    let host = url.split('/').nth(2).unwrap_or("");
    write!(
        stream,
        "{method} {url} HTTP/1.1\r\nhost: {host}\r\nproxy-authorization: Basic {auth}\r\n\
         authorization: {authorization}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// The forge's name in sandboxes reaches the run's forge (here on the host's loopback) with the
/// agent's own login, path and query kept; under that name nothing else is reached (another port,
/// a tunnel, or a run whose sandboxes have no forge login), and each refusal is listed.
#[test]
fn the_forges_name_in_sandboxes_reaches_only_the_runs_forge() {
    let forge = fake_forge::FakeForge::start();
    forge.create_repo("alice", "demo", "main").unwrap();
    forge.add_user("alice");
    let reader = forge.add_user_with_scopes("reader-bot", &["read:issue", "read:repository"]);
    forge
        .create_issue("alice/demo", "alice", "Reachable from the sandbox", "", &[])
        .unwrap();
    let model = model();
    let open = |forge_url: Option<String>| {
        let upstream = Upstream::new(
            Some(model.url()),
            Credential::ApiKey(REAL_KEY.into()),
            system_roots(),
        )
        .unwrap();
        let policy = Policy {
            max_cost_per_run: None,
            egress: Vec::new(),
            forge: forge_url,
        };
        Proxy::start(upstream, policy, sockets()).unwrap()
    };
    let issues = format!("{FORGE_IN_SANDBOX}/api/v1/repos/alice/demo/issues?state=open");
    let login = format!("token {reader}");

    let proxy = open(Some(forge.url().to_string()));
    let work = proxy.open("issue #1", Budget::default()).unwrap();
    let base = relay_to(&work);
    let key = placeholder(&work);
    let (status, body) = through_proxy(&base, "GET", &issues, &key, &login);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Reachable from the sandbox"), "{body}");
    let shouted = issues.replace("forge.sandcastle.invalid", "FORGE.Sandcastle.INVALID");
    let (status, body) = through_proxy(&base, "GET", &shouted, &key, &login);
    assert_eq!(status, 200, "{body}");
    assert_eq!(forge.received("GET /repos/alice/demo/issues"), 2);

    let (status, _) = through_proxy(&base, "GET", &issues, "another works key", &login);
    assert_eq!(status, 407);
    let elsewhere = issues.replace(".invalid/", ".invalid:8080/");
    let (status, body) = through_proxy(&base, "GET", &elsewhere, &key, &login);
    assert_eq!(status, 403, "{body}");
    let (head, _) = connect(&base, "forge.sandcastle.invalid:443", &key);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let listed: Vec<(String, u16)> = proxy
        .blocked("issue #1")
        .listed
        .into_iter()
        .map(|b| (b.host, b.port))
        .collect();
    assert_eq!(
        listed,
        [
            ("forge.sandcastle.invalid".to_string(), 443),
            ("forge.sandcastle.invalid".to_string(), 8080)
        ]
    );

    let without_login = open(None);
    let work = without_login.open("issue #1", Budget::default()).unwrap();
    let (status, body) = through_proxy(
        &relay_to(&work),
        "GET",
        &issues,
        &placeholder(&work),
        &login,
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("FORGEJO_AGENT_TOKEN"), "{body}");
    assert_eq!(
        forge.received("GET /repos/alice/demo/issues"),
        2,
        "nothing more reached the forge"
    );
}
