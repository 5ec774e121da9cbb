//! Before the implementer's first turn on an issue: the assessor scores how complete the issue is
//! (`assessment.rs`). A complete issue starts at once, the implementer resuming the assessment's
//! session; an incomplete one gets exactly one question a round through part 1's machinery (the
//! saved `Waiting`, `needs-info`, writers' answers), and each answer is what the next assessment
//! sees, for at most `[clarify] maxRounds` rounds. An assessment that fails never blocks: work
//! starts and the report says so. With nobody to ask, the run stops (exit status 3) with guidance.
use crate::asking;
use crate::context::Context;
use crate::seam::{Sandboxed, Turn};
use crate::state::{Answer, Clarification, Outcome, Phase, Round, WorkState};
use anyhow::Result;
use sandcastle_core::agent::{Ending, TimeLimit};
use sandcastle_core::assessment::{self, Assessment};
use sandcastle_core::forge::Issue;
use sandcastle_core::forge_text::{quote, quote_inline};
use sandcastle_core::questions::{Question, Questions};
use sandcastle_core::role::{Role, WorkKey};

/// What one assessment leads to.
#[derive(Debug, PartialEq)]
enum Decision {
    /// Clear enough: work starts, resuming the assessment's session.
    Start,
    /// The assessment is unusable: work starts without it.
    Degraded(String),
    /// One question to a person.
    Ask(Assessment),
    /// Still unclear, but no round is left: work starts and decides what is missing.
    Assume(Assessment),
}

fn decide(
    verdict: Result<Assessment, String>,
    threshold: f64,
    asked: u32,
    max_rounds: u32,
) -> Decision {
    match verdict {
        Err(why) => Decision::Degraded(why),
        Ok(a) if a.completeness >= threshold => Decision::Start,
        Ok(a) if asked >= max_rounds => Decision::Assume(a),
        Ok(a) if a.question.is_empty() => Decision::Degraded(format!(
            "the assessment scored {:.2}, below [clarify] threshold {threshold:.2}, but asked no question",
            a.completeness
        )),
        Ok(a) => Decision::Ask(a),
    }
}

/// The `Clarify` phase of an issue: one assessment and what follows from it. `Some` outcome ends
/// the driver's work for now (nobody to ask).
pub fn step(
    ctx: &Context,
    issue: &Issue,
    state: &mut WorkState,
    sandbox: &mut dyn Sandboxed,
) -> Result<Option<Outcome>> {
    let key = WorkKey::Issue(issue.number);
    if !ctx.clarifies {
        state.phase = Phase::Work;
        return Ok(None);
    }
    let settings = &ctx.config.clarify;
    let clarification = state.clarification.get_or_insert_default();
    let asked = clarification.asked();
    let prompt = assessment_prompt(ctx, issue, clarification, settings.threshold)?;
    let outcome = sandbox.turn(
        &Turn {
            role: Role::Assessor,
            iteration: asked + 1,
            counted: asked + 1,
            max_iterations: settings.max_rounds + 1,
            prompt: &prompt,
            resume: None,
            time_limit: Some(TimeLimit {
                after: settings.timeout,
                key: "[clarify] timeout",
            }),
            fresh_ahead: false,
        },
        &mut |_| {},
    )?;
    state.cost_usd += outcome.usage.cost_usd;
    let clarification = state.clarification.get_or_insert_default();
    let verdict = match &outcome.ending {
        Ending::Failed(why) => Err(format!("the assessment failed: {why}")),
        Ending::Completed | Ending::Stopped => assessment::parse(&outcome.result_text),
    };
    let line = match decide(verdict, settings.threshold, asked, settings.max_rounds) {
        Decision::Start => {
            let how = match outcome.session {
                Some(session) => {
                    state.set_session(Role::Implementer, session);
                    "the implementer resumes the assessment's session"
                }
                None => "the assessment left no session, so the implementer starts afresh",
            };
            state.phase = Phase::Work;
            format!("clear enough to start after {asked} question(s); {how}")
        }
        Decision::Degraded(why) => {
            clarification.degraded = Some(why.clone());
            state.phase = Phase::Work;
            format!("degraded: {why}; work started without it")
        }
        Decision::Assume(assessment) => {
            clarification.unclear = if assessment.missing.is_empty() {
                vec![assessment.question]
            } else {
                assessment.missing
            };
            state.phase = Phase::Work;
            format!(
                "still unclear after {asked} question(s) ([clarify] maxRounds); work started, the assumptions go into the pull request"
            )
        }
        Decision::Ask(assessment) if asking::reachable(ctx).is_empty() => {
            ctx.report
                .set_clarification(&key.to_string(), "unclear, and nobody to ask");
            return Ok(Some(Outcome::Unclear(guidance(ctx, issue, &assessment))));
        }
        Decision::Ask(assessment) => {
            let round = asked + 1;
            clarification.rounds.push(Round {
                question: assessment.question.clone(),
                answer: None,
            });
            state.phase = asking::waiting(ctx, question(&assessment, round, settings.max_rounds));
            waiting_line(round, settings.max_rounds)
        }
    };
    ctx.progress.note(&format!("{key}: {line}"));
    ctx.report.set_clarification(&key.to_string(), &line);
    Ok(None)
}

