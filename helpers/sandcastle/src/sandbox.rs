//! Docker sandboxes through the `docker` CLI (so `DOCKER_HOST` and contexts work).
//!
//! Secrets never appear in a docker argument: variables are passed by name (`-e NAME`) and their
//! values are set on the environment of the `docker` process itself, which hands them to the engine.
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::{Command, Stdio};

/// Where the checkout is mounted inside every sandbox, and the agent's working directory.
pub const WORKSPACE: &str = "/home/agent/workspace";
/// The docker label that marks every container of one run: `sandcastle.run=<run id>`.
pub const RUN_LABEL: &str = "sandcastle.run";
/// The user agents run as (uid 1000 in the image).
const AGENT_USER: &str = "agent";

/// Limits and wiring from `[sandbox]` in the config.
pub struct SandboxSpec<'a> {
    pub image: &'a str,
    pub run_id: &'a str,
    /// `issue-42` or `pr-7`; part of the container name.
    pub key: &'a str,
    pub checkout: &'a Path,
    pub network: &'a str,
    pub memory: &'a str,
    pub pids_limit: u32,
    /// `host:container` pairs, mounted read-only.
    pub mounts: &'a [String],
    /// Variables passed into the container by name (values come from the docker CLI's environment,
    /// never from its arguments).
    pub env: &'a [(String, String)],
    /// The forge's base URL, given to `configure-tea --url`.
    pub forge_url: &'a str,
}

pub struct Sandbox {
    id: String,
    env: Vec<(String, String)>,
}

impl Sandbox {
    /// `docker run -d` with `--cap-drop ALL`, `--security-opt no-new-privileges`, `--pids-limit`,
    /// `--memory`, `--network`, `--label sandcastle.run=<id>`, the checkout at WORKSPACE, then runs
    /// `configure-tea` inside as the agent user (when `FORGEJO_TOKEN` and `FORGEJO_USER` are passed).
    pub fn start(spec: &SandboxSpec) -> Result<Sandbox> {
        let checkout = spec.checkout.canonicalize().with_context(|| {
            format!(
                "the checkout {} for {} does not exist: prepare it before starting the sandbox",
                spec.checkout.display(),
                spec.key
            )
        })?;
        let mut command = Command::new("docker");
        command
            .args(run_args(spec, &checkout)?)
            .envs(spec.env.iter().map(|(name, value)| (name, value)));
        let id = output(&mut command, "docker run")?;
        let sandbox = Sandbox {
            id,
            env: spec.env.to_vec(),
        };
        if let Err(error) = sandbox.configure_tea(spec.forge_url) {
            // Best effort: the container is useless without tea, and the error that matters is above.
            let _ = output(
                Command::new("docker").args(["rm", "-f", &sandbox.id]),
                "docker rm",
            );
            return Err(error);
        }
        Ok(sandbox)
    }

    #[cfg(test)]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A `docker exec -i -u agent -w WORKSPACE [-e NAME ...] <id> <argv>` command, ready to spawn.
    pub fn exec_command(&self, argv: &[&str]) -> Command {
        let mut command = Command::new("docker");
        command.args(["exec", "-i", "-u", AGENT_USER, "-w", WORKSPACE]);
        for (name, value) in &self.env {
            command.args(["-e", name]).env(name, value);
        }
        command.arg(&self.id).args(argv);
        command
    }

    /// `docker cp` from the container to the host (parent directories are created).
    pub fn copy_out(&self, container_path: &str, host_path: &Path) -> Result<()> {
        if let Some(parent) = host_path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create the directory {}", parent.display()))?;
        }
        output(
            Command::new("docker")
                .arg("cp")
                .arg(format!("{}:{container_path}", self.id))
                .arg(host_path),
            "docker cp",
        )
        .map(drop)
    }

    /// Copies one host file into the container (parent directories created), owned by the agent
    /// user afterwards. It is written by the agent user through `docker exec` rather than with
    /// `docker cp` plus `chown`: the container has no capabilities, so its root cannot chown.
    pub fn copy_in(&self, host_path: &Path, container_path: &str) -> Result<()> {
        let file = std::fs::File::open(host_path).with_context(|| {
            format!(
                "cannot read {} to copy into the sandbox",
                host_path.display()
            )
        })?;
        let mut command = Command::new("docker");
        command
            .args(["exec", "-i", "-u", AGENT_USER, &self.id, "sh", "-c"])
            .arg(r#"mkdir -p "$(dirname "$1")" && cat > "$1""#)
            .args(["sh", container_path])
            .stdin(file);
        output(&mut command, "docker exec (copy into the sandbox)").map(drop)
    }

    /// `docker rm -f`.
    pub fn remove(self) -> Result<()> {
        output(
            Command::new("docker").args(["rm", "-f", &self.id]),
            "docker rm",
        )
        .map(drop)
    }

    fn configure_tea(&self, forge_url: &str) -> Result<()> {
        let passed = |name: &str| self.env.iter().any(|(key, _)| key == name);
        if !(passed("FORGEJO_TOKEN") && passed("FORGEJO_USER")) {
            return Ok(());
        }
        let mut command = self.exec_command(&["configure-tea", "--url", forge_url]);
        output(&mut command, "configure-tea").map(drop).map_err(|error| {
            anyhow::anyhow!(
                "{error} in the sandbox: check FORGEJO_USER, FORGEJO_TOKEN and forgeHost, and that the image has configure-tea"
            )
        })
    }
}

