//! The model proxy end to end: the key stays on the host, the model still answers through the
//! relay, and the proxy refuses what is not the work's own. Real Docker, the real Claude Code CLI.
use crate::harness::{Harness, docker_or_skip};
use serde_json::{Value, json};
use std::process::Command;

const COMPLETE: &str = "<promise>COMPLETE</promise>";
/// The harness's `.sandcastle/.env` key.
const KEY: &str = "sk-test-e2e-secret-key";
/// The key, put together by the shell, so that no command the agent runs holds it literally (a
/// search would find the command itself in Claude Code's session file).
const KEY_IN_SHELL: &str = "k=sk-test-e2e; k=\"$k-secret-key\"";

fn reviewer() -> Value {
    json!({"match": "# Role: reviewer", "turns": [{"text": format!("Fine. {COMPLETE}")}]})
}

fn one_issue(turns: Value, config: &str) -> Harness {
    let h = Harness::new(
        json!([reviewer(), {"match": "The issue: #1\n", "turns": turns}]),
        config,
    );
    assert_eq!(
        h.create_issue("The work", "Look around.", &["ready-for-agent"]),
        1
    );
    h
}

/// Everything the container holds of it: its configuration, and every file root can read.
fn container_holds_key(id: &str) -> String {
    let inspect = Command::new("docker")
        .args(["inspect", id])
        .output()
        .unwrap();
    let mut found = String::new();
    if String::from_utf8_lossy(&inspect.stdout).contains(KEY) {
        found += "docker inspect; ";
    }
    let grep = Command::new("docker")
        .args(["exec", id, "grep", "-rlF", KEY, "/"])
        .args([
            "--exclude-dir=proc",
            "--exclude-dir=sys",
            "--exclude-dir=dev",
        ])
        .output()
        .unwrap();
    found += &String::from_utf8_lossy(&grep.stdout);
    found
}

/// The agent looks everywhere for the key while the test looks at its container: nobody finds
/// it, the agent's model calls succeed, and the model server got the real key from the proxy.
#[test]
fn the_model_key_never_enters_a_sandbox() {
    key_stays_out("", Credential::ApiKey);
}

/// The same with `ANTHROPIC_AUTH_TOKEN`, which reaches the model as `Authorization: Bearer`.
#[test]
fn an_auth_token_never_enters_a_sandbox_and_reaches_the_model_as_a_bearer() {
    key_stays_out("", Credential::AuthToken);
}

/// The same with `CLAUDE_CODE_OAUTH_TOKEN`: `Authorization: Bearer` and the OAuth beta on every
/// request.
#[test]
fn an_oauth_token_never_enters_a_sandbox_and_reaches_the_model_as_a_bearer_with_its_beta() {
    key_stays_out("", Credential::OAuth);
}

/// The same on the host's network, the opt-out: direct network access, and still no key.
#[test]
fn the_model_key_never_enters_a_sandbox_on_the_hosts_network() {
    key_stays_out(
        "[sandbox]\nnetwork = \"host\"\nmemory = \"2g\"\npidsLimit = 512\n",
        Credential::ApiKey,
    );
}

/// The operator's model credential variable a test's `.env` sets to [`KEY`].
#[derive(Clone, Copy, PartialEq)]
enum Credential {
    ApiKey,
    AuthToken,
    OAuth,
}

