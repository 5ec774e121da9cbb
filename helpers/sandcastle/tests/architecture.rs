//! The module maps (docs/design/modules.md, linked from ARCHITECTURE.md) and the source agree:
//! every module file of the machinery (`helpers/sandcastle-core/src`) and of the orchestrator
//! (`helpers/sandcastle/src`) has a row in its crate's map, and every row names a file that exists.
//! Test-only files (`tests.rs`, `docker_tests.rs`, `sandbox/test_support.rs`) are not modules of
//! the map.
use std::collections::BTreeSet;
use std::path::Path;

/// Each map's heading, and the crate whose `src` it maps.
const MAPS: [(&str, &str); 2] = [
    ("## The machinery", "../sandcastle-core"),
    ("## The orchestrator's modules", "."),
];

/// Files compiled only for tests.
const TEST_ONLY: [&str; 1] = ["sandbox/test_support.rs"];

/// The `*.rs` names in the first column of the table under `heading`.
fn mapped_modules(maps: &str, heading: &str) -> BTreeSet<String> {
    let start = maps
        .find(heading)
        .unwrap_or_else(|| panic!("docs/design/modules.md has no heading {heading:?}"));
    let section = &maps[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    section
        .lines()
        .filter_map(|line| line.strip_prefix('|'))
        .filter_map(|row| row.split('|').next())
        .flat_map(|first_column| first_column.split('`').skip(1).step_by(2))
        .filter(|name| name.ends_with(".rs"))
        .map(str::to_string)
        .collect()
}

fn module_files(dir: &Path, src: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            module_files(&path, src, found);
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy();
        let relative = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".rs")
            && !name.ends_with("tests.rs")
            && !TEST_ONLY.contains(&relative.as_str())
        {
            found.insert(relative);
        }
    }
}

#[test]
fn the_module_maps_name_every_module_and_only_modules() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let maps = std::fs::read_to_string(crate_dir.join("../../docs/design/modules.md")).unwrap();
    for (heading, dir) in MAPS {
        let mapped = mapped_modules(&maps, heading);
        let src = crate_dir.join(dir).join("src");
        let mut files = BTreeSet::new();
        module_files(&src, &src, &mut files);

        let unmapped: Vec<_> = files.difference(&mapped).collect();
        let gone: Vec<_> = mapped.difference(&files).collect();
        assert!(
            unmapped.is_empty() && gone.is_empty(),
            "docs/design/modules.md's module map and {} differ:\n  \
             modules without a row: {unmapped:?}\n  rows without a module: {gone:?}\n\
             add or remove the rows in the table under {heading:?}",
            src.display()
        );
    }
}

#[test]
fn the_map_reader_finds_the_names_in_the_first_column_only() {
    let text = "# A\n## The orchestrator's modules\n| module | job |\n| --- | --- |\n\
                | `a.rs`, `b/c.rs` | uses `d.rs` |\n| `e.rs` | x |\n## Next\n| `f.rs` | y |\n";
    let names: Vec<_> = mapped_modules(text, "## The orchestrator's modules")
        .into_iter()
        .collect();
    assert_eq!(names, ["a.rs", "b/c.rs", "e.rs"]);
}

/// Crates that install a `log` or `tracing` logger. None may be in the build: bollard logs each
/// request's body at debug level, and an exec's body holds the sandbox's variables (the agent's
/// forge token among them), so a logger would put secrets where redaction never looks.
const LOGGERS: [&str; 8] = [
    "env_logger",
    "simple_logger",
    "fern",
    "log4rs",
    "flexi_logger",
    "pretty_env_logger",
    "tracing-subscriber",
    "tracing-log",
];

#[test]
fn no_logger_is_built_in() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lock = std::fs::read_to_string(crate_dir.join("../../Cargo.lock")).unwrap();
    let packages: BTreeSet<&str> = lock
        .lines()
        .filter_map(|line| line.strip_prefix("name = \""))
        .filter_map(|rest| rest.strip_suffix('"'))
        .collect();
    assert!(packages.contains("bollard"), "the lock file was read");
    let found: Vec<&str> = LOGGERS
        .into_iter()
        .filter(|logger| packages.contains(logger))
        .collect();
    assert!(found.is_empty(), "a logger is in the build: {found:?}");
}

/// The orchestrator never names the Engine API: only the machinery depends on its client, and the
/// orchestrator reaches sandboxes through `sandbox::Provider` (the machinery's engine calls are
/// not public, so the compiler refuses any other way); its own code runs no `docker` either.
#[test]
fn the_orchestrator_never_names_the_engine_api() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("bollard"),
        "helpers/sandcastle/Cargo.toml names bollard: reach sandboxes through sandbox::Provider"
    );
    let machinery =
        std::fs::read_to_string(crate_dir.join("../sandcastle-core/Cargo.toml")).unwrap();
    assert!(machinery.contains("bollard"), "the manifests were read");
    let mut files = BTreeSet::new();
    let src = crate_dir.join("src");
    module_files(&src, &src, &mut files);
    let naming: Vec<&String> = files
        .iter()
        .filter(|file| {
            let text = std::fs::read_to_string(src.join(file)).unwrap();
            // Test modules may look at what a run left with the `docker` CLI.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            code.contains("bollard") || code.contains("Command::new(\"docker\")")
        })
        .collect();
    assert!(naming.is_empty(), "the Engine API named in {naming:?}");
}
