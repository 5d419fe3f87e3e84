//! The record format: one typed payload per event kind. [`Payload`] is the single definition
//! of what `events.jsonl` holds in each event's `data`; the runtime writes events only
//! through it ([`crate::event::EventBus::emit`]) and every reader — replay, resume, the
//! console, `serve`, the bench — reads `data` back through [`Event::payload`].
//!
//! A field that is `Option` and skipped when `None` is absent from events that do not carry
//! it; a plain `Option` is written as `null`. `docs/events.md` lists the same shapes and a
//! test holds the two together.

use model_adapter::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::Action;
use crate::budget::Outcome;
use crate::error::{Error, Result};
use crate::event::Event;
use crate::metrics::{ReasoningMetrics, TurnReasoning};
use crate::plan::{Plan, PlanUpdate};
use crate::rundir::StoredText;
pub use crate::session::{RecordedRoot, RunOrigin, RunStart};
use crate::state::{Counters, ObservationStatus};

/// Declares the payloads: the [`Payload`] enum, the [`EventKind`] of each, their snake_case
/// names, and the conversions between a payload and an event's `data`.
macro_rules! payloads {
    (@from $kind:ident $type:ty) => {
        impl From<$type> for Payload {
            fn from(payload: $type) -> Payload {
                Payload::$kind(payload)
            }
        }
    };
    // A type shared by two kinds converts to neither: say which with the variant.
    (@from $kind:ident $type:ty, shared) => {};
    ($($(#[$doc:meta])* $kind:ident($type:ty) = $name:literal $([$shared:ident])?,)*) => {
        /// The kinds of events (the `type` of the envelope).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum EventKind {
            $($(#[$doc])* $kind,)*
        }

        /// What happened, by kind: an event's `data`, typed.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum Payload {
            $($(#[$doc])* $kind($type),)*
        }

        $(payloads!(@from $kind $type $(, $shared)?);)*

        impl EventKind {
            /// Every kind, in the order of the record format's definition.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$kind,)*];

            /// The snake_case name, as in `events.jsonl`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$kind => $name,)*
                }
            }
        }

        impl Payload {
            /// The kind of event this payload is written as.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(Payload::$kind(_) => EventKind::$kind,)*
                }
            }

            /// The payload as an event's `data`.
            ///
            /// # Errors
            ///
            /// When a value cannot be written as JSON.
            pub fn to_data(&self) -> Result<Value> {
                Ok(match self {
                    $(Payload::$kind(payload) => serde_json::to_value(payload)?,)*
                })
            }

            /// Reads an event's `data` as the payload of `kind`.
            ///
            /// # Errors
            ///
            /// [`Error::Recording`] (with an empty path) when `data` does not have the shape
            /// of `kind`.
            pub fn from_data(kind: EventKind, data: &Value) -> Result<Payload> {
                let shape = |error: serde_json::Error| Error::Recording {
                    path: Default::default(),
                    message: format!("a `{}` event's data: {error}", kind.as_str()),
                };
                Ok(match kind {
                    $(EventKind::$kind => {
                        Payload::$kind(<$type>::deserialize(data).map_err(shape)?)
                    })*
                })
            }

            /// The field names of each kind's payload, as the types declare them (for the
            /// test that holds `docs/events.md` to the types).
            #[cfg(test)]
            pub(crate) fn fields(kind: EventKind) -> Vec<&'static str> {
                match kind {
                    $(EventKind::$kind => field_names::<$type>(),)*
                }
            }
        }
    };
}

