use super::*;
use proptest::prelude::*;

const EXAMPLE: &str = r#"I need a decision first.
<questions issueNumber="42">
  <title>Database driver choice</title>
  <prose>Need to decide before implementing the connection pool.</prose>
  <question>
    <title>Which driver?</title>
    <prose>The codebase has no existing database dependency.</prose>
    <options>
      <option><title>pg</title><prose>PostgreSQL client</prose></option>
      <option><title>mysql2</title><prose>MySQL client</prose></option>
    </options>
  </question>
  <question><title>Pool size &amp; why?</title></question>
</questions>"#;

fn error(text: &str) -> String {
    find(text, 42).expect("a block").unwrap_err().0
}

#[test]
fn the_documented_example_parses() {
    let questions = find(EXAMPLE, 42).unwrap().unwrap();
    assert_eq!(questions.title, "Database driver choice");
    assert_eq!(questions.items.len(), 2);
    assert_eq!(questions.items[0].options[1].title, "mysql2");
    assert_eq!(questions.items[0].options[1].prose, "MySQL client");
    assert_eq!(questions.items[1].title, "Pool size & why?");
    assert!(questions.items[1].options.is_empty());
    assert!(find("No questions here.", 42).is_none());
}

#[test]
fn every_deviation_is_named() {
    let with = |from: &str, to: &str| EXAMPLE.replace(from, to);
    for (text, says) in [
        (with("42", "7"), "issueNumber=\"7\" is not this issue"),
        (with(" issueNumber=\"42\"", ""), "has no issueNumber"),
        (with("issueNumber=\"42\"", "issueNumber=\"42\" x=\"1\""), "exactly one attribute"),
        (with("<title>pg</title>", "<title> </title>"), "<title> in <option> is empty"),
        (with("<prose>PostgreSQL client</prose>", "<note>x</note>"), "unexpected <note> in <option>"),
        (with("<question>", "<question id=\"1\">"), "<question> takes no attributes"),
        (with("<options>", "stray<options>"), "unexpected the text \"stray\" in <question>"),
        (with("</options>", "</option>"), "not well-formed"),
        (with("</questions>", ""), "not closed"),
        (format!("{EXAMPLE}\n{EXAMPLE}"), "2 <questions> blocks"),
        (with("Database driver choice", &"x".repeat(201)), "longer than 200"),
        (with("<![CDATA[", ""), ""),
        ("<questions issueNumber=\"42\"><title>t</title></questions>".to_string(), "holds no <question>"),
        ("<questions issueNumber=\"42\"><title>t</title><question><title>q</title><options></options></question></questions>".to_string(), "holds 0 options"),
    ] {
        if says.is_empty() {
            continue;
        }
        let why = error(&text);
        assert!(why.contains(says), "{says:?} not in {why:?}");
    }
}

#[test]
fn replies_are_numbers_reasons_or_free_text_one_line_per_question() {
    let questions = find(EXAMPLE, 42).unwrap().unwrap();
    let reply = read_reply(&questions, "2: we run MySQL\n\n ten, for now \n").unwrap();
    assert_eq!(
        reply,
        [
            Reply {
                option: Some(2),
                text: "we run MySQL".into()
            },
            Reply {
                option: None,
                text: "ten, for now".into()
            }
        ]
    );
    assert!(
        read_reply(&questions, "1")
            .unwrap_err()
            .contains("2 question(s)")
    );
    assert!(
        read_reply(&questions, "3\nx")
            .unwrap_err()
            .contains("options 1 to 2, not 3")
    );
    let one = Questions {
        items: questions.items[..1].to_vec(),
        ..questions
    };
    assert_eq!(read_reply(&one, "1").unwrap()[0].option, Some(1));
    assert_eq!(
        read_reply(&one, "use pg\nit is simpler").unwrap()[0].text,
        "use pg\nit is simpler"
    );
    assert!(read_reply(&one, "  ").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// No input makes the parser panic: arbitrary text, and mutations of a valid block.
    #[test]
    fn no_input_panics(text in ".{0,400}", cut in 0usize..700, insert in "[<>/&;\"= a-z\\[\\]!?-]{0,12}") {
        let _ = find(&text, 42);
        let mut block = EXAMPLE.to_string();
        let mut at = cut.min(block.len());
        while !block.is_char_boundary(at) { at -= 1; }
        block.insert_str(at, &insert);
        let _ = find(&block, 42);
        let _ = find(&format!("<questions issueNumber=\"42\">{text}</questions>"), 42);
        if let Some(Ok(questions)) = find(&block, 42) {
            let _ = read_reply(&questions, &text);
        }
    }
}
