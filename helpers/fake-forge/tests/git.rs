//! Real `git clone`, `git fetch` and `git push` against the forge's smart HTTP.
mod common;

use common::{Api, credential_helper, git, git_output};
use fake_forge::FakeForge;

fn forge() -> (FakeForge, String) {
    let forge = FakeForge::start();
    let token = forge.add_user("alice");
    forge.create_repo("alice", "demo", "main").unwrap();
    (forge, token)
}

fn clone(forge: &FakeForge, dir: &std::path::Path) {
    let url = format!("{}/alice/demo.git", forge.url());
    git(
        dir.parent().unwrap(),
        &["clone", "--quiet", &url, dir.to_str().unwrap()],
    );
}

#[test]
fn anyone_clones_but_only_a_user_with_a_token_pushes() {
    let (forge, token) = forge();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    clone(&forge, &work);
    assert_eq!(
        std::fs::read_to_string(work.join("README.md")).unwrap(),
        "# demo\n"
    );
    git(&work, &["checkout", "--quiet", "-b", "sandcastle/issue-1"]);
    std::fs::write(work.join("change.txt"), "change\n").unwrap();
    git(&work, &["add", "change.txt"]);
    git(&work, &["commit", "--quiet", "-m", "Change"]);
    let pushed = git(&work, &["rev-parse", "HEAD"]);

    let anonymous = git_output(&work, &["push", "origin", "sandcastle/issue-1"], &[]);
    assert!(!anonymous.status.success());
    let helper = credential_helper("alice");
    let push = [
        "-c",
        helper.as_str(),
        "push",
        "--quiet",
        "origin",
        "sandcastle/issue-1",
    ];
    let wrong = git_output(&work, &push, &[("FAKE_FORGE_TOKEN", "not-the-token")]);
    assert!(!wrong.status.success());
    assert_eq!(forge.push_count(), 0);

    let accepted = git_output(&work, &push, &[("FAKE_FORGE_TOKEN", &token)]);
    assert!(
        accepted.status.success(),
        "{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
    let pushes = forge.pushes();
    assert_eq!(pushes.len(), 1, "{pushes:?}");
    assert_eq!(
        (pushes[0].user.as_str(), pushes[0].repo.as_str()),
        ("alice", "alice/demo")
    );
    assert_eq!(pushes[0].updates.len(), 1);
    assert_eq!(pushes[0].updates[0].name, "refs/heads/sandcastle/issue-1");
    assert_eq!(
        (
            pushes[0].updates[0].old.as_deref(),
            pushes[0].updates[0].new.as_deref()
        ),
        (None, Some(pushed.as_str()))
    );
    let bare = forge.bare_repo_path("alice", "demo");
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/sandcastle/issue-1"]),
        pushed
    );

    // The pushed branch is what a pull request's head reports.
    let number = forge
        .create_pull(
            "alice/demo",
            "alice",
            "sandcastle/issue-1",
            "main",
            "Change",
            &[],
        )
        .unwrap();
    let pull = Api::new(forge.url(), &token).get(&format!("/repos/alice/demo/pulls/{number}"));
    assert_eq!(pull.json["head"]["sha"], pushed.as_str());
    assert!(
        forge.schema_violations().is_empty(),
        "{:?}",
        forge.schema_violations()
    );
}

#[test]
fn gzip_encoded_fetch_requests_are_served() {
    let (forge, _) = forge();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    clone(&forge, &work);
    // Enough local commits that the fetch request's `have` lines pass git's gzip threshold.
    // Distinct, later dates keep the common commit last in the negotiation.
    for n in 0..60 {
        std::fs::write(work.join("local.txt"), format!("{n}\n")).unwrap();
        git(&work, &["add", "local.txt"]);
        let date = format!("2030-01-01T00:{:02}:00Z", n);
        let dates = [
            ("GIT_AUTHOR_DATE", date.as_str()),
            ("GIT_COMMITTER_DATE", date.as_str()),
        ];
        let commit = git_output(
            &work,
            &["commit", "--quiet", "-m", &format!("Local {n}")],
            &dates,
        );
        assert!(commit.status.success());
    }
    let remote = forge
        .commit_file(
            "alice/demo",
            "main",
            "remote.txt",
            "remote\n",
            "Remote change",
        )
        .unwrap();
    let fetch = git_output(
        &work,
        &["fetch", "origin"],
        &[("GIT_TRACE_CURL", "1"), ("GIT_TRACE_CURL_NO_DATA", "1")],
    );
    assert!(
        fetch.status.success(),
        "{}",
        String::from_utf8_lossy(&fetch.stderr)
    );
    let trace = String::from_utf8_lossy(&fetch.stderr);
    assert!(
        trace.contains("Content-Encoding: gzip"),
        "the request was not gzipped: {trace}"
    );
    assert_eq!(git(&work, &["rev-parse", "origin/main"]), remote);
    assert_eq!(forge.push_count(), 0, "fetches are no pushes");
}

#[test]
fn pushes_larger_than_gits_post_buffer_stream_in_chunks() {
    let (forge, token) = forge();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    clone(&forge, &work);
    // 3 MiB that do not compress, so the pack exceeds git's 1 MiB post buffer and is sent chunked.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let noise: Vec<u8> = (0..3 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(work.join("noise.bin"), noise).unwrap();
    git(&work, &["add", "noise.bin"]);
    git(&work, &["commit", "--quiet", "-m", "Noise"]);
    let helper = credential_helper("alice");
    let push = ["-c", helper.as_str(), "push", "origin", "main"];
    let trace = [
        ("FAKE_FORGE_TOKEN", token.as_str()),
        ("GIT_TRACE_CURL", "1"),
        ("GIT_TRACE_CURL_NO_DATA", "1"),
    ];
    let pushed = git_output(&work, &push, &trace);
    let stderr = String::from_utf8_lossy(&pushed.stderr);
    assert!(pushed.status.success(), "{stderr}");
    assert!(
        stderr.contains("Transfer-Encoding: chunked"),
        "the push was not chunked"
    );
    let bare = forge.bare_repo_path("alice", "demo");
    assert_eq!(
        git(&bare, &["rev-parse", "main"]),
        git(&work, &["rev-parse", "HEAD"])
    );
    assert_eq!(forge.push_count(), 1);
}

/// As on Forgejo, an opened pull request's head is served as `refs/pull/<number>/head`.
#[test]
fn a_pull_requests_head_is_served_as_refs_pull() {
    let (forge, _) = forge();
    let head = forge
        .commit_file("alice/demo", "feature", "f.txt", "f\n", "Feature")
        .unwrap();
    let number = forge
        .create_pull("alice/demo", "alice", "feature", "main", "Feature", &[])
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/alice/demo.git", forge.url());
    let advertised = git(tmp.path(), &["ls-remote", &url, "refs/pull/*"]);
    assert_eq!(advertised, format!("{head}\trefs/pull/{number}/head"));
}
