//! The scenario file: which scripted answers the fake model gives to which conversation.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

/// Tokens reported for one response when a turn does not set its own.
pub const DEFAULT_USAGE: Usage = Usage {
    input_tokens: 100,
    output_tokens: 20,
};

/// A list of scripts; a conversation follows the first script whose `match` occurs in its prompt.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct Scenario {
    pub scripts: Vec<Script>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// A substring of the conversation's first user prompt (system reminders excluded).
    #[serde(rename = "match")]
    pub pattern: String,
    pub turns: Vec<Turn>,
    /// Answer every turn past the end with the last turn again (an agent that never completes).
    #[serde(default)]
    pub repeat_last: bool,
    /// Also answer conversations offered no tools at all (Claude Code run with `--tools ""`, a
    /// reasoning-only role); without it such requests are side requests.
    #[serde(default)]
    pub without_tools: bool,
}

/// One assistant response: optional text, then optionally a Bash tool call (`bash`) or a call of
/// any other tool by name (`tool`, e.g. an MCP server's). Without either the response ends the turn
/// (`end_turn`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub bash: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// A call of the tool `name` with `input`, e.g. `{"name": "mcp__sandcastle__ask", "input": {…}}`.
    #[serde(default)]
    pub tool: Option<NamedTool>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// A planner's answer made from its prompt: a `<plan>` of the first `plan` candidate issues
    /// the prompt lists (`"id": N`), so a planner can be scripted for candidates that change.
    #[serde(default)]
    pub plan: Option<usize>,
    /// Seconds to wait before answering: a slow model.
    #[serde(default)]
    pub delay_seconds: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedTool {
    pub name: String,
    #[serde(default)]
    pub input: serde_json::Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
        }
    }
}

impl Scenario {
    pub fn from_json(text: &str) -> anyhow::Result<Scenario> {
        let scenario: Scenario = serde_json::from_str(text)?;
        scenario.validate()?;
        Ok(scenario)
    }

    pub fn from_file(path: &Path) -> anyhow::Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read scenario file {}", path.display()))?;
        Scenario::from_json(&text)
            .with_context(|| format!("invalid scenario file {}", path.display()))
    }

    fn validate(&self) -> anyhow::Result<()> {
        for (i, script) in self.scripts.iter().enumerate() {
            if script.pattern.is_empty() {
                bail!("scripts[{i}].match is empty: give a substring of the prompt");
            }
            if script.turns.is_empty() {
                bail!("scripts[{i}].turns is empty: give at least one turn");
            }
            for (t, turn) in script.turns.iter().enumerate() {
                if turn.text.is_none()
                    && turn.bash.is_none()
                    && turn.tool.is_none()
                    && turn.plan.is_none()
                {
                    bail!(
                        "scripts[{i}].turns[{t}] has none of \"text\", \"bash\", \"tool\" and \"plan\""
                    );
                }
                if turn.bash.is_some() && turn.tool.is_some() {
                    bail!(
                        "scripts[{i}].turns[{t}] has both \"bash\" and \"tool\": one tool call a turn"
                    );
                }
            }
        }
        Ok(())
    }

    /// The script for a conversation whose first prompt is `prompt`.
    pub fn script_for(&self, prompt: &str) -> Option<(usize, &Script)> {
        self.scripts
            .iter()
            .enumerate()
            .find(|(_, script)| prompt.contains(&script.pattern))
    }
}

impl Script {
    /// The response for the `index`-th assistant message of the conversation.
    pub fn turn(&self, index: usize) -> Option<&Turn> {
        match self.turns.get(index) {
            Some(turn) => Some(turn),
            None if self.repeat_last => self.turns.last(),
            None => None,
        }
    }
}

impl Turn {
    pub fn usage(&self) -> Usage {
        self.usage.unwrap_or(DEFAULT_USAGE)
    }

    /// The turn's text: its own, or for a `plan` turn a plan of the first candidates in `prompt`.
    pub fn text_for(&self, prompt: &str) -> Option<String> {
        let Some(count) = self.plan else {
            return self.text.clone();
        };
        let mut ids: Vec<u64> = Vec::new();
        for part in prompt.split("\"id\": ").skip(1) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(id) = digits.parse()
                && !ids.contains(&id)
            {
                ids.push(id);
            }
        }
        let issues: Vec<String> = ids
            .iter()
            .take(count)
            .map(|id| {
                format!("{{\"id\":{id},\"title\":\"#{id}\",\"branch\":\"sandcastle/issue-{id}\"}}")
            })
            .collect();
        Some(format!(
            "<plan>{{\"issues\":[{}]}}</plan>",
            issues.join(",")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_turn_plans_the_first_candidates_its_prompt_lists() {
        let scenario =
            Scenario::from_json(r#"[{"match": "planner", "turns": [{"plan": 2}]}]"#).unwrap();
        let (_, script) = scenario.script_for("planner").unwrap();
        let prompt = "planner\n[{\"id\": 4, \"title\": \"a\"}, {\"id\": 7}, {\"id\": 9}]";
        assert_eq!(
            script.turn(0).unwrap().text_for(prompt).unwrap(),
            r##"<plan>{"issues":[{"id":4,"title":"#4","branch":"sandcastle/issue-4"},{"id":7,"title":"#7","branch":"sandcastle/issue-7"}]}</plan>"##
        );
        assert_eq!(
            script
                .turn(0)
                .unwrap()
                .text_for("planner, nothing listed")
                .unwrap(),
            r#"<plan>{"issues":[]}</plan>"#
        );
    }

    #[test]
    fn first_matching_script_wins_and_repeat_last_repeats() {
        let scenario = Scenario::from_json(
            r#"[{"match": "issue #1", "turns": [{"bash": "true"}, {"text": "done"}]},
                {"match": "issue", "repeat_last": true, "turns": [{"text": "still working"}]}]"#,
        )
        .unwrap();
        let (index, script) = scenario.script_for("work on issue #1 now").unwrap();
        assert_eq!(index, 0);
        assert_eq!(script.turn(1).unwrap().text.as_deref(), Some("done"));
        assert!(script.turn(2).is_none());
        let (index, script) = scenario.script_for("issue #2").unwrap();
        assert_eq!(index, 1);
        assert_eq!(
            script.turn(7).unwrap().text.as_deref(),
            Some("still working")
        );
        assert!(scenario.script_for("plan").is_none());
    }

    #[test]
    fn a_turn_without_text_or_bash_is_rejected_with_its_position() {
        let err = Scenario::from_json(r#"[{"match": "x", "turns": [{"description": "d"}]}]"#)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "scripts[0].turns[0] has none of \"text\", \"bash\", \"tool\" and \"plan\""
        );
    }
}
