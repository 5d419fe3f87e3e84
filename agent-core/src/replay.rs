//! Replay (seed 002 §10.2): read `events.jsonl` back, rebuild the turn sequence, re-run a
//! recorded run against its own recorded model answers and action results and check that it
//! produces the same events (apart from timestamps, durations and `assistant_delta` cuts), and
//! score its compliance: action-sequence rules, budgets, policy hits.

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::event::{Event, EventBus, EventKind, EventSink, MemorySink, comparable};
use crate::exec::{Execution, Executor, RecordedExecution};
use crate::run::{
    ExternalRecord, ModelSource, RecordedCall, RecordedDeadline, RecordedEnding, RecordedToolChange,
};
use crate::rundir::{Redactor, RunDir, StoredText};
use crate::session::{RunParts, RunStart, UserInput, finish_run, new_run};
use crate::state::ObservationStatus;

/// Reads every event of an `events.jsonl` file.
///
/// # Errors
///
/// [`Error::Recording`] naming the line that is not an event.
pub fn read_events(path: &Path) -> Result<Vec<Event>> {
    Ok(read_lines(path, false)?.0)
}

/// Events and the byte length of the complete lines (a torn last line is left out when
/// `tolerate_torn_tail`).
/// The events, the length of the valid lines, and where the last valid line starts.
fn read_lines(path: &Path, tolerate_torn_tail: bool) -> Result<(Vec<Event>, u64, u64)> {
    let file = std::fs::File::open(path).map_err(|error| Error::io(path, error))?;
    let mut reader = std::io::BufReader::new(file);
    let mut events = Vec::new();
    let mut valid = 0u64;
    let mut last_start = 0u64;
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(|error| Error::io(path, error))?;
        if read == 0 {
            break;
        }
        number += 1;
        let complete = line.ends_with(b"\n");
        match serde_json::from_slice::<Event>(&line) {
            Ok(event) if complete => {
                if let Some(previous) = events.last().map(|event: &Event| event.seq)
                    && event.seq <= previous
                {
                    return Err(Error::Recording {
                        path: path.to_owned(),
                        message: format!(
                            "line {number}: seq {} does not follow {previous}",
                            event.seq
                        ),
                    });
                }
                events.push(event);
                last_start = valid;
                valid += read as u64;
            }
            Ok(_) | Err(_) if tolerate_torn_tail && !complete => break,
            Ok(_) => {
                return Err(Error::Recording {
                    path: path.to_owned(),
                    message: format!("line {number}: the last line has no newline (a torn write)"),
                });
            }
            Err(error) => {
                return Err(Error::Recording {
                    path: path.to_owned(),
                    message: format!("line {number}: not an event: {error}"),
                });
            }
        }
    }
    Ok((events, valid, last_start))
}

/// A recorded run, ready to be replayed or resumed.
#[derive(Debug, Clone)]
pub(crate) struct Recording {
    pub(crate) run_id: String,
    pub(crate) start: RunStart,
    pub(crate) events: Vec<Event>,
    pub(crate) calls: Vec<RecordedCall>,
    pub(crate) executions: Vec<RecordedExecution>,
    /// Whether the last piece of work finished (the record ends with `run_finished`).
    pub(crate) finished: bool,
    /// How each piece of work ended (`run_finished`), in order.
    pub(crate) endings: Vec<RecordedEnding>,
    /// The inputs after the first task (`user_input`), in order.
    pub(crate) inputs: Vec<UserInput>,
    /// The outputs of slash commands (`command_executed`), in order.
    pub(crate) commands: Vec<Execution>,
    /// The time limits passed (`deadline_passed`), in order.
    pub(crate) deadlines: Vec<RecordedDeadline>,
    /// The external servers (`tool_servers`), if the run had any.
    pub(crate) tool_servers: Option<Value>,
    /// The changes of the external tools on offer (`tools_changed`), in order.
    pub(crate) tool_changes: Vec<RecordedToolChange>,
    pub(crate) last_seq: u64,
    valid_bytes: u64,
}

fn field<'a>(event: &'a Event, key: &str) -> &'a Value {
    event.data.get(key).unwrap_or(&Value::Null)
}

