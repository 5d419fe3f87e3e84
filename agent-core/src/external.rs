//! External tools (MCP servers, issue 14): the trait the CLI implements over its MCP hub, the
//! tools a run offers next to the skills, and how a call's outcome becomes an observation.
//!
//! agent-core knows no protocol: an external tool is a name (`mcp__SERVER__TOOL`), a
//! description, a JSON Schema for its arguments and a policy decision. The run decides
//! everything else itself — whether the call is offered (forbidden tools are not), whether its
//! arguments fit the schema, whether it needs approval, how long it may take, how it is counted
//! (`max_tool_calls`, never `max_script_runs`) and recorded (the same `action_*` events as any
//! action, so replay reproduces a call from the record without a server).

use std::fmt::Write as _;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tools_runtime::Decision;

/// The tools of external servers (MCP) a run may call, and the servers behind them.
///
/// agent-core calls [`ExternalTools::tools`] at the start of the run and again before every
/// turn (a server may change its list), [`ExternalTools::servers`] once at the start (event
/// `tool_servers`), and [`ExternalTools::call`] only for a call that passed validation, policy
/// and approval.
#[async_trait]
pub trait ExternalTools: Send + Sync + std::fmt::Debug {
    /// The tools on offer now (re-read every turn: the list may change).
    fn tools(&self) -> Vec<ExternalTool>;
    /// The servers and their state, recorded once at the start of a run (event `tool_servers`).
    ///
    /// A JSON array of objects; agent-core reads `name`, `state` (a string, or an object whose
    /// one key is the state, e.g. `{"failed": {"reason": "…"}}`) and `reason` to tell the user
    /// about a server that is not running, and records the rest as it is.
    fn servers(&self) -> Value;
    /// Calls one tool (policy and approval are already decided by agent-core).
    async fn call(
        &self,
        name: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> ExternalOutcome;
}

/// One tool on offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalTool {
    /// The name the model calls it by (`mcp__SERVER__TOOL`: `[A-Za-z0-9_-]`, at most 64).
    pub name: String,
    /// What it does, as the server describes it.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// The policy decision for calls to it: allow, prompt (ask the approver), forbidden (not
    /// offered; a call is refused).
    pub decision: Decision,
    /// How long one call may take (the server's `tool_timeout_ms`); `None`: the agent's
    /// default ([`ExternalToolSettings::timeout_ms`](crate::ExternalToolSettings)).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "millis")]
    pub timeout: Option<Duration>,
}

/// What a call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalOutcome {
    /// The server answered (a tool error is `is_error: true`, for the model to read).
    Done {
        /// The tool reported an error.
        is_error: bool,
        /// The text parts, joined.
        text: String,
        /// Structured content, if the tool sent some.
        structured: Option<Value>,
        /// Images, audio and embedded resources.
        blobs: Vec<ExternalBlob>,
    },
    /// The call did not complete: server gone, timeout, protocol garbage.
    Failed {
        /// What went wrong, for the model and the user.
        reason: String,
    },
}

/// Binary or embedded content of a tool result, stored in the run directory by hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalBlob {
    /// Its MIME type, if known.
    pub mime_type: Option<String>,
    /// The resource URI, for embedded resources.
    pub uri: Option<String>,
    /// The bytes.
    pub data: Vec<u8>,
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_u64(duration.as_millis() as u64),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}

/// The server part of `mcp__SERVER__TOOL` (the whole name for other names).
pub(crate) fn server_of(name: &str) -> &str {
    let rest = name.strip_prefix("mcp__").unwrap_or(name);
    rest.split_once("__").map_or(rest, |(server, _)| server)
}

