//! `sandcastle doctor`: every prerequisite of a run, one line each, with the fix.
use crate::context::{HOST_ONLY_KEYS, Settings};
use anyhow::{Result, bail};
use sandcastle_core::claims;
use sandcastle_core::forge::{Forge, LIFECYCLE_LABELS};
use sandcastle_core::git::Credentials;
use sandcastle_core::proxy::CREDENTIAL_KEYS;
use sandcastle_core::sandbox::{self, Lack};
use sandcastle_core::secrets::EnvFile;
use std::path::Path;
use std::process::ExitCode;

/// Programs the orchestrator runs in a sandbox besides its shell: Claude Code, `sandcastle` (the
/// relay, the turn), git (the checkout), `configure-tea`, and the tools of its scripts.
const ORCHESTRATOR_PROGRAMS: [&str; 12] = [
    "claude",
    "sandcastle",
    "git",
    "configure-tea",
    "cat",
    "mkdir",
    "mktemp",
    "rm",
    "dirname",
    "cp",
    "chmod",
    "mv",
];
/// Programs the prompts tell the agents to call; `tea` too when sandboxes get a forge login.
const AGENT_PROGRAMS: [&str; 4] = ["git", "fmt", "check", "sandcastle"];
/// Programs `sandcastle` itself runs on the host (Docker it reaches through the engine's API).
const HOST_PROGRAMS: [&str; 1] = ["git"];

/// What `nix flake init -t sandcastle#rust` writes and a project must change: the file, the text,
/// and what to do instead.
const TEMPLATE_PLACEHOLDERS: [(&str, &str, &str); 3] = [
    (
        "flake.nix",
        "git+https://forge.example.dev/sandcastle/sandcastle",
        "point the `sandcastle` input at sandcastle's flake (e.g. \"git+https://<your forge>/<owner>/sandcastle\"), then run `nix flake lock`",
    ),
    (
        sandcastle_config::DEFAULT_PATH,
        "repo = \"owner/name\"",
        "set `repo` to your repository's \"owner/name\"",
    ),
    (
        sandcastle_config::DEFAULT_PATH,
        "forgeHost = \"forge.example.dev\"",
        "set `forgeHost` to your forge",
    ),
];

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
    let Some(settings) = settings(&mut report, project) else {
        return Ok(ExitCode::FAILURE);
    };
    let config = &settings.config;
    let creds = report.line("secrets", secrets(&settings));
    let creds = creds.and(settings.credentials().ok());
    report.line("model", model(&settings));
    report.line("host", host_programs());
    report.line("questions", question_handlers(project, &config.questions));
    check_image(&mut report, &settings);
    let Some(creds) = creds else {
        return Ok(ExitCode::FAILURE);
    };
    check_forge(&mut report, &settings, &creds);
    Ok(if report.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The project's config and `.env`, each reported; the template's placeholders reported between.
fn settings(report: &mut Report, project: &Path) -> Option<Settings> {
    let config_path = project.join(sandcastle_config::DEFAULT_PATH);
    let config = sandcastle_config::load(&config_path).map_err(anyhow::Error::from);
    let config = report.keep("config", config, |_| config_path.display().to_string())?;
    report.line("template", template_placeholders(project));
    let env_path = project.join(".sandcastle/.env");
    let env = if env_path.exists() {
        EnvFile::load(&env_path)
    } else {
        Err(anyhow::anyhow!(
            "{} is missing: `cp .sandcastle/.env.example .sandcastle/.env` and fill it in",
            env_path.display()
        ))
    };
    let env = report.keep(".env", env, |_| env_path.display().to_string())?;
    Some(Settings {
        project: project.to_path_buf(),
        config,
        env,
    })
}

/// The forge login, the model credential, and which keys sandboxes get and logs hide.
fn secrets(settings: &Settings) -> Result<String> {
    let creds = settings.credentials()?;
    // The model credential stays with the host's proxy; checked as the run reads it.
    settings.upstream()?;
    let passed: Vec<&str> = settings
        .env
        .vars
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| !HOST_ONLY_KEYS.contains(k))
        // As `Context::sandbox_env`: a key with no value anywhere is not passed.
        .filter(|k| settings.env.get(k).is_some())
        .collect();
    let redacted = settings.env.redacted_keys();
    Ok(secrets_line(&creds.user, &passed, &redacted))
}

