//! No input makes `parse` panic, and every rejection is a single line that names the file.
use std::path::Path;

use proptest::prelude::*;

const KEYS: &[&str] = &[
    "repo",
    "forgeHost",
    "imageName",
    "maxIterations",
    "maxConcurrency",
    "idleTimeout",
    "pollInterval",
    "models",
    "commands",
    "sandbox",
    "planner",
    "prFixer",
    "check",
    "fmt",
    "network",
    "memory",
    "pidsLimit",
    "mounts",
    "turnTimeout",
    "runtime",
];

fn check(text: &str) {
    if let Err(error) = sandcastle_config::parse(Path::new("fuzz.toml"), text) {
        let message = error.to_string();
        assert!(message.starts_with("fuzz.toml:"), "{message}");
        assert!(!message.contains('\n'), "{message:?}");
    }
}

/// TOML values of every type, including the awkward ones: zero, negative and huge integers,
/// empty strings, non-ASCII, nested and empty arrays, inline tables.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        Just("0".to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        any::<bool>().prop_map(|b| b.to_string()),
        "[a-z0-9/:._ -]{0,12}".prop_map(|s| format!("\"{s}\"")),
        any::<String>().prop_map(|s| format!("{s:?}")),
        Just("\"owner/name\"".to_string()),
        Just("\"http://127.0.0.1:3000\"".to_string()),
        Just("\"10m\"".to_string()),
        Just("1979-05-27T07:32:00Z".to_string()),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..3).prop_map(|pairs| {
                let pairs: Vec<String> = pairs.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", pairs.join(", "))
            }),
        ]
    })
}

/// A line of a TOML-ish document: mostly valid assignments and headers, sometimes garbage.
fn line() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        prop::sample::select(KEYS).prop_map(str::to_string),
        "[a-zA-Z_]{1,14}"
    ];
    prop_oneof![
        4 => (key.clone(), value()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => key.clone().prop_map(|k| format!("[{k}]")),
        1 => key.prop_map(|k| format!("[[{k}]]")),
        1 => ".{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text);
    }

    #[test]
    fn arbitrary_toml_documents_never_panic(lines in prop::collection::vec(line(), 0..12)) {
        check(&lines.join("\n"));
    }

    #[test]
    fn near_valid_documents_never_panic(extra in prop::collection::vec(line(), 0..6)) {
        let text = format!("repo = \"a/b\"\nforgeHost = \"x\"\n{}", extra.join("\n"));
        check(&text);
    }
}
