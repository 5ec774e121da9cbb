//! The `load-config` binary through its contract: TOML in, JSON or a one-line error out.
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

const MINIMAL: &str = "repo = \"acme/widget\"\nforgeHost = \"forge.example.dev\"\n";

fn load_config(args: &[&Path], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_load-config"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("load-config runs")
}

/// Writes `toml` to `config.toml` in a fresh directory and runs `load-config` on it.
fn run(toml: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), toml).unwrap();
    load_config(&[Path::new("config.toml")], dir.path())
}

fn resolved(toml: &str) -> Value {
    let output = run(toml);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.stderr.is_empty());
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

/// The single stderr line of a rejected config, after checking exit status 2 and empty stdout.
fn rejected(toml: &str) -> String {
    let output = run(toml);
    assert_eq!(output.status.code(), Some(2), "config:\n{toml}");
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
    stderr.trim_end().to_string()
}

fn defaults() -> Value {
    json!({
        "repo": "acme/widget",
        "forgeHost": "forge.example.dev",
        "forgeUrl": "https://forge.example.dev",
        "imageName": "sandcastle:widget",
        "maxIterations": 5,
        "maxConcurrency": 1,
        "idleTimeout": "10m",
        "pollInterval": "1m",
        "models": {
            "planner": "claude-opus-4-8",
            "implementer": "claude-sonnet-4-6",
            "reviewer": "claude-opus-4-8",
            "prFixer": "claude-sonnet-4-6",
            "assessor": "claude-sonnet-4-6",
        },
        "commands": {
            "check": [
                ["cargo", "fmt", "--check"],
                ["cargo", "clippy", "--all-targets", "--", "-D", "warnings"],
                ["cargo", "test"],
            ],
            "fmt": [
                ["cargo", "clippy", "--fix", "--allow-dirty", "--allow-staged", "--", "-D", "warnings"],
                ["cargo", "fmt"],
            ],
        },
        "sandbox": { "network": "none", "memory": "4g", "pidsLimit": 1024, "mounts": [], "turnTimeout": "1h", "egress": [], "runtime": null },
        "review": { "enabled": true, "rounds": 2 },
        "implement": { "attempts": 1 },
        "budget": { "maxCostPerIssue": null, "maxCostPerRun": null },
        "cluster": { "id": null, "leaseTtl": "10m" },
        "questions": {
            "enabled": false,
            "pollBackoff": ["5m", "15m", "30m", "1h"],
            "timeout": "1day",
            "responders": [],
            "handlers": ["terminal", "forge"],
            "command": null,
        },
        "asks": { "enabled": false },
        "clarify": { "enabled": false, "threshold": 0.8, "maxRounds": 5, "timeout": "3m" },
        "autopilot": { "enabled": true, "ciRounds": 2, "conflictRounds": 2 },
        "publish": { "allowWorkflowChanges": false },
    })
}

#[test]
fn omitted_optional_fields_get_the_documented_defaults() {
    assert_eq!(resolved(MINIMAL), defaults());
}

