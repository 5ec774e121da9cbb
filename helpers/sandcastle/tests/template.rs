//! A consumer's first hour, as far as this machine allows offline: the quick
//! start's `nix registry add sandcastle <url>` and `nix flake init -t sandcastle#rust` into an empty
//! directory, the config it writes loaded, then `sandcastle doctor` in it against the test forge,
//! with the template's placeholder `sandcastle` input reported and every other line honest.
//!
//! Needs `nix` (skipped with SANDCASTLE_SKIP_NIX_TESTS=1, as inside a Nix build) and, for the
//! image lines, a Docker engine with the test image (SANDCASTLE_SKIP_DOCKER_TESTS=1 skips those
//! assertions).
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_forge::FakeForge;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn image() -> String {
    std::env::var("SANDCASTLE_TEST_IMAGE").unwrap_or_else(|_| "sandcastle-test:latest".to_string())
}

/// `nix` with flakes on, its user registry under `home`, nothing fetched (the global registry,
/// which Nix would download, is an empty file).
fn nix(home: &Path, dir: &Path, args: &[&str]) -> Output {
    let global = home.join("global-registry.json");
    std::fs::write(&global, r#"{"flakes":[],"version":2}"#).unwrap();
    let output = Command::new("nix")
        .args(["--extra-experimental-features", "nix-command flakes"])
        .args(["--option", "substituters", ""])
        .arg("--option")
        .arg("flake-registry")
        .arg(&global)
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .output()
        .expect("nix runs (install Nix, or set SANDCASTLE_SKIP_NIX_TESTS=1)");
    assert!(
        output.status.success(),
        "nix {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn doctor(project: &Path) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sandcastle"));
    command.args(["doctor"]).current_dir(project);
    for key in [
        "FORGEJO_TOKEN",
        "FORGEJO_USER",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
    ] {
        command.env_remove(key);
    }
    let output = command.output().expect("sandcastle runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    eprintln!("--- sandcastle doctor\n{stdout}");
    assert!(!output.status.success(), "a failed check fails doctor");
    stdout
}

/// The line of `check`, which must start with `status`.
fn line<'a>(stdout: &'a str, status: &str, check: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(status) && l.split_whitespace().nth(1) == Some(check))
        .unwrap_or_else(|| panic!("no `{status} {check}` line:\n{stdout}"))
}