payloads! {
    /// The run began: everything a re-run needs ([`RunStart`]).
    RunStarted(Box<RunStart>) = "run_started",
    /// A piece of work ended.
    RunFinished(RunFinished) = "run_finished",
    /// A turn began, with the budgets and the actions on offer.
    TurnStarted(TurnStarted) = "turn_started",
    /// A turn ended.
    TurnFinished(TurnFinished) = "turn_finished",
    /// A model call was sent.
    ModelRequest(ModelRequest) = "model_request",
    /// A model call came back (an answer or an error).
    ModelResponse(ModelResponse) = "model_response",
    /// The action's name is known in the stream, before the answer is complete.
    ActionPlanned(ActionPlanned) = "action_planned",
    /// An action (or an answer that was not one) was checked.
    ActionValidated(ActionValidated) = "action_validated",
    /// An action ran.
    ActionExecuted(ActionExecuted) = "action_executed",
    /// An observation went into the transcript.
    ObservationRecorded(ObservationRecorded) = "observation_recorded",
    /// A plan was made.
    PlanCreated(PlanChange) = "plan_created" [shared],
    /// The plan changed.
    PlanUpdated(PlanChange) = "plan_updated" [shared],
    /// A valid thought of a `plan-thought-replan` run.
    ThoughtDecided(ThoughtDecided) = "thought_decided",
    /// A script needs the user's approval.
    ApprovalRequired(ApprovalRequired) = "approval_required",
    /// The user approved.
    ApprovalGranted(ApprovalGranted) = "approval_granted",
    /// The user (or the policy) denied.
    ApprovalDenied(ApprovalDenied) = "approval_denied",
    /// Old observations were compacted to fit the context.
    Compaction(Compaction) = "compaction",
    /// Final-answer text as it streams in (live runs only).
    AssistantDelta(AssistantDelta) = "assistant_delta",
    /// A time limit inside a turn passed.
    DeadlinePassed(DeadlinePassed) = "deadline_passed",
    /// The run asks the user and ends this input's work `needs_input`.
    InputRequested(InputRequested) = "input_requested",
    /// The user's next input to a finished run.
    UserInput(UserInputEvent) = "user_input",
    /// A slash command ran, without a model call.
    CommandExecuted(CommandExecuted) = "command_executed",
    /// An agent of a `safe` run put a collaboration request on the bus.
    CollaborationRequested(CollaborationRequested) = "collaboration_requested",
    /// A peer took a request from its inbox.
    CollaborationReceived(CollaborationReceived) = "collaboration_received",
    /// A peer put its response on the bus.
    CollaborationResponded(CollaborationResponded) = "collaboration_responded",
    /// The requester stopped waiting for a response.
    CollaborationTimedOut(CollaborationTimedOut) = "collaboration_timed_out",
    /// The requester discarded a response it no longer waits for (never applied).
    CollaborationDropped(CollaborationDropped) = "collaboration_dropped",
    /// The external (MCP) servers of the run and their state, once at its start.
    ToolServers(ToolServers) = "tool_servers",
    /// The external tools on offer changed before a turn.
    ToolsChanged(ToolsChanged) = "tools_changed",
}

impl Event {
    /// The event's `data`, typed by its kind: the one way to read a recorded event.
    ///
    /// # Errors
    ///
    /// [`Error::Recording`] when `data` does not have the shape of the event's kind.
    pub fn payload(&self) -> Result<Payload> {
        Payload::from_data(self.kind, &self.data)
    }
}

/// `run_finished`: how a piece of work ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFinished {
    /// Why it ended.
    pub outcome: Outcome,
    /// Whether the outcome is a degraded one (budget, stuck, error…).
    #[serde(default)]
    pub degraded: bool,
    /// The answer for the user.
    pub final_text: String,
    /// The run's counters so far.
    #[serde(default)]
    pub counters: Counters,
    /// The run's Think-Act metrics so far.
    #[serde(default)]
    pub reasoning_metrics: ReasoningMetrics,
    /// `false` when the answer states a value that nothing in the run shows (taken after
    /// one refusal); written only then.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub grounded: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

/// `turn_started`: the budgets as `[used, limit]`, the names the model may call, and the
/// strategy's own position (one of `round`, `step`, `safe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStarted {
    /// Budgets, `[used, limit]` each (context with the turn's note).
    pub budget: TurnBudget,
    /// The actions (or forced tool) the model may call this turn.
    #[serde(default)]
    pub allowed: Vec<String>,
    /// plan-execute-think: `[round, max_rounds]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<[u32; 2]>,
    /// plan-thought-replan: `{phase, steps: [used, limit], …}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Value>,
    /// safe: `{agent, phase, cycle?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe: Option<Value>,
}

