//! Host-side git: isolated checkouts per issue and authenticated pushes.
//!
//! Credentials go through git's credential machinery from the environment of the git process,
//! never in a URL or an argument: the helper text given as config only names two variables, and
//! the values sit in those variables of that one git process.
use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Who pushes: `FORGEJO_USER` / `FORGEJO_TOKEN`.
#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub token: String,
}

/// The image's `agent` user, who works in the checkout inside the container.
const AGENT_UID: u32 = 1000;
const AGENT_GID: u32 = 1000;

/// Answers git's `get` with the two variables; ignores `store` and `erase`.
const CREDENTIAL_HELPER: &str = r#"!f() { test "$1" = get && echo username="$SANDCASTLE_GIT_USER" && echo password="$SANDCASTLE_GIT_TOKEN"; }; f"#;

/// Variables that would point git at another repository than the one we name.
const REPOSITORY_VARS: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG_PARAMETERS",
];

/// `<forge base URL>/<owner>/<repo>.git`
pub fn remote_url(forge_url: &str, repo: &str) -> String {
    format!(
        "{}/{}.git",
        forge_url.trim_end_matches('/'),
        repo.trim_matches('/')
    )
}

/// Makes (or reuses) an isolated clone at `dir` on `branch`: from `origin/<branch>` if the remote has
/// it (work resumes), else from `origin/<base>`. Never touches the host repository's `.git`.
/// When running as root, the checkout is chowned to uid/gid 1000 (the image's agent user).
///
/// A local branch ahead of the remote one (commits not pushed before a crash) is kept as it is.
pub fn prepare_checkout(
    dir: &Path,
    remote: &str,
    creds: &Credentials,
    branch: &str,
    base: &str,
) -> Result<PathBuf> {
    check_branch_name(branch)?;
    check_branch_name(base)?;
    let dir =
        &std::path::absolute(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    if dir.join(".git").is_dir() {
        let origin =
            Git::local(dir).output(&["config", "--get", "remote.origin.url"], "read origin")?;
        if origin != remote {
            bail!(
                "{} is a clone of {origin}, not of {remote}; remove that directory so sandcastle can clone afresh",
                dir.display()
            );
        }
        Git::remote(dir, creds).run(&["fetch", "--prune", "--quiet", "origin"], "fetch")?;
    } else {
        if dir.exists()
            && dir
                .read_dir()
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            bail!(
                "{} exists but is not a git clone; remove it so sandcastle can clone {remote} there",
                dir.display()
            );
        }
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
        let target = dir
            .to_str()
            .ok_or_else(|| anyhow!("{} is not UTF-8; use a plain path", dir.display()))?;
        let clone = [
            "clone", "--quiet", "--origin", "origin", "--", remote, target,
        ];
        let git = Git {
            dir: None,
            creds: Some(creds),
        };
        git.run(&clone, &format!("clone into {target}"))?;
    }
    let git = Git::local(dir);
    git.run(&["config", "user.name", "sandcastle"], "set user.name")?;
    git.run(
        &["config", "user.email", "sandcastle@localhost"],
        "set user.email",
    )?;
    check_out(&git, dir, branch, base)?;
    chown_to_agent(dir)?;
    dir.canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))
}

/// Puts `branch` in the working tree: the local branch if it holds work the remote lacks, else the
/// remote branch, else a new branch from the remote base.
fn check_out(git: &Git, dir: &Path, branch: &str, base: &str) -> Result<()> {
    let local = format!("refs/heads/{branch}");
    let remote = format!("refs/remotes/origin/{branch}");
    let remote_base = format!("refs/remotes/origin/{base}");
    if !git.has_commit(&remote_base)? {
        bail!(
            "the remote has no branch {base} to start {branch} from; push {base} or set the right base branch"
        );
    }
    let has_local = git.has_commit(&local)?;
    let has_remote = git.has_commit(&remote)?;
    let start = if has_local && has_remote {
        if git.is_ancestor(&local, &remote)? {
            Some(remote)
        } else if git.is_ancestor(&remote, &local)? {
            None
        } else {
            bail!(
                "{}: local branch {branch} and origin/{branch} have diverged; push or drop the \
                 local commits (or remove the checkout) and run again",
                dir.display()
            )
        }
    } else if has_remote {
        Some(remote)
    } else if has_local && !git.is_ancestor(&local, &remote_base)? {
        // Never pushed, but holds commits: work from before a restart.
        None
    } else {
        Some(remote_base)
    };
    match start {
        Some(start) => git.run(
            &["checkout", "--quiet", "-B", branch, &start, "--"],
            "checkout",
        ),
        None => git.run(&["checkout", "--quiet", branch, "--"], "checkout"),
    }
}