#[test]
fn every_key_set_resolves_to_the_expected_object() {
    let toml = r#"
repo = "team/game-engine"
forgeHost = "http://127.0.0.1:3000/"
imageName = "registry.local/game:dev"
maxIterations = 12
maxConcurrency = 3
idleTimeout = "1h 30m"
pollInterval = "45s"

[models]
planner = "p"
implementer = "i"
reviewer = "r"
prFixer = "f"
assessor = "a"

[commands]
check = [["npm", "test"], ["npx", "eslint", "."]]
fmt = [["npx", "prettier", "--write", "."]]

[sandbox]
network = "host"
memory = "512m"
pidsLimit = 64
mounts = ["/srv/cache:/cache", "relative/dir:/data"]
turnTimeout = "45m"
egress = ["index.crates.io", "*.Example.com:8443"]
runtime = "runsc"

[review]
enabled = false
rounds = 3

[budget]
maxCostPerIssue = 2.5
maxCostPerRun = 20

[cluster]
id = "builder-2"
leaseTtl = "90s"
[questions]
pollBackoff = ["2s", "1m"]
timeout = "2h"
responders = ["bob", "carol.x"]
handlers = ["command", "forge"]
command = ["./ask.sh", "--to", "dev team"]
[asks]
enabled = true
[clarify]
enabled = false
threshold = 0.65
maxRounds = 2
timeout = "1m"
[autopilot]
enabled = false
ciRounds = 3
conflictRounds = 1
[implement]
attempts = 3
[publish]
allowWorkflowChanges = true
"#;
    assert_eq!(
        resolved(toml),
        json!({
            "repo": "team/game-engine",
            "forgeHost": "http://127.0.0.1:3000/",
            "forgeUrl": "http://127.0.0.1:3000",
            "imageName": "registry.local/game:dev",
            "maxIterations": 12,
            "maxConcurrency": 3,
            "idleTimeout": "1h 30m",
            "pollInterval": "45s",
            "models": { "planner": "p", "implementer": "i", "reviewer": "r", "prFixer": "f", "assessor": "a" },
            "commands": {
                "check": [["npm", "test"], ["npx", "eslint", "."]],
                "fmt": [["npx", "prettier", "--write", "."]],
            },
            "sandbox": {
                "network": "host",
                "memory": "512m",
                "pidsLimit": 64,
                "mounts": ["/srv/cache:/cache", "relative/dir:/data"],
                "turnTimeout": "45m",
                "egress": [
                    { "host": "index.crates.io", "port": null },
                    { "host": "*.example.com", "port": 8443 },
                ],
                "runtime": "runsc",
            },
            "review": { "enabled": false, "rounds": 3 },
            "implement": { "attempts": 3 },
            "budget": { "maxCostPerIssue": 2.5, "maxCostPerRun": 20.0 },
            "cluster": { "id": "builder-2", "leaseTtl": "1m 30s" },
            "questions": {
                "enabled": true,
                "pollBackoff": ["2s", "1m"],
                "timeout": "2h",
                "responders": ["bob", "carol.x"],
                "handlers": ["command", "forge"],
                "command": ["./ask.sh", "--to", "dev team"],
            },
            "asks": { "enabled": true },
            "clarify": { "enabled": false, "threshold": 0.65, "maxRounds": 2, "timeout": "1m" },
            "autopilot": { "enabled": false, "ciRounds": 3, "conflictRounds": 1 },
            "publish": { "allowWorkflowChanges": true },
        })
    );
}

#[test]
fn a_partial_table_keeps_the_defaults_for_the_keys_it_omits() {
    let toml = format!(
        "{MINIMAL}[models]\nimplementer = \"claude-haiku-4-5\"\n[sandbox]\nmemory = \"8g\"\n"
    );
    let mut expected = defaults();
    expected["models"]["implementer"] = json!("claude-haiku-4-5");
    expected["sandbox"]["memory"] = json!("8g");
    assert_eq!(resolved(&toml), expected);

    let toml = format!("{MINIMAL}[commands]\ncheck = [[\"true\"], [\"make\", \"test\"]]\n");
    let mut expected = defaults();
    expected["commands"]["check"] = json!([["true"], ["make", "test"]]);
    assert_eq!(resolved(&toml), expected);
}

/// Asking a person is opt-in: an empty `[questions]`, `[asks]` or `[clarify]` table turns it on,
/// and `enabled = false` in the table turns it off again.
#[test]
fn a_questions_asks_or_clarify_table_turns_asking_on() {
    let on = resolved(&format!("{MINIMAL}[questions]\n[asks]\n[clarify]\n"));
    assert_eq!(on["questions"]["enabled"], true);
    assert_eq!(on["asks"]["enabled"], true);
    assert_eq!(on["clarify"]["enabled"], true);
    assert_eq!(on["clarify"]["timeout"], "3m");
    let off = resolved(&format!(
        "{MINIMAL}[questions]\nenabled = false\n[asks]\nenabled = false\n[clarify]\nenabled = false\ntimeout = \"20s\"\n"
    ));
    assert_eq!(off["questions"]["enabled"], false);
    assert_eq!(off["asks"]["enabled"], false);
    assert_eq!(off["clarify"]["enabled"], false);
    assert_eq!(off["clarify"]["timeout"], "20s");
}

