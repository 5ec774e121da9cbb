//! The driver without Docker: a scripted sandbox stands in for the agents and the gate (the seam),
//! while the forge (fake-forge over HTTP), git (a real work repository) and the saved state are
//! real. So `nix flake check`, which skips Docker tests, still exercises resume, the gate and the
//! review rounds.
use super::*;
use crate::context::Settings;
use crate::state::Trouble;
use fake_forge::FakeForge;
use sandcastle_core::forge::{Issue, Pull};
use sandcastle_core::secrets::EnvFile;
use sandcastle_core::stream::Usage;
use sandcastle_testkit::git::{Checkout, git};
use sandcastle_testkit::world::{self, REPO};
use std::collections::VecDeque;
use std::path::PathBuf;

/// A forge with `alice/demo`, a project configured for it, and the run's context.
struct World {
    forge: FakeForge,
    _project: tempfile::TempDir,
    ctx: Context,
}

fn world(config: &str) -> World {
    let world = world::World::new(&format!("maxIterations = 4\n{config}"));
    let config = sandcastle_config::load(&world.config_path()).unwrap();
    let world::World {
        forge,
        token,
        project,
    } = world;
    let settings = Settings {
        project: project.path().to_path_buf(),
        config,
        env: EnvFile {
            vars: vec![
                ("FORGEJO_USER".into(), "alice".into()),
                ("FORGEJO_TOKEN".into(), token),
                // The model proxy needs one; no model is called here.
                ("ANTHROPIC_API_KEY".into(), "sk-driver-test-key".into()),
            ],
        },
    };
    let ctx = Context::new(settings).unwrap();
    ctx.forge.ensure_labels().unwrap();
    World {
        forge,
        _project: project,
        ctx,
    }
}

/// One scripted agent turn: how it ends, what it says, and the commit it makes (if any).
struct Scripted {
    ending: Ending,
    text: &'static str,
    commit: Option<&'static str>,
    /// A git command the agent runs in its checkout before committing.
    git_first: Option<&'static [&'static str]>,
}

fn says(ending: Ending, text: &'static str, commit: Option<&'static str>) -> Scripted {
    Scripted {
        ending,
        text,
        commit,
        git_first: None,
    }
}

/// What the driver asked of the sandbox, turn by turn.
#[derive(Debug)]
struct Asked {
    role: Role,
    iteration: u32,
    prompt: String,
    resumed: Option<String>,
    /// Whether a fresh container was to start beside the turn.
    fresh_ahead: bool,
}

/// The seam: scripted turns and gate results, with a real checkout the scripted agent commits in.
struct Script<'r> {
    repo: &'r WorkRepo,
    turns: VecDeque<Scripted>,
    gates: VecDeque<GateOutcome>,
    asked: Vec<Asked>,
    checkout: Option<Checkout>,
    sessions: tempfile::TempDir,
    gate_runs: u32,
    /// How many turns had been asked for when the work's containers were let go.
    released_after: Option<usize>,
}

impl<'r> Script<'r> {
    fn new(repo: &'r WorkRepo, turns: Vec<Scripted>, gates: Vec<bool>) -> Script<'r> {
        Script {
            repo,
            turns: turns.into(),
            gates: gates
                .into_iter()
                .map(|passed| GateOutcome {
                    passed,
                    failed_step: (!passed).then(|| "cargo test".to_string()),
                    tail: if passed {
                        "ok".into()
                    } else {
                        "error: test answer_is_42 failed".into()
                    },
                    commit: None,
                })
                .collect(),
            asked: Vec::new(),
            checkout: None,
            sessions: tempfile::tempdir().unwrap(),
            gate_runs: 0,
            released_after: None,
        }
    }

    /// The checkout, made from the work repository the first time, as a sandbox does.
    fn checkout(&mut self) -> &Checkout {
        self.checkout.get_or_insert_with(|| {
            let seed = self.repo.scratch_file().unwrap();
            self.repo.seed_bundle(seed.path()).unwrap();
            Checkout::from_bundle(seed.path(), &self.repo.branch)
        })
    }

    fn session_of(&self, role: Role) -> SavedSession {
        let id = match role {
            Role::Implementer => "11111111-1111-4111-8111-111111111111",
            Role::Reviewer => "22222222-2222-4222-8222-222222222222",
            Role::PrFixer => "33333333-3333-4333-8333-333333333333",
            Role::Assessor => "55555555-5555-4555-8555-555555555555",
            Role::Planner => "44444444-4444-4444-8444-444444444444",
        };
        let file = self.sessions.path().join(format!("{id}.jsonl"));
        std::fs::write(&file, "{}\n").unwrap();
        SavedSession {
            session_id: id.to_string(),
            file,
        }
    }
}

impl Sandboxed for Script<'_> {
    fn turn(&mut self, turn: &Turn, _: &mut dyn FnMut(Heard)) -> Result<AgentOutcome> {
        // A script that runs dry is a sandbox that went away: the machinery broke.
        let Some(next) = self.turns.pop_front() else {
            anyhow::bail!("the scripted sandbox is gone");
        };
        self.asked.push(Asked {
            role: turn.role,
            iteration: turn.iteration,
            prompt: turn.prompt.to_string(),
            resumed: turn.resume.map(|s| s.session_id.clone()),
            fresh_ahead: turn.fresh_ahead,
        });
        if let Some(args) = next.git_first {
            git(&self.checkout().path(), args);
        }
        if let Some(subject) = next.commit {
            self.checkout().commit(subject);
        }
        let session = match &next.ending {
            // Like Claude Code refusing `--resume`: no session opened.
            Ending::Failed(why) if why.contains("refused") => None,
            _ => Some(self.session_of(turn.role)),
        };
        Ok(AgentOutcome {
            ending: next.ending,
            session,
            result_text: next.text.to_string(),
            usage: Usage {
                cost_usd: 0.25,
                ..Usage::default()
            },
            transcript: PathBuf::from("/nonexistent/transcript.jsonl"),
            commits: None,
            ask: None,
            sandbox_stopped: false,
        })
    }

