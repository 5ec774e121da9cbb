//! Replacing a file atomically: readers see the old file or the new one, never half of either.
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `text` to `path` with mode 0600 via a temporary file in the same directory and a rename.
pub fn atomically(path: &Path, text: &str) -> Result<()> {
    let directory = path.parent().context("the path has no directory")?;
    create_private_dir(directory)?;
    // tempfile creates the file with mode 0600, so the token is never readable by others.
    let mut file = tempfile::NamedTempFile::new_in(directory)
        .with_context(|| format!("cannot create a file in {}", directory.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.as_file().sync_all())
        .with_context(|| format!("cannot write {}", file.path().display()))?;
    file.persist(path)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

fn create_private_dir(directory: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(directory)
        .with_context(|| format!("cannot create {}", directory.display()))
}
