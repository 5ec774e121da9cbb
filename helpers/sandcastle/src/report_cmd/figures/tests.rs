use super::*;
use serde_json::json;

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn usage(cost: f64) -> serde_json::Value {
    json!({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
           "cache_read_input_tokens": 0, "cost_usd": cost})
}

fn tally(iterations: u32, cost: f64) -> serde_json::Value {
    json!({"iterations": iterations, "questionTurns": 0, "usage": usage(cost), "durationSeconds": 1.0})
}

/// Three runs over two weeks; the first written before `pull`, `gaveUp`, `gateFirstPassed`,
/// `questions` and `asks` existed.
fn runs() -> Vec<RunRecord> {
    let old = json!({
        "runId": "a", "orchestrator": "h", "startedAt": "2026-11-02T10:00:00Z",
        "finishedAt": "2026-11-02T11:00:00Z",
        "work": [
            {"key": "plan", "outcome": "planned 3 issue(s)", "roles": {"planner": tally(1, 0.2)},
             "total": tally(1, 0.2), "gateRuns": 0, "gatePassed": null, "clarification": null,
             "durationSeconds": 1.0},
            {"key": "issue #1", "outcome": "pull request #10 ready for a human",
             "roles": {"implementer": tally(2, 1.0), "reviewer": tally(1, 0.5)},
             "total": tally(3, 1.5), "gateRuns": 1, "gatePassed": true, "clarification": null,
             "durationSeconds": 1.0},
            {"key": "issue #2", "outcome": "pull request #11 ready for a human",
             "roles": {"implementer": tally(3, 2.0)}, "total": tally(3, 2.0), "gateRuns": 2,
             "gatePassed": true, "clarification": null, "durationSeconds": 1.0},
            {"key": "issue #3", "outcome": "not completed in 5 iteration(s); commented",
             "roles": {"implementer": tally(5, 3.0)}, "total": tally(5, 3.0), "gateRuns": 1,
             "gatePassed": false, "clarification": null, "durationSeconds": 1.0},
        ],
        "total": tally(12, 6.7)
    });
    let new = json!({
        "runId": "b", "orchestrator": "h", "startedAt": "2026-11-10T09:00:00Z",
        "finishedAt": "2026-11-10T15:00:00Z",
        "work": [
            {"key": "pr #10", "outcome": "reworked; ready for a human",
             "roles": {"pr-fixer": tally(1, 0.4)}, "total": tally(1, 0.4), "gateRuns": 1,
             "gateFirstPassed": true, "gatePassed": true, "durationSeconds": 1.0},
            {"key": "issue #4", "outcome": "pull request #12 ready for a human", "pull": 12,
             "roles": {"implementer": tally(1, 0.75)}, "total": tally(1, 0.75), "gateRuns": 3,
             "gateFirstPassed": false, "gatePassed": true, "durationSeconds": 1.0,
             "questions": [{"id": "q1", "askedAt": "2026-11-10T10:00:00Z",
                            "answeredAt": "2026-11-10T13:00:00Z"}],
             "asks": [{"id": "k/1", "askedAt": "2026-11-10T10:30:00Z"}]},
            {"key": "issue #5", "outcome": "stopped: spent; commented",
             "gaveUp": "the issue's budget of $5.00 is spent",
             "roles": {"implementer": tally(2, 5.0)}, "total": tally(2, 5.0), "gateRuns": 0,
             "durationSeconds": 1.0},
        ],
        "total": tally(4, 6.15)
    });
    // The same question seen again while it still waited, in a run that started earlier.
    let waiting = json!({
        "runId": "c", "startedAt": "2026-11-10T08:00:00Z",
        "work": [{"key": "issue #4", "outcome": "asked a person; waiting for the answer",
                  "questions": [{"id": "q1", "askedAt": "2026-11-10T10:00:00Z"}]}]
    });
    [old, new, waiting]
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

fn fate(number: u64, created: &str, merged: Option<&str>, closed: bool) -> PullFate {
    PullFate {
        number,
        title: format!("Pull {number}"),
        created_at: Some(at(created)),
        merged_at: merged.map(at),
        closed,
        merge_commit: merged.map(|_| format!("abcdef{number:02}0123456789")),
        head_sha: format!("feed{number:02}"),
        base_branch: "main".into(),
    }
}

fn facts() -> ForgeFacts {
    ForgeFacts {
        pulls: [
            (
                10,
                fate(
                    10,
                    "2026-11-02T12:00:00Z",
                    Some("2026-11-03T12:00:00Z"),
                    true,
                ),
            ),
            (11, fate(11, "2026-11-02T13:00:00Z", None, true)),
            (12, fate(12, "2026-11-10T14:00:00Z", None, false)),
        ]
        .into(),
        reverted: [(10, "beef".to_string())].into(),
        labelled: [
            (
                1,
                vec![at("2026-11-01T10:00:00Z"), at("2026-11-02T08:00:00Z")],
            ),
            (
                2,
                vec![at("2026-11-02T11:00:00Z"), at("2026-11-05T00:00:00Z")],
            ),
        ]
        .into(),
        pulls_url: "http://forge.test/o/r/pulls/".into(),
    }
}

#[test]
fn spreads_are_the_median_and_the_nearest_rank_p90() {
    let ten: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(Spread::of(&ten).median, Some(5.5));
    assert_eq!(Spread::of(&ten).p90, Some(9.0));
    assert_eq!(Spread::of(&[3.0]).p90, Some(3.0));
    assert_eq!(Spread::of(&[4.0, 1.0, 7.0]).median, Some(4.0));
    let none = Spread::of(&[]);
    assert_eq!((none.count, none.median, none.p90), (0, None, None));
}

#[test]
fn the_figures_of_three_runs_and_the_forge() {
    let f = Figures::compute(&runs(), &facts(), Some("2026-11-01".into()));
    assert_eq!(f.runs, 3);
    assert_eq!(f.issues, 5);
    let p = &f.pulls;
    assert_eq!(
        (p.opened, p.merged, p.closed, p.open, p.reverted),
        (3, 1, 1, 1, 1)
    );
    assert_eq!(p.merge_rate, Some(0.5));

    assert!(
        (f.cost.total_usd - 12.85).abs() < 1e-9,
        "{}",
        f.cost.total_usd
    );
    assert!((f.cost.planning_usd - 0.2).abs() < 1e-9);
    // Per issue: #1 1.5 + its rework 0.4, #2 2.0, #3 3.0, #4 0.75, #5 5.0.
    let per_issue = &f.cost.per_issue.all;
    assert_eq!(per_issue.count, 5);
    assert_eq!(per_issue.median, Some(2.0));
    assert_eq!(per_issue.p90, Some(5.0));
    let merged = &f.cost.per_merged_pull;
    assert_eq!(merged.all.count, 1);
    assert!((merged.all.median.unwrap() - 1.9).abs() < 1e-9);
    assert_eq!(merged.by_role["implementer"].median, Some(1.0));
    assert_eq!(merged.by_role["reviewer"].median, Some(0.5));
    assert_eq!(merged.by_role["pr-fixer"].median, Some(0.4));
    assert_eq!(f.cost.per_issue.by_role["implementer"].count, 5);

    // #10: labelled 08:00, opened 12:00, merged a day later. #11: the last label before it opened.
    assert_eq!(f.time.ready_to_pull_seconds.count, 2);
    assert_eq!(f.time.ready_to_pull_seconds.p90, Some(4.0 * 3600.0));
    assert_eq!(f.time.ready_to_pull_seconds.median, Some(3.0 * 3600.0));
    assert_eq!(f.time.pull_to_merge_seconds.median, Some(86400.0));

    // Iterations: #1 2 + its pr-fixer's 1, #2 3, #3 5, #4 1, #5 2.
    assert_eq!(f.work.iterations.median, Some(3.0));
    assert_eq!(f.work.iterations.p90, Some(5.0));
    assert_eq!(f.work.gate_runs_total, 1 + 1 + 2 + 1 + 3);
    // First pass: #1 (old report, one run that passed), #3 (one that failed), #4 (field);
    // #2 ran twice in an old report: unknown.
    assert_eq!((f.work.first_pass, f.work.first_pass_of), (1, 3));
    assert_eq!(f.work.reviewer_rounds.p90, Some(1.0));

    assert_eq!((f.questions.asked, f.questions.answered), (1, 1));
    assert_eq!(f.questions.seconds_to_answer.median, Some(3.0 * 3600.0));
    assert_eq!((f.asks.asked, f.asks.answered), (1, 0));

    let gave_up: Vec<(&str, &str)> = f
        .gave_up
        .iter()
        .map(|g| (g.key.as_str(), g.reason.as_str()))
        .collect();
    assert_eq!(
        gave_up,
        [
            ("issue #3", "not completed in 5 iteration(s)"),
            ("issue #5", "the issue's budget of $5.00 is spent")
        ]
    );

    let weeks: Vec<(&str, usize, usize)> = f
        .weeks
        .iter()
        .map(|w| (w.week.as_str(), w.pulls_opened, w.pulls_merged))
        .collect();
    assert_eq!(weeks, [("2026-11-02", 2, 1), ("2026-11-09", 1, 0)]);
    assert!((f.weeks[0].cost_usd - 6.7).abs() < 1e-9);
    assert_eq!(f.weeks[0].pull_to_merge_seconds, Some(86400.0));

    let row = &f.pull_requests[0];
    assert_eq!(
        (row.number, row.issue, row.state),
        (10, 1, PullState::Merged)
    );
    assert_eq!(row.url, "http://forge.test/o/r/pulls/10");
    assert_eq!(row.reverted_by.as_deref(), Some("beef"));
    assert_eq!(row.iterations, 3);
    let states: Vec<PullState> = f.pull_requests.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [PullState::Merged, PullState::Closed, PullState::Open]
    );

    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["pulls"]["mergeRate"], 0.5);
    assert_eq!(json["pullRequests"][0]["state"], "merged");
    assert_eq!(json["time"]["pullToMergeSeconds"]["median"], 86400.0);
}