impl Recording {
    pub(crate) fn read(path: &Path, tolerate_torn_tail: bool) -> Result<Recording> {
        let (mut events, mut valid_bytes, last_start) = read_lines(path, tolerate_torn_tail)?;
        let bad = |message: String| Error::Recording { path: path.to_owned(), message };
        let first = events.first().ok_or_else(|| bad("no events".to_owned()))?;
        if first.kind != EventKind::RunStarted {
            return Err(bad(format!(
                "the first event is {}, not run_started",
                first.kind.as_str()
            )));
        }
        let run_id = first.run_id.clone();
        let start: RunStart = serde_json::from_value(first.data.clone())
            .map_err(|error| bad(format!("run_started does not describe a run: {error}")))?;
        // An action whose result was recorded without its observation (killed in between) is
        // redone: its `action_executed` is not part of the record, and a resume cuts it from
        // the file so the redone one takes its place (the observation's text was never kept).
        if events.last().is_some_and(|event| event.kind == EventKind::ActionExecuted) {
            events.pop();
            valid_bytes = last_start;
        }
        let last_seq = events.last().map_or(0, |event| event.seq);
        let run_dir = path.parent().map(Path::to_owned).unwrap_or_default();
        let mut calls = Vec::new();
        let mut executions = Vec::new();
        let mut pending_request: Option<(String, String)> = None;
        let mut planned: Option<Value> = None;
        let mut side_events = Vec::new();
        let mut executed: Option<(Value, ObservationStatus, Value)> = None;
        let mut endings = Vec::new();
        let mut inputs = Vec::new();
        let mut commands = Vec::new();
        let mut deadlines = Vec::new();
        let mut tool_servers = None;
        let mut tool_changes = Vec::new();
        for event in &events {
            match event.kind {
                EventKind::ToolServers => tool_servers = Some(event.data.clone()),
                EventKind::ToolsChanged => tool_changes.push(RecordedToolChange {
                    refresh: field(event, "refresh").as_u64().unwrap_or(0),
                    tools: serde_json::from_value(field(event, "tools").clone())
                        .map_err(|error| bad(format!("seq {}: bad tools: {error}", event.seq)))?,
                }),
                EventKind::DeadlinePassed => deadlines.push(RecordedDeadline {
                    turn: event.turn,
                    what: field(event, "what").as_str().unwrap_or_default().to_owned(),
                    step: field(event, "step").as_u64().unwrap_or(0),
                }),
                EventKind::RunFinished => endings.push(RecordedEnding {
                    outcome: serde_json::from_value(field(event, "outcome").clone())
                        .map_err(|error| bad(format!("seq {}: bad outcome: {error}", event.seq)))?,
                    turns: field(event, "counters")
                        .get("turns")
                        .and_then(Value::as_u64)
                        .and_then(|turns| u32::try_from(turns).ok())
                        .ok_or_else(|| bad(format!("seq {}: no turn count", event.seq)))?,
                }),
                EventKind::UserInput => {
                    let Some(text) = field(event, "text").as_str() else {
                        return Err(bad(format!("seq {}: user_input without text", event.seq)));
                    };
                    let input_sizes = match event.data.get("input_sizes") {
                        Some(sizes) => serde_json::from_value(sizes.clone()).map_err(|error| {
                            bad(format!("seq {}: bad input_sizes: {error}", event.seq))
                        })?,
                        None => Vec::new(),
                    };
                    inputs
                        .push(UserInput { text: text.to_owned(), input_sizes: Some(input_sizes) });
                }
                EventKind::CommandExecuted => {
                    let status = serde_json::from_value(field(event, "status").clone())
                        .map_err(|error| bad(format!("seq {}: bad status: {error}", event.seq)))?;
                    let content = field(event, "output").as_str().unwrap_or_default().to_owned();
                    commands.push(Execution { status, content, result: Value::Null });
                }
                EventKind::ModelRequest => {
                    planned = None;
                    pending_request = Some((
                        field(event, "purpose").as_str().unwrap_or_default().to_owned(),
                        field(event, "request_sha256").as_str().unwrap_or_default().to_owned(),
                    ));
                }
                EventKind::ModelResponse => {
                    let Some((purpose, request_sha256)) = pending_request.take() else {
                        return Err(bad(format!(
                            "seq {}: model_response without model_request",
                            event.seq
                        )));
                    };
                    let result = match event.data.get("response") {
                        Some(response) => {
                            Ok(serde_json::from_value(response.clone()).map_err(|error| {
                                bad(format!(
                                    "seq {}: the recorded response is unreadable: {error}",
                                    event.seq
                                ))
                            })?)
                        }
                        None => {
                            Err(field(event, "error").as_str().unwrap_or("model error").to_owned())
                        }
                    };
                    let planned = planned.take().filter(|_| result.is_err());
                    calls.push(RecordedCall { purpose, request_sha256, result, planned });
                }
                EventKind::ActionPlanned if pending_request.is_some() => {
                    planned = Some(event.data.clone());
                }
                EventKind::ActionValidated => side_events.clear(),
                EventKind::ApprovalRequired
                | EventKind::ApprovalGranted
                | EventKind::ApprovalDenied => {
                    side_events.push((event.kind, event.data.clone()));
                }
                EventKind::ActionExecuted => {
                    let status = serde_json::from_value(field(event, "status").clone())
                        .map_err(|error| bad(format!("seq {}: bad status: {error}", event.seq)))?;
                    let mut result = field(event, "result").clone();
                    if let Value::Object(map) = &mut result {
                        map.remove("duration_ms");
                    }
                    executed = Some((field(event, "action").clone(), status, result));
                }
                EventKind::ObservationRecorded => {
                    let Some((action, status, mut result)) = executed.take() else { continue };
                    if action.get("type").and_then(Value::as_str) == Some("recall_observation") {
                        continue;
                    }
                    let content = match event.data.get("stored") {
                        Some(stored) if !stored.is_null() => {
                            let stored: StoredText = serde_json::from_value(stored.clone())
                                .map_err(|error| {
                                    bad(format!("seq {}: bad reference: {error}", event.seq))
                                })?;
                            RunDir::open(&run_dir)?.read_observation(&stored)?
                        }
                        _ => field(event, "content").as_str().unwrap_or_default().to_owned(),
                    };
                    // The recorded result is put back as it was, duration included, so the
                    // replayed `action_executed` carries the recorded figures.
                    if let Value::Object(map) = &mut result {
                        map.remove("duration_ms");
                    }
                    executions.push(RecordedExecution {
                        action,
                        execution: Execution { status, content, result },
                        side_events: std::mem::take(&mut side_events),
                    });
                }
                _ => {}
            }
        }
        let finished = events.last().is_some_and(|event| event.kind == EventKind::RunFinished);
        Ok(Recording {
            run_id,
            start,
            events,
            calls,
            executions,
            finished,
            endings,
            inputs,
            commands,
            deadlines,
            tool_servers,
            tool_changes,
            last_seq,
            valid_bytes,
        })
    }

