//! The choosing reviewer's answer when several attempts at one issue passed the gate:
//! `<choice>{"attempt": "b", "why": "…"}</choice>`, parsed strictly against the attempts it was
//! shown. Pure: no forge, no files. A malformed block is the reviewer's failed turn, told why.
use serde::Deserialize;

/// The attempt the reviewer chose among those it was shown, and its reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// The attempt's letter (`a`, `b`, …).
    pub attempt: char,
    /// The reviewer's reasons, as it wrote them (agent text: quoted wherever it is shown).
    pub why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    attempt: String,
    why: String,
}

const OPEN: &str = "<choice>";
const CLOSE: &str = "</choice>";
/// The longest block read: an attempt's letter and a few paragraphs of reasons.
const MAX_BLOCK: usize = 8 * 1024;
/// The longest `why` kept, in characters.
pub const MAX_WHY: usize = 2000;

/// The one `<choice>` block of `text`, naming one of `candidates`, or why there is no usable one.
pub fn parse(text: &str, candidates: &[char]) -> Result<Choice, String> {
    let opens = text.matches(OPEN).count();
    if opens != 1 {
        return Err(format!(
            "the answer has {opens} <choice> blocks; exactly one is expected"
        ));
    }
    let start = text.find(OPEN).expect("counted above") + OPEN.len();
    let Some(length) = text[start..].find(CLOSE) else {
        return Err("the <choice> block is not closed with </choice>".to_string());
    };
    if length > MAX_BLOCK {
        return Err(format!(
            "the <choice> block is longer than {MAX_BLOCK} bytes"
        ));
    }
    let written: Written = serde_json::from_str(text[start..start + length].trim())
        .map_err(|e| format!("the <choice> block is not the expected JSON: {e}"))?;
    let shown = || {
        let letters: Vec<String> = candidates.iter().map(|c| format!("\"{c}\"")).collect();
        letters.join(", ")
    };
    let mut letters = written.attempt.chars();
    let attempt = match (letters.next(), letters.next()) {
        (Some(letter), None) if candidates.contains(&letter) => letter,
        _ => {
            return Err(format!(
                "\"attempt\" must be one of {}, the attempts shown; found {:?}",
                shown(),
                written.attempt.chars().take(20).collect::<String>()
            ));
        }
    };
    let why = written.why.trim().to_string();
    if why.is_empty() {
        return Err("\"why\" is empty; say why this attempt is the best".to_string());
    }
    if why.chars().count() > MAX_WHY {
        return Err(format!("\"why\" is longer than {MAX_WHY} characters"));
    }
    Ok(Choice { attempt, why })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_choice_parses() {
        let text = r#"Both work. <choice>{"attempt": "b", "why": " smaller diff "}</choice>"#;
        assert_eq!(
            parse(text, &['a', 'b']),
            Ok(Choice {
                attempt: 'b',
                why: "smaller diff".into()
            })
        );
    }

    #[test]
    fn malformed_choices_say_why() {
        let long_why = format!(
            r#"<choice>{{"attempt":"a","why":"{}"}}</choice>"#,
            "x".repeat(MAX_WHY + 1)
        );
        let long_block = format!("<choice>{}</choice>", " ".repeat(MAX_BLOCK + 1));
        let cases = [
            ("no block", "0 <choice> blocks"),
            (
                r#"<choice>{"attempt":"a","why":"x"}</choice><choice>{"attempt":"b","why":"y"}</choice>"#,
                "2 <choice> blocks",
            ),
            (r#"<choice>{"attempt":"a","why":"x"}"#, "not closed"),
            ("<choice>{attempt: a}</choice>", "not the expected JSON"),
            (
                r#"<choice>{"attempt":"a","why":"x","score":3}</choice>"#,
                "not the expected JSON",
            ),
            (
                r#"<choice>{"attempt":"a"}</choice>"#,
                "not the expected JSON",
            ),
            (
                r#"<choice>{"attempt":1,"why":"x"}</choice>"#,
                "not the expected JSON",
            ),
            (
                r#"<choice>{"attempt":"c","why":"x"}</choice>"#,
                "one of \"a\", \"b\"",
            ),
            (
                r#"<choice>{"attempt":"ab","why":"x"}</choice>"#,
                "found \"ab\"",
            ),
            (r#"<choice>{"attempt":"","why":"x"}</choice>"#, "found \"\""),
            (r#"<choice>{"attempt":"a","why":"  "}</choice>"#, "empty"),
            (long_why.as_str(), "longer than 2000 characters"),
            (long_block.as_str(), "longer than 8192 bytes"),
        ];
        for (text, want) in cases {
            let why = parse(text, &['a', 'b']).unwrap_err();
            assert!(why.contains(want), "{text:.80}: {why}");
        }
    }
}
