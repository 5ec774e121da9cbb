//! The world a forge test starts from: a fake forge with `alice/demo`, and a project directory
//! whose `.sandcastle/config.toml` points at it.
use fake_forge::FakeForge;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

pub const OWNER: &str = "alice";
pub const NAME: &str = "demo";
pub const REPO: &str = "alice/demo";

pub struct World {
    pub forge: FakeForge,
    /// `alice`'s token, who owns the repository.
    pub token: String,
    pub project: TempDir,
}

impl World {
    /// The forge with `alice/demo` (default branch `main`, one commit), and the project's config:
    /// `repo` and `forgeHost`, then `config`.
    pub fn new(config: &str) -> World {
        let forge = FakeForge::start();
        let token = forge.add_user(OWNER);
        forge
            .create_repo(OWNER, NAME, "main")
            .expect("repo created");
        let project = tempfile::tempdir().unwrap();
        let world = World {
            forge,
            token,
            project,
        };
        std::fs::create_dir_all(world.config_path().parent().unwrap()).unwrap();
        std::fs::write(
            world.config_path(),
            format!(
                "repo = \"{REPO}\"\nforgeHost = \"{}\"\n{config}\n",
                world.forge.url()
            ),
        )
        .unwrap();
        world
    }

    /// `.sandcastle/config.toml` in the project.
    pub fn config_path(&self) -> PathBuf {
        self.project.path().join(".sandcastle/config.toml")
    }
}

/// The `sandcastle` binary `bin` run in `project` with `args`, with no forge or model variable
/// inherited from the test's environment.
pub fn sandcastle(bin: &str, project: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(bin);
    command.args(args).current_dir(project);
    for key in [
        "FORGEJO_TOKEN",
        "FORGEJO_USER",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ] {
        command.env_remove(key);
    }
    command
}