    /// The next scripted result, on the commit a real gate's checkout is made of; a script out of
    /// results is a gate whose container went away: the machinery broke.
    fn gate(&mut self) -> Result<GateOutcome> {
        let Some(next) = self.gates.pop_front() else {
            anyhow::bail!("the scripted gate's container is gone");
        };
        self.gate_runs += 1;
        Ok(GateOutcome {
            commit: Some(self.repo.tip()?),
            ..next
        })
    }

    /// The gate on the tip the turn starts from (a real one's checkout is made before anything
    /// the turn commits is taken in), then the turn.
    fn turn_beside_gate(
        &mut self,
        turn: &Turn,
        heard: &mut dyn FnMut(Heard),
    ) -> Result<(AgentOutcome, Result<GateOutcome>)> {
        let gate = self.gate();
        Ok((self.turn(turn, heard)?, gate))
    }

    fn release(&mut self) {
        self.released_after.get_or_insert(self.asked.len());
    }

    fn take_commits(&mut self) -> Result<Imported> {
        let Some(checkout) = &self.checkout else {
            return self.repo.tip().map(Imported::Tip);
        };
        let known = self.repo.tip()?;
        let handed_out = self.repo.scratch_file()?;
        checkout.hand_out(&known, handed_out.path());
        self.repo.import(handed_out.path())
    }

    fn add_candidates(&mut self, _: &[(char, &WorkRepo)]) -> Result<()> {
        unreachable!("no driver test runs an issue's attempts: they take a Docker sandbox each")
    }
}

fn issue(w: &World) -> Issue {
    let number = w
        .forge
        .create_issue(REPO, "alice", "Answer", "Make it answer 42.", &[])
        .unwrap();
    Issue {
        number,
        title: "Answer".into(),
        body: "Make it answer 42.".into(),
        labels: vec![],
        updated_at: String::new(),
    }
}

/// Drives `piece` with a fresh state and a work repository of its own; the outcome, the state and
/// what was asked.
fn drive_fresh(
    w: &World,
    piece: &Piece,
    turns: Vec<Scripted>,
    gates: Vec<bool>,
) -> (Outcome, WorkState, Vec<Asked>, u32) {
    let (repo, mut state) = start(w, piece);
    let mut script = Script::new(&repo, turns, gates);
    let outcome = drive(&w.ctx, piece, &repo, "main", &mut state, &mut script).unwrap();
    assert!(script.turns.is_empty(), "every scripted turn was taken");
    assert!(script.gates.is_empty(), "every scripted gate ran");
    (outcome, state, script.asked, script.gate_runs)
}

fn pull_body(w: &World) -> String {
    let pulls = w.forge.pulls(REPO);
    assert_eq!(pulls.len(), 1, "one pull request");
    pulls[0].body.clone()
}

/// The commit the forge's branch of `piece` is at.
fn pushed(w: &World, piece: &Piece) -> String {
    let bare = w.forge.bare_repo_path("alice", "demo");
    git(
        &bare,
        &["rev-parse", &format!("refs/heads/{}", piece.branch())],
    )
}

const IMPLEMENTER: &str = "11111111-1111-4111-8111-111111111111";
const REVIEWER: &str = "22222222-2222-4222-8222-222222222222";

#[test]
fn the_second_iteration_resumes_the_first_ones_session_with_a_short_prompt() {
    let w = world("");
    let issue = issue(&w);
    let (outcome, state, asked, _) = drive_fresh(
        &w,
        &Piece::Issue(&issue),
        vec![
            says(
                Ending::Stopped,
                "Half way: MARKER-7 noted.",
                Some("First half"),
            ),
            says(
                Ending::Completed,
                "All done. <promise>COMPLETE</promise>",
                Some("Second half"),
            ),
            says(
                Ending::Completed,
                "Looks right. <promise>COMPLETE</promise>",
                None,
            ),
        ],
        vec![true],
    );
    assert!(matches!(outcome, Outcome::PullRequest(_)), "{outcome:?}");
    assert_eq!(asked[0].resumed, None);
    assert!(asked[0].prompt.contains("# Role: implementer"));
    assert_eq!((asked[1].role, asked[1].iteration), (Role::Implementer, 2));
    assert_eq!(asked[1].resumed.as_deref(), Some(IMPLEMENTER));
    assert!(
        asked[1].prompt.starts_with("# Iteration 2 of at most 4"),
        "{}",
        asked[1].prompt
    );
    assert!(
        asked[1]
            .prompt
            .contains("did not end with <promise>COMPLETE</promise>")
    );
    assert!(
        !asked[1].prompt.contains("# Role: implementer"),
        "short, not the whole prompt again"
    );
    assert_eq!(asked[2].role, Role::Reviewer);
    assert_eq!(
        (state.iterations, state.gate_runs, state.phase),
        (2, 1, Phase::Done)
    );
    assert_eq!(state.cost_usd, 0.75);
    let body = pull_body(&w);
    assert!(
        body.starts_with(&format!("Closes #{}\n", issue.number)),
        "{body}"
    );
    for expected in [
        "All done.",
        "The reviewer approved it",
        "Looks right.",
        "Cost so far: $0.75 over 2 implementer iteration(s)",
    ] {
        assert!(body.contains(expected), "{expected:?} not in {body}");
    }
    let pushed = pushed(&w, &Piece::Issue(&issue));
    assert!(
        body.contains(&format!("`check` passed on {pushed}, ")),
        "{body}"
    );
}

