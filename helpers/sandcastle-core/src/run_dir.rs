//! The run's own host directory, `<runs>/<random>-<run id>` with `<runs>` `$XDG_RUNTIME_DIR/sandcastle/runs`
//! (else `/tmp/sandcastle-<uid>/runs`), every level mode 0700 and this user's: the model proxy's
//! socket directories live in it. The run removes it as it ends; one a run killed outright left
//! behind is removed by the next start ([`remove_dead`]), as its containers are.
use crate::sandbox;
use anyhow::{Context as _, Result, bail};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// One run's directory; removed, with all it holds, when dropped.
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// A new directory for `run_id`: its name ends in the run's id, and so in its pid, so
    /// [`remove_dead`] can tell when its run is gone; it starts with a few random characters, so
    /// that contexts of one process (tests) get one each.
    pub fn create(run_id: &str) -> Result<RunDir> {
        let runs = runs_root()?;
        let path = tempfile::Builder::new()
            .prefix("")
            .suffix(&format!("-{run_id}"))
            .rand_bytes(6)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&runs)
            .with_context(|| format!("cannot create the run's directory in {}", runs.display()))?
            .keep();
        Ok(RunDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and all it holds (again on drop, where it may be gone already): for
    /// a run that ends while something still holds it.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Removes the directories of runs on this host whose process is gone; their names. Another
/// user's runs are in another directory; a name that does not end in a pid is left alone.
pub fn remove_dead() -> Result<Vec<String>> {
    let runs = runs_root()?;
    let mut removed = Vec::new();
    for entry in
        std::fs::read_dir(&runs).with_context(|| format!("cannot list {}", runs.display()))?
    {
        let entry = entry.with_context(|| format!("cannot list {}", runs.display()))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if sandbox::run_is_dead(&name) {
            // Not followed if it is a link: `remove_dir_all` removes the link itself.
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
            removed.push(name);
        }
    }
    removed.sort();
    Ok(removed)
}

/// `<runs>`, made (0700) if missing, each level checked to be this user's private directory.
fn runs_root() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir.join("sandcastle"),
        _ => std::env::temp_dir().join(format!(
            "sandcastle-{}",
            rustix::process::geteuid().as_raw()
        )),
    };
    let runs = base.join("runs");
    for dir in [&base, &runs] {
        private_dir(dir)?;
    }
    Ok(runs)
}

/// Makes `dir` (0700) or checks the one there: a directory, not a link, this user's, and open to
/// no one else (in a shared `/tmp`, another user could have made it first).
fn private_dir(dir: &Path) -> Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let own = meta.uid() == rustix::process::geteuid().as_raw();
    if !meta.is_dir() || !own || meta.permissions().mode() & 0o077 != 0 {
        bail!(
            "{} is not a directory of this user's that only it can open: remove it, or set XDG_RUNTIME_DIR to a private directory",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test changes `XDG_RUNTIME_DIR` (the process's environment is shared by every test).
    #[test]
    fn a_runs_directory_is_private_and_only_dead_runs_are_removed() {
        let xdg = tempfile::tempdir().unwrap();
        // SAFETY: no other test of this crate reads or writes XDG_RUNTIME_DIR.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", xdg.path()) };
        let run_id = format!("20261202T130405Z-{}", std::process::id());
        let live = RunDir::create(&run_id).unwrap();
        let other = RunDir::create(&run_id).unwrap();
        let runs = xdg.path().join("sandcastle/runs");
        assert_eq!(live.path().parent(), Some(runs.as_path()));
        assert!(
            live.path()
                .to_str()
                .unwrap()
                .ends_with(&format!("-{run_id}"))
        );
        assert_ne!(
            live.path(),
            other.path(),
            "each context of a process has its own"
        );
        drop(other);
        for dir in [
            xdg.path().join("sandcastle"),
            runs.clone(),
            live.path().to_path_buf(),
        ] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        // A pid no process has (above the kernel's largest), and a name that names none.
        let dead = runs.join("20261202T130405Z-2147483646");
        std::fs::create_dir_all(dead.join("proxy-x/mounted")).unwrap();
        std::fs::create_dir(runs.join("not-a-run")).unwrap();

        assert_eq!(remove_dead().unwrap(), ["20261202T130405Z-2147483646"]);
        assert!(!dead.exists());
        assert!(live.path().exists() && runs.join("not-a-run").exists());

        let path = live.path().to_path_buf();
        live.remove();
        assert!(!path.exists(), "a run removes its own directory as it ends");
        drop(live);

        // A runs directory others can open is refused in one line naming it and the fix.
        std::fs::set_permissions(&runs, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = RunDir::create("20261202T130405Z-1")
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains(&runs.display().to_string()), "{error}");
        assert!(error.contains("set XDG_RUNTIME_DIR"), "{error}");
    }
}
