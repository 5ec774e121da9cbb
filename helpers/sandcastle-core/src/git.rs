//! The orchestrator's own git repository for each piece of work, and every git command the host runs.
//!
//! Each piece of work has a bare repository under `.sandcastle/repos/<slug>.git` that sandcastle
//! creates, configures and never mounts into a sandbox. The agent's checkout lives inside its
//! container (see `checkout.rs`); its commits reach this repository only as a bundle file, fetched
//! here as data. The host never runs git in a directory the agent could have written, so no hook,
//! `core.fsmonitor`, `core.hooksPath` or `pushurl` of the agent's ever takes effect on the host, and
//! pushes go to the remote URL named on the command line, never to a configured remote.
//!
//! Credentials go through git's credential machinery from the environment of the git process,
//! never in a URL or an argument: the helper text given as config only names two variables, and
//! the values sit in those variables of that one git process.
use crate::deadline;
use crate::forge_text;
use anyhow::{Context, Result, anyhow, bail};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Who pushes: `FORGEJO_USER` / `FORGEJO_TOKEN`.
#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub token: String,
}

/// Answers git's `get` with the two variables; ignores `store` and `erase`.
const CREDENTIAL_HELPER: &str = r#"!f() { test "$1" = get && echo username="$SANDCASTLE_GIT_USER" && echo password="$SANDCASTLE_GIT_TOKEN"; }; f"#;

/// Variables that would point git at another repository, or other config, than the one we name.
const REPOSITORY_VARS: [&str; 9] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CEILING_DIRECTORIES",
];

/// The longest any git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(600);
/// Test only: whole seconds replacing `GIT_TIMEOUT` and `LOW_SPEED_TIME`.
const TIMEOUT_VAR: &str = "SANDCASTLE_TEST_GIT_TIMEOUT";
/// A transfer slower than `LOW_SPEED_LIMIT` bytes a second for `LOW_SPEED_TIME` is given up.
const LOW_SPEED_LIMIT: &str = "1000";
const LOW_SPEED_TIME: Duration = Duration::from_secs(60);

/// Where an imported bundle's tip lands before it is checked and becomes the work branch.
const INCOMING: &str = "refs/sandcastle/incoming";

/// The most a work repository may hold on disk after an import (what one piece of work may cost
/// the host's disk, however many turns hand out bundles).
pub const MAX_WORK_REPO_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// The address space of the git that imports a sandbox's bundle: a pack whose objects inflate
/// (or whose deltas expand) past it makes git fail, not the host run out of memory.
const IMPORT_ADDRESS_SPACE: u64 = 3 * 1024 * 1024 * 1024;

/// How the import's git holds a pack: big objects streamed rather than inflated in memory, small
/// windows, one thread, the pack kept as it came (never exploded into loose objects).
const IMPORT_CONFIG: [&str; 12] = [
    "-c",
    "core.bigFileThreshold=16m",
    "-c",
    "core.packedGitWindowSize=32m",
    "-c",
    "core.packedGitLimit=256m",
    "-c",
    "pack.threads=1",
    "-c",
    "fetch.unpackLimit=1",
    "-c",
    "fetch.fsckObjects=true",
];

/// The most new commits one import may bring in.
pub const MAX_NEW_COMMITS: u64 = 10_000;
/// The most one new commit may weigh as git stores it (headers and message): a longer one is
/// refused by its size, before any of it is read.
pub const MAX_COMMIT_BYTES: u64 = 1024 * 1024;
/// The most the new commits of one import may weigh together.
pub const MAX_NEW_COMMITS_BYTES: u64 = 32 * 1024 * 1024;
/// The most paths a change may touch, counted against both the work's start and the base: what
/// [`WorkRepo::changed_paths`] and the lists made from it hold at most.
pub const MAX_CHANGED_PATHS: u64 = 100_000;
/// The most any git command's output may be: what the host reads whole.
const MAX_GIT_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// The most subject lines [`WorkRepo::new_commits`] and [`WorkRepo::commits_since`] give (the
/// newest), and the most columns of each (a longer one is cut, ending in `..`).
pub const MAX_SUBJECTS: usize = 100;
pub const MAX_SUBJECT_COLUMNS: usize = 100;

/// What the forge holds besides its branches, mirrored so that an import knows their commits as
/// another branch's: pull requests' heads (`refs/pull/N/head`) and tags.
const FORGE_REFSPECS: [&str; 3] = [
    "+refs/heads/*:refs/remotes/origin/*",
    "+refs/pull/*:refs/remotes/origin-pull/*",
    "+refs/tags/*:refs/remotes/origin-tags/*",
];
/// Every commit the forge holds, as `rev-list` arguments over those mirrors.
const FORGE_COMMITS: [&str; 3] = [
    "--remotes=origin",
    "--remotes=origin-pull",
    "--remotes=origin-tags",
];

/// The config key that records which remote a work repository belongs to.
const REMOTE_KEY: &str = "sandcastle.remote";

/// `<forge base URL>/<owner>/<repo>.git`
pub fn remote_url(forge_url: &str, repo: &str) -> String {
    format!(
        "{}/{}.git",
        forge_url.trim_end_matches('/'),
        repo.trim_matches('/')
    )
}

/// One piece of work's repository: `refs/remotes/origin/*` mirror the remote's branches
/// (`origin-pull/*` and `origin-tags/*` its pull requests' heads and tags), `refs/heads/<branch>`
/// is the work as far as the host has it.
pub struct WorkRepo {
    git_dir: PathBuf,
    remote: String,
    pub branch: String,
    pub base: String,
    /// The commit the work started from (`starting_at`); every commit taken in must descend from
    /// it. Unset: `origin/<base>`.
    start: Option<String>,
    /// The remote branch a push goes to (`publishing_as`: an issue's chosen attempt); unset:
    /// `branch`.
    published_as: Option<String>,
}

/// What became of the commits a sandbox handed out.
#[derive(Debug, PartialEq)]
pub enum Imported {
    /// The work branch's new tip.
    Tip(String),
    /// Refused, the work branch left where it was: why, in words the agent can act on.
    Refused(String),
}

impl WorkRepo {
    /// Creates (or reuses) the bare repository at `git_dir`, fetches the remote's branches, and
    /// points `branch` at the work: the local branch if it holds work the remote lacks, else the
    /// remote branch, else the remote base. A local branch ahead of the remote one (commits not
    /// pushed before a stop) is kept as it is.
    pub fn prepare(
        git_dir: &Path,
        remote: &str,
        creds: &Credentials,
        branch: &str,
        base: &str,
    ) -> Result<WorkRepo> {
        check_branch_name(branch)?;
        check_branch_name(base)?;
        let git_dir = std::path::absolute(git_dir)
            .with_context(|| format!("cannot resolve {}", git_dir.display()))?;
        let created = !git_dir.exists();
        let repo = WorkRepo {
            git_dir,
            remote: remote.to_string(),
            branch: branch.to_string(),
            base: base.to_string(),
            start: None,
            published_as: None,
        };
        let prepared = if created {
            repo.create()
        } else {
            repo.check_owner()
        }
        .and_then(|()| repo.fetch(creds))
        .and_then(|()| repo.place_branch());
        if let Err(error) = prepared {
            if created {
                // Nothing half-written: the next run starts from scratch.
                let _ = std::fs::remove_dir_all(&repo.git_dir);
            }
            return Err(error);
        }
        Ok(repo)
    }

    /// The work started from `start`, which every commit taken in must descend from.
    pub fn starting_at(mut self, start: &str) -> WorkRepo {
        self.start = Some(start.to_string());
        self
    }

    /// Pushes go to the remote's `branch` instead of the work branch's own name: an attempt's
    /// local branch (`sandcastle/issue-N-b`) is published as its issue's.
    pub fn publishing_as(mut self, branch: &str) -> Result<WorkRepo> {
        check_branch_name(branch)?;
        self.published_as = Some(branch.to_string());
        Ok(self)
    }

    /// The remote branch a push goes to.
    pub fn published_branch(&self) -> &str {
        self.published_as.as_deref().unwrap_or(&self.branch)
    }

    /// What the work changes against the base branch (`git diff origin/<base>...<tip>`), cut at
    /// `max_bytes` (on a character boundary); whether it was cut. Agent text, bounded by git's
    /// output limit before it is read and by `max_bytes` after.
    pub fn diff_against_base(&self, max_bytes: usize) -> Result<(String, bool)> {
        let range = format!("{}...refs/heads/{}", self.fetched_base(), self.branch);
        let args = [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--stat",
            "--patch",
            "--end-of-options",
            &range,
            "--",
        ];
        let out = self.git().finish(&args, "diff")?;
        let bytes = self.git().checked(out, "diff")?;
        let text = String::from_utf8_lossy(&bytes);
        if text.len() <= max_bytes {
            return Ok((text.into_owned(), false));
        }
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        Ok((text[..end].to_string(), true))
    }