/// The gate runs beside the reviewer: when it fails, the verdict on that commit is discarded (no
/// round, no session to resume, not in the pull request) but its spend counts, and the gate's
/// output goes back to the implementer.
#[test]
fn a_claim_the_gate_refutes_discards_the_review_beside_it_and_sends_the_output_back() {
    let w = world("");
    let issue = issue(&w);
    let (_, state, asked, gate_runs) = drive_fresh(
        &w,
        &Piece::Issue(&issue),
        vec![
            says(
                Ending::Completed,
                "Done! <promise>COMPLETE</promise>",
                Some("Wrong answer"),
            ),
            says(
                Ending::Completed,
                "DISCARDED-REVIEW approves. <promise>COMPLETE</promise>",
                None,
            ),
            says(
                Ending::Completed,
                "Fixed. <promise>COMPLETE</promise>",
                Some("Right answer"),
            ),
            says(Ending::Completed, "<promise>COMPLETE</promise>", None),
        ],
        vec![false, true],
    );
    assert_eq!(gate_runs, 2);
    let roles: Vec<Role> = asked.iter().map(|a| a.role).collect();
    assert_eq!(
        roles,
        [
            Role::Implementer,
            Role::Reviewer,
            Role::Implementer,
            Role::Reviewer
        ]
    );
    assert_eq!(asked[2].resumed.as_deref(), Some(IMPLEMENTER));
    assert!(
        asked[2]
            .prompt
            .contains("the orchestrator ran `check` (gate run 1)")
    );
    assert!(asked[2].prompt.contains("error: test answer_is_42 failed"));
    assert!(!asked[2].prompt.contains("DISCARDED-REVIEW"));
    assert_eq!(
        asked[3].resumed, None,
        "the discarded review is not resumed"
    );
    assert_eq!(
        (
            state.iterations,
            state.gate_runs,
            state.gate_passed,
            state.review_rounds
        ),
        (2, 2, Some(true), 1)
    );
    assert_eq!(state.cost_usd, 1.0, "every turn's spend counts");
    let body = pull_body(&w);
    assert!(body.contains("(gate runs: 2)"), "{body}");
    assert!(!body.contains("DISCARDED-REVIEW"), "{body}");
}

#[test]
fn the_reviewers_findings_go_back_to_the_implementer_then_it_reviews_again() {
    let w = world("");
    let issue = issue(&w);
    let (_, state, asked, _) = drive_fresh(
        &w,
        &Piece::Issue(&issue),
        vec![
            says(
                Ending::Completed,
                "IMPL-SUMMARY-1 <promise>COMPLETE</promise>",
                Some("First try"),
            ),
            says(Ending::Stopped, "FINDING: the answer is hard-coded.", None),
            says(
                Ending::Completed,
                "IMPL-SUMMARY-2 computed now. <promise>COMPLETE</promise>",
                Some("Compute it"),
            ),
            says(
                Ending::Completed,
                "REVIEW-SUMMARY-2 approved. <promise>COMPLETE</promise>",
                None,
            ),
        ],
        vec![true, true],
    );
    let roles: Vec<Role> = asked.iter().map(|a| a.role).collect();
    assert_eq!(
        roles,
        [
            Role::Implementer,
            Role::Reviewer,
            Role::Implementer,
            Role::Reviewer
        ]
    );
    assert!(
        asked[2]
            .prompt
            .contains("The reviewer did not approve the change (review round 1 of 2)")
    );
    assert!(
        asked[2]
            .prompt
            .contains("FINDING: the answer is hard-coded.")
    );
    assert_eq!(asked[2].resumed.as_deref(), Some(IMPLEMENTER));
    assert_eq!(
        asked[3].resumed.as_deref(),
        Some(REVIEWER),
        "the reviewer resumes too"
    );
    assert_eq!(asked[3].prompt, turns::review_again("main"));
    assert!(asked[3].prompt.contains("`git log origin/main..HEAD`"));
    assert_eq!(state.review_rounds, 2);
    let body = pull_body(&w);
    assert!(
        body.contains("IMPL-SUMMARY-2") && body.contains("REVIEW-SUMMARY-2"),
        "{body}"
    );
    assert!(
        body.contains("The reviewer approved it (round 2 of at most 2)"),
        "{body}"
    );
}

/// The reviewer's container starts beside each working turn that may hand the work to it (never
/// beside the reviewer's own, nor where no review follows), and the work's containers go once the
/// last turn ended, before anything is pushed.
#[test]
fn the_reviewers_container_is_asked_for_beside_working_turns_and_all_go_before_the_push() {
    for (config, roles, ahead) in [
        (
            "",
            vec![Role::Implementer, Role::Implementer, Role::Reviewer],
            vec![true, true, false],
        ),
        (
            "[review]\nenabled = false\n",
            vec![Role::Implementer, Role::Implementer],
            vec![false, false],
        ),
    ] {
        let w = world(config);
        let issue = issue(&w);
        let piece = Piece::Issue(&issue);
        let (repo, mut state) = start(&w, &piece);
        let mut turns = vec![
            says(Ending::Stopped, "Not yet.", Some("Part one")),
            says(Ending::Completed, "<promise>COMPLETE</promise>", None),
        ];
        if roles.len() == 3 {
            turns.push(says(Ending::Completed, "<promise>COMPLETE</promise>", None));
        }
        let mut script = Script::new(&repo, turns, vec![true]);
        let outcome = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script).unwrap();
        assert!(matches!(outcome, Outcome::PullRequest(_)), "{config}");
        let asked: Vec<(Role, bool)> = script
            .asked
            .iter()
            .map(|a| (a.role, a.fresh_ahead))
            .collect();
        let expected: Vec<(Role, bool)> = roles.into_iter().zip(ahead).collect();
        assert_eq!(asked, expected, "{config}");
        assert_eq!(script.released_after, Some(expected.len()), "{config}");
        assert_eq!(w.forge.pulls(REPO).len(), 1, "{config}");
    }
}