/// Takes `answer` as the answer to the open clarification round, if there is one: the issue goes
/// back to its assessment. `false`: the question was an agent's, not a clarification.
pub fn take_answer(state: &mut WorkState, answer: &Answer) -> bool {
    let open = state
        .clarification
        .as_mut()
        .and_then(|c| c.rounds.last_mut())
        .filter(|round| round.answer.is_none());
    match open {
        Some(round) => {
            round.answer = Some(answer.clone());
            state.phase = Phase::Clarify;
            true
        }
        None => false,
    }
}

/// `sandcastle run --yes` on an issue whose clarification question still waits: work starts now,
/// the open question becomes what the implementer has to assume (and the pull request says so).
/// `false`: the issue waits for no clarification.
pub fn release(ctx: &Context, number: u64, state: &mut WorkState) -> Result<bool> {
    let Some(c) = state.clarification.as_mut() else {
        return Ok(false);
    };
    let Some(open) = c.rounds.pop_if(|round| round.answer.is_none()) else {
        return Ok(false);
    };
    c.unclear = vec![open.question];
    state.phase = Phase::Work;
    // The caller saves after: a kill before that releases it again, which repeats harmlessly.
    ctx.forge.remove_label(number, "needs-info")?;
    ctx.progress.note(&format!(
        "issue #{number}: `run --yes`: work starts without the clarification's answer; the open question goes into the pull request as an assumption"
    ));
    Ok(true)
}

/// The report's line for an issue whose clarification question still waits, if it is one.
pub fn still_waiting(ctx: &Context, state: &WorkState) -> Option<String> {
    let c = state.clarification.as_ref()?;
    c.rounds.last().filter(|round| round.answer.is_none())?;
    Some(waiting_line(c.asked(), ctx.config.clarify.max_rounds))
}

fn waiting_line(round: u32, max_rounds: u32) -> String {
    format!("waits for clarification: question {round} of at most {max_rounds}")
}

/// What an implementer in a fresh session is told of the clarification (one that resumes the
/// assessment's session has read it there).
pub fn for_implementer(state: &WorkState) -> String {
    match &state.clarification {
        Some(c) => crate::prompts::clarified(&c.transcript(), &c.unclear),
        None => String::new(),
    }
}

/// The pull request body's section on the clarification: every answer, and what the implementer
/// had to assume; the assessor's questions and people's answers quoted (`forge_text::quote`).
/// Empty when nothing was asked or assumed.
pub fn pull_section(state: &WorkState) -> String {
    let Some(c) = &state.clarification else {
        return String::new();
    };
    let mut text = String::new();
    if !c.rounds.is_empty() {
        text +=
            "\n\n## Clarification\n\nBefore work started, sandcastle asked one question a round.\n";
        for (index, round) in c.rounds.iter().enumerate() {
            text += &format!(
                "\nQuestion {}, as the assessor asked it:\n\n{}\n",
                index + 1,
                quote(&round.question)
            );
            if let Some(answer) = &round.answer {
                let replies: Vec<&str> = answer.replies.iter().map(|r| r.text.as_str()).collect();
                text += &format!(
                    "\nAnswered by {} through {}:\n\n{}\n",
                    quote_inline(&answer.by),
                    answer.channel,
                    quote(&replies.join("\n"))
                );
            }
        }
    }
    if !c.unclear.is_empty() {
        text += &format!(
            "\n\n## Assumptions\n\nThe issue was still unclear when work started, after {} answered \
             question(s) (the rounds ran out, or `run --yes` started it); the implementer decided \
             these points itself (its summary says what it assumed):\n",
            c.rounds
                .iter()
                .filter(|round| round.answer.is_some())
                .count()
        );
        for point in &c.unclear {
            text += &format!("\n{}\n", quote(point));
        }
    }
    if let Some(why) = &c.degraded {
        text += &format!(
            "\n\nThe clarification was degraded ({}); work started without it.\n",
            quote_inline(why)
        );
    }
    text
}

