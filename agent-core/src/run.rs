//! One run in progress and the machinery every strategy shares: asking the model (streamed,
//! with early events), validating an answer against the turn's action space and the
//! guardrails, executing it, counting it, recording it, compacting the context, and ending the
//! run — with a final text in every case.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use futures_util::StreamExt;
use model_adapter::{
    ChatRequest, ContentPart, Delta, Message, ModelProvider, Response, ResponseFormat, ToolCall,
    ToolChoice,
};
use serde_json::{Value, json};
use stream_json::{Capture, EventKind as JsonEvent, Parser};
use tokio_util::sync::CancellationToken;

use crate::action::{Action, Decision};
use crate::budget::Outcome;
use crate::config::{AgentConfig, DecideMode};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::event::{
    ActionExecuted, ActionPlanned, ActionValidated, AssistantDelta, DeadlinePassed, EventBus,
    InputRequested, ModelRequest, ModelResponse, ObservationRecorded, Payload, PlanChange,
    ToolServers, ToolsChanged,
};
use crate::exec::{Divergence, Executor};
use crate::grounding::Grounding;
use crate::guard;
use crate::metrics::TurnReasoning;
use crate::rundir::{LastExecution, RunDir, StoredText, sha256_hex};
use crate::space::ActionSpace;
use crate::state::{ActionRecord, ObservationStatus, RunState, SelectedSkill};

/// A model answer recorded in `events.jsonl`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordedCall {
    pub(crate) purpose: String,
    pub(crate) request_sha256: String,
    pub(crate) result: std::result::Result<Response, String>,
    /// The `action_planned` data the live stream emitted before the call failed (a failed
    /// call has no response to stream it from again).
    pub(crate) planned: Option<ActionPlanned>,
}

/// Where model answers come from: recorded ones first (replay, resume), then the live model.
#[derive(Debug)]
pub(crate) struct ModelSource {
    pub(crate) recorded: VecDeque<RecordedCall>,
    pub(crate) live: Option<Arc<dyn ModelProvider>>,
}

/// How a recorded run ended (`run_finished`): a replay stops where the clock or a
/// cancellation stopped the original, which nothing in the record would reproduce otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordedEnding {
    pub(crate) outcome: Outcome,
    /// Turns started when it ended.
    pub(crate) turns: u32,
}

/// A time limit a record shows passed (`deadline_passed`): where, so that a re-run stops at
/// the same place whatever its own clock says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordedDeadline {
    pub(crate) turn: u32,
    pub(crate) what: String,
    pub(crate) step: u64,
}

/// How a run ended, before `run_finished` is written: the outcome and the text the user reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ending {
    pub(crate) outcome: Outcome,
    pub(crate) final_text: String,
}

/// Why a run must end before the model gave its answer (a budget, the context, a stuck loop,
/// a cancellation): the outcome and the reason, which the degraded answer names. A [`Stop`]
/// becomes an [`Ending`] through the strategy's `end` (by default [`Run::degrade`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stop {
    pub(crate) outcome: Outcome,
    pub(crate) reason: String,
}

impl Stop {
    pub(crate) fn new(outcome: Outcome, reason: impl Into<String>) -> Stop {
        Stop { outcome, reason: reason.into() }
    }

    /// The run's cancellation token fired (or the record shows it did).
    pub(crate) fn cancelled() -> Stop {
        Stop::new(Outcome::Cancelled, "the run was cancelled")
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.outcome == Outcome::Cancelled
    }
}

/// A change of the external tools on offer that a record shows (`tools_changed`), at the
/// `refresh`-th look at the list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordedToolChange {
    pub(crate) refresh: u64,
    pub(crate) tools: Vec<crate::external::ExternalTool>,
}

/// What a run knows of external tools besides the live ones (in the executor): the record's
/// `tool_servers` and `tools_changed`, replayed instead of asking the servers.
#[derive(Debug, Default)]
pub(crate) struct ExternalRecord {
    /// The recorded `tool_servers` data.
    pub(crate) servers: Option<ToolServers>,
    /// The recorded changes, in order.
    pub(crate) changes: VecDeque<RecordedToolChange>,
    /// Looks at the list so far.
    pub(crate) refreshes: u64,
    /// The list was looked at for the coming turn already.
    pub(crate) fresh: bool,
}

/// What a piece of a run's work began with: its task, or the answer to its question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InputKind {
    /// A task: the run's first, or a new one in a session.
    Task,
    /// The answer to the question the run asked (`ask_user`).
    Answer,
}

/// `answer` with the last [`RESULTS_APPENDED`] of `lines` (an action, its result's gist) after
/// it under "Results:"; `answer` as it is when there are none.
fn appended(answer: String, lines: &[(&Action, String)]) -> String {
    if lines.is_empty() {
        return answer;
    }
    let mut text = format!("{}\n\nResults:\n", answer.trim_end());
    for (action, gist) in &lines[lines.len().saturating_sub(RESULTS_APPENDED)..] {
        text.push_str(&format!("- {}: {gist}\n", action.summary()));
    }
    text.trim_end().to_owned()
}

/// Whether `answer` admits that the value is unknown ("I cannot …", "I do not know …"): the
/// endings [`Run::with_results`] and [`Run::with_found_files`] leave as they are.
pub(crate) fn admits(answer: &str) -> bool {
    ["I cannot", "I could not", "I do not know"]
        .iter()
        .any(|start| answer.trim_start().starts_with(start))
}

/// The most results [`Run::with_results`] appends to an answer.
const RESULTS_APPENDED: usize = 8;

/// The record format from which the call a refusal shows for a script's misplaced command is cut
/// to the arguments that command's own usage line writes, the command first
/// ([`crate::usage::command_arities`]): the fix shown for `["2026-12-25", "weekday 2026-12-25"]`
/// was `["2026-12-25", "weekday", "2026-12-25"]`, and then `["weekday", "2026-12-25",
/// "2026-12-25"]`, which the local 1.5B ran.
const COMMAND_ARITY_SINCE_FORMAT: u32 = 32;

/// A run in progress.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) config: AgentConfig,
    pub(crate) state: RunState,
    pub(crate) context: Context,
    pub(crate) bus: EventBus,
    pub(crate) model: ModelSource,
    pub(crate) executor: Executor,
    pub(crate) run_dir: Option<RunDir>,
    pub(crate) cancel: CancellationToken,
    pub(crate) started: Instant,
    /// Replaying a finished run: the clock and the cancellation token do not stop it; the
    /// record says where they did.
    pub(crate) replaying: Option<RecordedEnding>,
    /// Re-running a record: how its later finished pieces of work ended, in order.
    pub(crate) endings: VecDeque<RecordedEnding>,
    /// Re-running a record: the time limits it shows passed, in order.
    pub(crate) deadlines: VecDeque<RecordedDeadline>,
    pub(crate) failures: guard::FailureTracker,
    pub(crate) next_observation: u32,
    /// Texts of observations by id (full text), for `recall_observation`.
    pub(crate) observation_texts: Vec<(String, String)>,
    /// The check of final answers against what the run saw.
    pub(crate) grounding: Grounding,
    /// The record format this run follows ([`crate::RECORD_FORMAT`], or a re-run record's own).
    pub(crate) format: u32,
    /// `state.json` with the audit trail serialised once per record.
    pub(crate) state_json: crate::state::StateJson,
    /// Sizes of the files the task names, from the run's start (the reasoning level).
    pub(crate) input_sizes: Vec<u64>,
    /// What the current piece of work began with (the strategies read it to go on after an
    /// answer instead of starting over).
    pub(crate) input: InputKind,
    /// The tool call the last piece of work ended with (`final_answer`, `ask_user`), which the
    /// next input's message answers (tools mode: every call needs its result).
    pub(crate) pending_call: Option<String>,
    /// External tools: the record's servers and changes, and how often the list was read.
    pub(crate) external: ExternalRecord,
}

/// What one Decide call gave.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The model answered (boxed: a response is large beside an error message).
    Response(Box<Response>),
    /// The call failed (after model-adapter's retries).
    Failed(String),
}

impl Run {
    /// Emits an event (redacted, numbered, written to every sink).
    pub(crate) fn emit(&self, payload: impl Into<Payload>) -> Result<()> {
        self.bus.emit(payload)
    }

    /// Replaying: whether the record ended with `outcome` after as many turns as started now.
    pub(crate) fn recorded_stop(&self, outcome: Outcome) -> bool {
        self.replaying.is_some_and(|ending| {
            ending.outcome == outcome && ending.turns == self.state.counters.turns
        })
    }

    /// Emits `tool_servers` at the start of a run that has external tools: the recorded
    /// servers when re-running a record, else the live ones.
    pub(crate) fn announce_tool_servers(&mut self) -> Result<()> {
        let servers = match self.external.servers.take() {
            Some(servers) => Some(servers),
            // A record without servers stays without them.
            None if self.bus.catching_up() => None,
            None => self.executor.live.as_ref().and_then(|live| live.external.as_ref()).map(
                |external| ToolServers {
                    servers: json!(external.servers()),
                    tools: self.state.tools.len() as u64,
                },
            ),
        };
        if let Some(servers) = servers {
            self.emit(servers)?;
        }
        Ok(())
    }

    /// Reads the external tools on offer again (before a turn): a change is recorded as
    /// `tools_changed` and told to the model in the transcript. Re-running a record, the
    /// record's changes are applied at the same look, and the servers are not asked.
    pub(crate) fn refresh_tools(&mut self) -> Result<()> {
        self.external.refreshes += 1;
        self.external.fresh = true;
        let refresh = self.external.refreshes;
        let tools = if self.external.changes.front().is_some_and(|change| change.refresh == refresh)
        {
            self.external.changes.pop_front().map(|change| change.tools)
        } else if self.replaying.is_some() || self.bus.catching_up() {
            None
        } else {
            self.executor
                .live
                .as_ref()
                .and_then(|live| live.external.as_ref())
                .map(|external| external.tools())
                .filter(|tools| *tools != self.state.tools)
        };
        let Some(tools) = tools else { return Ok(()) };
        let names = |tools: &[crate::external::ExternalTool]| -> Vec<String> {
            tools.iter().map(|tool| tool.name.clone()).collect()
        };
        let (old, new) = (names(&self.state.tools), names(&tools));
        let added: Vec<&String> = new.iter().filter(|name| !old.contains(name)).collect();
        let removed: Vec<&String> = old.iter().filter(|name| !new.contains(name)).collect();
        self.emit(ToolsChanged {
            refresh,
            added: added.iter().map(|name| (*name).clone()).collect(),
            removed: removed.iter().map(|name| (*name).clone()).collect(),
            tools: json!(tools),
        })?;
        let mut message = String::from("The external tools changed.");
        if !added.is_empty() {
            let added: Vec<&str> = added.iter().map(|name| name.as_str()).collect();
            message.push_str(&format!(" New: {}.", added.join(", ")));
        }
        if !removed.is_empty() {
            let removed: Vec<&str> = removed.iter().map(|name| name.as_str()).collect();
            message.push_str(&format!(" Gone: {}.", removed.join(", ")));
        }
        self.state.tools = tools;
        let offered = crate::space::offered_tools(&self.state);
        let summarised = crate::space::tools_summarised(&offered, &self.config);
        message.push_str(&crate::external::catalog(&offered, summarised));
        self.context.push(Message::user(message));
        Ok(())
    }