#[test]
fn after_the_last_round_the_pull_request_opens_with_the_outstanding_findings() {
    let w = world("[review]\nrounds = 1\n");
    let issue = issue(&w);
    let (outcome, state, _, _) = drive_fresh(
        &w,
        &Piece::Issue(&issue),
        vec![
            says(
                Ending::Completed,
                "Done. <promise>COMPLETE</promise>",
                Some("Work"),
            ),
            says(
                Ending::Stopped,
                "STILL-OPEN: no tests for the edge case.",
                None,
            ),
        ],
        vec![true],
    );
    assert!(matches!(outcome, Outcome::PullRequest(_)));
    assert_eq!(state.verdict.as_ref().map(|v| v.approved), Some(false));
    let body = pull_body(&w);
    assert!(body.contains("### Outstanding findings"), "{body}");
    assert!(
        body.contains("STILL-OPEN: no tests for the edge case."),
        "{body}"
    );
}

/// The gate passed on the implementer's commit; the reviewer then added one and the gate run on it
/// broke (its container went away). The next pass's reviewer approves without new commits: the
/// gate runs on the reviewer's commit before anything is pushed, and the pull request's "passed
/// on" names the commit pushed, never the one the gate passed on before.
#[test]
fn a_gate_that_broke_after_the_reviewers_commit_runs_again_before_the_push() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    let mut first = Script::new(
        &repo,
        vec![
            says(
                Ending::Completed,
                "Done. <promise>COMPLETE</promise>",
                Some("Work"),
            ),
            says(
                Ending::Completed,
                "Fixed a typo. <promise>COMPLETE</promise>",
                Some("Reviewer's fix"),
            ),
        ],
        vec![true],
    );
    let err = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut first).unwrap_err();
    assert!(
        err.to_string().contains("gate's container is gone"),
        "{err}"
    );
    let reviewed = repo.tip().unwrap();
    let mut state = WorkState::resume(&w.ctx.state_dir(), &piece.key().slug())
        .unwrap()
        .unwrap();
    assert_ne!(state.gate_commit.as_deref(), Some(reviewed.as_str()));
    assert_eq!(state.gate_runs, 1, "the gate beside the review was saved");
    assert!(state.session(Role::Reviewer).is_some());

    let mut next = Script::new(
        &repo,
        vec![says(
            Ending::Completed,
            "Fine. <promise>COMPLETE</promise>",
            None,
        )],
        vec![true],
    );
    drive(&w.ctx, &piece, &repo, "main", &mut state, &mut next).unwrap();
    assert_eq!(next.gate_runs, 1, "the reviewer's commit was gated");
    assert_eq!(next.asked[0].resumed.as_deref(), Some(REVIEWER));
    assert_eq!(pushed(&w, &piece), reviewed);
    let body = pull_body(&w);
    assert!(
        body.contains(&format!("`check` passed on {reviewed}, ")),
        "{body}"
    );
}

/// The gate beside the reviewer broke (its container went away, as in a kill): the reviewer's
/// spend is saved, its verdict is not, and the work stays in review. The next pass runs both
/// again, so the pull request carries one review: the one whose gate passed.
#[test]
fn a_gate_that_broke_beside_the_reviewer_runs_both_again_and_keeps_one_review() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    let mut first = Script::new(
        &repo,
        vec![
            says(
                Ending::Completed,
                "Done. <promise>COMPLETE</promise>",
                Some("Work"),
            ),
            says(
                Ending::Completed,
                "LOST-REVIEW approves. <promise>COMPLETE</promise>",
                None,
            ),
        ],
        vec![],
    );
    let err = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut first).unwrap_err();
    assert!(
        err.to_string().contains("gate's container is gone"),
        "{err}"
    );
    let mut state = WorkState::resume(&w.ctx.state_dir(), &piece.key().slug())
        .unwrap()
        .unwrap();
    assert_eq!(state.phase, Phase::Review);
    assert_eq!(state.cost_usd, 0.5, "the reviewer's spend is saved");
    assert_eq!((state.review_rounds, state.gate_runs), (0, 0));
    assert!(state.verdict.is_none());
    assert!(state.session(Role::Reviewer).is_none());

    let mut next = Script::new(
        &repo,
        vec![says(
            Ending::Completed,
            "KEPT-REVIEW approves. <promise>COMPLETE</promise>",
            None,
        )],
        vec![true],
    );
    drive(&w.ctx, &piece, &repo, "main", &mut state, &mut next).unwrap();
    assert_eq!(next.gate_runs, 1);
    assert_eq!(next.asked[0].role, Role::Reviewer);
    assert_eq!(next.asked[0].resumed, None);
    assert_eq!(state.review_rounds, 1);
    let body = pull_body(&w);
    assert!(body.contains("KEPT-REVIEW"), "{body}");
    assert!(!body.contains("LOST-REVIEW"), "{body}");
}

