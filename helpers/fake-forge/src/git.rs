//! Plumbing on the hosted bare repositories: creating them, seeding commits, reading refs.
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// A `git` command on `git_dir`, isolated from the user's and the system's git configuration.
fn git(git_dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .arg("--git-dir")
        .arg(git_dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "fake-forge")
        .env("GIT_AUTHOR_EMAIL", "fake-forge@localhost")
        .env("GIT_COMMITTER_NAME", "fake-forge")
        .env("GIT_COMMITTER_EMAIL", "fake-forge@localhost")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE");
    command
}

fn run(mut command: Command, input: Option<&[u8]>) -> Result<String> {
    command.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .with_context(|| format!("running {command:?}"))?;
    if let Some(input) = input {
        child.stdin.take().context("git stdin")?.write_all(input)?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Creates a bare repository whose `HEAD` is `default_branch`, with one commit holding a README.
pub fn init_bare(git_dir: &Path, default_branch: &str, title: &str) -> Result<()> {
    let mut init = Command::new("git");
    init.args([
        "init",
        "--bare",
        "--quiet",
        "--initial-branch",
        default_branch,
    ])
    .arg(git_dir);
    init.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    run(init, None)?;
    commit_file(
        git_dir,
        default_branch,
        default_branch,
        "README.md",
        &format!("# {title}\n"),
        "Initial commit",
    )?;
    Ok(())
}

/// A bare copy of `source` at `git_dir`, with every branch: a fork.
pub fn clone_bare(source: &Path, git_dir: &Path) -> Result<()> {
    let mut clone = Command::new("git");
    clone
        .args(["clone", "--bare", "--quiet", "--"])
        .arg(source)
        .arg(git_dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    run(clone, None).map(drop)
}

/// Commits `path` with `content` on `branch`, starting `branch` from `from` if it does not exist.
/// Returns the new commit.
pub fn commit_file(
    git_dir: &Path,
    branch: &str,
    from: &str,
    path: &str,
    content: &str,
    message: &str,
) -> Result<String> {
    let parent = rev_parse(git_dir, branch)?.or(rev_parse(git_dir, from)?);
    // A private index, so that seeding never touches a work tree; git creates the file.
    let scratch = tempfile::tempdir()?;
    let index = scratch.path().join("index");
    let with_index = |args: &[&str]| {
        let mut command = git(git_dir);
        command.args(args).env("GIT_INDEX_FILE", &index);
        command
    };
    if let Some(parent) = &parent {
        run(with_index(&["read-tree", parent]), None)?;
    }
    let mut hash = git(git_dir);
    hash.args(["hash-object", "-w", "--stdin"]);
    let blob = run(hash, Some(content.as_bytes()))?;
    run(
        with_index(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ]),
        None,
    )?;
    let tree = run(with_index(&["write-tree"]), None)?;
    let mut commit = git(git_dir);
    commit.args(["commit-tree", &tree, "-m", message]);
    if let Some(parent) = &parent {
        commit.args(["-p", parent]);
    }
    let sha = run(commit, None)?;
    let mut update = git(git_dir);
    update.args(["update-ref", &format!("refs/heads/{branch}"), &sha]);
    run(update, None)?;
    Ok(sha)
}

/// `refs/pull/<number>/head` in the base repository `git_dir`, as Forgejo keeps it: the head
/// branch's commit when the pull request is opened (fetched from `head_dir` when that is a fork).
pub fn set_pull_head(git_dir: &Path, number: u64, head_dir: &Path, head: &str) -> Result<()> {
    let mut fetch = git(git_dir);
    fetch
        .args(["fetch", "--quiet", "--no-tags", "--"])
        .arg(head_dir)
        .arg(format!("+refs/heads/{head}:refs/pull/{number}/head"));
    run(fetch, None).map(drop)
}

/// The commit a branch points at, if the branch exists.
pub fn rev_parse(git_dir: &Path, branch: &str) -> Result<Option<String>> {
    resolve(git_dir, &format!("refs/heads/{branch}"))
}

pub fn merge_base(git_dir: &Path, a: &str, b: &str) -> Result<Option<String>> {
    let mut command = git(git_dir);
    command.args(["merge-base", a, b]);
    let output = command
        .stderr(Stdio::null())
        .output()
        .context("running git merge-base")?;
    Ok(output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string()))
}

/// Every ref and the object it points at.
pub fn refs(git_dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut command = git(git_dir);
    command.args(["for-each-ref", "--format=%(refname) %(objectname)"]);
    let listing = run(command, None)?;
    Ok(listing
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, sha)| (name.to_string(), sha.to_string()))
        .collect())
}

