//! Merging our login into tea's config.yml: other logins, preferences and any keys a newer tea
//! writes survive untouched; a login of the same name (tea compares names case-insensitively)
//! is replaced in place.
use anyhow::{Context, Result, bail};
use serde_yaml_ng::{Mapping, Value};

use crate::login::Login;

/// The file's new text, given its current text (if it exists) and the login to install.
pub fn with_login(existing: Option<&str>, mut login: Login) -> Result<String> {
    let mut root = match existing {
        Some(text) if !text.trim().is_empty() => {
            match serde_yaml_ng::from_str::<Value>(text).context("it is not YAML")? {
                Value::Mapping(mapping) => mapping,
                Value::Null => Mapping::new(),
                _ => bail!("it is not a YAML mapping with `logins:`"),
            }
        }
        _ => Mapping::new(),
    };

    let logins = root
        .entry("logins".into())
        .or_insert_with(|| Value::Sequence(Vec::new()));
    if logins.is_null() {
        *logins = Value::Sequence(Vec::new());
    }
    let Value::Sequence(logins) = logins else {
        bail!("its `logins:` is not a list");
    };
    let same_name = logins.iter().position(|entry| {
        entry["name"]
            .as_str()
            .is_some_and(|name| name.eq_ignore_ascii_case(&login.name))
    });
    if let Some(index) = same_name {
        // Keep the original creation time so that rerunning writes the same file.
        if let Some(created) = logins[index]["created"].as_i64() {
            login.created = created;
        }
    }
    // tea takes the first login marked default; ours must be the one.
    for entry in logins.iter_mut() {
        if let Value::Mapping(fields) = entry {
            fields.insert("default".into(), false.into());
        }
    }
    let login = serde_yaml_ng::to_value(&login).context("cannot encode the login")?;
    match same_name {
        Some(index) => logins[index] = login,
        None => logins.push(login),
    }

    if !root.contains_key("preferences") {
        root.insert("preferences".into(), default_preferences());
    }
    serde_yaml_ng::to_string(&root).context("cannot encode tea's config")
}

/// tea's `Preferences` with its zero values, as `tea` itself writes them.
fn default_preferences() -> Value {
    let mut flag_defaults = Mapping::new();
    flag_defaults.insert("remote".into(), "".into());
    let mut preferences = Mapping::new();
    preferences.insert("editor".into(), false.into());
    preferences.insert("flag_defaults".into(), Value::Mapping(flag_defaults));
    Value::Mapping(preferences)
}