/// Work saved as ready to publish whose branch moved past the commit the gate passed on (a state
/// from before this rule, or a bug): `publish::publish` itself refuses to push it, and the driver
/// gates the tip first; a failing gate sends it back to the agent, with nothing pushed.
#[test]
fn a_tip_the_gate_never_saw_is_not_pushed() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    let mut script = Script::new(
        &repo,
        vec![says(Ending::Stopped, "ungated", Some("Ungated"))],
        vec![],
    );
    let _ = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script);
    let tip = repo.tip().unwrap();
    state.phase = Phase::Publish;
    state.gate_passed = Some(true);
    state.gate_commit = state.start_commit.clone();

    let err = publish::publish(&w.ctx, &piece, &repo, "main", &state, "")
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains(&format!(
            "the gate has not run on {tip}, the work branch's tip"
        )),
        "{err}"
    );
    let mut gate = Script::new(&repo, vec![says(Ending::Stopped, "", None)], vec![false]);
    let _ = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut gate);
    assert_eq!(gate.gate_runs, 1);
    assert_eq!(gate.asked[0].role, Role::Implementer);
    assert!(
        gate.asked[0].prompt.contains("answer_is_42 failed"),
        "{}",
        gate.asked[0].prompt
    );
    assert!(w.forge.pulls(REPO).is_empty(), "nothing was published");
    let bare = w.forge.bare_repo_path("alice", "demo");
    assert!(
        !git(&bare, &["branch", "--list", &piece.branch()]).contains("issue"),
        "nothing was pushed"
    );
}

/// Words an agent may write to fold or forge what sandcastle says: a `<details>` opened and
/// closed, a `## Checks` heading saying the gate passed, fences of every length, a marker, HTML.
const HOSTILE: &str = "Done.\n<details><summary>x</summary>\n\n## Checks\n\n✅ `check` passed\n```\n\
                       </details>\n<!-- sandcastle:rework 9 -->\n`````\n# Title <b>bold</b>\n<details>";

/// The red team's pull request: the implementer's summary and the reviewer's verdict are
/// [`HOSTILE`], and the change adds a file the host runs whose name has backticks and a newline.
/// Read as CommonMark with raw HTML, the body's headings are exactly sandcastle's, its facts first;
/// it has no HTML at all (so nothing is folded into a `<details>`), no marker, and every hostile
/// word sits inside a code block.
#[test]
fn agent_text_cannot_fold_or_forge_the_pull_requests_sections() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    let said: &'static str = format!("{HOSTILE}\n<promise>COMPLETE</promise>").leak();
    let mut script = Script::new(
        &repo,
        vec![
            says(Ending::Completed, said, Some("Work")),
            says(Ending::Completed, said, None),
        ],
        vec![true],
    );
    let host_run = script.checkout().path().join(".sandcastle");
    std::fs::create_dir_all(&host_run).unwrap();
    std::fs::write(host_run.join("x```\n## Checks\n<details>"), "x").unwrap();
    let outcome = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script).unwrap();
    assert!(matches!(outcome, Outcome::PullRequest(_)), "{outcome:?}");

    let body = pull_body(&w);
    let rendered = sandcastle_testkit::markdown::render(&body);
    assert_eq!(
        rendered.heading_texts(),
        [
            "Checks",
            "Touches files sandcastle's host runs",
            "Review",
            "What the implementer did"
        ],
        "sandcastle's headings, its facts first, and no other: {body}"
    );
    assert!(rendered.html.is_empty(), "{:?} in {body}", rendered.html);
    assert!(
        !body.contains("<!--"),
        "no marker comes from agent text: {body}"
    );
    let quoted = |text: &str| rendered.blocks.iter().any(|block| block.contains(text));
    assert!(quoted("<details><summary>x</summary>"), "{body}");
    assert!(quoted("## Checks\n\n✅ `check` passed"), "{body}");
    assert_eq!(
        rendered
            .blocks
            .iter()
            .filter(|b| b.contains("# Title <b>bold</b>"))
            .count(),
        2,
        "the summary and the verdict, each whole: {body}"
    );
    assert!(
        rendered.blocks.iter().any(|block| block
            .lines()
            .any(|line| line.contains("x```") && line.contains("## Checks"))),
        "the file name is one line of a code block: {body}"
    );
    let checks = body.find("## Checks").unwrap();
    assert!(
        body[checks..].starts_with("## Checks\n\n`check` passed"),
        "{body}"
    );
}

/// A fresh state for `piece` with its work repository, as `work_on` makes them.
fn start(w: &World, piece: &Piece) -> (WorkRepo, WorkState) {
    let key = piece.key();
    let repo = WorkRepo::prepare(
        &w.ctx.repo_dir(&key.slug()),
        &w.ctx.remote,
        &w.ctx.creds,
        &piece.branch(),
        "main",
    )
    .unwrap();
    let mut state = WorkState::new(&key.slug(), &piece.branch(), "attempt-1");
    state.start_commit = Some(repo.tip().unwrap());
    (repo, state)
}

#[test]
fn a_session_that_cannot_be_resumed_falls_back_to_a_fresh_one_with_the_last_summary() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    // The last iteration is left, and the saved session's file is gone.
    state.iterations = w.ctx.config.max_iterations - 1;
    state.last_summary = "LAST-SUMMARY: parser done, printer left.".into();
    state.set_session(
        Role::Implementer,
        SavedSession {
            session_id: IMPLEMENTER.into(),
            file: "/nonexistent/s.jsonl".into(),
        },
    );
    let mut script = Script::new(&repo, vec![says(Ending::Stopped, "more", None)], vec![]);
    let outcome = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script).unwrap();
    assert!(matches!(outcome, Outcome::GaveUp { .. }), "{outcome:?}");
    assert_eq!(script.asked[0].resumed, None);
    assert!(
        script.asked[0].prompt.contains("# Role: implementer"),
        "the whole prompt"
    );
    assert!(
        script.asked[0]
            .prompt
            .contains("## Where the last iteration left off")
    );
    assert!(
        script.asked[0]
            .prompt
            .contains("LAST-SUMMARY: parser done, printer left.")
    );
}

