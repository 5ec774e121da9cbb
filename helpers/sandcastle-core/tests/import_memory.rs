//! The import reads the agent's commit messages in bounded memory, however large they are.
//!
//! This file holds one test so that it runs alone in its own process: the process's peak resident
//! memory (`VmHWM`) is then what the import cost, on top of the test harness.
use sandcastle_core::git::{Credentials, Imported, WorkRepo};
use sandcastle_testkit::git::{Checkout, Remote, git};
use std::io::Write;

const MESSAGE_BYTES: usize = 200 * 1024 * 1024;
const PEAK_LIMIT_BYTES: u64 = 200 * 1024 * 1024;

/// Four commits with 200 MiB messages (a bundle of a few hundred KiB, as they compress well) are
/// refused, and the host process never holds them.
#[test]
fn huge_commit_messages_are_refused_without_reading_them_whole() {
    let remote = Remote::new();
    let creds = Credentials {
        user: "sandcastle-bot".to_string(),
        token: "unused-token".to_string(),
    };
    let branch = "sandcastle/issue-1";
    let repo = WorkRepo::prepare(
        &remote.path("work.git"),
        &remote.url,
        &creds,
        branch,
        "main",
    )
    .unwrap();
    let start = repo.tip().unwrap();
    let repo = repo.starting_at(&start);
    let seed = repo.scratch_file().unwrap();
    repo.seed_bundle(seed.path()).unwrap();
    let checkout = Checkout::from_bundle(seed.path(), branch);
    let dir = checkout.path();

    let tree = git(&dir, &["rev-parse", "HEAD^{tree}"]);
    let raw = remote.path("raw-commit");
    let mut parent = start.clone();
    for n in 0..4 {
        write_commit(&raw, &tree, &parent, n);
        parent = git(
            &dir,
            &["hash-object", "-w", "-t", "commit", raw.to_str().unwrap()],
        );
    }
    std::fs::remove_file(&raw).unwrap();
    git(&dir, &["update-ref", "HEAD", &parent]);
    let handed_out = repo.scratch_file().unwrap();
    checkout.hand_out(&start, handed_out.path());

    match repo.import(handed_out.path()).unwrap() {
        Imported::Refused(why) => assert!(
            why.contains("KiB, more than the 1024 KiB a commit may be: write a shorter message"),
            "{why}"
        ),
        Imported::Tip(tip) => panic!("{tip} was taken"),
    }
    assert_eq!(repo.tip().unwrap(), start, "the branch stayed");
    let peak = peak_resident_bytes();
    assert!(
        peak < PEAK_LIMIT_BYTES,
        "the import's process peaked at {} MiB",
        peak >> 20
    );
}

/// A raw commit object of `tree` on `parent` whose message is `MESSAGE_BYTES` long, written in
/// pieces so that this process never holds it.
fn write_commit(path: &std::path::Path, tree: &str, parent: &str, n: usize) {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let who = "Agent <agent@localhost> 1700000000 +0000";
    write!(
        file,
        "tree {tree}\nparent {parent}\nauthor {who}\ncommitter {who}\n\nHuge message {n}\n\n"
    )
    .unwrap();
    let line = [b'a'; 99].iter().chain(b"\n").copied().collect::<Vec<u8>>();
    for _ in 0..MESSAGE_BYTES / line.len() {
        file.write_all(&line).unwrap();
    }
    file.flush().unwrap();
}

/// `VmHWM` of this process, in bytes.
fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/self/status");
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}
