//! `sandcastle doctor`: every prerequisite of a run, one line each, with the fix.
use crate::context::Settings;
use crate::forge::LIFECYCLE_LABELS;
use crate::sandbox;
use crate::secrets::EnvFile;
use anyhow::{Result, bail};
use std::path::Path;
use std::process::ExitCode;

/// Programs a sandbox needs from the image.
const IMAGE_PROGRAMS: [&str; 3] = ["claude", "git", "configure-tea"];

struct Report {
    failed: bool,
}

impl Report {
    /// Reports `result` and keeps its value.
    fn keep<T>(
        &mut self,
        what: &str,
        result: Result<T>,
        detail: impl FnOnce(&T) -> String,
    ) -> Option<T> {
        match result {
            Ok(value) => {
                self.line(what, Ok(detail(&value)));
                Some(value)
            }
            Err(e) => {
                self.line(what, Err(e));
                None
            }
        }
    }

    fn line(&mut self, what: &str, result: Result<String>) -> Option<String> {
        match result {
            Ok(detail) => {
                println!("ok    {what:<10} {detail}");
                Some(detail)
            }
            Err(e) => {
                println!("FAIL  {what:<10} {e:#}");
                self.failed = true;
                None
            }
        }
    }
}

pub fn doctor(project: &Path) -> Result<ExitCode> {
    let mut report = Report { failed: false };
    let config_path = project.join(sandcastle_config::DEFAULT_PATH);
    let config = sandcastle_config::load(&config_path).map_err(anyhow::Error::from);
    let Some(config) = report.keep("config", config, |_| config_path.display().to_string()) else {
        return Ok(ExitCode::FAILURE);
    };
    let env_path = project.join(".sandcastle/.env");
    let Some(env) = report.keep(".env", EnvFile::load(&env_path), |_| {
        env_path.display().to_string()
    }) else {
        return Ok(ExitCode::FAILURE);
    };
    let settings = Settings {
        project: project.to_path_buf(),
        config,
        env,
    };
    let config = &settings.config;

    let creds = report.line(
        "secrets",
        settings.credentials().and_then(|creds| {
            let anthropic = ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"];
            if !anthropic.iter().any(|key| settings.env.get(key).is_some_and(|v| !v.is_empty())) {
                bail!("neither ANTHROPIC_API_KEY nor CLAUDE_CODE_OAUTH_TOKEN is set: add one to .sandcastle/.env");
            }
            let declared: Vec<&str> = settings.env.vars.iter().map(|(k, _)| k.as_str()).collect();
            Ok(format!("FORGEJO_USER is {}; sandboxes get {}", creds.user, declared.join(", ")))
        }),
    );
    let creds = creds.and(settings.credentials().ok());

    if report
        .line(
            "docker",
            sandbox::engine_answers().map(|()| "the engine answers".to_string()),
        )
        .is_some()
        && report
            .line(
                "image",
                sandbox::image_exists(&config.image_name).map(|()| config.image_name.clone()),
            )
            .is_some()
    {
        report.line(
            "programs",
            sandbox::image_has_programs(&config.image_name, &IMAGE_PROGRAMS)
                .map(|()| format!("{} in the image", IMAGE_PROGRAMS.join(", "))),
        );
    }

    let Some(creds) = creds else {
        return Ok(ExitCode::FAILURE);
    };
    let forge = settings.forge(&creds);
    let reached = report.line(
        "forge",
        forge.default_branch().map(|branch| {
            format!(
                "{} answers; {} has default branch {branch}",
                config.forge_url, config.repo
            )
        }),
    );
    if reached.is_some() {
        report.line(
            "token",
            forge
                .current_user()
                .map(|user| format!("accepted, as {user}")),
        );
        report.line(
            "labels",
            forge.labels().and_then(|labels| {
                let missing: Vec<&str> = LIFECYCLE_LABELS
                    .iter()
                    .map(|(name, _)| *name)
                    .filter(|name| !labels.iter().any(|l| l.name == *name))
                    .collect();
                if missing.is_empty() {
                    Ok("all lifecycle labels exist".to_string())
                } else {
                    bail!(
                        "missing {}: `sandcastle run` creates them",
                        missing.join(", ")
                    )
                }
            }),
        );
    }
    Ok(if report.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