    fn divergence(&self, divergence: Divergence) -> Error {
        let path = self.run_dir.as_ref().map(|dir| dir.path().to_owned()).unwrap_or_default();
        Error::Resume { path, message: divergence.0 }
    }

    /// Asks the model once. In live mode the answer streams: `action_planned` as soon as the
    /// action's name is known, `assistant_delta` for final-answer text.
    pub(crate) async fn call_model(
        &mut self,
        purpose: &str,
        request: ChatRequest,
        mode: Option<DecideMode>,
    ) -> Result<Answer> {
        let fingerprint = self.context.fingerprint(&request)?;
        let request_sha256 = fingerprint.sha256;
        let agent = peer_of(purpose);
        // The meta-cognition warnings the turn note gave (seed 000), by reason, as sent.
        let notice = match request.messages.last() {
            Some(Message::User { content }) => content
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => Some(crate::reasoning::notice_reasons(text)),
                    _ => None,
                })
                .flatten()
                .collect(),
            _ => Vec::new(),
        };
        self.emit(ModelRequest {
            purpose: purpose.to_owned(),
            messages: request.messages.len() as u64,
            chars: fingerprint.chars as u64,
            request_sha256: request_sha256.clone(),
            tools: request.tools.iter().map(|tool| tool.name.clone()).collect(),
            json_schema: matches!(request.response_format, ResponseFormat::JsonSchema { .. }),
            notice: (!notice.is_empty())
                .then(|| notice.iter().map(|reason| (*reason).to_owned()).collect()),
            agent: agent.clone(),
        })?;
        self.state.counters.model_calls += 1;
        let started = Instant::now();
        let mut watcher = Watcher::new(mode);
        let result = if let Some(recorded) = self.model.recorded.pop_front() {
            if recorded.purpose != purpose || recorded.request_sha256 != request_sha256 {
                return Err(self.divergence(Divergence(format!(
                    "model call {} ({purpose}) sent a different request than the record ({}, \
                     sha256 {} vs recorded {})",
                    self.state.counters.model_calls,
                    recorded.purpose,
                    request_sha256,
                    recorded.request_sha256
                ))));
            }
            match (&recorded.result, &recorded.planned) {
                (Ok(response), _) => {
                    for delta in deltas_of(response) {
                        watcher.push(&delta, &self.bus, false)?;
                    }
                }
                (Err(_), Some(planned)) => self.emit(planned.clone())?,
                (Err(_), None) => {}
            }
            recorded.result
        } else if let Some(model) = self.model.live.clone() {
            let streamed = tokio::select! {
                result = stream_answer(model.as_ref(), &request, &mut watcher, &self.bus) => result?,
                () = self.cancel.cancelled() => Err("cancelled".to_owned()),
            };
            streamed
        } else {
            return Err(self.divergence(Divergence(format!(
                "the record has no answer for model call {} ({purpose})",
                self.state.counters.model_calls
            ))));
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        self.context.recycle(request.messages);
        match result {
            Ok(mut response) => {
                redact_response(&self.bus, &mut response);
                if let Some(usage) = response.usage {
                    self.state.counters.prompt_tokens += usage.prompt_tokens;
                    self.state.counters.completion_tokens += usage.completion_tokens;
                    self.state.counters.cached_tokens += usage.cached_tokens;
                }
                self.emit(ModelResponse {
                    purpose: purpose.to_owned(),
                    response: Some(response.clone()),
                    error: None,
                    duration_ms,
                    agent,
                })?;
                Ok(Answer::Response(Box::new(response)))
            }
            Err(error) => {
                let error = self.bus.redactor().redact(&error).into_owned();
                self.emit(ModelResponse {
                    purpose: purpose.to_owned(),
                    response: None,
                    error: Some(error.clone()),
                    duration_ms,
                    agent,
                })?;
                Ok(Answer::Failed(error))
            }
        }
    }

    /// A request of `messages` with the run's model settings (model, temperature,
    /// `max_tokens`).
    pub(crate) fn request(&self, messages: Vec<Message>) -> ChatRequest {
        let mut request = ChatRequest::new(self.config.model.model.clone(), messages);
        request.temperature = self.config.model.temperature;
        request.max_tokens = Some(self.config.model.max_tokens);
        request
    }

    /// The request of one Decide turn: the packed context, the turn's note, and the action
    /// space as tools or as a JSON Schema.
    pub(crate) fn decide_request(&mut self, space: &ActionSpace, note: &str) -> ChatRequest {
        let messages = self.context.messages(Some(note));
        let mut request = self.request(messages);
        match self.config.decide {
            DecideMode::Tools => {
                request.tools = space.tools();
                request.tool_choice = ToolChoice::Required;
                request.parallel_tool_calls = Some(false);
            }
            DecideMode::Json => {
                request.response_format = ResponseFormat::JsonSchema {
                    name: "action".to_owned(),
                    schema: space.json_schema(),
                    strict: true,
                };
            }
        }
        request
    }

    /// Records the Think-Act metrics of an acting answer.
    pub(crate) fn record_reasoning(
        &mut self,
        response: &Response,
        decision: &Decision,
    ) -> Option<TurnReasoning> {
        self.record_reasoning_with(response, decision.thought.as_deref())
    }

    /// Records the Think-Act metrics of an acting answer whose stated reason is `thought`
    /// (a strategy's own field: a plan's `reasoning`, a think's `internal_analysis`).
    pub(crate) fn record_reasoning_with(
        &mut self,
        response: &Response,
        thought: Option<&str>,
    ) -> Option<TurnReasoning> {
        let text_is_action =
            self.config.decide == DecideMode::Json && response.tool_calls.is_empty();
        let turn = self.state.reasoning.record_answer(response, thought, text_is_action);
        Some(turn)
    }

    /// Applies the decision's plan or plan patch, with its event.
    pub(crate) fn apply_plan(&mut self, decision: &Decision) -> Result<()> {
        if let Some(plan) = &decision.plan {
            let change = PlanChange::plan(plan.clone());
            let payload = match self.state.plan {
                Some(_) => Payload::PlanUpdated(change),
                None => Payload::PlanCreated(change),
            };
            self.state.plan = Some(plan.clone());
            self.emit(payload)?;
        } else if let Some(update) = &decision.plan_update {
            let plan = self.state.plan.get_or_insert_with(Default::default);
            let unknown = plan.apply(update);
            let plan = plan.clone();
            self.emit(Payload::PlanUpdated(PlanChange {
                update: Some(update.clone()),
                unknown_ids: Some(unknown),
                ..PlanChange::plan(plan)
            }))?;
        }
        Ok(())
    }

    /// Adds the model's answer to the transcript and returns the tool-call id the observation
    /// answers (tools mode); other calls of the same answer are told they were not run.
    pub(crate) fn push_answer(&mut self, response: &Response) -> Option<String> {
        match self.config.decide {
            DecideMode::Json if response.tool_calls.is_empty() => {
                // The action document alone: its thinking is not sent back in JSON mode.
                self.context.push(Message::from_response(&Response {
                    text: response.text.clone(),
                    ..Response::default()
                }));
                None
            }
            DecideMode::Json | DecideMode::Tools => {
                self.context.push(Message::from_response(response));
                let first = response.tool_calls.first().map(|call| call.id.clone());
                for extra in response.tool_calls.iter().skip(1) {
                    self.context.push(Message::Tool {
                        tool_call_id: extra.id.clone(),
                        content: "not run: one action per turn; ask for it again next turn"
                            .to_owned(),
                        is_error: true,
                    });
                }
                first
            }
        }
    }

    /// Records an observation: stores long text by hash, adds it to the context, emits
    /// `observation_recorded`, appends to the audit trail and tracks failures.
    pub(crate) fn observe(
        &mut self,
        action: Option<&Action>,
        status: ObservationStatus,
        text: &str,
        tool_call_id: Option<&str>,
    ) -> Result<String> {
        self.next_observation += 1;
        let id = format!("obs-{}", self.next_observation);
        let text = self.bus.redactor().redact(text).into_owned();
        let cap = self.config.context.inline_observation_chars;
        let focused = match action {
            Some(Action::RunScript { skill, args, .. })
                if self.format >= crate::focus::SINCE_FORMAT && status == ObservationStatus::Ok =>
            {
                let instructions = self.instructions_of(skill);
                crate::focus::focused(&text, &self.state.task, instructions, args, self.format)
                    .filter(|focused| focused.chars().count() <= cap)
            }
            _ => None,
        };
        let (shown, stored) = if let Some(focused) = focused {
            (focused, Some(self.store(&text)?))
        } else if text.chars().count() > cap {
            let stored = self.store(&text)?;
            let head: String = text.chars().take(cap * 2 / 3).collect();
            let tail_chars = cap / 3;
            let total = text.chars().count();
            let tail: String = text.chars().skip(total.saturating_sub(tail_chars)).collect();
            let shown = format!(
                "{head}\n… [{} of {total} characters left out; full text in {}] …\n{tail}",
                total - head.chars().count() - tail.chars().count(),
                stored.path
            );
            (shown, Some(stored))
        } else {
            (text.clone(), None)
        };
        let header = match action {
            Some(action) => format!("[{id}] {} → {}", action.summary(), status.as_str()),
            None => format!("[{id}] → {}", status.as_str()),
        };
        // A failed model call is the transport's, not the model's: from format 7 the model does
        // not read it (the note of the call gives way to the next one, as if it never happened).
        // On the local 1.5B, a server killed mid-call left "the model call failed: …" and two
        // notes in the transcript, and the next answer reported the failure instead of the task.
        let model_failure = action.is_none() && status == ObservationStatus::ModelError;
        if !(model_failure && self.format >= 7) {
            let read = bare_output(action, status, &shown, self.format);
            self.context.push_observation(
                &id,
                header,
                read.as_deref().unwrap_or(&shown),
                tool_call_id,
                stored.as_ref().map(|stored| stored.path.clone()),
                status != ObservationStatus::Ok,
            );
        }
        self.emit(ObservationRecorded {
            id: id.clone(),
            action: action.cloned(),
            status,
            chars: text.chars().count() as u64,
            content: shown,
            stored,
        })?;
        if status == ObservationStatus::Ok && action.is_some_and(Action::is_call) {
            self.state.result_words.extend(crate::space::words(&text));
        }
        self.observation_texts.push((id.clone(), text));
        self.state.actions.push(ActionRecord {
            turn: self.state.counters.turns,
            action: action.cloned(),
            status,
            observation: id.clone(),
        });
        if matches!(status, ObservationStatus::Refused | ObservationStatus::Denied) {
            self.state.counters.refusals += 1;
        }
        self.failures.record(action, status);
        Ok(id)
    }

    fn store(&self, text: &str) -> Result<StoredText> {
        match &self.run_dir {
            Some(run_dir) => run_dir.store_observation(text),
            None => {
                let sha256 = sha256_hex(text.as_bytes());
                Ok(StoredText {
                    path: format!("observations/{sha256}.txt"),
                    sha256,
                    bytes: text.len() as u64,
                })
            }
        }
    }

    /// Validates and executes one non-final action, with its events, counters and observation.
    /// Returns a [`Stop`] when the action hit a budget or the run was cancelled while it ran.
    pub(crate) async fn act(
        &mut self,
        action: &Action,
        space: &ActionSpace,
        tool_call_id: Option<&str>,
    ) -> Result<Option<Stop>> {
        self.act_chosen(action, space, tool_call_id, None).await
    }

    /// [`Run::act`] for an action `chosen_by` the runtime rather than the model (written in
    /// its `action_validated`), or by the model (`None`).
    pub(crate) async fn act_chosen(
        &mut self,
        action: &Action,
        space: &ActionSpace,
        tool_call_id: Option<&str>,
        chosen_by: Option<&str>,
    ) -> Result<Option<Stop>> {
        self.state.counters.tool_calls += 1;
        let verdict = guard::check(&self.state, &self.config, space, action);
        match verdict {
            guard::Verdict::Allowed => {}
            guard::Verdict::OverBudget(outcome, message) => {
                self.emit(ActionValidated::invalid(Some(action), &message))?;
                self.observe(Some(action), ObservationStatus::Refused, &message, tool_call_id)?;
                return Ok(Some(Stop::new(outcome, message)));
            }
            guard::Verdict::Refused(status, message) => {
                self.emit(ActionValidated::invalid(Some(action), &message))?;
                self.observe(Some(action), status, &message, tool_call_id)?;
                return Ok(None);
            }
        }
        if let Some(message) = self.repeated_failure(action) {
            self.emit(ActionValidated::invalid(Some(action), &message))?;
            self.observe(Some(action), ObservationStatus::Refused, &message, tool_call_id)?;
            return Ok(None);
        }
        if let Some(message) = self.unstated_arguments(action, space) {
            self.emit(ActionValidated::invalid(Some(action), &message))?;
            let id =
                self.observe(Some(action), ObservationStatus::Refused, &message, tool_call_id)?;
            // From format 11 this refusal, which invites the same call again, is no step of a
            // loop: told "if it is right, make the same call again", the local 1.5B did, the
            // folder was wrong, and the refused repeat of that failure was the third "same
            // failing action" — the run ended stuck before it read which argument failed.
            // From format 14 only a refusal that still invites the same call (a value to ask
            // the user about) is forgiven: the others are refused again, and three in a row end
            // the run as stuck.
            if self.format >= crate::grounding::EACH_SINCE_FORMAT && !self.firm_refusals(space) {
                self.failures.forgive_last(id);
            }
            return Ok(None);
        }
        self.emit(ActionValidated {
            chosen_by: chosen_by.map(str::to_owned),
            ..ActionValidated::valid(action)
        })?;
        if let Action::RecallObservation { id } = action {
            let text = self.observation_text(id).to_owned();
            self.emit(ActionExecuted {
                action: action.clone(),
                status: ObservationStatus::Ok,
                result: json!({"id": id}),
                duration_ms: None,
            })?;
            self.observe(Some(action), ObservationStatus::Ok, &text, tool_call_id)?;
            return Ok(None);
        }
        if matches!(action, Action::RunScript { .. }) {
            self.state.counters.script_runs += 1;
        }
        let call_id = format!("{}-turn-{}", self.state.run_id, self.state.counters.turns);
        // Cancelled while this action ran: the record holds no result for it.
        if self.recorded_stop(Outcome::Cancelled) && self.executor.recorded.is_empty() {
            return Ok(Some(Stop::cancelled()));
        }
        let started = Instant::now();
        let live = self.executor.recorded.is_empty();
        let executed = tokio::select! {
            executed = self.executor.execute(action, &call_id, &self.state.tools) => executed,
            () = self.cancel.cancelled() => return Ok(Some(Stop::cancelled())),
        };
        let (execution, side_events) =
            executed.map_err(|divergence| self.divergence(divergence))?;
        for payload in side_events {
            self.emit(payload)?;
        }
        let mut result = execution.result.clone();
        self.bus.redactor().redact_value(&mut result);
        // Before the event: if the process dies between it and the observation, a resume
        // finds the whole result here and does not execute the action again.
        if let (true, Some(run_dir)) = (live, &self.run_dir) {
            run_dir.write_last_execution(&LastExecution {
                seq: self.bus.next_seq(),
                action: action.clone(),
                status: execution.status,
                result: result.clone(),
                content: self.bus.redactor().redact(&execution.content).into_owned(),
            })?;
        }
        self.emit(ActionExecuted {
            action: action.clone(),
            status: execution.status,
            result: result.clone(),
            duration_ms: Some(started.elapsed().as_millis() as u64),
        })?;
        if let (Action::SelectSkills { .. }, Some(skills)) = (action, result.get("skills")) {
            let skills: Vec<SelectedSkill> =
                serde_json::from_value(skills.clone()).unwrap_or_default();
            for skill in skills {
                if self.state.selected_skill(&skill.name).is_none() {
                    self.state.selected.push(skill);
                }
            }
        }
        self.observe(Some(action), execution.status, &execution.content, tool_call_id)?;
        // Recorded now (live, or the interrupted action a resume completed from the file).
        if let (true, Some(run_dir)) = (live || !self.bus.catching_up(), &self.run_dir) {
            run_dir.remove_last_execution();
        }
        Ok(None)
    }

    /// The outcome a budget check at the head of a turn imposes, if any.
    pub(crate) fn budget_exhausted(&self) -> Option<Stop> {
        let budgets = &self.config.budgets;
        let counters = &self.state.task_counters();
        if counters.turns >= budgets.max_turns {
            return Some(Stop::new(
                Outcome::MaxTurns,
                format!("the turn limit ({}) was reached", budgets.max_turns),
            ));
        }
        if let Some(stop) = self.tool_calls_exhausted() {
            return Some(stop);
        }
        if let Some(limit) = budgets.max_duration_ms
            && match self.replaying {
                Some(_) => self.recorded_stop(Outcome::MaxDuration),
                None => self.started.elapsed().as_millis() as u64 >= limit,
            }
        {
            return Some(Stop::new(
                Outcome::MaxDuration,
                format!("the time limit ({limit} ms) was reached"),
            ));
        }
        None
    }

    /// The tool-call limit, checked at the head of a turn and before each step of a batch.
    pub(crate) fn tool_calls_exhausted(&self) -> Option<Stop> {
        let limit = self.config.budgets.max_tool_calls;
        (self.state.task_counters().tool_calls >= limit).then(|| {
            Stop::new(Outcome::MaxToolCalls, format!("the tool-call limit ({limit}) was reached"))
        })
    }

    /// The full text of observation `id` (empty when there is none).
    pub(crate) fn observation_text(&self, id: &str) -> &str {
        self.observation_texts
            .iter()
            .rev()
            .find(|(known, _)| known == id)
            .map_or("", |(_, text)| text.as_str())
    }

    /// What the select of `skill` showed (its SKILL.md); empty when no select showed it.
    fn instructions_of(&self, skill: &str) -> &str {
        self.state
            .task_actions()
            .rev()
            .find(|record| {
                record.status == ObservationStatus::Ok
                    && matches!(&record.action, Some(Action::SelectSkills { names })
                        if names.iter().any(|name| name == skill))
            })
            .map_or("", |record| self.observation_text(&record.observation))
    }

    /// Why a script run or tool call is refused without running: the same call already
    /// failed in this task (format 6). Scripts are deterministic enough that the same
    /// arguments give the same error; on held-out tasks the local 1.5B re-ran one failing call
    /// five times, reading unrelated documents in between. From format 9 a timeout, and a
    /// tool call's failure (a server or network error may pass), get one retry: the call is
    /// refused once it ended so twice.
    fn repeated_failure(&self, action: &Action) -> Option<String> {
        if self.format < 6 || !action.is_call() {
            return None;
        }
        // The latest identical call that ran (a refused repeat did not).
        let earlier = self.state.task_actions().rev().find(|record| {
            record.action.as_ref() == Some(action)
                && matches!(
                    record.status,
                    ObservationStatus::Ok | ObservationStatus::Failed | ObservationStatus::Timeout
                )
        })?;
        let transient = earlier.status == ObservationStatus::Timeout
            || (earlier.status == ObservationStatus::Failed
                && matches!(action, Action::CallTool { .. }));
        if self.format >= 9 && transient {
            let times = self
                .state
                .task_actions()
                .filter(|record| {
                    record.action.as_ref() == Some(action) && record.status == earlier.status
                })
                .count();
            if times < 2 {
                return None;
            }
        }
        let mut named = None;
        let what = match earlier.status {
            ObservationStatus::Failed => {
                let text = self.observation_text(&earlier.observation);
                if self.format >= crate::grounding::EACH_SINCE_FORMAT
                    && let Action::RunScript { args, .. } = action
                {
                    named = crate::grounding::argument_named_by_error(args, text);
                }
                format!("failed ({}: {})", earlier.observation, crate::grounding::output_gist(text))
            }
            ObservationStatus::Timeout => format!("timed out ({})", earlier.observation),
            _ => return None,
        };
        // From format 11 the note names the argument the error names (told only "change the
        // arguments", the local 1.5B made the call that failed on `'units'` twice more).
        if let Some(arg) = named {
            // From format 18, an optional last argument is shown left out (the local 1.5B
            // made `find_files.py "*.md" sales` three times, `sales` no folder).
            if let Some(call) = self.call_without_last(action, arg).or_else(|| {
                self.call_with_task_word(action, arg, self.observation_text(&earlier.observation))
            }) {
                return Some(format!("this exact call already {what}; {call}"));
            }
            return Some(format!(
                "this exact call already {what}; the error names `{arg}`: write another value \
                 from the task or a result in its place, use another script, or answer with \
                 what is known"
            ));
        }
        Some(format!(
            "this exact call already {what}; the same arguments give the same error: change \
             the arguments, use another script, or answer with what is known"
        ))
    }

    /// What to do about `action` (a script call) that failed on its last argument, `named` by
    /// the error, where the script's usage takes fewer arguments: the call without it, shown
    /// (format 18).
    fn call_without_last(&self, action: &Action, named: &str) -> Option<String> {
        let Action::RunScript { skill, script, args } = action else { return None };
        let (last, rest) = args.split_last()?;
        let usage = self.state.selected_skill(skill)?.usage_of(script)?;
        (self.format >= crate::grounding::CALL_SHOWN_SINCE_FORMAT
            && last.trim() == named
            && rest.len() >= usage.min_args)
            .then(|| {
                format!(
                    "the error names `{named}`, which the script can do without: make this \
                     call: {}, or write another value from the task or a result in its place",
                    crate::grounding::shown_call(skill, script, rest)
                )
            })
    }

    /// What to do about `action` (a script call) that failed on an argument `named` by its
    /// `error`, when one word of the task is a value the skill's instructions or the error show
    /// ([`crate::grounding::task_word_for`]): the call with that word in its place (format 23).
    fn call_with_task_word(&self, action: &Action, named: &str, error: &str) -> Option<String> {
        let Action::RunScript { skill, script, args } = action else { return None };
        if self.format < crate::grounding::TASK_WORD_SHOWN_SINCE_FORMAT {
            return None;
        }
        let instructions = self.instructions_of(skill);
        let word =
            crate::grounding::task_word_for(named, args, &self.state.task, instructions, error)?;
        let fixed: Vec<String> = args
            .iter()
            .map(|arg| if arg.trim() == named { word.clone() } else { arg.clone() })
            .collect();
        Some(format!(
            "the error names `{named}`, and the task writes `{word}`: make this call: {}, or \
             write another value from the task or a result in its place",
            crate::grounding::shown_call(skill, script, &fixed)
        ))
    }

    /// The files of `example`'s extension that the run's script calls that worked write,
    /// other than `example` (as the outputs write them, each once).
    fn found_files(&self, example: &str) -> Vec<String> {
        let Some((_, extension)) = example.trim().rsplit_once('.') else { return Vec::new() };
        let mut found = self.files_written_by(extension, |record| {
            record.status == ObservationStatus::Ok
                && matches!(record.action, Some(Action::RunScript { .. }))
        });
        found.retain(|file| file != example.trim());
        found
    }

    /// The files of `extension` that the observations of the task's `records` write (as the
    /// outputs write them, each once, in order).
    fn files_written_by(
        &self,
        extension: &str,
        records: impl Fn(&ActionRecord) -> bool,
    ) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for record in self.state.task_actions().filter(|record| records(record)) {
            let text = self.observation_text(&record.observation);
            for file in crate::grounding::files_written(text, extension) {
                if !found.contains(&file) {
                    found.push(file);
                }
            }
        }
        found
    }

    /// `". Make this call: {…}"` with `fixed` as the arguments of `action` (a script call),
    /// from format 18; empty before, or with nothing fixed.
    fn shown_fix(&self, action: &Action, fixed: Option<Vec<String>>) -> String {
        match (action, fixed) {
            (Action::RunScript { skill, script, .. }, Some(fixed))
                if self.format >= crate::grounding::CALL_SHOWN_SINCE_FORMAT =>
            {
                format!(". Make this call: {}", crate::grounding::shown_call(skill, script, &fixed))
            }
            _ => String::new(),
        }
    }

    /// Whether [`Run::unstated_arguments`] refuses the same call again when it is made again,
    /// with no leave to repeat it (format 14, without `ask_user` on offer): such a refusal is
    /// a step of a loop toward `stuck`.
    fn firm_refusals(&self, space: &ActionSpace) -> bool {
        self.format >= crate::grounding::FIRM_SINCE_FORMAT && !space.ask_user
    }

    /// Why a script call is refused once (format 6) for an argument that no user text, result
    /// or usage line states: with `ask_user` on offer, a value the model chose itself (a task
    /// that names no unit got `km` and `mi` on the local 1.5B) is to be asked for; without
    /// it, a value copied from an example in a document the run read (file-finder's `["*.md",
    /// "docs"]` for "Which Markdown files are in the workspace?", a folder the workspace does not
    /// have). The same call made again runs: the value may be right. From format 14 that holds
    /// only for a value to ask the user about: a respelled word, a value written with its unit
    /// or an example's value is refused again ([`crate::grounding::FIRM_SINCE_FORMAT`]).
    fn unstated_arguments(&self, action: &Action, space: &ActionSpace) -> Option<String> {
        let Action::RunScript { skill, script, args } = action else { return None };
        let firm = self.firm_refusals(space);
        if self.format < 6
            || (!firm
                && self.state.task_actions().any(|record| record.action.as_ref() == Some(action)))
        {
            return None;
        }
        // How a refusal ends: until format 14, with leave to make the same call again.
        let again = |text: &str| if firm { String::new() } else { text.to_owned() };
        let script_usage =
            self.state.selected_skill(skill).and_then(|selected| selected.usage_of(script));
        let usage = script_usage.map_or("", |usage| usage.example.as_str());
        let max_args = script_usage.and_then(|usage| usage.max_args);
        let mut sources = self.answer_sources();
        // From format 31 the commands every usage line shows (`between`, `weekday`), not only
        // the first line's words: asked "What day of the week is 2026-12-25?", the local 1.5B
        // had `weekday` refused as an example's value three times, and the run ended stuck.
        let arities = if self.format >= crate::strategy::REPEATS_SKIPPED_SINCE_FORMAT {
            crate::usage::command_arities(&sources.documents, script)
        } else {
            Vec::new()
        };
        let commands: Vec<String> = arities.iter().map(|(command, _)| command.clone()).collect();
        // From format 32 a fixed call is cut to its command's own usage line.
        let arities = if self.format >= COMMAND_ARITY_SINCE_FORMAT { arities } else { Vec::new() };
        // From format 8 only a usage line's words count (a subcommand), not its example
        // values: file-finder's `["*.csv"]` made `*.csv` "stated" for a Markdown task.
        let literals;
        let usage = if self.grounding.strict {
            literals =
                format!("{} {}", crate::grounding::usage_literals(usage), commands.join(" "));
            literals.as_str()
        } else {
            usage
        };
        // From format 11: an argument that respells the task's word (the local 1.5B wrote
        // `GB` for "1 GiB", which the converter also knows), whatever a document shows.
        if self.format >= crate::grounding::EACH_SINCE_FORMAT
            && let Some((arg, word)) =
                crate::grounding::respelled_arguments(args, &sources).into_iter().next()
        {
            let shown = self.shown_fix(action, crate::grounding::fixed_arguments(args, &sources));
            let advice = match shown.is_empty() {
                true => ". Write the task's own value in its place",
                false => "",
            };
            return Some(format!(
                "`{arg}` is not how the task writes it: the task writes `{word}`{advice}{shown}{}",
                again(&format!("; if `{arg}` is what the task means, make the same call again"))
            ));
        }
        // From format 12: a value written with its unit while the unit is an argument too (the
        // local 1.5B ran `convert.py "1 nmi" nmi m`, which failed on the unit `nmi m`, and
        // then the same shape with `mile`).
        if self.format >= crate::grounding::ROUNDS_SINCE_FORMAT
            && let Some((arg, unit, value)) =
                crate::grounding::value_with_its_unit(args, sources.unit_place)
        {
            let shown = self.shown_fix(action, crate::grounding::fixed_arguments(args, &sources));
            return Some(format!(
                "`{arg}` holds the value and its unit, and `{unit}` is an argument of its own \
                 too: write the value alone (`{value}`) in its place{shown}{}",
                again(&format!("; if `{arg}` is what the script takes, make the same call again"))
            ));
        }
        let documents = std::mem::take(&mut sources.documents);
        let mut unstated = crate::grounding::unstated_arguments(args, &sources, usage);
        if !space.ask_user {
            unstated.retain(|arg| crate::grounding::in_code_example(arg, &documents));
        }
        let list = unstated.iter().map(|arg| format!("`{arg}`")).collect::<Vec<_>>();
        let (list, verb) = (list.join(", "), if list.len() == 1 { "is" } else { "are" });
        // From format 31: a command written with its values as one argument, or after them
        // (the local 1.5B ran `dates.py "between 2026-03-01 2026-04-15"`, which failed on its
        // usage three times), is refused with the call that writes it as the usage does; only
        // when every value is the task's (a fix must not show an example's values).
        if unstated.is_empty()
            && let Some((fault, fixed)) =
                crate::usage::command_fix(args, &commands, max_args, &arities)
        {
            let what = if fault.contains(char::is_whitespace) {
                format!(
                    "`{fault}` holds the script's command and its values in one argument: \
                     write each as an argument of its own"
                )
            } else {
                format!("`{fault}` is the script's command: it comes first, before its values")
            };
            return Some(format!(
                "{what}{}{}",
                self.shown_fix(action, Some(fixed)),
                again("; if this is what the script takes, make the same call again")
            ));
        }
        if unstated.is_empty() {
            None
        } else if space.ask_user {
            Some(format!(
                "{list} {verb} not in the task or any result: if the task does not say it, ask \
                 the user (ask_user) which one, naming the options; if it is right, make the \
                 same call again"
            ))
        } else if self.format >= 10 {
            // "Leave it out" first: asked to convert "20 C to F", the local 1.5B wrote
            // `celsius` (the example's word for C), was refused, and left the unit out.
            // From format 11, an example's file pattern is followed by the task's kinds of
            // file as patterns (told only "write the task's own value", the local 1.5B, asked
            // for "Markdown files", left `*.csv` for other skills' examples).
            let kinds = if self.format >= crate::grounding::EACH_SINCE_FORMAT
                && unstated.iter().any(|arg| crate::grounding::names_file_kind(arg))
            {
                crate::grounding::file_kind_patterns(&self.state.task)
            } else {
                Vec::new()
            };
            // From format 18, one example pattern and one kind of file: the call with the
            // kind's pattern in its place (told the kind, the local 1.5B went to another
            // skill: `markdown-toc`, then `csv-summary`, with `*.md` as a file name). Only a
            // pattern: a script shown a file name (`data/invoice-2024.csv`) takes a path, and
            // the 1.5B ran `csv_summary.py *.csv` when shown it.
            let replaced = |example: &str, value: &str| -> Vec<String> {
                let value = |arg: &String| if arg == example { value } else { arg }.to_owned();
                args.iter().map(value).collect()
            };
            // From format 31, a script with commands: the call without the example's values,
            // its command where the usage writes it (the local 1.5B ran `dates.py "between
            // 2026-01-05 2026-02-06" "weekday 2026-12-25"`, an example beside the task's date,
            // and, told to write the task's own value, the same call four times).
            let without_examples = if commands.is_empty() {
                None
            } else {
                let kept: Vec<String> =
                    args.iter().filter(|arg| !unstated.contains(&arg.as_str())).cloned().collect();
                crate::usage::command_fix(&kept, &commands, max_args, &arities)
                    .map(|(_, fixed)| fixed)
                    .or_else(|| {
                        kept.first().is_some_and(|first| commands.contains(first)).then_some(kept)
                    })
            };
            let shown = match (unstated.as_slice(), kinds.as_slice()) {
                _ if without_examples.is_some() => self.shown_fix(action, without_examples),
                ([example], [(_, pattern)])
                    if example.contains(['*', '?'])
                        && crate::grounding::names_file_kind(example) =>
                {
                    self.shown_fix(action, Some(replaced(example, pattern)))
                }
                // From format 19, an example file name (a script that takes a path) and one
                // file of its kind that the run's scripts found: the call on that file.
                ([example], _)
                    if self.format >= crate::grounding::FOUND_FILE_SHOWN_SINCE_FORMAT
                        && !example.contains(['*', '?'])
                        && crate::grounding::names_file_kind(example) =>
                {
                    match self.found_files(example).as_slice() {
                        [file] => format!(
                            ". Found: `{file}`{}",
                            self.shown_fix(action, Some(replaced(example, file)))
                        ),
                        _ => String::new(),
                    }
                }
                // From format 29, an example's word that spells out a symbol the task
                // writes (`celsius` for its `C`): the call with the task's symbol.
                ([example], _) if self.format >= crate::grounding::WORKED_SINCE_FORMAT => {
                    match crate::grounding::task_symbol_for(example, &sources.user, args) {
                        Some(symbol) => self.shown_fix(action, Some(replaced(example, &symbol))),
                        None => String::new(),
                    }
                }
                _ => String::new(),
            };
            let kinds = kinds
                .iter()
                .map(|(kind, pattern)| format!(". The task's {kind} files: `{pattern}`"))
                .collect::<String>()
                + &shown;
            let advice = match firm {
                true => "Write the task's own value",
                false => {
                    "If it means what the task says, make the same call again; if not, write \
                          the task's own value"
                }
            };
            Some(format!(
                "{list} {verb} from an example in the skill's instructions, not from the task or \
                 a result. {advice} in its place (leave it out only when the task gives \
                 none){kinds}"
            ))
        } else {
            Some(format!(
                "{list} {verb} from an example in the skill's instructions, not from the task or \
                 a result: leave it out or write the value the task gives; if it is right, make \
                 the same call again"
            ))
        }
    }

    /// This turn's action space ([`crate::space::action_space`] on the run's state).
    pub(crate) fn action_space(&self) -> crate::space::ActionSpace {
        let mut space = crate::space::action_space(&self.state, &self.config, self.space_rules());
        let Some(last) = self.state.task_actions().last() else { return space };
        // From format 18, after a refusal that shows the call to make, no other skill: shown
        // `find_files.py "*.md"`, the local 1.5B selected markdown-toc, whose name holds the
        // task's "Markdown", and then csv-summary.
        // From format 27 the note writes the call itself (see
        // [`crate::grounding::CALL_IN_NOTE_SINCE_FORMAT`]).
        let text = self.observation_text(&last.observation);
        if self.format >= crate::grounding::CALL_SHOWN_SINCE_FORMAT
            && last.status == ObservationStatus::Refused
            && crate::grounding::shows_call(text)
        {
            let shown = (self.format >= crate::grounding::CALL_IN_NOTE_SINCE_FORMAT)
                .then(|| crate::grounding::call_shown_in(text))
                .flatten();
            if !space.select.is_empty() || shown.is_some() {
                space.select.clear();
                space.note = Some(shown.map_or_else(
                    || "the refusal above shows the call to make".to_owned(),
                    |call| format!("make this call: {call}"),
                ));
            }
        }
        // From format 19, a call that failed on an optional last argument its error names is
        // shown without it at once (shown it only when the call was refused as a repeat, the
        // local 1.5B spent a call per failure making it again).
        if self.format >= crate::grounding::FAILED_CALL_SHOWN_SINCE_FORMAT
            && last.status == ObservationStatus::Failed
            && let Some(action @ Action::RunScript { args, .. }) = last.action.as_ref()
            && let Some(arg) = crate::grounding::argument_named_by_error(args, text)
            && !space.run.is_empty()
            && let Some(advice) = self
                .call_without_last(action, arg)
                .or_else(|| self.call_with_task_word(action, arg, text))
        {
            space.note = Some(advice);
        }
        // From format 26 a script refused for a file placeholder in a task that names no file
        // waits until a script has given a result since (the file found): the local 1.5B's
        // plan-execute-think runs planned the refused call again round after round.
        if self.format >= crate::grounding::FILE_FIRST_SINCE_FORMAT {
            self.hold_file_scripts(&mut space);
        }
        // From format 24, right after a refusal that names every value the answer needs (the
        // arithmetic to work out), only the answer: refused for stating two totals side by side
        // with no sum, the local 1.5B ran the same summary again and gave the same answer.
        if self.format >= crate::grounding::COUNTS_FROM_RESULTS_SINCE_FORMAT
            && self.grounding.answer_from_results
            && last.status == ObservationStatus::Refused
            && matches!(last.action, Some(Action::FinalAnswer { .. }))
        {
            space.select.clear();
            space.load.clear();
            space.referenced.clear();
            space.run.clear();
            space.arities.clear();
            space.describe.clear();
            space.call.clear();
            space.recall.clear();
            space.note = Some(
                if self.grounding.converted_in_results {
                    "the refusal above shows the converted figures the answer needs: answer with \
                     them and the rest of what the task asks"
                } else {
                    "the refusal above names every value the answer needs: work out the \
                     arithmetic and answer"
                }
                .to_owned(),
            );
            // From format 25 that answer may write figures: the refused answer held results
            // only, so no new result comes before it, and held to an admission (as after an
            // ungrounded answer) the local 1.5B answered "I cannot answer … their sum (  +  )".
            if self.format >= crate::grounding::FIGURES_AFTER_COMBINE_SINCE_FORMAT {
                space.answer_without_figures = false;
                space.thought_without_figures = false;
                space.quote_free = false;
                space.admission_words.clear();
            }
        }
        space
    }

    /// Takes off `space` each script refused for a file placeholder where the task names no
    /// file ([`crate::guard::FIND_FILE_FIRST`]), when no script result came after the refusal,
    /// as long as something else is left to do it with: another script, or a skill to select.
    /// Once a result came and the script has not run since, the note shows the refused call on
    /// the one file of the task's kind that the results write, when there is one.
    fn hold_file_scripts(&self, space: &mut crate::space::ActionSpace) {
        let mut held: Vec<(&str, &str)> = Vec::new();
        // The last such refusal, and whether a script result came after it.
        let mut refused: Option<(&Action, bool)> = None;
        for record in self.state.task_actions() {
            let Some(action) = record.action.as_ref() else { continue };
            if record.is_result() {
                held.clear();
                let same_script = |refused: &Action| match (refused, action) {
                    (
                        Action::RunScript { skill, script, .. },
                        Action::RunScript { skill: ran_skill, script: ran_script, .. },
                    ) => skill == ran_skill && script == ran_script,
                    _ => false,
                };
                refused = match refused {
                    Some((refused, _)) if same_script(refused) => None,
                    Some((refused, _)) => Some((refused, true)),
                    None => None,
                };
            } else if record.status == ObservationStatus::Refused
                && let Action::RunScript { skill, script, .. } = action
                && self
                    .observation_text(&record.observation)
                    .contains(crate::guard::FIND_FILE_FIRST)
            {
                if !held.contains(&(skill.as_str(), script.as_str())) {
                    held.push((skill, script));
                }
                refused = Some((action, false));
            }
        }
        if held.is_empty() {
            // In place of any other note ("the last call worked …"): it names the next call.
            if let Some((action @ Action::RunScript { skill, script, .. }, true)) = refused
                && space.run.iter().any(|(name, scripts)| name == skill && scripts.contains(script))
                && let Some(call) = self.found_file_call(action)
            {
                space.note = Some(call);
            }
            return;
        }
        let mut run = space.run.clone();
        for (skill, scripts) in &mut run {
            scripts.retain(|script| !held.contains(&(skill.as_str(), script.as_str())));
        }
        run.retain(|(_, scripts)| !scripts.is_empty());
        if run.is_empty() && space.select.is_empty() {
            return;
        }
        space.run = run;
        space
            .arities
            .retain(|(skill, script, _)| !held.contains(&(skill.as_str(), script.as_str())));
        if space.note.is_none() {
            let names: Vec<String> =
                held.iter().map(|(skill, script)| format!("{skill}/{script}")).collect();
            space.note =
                Some(format!("{} waits for a file name: find the file first", names.join(", ")));
        }
    }

    /// The call refused for a file placeholder ([`Run::hold_file_scripts`]) on the one file of
    /// the task's one kind (`*.csv` for "the CSV file") that the task's results write:
    /// ``found `sales.csv`: make this call: {…}``.
    fn found_file_call(&self, action: &Action) -> Option<String> {
        let Action::RunScript { skill, script, args } = action else { return None };
        let kinds = crate::grounding::file_kind_patterns(&self.state.task);
        let [(_, pattern)] = kinds.as_slice() else { return None };
        let extension = pattern.rsplit_once('.')?.1;
        let placeholder = args.iter().position(|arg| {
            let lower = arg.to_lowercase();
            lower.contains("file") || lower.contains("path")
        })?;
        let found = self.files_written_by(extension, ActionRecord::is_result);
        let [file] = found.as_slice() else { return None };
        let mut fixed = args.clone();
        fixed[placeholder] = file.clone();
        Some(format!(
            "found `{file}`: make this call: {}",
            crate::grounding::shown_call(skill, script, &fixed)
        ))
    }

    /// What of the run, beside its state and configuration, shapes the action space.
    pub(crate) fn space_rules(&self) -> crate::space::SpaceRules {
        crate::space::SpaceRules {
            format: self.format,
            ungrounded_refused: self.grounding.refused,
            narrows_first: self.config.strategy != crate::strategy::SAFE,
        }
    }

    /// The arguments of the current task's script calls, in order; from format 34 of those
    /// that were not refused before they ran.
    pub(crate) fn task_script_args(&self) -> Vec<&str> {
        self.state.task_script_args(self.format >= crate::state::USED_BY_RUNS_SINCE_FORMAT)
    }

    /// A completed answer that states no figure for a task that gives some, while the task's
    /// results hold figures: the answer with those results after it (format 6). The local
    /// 1.5B ended a batch of conversions with "the conversions were successful", the values
    /// only in the transcript. From format 9 the same holds for a task that asks for a
    /// quantity without giving a figure ([`crate::grounding::asks_quantity`]): the 1.5B's
    /// plan-execute-think summary for "How many rows does sales.csv have?" was "The script …
    /// has run successfully and provided the correct answer." An admission ("I cannot …", "I do
    /// not know …") stays as it is.
    pub(crate) fn with_results(&self, answer: String) -> String {
        let digits = |text: &str| text.chars().any(|c| c.is_ascii_digit());
        let admits = admits(&answer);
        if self.format < 6 || admits {
            return answer;
        }
        let task_digits = digits(&self.state.task);
        // From format 17 digits that are no result's figure do not make an answer state one:
        // the 1.5B's plan-execute-think summary of six conversions was "each conversion was
        // successful … The exit code is always 0".
        let answer_digits = digits(&answer)
            && (self.format < crate::grounding::RESULT_FIGURES_SINCE_FORMAT
                || self.states_a_result(&answer));
        if answer_digits && task_digits && self.grounding.strict {
            return self.with_batch_results(answer);
        }
        let quantity = self.format >= 9 && crate::grounding::asks_quantity(&self.state.task);
        if answer_digits || !(task_digits || quantity) {
            return answer;
        }
        let lines: Vec<(&Action, String)> = self
            .state
            .latest_actions(ActionRecord::is_result)
            .into_iter()
            .filter_map(|record| {
                let gist =
                    crate::grounding::output_gist(self.observation_text(&record.observation));
                Some((record.action.as_ref()?, gist)).filter(|(_, gist)| digits(gist))
            })
            .collect();
        appended(answer, &lines)
    }

    /// Whether `answer` states a number one of the task's results writes (a script's output, a
    /// tool's result).
    fn states_a_result(&self, answer: &str) -> bool {
        self.state.latest_actions(ActionRecord::is_result).into_iter().any(|record| {
            let text = self.observation_text(&record.observation);
            let output = match &record.action {
                Some(Action::RunScript { .. }) => crate::grounding::script_output(text).join("\n"),
                _ => text.to_owned(),
            };
            crate::grounding::shares_a_number(answer, &output)
        })
    }

    /// A completed answer that names no file, to a task that names none, where scripts of the
    /// task ran on files (found by an earlier step): the answer with those files after it
    /// (format 10). Asked to find the CSV file and total a column, the local 1.5B answered "The
    /// total of the amount column in the CSV file named in the task is 1705.47.", and the user
    /// never learnt which file that was. An admission stays as it is.
    pub(crate) fn with_found_files(&self, answer: String) -> String {
        use crate::grounding::file_names;
        let admits = admits(&answer);
        if self.format < crate::grounding::COUNTED_SINCE_FORMAT
            || admits
            || !file_names(&self.state.task).is_empty()
            || !file_names(&answer).is_empty()
        {
            return answer;
        }
        let mut files: Vec<&str> = Vec::new();
        for record in self.state.task_actions() {
            let Some(Action::RunScript { args, .. }) = &record.action else { continue };
            if record.status != ObservationStatus::Ok {
                continue;
            }
            for arg in args {
                let arg = arg.trim_start_matches("./");
                if file_names(arg).len() == 1 && !files.contains(&arg) && files.len() < 4 {
                    files.push(arg);
                }
            }
        }
        let label = if files.len() == 1 { "File" } else { "Files" };
        if files.is_empty() {
            answer
        } else {
            format!("{}\n\n{label}: {}", answer.trim_end(), files.join(", "))
        }
    }

    /// An answer with figures to a batch — one script run on several arguments in this task —
    /// with the results of the batch's runs whose figures it does not state after it (format
    /// 8): the local 1.5B, told to go on with a batch of conversions, answered with the last
    /// one only. From format 16 a run on one of the task's numbers belongs to the batch too,
    /// and the answer need only state a figure of any of the task's runs: asked to total a
    /// column and convert three values, the 1.5B ran all four and answered with the total
    /// alone, which named no figure of the conversions.
    fn with_batch_results(&self, answer: String) -> String {
        let wide = self.format >= crate::grounding::BATCH_RESULTS_SINCE_FORMAT;
        let runs = self.state.latest_actions(|record| {
            record.status == ObservationStatus::Ok
                && matches!(record.action, Some(Action::RunScript { .. }))
        });
        let script_of = |record: &ActionRecord| match &record.action {
            Some(Action::RunScript { skill, script, .. }) => Some((skill.clone(), script.clone())),
            _ => None,
        };
        let task = &self.state.task;
        let uses_task_number = |args: &[String]| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            crate::grounding::unused_task_numbers(task, &args, "", true).0 > 0
        };
        // Each run: its action, its observation, whether the answer states its figures (a run
        // whose output has none counts as stated), and whether it has figures at all.
        fn read<'a>(
            run: &'a Run,
            answer: &str,
            record: &'a ActionRecord,
        ) -> Option<(&'a Action, &'a str, bool, bool)> {
            let Some(action @ Action::RunScript { args, .. }) = &record.action else {
                return None;
            };
            let text = run.observation_text(&record.observation);
            let output = crate::grounding::script_output(text).join("\n");
            let stated = crate::grounding::states_figures(answer, &output, args);
            let figures = !crate::grounding::states_figures("", &output, args);
            Some((action, text, stated, figures))
        }
        let batch: Vec<(&Action, &str, bool, bool)> = runs
            .iter()
            .filter(|record| {
                runs.iter().filter(|other| script_of(other) == script_of(record)).count() >= 2
                    || (wide
                        && matches!(&record.action,
                            Some(Action::RunScript { args, .. }) if uses_task_number(args)))
            })
            .filter_map(|record| read(self, &answer, record))
            .collect();
        // The answer gave some of the batch's figures, not all: else it is no batch's answer
        // (from format 16: some figure of any run of the task).
        let gave_some = if wide {
            runs.iter()
                .filter_map(|record| read(self, &answer, record))
                .any(|(_, _, stated, figures)| stated && figures)
        } else {
            batch.iter().any(|(_, _, stated, _)| *stated)
        };
        if !gave_some {
            return answer;
        }
        let missing: Vec<(&Action, String)> = batch
            .into_iter()
            .filter(|(_, _, stated, _)| !stated)
            .map(|(action, text, _, _)| (action, crate::grounding::output_gist(text)))
            .collect();
        appended(answer, &missing)
    }

    /// Whether the task's last action is one that has now failed or been refused
    /// [`crate::GuardConfig::stuck_repeats`] times in this task since it last worked, with
    /// other actions in between (format 6; in a row, the failure tracker tells).
    fn repeated_in_task(&self) -> Option<String> {
        if self.format < 6 {
            return None;
        }
        let last = self.state.task_actions().next_back()?;
        let action = last.action.as_ref().filter(|_| last.status != ObservationStatus::Ok)?;
        let count = self
            .state
            .task_actions()
            .rev()
            .filter(|record| record.action.as_ref() == Some(action))
            .take_while(|record| record.status != ObservationStatus::Ok)
            .filter(|record| !self.failures.forgave(&record.observation))
            .count();
        (count >= self.config.guard.stuck_repeats as usize).then(|| {
            format!(
                "the same failing action ({}) came {count} times in this task",
                action.summary()
            )
        })
    }

    /// A loop of the same failing action, or too many failures of one kind: `stuck`, or
    /// `error` when the model calls themselves kept failing.
    pub(crate) fn stuck(&self) -> Option<Stop> {
        let reason = self.failures.stuck(&self.config).or_else(|| self.repeated_in_task())?;
        let outcome = if self.failures.model_errors() > self.config.guard.retry_caps.model_error {
            Outcome::Error
        } else {
            Outcome::Stuck
        };
        Some(Stop::new(outcome, reason))
    }

    /// Whether the last recorded action is `action` and ended `ok`.
    pub(crate) fn last_ok(&self, action: &Action) -> bool {
        self.state.actions.last().is_some_and(|record| {
            record.status == ObservationStatus::Ok && record.action.as_ref() == Some(action)
        })
    }

    /// Compacts the context when it nears `max_context_chars` (with the turn's note).
    /// Returns an outcome when it cannot get under the limit.
    pub(crate) async fn fit_context(&mut self, note_chars: usize) -> Result<Option<Stop>> {
        let limit = self.config.budgets.max_context_chars;
        let threshold = (limit as f64 * self.config.context.compact_at) as usize;
        if self.context.chars() + note_chars <= threshold {
            return Ok(None);
        }
        let keep = self.config.context.keep_recent_observations;
        let keep_chars = self.config.context.compacted_observation_chars;
        let mut compaction = self.context.compact(keep, keep_chars);
        if compaction.is_none() || self.context.chars() + note_chars > limit {
            // The newest observations are what is left: keep only the last one whole.
            compaction = match (compaction, self.context.compact(1, keep_chars)) {
                (Some(mut first), Some(second)) => {
                    first.compacted.extend(second.compacted);
                    first.after_chars = second.after_chars;
                    Some(first)
                }
                (first, second) => first.or(second),
            };
        }
        if let Some(compaction) = compaction {
            self.state.counters.compactions += 1;
            self.state.compacted.extend(compaction.compacted.iter().cloned());
            let summary = match self.config.context.summarize_with_model {
                true => Some(self.summarize(&compaction.compacted).await?),
                false => None,
            };
            self.emit(crate::event::Compaction {
                before_chars: compaction.before_chars as u64,
                after_chars: compaction.after_chars as u64,
                compacted: compaction.compacted,
                summary,
            })?;
        }
        if self.context.chars() + note_chars > limit {
            return Ok(Some(Stop::new(
                Outcome::Context,
                format!(
                    "the context ({} characters) does not fit max_context_chars ({limit}) even \
                     after compaction",
                    self.context.chars() + note_chars
                ),
            )));
        }
        Ok(None)
    }

    /// One counted model call summarising compacted observations; the summary is appended
    /// to the transcript. A failed call leaves the deterministic compaction alone.
    async fn summarize(&mut self, ids: &[String]) -> Result<String> {
        let mut messages = self.context.messages(None);
        messages.push(Message::user(format!(
            "Summarise in at most 8 short lines what the observations {} established: facts, \
             results, file paths. No tool calls.",
            ids.join(", ")
        )));
        let mut request = self.request(messages);
        request.max_tokens = Some(self.config.model.max_tokens.min(400));
        match self.call_model("summary", request, None).await? {
            Answer::Response(response) if !response.text.trim().is_empty() => {
                let summary = response.text.trim().to_owned();
                self.context.push(Message::user(format!(
                    "Summary of compacted observations {}:\n{summary}",
                    ids.join(", ")
                )));
                Ok(summary)
            }
            Answer::Response(_) | Answer::Failed(_) => Ok(String::new()),
        }
    }

    /// Ends the run without an answer from the model's own action: one no-tools call for a
    /// degraded answer (done so far / blocker / next steps), or a deterministic text when that
    /// fails. Cancelled runs make no call.
    pub(crate) async fn degrade(&mut self, stop: Stop) -> Result<Ending> {
        let Stop { outcome, reason } = stop;
        // Format 6: a stuck run's model is in a loop, and its text was its next step (on the
        // local 1.5B: "The run script failed three times in a row, so I need to select …"):
        // the report from the record tells the user more, without a call.
        let ask = match outcome {
            Outcome::Cancelled => false,
            Outcome::Stuck => self.format < 6,
            _ => true,
        };
        if ask {
            let mut messages = self.context.messages(None);
            let instruction = format!(
                "The run must stop now: {reason}. Write the final answer for the user with three \
                 short parts: what was done (with the results obtained so far), what blocked \
                 the task, and the next steps. Report only results that appear in the \
                 observations above; if none answers the task, say so instead of guessing. Do \
                 not call tools; answer in plain text."
            );
            messages.push(Message::user(instruction.clone()));
            let request = self.request(messages);
            if let Answer::Response(response) =
                self.call_model("degraded_answer", request, None).await?
            {
                // A document cut off mid-way (a small model that kept writing its JSON until
                // max_tokens) is no answer for the user: the deterministic one stands in.
                let text = unwrap_document(response.text.trim()).unwrap_or_default();
                // From format 39 neither is one that repeats this instruction: on the local
                // 1.5B, "The run must stop now: the turn limit (12) was reached. The final
                // answer is: …" and a refusal note after it.
                let repeats = self.format >= crate::grounding::RUNTIME_WORDS_SINCE_FORMAT
                    && crate::grounding::copies_note(&text, &[instruction.as_str()]);
                if !text.is_empty()
                    && response.tool_calls.is_empty()
                    && !repeats
                    && self.reports(&text)
                {
                    return Ok(Ending { outcome, final_text: text });
                }
            }
        }
        let final_text = if self.format < 6 {
            guard::fallback_answer(&self.state, &reason)
        } else {
            let distinct = self.format >= crate::strategy::REPEATS_SKIPPED_SINCE_FORMAT;
            guard::report(&self.state, |id| self.observation_text(id), outcome, &reason, distinct)
        };
        Ok(Ending { outcome, final_text })
    }

    /// Whether a degraded answer is a report the user can take (format 6): every value it
    /// states comes from the run, it is not the model's next step, (format 37) it does not
    /// end inside a document it copied, (format 38) where the task writes figures or asks for
    /// a quantity, it gives a figure of the results when they give some, and (format 39) it
    /// does not repeat a refusal note of the task ten words in a row.
    pub(crate) fn reports(&self, text: &str) -> bool {
        if self.format < 6 {
            return true;
        }
        let sources = self.answer_sources();
        crate::grounding::ungrounded(text, &sources).is_empty()
            && !crate::grounding::reads_as_plan(text)
            && !(self.format >= crate::grounding::CUT_OFF_SINCE_FORMAT
                && crate::grounding::cut_off(text))
            && !(self.format >= crate::grounding::REPORT_FIGURES_SINCE_FORMAT
                && (self.state.task.chars().any(|c| c.is_ascii_digit())
                    || crate::grounding::asks_quantity(&self.state.task))
                && crate::grounding::gives_no_result_figure(text, &sources.results))
            && !(self.format >= crate::grounding::RUNTIME_WORDS_SINCE_FORMAT
                && crate::grounding::copies_note(text, &self.refusal_texts()))
    }

    /// The texts of the current task's refusals (the runtime's notes, as the model read them).
    fn refusal_texts(&self) -> Vec<&str> {
        self.state
            .task_actions()
            .filter(|record| record.status == ObservationStatus::Refused)
            .map(|record| self.observation_text(&record.observation))
            .collect()
    }

    /// What a final answer's values may come from: the user's texts, and the observations of
    /// actions that ran (a refusal's or an invalid answer's text is the runtime's, not a
    /// source). A script's result is its output without the status line.
    pub(crate) fn answer_sources(&self) -> crate::grounding::Sources<'_> {
        let strict = self.grounding.strict;
        let counted = if self.format >= crate::grounding::COUNTED_SINCE_FORMAT {
            crate::grounding::counted_things(&self.state.task)
        } else {
            Vec::new()
        };
        let mut sources = crate::grounding::Sources {
            user: self.grounding.user_texts.iter().map(String::as_str).collect(),
            lenient_sums: self.format < 6,
            strict,
            counted,
            long_codes: self.format >= crate::grounding::LONG_CODES_SINCE_FORMAT,
            counts_from_results: self.format >= crate::grounding::COUNTS_FROM_RESULTS_SINCE_FORMAT,
            first_letter_units: self.format >= crate::grounding::WORKED_SINCE_FORMAT,
            unit_place: self.format >= crate::grounding::UNIT_PLACE_SINCE_FORMAT,
            measured: if self.format >= crate::grounding::FILE_FIRST_SINCE_FORMAT {
                crate::grounding::measured_things(&self.state.task)
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        let texts: std::collections::HashMap<&str, &str> =
            self.observation_texts.iter().map(|(id, text)| (id.as_str(), text.as_str())).collect();
        // What calls that did not run named: an answer may say "there is no missing.md", but
        // not cite a path the model copied from a document's example and was refused for.
        let mut not_run: Vec<&str> = Vec::new();
        for record in &self.state.actions {
            let Some(action) = &record.action else { continue };
            let ran = matches!(
                record.status,
                ObservationStatus::Ok | ObservationStatus::Failed | ObservationStatus::Timeout
            );
            if strict {
                let names = match action {
                    Action::RunScript { script, args, .. } => std::iter::once(script.as_str())
                        .chain(args.iter().map(String::as_str))
                        .collect(),
                    Action::LoadResource { path, .. } => vec![path.as_str()],
                    _ => Vec::new(),
                };
                if ran {
                    sources.names.extend(names)
                } else {
                    not_run.extend(names)
                }
                // From format 9 also as the notes write them, `skill/scripts/x.py`: the local
                // 1.5B's plan-execute-think summary named "csv-summary/scripts/csv_summary.py"
                // and was refused as a file no result shows.
                if ran
                    && self.format >= 9
                    && let Action::RunScript { skill, script: path, .. }
                    | Action::LoadResource { skill, path, .. } = action
                {
                    sources.qualified_names.push(format!("{skill}/{path}"));
                }
            }
            if !ran {
                continue;
            }
            let Some(&text) = texts.get(record.observation.as_str()) else { continue };
            match action {
                Action::RunScript { script, args, .. } => {
                    // A figure the call made up (no user text, no earlier result gives it)
                    // makes its result no ground: a converter run on a guessed temperature.
                    let numeric: Vec<&String> =
                        args.iter().filter(|arg| arg.chars().any(|c| c.is_ascii_digit())).collect();
                    let mut guessed = None;
                    if strict && !numeric.is_empty() {
                        // What the run had before this call (built only for a call with a
                        // figure).
                        let before = crate::grounding::Sources {
                            user: sources.user.clone(),
                            results: sources.results.clone(),
                            ..Default::default()
                        };
                        guessed = numeric
                            .into_iter()
                            .find(|arg| !crate::grounding::ungrounded(arg, &before).is_empty());
                    }
                    if let Some(arg) = guessed {
                        sources.unbacked.push(format!("{script} with `{arg}`"));
                    } else {
                        sources.results.extend(crate::grounding::script_output(text))
                    }
                }
                Action::CallTool { .. } | Action::Todo { .. } | Action::Schedule { .. } => {
                    sources.results.push(text)
                }
                _ => sources.documents.push(text),
            }
        }
        let documents = sources.documents.clone();
        sources.names.extend(
            not_run.into_iter().filter(|name| !crate::grounding::in_code_example(name, &documents)),
        );
        sources
    }

    /// Whether the time limit `what` (`limit_ms` from `since`) has passed before `step` of this
    /// turn; when it has, `deadline_passed` records it. Re-running a record (replay, or resume
    /// catching up), the record decides, not the clock.
    pub(crate) fn deadline_passed(
        &mut self,
        what: &str,
        step: u64,
        since: Instant,
        limit_ms: u64,
    ) -> Result<bool> {
        let turn = self.state.counters.turns;
        let passed = if self.replaying.is_some() || self.bus.catching_up() {
            let here = self.deadlines.front().is_some_and(|deadline| {
                deadline.turn == turn && deadline.what == what && deadline.step == step
            });
            if here {
                self.deadlines.pop_front();
            }
            here
        } else {
            since.elapsed().as_millis() >= u128::from(limit_ms)
        };
        if passed {
            self.emit(DeadlinePassed { what: what.to_owned(), step, limit_ms })?;
        }
        Ok(passed)
    }

    /// Ends this piece of work with a question for the user: `input_requested`, the question
    /// kept in the state (and `state.json`), outcome `needs_input`. `tool_call_id` is the call
    /// that asked, answered by the user's answer when it comes.
    pub(crate) fn request_input(
        &mut self,
        question: &str,
        tool_call_id: Option<String>,
    ) -> Result<Ending> {
        let question = question.trim().to_owned();
        self.emit(InputRequested { question: question.clone() })?;
        self.state.pending_question = Some(question.clone());
        self.pending_call = tool_call_id;
        Ok(Ending { outcome: Outcome::NeedsInput, final_text: question })
    }

    /// Writes `state.json` and fsyncs the events (end of a turn).
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        if let Some(run_dir) = &self.run_dir
            && !self.bus.catching_up()
        {
            let state = self.state_json.render(&mut self.state)?;
            run_dir.write_file(std::path::Path::new("state.json"), &state)?;
        }
        self.bus.flush()
    }
}