    fn git(&self) -> Git<'_> {
        Git {
            git_dir: Some(&self.git_dir),
            creds: None,
            address_space: None,
        }
    }

    fn create(&self) -> Result<()> {
        let target = self
            .git_dir
            .to_str()
            .ok_or_else(|| anyhow!("{} is not UTF-8; use a plain path", self.git_dir.display()))?;
        Git::bare().run(&["init", "--quiet", "--bare", "--", target], "init")?;
        self.git()
            .run(&["config", REMOTE_KEY, &self.remote], "config")
    }

    fn check_owner(&self) -> Result<()> {
        let recorded = self
            .git()
            .output(&["config", "--get", REMOTE_KEY], "read config")
            .map_err(|_| {
                anyhow!(
                    "{} exists but is not a sandcastle work repository; remove it so sandcastle can create one",
                    self.git_dir.display()
                )
            })?;
        if recorded != self.remote {
            bail!(
                "{} is a repository of {recorded}, not of {}; remove that directory so sandcastle can start afresh",
                self.git_dir.display(),
                self.remote
            );
        }
        Ok(())
    }

    fn fetch(&self, creds: &Credentials) -> Result<()> {
        let git = Git {
            git_dir: Some(&self.git_dir),
            creds: Some(creds),
            address_space: None,
        };
        let mut args = vec![
            "fetch",
            "--prune",
            "--no-tags",
            "--quiet",
            "--no-write-fetch-head",
            "--",
            &self.remote,
        ];
        args.extend(FORGE_REFSPECS);
        git.run(&args, &format!("fetch from {}", self.remote))
    }

    fn place_branch(&self) -> Result<()> {
        let git = self.git();
        let (branch, base) = (&self.branch, &self.base);
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
                remote
            } else if git.is_ancestor(&remote, &local)? {
                return Ok(());
            } else {
                bail!(
                    "{}: local branch {branch} and origin/{branch} have diverged; push or drop the \
                     local commits (or remove that repository) and run again",
                    self.git_dir.display()
                )
            }
        } else if has_remote {
            remote
        } else if has_local && !git.is_ancestor(&local, &remote_base)? {
            // Never pushed, but holds commits: work from before a restart.
            return Ok(());
        } else {
            remote_base
        };
        git.run(&["update-ref", &local, &start], "update-ref")
    }

    /// The commit the work branch is at.
    pub fn tip(&self) -> Result<String> {
        self.git().output(
            &[
                "rev-parse",
                "--verify",
                &format!("refs/heads/{}^{{commit}}", self.branch),
            ],
            "rev-parse",
        )
    }

    /// The commit `origin/<base>` is at: the base branch as last fetched from the forge.
    pub fn base_tip(&self) -> Result<String> {
        self.git().output(
            &[
                "rev-parse",
                "--verify",
                &format!("{}^{{commit}}", self.fetched_base()),
            ],
            "rev-parse",
        )
    }

    /// Whether the work branch contains `rev` (a commit id, or `origin/<base>` as `refs/remotes/…`).
    pub fn contains(&self, rev: &str) -> Result<bool> {
        let git = self.git();
        Ok(git.has_commit(rev)? && git.is_ancestor(rev, &format!("refs/heads/{}", self.branch))?)
    }

    /// `refs/remotes/origin/<base>`: the default branch as last fetched.
    pub fn fetched_base(&self) -> String {
        format!("refs/remotes/origin/{}", self.base)
    }

    /// Commits on the work branch that `origin/<base>` does not have (subject lines, oldest first).
    pub fn new_commits(&self) -> Result<Vec<String>> {
        self.subjects(&format!("refs/remotes/origin/{}", self.base))
    }

    /// Commits on the work branch since the commit `from` (subject lines, oldest first).
    pub fn commits_since(&self, from: &str) -> Result<Vec<String>> {
        if !self.git().has_commit(from)? {
            bail!(
                "{}: no commit {from:?} to list changes from",
                self.git_dir.display()
            );
        }
        self.subjects(from)
    }

    /// The subjects of the newest [`MAX_SUBJECTS`] commits since `from`, oldest first, each cut
    /// by git to [`MAX_SUBJECT_COLUMNS`]: agent text, bounded before it is read.
    fn subjects(&self, from: &str) -> Result<Vec<String>> {
        let range = format!("{from}..refs/heads/{}", self.branch);
        let count = format!("--max-count={MAX_SUBJECTS}");
        let format = format!("--format=%<({MAX_SUBJECT_COLUMNS},trunc)%s");
        let args = [
            "log",
            "--reverse",
            "--encoding=none",
            &count,
            &format,
            "--end-of-options",
            &range,
            "--",
        ];
        let log = self.git().output(&args, "log")?;
        Ok(log.lines().map(|s| s.trim_end().to_string()).collect())
    }

    /// The paths a push of the work branch would change, judged against the base branch: their
    /// content at the tip differs from that at the merge base of the tip and `origin/<base>`
    /// (`git diff origin/<base>...<tip>`: added, changed, removed, or turned into a link or a
    /// submodule; a rename is both its names). Never judged against where an attempt started,
    /// which may itself be unpushed work. What a merge of the base brings in is the base's, not the
    /// work's. With several merge bases (the work merged an older commit of the base), a path
    /// counts only if it differs from each of them, each being the base's own history; with none
    /// (unrelated history), every path of the tip counts. Sorted; names that are not UTF-8 are
    /// shown lossily.
    pub fn changed_paths(&self) -> Result<Vec<String>> {
        let tip = format!("refs/heads/{}", self.branch);
        let git = self.git();
        let out = git.finish(
            &[
                "merge-base",
                "--all",
                "--end-of-options",
                &self.fetched_base(),
                &tip,
            ],
            "merge-base",
        )?;
        let bases = match out.status.code() {
            Some(0) => String::from_utf8_lossy(&out.stdout).into_owned(),
            // No common commit.
            Some(1) => String::new(),
            _ => bail!(
                "git merge-base: {}",
                complaint(&String::from_utf8_lossy(&out.stderr))
            ),
        };
        let names = |args: &[&str]| -> Result<BTreeSet<String>> {
            let names = git.output(args, args[0])?;
            Ok(names
                .split('\0')
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect())
        };
        let mut changed: Option<BTreeSet<String>> = None;
        for base in bases.lines() {
            let differ = names(&[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--no-ext-diff",
                "--end-of-options",
                base,
                &tip,
                "--",
            ])?;
            changed = Some(match changed {
                Some(so_far) => so_far.intersection(&differ).cloned().collect(),
                None => differ,
            });
        }
        let changed = match changed {
            Some(changed) => changed,
            None => names(&[
                "ls-tree",
                "-r",
                "-z",
                "--name-only",
                "--full-tree",
                "--end-of-options",
                &tip,
            ])?,
        };
        Ok(changed.into_iter().collect())
    }

    /// A bundle of the work branch and `origin/<base>`, which is what a sandbox's checkout is made from.
    pub fn seed_bundle(&self, file: &Path) -> Result<()> {
        let target = file
            .to_str()
            .ok_or_else(|| anyhow!("{} is not UTF-8", file.display()))?;
        self.git().run(
            &[
                "bundle",
                "create",
                "--quiet",
                target,
                &format!("refs/heads/{}", self.branch),
                &format!("refs/remotes/origin/{}", self.base),
            ],
            "bundle create",
        )
    }

    /// A scratch file for a bundle, inside this repository (so on the same disk, and ours).
    pub fn scratch_file(&self) -> Result<tempfile::NamedTempFile> {
        tempfile::Builder::new()
            .prefix("sandcastle-")
            .suffix(".bundle")
            .tempfile_in(&self.git_dir)
            .with_context(|| format!("cannot create a scratch file in {}", self.git_dir.display()))
    }

    /// Takes what a sandbox handed out as the new state of the work branch: either a bundle whose
    /// `HEAD` is the agent's commit (fetched with every object checked), or one line naming a
    /// commit this repository already has. Nothing in it is run or followed. A commit that breaks
    /// a rule of `WorkRepo::refusal` leaves the work branch where it was.
    pub fn import(&self, handed_out: &Path) -> Result<Imported> {
        let mut head = [0u8; 16];
        let read = std::fs::File::open(handed_out)
            .and_then(|mut f| f.read(&mut head))
            .with_context(|| format!("cannot read {}", handed_out.display()))?;
        let is_bundle = matches!(&head[..read], b"# v2 git bundle\n" | b"# v3 git bundle\n");
        let git = self.git();
        let tip = if is_bundle {
            let file = handed_out
                .to_str()
                .ok_or_else(|| anyhow!("{} is not UTF-8", handed_out.display()))?;
            // The bundle is already inside the repository; its pack will take as much again.
            let bundle = std::fs::metadata(handed_out).map(|m| m.len()).unwrap_or(0);
            let used = disk_usage(&self.git_dir);
            if used + bundle > MAX_WORK_REPO_BYTES {
                bail!(
                    "the agent's commits would grow the work repository {} past {} MiB (it holds {} MiB, the bundle is {} MiB); refused",
                    self.git_dir.display(),
                    MAX_WORK_REPO_BYTES >> 20,
                    used >> 20,
                    bundle >> 20
                );
            }
            let mut args: Vec<&str> = IMPORT_CONFIG.to_vec();
            let refspec = format!("+HEAD:{INCOMING}");
            args.extend([
                "fetch",
                "--quiet",
                "--no-write-fetch-head",
                "--",
                file,
                &refspec,
            ]);
            Git {
                address_space: Some(IMPORT_ADDRESS_SPACE),
                ..self.git()
            }
            .run(&args, "fetch of the agent's commits")?;
            git.output(
                &["rev-parse", "--verify", &format!("{INCOMING}^{{commit}}")],
                "rev-parse",
            )
            .map_err(|_| anyhow!("the sandbox's HEAD is not a commit"))?
        } else {
            // An id line is at most 65 bytes: no more is read, whatever the file's size.
            let mut text = Vec::new();
            std::fs::File::open(handed_out)
                .and_then(|f| f.take(80).read_to_end(&mut text))
                .with_context(|| format!("cannot read {}", handed_out.display()))?;
            let named = std::str::from_utf8(&text).unwrap_or_default().trim();
            if !is_object_id(named) {
                bail!("the sandbox handed out neither a bundle nor a commit id");
            }
            if !git.has_commit(named)? {
                bail!("the sandbox named {named} as its HEAD but sent no commits");
            }
            named.to_string()
        };
        if let Some(why) = self.refusal(&tip)? {
            return Ok(Imported::Refused(why));
        }
        git.run(
            &["update-ref", &format!("refs/heads/{}", self.branch), &tip],
            "update-ref",
        )?;
        Ok(Imported::Tip(tip))
    }

    /// Why `tip` may not become the work because it rewrites it, if it does: what the host took in
    /// is only ever added to, never amended, rebased or rewound, so a gate's verdict and a review
    /// are about a history that stays (and sandcastle never force-pushes).
    fn rewrite(&self, tip: &str) -> Result<Option<String>> {
        let current = self.tip()?;
        if self.git().is_ancestor(&current, tip)? {
            return Ok(None);
        }
        Ok(Some(format!(
            "commit {} does not build on {}, the work branch's tip that sandcastle already took in: \
             history it took in is never rewritten (no amend, rebase, squash or reset past it). Run \
             `git reset --hard {}` and add new commits on top (`git revert` undoes a commit)",
            short(tip),
            short(&current),
            short(&current)
        )))
    }

    /// Why `tip` may not become the work, if it may not: it must descend from the work's start and
    /// from the branch's tip ([`WorkRepo::rewrite`]), bring in no commit of another branch, pull
    /// request or tag on the forge (which this repository mirrors), and its new commits' messages
    /// must pass [`WorkRepo::messages_refusal`].
    fn refusal(&self, tip: &str) -> Result<Option<String>> {
        let git = self.git();
        let base = format!("refs/remotes/origin/{}", self.base);
        let start = self.start.clone().unwrap_or_else(|| base.clone());
        if !git.is_ancestor(&start, tip)? {
            let start = git.output(&["rev-parse", "--verify", &start], "rev-parse")?;
            return Ok(Some(format!(
                "commit {} does not descend from the commit this work started from ({}): build on \
                 the branch you were given, never on another branch",
                short(tip),
                short(&start)
            )));
        }
        if let Some(why) = self.rewrite(tip)? {
            return Ok(Some(why));
        }
        // The commits new to the work: not in its start, its base or its own branch on the forge.
        let mut known = vec![start.clone(), base];
        let own = format!("refs/remotes/origin/{}", self.branch);
        if git.has_commit(&own)? {
            known.push(own);
        }
        if let Some(why) = self.paths_refusal(&start, tip)? {
            return Ok(Some(why));
        }
        // What the work branch here already holds was checked when it was taken.
        known.push(format!("refs/heads/{}", self.branch));
        let mut forge = known.clone();
        forge.extend(FORGE_COMMITS.map(String::from));
        let elsewhere = self.count(tip, &known)? - self.count(tip, &forge)?;
        if elsewhere > 0 {
            return Ok(Some(format!(
                "{elsewhere} of the commits handed out are another branch's on the forge (or a pull \
                 request's, or a tag's): build on the branch you were given, never on another branch"
            )));
        }
        self.messages_refusal(tip, &known)
    }

    /// The refusal of `tip` if it differs in more than [`MAX_CHANGED_PATHS`] paths from both
    /// `start` and the base (a merge of a base that moved far is no large change of the agent's).
    /// The paths are counted as git prints them, never held.
    fn paths_refusal(&self, start: &str, tip: &str) -> Result<Option<String>> {
        let base = self.fetched_base();
        for from in [start, &base] {
            let args = [
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--no-ext-diff",
                "--end-of-options",
                from,
                tip,
                "--",
            ];
            if self.git().count_nul(&args, MAX_CHANGED_PATHS, "diff")? <= MAX_CHANGED_PATHS {
                return Ok(None);
            }
        }
        Ok(Some(format!(
            "commit {} changes more than {MAX_CHANGED_PATHS} paths: hand out a smaller change",
            short(tip)
        )))
    }

    /// How many commits `tip` has that none of `not` has.
    fn count(&self, tip: &str, not: &[String]) -> Result<u64> {
        let mut args = vec!["rev-list", "--count", tip, "--not"];
        args.extend(not.iter().map(String::as_str));
        let text = self.git().output(&args, "rev-list")?;
        text.parse()
            .map_err(|_| anyhow!("git rev-list counted {text:?}"))
    }

    /// The refusal of the new commits of `tip` (those none of `not` has), if their messages are
    /// not what the forge may read: too many commits, one heavier than [`MAX_COMMIT_BYTES`] or all
    /// heavier than [`MAX_NEW_COMMITS_BYTES`] (told by their sizes, before any is read), a message
    /// in another encoding than UTF-8 (by its `encoding` header or its bytes), one with a NUL, or
    /// one that says a closing keyword before a reference (Forgejo acts on those once the commit
    /// reaches the default branch). The messages are read raw, as the forge reads them.
    fn messages_refusal(&self, tip: &str, not: &[String]) -> Result<Option<String>> {
        let new = self.count(tip, not)?;
        if new > MAX_NEW_COMMITS {
            return Ok(Some(format!(
                "{new} new commits were handed out, more than the {MAX_NEW_COMMITS} one turn may \
                 bring: squash them into fewer commits (`git rebase -i`)"
            )));
        }
        let mut args = vec!["rev-list", tip, "--not"];
        args.extend(not.iter().map(String::as_str));
        let ids = self.git().output(&args, "rev-list")?;
        if ids.is_empty() {
            return Ok(None);
        }
        let list = self.scratch_file()?;
        std::fs::write(list.path(), format!("{ids}\n"))
            .with_context(|| format!("cannot write {}", list.path().display()))?;
        let sizes = self.git().bytes_from(
            &["cat-file", "--batch-check=%(objectname) %(objectsize)"],
            list.path(),
            "cat-file --batch-check",
        )?;
        let mut total = 0;
        for line in String::from_utf8_lossy(&sizes).lines() {
            let (id, size) = line.split_once(' ').unwrap_or((line, ""));
            let size: u64 = size
                .parse()
                .map_err(|_| anyhow!("git cat-file said {line:?} of a commit"))?;
            if size > MAX_COMMIT_BYTES {
                return Ok(Some(format!(
                    "commit {} is {} KiB, more than the {} KiB a commit may be: write a shorter \
                     message (`git commit --amend`, or `git rebase -i` for an earlier commit)",
                    short(id),
                    size >> 10,
                    MAX_COMMIT_BYTES >> 10
                )));
            }
            total += size;
        }
        if total > MAX_NEW_COMMITS_BYTES {
            return Ok(Some(format!(
                "the {new} new commits are {} MiB together, more than the {} MiB one turn may \
                 bring: write shorter messages, or squash commits (`git rebase -i`)",
                total >> 20,
                MAX_NEW_COMMITS_BYTES >> 20
            )));
        }
        let objects =
            self.git()
                .bytes_from(&["cat-file", "--batch"], list.path(), "cat-file --batch")?;
        for commit in raw_commits(&objects)? {
            if let Some(why) = message_refusal(&commit) {
                return Ok(Some(why));
            }
        }
        Ok(None)
    }

    /// Pushes `commit`, which must be the work branch's tip, to `refs/heads/<published_branch>` on the
    /// remote URL: the commit the caller checked (the gate's), never whatever the branch is at by
    /// then. Success too when the remote already has that commit (at its tip or behind it).
    pub fn push(&self, creds: &Credentials, commit: &str) -> Result<()> {
        let (branch, url) = (self.published_branch(), &self.remote);
        let fail = |e: anyhow::Error| anyhow!("push of {branch} to {url} failed: {e:#}");
        let head = self.tip()?;
        if head != commit {
            bail!(
                "{}: the work branch {branch} is at {}, not at {}, the commit to be pushed; nothing \
                 was pushed",
                self.git_dir.display(),
                short(&head),
                short(commit)
            );
        }
        let local = self.git();
        let git = Git {
            git_dir: Some(&self.git_dir),
            creds: Some(creds),
            address_space: None,
        };
        let refname = format!("refs/heads/{branch}");
        // Pushed first: the forge is asked what it holds only when the push is refused, so a
        // publish costs one round trip, not two.
        let pushed = git.run(
            &["push", "--quiet", "--", url, &format!("{commit}:{refname}")],
            "push",
        );
        let Err(refused) = pushed else {
            return Ok(());
        };
        let advertised = git
            .output(&["ls-remote", "--", url, &refname], "ls-remote")
            .map_err(fail)?;
        let remote_tip = advertised.lines().find_map(|line| {
            let (sha, name) = line.split_once('\t')?;
            (name == refname).then_some(sha)
        });
        // A remote already past HEAD (an earlier push of this work, then more) refuses it; the
        // remote tip may be a commit this repository has never fetched, and then cannot contain HEAD.
        match remote_tip {
            Some(tip)
                if tip == head || (local.has_commit(tip)? && local.is_ancestor(&head, tip)?) =>
            {
                Ok(())
            }
            _ => Err(fail(refused)),
        }
    }
}