/// Commits on HEAD that `origin/<base>` does not have (subject lines, oldest first).
pub fn new_commits(checkout: &Path, base: &str) -> Result<Vec<String>> {
    check_branch_name(base)?;
    subjects(checkout, &format!("refs/remotes/origin/{base}..HEAD"))
}

/// Commits on HEAD since the commit `from` (subject lines, oldest first).
pub fn commits_between(checkout: &Path, from: &str) -> Result<Vec<String>> {
    if !Git::local(checkout).has_commit(from)? {
        bail!(
            "{}: no commit {from:?} to list changes from",
            checkout.display()
        );
    }
    subjects(checkout, &format!("{from}..HEAD"))
}

fn subjects(checkout: &Path, range: &str) -> Result<Vec<String>> {
    let args = [
        "log",
        "--reverse",
        "--format=%s",
        "--end-of-options",
        range,
        "--",
    ];
    let log = Git::local(checkout).output(&args, "log")?;
    Ok(log.lines().map(str::to_string).collect())
}

/// The HEAD commit id.
pub fn head(checkout: &Path) -> Result<String> {
    Git::local(checkout).output(
        &["rev-parse", "--verify", "HEAD^{commit}"],
        "rev-parse HEAD",
    )
}

/// Pushes HEAD to `refs/heads/<branch>` on origin. A no-op when the remote already has that commit.
pub fn push(checkout: &Path, creds: &Credentials, branch: &str) -> Result<()> {
    check_branch_name(branch)?;
    let local = Git::local(checkout);
    let url = local.output(&["config", "--get", "remote.origin.url"], "read origin")?;
    let fail = |e: anyhow::Error| anyhow!("push of {branch} to {url} failed: {e:#}");
    let head = head(checkout)?;
    let git = Git::remote(checkout, creds);
    let refname = format!("refs/heads/{branch}");
    let advertised = git
        .output(&["ls-remote", "--", "origin", &refname], "ls-remote")
        .map_err(fail)?;
    let remote_tip = advertised.lines().find_map(|line| {
        let (sha, name) = line.split_once('\t')?;
        (name == refname).then_some(sha)
    });
    if let Some(tip) = remote_tip {
        // The remote tip may be a commit this clone has never fetched; then it cannot contain HEAD.
        if tip == head || (local.has_commit(tip)? && local.is_ancestor(&head, tip)?) {
            return Ok(());
        }
    }
    git.run(
        &[
            "push",
            "--quiet",
            "--",
            "origin",
            &format!("HEAD:{refname}"),
        ],
        "push",
    )
    .map_err(fail)?;
    // The push updated refs/remotes/origin/<branch> as root.
    chown_to_agent(checkout)
}

/// Branch names come from the planner and the config: refuse anything git could read as an option
/// or that is no valid branch.
fn check_branch_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && !name.starts_with('-')
        && Git::bare()
            .command(&["check-ref-format", &format!("refs/heads/{name}")])
            .status()
            .is_ok_and(|s| s.success());
    if !valid {
        bail!("{name:?} is not a valid git branch name; use a name like sandcastle/issue-42");
    }
    Ok(())
}

/// Gives the checkout to the agent user when we run as root, so the container can write it.
fn chown_to_agent(dir: &Path) -> Result<()> {
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    chown_tree(dir).with_context(|| {
        format!(
            "cannot chown {} to {AGENT_UID}:{AGENT_GID} for the sandbox's agent user",
            dir.display()
        )
    })
}

/// `chown -R` without following symlinks.
fn chown_tree(path: &Path) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(AGENT_UID), Some(AGENT_GID))?;
    if std::fs::symlink_metadata(path)?.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_tree(&entry?.path())?;
        }
    }
    Ok(())
}

/// One git invocation's settings: where it runs and, for commands that talk to the remote, who
/// it authenticates as.
struct Git<'a> {
    dir: Option<&'a Path>,
    creds: Option<&'a Credentials>,
}

