//! The login entry tea reads from `logins:` in its config.yml, field for field.
use serde::Serialize;

/// tea's `config.Login` (modules/config/login.go). Every field is written so the file reads the
/// same as one `tea login add` would produce.
#[derive(Serialize)]
pub struct Login {
    pub name: String,
    pub url: String,
    pub token: String,
    pub default: bool,
    pub ssh_host: String,
    pub ssh_key: String,
    pub insecure: bool,
    pub ssh_certificate_principal: String,
    pub ssh_agent: bool,
    pub ssh_key_agent_pub: String,
    pub version_check: bool,
    pub user: String,
    /// Unix seconds.
    pub created: i64,
}

impl Login {
    /// The default login for the forge at `forge_url` (normalized, e.g. `http://127.0.0.1:3000`).
    pub fn new(name: String, forge_url: &str, token: String, user: String, created: i64) -> Login {
        Login {
            name,
            url: forge_url.to_string(),
            token,
            default: true,
            ssh_host: host_name(forge_url).to_string(),
            ssh_key: String::new(),
            insecure: false,
            ssh_certificate_principal: String::new(),
            ssh_agent: false,
            ssh_key_agent_pub: String::new(),
            // The sandbox has no business probing the forge's version on every call.
            version_check: false,
            user,
            created,
        }
    }
}

/// `forge.example.dev` or `127.0.0.1:3000`: the URL without its scheme. The login's default name.
pub fn authority(forge_url: &str) -> &str {
    forge_url
        .split_once("://")
        .map_or(forge_url, |(_, authority)| authority)
}

/// The authority without its port: what tea compares against an SSH remote's host.
fn host_name(forge_url: &str) -> &str {
    let authority = authority(forge_url);
    match authority.split_once(']') {
        Some((address, _)) if authority.starts_with('[') => &authority[..address.len() + 1],
        _ => authority
            .split_once(':')
            .map_or(authority, |(host, _)| host),
    }
}