/// An object id as people read it: its first 12 digits.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// One commit object as git stores it.
struct RawCommit<'a> {
    id: &'a str,
    /// The header lines (a continuation line starts with a space).
    headers: &'a [u8],
    message: &'a [u8],
}

/// The commits in `git cat-file --batch`'s output: `<id> commit <size>`, the object, a newline.
fn raw_commits(mut batch: &[u8]) -> Result<Vec<RawCommit<'_>>> {
    let mut commits = Vec::new();
    while !batch.is_empty() {
        let end = batch
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| anyhow!("git cat-file --batch ended in a header"))?;
        let header = std::str::from_utf8(&batch[..end]).unwrap_or_default();
        let mut fields = header.split(' ');
        let (Some(id), Some("commit"), Some(size)) = (fields.next(), fields.next(), fields.next())
        else {
            bail!("git cat-file --batch said {header:?} of a commit");
        };
        let size: usize = size
            .parse()
            .map_err(|_| anyhow!("git cat-file --batch said {header:?} of a commit"))?;
        let object = batch
            .get(end + 1..end + 1 + size)
            .ok_or_else(|| anyhow!("git cat-file --batch cut commit {id} short"))?;
        let (headers, message) = match object.windows(2).position(|w| w == b"\n\n") {
            Some(at) => (&object[..at], &object[at + 2..]),
            None => (object, &b""[..]),
        };
        commits.push(RawCommit {
            id,
            headers,
            message,
        });
        batch = batch.get(end + 2 + size..).unwrap_or_default();
    }
    Ok(commits)
}