/// Redacts the model's text, thinking and tool-call arguments where they enter the run.
/// Model events of a peer agent (`safe`: purpose `collaborate:<id>`) carry `"agent": <id>`; the
/// run's own agent's carry none.
/// The SAFE peer a call is for (`collaborate:PEER`), named in its model events.
fn peer_of(purpose: &str) -> Option<String> {
    purpose.strip_prefix("collaborate:").map(str::to_owned)
}

/// A plain-text answer that a small model wrote as a JSON document anyway (the transcript is
/// full of them): its longest string value, the text it meant. `None` for a document that
/// never closes (cut off at `max_tokens`); other text is kept as it is.
fn unwrap_document(text: &str) -> Option<String> {
    let document = crate::action::strip_fence(text);
    let map = match serde_json::from_str::<Value>(document) {
        Ok(Value::Object(map)) => map,
        // Text that opens a JSON object and never closes it.
        Err(_) if document.trim_start().starts_with('{') => return None,
        _ => return Some(text.to_owned()),
    };
    fn longest<'a>(value: &'a Value, best: &mut &'a str) {
        match value {
            Value::String(text) if text.trim().len() > best.len() => *best = text.trim(),
            Value::Object(map) => map.values().for_each(|value| longest(value, best)),
            Value::Array(items) => items.iter().for_each(|value| longest(value, best)),
            _ => {}
        }
    }
    let mut best = "";
    map.values().for_each(|value| longest(value, &mut best));
    Some(if best.is_empty() { text.to_owned() } else { best.to_owned() })
}