impl<'a> Git<'a> {
    fn bare() -> Git<'static> {
        Git {
            dir: None,
            creds: None,
        }
    }

    fn local(dir: &'a Path) -> Git<'a> {
        Git {
            dir: Some(dir),
            creds: None,
        }
    }

    fn remote(dir: &'a Path, creds: &'a Credentials) -> Git<'a> {
        Git {
            dir: Some(dir),
            creds: Some(creds),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut config: Vec<(&str, &str)> = Vec::new();
        if self.creds.is_some() {
            // An empty value resets the helper list: no inherited helper sees or stores the token.
            config.push(("credential.helper", ""));
            config.push(("credential.helper", CREDENTIAL_HELPER));
        }
        if rustix::process::geteuid().is_root() {
            // The checkout belongs to the agent user; git distrusts repositories owned by others.
            config.push(("safe.directory", "*"));
        }
        let mut cmd = Command::new("git");
        if let Some(dir) = self.dir {
            cmd.current_dir(dir);
        }
        for var in REPOSITORY_VARS {
            cmd.env_remove(var);
        }
        cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
        for (i, (key, value)) in config.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
        if let Some(creds) = self.creds {
            cmd.env("SANDCASTLE_GIT_USER", &creds.user)
                .env("SANDCASTLE_GIT_TOKEN", &creds.token);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs git; on failure, a one-line error with what it was doing, where, and git's complaint.
    fn output(&self, args: &[&str], what: &str) -> Result<String> {
        let out = self
            .command(args)
            .output()
            .context("cannot run git; install git")?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
        }
        let where_ = self
            .dir
            .map(|d| format!(" in {}", d.display()))
            .unwrap_or_default();
        let complaint = complaint(&String::from_utf8_lossy(&out.stderr));
        let complaint = match self.creds {
            Some(creds) if !creds.token.is_empty() => complaint.replace(&creds.token, "[redacted]"),
            _ => complaint,
        };
        bail!("git {what}{where_}: {complaint}")
    }

    fn run(&self, args: &[&str], what: &str) -> Result<()> {
        self.output(args, what).map(drop)
    }

    fn has_commit(&self, rev: &str) -> Result<bool> {
        let spec = format!("{rev}^{{commit}}");
        let status = self
            .command(&["rev-parse", "--verify", "--quiet", &spec])
            .output()?
            .status;
        Ok(status.success())
    }

    fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool> {
        let out = self
            .command(&["merge-base", "--is-ancestor", ancestor, descendant])
            .output()?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => bail!(
                "git merge-base: {}",
                complaint(&String::from_utf8_lossy(&out.stderr))
            ),
        }
    }
}

