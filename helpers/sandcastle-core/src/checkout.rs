//! The agent's checkout, which exists only inside its sandbox: made there from a bundle of the
//! orchestrator's work repository, and its commits handed back out as a bundle (or a commit id).
//!
//! The scripts below run inside the container as the agent user, on files the agent controls;
//! whatever they print reaches the host only as bytes in a file the host creates, which
//! `WorkRepo::import` checks before anything of it is used. The host never runs git on the
//! checkout, so nothing the agent writes into it (hooks, config, a missing `.git`) acts on the host.
//! After a turn, [`HAND_OUT`] runs at the end of the agent's own exec (`agent.rs`, `hand_out.rs`);
//! [`take_commits`] runs it on its own when that exec handed out nothing usable.
use crate::git::{Imported, WorkRepo};
use crate::hand_out::Commits;
use crate::sandbox::{Sandbox, WORKSPACE};
use anyhow::{Context, Result, anyhow};
use std::path::Path;

/// The largest bundle taken out of a sandbox.
pub const MAX_BUNDLE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// `sh -c SEED sh <branch> <base> <remote URL> <workspace>` with the seed bundle on stdin: a fresh
/// checkout of the work branch, with `origin/<base>` for the agent's `git log origin/<base>..HEAD`.
const SEED: &str = r#"set -eu
branch=$1 base=$2 url=$3 workspace=$4
bundle=$(mktemp)
cat > "$bundle"
rm -rf "$workspace"
mkdir -p "$workspace"
cd "$workspace"
git init --quiet
git fetch --quiet --update-head-ok --no-write-fetch-head "$bundle" \
  "+refs/heads/$branch:refs/heads/$branch" "+refs/remotes/origin/$base:refs/remotes/origin/$base"
git symbolic-ref HEAD "refs/heads/$branch"
git reset --quiet --hard
git config user.name sandcastle
git config user.email sandcastle@localhost
git remote add origin "$url"
rm -f "$bundle""#;

/// `sh -c HAND_OUT sh <workspace> <tip the host has>`: a bundle of HEAD's commits the host lacks,
/// or HEAD's id alone when the host has it already.
pub const HAND_OUT: &str = r#"set -eu
export GIT_DIR="$1/.git"
if [ ! -d "$GIT_DIR" ]; then echo "the checkout has no .git directory any more" >&2; exit 3; fi
head=$(git rev-parse --verify --quiet 'HEAD^{commit}') || { echo "the checkout's HEAD is not a commit" >&2; exit 3; }
if git merge-base --is-ancestor "$head" "$2" 2>/dev/null; then printf '%s\n' "$head"; exit 0; fi
exec git bundle create --quiet - HEAD "^$2""#;

/// Makes the agent's checkout of `repo`'s work branch in the sandbox, in one `docker exec`.
pub fn seed(sandbox: &Sandbox, repo: &WorkRepo, remote: &str) -> Result<()> {
    seed_with(sandbox, repo, remote, SEED)
}

/// Makes a checkout of `repo`'s `origin/<base>` (the base branch as fetched from the forge, no
/// agent's commit) in the sandbox, HEAD detached there: what the gate's warm cache is built from.
pub fn seed_base(sandbox: &Sandbox, repo: &WorkRepo, remote: &str) -> Result<()> {
    let script = format!("{SEED}\ngit checkout --quiet --detach \"refs/remotes/origin/$base\"");
    seed_with(sandbox, repo, remote, &script)
}

/// Runs `script` (with [`SEED`]'s arguments and the seed bundle on stdin) in one `docker exec`.
fn seed_with(sandbox: &Sandbox, repo: &WorkRepo, remote: &str, script: &str) -> Result<()> {
    let bundle = repo.scratch_file()?;
    repo.seed_bundle(bundle.path())?;
    let argv = [
        "sh",
        "-c",
        script,
        "sh",
        &repo.branch,
        &repo.base,
        remote,
        WORKSPACE,
    ];
    let out = sandbox
        .exec_at("/", &argv)
        .stdin(std::fs::File::open(bundle.path()).context("cannot read the seed bundle")?)
        .output()
        .context("cannot run `docker exec` to make the checkout")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no error output");
        anyhow::bail!("cannot make the checkout in the sandbox: {}", reason.trim());
    }
    Ok(())
}

/// Brings the agent's commits into `repo` as its work branch with an exec of its own, unless
/// `WorkRepo::import` refuses them. A checkout the agent broke (no `.git`, no commit at HEAD) is
/// an error naming what is wrong.
pub fn take_commits(sandbox: &Sandbox, repo: &WorkRepo) -> Result<Imported> {
    let known = repo.tip()?;
    let handed_out = repo.scratch_file()?;
    let argv = ["sh", "-c", HAND_OUT, "sh", WORKSPACE, &known];
    sandbox
        .read_out(&argv, handed_out.path(), MAX_BUNDLE_BYTES)
        .and_then(|()| repo.import(handed_out.path()))
        .context(TAKE_FAILED)
}

/// Brings in what an agent's turn handed out of its checkout (`file` holds it when it is
/// [`Commits::InFile`]), checked as [`take_commits`] checks its own. A turn that ended at
/// `known_tip`, the tip it was given, changed nothing: no git call.
pub fn take_handed_out(
    repo: &WorkRepo,
    commits: Commits,
    file: &Path,
    known_tip: &str,
) -> Result<Imported> {
    match commits {
        Commits::InFile if unchanged(file, known_tip) => Ok(Imported::Tip(known_tip.to_string())),
        Commits::InFile => repo.import(file),
        Commits::Refused(why) => Err(anyhow!(why)),
    }
    .context(TAKE_FAILED)
}

/// Whether `file` holds exactly `known_tip`'s id line: only that many bytes are read, whatever the
/// file's size.
fn unchanged(file: &Path, known_tip: &str) -> bool {
    use std::io::Read;
    let expected = format!("{known_tip}\n");
    let mut bytes = Vec::with_capacity(expected.len() + 1);
    std::fs::File::open(file)
        .and_then(|f| f.take(expected.len() as u64 + 1).read_to_end(&mut bytes))
        .is_ok_and(|_| bytes == expected.as_bytes())
}

const TAKE_FAILED: &str = "cannot take the agent's commits out of the sandbox";

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-out of gigabytes is told from the tip's id line by its first 42 bytes: the file is
    /// never read whole (this one is sparse, so the test costs no disk).
    #[test]
    fn the_head_comparison_reads_only_the_id_line() {
        let tip = "a".repeat(40);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("handed-out");
        std::fs::write(&file, format!("{tip}\n")).unwrap();
        assert!(unchanged(&file, &tip));
        std::fs::write(&file, format!("{tip}\nmore")).unwrap();
        assert!(!unchanged(&file, &tip));
        let huge = std::fs::File::create(&file).unwrap();
        huge.set_len(64 * 1024 * 1024 * 1024).unwrap();
        std::io::Write::write_all(&mut &huge, format!("{tip}\n").as_bytes()).unwrap();
        assert!(!unchanged(&file, &tip));
    }
}

#[cfg(test)]
mod docker_tests;
