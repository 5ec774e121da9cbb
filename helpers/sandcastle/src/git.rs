//! Host-side git: isolated checkouts per issue and authenticated pushes.
//! OWNER: helper H5. Interface fixed; bodies to implement.
//! Credentials go through git's credential machinery from the environment of the git process,
//! never in a URL or an argument.
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Who pushes: `FORGEJO_USER` / `FORGEJO_TOKEN`.
#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub token: String,
}

/// `<forge base URL>/<owner>/<repo>.git`
pub fn remote_url(forge_url: &str, repo: &str) -> String { todo!() }

/// Makes (or reuses) an isolated clone at `dir` on `branch`: from `origin/<branch>` if the remote has
/// it (work resumes), else from `origin/<base>`. Never touches the host repository's `.git`.
/// When running as root, the checkout is chowned to uid/gid 1000 (the image's agent user).
pub fn prepare_checkout(dir: &Path, remote: &str, creds: &Credentials, branch: &str, base: &str) -> Result<PathBuf> { todo!() }

/// Commits on HEAD that `origin/<base>` does not have (subject lines, oldest first).
pub fn new_commits(checkout: &Path, base: &str) -> Result<Vec<String>> { todo!() }

/// The HEAD commit id.
pub fn head(checkout: &Path) -> Result<String> { todo!() }

/// Pushes HEAD to `refs/heads/<branch>` on origin. A no-op when the remote already has that commit.
pub fn push(checkout: &Path, creds: &Credentials, branch: &str) -> Result<()> { todo!() }
