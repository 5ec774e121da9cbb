//! `sandcastle questions` and `sandcastle answer`: what waits for a person, and an answer from any
//! terminal on the maintainer's machine. Both read the saved state only; a run takes the answer up.
use crate::asking;
use crate::state::{Channel, Phase, WorkState};
use anyhow::{Result, bail};
use std::path::Path;
use std::process::ExitCode;

fn state_dir(project: &Path) -> std::path::PathBuf {
    project.join(".sandcastle/logs/state")
}

/// One line per waiting question: issue, age, channels, where to answer.
pub fn list(project: &Path) -> Result<ExitCode> {
    let settings = crate::context::Settings::load(project)?;
    let waiting = WorkState::all_waiting(&state_dir(project))?;
    if waiting.is_empty() {
        println!("no question waits for an answer");
    }
    let now = jiff::Timestamp::now();
    for state in &waiting {
        let Some(question) = &state.waiting else {
            continue;
        };
        let number = state.slug.trim_start_matches("issue-");
        let age = now.duration_since(question.asked_at).unsigned_abs();
        let age = humantime::format_duration(std::time::Duration::from_secs(age.as_secs()));
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
        let answered = match &question.answer {
            Some(answer) => format!("; answered by {}, not yet delivered", answer.by),
            None if question.timed_out => "; timed out".to_string(),
            None => String::new(),
        };
        println!(
            "#{number} {:?}: asked {age} ago {through}{answered}; answer with {}",
            question.questions.title,
            answer_with.join(" or ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Leaves `text` as the answer to issue `number`'s waiting question.
pub fn answer(project: &Path, number: u64, text: &str) -> Result<ExitCode> {
    let slug = format!("issue-{number}");
    let state = WorkState::load(&state_dir(project), &slug)?;
    let Some(waiting) = state
        .as_ref()
        .filter(|s| s.phase == Phase::Waiting)
        .and_then(|s| s.waiting.as_ref())
    else {
        bail!(
            "issue #{number} has no question waiting: `sandcastle questions` lists those that do"
        );
    };
    if waiting.answer.is_some() {
        bail!("issue #{number}'s question is already answered; the next pass delivers the answer");
    }
    match asking::answer_locally(project, waiting, number, text)? {
        Ok(replies) => {
            println!(
                "answered issue #{number} ({} answer(s)); the run takes it up on its next pass",
                replies.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => bail!("issue #{number}: your answer was not taken: {why}"),
    }
}