fn key_stays_out(config: &str, credential: Credential) {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let look = format!(
        "{KEY_IN_SHELL}; {{ env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done; \
         grep -rlF \"$k\" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | sed 's/^/FOUND IN /'; \
         tr '\\0' '\\n' < /proc/self/environ | grep -c \"$k\" | sed 's/^/own environment: /'; \
         }} > seen.txt; touch /tmp/looked; for i in $(seq 600); do [ -f /tmp/go ] && break; sleep 0.1; done; \
         git add seen.txt && git commit -qm 'What the sandbox saw'"
    );
    let h = one_issue(
        json!([{"bash": look, "description": "look"}, {"text": format!("Done. {COMPLETE}")}]),
        config,
    );
    let variable = match credential {
        Credential::ApiKey => "ANTHROPIC_API_KEY",
        Credential::AuthToken => "ANTHROPIC_AUTH_TOKEN",
        Credential::OAuth => "CLAUDE_CODE_OAUTH_TOKEN",
    };
    let env = h.project().join(".sandcastle/.env");
    let text = std::fs::read_to_string(&env).unwrap();
    let text = text.replace(
        &format!("ANTHROPIC_API_KEY={KEY}"),
        &format!("{variable}={KEY}"),
    );
    std::fs::write(&env, text).unwrap();

    let mut run = h.start_until(&["run", "--issue", "1"], "/tmp/looked");
    // The turn's container, and the reviewer's, started beside it: each looked into once it runs.
    let running = || -> Vec<String> {
        let named = h.named_containers().into_iter();
        named
            .filter(|(_, name)| !name.contains("-warm-"))
            .map(|(id, _)| id)
            .collect()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while running().len() < 2 {
        assert!(
            std::time::Instant::now() < until,
            "{:?}",
            h.named_containers()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let containers = running();
    assert_eq!(containers.len(), 2, "{containers:?}");
    let found: String = containers
        .iter()
        .map(|id| container_holds_key(id))
        .collect();
    h.touch_in_sandbox("/tmp/go");
    assert!(run.wait().unwrap().success());

    assert_eq!(found, "", "the key is in the container");
    let seen = h.remote_file("sandcastle/issue-1", "seen.txt");
    assert!(!seen.contains(KEY), "{seen}");
    assert!(!seen.contains("FOUND IN"), "{seen}");
    assert!(seen.contains("own environment: 0"), "{seen}");
    assert!(
        seen.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:")
            && seen.contains("ANTHROPIC_API_KEY=sandcastle-work-"),
        "Claude Code is pointed at the relay with a placeholder:\n{seen}"
    );
    assert!(!h.anthropic.requests().is_empty());
    let sent = h.anthropic.auth_headers();
    let (credentials, betas): (Vec<&String>, Vec<&String>) = sent
        .iter()
        .partition(|h| !h.starts_with("anthropic-beta: "));
    let expected = match credential {
        Credential::ApiKey => format!("x-api-key: {KEY}"),
        Credential::AuthToken | Credential::OAuth => format!("authorization: Bearer {KEY}"),
    };
    assert_eq!(credentials, [&expected], "{sent:?}");
    let oauth = |beta: &&String| beta.split([' ', ',']).any(|b| b == "oauth-2025-04-20");
    if credential == Credential::OAuth {
        assert!(!betas.is_empty() && betas.iter().all(oauth), "{sent:?}");
    } else {
        assert!(!betas.iter().any(oauth), "{sent:?}");
    }
    assert_eq!(h.pulls().len(), 1, "the work published");
}

/// On the default network the sandbox reaches neither the forge nor the model server directly,
/// and cannot stop or look into the relay; its model calls go on through the relay all the same.
#[test]
fn a_sandbox_reaches_nothing_directly_and_cannot_touch_the_relay() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    // The ports are the test's to tell: they exist only once the servers run.
    let probe = "touch /tmp/ready; for i in $(seq 600); do [ -s /tmp/ports ] && break; sleep 0.1; done; \
         { for port in $(cat /tmp/ports); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && echo \"REACHED $port\" || echo \"refused $port\"; done; \
         for pid in $(ps -eo pid=,user= | awk '$2==\"root\"{print $1}'); do kill -9 $pid 2>/dev/null && echo \"KILLED $pid\" || echo \"not killed $pid\"; \
         tr '\\0' '\\n' < /proc/$pid/environ >/dev/null 2>&1 && echo \"READ $pid\"; done; } > probe.txt; \
         git add probe.txt && git commit -qm 'What the sandbox reached'";
    let h = one_issue(
        json!([{"bash": probe, "description": "probe"}, {"text": format!("Done. {COMPLETE}")}]),
        "",
    );
    let mut run = h.start_until(&["run", "--issue", "1"], "/tmp/ready");
    let ports = format!("{} {}", port_of(h.forge.url()), h.anthropic.port());
    // Only the turn's container: another of the work may be listed before it has started.
    let turns = h
        .container_with("/tmp/ready")
        .expect("the turn's container");
    let told = Command::new("docker")
        .args([
            "exec",
            &turns,
            "sh",
            "-c",
            &format!("echo {ports} > /tmp/ports"),
        ])
        .status()
        .unwrap();
    assert!(told.success());
    assert!(run.wait().unwrap().success());

    let probe = h.remote_file("sandcastle/issue-1", "probe.txt");
    assert!(
        !probe.contains("REACHED") && !probe.contains("KILLED"),
        "{probe}"
    );
    assert!(!probe.contains("READ"), "{probe}");
    assert!(
        probe.contains("not killed"),
        "the relay and the init are root's:\n{probe}"
    );
    assert_eq!(probe.matches("refused").count(), 2, "{probe}");
    assert_eq!(h.pulls().len(), 1, "the model answered after the attempts");
}

fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The relay dies in one sandbox mid-turn (the agent cannot kill it: it is root's): the container
/// stops, which fails only that turn; the next turn of the work runs in a fresh container from the
/// work branch, commits and completes, and both works publish.
#[test]
fn a_dead_relay_fails_only_its_own_turn() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let plan = r#"<plan>{"issues":[{"id":1,"title":"One","branch":"sandcastle/issue-1"},{"id":2,"title":"Two","branch":"sandcastle/issue-2"}]}</plan>"#;
    let wait = "touch /tmp/ready; for i in $(seq 600); do [ -f /tmp/go ] && break; sleep 0.1; done; echo late > late.txt";
    let h = Harness::new(
        json!([
            {"match": "# Role: planner", "turns": [{"text": format!("Both. {plan}")}]},
            reviewer(),
            // Issue 1's second turn: a fresh session told how the first one ended.
            {"match": "the sandbox stopped during the turn", "turns": [
                {"bash": "[ ! -e /tmp/ready ] && echo one > one.txt && git add one.txt && git commit -qm One", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]},
            {"match": "The issue: #1\n", "turns": [{"bash": wait, "description": "wait"}, {"text": format!("Done. {COMPLETE}")}]},
            {"match": "The issue: #2\n", "turns": [
                {"bash": "echo two > two.txt && git add two.txt && git commit -qm Two", "description": "commit"},
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        "maxConcurrency = 2",
    );
    h.create_issue("One", "Wait.", &["ready-for-agent"]);
    h.create_issue("Two", "Commit.", &["ready-for-agent"]);

    let mut run = h
        .command(&["run", "--once"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    h.wait_for_file(&mut run, "/tmp/ready");
    let one = h
        .containers()
        .into_iter()
        .find(|id| {
            let name = Command::new("docker")
                .args(["inspect", "--format", "{{.Name}}", id])
                .output()
                .unwrap();
            String::from_utf8_lossy(&name.stdout)
                .trim_end()
                .ends_with("-issue-1")
        })
        .expect("issue 1's sandbox");
    h.kill_relay(&one);
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");

    assert!(output.status.success(), "both works published");
    let mut heads: Vec<String> = h
        .pulls()
        .iter()
        .map(|pull| pull["head"]["ref"].as_str().unwrap().to_string())
        .collect();
    heads.sort();
    assert_eq!(heads, ["sandcastle/issue-1", "sandcastle/issue-2"]);
    assert!(
        h.remote_log("sandcastle/issue-1")
            .contains(&"One".to_string()),
        "the fresh sandbox's commit is on the branch"
    );
    assert_eq!(
        stderr
            .matches("the sandbox stopped during implementer iteration 1; the next turn starts a fresh one")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("sandboxes have no network but loopback"),
        "{stderr}"
    );
    assert!(h.containers().is_empty());
}

/// A tool call spends through the proxy behind Claude Code's back: its own stream reports next to
/// nothing, the proxy's meter reports what the API billed, refuses the agent's next request, and
/// the work stops on `maxCostPerIssue` as it does when the agent itself spends.
#[test]
fn the_budget_is_the_proxys_meter_not_the_agents_word() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let spend = r#"body='{"model":"x","max_tokens":1,"messages":[{"role":"user","content":"SPEND-BEHIND-ITS-BACK"}]}'; exec 3<>/dev/tcp/127.0.0.1/${ANTHROPIC_BASE_URL##*:}; printf 'POST /v1/messages HTTP/1.1\r\nHost: model\r\nx-api-key: %s\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: %s\r\nconnection: close\r\n\r\n%s' "$ANTHROPIC_API_KEY" "${#body}" "$body" >&3; head -c 200 <&3"#;
    let h = Harness::new(
        json!([
            reviewer(),
            {"match": "SPEND-BEHIND-ITS-BACK", "without_tools": true, "turns": [
                {"text": "spent", "usage": {"input_tokens": 1_000_000, "output_tokens": 0}}]},
            {"match": "The issue: #1\n", "turns": [
                {"bash": spend, "description": "spend"},
                {"text": format!("Done. {COMPLETE}")}]},
        ]),
        "[budget]\nmaxCostPerIssue = 5",
    );
    let issue = h.create_issue("Costly", "Spend.", &["ready-for-agent"]);
    let output = h.sandcastle(&["run", "--issue", &issue.to_string()]);
    assert!(output.status.success());

    let spent = h
        .anthropic
        .requests()
        .iter()
        .filter(|r| r.prompt.contains("SPEND-BEHIND-ITS-BACK"))
        .count();
    assert_eq!(
        spent, 1,
        "the tool call reached the model through the proxy"
    );
    assert!(
        !h.anthropic
            .requests()
            .iter()
            .any(|r| r.prompt.contains("The issue: #1\n") && r.turn > 0),
        "the agent's next request was refused"
    );
    let report = h.last_report();
    let cost = report["work"][0]["total"]["usage"]["cost_usd"]
        .as_f64()
        .unwrap();
    assert!(
        cost >= 15.0,
        "the API's own figure, 1M tokens at $15/M: {report}"
    );
    let comments = h.comments_of(issue);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].contains("which reaches [budget] maxCostPerIssue ($5.00)"),
        "{comments:?}"
    );
    assert!(h.pulls().is_empty());
}

/// The operator's key could list files or run unmetered batches: from the agent's own Bash tool,
/// through its relay with the work's placeholder key, `GET /v1/files` and
/// `POST /v1/messages/batches` are refused 403, the model server never hears of them, and the pull
/// request and the run report list them; the agent's own Messages calls go on.
#[test]
fn only_the_messages_api_leaves_a_sandbox() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let call = |method: &str, path: &str| {
        format!(
            "body='{{\"model\":\"x\",\"max_tokens\":1,\"requests\":[]}}'; exec 3<>/dev/tcp/127.0.0.1/${{ANTHROPIC_BASE_URL##*:}}; \
             printf '{method} {path} HTTP/1.1\\r\\nHost: model\\r\\nx-api-key: %s\\r\\ncontent-type: application/json\\r\\nanthropic-version: 2023-06-01\\r\\ncontent-length: %s\\r\\nconnection: close\\r\\n\\r\\n%s' \"$ANTHROPIC_API_KEY\" \"${{#body}}\" \"$body\" >&3; \
             head -c 400 <&3; echo; exec 3<&-"
        )
    };
    let probe = format!(
        "{{ {}; {}; }} > answers.txt 2>&1; git add answers.txt && git commit -qm 'What the API answered'",
        call("GET", "/v1/files"),
        call("POST", "/v1/messages/batches")
    );
    let h = one_issue(
        json!([{"bash": probe, "description": "call"}, {"text": format!("Done. {COMPLETE}")}]),
        "",
    );
    let output = h.sandcastle(&["run", "--issue", "1"]);
    assert!(output.status.success());

    let answers = h.remote_file("sandcastle/issue-1", "answers.txt");
    assert_eq!(answers.matches("HTTP/1.1 403").count(), 2, "{answers}");
    assert!(
        answers.contains("forwards only POST /v1/messages"),
        "{answers}"
    );
    let routes = h.anthropic.routes();
    assert!(
        routes
            .iter()
            .all(|r| !r.contains("/v1/files") && !r.contains("batches")),
        "{routes:?}"
    );
    assert!(
        routes.iter().any(|r| r.starts_with("POST /v1/messages")),
        "the agent's own calls went on: {routes:?}"
    );
    let body = h.only_pull_body();
    let upstream = format!("127.0.0.1:{}", h.anthropic.port());
    for call in ["GET /v1/files", "POST /v1/messages/batches"] {
        assert!(
            body.contains(&format!("- `{upstream}` `{call}` (1 time)")),
            "{body}"
        );
    }
    let report = h.last_report();
    let listed: Vec<&str> = report["work"][0]["blockedRequests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["call"].as_str())
        .collect();
    assert_eq!(
        listed,
        ["GET /v1/files", "POST /v1/messages/batches"],
        "{report}"
    );
}

/// Through `HTTP_PROXY`/`HTTPS_PROXY` (git's own libcurl, a real client): the forge allowed in
/// `[sandbox] egress` answers; a host not in it is refused, over CONNECT and absolute-form, and
/// the pull request and the run report list what was refused.
#[test]
fn egress_reaches_exactly_the_allowed_hosts_and_the_pull_request_lists_the_rest() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    // `NO_PROXY=` so git goes through the proxy to 127.0.0.1 too (the test's forge lives there).
    let reach = "NO_PROXY= no_proxy= git ls-remote \"$SANDCASTLE_FORGE_URL/alice/demo.git\" > allowed.txt 2>&1; echo \"exit $?\" >> allowed.txt; \
         { git ls-remote https://blocked.example/x.git; echo \"exit $?\"; NO_PROXY= no_proxy= git ls-remote http://127.0.0.1:9/x.git; echo \"exit $?\"; \
         git ls-remote https://blocked.example/y.git; } > blocked.txt 2>&1; \
         git add allowed.txt blocked.txt && git commit -qm 'What the proxy let through'";
    let h = one_issue(
        json!([{"bash": reach, "description": "reach"}, {"text": format!("Done. {COMPLETE}")}]),
        "",
    );
    // The harness's [sandbox] table is the config's last.
    let config = h.project().join(".sandcastle/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text += &format!("egress = [\"127.0.0.1:{}\"]\n", port_of(h.forge.url()));
    std::fs::write(&config, text).unwrap();

    let output = h.sandcastle(&["run", "--issue", "1"]);
    assert!(output.status.success());

    let allowed = h.remote_file("sandcastle/issue-1", "allowed.txt");
    assert!(
        allowed.contains("refs/heads/main") && allowed.contains("exit 0"),
        "{allowed}"
    );
    let blocked = h.remote_file("sandcastle/issue-1", "blocked.txt");
    assert!(!blocked.contains("exit 0"), "{blocked}");
    let body = h.only_pull_body();
    assert!(body.contains("## Blocked network requests"), "{body}");
    assert!(body.contains("- `blocked.example:443` (2 times)"), "{body}");
    assert!(body.contains("- `127.0.0.1:9` (1 time)"), "{body}");
    assert!(
        !body.contains(&format!("127.0.0.1:{}", port_of(h.forge.url()))),
        "{body}"
    );
    let report = h.last_report();
    let listed = &report["work"][0]["blockedRequests"];
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{report}");
}

/// A remote engine cannot mount the proxy's socket: the run refuses it in one line before it
/// changes anything. (The address is only read, never connected to: a documentation address, so
/// nothing could answer anyway.)
#[test]
fn a_remote_engine_is_refused_in_one_line() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = Harness::new(json!([]), "");
    let labels = h.repo_labels();
    let output = h
        .command(&["run", "--once"])
        .env("DOCKER_HOST", "tcp://192.0.2.1:2375")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let lines = crate::harness::stderr_lines(&output);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("the Docker engine at tcp://192.0.2.1:2375 (DOCKER_HOST) is remote")
            && lines[0].contains("run sandcastle on the engine's host"),
        "{lines:?}"
    );
    assert_eq!(h.repo_labels(), labels, "nothing changed on the forge");

    let doctor = h
        .command(&["doctor"])
        .env("DOCKER_HOST", "tcp://192.0.2.1:2375")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(
        said.lines()
            .any(|l| !l.starts_with("ok")
                && l.contains("tcp://192.0.2.1:2375 (DOCKER_HOST) is remote")),
        "{said}"
    );
    let doctor = h.sandcastle(&["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(
        said.lines().any(|l| l.starts_with("ok")
            && l.contains("sandboxes have no network but loopback; the model is reached through sandcastle's proxy")),
        "{said}"
    );
}

/// The forge on the host's own 127.0.0.1 (the test's), sandboxes on the default `network =
/// "none"`: a client in the sandbox reaches it through its `HTTP_PROXY` under tea's login URL
/// (`forge.sandcastle.invalid`, the checkout's `origin` too, by whose host tea picks its login),
/// git over smart HTTP and the issues API with tea's read-only token, as `tea` (Go's `net/http`,
/// which never proxies loopback) sends a request to a proxy.
/// The image has no `tea`: bash plays its HTTP part with the same URL, token and proxy.
#[test]
fn a_forge_on_the_hosts_loopback_is_reached_from_a_sandbox_without_a_network() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let reach = r#"tea=/home/agent/.config/tea/config.yml
url=$(sed -n 's/^ *url: *//p' $tea | tr -d '"'); token=$(sed -n 's/^ *token: *//p' $tea | tr -d '"')
{ echo "url $url"; echo "origin $(git remote get-url origin)"; git ls-remote origin; echo "exit $?"; } > git.txt 2>&1
b64() { local s=$1 t=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/ o= i a b c n
  for ((i = 0; i < ${#s}; i += 3)); do
    a=$(printf %d "'${s:i:1}"); b=0; c=0
    [ -n "${s:i+1:1}" ] && b=$(printf %d "'${s:i+1:1}"); [ -n "${s:i+2:1}" ] && c=$(printf %d "'${s:i+2:1}")
    n=$(( (a << 16) | (b << 8) | c )); o+=${t:$((n >> 18 & 63)):1}${t:$((n >> 12 & 63)):1}
    if [ -n "${s:i+1:1}" ]; then o+=${t:$((n >> 6 & 63)):1}; else o+==; fi
    if [ -n "${s:i+2:1}" ]; then o+=${t:$((n & 63)):1}; else o+==; fi
  done; printf %s "$o"; }
proxy=${HTTP_PROXY#http://}; relay=${proxy#*@}
exec 3<>/dev/tcp/${relay%:*}/${relay##*:}
printf 'GET %s/api/v1/repos/alice/demo/issues?state=open HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\nAuthorization: token %s\r\nConnection: close\r\n\r\n' \
  "$url" "${url#http://}" "$(b64 "${proxy%@*}")" "$token" >&3
cat <&3 > issues.txt
git add git.txt issues.txt && git commit -qm 'What the forge said'"#;
    let h = one_issue(
        json!([{"bash": reach, "description": "reach the forge"}, {"text": format!("Done. {COMPLETE}")}]),
        "",
    );
    let reader = h.forge.add_user_with_scopes(
        "reader-bot",
        &["read:issue", "read:repository", "read:user"],
    );
    h.write_env_with(&h.token, &format!("FORGEJO_AGENT_TOKEN={reader}\n"));
    assert!(h.forge.url().starts_with("http://127.0.0.1:"));

    let output = h.sandcastle(&["run", "--issue", "1"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let git = h.remote_file("sandcastle/issue-1", "git.txt");
    assert!(
        git.starts_with(
            "url http://forge.sandcastle.invalid\norigin http://forge.sandcastle.invalid/alice/demo.git\n"
        ) && git.contains("refs/heads/main")
            && git.contains("exit 0"),
        "{git}"
    );
    let issues = h.remote_file("sandcastle/issue-1", "issues.txt");
    assert!(issues.starts_with("HTTP/1.1 200"), "{issues}");
    assert!(issues.contains("\"title\":\"The work\""), "{issues}");
    let report = h.last_report();
    let blocked = &report["work"][0]["blockedRequests"];
    assert!(blocked.as_array().is_none_or(Vec::is_empty), "{report}");
}

/// `doctor` says which credential the proxy sends and how, and names the others set as unused,
/// never a value; a broken `SSL_CERT_FILE` fails the line, named.
#[test]
fn doctor_says_which_credential_is_sent_and_never_its_value() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = one_issue(json!([{"text": "unused"}]), "");
    let oauth = "sk-ant-oat01-e2e-oauth-token";
    h.write_env_with(&h.token, &format!("CLAUDE_CODE_OAUTH_TOKEN={oauth}\n"));

    let doctor = h.sandcastle(&["doctor"]);
    let said = String::from_utf8_lossy(&doctor.stdout).into_owned();
    let model = said.lines().find(|l| l.contains(" model ")).unwrap_or("");
    assert!(
        model.starts_with("ok")
            && model.contains("ANTHROPIC_API_KEY, sent as x-api-key to http://127.0.0.1:")
            && model.contains("CLAUDE_CODE_OAUTH_TOKEN also set, unused"),
        "{said}"
    );
    assert!(!said.contains(KEY) && !said.contains(oauth), "{said}");

    let env = h.project().join(".sandcastle/.env");
    let text = std::fs::read_to_string(&env).unwrap();
    std::fs::write(
        &env,
        text.replace(&format!("ANTHROPIC_API_KEY={KEY}\n"), ""),
    )
    .unwrap();
    let missing = h.project().join("no-such-ca.pem");
    let doctor = h
        .command(&["doctor"])
        .env("SSL_CERT_FILE", &missing)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout).into_owned();
    let model = said.lines().find(|l| l.contains(" model ")).unwrap_or("");
    assert!(
        model.starts_with("FAIL")
            && model.contains("SSL_CERT_FILE")
            && model.contains("no-such-ca.pem"),
        "{said}"
    );
    assert!(!said.contains(oauth), "{said}");
}

/// A whole run against an HTTPS `ANTHROPIC_BASE_URL` whose certificate a test CA signed, named by
/// `SSL_CERT_FILE` in sandcastle's environment: the real Claude Code's requests reach the model
/// over TLS through the proxy, with the real key, and the work is published.
#[test]
fn a_run_reaches_an_https_model_api_trusted_through_ssl_cert_file() {
    let Some(_docker) = docker_or_skip() else {
        return;
    };
    let h = one_issue(
        json!([
            {"bash": "echo hi > hi.txt && git add hi.txt && git commit -qm 'Say hi'", "description": "commit"},
            {"text": format!("Done. {COMPLETE}")}
        ]),
        "",
    );
    let (ca, pem) = sandcastle_testkit::tls::test_ca("sandcastle e2e CA");
    let front = sandcastle_testkit::tls::https_front(h.anthropic.port(), &ca);
    let ca_file = h.project().join("test-ca.pem");
    std::fs::write(&ca_file, pem).unwrap();
    let env = h.project().join(".sandcastle/.env");
    let text = std::fs::read_to_string(&env).unwrap();
    let text = text.replace(
        &format!("ANTHROPIC_BASE_URL={}", h.anthropic.url()),
        &format!("ANTHROPIC_BASE_URL={front}"),
    );
    assert!(
        text.contains("ANTHROPIC_BASE_URL=https://127.0.0.1:"),
        "{text}"
    );
    std::fs::write(&env, text).unwrap();

    let output = h
        .command(&["run", "--issue", "1"])
        .env("SSL_CERT_FILE", &ca_file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!h.anthropic.requests().is_empty());
    assert_eq!(h.anthropic.credentials(), [KEY.to_string()]);
    assert_eq!(h.remote_file("sandcastle/issue-1", "hi.txt"), "hi\n");
    assert_eq!(h.pulls().len(), 1, "the work published");
}
