//! "did you mean …?" for unknown keys.

/// The known key closest to `unknown`, if any is close enough to be a plausible typo.
pub(crate) fn nearest<'k>(unknown: &str, known: &[&'k str]) -> Option<&'k str> {
    // `max_iterations`, `MaxIterations` and `max-iterations` all mean `maxIterations`.
    let normalized = normalize(unknown);
    if let Some(same) = known.iter().find(|key| normalize(key) == normalized) {
        return Some(same);
    }
    known
        .iter()
        .map(|key| (strsim::jaro_winkler(&normalized, &normalize(key)), *key))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, key)| key)
}

fn normalize(key: &str) -> String {
    key.chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}