/// The `secrets` line: an empty list is said as such, never left blank.
fn secrets_line(user: &str, passed: &[&str], redacted: &[String]) -> String {
    let passed = match passed {
        [] => "no variable of .sandcastle/.env".to_string(),
        keys => keys.join(", "),
    };
    let redacted = match redacted {
        [] => "nothing".to_string(),
        keys => keys.join(", "),
    };
    format!(
        "FORGEJO_USER is {user}; sandboxes get {passed}; redacted from logs: {redacted} (values under 8 characters or common words are not)"
    )
}

/// Which model credential the proxy sends, how and where (never its value), and the credential
/// variables set but not used.
fn model(settings: &Settings) -> Result<String> {
    let upstream = settings.upstream()?;
    let unused: Vec<&str> = CREDENTIAL_KEYS
        .into_iter()
        .filter(|key| settings.env.get(key).is_some())
        .skip(1)
        .collect();
    let mut said = upstream.describe();
    if !unused.is_empty() {
        said += &format!(
            "; {} also set, unused: the first of {} wins",
            unused.join(" and "),
            CREDENTIAL_KEYS.join(", ")
        );
    }
    Ok(said)
}

/// The Docker engine and the image; when both are there, the sandboxes' network and runtime, and,
/// when the engine knows the runtime, the programs the image must hold.
fn check_image(report: &mut Report, settings: &Settings) {
    let config = &settings.config;
    if report.line("docker", docker_engine()).is_none()
        || report
            .line(
                "image",
                sandbox::provider()
                    .image_exists(&config.image_name)
                    .map(|()| config.image_name.clone()),
            )
            .is_none()
        || report
            .line(
                "engine",
                sandbox::provider().engine_says(&config.image_name),
            )
            .is_none()
    {
        return;
    }
    report.line("network", Ok(sandbox::network_says(config.sandbox.network)));
    let runtime = config.sandbox.runtime.as_deref();
    if report
        .line("runtime", sandbox::provider().runtime_says(runtime))
        .is_none()
    {
        return;
    }
    orchestrator_programs(report, &config.image_name, runtime);
    agent_programs(report, settings);
}

/// The engine's socket (or loopback port) is this host's and the engine answers on it.
fn docker_engine() -> Result<String> {
    let host = sandbox::provider().endpoint()?;
    sandbox::provider()
        .answers()
        .map(|()| format!("the engine at {host} answers"))
}

/// What sandcastle runs in the image: one line when all is there, else one line per missing
/// thing, with what needs it and the fix.
fn orchestrator_programs(report: &mut Report, image: &str, runtime: Option<&str>) {
    match sandbox::provider().image_lacks(image, runtime, &ORCHESTRATOR_PROGRAMS) {
        Ok(lacks) if lacks.is_empty() => {
            report.line(
                "programs",
                Ok(format!(
                    "sh, {} and the user agent in the image (what sandcastle runs there)",
                    ORCHESTRATOR_PROGRAMS.join(", ")
                )),
            );
        }
        Ok(lacks) => {
            for lack in lacks {
                report.line(
                    "programs",
                    Err(anyhow::anyhow!("{}", lacking(image, &lack))),
                );
            }
        }
        Err(e) => {
            report.line("programs", Err(e));
        }
    }
}

/// One missing thing of the image, what needs it, and the fix.
fn lacking(image: &str, lack: &Lack) -> String {
    const REBUILD: &str = "rebuild it with `nix run .#sandcastleImage | docker load`";
    match lack {
        Lack::AgentUser => format!(
            "the image {image} has no user `agent` (uid 1000, home /home/agent), whom every agent runs as: {REBUILD}, or add the user to your image"
        ),
        Lack::Shell => format!(
            "the image {image} has no POSIX shell (`sh` on the PATH), which sandcastle's setup and hand-out run in: {REBUILD}, or add one (BusyBox's will do)"
        ),
        Lack::Program(program) => {
            let needs = match program.as_str() {
                "claude" => "Claude Code, which runs every turn",
                "sandcastle" => "the sandbox's relay to the model and the agent's turn",
                "git" => "the agent's checkout",
                "configure-tea" => "the sandbox's read-only forge login",
                _ => "sandcastle's setup in the sandbox",
            };
            format!("the image {image} lacks {program} ({needs}) on its PATH: {REBUILD}")
        }
    }
}

