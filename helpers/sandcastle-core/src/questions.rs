//! The question signal: an agent that lacks a decision ends its turn with one `<questions>` block,
//! parsed here strictly; and a person's reply to it (`1`, `2: because …`, free text; one line per
//! question), read back against the questions it answers. Pure: no forge, no files.
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};
use serde::{Deserialize, Serialize};

/// What an agent asked: a title, why, and one or more questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Questions {
    pub title: String,
    pub prose: String,
    pub items: Vec<Question>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub title: String,
    pub prose: String,
    /// Empty: the answer is free text.
    pub options: Vec<Choice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    pub title: String,
    pub prose: String,
}

/// A block the orchestrator cannot use, and why (said to the agent in its correction turn).
#[derive(Debug, Clone, PartialEq)]
pub struct BadQuestions(pub String);

impl std::fmt::Display for BadQuestions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const MAX_TITLE: usize = 200;
const MAX_PROSE: usize = 4000;
const MAX_QUESTIONS: usize = 10;
const MAX_OPTIONS: usize = 10;

/// The `<questions>` block at the end of an agent's turn: `None` when there is none.
pub fn find(text: &str, issue: u64) -> Option<Result<Questions, BadQuestions>> {
    let starts: Vec<usize> = text
        .match_indices("<questions")
        .map(|(at, _)| at)
        .filter(|at| {
            text[at + "<questions".len()..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '>' || c == '/')
        })
        .collect();
    let start = *starts.first()?;
    if starts.len() > 1 {
        return Some(Err(bad(format!(
            "the message has {} <questions> blocks; end it with exactly one",
            starts.len()
        ))));
    }
    const END: &str = "</questions>";
    let Some(end) = text[start..].rfind(END) else {
        return Some(Err(bad(
            "the <questions> block is not closed with </questions>",
        )));
    };
    Some(parse(&text[start..start + end + END.len()], issue))
}

fn bad(why: impl Into<String>) -> BadQuestions {
    BadQuestions(why.into())
}

/// One block, every element and attribute checked.
fn parse(block: &str, issue: u64) -> Result<Questions, BadQuestions> {
    let mut events = Events::new(block);
    let root = match events.next()? {
        Tag::Open(name, attrs) if name == "questions" => attrs,
        other => return Err(bad(format!("expected <questions>, found {other}"))),
    };
    match root.as_slice() {
        [(key, value)] if key == "issueNumber" => match value.trim().parse::<u64>() {
            Ok(n) if n == issue => {}
            _ => {
                return Err(bad(format!(
                    "issueNumber=\"{}\" is not this issue; write issueNumber=\"{issue}\"",
                    clip(value)
                )));
            }
        },
        [] => {
            return Err(bad(format!(
                "<questions> has no issueNumber; write <questions issueNumber=\"{issue}\">"
            )));
        }
        _ => {
            return Err(bad(format!(
                "<questions> takes exactly one attribute, issueNumber=\"{issue}\""
            )));
        }
    }
    let title = events.leaf("title", "questions")?;
    let (prose, mut next) = events.optional_prose("questions")?;
    let mut items = Vec::new();
    loop {
        match next {
            Tag::Open(name, attrs) if name == "question" => {
                no_attributes(&name, &attrs)?;
                items.push(events.question()?);
            }
            Tag::Close(name) if name == "questions" => break,
            other => return Err(bad(format!("unexpected {other} in <questions>"))),
        }
        next = events.next()?;
    }
    if items.is_empty() {
        return Err(bad("<questions> holds no <question>"));
    }
    if items.len() > MAX_QUESTIONS {
        return Err(bad(format!(
            "<questions> holds {} questions; ask at most {MAX_QUESTIONS}",
            items.len()
        )));
    }
    match events.next()? {
        Tag::End => Ok(Questions {
            title,
            prose,
            items,
        }),
        other => Err(bad(format!("unexpected {other} after </questions>"))),
    }
}

fn no_attributes(name: &str, attrs: &[(String, String)]) -> Result<(), BadQuestions> {
    match attrs.first() {
        None => Ok(()),
        Some((key, _)) => Err(bad(format!(
            "<{name}> takes no attributes, found {}",
            clip(key)
        ))),
    }
}