/// The first line of a description, at most `max` characters.
pub(crate) fn short_description(description: &str, max: usize) -> String {
    let line = description.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The arguments of an object schema in one line: `a: string, b?: integer`.
pub(crate) fn arguments_line(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "none".to_owned();
    };
    if properties.is_empty() {
        return "none".to_owned();
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut line = String::new();
    for (name, property) in properties {
        if !line.is_empty() {
            line.push_str(", ");
        }
        let kind = match property.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(Value::Array(kinds)) => {
                kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|")
            }
            _ if property.get("enum").is_some() => "enum".to_owned(),
            _ => "any".to_owned(),
        };
        let optional = if required.contains(&name.as_str()) { "" } else { "?" };
        let _ = write!(line, "{name}{optional}: {kind}");
    }
    line
}

/// A tool's line in the catalog when tools are listed whole.
pub(crate) fn catalog_line(tool: &ExternalTool) -> String {
    let approval = if tool.decision == Decision::Prompt { " (asks the user)" } else { "" };
    format!(
        "- {}: {}{approval} Arguments: {}\n",
        tool.name,
        short_description(&tool.description, 200),
        arguments_line(&tool.input_schema)
    )
}

/// The tools part of the system prompt: each tool with its line, or (summarised) the tool
/// names per server, with how to learn more.
pub(crate) fn catalog(tools: &[&ExternalTool], summarised: bool) -> String {
    if tools.is_empty() {
        return String::new();
    }
    let mut text = String::new();
    if summarised {
        text.push_str(
            "\nExternal tools (MCP), by server; describe_tools shows a tool's description and \
             arguments, then call_tool calls it:\n",
        );
        let mut servers: Vec<(&str, Vec<&str>)> = Vec::new();
        for tool in tools {
            let server = server_of(&tool.name);
            match servers.iter_mut().find(|(name, _)| *name == server) {
                Some((_, names)) => names.push(&tool.name),
                None => servers.push((server, vec![&tool.name])),
            }
        }
        for (server, names) in servers {
            let _ = writeln!(text, "- server {server}: {}", names.join(", "));
        }
    } else {
        text.push_str(
            "\nExternal tools (MCP; call_tool with the tool's name and its arguments):\n",
        );
        for tool in tools {
            text.push_str(&catalog_line(tool));
        }
    }
    text
}

/// The full description of tools, as `describe_tools` shows it: description and argument
/// schema of each.
pub(crate) fn describe(tools: &[&ExternalTool]) -> String {
    let mut text = String::new();
    for tool in tools {
        let _ = writeln!(
            text,
            "## {}\n{}\nArguments (call_tool `arguments`, JSON Schema): {}",
            tool.name,
            tool.description.trim(),
            tool.input_schema
        );
        if tool.decision == Decision::Prompt {
            text.push_str("(each call asks the user for approval)\n");
        }
    }
    text.trim_end().to_owned()
}

/// A compiled check of arguments against a tool's input schema: `Err` names what is wrong.
pub(crate) fn validate_arguments(tool: &ExternalTool, arguments: &Value) -> Result<(), String> {
    if !arguments.is_object() {
        return Err(format!(
            "the arguments of `{}` must be a JSON object, got {arguments}",
            tool.name
        ));
    }
    let validator = match jsonschema::validator_for(&tool.input_schema) {
        Ok(validator) => validator,
        // A schema the validator cannot compile does not stop the call: the server checks.
        Err(_) => return Ok(()),
    };
    let problems: Vec<String> = validator
        .iter_errors(arguments)
        .take(3)
        .map(|error| {
            let at = error.instance_path().to_string();
            if at.is_empty() { error.to_string() } else { format!("{at}: {error}") }
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the arguments of `{}` do not fit its schema: {}; its arguments: {}",
        tool.name,
        problems.join("; "),
        arguments_line(&tool.input_schema)
    ))
}

/// The file extension for a blob of `mime_type`.
pub(crate) fn extension_for(mime_type: Option<&str>) -> &'static str {
    match mime_type.map(|mime| mime.split(';').next().unwrap_or(mime).trim()) {
        Some("image/png") => "png",
        Some("image/jpeg") => "jpg",
        Some("image/gif") => "gif",
        Some("image/webp") => "webp",
        Some("image/svg+xml") => "svg",
        Some("audio/wav" | "audio/x-wav") => "wav",
        Some("audio/mpeg") => "mp3",
        Some("application/json") => "json",
        Some("application/pdf") => "pdf",
        Some(mime) if mime.starts_with("text/") => "txt",
        _ => "bin",
    }
}