fn redact_response(bus: &EventBus, response: &mut Response) {
    let redactor = bus.redactor();
    if redactor.is_empty() {
        return;
    }
    response.text = redactor.redact(&response.text).into_owned();
    response.thinking = redactor.redact(&response.thinking).into_owned();
    for call in &mut response.tool_calls {
        redactor.redact_value(&mut call.arguments);
    }
}

/// The deltas a recorded response would have streamed (one per part), for the watcher.
fn deltas_of(response: &Response) -> Vec<Delta> {
    let mut deltas = Vec::new();
    if !response.text.is_empty() {
        deltas.push(Delta::Text { text: response.text.clone() });
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        let ToolCall { id, name, arguments } = call;
        deltas.push(Delta::ToolCallStart {
            index: index as u32,
            id: id.clone(),
            name: name.clone(),
        });
        deltas.push(Delta::ToolCallArguments {
            index: index as u32,
            fragment: arguments.to_string(),
        });
    }
    // A call whose arguments were no JSON streamed its name too (`action_planned`), after
    // the readable calls in the common case of one call.
    let first = response.tool_calls.len();
    for (offset, call) in response.invalid_tool_calls.iter().enumerate() {
        let index = (first + offset) as u32;
        deltas.push(Delta::ToolCallStart { index, id: call.id.clone(), name: call.name.clone() });
        deltas.push(Delta::ToolCallArguments { index, fragment: call.raw_arguments.clone() });
    }
    deltas
}