/// A commit as the commits API shows it.
pub struct LoggedCommit {
    pub sha: String,
    pub parents: Vec<String>,
    /// The committer's date, RFC 3339.
    pub date: String,
    pub author: String,
    pub email: String,
    pub message: String,
    pub tree: String,
}

/// The commits reachable from `branch`, newest first; `None` when the branch does not exist.
pub fn log(git_dir: &Path, branch: &str) -> Result<Option<Vec<LoggedCommit>>> {
    let Some(tip) = rev_parse(git_dir, branch)? else {
        return Ok(None);
    };
    let mut command = git(git_dir);
    command.args([
        "log",
        "-z",
        "--format=%H%x1f%P%x1f%cI%x1f%an%x1f%ae%x1f%T%x1f%B",
        &tip,
    ]);
    let listing = run(command, None)?;
    let commits = listing
        .split('\0')
        .filter(|entry| !entry.trim().is_empty())
        .filter_map(|entry| {
            let fields: Vec<&str> = entry.trim_start_matches('\n').splitn(7, '\x1f').collect();
            let [sha, parents, date, author, email, tree, message] = fields[..] else {
                return None;
            };
            Some(LoggedCommit {
                sha: sha.to_string(),
                parents: parents.split_whitespace().map(str::to_string).collect(),
                date: date.to_string(),
                author: author.to_string(),
                email: email.to_string(),
                message: message.trim_end().to_string() + "\n",
                tree: tree.to_string(),
            })
        })
        .collect();
    Ok(Some(commits))
}

/// The commit a branch, tag or commit id names, if any.
pub fn resolve(git_dir: &Path, rev: &str) -> Result<Option<String>> {
    let mut command = git(git_dir);
    command.args([
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        &format!("{rev}^{{commit}}"),
    ]);
    let output = command
        .stderr(Stdio::null())
        .output()
        .context("running git rev-parse")?;
    Ok(output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string()))
}

/// The tree of merging `head` into `base`, or `None` when they conflict (git's `merge-tree`, which
/// touches no work tree).
fn merged_tree(git_dir: &Path, base: &str, head: &str) -> Result<Option<String>> {
    let mut command = git(git_dir);
    command.args(["merge-tree", "--write-tree", "--no-messages", base, head]);
    let output = command.output().context("running git merge-tree")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match output.status.code() {
        Some(0) => Ok(stdout.lines().next().map(str::to_string)),
        Some(1) => Ok(None),
        _ => bail!(
            "git merge-tree failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    }
}

/// Whether `head` merges into `base` without conflicts.
pub fn merges_cleanly(git_dir: &Path, base: &str, head: &str) -> Result<bool> {
    Ok(merged_tree(git_dir, base, head)?.is_some())
}

/// Merges `head` into `branch` with a merge commit; `None` (and nothing changed) when they
/// conflict. Returns the merge commit.
pub fn merge(git_dir: &Path, branch: &str, head: &str, message: &str) -> Result<Option<String>> {
    let base = rev_parse(git_dir, branch)?.with_context(|| format!("no branch {branch}"))?;
    let Some(tree) = merged_tree(git_dir, &base, head)? else {
        return Ok(None);
    };
    let mut commit = git(git_dir);
    commit.args(["commit-tree", &tree, "-p", &base, "-p", head, "-m", message]);
    let sha = run(commit, None)?;
    let mut update = git(git_dir);
    update.args(["update-ref", &format!("refs/heads/{branch}"), &sha, &base]);
    run(update, None)?;
    Ok(Some(sha))
}