/// What the prompts call in the image: `tea` too when sandboxes get a forge login; a line for each
/// one missing.
fn agent_programs(report: &mut Report, settings: &Settings) {
    let mut tools = AGENT_PROGRAMS.to_vec();
    if settings.env.get("FORGEJO_AGENT_TOKEN").is_some() {
        tools.push("tea");
    }
    let image = &settings.config.image_name;
    let runtime = settings.config.sandbox.runtime.as_deref();
    match sandbox::provider().image_lacks(image, runtime, &tools) {
        Ok(lacks) if lacks.is_empty() => {
            report.line(
                "tools",
                Ok(format!(
                    "{} in the image (what the prompts call)",
                    tools.join(", ")
                )),
            );
        }
        Ok(lacks) => {
            for lack in lacks {
                let line = match lack {
                    Lack::Program(program) => format!(
                        "the image {image} lacks {program}, which the prompts call: add it to the image (`extraContents`) and rebuild it with `nix run .#sandcastleImage | docker load`"
                    ),
                    // Said on the `programs` line.
                    Lack::AgentUser | Lack::Shell => continue,
                };
                report.line("tools", Err(anyhow::anyhow!("{line}")));
            }
        }
        Err(e) => {
            report.line("tools", Err(e));
        }
    }
}

/// The forge and the repository; when they answer, the tokens, the claims and the labels.
fn check_forge(report: &mut Report, settings: &Settings, creds: &Credentials) {
    let config = &settings.config;
    let forge = match settings.forge(creds) {
        Ok(forge) => forge,
        Err(error) => {
            report.line("forge", Err(error));
            return;
        }
    };
    let reached = report.line(
        "forge",
        forge.default_branch().map(|branch| {
            format!(
                "{} answers; {} has default branch {branch}",
                config.forge_url, config.repo
            )
        }),
    );
    if reached.is_none() {
        return;
    }
    let login = forge.current_user();
    let shown = match &login {
        Ok(user) => Ok(format!("accepted, as {user}")),
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    report.line("token", shown);
    report.line("sandboxes", sandbox_login(settings, creds, &login));
    report.line("claims", claims_held(&forge, &creds.user));
    report.line("labels", lifecycle_labels(&forge));
}

/// The forge login sandboxes get, if any; checked only once the forge accepts `FORGEJO_TOKEN`.
fn sandbox_login(
    settings: &Settings,
    creds: &Credentials,
    login: &Result<String>,
) -> Result<String> {
    let agent = match login {
        Ok(login) => settings.agent_login(creds, login),
        Err(_) => Err(anyhow::anyhow!(
            "not checked: the forge does not accept FORGEJO_TOKEN (see above)"
        )),
    };
    agent.map(|login| match login {
        Some(login) => format!(
            "tea reads the forge as {} (FORGEJO_AGENT_TOKEN; give it read-only scopes); FORGEJO_TOKEN stays on the host",
            login.user
        ),
        None => "no forge token: tea is not configured in sandboxes; add a read-only FORGEJO_AGENT_TOKEN \
                 to .sandcastle/.env to let agents read the forge"
            .to_string(),
    })
}

fn claims_held(forge: &Forge, login: &str) -> Result<String> {
    live_claims(forge, login).map(|claims| {
        if claims.is_empty() {
            "no orchestrator holds a claim now".to_string()
        } else {
            claims.join("; ")
        }
    })
}

/// Every lifecycle label exists on the repository.
fn lifecycle_labels(forge: &Forge) -> Result<String> {
    let labels = forge.labels()?;
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
}

/// Each program `sandcastle` runs on the host, where `PATH` finds it.
fn host_programs() -> Result<String> {
    let mut found = Vec::new();
    for program in HOST_PROGRAMS {
        let path = which::which(program).map_err(|_| {
            anyhow::anyhow!(
                "`{program}` is not on PATH: install it, or run sandcastle as `nix run .#sandcastle`, \
                 which brings it"
            )
        })?;
        found.push(format!("{program} {}", path.display()));
    }
    Ok(found.join(", "))
}

/// Where questions go, and whether `[questions] command` is a program that can run here.
fn question_handlers(project: &Path, questions: &sandcastle_config::Questions) -> Result<String> {
    let names: Vec<&str> = questions.handlers.iter().map(|h| h.name()).collect();
    let mut line = format!(
        "handlers {} (a run without a terminal skips terminal; `run --once` also skips command)",
        names.join(", ")
    );
    if let Some(argv) = &questions.command {
        let program = argv.first().map(String::as_str).unwrap_or_default();
        let path = which::which_in(program, std::env::var_os("PATH"), project).map_err(|_| {
            anyhow::anyhow!(
                "`[questions] command` runs `{program}`, which is not an executable file (relative \
                 to the project, or on PATH): fix the path or make it executable"
            )
        })?;
        let used = questions
            .handlers
            .contains(&sandcastle_config::Handler::Command);
        line += &format!(
            "; command {}{}",
            path.display(),
            if used {
                ""
            } else {
                " (set, but `command` is not in handlers)"
            }
        );
    }
    Ok(line)
}

/// The template's placeholders still in the project, each with its fix.
fn template_placeholders(project: &Path) -> Result<String> {
    let left: Vec<String> = TEMPLATE_PLACEHOLDERS
        .iter()
        .filter(|(file, text, _)| {
            std::fs::read_to_string(project.join(file)).is_ok_and(|content| content.contains(text))
        })
        .map(|(file, text, fix)| format!("{file} still has the placeholder `{text}`: {fix}"))
        .collect();
    if left.is_empty() {
        Ok("no placeholder of the template left".to_string())
    } else {
        bail!("{}", left.join("; "))
    }
}

/// Every live claim on the work sandcastle could take up: `#N held by ID until T`.
fn live_claims(forge: &Forge, login: &str) -> Result<Vec<String>> {
    let mut numbers: Vec<u64> = forge
        .open_issues(&["ready-for-agent"])?
        .iter()
        .map(|i| i.number)
        .collect();
    numbers.extend(
        forge
            .open_pulls()?
            .iter()
            .filter(|p| p.labels.iter().any(|l| l == "ready-for-agent"))
            .map(|p| p.number),
    );
    let mut held = Vec::new();
    for number in numbers {
        for claim in claims::live(&forge.comments(number)?, login, jiff::Timestamp::now()) {
            held.push(format!(
                "#{number} held by {} until {}",
                claim.holder, claim.until
            ));
        }
    }
    Ok(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placeholders doctor looks for are the ones the template writes.
    #[test]
    fn placeholders_are_the_templates() {
        let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../templates/rust");
        let report = template_placeholders(&template).unwrap_err().to_string();
        for (file, text, _) in TEMPLATE_PLACEHOLDERS {
            assert!(
                report.contains(&format!("{file} still has the placeholder `{text}`")),
                "{report}"
            );
        }
        let empty = tempfile::tempdir().unwrap();
        assert!(template_placeholders(empty.path()).is_ok());
    }

    /// With no variable for sandboxes, the line says so instead of ending in "get ;".
    #[test]
    fn the_secrets_line_names_empty_lists() {
        assert_eq!(
            secrets_line("alice", &[], &[]),
            "FORGEJO_USER is alice; sandboxes get no variable of .sandcastle/.env; redacted from \
             logs: nothing (values under 8 characters or common words are not)"
        );
        assert_eq!(
            secrets_line(
                "alice",
                &["DATABASE_URL", "NPM_TOKEN"],
                &["NPM_TOKEN".into()]
            ),
            "FORGEJO_USER is alice; sandboxes get DATABASE_URL, NPM_TOKEN; redacted from logs: \
             NPM_TOKEN (values under 8 characters or common words are not)"
        );
    }
}