/// Streams one answer through `watcher`; a failed call is `Err(message)`.
async fn stream_answer(
    model: &dyn ModelProvider,
    request: &ChatRequest,
    watcher: &mut Watcher,
    bus: &EventBus,
) -> Result<std::result::Result<Response, String>> {
    let stream = match model.stream(request).await {
        Ok(stream) => stream,
        Err(error) => return Ok(Err(error.to_string())),
    };
    let mut assembler = model_adapter::Assembler::new();
    let mut stream = stream;
    while let Some(item) = stream.next().await {
        let delta = match item {
            Ok(delta) => delta,
            Err(error) => return Ok(Err(error.to_string())),
        };
        watcher.push(&delta, bus, true)?;
        assembler.push(&delta);
        if assembler.is_finished() {
            break;
        }
    }
    Ok(assembler
        .finish()
        .ok_or_else(|| "the model's stream ended before its last event".to_owned()))
}

/// Watches an answer as it streams: the action's name as soon as it is known
/// (`action_planned`) and the final answer's text as it arrives (`assistant_delta`).
#[derive(Debug)]
struct Watcher {
    mode: Option<DecideMode>,
    /// JSON mode: the text parser (`$.action.type`, `$.action.args.content`), once `{` is seen.
    text: Option<Parser>,
    text_started: bool,
    /// Tools mode: the first call's name and an argument parser (`$.content`).
    call_name: Option<String>,
    arguments: Option<Parser>,
    planned: bool,
    action_type: Option<String>,
}