/// git's error lines joined on one line, without hints and progress.
fn complaint(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("fatal:") || l.starts_with("error:") || l.starts_with('!'))
        .collect();
    if lines.is_empty() {
        let last = stderr.lines().map(str::trim).rfind(|l| !l.is_empty());
        return last.unwrap_or("failed without a message").to_string();
    }
    lines.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A bare remote with `main` holding one commit, reached over `file://`.
    struct Remote {
        tmp: tempfile::TempDir,
        url: String,
    }

    impl Remote {
        fn new() -> Remote {
            let tmp = tempfile::tempdir().unwrap();
            let bare = tmp.path().join("remote.git");
            fixture_git(
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
            fixture_git(
                remote.tmp.path(),
                &["clone", "--quiet", &remote.url, seed.to_str().unwrap()],
            );
            commit(&seed, "initial");
            fixture_git(
                &seed,
                &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
            );
            remote
        }

        fn path(&self, name: &str) -> PathBuf {
            self.tmp.path().join(name)
        }

        /// The commit id `refs/heads/<branch>` names on the remote, if any.
        fn tip(&self, branch: &str) -> Option<String> {
            let out = fixture_git(
                &self.path("remote.git"),
                &[
                    "for-each-ref",
                    "--format=%(objectname)",
                    &format!("refs/heads/{branch}"),
                ],
            );
            (!out.is_empty()).then_some(out)
        }

        fn checkout(&self, name: &str, branch: &str) -> Result<PathBuf> {
            prepare_checkout(
                &self.path(name),
                &self.url,
                &creds("unused-token"),
                branch,
                "main",
            )
        }
    }

    fn creds(token: &str) -> Credentials {
        Credentials {
            user: "sandcastle-bot".to_string(),
            token: token.to_string(),
        }
    }

    /// Plain git for building fixtures; `safe.directory` because checkouts may belong to uid 1000.
    fn fixture_git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "user.name=Test",
                "-c",
                "user.email=test@localhost",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A commit touching a file named after `subject`, made as the agent would.
    fn commit(dir: &Path, subject: &str) -> String {
        std::fs::write(dir.join(subject.replace(' ', "-")), subject).unwrap();
        fixture_git(dir, &["add", "--all"]);
        fixture_git(dir, &["commit", "--quiet", "-m", subject]);
        fixture_git(dir, &["rev-parse", "HEAD"])
    }

    fn current_branch(dir: &Path) -> String {
        fixture_git(dir, &["symbolic-ref", "--short", "HEAD"])
    }

    #[test]
    fn remote_url_joins_forge_and_repo() {
        assert_eq!(
            remote_url("http://127.0.0.1:3000/", "owner/name"),
            "http://127.0.0.1:3000/owner/name.git"
        );
        assert_eq!(
            remote_url("https://forge.example.dev", "owner/name"),
            "https://forge.example.dev/owner/name.git"
        );
    }

    #[test]
    fn a_new_branch_starts_from_the_remote_base_as_an_independent_clone() {
        let remote = Remote::new();
        let dir = remote
            .checkout("checkouts/issue-1", "sandcastle/issue-1")
            .unwrap();
        assert_eq!(current_branch(&dir), "sandcastle/issue-1");
        assert_eq!(Some(head(&dir).unwrap()), remote.tip("main"));
        assert!(new_commits(&dir, "main").unwrap().is_empty());
        assert!(dir.join(".git").is_dir(), "a full clone, not a worktree");
        assert_eq!(
            fixture_git(&dir, &["config", "--local", "user.name"]),
            "sandcastle"
        );
        assert_eq!(
            fixture_git(&dir, &["config", "--local", "user.email"]),
            "sandcastle@localhost"
        );
        if rustix::process::geteuid().is_root() {
            for path in [dir.clone(), dir.join(".git/HEAD"), dir.join("initial")] {
                let meta = std::fs::metadata(&path).unwrap();
                assert_eq!(
                    (meta.uid(), meta.gid()),
                    (AGENT_UID, AGENT_GID),
                    "{}",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn commits_are_listed_and_pushed_and_an_existing_remote_branch_is_resumed() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-2";
        let dir = remote.checkout("a", branch).unwrap();
        let start = commit(&dir, "first change");
        let tip = commit(&dir, "second change");
        assert_eq!(
            new_commits(&dir, "main").unwrap(),
            ["first change", "second change"]
        );
        assert_eq!(commits_between(&dir, &start).unwrap(), ["second change"]);
        assert!(commits_between(&dir, &tip).unwrap().is_empty());
        let err = commits_between(&dir, "").unwrap_err().to_string();
        assert!(err.contains("no commit \"\" to list changes from"), "{err}");

        push(&dir, &creds("unused-token"), branch).unwrap();
        assert_eq!(remote.tip(branch), Some(tip.clone()));

        // A fresh checkout elsewhere picks the work up from the remote branch.
        let resumed = remote.checkout("b", branch).unwrap();
        assert_eq!(head(&resumed).unwrap(), tip);
        assert_eq!(
            new_commits(&resumed, "main").unwrap(),
            ["first change", "second change"]
        );
    }

    #[test]
    fn pushing_what_the_remote_already_has_sends_nothing() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-3";
        let dir = remote.checkout("a", branch).unwrap();
        commit(&dir, "change");
        push(&dir, &creds("unused-token"), branch).unwrap();
        // From now on the remote refuses every push: a second push must not try.
        let hook = remote.path("remote.git/hooks/pre-receive");
        std::fs::write(&hook, "#!/bin/sh\necho refused by test >&2\nexit 1\n").unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        push(&dir, &creds("unused-token"), branch).unwrap();

        // HEAD behind the remote tip: the remote already contains it.
        let ahead = remote.checkout("b", branch).unwrap();
        commit(&ahead, "later change");
        std::fs::remove_file(&hook).unwrap();
        push(&ahead, &creds("unused-token"), branch).unwrap();
        std::fs::write(&hook, "#!/bin/sh\nexit 1\n").unwrap();
        fixture_git(&dir, &["fetch", "--quiet", "origin"]);
        push(&dir, &creds("unused-token"), branch).unwrap();

        // And a push that is needed fails while the hook refuses.
        commit(&dir, "conflicting change");
        assert!(push(&dir, &creds("unused-token"), branch).is_err());
    }

    #[test]
    fn local_commits_not_yet_pushed_survive_a_restart() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-4";
        // Never pushed: the remote has no branch at all.
        let dir = remote.checkout("a", branch).unwrap();
        let unpushed = commit(&dir, "unpushed work");
        let again = remote.checkout("a", branch).unwrap();
        assert_eq!(head(&again).unwrap(), unpushed);

        // Pushed once, then more local work: the local branch is ahead of origin.
        push(&dir, &creds("unused-token"), branch).unwrap();
        let ahead = commit(&dir, "more unpushed work");
        fixture_git(&dir, &["checkout", "--quiet", "main"]);
        let again = remote.checkout("a", branch).unwrap();
        assert_eq!(current_branch(&again), branch);
        assert_eq!(head(&again).unwrap(), ahead);
        assert_eq!(
            new_commits(&again, "main").unwrap(),
            ["unpushed work", "more unpushed work"]
        );
    }

    #[test]
    fn an_existing_checkout_moves_forward_to_the_remote_branch() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-5";
        let dir = remote.checkout("a", branch).unwrap();
        commit(&dir, "one");
        push(&dir, &creds("unused-token"), branch).unwrap();
        let other = remote.checkout("b", branch).unwrap();
        let newer = commit(&other, "two");
        push(&other, &creds("unused-token"), branch).unwrap();

        let again = remote.checkout("a", branch).unwrap();
        assert_eq!(head(&again).unwrap(), newer);
    }

    #[test]
    fn diverged_branches_are_an_error_not_a_silent_reset() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-6";
        let dir = remote.checkout("a", branch).unwrap();
        commit(&dir, "one");
        push(&dir, &creds("unused-token"), branch).unwrap();
        let other = remote.checkout("b", branch).unwrap();
        commit(&other, "theirs");
        push(&other, &creds("unused-token"), branch).unwrap();
        let ours = commit(&dir, "ours");

        let err = remote.checkout("a", branch).unwrap_err().to_string();
        assert!(err.contains("have diverged"), "{err}");
        assert_eq!(head(&dir).unwrap(), ours, "local work kept");

        let err = push(&dir, &creds("unused-token"), branch)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("push of {branch} to {} failed: ", remote.url)),
            "{err}"
        );
        assert!(err.contains("rejected"), "{err}");
        assert!(!err.contains('\n'), "{err:?}");
    }

    #[test]
    fn bad_inputs_are_one_line_errors() {
        let remote = Remote::new();
        let other = Remote::new();
        remote.checkout("a", "sandcastle/issue-7").unwrap();
        let wrong_origin = prepare_checkout(
            &remote.path("a"),
            &other.url,
            &creds("tok"),
            "sandcastle/issue-7",
            "main",
        );
        assert!(
            wrong_origin
                .unwrap_err()
                .to_string()
                .contains("is a clone of")
        );

        std::fs::create_dir(remote.path("junk")).unwrap();
        std::fs::write(remote.path("junk/file"), "x").unwrap();
        let not_a_clone = remote
            .checkout("junk", "sandcastle/issue-7")
            .unwrap_err()
            .to_string();
        assert!(
            not_a_clone.contains("exists but is not a git clone"),
            "{not_a_clone}"
        );

        let no_base = prepare_checkout(
            &remote.path("c"),
            &remote.url,
            &creds("tok"),
            "x",
            "develop",
        );
        assert!(
            no_base
                .unwrap_err()
                .to_string()
                .contains("the remote has no branch develop")
        );

        for name in ["-f", "a..b", "with space", ""] {
            let err = remote.checkout("d", name).unwrap_err().to_string();
            assert!(err.contains("is not a valid git branch name"), "{err}");
        }

        let unreachable = prepare_checkout(
            &remote.path("e"),
            "file:///nonexistent/repo.git",
            &creds("tok"),
            "x",
            "main",
        );
        let err = unreachable.unwrap_err().to_string();
        assert!(err.starts_with("git clone into /"), "{err}");
        assert!(!err.contains('\n'), "{err:?}");
        assert!(!remote.path("e").exists(), "nothing half-written");
    }

    #[test]
    fn credentials_come_from_the_environment_and_replace_inherited_helpers() {
        let remote = Remote::new();
        let dir = remote.checkout("a", "sandcastle/issue-8").unwrap();
        // A helper the clone inherited must not see or store the token.
        let store = remote.path("stored-credentials");
        fixture_git(
            &dir,
            &[
                "config",
                "credential.helper",
                &format!("store --file={}", store.display()),
            ],
        );
        let token = "tok-1234567890";
        let creds = creds(token);
        let git = Git::remote(&dir, &creds);

        let mut fill = git.command(&["credential", "fill"]);
        let shown: Vec<String> = fill
            .get_args()
            .chain(
                fill.get_envs()
                    .filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with("GIT_CONFIG")))
                    .filter_map(|(_, v)| v),
            )
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        assert!(
            shown.iter().all(|s| !s.contains(token)),
            "token in argv or config: {shown:?}"
        );

        let answer = run_with_stdin(&mut fill, "protocol=http\nhost=127.0.0.1\n\n");
        assert!(answer.contains("username=sandcastle-bot\n"), "{answer}");
        assert!(answer.contains(&format!("password={token}\n")), "{answer}");

        let mut approve = git.command(&["credential", "approve"]);
        run_with_stdin(
            &mut approve,
            &format!("protocol=http\nhost=127.0.0.1\nusername=u\npassword={token}\n\n"),
        );
        assert!(!store.exists(), "the inherited store helper was called");
    }

    /// The real transport: git smart HTTP with basic auth against the fake Forgejo.
    #[test]
    fn pushes_over_http_authenticate_through_the_environment_and_never_leak_the_token() {
        let forge = fake_forge::FakeForge::start();
        let token = forge.add_user("sandcastle-bot");
        forge.create_repo("sandcastle-bot", "demo", "main").unwrap();
        let url = remote_url(forge.url(), "sandcastle-bot/demo");
        let bare = forge.bare_repo_path("sandcastle-bot", "demo");
        let tmp = tempfile::tempdir().unwrap();
        let branch = "sandcastle/issue-9";
        let bot = creds(&token);

        let dir = prepare_checkout(&tmp.path().join("a"), &url, &bot, branch, "main").unwrap();
        assert!(!fixture_git(&dir, &["config", "--list"]).contains(&token));
        let pushed = commit(&dir, "over http");
        push(&dir, &bot, branch).unwrap();
        let tip = || fixture_git(&bare, &["rev-parse", &format!("refs/heads/{branch}")]);
        assert_eq!(tip(), pushed);
        let pushes = recorded_pushes(&forge, 1);
        assert_eq!(pushes.len(), 1);
        assert_eq!(pushes[0].user, "sandcastle-bot");
        assert_eq!(pushes[0].updates[0].name, format!("refs/heads/{branch}"));
        assert_eq!(pushes[0].updates[0].new.as_deref(), Some(pushed.as_str()));

        // Already there: nothing is sent. The forge refuses this token (see below), so a push
        // that was attempted would fail.
        push(&dir, &creds("wrong-token-0123456789"), branch).unwrap();
        assert_eq!(forge.push_count(), 1);

        // A fresh checkout over HTTP resumes from the pushed branch.
        let resumed = prepare_checkout(&tmp.path().join("b"), &url, &bot, branch, "main").unwrap();
        assert_eq!(head(&resumed).unwrap(), pushed);

        // A rejected token: one line naming branch and remote, never the token.
        commit(&dir, "refused");
        let wrong = creds("wrong-token-0123456789");
        let err = push(&dir, &wrong, branch).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("push of {branch} to {url} failed: ")),
            "{err}"
        );
        assert!(err.contains("Authentication failed"), "{err}");
        assert!(!err.contains("wrong-token-0123456789"), "{err}");
        assert!(!err.contains('\n'), "{err:?}");
        assert_eq!(forge.push_count(), 1);
        assert_eq!(tip(), pushed);
    }

    /// fake-forge records a push just after answering it, so the record may trail git's exit.
    fn recorded_pushes(forge: &fake_forge::FakeForge, expected: usize) -> Vec<fake_forge::Push> {
        for _ in 0..250 {
            if forge.push_count() >= expected {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        forge.pushes()
    }

    fn run_with_stdin(cmd: &mut Command, input: &str) -> String {
        use std::io::Write;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }
}
