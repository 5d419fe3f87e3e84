//! Replay (seed 002 §10.2): read `events.jsonl` back, rebuild the turn sequence, re-run a
//! recorded run against its own recorded model answers and action results and check that it
//! produces the same events (apart from timestamps, durations and `assistant_delta` cuts), and
//! score its compliance: action-sequence rules, budgets, policy hits.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::action::Action;
use crate::error::{Error, Result};
use crate::event::{
    ActionPlanned, Event, EventBus, EventKind, EventSink, MemorySink, Payload, ToolServers,
    comparable, read_lines,
};
use crate::exec::{Execution, Executor, RecordedExecution};
use crate::run::{
    ExternalRecord, ModelSource, RecordedCall, RecordedDeadline, RecordedEnding, RecordedToolChange,
};
use crate::rundir::{LastExecution, Redactor, RunDir};
use crate::session::{RunParts, RunStart, UserInput, finish_run, new_run};
use crate::state::{Counters, ObservationStatus};

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
    pub(crate) tool_servers: Option<ToolServers>,
    /// The changes of the external tools on offer (`tools_changed`), in order.
    pub(crate) tool_changes: Vec<RecordedToolChange>,
    pub(crate) last_seq: u64,
    valid_bytes: u64,
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
        let Ok(Payload::RunStarted(start)) = first.payload() else {
            let error = first.payload().err().map(|error| error.to_string()).unwrap_or_default();
            return Err(bad(format!("run_started does not describe a run: {error}")));
        };
        let start = *start;
        // An action whose result was recorded without its observation (killed in between) is
        // completed from `last_execution.json`, written before its `action_executed` with the
        // whole observation text: the re-run takes that result instead of executing the
        // action again. Without a matching file (a record from before it, or an action that
        // never writes one) the event is cut, and a resume redoes the action in its place.
        let run_dir = path.parent().map(Path::to_owned).unwrap_or_default();
        let mut interrupted: Option<LastExecution> = None;
        if let Some(last) = events.last().filter(|event| event.kind == EventKind::ActionExecuted) {
            interrupted = RunDir::open(&run_dir)
                .ok()
                .and_then(|dir| dir.read_last_execution())
                .filter(|execution| is_recorded_as(execution, last));
            if interrupted.is_none() {
                events.pop();
                valid_bytes = last_start;
            }
        }
        let last_seq = events.last().map_or(0, |event| event.seq);
        let mut calls = Vec::new();
        let mut executions = Vec::new();
        let mut pending_request: Option<(String, String)> = None;
        let mut planned: Option<ActionPlanned> = None;
        let mut side_events = Vec::new();
        let mut executed: Option<(Action, ObservationStatus, Value)> = None;
        let mut endings = Vec::new();
        let mut inputs = Vec::new();
        let mut commands = Vec::new();
        let mut deadlines = Vec::new();
        let mut tool_servers = None;
        let mut tool_changes = Vec::new();
        for event in &events {
            let at = |message: String| bad(format!("seq {}: {message}", event.seq));
            let payload = event.payload().map_err(|error| at(error.to_string()))?;
            match payload {
                Payload::ToolServers(servers) => tool_servers = Some(servers),
                Payload::ToolsChanged(change) => tool_changes.push(RecordedToolChange {
                    refresh: change.refresh,
                    tools: serde_json::from_value(change.tools)
                        .map_err(|error| at(format!("bad tools: {error}")))?,
                }),
                Payload::DeadlinePassed(deadline) => deadlines.push(RecordedDeadline {
                    turn: event.turn,
                    what: deadline.what,
                    step: deadline.step,
                }),
                Payload::RunFinished(finished) => endings.push(RecordedEnding {
                    outcome: finished.outcome,
                    turns: finished.counters.turns,
                }),
                Payload::UserInput(input) => inputs.push(UserInput {
                    text: input.text,
                    input_sizes: Some(input.input_sizes.unwrap_or_default()),
                }),
                Payload::CommandExecuted(command) => commands.push(Execution {
                    status: command.status,
                    content: command.output,
                    result: Value::Null,
                }),
                Payload::ModelRequest(request) => {
                    planned = None;
                    pending_request = Some((request.purpose, request.request_sha256));
                }
                Payload::ModelResponse(response) => {
                    let Some((purpose, request_sha256)) = pending_request.take() else {
                        return Err(at("model_response without model_request".to_owned()));
                    };
                    let result = match response.response {
                        Some(response) => Ok(response),
                        None => Err(response.error.unwrap_or_else(|| "model error".to_owned())),
                    };
                    let planned = planned.take().filter(|_| result.is_err());
                    calls.push(RecordedCall { purpose, request_sha256, result, planned });
                }
                Payload::ActionPlanned(action) if pending_request.is_some() => {
                    planned = Some(action);
                }
                Payload::ActionValidated(_) => side_events.clear(),
                side @ (Payload::ApprovalRequired(_)
                | Payload::ApprovalGranted(_)
                | Payload::ApprovalDenied(_)) => side_events.push(side),
                Payload::ActionExecuted(executed_now) => {
                    let mut result = executed_now.result;
                    if let Value::Object(map) = &mut result {
                        map.remove("duration_ms");
                    }
                    executed = Some((executed_now.action, executed_now.status, result));
                }
                Payload::ObservationRecorded(observation) => {
                    let Some((action, status, result)) = executed.take() else { continue };
                    if matches!(action, Action::RecallObservation { .. }) {
                        continue;
                    }
                    let content = match &observation.stored {
                        Some(stored) => RunDir::open(&run_dir)?.read_observation(stored)?,
                        None => observation.content,
                    };
                    // The recorded result is put back as it was (its own duration left out
                    // above), so the replayed `action_executed` carries the recorded figures.
                    executions.push(RecordedExecution {
                        action,
                        execution: Execution { status, content, result },
                        side_events: std::mem::take(&mut side_events),
                    });
                }
                _ => {}
            }
        }
        if let (Some((action, status, result)), Some(interrupted)) = (executed, interrupted) {
            executions.push(RecordedExecution {
                action,
                execution: Execution { status, content: interrupted.content, result },
                side_events,
            });
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

/// Whether `execution` is the one `event` (an `action_executed`) recorded: same `seq`, action,
/// status and result (durations aside).
fn is_recorded_as(execution: &LastExecution, event: &Event) -> bool {
    let Ok(Payload::ActionExecuted(executed)) = event.payload() else {
        return false;
    };
    let without_duration = |value: &Value| {
        let mut value = value.clone();
        if let Value::Object(map) = &mut value {
            map.remove("duration_ms");
        }
        value
    };
    event.seq == execution.seq
        && executed.action == execution.action
        && executed.status == execution.status
        && without_duration(&executed.result) == without_duration(&execution.result)
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
        // Events whose data is not of their kind's shape add nothing to the summary.
        let Ok(payload) = event.payload() else { continue };
        match payload {
            Payload::ModelRequest(_) => turn.model_calls += 1,
            Payload::ObservationRecorded(observation) => {
                let status = observation.status.as_str();
                // An observation of no action: an unreadable answer, a failed call, or a
                // strategy's own (a collaboration's answer), shown by its first line.
                let action = match &observation.action {
                    Some(action) => action.summary(),
                    None => match status {
                        "invalid_action" => "(invalid answer)".to_owned(),
                        "model_error" => "(model call failed)".to_owned(),
                        _ => observation
                            .content
                            .lines()
                            .next()
                            .unwrap_or("(observation)")
                            .chars()
                            .take(80)
                            .collect(),
                    },
                };
                turn.steps.push(format!("{action} → {status}"));
            }
            Payload::ActionValidated(validated)
                if matches!(validated.action, Some(Action::FinalAnswer { .. })) =>
            {
                let valid = if validated.valid { "ok" } else { "invalid" };
                turn.steps.push(format!("final_answer → {valid}"));
            }
            Payload::InputRequested(input) => {
                turn.steps.push(format!("ask_user → {}", input.question));
            }
            // Inputs come between turns: shown at the end of the turn before them.
            Payload::UserInput(input) => {
                turn.steps.push(format!("user {} ← {}", input.kind, input.text));
            }
            Payload::CommandExecuted(command) => {
                turn.steps.push(format!("{} → {}", command.command, command.status.as_str()));
            }
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
    let limits = match events.first().map(Event::payload) {
        Some(Ok(Payload::RunStarted(start))) => Some(start.config.budgets.clone()),
        _ => None,
    };
    let limit_of = |index: usize| match &limits {
        Some(budgets) => {
            u64::from([budgets.max_turns, budgets.max_tool_calls, budgets.max_script_runs][index])
        }
        None => u64::MAX,
    };
    let budget_names = ["turns", "tool_calls", "script_runs"];
    let used_of = |counters: &Counters| {
        [counters.turns, counters.tool_calls, counters.script_runs].map(u64::from)
    };
    // Budgets apply per task: a new task in a session starts from the counters its
    // `user_input` found; the largest use of any task is reported.
    let mut base = [0u64; 3];
    let mut counters = [0u64; 3];
    let mut most_used = [0u64; 3];
    let mut budget_overruns = Vec::new();
    for event in events {
        let payload = event.payload().ok();
        if let Some(Payload::UserInput(input)) = &payload
            && finished_at.is_some()
        {
            finished_at = None;
            if input.kind == "task" {
                base = counters;
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
        match payload {
            Some(Payload::ActionExecuted(executed)) => match &executed.action {
                Action::SelectSkills { .. } => {
                    let skills = executed.result.get("skills").and_then(Value::as_array);
                    for skill in skills.into_iter().flatten() {
                        if let Some(name) = skill.get("name").and_then(Value::as_str) {
                            selected.insert(name.to_owned());
                        }
                    }
                }
                Action::LoadResource { skill, .. } | Action::RunScript { skill, .. }
                    if !selected.contains(skill) =>
                {
                    let kind = executed.action.name();
                    sequence_violations.push(format!(
                        "seq {}: {kind} on skill `{skill}`, which was not selected before",
                        event.seq
                    ));
                }
                Action::CallTool { .. } if executed.status != ObservationStatus::Denied => {
                    external_calls += 1;
                }
                _ => {}
            },
            Some(Payload::ObservationRecorded(observation)) => {
                if matches!(
                    observation.status,
                    ObservationStatus::Refused | ObservationStatus::Denied
                ) {
                    *policy_hits.entry(observation.status.as_str().to_owned()).or_insert(0) += 1;
                }
            }
            Some(Payload::ApprovalDenied(_)) => {
                *policy_hits.entry("approval_denied".to_owned()).or_insert(0) += 1
            }
            Some(Payload::RunFinished(finished)) => {
                finished_at = Some(event.seq);
                final_text_present = !finished.final_text.trim().is_empty();
                counters = used_of(&finished.counters);
                for (index, name) in budget_names.iter().enumerate() {
                    let used = counters[index].saturating_sub(base[index]);
                    let limit = limit_of(index);
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
        .enumerate()
        .map(|(index, (name, used))| BudgetUse {
            name: (*name).to_owned(),
            used,
            limit: limit_of(index),
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