#[test]
fn a_revert_names_the_merge_commit_or_the_head() {
    let merged = fate(
        10,
        "2026-11-02T12:00:00Z",
        Some("2026-11-03T12:00:00Z"),
        true,
    );
    let commit = |sha: &str, message: &str| BranchCommit {
        sha: sha.into(),
        message: message.into(),
    };
    let reverts_merge = commit(
        "r1",
        "Revert \"Pull 10\"\n\nThis reverts commit abcdef100123456.\n",
    );
    assert_eq!(
        reverting(&merged, std::slice::from_ref(&reverts_merge)),
        Some("r1".into())
    );
    let reverts_head = commit("r2", "This reverts commit feed10.");
    assert_eq!(reverting(&merged, &[reverts_head]), None, "under 7 digits");
    let mut long_head = merged.clone();
    long_head.head_sha = "0123456789abcdef".into();
    let rebased = commit("r3", "x\nThis reverts commit 0123456789.");
    assert_eq!(reverting(&long_head, &[rebased]), Some("r3".into()));
    let other = commit("r5", "This reverts commit 9999999999.");
    assert_eq!(reverting(&merged, &[other]), None);
    let open = fate(12, "2026-11-10T14:00:00Z", None, false);
    assert_eq!(reverting(&open, &[reverts_merge]), None);
}

