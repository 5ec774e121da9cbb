//! Showing an argv list the way a person would type it.

/// `cargo clippy --all-targets -- -D warnings`; arguments a shell would split or expand are
/// single-quoted (`sh -c 'exit 7'`), so the line can be pasted to rerun the step.
pub fn display(argv: &[String]) -> String {
    argv.iter()
        .map(|word| quote(word))
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
