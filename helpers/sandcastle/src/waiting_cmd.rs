//! `sandcastle questions` and `sandcastle answer`: what waits for a person, and an answer from any
//! terminal on the maintainer's machine. Both read the saved state only; a run takes the answer up.
use crate::asking::{self, answers};
use crate::state::{Channel, Settled, WorkState};
use anyhow::{Result, bail};
use sandcastle_core::role::WorkKey;
use std::path::Path;
use std::process::ExitCode;

fn state_dir(project: &Path) -> std::path::PathBuf {
    project.join(".sandcastle/logs/state")
}

/// One line per waiting question (issue, age, channels, where to answer), then one per open ask.
pub fn list(project: &Path) -> Result<ExitCode> {
    let settings = crate::context::Settings::load(project)?;
    let waiting = WorkState::all_waiting(&state_dir(project))?;
    let asks = WorkState::with_asks(&state_dir(project))?;
    let green = crate::green::listing(&state_dir(project), &settings.config.autopilot)?;
    if waiting.is_empty() && asks.is_empty() {
        println!("no question or ask waits for an answer");
    }
    let now = jiff::Timestamp::now();
    let age = |since: jiff::Timestamp| {
        let secs = now.duration_since(since).unsigned_abs().as_secs();
        humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
    };
    for state in &waiting {
        let Some(question) = state.waiting() else {
            continue;
        };
        let Some(key) = WorkKey::from_slug(&state.slug) else {
            continue;
        };
        let Some(number) = key.number() else {
            continue;
        };
        let age = age(question.conversation.asked_at);
        let channels: Vec<String> = question.channels.iter().map(|c| c.to_string()).collect();
        let through = match channels.is_empty() {
            true => "through no handler".to_string(),
            false => format!("through {}", channels.join(", ")),
        };
        let mut answer_with: Vec<String> = question
            .channels
            .iter()
            .map(|channel| match channel {
                Channel::Forge => format!(
                    "a comment on {}/{}/issues/{number}",
                    settings.config.forge_url, settings.config.repo
                ),
                Channel::Terminal => "the prompt of a looping `sandcastle run`".to_string(),
                Channel::Command => "the question command's reply".to_string(),
                Channel::CommandLine => format!("`sandcastle answer {number} <text>`"),
            })
            .collect();
        answer_with.push(format!("`sandcastle answer {number} <text>`"));
        let answered = match &question.conversation.reply {
            Some(answer) => format!("; answered by {}, not yet delivered", answer.by),
            None if question.timed_out => "; timed out".to_string(),
            None => String::new(),
        };
        println!(
            "{key} {:?}: asked {age} ago {through}{answered}; answer with {}",
            question.conversation.subject.title,
            answer_with.join(" or ")
        );
    }
    for state in &asks {
        let Some(key) = WorkKey::from_slug(&state.slug) else {
            continue;
        };
        let number = key.number().unwrap_or_default();
        let line = match (&state.ask, &state.tell) {
            (_, Some(_)) => "answered; told to the agent at its next turn".to_string(),
            (Some(open), None) => format!(
                "asked {} ago, the agent works on; answer with a comment on {}/{}/issues/{number} \
                 (or reply `close`) or `sandcastle answer {number} --ask {} <text>`",
                age(open.asked_at),
                settings.config.forge_url,
                settings.config.repo,
                open.subject.revision
            ),
            (None, None) => continue,
        };
        let what = state.ask.as_ref().map_or(String::new(), |open| {
            format!(
                " ({}, revision {}) {:?}",
                open.subject.kind.name(),
                open.subject.revision,
                open.subject.title
            )
        });
        println!("{key} ask{what}: {line}");
    }
    for line in green {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Leaves `text` as the answer to the question waiting on issue or pull request `number`.
pub fn answer(project: &Path, number: u64, text: &str) -> Result<ExitCode> {
    let mut waiting_states = Vec::new();
    for key in [WorkKey::Issue(number), WorkKey::Pull(number)] {
        waiting_states.extend(
            WorkState::load(&state_dir(project), &key.slug())?
                .filter(|s| s.waiting().is_some())
                .map(|s| (key, s)),
        );
    }
    let Some((key, waiting)) = waiting_states
        .first()
        .and_then(|(key, s)| Some((*key, s.waiting()?)))
    else {
        bail!(
            "issue or pull request #{number} has no question waiting: `sandcastle questions` lists those that do"
        );
    };
    if waiting.conversation.reply.is_some() {
        bail!("{key}'s question is already answered; the next pass delivers the answer");
    }
    match asking::answer_locally(project, waiting, key, text)? {
        Ok(replies) => {
            println!(
                "answered {key} ({} answer(s)); the run takes it up on its next pass",
                replies.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => bail!("{key}: your answer was not taken: {why}"),
    }
}

/// Leaves `text` as the answer to revision `revision` of the open ask on issue or pull request
/// `number`; the run tells it to the agent at its next turn, whichever channel answered first.
pub fn answer_ask(project: &Path, number: u64, revision: u32, text: &str) -> Result<ExitCode> {
    let mut open = None;
    for key in [WorkKey::Issue(number), WorkKey::Pull(number)] {
        if let Some(state) = WorkState::load(&state_dir(project), &key.slug())?
            && let Some(ask) = state.ask
        {
            open = Some((key, ask));
            break;
        }
    }
    let Some((key, ask)) = open else {
        bail!(
            "issue or pull request #{number} has no open ask: `sandcastle questions` lists those that do"
        );
    };
    let settled = Settled::read(
        &ask.subject,
        &answers::local_user(),
        Channel::CommandLine,
        text,
    )
    .map_err(|why| anyhow::anyhow!("{key}: your answer was not taken: {why}"))?;
    match answers::leave_ask(project, key, revision, &settled)? {
        Ok(()) => {
            println!(
                "answered {key}'s ask (revision {revision}); the run tells the agent at its next turn"
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => bail!("{key}: your answer was not taken: {why}"),
    }
}