const TYPE_SUBSCRIPTION: usize = 0;
const CONTENT_SUBSCRIPTION: usize = 1;

impl Watcher {
    fn new(mode: Option<DecideMode>) -> Watcher {
        Watcher {
            mode,
            text: None,
            text_started: false,
            call_name: None,
            arguments: None,
            planned: false,
            action_type: None,
        }
    }

    fn push(&mut self, delta: &Delta, bus: &EventBus, live: bool) -> Result<()> {
        if self.mode.is_none() {
            return Ok(());
        }
        let mut events: Vec<Payload> = Vec::new();
        match delta {
            Delta::Text { text } => {
                let mut chunk = text.as_str();
                if !self.text_started {
                    let Some(start) = chunk.find('{') else { return Ok(()) };
                    chunk = &chunk[start..];
                    self.text_started = true;
                    let mut parser = Parser::new();
                    let subscribed = parser.subscribe("$.action.type", Capture::Value).is_ok()
                        && parser.subscribe("$.action.args.content", Capture::Deltas).is_ok();
                    self.text = subscribed.then_some(parser);
                }
                if let Some(parser) = &mut self.text {
                    let action_type = &mut self.action_type;
                    let result =
                        parser.feed(chunk.as_bytes(), &mut |event: stream_json::Event<'_>| {
                            match event.kind {
                                JsonEvent::Value(Value::String(name))
                                    if event.subscription.index() == TYPE_SUBSCRIPTION =>
                                {
                                    *action_type = Some(name.clone());
                                    events.push(planned(name));
                                }
                                // The schema's keys are sorted (`args` before `type`), so
                                // under a grammar the model writes the arguments first; only
                                // `final_answer` has a `content` argument, so its text names
                                // the action before the type does.
                                JsonEvent::StringDelta(text)
                                    if event.subscription.index() == CONTENT_SUBSCRIPTION =>
                                {
                                    match action_type.as_deref() {
                                        Some("final_answer") => {}
                                        Some(_) => return,
                                        None => {
                                            *action_type = Some("final_answer".to_owned());
                                            events.push(planned("final_answer"));
                                        }
                                    }
                                    events.push(text_delta(text));
                                }
                                _ => {}
                            }
                        });
                    if result.is_err() {
                        self.text = None;
                    }
                }
            }
            Delta::ToolCallStart { index: 0, name, .. } => {
                self.call_name = Some(name.clone());
                events.push(planned(name));
                if name == "final_answer" {
                    let mut parser = Parser::new();
                    self.arguments =
                        parser.subscribe("$.content", Capture::Deltas).is_ok().then_some(parser);
                }
            }
            Delta::ToolCallArguments { index: 0, fragment } => {
                if let Some(parser) = &mut self.arguments {
                    let result =
                        parser.feed(fragment.as_bytes(), &mut |event: stream_json::Event<'_>| {
                            if let JsonEvent::StringDelta(text) = event.kind {
                                events.push(text_delta(text));
                            }
                        });
                    if result.is_err() {
                        self.arguments = None;
                    }
                }
            }
            _ => {}
        }
        for payload in events {
            match payload {
                Payload::ActionPlanned(_) if self.planned => {}
                Payload::ActionPlanned(_) => {
                    self.planned = true;
                    bus.emit(payload)?;
                }
                // Deltas depend on how the provider cut the stream: only live runs emit them,
                // and replay leaves them out of the comparison.
                Payload::AssistantDelta(_) if !live => {}
                _ => bus.emit(payload)?,
            }
        }
        Ok(())
    }
}