/// Why the forge may not read `commit`'s message as it is, if it may not.
fn message_refusal(commit: &RawCommit) -> Option<String> {
    let id = short(commit.id);
    // Every `encoding` header: a reader might take the first or the last.
    let other_encoding = commit
        .headers
        .split(|&b| b == b'\n')
        .filter_map(|line| line.strip_prefix(b"encoding "))
        .find(|named| !matches!(named.to_ascii_lowercase().as_slice(), b"utf-8" | b"utf8"));
    if let Some(encoding) = other_encoding {
        let named: String = String::from_utf8_lossy(encoding).chars().take(40).collect();
        return Some(format!(
            "the message of commit {id} is declared in the encoding {named:?}: the forge reads \
             the bytes, so write messages in UTF-8 with no other encoding \
             (`git -c i18n.commitEncoding=UTF-8 commit --amend`)"
        ));
    }
    if commit.message.contains(&0) {
        return Some(format!(
            "the message of commit {id} holds a NUL byte: write plain text messages"
        ));
    }
    let Ok(message) = std::str::from_utf8(commit.message) else {
        return Some(format!(
            "the message of commit {id} is not UTF-8: write messages in UTF-8 \
             (`git commit --amend`)"
        ));
    };
    let said = forge_text::closing_reference(message)?;
    let subject: String = message
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect();
    Some(format!(
        "the message of commit {id} ({subject:?}) says {said:?}: a closing keyword \
         before an issue reference closes that issue once the commit is merged. Reword \
         it without the keyword (`git commit --amend`, or `git rebase -i` for an \
         earlier commit); sandcastle's pull request says which issue it closes"
    ))
}

/// A full hexadecimal object id (SHA-1 or SHA-256).
fn is_object_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64)
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Branch names come from the planner and the config: refuse anything git could read as an option
/// or that is no valid branch.
pub fn check_branch_name(name: &str) -> Result<()> {
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

/// One git invocation's settings: which repository (always named, never discovered) and, for
/// commands that talk to the remote, who it authenticates as.
struct Git<'a> {
    git_dir: Option<&'a Path>,
    creds: Option<&'a Credentials>,
    /// A cap on git's address space (`RLIMIT_AS`), for git reading what a sandbox sent.
    address_space: Option<u64>,
}

impl<'a> Git<'a> {
    fn bare() -> Git<'static> {
        Git {
            git_dir: None,
            creds: None,
            address_space: None,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        // No hook runs, even one a future version of this file might let in.
        let low_speed_time = deadline::bound(TIMEOUT_VAR, LOW_SPEED_TIME)
            .as_secs()
            .to_string();
        let mut config: Vec<(&str, &str)> = vec![("core.hooksPath", "/dev/null")];
        if self.creds.is_some() {
            // An empty value resets the helper list: no inherited helper sees or stores the token.
            config.push(("credential.helper", ""));
            config.push(("credential.helper", CREDENTIAL_HELPER));
            // A forge that accepts the connection and then stalls is given up.
            config.push(("http.lowSpeedLimit", LOW_SPEED_LIMIT));
            config.push(("http.lowSpeedTime", &low_speed_time));
        }
        let mut cmd = Command::new("git");
        for var in REPOSITORY_VARS {
            cmd.env_remove(var);
        }
        match self.git_dir {
            Some(dir) => cmd.arg("--git-dir").arg(dir).current_dir(dir),
            // Run where no repository can be discovered.
            None => cmd.current_dir("/"),
        };
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
        if let Some(bytes) = self.address_space {
            let limit = rustix::process::Rlimit {
                current: Some(bytes),
                maximum: Some(bytes),
            };
            // SAFETY: between fork and exec only setrlimit runs, a plain system call that takes no
            // lock and allocates nothing.
            unsafe {
                cmd.pre_exec(move || {
                    rustix::process::setrlimit(rustix::process::Resource::As, limit)
                        .map_err(std::io::Error::from)
                });
            }
        }
        cmd
    }

    /// Runs git to its end, within `GIT_TIMEOUT` and [`MAX_GIT_OUTPUT_BYTES`].
    fn finish(&self, args: &[&str], what: &str) -> Result<Output> {
        self.finish_command(self.command(args), what)
    }

    fn finish_command(&self, mut command: Command, what: &str) -> Result<Output> {
        let limit = deadline::bound(TIMEOUT_VAR, GIT_TIMEOUT);
        let what = format!("git {what}");
        deadline::output_within(&mut command, limit, MAX_GIT_OUTPUT_BYTES, &what).map_err(|error| {
            match error.downcast_ref::<std::io::Error>() {
                Some(_) => anyhow!("cannot run git ({error}); install git"),
                None => error,
            }
        })
    }

    /// Runs git; on failure, a one-line error with what it was doing, where, and git's complaint.
    fn output(&self, args: &[&str], what: &str) -> Result<String> {
        let out = self.finish(args, what)?;
        let stdout = self.checked(out, what)?;
        Ok(String::from_utf8_lossy(&stdout).trim().to_string())
    }

    /// Runs git with the file `input` as its stdin; its output's bytes, or the error of `output`.
    fn bytes_from(&self, args: &[&str], input: &Path, what: &str) -> Result<Vec<u8>> {
        let mut command = self.command(args);
        let file = std::fs::File::open(input)
            .with_context(|| format!("cannot read {}", input.display()))?;
        command.stdin(file);
        let out = self.finish_command(command, what)?;
        self.checked(out, what)
    }

