//! `forgeHost` -> the forge's base URL. A bare host (`forge.example.dev`, `127.0.0.1:3000`) means
//! HTTPS; a URL (`http://127.0.0.1:3000`) keeps its scheme. The result is lower-cased, drops the
//! scheme's default port and has no trailing slash, so `<url>/<owner>/<repo>.git` is the clone URL.
//! `nix/imageArgsFromConfig.nix` resolves the same way with the same messages;
//! `tests/resolution_table.rs` writes the cases both are checked against.

/// The base URL for a `forgeHost` value, or why it is not one (a phrase that ends with the fix).
pub fn forge_url(forge_host: &str) -> Result<String, String> {
    if forge_host.is_empty() {
        return Err("is empty; write the forge's host, e.g. \"forge.example.dev\"".into());
    }
    if forge_host.chars().any(char::is_whitespace) {
        return Err(
            "contains whitespace; write the forge's host, e.g. \"forge.example.dev\"".into(),
        );
    }
    let (scheme, rest) = match forge_host.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("https".to_string(), forge_host),
    };
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        other => {
            return Err(format!(
                "has the scheme `{other}`; only https:// and http:// forges are supported, \
                 e.g. \"https://forge.example.dev\""
            ));
        }
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#']) {
        return Err(format!(
            "has a path; write only the forge's host or base URL, e.g. \"{scheme}://{}\"",
            authority.split(['/', '?', '#']).next().unwrap_or_default()
        ));
    }
    if authority.contains('@') {
        return Err(
            "contains user info; drop the `user@` part (the token comes from FORGEJO_TOKEN)".into(),
        );
    }
    let (host, port) = split_host_port(authority)?;
    let host = host.to_ascii_lowercase();
    match port {
        Some(port) if port != default_port => Ok(format!("{scheme}://{host}:{port}")),
        _ => Ok(format!("{scheme}://{host}")),
    }
}

fn split_host_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        // IPv6 literal: `[::1]:3000`.
        let Some((address, after)) = inner.split_once(']') else {
            return Err("has an unclosed `[`; write an IPv6 host as \"[::1]:3000\"".into());
        };
        if address.is_empty()
            || !address
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(format!(
                "has an invalid IPv6 address `{address}`; write it as \"[::1]:3000\""
            ));
        }
        let host = &authority[..address.len() + 2];
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => {
                    return Err("has text after `]`; write an IPv6 host as \"[::1]:3000\"".into());
                }
            },
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    check_host_name(host)?;
    let port = port.map(parse_port).transpose()?;
    Ok((host, port))
}

fn check_host_name(host: &str) -> Result<(), String> {
    if host.starts_with('[') {
        return Ok(());
    }
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && host
            .split('.')
            .all(|label| !label.is_empty() && !label.starts_with('-'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "has an invalid host name `{host}`; write a host like \"forge.example.dev\" or \"127.0.0.1:3000\""
        ))
    }
}

fn parse_port(port: &str) -> Result<u16, String> {
    // `parse` alone would accept "+3000".
    let digits = port.chars().all(|c| c.is_ascii_digit());
    match port.parse::<u16>() {
        Ok(number) if digits && number > 0 => Ok(number),
        _ => Err(format!(
            "has an invalid port `{port}`; write a port from 1 to 65535, e.g. \"127.0.0.1:3000\""
        )),
    }
}