    /// What a re-run takes from the record instead of asking external servers.
    pub(crate) fn external(&self) -> ExternalRecord {
        ExternalRecord {
            servers: self.tool_servers.clone(),
            changes: self.tool_changes.clone().into(),
            refreshes: 0,
            fresh: false,
        }
    }

    /// The events a re-run must reproduce, in order.
    pub(crate) fn comparable_events(&self) -> Vec<Event> {
        self.events
            .iter()
            .filter(|event| event.kind != EventKind::AssistantDelta)
            .cloned()
            .collect()
    }

    /// Cuts what the record does not keep (a torn last line, an `action_executed` without its
    /// observation) off the file, so appends start on a line boundary after the record.
    pub(crate) fn truncate_partial_line(&self, path: &Path) -> Result<()> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|error| Error::io(path, error))?;
        let length = file.metadata().map_err(|error| Error::io(path, error))?.len();
        if length > self.valid_bytes {
            file.set_len(self.valid_bytes).map_err(|error| Error::io(path, error))?;
        }
        Ok(())
    }
}

/// Where a replay first departed from the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Position in the compared sequence (0-based, `assistant_delta` left out).
    pub index: usize,
    /// The recorded event there (without clock fields), if any.
    pub recorded: Option<Value>,
    /// The replayed event there, if any.
    pub replayed: Option<Value>,
    /// What differs.
    pub message: String,
}

