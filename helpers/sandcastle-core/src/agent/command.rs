//! The command line of a turn: the `docker exec` that runs Claude Code and what goes in on its stdin.
use super::AgentRun;
use super::session::path_in_container;
use crate::hand_out;
use crate::sandbox::{Exec, Sandbox, WORKSPACE};

/// The highest exit status of a turn (`sandcastle turn`) that says its cleanup left nothing
/// running: Claude Code's own, capped.
pub(super) const AGENT_STATUS_MAX: i32 = crate::turn::MAX_PROGRAM_STATUS as i32;

/// One turn's `docker exec`: the session the host names for it, and the marker line that ends
/// Claude Code's output.
pub(super) struct CommandLine {
    argv: Vec<String>,
    /// The host names the session, so the exec can hand its file out without being told by the
    /// stream.
    pub session_id: String,
    /// The end of Claude Code's output is marked with a word only the host and the exec's shell
    /// know: it comes in on stdin, never in an argument or a variable.
    pub marker: String,
}

impl CommandLine {
    pub fn new(run: &AgentRun) -> CommandLine {
        let (session_flag, session_id) = match run.resume {
            Some(saved) => ("--resume", saved.session_id.clone()),
            None => (
                "--session-id",
                uuid::Uuid::new_v4().hyphenated().to_string(),
            ),
        };
        let mut argv = run_agent_args(&path_in_container(&session_id), &run.commits.known_tip);
        argv.extend(claude_args(run));
        argv.extend([session_flag, session_id.as_str(), "-p", "-"].map(String::from));
        let marker = format!(
            "{} {}",
            String::from_utf8_lossy(hand_out::MARKER),
            uuid::Uuid::new_v4().simple()
        );
        CommandLine {
            argv,
            session_id,
            marker,
        }
    }

    /// The exec, started with all three pipes.
    pub fn spawn(&self, sandbox: &Sandbox) -> anyhow::Result<Exec> {
        let argv: Vec<&str> = self.argv.iter().map(String::as_str).collect();
        sandbox.exec_command(&argv)
    }

    /// What the exec reads on stdin: the marker line, then the prompt.
    pub fn stdin(&self, prompt: &str) -> String {
        format!("{}\n{prompt}", self.marker)
    }
}

/// `PROTECTED_SANDCASTLE turn SESSION WORKSPACE KNOWN OUTBOX --` with the turn's marker line,
/// then the prompt, on stdin (`turn.rs`): Claude Code under it, each new ask in OUTBOX relayed on the
/// output at once, then, once it has exited, every other process of the agent stopped in the same
/// `docker exec`, then the hand-out trailer. Exits with Claude Code's status, capped at
/// [`AGENT_STATUS_MAX`], when the stop left nothing running; 126, with no trailer, when it could not.
fn run_agent_args(session_in_container: &str, known_tip: &str) -> Vec<String> {
    [
        crate::sandbox::PROTECTED_SANDCASTLE,
        "turn",
        session_in_container,
        WORKSPACE,
        known_tip,
        crate::ask::OUTBOX,
        "--",
    ]
    .map(String::from)
    .into()
}

/// Claude Code's settings come from `$HOME` only, which no other role wrote (a role with tools
/// never takes over another's container), and its MCP servers from sandcastle's `--mcp-config`
/// only: the checkout's `.claude/` (settings, local settings, hooks, commands, agents, skills),
/// `.mcp.json` and `CLAUDE.md`, which an earlier role committed, configure nothing (checked with
/// Claude Code 2.1.197). A reasoning-only role gets these too: hooks run without tools.
const SANDCASTLE_SETTINGS_ONLY: [&str; 3] = ["--setting-sources", "user", "--strict-mcp-config"];