fn assessment_prompt(
    ctx: &Context,
    issue: &Issue,
    clarification: &Clarification,
    threshold: f64,
) -> Result<String> {
    let discussion: Vec<String> = ctx
        .forge
        .comments(issue.number)?
        .into_iter()
        .filter(|c| c.author != ctx.login)
        .map(|c| format!("{} wrote:\n{}", c.author, c.body))
        .collect();
    let discussion = if discussion.is_empty() {
        "(no comments)".to_string()
    } else {
        discussion.join("\n\n")
    };
    let transcript = match clarification.transcript() {
        t if t.is_empty() => "(none yet)".to_string(),
        t => t,
    };
    let number = issue.number.to_string();
    let threshold = format!("{threshold:.2}");
    ctx.prompt(
        Role::Assessor.prompt(),
        &[
            ("ISSUE_NUMBER", &number),
            ("ISSUE_TITLE", &issue.title),
            ("ISSUE_BODY", &issue.body),
            ("ISSUE_DISCUSSION", &discussion),
            ("CLARIFICATIONS", &transcript),
            ("THRESHOLD", &threshold),
        ],
    )
}

/// The assessment's one question, in part 1's shape: free text, no options.
fn question(assessment: &Assessment, round: u32, max_rounds: u32) -> Questions {
    let mut prose = String::new();
    if !assessment.missing.is_empty() {
        prose += &format!(
            "What the issue does not say yet: {}.",
            assessment.missing.join("; ")
        );
    }
    if !assessment.example.is_empty() {
        prose += &format!(
            " An example of a complete statement: {}",
            assessment.example
        );
    }
    Questions {
        title: format!(
            "Before work starts: clarification, question {round} of at most {max_rounds}"
        ),
        prose: prose.trim().to_string(),
        items: vec![Question {
            title: assessment.question.clone(),
            prose: String::new(),
            options: Vec::new(),
        }],
    }
}

/// What a person in CI reads on stderr when the issue is unclear and nobody can be asked: the
/// issue, what is missing, an example of a complete statement, and what to do. The assessor's
/// words are shown without control characters.
fn guidance(ctx: &Context, issue: &Issue, assessment: &Assessment) -> String {
    let plain = |text: &str| -> String {
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    let mut text = format!(
        "issue #{} {:?} is not clear enough to start work (completeness {:.2}, [clarify] threshold {:.2}), \
         and no question handler can reach a person in this run.\n",
        issue.number,
        plain(&issue.title),
        assessment.completeness,
        ctx.config.clarify.threshold
    );
    if !assessment.missing.is_empty() {
        text += "What is missing:\n";
        for point in &assessment.missing {
            text += &format!("  - {}\n", plain(point));
        }
    }
    text += &format!("The question to answer: {}\n", plain(&assessment.question));
    if !assessment.example.is_empty() {
        text += &format!(
            "An example of a complete statement: {}\n",
            plain(&assessment.example)
        );
    }
    text += &format!(
        "Edit issue #{} to say this, or configure a handler that reaches a person ([questions] handlers), \
         or run with `sandcastle run --yes` to start work without clarifying.",
        issue.number
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assessment(completeness: f64, question: &str) -> Assessment {
        Assessment {
            completeness,
            question: question.to_string(),
            missing: vec!["the port".to_string()],
            example: "Listen on 8080.".to_string(),
        }
    }

    #[test]
    fn each_assessment_leads_to_one_decision() {
        assert_eq!(
            decide(Ok(assessment(0.8, "")), 0.8, 0, 5),
            Decision::Start,
            "the threshold itself is complete"
        );
        assert_eq!(
            decide(Ok(assessment(0.4, "Which port?")), 0.8, 4, 5),
            Decision::Ask(assessment(0.4, "Which port?"))
        );
        assert_eq!(
            decide(Ok(assessment(0.4, "Which port?")), 0.8, 5, 5),
            Decision::Assume(assessment(0.4, "Which port?")),
            "no round left"
        );
        assert!(matches!(
            decide(Ok(assessment(0.4, "")), 0.8, 0, 5),
            Decision::Degraded(why) if why.contains("asked no question")
        ));
        assert_eq!(
            decide(Err("not JSON".into()), 0.8, 0, 5),
            Decision::Degraded("not JSON".into())
        );
    }

    #[test]
    fn an_answer_closes_the_open_round_only() {
        let mut state = WorkState::new("issue-1", "sandcastle/issue-1", "a");
        let answer = Answer {
            by: "carol".into(),
            channel: crate::state::Channel::Forge,
            at: jiff::Timestamp::now(),
            replies: vec![sandcastle_core::questions::Reply {
                option: None,
                text: "8080".into(),
            }],
        };
        assert!(!take_answer(&mut state, &answer), "an agent's question");
        state.clarification = Some(Clarification {
            rounds: vec![Round {
                question: "Which port?".into(),
                answer: None,
            }],
            ..Clarification::default()
        });
        assert!(take_answer(&mut state, &answer));
        assert_eq!(state.phase, Phase::Clarify);
        assert!(!take_answer(&mut state, &answer), "no round is open now");
        let transcript = state.clarification.unwrap().transcript();
        assert_eq!(
            transcript,
            "Question 1: Which port?\nAnswer (by carol): 8080"
        );
    }
}