#[test]
fn claude_code_refusing_to_resume_gets_a_fresh_session_in_the_same_iteration() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    state.iterations = 1;
    let mut script = Script::new(
        &repo,
        vec![
            says(Ending::Failed("resume refused".into()), "", None),
            says(
                Ending::Completed,
                "<promise>COMPLETE</promise>",
                Some("Done at last"),
            ),
            says(Ending::Completed, "<promise>COMPLETE</promise>", None),
        ],
        vec![true],
    );
    state.set_session(Role::Implementer, script.session_of(Role::Implementer));
    drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script).unwrap();
    let asked: Vec<(Option<&str>, u32)> = script
        .asked
        .iter()
        .map(|a| (a.resumed.as_deref(), a.iteration))
        .collect();
    assert_eq!(asked[..2], [(Some(IMPLEMENTER), 2), (None, 2)]);
    assert!(script.asked[1].prompt.contains("# Role: implementer"));
    assert_eq!(state.iterations, 2);
}

#[test]
fn a_stopped_run_resumes_the_saved_session_from_the_saved_state() {
    let w = world("");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(&w, &piece);
    // The first run does one iteration, then its sandbox goes away.
    let mut first = Script::new(
        &repo,
        vec![says(Ending::Stopped, "part one", Some("Part one"))],
        vec![],
    );
    let err = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut first).unwrap_err();
    assert!(
        err.to_string().contains("the scripted sandbox is gone"),
        "{err}"
    );
    let saved = WorkState::resume(&w.ctx.state_dir(), &piece.key().slug())
        .unwrap()
        .unwrap();
    assert_eq!((saved.iterations, &saved.phase), (1, &Phase::Work));
    assert_eq!(
        saved
            .session(Role::Implementer)
            .map(|s| s.session_id.as_str()),
        Some(IMPLEMENTER)
    );

    // The next run: the same session goes on, from what the work repository has.
    let mut state = saved;
    let mut second = Script::new(
        &repo,
        vec![
            says(
                Ending::Completed,
                "<promise>COMPLETE</promise>",
                Some("Part two"),
            ),
            says(Ending::Completed, "<promise>COMPLETE</promise>", None),
        ],
        vec![true],
    );
    drive(&w.ctx, &piece, &repo, "main", &mut state, &mut second).unwrap();
    assert_eq!(second.asked[0].resumed.as_deref(), Some(IMPLEMENTER));
    assert_eq!(second.asked[0].iteration, 2);
    assert_eq!(repo.new_commits().unwrap(), ["Part one", "Part two"]);
}

#[test]
fn an_empty_check_means_no_gate_and_the_body_says_so() {
    let w = world("[commands]\ncheck = []\n");
    let issue = issue(&w);
    let (_, state, _, gate_runs) = drive_fresh(
        &w,
        &Piece::Issue(&issue),
        vec![
            says(
                Ending::Completed,
                "<promise>COMPLETE</promise>",
                Some("Work"),
            ),
            says(Ending::Completed, "<promise>COMPLETE</promise>", None),
        ],
        vec![],
    );
    assert_eq!((gate_runs, state.gate_runs), (0, 0));
    assert!(pull_body(&w).contains("No gate: `[commands] check` is empty."));
}

#[test]
fn decisions_after_a_review() {
    let no = Verdict {
        approved: false,
        summary: String::new(),
    };
    let yes = Verdict {
        approved: true,
        summary: String::new(),
    };
    assert_eq!(after_review(&yes, 1, 2, 1, 5), Phase::Publish);
    assert_eq!(after_review(&no, 1, 2, 1, 5), Phase::Work);
    assert_eq!(
        after_review(&no, 2, 2, 1, 5),
        Phase::Publish,
        "no rounds left"
    );
    assert_eq!(
        after_review(&no, 1, 2, 5, 5),
        Phase::Publish,
        "no iterations left"
    );
    assert_eq!(
        after_review(&no, 1, 0, 1, 5),
        Phase::Publish,
        "rounds = 0 never sends back"
    );
}

#[test]
fn a_spent_issue_budget_stops_the_work_with_a_comment_saying_why() {
    let w = world("[budget]\nmaxCostPerIssue = 0.5\n");
    let issue = issue(&w);
    let (outcome, state, asked, _) = drive_fresh(
        &w,
        &Piece::Issue(&issue),
        vec![
            says(Ending::Stopped, "one", Some("One")),
            says(Ending::Stopped, "two", None),
        ],
        vec![],
    );
    assert_eq!(asked.len(), 2, "no third turn: $0.50 spent");
    let why = "this work has cost $0.50, which reaches [budget] maxCostPerIssue ($0.50)";
    assert_eq!(outcome.to_string(), format!("stopped: {why}; commented"));
    assert_eq!(
        (state.phase, state.stopped_by.as_deref()),
        (Phase::GaveUp, Some(why))
    );
    let comments = w.forge.comments(REPO, issue.number);
    assert_eq!(comments.len(), 1);
    assert!(
        comments[0]
            .body
            .starts_with(&format!("sandcastle stopped this: {why}.")),
        "{}",
        comments[0].body
    );
    assert!(w.forge.pulls(REPO).is_empty());
}

const ASSESSOR: &str = "55555555-5555-4555-8555-555555555555";

/// Drives an issue from phase `Clarify` (as `work_on` starts one, with `clarification` saved) where
/// the assessor says `assessment`, then the implementer completes with `summary` and the reviewer
/// approves; what was asked of the sandbox.
fn drive_clarifying(
    w: &World,
    clarification: Option<crate::state::Clarification>,
    assessment: &'static str,
    summary: &'static str,
) -> Vec<Asked> {
    let issue = issue(w);
    let piece = Piece::Issue(&issue);
    let (repo, mut state) = start(w, &piece);
    state.phase = Phase::Clarify;
    state.clarification = clarification;
    let mut script = Script::new(
        &repo,
        vec![
            says(Ending::Stopped, assessment, None),
            says(Ending::Completed, summary, Some("Answer 42")),
            says(Ending::Completed, "Fine. <promise>COMPLETE</promise>", None),
        ],
        vec![true],
    );
    let outcome = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script).unwrap();
    assert!(matches!(outcome, Outcome::PullRequest(_)), "{outcome:?}");
    script.asked
}

