//! The `[mcp_servers]` of a run: the MCP hub (crate `mcp`) started with the run's sandbox
//! runtime and workspace, adapted to agent-core's [`ExternalTools`], and `skills-agent mcp list`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use skills_agent_core::{ExternalBlob, ExternalOutcome, ExternalTool, ExternalTools};
use skills_agent_mcp::{Launch, McpHub, ServerConfig, ServerState, ServerStatus};
use tools_runtime::{Runtime, RuntimeConfig};

/// The hub of a run, as agent-core sees it.
#[derive(Debug)]
pub(crate) struct McpTools {
    hub: Arc<McpHub>,
    /// Each server's `tool_timeout_ms`, where its table sets one.
    timeouts: BTreeMap<String, Duration>,
}

/// Starts the configured servers (never fails as a whole: a server that does not start is
/// recorded as failed). `None` when no server is configured.
pub(crate) async fn start(
    servers: &BTreeMap<String, ServerConfig>,
    runtime: &RuntimeConfig,
    workspace: &Path,
    environment: &[(String, String)],
) -> Option<Arc<McpTools>> {
    if servers.is_empty() {
        return None;
    }
    let launch = Launch {
        runtime: Arc::new(Runtime::new(runtime.clone())),
        workspace: workspace.to_owned(),
        base_environment: environment.to_vec(),
    };
    let hub = McpHub::start(servers, launch).await;
    let timeouts = servers
        .iter()
        .filter_map(|(name, config)| {
            config.tool_timeout_ms.map(|ms| (name.clone(), Duration::from_millis(ms)))
        })
        .collect();
    Some(Arc::new(McpTools { hub: Arc::new(hub), timeouts }))
}

impl McpTools {
    /// Stops the servers once nothing else holds the hub (else they stop when it is dropped).
    pub(crate) async fn shutdown(self: Arc<McpTools>) {
        if let Ok(tools) = Arc::try_unwrap(self)
            && let Ok(hub) = Arc::try_unwrap(tools.hub)
        {
            hub.shutdown().await;
        }
    }

    /// The servers and their state now.
    pub(crate) fn statuses(&self) -> Vec<ServerStatus> {
        self.hub.servers()
    }

    /// The hub's tools.
    pub(crate) fn tool_infos(&self) -> Vec<skills_agent_mcp::ToolInfo> {
        self.hub.tools()
    }
}

/// `running`, `disabled`, or `{"failed": {"reason"}}` / `{"exited": {"reason"}}`.
fn state_value(state: &ServerState) -> Value {
    match state {
        ServerState::Running => json!("running"),
        ServerState::Disabled => json!("disabled"),
        ServerState::Failed { reason } => json!({"failed": {"reason": reason}}),
        ServerState::Exited { reason } => json!({"exited": {"reason": reason}}),
        other => json!(format!("{other:?}").to_lowercase()),
    }
}

/// One server as `tool_servers` records it and `mcp list --json` prints it.
pub(crate) fn status_value(status: &ServerStatus) -> Value {
    json!({
        "name": status.name,
        "transport": status.transport,
        "state": state_value(&status.state),
        "tools": status.tools,
        "sandbox": status.sandbox,
    })
}

#[async_trait]
impl ExternalTools for McpTools {
    fn tools(&self) -> Vec<ExternalTool> {
        self.hub
            .tools()
            .into_iter()
            .map(|tool| {
                let description = match &tool.title {
                    Some(title) if !tool.description.starts_with(title.as_str()) => {
                        format!("{title}. {}", tool.description)
                    }
                    _ => tool.description.clone(),
                };
                ExternalTool {
                    timeout: self.timeouts.get(&tool.server).copied(),
                    name: tool.qualified_name,
                    description,
                    input_schema: tool.input_schema,
                    decision: tool.rule.decision(),
                }
            })
            .collect()
    }

    fn servers(&self) -> Value {
        Value::Array(self.hub.servers().iter().map(status_value).collect())
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> ExternalOutcome {
        match self.hub.call(name, arguments, timeout).await {
            Ok(result) => ExternalOutcome::Done {
                is_error: result.is_error,
                text: result.text,
                structured: result.structured,
                blobs: result
                    .blobs
                    .into_iter()
                    .map(|blob| ExternalBlob {
                        mime_type: blob.mime_type,
                        uri: blob.uri,
                        data: blob.data,
                    })
                    .collect(),
            },
            Err(error) => ExternalOutcome::Failed { reason: error.to_string() },
        }
    }
}

/// The text `mcp list` prints: each server with its state, then its tools and their rules.
pub(crate) fn render_list(
    statuses: &[ServerStatus],
    tools: &[skills_agent_mcp::ToolInfo],
) -> String {
    let mut text = String::new();
    for status in statuses {
        let state = match &status.state {
            ServerState::Running => "running".to_owned(),
            ServerState::Disabled => "disabled".to_owned(),
            ServerState::Failed { reason } => format!("failed: {reason}"),
            ServerState::Exited { reason } => format!("exited: {reason}"),
            other => format!("{other:?}"),
        };
        let plural = if status.tools == 1 { "" } else { "s" };
        text.push_str(&format!(
            "{} ({}) · {state} · {} tool{plural}\n",
            status.name, status.transport, status.tools
        ));
        for tool in tools.iter().filter(|tool| tool.server == status.name) {
            let rule = match tool.rule {
                skills_agent_mcp::ToolRule::Allow => "",
                skills_agent_mcp::ToolRule::Prompt => " [prompt]",
                skills_agent_mcp::ToolRule::Forbid => " [forbid]",
            };
            let line = tool.description.lines().next().unwrap_or("").trim();
            let mut description: String = line.chars().take(100).collect();
            if line.chars().count() > 100 {
                description.push('…');
            }
            text.push_str(&format!("  {}{rule} — {description}\n", tool.qualified_name));
        }
    }
    text
}