/// At most 40 characters of agent text, for an error message.
fn clip(text: &str) -> String {
    text.chars().take(40).collect()
}

/// The structure the parser sees: elements opening and closing, and the end.
enum Tag {
    Open(String, Vec<(String, String)>),
    Close(String),
    Text(String),
    End,
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tag::Open(name, _) => write!(f, "<{}>", clip(name)),
            Tag::Close(name) => write!(f, "</{}>", clip(name)),
            Tag::Text(text) => write!(f, "the text {:?}", clip(text.trim())),
            Tag::End => f.write_str("the end of the block"),
        }
    }
}

struct Events<'a> {
    reader: Reader<&'a [u8]>,
}

impl<'a> Events<'a> {
    fn new(block: &'a str) -> Events<'a> {
        let mut reader = Reader::from_str(block);
        let config = reader.config_mut();
        config.expand_empty_elements = true;
        config.check_end_names = true;
        Events { reader }
    }

    /// The next element boundary or text; whitespace between elements and comments are skipped.
    fn next(&mut self) -> Result<Tag, BadQuestions> {
        loop {
            let event = self
                .reader
                .read_event()
                .map_err(|e| bad(format!("the <questions> block is not well-formed XML: {e}")))?;
            return Ok(match event {
                Event::Start(start) => Tag::Open(name(&start)?, attributes(&start)?),
                Event::End(end) => Tag::Close(utf8(end.name().as_ref())?),
                Event::Text(text) => {
                    let text = text
                        .unescape()
                        .map_err(|e| bad(format!("the <questions> block has a bad escape: {e}")))?;
                    if text.trim().is_empty() {
                        continue;
                    }
                    Tag::Text(text.into_owned())
                }
                Event::Comment(_) => continue,
                Event::Eof => Tag::End,
                Event::Empty(_) => unreachable!("empty elements are expanded"),
                Event::CData(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {
                    return Err(bad(
                        "the <questions> block may hold only elements and text: no CDATA, declarations or processing instructions",
                    ));
                }
            });
        }
    }

    /// `<name>text</name>`, next: the text, trimmed, non-empty and not too long.
    fn leaf(&mut self, name: &str, parent: &str) -> Result<String, BadQuestions> {
        match self.next()? {
            Tag::Open(found, attrs) if found == name => {
                no_attributes(&found, &attrs)?;
                self.text_of(name, parent)
            }
            other => Err(bad(format!(
                "expected <{name}> in <{parent}>, found {other}"
            ))),
        }
    }

    /// The text of the element `name` just opened, up to its end.
    fn text_of(&mut self, name: &str, parent: &str) -> Result<String, BadQuestions> {
        let mut text = String::new();
        loop {
            match self.next()? {
                Tag::Text(more) => text += &more,
                Tag::Close(_) => break,
                other => return Err(bad(format!("unexpected {other} in <{name}>"))),
            }
        }
        let text = text.trim().to_string();
        let max = if name == "title" {
            MAX_TITLE
        } else {
            MAX_PROSE
        };
        if name == "title" && text.is_empty() {
            return Err(bad(format!("a <title> in <{parent}> is empty")));
        }
        if text.chars().count() > max {
            return Err(bad(format!(
                "a <{name}> in <{parent}> is longer than {max} characters"
            )));
        }
        Ok(text)
    }

    /// An optional `<prose>`, and the tag after it.
    fn optional_prose(&mut self, parent: &str) -> Result<(String, Tag), BadQuestions> {
        match self.next()? {
            Tag::Open(name, attrs) if name == "prose" => {
                no_attributes(&name, &attrs)?;
                let prose = self.text_of("prose", parent)?;
                Ok((prose, self.next()?))
            }
            other => Ok((String::new(), other)),
        }
    }

    fn question(&mut self) -> Result<Question, BadQuestions> {
        let title = self.leaf("title", "question")?;
        let (prose, mut next) = self.optional_prose("question")?;
        let mut options = Vec::new();
        if let Tag::Open(name, attrs) = &next
            && name == "options"
        {
            no_attributes(name, attrs)?;
            loop {
                match self.next()? {
                    Tag::Open(name, attrs) if name == "option" => {
                        no_attributes(&name, &attrs)?;
                        let title = self.leaf("title", "option")?;
                        let (prose, end) = self.optional_prose("option")?;
                        if !matches!(&end, Tag::Close(name) if name == "option") {
                            return Err(bad(format!("unexpected {end} in <option>")));
                        }
                        options.push(Choice { title, prose });
                    }
                    Tag::Close(_) => break,
                    other => return Err(bad(format!("unexpected {other} in <options>"))),
                }
            }
            if options.is_empty() || options.len() > MAX_OPTIONS {
                return Err(bad(format!(
                    "<options> holds {} options; give 1 to {MAX_OPTIONS}, or leave <options> out for a free answer",
                    options.len()
                )));
            }
            next = self.next()?;
        }
        match next {
            Tag::Close(name) if name == "question" => Ok(Question {
                title,
                prose,
                options,
            }),
            other => Err(bad(format!("unexpected {other} in <question>"))),
        }
    }
}

fn utf8(bytes: &[u8]) -> Result<String, BadQuestions> {
    String::from_utf8(bytes.to_vec()).map_err(|_| bad("the <questions> block is not UTF-8"))
}

fn name(start: &BytesStart) -> Result<String, BadQuestions> {
    utf8(start.name().as_ref())
}

fn attributes(start: &BytesStart) -> Result<Vec<(String, String)>, BadQuestions> {
    start
        .attributes()
        .map(|attr| {
            let attr = attr.map_err(|e| bad(format!("a bad attribute: {e}")))?;
            let value = attr
                .unescape_value()
                .map_err(|e| bad(format!("a bad attribute value: {e}")))?;
            Ok((utf8(attr.key.as_ref())?, value.into_owned()))
        })
        .collect()
}

/// A person's answer to one question: the option chosen (its number, from 1) and what they wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub option: Option<usize>,
    pub text: String,
}

/// Reads a reply: one line per question (one question: the whole text), each `N`, `N: reason` or
/// free text. `Err` says why the reply does not answer the questions.
pub fn read_reply(questions: &Questions, text: &str) -> Result<Vec<Reply>, String> {
    let text = text.trim();
    let lines: Vec<&str> = if questions.items.len() == 1 {
        vec![text]
    } else {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect()
    };
    if lines.len() != questions.items.len() || text.is_empty() {
        return Err(format!(
            "{} question(s), but the reply has {} answer line(s)",
            questions.items.len(),
            lines.len()
        ));
    }
    questions
        .items
        .iter()
        .zip(lines)
        .enumerate()
        .map(|(index, (question, line))| {
            let (head, rest) = match line.split_once(':') {
                Some((head, rest)) => (head.trim(), rest.trim()),
                None => (line, ""),
            };
            match head.parse::<usize>() {
                Ok(n) if !question.options.is_empty() => checked(questions, index, Some(n), rest),
                _ => checked(questions, index, None, line),
            }
        })
        .collect()
}

/// One answer checked against question `index` (from 0): an option it has (numbered from 1) and
/// any text, or text alone; not too long. The rule for every channel's answers.
pub fn checked(
    questions: &Questions,
    index: usize,
    option: Option<usize>,
    text: &str,
) -> Result<Reply, String> {
    let Some(question) = questions.items.get(index) else {
        return Err(format!(
            "there are {} question(s), not {}",
            questions.items.len(),
            index + 1
        ));
    };
    let text = text.trim();
    let number = index + 1;
    match option {
        Some(n) if !(1..=question.options.len()).contains(&n) => {
            return Err(match question.options.len() {
                0 => format!("question {number} has no options; answer it with text"),
                last => format!("question {number} has options 1 to {last}, not {n}"),
            });
        }
        None if text.is_empty() => {
            return Err(format!("the answer to question {number} is empty"));
        }
        _ => {}
    }
    if text.chars().count() > MAX_PROSE {
        return Err(format!(
            "the answer to question {number} is longer than {MAX_PROSE} characters"
        ));
    }
    Ok(Reply {
        option,
        text: text.to_string(),
    })
}

#[cfg(test)]
mod tests;