/// Budget use against the recorded limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUse {
    /// Which budget.
    pub name: String,
    /// Used.
    pub used: u64,
    /// Limit.
    pub limit: u64,
}

/// Compliance of a recorded run (seed 002 §10).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compliance {
    /// Action-sequence violations (e.g. a script of a skill that was never selected).
    pub sequence_violations: Vec<String>,
    /// Budget use per budget.
    pub budgets: Vec<BudgetUse>,
    /// Budgets used past their limit.
    pub budget_overruns: Vec<String>,
    /// Guardrail, policy and approval refusals by status (`refused`, `denied`, `approval_denied`).
    pub policy_hits: BTreeMap<String, u64>,
    /// External (MCP) tool calls that were executed (`call_tool`, answered or failed; refused
    /// ones are policy hits).
    #[serde(default)]
    pub external_calls: u64,
    /// Whether the run ended with a final text.
    pub final_text_present: bool,
    /// Share of checks passed (sequence, budgets, final text), 0 to 1.
    pub score: f64,
}

/// One turn, rebuilt from the events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnSummary {
    /// The turn.
    pub turn: u32,
    /// Model calls in the turn.
    pub model_calls: u32,
    /// Each action (or invalid answer) and how it ended: `run_script skill/x → ok`.
    pub steps: Vec<String>,
}

/// The turn sequence of a run.
pub fn turns(events: &[Event]) -> Vec<TurnSummary> {
    let mut turns: Vec<TurnSummary> = Vec::new();
    for event in events {
        if event.turn == 0 {
            continue;
        }
        if turns.last().is_none_or(|turn| turn.turn != event.turn) {
            turns.push(TurnSummary { turn: event.turn, model_calls: 0, steps: Vec::new() });
        }
        let Some(turn) = turns.last_mut() else { continue };
        match event.kind {
            EventKind::ModelRequest => turn.model_calls += 1,
            EventKind::ObservationRecorded => {
                let status = field(event, "status").as_str().unwrap_or("?");
                // An observation of no action: an unreadable answer, a failed call, or a
                // strategy's own (a collaboration's answer), shown by its first line.
                let action =
                    serde_json::from_value::<crate::action::Action>(field(event, "action").clone())
                        .map_or_else(
                            |_| match status {
                                "invalid_action" => "(invalid answer)".to_owned(),
                                "model_error" => "(model call failed)".to_owned(),
                                _ => field(event, "content")
                                    .as_str()
                                    .and_then(|content| content.lines().next())
                                    .unwrap_or("(observation)")
                                    .chars()
                                    .take(80)
                                    .collect(),
                            },
                            |action| action.summary(),
                        );
                turn.steps.push(format!("{action} → {status}"));
            }
            EventKind::ActionValidated
                if field(event, "action").get("type").and_then(Value::as_str)
                    == Some("final_answer") =>
            {
                let valid = field(event, "valid").as_bool().unwrap_or(false);
                turn.steps.push(format!("final_answer → {}", if valid { "ok" } else { "invalid" }));
            }
            EventKind::InputRequested => turn.steps.push(format!(
                "ask_user → {}",
                field(event, "question").as_str().unwrap_or_default()
            )),
            // Inputs come between turns: shown at the end of the turn before them.
            EventKind::UserInput => turn.steps.push(format!(
                "user {} ← {}",
                field(event, "kind").as_str().unwrap_or("input"),
                field(event, "text").as_str().unwrap_or_default()
            )),
            EventKind::CommandExecuted => turn.steps.push(format!(
                "{} → {}",
                field(event, "command").as_str().unwrap_or_default(),
                field(event, "status").as_str().unwrap_or("?")
            )),
            _ => {}
        }
    }
    turns
}

