//! Which paths of a change act beyond the review of its pull request: CI workflow files, which the
//! forge runs with the repository's secrets as soon as the branch is pushed, and files the
//! operator's host later runs (sandcastle's own config and prompts, the flake).
//!
//! Read from the tree of the commit to be pushed (`WorkRepo::changed_paths`), never from what the
//! agent says it changed.

/// The directories Forgejo Actions reads workflows from.
const WORKFLOW_DIRS: [&str; 3] = [
    ".forgejo/workflows",
    ".gitea/workflows",
    ".github/workflows",
];

/// What the host runs: `.sandcastle/**` and the flake.
const HOST_RUN_DIR: &str = ".sandcastle";
const HOST_RUN_FILES: [&str; 2] = ["flake.nix", "flake.lock"];

/// A change's paths that need a person's eyes, each list sorted.
#[derive(Debug, Default, PartialEq)]
pub struct Touches {
    /// CI workflow files, or a path that stands where a workflow directory is (`.forgejo` made a
    /// link or a file): never pushed without `[publish] allowWorkflowChanges`.
    pub workflows: Vec<String>,
    /// Files sandcastle's host runs: pushed, and listed in the pull request.
    pub host_run: Vec<String>,
}

impl Touches {
    pub fn of(paths: &[String]) -> Touches {
        let mut touches = Touches::default();
        for path in paths {
            if WORKFLOW_DIRS.iter().any(|dir| within(path, dir)) {
                touches.workflows.push(path.clone());
            } else if within(path, HOST_RUN_DIR) || HOST_RUN_FILES.contains(&path.as_str()) {
                touches.host_run.push(path.clone());
            }
        }
        touches
    }
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

    #[test]
    fn workflow_and_host_run_paths_are_told_apart() {
        let paths: Vec<String> = [
            ".forgejo",
            ".forgejo/actions/x.yml",
            ".gitea/workflows/ci.yaml",
            ".github/workflows",
            ".github/workflows-not/x",
            ".sandcastle/config.toml",
            ".sandcastle2/x",
            "flake.lock",
            "flake.nix",
            "src/flake.nix",
            "src/main.rs",
        ]
        .map(str::to_string)
        .to_vec();
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
}
