//! git in fixture repositories, as a test user: a bare remote, commits, and an agent's checkout
//! that hands its commits out the way a sandbox does.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

/// `git ARGS` in `dir` as a test user; the test fails unless git succeeds. Its stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_output(dir, args);
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `git ARGS` in `dir` as a test user, whatever it exits with.
pub fn git_output(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@localhost"])
        .args(args)
        .output()
        .expect("git runs")
}

/// A commit in the work tree `dir` that adds a file named after `subject` (spaces made dashes)
/// holding the subject; its id.
pub fn commit(dir: &Path, subject: &str) -> String {
    std::fs::write(dir.join(subject.replace(' ', "-")), subject).unwrap();
    git(dir, &["add", "--all"]);
    git(dir, &["commit", "--quiet", "-m", subject]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A bare remote (`remote.git`) whose `main` holds one commit, `initial`, reached over `file://`;
/// `seed` is the clone that pushed it.
pub struct Remote {
    tmp: TempDir,
    pub url: String,
}

impl Remote {
    pub fn new() -> Remote {
        let tmp = tempfile::tempdir().unwrap();
        let bare = tmp.path().join("remote.git");
        git(
            tmp.path(),
            &[
                "init",
                "--quiet",
                "--bare",
                "-b",
                "main",
                bare.to_str().unwrap(),
            ],
        );
        let url = format!("file://{}", bare.display());
        let remote = Remote { tmp, url };
        let seed = remote.path("seed");
        git(
            remote.tmp.path(),
            &["clone", "--quiet", &remote.url, seed.to_str().unwrap()],
        );
        commit(&seed, "initial");
        git(
            &seed,
            &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
        );
        remote
    }

    /// `name` in the remote's own temporary directory (where `remote.git` and `seed` are).
    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// The commit id `refs/heads/<branch>` names on the remote, if any.
    pub fn tip(&self, branch: &str) -> Option<String> {
        let out = git(
            &self.path("remote.git"),
            &[
                "for-each-ref",
                "--format=%(objectname)",
                &format!("refs/heads/{branch}"),
            ],
        );
        (!out.is_empty()).then_some(out)
    }
}

impl Default for Remote {
    fn default() -> Remote {
        Remote::new()
    }
}

/// An agent's checkout as a sandbox makes it: `branch` cloned from a work repository's seed
/// bundle.
pub struct Checkout {
    tmp: TempDir,
}

impl Checkout {
    pub fn from_bundle(bundle: &Path, branch: &str) -> Checkout {
        let tmp = tempfile::tempdir().unwrap();
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                "-b",
                branch,
                bundle.to_str().unwrap(),
                "checkout",
            ],
        );
        Checkout { tmp }
    }

    pub fn path(&self) -> PathBuf {
        self.tmp.path().join("checkout")
    }

    /// See [`commit`].
    pub fn commit(&self, subject: &str) -> String {
        commit(&self.path(), subject)
    }

    /// Writes to `file` what the sandbox hands out after a turn (`checkout::HAND_OUT`): HEAD's id
    /// when the host's tip `known` already has it, else a bundle of HEAD's commits since `known`.
    pub fn hand_out(&self, known: &str, file: &Path) {
        let dir = self.path();
        let head = git(&dir, &["rev-parse", "HEAD"]);
        let known_has_head = git_output(&dir, &["merge-base", "--is-ancestor", &head, known])
            .status
            .success();
        if known_has_head {
            std::fs::write(file, format!("{head}\n")).unwrap();
            return;
        }
        let out = git_output(
            &dir,
            &[
                "bundle",
                "create",
                "--quiet",
                "-",
                "HEAD",
                &format!("^{known}"),
            ],
        );
        assert!(
            out.status.success(),
            "git bundle: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(file, out.stdout).unwrap();
    }
}