/// Scores a recorded run from its events alone.
pub fn compliance(events: &[Event]) -> Compliance {
    let mut selected: HashSet<String> = HashSet::new();
    let mut sequence_violations = Vec::new();
    let mut policy_hits: BTreeMap<String, u64> = BTreeMap::new();
    let mut finished_at: Option<u64> = None;
    let mut final_text_present = false;
    let mut external_calls = 0;
    let limits = events
        .first()
        .and_then(|event| event.data.get("config"))
        .and_then(|config| config.get("budgets"))
        .cloned()
        .unwrap_or(Value::Null);
    let budget_names = [
        ("turns", "max_turns"),
        ("tool_calls", "max_tool_calls"),
        ("script_runs", "max_script_runs"),
    ];
    // Budgets apply per task: a new task in a session starts from the counters its
    // `user_input` found; the largest use of any task is reported.
    let mut base = Value::Null;
    let mut counters = Value::Null;
    let mut most_used = [0u64; 3];
    let mut budget_overruns = Vec::new();
    for event in events {
        if event.kind == EventKind::UserInput && finished_at.is_some() {
            finished_at = None;
            if field(event, "kind").as_str() == Some("task") {
                base = counters.clone();
            }
            continue;
        }
        if let Some(seq) = finished_at {
            sequence_violations.push(format!(
                "seq {}: {} after run_finished (seq {seq})",
                event.seq,
                event.kind.as_str()
            ));
            continue;
        }
        match event.kind {
            EventKind::ActionExecuted => {
                let action = field(event, "action");
                let kind = action.get("type").and_then(Value::as_str).unwrap_or_default();
                let args = action.get("args").unwrap_or(&Value::Null);
                match kind {
                    "select_skills" => {
                        for skill in field(event, "result")
                            .get("skills")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                        {
                            if let Some(name) = skill.get("name").and_then(Value::as_str) {
                                selected.insert(name.to_owned());
                            }
                        }
                    }
                    "load_resource" | "run_script" => {
                        let skill = args.get("skill").and_then(Value::as_str).unwrap_or_default();
                        if !selected.contains(skill) {
                            sequence_violations.push(format!(
                                "seq {}: {kind} on skill `{skill}`, which was not selected before",
                                event.seq
                            ));
                        }
                    }
                    "call_tool" if field(event, "status").as_str() != Some("denied") => {
                        external_calls += 1;
                    }
                    _ => {}
                }
            }
            EventKind::ObservationRecorded => {
                if let Some(status) = field(event, "status").as_str()
                    && (status == "refused" || status == "denied")
                {
                    *policy_hits.entry(status.to_owned()).or_insert(0) += 1;
                }
            }
            EventKind::ApprovalDenied => {
                *policy_hits.entry("approval_denied".to_owned()).or_insert(0) += 1
            }
            EventKind::RunFinished => {
                finished_at = Some(event.seq);
                final_text_present =
                    field(event, "final_text").as_str().is_some_and(|text| !text.trim().is_empty());
                counters = field(event, "counters").clone();
                for (index, (name, limit_key)) in budget_names.iter().enumerate() {
                    let count =
                        |counters: &Value| counters.get(name).and_then(Value::as_u64).unwrap_or(0);
                    let used = count(&counters).saturating_sub(count(&base));
                    let limit = limits.get(limit_key).and_then(Value::as_u64).unwrap_or(u64::MAX);
                    // A degraded answer's run ends at its limit; the turn that hit it is not run.
                    if used > limit {
                        budget_overruns.push(format!("{name}: {used} used, limit {limit}"));
                    }
                    most_used[index] = most_used[index].max(used);
                }
            }
            _ => {}
        }
    }
    let budgets = budget_names
        .iter()
        .zip(most_used)
        .map(|((name, limit_key), used)| BudgetUse {
            name: (*name).to_owned(),
            used,
            limit: limits.get(limit_key).and_then(Value::as_u64).unwrap_or(u64::MAX),
        })
        .collect();
    let checks = [sequence_violations.is_empty(), budget_overruns.is_empty(), final_text_present];
    let score = checks.iter().filter(|passed| **passed).count() as f64 / checks.len() as f64;
    Compliance {
        sequence_violations,
        budgets,
        budget_overruns,
        policy_hits,
        external_calls,
        final_text_present,
        score,
    }
}

