use super::*;
use proptest::prelude::*;
use sandcastle_core::questions::{Choice, Question};

fn questions() -> Questions {
    Questions {
        title: "Database driver choice".into(),
        prose: String::new(),
        items: vec![
            Question {
                title: "Which driver?".into(),
                prose: String::new(),
                options: vec![
                    Choice {
                        title: "pg".into(),
                        prose: "PostgreSQL client".into(),
                    },
                    Choice {
                        title: "mysql2".into(),
                        prose: String::new(),
                    },
                ],
            },
            Question {
                title: "Pool size?".into(),
                prose: String::new(),
                options: Vec::new(),
            },
        ],
    }
}

#[test]
fn a_good_response_gives_who_and_one_reply_per_question() {
    let (by, replies) = read_response(
        &questions(),
        br#"{"version": 1, "by": "Dana (Slack)", "answers": [{"option": 2, "text": "we run MySQL"}, {"text": "ten"}]}"#,
    )
    .unwrap();
    assert_eq!(by.as_deref(), Some("Dana (Slack)"));
    assert_eq!(
        replies,
        vec![
            Reply {
                option: Some(2),
                text: "we run MySQL".into()
            },
            Reply {
                option: None,
                text: "ten".into()
            },
        ]
    );
    let (by, _) = read_response(
        &questions(),
        br#"{"version":1,"answers":[{"option":1},{"text":"5"}]}"#,
    )
    .unwrap();
    assert_eq!(by, None, "who is optional");
}