/// A new project from the Rust template asks people: its config turns all three on explicitly.
#[test]
fn the_rust_templates_config_turns_asking_on() {
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../templates/rust/.sandcastle/config.toml"),
    )
    .unwrap();
    let config = resolved(&template);
    assert_eq!(config["questions"]["enabled"], true);
    assert_eq!(config["asks"]["enabled"], true);
    assert_eq!(config["clarify"]["enabled"], true);
}

#[test]
fn inline_tables_and_dotted_keys_mean_the_same_as_sections() {
    let inline = format!("{MINIMAL}models = {{ reviewer = \"r\" }}\n");
    let dotted = format!("{MINIMAL}models.reviewer = \"r\"\n");
    let mut expected = defaults();
    expected["models"]["reviewer"] = json!("r");
    assert_eq!(resolved(&inline), expected);
    assert_eq!(resolved(&dotted), expected);
}

#[test]
fn forge_host_becomes_a_base_url() {
    for (forge_host, forge_url) in [
        ("forge.example.dev", "https://forge.example.dev"),
        ("Forge.Example.DEV", "https://forge.example.dev"),
        ("127.0.0.1:3000", "https://127.0.0.1:3000"),
        ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("http://localhost:3000/", "http://localhost:3000"),
        ("HTTPS://forge.example.dev:443", "https://forge.example.dev"),
        ("http://localhost:80", "http://localhost"),
        (
            "https://forge.example.dev:8443",
            "https://forge.example.dev:8443",
        ),
        ("http://[::1]:3000", "http://[::1]:3000"),
    ] {
        let config = resolved(&format!("repo = \"a/b\"\nforgeHost = \"{forge_host}\"\n"));
        assert_eq!(config["forgeUrl"], forge_url, "forgeHost = {forge_host:?}");
        assert_eq!(config["forgeHost"], forge_host);
    }
}