/// `action_planned` for the action (or tool) `name`.
fn planned(name: impl Into<String>) -> Payload {
    Payload::ActionPlanned(ActionPlanned { action: name.into() })
}

/// `assistant_delta` with the next piece of final-answer text.
fn text_delta(text: impl Into<String>) -> Payload {
    Payload::AssistantDelta(AssistantDelta { text: text.into() })
}

/// The record format from which a script run that worked and wrote nothing to stderr is shown
/// to the model by its output alone: the observation's header already says `→ ok`, and `exit
/// code 0` and `stdout:` were 7 prompt tokens of every script run's ~110 on the embedded model.
/// The record keeps them (`observation_recorded.content`, which replay and resume read back
/// through this same function), and the answer check and the results list read the whole
/// text.
pub(crate) const BARE_OUTPUT_SINCE_FORMAT: u32 = 33;

/// The output of a script run `shown` without its `exit code 0` and `stdout:` lines, from
/// [`BARE_OUTPUT_SINCE_FORMAT`]; `None` for anything else (a failure, a stderr, no output).
fn bare_output(
    action: Option<&Action>,
    status: ObservationStatus,
    shown: &str,
    format: u32,
) -> Option<String> {
    if format < BARE_OUTPUT_SINCE_FORMAT
        || status != ObservationStatus::Ok
        || !matches!(action, Some(Action::RunScript { .. }))
        || shown.contains("\nstderr:\n")
    {
        return None;
    }
    let output = shown.strip_prefix("exit code 0\nstdout:\n")?;
    (!output.trim().is_empty()).then(|| output.to_owned())
}