/// The budgets of a turn, `[used, limit]` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnBudget {
    /// Turns.
    pub turns: [u64; 2],
    /// Actions other than `final_answer`.
    pub tool_calls: [u64; 2],
    /// Scripts started.
    pub script_runs: [u64; 2],
    /// Characters of context (with the turn's note).
    pub context_chars: [u64; 2],
}

/// `turn_finished`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnFinished {
    /// The run's counters.
    pub counters: Counters,
    /// Characters of context at the end of the turn.
    pub context_chars: u64,
    /// What the turn's acting answer contributed to the Think-Act metrics (`null` when the
    /// turn had none).
    #[serde(default)]
    pub reasoning: Option<TurnReasoning>,
}

/// `model_request`: what was sent (the messages themselves are not recorded; their hash is).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// What the call is for (`decide`, `plan`, `think`, `collaborate:PEER`, …).
    pub purpose: String,
    /// Messages sent.
    pub messages: u64,
    /// Characters sent.
    pub chars: u64,
    /// SHA-256 of the request as sent; a re-run must send the same.
    pub request_sha256: String,
    /// The tools offered (tools mode).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Whether the answer was constrained by a JSON Schema.
    #[serde(default)]
    pub json_schema: bool,
    /// The meta-cognition warnings the turn note gave, by reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<Vec<String>>,
    /// The SAFE peer that asked (`collaborate:PEER` calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `model_response`: the answer, or the error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// As in the request.
    pub purpose: String,
    /// The answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    /// Why the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the call took.
    #[serde(default)]
    pub duration_ms: u64,
    /// The SAFE peer that asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `action_planned`: the action's name, as soon as the stream shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionPlanned {
    /// The action (or tool) name.
    #[serde(rename = "type")]
    pub action: String,
}

/// `action_validated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionValidated {
    /// The action (`null` for an answer that was not a valid action).
    pub action: Option<Action>,
    /// Whether it may run (or end the work).
    pub valid: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The strategy's phase whose contract the answer broke (strategies with several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Who chose the action when the model did not: `ranking`, the task's first selection
    /// made by the runtime because the skill ranking was sure of it (from format 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<String>,
}

/// `action_executed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionExecuted {
    /// The action.
    pub action: Action,
    /// How it ended.
    pub status: ObservationStatus,
    /// The executor's structured result (its shape depends on the action: a script's exit
    /// code, output and sandbox report; the skills selected; …).
    #[serde(default)]
    pub result: Value,
    /// How long it ran (absent for `recall_observation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// `observation_recorded`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationRecorded {
    /// `obs-N`.
    pub id: String,
    /// The action observed (`null` for an invalid answer or a failed model call).
    pub action: Option<Action>,
    /// How it ended.
    pub status: ObservationStatus,
    /// Characters of the full text.
    pub chars: u64,
    /// The text as the model sees it (head and tail when stored).
    pub content: String,
    /// Where the full text was stored when it was too long to show (`null` otherwise).
    pub stored: Option<StoredText>,
}

/// `plan_created` and `plan_updated`: the plan as the user sees it, and what changed, which
/// each strategy says in its own fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanChange {
    /// The plan now.
    pub plan: Plan,
    /// react: the patch applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<PlanUpdate>,
    /// react: ids of the patch that name no step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_ids: Option<Vec<String>>,
    /// plan-execute-think: the round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// plan-execute-think: steps of the round that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran: Option<u64>,
    /// plan-execute-think: steps of the round that did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_run: Option<u64>,
    /// plan-thought-replan: the plan's items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<String>>,
    /// plan-thought-replan: which task of the session was planned (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<u32>,
    /// plan-thought-replan: a line of progress for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// plan-thought-replan: why the task became the only item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// plan-thought-replan: `replanned` or `done`; safe: the step's new status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// plan-thought-replan: the item being worked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_plan_index: Option<u64>,
    /// safe: the agent whose plan it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// safe: the plan cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<u32>,
    /// safe: the step whose status changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// safe: the task's complexity as judged (`null` when not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complexity: Option<Value>,
    /// safe: the SOP chosen (`null` for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop: Option<Value>,
    /// safe: repeated steps left out of the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats_dropped: Option<u64>,
}

