//! The planner's answer: `<plan>{"issues":[{"id":42,"title":"…","branch":"sandcastle/issue-42"}]}</plan>`,
//! validated strictly against the candidates it was given.
use anyhow::{Result, bail};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedIssue {
    pub id: u64,
    pub title: String,
    pub branch: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    issues: Vec<PlannedIssue>,
}

/// The branch every issue's work lives on.
pub fn branch_for(issue: u64) -> String {
    format!("sandcastle/issue-{issue}")
}

/// Parses the last `<plan>…</plan>` block of `text`. Every id must be a candidate, at most once, with
/// its canonical branch. A plan may hold more issues than run at once: the pass works through them
/// `maxConcurrency` at a time, in order.
pub fn parse(text: &str, candidates: &[u64]) -> Result<Vec<PlannedIssue>> {
    let Some(start) = text.rfind("<plan>") else {
        bail!("the answer has no <plan>…</plan> block");
    };
    let body = &text[start + "<plan>".len()..];
    let Some(end) = body.find("</plan>") else {
        bail!("the <plan> block is not closed with </plan>");
    };
    let plan: Plan = serde_json::from_str(body[..end].trim())
        .map_err(|e| anyhow::anyhow!("the <plan> block is not valid plan JSON: {e}"))?;
    for (i, issue) in plan.issues.iter().enumerate() {
        if !candidates.contains(&issue.id) {
            bail!(
                "the plan names issue #{}, which is not one of the candidates {candidates:?}",
                issue.id
            );
        }
        if plan.issues[..i].iter().any(|other| other.id == issue.id) {
            bail!("the plan names issue #{} twice", issue.id);
        }
        let expected = branch_for(issue.id);
        if issue.branch != expected {
            bail!(
                "the plan gives issue #{} the branch {:?}; it must be {expected:?}",
                issue.id,
                issue.branch
            );
        }
    }
    Ok(plan.issues)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_plan_parses() {
        let text = r#"I looked. <plan>{"issues":[{"id":3,"title":"Fix","branch":"sandcastle/issue-3"}]}</plan>"#;
        let plan = parse(text, &[3, 4]).unwrap();
        assert_eq!(
            plan,
            vec![PlannedIssue {
                id: 3,
                title: "Fix".into(),
                branch: "sandcastle/issue-3".into()
            }]
        );
    }

    #[test]
    fn an_empty_plan_is_valid() {
        assert!(
            parse(r#"<plan>{"issues":[]}</plan>"#, &[1])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_last_block_wins() {
        let text = r#"<plan>{"issues":[]}</plan> then <plan>{"issues":[{"id":1,"title":"a","branch":"sandcastle/issue-1"}]}</plan>"#;
        assert_eq!(parse(text, &[1]).unwrap().len(), 1);
    }

    #[test]
    fn invalid_plans_say_why() {
        let cases = [
            ("no block here", "no <plan>"),
            ("<plan>{\"issues\":[]}", "not closed"),
            ("<plan>{issues:[]}</plan>", "not valid plan JSON"),
            (
                r#"<plan>{"issues":[],"extra":1}</plan>"#,
                "not valid plan JSON",
            ),
            (
                r#"<plan>{"issues":[{"id":9,"title":"a","branch":"sandcastle/issue-9"}]}</plan>"#,
                "not one of the candidates",
            ),
            (
                r#"<plan>{"issues":[{"id":1,"title":"a","branch":"feature/x"}]}</plan>"#,
                "must be \"sandcastle/issue-1\"",
            ),
            (
                r#"<plan>{"issues":[{"id":1,"title":"a","branch":"sandcastle/issue-1"},{"id":1,"title":"a","branch":"sandcastle/issue-1"}]}</plan>"#,
                "twice",
            ),
        ];
        for (text, want) in cases {
            let err = parse(text, &[1, 2]).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    /// The plan is the pass's queue, in the planner's order: it may be longer than maxConcurrency.
    #[test]
    fn a_plan_keeps_its_order_and_may_exceed_what_runs_at_once() {
        let text = r#"<plan>{"issues":[{"id":3,"title":"c","branch":"sandcastle/issue-3"},{"id":1,"title":"a","branch":"sandcastle/issue-1"},{"id":2,"title":"b","branch":"sandcastle/issue-2"}]}</plan>"#;
        let ids: Vec<u64> = parse(text, &[1, 2, 3])
            .unwrap()
            .iter()
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, [3, 1, 2]);
    }
}
