//! The console renderer: events as short human-readable lines (turns, plan, actions,
//! observations in short, budget use, the answer streaming in). The CLI uses it; colours only
//! when asked (on a terminal).

use std::io::Write;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::event::{Event, EventKind, EventSink, ModelResponse, Payload};

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

    /// The lines for one event (empty for events the console does not show, or whose data
    /// is not of its kind's shape).
    pub fn render(&self, event: &Event) -> String {
        let Ok(payload) = event.payload() else { return String::new() };
        let mut lines = self.render_payload(&event.run_id, &payload);
        // A strategy's progress line (seed 001 §7), wherever an event carries one.
        let progress = match &payload {
            Payload::PlanCreated(change) | Payload::PlanUpdated(change) => change.progress.clone(),
            Payload::ThoughtDecided(thought) => Some(thought.progress.clone()),
            Payload::TurnStarted(turn) => turn
                .step
                .as_ref()
                .and_then(|step| step.get("progress"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        if let Some(progress) = progress {
            lines.push_str(&format!("  {} {progress}\n", self.paint("36", "·")));
        }
        lines
    }

    fn render_payload(&self, run_id: &str, payload: &Payload) -> String {
        let clip = |text: &str| text.chars().take(100).collect::<String>();
        match payload {
            Payload::RunStarted(start) => {
                let skills = start.catalog.len();
                let strategy = &start.config.strategy;
                let model = &start.config.model.model;
                let plural = if skills == 1 { "" } else { "s" };
                format!(
                    "{} run {run_id} · {skills} skill{plural} · strategy {strategy} · model {model}\n",
                    self.paint("1", "▶"),
                )
            }
            Payload::TurnStarted(turn) => {
                let pair = |[used, limit]: [u64; 2]| format!("{used}/{limit}");
                let budget = &turn.budget;
                self.paint(
                    "2",
                    &format!(
                        "── turn {} · tool calls {} · scripts {} · context {} chars\n",
                        pair(budget.turns),
                        pair(budget.tool_calls),
                        pair(budget.script_runs),
                        pair(budget.context_chars)
                    ),
                )
            }
            Payload::PlanCreated(change) | Payload::PlanUpdated(change) => {
                let plan = &change.plan;
                // One step's status changed (`safe`): that step alone.
                if let (Some(id), Some(status)) = (&change.step, &change.status) {
                    let title = plan
                        .steps
                        .iter()
                        .find(|step| &step.id == id)
                        .map_or("", |step| step.title.as_str());
                    let title: String = title.chars().take(100).collect();
                    return format!("  {} {id} {title} → {status}\n", self.paint("36", "plan"));
                }
                // An update repeats the goal: show only the steps.
                let updated = matches!(payload, Payload::PlanUpdated(_));
                let title = if updated { "plan updated" } else { "plan" };
                let mut lines = format!("  {}\n", self.paint("36", title));
                for line in plan.render().lines() {
                    if line.starts_with("goal: ") && updated {
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
            Payload::ActionValidated(validated) if !validated.valid => format!(
                "  {} {}\n",
                self.paint("33", "✗"),
                validated.error.as_deref().unwrap_or_default()
            ),
            Payload::ActionValidated(validated) if validated.chosen_by.is_some() => {
                let name = match &validated.action {
                    Some(crate::Action::SelectSkills { names }) => names.join(", "),
                    Some(action) => action.summary(),
                    None => String::new(),
                };
                self.paint(
                    "2",
                    &format!("  · {name}: the only skill the ranking is sure of, taken without a model call\n"),
                )
            }
            Payload::ActionExecuted(executed) => {
                let status = executed.status.as_str();
                let mark =
                    if status == "ok" { self.paint("32", "✓") } else { self.paint("31", "✗") };
                let duration = executed.duration_ms.unwrap_or(0);
                format!("  {mark} {} → {status} ({duration} ms)\n", executed.action.summary())
            }
            Payload::ObservationRecorded(observation) => {
                let content = &observation.content;
                let first = content.lines().find(|line| !line.trim().is_empty()).unwrap_or("");
                let (id, chars) = (&observation.id, observation.chars);
                self.paint("2", &format!("    {id} {} ({chars} chars)\n", clip(first)))
            }
            Payload::Compaction(compaction) => format!(
                "  ⟲ context compacted: {} → {} chars\n",
                compaction.before_chars, compaction.after_chars
            ),
            Payload::ApprovalRequired(approval) => {
                format!("  ? approval needed: {}\n", approval.reason)
            }
            Payload::ApprovalGranted(_) => "  ✓ approved\n".to_owned(),
            Payload::ApprovalDenied(denied) => {
                format!("  ✗ approval denied {}\n", denied.reason.as_deref().unwrap_or_default())
            }
            Payload::ModelResponse(ModelResponse { error: Some(error), .. }) => {
                format!("  {} model call failed: {error}\n", self.paint("31", "✗"))
            }
            Payload::CollaborationRequested(request) => format!(
                "  {} {} → {} ({}): {}\n",
                self.paint("36", "⇄"),
                request.agent,
                request.to,
                request.id,
                clip(&request.request)
            ),
            Payload::CollaborationResponded(response) => format!(
                "  {} {} answered {}: {}\n",
                self.paint("36", "⇄"),
                response.agent,
                response.id,
                clip(&response.response)
            ),
            Payload::CollaborationTimedOut(timeout) => format!(
                "  {} {} timed out after {} ms\n",
                self.paint("31", "✗"),
                timeout.id,
                timeout.timeout_ms
            ),
            Payload::CollaborationDropped(dropped) => {
                format!("  {} late answer to {} dropped\n", self.paint("33", "·"), dropped.id)
            }
            Payload::ToolServers(servers) => {
                let count = servers.servers.as_array().map_or(0, Vec::len);
                let tools = servers.tools;
                let mut lines = format!(
                    "  {} {count} MCP server{} · {tools} tool{}\n",
                    self.paint("2", "·"),
                    if count == 1 { "" } else { "s" },
                    if tools == 1 { "" } else { "s" }
                );
                for (name, state, reason) in crate::external::unhealthy_servers(&servers.servers) {
                    let reason =
                        if reason.is_empty() { String::new() } else { format!(": {reason}") };
                    lines.push_str(&format!(
                        "  {} MCP server `{name}` {state}{reason} — the run goes on without its tools\n",
                        self.paint("31", "✗")
                    ));
                }
                lines
            }
            Payload::ToolsChanged(change) => {
                let mut line = format!("  {} MCP tools changed", self.paint("33", "·"));
                for (names, label) in [(&change.added, "new"), (&change.removed, "gone")] {
                    if !names.is_empty() {
                        line.push_str(&format!(" · {label}: {}", names.join(", ")));
                    }
                }
                line.push('\n');
                line
            }
            Payload::DeadlinePassed(deadline) => format!(
                "  {} the {} time limit ({} ms) passed\n",
                self.paint("33", "⏱"),
                deadline.what,
                deadline.limit_ms
            ),
            Payload::InputRequested(input) => {
                format!("  {} asks: {}\n", self.paint("36", "?"), input.question)
            }
            Payload::UserInput(input) => {
                format!("{} {}: {}\n", self.paint("1", "▶"), input.kind, clip(&input.text))
            }
            Payload::CommandExecuted(command) => {
                let status = command.status.as_str();
                let mark =
                    if status == "ok" { self.paint("32", "✓") } else { self.paint("31", "✗") };
                format!("  {mark} {} → {status}\n", command.command)
            }
            Payload::RunFinished(finished) => {
                let counters = &finished.counters;
                let count = |n: u32, one: &str, many: &str| {
                    format!("{n} {}", if n == 1 { one } else { many })
                };
                let warning = if finished.grounded {
                    String::new()
                } else {
                    format!(
                        "  {} not grounded: the answer states a value that neither the task nor \
                         any result of this run shows — do not rely on it\n",
                        self.paint("33", "⚠")
                    )
                };
                format!(
                    "{warning}{} {} · {} · {} · {} · {} · {} prompt + {} completion tokens\n",
                    self.paint("1", "■"),
                    finished.outcome.as_str(),
                    count(counters.turns, "turn", "turns"),
                    count(counters.model_calls, "model call", "model calls"),
                    count(counters.tool_calls, "tool call", "tool calls"),
                    count(counters.script_runs, "script run", "script runs"),
                    counters.prompt_tokens,
                    counters.completion_tokens
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
                if let Ok(Payload::AssistantDelta(delta)) = event.payload() {
                    out.write_all(delta.text.as_bytes()).map_err(io)?;
                }
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
