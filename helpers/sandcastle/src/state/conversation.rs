//! What the agent put to people, as saved: a question that stops its work ([`Waiting`]) and an
//! ask that does not ([`OpenAsk`]) are two uses of one [`Conversation`]; a settled ask's answer
//! waits to be told ([`Telling`]).
use jiff::Timestamp;
use sandcastle_config::Handler;
use sandcastle_core::ask::Ask;
use sandcastle_core::questions::{Questions, Reply};
use serde::{Deserialize, Serialize};

/// Something put to people on the forge (`subject`) and the first reply that counted (`reply`).
/// The field names of earlier versions' state files are read as aliases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation<S, R> {
    /// Marks its forge comment, so a resumed run never posts it twice.
    pub id: String,
    #[serde(alias = "questions", alias = "ask")]
    pub subject: S,
    /// When it was asked (an ask: when this revision was taken out of the sandbox).
    #[serde(alias = "takenAt")]
    pub asked_at: Timestamp,
    /// The forge comment showing it, once posted.
    pub comment: Option<i64>,
    /// Replies count only after this comment; 0 while this revision is not on the forge.
    #[serde(default)]
    pub after: i64,
    /// Reads of the replies so far, and when the next one is due.
    pub polls: u32,
    pub next_poll: Timestamp,
    /// Replies that did not count, each said once.
    pub ignored: Vec<i64>,
    /// The first reply that counted, saved before anything is done with it.
    #[serde(alias = "answer", alias = "settled")]
    pub reply: Option<R>,
    /// The forge comment says who replied.
    #[serde(default)]
    pub marked: bool,
    /// When a revision was last sent to its forge comment (posted or edited, or tried), which
    /// paces the next (`outbox::publish`).
    #[serde(default)]
    pub posted_at: Option<Timestamp>,
}

/// A question the working agent (or the clarification before it) asked, waiting for its answer:
/// the phase `Waiting` carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    #[serde(flatten)]
    pub conversation: Conversation<Questions, Answer>,
    /// Where it was asked: the `[questions] handlers` that could reach a person in the runs that
    /// asked it (`asking::reachable`). `sandcastle answer` can answer it besides.
    pub channels: Vec<Channel>,
    /// The timeout was recorded and said on the issue.
    pub timed_out: bool,
}

/// The agent's latest ask that did not stop it (`sandcastle ask`), as published: one forge comment
/// per piece of work, which every revision reuses (so its `id` stays).
pub type OpenAsk = Conversation<Ask, Settled>;

/// Where a question or an ask was asked or answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Channel {
    /// A comment on the issue or pull request.
    #[default]
    Forge,
    /// `sandcastle answer` on the maintainer's machine.
    CommandLine,
    /// A prompt on the terminal `sandcastle run` is attached to.
    Terminal,
    /// `[questions] command`.
    Command,
}

impl From<Handler> for Channel {
    fn from(handler: Handler) -> Channel {
        match handler {
            Handler::Terminal => Channel::Terminal,
            Handler::Forge => Channel::Forge,
            Handler::Command => Channel::Command,
        }
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Forge => "the forge",
            Channel::CommandLine => "the command line (`sandcastle answer`)",
            Channel::Terminal => "the terminal of `sandcastle run`",
            Channel::Command => "the question command (`[questions] command`)",
        })
    }
}

/// Who answered a question, through which channel, when, and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub by: String,
    pub channel: Channel,
    pub at: Timestamp,
    /// One per question, in order.
    pub replies: Vec<Reply>,
}

/// How a person settled an ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settled {
    pub by: String,
    /// Where they answered; the forge in state files from before other channels answered asks.
    #[serde(default)]
    pub channel: Channel,
    pub at: Timestamp,
    /// They replied `close`: no answer.
    pub closed: bool,
    /// The option of a decision they chose (from 1).
    pub option: Option<usize>,
    pub text: String,
}

impl Settled {
    /// A person's reply to `ask` through `channel`, read the same on every channel: `close`
    /// closes the ask; for a decision, an option's number or label (then `: why`) chooses it;
    /// anything else is a free answer. An empty reply does not count.
    pub fn read(ask: &Ask, by: &str, channel: Channel, text: &str) -> Result<Settled, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("it is empty".to_string());
        }
        let mut settled = Settled {
            by: by.to_string(),
            channel,
            at: Timestamp::now(),
            closed: text.eq_ignore_ascii_case("close"),
            option: None,
            text: text.to_string(),
        };
        if settled.closed {
            settled.text.clear();
            return Ok(settled);
        }
        let (head, rest) = text.split_once(':').unwrap_or((text, ""));
        let head = head.trim();
        let chosen = ask
            .options
            .iter()
            .position(|o| o.label.eq_ignore_ascii_case(head));
        let numbered = head
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=ask.options.len()).contains(n));
        if let Some(option) = numbered.or(chosen.map(|i| i + 1)) {
            settled.option = Some(option);
            settled.text = rest.trim().to_string();
        }
        Ok(settled)
    }
}

/// An answer to tell the working agent in its next turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Telling {
    /// The ask and the moment it was settled.
    pub key: String,
    pub prompt: String,
    /// Saved before the turn that tells it.
    pub telling: bool,
}
