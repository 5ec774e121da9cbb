//! `imageName` -> the image's name and tag, as Docker reads a reference, so a name Docker would
//! refuse fails here rather than at `docker load` or `docker run`. `nix/imageArgsFromConfig.nix`
//! resolves the same way with the same patterns; `tests/resolution_table.rs` writes the cases
//! both are checked against.
use std::sync::LazyLock;

use regex::Regex;

/// A Docker tag.
const TAG: &str = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}";
/// One lower-case path component of a Docker name.
const PATH_COMPONENT: &str = "[a-z0-9]+((\\.|_|__|-+)[a-z0-9]+)*";
/// A registry host, with an optional port.
const DOMAIN: &str =
    "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]+)?";
/// Docker's limit on the length of a name (without the tag).
const NAME_MAX: usize = 255;

fn whole(pattern: &str) -> Regex {
    Regex::new(&format!("^(?:{pattern})$")).expect("the pattern is valid")
}

static TAG_RE: LazyLock<Regex> = LazyLock::new(|| whole(TAG));
static PATH_COMPONENT_RE: LazyLock<Regex> = LazyLock::new(|| whole(PATH_COMPONENT));
static DOMAIN_RE: LazyLock<Regex> = LazyLock::new(|| whole(DOMAIN));

/// The name and tag of `image_name` (`"latest"` when it has none), or why Docker would refuse it
/// (a phrase that ends with the fix).
pub fn name_and_tag(image_name: &str) -> Result<(&str, &str), String> {
    let example = "e.g. \"sandcastle:name\" or \"registry.example.dev:5000/team/sandcastle:v1\"";
    if image_name.contains('@') {
        return Err(format!(
            "has a digest; name the image with a tag instead, {example}"
        ));
    }
    // A `:` after the last `/` starts the tag; one before it belongs to a registry's port.
    let last_slash = image_name.rfind('/').map_or(0, |at| at + 1);
    let (name, tag) = match image_name[last_slash..].rfind(':') {
        Some(at) => (
            &image_name[..last_slash + at],
            &image_name[last_slash + at + 1..],
        ),
        None => (image_name, "latest"),
    };
    if !TAG_RE.is_match(tag) {
        return Err(format!(
            "has the tag `{tag}`, which Docker refuses (letters, digits, `_`, `.` and `-`, not \
             starting with `.` or `-`, at most 128); write {example}"
        ));
    }
    if name.len() > NAME_MAX {
        return Err(format!(
            "has a name longer than {NAME_MAX} characters; write a shorter one, {example}"
        ));
    }
    let components: Vec<&str> = name.split('/').collect();
    let has_domain = components.len() > 1
        && (components[0].contains(['.', ':']) || components[0] == "localhost");
    if has_domain && !DOMAIN_RE.is_match(components[0]) {
        return Err(format!(
            "has the registry `{}`, which Docker refuses; write {example}",
            components[0]
        ));
    }
    let path = if has_domain {
        &components[1..]
    } else {
        &components[..]
    };
    if let Some(bad) = path.iter().find(|part| !PATH_COMPONENT_RE.is_match(part)) {
        return Err(format!(
            "has the name part `{bad}`, which Docker refuses (lower-case letters and digits, \
             joined by `.`, `_`, `__` or `-`); write {example}"
        ));
    }
    Ok((name, tag))
}
