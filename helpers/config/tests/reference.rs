//! The user guide's configuration reference is what `load-config --reference` prints now, so the
//! docs and the config reader cannot disagree.
use std::path::Path;
use std::process::Command;

#[test]
fn the_guides_configuration_reference_is_generated_from_the_keys() {
    let output = Command::new(env!("CARGO_BIN_EXE_load-config"))
        .arg("--reference")
        .output()
        .expect("load-config runs");
    assert!(output.status.success(), "{output:?}");
    let generated = String::from_utf8(output.stdout).unwrap();
    let page = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/guide/src/configuration-reference.md");
    let written = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        written == generated,
        "{} is not what `load-config --reference` prints now; regenerate it from the repository \
         root: {}",
        page.display(),
        sandcastle_config::reference::REGENERATE
    );
}

#[test]
fn the_reference_has_a_row_for_every_key_the_reader_knows() {
    let reference = sandcastle_config::reference::markdown();
    // Every key the resolved config prints is in the reference, under its table.
    let config = sandcastle_config::parse(
        Path::new("/project/.sandcastle/config.toml"),
        "repo = \"acme/widget\"\nforgeHost = \"forge.example.dev\"\n",
    )
    .unwrap();
    let json = serde_json::to_value(&config).unwrap();
    for (name, value) in json.as_object().unwrap() {
        match value.as_object() {
            Some(table) => {
                let section = &reference[reference
                    .find(&format!("## `[{name}]`"))
                    .unwrap_or_else(|| panic!("no section for [{name}]"))..];
                let section = &section[..section[3..]
                    .find("\n## ")
                    .map_or(section.len(), |end| end + 3)];
                for key in table.keys() {
                    assert!(
                        section.contains(&format!("\n| `{key}` |")),
                        "no row for [{name}] {key}"
                    );
                }
            }
            None if name == "forgeUrl" => {} // resolved from forgeHost, not a key
            None => assert!(
                reference.contains(&format!("\n| `{name}` |")),
                "no row for {name}"
            ),
        }
    }
}
