//! The four prompts, compiled in from `prompts/`; `.sandcastle/prompts/<name>.md` overrides one.
//!
//! A placeholder is `{{NAME}}` with NAME made of ASCII letters, digits and `_`; any other `{{` is
//! plain text. Values are inserted in one pass, so a value that itself contains `{{X}}` stays as it is.
use anyhow::{Context, Result, bail};
use std::path::Path;

/// `plan`, `implement`, `review`, `pr-fixer`.
pub const NAMES: [&str; 4] = ["plan", "implement", "review", "pr-fixer"];

const COMMON: [&str; 2] = ["REPO", "FORGE_HOST"];

/// The built-in text of a prompt and the placeholders it may use besides `COMMON`.
fn builtin(name: &str) -> Option<(&'static str, &'static [&'static str])> {
    Some(match name {
        "plan" => (
            include_str!("../../../prompts/plan.md"),
            &["ISSUES", "MAX_CONCURRENCY"],
        ),
        "implement" => (
            include_str!("../../../prompts/implement.md"),
            &[
                "ISSUE_NUMBER",
                "ISSUE_TITLE",
                "ISSUE_BODY",
                "BRANCH",
                "BASE_BRANCH",
                "ITERATION",
                "MAX_ITERATIONS",
            ],
        ),
        "review" => (
            include_str!("../../../prompts/review.md"),
            &[
                "ISSUE_NUMBER",
                "ISSUE_TITLE",
                "ISSUE_BODY",
                "BRANCH",
                "BASE_BRANCH",
            ],
        ),
        "pr-fixer" => (
            include_str!("../../../prompts/pr-fixer.md"),
            &["PR_NUMBER", "PR_TITLE", "BRANCH", "BASE_BRANCH", "REVIEWS"],
        ),
        _ => return None,
    })
}

/// Fills every `{{NAME}}` from `vars`; an unknown placeholder or a missing value is an error naming
/// the prompt and the placeholder. `project_dir` is where `.sandcastle/prompts/` is looked for.
pub fn render(project_dir: &Path, name: &str, vars: &[(&str, &str)]) -> Result<String> {
    let Some((builtin_text, specific)) = builtin(name) else {
        bail!(
            "unknown prompt `{name}`: the prompts are {}",
            NAMES.join(", ")
        );
    };
    let override_path = project_dir
        .join(".sandcastle/prompts")
        .join(format!("{name}.md"));
    let (text, source) = if override_path.exists() {
        let text = std::fs::read_to_string(&override_path).with_context(|| {
            format!(
                "cannot read the prompt override {}: make it a readable UTF-8 file or remove it",
                override_path.display()
            )
        })?;
        (text, override_path.display().to_string())
    } else {
        (builtin_text.to_string(), format!("built-in {name}.md"))
    };
    let known =
        |placeholder: &str| COMMON.contains(&placeholder) || specific.contains(&placeholder);
    fill(&text, |placeholder| {
        if !known(placeholder) {
            bail!(
                "prompt `{name}` ({source}) uses the unknown placeholder {{{{{placeholder}}}}}: \
                 the prompt `{name}` knows {}",
                COMMON
                    .iter()
                    .chain(specific)
                    .map(|known| format!("{{{{{known}}}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        match vars.iter().find(|(key, _)| *key == placeholder) {
            Some((_, value)) => Ok(value),
            None => bail!(
                "prompt `{name}` ({source}): no value for the placeholder {{{{{placeholder}}}}}"
            ),
        }
    })
}

/// Replaces each placeholder in `text` with `value_of(name)`, in one left-to-right pass.
fn fill<'v>(text: &str, mut value_of: impl FnMut(&str) -> Result<&'v str>) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with("}}") {
            out.push_str(value_of(&after[..name_len])?);
            rest = &after[name_len + 2..];
        } else {
            out.push_str("{{");
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every placeholder a prompt knows, with a value that names it.
    fn all_vars(name: &str) -> Vec<(&'static str, String)> {
        let (_, specific) = builtin(name).unwrap();
        COMMON
            .iter()
            .chain(specific)
            .map(|key| (*key, format!("<value of {key}>")))
            .collect()
    }

    fn as_refs<'a>(vars: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
        vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
    }

    fn no_project() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn every_builtin_prompt_renders_with_every_placeholder_used_and_filled() {
        let dir = no_project();
        for name in NAMES {
            let vars = all_vars(name);
            let text = render(dir.path(), name, &as_refs(&vars)).unwrap();
            assert!(!text.contains("{{"), "{name} leaves a {{{{");
            for (key, value) in &vars {
                assert!(
                    text.contains(value.as_str()),
                    "{name} does not use {{{{{key}}}}}"
                );
            }
        }
    }

    #[test]
    fn builtin_prompts_follow_the_contract() {
        for name in NAMES {
            let (text, _) = builtin(name).unwrap();
            assert!(
                !text.contains("--repo "),
                "{name}: tea calls take no --repo"
            );
            assert!(text.contains("do not push"), "{name}: must forbid pushing");
            assert!(
                text.contains("do not change labels")
                    || text.contains("do not add or remove labels"),
                "{name}"
            );
            assert!(
                text.contains("comment"),
                "{name}: must forbid forge comments"
            );
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{name}: no URL written in"
            );
            if name == "plan" {
                assert!(text.contains(r#"<plan>{"issues":[]}</plan>"#));
                assert!(text.contains("{{MAX_CONCURRENCY}}"));
            } else {
                assert!(text.contains("<promise>COMPLETE</promise>"), "{name}");
                assert!(text.contains("`fmt`") && text.contains("`check`"), "{name}");
            }
        }
        assert!(
            builtin("review")
                .unwrap()
                .0
                .contains("\n@.sandcastle/CODING_STANDARDS.md\n")
        );
    }

    #[test]
    fn values_are_inserted_literally() {
        let dir = no_project();
        let mut vars = all_vars("implement");
        vars.retain(|(key, _)| *key != "ISSUE_BODY");
        vars.push((
            "ISSUE_BODY",
            "use {{BRANCH}} and {{NOPE}} as {{ text".into(),
        ));
        let text = render(dir.path(), "implement", &as_refs(&vars)).unwrap();
        assert!(text.contains("use {{BRANCH}} and {{NOPE}} as {{ text"));
    }

    #[test]
    fn missing_value_names_prompt_and_placeholder() {
        let dir = no_project();
        let mut vars = all_vars("review");
        vars.retain(|(key, _)| *key != "BASE_BRANCH");
        let err = render(dir.path(), "review", &as_refs(&vars))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("prompt `review`") && err.contains("{{BASE_BRANCH}}"),
            "{err}"
        );
    }

    #[test]
    fn override_is_used_and_its_unknown_placeholder_is_an_error() {
        let dir = no_project();
        let prompts = dir.path().join(".sandcastle/prompts");
        std::fs::create_dir_all(&prompts).unwrap();
        std::fs::write(
            prompts.join("pr-fixer.md"),
            "Fix #{{PR_NUMBER}} in {{REPO}}; {{ not one }}",
        )
        .unwrap();
        let vars = all_vars("pr-fixer");
        assert_eq!(
            render(dir.path(), "pr-fixer", &as_refs(&vars)).unwrap(),
            "Fix #<value of PR_NUMBER> in <value of REPO>; {{ not one }}"
        );

        std::fs::write(prompts.join("plan.md"), "Plan {{ISSUE_NUMBER}}").unwrap();
        let vars = all_vars("plan");
        let err = render(dir.path(), "plan", &as_refs(&vars))
            .unwrap_err()
            .to_string();
        assert!(err.contains("prompt `plan`"), "{err}");
        assert!(
            err.contains("unknown placeholder {{ISSUE_NUMBER}}"),
            "{err}"
        );
        assert!(err.contains(".sandcastle/prompts/plan.md"), "{err}");
    }

    #[test]
    fn unknown_prompt_is_an_error() {
        let err = render(no_project().path(), "deploy", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown prompt `deploy`"), "{err}");
    }
}
