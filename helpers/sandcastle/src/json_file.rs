//! The orchestrator's own saved JSON files (work states, kept-green records): each written whole or
//! not at all, and a folder of them listed, a folder that does not exist yet being an empty one.
use anyhow::{Context as _, Result};
use serde::Serialize;
use std::path::Path;

/// Writes `value` to `path` through a temporary file beside it, so a kill never leaves half a file.
pub fn save<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let dir = path.parent().expect("a file in a folder");
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// The stems of the `<stem>.json` files in `dir` (names that are not UTF-8 left out), in no order.
pub fn stems(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut stems = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        if let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".json")) {
            stems.push(stem.to_string());
        }
    }
    Ok(stems)
}