/// What `replay_check` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// The run.
    pub run_id: String,
    /// The record format the record was written in (see [`crate::RECORD_FORMAT`]; 0: before
    /// formats were numbered). A record of another format than this build's is scored, but an
    /// exact replay is not expected.
    pub record_format: u32,
    /// Events compared (`assistant_delta` left out).
    pub events_compared: usize,
    /// The first difference, if any.
    pub divergence: Option<Divergence>,
    /// The compliance score of the record.
    pub compliance: Compliance,
    /// The turn sequence of the record.
    pub turns: Vec<TurnSummary>,
}

impl ReplayReport {
    /// Whether the replay reproduced the record exactly.
    pub fn reproduced(&self) -> bool {
        self.divergence.is_none()
    }
}

/// Re-runs the run in `run_dir` against its own recorded model answers and action results
/// (nothing is executed, no model is called) and compares the events it produces with the
/// record.
///
/// # Errors
///
/// [`Error::Recording`] when the directory holds no readable, finished run.
pub async fn replay_check(run_dir: &Path) -> Result<ReplayReport> {
    let directory = RunDir::open(run_dir)?;
    let recording = Recording::read(&directory.events_path(), false)?;
    if !recording.finished {
        return Err(Error::Recording {
            path: directory.events_path(),
            message:
                "the run has no run_finished event (still running or interrupted: resume it first)"
                    .to_owned(),
        });
    }
    let sink = Arc::new(MemorySink::new());
    let sinks: Vec<Arc<dyn EventSink>> = vec![sink.clone()];
    let bus = EventBus::new(&recording.run_id, sinks, Arc::new(Redactor::new()));
    let model = ModelSource { recorded: recording.calls.clone().into(), live: None };
    let executor = Executor {
        recorded: recording.executions.clone().into(),
        commands: recording.commands.clone().into(),
        live: None,
    };
    let parts = RunParts {
        bus,
        model,
        executor,
        run_dir: None,
        cancel: CancellationToken::new(),
        endings: recording.endings.clone().into(),
        deadlines: recording.deadlines.clone().into(),
        external: recording.external(),
    };
    let mut run = new_run(&recording.run_id, &recording.start, parts);
    let outcome = finish_run(&mut run, &recording.start, recording.inputs.clone().into()).await;
    let recorded: Vec<Value> = recording.comparable_events().iter().map(comparable).collect();
    let replayed: Vec<Value> = sink
        .events()
        .iter()
        .filter(|event| event.kind != EventKind::AssistantDelta)
        .map(comparable)
        .collect();
    let mut divergence = None;
    for index in 0..recorded.len().max(replayed.len()) {
        let (want, got) = (recorded.get(index), replayed.get(index));
        if want != got {
            let message = match (&outcome, want, got) {
                (Err(error), _, None) => format!("the replay stopped: {error}"),
                (_, Some(_), None) => "the replay ended before the record".to_owned(),
                (_, None, Some(_)) => "the replay produced more events than the record".to_owned(),
                _ => "the events differ".to_owned(),
            };
            divergence = Some(Divergence {
                index,
                recorded: want.cloned(),
                replayed: got.cloned(),
                message,
            });
            break;
        }
    }
    if divergence.is_none()
        && let Err(error) = outcome
    {
        divergence = Some(Divergence {
            index: recorded.len(),
            recorded: None,
            replayed: None,
            message: format!("the replay failed: {error}"),
        });
    }
    if let (Some(divergence), Some(mismatch)) =
        (divergence.as_mut(), recording.start.format_mismatch())
    {
        divergence.message = format!(
            "{} ({mismatch}, so an exact replay is not expected: replay it with that build)",
            divergence.message
        );
    }
    Ok(ReplayReport {
        run_id: recording.run_id.clone(),
        record_format: recording.start.record_format,
        events_compared: recorded.len(),
        divergence,
        compliance: compliance(&recording.events),
        turns: turns(&recording.events),
    })
}
