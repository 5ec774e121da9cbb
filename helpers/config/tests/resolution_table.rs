//! The one table of config cases that `load-config` and `nix/imageArgsFromConfig.nix` are both
//! checked against: this test resolves each case with the real parser and writes the table to
//! `resolution-table.json`; `checks/nix/test.sh` evaluates every case with imageArgsFromConfig and
//! expects the same name, tag and forge URL, or the same error.
//!
//! The cases are what the image takes from the config: `repo` (for the default name), `imageName`
//! and `forgeHost` (for `SANDCASTLE_FORGE_URL`), and the order in which a config wrong in several of
//! them fails. A changed outcome rewrites the file and fails, so the change is seen and committed.
use std::path::Path;

use serde_json::{Value, json};

const FORGE: &str = "forgeHost = \"forge.example.dev\"\n";

/// Each case's TOML text, `forgeHost` left out (every case gets the same valid one).
const CASES: &[&str] = &[
    "repo = \"owner/name\"",
    "repo = \"Team/My_Widget.rs\"",
    "repo = \"owner/name\"\nimageName = \"agents\"",
    "repo = \"owner/name\"\nimageName = \"agents:v2\"",
    "repo = \"owner/name\"\nimageName = \"registry.example.dev:5000/team/agents:v2\"",
    "repo = \"owner/name\"\nimageName = \"registry.example.dev:5000/agents\"",
    "repo = \"owner/name\"\nimageName = \"localhost/agents:1.0\"",
    "repo = \"owner/name\"\nimageName = \"team/my-agents__x.y--z:V_1.0-rc\"",
    "repo = \"owner/name\"\nimageName = \"Agents:v1\"",
    "repo = \"owner/name\"\nimageName = \"agents:\"",
    "repo = \"owner/name\"\nimageName = \"agents:-v1\"",
    "repo = \"owner/name\"\nimageName = \"agents@sha256:0123\"",
    "repo = \"owner/name\"\nimageName = \"bad_host.example.dev/agents\"",
    "repo = \"owner/name\"\nimageName = \"team//agents\"",
    "repo = \"owner/name\"\nimageName = \"agents_:v1\"",
    "repo = \"owner/name\"\nimageName = \"my agents\"",
    "repo = \"owner/name\"\nimageName = \"\"",
    "repo = \"owner/name\"\nimageName = 5",
    "",
    "repo = 7",
    "repo = \"owner\"",
    "repo = \"owner/a/b\"",
    "repo = \"../name\"",
    "repo = \"owner/name.git\"",
    "repo = \"owner/.hidden\"",
    "repo = \"owner/-dash\"",
];

/// `forgeHost` lines (TOML), each after the same valid `repo`.
const FORGE_HOSTS: &[&str] = &[
    "forgeHost = \"forge.example.dev\"",
    "forgeHost = \"Forge.Example.DEV\"",
    "forgeHost = \"127.0.0.1:3000\"",
    "forgeHost = \"http://127.0.0.1:3000\"",
    "forgeHost = \"HTTP://Forge.Example.dev:8080/\"",
    "forgeHost = \"https://forge.example.dev:443\"",
    "forgeHost = \"forge.example.dev:443\"",
    "forgeHost = \"http://forge.example.dev:80/\"",
    "forgeHost = \"http://forge.example.dev:443\"",
    "forgeHost = \"https://forge.example.dev/\"",
    "forgeHost = \"forge.example.dev:03000\"",
    "forgeHost = \"[::1]:3000\"",
    "forgeHost = \"http://[FE80::1]\"",
    "forgeHost = \"https://forge.example.dev/forgejo\"",
    "forgeHost = \"forge.example.dev//\"",
    "forgeHost = \"forge.example.dev?x=1\"",
    "forgeHost = \"http://forge.example.dev#top\"",
    "forgeHost = \"ssh://forge.example.dev\"",
    "forgeHost = \"FTP://forge.example.dev\"",
    "forgeHost = \"://forge.example.dev\"",
    "forgeHost = \"https://https://forge.example.dev\"",
    "forgeHost = \"user@forge.example.dev\"",
    "forgeHost = \"forge .example.dev\"",
    "forgeHost = \" forge.example.dev\"",
    "forgeHost = \"forge.example.dev\\t\"",
    "forgeHost = \"forge.example.dev\\u00a0\"",
    "forgeHost = \"forge.example.dev\\u3000\"",
    "forgeHost = \"\"",
    "forgeHost = 3000",
    "forgeHost = \"forge_example.dev\"",
    "forgeHost = \"forge..example.dev\"",
    "forgeHost = \"-forge.example.dev\"",
    "forgeHost = \"forgé.example.dev\"",
    "forgeHost = \"forge.example.dev:\"",
    "forgeHost = \"forge.example.dev:0\"",
    "forgeHost = \"forge.example.dev:65536\"",
    "forgeHost = \"forge.example.dev:+3000\"",
    "forgeHost = \"forge.example.dev:30:00\"",
    "forgeHost = \"[::1\"",
    "forgeHost = \"[]:3000\"",
    "forgeHost = \"[::g]\"",
    "forgeHost = \"[::1]3000\"",
];