impl PlanChange {
    /// A change that says only what the plan is now.
    pub fn plan(plan: Plan) -> PlanChange {
        PlanChange {
            plan,
            update: None,
            unknown_ids: None,
            round: None,
            ran: None,
            not_run: None,
            items: None,
            task: None,
            progress: None,
            fallback: None,
            status: None,
            current_plan_index: None,
            agent: None,
            cycle: None,
            step: None,
            complexity: None,
            sop: None,
            repeats_dropped: None,
        }
    }
}

/// `thought_decided`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThoughtDecided {
    /// `continue`, `ask_user` or `done`.
    pub status: String,
    /// What the step is about.
    pub current_step: String,
    /// `[index, total]` of the plan item (`null` when none is left).
    pub plan_item: Option<[u64; 2]>,
    /// `continue`: the action to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// `ask_user`: the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// `done`: the step's response (`null` for none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Option<String>>,
    /// A line of progress for the user.
    pub progress: String,
}

/// `approval_required`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequired {
    /// The call waiting.
    pub call_id: String,
    /// The skill whose script it is (`null` for a command of no skill).
    pub skill: Option<String>,
    /// The command line.
    pub argv: Vec<String>,
    /// Why approval is needed.
    pub reason: String,
}

/// `approval_granted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalGranted {
    /// The call approved.
    pub call_id: String,
}

/// `approval_denied`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDenied {
    /// The call denied.
    pub call_id: String,
    /// Why (`null` when the approver gave no reason).
    pub reason: Option<String>,
}

/// `compaction`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// Context characters before.
    pub before_chars: u64,
    /// Context characters after.
    pub after_chars: u64,
    /// Observation ids compacted.
    pub compacted: Vec<String>,
    /// The model's summary of them (`summarize_with_model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// `assistant_delta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantDelta {
    /// The next piece of final-answer text.
    pub text: String,
}

/// `deadline_passed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlinePassed {
    /// What ran out of time (`round`: a plan-execute-think batch).
    pub what: String,
    /// The step it stopped before, counted from 0.
    pub step: u64,
    /// The limit.
    pub limit_ms: u64,
}

/// `input_requested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRequested {
    /// The question for the user.
    pub question: String,
}

/// `user_input`: the user's next input to a finished run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInputEvent {
    /// What the user wrote.
    pub text: String,
    /// `answer` (to the pending question), `task` (a new one) or `command` (a slash command).
    pub kind: String,
    /// A new task: sizes of the workspace files it names, measured once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_sizes: Option<Vec<u64>>,
}

/// `command_executed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandExecuted {
    /// The command as typed.
    pub command: String,
    /// The builtin tool it ran.
    pub tool: String,
    /// How it ended.
    pub status: ObservationStatus,
    /// What it printed.
    pub output: String,
}

/// `collaboration_requested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollaborationRequested {
    /// The requester (`main` for the run's own agent).
    pub agent: String,
    /// The request's id.
    pub id: String,
    /// The peer asked.
    pub to: String,
    /// The request.
    pub request: String,
    /// How long the requester waits.
    pub timeout_ms: u64,
}

/// `collaboration_received`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollaborationReceived {
    /// The peer that took the request.
    pub agent: String,
    /// The request's id.
    pub id: String,
    /// The requester.
    pub from: String,
    /// The request.
    pub request: String,
}

/// `collaboration_responded`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollaborationResponded {
    /// The peer that answered.
    pub agent: String,
    /// The request's id.
    pub id: String,
    /// The requester.
    pub to: String,
    /// Whether the peer could answer.
    pub ok: bool,
    /// The response.
    pub response: String,
}

/// `collaboration_timed_out`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollaborationTimedOut {
    /// The requester.
    pub agent: String,
    /// The request's id.
    pub id: String,
    /// The peer that did not answer in time.
    pub to: String,
    /// How long the requester waited.
    pub timeout_ms: u64,
}

/// `collaboration_dropped`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollaborationDropped {
    /// The requester.
    pub agent: String,
    /// The response's request id.
    pub id: String,
    /// Who responded.
    pub from: String,
    /// `late` (after a timeout) or `unknown` (no such request).
    pub reason: String,
    /// The response discarded.
    pub response: String,
}

