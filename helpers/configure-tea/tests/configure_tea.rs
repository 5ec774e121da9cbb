//! `configure-tea` run as the sandbox runs it, with the written file read back as tea reads it.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_yaml_ng::Value;

const TOKEN: &str = "f0e1d2c3b4a5968778695a4b3c2d1e0f00112233";

struct Sandbox {
    home: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn config_path(&self) -> PathBuf {
        self.home.path().join(".config/tea/config.yml")
    }

    /// Runs configure-tea with only the given environment (plus HOME).
    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_configure-tea"))
            .args(args)
            .env_clear()
            .env("HOME", self.home.path())
            .envs(env.iter().copied())
            .output()
            .expect("configure-tea runs")
    }

    fn configure(&self, url: &str, user: &str) -> Output {
        let output = self.run(
            &[
                ("FORGEJO_TOKEN", TOKEN),
                ("FORGEJO_USER", user),
                ("SANDCASTLE_FORGE_URL", url),
            ],
            &[],
        );
        assert!(
            output.status.success(),
            "stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    fn written(&self) -> Value {
        serde_yaml_ng::from_str(&std::fs::read_to_string(self.config_path()).unwrap()).unwrap()
    }
}

fn logins(config: &Value) -> &Vec<Value> {
    config["logins"].as_sequence().expect("logins is a list")
}

#[test]
fn writes_every_field_tea_reads() {
    let sandbox = Sandbox::new();
    let output = sandbox.configure("forge.example.dev", "agent-bot");
    let config = sandbox.written();
    let [login] = logins(&config).as_slice() else {
        panic!("one login: {config:?}")
    };
    assert_eq!(login["name"], "forge.example.dev");
    assert_eq!(login["url"], "https://forge.example.dev");
    assert_eq!(login["token"], TOKEN);
    assert_eq!(login["default"], true);
    assert_eq!(login["ssh_host"], "forge.example.dev");
    assert_eq!(login["ssh_key"], "");
    assert_eq!(login["insecure"], false);
    assert_eq!(login["ssh_certificate_principal"], "");
    assert_eq!(login["ssh_agent"], false);
    assert_eq!(login["ssh_key_agent_pub"], "");
    assert_eq!(login["version_check"], false);
    assert_eq!(login["user"], "agent-bot");
    assert!(
        login["created"]
            .as_i64()
            .is_some_and(|created| created > 1_600_000_000)
    );
    assert_eq!(
        login.as_mapping().unwrap().len(),
        13,
        "exactly tea's fields: {login:?}"
    );
    assert_eq!(config["preferences"]["editor"], false);
    assert_eq!(config["preferences"]["flag_defaults"]["remote"], "");

    let mode = std::fs::metadata(sandbox.config_path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // No temporary file is left next to it.
    let entries = std::fs::read_dir(sandbox.config_path().parent().unwrap())
        .unwrap()
        .count();
    assert_eq!(entries, 1);

    let printed = [output.stdout, output.stderr].concat();
    assert!(
        !String::from_utf8_lossy(&printed).contains(TOKEN),
        "the token is never printed"
    );
}

#[test]
fn a_forge_on_a_port_gets_its_url_and_host_as_the_login() {
    let sandbox = Sandbox::new();
    sandbox.configure("http://127.0.0.1:3000/", "agent");
    let config = sandbox.written();
    let login = &logins(&config)[0];
    assert_eq!(login["name"], "127.0.0.1:3000");
    assert_eq!(login["url"], "http://127.0.0.1:3000");
    assert_eq!(login["ssh_host"], "127.0.0.1");
}

#[test]
fn url_flag_and_name_flag() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(
        &[
            ("FORGEJO_TOKEN", TOKEN),
            ("FORGEJO_USER", "agent"),
            ("SANDCASTLE_FORGE_URL", "ignored.example"),
        ],
        &["--url", "localhost:3443", "--name", "sandbox"],
    );
    assert!(output.status.success());
    let config = sandbox.written();
    assert_eq!(logins(&config)[0]["name"], "sandbox");
    assert_eq!(logins(&config)[0]["url"], "https://localhost:3443");
}

#[test]
fn xdg_config_home_wins_over_home() {
    let sandbox = Sandbox::new();
    let xdg = tempfile::tempdir().unwrap();
    let output = sandbox.run(
        &[
            ("FORGEJO_TOKEN", TOKEN),
            ("FORGEJO_USER", "agent"),
            ("SANDCASTLE_FORGE_URL", "forge.example.dev"),
            ("XDG_CONFIG_HOME", xdg.path().to_str().unwrap()),
        ],
        &[],
    );
    assert!(output.status.success());
    assert!(xdg.path().join("tea/config.yml").is_file());
    assert!(!sandbox.config_path().exists());
}

#[test]
fn running_twice_gives_the_same_file() {
    let sandbox = Sandbox::new();
    sandbox.configure("forge.example.dev", "agent");
    let first = std::fs::read(sandbox.config_path()).unwrap();
    // Let the clock move so a fresh `created` would show.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    sandbox.configure("forge.example.dev", "agent");
    assert_eq!(std::fs::read(sandbox.config_path()).unwrap(), first);
}