#[test]
fn each_error_class_is_one_line_with_location_and_fix() {
    let cases = [
        // Missing required fields.
        (
            "forgeHost = \"forge.example.dev\"\n",
            "1:1: missing required key `repo`; add `repo = \"owner/name\"` before any [table]",
        ),
        (
            "repo = \"a/b\"\n[models]\nplanner = \"x\"\n",
            "1:1: missing required key `forgeHost`; add `forgeHost = \"forge.example.dev\"` before any [table]",
        ),
        // Wrong types.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmaxIterations = \"five\"\n",
            "3:17: `maxIterations` must be an integer, found a string; write e.g. `maxIterations = 5`",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmodels = \"fast\"\n",
            "3:10: `models` must be a table, found a string; write it as a [models] table",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[models]\nplanner = 4\n",
            "4:11: `models.planner` must be a string, found an integer; \
             write e.g. `planner = \"claude-opus-4-8\"` in [models]",
        ),
        (
            "repo = 7\nforgeHost = \"x\"\n",
            "1:8: `repo` must be a string, found an integer; write e.g. `repo = \"owner/name\"`",
        ),
        // Out of range.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmaxConcurrency = 0\n",
            "3:18: `maxConcurrency` must be at least 1, found 0; write e.g. `maxConcurrency = 1`",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmaxIterations = 0\n",
            "3:17: `maxIterations` must be at least 1, found 0; write e.g. `maxIterations = 5`",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmaxIterations = 99999999999\n",
            "3:17: `maxIterations` must be at most 4294967295, found 99999999999; write e.g. `maxIterations = 5`",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\npidsLimit = 0\n",
            "4:13: `sandbox.pidsLimit` must be at least 1, found 0; write e.g. `pidsLimit = 1024` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[budget]\nmaxCostPerIssue = 0\n",
            "4:19: `budget.maxCostPerIssue` must be a number of US dollars above 0, found 0; \
             write e.g. `maxCostPerIssue = 5.0` in [budget]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\npollBackoff = [\"5m\", \"soon\"]\n",
            "4:22: `questions.pollBackoff` entry \"soon\" is not a duration of at least one second; \
             write e.g. `pollBackoff = [\"5m\", \"15m\", \"30m\", \"1h\"]` in [questions] (units: s, m, h, d)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[clarify]\nthreshold = 1.5\n",
            "4:13: `clarify.threshold` must be a number from 0 to 1, found 1.5; write e.g. `threshold = 0.8` in [clarify]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[clarify]\nenabled = \"yes\"\n",
            "4:11: `clarify.enabled` must be true or false, found a string; write e.g. `enabled = true` in [clarify]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[implement]\nattempts = 5\n",
            "4:12: `implement.attempts` must be at most 4, found 5; write e.g. `attempts = 3` in [implement]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[implement]\nattempts = 0\n",
            "4:12: `implement.attempts` must be at least 1, found 0; write e.g. `attempts = 3` in [implement]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[autopilot]\nciRounds = 0\n",
            "4:12: `autopilot.ciRounds` must be at least 1, found 0; write e.g. `ciRounds = 2` in [autopilot]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[autopilot]\nconflictRound = 2\n",
            "4:1: unknown key `conflictRound` in [autopilot]; did you mean `conflictRounds`?",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[clarify]\nmaxRounds = 0\n",
            "4:13: `clarify.maxRounds` must be at least 1, found 0; write e.g. `maxRounds = 5` in [clarify]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[publish]\nallowWorkflowChanges = 1\n",
            "4:24: `publish.allowWorkflowChanges` must be true or false, found an integer; write e.g. `allowWorkflowChanges = true` in [publish]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\nresponders = [\"bob smith\"]\n",
            "4:15: `questions.responders` entry \"bob smith\" is not a forge login; write e.g. `responders = [\"alice\"]` in [questions]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[budget]\nmaxCostPerRun = \"$50\"\n",
            "4:17: `budget.maxCostPerRun` must be a number, found a string; write e.g. `maxCostPerRun = 50` in [budget]",
        ),
        // `repo` not `owner/name`.
        (
            "repo = \"widget\"\nforgeHost = \"x\"\n",
            "1:8: `repo` must be `owner/name`, found \"widget\"; write e.g. `repo = \"owner/name\"`",
        ),
        (
            "repo = \"a/b/c\"\nforgeHost = \"x\"\n",
            "1:8: `repo` must be `owner/name`, found \"a/b/c\"; write e.g. `repo = \"owner/name\"`",
        ),
        (
            "repo = \"acme/widget.git\"\nforgeHost = \"x\"\n",
            "1:8: `repo` \"acme/widget.git\" ends in .git; write `repo = \"acme/widget\"`",
        ),
        // Unknown keys, with the nearest known one.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmaxIteration = 3\n",
            "3:1: unknown key `maxIteration`; did you mean `maxIterations`?",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nmax_concurrency = 3\n",
            "3:1: unknown key `max_concurrency`; did you mean `maxConcurrency`?",
        ),
        (
            "rpo = \"a/b\"\nforgeHost = \"x\"\n",
            "1:1: unknown key `rpo`; did you mean `repo`?",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[models]\nplaner = \"x\"\n",
            "4:1: unknown key `planer` in [models]; did you mean `planner`?",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[commands]\ntest = [[\"cargo\", \"test\"]]\n",
            "4:1: unknown key `test` in [commands]; the known keys in [commands] are `check`, `fmt`",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\npidLimit = 5\n",
            "4:1: unknown key `pidLimit` in [sandbox]; did you mean `pidsLimit`?",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[model]\nplanner = \"x\"\n",
            "3:2: unknown key `model`; did you mean `models`?",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\ncolour = \"blue\"\n",
            "3:1: unknown key `colour`; the known keys are `repo`, `forgeHost`, `imageName`, `maxIterations`, \
             `maxConcurrency`, `idleTimeout`, `pollInterval`, `models`, `commands`, `sandbox`, `review`, `implement`, `budget`, `cluster`, `questions`, `asks`, `clarify`, `autopilot`, `publish`",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[models]\nplanner = \"x\"\nmaxConcurrency = 2\n",
            "5:1: unknown key `maxConcurrency` in [models]; `maxConcurrency` is a top-level key; \
             move it above the first [table]",
        ),
        // TOML syntax.
        (
            "repo = \"a/b\nforgeHost = \"x\"\n",
            "1:12: TOML syntax error: invalid basic string, expected `\"`; correct the TOML at this line:column",
        ),
        (
            "repo = \"a/b\"\nforgeHost = x\n",
            "2:13: TOML syntax error: string values must be quoted, expected literal string; \
             correct the TOML at this line:column",
        ),
        // Durations.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nidleTimeout = \"ten minutes\"\n",
            "3:15: `idleTimeout` = \"ten minutes\" is not a duration (expected number at 0); \
             write e.g. `idleTimeout = \"10m\"` (units: s, m, h, d)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\npollInterval = \"0s\"\n",
            "3:16: `pollInterval` = \"0s\" is shorter than one second; write e.g. `pollInterval = \"1m\"` (units: s, m, h, d)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nidleTimeout = 600\n",
            "3:15: `idleTimeout` must be a string, found an integer; write e.g. `idleTimeout = \"10m\"`",
        ),
        // forgeHost.
        (
            "repo = \"a/b\"\nforgeHost = \"forge.example.dev/acme\"\n",
            "2:13: `forgeHost` \"forge.example.dev/acme\" has a path; write only the forge's host or base URL, \
             e.g. \"https://forge.example.dev\"",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"ssh://forge.example.dev\"\n",
            "2:13: `forgeHost` \"ssh://forge.example.dev\" has the scheme `ssh`; only https:// and http:// \
             forges are supported, e.g. \"https://forge.example.dev\"",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"127.0.0.1:http\"\n",
            "2:13: `forgeHost` \"127.0.0.1:http\" has an invalid port `http`; write a port from 1 to 65535, \
             e.g. \"127.0.0.1:3000\"",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"\"\n",
            "2:13: `forgeHost` must be a non-empty string without spaces; \
             write e.g. `forgeHost = \"forge.example.dev\"`",
        ),
        // Steps.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[commands]\ncheck = [[\"true\"], []]\n",
            "4:20: step 2 of `commands.check` has no program to run; \
             write e.g. `check = [[\"cargo\", \"test\"]]` in [commands]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[commands]\nfmt = [[\"\", \"x\"]]\n",
            "4:8: step 1 of `commands.fmt` has no program to run; write e.g. `fmt = [[\"cargo\", \"fmt\"]]` in [commands]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[commands]\ncheck = [\"cargo\", \"test\"]\n",
            "4:10: step 1 of `commands.check` must be an argv list, found a string; \
             write e.g. `check = [[\"cargo\", \"test\"]]` in [commands] (a list of steps, each a list of arguments)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[commands]\ncheck = [[\"sleep\", 5]]\n",
            "4:20: step 1 of `commands.check` has an integer where an argument should be; quote it, e.g. \"5\"",
        ),
        // Sandbox values.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nmemory = \"lots\"\n",
            "4:10: `sandbox.memory` = \"lots\" is not a memory size; write e.g. `memory = \"4g\"` in [sandbox] \
             (units: b, k, m, g)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\nidleTimeout = \"1ns\"\n",
            "3:15: `idleTimeout` = \"1ns\" is shorter than one second; write e.g. `idleTimeout = \"10m\"` (units: s, m, h, d)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nmemory = \"0\"\n",
            "4:10: `sandbox.memory` = \"0\" means no limit to Docker; write e.g. `memory = \"4g\"` in [sandbox] \
             (units: b, k, m, g)",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nmounts = [\"/:/host\"]\n",
            "4:11: `sandbox.mounts` entry \"/:/host\" mounts the host's whole filesystem; mount only what the \
             agents need, e.g. `mounts = [\"/srv/cache:/cache\"]` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nmounts = [\"/var/run/docker.sock:/s\"]\n",
            "4:11: `sandbox.mounts` entry \"/var/run/docker.sock:/s\" exposes the Docker socket, which is root \
             on the host; mount only what the agents need, e.g. `mounts = [\"/srv/cache:/cache\"]` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nmounts = [\".sandcastle:/s\"]\n",
            "4:11: `sandbox.mounts` entry \".sandcastle:/s\" exposes the project's .sandcastle/ (its secrets and \
             work repositories); mount only what the agents need, e.g. `mounts = [\"/srv/cache:/cache\"]` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nmounts = [\"/srv/cache\"]\n",
            "4:11: each of `sandbox.mounts` must be \"host-path:/container-path\" (mounted read-only); \
             write e.g. `mounts = [\"/srv/cache:/cache\"]` in [sandbox]",
        ),
        // The sandbox's network and egress.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nnetwork = \"bridged\"\n",
            "4:11: `sandbox.network` \"bridged\" is not a sandbox network; use \"none\" (loopback only, through \
             sandcastle's proxy), or \"bridge\" or \"host\" for direct network access, e.g. `network = \"none\"` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\negress = [\"crates.io\", \"https://x.org\"]\n",
            "4:24: `sandbox.egress` entry \"https://x.org\" is not a host name, `*.suffix` or either with `:port`; \
             write e.g. `egress = [\"index.crates.io\", \"*.example.com:8443\"]` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\negress = [\"x.org:0\"]\n",
            "4:11: `sandbox.egress` entry \"x.org:0\" is not a host name, `*.suffix` or either with `:port`; \
             write e.g. `egress = [\"index.crates.io\", \"*.example.com:8443\"]` in [sandbox]",
        ),
        // The sandbox's runtime: a name, never a path or an option.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nruntime = \"/usr/bin/runsc\"\n",
            "4:11: `sandbox.runtime` \"/usr/bin/runsc\" is not a runtime name (letters, digits, `_`, `.`, `-`); \
             name one the engine knows, e.g. `runtime = \"runsc\"` in [sandbox]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[sandbox]\nruntime = \"\"\n",
            "4:11: `sandbox.runtime` \"\" is not a runtime name (letters, digits, `_`, `.`, `-`); \
             name one the engine knows, e.g. `runtime = \"runsc\"` in [sandbox]",
        ),
        // Question handlers.
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\nhandlers = [\"forge\", \"slack\"]\n",
            "4:22: `questions.handlers` entry \"slack\" is not a handler; the handlers are \"terminal\", \
             \"forge\", \"command\", e.g. `handlers = [\"terminal\", \"forge\"]` in [questions]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\nhandlers = [\"forge\", \"forge\"]\n",
            "4:22: `questions.handlers` entry \"forge\" is named twice; the handlers are \"terminal\", \
             \"forge\", \"command\", e.g. `handlers = [\"terminal\", \"forge\"]` in [questions]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\nhandlers = \"forge\"\n",
            "4:12: `questions.handlers` must be a list of strings, found a string; \
             write e.g. `handlers = [\"terminal\", \"forge\"]` in [questions]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\ncommand = []\n",
            "4:11: `questions.command` has no program to run; \
             write e.g. `command = [\"/usr/local/bin/ask-slack\", \"--channel\", \"dev\"]` in [questions]",
        ),
        (
            "repo = \"a/b\"\nforgeHost = \"x\"\n[questions]\ncommand = \"ask.sh --to dev\"\n",
            "4:11: `questions.command` must be a list of strings, found a string; \
             write e.g. `command = [\"/usr/local/bin/ask-slack\", \"--channel\", \"dev\"]` in [questions]",
        ),
    ];
    let mismatches: Vec<String> = cases
        .iter()
        .filter_map(|(toml, expected)| {
            let expected = format!("load-config: config.toml:{expected}");
            let actual = rejected(toml);
            (actual != expected)
                .then(|| format!("config:\n{toml}expected: {expected}\n  actual: {actual}\n"))
        })
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn a_missing_or_unreadable_file_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = load_config(&[Path::new("nowhere.toml")], dir.path());
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "load-config: nowhere.toml: no such file; create it with at least `repo = \"owner/name\"` \
         and `forgeHost = \"forge.example.dev\"`\n"
    );

    let output = load_config(&[dir.path()], dir.path());
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1);
    assert!(stderr.contains("cannot read it"), "{stderr}");

    std::fs::write(dir.path().join("latin1.toml"), b"repo = \"caf\xe9/x\"\n").unwrap();
    let output = load_config(&[Path::new("latin1.toml")], dir.path());
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "load-config: latin1.toml: not UTF-8 text; save it as UTF-8\n"
    );
}

#[test]
fn without_an_argument_it_reads_the_conventional_path() {
    let dir = tempfile::tempdir().unwrap();
    let output = load_config(&[], dir.path());
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .starts_with("load-config: .sandcastle/config.toml: no such file")
    );

    std::fs::create_dir(dir.path().join(".sandcastle")).unwrap();
    std::fs::write(dir.path().join(".sandcastle/config.toml"), MINIMAL).unwrap();
    let output = load_config(&[], dir.path());
    assert!(output.status.success());
    assert_eq!(
        serde_json::from_slice::<Value>(&output.stdout).unwrap(),
        defaults()
    );
}