/// `tool_servers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolServers {
    /// Each server: `{name, transport, state, tools, sandbox, …}` (a failed one too).
    pub servers: Value,
    /// External tools on offer.
    pub tools: u64,
}

/// `tools_changed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsChanged {
    /// The how-many-th look at the list.
    pub refresh: u64,
    /// Names that appeared.
    pub added: Vec<String>,
    /// Names that went away.
    pub removed: Vec<String>,
    /// The tools on offer now.
    pub tools: Value,
}

/// Field names a type's `Deserialize` asks for (structs; a boxed struct is its content).
#[cfg(test)]
fn field_names<'de, T: Deserialize<'de>>() -> Vec<&'static str> {
    let mut names = Vec::new();
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

/// A deserializer that only notes the field names a struct asks for.
#[cfg(test)]
struct FieldNames<'a>(&'a mut Vec<&'static str>);

#[cfg(test)]
impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        _visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("field names only"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        self.0.extend_from_slice(fields);
        Err(serde::de::Error::custom("field names only"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

impl ActionValidated {
    /// A valid action.
    pub(crate) fn valid(action: &Action) -> ActionValidated {
        ActionValidated {
            action: Some(action.clone()),
            valid: true,
            error: None,
            phase: None,
            chosen_by: None,
        }
    }

    /// An invalid action (or, `None`, an answer that was not one), and why.
    pub(crate) fn invalid(action: Option<&Action>, error: &str) -> ActionValidated {
        ActionValidated {
            action: action.cloned(),
            valid: false,
            error: Some(error.to_owned()),
            phase: None,
            chosen_by: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/events.md`'s table: type → the field names listed (without their `?`).
    fn documented() -> Vec<(String, Vec<String>)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/events.md");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let names = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(|name| name.trim_end_matches('?').to_owned())
                .collect()
        };
        text.lines()
            .filter(|line| line.starts_with("| `"))
            .filter_map(|line| {
                let cells: Vec<&str> = line.split('|').collect();
                let kind = names(cells.get(1)?).into_iter().next()?;
                Some((kind, names(cells.get(2)?)))
            })
            .collect()
    }

    #[test]
    fn docs_list_every_payload_field() {
        let documented = documented();
        let kinds: Vec<&str> = documented.iter().map(|(kind, _)| kind.as_str()).collect();
        let defined: Vec<&str> = EventKind::ALL.iter().map(|kind| kind.as_str()).collect();
        assert_eq!(kinds, defined, "docs/events.md lists other types than EventKind");
        for (kind, fields) in &documented {
            let Some(kind) = EventKind::ALL.iter().find(|known| known.as_str() == kind) else {
                continue;
            };
            let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            let mut declared = Payload::fields(*kind);
            fields.sort_unstable();
            declared.sort_unstable();
            assert_eq!(fields, declared, "docs/events.md's `{}` row", kind.as_str());
        }
    }

    #[test]
    fn a_payload_reads_back_as_written() {
        let payloads: Vec<Payload> = vec![
            ActionPlanned { action: "run_script".into() }.into(),
            ActionValidated::invalid(None, "no action").into(),
            Payload::PlanUpdated(PlanChange {
                round: Some(2),
                ..PlanChange::plan(Plan::default())
            }),
            ApprovalDenied { call_id: "c".into(), reason: None }.into(),
        ];
        for payload in payloads {
            let data = payload.to_data().unwrap_or_default();
            let read = Payload::from_data(payload.kind(), &data).ok();
            assert_eq!(read.as_ref(), Some(&payload), "{data}");
        }
        // `null` where a field is always written, nothing where it is optional.
        let data = Payload::from(ActionValidated::invalid(None, "x")).to_data().ok();
        assert_eq!(data, Some(serde_json::json!({"action": null, "valid": false, "error": "x"})));
    }

    #[test]
    fn data_of_another_shape_is_an_error_naming_the_kind() {
        let error = Payload::from_data(EventKind::RunFinished, &serde_json::json!({"x": 1}));
        let message = error.err().map(|error| error.to_string()).unwrap_or_default();
        assert!(message.contains("run_finished"), "{message}");
    }
}
