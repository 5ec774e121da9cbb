//! `find` and `load` as the library's callers (`fmt`, `check`, `sandcastle`) use them.
use std::path::Path;

const MINIMAL: &str = "repo = \"acme/widget\"\nforgeHost = \"forge.example.dev\"\n";

fn write_config(root: &Path, text: &str) {
    std::fs::create_dir_all(root.join(".sandcastle")).unwrap();
    std::fs::write(root.join(sandcastle_config::DEFAULT_PATH), text).unwrap();
}

#[test]
fn find_walks_up_to_the_nearest_config() {
    let root = tempfile::tempdir().unwrap();
    let nested = root.path().join("crates/core/src");
    std::fs::create_dir_all(&nested).unwrap();
    write_config(root.path(), MINIMAL);
    let expected = root.path().join(".sandcastle/config.toml");
    assert_eq!(sandcastle_config::find(&nested), Some(expected.clone()));
    assert_eq!(sandcastle_config::find(root.path()), Some(expected));

    // A nearer config wins.
    write_config(&root.path().join("crates"), MINIMAL);
    assert_eq!(
        sandcastle_config::find(&nested),
        Some(root.path().join("crates/.sandcastle/config.toml"))
    );
}

#[test]
fn find_gives_none_without_a_config() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(sandcastle_config::find(root.path()), None);
}

#[test]
fn load_resolves_the_found_file() {
    let root = tempfile::tempdir().unwrap();
    write_config(root.path(), &format!("{MINIMAL}maxConcurrency = 4\n"));
    let path = sandcastle_config::find(root.path()).unwrap();
    let config = sandcastle_config::load(&path).unwrap();
    assert_eq!(config.repo, "acme/widget");
    assert_eq!(config.forge_url, "https://forge.example.dev");
    assert_eq!(config.max_concurrency, 4);
    assert_eq!(config.commands, sandcastle_config::Commands::default());
    assert_eq!(config.idle_timeout, std::time::Duration::from_secs(600));
}

#[test]
fn forge_url_is_the_same_normalization_load_config_uses() {
    assert_eq!(
        sandcastle_config::forge_url("127.0.0.1:3000").unwrap(),
        "https://127.0.0.1:3000"
    );
    assert_eq!(
        sandcastle_config::forge_url("http://Localhost:3000/").unwrap(),
        "http://localhost:3000"
    );
    assert!(
        sandcastle_config::forge_url("ftp://forge")
            .unwrap_err()
            .contains("scheme `ftp`")
    );
}
