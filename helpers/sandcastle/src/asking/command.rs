//! The `command` handler: `[questions] command` runs with the question as JSON on its stdin and
//! prints the answer as JSON on its stdout (a bridge to a chat, a phone, a file). It runs on a
//! thread of its own, bounded by the time left of `[questions] timeout`; a failure, a non-zero
//! exit or output that does not answer the questions is one line, never fatal. Its output is
//! read like any reply from outside: strictly, and checked by the rules every channel's answers
//! pass (`questions::checked`). The shapes are versioned (`"version": 1`) and in the user guide
//! (`docs/guide/src/asking.md`).
use super::answers;
use crate::context::{Context, HOST_ONLY_KEYS};
use crate::handlers::Children;
use crate::state::{Answer, Channel, OpenAsk, Settled, Waiting};
use jiff::Timestamp;
use sandcastle_core::ask::Ask;
use sandcastle_core::deadline::Watchdog;
use sandcastle_core::questions::{self, Choice, Question, Questions, Reply};
use sandcastle_core::role::WorkKey;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub const VERSION: u32 = 1;

/// What the command reads on stdin.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    pub version: u32,
    /// The question's id: answers to it, and only to it, count.
    pub id: &'a str,
    pub repo: &'a str,
    pub issue: u64,
    pub url: String,
    pub asked_at: Timestamp,
    /// After this the command is stopped (`[questions] timeout`).
    pub answer_by: Timestamp,
    /// `false` for an agent's ask (`sandcastle ask`): the agent works on meanwhile.
    pub blocking: bool,
    /// An ask's kind and revision; absent for a question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask: Option<RequestAsk>,
    pub title: &'a str,
    pub prose: &'a str,
    pub questions: Vec<RequestQuestion<'a>>,
}

/// What an ask adds to the request.
#[derive(Debug, Serialize)]
pub struct RequestAsk {
    /// decision, action, ready or blocked.
    pub kind: &'static str,
    pub revision: u32,
}

#[derive(Debug, Serialize)]
pub struct RequestQuestion<'a> {
    pub number: usize,
    pub title: &'a str,
    pub prose: &'a str,
    /// Empty: the answer is free text.
    pub options: Vec<RequestOption<'a>>,
}

#[derive(Debug, Serialize)]
pub struct RequestOption<'a> {
    pub number: usize,
    pub title: &'a str,
    pub prose: &'a str,
}

/// What the command prints on stdout.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Response {
    version: u32,
    /// Who answered, as the bridge knows them.
    #[serde(default)]
    by: Option<String>,
    /// One per question, in order.
    answers: Vec<ResponseAnswer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResponseAnswer {
    #[serde(default)]
    option: Option<usize>,
    #[serde(default)]
    text: String,
}

const MAX_OUTPUT: usize = 256 * 1024;
const MAX_BY: usize = 64;

