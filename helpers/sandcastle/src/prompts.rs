//! The four prompts, compiled in from `prompts/`; `.sandcastle/prompts/<name>.md` overrides one.
//! OWNER: helper H6. Interface fixed; bodies to implement.
use anyhow::Result;
use std::path::Path;

/// `plan`, `implement`, `review`, `pr-fixer`.
pub const NAMES: [&str; 4] = ["plan", "implement", "review", "pr-fixer"];

/// Fills every `{{NAME}}` from `vars`; an unknown placeholder or a missing value is an error naming
/// the prompt and the placeholder. `project_dir` is where `.sandcastle/prompts/` is looked for.
pub fn render(project_dir: &Path, name: &str, vars: &[(&str, &str)]) -> Result<String> { todo!() }
