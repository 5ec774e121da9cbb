//! Which paths of a change act beyond the review of its pull request: what CI runs (workflow files
//! and local actions), which the forge runs with the repository's secrets as soon as the branch is
//! pushed, and files the operator's host later runs (sandcastle's own config and prompts, Nix
//! files, direnv's `.envrc`).
//!
//! Read from the paths a push would change against the base branch (`WorkRepo::changed_paths`),
//! never from what the agent says it changed. Names are matched case-insensitively: Forgejo reads
//! its folders case-sensitively, but a runner's or an operator's checkout on a case-insensitive
//! file system (macOS, Windows) reads `.Forgejo/Actions` as `.forgejo/actions`.

/// What CI runs: the folders Forgejo Actions reads workflows from, and the folders of local
/// composite actions that a workflow's `uses: ./…` names.
const WORKFLOW_DIRS: [&str; 6] = [
    ".forgejo/workflows",
    ".gitea/workflows",
    ".github/workflows",
    ".forgejo/actions",
    ".gitea/actions",
    ".github/actions",
];

/// A local action's definition wherever it is: `uses: ./any/folder` reads `any/folder/action.yml`.
const ACTION_FILES: [&str; 2] = ["action.yml", "action.yaml"];

/// What the host runs: `.sandcastle/**` at the top, and anywhere a file named `.envrc` (direnv)
/// or `flake.lock`, or ending in `.nix` (a flake and every file it imports).
const HOST_RUN_DIR: &str = ".sandcastle";
const HOST_RUN_FILES: [&str; 2] = [".envrc", "flake.lock"];
const HOST_RUN_SUFFIX: &str = ".nix";

/// A change's paths that need a person's eyes, each list sorted.
#[derive(Debug, Default, PartialEq)]
pub struct Touches {
    /// What CI runs, or a path that stands where a folder of it is (`.forgejo` made a link, a
    /// file or a submodule): never pushed without `[publish] allowWorkflowChanges`.
    pub workflows: Vec<String>,
    /// Files sandcastle's host runs: pushed, and listed in the pull request.
    pub host_run: Vec<String>,
}

impl Touches {
    pub fn of(paths: &[String]) -> Touches {
        let mut touches = Touches::default();
        for path in paths {
            let folded = fold_case(path);
            let name = folded.rsplit('/').next().unwrap_or_default();
            if WORKFLOW_DIRS.iter().any(|dir| within(&folded, dir)) || ACTION_FILES.contains(&name)
            {
                touches.workflows.push(path.clone());
            } else if within(&folded, HOST_RUN_DIR)
                || HOST_RUN_FILES.contains(&name)
                || name.ends_with(HOST_RUN_SUFFIX)
            {
                touches.host_run.push(path.clone());
            }
        }
        touches
    }
}

/// `path` as a case-insensitive file system compares it: upper then lower case, so that letters
/// which only fold to ASCII (`ſ`, the Kelvin sign) meet their ASCII twins.
fn fold_case(path: &str) -> String {
    path.to_uppercase().to_lowercase()
}

/// Whether `path` is `dir`, inside it, or one of its ancestors (which replaces it as a whole).
fn within(path: &str, dir: &str) -> bool {
    let under = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    under(path, dir) || under(dir, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn workflow_and_host_run_paths_are_told_apart() {
        let paths = paths(&[
            ".forgejo",
            ".gitea/workflows/ci.yaml",
            ".github/workflows",
            ".github/workflows-not/x",
            ".sandcastle/config.toml",
            ".sandcastle2/x",
            "flake.lock",
            "flake.nix",
            "src/main.rs",
        ]);
        assert_eq!(
            Touches::of(&paths),
            Touches {
                workflows: vec![
                    ".forgejo".into(),
                    ".gitea/workflows/ci.yaml".into(),
                    ".github/workflows".into()
                ],
                host_run: vec![
                    ".sandcastle/config.toml".into(),
                    "flake.lock".into(),
                    "flake.nix".into()
                ],
            }
        );
    }

    /// A local composite action runs in CI as a workflow does: its folders, and an `action.yml`
    /// wherever `uses: ./…` may name it.
    #[test]
    fn local_actions_count_as_workflows() {
        let paths = paths(&[
            ".forgejo/actions/setup/action.yml",
            ".gitea/actions/x.sh",
            ".github/actions",
            "tools/build/action.yaml",
            "action.yml",
            "docs/actions.md",
            "src/action.yml.txt",
        ]);
        let touches = Touches::of(&paths);
        assert_eq!(
            touches.workflows,
            paths[..5].to_vec(),
            "everything but the last two"
        );
        assert!(touches.host_run.is_empty());
    }

    /// direnv's `.envrc` and every Nix file, wherever they are, are run on the host.
    #[test]
    fn envrc_and_every_nix_file_count_as_host_run() {
        let paths = paths(&[
            ".envrc",
            "nix/package.nix",
            "sub/.envrc",
            "sub/flake.lock",
            "sub/flake.nix",
            "default.nix",
            "envrc",
            "nix/README.md",
            "src/unix.rs",
        ]);
        let touches = Touches::of(&paths);
        assert_eq!(touches.host_run, paths[..6].to_vec());
        assert!(touches.workflows.is_empty());
    }

    /// On a case-insensitive checkout `.Forgejo/Workflows` is `.forgejo/workflows`; letters that
    /// fold to ASCII count too. The path is reported as the change spells it.
    #[test]
    fn names_match_whatever_their_case() {
        let paths = paths(&[
            ".Forgejo/Workflows/evil.yml",
            ".GITHUB/ACTIONS/a/Action.YML",
            ".SANDCASTLE/config.toml",
            "Flake.NIX",
            ".\u{17f}andcastle/prompts/implement.md",
        ]);
        let touches = Touches::of(&paths);
        assert_eq!(touches.workflows, paths[..2].to_vec());
        assert_eq!(touches.host_run, paths[2..].to_vec());
    }
}
