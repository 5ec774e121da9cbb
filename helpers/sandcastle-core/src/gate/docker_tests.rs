//! The gate in a real sandbox: the operator's steps, in order, the first failure stopping.
use super::*;
use crate::sandbox::test_support::{TestRun, docker_ready, exec, spec};
use crate::sandbox::{self, SandboxSpec};
use crate::secrets::EnvFile;

fn steps(list: &[&[&str]]) -> Vec<Vec<String>> {
    list.iter()
        .map(|s| s.iter().map(|a| a.to_string()).collect())
        .collect()
}

#[test]
fn steps_run_in_order_and_the_first_failure_stops_with_its_output() {
    if !docker_ready() {
        return;
    }
    let test_run = TestRun::new("gate");
    let env = [("GATE_SECRET".to_string(), "gate-secret-value".to_string())];
    let sandbox = Sandbox::start(&spec(&test_run, "issue-1", &env)).unwrap();
    let redact = Redactor::new(&EnvFile { vars: env.to_vec() });
    let idle = Bounds {
        idle: Duration::from_secs(30),
        step: Duration::from_secs(120),
    };

    let passed = run(
        &sandbox,
        &steps(&[&["sh", "-c", "echo one > gate.txt"], &["cat", "gate.txt"]]),
        idle,
        &redact,
    )
    .unwrap();
    assert_eq!(
        passed,
        GateOutcome {
            passed: true,
            failed_step: None,
            tail: "one\n".into(),
            commit: None,
        }
    );

    let failed = run(
        &sandbox,
        &steps(&[
            &[
                "sh",
                "-c",
                "echo to stdout; echo \"error: $GATE_SECRET broke\" >&2; exit 3",
            ],
            &["touch", "never.txt"],
        ]),
        idle,
        &redact,
    )
    .unwrap();
    assert!(!failed.passed);
    assert_eq!(
        failed.failed_step.as_deref(),
        Some("sh -c echo to stdout; echo \"error: $GATE_SECRET broke\" >&2; exit 3")
    );
    assert_eq!(failed.tail, "to stdout\nerror: [redacted] broke\n");
    let later = sandbox
        .exec_command(&["test", "-e", "never.txt"])
        .unwrap()
        .output()
        .unwrap()
        .status;
    assert!(!later.success(), "the step after the failure did not run");

    // A step the image does not have fails like any other.
    let missing = run(&sandbox, &steps(&[&["no-such-program"]]), idle, &redact).unwrap();
    assert!(!missing.passed);
    assert!(missing.tail.contains("no-such-program"), "{}", missing.tail);

    // A silent step is stopped after the idle timeout.
    let started = std::time::Instant::now();
    let hung = run(
        &sandbox,
        &steps(&[&["sleep", "60"]]),
        Bounds {
            idle: Duration::from_secs(2),
            ..idle
        },
        &redact,
    )
    .unwrap();
    assert!(!hung.passed);
    assert!(hung.tail.contains("idleTimeout"), "{}", hung.tail);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!exec(&sandbox, &["ps", "-eo", "args"]).contains("sleep 60"));

    // A step that keeps talking is stopped all the same once it has run for `step`.
    let started = std::time::Instant::now();
    let chatty = run(
        &sandbox,
        &steps(&[&["sh", "-c", "while :; do echo tick; sleep 0.2; done"]]),
        Bounds {
            step: Duration::from_secs(3),
            ..idle
        },
        &redact,
    )
    .unwrap();
    assert!(!chatty.passed);
    assert!(chatty.tail.contains("turnTimeout"), "{}", chatty.tail);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!exec(&sandbox, &["ps", "-eo", "args"]).contains("tick"));
}

/// The warm cache (filled by a container that mounts it writable, as the warm-up does) is copied
/// whole into the gate's own cache, hidden files and nested directories too; in the gate, the warm
/// volume takes no write, and what the gate writes into its copy does not reach it. Each build
/// container's cache is opened to the agent by its relay, which made the protected copy there too
/// (a step's timeout stops the agent's processes from it).
#[test]
fn the_warm_cache_is_copied_whole_and_the_gate_writes_only_its_copy() {
    if !docker_ready() {
        return;
    }
    let test_run = TestRun::new("gate-warm");
    let warm = format!("{}-warm", test_run.id);
    let cache = format!("{}-cache", test_run.id);
    let project = std::path::Path::new("/nonexistent/sandcastle-test-project");
    for volume in [&warm, &cache] {
        sandbox::create_volume(volume, &test_run.id, project).unwrap();
    }
    let warming = Sandbox::start(&SandboxSpec {
        volume: Some((&warm, CACHE)),
        ..spec(&test_run, "warm", &[])
    })
    .unwrap();
    let stat = |sandbox: &Sandbox, path: &str| exec(sandbox, &["stat", "-c", "%a %u", path]);
    assert_eq!(stat(&warming, CACHE), "1777 0");
    assert_eq!(stat(&warming, sandbox::PROTECTED_SANDCASTLE), "111 0");
    exec(
        &warming,
        &[
            "sh",
            "-c",
            "mkdir -p /gate-cache/cargo-target/debug && echo built > /gate-cache/cargo-target/debug/lib && echo hidden > /gate-cache/.hidden",
        ],
    );
    warming.remove().unwrap();

    let gate = Sandbox::start(&SandboxSpec {
        volume: Some((&cache, CACHE)),
        read_only_volume: Some((&warm, WARM)),
        ..spec(&test_run, "gate", &[])
    })
    .unwrap();
    assert_eq!(stat(&gate, CACHE), "1777 0");
    assert_eq!(stat(&gate, sandbox::PROTECTED_SANDCASTLE), "111 0");
    exec(&gate, &["sh", "-c", &copy_warm_script()]);

    let copied = [
        "cat",
        "/gate-cache/cargo-target/debug/lib",
        "/gate-cache/.hidden",
    ];
    assert_eq!(exec(&gate, &copied).trim(), "built\nhidden");
    exec(
        &gate,
        &[
            "sh",
            "-c",
            "echo planted > /gate-cache/cargo-target/debug/lib",
        ],
    );
    let write = gate
        .exec_command(&[
            "sh",
            "-c",
            "echo planted > /gate-warm/cargo-target/debug/lib",
        ])
        .and_then(|exec| exec.output())
        .unwrap();
    assert!(!write.status.success(), "the warm volume took a write");
    let warm_lib = ["cat", "/gate-warm/cargo-target/debug/lib"];
    assert_eq!(exec(&gate, &warm_lib).trim(), "built");
}
