//! Test helpers: a small JSON client over real HTTP, and git commands isolated from the
//! machine's configuration.
#![allow(dead_code)] // each test file uses its own part of these helpers

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

pub struct Reply {
    pub status: u16,
    pub json: Value,
    pub total: Option<usize>,
    pub link: Option<String>,
}

/// Calls the forge's API as one user (or anonymously with an empty token).
pub struct Api {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Api {
    pub fn new(forge_url: &str, token: &str) -> Api {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build();
        Api {
            base: format!("{forge_url}/api/v1"),
            token: token.to_string(),
            agent: config.into(),
        }
    }

    fn auth<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        if self.token.is_empty() {
            request
        } else {
            request.header("Authorization", format!("token {}", self.token))
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        reply(
            self.auth(self.agent.get(format!("{}{path}", self.base)))
                .call(),
        )
    }

    pub fn post(&self, path: &str, body: Value) -> Reply {
        reply(
            self.auth(self.agent.post(format!("{}{path}", self.base)))
                .send_json(body),
        )
    }

    pub fn delete(&self, path: &str) -> Reply {
        reply(
            self.auth(self.agent.delete(format!("{}{path}", self.base)))
                .call(),
        )
    }
}

fn reply(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut response = result.expect("the forge answers");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let total = header("X-Total-Count").and_then(|t| t.parse().ok());
    let link = header("Link");
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .read_to_string()
        .expect("a readable body");
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).expect("a JSON body")
    };
    Reply {
        status,
        json,
        total,
        link,
    }
}

/// Runs git with no user or system configuration and no terminal prompts, asserting success.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_output(dir, args, &[]);
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

pub fn git_output(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@localhost",
            "-c",
            "protocol.version=2",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .envs(env.iter().copied())
        .output()
        .expect("running git")
}

/// A credential helper that answers `login` and the token from `$FAKE_FORGE_TOKEN`, so the token
/// never appears in an argument.
pub fn credential_helper(login: &str) -> String {
    format!(
        "credential.helper=!f() {{ echo username={login}; echo \"password=$FAKE_FORGE_TOKEN\"; }}; f"
    )
}
