//! `sandcastle mcp`: inside a sandbox, a stdio MCP server (the official Rust SDK, `rmcp`) that gives
//! the agent `sandcastle ask` as a tool call, `ask`, with the same arguments and the one way in
//! (`ask::submit`: the same validator, the same outbox). Claude Code starts it from the
//! `--mcp-config` each working turn gets ([`config`]); the command stays.
use crate::ask::{self, AskArgs, Refused};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use std::process::ExitCode;

/// The server's name in Claude Code's MCP config: the tool is `mcp__sandcastle__ask`.
pub const SERVER: &str = "sandcastle";

/// The `--mcp-config` JSON that starts this server with `sandcastle mcp`.
pub fn config() -> String {
    serde_json::json!({"mcpServers": {SERVER: {"type": "stdio", "command": "sandcastle", "args": ["mcp"]}}})
        .to_string()
}

#[derive(Clone)]
struct Asking {
    #[allow(dead_code, reason = "read by the code #[tool_handler] writes")]
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Asking {
    /// Refused asks are a tool error the agent reads, like the command's one line.
    #[tool(
        description = "Ask a person without stopping: a decision (with options and the one you go on \
                       with), an action only they can do, something ready for them, or a part that is \
                       blocked. Returns at once; the answer comes as part of a later prompt. Plain words \
                       only: no links, no commands or code in backticks, a title of one line. One open \
                       ask: a new one replaces the last."
    )]
    fn ask(&self, Parameters(args): Parameters<AskArgs>) -> CallToolResult {
        match ask::submit(args) {
            Ok(opened) => CallToolResult::success(vec![ContentBlock::text(opened.to_string())]),
            Err(Refused(why)) => {
                CallToolResult::error(vec![ContentBlock::text(format!("refused: {why}"))])
            }
        }
    }
}

#[tool_handler]
impl ServerHandler for Asking {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "sandcastle: ask a person without stopping your work (the `ask` tool).",
        )
    }
}

/// Serves MCP on stdin and stdout until the client closes them.
pub fn command() -> ExitCode {
    let served = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|runtime| {
            runtime.block_on(async {
                let server = Asking {
                    tool_router: Asking::tool_router(),
                };
                let running = server
                    .serve(rmcp::transport::stdio())
                    .await
                    .map_err(|e| e.to_string())?;
                running.waiting().await.map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            })
        });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("sandcastle mcp: {why}");
            ExitCode::FAILURE
        }
    }
}