#[test]
fn the_table_fits_100_columns_and_the_page_escapes_what_it_is_given() {
    let mut runs = runs();
    runs[1].work[2].gave_up = Some(format!(
        "<script>alert(1)</script>\x1b[31m\nforged line\u{2028}\u{202e}{}",
        "x".repeat(300)
    ));
    let mut facts = facts();
    facts.pulls.get_mut(&11).unwrap().title = "<script>alert('pwned')</script> & \"more\"".into();
    let f = Figures::compute(&runs, &facts, None);
    let table = crate::report_cmd::table::render(&f);
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "{line}");
        assert!(!line.contains('\x1b'), "{line:?}");
        assert!(!line.contains(['\u{2028}', '\u{202e}']), "{line:?}");
        assert!(!line.starts_with("forged line"), "{line:?}");
    }
    assert!(table.contains("merge rate 50%"), "{table}");
    assert!(table.contains("cost per merged PR"), "{table}");
    assert!(table.contains("gave up (2)"), "{table}");

    let page = crate::report_cmd::page::render(&f, "o/<r>");
    assert!(!page.contains("<script"), "no script element");
    assert!(
        page.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt; &amp; &quot;more&quot;")
    );
    assert!(page.contains("sandcastle report: o/&lt;r&gt;"));
    assert!(page.contains("default-src 'none'"));
    assert!(page.contains("<a href=\"http://forge.test/o/r/pulls/11\">"));
}

/// An issue's attempts (best of N) as its last report says them: a later run's report of the
/// same issue without attempts (its pull request's rework) keeps them.
#[test]
fn the_attempts_of_an_issue_are_counted_once_from_its_last_report() {
    let attempt = |letter: &str, passed: bool, chosen: bool| json!({"letter": letter, "passed": passed, "chosen": chosen, "iterations": 1, "costUsd": 0.5});
    let run = |id: &str, at: &str, work: serde_json::Value| {
        serde_json::from_value::<RunRecord>(json!({"runId": id, "startedAt": at, "work": work}))
            .unwrap()
    };
    let runs = [
        run(
            "a",
            "2026-11-02T10:00:00Z",
            json!([{"key": "issue #1", "outcome": "stopped", "total": tally(2, 1.0),
                    "attempts": [attempt("a", true, false), attempt("b", false, false)]}]),
        ),
        run(
            "b",
            "2026-11-03T10:00:00Z",
            json!([{"key": "issue #1", "outcome": "pull request #10 ready for a human",
                    "total": tally(3, 1.5),
                    "attempts": [attempt("a", true, true), attempt("b", false, false),
                                 attempt("c", true, false)]},
                   {"key": "issue #2", "outcome": "unfinished", "total": tally(1, 0.1)}]),
        ),
    ];
    let f = Figures::compute(&runs, &ForgeFacts::default(), None);
    let b = &f.work.best_of;
    assert_eq!((b.issues, b.attempts, b.passed), (1, 3, 2));
    assert_eq!(b.cost_usd, 1.5);
    assert!(
        super::super::table::render(&f)
            .contains("best of N      1 issue(s) · 3 attempt(s), 2 passed the gate · $1.50")
    );
}