#[test]
fn keeps_other_logins_and_preferences_and_replaces_the_same_name() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.config_path().parent().unwrap()).unwrap();
    std::fs::write(
        sandbox.config_path(),
        "logins:\n\
         - name: codeberg.org\n  url: https://codeberg.org\n  token: other\n  default: true\n  user: me\n  auth_method: oauth\n\
         - name: FORGE.example.dev\n  url: https://forge.example.dev\n  token: stale\n  default: false\n  user: old\n  created: 1700000000\n\
         preferences:\n  editor: true\n  flag_defaults:\n    remote: upstream\n",
    )
    .unwrap();
    sandbox.configure("forge.example.dev", "agent");
    let config = sandbox.written();
    let logins = logins(&config);
    assert_eq!(logins.len(), 2, "{config:?}");

    let other = &logins[0];
    assert_eq!(other["name"], "codeberg.org");
    assert_eq!(other["token"], "other");
    assert_eq!(
        other["auth_method"], "oauth",
        "fields tea added later survive"
    );
    assert_eq!(
        other["default"], false,
        "tea takes the first default login; ours must win"
    );

    let ours = &logins[1];
    assert_eq!(ours["name"], "forge.example.dev");
    assert_eq!(ours["token"], TOKEN);
    assert_eq!(ours["user"], "agent");
    assert_eq!(ours["default"], true);
    assert_eq!(ours["created"], 1_700_000_000);

    assert_eq!(config["preferences"]["editor"], true);
    assert_eq!(config["preferences"]["flag_defaults"]["remote"], "upstream");
}

/// tea picks the login whose `url` prefixes the remote's URL, then takes the remote path's last
/// two segments, minus `.git`, as the repo slug (modules/context: contextFromLocalRepo).
fn tea_slug<'a>(login_url: &str, remote: &'a str) -> Option<&'a str> {
    let path = remote.strip_prefix(login_url)?;
    // The prefix must end at a path boundary, or `https://forge.dev` would match `https://forge.dev.evil`.
    let path = path.strip_prefix('/')?;
    Some(path.strip_suffix(".git").unwrap_or(path))
}

#[test]
fn the_login_url_prefixes_the_clone_url_so_tea_derives_the_slug() {
    for (forge, clone_url) in [
        (
            "forge.example.dev",
            "https://forge.example.dev/acme/widget.git",
        ),
        (
            "https://forge.example.dev/",
            "https://forge.example.dev/acme/widget.git",
        ),
        (
            "Forge.Example.dev",
            "https://forge.example.dev/acme/widget.git",
        ),
        (
            "http://127.0.0.1:3000",
            "http://127.0.0.1:3000/acme/widget.git",
        ),
        ("127.0.0.1:3000", "https://127.0.0.1:3000/acme/widget.git"),
        (
            "https://forge.example.dev:443",
            "https://forge.example.dev/acme/widget.git",
        ),
    ] {
        let sandbox = Sandbox::new();
        sandbox.configure(forge, "agent");
        let config = sandbox.written();
        let url = logins(&config)[0]["url"].as_str().unwrap().to_string();
        assert_eq!(
            tea_slug(&url, clone_url),
            Some("acme/widget"),
            "forge {forge:?}: login url {url:?}"
        );
    }
}

#[test]
fn a_missing_variable_names_it_and_writes_nothing() {
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[
                ("FORGEJO_USER", "agent"),
                ("SANDCASTLE_FORGE_URL", "forge.example.dev"),
            ],
            "configure-tea: FORGEJO_TOKEN is not set; set it to the forge API token\n",
        ),
        (
            &[
                ("FORGEJO_TOKEN", TOKEN),
                ("SANDCASTLE_FORGE_URL", "forge.example.dev"),
            ],
            "configure-tea: FORGEJO_USER is not set; set it to the forge user name\n",
        ),
        (
            &[
                ("FORGEJO_TOKEN", ""),
                ("FORGEJO_USER", "agent"),
                ("SANDCASTLE_FORGE_URL", "forge.example.dev"),
            ],
            "configure-tea: FORGEJO_TOKEN is empty; set it to the forge API token\n",
        ),
        (
            &[("FORGEJO_TOKEN", TOKEN), ("FORGEJO_USER", "agent")],
            "configure-tea: no forge URL; pass --url https://forge.example.dev or set SANDCASTLE_FORGE_URL\n",
        ),
        (
            &[
                ("FORGEJO_TOKEN", TOKEN),
                ("FORGEJO_USER", "agent"),
                ("SANDCASTLE_FORGE_URL", "ssh://forge.example.dev"),
            ],
            "configure-tea: the forge URL \"ssh://forge.example.dev\" has the scheme `ssh`; only https:// and \
             http:// forges are supported, e.g. \"https://forge.example.dev\"\n",
        ),
    ];
    for (env, expected) in cases {
        let sandbox = Sandbox::new();
        let output = sandbox.run(env, &[]);
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(String::from_utf8(output.stderr).unwrap(), expected);
        assert!(output.stdout.is_empty());
        assert!(
            !sandbox.config_path().exists(),
            "no file written for {env:?}"
        );
    }
}

#[test]
fn an_unreadable_existing_file_is_left_alone() {
    let sandbox = Sandbox::new();
    let path = sandbox.config_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "logins: [unclosed\n").unwrap();
    let output = sandbox.run(
        &[
            ("FORGEJO_TOKEN", TOKEN),
            ("FORGEJO_USER", "agent"),
            ("SANDCASTLE_FORGE_URL", "forge.example.dev"),
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("fix or remove the file"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(Path::new(&path)).unwrap(),
        "logins: [unclosed\n"
    );
}