/// What a request is about: a waiting question, or an ask (its answer id, the ask, and it as one
/// question, which is how the command answers it).
pub enum About<'a> {
    Question(&'a Waiting),
    Ask(&'a str, &'a OpenAsk, &'a Questions),
}

/// The request for the waiting question or the open ask of issue or pull request `number`.
pub fn request<'a>(
    repo: &'a str,
    url: String,
    number: u64,
    about: About<'a>,
    timeout: Duration,
) -> Request<'a> {
    let (id, asked_at, questions, ask) = match about {
        About::Question(waiting) => (
            waiting.conversation.id.as_str(),
            waiting.conversation.asked_at,
            &waiting.conversation.subject,
            None,
        ),
        About::Ask(id, open, questions) => (
            id,
            open.asked_at,
            questions,
            Some(RequestAsk {
                kind: open.subject.kind.name(),
                revision: open.subject.revision,
            }),
        ),
    };
    Request {
        version: VERSION,
        id,
        repo,
        issue: number,
        url,
        asked_at,
        answer_by: asked_at
            + jiff::SignedDuration::try_from(timeout).unwrap_or(jiff::SignedDuration::MAX),
        blocking: ask.is_none(),
        ask,
        title: &questions.title,
        prose: &questions.prose,
        questions: questions
            .items
            .iter()
            .enumerate()
            .map(|(index, question)| RequestQuestion {
                number: index + 1,
                title: &question.title,
                prose: &question.prose,
                options: question
                    .options
                    .iter()
                    .enumerate()
                    .map(|(n, option)| RequestOption {
                        number: n + 1,
                        title: &option.title,
                        prose: &option.prose,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The command's stdout read as an answer to `questions`: who (if it says) and one reply per
/// question. `Err` says what is wrong with it.
pub fn read_response(
    questions: &Questions,
    stdout: &[u8],
) -> Result<(Option<String>, Vec<Reply>), String> {
    if stdout.len() > MAX_OUTPUT {
        return Err(format!("its output is longer than {MAX_OUTPUT} bytes"));
    }
    let response: Response = serde_json::from_slice(stdout)
        .map_err(|e| format!("its output is not the answer JSON: {e}"))?;
    if response.version != VERSION {
        return Err(format!(
            "its output has version {}; this sandcastle reads version {VERSION}",
            response.version
        ));
    }
    if response.answers.len() != questions.items.len() {
        return Err(format!(
            "{} question(s), but its output has {} answer(s)",
            questions.items.len(),
            response.answers.len()
        ));
    }
    let by = match response.by {
        None => None,
        Some(by) if plain_name(&by) => Some(by.trim().to_string()),
        Some(_) => {
            return Err(format!(
                "its \"by\" is not a name (1 to {MAX_BY} letters, digits, spaces and . _ @ ( ) -)"
            ));
        }
    };
    let replies = response
        .answers
        .iter()
        .enumerate()
        .map(|(index, answer)| questions::checked(questions, index, answer.option, &answer.text))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((by, replies))
}

/// A name that reads as one on a line of a prompt or a comment, and nothing more.
fn plain_name(by: &str) -> bool {
    let by = by.trim();
    !by.is_empty()
        && by.chars().count() <= MAX_BY
        && by
            .chars()
            .all(|c| c.is_alphanumeric() || " ._@()-".contains(c))
}

/// Runs the command on a thread of its own; what it answers is left on the answers' path.
pub fn ask(ctx: &Context, key: WorkKey, waiting: &Waiting) {
    let about = About::Question(waiting);
    let Some(launch) = Launch::of(ctx, key, about, waiting.conversation.asked_at) else {
        return;
    };
    let (project, id) = (ctx.project.clone(), waiting.conversation.id.clone());
    let questions = waiting.conversation.subject.clone();
    launch.spawn(ctx, key, String::new(), move |stdout| {
        let (by, replies) = read_response(&questions, stdout)?;
        let answer = Answer {
            by: by.unwrap_or_else(|| ANSWERED_BY.to_string()),
            channel: Channel::Command,
            at: Timestamp::now(),
            replies,
        };
        answers::leave(&project, key, &id, &answer)
            .map_err(|e| format!("{e:#}"))?
            .map(|()| answer.by)
    });
}

/// Runs the command for revision `open.subject.revision` of `key`'s ask, marked non-blocking (the
/// agent works on), on a thread of its own; its one answer is left on the answers' path, where the
/// first answer through any channel wins. The state that holds this revision is saved already.
pub fn put_ask(ctx: &Context, key: WorkKey, open: &OpenAsk) {
    let id = answers::ask_id(open);
    let questions = as_questions(&open.subject);
    let about = About::Ask(&id, open, &questions);
    let Some(launch) = Launch::of(ctx, key, about, open.asked_at) else {
        return;
    };
    let (project, ask, revision) = (
        ctx.project.clone(),
        open.subject.clone(),
        open.subject.revision,
    );
    let what = format!(" the agent's ask (revision {revision})");
    launch.spawn(ctx, key, what, move |stdout| {
        let (by, replies) = read_response(&questions, stdout)?;
        let by = by.unwrap_or_else(|| ANSWERED_BY.to_string());
        let reply = &replies[0];
        let settled = match reply.option {
            Some(option) => Settled {
                by,
                channel: Channel::Command,
                at: Timestamp::now(),
                closed: false,
                option: Some(option),
                text: reply.text.clone(),
            },
            None => Settled::read(&ask, &by, Channel::Command, &reply.text)?,
        };
        answers::leave_ask(&project, key, revision, &settled)
            .map_err(|e| format!("{e:#}"))?
            .map(|()| settled.by)
    });
}

/// Who answered, when the command's answer does not say.
const ANSWERED_BY: &str = "someone through the question command";

/// One run of the command: its argv, its request, and how long it may take.
struct Launch {
    argv: Vec<String>,
    input: Vec<u8>,
    left: Duration,
}

impl Launch {
    /// The run for `about` on `key`, asked at `asked_at`: `None` without a command, or when what
    /// was asked has timed out already.
    fn of(ctx: &Context, key: WorkKey, about: About, asked_at: Timestamp) -> Option<Launch> {
        let (argv, number) = (ctx.config.questions.command.clone()?, key.number()?);
        let timeout = ctx.config.questions.timeout;
        let url = format!(
            "{}/{}/issues/{number}",
            ctx.config.forge_url, ctx.config.repo
        );
        let input =
            serde_json::to_vec_pretty(&request(&ctx.config.repo, url, number, about, timeout))
                .expect("the request serialises");
        let left = Timestamp::now()
            .duration_until(asked_at + jiff::SignedDuration::try_from(timeout).unwrap_or_default());
        let left = Duration::try_from(left).ok()?;
        Some(Launch { argv, input, left })
    }

    /// Runs it on a thread of its own; `take` leaves what it answered on the answers' path and
    /// says who answered. The run says so (` answered{what}`), or why no answer came.
    fn spawn(
        self,
        ctx: &Context,
        key: WorkKey,
        what: String,
        take: impl FnOnce(&[u8]) -> Result<String, String> + Send + 'static,
    ) {
        let (project, progress, arrived, children) = (
            ctx.project.clone(),
            ctx.progress.clone(),
            ctx.handlers.arrived.clone(),
            ctx.handlers.children.clone(),
        );
        std::thread::spawn(move || {
            let outcome = run(&self.argv, &project, self.input, self.left, &children)
                .and_then(|stdout| take(&stdout));
            match outcome {
                Ok(by) => {
                    progress.note(&format!(
                        "{key}: {by} answered{what} through the question command"
                    ));
                    arrived.store(true, Ordering::SeqCst);
                }
                Err(why) => {
                    let to = if what.is_empty() {
                        String::new()
                    } else {
                        format!(" to{what}")
                    };
                    progress.note(&format!(
                        "{key}: the question command gave no answer{to}: {why}"
                    ))
                }
            }
        });
    }
}

/// An ask as the one question the command answers: its title and details, a decision's options.
fn as_questions(ask: &Ask) -> Questions {
    Questions {
        title: ask.title.clone(),
        prose: ask.details.clone(),
        items: vec![Question {
            title: ask.title.clone(),
            prose: String::new(),
            options: ask
                .options
                .iter()
                .map(|option| Choice {
                    title: option.label.clone(),
                    prose: option.meaning.clone(),
                })
                .collect(),
        }],
    }
}

/// The command's stdout, or why there is none: it could not start, did not finish in time, or
/// exited non-zero (with the last line it wrote on stderr). It runs in a process group of its
/// own, which `children` lists while it runs, so a stopped run ends it too.
fn run(
    argv: &[String],
    project: &Path,
    input: Vec<u8>,
    limit: Duration,
    children: &Children,
) -> Result<Vec<u8>, String> {
    let (program, args) = argv.split_first().ok_or("`[questions] command` is empty")?;
    let mut command = Command::new(program);
    // A bridge has no business with the orchestrator's forge tokens.
    for key in HOST_ONLY_KEYS {
        command.env_remove(key);
    }
    let mut child = command
        .args(args)
        .current_dir(project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let pid = child.id();
    children.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    let watchdog = Watchdog::start(&child, limit);
    let mut stdin = child.stdin.take().expect("piped");
    // On a thread: a command that does not read its input must not hold up the rest.
    std::thread::spawn(move || stdin.write_all(&input));
    let stderr = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.take(MAX_OUTPUT as u64).read_to_string(&mut text);
        text
    });
    let mut stdout = Vec::new();
    let mut pipe = child.stdout.take().expect("piped");
    let read = (&mut pipe)
        .take(MAX_OUTPUT as u64 + 1)
        .read_to_end(&mut stdout)
        // What is beyond the bound is read and dropped, so the command never blocks on it.
        .and_then(|_| std::io::copy(&mut pipe, &mut std::io::sink()));
    let status = child.wait();
    let timed_out = watchdog.finished();
    children
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| *p != pid);
    let stderr = stderr.join().unwrap_or_default();
    if timed_out {
        return Err(format!(
            "`{program}` did not answer within the question's timeout and was stopped"
        ));
    }
    let status = status.map_err(|e| format!("cannot wait for `{program}`: {e}"))?;
    read.map_err(|e| format!("cannot read the output of `{program}`: {e}"))?;
    if !status.success() {
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("`{program}` exited with {status}: {last}"));
    }
    Ok(stdout)
}

#[cfg(test)]
mod tests;