/// The servers of a `tool_servers` record that are not running, as `(name, state, reason)`.
pub(crate) fn unhealthy_servers(servers: &Value) -> Vec<(String, String, String)> {
    let Some(servers) = servers.as_array() else { return Vec::new() };
    servers
        .iter()
        .filter_map(|server| {
            let name = server.get("name").and_then(Value::as_str).unwrap_or("?").to_owned();
            let (state, mut reason) = match server.get("state") {
                Some(Value::String(state)) => (state.clone(), String::new()),
                Some(Value::Object(map)) => {
                    let (state, detail) = map.iter().next()?;
                    let reason = detail
                        .get("reason")
                        .and_then(Value::as_str)
                        .or_else(|| detail.as_str())
                        .unwrap_or_default()
                        .to_owned();
                    (state.clone(), reason)
                }
                _ => return None,
            };
            if let Some(text) = server.get("reason").and_then(Value::as_str) {
                reason = text.to_owned();
            }
            let state = state.to_lowercase();
            (state != "running" && state != "disabled").then_some((name, state, reason))
        })
        .collect()
}

/// The observation of a finished call: text, structured content as JSON text, one line per
/// stored blob.
pub(crate) fn observation_text(
    text: &str,
    structured: Option<&Value>,
    blob_lines: &[String],
) -> String {
    let mut content = text.trim_end().to_owned();
    if let Some(structured) = structured {
        if !content.is_empty() {
            content.push('\n');
        }
        let _ = write!(content, "structured content: {structured}");
    }
    for line in blob_lines {
        if !content.is_empty() {
            content.push('\n');
        }
        content.push_str(line);
    }
    if content.is_empty() { "(the tool returned no content)".to_owned() } else { content }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> ExternalTool {
        ExternalTool {
            name: "mcp__files__read".into(),
            description: "Reads a file.\nMore text.".into(),
            input_schema: schema,
            decision: Decision::Allow,
            timeout: None,
        }
    }

    #[test]
    fn names_split_into_server_and_tool() {
        assert_eq!(server_of("mcp__files__read_text"), "files");
        assert_eq!(server_of("plain"), "plain");
    }

    #[test]
    fn invalid_arguments_are_named() {
        let tool = tool(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
            "required": ["path"],
        }));
        assert!(validate_arguments(&tool, &json!({"path": "a.txt"})).is_ok());
        let error = validate_arguments(&tool, &json!({"lines": "x"})).unwrap_err();
        assert!(error.contains("\"path\" is a required property"), "{error}");
        assert!(error.contains("/lines"), "{error}");
        assert!(error.contains("lines?: integer, path: string"), "{error}");
        let error = validate_arguments(&tool, &json!([1])).unwrap_err();
        assert!(error.contains("must be a JSON object"), "{error}");
    }

    #[test]
    fn server_states_that_need_telling() {
        let servers = json!([
            {"name": "a", "state": "running"},
            {"name": "b", "state": {"failed": {"reason": "no such program `nope`"}}},
            {"name": "c", "state": "disabled"},
            {"name": "d", "state": "exited", "reason": "killed"},
        ]);
        assert_eq!(
            unhealthy_servers(&servers),
            vec![
                ("b".into(), "failed".into(), "no such program `nope`".into()),
                ("d".into(), "exited".into(), "killed".into()),
            ]
        );
    }

    #[test]
    fn a_tool_round_trips_through_json() {
        let mut tool = tool(json!({"type": "object"}));
        tool.timeout = Some(Duration::from_millis(1500));
        let value = serde_json::to_value(&tool).unwrap();
        assert_eq!(value["timeout"], json!(1500));
        assert_eq!(serde_json::from_value::<ExternalTool>(value).unwrap(), tool);
    }
}
