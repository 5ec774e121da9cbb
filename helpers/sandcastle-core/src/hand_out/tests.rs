use super::*;

struct Files {
    _dir: tempfile::TempDir,
    session: std::path::PathBuf,
    commits: std::path::PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    Files {
        session: dir.path().join("session.raw"),
        commits: dir.path().join("commits.bundle"),
        _dir: dir,
    }
}

fn read_with(bytes: &[u8], files: &Files, max: u64) -> Result<Trailer, String> {
    let to = Destination {
        session: files.session.clone(),
        max_session: max,
        commits: files.commits.clone(),
        max_commits: max,
        max_ask: max,
    };
    read(&mut std::io::Cursor::new(bytes), &to)
}

#[test]
fn a_session_and_a_bundle_land_in_their_files() {
    let files = files();
    let trailer = b"session 5\n{\"a\"}commits 16\n# v2 git bundle\nend\n";
    assert_eq!(
        read_with(trailer, &files, 100),
        Ok(Trailer {
            session: true,
            commits: Commits::InFile,
            ask: Ask::None,
        })
    );
    assert_eq!(std::fs::read(&files.session).unwrap(), b"{\"a\"}");
    assert_eq!(std::fs::read(&files.commits).unwrap(), b"# v2 git bundle\n");
}

#[test]
fn no_session_and_a_refusal_are_well_formed() {
    let files = files();
    let reason = "the checkout has no .git directory any more\n";
    let trailer = format!("commits-refused {}\n{reason}end\n", reason.len());
    assert_eq!(
        read_with(trailer.as_bytes(), &files, 100),
        Ok(Trailer {
            session: false,
            commits: Commits::Refused("the checkout has no .git directory any more".into()),
            ask: Ask::None,
        })
    );
    assert!(!files.session.exists());
}

/// Forged, cut or oversized trailers: each is refused with a reason, and nothing larger than the
/// cap is ever written.
#[test]
fn malformed_trailers_are_refused() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "cut short"),
        (b"session 5\n{\"a\"}", "cut short"),
        (b"session 50\nshort", "cut short"),
        (b"session 500\n", "at most 100"),
        (b"commits 18446744073709551615\n", "at most 100"),
        (b"commits 99999999999999999999999\n", "bad size"),
        (b"commits 05\nabcdeend\n", "bad size"),
        (b"commits +5\nabcdeend\n", "bad size"),
        (b"commits  5\nabcdeend\n", "bad size"),
        (b"commits 5 \nabcdeend\n", "bad size"),
        (b"commits -1\nend\n", "bad size"),
        (b"commits 2\nabend\ntrailing", "output after its end"),
        (b"commits 2\nabend", "cut short"),
        (b"commits 2\nabsession 1\nxend\n", "expected its end"),
        (b"session 1\nxsession 1\nyend\n", "expected the commits"),
        (b"end\n", "expected the commits"),
        (b"commits-refused 1000\n", "at most 512"),
        (b"commits-refused 10\nshort", "cut short"),
        (b"commits 0\nend \n", "expected its end"),
        (b"commits 0\nask 500\n", "an ask of 500 bytes (at most 100)"),
        (b"commits 0\nask 5\nabc", "the ask is cut short"),
        (b"commits 0\nask 2\n{}ask 2\n{}end\n", "expected its end"),
        (b"commits 0\nask-refused 600\n", "at most 512"),
        (b"ask 2\n{}commits 0\nend\n", "expected the commits"),
    ];
    for (bytes, why) in cases {
        let files = files();
        let error = read_with(bytes, &files, 100).unwrap_err();
        assert!(
            error.contains(why),
            "{:?}: {error}",
            String::from_utf8_lossy(bytes)
        );
        for file in [&files.session, &files.commits] {
            let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            assert!(len <= 100, "{} bytes written", len);
        }
    }
    let long = format!("commits {}\n", "1".repeat(200));
    assert!(
        read_with(long.as_bytes(), &files(), 100)
            .unwrap_err()
            .contains("too long")
    );
}

/// The trailer names no path: the host writes only into the files it named, and never through a
/// link someone put there.
#[cfg(unix)]
#[test]
fn a_link_at_the_destination_is_not_followed() {
    let files = files();
    let target = files.session.with_file_name("target");
    std::fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, &files.session).unwrap();
    let error = read_with(b"session 1\nxcommits 0\nend\n", &files, 100).unwrap_err();
    assert!(error.contains("cannot write"), "{error}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
}

#[test]
fn an_ask_or_its_refusal_follows_the_commits() {
    let files = files();
    let read = read_with(b"commits 0\nask 9\n{\"ask\":1}end\n", &files, 100).unwrap();
    assert_eq!(read.ask, Ask::Bytes(b"{\"ask\":1}".to_vec()));
    let why = "the outbox is not a regular file";
    let trailer = format!("commits 0\nask-refused {}\n{why}end\n", why.len());
    let read = read_with(trailer.as_bytes(), &files, 100).unwrap();
    assert_eq!(read.ask, Ask::Refused(why.into()));
}

#[test]
fn a_refusal_keeps_one_printable_line() {
    let files = files();
    let reason = "bad\u{1b}[31m ref\nsecond line";
    let trailer = format!("commits-refused {}\n{reason}end\n", reason.len());
    let read = read_with(trailer.as_bytes(), &files, 100).unwrap();
    assert_eq!(read.commits, Commits::Refused("bad[31m ref".into()));
}

proptest::proptest! {
    /// Whatever bytes follow the marker, reading them ends (no panic) and writes no more than the cap.
    #[test]
    fn any_bytes_are_read_safely(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let files = files();
        let _ = read_with(&bytes, &files, 16);
        for file in [&files.session, &files.commits] {
            let len = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
            proptest::prop_assert!(len <= 16);
        }
    }
}