/// Whole configs wrong in more than one place (or missing `forgeHost`): load-config reports
/// `repo`, then `forgeHost`, then `imageName`.
const ORDER_CASES: &[&str] = &[
    "repo = \"owner/name\"\n",
    "imageName = \"Bad\"\n",
    "repo = \"owner\"\nforgeHost = \"ftp://forge.example.dev\"\n",
    "repo = \"owner/name.git\"\n",
    "repo = \"owner/name\"\nimageName = \"Bad\"\n",
    "repo = \"owner/name\"\nimageName = \"Bad\"\nforgeHost = \"forge.example.dev/path\"\n",
    "repo = \"owner/.hidden\"\nforgeHost = \"forge.example.dev:0\"\n",
];

fn long_tag_case() -> String {
    format!(
        "repo = \"owner/name\"\nimageName = \"agents:{}\"",
        "t".repeat(129)
    )
}

/// What `load-config` makes of one config: the image's name and tag and the forge URL, or its
/// error without the `file:line:column: ` prefix (Nix cannot say where in the file a value is).
fn resolve(text: String) -> Value {
    match sandcastle_config::parse(Path::new("config.toml"), &text) {
        Ok(config) => {
            let (name, tag) = sandcastle_config::image_name_and_tag(&config.image_name)
                .expect("load-config accepted the name");
            json!({ "config": text, "name": name, "tag": tag, "forgeUrl": config.forge_url })
        }
        Err(error) => {
            let message = error.0;
            let (location, why) = message.split_once(": ").expect("file:line:column: why");
            assert!(location.starts_with("config.toml:"), "{message}");
            json!({ "config": text, "error": why })
        }
    }
}

#[test]
fn the_table_nix_is_checked_against_is_current() {
    let mut configs: Vec<String> = CASES
        .iter()
        .map(|case| format!("{case}\n{FORGE}"))
        .collect();
    configs.push(format!("{}\n{FORGE}", long_tag_case()));
    configs.extend(
        FORGE_HOSTS
            .iter()
            .map(|host| format!("repo = \"owner/name\"\n{host}\n")),
    );
    configs.extend(ORDER_CASES.iter().map(|case| case.to_string()));
    let table: Vec<Value> = configs.into_iter().map(resolve).collect();
    assert!(table.iter().any(|case| case.get("name").is_some()));
    assert!(table.iter().any(|case| case.get("error").is_some()));
    let rendered = format!("{:#}\n", Value::Array(table));

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/resolution-table.json");
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    if written != rendered {
        std::fs::write(&path, &rendered).expect("write the table");
        panic!(
            "{} was out of date and is rewritten: review the change and commit it",
            path.display()
        );
    }
}