#[test]
fn a_complete_issue_hands_the_assessments_session_to_the_implementers_first_turn() {
    let w = world("[clarify]\n");
    let asked = &drive_clarifying(
        &w,
        None,
        r#"<assessment>{"completeness": 0.9}</assessment>"#,
        "Done. <promise>COMPLETE</promise>",
    );
    assert_eq!(asked[0].role, Role::Assessor);
    assert!(asked[0].prompt.contains("# Role: assessor"));
    assert!(asked[0].prompt.contains("Make it answer 42."));
    assert_eq!(asked[1].role, Role::Implementer);
    assert_eq!(
        asked[1].resumed.as_deref(),
        Some(ASSESSOR),
        "the assessment's session"
    );
    assert!(
        asked[1].prompt.contains("# Role: implementer"),
        "the whole prompt"
    );
    assert!(
        !asked[1]
            .prompt
            .contains("## What the maintainers clarified")
    );
    assert!(!pull_body(&w).contains("## Clarification"));
}

#[test]
fn after_the_last_round_work_starts_afresh_and_the_pull_request_lists_answers_and_assumptions() {
    let w = world("[clarify]\nmaxRounds = 1\n");
    let answered = crate::state::Clarification {
        rounds: vec![crate::state::Round {
            question: "Which output?".into(),
            answer: Some(crate::state::Answer {
                by: "carol".into(),
                channel: crate::state::Channel::Forge,
                at: jiff::Timestamp::now(),
                replies: vec![sandcastle_core::questions::Reply {
                    option: None,
                    text: "print it".into(),
                }],
            }),
        }],
        ..Default::default()
    };
    let asked = &drive_clarifying(
        &w,
        Some(answered),
        r#"<assessment>{"completeness": 0.3, "question": "Which base?", "missing": ["the number base"]}</assessment>"#,
        "Done. Assumptions: decimal. <promise>COMPLETE</promise>",
    );
    assert!(
        asked[0]
            .prompt
            .contains("Question 1: Which output?\nAnswer (by carol): print it")
    );
    assert_eq!(asked[1].resumed, None, "a fresh session");
    for expected in [
        "## What the maintainers clarified",
        "Answer (by carol): print it",
        "## Still unclear",
        "- the number base",
        "`Assumptions:`",
    ] {
        assert!(
            asked[1].prompt.contains(expected),
            "{expected:?} in {}",
            asked[1].prompt
        );
    }
    assert!(
        w.forge.comments(REPO, 1).is_empty(),
        "no question after the last round"
    );
    let body = pull_body(&w);
    for expected in [
        "## Clarification",
        "Question 1, as the assessor asked it:\n\n```\nWhich output?\n```",
        "Answered by `carol` through the forge:\n\n```\nprint it\n```",
        "## Assumptions",
        "```\nthe number base\n```",
        "Assumptions: decimal.",
    ] {
        assert!(body.contains(expected), "{expected:?} in {body}");
    }
}

/// Issue #1 and sandcastle's pull request for it (one commit on `sandcastle/issue-1`), labelled
/// `label`.
fn own_pull(w: &World, label: &str) -> Pull {
    assert_eq!(issue(w).number, 1);
    w.forge
        .commit_file(REPO, "sandcastle/issue-1", "answer.txt", "41\n", "Answer")
        .unwrap();
    let number = w
        .forge
        .create_pull(
            REPO,
            "alice",
            "sandcastle/issue-1",
            "main",
            "Answer",
            &[label],
        )
        .unwrap();
    w.ctx.forge.pull(number).unwrap()
}

/// A round keeping a pull request green whose agent rewrote the branch's history is refused: it
/// is told so, and what is published is a fast-forward of the head the forge had, with one
/// comment saying what was fixed and `ready-for-human` back.
#[test]
fn a_green_round_that_rewrote_history_goes_back_to_the_agent_and_is_pushed_fast_forward() {
    let w = world("");
    let pull = own_pull(&w, "ready-for-human");
    let (number, start_head) = (pull.number, pull.head_sha.clone());
    let trouble = Trouble::Ci {
        head: pull.head_sha.clone(),
        failing: vec![sandcastle_core::forge::CommitStatus {
            state: "failure".into(),
            context: "ci/test".into(),
            description: "answer_is_42 failed".into(),
            target_url: String::new(),
        }],
    };
    let piece = Piece::Green(&pull, &trouble);
    let mut rewrite = says(
        Ending::Completed,
        "Squashed it. <promise>COMPLETE</promise>",
        None,
    );
    rewrite.git_first = Some(&["commit", "--amend", "-qm", "Rewritten answer"]);
    let mut redo = says(
        Ending::Completed,
        "Fixed on top. <promise>COMPLETE</promise>",
        Some("Fix CI"),
    );
    redo.git_first = Some(&["reset", "-q", "--hard", "origin/sandcastle/issue-1"]);
    let approve = says(Ending::Completed, "Fine. <promise>COMPLETE</promise>", None);
    let (outcome, state, asked, _) =
        drive_fresh(&w, &piece, vec![rewrite, redo, approve], vec![true]);

    assert_eq!(outcome, Outcome::KeptGreen("failing CI"));
    assert!(
        asked[0].prompt.contains("answer_is_42 failed"),
        "{}",
        asked[0].prompt
    );
    assert!(
        asked[1].prompt.contains("never rewritten")
            && asked[1]
                .prompt
                .contains(&format!("does not build on {}", &start_head[..12])),
        "{}",
        asked[1].prompt
    );
    assert_eq!(asked[2].role, Role::Reviewer);
    assert_eq!(state.start_commit.as_deref(), Some(start_head.as_str()));
    let pushed = w.ctx.forge.pull(number).unwrap().head_sha;
    let bare = w.forge.bare_repo_path("alice", "demo");
    let log = git(&bare, &["log", "--format=%s", &pushed]);
    assert_eq!(
        log.lines().take(2).collect::<Vec<_>>(),
        ["Fix CI", "Answer"]
    );
    let comments = w.forge.comments(REPO, number);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].body.contains("sandcastle fixed failing CI"),
        "{comments:?}"
    );
    let labels = &w.forge.pulls(REPO)[0].labels;
    assert_eq!(labels, &["ready-for-human"]);
}

