//! The console renderer: events as short human-readable lines (turns, plan, actions,
//! observations in short, budget use, the answer streaming in). The CLI uses it; colours only
//! when asked (on a terminal).

use std::io::Write;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::{Event, EventKind, EventSink};

/// How the console shows a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsoleOptions {
    /// ANSI colours.
    pub color: bool,
    /// Show the model's streamed answer text as it arrives.
    pub stream_answer: bool,
}

/// Writes events to a terminal (or any writer) as they happen.
pub struct ConsoleSink {
    out: Mutex<Box<dyn Write + Send>>,
    options: ConsoleOptions,
    /// Whether an answer is streaming (a line is open).
    streaming: Mutex<bool>,
}

impl std::fmt::Debug for ConsoleSink {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ConsoleSink")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ConsoleSink {
    /// A console writing to `out`.
    pub fn new(out: Box<dyn Write + Send>, options: ConsoleOptions) -> ConsoleSink {
        ConsoleSink { out: Mutex::new(out), options, streaming: Mutex::new(false) }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if !self.options.color {
            return text.to_owned();
        }
        // The reset goes before a trailing newline, so no escape code starts the next line.
        let (body, newline) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (text, ""),
        };
        format!("\x1b[{code}m{body}\x1b[0m{newline}")
    }

    /// The lines for one event (empty for events the console does not show).
    pub fn render(&self, event: &Event) -> String {
        let mut lines = self.render_kind(event);
        // A strategy's progress line (seed 001 §7), wherever an event carries one.
        let progress = event
            .data
            .get("progress")
            .or_else(|| event.data.pointer("/step/progress"))
            .and_then(Value::as_str);
        if let Some(progress) = progress {
            lines.push_str(&format!("  {} {progress}\n", self.paint("36", "·")));
        }
        lines
    }

    fn render_kind(&self, event: &Event) -> String {
        let data = &event.data;
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        match event.kind {
            EventKind::RunStarted => {
                let skills = data.get("catalog").and_then(Value::as_array).map_or(0, Vec::len);
                let config = data.get("config").unwrap_or(&Value::Null);
                let strategy = config.get("strategy").and_then(Value::as_str).unwrap_or("react");
                let model = config.pointer("/model/model").and_then(Value::as_str).unwrap_or("?");
                let plural = if skills == 1 { "" } else { "s" };
                format!(
                    "{} run {} · {skills} skill{plural} · strategy {strategy} · model {model}\n",
                    self.paint("1", "▶"),
                    event.run_id
                )
            }
            EventKind::TurnStarted => {
                let pair = |key: &str| {
                    let value = data.pointer(&format!("/budget/{key}"));
                    let get = |index: usize| {
                        value.and_then(|pair| pair.get(index)).and_then(Value::as_u64).unwrap_or(0)
                    };
                    format!("{}/{}", get(0), get(1))
                };
                self.paint(
                    "2",
                    &format!(
                        "── turn {} · tool calls {} · scripts {} · context {} chars\n",
                        pair("turns"),
                        pair("tool_calls"),
                        pair("script_runs"),
                        pair("context_chars")
                    ),
                )
            }
            EventKind::PlanCreated | EventKind::PlanUpdated => {
                let plan: crate::state::Plan =
                    serde_json::from_value(data.get("plan").cloned().unwrap_or(Value::Null))
                        .unwrap_or_default();
                // One step's status changed (`safe`): that step alone.
                if let (Some(id), Some(status)) = (
                    data.get("step").and_then(Value::as_str),
                    data.get("status").and_then(Value::as_str),
                ) {
                    let title = plan
                        .steps
                        .iter()
                        .find(|step| step.id == id)
                        .map_or("", |step| step.title.as_str());
                    let title: String = title.chars().take(100).collect();
                    return format!("  {} {id} {title} → {status}\n", self.paint("36", "plan"));
                }
                let title =
                    if event.kind == EventKind::PlanCreated { "plan" } else { "plan updated" };
                let mut lines = format!("  {}\n", self.paint("36", title));
                // An update repeats the goal: show only the steps.
                let skip_goal = event.kind == EventKind::PlanUpdated;
                for line in plan.render().lines() {
                    if line.starts_with("goal: ") && skip_goal {
                        continue;
                    }
                    let line = match line.char_indices().nth(120) {
                        Some((cut, _)) => format!("{}…", &line[..cut]),
                        None => line.to_owned(),
                    };
                    lines.push_str(&format!("    {line}\n"));
                }
                lines
            }
            EventKind::ActionValidated if data.get("valid") == Some(&Value::Bool(false)) => {
                format!("  {} {}\n", self.paint("33", "✗"), text("error"))
            }
            EventKind::ActionExecuted => {
                let action: Option<crate::action::Action> =
                    serde_json::from_value(data.get("action").cloned().unwrap_or(Value::Null)).ok();
                let status = text("status");
                let mark =
                    if status == "ok" { self.paint("32", "✓") } else { self.paint("31", "✗") };
                let duration = data.get("duration_ms").and_then(Value::as_u64).unwrap_or(0);
                let summary = action.map_or_else(|| "?".to_owned(), |action| action.summary());
                format!("  {mark} {summary} → {status} ({duration} ms)\n")
            }
            EventKind::ObservationRecorded => {
                let content = text("content");
                let first = content.lines().find(|line| !line.trim().is_empty()).unwrap_or("");
                let first: String = first.chars().take(100).collect();
                let chars = data.get("chars").and_then(Value::as_u64).unwrap_or(0);
                self.paint("2", &format!("    {} {first} ({chars} chars)\n", text("id")))
            }
            EventKind::Compaction => format!(
                "  ⟲ context compacted: {} → {} chars\n",
                data.get("before_chars").and_then(Value::as_u64).unwrap_or(0),
                data.get("after_chars").and_then(Value::as_u64).unwrap_or(0)
            ),
            EventKind::ApprovalRequired => format!("  ? approval needed: {}\n", text("reason")),
            EventKind::ApprovalGranted => "  ✓ approved\n".to_owned(),
            EventKind::ApprovalDenied => format!("  ✗ approval denied {}\n", text("reason")),
            EventKind::ModelResponse if data.get("error").is_some() => {
                format!("  {} model call failed: {}\n", self.paint("31", "✗"), text("error"))
            }
            EventKind::CollaborationRequested => format!(
                "  {} {} → {} ({}): {}\n",
                self.paint("36", "⇄"),
                text("agent"),
                text("to"),
                text("id"),
                text("request").chars().take(100).collect::<String>()
            ),
            EventKind::CollaborationResponded => format!(
                "  {} {} answered {}: {}\n",
                self.paint("36", "⇄"),
                text("agent"),
                text("id"),
                text("response").chars().take(100).collect::<String>()
            ),
            EventKind::CollaborationTimedOut => format!(
                "  {} {} timed out after {} ms\n",
                self.paint("31", "✗"),
                text("id"),
                data.get("timeout_ms").and_then(Value::as_u64).unwrap_or(0)
            ),
            EventKind::CollaborationDropped => {
                format!("  {} late answer to {} dropped\n", self.paint("33", "·"), text("id"))
            }
            EventKind::ToolServers => {
                let servers = data.get("servers").unwrap_or(&Value::Null);
                let count = servers.as_array().map_or(0, Vec::len);
                let tools = data.get("tools").and_then(Value::as_u64).unwrap_or(0);
                let mut lines = format!(
                    "  {} {count} MCP server{} · {tools} tool{}\n",
                    self.paint("2", "·"),
                    if count == 1 { "" } else { "s" },
                    if tools == 1 { "" } else { "s" }
                );
                for (name, state, reason) in crate::external::unhealthy_servers(servers) {
                    let reason =
                        if reason.is_empty() { String::new() } else { format!(": {reason}") };
                    lines.push_str(&format!(
                        "  {} MCP server `{name}` {state}{reason} — the run goes on without its tools\n",
                        self.paint("31", "✗")
                    ));
                }
                lines
            }
            EventKind::ToolsChanged => {
                let list = |key: &str| {
                    data.get(key)
                        .and_then(Value::as_array)
                        .map(|names| {
                            names.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
                        })
                        .unwrap_or_default()
                };
                let mut line = format!("  {} MCP tools changed", self.paint("33", "·"));
                for (key, label) in [("added", "new"), ("removed", "gone")] {
                    let names = list(key);
                    if !names.is_empty() {
                        line.push_str(&format!(" · {label}: {names}"));
                    }
                }
                line.push('\n');
                line
            }
            EventKind::DeadlinePassed => format!(
                "  {} the {} time limit ({} ms) passed\n",
                self.paint("33", "⏱"),
                text("what"),
                data.get("limit_ms").and_then(Value::as_u64).unwrap_or(0)
            ),
            EventKind::InputRequested => {
                format!("  {} asks: {}\n", self.paint("36", "?"), text("question"))
            }
            EventKind::UserInput => {
                let kind = text("kind");
                let shown: String = text("text").chars().take(100).collect();
                format!("{} {kind}: {shown}\n", self.paint("1", "▶"))
            }
            EventKind::CommandExecuted => {
                let mark = if text("status") == "ok" {
                    self.paint("32", "✓")
                } else {
                    self.paint("31", "✗")
                };
                format!("  {mark} {} → {}\n", text("command"), text("status"))
            }
            EventKind::RunFinished => {
                let counters = data.get("counters").unwrap_or(&Value::Null);
                let number = |key: &str| counters.get(key).and_then(Value::as_u64).unwrap_or(0);
                let count = |key: &str, one: &str, many: &str| {
                    let n = number(key);
                    format!("{n} {}", if n == 1 { one } else { many })
                };
                format!(
                    "{} {} · {} · {} · {} · {} · {} prompt + {} completion tokens\n",
                    self.paint("1", "■"),
                    text("outcome"),
                    count("turns", "turn", "turns"),
                    count("model_calls", "model call", "model calls"),
                    count("tool_calls", "tool call", "tool calls"),
                    count("script_runs", "script run", "script runs"),
                    number("prompt_tokens"),
                    number("completion_tokens")
                )
            }
            _ => String::new(),
        }
    }
}

impl EventSink for ConsoleSink {
    fn record(&self, event: &Event) -> Result<()> {
        let mut streaming =
            self.streaming.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let io = |error: std::io::Error| Error::io("console", error);
        if event.kind == EventKind::AssistantDelta {
            if self.options.stream_answer {
                if !*streaming {
                    out.write_all(b"  ").map_err(io)?;
                    *streaming = true;
                }
                let text = event.data.get("text").and_then(Value::as_str).unwrap_or_default();
                out.write_all(text.as_bytes()).map_err(io)?;
                out.flush().map_err(io)?;
            }
            return Ok(());
        }
        let lines = self.render(event);
        if lines.is_empty() {
            return Ok(());
        }
        if *streaming {
            out.write_all(b"\n").map_err(io)?;
            *streaming = false;
        }
        out.write_all(lines.as_bytes()).map_err(io)?;
        out.flush().map_err(io)
    }
}