#[cfg(test)]
mod tests {
    use super::{bare_output, unwrap_document};
    use crate::action::Action;
    use crate::state::ObservationStatus;

    #[test]
    fn a_script_run_that_worked_is_read_by_its_output_alone_from_format_33() {
        let run = Action::RunScript {
            skill: "csv".into(),
            script: "scripts/sum.py".into(),
            args: vec!["sales.csv".into()],
        };
        let ok = ObservationStatus::Ok;
        let text = "exit code 0\nstdout:\nrows: 20\namount sum: 1705.47";
        assert_eq!(
            bare_output(Some(&run), ok, text, 33).as_deref(),
            Some("rows: 20\namount sum: 1705.47")
        );
        assert_eq!(bare_output(Some(&run), ok, text, 32), None, "earlier records");
        // A stderr, a failure, no output, another action: shown as before.
        let warned = format!("{text}\nstderr:\nwarning: 1 empty line");
        assert_eq!(bare_output(Some(&run), ok, &warned, 33), None);
        let failed = "exit code 2\nstdout:\npartial\nstderr:\nboom";
        assert_eq!(bare_output(Some(&run), ObservationStatus::Failed, failed, 33), None);
        assert_eq!(bare_output(Some(&run), ok, "exit code 0", 33), None);
        assert_eq!(bare_output(Some(&run), ok, "exit code 0\nstdout:\n \n", 33), None);
        let select = Action::SelectSkills { names: vec!["csv".into()] };
        assert_eq!(bare_output(Some(&select), ok, text, 33), None);
        assert_eq!(bare_output(None, ok, text, 33), None);
    }

    #[test]
    fn a_degraded_answer_written_as_json_is_unwrapped() {
        assert_eq!(
            unwrap_document("{\n  \"done\": \"The total is 1705.47.\"\n}").as_deref(),
            Some("The total is 1705.47.")
        );
        assert_eq!(
            unwrap_document(
                "```json\n{\"thought\": \"stop\", \"action\": {\"type\": \"final_answer\", \"args\": {\"content\": \"Done so far: the sum is 3.\"}}}\n```"
            )
            .as_deref(),
            Some("Done so far: the sum is 3.")
        );
        for kept in ["Plain text.", "[1, 2]", "{\"n\": 3}", "Plain text with {braces"] {
            assert_eq!(unwrap_document(kept).as_deref(), Some(kept));
        }
        // A document that never closes is no answer.
        for cut in ["{broken", "```json\n{\"internal_analysis\": \"The results are"] {
            assert_eq!(unwrap_document(cut), None, "{cut}");
        }
    }
}