#[test]
fn a_new_project_from_the_template_up_to_doctor() {
    if std::env::var("SANDCASTLE_SKIP_NIX_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: SANDCASTLE_SKIP_NIX_TESTS=1");
        return;
    }
    let docker = std::env::var("SANDCASTLE_SKIP_DOCKER_TESTS").as_deref() != Ok("1");
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let dir = project.path();

    // The quick start's commands, with this repository as sandcastle's address.
    let url = format!(
        "git+file://{}",
        repository().canonicalize().unwrap().display()
    );
    nix(home.path(), dir, &["registry", "add", "sandcastle", &url]);
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status();
    assert!(git.unwrap().success());
    nix(
        home.path(),
        dir,
        &["flake", "init", "-t", "sandcastle#rust"],
    );
    for file in [
        "flake.nix",
        ".sandcastle/config.toml",
        ".sandcastle/.env.example",
        ".sandcastle/CODING_STANDARDS.md",
        ".forgejo/workflows/triage.yml",
    ] {
        assert!(dir.join(file).is_file(), "{file} written");
    }
    let config_path = dir.join(".sandcastle/config.toml");
    let config = sandcastle_config::load(&config_path).expect("the template's config loads");
    assert_eq!(config.image_name, "sandcastle:name");

    // Point the config at the test forge, as the quick start says to (repo and forgeHost), and the
    // image at the test image; the flake's `sandcastle` input stays the placeholder.
    let forge = FakeForge::start();
    let token = forge.add_user("alice");
    forge.create_repo("alice", "widget", "main").unwrap();
    let text = std::fs::read_to_string(&config_path)
        .unwrap()
        .replace("repo = \"owner/name\"", "repo = \"alice/widget\"")
        .replace(
            "forgeHost = \"forge.example.dev\"",
            &format!("forgeHost = \"{}\"", forge.url()),
        )
        .replace(
            "# imageName = \"sandcastle:name\"",
            &format!("imageName = \"{}\"", image()),
        );
    std::fs::write(&config_path, text).unwrap();

    let stdout = doctor(dir);
    line(&stdout, "ok", "config");
    let missing = line(&stdout, "FAIL", ".env");
    assert!(missing.contains("is missing"), "{missing}");
    assert!(
        !stdout.contains("ok    .env"),
        "a missing .env is not ok:\n{stdout}"
    );

    std::fs::write(
        dir.join(".sandcastle/.env"),
        format!("ANTHROPIC_API_KEY=sk-test-template\nFORGEJO_USER=alice\nFORGEJO_TOKEN={token}\n"),
    )
    .unwrap();
    let stdout = doctor(dir);
    let template = line(&stdout, "FAIL", "template");
    assert!(
        template.contains(
            "flake.nix still has the placeholder `git+https://forge.example.dev/sandcastle/sandcastle`"
        ) && template.contains("nix flake lock"),
        "{template}"
    );
    assert!(
        !template.contains("config.toml"),
        "the config's placeholders are gone: {template}"
    );
    for check in [
        "config",
        ".env",
        "secrets",
        "host",
        "questions",
        "forge",
        "token",
    ] {
        line(&stdout, "ok", check);
    }
    line(&stdout, "FAIL", "labels");
    line(&stdout, "ok", "sandboxes");
    let secrets = line(&stdout, "ok", "secrets");
    assert!(
        secrets.contains("sandboxes get no variable of .sandcastle/.env;"),
        "{secrets}"
    );
    if docker {
        // Without a forge login for sandboxes, the prompts never call tea.
        for check in ["docker", "image", "programs", "tools"] {
            line(&stdout, "ok", check);
        }
    }
    assert!(!stdout.contains(&token), "the token is never printed");

    // With one, tea is needed, and the test image has none: said plainly, with the fix.
    let reader =
        forge.add_user_with_scopes("reader", &["read:issue", "read:repository", "read:user"]);
    std::fs::write(
        dir.join(".sandcastle/.env"),
        format!(
            "ANTHROPIC_API_KEY=sk-test-template\nFORGEJO_USER=alice\nFORGEJO_TOKEN={token}\nFORGEJO_AGENT_TOKEN={reader}\n"
        ),
    )
    .unwrap();
    let stdout = doctor(dir);
    let sandboxes = line(&stdout, "ok", "sandboxes");
    assert!(
        sandboxes.contains("tea reads the forge as reader"),
        "{sandboxes}"
    );
    if docker {
        let tools = line(&stdout, "FAIL", "tools");
        assert!(tools.contains("lacks tea"), "{tools}");
        assert!(
            tools.contains("nix run .#sandcastleImage | docker load"),
            "{tools}"
        );
    }
    assert!(!stdout.contains(&token) && !stdout.contains(&reader));

    // A question command that is not an executable file is said, with the fix.
    let config = std::fs::read_to_string(&config_path).unwrap();
    let with_command = |argv: &str| {
        std::fs::write(
            &config_path,
            // The template's own `[questions]` table gets the keys.
            config.replacen(
                "\n[questions]\n",
                &format!("\n[questions]\nhandlers = [\"forge\", \"command\"]\ncommand = {argv}\n"),
                1,
            ),
        )
        .unwrap();
        doctor(dir)
    };
    let stdout = with_command(r#"["sh", ".sandcastle/ask-by-file.sh"]"#);
    let questions = line(&stdout, "ok", "questions");
    assert!(
        questions.contains("handlers forge, command") && questions.contains("command /"),
        "{questions}"
    );
    let stdout = with_command(r#"[".sandcastle/no-such-bridge"]"#);
    let questions = line(&stdout, "FAIL", "questions");
    assert!(
        questions.contains("`.sandcastle/no-such-bridge`, which is not an executable file"),
        "{questions}"
    );
}