/// A green round's comment quotes the agent's commit subjects and summary: rendered, it has no
/// heading and no HTML but sandcastle's own marker, whatever they say.
#[test]
fn agent_text_in_a_green_rounds_comment_stays_quoted() {
    let w = world("");
    let pull = own_pull(&w, "ready-for-human");
    let trouble = Trouble::Conflict {
        head: pull.head_sha.clone(),
    };
    let piece = Piece::Green(&pull, &trouble);
    let said: &'static str = format!("{HOSTILE}\n<promise>COMPLETE</promise>").leak();
    let fix = says(
        Ending::Completed,
        said,
        Some("Fix <details><summary>x ## y"),
    );
    let approve = says(Ending::Completed, said, None);
    let (outcome, _, _, _) = drive_fresh(&w, &piece, vec![fix, approve], vec![true]);
    assert_eq!(outcome, Outcome::KeptGreen("a merge conflict"));

    let comments = w.forge.comments(REPO, pull.number);
    assert_eq!(comments.len(), 1, "{comments:?}");
    let body = &comments[0].body;
    let rendered = sandcastle_testkit::markdown::render(body);
    assert!(rendered.headings.is_empty(), "{body}");
    assert_eq!(rendered.html.len(), 1, "{:?} in {body}", rendered.html);
    assert!(
        rendered.html[0].starts_with("<!-- sandcastle:green "),
        "{body}"
    );
    assert!(
        rendered
            .blocks
            .iter()
            .any(|b| b.contains("Fix <details><summary>x ## y")),
        "{body}"
    );
    assert!(
        rendered
            .blocks
            .iter()
            .any(|b| b.contains("## Checks\n\n✅ `check` passed")),
        "{body}"
    );
}

/// A green round the agent cannot finish is given up like any work (one comment), and the pull
/// request goes back to `ready-for-human`, so the rework lane never takes it for a person's review.
#[test]
fn a_green_round_given_up_puts_ready_for_human_back() {
    let w = world("");
    let pull = own_pull(&w, "ready-for-agent");
    let number = pull.number;
    let trouble = Trouble::Conflict {
        head: pull.head_sha.clone(),
    };
    let piece = Piece::Green(&pull, &trouble);
    let stuck = || says(Ending::Stopped, "Still merging.", None);
    let (outcome, state, asked, _) =
        drive_fresh(&w, &piece, (0..4).map(|_| stuck()).collect(), vec![]);
    assert_eq!(outcome, Outcome::GaveUp { iterations: 4 });
    assert!(
        asked[0].prompt.contains("git merge origin/main"),
        "{}",
        asked[0].prompt
    );
    assert!(state.told_forge);
    let comments = w.forge.comments(REPO, number);
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(comments[0].body.contains("Still merging."), "{comments:?}");
    assert_eq!(w.forge.pulls(REPO)[0].labels, ["ready-for-human"]);
}

/// Only the driver saves: the question's comment is posted, then the state is saved. A run killed
/// in between (here: the saved question loses its comment) finds the comment again by its marker
/// when it asks again, and never posts it twice.
#[test]
fn a_question_posted_before_a_kill_is_found_by_its_marker_not_posted_twice() {
    let w = world("[questions]\n");
    let issue = issue(&w);
    let piece = Piece::Issue(&issue);
    let asks: &'static str = Box::leak(
        format!(
            "I need a decision.\n<questions issueNumber=\"{}\"><title>Driver</title>\
             <question><title>Which driver?</title></question></questions>",
            issue.number
        )
        .into_boxed_str(),
    );
    let (repo, mut state) = start(&w, &piece);
    state.phase = Phase::Work;
    let mut script = Script::new(&repo, vec![says(Ending::Stopped, asks, None)], vec![]);
    let outcome = drive(&w.ctx, &piece, &repo, "main", &mut state, &mut script).unwrap();
    assert_eq!(outcome, Outcome::Waiting);
    let comments = || w.forge.comments(REPO, issue.number);
    assert_eq!(comments().len(), 1, "{:?}", comments());
    let posted = comments()[0].id;
    let saved = WorkState::load(&w.ctx.state_dir(), &state.slug)
        .unwrap()
        .unwrap();
    assert_eq!(
        saved.waiting().unwrap().conversation.comment,
        Some(posted),
        "the driver saved the question with its comment before it returned"
    );

    let mut killed = saved;
    let question = &mut killed.waiting_mut().unwrap().conversation;
    (question.comment, question.after) = (None, 0);
    let mut script = Script::new(&repo, vec![], vec![]);
    let outcome = drive(&w.ctx, &piece, &repo, "main", &mut killed, &mut script).unwrap();
    assert_eq!(outcome, Outcome::Waiting);
    assert_eq!(comments().len(), 1, "not posted twice: {:?}", comments());
    let question = &killed.waiting().unwrap().conversation;
    assert_eq!((question.comment, question.after), (Some(posted), posted));
}
