//! Events (seed 002 §4.4): the envelope `{ts, run_id, seq, turn, type, data}`, the sinks that
//! consume it (JSONL file, in-process broadcast, memory, console), and the bus that numbers,
//! redacts and fans events out. `seq` is strictly increasing within a run.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::rundir::Redactor;

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// When it happened (RFC 3339, UTC, milliseconds).
    pub ts: String,
    /// The run.
    pub run_id: String,
    /// Position in the run, from 1, strictly increasing.
    pub seq: u64,
    /// The turn (0 before the first turn).
    pub turn: u32,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The details, whose shape depends on `kind` (documented per kind).
    pub data: Value,
}

/// The kinds of events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// `{task, config, catalog, diagnostics, workspace, runs_dir, resumed?}`.
    RunStarted,
    /// `{outcome, final_text, counters, reasoning_metrics, degraded}`.
    RunFinished,
    /// `{budget: {turns, tool_calls, script_runs, context_chars} used/limit, allowed}`.
    TurnStarted,
    /// `{counters, context_chars}`.
    TurnFinished,
    /// `{purpose, messages, chars, request_sha256, tools, json_schema}`, plus `notice` (the
    /// meta-cognition warnings of the turn note, by reason) when it has one and `agent` for a
    /// SAFE peer.
    ModelRequest,
    /// `{purpose, response, duration_ms, reasoning?}` or `{purpose, error}`.
    ModelResponse,
    /// `{type, early: true}` as soon as the action's name is known in the stream.
    ActionPlanned,
    /// `{action, valid, error?}`.
    ActionValidated,
    /// `{action, status, duration_ms, result}`.
    ActionExecuted,
    /// `{id, action?, status, chars, content, stored?: {sha256, path, bytes}}`.
    ObservationRecorded,
    /// `{plan}`.
    PlanCreated,
    /// `{plan, update?, unknown_ids?}`.
    PlanUpdated,
    /// `{status: "continue"|"ask_user"|"done", current_step, plan_item: [i, n]|null, action?,
    /// question?, response?, progress}`: a valid `thought` of a `plan-thought-replan` run (its
    /// `plan_created`/`plan_updated` add `items` and `progress`, its `turn_started` a `step`).
    ThoughtDecided,
    /// `{call_id, argv, reason}`.
    ApprovalRequired,
    /// `{call_id}`.
    ApprovalGranted,
    /// `{call_id, answer}`.
    ApprovalDenied,
    /// `{before_chars, after_chars, compacted: [ids], summary?}`.
    Compaction,
    /// `{text}`: final-answer text as it streams in.
    AssistantDelta,
    /// `{what, step, limit_ms}`: a time limit inside a turn passed (`what: "round"`: a
    /// plan-execute-think batch stops before `step`, counted from 0).
    DeadlinePassed,
    /// `{question}`: the run asks the user and ends this input's work `needs_input`.
    InputRequested,
    /// `{text, kind: "answer"|"task"|"command"}`: the user's next input to a finished run
    /// (an answer to the pending question, a new task, or a slash command).
    UserInput,
    /// `{command, tool, status, output}`: a slash command, run without a model call.
    CommandExecuted,
    /// `{agent, id, to, request, timeout_ms}`: an agent of a `safe` run put a collaboration
    /// request on the bus (`agent` is the requester, `main` for the run's own agent).
    CollaborationRequested,
    /// `{agent, id, from, request}`: the peer `agent` took request `id` from its inbox.
    CollaborationReceived,
    /// `{agent, id, to, ok, response}`: the peer `agent` put its response to `id` on the bus.
    CollaborationResponded,
    /// `{agent, id, to, timeout_ms}`: the requester `agent` stopped waiting for `id`.
    CollaborationTimedOut,
    /// `{agent, id, from, reason: "late"|"unknown", response}`: the requester `agent`
    /// discarded a response it no longer waits for (never applied).
    CollaborationDropped,
    /// `{servers: [{name, transport, state, tools, sandbox, …}], tools}`: the external (MCP)
    /// servers of the run and their state, once at its start (a failed server is here).
    ToolServers,
    /// `{refresh, added, removed, tools}`: the external tools on offer changed before a turn
    /// (`refresh`: the how-many-th look at the list).
    ToolsChanged,
}

