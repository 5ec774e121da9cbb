//! The `forge` handler: the question as a [`conversation`](crate::conversation) on the issue (one
//! comment, never posted twice), answered by a reply from a writer or a `[questions] responders`
//! entry that answers every question, and edited to say who answered, through which channel and when.
use crate::conversation::{Choice, Item, Outline, Replied, Subject};
use crate::state::{Answer, Channel};
use jiff::Timestamp;
use sandcastle_core::forge_text::quote_inline;
use sandcastle_core::questions::{self, Questions};

impl Subject for Questions {
    type Reply = Answer;
    const KIND: &'static str = "question";
    const FIRST_READ_WAITS: bool = true;

    /// Options numbered, and how to reply.
    fn outline(&self, number: u64) -> Outline {
        let items = self
            .items
            .iter()
            .enumerate()
            .map(|(index, question)| Item {
                label: format!("Question {}: ", index + 1),
                title: question.title.clone(),
                prose: question.prose.clone(),
                options: question
                    .options
                    .iter()
                    .map(|option| Choice {
                        label: option.title.clone(),
                        meaning: option.prose.clone(),
                        note: "",
                    })
                    .collect(),
            })
            .collect();
        let forms =
            "an option's number (`1`), a number and a reason (`2: because …`), or free text";
        let mut how = if self.items.len() == 1 {
            format!("\n**How to answer:** reply with a comment holding {forms}.")
        } else {
            format!(
                "\n**How to answer:** reply with a comment of one line per question, in order, each {forms}."
            )
        };
        how += &format!(
            " Only replies from people with write access to this repository count. On the maintainer's \
             machine, `sandcastle answer {number} <text>` answers too."
        );
        Outline {
            intro: "sandcastle has a question before it goes on with this issue.".to_string(),
            title: self.title.clone(),
            prose: self.prose.clone(),
            items,
            how,
        }
    }

    fn read(&self, by: &str, text: &str) -> Result<Answer, String> {
        let replies = questions::read_reply(self, text)?;
        Ok(Answer {
            by: by.to_string(),
            channel: Channel::Forge,
            at: Timestamp::now(),
            replies,
        })
    }
}

impl Replied for Answer {
    fn line(&self) -> String {
        format!(
            "**Answered** by {} through {} at {}",
            quote_inline(&self.by),
            self.channel,
            self.at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
    }
}
