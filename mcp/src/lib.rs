//! The MCP client of skills-agent: Model Context Protocol servers beside skills, confined.
//!
//! A run's `[mcp_servers.NAME]` tables ([`ServerConfig`], Codex's shape) become one
//! [`McpHub`]. A stdio server (`command`) is started through tools-runtime's confinement — a
//! clean environment with only the names its table lists, the workspace as the only writable
//! place, no network unless `network = true`, rlimits, its own process group — and its
//! [`SandboxReport`](tools_runtime::SandboxReport) is kept in its [`ServerStatus`]. An HTTP
//! server (`url`) is reached with rmcp's streamable HTTP client, with the bearer token read
//! from the variable `bearer_token_env_var` names.
//!
//! Each server is initialised and its tools listed (following `tools/list` cursors) within
//! `startup_timeout_ms`; `notifications/tools/list_changed` lists them again. Tools are offered
//! as `mcp__SERVER__TOOL` ([`qualified_name`]) after `enabled_tools`/`disabled_tools`, each with
//! its [`ToolRule`] (allow, prompt, forbid) for the caller's policy. A call runs within the
//! call's timeout or `tool_timeout_ms`; its result becomes a [`CallResult`] (text parts joined,
//! structured content, `isError`, images, audio and embedded resources as [`Blob`]s).
//!
//! Start the hub from async code on the runtime that will outlive it (a tokio worker or the
//! thread in `block_on`, never `spawn_blocking`): a confined server dies with the thread that
//! started it (tools-runtime's parent-death signal). Dropping the hub stops its servers too;
//! [`McpHub::shutdown`] also waits for them.
//!
//! Nothing here fails a run: a server that cannot start is [`ServerState::Failed`] with the
//! reason, one that dies is [`ServerState::Exited`] and its calls are
//! [`CallError::ServerUnavailable`]; the other servers go on.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use skills_agent_mcp::{Launch, McpHub, ServerConfig};
//! use tools_runtime::{Runtime, RuntimeConfig, SandboxHelper};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let servers: BTreeMap<String, ServerConfig> = toml::from_str(
//!     r#"
//!     [everything]
//!     command = "node"
//!     args = ["/opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"]
//!     tool_timeout_ms = 30000
//!     "#,
//! )?;
//! let runtime = Arc::new(Runtime::new(RuntimeConfig::new(SandboxHelper::locate()?)));
//! let launch = Launch {
//!     runtime,
//!     workspace: std::env::current_dir()?,
//!     base_environment: std::env::vars().collect(),
//! };
//! let hub = McpHub::start(&servers, launch).await;
//! for tool in hub.tools() {
//!     println!("{} — {}", tool.qualified_name, tool.description);
//! }
//! let sum = hub.call("mcp__everything__get-sum", serde_json::json!({"a": 2, "b": 3}), None).await?;
//! println!("{}", sum.text);
//! hub.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod config;
mod error;
mod hub;
mod launch;
mod process;
mod result;

pub use config::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, EnvSpec, ServerConfig, ToolRule, qualified_name,
};
pub use error::{CallError, ConfigError};
pub use hub::{Launch, McpHub, ServerState, ServerStatus, ToolInfo};
pub use result::{Blob, BlobKind, CallResult};

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
