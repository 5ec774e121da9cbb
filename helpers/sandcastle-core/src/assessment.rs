//! The assessor's answer: how complete an issue is, the one question that matters most, what is
//! missing and an example of a complete statement, in one `<assessment>{json}</assessment>` block,
//! parsed strictly. Pure: no forge, no files.
use serde::{Deserialize, Serialize};

/// What the assessor said, checked and clamped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Assessment {
    /// From 0 (nothing said) to 1 (ready to implement); clamped into that range.
    pub completeness: f64,
    /// The one question to ask a person; empty when there is none.
    pub question: String,
    /// What the issue does not say yet.
    pub missing: Vec<String>,
    /// An example of a complete statement of the issue.
    pub example: String,
}

/// The block as the model writes it: unknown fields refused; one question at most, as a string.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    completeness: f64,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    missing: Vec<String>,
    #[serde(default)]
    example: Option<String>,
}

const OPEN: &str = "<assessment>";
const CLOSE: &str = "</assessment>";
const MAX_QUESTION: usize = 1000;
const MAX_MISSING: usize = 10;
const MAX_ITEM: usize = 500;
const MAX_EXAMPLE: usize = 4000;

/// The one `<assessment>` block in `text`, or why there is no usable one.
pub fn parse(text: &str) -> Result<Assessment, String> {
    let opens = text.matches(OPEN).count();
    if opens != 1 {
        return Err(format!(
            "the answer has {opens} <assessment> blocks; exactly one is expected"
        ));
    }
    let start = text.find(OPEN).expect("counted above") + OPEN.len();
    let Some(length) = text[start..].find(CLOSE) else {
        return Err("the <assessment> block is not closed with </assessment>".to_string());
    };
    let written: Written = serde_json::from_str(text[start..start + length].trim())
        .map_err(|e| format!("the <assessment> block is not the expected JSON: {e}"))?;
    let question = written.question.unwrap_or_default().trim().to_string();
    let example = written.example.unwrap_or_default().trim().to_string();
    let missing: Vec<String> = written
        .missing
        .iter()
        .map(|item| item.trim().to_string())
        .filter(|item| !item.is_empty())
        .collect();
    let too_long = |what: &str, max: usize| format!("{what} is longer than {max} characters");
    if question.chars().count() > MAX_QUESTION {
        return Err(too_long("the question", MAX_QUESTION));
    }
    if example.chars().count() > MAX_EXAMPLE {
        return Err(too_long("the example", MAX_EXAMPLE));
    }
    if missing.len() > MAX_MISSING {
        return Err(format!(
            "\"missing\" lists {} items; at most {MAX_MISSING}",
            missing.len()
        ));
    }
    if missing.iter().any(|item| item.chars().count() > MAX_ITEM) {
        return Err(too_long("an item of \"missing\"", MAX_ITEM));
    }
    if question.contains('\n') {
        return Err("the question spans several lines; ask one question".to_string());
    }
    Ok(Assessment {
        completeness: written.completeness.clamp(0.0, 1.0),
        question,
        missing,
        example,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_valid_block_is_read_and_its_completeness_clamped() {
        let text = r#"Thinking done.
<assessment>{"completeness": 1.7, "question": " Which port? ", "missing": ["the port", " "], "example": "Listen on 8080."}</assessment>"#;
        let assessment = parse(text).unwrap();
        assert_eq!(assessment.completeness, 1.0);
        assert_eq!(assessment.question, "Which port?");
        assert_eq!(assessment.missing, ["the port"]);
        assert_eq!(assessment.example, "Listen on 8080.");
        let low = parse(r#"<assessment>{"completeness": -3}</assessment>"#).unwrap();
        assert_eq!((low.completeness, low.question.as_str()), (0.0, ""));
    }

    #[test]
    fn anything_but_one_well_formed_block_is_refused_with_why() {
        for (text, why) in [
            ("no block at all", "0 <assessment> blocks"),
            (
                "<assessment>{\"completeness\": 1}</assessment><assessment>{}</assessment>",
                "2 <assessment> blocks",
            ),
            ("<assessment>{\"completeness\": 1}", "not closed"),
            ("<assessment>not json</assessment>", "not the expected JSON"),
            (
                "<assessment>{\"completeness\": 0.5, \"mood\": \"fine\"}</assessment>",
                "unknown field `mood`",
            ),
            (
                "<assessment>{\"completeness\": 0.5, \"question\": [\"a\", \"b\"]}</assessment>",
                "not the expected JSON",
            ),
            (
                "<assessment>{\"question\": \"a\"}</assessment>",
                "missing field `completeness`",
            ),
            (
                "<assessment>{\"completeness\": 0.2, \"question\": \"a?\\nb?\"}</assessment>",
                "one question",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        let long = format!(
            "<assessment>{{\"completeness\": 0.2, \"question\": \"{}\"}}</assessment>",
            "x".repeat(MAX_QUESTION + 1)
        );
        assert!(parse(&long).unwrap_err().contains("longer than"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// No input makes the parser panic: arbitrary text, and mutations of a valid block.
        #[test]
        fn no_input_panics(text in ".{0,300}", cut in 0usize..200, insert in "[<>/{}\\[\\]\":,. a-z0-9\\\\-]{0,12}") {
            let _ = parse(&text);
            let _ = parse(&format!("{OPEN}{text}{CLOSE}"));
            let mut block = r#"<assessment>{"completeness": 0.4, "question": "Which?", "missing": ["a"], "example": "e"}</assessment>"#.to_string();
            let mut at = cut.min(block.len());
            while !block.is_char_boundary(at) { at -= 1; }
            block.insert_str(at, &insert);
            if let Ok(assessment) = parse(&block) {
                prop_assert!((0.0..=1.0).contains(&assessment.completeness));
            }
        }
    }
}