/// The arguments of `docker run` for `spec`, with `checkout` already absolute.
fn run_args(spec: &SandboxSpec, checkout: &Path) -> Result<Vec<String>> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "-d".into(),
        "--name".into(),
        container_name(spec.run_id, spec.key),
        "--label".into(),
        format!("{RUN_LABEL}={}", spec.run_id),
        "--cap-drop".into(),
        "ALL".into(),
        "--security-opt".into(),
        "no-new-privileges".into(),
        "--pids-limit".into(),
        spec.pids_limit.to_string(),
        "--memory".into(),
        spec.memory.into(),
        "--network".into(),
        spec.network.into(),
        "-v".into(),
        format!("{}:{WORKSPACE}", checkout.display()),
    ];
    for mount in spec.mounts {
        let Some((host, container)) = mount.split_once(':') else {
            bail!(
                "[sandbox] mounts entry {mount:?} is not \"host-path:container-path\": fix it in .sandcastle/config.toml"
            );
        };
        let host = Path::new(host).canonicalize().with_context(|| {
            format!(
                "[sandbox] mounts entry {mount:?}: the host path {host} does not exist: create it or remove the entry"
            )
        })?;
        if !container.starts_with('/') || container.contains(':') {
            bail!(
                "[sandbox] mounts entry {mount:?}: the container path must be absolute with no options: fix it in .sandcastle/config.toml"
            );
        }
        args.extend(["-v".into(), format!("{}:{container}:ro", host.display())]);
    }
    for (name, _) in spec.env {
        args.extend(["-e".into(), name.clone()]);
    }
    args.push(spec.image.into());
    Ok(args)
}

/// `sandcastle-<run>-<key>`, with characters docker does not allow in names replaced by `-`.
fn container_name(run_id: &str, key: &str) -> String {
    format!("sandcastle-{run_id}-{key}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Runs a docker command to the end; its trimmed stdout, or an error with its first stderr line.
fn output(command: &mut Command, what: &str) -> Result<String> {
    let result = command.output().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!("the `docker` CLI is not on PATH: install Docker's client")
        } else {
            anyhow::anyhow!("cannot run `{what}`: {error}")
        }
    })?;
    if !result.status.success() {
        let stderr = String::from_utf8_lossy(&result.stderr);
        // The first line says what went wrong; later ones are hints ("Run 'docker run --help'").
        let reason = stderr
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("no error output")
            .trim();
        bail!("`{what}` failed ({}): {reason}", result.status);
    }
    Ok(String::from_utf8_lossy(&result.stdout).trim().to_string())
}

/// Removes every container labelled with this run id.
pub fn remove_run(run_id: &str) -> Result<()> {
    let ids = output(
        Command::new("docker").args([
            "ps",
            "-aq",
            "--filter",
            &format!("label={RUN_LABEL}={run_id}"),
        ]),
        "docker ps",
    )?;
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if ids.is_empty() {
        return Ok(());
    }
    output(
        Command::new("docker").args(["rm", "-f"]).args(&ids),
        "docker rm",
    )
    .map(drop)
}

/// `docker version` answers.
pub fn engine_answers() -> Result<()> {
    output(
        Command::new("docker").args(["version", "--format", "{{.Server.Version}}"]),
        "docker version",
    )
    .map(drop)
    .map_err(|error| {
        anyhow::anyhow!(
            "the Docker engine does not answer ({error}): start it, or point DOCKER_HOST at one"
        )
    })
}