impl EventKind {
    /// The snake_case name, as in `events.jsonl`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStarted => "run_started",
            EventKind::RunFinished => "run_finished",
            EventKind::TurnStarted => "turn_started",
            EventKind::TurnFinished => "turn_finished",
            EventKind::ModelRequest => "model_request",
            EventKind::ModelResponse => "model_response",
            EventKind::ActionPlanned => "action_planned",
            EventKind::ActionValidated => "action_validated",
            EventKind::ActionExecuted => "action_executed",
            EventKind::ObservationRecorded => "observation_recorded",
            EventKind::PlanCreated => "plan_created",
            EventKind::PlanUpdated => "plan_updated",
            EventKind::ThoughtDecided => "thought_decided",
            EventKind::ApprovalRequired => "approval_required",
            EventKind::ApprovalGranted => "approval_granted",
            EventKind::ApprovalDenied => "approval_denied",
            EventKind::Compaction => "compaction",
            EventKind::AssistantDelta => "assistant_delta",
            EventKind::DeadlinePassed => "deadline_passed",
            EventKind::InputRequested => "input_requested",
            EventKind::UserInput => "user_input",
            EventKind::CommandExecuted => "command_executed",
            EventKind::CollaborationRequested => "collaboration_requested",
            EventKind::CollaborationReceived => "collaboration_received",
            EventKind::CollaborationResponded => "collaboration_responded",
            EventKind::CollaborationTimedOut => "collaboration_timed_out",
            EventKind::CollaborationDropped => "collaboration_dropped",
            EventKind::ToolServers => "tool_servers",
            EventKind::ToolsChanged => "tools_changed",
        }
    }
}

/// Keys whose values depend on the clock, left out when two runs are compared.
const CLOCK_KEYS: [&str; 3] = ["ts", "duration_ms", "elapsed_ms"];

/// The event as a JSON value without its clock-dependent fields (`ts`, `duration_ms`,
/// `elapsed_ms`, at any depth) and its `seq` (replay compares sequences, and leaves out
/// `assistant_delta` events, whose cut depends on the provider's stream).
pub fn comparable(event: &Event) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    strip_clock(&mut value);
    if let Value::Object(map) = &mut value {
        map.remove("seq");
    }
    value
}

fn strip_clock(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in CLOCK_KEYS {
                map.remove(key);
            }
            map.values_mut().for_each(strip_clock);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_clock),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// A consumer of events.
pub trait EventSink: Send + Sync + fmt::Debug {
    /// Takes one event. An error stops the run (nothing may be lost silently).
    fn record(&self, event: &Event) -> Result<()>;
    /// Called at the end of every turn and of the run (the JSONL sink fsyncs here).
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

/// Appends each event as one JSON line with one `write` call; `flush` fsyncs.
#[derive(Debug)]
pub struct JsonlSink {
    path: PathBuf,
    file: Mutex<File>,
}

impl JsonlSink {
    /// Opens (creating or appending to) `path`.
    pub fn open(path: &Path) -> Result<JsonlSink> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| Error::io(path, error))?;
        Ok(JsonlSink { path: path.to_owned(), file: Mutex::new(file) })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl EventSink for JsonlSink {
    fn record(&self, event: &Event) -> Result<()> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        lock(&self.file).write_all(&line).map_err(|error| Error::io(&self.path, error))
    }

    fn flush(&self) -> Result<()> {
        lock(&self.file).sync_data().map_err(|error| Error::io(&self.path, error))
    }
}

/// Sends every event to in-process subscribers (a tokio broadcast channel). Slow subscribers
/// lose the oldest events (they see `RecvError::Lagged`); the run never waits for them.
#[derive(Debug, Clone)]
pub struct BroadcastSink {
    sender: tokio::sync::broadcast::Sender<Event>,
}

impl BroadcastSink {
    /// A channel keeping up to `capacity` events per subscriber.
    pub fn new(capacity: usize) -> BroadcastSink {
        BroadcastSink { sender: tokio::sync::broadcast::channel(capacity.max(1)).0 }
    }

    /// A new subscriber, receiving events from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}

impl EventSink for BroadcastSink {
    fn record(&self, event: &Event) -> Result<()> {
        // No subscriber is not an error.
        let _ = self.sender.send(event.clone());
        Ok(())
    }
}

/// Keeps every event in memory (tests, replay).
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<Event>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.events).clone()
    }
}

impl EventSink for MemorySink {
    fn record(&self, event: &Event) -> Result<()> {
        lock(&self.events).push(event.clone());
        Ok(())
    }
}

/// Numbers, redacts and fans out events; shared with the approval wrapper.
#[derive(Debug, Clone)]
pub(crate) struct EventBus {
    inner: Arc<Mutex<BusInner>>,
}