    /// How many NUL-ended records git prints, counted as they come: past `cap` git is stopped and
    /// `cap + 1` returned.
    fn count_nul(&self, args: &[&str], cap: u64, what: &str) -> Result<u64> {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| anyhow!("cannot run git ({e}); install git"))?;
        let watchdog = deadline::Watchdog::start(&child, deadline::bound(TIMEOUT_VAR, GIT_TIMEOUT));
        let mut stdout = child.stdout.take().expect("piped");
        let mut chunk = vec![0u8; 64 * 1024];
        let mut count = 0;
        while count <= cap {
            match stdout.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => count += chunk[..read].iter().filter(|&&b| b == 0).count() as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => bail!("cannot read git {what}'s output: {e}"),
            }
        }
        drop(stdout);
        if count > cap
            && let Some(group) = rustix::process::Pid::from_raw(child.id() as i32)
        {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let status = child.wait().context("cannot wait for git")?;
        if watchdog.finished() {
            bail!("git {what} did not finish in time and was stopped");
        }
        if count > cap {
            return Ok(cap + 1);
        }
        if !status.success() {
            bail!(
                "git {what} in {} failed ({status})",
                self.git_dir
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            );
        }
        Ok(count)
    }

    /// `out`'s stdout if git succeeded; else a one-line error with what it was doing, where, and
    /// git's complaint.
    fn checked(&self, out: Output, what: &str) -> Result<Vec<u8>> {
        if out.status.success() {
            return Ok(out.stdout);
        }
        let where_ = self
            .git_dir
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
            .finish(
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    &spec,
                ],
                "rev-parse",
            )?
            .status;
        Ok(status.success())
    }

    fn is_ancestor(&self, ancestor: &str, descendant: &str) -> Result<bool> {
        let out = self.finish(
            &["merge-base", "--is-ancestor", ancestor, descendant],
            "merge-base",
        )?;
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

/// The bytes of every file under `dir`, links not followed; what cannot be read counts nothing.
fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_usage(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub(crate) use sandcastle_testkit::git::Remote;
    use sandcastle_testkit::git::{Checkout, commit, git as fixture_git};

    /// A work repository of `branch` made from the fixture remote, `name` beside it.
    pub(crate) trait WorkRepoOf {
        fn repo(&self, name: &str, branch: &str) -> Result<WorkRepo>;
    }

    impl WorkRepoOf for Remote {
        fn repo(&self, name: &str, branch: &str) -> Result<WorkRepo> {
            WorkRepo::prepare(
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

    /// What a sandbox does: a checkout made from the seed bundle, commits, and what it hands out
    /// (a bundle of the new commits), imported into `repo`. Returns the new tip.
    fn agent_commits(repo: &WorkRepo, subjects: &[&str]) -> String {
        taken(hand_out(repo, subjects, &[]))
    }

    /// As [`agent_commits`], running `before` (git arguments) in the checkout first; what the
    /// import made of it.
    fn hand_out(repo: &WorkRepo, subjects: &[&str], before: &[&[&str]]) -> Imported {
        hand_out_with(repo, |dir| {
            for args in before {
                fixture_git(dir, args);
            }
            for subject in subjects {
                commit(dir, subject);
            }
        })
    }

    /// Why an import refused; a taken tip fails the test.
    fn refused(imported: Imported) -> String {
        match imported {
            Imported::Refused(why) => why,
            Imported::Tip(tip) => panic!("{tip} was taken"),
        }
    }

    /// What the import made of the checkout after `change` ran in it.
    fn hand_out_with(repo: &WorkRepo, change: impl FnOnce(&Path)) -> Imported {
        let seed = repo.scratch_file().unwrap();
        repo.seed_bundle(seed.path()).unwrap();
        let checkout = Checkout::from_bundle(seed.path(), &repo.branch);
        let known = repo.tip().unwrap();
        change(&checkout.path());
        let handed_out = repo.scratch_file().unwrap();
        checkout.hand_out(&known, handed_out.path());
        repo.import(handed_out.path()).unwrap()
    }

    /// The tip an import took; a refusal fails the test.
    pub(crate) fn taken(imported: Imported) -> String {
        match imported {
            Imported::Tip(tip) => tip,
            Imported::Refused(why) => panic!("refused: {why}"),
        }
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
    fn a_new_branch_starts_from_the_remote_base_in_a_bare_repository_of_our_own() {
        let remote = Remote::new();
        let repo = remote.repo("issue-1.git", "sandcastle/issue-1").unwrap();
        assert_eq!(Some(repo.tip().unwrap()), remote.tip("main"));
        assert!(repo.new_commits().unwrap().is_empty());
        let dir = remote.path("issue-1.git");
        assert_eq!(
            fixture_git(&dir, &["rev-parse", "--is-bare-repository"]),
            "true"
        );
        assert_eq!(fixture_git(&dir, &["config", REMOTE_KEY]), remote.url);
        assert!(
            fixture_git(&dir, &["remote"]).is_empty(),
            "no configured remote: pushes name the URL"
        );
    }

    #[test]
    fn the_agents_commits_are_imported_listed_pushed_and_resumed() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-2";
        let repo = remote.repo("a.git", branch).unwrap();
        let start = repo.tip().unwrap();
        let tip = agent_commits(&repo, &["first change", "second change"]);
        assert_eq!(repo.tip().unwrap(), tip);
        assert_eq!(
            repo.new_commits().unwrap(),
            ["first change", "second change"]
        );
        assert_eq!(
            repo.commits_since(&start).unwrap(),
            ["first change", "second change"]
        );
        assert!(repo.commits_since(&tip).unwrap().is_empty());
        let err = repo.commits_since("").unwrap_err().to_string();
        assert!(err.contains("no commit \"\" to list changes from"), "{err}");

        repo.push(&creds("unused-token"), &repo.tip().unwrap())
            .unwrap();
        assert_eq!(remote.tip(branch), Some(tip.clone()));

        // A fresh repository elsewhere picks the work up from the remote branch.
        let resumed = remote.repo("b.git", branch).unwrap();
        assert_eq!(resumed.tip().unwrap(), tip);
        assert_eq!(
            resumed.new_commits().unwrap(),
            ["first change", "second change"]
        );
    }

    /// A push goes first: a remote already past the commit (an earlier publish of the work, then
    /// more) refuses it, and that is success; a remote that went elsewhere is the push's error.
    #[test]
    fn a_push_the_remote_is_past_succeeds_and_one_it_diverged_from_fails() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-3";
        let repo = remote.repo("a.git", branch).unwrap();
        let first = agent_commits(&repo, &["first"]);
        let later = agent_commits(&repo, &["later"]);
        repo.push(&creds("unused-token"), &later).unwrap();
        let work_ref = format!("refs/heads/{branch}");
        fixture_git(&repo.git_dir, &["update-ref", &work_ref, &first]);

        repo.push(&creds("unused-token"), &first).unwrap();
        assert_eq!(
            remote.tip(branch),
            Some(later.clone()),
            "nothing moved back"
        );

        let diverged = agent_commits(&repo, &["diverged"]);
        let err = repo
            .push(&creds("unused-token"), &diverged)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("push of {branch} to")), "{err}");
        assert_eq!(remote.tip(branch), Some(later));
    }

    /// What a sandbox does, with `change` made to the agent's checkout: everything in it
    /// committed, handed out and imported into `repo`. Returns the new tip.
    fn agent_changes(repo: &WorkRepo, change: impl FnOnce(&Path)) -> String {
        let seed = repo.scratch_file().unwrap();
        repo.seed_bundle(seed.path()).unwrap();
        let checkout = Checkout::from_bundle(seed.path(), &repo.branch);
        let known = repo.tip().unwrap();
        change(&checkout.path());
        fixture_git(&checkout.path(), &["add", "--all"]);
        fixture_git(
            &checkout.path(),
            &["commit", "--quiet", "--allow-empty", "-m", "change"],
        );
        let handed_out = repo.scratch_file().unwrap();
        checkout.hand_out(&known, handed_out.path());
        taken(repo.import(handed_out.path()).unwrap())
    }

    /// Writes `content` to `path` under `dir`, making its folders.
    fn write(dir: &Path, path: &str, content: &str) {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }

    /// The main branch of `remote` moved on by a commit writing `files`, pushed from its seed.
    fn base_commits(remote: &Remote, files: &[&str]) -> String {
        let seed = remote.path("seed");
        for file in files {
            write(&seed, file, "base\n");
        }
        fixture_git(&seed, &["add", "--all"]);
        fixture_git(&seed, &["commit", "--quiet", "-m", "base moves"]);
        fixture_git(
            &seed,
            &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
        );
        fixture_git(&seed, &["rev-parse", "HEAD"])
    }

    /// Red-team finding: a retry starts at the held-back commit, kept unpushed in the work
    /// repository. The paths it would push are judged against the base, so the held-back workflow
    /// still counts once the retry adds a commit.
    #[test]
    fn a_retry_is_judged_against_the_base_not_where_it_started() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-20";
        let repo = remote.repo("a.git", branch).unwrap();
        let held_back = agent_changes(&repo, |dir| {
            write(dir, ".forgejo/workflows/evil.yml", "on: push\n");
            write(dir, "work.txt", "work\n");
        });
        let retry = remote.repo("a.git", branch).unwrap();
        assert_eq!(retry.tip().unwrap(), held_back, "the branch was kept");
        let retry = retry.starting_at(&held_back);
        agent_changes(&retry, |dir| write(dir, "more.txt", "more\n"));
        assert_eq!(
            retry.changed_paths().unwrap(),
            [".forgejo/workflows/evil.yml", "more.txt", "work.txt"]
        );
    }

    /// The base moves on with workflow changes of its own and the work merges it (a keep-green
    /// round): only the work's own paths count. So when the work merges an older commit of the
    /// base, which gives it two merge bases with the base.
    #[test]
    fn what_a_merge_of_the_base_brings_in_is_not_the_works() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-21";
        let repo = remote.repo("a.git", branch).unwrap();
        agent_changes(&repo, |dir| write(dir, "own.txt", "own\n"));
        base_commits(&remote, &[".github/workflows/ci.yml", "base.txt"]);
        let url = remote.url.clone();
        let merge_base = |dir: &Path, commit: &str| {
            fixture_git(dir, &["fetch", "--quiet", &url, "main"]);
            fixture_git(dir, &["merge", "--quiet", "--no-edit", commit]);
        };
        // A round starts from the work's head, as a keep-green round does.
        let again = |start: &str| remote.repo("a.git", branch).unwrap().starting_at(start);
        let repo = again(&repo.tip().unwrap());
        // Behind the base, the work does not remove what the base added since it started.
        assert_eq!(repo.changed_paths().unwrap(), ["own.txt"]);
        agent_changes(&repo, |dir| merge_base(dir, "FETCH_HEAD"));
        assert_eq!(repo.changed_paths().unwrap(), ["own.txt"]);

        // The base merges a side branch that changed a workflow; the work merges only that side
        // commit. Its merge bases with the base are the base's tip it had and the side commit.
        let seed = remote.path("seed");
        let tip = fixture_git(&seed, &["rev-parse", "HEAD"]);
        fixture_git(&seed, &["checkout", "--quiet", "--detach", "HEAD~1"]);
        write(&seed, ".forgejo/workflows/side.yml", "on: push\n");
        fixture_git(&seed, &["add", "--all"]);
        fixture_git(&seed, &["commit", "--quiet", "-m", "side"]);
        let side = fixture_git(&seed, &["rev-parse", "HEAD"]);
        fixture_git(&seed, &["checkout", "--quiet", "--detach", &tip]);
        fixture_git(&seed, &["merge", "--quiet", "--no-edit", &side]);
        fixture_git(
            &seed,
            &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
        );
        let repo = again(&repo.tip().unwrap());
        agent_changes(&repo, |dir| {
            merge_base(dir, "FETCH_HEAD^2");
            write(dir, "more.txt", "more\n");
        });
        let bases = repo
            .git()
            .output(
                &[
                    "merge-base",
                    "--all",
                    &repo.fetched_base(),
                    "refs/heads/sandcastle/issue-21",
                ],
                "merge-base",
            )
            .unwrap();
        assert_eq!(bases.lines().count(), 2, "{bases}");
        assert_eq!(repo.changed_paths().unwrap(), ["more.txt", "own.txt"]);
    }

    /// A rename is both its names, a path turned into a link or a submodule is listed, and what
    /// stands where a workflow folder is counts as a workflow.
    #[test]
    fn every_kind_of_change_to_a_path_is_listed() {
        let remote = Remote::new();
        base_commits(&remote, &[".forgejo/workflows/ci.yml", "ci.sh"]);
        let repo = remote.repo("a.git", "sandcastle/issue-22").unwrap();
        agent_changes(&repo, |dir| {
            std::fs::create_dir(dir.join("tools")).unwrap();
            fixture_git(dir, &["mv", "ci.sh", "tools/ci.sh"]);
            std::fs::remove_file(dir.join(".forgejo/workflows/ci.yml")).unwrap();
            std::os::unix::fs::symlink("../../tools/ci.yml", dir.join(".forgejo/workflows/ci.yml"))
                .unwrap();
            // A submodule not checked out: its folder empty, its commit in the index only.
            std::fs::create_dir_all(dir.join(".gitea/workflows")).unwrap();
            let gitlink = format!("160000,{},.gitea/workflows", "1".repeat(40));
            fixture_git(dir, &["update-index", "--add", "--cacheinfo", &gitlink]);
        });
        let changed = repo.changed_paths().unwrap();
        assert_eq!(
            changed,
            [
                ".forgejo/workflows/ci.yml",
                ".gitea/workflows",
                "ci.sh",
                "tools/ci.sh"
            ]
        );
        assert_eq!(
            crate::touches::Touches::of(&changed).workflows,
            [".forgejo/workflows/ci.yml", ".gitea/workflows"]
        );
    }

    /// A branch on the forge whose history shares nothing with the base: every path of it counts.
    #[test]
    fn with_no_history_in_common_every_path_counts() {
        let remote = Remote::new();
        let seed = remote.path("seed");
        fixture_git(&seed, &["checkout", "--quiet", "--orphan", "unrelated"]);
        fixture_git(&seed, &["rm", "--quiet", "-r", "--cached", "."]);
        write(&seed, ".github/workflows/x.yml", "on: push\n");
        fixture_git(&seed, &["add", ".github"]);
        fixture_git(&seed, &["commit", "--quiet", "-m", "unrelated"]);
        fixture_git(
            &seed,
            &[
                "push",
                "--quiet",
                "origin",
                "HEAD:refs/heads/sandcastle/issue-23",
            ],
        );
        let repo = remote.repo("a.git", "sandcastle/issue-23").unwrap();
        assert_eq!(repo.changed_paths().unwrap(), [".github/workflows/x.yml"]);
    }

    #[test]
    fn an_import_is_a_bundle_or_a_commit_the_repository_has_and_nothing_else() {
        let remote = Remote::new();
        let repo = remote.repo("a.git", "sandcastle/issue-3").unwrap();
        let start = repo.tip().unwrap();
        let first = agent_commits(&repo, &["one"]);
        let file = repo.scratch_file().unwrap();

        // Nothing new: the sandbox names the tip it already had.
        std::fs::write(file.path(), format!("{first}\n")).unwrap();
        assert_eq!(
            repo.import(file.path()).unwrap(),
            Imported::Tip(first.clone())
        );
        // A rewind to a commit the repository has is a rewrite: refused.
        std::fs::write(file.path(), format!("{start}\n")).unwrap();
        assert!(matches!(
            repo.import(file.path()).unwrap(),
            Imported::Refused(_)
        ));
        assert_eq!(repo.tip().unwrap(), first);

        for (content, says) in [
            (
                "0123456789abcdef0123456789abcdef01234567\n".to_string(),
                "sent no commits",
            ),
            (
                "../../etc/passwd".to_string(),
                "neither a bundle nor a commit id",
            ),
            (String::new(), "neither a bundle nor a commit id"),
            (
                "# v2 git bundle\nnot really\n".to_string(),
                "fetch of the agent's commits",
            ),
        ] {
            std::fs::write(file.path(), &content).unwrap();
            let err = repo.import(file.path()).unwrap_err().to_string();
            assert!(err.contains(says), "{content:?}: {err}");
            assert!(!err.contains('\n'), "{err:?}");
            assert_eq!(repo.tip().unwrap(), first, "the branch is untouched");
        }
    }

    /// A closing keyword in a new commit's message, a commit that does not descend from the work's
    /// start, and another forge branch's commit are each refused, and the branch stays; an
    /// amended message is taken.
    #[test]
    fn an_import_refuses_closing_keywords_foreign_history_and_other_branches() {
        let remote = Remote::new();
        let seed = remote.path("seed");
        fixture_git(&seed, &["checkout", "--quiet", "-b", "maintainers-wip"]);
        let other = commit(&seed, "unreviewed");
        fixture_git(&seed, &["push", "--quiet", "origin", "maintainers-wip"]);
        let repo = remote.repo("r.git", "sandcastle/issue-1").unwrap();
        let start = repo.tip().unwrap();
        let repo = repo.starting_at(&start);

        let why = refused(hand_out(&repo, &["ok", "Fixes #2"], &[]));
        assert!(why.contains("says \"Fixes #2\""), "{why}");
        assert_eq!(repo.tip().unwrap(), start, "the branch stayed");
        let why = refused(hand_out(
            &repo,
            &["x"],
            &[&[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "y\n\ncloses alice/demo#9",
            ]],
        ));
        assert!(why.contains("closes alice/demo#9"), "{why}");

        let why = refused(hand_out(
            &repo,
            &["rootless"],
            &[&["checkout", "-q", "--orphan", "fresh"]],
        ));
        assert!(
            why.contains("does not descend from the commit this work started from"),
            "{why}"
        );

        let file = repo.scratch_file().unwrap();
        std::fs::write(file.path(), format!("{other}\n")).unwrap();
        let why = refused(repo.import(file.path()).unwrap());
        assert!(
            why.contains("1 of the commits handed out are another branch's"),
            "{why}"
        );
        assert_eq!(repo.tip().unwrap(), start);

        let tip = agent_commits(&repo, &["Fix the paging (see #2)"]);
        assert_eq!(repo.tip().unwrap(), tip);
    }

    /// A message whose `encoding` header is not UTF-8 is refused even though `git log` would show
    /// it re-encoded to noise: the forge reads its bytes. So is a message that is not UTF-8.
    #[test]
    fn an_import_refuses_messages_in_another_encoding() {
        let remote = Remote::new();
        let repo = remote.repo("r.git", "sandcastle/issue-1").unwrap();
        let start = repo.tip().unwrap();
        let repo = repo.starting_at(&start);

        let why = refused(hand_out(
            &repo,
            &[],
            &[&[
                "-c",
                "i18n.commitEncoding=IBM037",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "Fixes #7",
            ]],
        ));
        assert!(why.contains("IBM037"), "{why}");
        assert!(why.contains("UTF-8"), "{why}");
        assert!(!why.contains('\n'), "{why:?}");
        assert_eq!(repo.tip().unwrap(), start, "the branch stayed");

        // Written raw: `git commit` would take the bytes as Latin-1 and convert them.
        let tree = fixture_git(
            &remote.path("r.git"),
            &["rev-parse", &format!("{start}^{{tree}}")],
        );
        let who = "Agent <agent@localhost> 1700000000 +0000";
        let raw = remote.path("latin1-commit");
        let mut object =
            format!("tree {tree}\nparent {start}\nauthor {who}\ncommitter {who}\n\n").into_bytes();
        object.extend(b"Caf\xe9 au lait\n");
        std::fs::write(&raw, object).unwrap();
        let raw = raw.to_str().unwrap();
        let id = fixture_git(&remote.path("seed"), &["hash-object", "-t", "commit", raw]);
        let why = refused(hand_out(
            &repo,
            &[],
            &[
                &["hash-object", "-w", "-t", "commit", raw],
                &["update-ref", "HEAD", &id],
            ],
        ));
        assert!(why.contains("not UTF-8"), "{why}");

        // An explicit UTF-8 header is no other encoding.
        taken(hand_out(
            &repo,
            &[],
            &[&[
                "-c",
                "i18n.commitEncoding=utf8",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "Caf\u{e9} (see #7)",
            ]],
        ));
    }

    /// Commits the forge holds only under a pull request (`refs/pull/N/head`) or a tag are another
    /// branch's: handed out as the agent's own, they are refused.
    #[test]
    fn an_import_refuses_commits_of_pull_requests_and_tags() {
        let remote = Remote::new();
        let seed = remote.path("seed");
        fixture_git(&seed, &["checkout", "--quiet", "-b", "contributor"]);
        commit(&seed, "someone else's pull request");
        fixture_git(
            &seed,
            &["push", "--quiet", "origin", "HEAD:refs/pull/1/head"],
        );
        fixture_git(
            &seed,
            &["checkout", "--quiet", "-b", "released", "origin/main"],
        );
        commit(&seed, "only in a release");
        fixture_git(&seed, &["tag", "-a", "-m", "v1", "v1"]);
        fixture_git(&seed, &["push", "--quiet", "origin", "refs/tags/v1"]);
        let repo = remote.repo("r.git", "sandcastle/issue-1").unwrap();
        let start = repo.tip().unwrap();
        let repo = repo.starting_at(&start);

        for (what, forge_ref) in [
            ("pull request", "refs/pull/1/head"),
            ("tag", "refs/tags/v1"),
        ] {
            let fetch = ["fetch", "--quiet", &remote.url, forge_ref];
            let why = refused(hand_out(
                &repo,
                &["built on it"],
                &[&fetch, &["reset", "--quiet", "--hard", "FETCH_HEAD"]],
            ));
            assert!(
                why.contains("1 of the commits handed out are another branch's"),
                "{what}: {why}"
            );
            assert_eq!(repo.tip().unwrap(), start, "the branch stayed");
        }

        // The work's own commits, pushed, then held only by its closed pull request's ref (the
        // branch deleted): what the work branch holds is no other's, and the work goes on.
        let branch = "sandcastle/issue-2";
        let repo = remote.repo("own.git", branch).unwrap();
        let pushed = agent_commits(&repo, &["pushed once"]);
        repo.push(&creds("unused-token"), &pushed).unwrap();
        let bare = remote.path("remote.git");
        fixture_git(&bare, &["update-ref", "refs/pull/2/head", &pushed]);
        fixture_git(
            &bare,
            &["update-ref", "-d", &format!("refs/heads/{branch}")],
        );
        let again = remote.repo("own.git", branch).unwrap();
        assert_eq!(again.tip().unwrap(), pushed);
        agent_commits(&again, &["more work"]);
    }

    /// A change of more than `MAX_CHANGED_PATHS` paths is refused at import, counted as git
    /// prints them; one path fewer is taken.
    #[test]
    fn an_import_refuses_a_change_of_too_many_paths() {
        let remote = Remote::new();
        let repo = remote.repo("r.git", "sandcastle/issue-1").unwrap();
        let start = repo.tip().unwrap();
        let repo = repo.starting_at(&start);
        let many = |paths: u64| {
            format!(
                "blob=$(echo x | git hash-object -w --stdin) && seq 1 {paths} | \
                 sed \"s/^/100644 $blob\tf/\" | git update-index --index-info && \
                 git -c user.name=T -c user.email=t@localhost commit -q -m 'Many files'"
            )
        };
        let in_checkout = |script: String| {
            move |dir: &Path| {
                let status = Command::new("sh")
                    .args(["-c", &script])
                    .current_dir(dir)
                    .status()
                    .unwrap();
                assert!(status.success());
            }
        };
        let why = refused(hand_out_with(
            &repo,
            in_checkout(many(MAX_CHANGED_PATHS + 1)),
        ));
        assert!(
            why.contains(&format!("changes more than {MAX_CHANGED_PATHS} paths")),
            "{why}"
        );
        assert_eq!(repo.tip().unwrap(), start, "the branch stayed");
        taken(hand_out_with(&repo, in_checkout(many(MAX_CHANGED_PATHS))));
    }

    /// The subjects listed for a pull request are agent text: the newest `MAX_SUBJECTS`, oldest
    /// first, each cut by git.
    #[test]
    fn the_subjects_listed_are_bounded_in_number_and_length() {
        let remote = Remote::new();
        let repo = remote.repo("r.git", "sandcastle/issue-1").unwrap();
        let start = repo.tip().unwrap();
        let repo = repo.starting_at(&start);
        let script = format!(
            "for n in $(seq 1 {}); do git -c user.name=T -c user.email=t@localhost commit -q \
             --allow-empty -m \"Step $n $(printf 'x%.0s' $(seq 1 300))\"; done",
            MAX_SUBJECTS + 20
        );
        taken(hand_out_with(&repo, |dir| {
            let status = Command::new("sh")
                .args(["-c", &script])
                .current_dir(dir)
                .status()
                .unwrap();
            assert!(status.success());
        }));
        let subjects = repo.commits_since(&start).unwrap();
        assert_eq!(subjects.len(), MAX_SUBJECTS);
        assert!(subjects[0].starts_with("Step 21 x"), "{}", subjects[0]);
        assert!(subjects[MAX_SUBJECTS - 1].starts_with(&format!("Step {} x", MAX_SUBJECTS + 20)));
        for subject in &subjects {
            assert!(subject.chars().count() <= MAX_SUBJECT_COLUMNS, "{subject}");
            assert!(subject.ends_with(".."), "{subject}");
        }
    }

    /// History the host took in is only added to: an amend, a rebase (here: a branch forced back
    /// to the start and built again, which still descends from the start) or a rewind is refused
    /// with what to do instead, and the branch stays; building on top is taken.
    #[test]
    fn an_import_that_rewrites_what_was_taken_in_is_refused() {
        let remote = Remote::new();
        let repo = remote.repo("r.git", "sandcastle/issue-7").unwrap();
        let start = repo.tip().unwrap();
        let repo = repo.starting_at(&start);
        let first = agent_commits(&repo, &["first"]);

        let why = refused(hand_out(
            &repo,
            &[],
            &[&["commit", "-q", "--amend", "-m", "first, amended"]],
        ));
        assert!(
            why.contains(&format!("does not build on {}", short(&first)))
                && why.contains(&format!("`git reset --hard {}`", short(&first))),
            "{why}"
        );
        assert!(!why.contains('\n'), "{why:?}");
        assert_eq!(repo.tip().unwrap(), first, "the branch stayed");
        let why = refused(hand_out(
            &repo,
            &["second, on the start again"],
            &[&["reset", "-q", "--hard", &start]],
        ));
        assert!(why.contains("never rewritten"), "{why}");
        assert_eq!(repo.tip().unwrap(), first);

        let second = agent_commits(&repo, &["second, on top"]);
        assert_eq!(repo.tip().unwrap(), second);
    }

    /// A push names the commit the caller checked: while the branch is elsewhere nothing is
    /// pushed; at it, exactly that commit reaches the remote.
    #[test]
    fn a_push_sends_only_the_commit_it_was_given_and_only_at_the_tip() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-8";
        let repo = remote.repo("a.git", branch).unwrap();
        let gated = agent_commits(&repo, &["gated"]);
        let later = agent_commits(&repo, &["not gated"]);
        let err = repo
            .push(&creds("unused-token"), &gated)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "is at {}, not at {}, the commit to be pushed",
                short(&later),
                short(&gated)
            )),
            "{err}"
        );
        assert_eq!(remote.tip(branch), None, "nothing was pushed");
        repo.push(&creds("unused-token"), &later).unwrap();
        assert_eq!(remote.tip(branch), Some(later));
    }

    /// An attempt's local branch is pushed as its issue's branch, never under its own name; its
    /// diff against the base is what it changed, cut at the bound it is given.
    #[test]
    fn an_attempt_is_pushed_as_its_issues_branch_and_diffs_against_the_base() {
        let remote = Remote::new();
        let repo = remote
            .repo("a.git", "sandcastle/issue-8-b")
            .unwrap()
            .publishing_as("sandcastle/issue-8")
            .unwrap();
        assert_eq!(repo.published_branch(), "sandcastle/issue-8");
        let tip = agent_commits(&repo, &["attempt b"]);
        repo.push(&creds("unused-token"), &tip).unwrap();
        assert_eq!(remote.tip("sandcastle/issue-8"), Some(tip));
        assert_eq!(remote.tip("sandcastle/issue-8-b"), None);

        let (diff, cut) = repo.diff_against_base(1 << 20).unwrap();
        assert!(!cut && diff.contains("diff --git"), "{diff}");
        let (cut_diff, cut) = repo.diff_against_base(12).unwrap();
        assert!(cut && diff.starts_with(&cut_diff) && cut_diff.len() <= 12);

        let other = remote.repo("b.git", "sandcastle/issue-9-a").unwrap();
        assert!(other.publishing_as("bad..name").is_err());
    }

    #[test]
    fn pushing_what_the_remote_already_has_sends_nothing() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-3";
        let repo = remote.repo("a.git", branch).unwrap();
        agent_commits(&repo, &["change"]);
        repo.push(&creds("unused-token"), &repo.tip().unwrap())
            .unwrap();
        // From now on the remote refuses every push: a second push must not try.
        let hook = remote.path("remote.git/hooks/pre-receive");
        std::fs::write(&hook, "#!/bin/sh\necho refused by test >&2\nexit 1\n").unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        repo.push(&creds("unused-token"), &repo.tip().unwrap())
            .unwrap();

        // The branch behind the remote tip: the remote already contains it.
        let ahead = remote.repo("b.git", branch).unwrap();
        agent_commits(&ahead, &["later change"]);
        std::fs::remove_file(&hook).unwrap();
        ahead
            .push(&creds("unused-token"), &ahead.tip().unwrap())
            .unwrap();
        std::fs::write(&hook, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let again = remote.repo("a.git", branch).unwrap();
        again
            .push(&creds("unused-token"), &again.tip().unwrap())
            .unwrap();

        // And a push that is needed fails while the hook refuses.
        agent_commits(&again, &["refused change"]);
        assert!(
            again
                .push(&creds("unused-token"), &again.tip().unwrap())
                .is_err()
        );
    }

    #[test]
    fn local_commits_not_yet_pushed_survive_a_restart() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-4";
        // Never pushed: the remote has no branch at all.
        let repo = remote.repo("a.git", branch).unwrap();
        let unpushed = agent_commits(&repo, &["unpushed work"]);
        let again = remote.repo("a.git", branch).unwrap();
        assert_eq!(again.tip().unwrap(), unpushed);

        // Pushed once, then more local work: the local branch is ahead of origin.
        again
            .push(&creds("unused-token"), &again.tip().unwrap())
            .unwrap();
        let ahead = agent_commits(&again, &["more unpushed work"]);
        let resumed = remote.repo("a.git", branch).unwrap();
        assert_eq!(resumed.tip().unwrap(), ahead);
        assert_eq!(
            resumed.new_commits().unwrap(),
            ["unpushed work", "more unpushed work"]
        );
    }

    #[test]
    fn an_existing_repository_moves_forward_to_the_remote_branch() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-5";
        let repo = remote.repo("a.git", branch).unwrap();
        agent_commits(&repo, &["one"]);
        repo.push(&creds("unused-token"), &repo.tip().unwrap())
            .unwrap();
        let other = remote.repo("b.git", branch).unwrap();
        let newer = agent_commits(&other, &["two"]);
        other
            .push(&creds("unused-token"), &other.tip().unwrap())
            .unwrap();

        let again = remote.repo("a.git", branch).unwrap();
        assert_eq!(again.tip().unwrap(), newer);
    }

    #[test]
    fn diverged_branches_are_an_error_not_a_silent_reset() {
        let remote = Remote::new();
        let branch = "sandcastle/issue-6";
        let repo = remote.repo("a.git", branch).unwrap();
        agent_commits(&repo, &["one"]);
        repo.push(&creds("unused-token"), &repo.tip().unwrap())
            .unwrap();
        let other = remote.repo("b.git", branch).unwrap();
        agent_commits(&other, &["theirs"]);
        other
            .push(&creds("unused-token"), &other.tip().unwrap())
            .unwrap();
        let ours = agent_commits(&repo, &["ours"]);

        let err = remote.repo("a.git", branch).err().unwrap().to_string();
        assert!(err.contains("have diverged"), "{err}");
        assert_eq!(repo.tip().unwrap(), ours, "local work kept");

        let err = repo
            .push(&creds("unused-token"), &repo.tip().unwrap())
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
        remote.repo("a.git", "sandcastle/issue-7").unwrap();
        let wrong_origin = WorkRepo::prepare(
            &remote.path("a.git"),
            &other.url,
            &creds("tok"),
            "sandcastle/issue-7",
            "main",
        );
        let err = wrong_origin.err().unwrap().to_string();
        assert!(err.contains("is a repository of"), "{err}");

        std::fs::create_dir(remote.path("junk")).unwrap();
        std::fs::write(remote.path("junk/file"), "x").unwrap();
        let junk = remote
            .repo("junk", "sandcastle/issue-7")
            .err()
            .unwrap()
            .to_string();
        assert!(
            junk.contains("is not a sandcastle work repository"),
            "{junk}"
        );

        let no_base = WorkRepo::prepare(
            &remote.path("c.git"),
            &remote.url,
            &creds("tok"),
            "x",
            "develop",
        );
        let err = no_base.err().unwrap().to_string();
        assert!(err.contains("the remote has no branch develop"), "{err}");
        assert!(!remote.path("c.git").exists(), "nothing half-written");

        for name in ["-f", "a..b", "with space", ""] {
            let err = remote.repo("d.git", name).err().unwrap().to_string();
            assert!(err.contains("is not a valid git branch name"), "{err}");
        }

        let unreachable = WorkRepo::prepare(
            &remote.path("e.git"),
            "file:///nonexistent/repo.git",
            &creds("tok"),
            "x",
            "main",
        );
        let err = unreachable.err().unwrap().to_string();
        assert!(
            err.starts_with("git fetch from file:///nonexistent/repo.git in /"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err:?}");
        assert!(!remote.path("e.git").exists(), "nothing half-written");
    }

    #[test]
    fn credentials_come_from_the_environment_and_replace_inherited_helpers() {
        let remote = Remote::new();
        remote.repo("a.git", "sandcastle/issue-8").unwrap();
        let dir = remote.path("a.git");
        // A helper configured in the repository must not see or store the token.
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
        let git = Git {
            git_dir: Some(&dir),
            creds: Some(&creds),
            address_space: None,
        };

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

        let repo =
            WorkRepo::prepare(&tmp.path().join("a.git"), &url, &bot, branch, "main").unwrap();
        assert!(!fixture_git(&tmp.path().join("a.git"), &["config", "--list"]).contains(&token));
        let pushed = agent_commits(&repo, &["over http"]);
        repo.push(&bot, &repo.tip().unwrap()).unwrap();
        let tip = || fixture_git(&bare, &["rev-parse", &format!("refs/heads/{branch}")]);
        assert_eq!(tip(), pushed);
        let pushes = recorded_pushes(&forge, 1);
        assert_eq!(pushes.len(), 1);
        assert_eq!(pushes[0].user, "sandcastle-bot");
        assert_eq!(pushes[0].updates[0].name, format!("refs/heads/{branch}"));
        assert_eq!(pushes[0].updates[0].new.as_deref(), Some(pushed.as_str()));

        // Already there: nothing is sent. The forge refuses this token (see below), so a push
        // that was attempted would fail.
        repo.push(&creds("wrong-token-0123456789"), &repo.tip().unwrap())
            .unwrap();
        assert_eq!(forge.push_count(), 1);

        // A fresh repository over HTTP resumes from the pushed branch.
        let resumed =
            WorkRepo::prepare(&tmp.path().join("b.git"), &url, &bot, branch, "main").unwrap();
        assert_eq!(resumed.tip().unwrap(), pushed);

        // A rejected token: one line naming branch and remote, never the token.
        agent_commits(&repo, &["refused"]);
        let wrong = creds("wrong-token-0123456789");
        let err = repo
            .push(&wrong, &repo.tip().unwrap())
            .unwrap_err()
            .to_string();
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