/// The image exists locally; the error names the image and `nix run .#sandcastleImage | docker load`.
pub fn image_exists(image: &str) -> Result<()> {
    engine_answers()?;
    let found = Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .stdin(Stdio::null())
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false);
    if !found {
        bail!(
            "the image {image} is not in Docker: build and load it with `nix run .#sandcastleImage | docker load`"
        );
    }
    Ok(())
}

/// The image has every one of `programs` on its PATH (checked in a throwaway container without a
/// network); the error lists the missing ones.
pub fn image_has_programs(image: &str, programs: &[&str]) -> Result<()> {
    let script: Vec<String> = programs
        .iter()
        .map(|p| format!("command -v {p} >/dev/null || echo {p}"))
        .collect();
    let out = output(
        Command::new("docker")
            .args([
                "run",
                "--rm",
                "--network",
                "none",
                "--entrypoint",
                "/bin/sh",
                image,
                "-c",
            ])
            .arg(script.join("; ")),
        "docker run",
    )?;
    let missing: Vec<&str> = out.split_whitespace().collect();
    if !missing.is_empty() {
        bail!(
            "the image {image} lacks {}: rebuild it with `nix run .#sandcastleImage | docker load`",
            missing.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(
        checkout: &'a Path,
        mounts: &'a [String],
        env: &'a [(String, String)],
    ) -> SandboxSpec<'a> {
        SandboxSpec {
            image: "sandcastle:test",
            run_id: "20261202T130405Z-1",
            key: "issue-42",
            checkout,
            network: "host",
            memory: "4g",
            pids_limit: 1024,
            mounts,
            env,
            forge_url: "http://127.0.0.1:3000",
        }
    }

    #[test]
    fn run_args_confine_the_container_and_carry_env_names_only() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("FORGEJO_TOKEN".to_string(), "s3cret-token".to_string())];
        let mounts = [format!("{}:/nix/store", dir.path().display())];
        let args = run_args(&spec(dir.path(), &mounts, &env), dir.path()).unwrap();
        let joined = args.join(" ");
        for expected in [
            "run -d --name sandcastle-20261202T130405Z-1-issue-42",
            "--label sandcastle.run=20261202T130405Z-1",
            "--cap-drop ALL --security-opt no-new-privileges",
            "--pids-limit 1024 --memory 4g --network host",
            &format!("-v {}:/home/agent/workspace", dir.path().display()),
            &format!("-v {}:/nix/store:ro", dir.path().display()),
            "-e FORGEJO_TOKEN sandcastle:test",
        ] {
            assert!(joined.contains(expected), "{expected:?} not in {joined:?}");
        }
        assert!(!joined.contains("s3cret-token"));
    }

    #[test]
    fn exec_command_passes_values_through_the_environment_only() {
        let sandbox = Sandbox {
            id: "abc123".into(),
            env: vec![("ANTHROPIC_API_KEY".into(), "sk-secret".into())],
        };
        let command = sandbox.exec_command(&["claude", "-p", "-"]);
        let args: Vec<_> = command.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            [
                "exec",
                "-i",
                "-u",
                "agent",
                "-w",
                WORKSPACE,
                "-e",
                "ANTHROPIC_API_KEY",
                "abc123",
                "claude",
                "-p",
                "-"
            ]
        );
        let envs: Vec<_> = command.get_envs().collect();
        assert_eq!(
            envs,
            [(
                std::ffi::OsStr::new("ANTHROPIC_API_KEY"),
                Some(std::ffi::OsStr::new("sk-secret"))
            )]
        );
    }

    #[test]
    fn bad_mounts_are_one_line_errors_naming_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        for (mount, says) in [
            (
                "no-colon".to_string(),
                "is not \"host-path:container-path\"",
            ),
            ("/does/not/exist:/x".to_string(), "does not exist"),
            (
                format!("{}:relative", dir.path().display()),
                "must be absolute",
            ),
            (
                format!("{}:/x:rw", dir.path().display()),
                "must be absolute",
            ),
        ] {
            let mounts = [mount.clone()];
            let err = run_args(&spec(dir.path(), &mounts, &[]), dir.path())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("{mount:?}")) && err.contains(says),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn container_names_are_valid_for_docker() {
        assert_eq!(
            container_name("2026-12-02T13:04:05Z", "pr #7"),
            "sandcastle-2026-12-02T13-04-05Z-pr--7"
        );
    }
}

#[cfg(test)]
pub mod docker_tests;
