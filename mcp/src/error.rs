//! The crate's errors: a bad `[mcp_servers.NAME]` table, and a tool call that could not be made.

use std::time::Duration;

/// A `[mcp_servers.NAME]` table that cannot work as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mcp server `{server}`: {problem}")]
pub struct ConfigError {
    /// The server's name (the table's key).
    pub server: String,
    /// What is wrong and what to write instead.
    pub problem: String,
}

/// Why a tool call produced no result. A result the server marked `isError` is not a
/// `CallError`: it is a [`CallResult`](crate::CallResult) with `is_error` set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No running server offers a tool of this qualified name.
    #[error(
        "no MCP tool `{0}`: it is not offered by a running server (see the tool list; \
         a server may have failed, exited, or filter the tool out)"
    )]
    UnknownTool(String),
    /// The arguments are not a JSON object.
    #[error("MCP tool `{tool}`: {reason}")]
    InvalidArguments {
        /// The qualified tool name.
        tool: String,
        /// What is wrong with the arguments.
        reason: String,
    },
    /// The server is not running (failed to start, exited, crashed mid-call, or shut down).
    #[error("MCP server `{server}` is unavailable: {reason}")]
    ServerUnavailable {
        /// The server's name.
        server: String,
        /// Why (exit status, stderr tail, start failure).
        reason: String,
    },
    /// The server did not answer within the call's timeout; the request was cancelled.
    #[error(
        "MCP tool `{tool}` of server `{server}` did not answer within {after:?} \
         (raise `tool_timeout_ms` in [mcp_servers.{server}] if it needs longer)"
    )]
    Timeout {
        /// The server's name.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The timeout that passed.
        after: Duration,
    },
    /// The server answered something that is not a valid MCP result.
    #[error("MCP server `{server}` broke the protocol: {reason}")]
    Protocol {
        /// The server's name.
        server: String,
        /// What was wrong.
        reason: String,
    },
}
