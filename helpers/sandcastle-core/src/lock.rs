//! One `sandcastle run` per repository: an exclusive lock on `.sandcastle/logs/run.lock` holding the pid.
use anyhow::{Context as _, Result, bail};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// Held for the life of the run; the OS releases it when the process dies, so a crash never
/// leaves a stale lock behind.
pub struct RunLock {
    _file: File,
}

impl RunLock {
    pub fn acquire(path: &Path) -> Result<RunLock> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("cannot open the run lock {}", path.display()))?;
        if file.try_lock().is_err() {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() {
                "another process".to_string()
            } else {
                format!("process {holder}")
            };
            bail!(
                "another sandcastle run already works on this repository ({holder} holds {}); stop it first",
                path.display()
            );
        }
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "{}", std::process::id())?;
        file.flush()?;
        Ok(RunLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/run.lock");
        let _held = RunLock::acquire(&path).unwrap();
        let err = RunLock::acquire(&path)
            .err()
            .expect("second lock must fail")
            .to_string();
        assert!(
            err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains("run.lock"), "{err}");
    }

    #[test]
    fn the_lock_is_free_again_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.lock");
        drop(RunLock::acquire(&path).unwrap());
        RunLock::acquire(&path).unwrap();
    }
}
