//! The agent's checkout, which exists only inside its sandbox: made there from a bundle of the
//! orchestrator's work repository, and its commits handed back out as a bundle (or a commit id).
//!
//! The scripts below run inside the container as the agent user, on files the agent controls;
//! whatever they print reaches the host only as bytes in a file the host creates, which
//! `WorkRepo::import` checks before anything of it is used. The host never runs git on the
//! checkout, so nothing the agent writes into it (hooks, config, a missing `.git`) acts on the host.
//! After a turn, [`HAND_OUT`] runs at the end of the agent's own exec (`agent.rs`, `hand_out.rs`);
//! [`take_commits`] runs it on its own when that exec handed out nothing usable.
//!
//! When a work leaves a container while it goes on (its relay died, another role takes over),
//! [`take_snapshot`] hands out the checkout's tree (tracked changes and untracked files git does not
//! ignore, on top of the host's tip: commits the host did not take come as changes too) as a
//! throw-away commit in a bundle; [`restore_snapshot`] puts it back into the next container's fresh
//! checkout as uncommitted changes. The host only holds its bytes: it never fetches, reads or pushes
//! a snapshot, so it reaches no gate, review or branch but as what the agent commits again.
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

/// The largest snapshot of a checkout's tree taken out of a sandbox; a larger one is not carried.
pub const MAX_SNAPSHOT_BYTES: u64 = 256 * 1024 * 1024;

/// `sh -c SNAPSHOT sh <workspace> <the host's tip>`: nothing when the checkout's tree (ignored files
/// left out) is the host tip's, else a bundle of `refs/sandcastle/snapshot`, a commit of that tree
/// whose parent is the host's tip. The checkout's own index, refs and files are left as they are.
const SNAPSHOT: &str = r#"set -eu
cd "$1"
export GIT_DIR="$1/.git"
if [ ! -d "$GIT_DIR" ]; then echo "the checkout has no .git directory any more" >&2; exit 3; fi
export GIT_INDEX_FILE
GIT_INDEX_FILE=$(mktemp)
trap 'rm -f "$GIT_INDEX_FILE"' EXIT
git read-tree "$2"
git add -A .
tree=$(git write-tree)
[ "$tree" = "$(git rev-parse "$2^{tree}")" ] && exit 0
commit=$(git -c user.name=sandcastle -c user.email=sandcastle@localhost   commit-tree "$tree" -p "$2" -m "sandcastle: the tree carried to a fresh container")
git update-ref refs/sandcastle/snapshot "$commit"
git bundle create --quiet - refs/sandcastle/snapshot "^$2"
git update-ref -d refs/sandcastle/snapshot"#;

/// `sh -c RESTORE sh <workspace>` with a [`SNAPSHOT`] bundle on stdin: the fresh checkout's files
/// become the snapshot's tree, its index and HEAD stay at the work branch's tip.
const RESTORE: &str = r#"set -eu
cd "$1"
bundle=$(mktemp)
cat > "$bundle"
git fetch --quiet --no-write-fetch-head "$bundle" "+refs/sandcastle/snapshot:refs/sandcastle/snapshot"
rm -f "$bundle"
git read-tree --reset -u refs/sandcastle/snapshot
git reset --quiet
git update-ref -d refs/sandcastle/snapshot"#;

/// `sh -c CANDIDATE sh <workspace> <branch> <letter>` with a seed bundle of an attempt's work
/// repository on stdin: its branch fetched into the checkout and checked out, detached, at
/// `~/attempts/<letter>` (made afresh), its files read-only; what the choosing reviewer reads.
const CANDIDATE: &str = r#"set -eu
workspace=$1 branch=$2 dir="$HOME/attempts/$3"
bundle=$(mktemp)
cat > "$bundle"
cd "$workspace"
git fetch --quiet --no-write-fetch-head "$bundle" "+refs/heads/$branch:refs/attempts/$3"
rm -f "$bundle"
if [ -e "$dir" ]; then chmod -R u+w "$dir"; rm -rf "$dir"; fi
git worktree prune
mkdir -p "$HOME/attempts"
git worktree add --quiet --detach "$dir" "refs/attempts/$3"
chmod -R a-w "$dir""#;

/// Puts a checkout of `repo`'s work branch (an issue's attempt, `letter`) beside the sandbox's
/// own, read-only, at `~/attempts/<letter>`: the host only makes the bundle from its own
/// repository; git in the sandbox reads it, and nothing of it comes back.
pub fn add_candidate(sandbox: &Sandbox, repo: &WorkRepo, letter: char) -> Result<()> {
    let bundle = repo.scratch_file()?;
    repo.seed_bundle(bundle.path())?;
    let letter = letter.to_string();
    let argv = [
        "sh",
        "-c",
        CANDIDATE,
        "sh",
        WORKSPACE,
        &repo.branch,
        &letter,
    ];
    run_fed(sandbox, &argv, bundle.path(), "add an attempt's checkout")
}

/// Makes the agent's checkout of `repo`'s work branch in the sandbox, in one `docker exec`.
pub fn seed(sandbox: &Sandbox, repo: &WorkRepo, remote: &str) -> Result<()> {
    seed_with(sandbox, repo, remote, SEED)
}

/// [`seed`] after `first` (a script that takes no arguments and reads no stdin) in the same
/// `docker exec`, one exec fewer: a gate copies its warm cache so. Either failing fails the call.
pub fn seed_after(sandbox: &Sandbox, repo: &WorkRepo, remote: &str, first: &str) -> Result<()> {
    seed_with(
        sandbox,
        repo,
        remote,
        &format!("set -eu\n({first}) </dev/null\n{SEED}"),
    )
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
    run_fed(sandbox, &argv, bundle.path(), "make the checkout")
}

/// Runs `argv` in the sandbox with `file`'s bytes on its stdin; a non-zero exit is an error
/// saying what could not be done (`doing`) with the first line it printed on stderr.
fn run_fed(sandbox: &Sandbox, argv: &[&str], file: &Path, doing: &str) -> Result<()> {
    let input =
        std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut exec = sandbox.exec_at("/", argv)?;
    exec.feed(input);
    let out = exec
        .output()
        .with_context(|| format!("cannot run `docker exec` to {doing}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no error output");
        anyhow::bail!("cannot {doing} in the sandbox: {}", reason.trim());
    }
    Ok(())
}

/// Hands out the checkout's tree on top of `tip` (the work branch's tip as the host holds it) into
/// `dest`, a file the host creates, at most [`MAX_SNAPSHOT_BYTES`]; `false` when the tree is
/// `tip`'s and there is nothing to carry.
pub fn take_snapshot(sandbox: &Sandbox, tip: &str, dest: &Path) -> Result<bool> {
    let argv = ["sh", "-c", SNAPSHOT, "sh", WORKSPACE, tip];
    sandbox
        .read_out(&argv, dest, MAX_SNAPSHOT_BYTES)
        .context("cannot take the checkout's tree out of the sandbox")?;
    let size = std::fs::metadata(dest)
        .with_context(|| format!("cannot read {}", dest.display()))?
        .len();
    Ok(size > 0)
}

/// Puts a [`take_snapshot`] bundle in `file` into the sandbox's fresh checkout as uncommitted
/// changes: git in the sandbox checks it, the host only passes its bytes.
pub fn restore_snapshot(sandbox: &Sandbox, file: &Path) -> Result<()> {
    let argv = ["sh", "-c", RESTORE, "sh", WORKSPACE];
    run_fed(sandbox, &argv, file, "restore the checkout's tree")
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
