//! Who is calling: Forgejo's `Authorization: token X` and HTTP basic auth with a token as password.
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::state::{State, User};

/// What the `Authorization` header says.
pub enum Credentials {
    None,
    Token(String),
    Basic { user: String, password: String },
    Malformed,
}

pub fn credentials(request: &tiny_http::Request) -> Credentials {
    let Some(header) = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
    else {
        return Credentials::None;
    };
    let value = header.value.as_str().trim();
    let Some((scheme, rest)) = value.split_once(' ') else {
        return Credentials::Malformed;
    };
    let rest = rest.trim();
    match scheme.to_ascii_lowercase().as_str() {
        "token" | "bearer" => Credentials::Token(rest.to_string()),
        "basic" => {
            let decoded = STANDARD
                .decode(rest)
                .ok()
                .and_then(|d| String::from_utf8(d).ok());
            match decoded.as_deref().and_then(|d| d.split_once(':')) {
                Some((user, password)) => Credentials::Basic {
                    user: user.to_string(),
                    password: password.to_string(),
                },
                None => Credentials::Malformed,
            }
        }
        _ => Credentials::Malformed,
    }
}

/// The login the credentials belong to: `Ok(None)` for an anonymous caller, `Err` with Forgejo's
/// reason when they are wrong. Basic auth needs the login to match the token's owner (stricter
/// than Forgejo, which would catch a misconfigured `FORGEJO_USER` in tests).
pub fn authenticate(state: &State, credentials: &Credentials) -> Result<Option<String>, String> {
    token_user(state, credentials).map(|user| user.map(|u| u.login.clone()))
}

/// The user (with the token's scopes) the credentials name, as [`authenticate`] judges them.
pub fn token_user<'a>(
    state: &'a State,
    credentials: &Credentials,
) -> Result<Option<&'a User>, String> {
    match credentials {
        Credentials::None => Ok(None),
        Credentials::Malformed => Err("malformed Authorization header".to_string()),
        Credentials::Token(token) => match state.user_by_token(token) {
            Some(user) => Ok(Some(user)),
            None => Err("invalid token".to_string()),
        },
        Credentials::Basic { user, password } => {
            // `token:` and `token:x-oauth-basic` are the token-as-username forms.
            if (password.is_empty() || password == "x-oauth-basic")
                && let Some(owner) = state.user_by_token(user)
            {
                return Ok(Some(owner));
            }
            match state.user_by_token(password) {
                Some(owner) if owner.login == *user => Ok(Some(owner)),
                Some(_) => Err(format!("the token does not belong to user {user}")),
                None => Err(format!("user {user}: invalid username, password or token")),
            }
        }
    }
}
