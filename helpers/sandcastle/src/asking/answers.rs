//! The one path every answer takes: `.sandcastle/logs/answers/<question id>.json`, written
//! atomically and never replaced, so the first answer wins, and keyed by the question's id, so a
//! late answer can never answer a later question. The run takes it up into the issue's state,
//! which is saved before the answer is delivered.
use crate::state::{Answer, WorkState};
use anyhow::{Context as _, Result};
use sandcastle_core::role::WorkKey;
use std::path::{Path, PathBuf};

fn path(project: &Path, id: &str) -> PathBuf {
    project
        .join(".sandcastle/logs/answers")
        .join(format!("{id}.json"))
}

/// Whether the question `id` of `key` (an issue or a pull request) still waits for an answer;
/// `Ok(Err(why))` when not.
pub fn still_open(project: &Path, key: WorkKey, id: &str) -> Result<Result<(), String>> {
    let state_dir = project.join(".sandcastle/logs/state");
    let state = WorkState::load(&state_dir, &key.slug())?;
    let waiting = state
        .as_ref()
        .and_then(WorkState::waiting)
        .filter(|w| w.conversation.id == id);
    let Some(waiting) = waiting else {
        return Ok(Err(format!("{key} no longer waits for that question")));
    };
    let earlier = match &waiting.conversation.reply {
        Some(answer) => Some(answer.clone()),
        None => take(project, id)?,
    };
    Ok(match earlier {
        Some(earlier) => Err(already(&earlier)),
        None => Ok(()),
    })
}

/// Leaves `answer` to `key`'s question `id` for the run. `Ok(Err(why))`: it comes too late (the
/// question was answered, or is no longer waiting) and nothing was written.
pub fn leave(
    project: &Path,
    key: WorkKey,
    id: &str,
    answer: &Answer,
) -> Result<Result<(), String>> {
    if let Err(why) = still_open(project, key, id)? {
        return Ok(Err(why));
    }
    let path = path(project, id);
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let write = || -> std::io::Result<bool> {
        std::fs::create_dir_all(path.parent().expect("a directory"))?;
        std::fs::write(&tmp, serde_json::to_vec_pretty(answer)?)?;
        // A link never replaces a file: of two answers at once, one is first.
        let first = match std::fs::hard_link(&tmp, &path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e),
        };
        std::fs::remove_file(&tmp)?;
        Ok(first)
    };
    if write().with_context(|| format!("cannot write {}", path.display()))? {
        return Ok(Ok(()));
    }
    Ok(Err(match take(project, id)? {
        Some(earlier) => already(&earlier),
        None => "another answer came first".to_string(),
    }))
}

fn already(earlier: &Answer) -> String {
    format!(
        "it was already answered by {} through {}",
        earlier.by, earlier.channel
    )
}

/// The answer left for question `id`, if any.
pub fn take(project: &Path, id: &str) -> Result<Option<Answer>> {
    let path = path(project, id);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).with_context(|| {
            format!(
                "{} is not an answer: delete it and answer again",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Once the answer is in the issue's state, its file goes.
pub fn remove(project: &Path, id: &str) -> Result<()> {
    let path = path(project, id);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Who answers from this machine (the terminal, `sandcastle answer`).
pub fn local_user() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "the local maintainer".to_string());
    format!("{user} (local maintainer)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Channel, Phase, Waiting};
    use sandcastle_core::questions::{Question, Questions, Reply};

    fn waiting_state(project: &Path, id: &str) {
        let mut state = WorkState::new("issue-3", "sandcastle/issue-3", "a1");
        let questions = Questions {
            title: "t".into(),
            prose: String::new(),
            items: vec![Question {
                title: "q".into(),
                prose: String::new(),
                options: Vec::new(),
            }],
        };
        let mut conversation = crate::conversation::start(questions, &[]);
        conversation.id = id.into();
        state.phase = Phase::Waiting(Box::new(Waiting {
            conversation,
            channels: vec![Channel::Forge],
            timed_out: false,
        }));
        state.save(&project.join(".sandcastle/logs/state")).unwrap();
    }

    fn answer(by: &str, channel: Channel) -> Answer {
        Answer {
            by: by.into(),
            channel,
            at: jiff::Timestamp::now(),
            replies: vec![Reply {
                option: None,
                text: "yes".into(),
            }],
        }
    }

    #[test]
    fn the_first_answer_wins_and_a_late_one_never_answers_a_later_question() {
        let project = tempfile::tempdir().unwrap();
        let project = project.path();
        waiting_state(project, "first");
        leave(
            project,
            WorkKey::Issue(3),
            "first",
            &answer("dana", Channel::Terminal),
        )
        .unwrap()
        .unwrap();
        let second = leave(
            project,
            WorkKey::Issue(3),
            "first",
            &answer("eve", Channel::Command),
        )
        .unwrap();
        assert_eq!(
            second.unwrap_err(),
            "it was already answered by dana through the terminal of `sandcastle run`"
        );
        assert_eq!(take(project, "first").unwrap().unwrap().by, "dana");

        // The agent asked again: an answer to the first question does not answer this one.
        remove(project, "first").unwrap();
        waiting_state(project, "second");
        let late = leave(
            project,
            WorkKey::Issue(3),
            "first",
            &answer("eve", Channel::Command),
        )
        .unwrap();
        assert_eq!(
            late.unwrap_err(),
            "issue #3 no longer waits for that question"
        );
        assert!(take(project, "second").unwrap().is_none());
        assert!(take(project, "first").unwrap().is_none());
    }
}
