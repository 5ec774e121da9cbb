//! A post as the forge renders it: CommonMark with raw HTML (pulldown-cmark's events), reduced to
//! what a test of sandcastle's posts asserts on: which headings there are, what HTML, and what
//! text sits inside code blocks and code spans.
use pulldown_cmark::{Event, Parser, Tag, TagEnd};

#[derive(Debug, Default)]
pub struct Rendered {
    /// Every heading, `## Checks` as `(2, "Checks")`, a code span's text included.
    pub headings: Vec<(u8, String)>,
    /// Every HTML block and inline HTML, as written.
    pub html: Vec<String>,
    /// Each code block's text.
    pub blocks: Vec<String>,
    /// Each code span's text.
    pub spans: Vec<String>,
}

impl Rendered {
    /// The headings' text alone.
    pub fn heading_texts(&self) -> Vec<&str> {
        self.headings
            .iter()
            .map(|(_, text)| text.as_str())
            .collect()
    }
}

pub fn render(doc: &str) -> Rendered {
    let mut out = Rendered::default();
    let (mut heading, mut block) = (None::<(u8, String)>, None::<String>);
    for event in Parser::new(doc) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                heading = Some((level as u8, String::new()))
            }
            Event::End(TagEnd::Heading(_)) => out.headings.extend(heading.take()),
            Event::Start(Tag::CodeBlock(_)) => block = Some(String::new()),
            Event::End(TagEnd::CodeBlock) => out.blocks.extend(block.take()),
            Event::Html(html) | Event::InlineHtml(html) => out.html.push(html.to_string()),
            Event::Text(text) => {
                if let Some((_, open)) = &mut heading {
                    open.push_str(&text);
                }
                if let Some(open) = &mut block {
                    open.push_str(&text);
                }
            }
            Event::Code(code) => {
                if let Some((_, open)) = &mut heading {
                    open.push_str(&code);
                }
                out.spans.push(code.to_string());
            }
            _ => {}
        }
    }
    out
}