#[derive(Debug)]
struct BusInner {
    run_id: String,
    seq: u64,
    turn: u32,
    sinks: Vec<Arc<dyn EventSink>>,
    redactor: Arc<Redactor>,
    /// Recorded events a resumed run must reproduce before it writes anything new.
    expected: VecDeque<Event>,
    /// The last `seq` of the record; new events continue after it.
    resume_last_seq: u64,
    resume_path: PathBuf,
    failure: Option<String>,
}

impl EventBus {
    pub(crate) fn new(
        run_id: &str,
        sinks: Vec<Arc<dyn EventSink>>,
        redactor: Arc<Redactor>,
    ) -> EventBus {
        EventBus {
            inner: Arc::new(Mutex::new(BusInner {
                run_id: run_id.to_owned(),
                seq: 0,
                turn: 0,
                sinks,
                redactor,
                expected: VecDeque::new(),
                resume_last_seq: 0,
                resume_path: PathBuf::new(),
                failure: None,
            })),
        }
    }

    /// Resuming: the first events emitted must equal `recorded` (clock fields aside) and are
    /// not written again.
    pub(crate) fn expect(&self, recorded: Vec<Event>, last_seq: u64, run_dir: &Path) {
        let mut inner = lock(&self.inner);
        inner.expected = recorded.into();
        inner.resume_last_seq = last_seq;
        inner.resume_path = run_dir.to_owned();
    }

    /// Whether recorded events are still being reproduced.
    pub(crate) fn catching_up(&self) -> bool {
        !lock(&self.inner).expected.is_empty()
    }

    pub(crate) fn set_turn(&self, turn: u32) {
        lock(&self.inner).turn = turn;
    }

    pub(crate) fn redactor(&self) -> Arc<Redactor> {
        Arc::clone(&lock(&self.inner).redactor)
    }

    /// Emits one event. Errors of sinks (and resume divergences) stop the run.
    pub(crate) fn emit(&self, kind: EventKind, mut data: Value) -> Result<()> {
        let mut inner = lock(&self.inner);
        if let Some(failure) = &inner.failure {
            return Err(Error::Resume {
                path: inner.resume_path.clone(),
                message: failure.clone(),
            });
        }
        inner.redactor.redact_value(&mut data);
        if inner.expected.is_empty() {
            inner.seq = inner.seq.max(inner.resume_last_seq);
        }
        inner.seq += 1;
        let event = Event {
            ts: now_rfc3339(),
            run_id: inner.run_id.clone(),
            seq: inner.seq,
            turn: inner.turn,
            kind,
            data,
        };
        if let Some(recorded) = inner.expected.pop_front() {
            inner.seq = recorded.seq;
            let (got, want) = (comparable(&event), comparable(&recorded));
            if got != want {
                let message = format!(
                    "event seq {} differs from the record: recorded {want}, re-run gave {got}",
                    event.seq
                );
                inner.failure = Some(message.clone());
                return Err(Error::Resume { path: inner.resume_path.clone(), message });
            }
            return Ok(());
        }
        for sink in &inner.sinks {
            sink.record(&event)?;
        }
        Ok(())
    }

    /// Emits from a context that cannot return an error (the approver): the failure is kept
    /// and returned by the next `emit`.
    pub(crate) fn emit_or_keep(&self, kind: EventKind, data: Value) {
        if let Err(error) = self.emit(kind, data) {
            let mut inner = lock(&self.inner);
            if inner.failure.is_none() {
                inner.failure = Some(error.to_string());
            }
        }
    }

    pub(crate) fn flush(&self) -> Result<()> {
        let inner = lock(&self.inner);
        for sink in &inner.sinks {
            sink.flush()?;
        }
        Ok(())
    }
}

/// The current time as RFC 3339 in UTC with milliseconds (`2026-02-03T12:34:56.789Z`).
pub(crate) fn now_rfc3339() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, time) = crate::rundir::civil(since.as_secs());
    format!("{date}T{time}.{:03}Z", since.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_ignores_the_clock_at_any_depth() {
        let event = |ts: &str, ms: u64| Event {
            ts: ts.into(),
            run_id: "r".into(),
            seq: 1,
            turn: 1,
            kind: EventKind::ActionExecuted,
            data: serde_json::json!({"duration_ms": ms, "result": {"elapsed_ms": ms, "x": 1}}),
        };
        assert_eq!(comparable(&event("a", 1)), comparable(&event("b", 2)));
    }
}