/// `claude --print --verbose --output-format stream-json --model M`, sandcastle's settings only,
/// then the role's tools: a reasoning-only role gets no tools and a few turns; the others work in
/// the sandbox, with `sandcastle mcp`'s `ask` tool when the project has asks on.
fn claude_args(run: &AgentRun) -> Vec<String> {
    let mut args: Vec<String> = [
        "claude",
        "--print",
        "--verbose",
        "--output-format",
        "stream-json",
        "--model",
        run.model,
    ]
    .map(String::from)
    .into();
    args.extend(SANDCASTLE_SETTINGS_ONLY.map(String::from));
    match run.role.max_turns() {
        Some(turns) => {
            args.extend(["--tools", "", "--max-turns", &turns.to_string()].map(String::from))
        }
        None => {
            args.push("--dangerously-skip-permissions".to_string());
            if run.asks {
                args.extend(["--mcp-config".to_string(), crate::mcp::config()]);
            }
        }
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{CommitsOut, SavedSession, TimeLimit};
    use crate::role::Role;
    use std::path::Path;
    use std::time::Duration;

    fn turn<'a>(role: Role, resume: Option<&'a SavedSession>) -> AgentRun<'a> {
        AgentRun {
            role,
            model: "claude-sonnet-4-6",
            prompt: "Do it.",
            resume,
            idle_timeout: Duration::from_secs(60),
            time_limit: TimeLimit {
                after: Duration::from_secs(600),
                key: "[sandbox] turnTimeout",
            },
            exit_grace: Duration::from_secs(5),
            log_dir: Path::new("/nonexistent"),
            iteration: 1,
            commits: CommitsOut {
                known_tip: "0".repeat(40),
                file: "/nonexistent/commits".into(),
            },
            asks: true,
        }
    }

    /// Claude Code's part of the argument list, from `claude` on.
    fn claude(line: &CommandLine) -> Vec<&str> {
        let at = line.argv.iter().position(|a| a == "claude").unwrap();
        line.argv[at..].iter().map(String::as_str).collect()
    }

    #[test]
    fn a_working_role_gets_its_tools_and_a_session_the_host_names() {
        let line = CommandLine::new(&turn(Role::Implementer, None));
        let mcp = crate::mcp::config();
        assert_eq!(
            claude(&line),
            [
                "claude",
                "--print",
                "--verbose",
                "--output-format",
                "stream-json",
                "--model",
                "claude-sonnet-4-6",
                "--setting-sources",
                "user",
                "--strict-mcp-config",
                "--dangerously-skip-permissions",
                "--mcp-config",
                &mcp,
                "--session-id",
                &line.session_id,
                "-p",
                "-",
            ]
        );
        assert!(uuid::Uuid::try_parse(&line.session_id).is_ok());
        assert!(line.argv.contains(&path_in_container(&line.session_id)));
    }

    #[test]
    fn a_reasoning_role_gets_no_tools_and_a_resumed_session_keeps_its_id() {
        let saved = SavedSession {
            session_id: "3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b".into(),
            file: "/nonexistent/session.jsonl".into(),
        };
        let line = CommandLine::new(&turn(Role::Assessor, Some(&saved)));
        let args = claude(&line);
        assert_eq!(
            args[7..],
            [
                "--setting-sources",
                "user",
                "--strict-mcp-config",
                "--tools",
                "",
                "--max-turns",
                "3",
                "--resume",
                "3de6a402-1c39-4b8e-9f3a-0c2d4e5f6a7b",
                "-p",
                "-",
            ]
        );
        assert_eq!(line.session_id, saved.session_id);
    }

    /// Without `[asks]` a working role is offered no MCP server, so no `ask` tool; the checkout's
    /// servers stay refused (`--strict-mcp-config`).
    #[test]
    fn a_working_role_gets_no_ask_tool_when_asks_are_off() {
        let mut run = turn(Role::Implementer, None);
        run.asks = false;
        let line = CommandLine::new(&run);
        let args = claude(&line);
        assert_eq!(
            args[7..12],
            [
                "--setting-sources",
                "user",
                "--strict-mcp-config",
                "--dangerously-skip-permissions",
                "--session-id",
            ]
        );
        assert!(!args.contains(&"--mcp-config"), "{args:?}");
    }

    /// The marker comes in on stdin only: no argument carries its word.
    #[test]
    fn the_marker_is_on_stdin_and_in_no_argument() {
        let line = CommandLine::new(&turn(Role::Implementer, None));
        let word = line.marker.rsplit(' ').next().unwrap();
        assert!(line.marker.as_bytes().starts_with(hand_out::MARKER));
        assert!(line.argv.iter().all(|arg| !arg.contains(word)));
        assert_eq!(line.stdin("Do it."), format!("{}\nDo it.", line.marker));
    }
}