#[test]
fn every_bad_response_says_what_is_wrong() {
    let cases: [(&[u8], &str); 10] = [
        (b"", "not the answer JSON"),
        (b"1\nten", "not the answer JSON"),
        (br#"{"answers":[]}"#, "missing field `version`"),
        (
            br#"{"version":2,"answers":[]}"#,
            "version 2; this sandcastle reads version 1",
        ),
        (
            br#"{"version":1,"answers":[{"option":1}]}"#,
            "2 question(s), but its output has 1 answer(s)",
        ),
        (
            br#"{"version":1,"answers":[{"option":3},{"text":"x"}]}"#,
            "question 1 has options 1 to 2, not 3",
        ),
        (
            br#"{"version":1,"answers":[{"option":1},{"option":1}]}"#,
            "question 2 has no options",
        ),
        (
            br#"{"version":1,"answers":[{"option":1},{"text":"  "}]}"#,
            "the answer to question 2 is empty",
        ),
        (
            br#"{"version":1,"answers":[{"option":1,"extra":true},{"text":"x"}]}"#,
            "unknown field `extra`",
        ),
        (
            br#"{"version":1,"by":"x\u001b[2J","answers":[{"option":1},{"text":"x"}]}"#,
            "its \"by\" is not a name",
        ),
    ];
    for (stdout, expected) in cases {
        let why = read_response(&questions(), stdout).unwrap_err();
        assert!(
            why.contains(expected),
            "{:?}: {why:?} should say {expected:?}",
            String::from_utf8_lossy(stdout)
        );
    }
    let long = format!(
        r#"{{"version":1,"answers":[{{"option":1}},{{"text":"{}"}}]}}"#,
        "x".repeat(5000)
    );
    assert!(
        read_response(&questions(), long.as_bytes())
            .unwrap_err()
            .contains("longer than")
    );
}

#[test]
fn the_request_numbers_questions_and_options_and_carries_the_id() {
    let mut conversation = crate::conversation::start(questions(), &[]);
    conversation.id = "q1".into();
    conversation.asked_at = "2026-12-03T00:00:00Z".parse().unwrap();
    let waiting = Waiting {
        conversation,
        channels: vec![Channel::Command],
        timed_out: false,
    };
    let json = serde_json::to_value(request(
        "alice/demo",
        "http://forge/alice/demo/issues/4".into(),
        4,
        About::Question(&waiting),
        Duration::from_secs(3600),
    ))
    .unwrap();
    assert_eq!(json["version"], 1);
    assert_eq!(json["id"], "q1");
    assert_eq!(json["blocking"], true);
    assert_eq!(json.get("ask"), None);
    assert_eq!(json["issue"], 4);
    assert_eq!(json["answerBy"], "2026-12-03T01:00:00Z");
    assert_eq!(json["questions"][0]["options"][1]["number"], 2);
    assert_eq!(json["questions"][0]["options"][1]["title"], "mysql2");
    assert_eq!(json["questions"][1]["options"], serde_json::json!([]));
}

/// An ask goes to the command as one question, marked non-blocking, with its kind and revision;
/// the answer's id names the revision.
#[test]
fn an_asks_request_is_one_question_marked_non_blocking() {
    let ask: sandcastle_core::ask::Ask = serde_json::from_value(serde_json::json!({
        "key": "issue:4", "revision": 2, "kind": "decision", "title": "Driver?",
        "details": "The pool needs one.",
        "options": [{"label": "pg", "meaning": "PostgreSQL"}, {"label": "mysql2"}]
    }))
    .unwrap();
    let mut open = crate::conversation::start(ask, &[]);
    open.asked_at = "2026-12-03T00:00:00Z".parse().unwrap();
    let questions = as_questions(&open.subject);
    let json = serde_json::to_value(request(
        "alice/demo",
        "http://forge/alice/demo/issues/4".into(),
        4,
        About::Ask("a1-r2", &open, &questions),
        Duration::from_secs(60),
    ))
    .unwrap();
    assert_eq!(json["id"], "a1-r2");
    assert_eq!(json["blocking"], false);
    assert_eq!(
        json["ask"],
        serde_json::json!({"kind": "decision", "revision": 2})
    );
    assert_eq!(json["title"], "Driver?");
    assert_eq!(json["prose"], "The pool needs one.");
    assert_eq!(json["questions"].as_array().unwrap().len(), 1);
    assert_eq!(json["questions"][0]["options"][0]["prose"], "PostgreSQL");
    assert_eq!(json["questions"][0]["options"][1]["title"], "mysql2");
    let (_, replies) =
        read_response(&questions, br#"{"version":1,"answers":[{"option":2}]}"#).unwrap();
    assert_eq!(replies[0].option, Some(2));
}

fn near_json() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just(":".to_string()),
        Just("\"version\"".to_string()),
        Just("\"answers\"".to_string()),
        Just("\"option\"".to_string()),
        Just("\"text\"".to_string()),
        Just("\"by\"".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        ".{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn no_output_panics_the_reader(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = read_response(&questions(), &bytes);
    }

    #[test]
    fn no_near_json_output_panics_the_reader(text in near_json()) {
        let _ = read_response(&questions(), text.as_bytes());
    }

    #[test]
    fn structured_answers_never_panic(
        option in prop::option::of(any::<usize>()),
        text in ".{0,40}",
        by in prop::option::of(".{0,80}"),
    ) {
        let response = serde_json::json!({
            "version": 1,
            "by": by,
            "answers": [{"option": option, "text": text}, {"text": text}],
        });
        let _ = read_response(&questions(), response.to_string().as_bytes());
    }
}

fn sh(script: &str, limit: Duration) -> Result<Vec<u8>, String> {
    let children = Children::default();
    let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
    let out = run(
        &argv,
        Path::new("."),
        b"{\"version\":1}".to_vec(),
        limit,
        &children,
    );
    assert!(children.lock().unwrap().is_empty(), "no child left listed");
    out
}

#[test]
fn the_command_reads_the_request_and_its_failures_are_one_line() {
    assert_eq!(
        sh("cat", Duration::from_secs(10)).unwrap(),
        b"{\"version\":1}",
        "the request is on stdin"
    );
    assert_eq!(
        sh(
            "echo first >&2; echo the bridge is down >&2; exit 3",
            Duration::from_secs(10)
        )
        .unwrap_err(),
        "`sh` exited with exit status: 3: the bridge is down"
    );
    assert_eq!(
        sh("sleep 60 & sleep 60; wait", Duration::from_secs(1)).unwrap_err(),
        "`sh` did not answer within the question's timeout and was stopped"
    );
    let children = Children::default();
    let missing = run(
        &["/nonexistent/ask".to_string()],
        Path::new("."),
        Vec::new(),
        Duration::from_secs(1),
        &children,
    )
    .unwrap_err();
    assert!(
        missing.starts_with("cannot start `/nonexistent/ask`"),
        "{missing}"
    );
}

#[test]
fn output_beyond_the_bound_is_refused_without_blocking_the_command() {
    let why = read_response(
        &questions(),
        &sh("head -c 300000 /dev/zero", Duration::from_secs(30)).unwrap(),
    )
    .unwrap_err();
    assert!(why.contains("longer than"), "{why}");
}
