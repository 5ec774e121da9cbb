//! The one path every answer takes: `.sandcastle/logs/answers/<question id>.json` (an ask's:
//! `<ask id>-r<revision>.json`), written atomically and never replaced, so the first answer wins,
//! and keyed by the question's id (the ask's revision), so a late answer can never answer a later
//! question. The run takes it up into the work's state, which is saved before the answer is
//! delivered.
use crate::state::{Answer, OpenAsk, Settled, WorkState};
use anyhow::{Context as _, Result};
use sandcastle_core::role::WorkKey;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

fn path(project: &Path, id: &str) -> PathBuf {
    project
        .join(".sandcastle/logs/answers")
        .join(format!("{id}.json"))
}

/// The id of the open ask's revision: its answer file's name, and what the question command is
/// told it answers.
pub fn ask_id(open: &OpenAsk) -> String {
    format!("{}-r{}", open.id, open.subject.revision)
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
    if write_first(&path(project, id), answer)? {
        return Ok(Ok(()));
    }
    Ok(Err(match take(project, id)? {
        Some(earlier) => already(&earlier),
        None => "another answer came first".to_string(),
    }))
}

/// Writes `value` to `path` unless a file is there: `false` when another came first.
fn write_first<T: Serialize>(path: &Path, value: &T) -> Result<bool> {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    let write = || -> std::io::Result<bool> {
        std::fs::create_dir_all(path.parent().expect("a directory"))?;
        std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
        // A link never replaces a file: of two answers at once, one is first.
        let first = match std::fs::hard_link(&tmp, path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e),
        };
        std::fs::remove_file(&tmp)?;
        Ok(first)
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

/// Leaves `settled` as the answer to revision `revision` of `key`'s open ask. `Ok(Err(why))`: no
/// such ask waits (none is open, the agent replaced it, or it was answered) and nothing was
/// written.
pub fn leave_ask(
    project: &Path,
    key: WorkKey,
    revision: u32,
    settled: &Settled,
) -> Result<Result<(), String>> {
    let open = match ask_still_open(project, key, revision)? {
        Ok(open) => open,
        Err(why) => return Ok(Err(why)),
    };
    let path = path(project, &ask_id(&open));
    if write_first(&path, settled)? {
        return Ok(Ok(()));
    }
    Ok(Err(match take_ask(project, &open)? {
        Some(earlier) => already_settled(&earlier),
        None => "another answer came first".to_string(),
    }))
}

/// `key`'s open ask, as saved, if its revision `revision` still waits for an answer;
/// `Ok(Err(why))` when not (none is open, the agent replaced it, or it was answered).
pub fn ask_still_open(
    project: &Path,
    key: WorkKey,
    revision: u32,
) -> Result<Result<OpenAsk, String>> {
    let state = WorkState::load(&project.join(".sandcastle/logs/state"), &key.slug())?;
    let Some(open) = state.and_then(|s| s.ask) else {
        return Ok(Err(format!("{key} has no open ask")));
    };
    if open.subject.revision != revision {
        return Ok(Err(format!(
            "{key}'s ask is at revision {}: the agent replaced revision {revision}",
            open.subject.revision
        )));
    }
    let earlier = match &open.reply {
        Some(settled) => Some(settled.clone()),
        None => take_ask(project, &open)?,
    };
    Ok(match earlier {
        Some(earlier) => Err(already_settled(&earlier)),
        None => Ok(open),
    })
}

/// The answer left for the open ask's revision, if any.
pub fn take_ask(project: &Path, open: &OpenAsk) -> Result<Option<Settled>> {
    read(&path(project, &ask_id(open)))
}

fn already_settled(earlier: &Settled) -> String {
    format!(
        "it was already {} by {} through {}",
        if earlier.closed { "closed" } else { "answered" },
        earlier.by,
        earlier.channel
    )
}

fn already(earlier: &Answer) -> String {
    format!(
        "it was already answered by {} through {}",
        earlier.by, earlier.channel
    )
}

/// The answer left for question `id`, if any.
pub fn take(project: &Path, id: &str) -> Result<Option<Answer>> {
    read(&path(project, id))
}

fn read<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match std::fs::read(path) {
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
    use crate::state::{Channel, Phase, Settled, Waiting};
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

    /// An ask's answer is for one revision: a replaced revision is refused, the first answer wins,
    /// and one already in the state (a forge reply) wins over any later.
    #[test]
    fn an_asks_first_answer_wins_for_its_revision_only() {
        let project = tempfile::tempdir().unwrap();
        let project = project.path();
        let ask: sandcastle_core::ask::Ask = serde_json::from_value(serde_json::json!({
            "key": "pr:5", "revision": 2, "kind": "ready", "title": "Part one is ready"
        }))
        .unwrap();
        let mut state = WorkState::new("pr-5", "sandcastle/issue-4", "a1");
        state.ask = Some(crate::conversation::start(ask.clone(), &[]));
        let dir = project.join(".sandcastle/logs/state");
        state.save(&dir).unwrap();
        let key = WorkKey::Pull(5);
        let settled = |by: &str, channel| Settled::read(&ask, by, channel, "thanks").unwrap();

        let stale = leave_ask(project, key, 1, &settled("dana", Channel::CommandLine)).unwrap();
        assert_eq!(
            stale.unwrap_err(),
            "pull request #5's ask is at revision 2: the agent replaced revision 1"
        );
        leave_ask(project, key, 2, &settled("dana", Channel::CommandLine))
            .unwrap()
            .unwrap();
        let second = leave_ask(project, key, 2, &settled("erin", Channel::Command)).unwrap();
        assert_eq!(
            second.unwrap_err(),
            "it was already answered by dana through the command line (`sandcastle answer`)"
        );
        let open = state.ask.as_mut().unwrap();
        assert_eq!(take_ask(project, open).unwrap().unwrap().by, "dana");

        // A reply the run already saved wins over the file.
        open.reply = Some(settled("carol", Channel::Forge));
        state.save(&dir).unwrap();
        let late = leave_ask(project, key, 2, &settled("erin", Channel::Command)).unwrap();
        assert_eq!(
            late.unwrap_err(),
            "it was already answered by carol through the forge"
        );
    }
}
