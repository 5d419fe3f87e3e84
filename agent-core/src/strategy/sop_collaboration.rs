//! SOP-driven collaboration, the strategy named `safe` (seed 004): the SAFE think-execute cycle
//! of one agent (`main`) — complexity judgement, a standard operating procedure (a workflow
//! skill) to plan by, a plan of actions and requests to peer agents on an in-process message
//! bus, a report.
//!
//! # The cycle
//!
//! Each task (the run's first, or a new one in a session) goes through:
//!
//! 1. **Judge** — one model call forced to `judge_complexity` (`{complexity: simple|complex,
//!    reasoning}`). An answer that is no judgement is an `invalid_action` observation and the
//!    task is taken as complex.
//! 2. **SOP lookup** (complex tasks only) — the SOP candidates are the workflow skills of the
//!    run's catalog (a name or description that says `workflow`, `sop`, `procedure`,
//!    `runbook`, `playbook` or `checklist`, or a skill listed in `SafeConfig::sop_skills`) that
//!    share words with the task (the guard's relevance score) and may be selected now, best
//!    first, at most `max_sop_candidates`. With none, nothing is asked. Otherwise one call
//!    forced to `choose_sop` (`{sop: <candidate>|"none", reasoning}`); the chosen SOP is
//!    loaded by a real `select_skills` through [`Run::act`], so its body is in the context for
//!    planning.
//! 3. **Plan** — one call forced to `make_plan` (`{reasoning, steps: [{tool, args}]}`, 1–8
//!    steps). A step is a function call — one of the run's actions, checked against the
//!    turn's action space (a skill selected by an earlier step of the same plan may be used
//!    by later steps; the guardrails check those when they run) — or `request_collaboration`
//!    (`{agent, request}`) to a peer of `SafeConfig::peers`. A plan that is not that
//!    (unreadable, no steps, more than 8, an unknown tool or agent, a step the space refuses)
//!    is a **planning failure**: an `invalid_action` observation, counted in
//!    `strategy_state.rejected_plans` and by the failure caps; the next turn plans again, and
//!    after the `invalid_action` retry cap the run ends `stuck` with a degraded answer. A step
//!    that repeats an earlier step of the same plan is left out (small models fill plans with
//!    copies; a copy would only be refused or redo its original).
//! 4. **Execute** — the steps in order. Function steps go through [`Run::act`] (guardrails,
//!    budgets, execution, observation); collaboration steps go on the bus (below). Each
//!    step's status is recorded on the external plan (`plan_created`, then `plan_updated`
//!    when a step starts — `in_progress` — and when it ends — `done`, or `skipped` when it
//!    failed). A step that does not end `ok` stops the plan; the steps after it stay
//!    `pending`.
//! 5. **Report** — one call forced to `report` (`{answer, task_completed}`): `answer` is the
//!    text the user reads; `task_completed: true` ends the task `completed` with it, `false`
//!    plans again next turn. In JSON mode, after a plan that stopped at a failing step, the
//!    schema allows only `false` (small models report success with invented results there). A plan whose steps only selected skills (loading instructions
//!    cannot finish a task) goes straight to the next plan without a report.
//!
//! In [`DecideMode::Json`] each forced call is one JSON document under the tool's schema
//! (`response_format = json_schema`); the schemas are small and their enums come from the
//! state (the candidates, the action space, the peers), as `small-models.md` asks.
//!
//! # Collaboration
//!
//! The agents of a run — `main` and the peers — have inboxes on a bus of tokio `mpsc`
//! channels; a message is a request or a response and carries the request id (`collab-N`,
//! numbered over the run). A collaboration step:
//!
//! - counts as one tool call (it is a function call of the seed's agent, like an action);
//! - posts the request to the peer's inbox (`collaboration_requested`), records
//!   `pending_collaboration_id` in the strategy state and writes `state.json` at once;
//! - gives the peer its message cycle: it takes what is in its inbox
//!   (`collaboration_received`) and answers its queue oldest first, each answer one model
//!   call through [`Run::call_model`] with the peer's own context (its role as system prompt,
//!   the requests it got and its answers) and purpose `collaborate:<peer id>`; each answer
//!   goes back to the requester's inbox (`collaboration_responded`);
//! - takes the requester's inbox: the response to the pending id continues the plan (an `ok`
//!   observation with the answer, or `failed` when the peer could not answer); any other
//!   response is dropped (`collaboration_dropped`, `late` for a request that timed out) and
//!   never applied.
//!
//! The wait is bounded by `collaboration_timeout_ms`: the peer's model calls run under
//! `tokio::time::timeout_at` of the request's deadline (a wrapper around the live model).
//! Everything else on the bus is immediate — the agents share the run's task, and the only
//! thing that waits is a model call — so when the deadline cuts the peer's call nothing can
//! answer any more: the requester records `collaboration_timed_out`, a `timeout` observation,
//! and the step fails. The cut call is recorded (its `model_response` carries the deadline
//! error), so replay and resume reproduce the timeout from the record without a clock. A peer
//! keeps a request whose answer was cut at the head of its queue and answers it at its next
//! message cycle; that answer arrives late and is dropped.
//!
//! # Budgets
//!
//! - `max_turns` counts the main agent's turns: the judgement, the SOP choice, and each plan
//!   cycle (make_plan, its steps and the report).
//! - `max_tool_calls` counts the function steps, the SOP's `select_skills`, and collaboration
//!   requests; `max_script_runs` the scripts. Both are checked before every step.
//! - Every model call — the peers' included — counts in `model_calls`.
//!
//! Every way out gives a text: a completing report's answer; else (budget, stuck) the last
//! report's answer; else one forced summary without tools ([`Run::degrade`]); else a
//! deterministic text.
//!
//! # Events and state
//!
//! Turns start with `turn_started.safe = {agent: "main", phase: judge|sop|plan, cycle?}`; a
//! new plan's event carries `{agent: "main", plan, cycle, complexity, sop, repeats_dropped}`
//! and each step's `plan_updated` `{agent: "main", plan, cycle, step, status}`; the
//! collaboration events (documented on [`crate::event::Payload`]) carry the `agent` that acted. The
//! peers' model calls are tagged by their purpose, `collaborate:<peer id>`.
//!
//! `RunState::strategy_state` (and so `state.json`) holds `{strategy: "safe", tasks, task,
//! phase, complexity, complexity_by_model, sop_candidates, sop, cycle, rejected_plans,
//! internal_plan: [{id, step: {function: <action>} | {collaboration: {agent, request}},
//! status}], current_step, pending_collaboration_id, collaborations: [{id, to, request,
//! status}], last_answer, peers: [{id, role, handled, transcript, queue}]}`. The peers'
//! transcripts and queues survive from one task of a session to the next.

use std::collections::VecDeque;

use model_adapter::{Message, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::action::{Action, action_from};
use crate::budget::Outcome;
use crate::config::{DecideMode, PeerAgent, SafeConfig};
use crate::error::Result;
use crate::event::{Payload, PlanChange};
use crate::run::{Ending, Run, Stop};
use crate::space;
use crate::space::ActionSpace;
use crate::state::{ObservationStatus, Plan, PlanStep, StepStatus};

mod agents;

use agents::{Agents, Bus, collaborate};

use super::kernel::{
    self, Accepted, Batch, BatchEnd, Contract, Flow, PlanReply, Position, Prepared, Strategy,
    forced_arguments,
};
use super::notes::{budget_line, push_notice, skills_lines};

/// The strategy's name in `AgentConfig::strategy`.
pub(super) const NAME: &str = "safe";
/// The run's own agent on the bus.
const MAIN: &str = "main";
const JUDGE: Contract = Contract {
    tool: "judge_complexity",
    description: "Judge whether the task is simple or complex.",
};
const SOP: Contract = Contract {
    tool: "choose_sop",
    description: "Choose the standard operating procedure (workflow skill) to follow.",
};
const PLAN: Contract = Contract {
    tool: "make_plan",
    description: "Plan 1-8 steps: actions over the skills, or requests to other agents; they \
                  run in order.",
};
const REPORT: Contract = Contract {
    tool: "report",
    description: "Give the answer for the user and say whether the task is done.",
};
/// The plan step that asks a peer.
const COLLABORATE: &str = "request_collaboration";
/// The `choose_sop` answer for no SOP.
const NO_SOP: &str = "none";
/// Steps one plan may hold.
const MAX_STEPS: usize = 8;
const REASONING_MAX: usize = 300;
const REQUEST_MAX: usize = 1_000;
const ANSWER_MAX: usize = 4_000;
/// Words that make a skill a workflow skill (an SOP).
const WORKFLOW_WORDS: [&str; 6] =
    ["workflow", "sop", "procedure", "runbook", "playbook", "checklist"];

/// What the main agent's system prompt says about this strategy.
pub(crate) const PROTOCOL: &str = "This run follows the SAFE cycle instead of one action per \
     turn: judge_complexity says whether the task is simple or complex; for a complex task \
     choose_sop may pick a workflow skill (an SOP) whose instructions are then loaded; \
     make_plan lists 1-8 steps {\"tool\", \"args\"} — actions above (never final_answer) or \
     request_collaboration to ask another agent — that the runtime runs in order (a failing \
     step stops the plan); report gives the answer the user reads and task_completed (false \
     plans again).\n";

/// Checks the `safe` settings: peer ids are unique, not `main`, lowercase letters, digits,
/// `-` and `_`; roles are not empty; the timeout is at least 1 ms.
pub(crate) fn check_config(config: &SafeConfig) -> std::result::Result<(), String> {
    if config.collaboration_timeout_ms == 0 {
        return Err("safe.collaboration_timeout_ms must be at least 1".to_owned());
    }
    for (index, peer) in config.peers.iter().enumerate() {
        if !valid_peer(peer) {
            return Err(format!(
                "safe.peers: `{}` is not a peer id (lowercase letters, digits, - and _; not \
                 `{MAIN}`) with a role",
                peer.id
            ));
        }
        if config.peers[..index].iter().any(|earlier| earlier.id == peer.id) {
            return Err(format!("safe.peers: `{}` is named twice", peer.id));
        }
    }
    Ok(())
}

fn valid_peer(peer: &PeerAgent) -> bool {
    !peer.id.is_empty()
        && peer.id != MAIN
        && peer.id.len() <= 64
        && peer
            .id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && !peer.role.trim().is_empty()
}

/// How much thinking the task needs (seed 004 step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Complexity {
    Simple,
    Complex,
}

impl Complexity {
    fn as_str(self) -> &'static str {
        match self {
            Complexity::Simple => "simple",
            Complexity::Complex => "complex",
        }
    }
}

/// Where the current task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Phase {
    Judge,
    Sop,
    Plan,
    Done,
}

/// What a step of the internal plan does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Step {
    /// One of the run's actions, through [`Run::act`].
    Function(Action),
    /// A request to a peer on the bus.
    Collaboration { agent: String, request: String },
}

impl Step {
    fn title(&self) -> String {
        match self {
            Step::Function(action) => action.summary(),
            Step::Collaboration { agent, request } => {
                let short: String = request.chars().take(80).collect();
                let more = if request.chars().count() > 80 { "…" } else { "" };
                format!("ask {agent}: {short}{more}")
            }
        }
    }
}

/// One step of the internal plan (seed: `internal_plan`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct InternalStep {
    id: String,
    step: Step,
    status: StepStatus,
}

/// How a collaboration request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum CollaborationStatus {
    Pending,
    Answered,
    Failed,
    TimedOut,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Collaboration {
    id: String,
    to: String,
    request: String,
    status: CollaborationStatus,
}

/// A request waiting in a peer's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Queued {
    id: String,
    from: String,
    request: String,
    /// Already in the peer's transcript (its answer was cut by a deadline).
    asked: bool,
}

/// A peer agent's state: what it was asked and answered, and what waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PeerState {
    id: String,
    role: String,
    /// Requests answered (or failed).
    handled: u32,
    /// Its conversation: requests (user) and its answers (assistant).
    transcript: Vec<Message>,
    queue: VecDeque<Queued>,
}

/// The strategy's state, kept in `RunState::strategy_state` (and so in `state.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SafeState {
    strategy: String,
    /// Tasks taken so far (a session gives more than one).
    tasks: u32,
    /// The current task (seed: `current_task_info`).
    task: String,
    phase: Phase,
    complexity: Option<Complexity>,
    /// Whether the model judged it (else the default after a failed judgement).
    complexity_by_model: bool,
    sop_candidates: Vec<String>,
    /// The SOP loaded for planning.
    sop: Option<String>,
    /// Plan cycles of the current task.
    cycle: u32,
    rejected_plans: u32,
    internal_plan: Vec<InternalStep>,
    /// The step being executed (seed: `plan_execution_status`).
    current_step: Option<String>,
    pending_collaboration_id: Option<String>,
    collaborations: Vec<Collaboration>,
    /// The last report's answer: the text when the task ends without completion.
    last_answer: Option<String>,
    peers: Vec<PeerState>,
}

impl SafeState {
    /// The state of the run so far (a session's earlier tasks), set up for the current task.
    fn begin(run: &Run) -> SafeState {
        let earlier = serde_json::from_value::<SafeState>(run.state.strategy_state.clone())
            .ok()
            .filter(|state| state.strategy == NAME);
        let (tasks, collaborations, known) = match earlier {
            Some(state) => (state.tasks, state.collaborations, state.peers),
            None => (0, Vec::new(), Vec::new()),
        };
        // The configured peers (checked by the builder; anything invalid is left out), with
        // what they kept from earlier tasks.
        let mut peers: Vec<PeerState> = Vec::new();
        for peer in &run.config.safe.peers {
            if !valid_peer(peer) || peers.iter().any(|taken| taken.id == peer.id) {
                continue;
            }
            peers.push(known.iter().find(|state| state.id == peer.id).cloned().unwrap_or_else(
                || PeerState {
                    id: peer.id.clone(),
                    role: peer.role.trim().to_owned(),
                    handled: 0,
                    transcript: Vec::new(),
                    queue: VecDeque::new(),
                },
            ));
        }
        SafeState {
            strategy: NAME.to_owned(),
            tasks: tasks + 1,
            task: run.state.task.clone(),
            phase: Phase::Judge,
            complexity: None,
            complexity_by_model: false,
            sop_candidates: Vec::new(),
            sop: None,
            cycle: 0,
            rejected_plans: 0,
            internal_plan: Vec::new(),
            current_step: None,
            pending_collaboration_id: None,
            collaborations,
            last_answer: None,
            peers,
        }
    }

    fn peer_ids(&self) -> Vec<String> {
        self.peers.iter().map(|peer| peer.id.clone()).collect()
    }
}

fn save(run: &mut Run, safe: &SafeState) {
    run.state.strategy_state = serde_json::to_value(safe).unwrap_or(Value::Null);
}

/// Judge → SOP → plan, execute, report (seed 004), until a report completes the task or a
/// budget, the failure caps or a cancellation end it.
#[derive(Debug)]
pub(super) struct SopCollaboration {
    safe: SafeState,
    agents: Agents,
}

impl SopCollaboration {
    /// The state of the run so far, set up for the current task, and the bus.
    pub(super) fn begin(run: &mut Run) -> SopCollaboration {
        let safe = SafeState::begin(run);
        let mut ids = vec![MAIN.to_owned()];
        ids.extend(safe.peer_ids());
        let (bus, mut receivers) = Bus::open(&ids);
        let main = receivers.remove(0);
        save(run, &safe);
        SopCollaboration { safe, agents: Agents { bus, main, peers: receivers } }
    }
}

impl Strategy for SopCollaboration {
    async fn turn(&mut self, run: &mut Run) -> Result<Flow> {
        let safe = &mut self.safe;
        match safe.phase {
            Phase::Judge => judge_turn(run, safe).await,
            Phase::Sop => sop_turn(run, safe).await,
            Phase::Plan | Phase::Done => plan_turn(run, safe, &mut self.agents).await,
        }
    }

    /// The text when the task ends without a completing report: the last report's answer
    /// (when it reports: see `Run::reports`), else one forced summary call without tools, else
    /// the report from the record.
    async fn end(&mut self, run: &mut Run, stop: Stop) -> Result<Ending> {
        let safe = &mut self.safe;
        safe.phase = Phase::Done;
        safe.current_step = None;
        safe.pending_collaboration_id = None;
        save(run, safe);
        match &safe.last_answer {
            // A summary with an invented figure or the model's next step is no ending.
            Some(answer) if !stop.is_cancelled() && run.reports(answer) => {
                Ok(Ending { outcome: stop.outcome, final_text: answer.clone() })
            }
            Some(_) | None => run.degrade(stop).await,
        }
    }
}

/// Turn 1 of a task: simple or complex.
async fn judge_turn(run: &mut Run, safe: &mut SafeState) -> Result<Flow> {
    let note = match kernel::fit_note(run, judge_note).await? {
        Ok(note) => note,
        Err(stop) => return Ok(Flow::Stop(stop)),
    };
    kernel::start_turn(
        run,
        note.chars().count(),
        &[JUDGE.tool],
        Some(Position::Safe(json!({"agent": MAIN, "phase": "judge"}))),
    )?;
    let mut reasoning = None;
    let mut judged = None;
    let consequence = "the task is taken as complex";
    let schema = judge_schema();
    if let Some(Accepted { value: (complexity, why), response, tool_call_id }) =
        kernel::forced_answer(run, JUDGE.tool, JUDGE, &note, schema, parse_judge, consequence)
            .await?
    {
        reasoning = run.record_reasoning_with(&response, why.as_deref());
        judged = Some(complexity);
        let content = format!("noted: a {} task", complexity.as_str());
        kernel::acknowledge(run, tool_call_id, content);
    }
    let complexity = judged.unwrap_or(Complexity::Complex);
    safe.complexity = Some(complexity);
    safe.complexity_by_model = judged.is_some();
    safe.phase = Phase::Plan;
    if complexity == Complexity::Complex {
        let space = run.action_space();
        safe.sop_candidates = sop_candidates(run, &space);
        if !safe.sop_candidates.is_empty() {
            safe.phase = Phase::Sop;
        }
    }
    save(run, safe);
    kernel::finish_turn(run, reasoning)?;
    Ok(Flow::Continue)
}

/// The workflow skills that match the task and may be selected now, best first.
fn sop_candidates(run: &Run, space: &ActionSpace) -> Vec<String> {
    space::scored_skills(&run.state)
        .into_iter()
        .filter(|(score, name)| *score > 0.0 && space.select.contains(name))
        .filter(|(_, name)| {
            run.config.safe.sop_skills.contains(name)
                || run.state.skill(name).is_some_and(|entry| {
                    format!("{} {}", entry.name, entry.description)
                        .to_lowercase()
                        .split(|c: char| !c.is_alphanumeric())
                        .any(|word| WORKFLOW_WORDS.contains(&word))
                })
        })
        .map(|(_, name)| name)
        .take(run.config.safe.max_sop_candidates)
        .collect()
}

/// Turn 2 of a complex task: the model picks an SOP, which is loaded.
async fn sop_turn(run: &mut Run, safe: &mut SafeState) -> Result<Flow> {
    let space = run.action_space();
    let candidates: Vec<String> =
        safe.sop_candidates.iter().filter(|name| space.select.contains(name)).cloned().collect();
    safe.phase = Phase::Plan;
    save(run, safe);
    if candidates.is_empty() {
        return Ok(Flow::Continue);
    }
    let note = match kernel::fit_note(run, |run: &Run| sop_note(run, &candidates)).await? {
        Ok(note) => note,
        Err(stop) => return Ok(Flow::Stop(stop)),
    };
    kernel::start_turn(
        run,
        note.chars().count(),
        &[SOP.tool],
        Some(Position::Safe(json!({"agent": MAIN, "phase": "sop"}))),
    )?;
    let parse = |response: &Response, mode| parse_sop(response, mode, &candidates);
    let schema = sop_schema(&candidates);
    let mut reasoning = None;
    let mut flow = Flow::Continue;
    let consequence = "planning goes on without an SOP";
    if let Some(Accepted { value: (chosen, why), response, tool_call_id }) =
        kernel::forced_answer(run, SOP.tool, SOP, &note, schema, parse, consequence).await?
    {
        reasoning = run.record_reasoning_with(&response, why.as_deref());
        if let Some(sop) = chosen {
            let action = Action::SelectSkills { names: vec![sop.clone()] };
            let space = run.action_space();
            let stopped = run.act(&action, &space, tool_call_id.as_deref()).await?;
            if run.last_ok(&action) {
                safe.sop = Some(sop);
            }
            flow = stopped.map_or(Flow::Continue, Flow::Stop);
        } else {
            let content = "noted: no SOP; plan without one".to_owned();
            kernel::acknowledge(run, tool_call_id, content);
        }
    }
    save(run, safe);
    kernel::finish_turn(run, reasoning)?;
    Ok(flow)
}

/// The action space of plans and their steps: the guard's, except that loading the SOP —
/// the strategy's own `select_skills`, not the model's — does not count as a select made
/// straight before (which would forbid selecting the skills the SOP names).
fn step_space(run: &Run, safe: &SafeState) -> ActionSpace {
    let space = run.action_space();
    let sop_loaded_last = run.state.actions.last().is_some_and(|record| {
        record.status == ObservationStatus::Ok
            && matches!(&record.action, Some(Action::SelectSkills { names })
                if safe.sop.as_ref().is_some_and(|sop| names == std::slice::from_ref(sop)))
    });
    if !sop_loaded_last {
        return space;
    }
    let mut state = run.state.clone();
    state.actions.pop();
    space::action_space(&state, &run.config, run.space_rules())
}

/// A plan cycle: make_plan, its steps, the report.
async fn plan_turn(run: &mut Run, safe: &mut SafeState, agents: &mut Agents) -> Result<Flow> {
    let space_of = |run: &Run| step_space(run, safe);
    let note_of = |run: &Run, space: &ActionSpace| plan_note(run, safe, space);
    let Prepared { space, note } = match kernel::prepare(run, space_of, note_of).await? {
        Ok(prepared) => prepared,
        Err(stop) => return Ok(Flow::Stop(stop)),
    };
    let functions = step_functions(&space);
    let can_plan = !functions.is_empty() || !safe.peers.is_empty();
    safe.cycle += 1;
    safe.phase = Phase::Plan;
    save(run, safe);
    let allowed = if can_plan { &[PLAN.tool, REPORT.tool][..] } else { &[REPORT.tool][..] };
    kernel::start_turn(
        run,
        note.chars().count(),
        allowed,
        Some(Position::Safe(json!({"agent": MAIN, "phase": "plan", "cycle": safe.cycle}))),
    )?;
    let mut reasoning = None;
    let mut stop: Option<Stop> = None;
    let mut report = !can_plan;
    // The plan stopped at a failing step (JSON mode: the report may not complete the task).
    let mut failed_step = false;
    if can_plan {
        let peers = safe.peer_ids();
        let schema = plan_schema(&space, &functions, &peers);
        let parse = |response: &Response, mode| parse_plan(response, mode, &space, &peers);
        if let Some(reply) = kernel::forced_call(run, PLAN.tool, PLAN, &note, schema, parse).await?
        {
            match reply.into_plan(run, |plan: &NewPlan| plan.reasoning.as_deref())? {
                PlanReply::Rejected => {
                    safe.rejected_plans += 1;
                    save(run, safe);
                }
                PlanReply::Accepted { plan, reasoning: stated, tool_call_id } => {
                    reasoning = stated;
                    kernel::acknowledge(
                        run,
                        tool_call_id,
                        match plan.repeats {
                            0 => format!(
                                "plan accepted: {} steps; their results follow",
                                plan.steps.len()
                            ),
                            repeats => format!(
                                "plan accepted: {} steps ({repeats} repeated steps left out); \
                                 their results follow",
                                plan.steps.len()
                            ),
                        },
                    );
                    let selects_only = plan
                        .steps
                        .iter()
                        .all(|step| matches!(step, Step::Function(Action::SelectSkills { .. })));
                    match execute(run, safe, agents, plan).await? {
                        BatchEnd::Done { all_ok } => {
                            report = !(selects_only && all_ok);
                            failed_step = !all_ok;
                        }
                        BatchEnd::Stopped(stopped) if stopped.is_cancelled() => {
                            kernel::finish_turn(run, reasoning)?;
                            return Ok(Flow::Stop(stopped));
                        }
                        BatchEnd::Stopped(stopped) => {
                            stop = Some(stopped);
                            report = true;
                        }
                    }
                }
            }
        }
    }
    if report {
        let stopped = stop.as_ref().map(|stop| stop.reason.as_str());
        let note_of = |run: &Run| report_note(run, safe, stopped, failed_step);
        let note = match kernel::fit_note(run, note_of).await? {
            Ok(note) => note,
            Err(stop) => {
                kernel::finish_turn(run, reasoning)?;
                return Ok(Flow::Stop(stop));
            }
        };
        // A small model reports success after a failed step with an invented result; the
        // grammar leaves it only `false` there (a native tool caller is trusted with it).
        let may_complete = !(failed_step && run.config.decide == DecideMode::Json);
        let schema = report_schema(may_complete);
        if let Some(Accepted { value: (answer, completed), response, tool_call_id }) =
            kernel::forced_answer(run, REPORT.tool, REPORT, &note, schema, parse_report, "").await?
        {
            // What the schema did not allow is not taken (a provider without grammars).
            let completed = completed && may_complete;
            let report_reasoning = run.record_reasoning_with(&response, None);
            if reasoning.is_none() {
                reasoning = report_reasoning;
            }
            let refusal = if completed { kernel::review_answer(run, &answer) } else { None };
            if let Some(note) = refusal {
                // Not the answer: the team goes on and grounds it or says it is unknown.
                kernel::acknowledge(run, tool_call_id, note);
                save(run, safe);
            } else {
                safe.last_answer = Some(answer.clone());
                if completed {
                    safe.phase = Phase::Done;
                    save(run, safe);
                    // The call is answered by whatever the user sends next (a session).
                    run.pending_call = tool_call_id;
                    kernel::finish_turn(run, reasoning)?;
                    let ending = Ending { outcome: Outcome::Completed, final_text: answer };
                    return Ok(Flow::End(ending));
                }
                let content = "noted: the task goes on; plan the next steps".to_owned();
                kernel::acknowledge(run, tool_call_id, content);
                save(run, safe);
            }
        }
    }
    kernel::finish_turn(run, reasoning)?;
    Ok(stop.map_or(Flow::Continue, Flow::Stop))
}

/// A valid plan.
#[derive(Debug, Clone, PartialEq)]
struct NewPlan {
    reasoning: Option<String>,
    steps: Vec<Step>,
    /// Steps left out because an earlier step of the plan was the same.
    repeats: usize,
}

/// The external plan (`Plan`) of the internal one.
fn external_plan(safe: &SafeState, goal: &str) -> Plan {
    Plan {
        goal: goal.to_owned(),
        steps: safe
            .internal_plan
            .iter()
            .map(|step| PlanStep {
                id: step.id.clone(),
                title: step.step.title(),
                status: step.status,
            })
            .collect(),
        ..Plan::default()
    }
}

/// Records a step's new status on the internal and the external plan (`plan_updated`).
fn set_status(run: &mut Run, safe: &mut SafeState, index: usize, status: StepStatus) -> Result<()> {
    let Some(step) = safe.internal_plan.get_mut(index) else { return Ok(()) };
    step.status = status;
    let id = step.id.clone();
    safe.current_step = (status == StepStatus::InProgress).then(|| id.clone());
    let goal = run.state.plan.as_ref().map(|plan| plan.goal.clone()).unwrap_or_default();
    let plan = external_plan(safe, &goal);
    run.state.plan = Some(plan.clone());
    save(run, safe);
    run.emit(Payload::PlanUpdated(PlanChange {
        agent: Some(MAIN.to_owned()),
        cycle: Some(safe.cycle),
        step: Some(id),
        status: Some(status.as_str().to_owned()),
        ..PlanChange::plan(plan)
    }))
}

/// A plan's steps as a batch: function steps through [`Run::act`], collaboration steps on
/// the bus, each step's status recorded as it starts and ends.
struct PlanBatch<'a> {
    safe: &'a mut SafeState,
    agents: &'a mut Agents,
}

impl Batch for PlanBatch<'_> {
    fn len(&self) -> usize {
        self.safe.internal_plan.len()
    }

    async fn run_step(&mut self, run: &mut Run, index: usize) -> Result<(bool, Option<Stop>)> {
        let safe = &mut *self.safe;
        set_status(run, safe, index, StepStatus::InProgress)?;
        let step = safe.internal_plan[index].step.clone();
        let (ok, stop) = match &step {
            Step::Function(action) if kernel::already_done(run, action) => (true, None),
            Step::Function(action) => {
                let space = step_space(run, safe);
                let stop = run.act(action, &space, None).await?;
                (run.last_ok(action), stop)
            }
            Step::Collaboration { agent, request } => {
                (collaborate(run, safe, self.agents, agent, request).await?, None)
            }
        };
        set_status(run, safe, index, if ok { StepStatus::Done } else { StepStatus::Skipped })?;
        Ok((ok, stop))
    }
}

/// Runs the plan's steps in order; a step that does not end `ok` stops it.
async fn execute(
    run: &mut Run,
    safe: &mut SafeState,
    agents: &mut Agents,
    plan: NewPlan,
) -> Result<BatchEnd> {
    safe.internal_plan = plan
        .steps
        .iter()
        .cloned()
        .enumerate()
        .map(|(index, step)| InternalStep {
            id: format!("c{}s{}", safe.cycle, index + 1),
            step,
            status: StepStatus::Pending,
        })
        .collect();
    let goal = plan.reasoning.clone().unwrap_or_else(|| safe.task.clone());
    let current = external_plan(safe, &goal);
    let created = run.state.plan.is_none();
    run.state.plan = Some(current.clone());
    save(run, safe);
    let change = PlanChange {
        agent: Some(MAIN.to_owned()),
        cycle: Some(safe.cycle),
        complexity: Some(json!(safe.complexity)),
        sop: Some(json!(safe.sop)),
        repeats_dropped: Some(plan.repeats as u64),
        ..PlanChange::plan(current)
    };
    run.emit(if created { Payload::PlanCreated(change) } else { Payload::PlanUpdated(change) })?;
    kernel::run_batch(run, &mut PlanBatch { safe, agents }).await
}

/// The actions a function step may be now: the turn's action space without the ones that
/// end a piece of work.
fn step_functions(space: &ActionSpace) -> Vec<&'static str> {
    space
        .allowed()
        .into_iter()
        .filter(|name| !matches!(*name, "final_answer" | "ask_user"))
        .collect()
}

fn object_schema(properties: &Map<String, Value>, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn reasoning_schema() -> Value {
    json!({"type": "string", "maxLength": REASONING_MAX})
}

fn judge_schema() -> Value {
    let mut properties = Map::new();
    properties.insert("complexity".into(), json!({"enum": ["simple", "complex"]}));
    properties.insert("reasoning".into(), reasoning_schema());
    object_schema(&properties, &["complexity", "reasoning"])
}

fn sop_schema(candidates: &[String]) -> Value {
    let mut choices: Vec<&str> = candidates.iter().map(String::as_str).collect();
    choices.push(NO_SOP);
    let mut properties = Map::new();
    properties.insert("reasoning".into(), reasoning_schema());
    properties.insert("sop".into(), json!({"enum": choices}));
    object_schema(&properties, &["reasoning", "sop"])
}

/// The schema of `make_plan`: function steps drawn from the actions the space allows now,
/// and requests to the peers.
fn plan_schema(space: &ActionSpace, functions: &[&str], peers: &[String]) -> Value {
    let mut variants: Vec<Value> =
        functions.iter().map(|name| kernel::step_schema(space, name, false)).collect();
    if !peers.is_empty() {
        variants.push(json!({
            "type": "object",
            "properties": {
                "tool": {"const": COLLABORATE},
                "args": {
                    "type": "object",
                    "properties": {
                        "agent": {"enum": peers},
                        "request": {"type": "string", "minLength": 1, "maxLength": REQUEST_MAX},
                    },
                    "required": ["agent", "request"],
                    "additionalProperties": false,
                },
            },
            "required": ["tool", "args"],
            "additionalProperties": false,
        }));
    }
    let mut properties = Map::new();
    properties.insert("reasoning".into(), reasoning_schema());
    properties.insert(
        "steps".into(),
        json!({"type": "array", "items": {"anyOf": variants}, "minItems": 1, "maxItems": MAX_STEPS}),
    );
    object_schema(&properties, &["reasoning", "steps"])
}

fn report_schema(may_complete: bool) -> Value {
    let mut properties = Map::new();
    properties.insert(
        "answer".into(),
        json!({"type": "string", "minLength": 1, "maxLength": ANSWER_MAX}),
    );
    let completed =
        if may_complete { json!({"type": "boolean"}) } else { json!({"enum": [false]}) };
    properties.insert("task_completed".into(), completed);
    object_schema(&properties, &["answer", "task_completed"])
}

/// An optional string field (`reasoning`).
fn optional_text(
    arguments: &mut Map<String, Value>,
    key: &str,
) -> std::result::Result<Option<String>, String> {
    match arguments.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => {
            Ok(Some(text.trim().to_owned()).filter(|text| !text.is_empty()))
        }
        Some(other) => Err(format!("`{key}` must be a string, got {other}")),
    }
}

fn parse_judge(
    response: &Response,
    mode: DecideMode,
) -> std::result::Result<(Complexity, Option<String>), String> {
    let mut arguments = forced_arguments(response, mode, JUDGE.tool)?;
    let reasoning = optional_text(&mut arguments, "reasoning")?;
    let complexity = match arguments.remove("complexity") {
        Some(Value::String(text)) if text == "simple" => Complexity::Simple,
        Some(Value::String(text)) if text == "complex" => Complexity::Complex,
        _ => return Err("`complexity` must be `simple` or `complex`".to_owned()),
    };
    Ok((complexity, reasoning))
}

fn parse_sop(
    response: &Response,
    mode: DecideMode,
    candidates: &[String],
) -> std::result::Result<(Option<String>, Option<String>), String> {
    let mut arguments = forced_arguments(response, mode, SOP.tool)?;
    let reasoning = optional_text(&mut arguments, "reasoning")?;
    match arguments.remove("sop") {
        Some(Value::String(name)) if name == NO_SOP => Ok((None, reasoning)),
        Some(Value::String(name)) if candidates.contains(&name) => Ok((Some(name), reasoning)),
        _ => Err(format!("`sop` must be one of {}, or `{NO_SOP}`", candidates.join(", "))),
    }
}

fn parse_report(
    response: &Response,
    mode: DecideMode,
) -> std::result::Result<(String, bool), String> {
    let arguments = forced_arguments(response, mode, REPORT.tool)?;
    let answer = arguments.get("answer").and_then(Value::as_str).unwrap_or_default().trim();
    if answer.is_empty() {
        return Err("`report` needs a non-empty `answer` for the user".to_owned());
    }
    let completed = match arguments.get("task_completed") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(done)) => *done,
        Some(other) => return Err(format!("`task_completed` must be true or false, got {other}")),
    };
    Ok((answer.to_owned(), completed))
}

/// Reads `make_plan`: each function step is checked against the turn's action space, except
/// that a skill selected by an earlier step may be used by later ones (the guardrails check
/// those when they run).
fn parse_plan(
    response: &Response,
    mode: DecideMode,
    space: &ActionSpace,
    peers: &[String],
) -> std::result::Result<NewPlan, String> {
    let mut arguments = forced_arguments(response, mode, PLAN.tool)?;
    let reasoning = optional_text(&mut arguments, "reasoning")?;
    let Some(Value::Array(steps)) = arguments.remove("steps") else {
        return Err(format!("the plan needs `steps`: an array of 1-{MAX_STEPS} {{tool, args}}"));
    };
    if let Some(key) = arguments.keys().next() {
        return Err(format!("unexpected field `{key}` in the plan"));
    }
    if steps.is_empty() {
        return Err(format!("the plan has no steps; plan 1-{MAX_STEPS} steps"));
    }
    if steps.len() > MAX_STEPS {
        return Err(format!("the plan has {} steps; at most {MAX_STEPS}", steps.len()));
    }
    let total = steps.len();
    let functions = step_functions(space);
    let mut selected_in_plan: Vec<String> = Vec::new();
    let mut parsed = Vec::with_capacity(steps.len());
    for (index, step) in steps.into_iter().enumerate() {
        let number = index + 1;
        let Value::Object(mut step) = step else {
            return Err(format!("step {number} must be an object {{tool, args}}"));
        };
        let Some(Value::String(tool)) = step.remove("tool") else {
            return Err(format!("step {number} needs `tool`: an action or {COLLABORATE}"));
        };
        let args = step
            .remove("args")
            .or_else(|| step.remove("arguments"))
            .unwrap_or_else(|| Value::Object(Map::new()));
        if tool == COLLABORATE {
            let Value::Object(args) = args else {
                return Err(format!("step {number}: {COLLABORATE} takes {{agent, request}}"));
            };
            let agent = args.get("agent").and_then(Value::as_str).unwrap_or_default();
            if !peers.iter().any(|peer| peer == agent) {
                return Err(format!(
                    "step {number}: `{agent}` is not an agent to ask; agents: {}",
                    if peers.is_empty() { "none".to_owned() } else { peers.join(", ") }
                ));
            }
            let request = args.get("request").and_then(Value::as_str).unwrap_or_default().trim();
            if request.is_empty() || request.chars().count() > REQUEST_MAX {
                return Err(format!(
                    "step {number}: `request` must hold 1-{REQUEST_MAX} characters"
                ));
            }
            parsed
                .push(Step::Collaboration { agent: agent.to_owned(), request: request.to_owned() });
            continue;
        }
        let action = action_from(&tool, args)
            .map_err(|invalid| format!("step {number}: {}", invalid.message))?;
        let later_use = match &action {
            Action::LoadResource { skill, .. } | Action::RunScript { skill, .. } => {
                selected_in_plan.contains(skill)
            }
            _ => false,
        };
        if !later_use {
            if !functions.contains(&action.name()) {
                return Err(format!(
                    "step {number}: `{tool}` is not a step allowed now; allowed: {}",
                    allowed_steps(&functions, peers)
                ));
            }
            space.check(&action).map_err(|message| format!("step {number}: {message}"))?;
        }
        if let Action::SelectSkills { names } = &action {
            selected_in_plan.extend(names.iter().cloned());
        }
        parsed.push(Step::Function(action));
    }
    // Small models fill a plan with copies of one step; a copy would only be refused or
    // redo what its original did.
    let mut steps: Vec<Step> = Vec::with_capacity(parsed.len());
    for step in parsed {
        if !steps.contains(&step) {
            steps.push(step);
        }
    }
    let repeats = total - steps.len();
    Ok(NewPlan { reasoning, steps, repeats })
}

fn allowed_steps(functions: &[&str], peers: &[String]) -> String {
    let mut names: Vec<&str> = functions.to_vec();
    if !peers.is_empty() {
        names.push(COLLABORATE);
    }
    names.join(", ")
}

/// The first line of every note: phase, budgets and the reasoning level.
fn head_line(run: &Run, phase: &str) -> String {
    let position = format!(
        "SAFE {phase} · turn {} of {}",
        run.state.task_counters().turns + 1,
        run.config.budgets.max_turns
    );
    budget_line(run, &position)
}

fn judge_note(run: &Run) -> String {
    let mut note = head_line(run, "judge");
    push_notice(run, &mut note);
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str(&format!(
        "Call {}: complexity `simple` (one or two direct steps) or `complex` (several \
         steps, a procedure to follow, or other agents' help), and reasoning (one sentence).",
        JUDGE.tool
    ));
    note
}

fn sop_note(run: &Run, candidates: &[String]) -> String {
    let mut note = head_line(run, "SOP lookup");
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str("Workflow skills (standard operating procedures) that match the task:\n");
    for name in candidates {
        let description = run.state.skill(name).map(|entry| entry.description.as_str());
        note.push_str(&format!(
            "- {name}: {}\n",
            description.unwrap_or_default().replace('\n', " ")
        ));
    }
    note.push_str(&format!(
        "Call {} with the SOP whose steps fit the task (its instructions are loaded for \
         planning), or `{NO_SOP}` if none fits.",
        SOP.tool
    ));
    note
}

fn plan_note(run: &Run, safe: &SafeState, space: &ActionSpace) -> String {
    let mut note = head_line(run, &format!("plan {}", safe.cycle + 1));
    push_notice(run, &mut note);
    if let Some(plan) = &run.state.plan {
        note.push_str("Last plan:\n");
        note.push_str(&plan.render());
    }
    note.push_str(&skills_lines(run));
    note.push_str(&format!("Task: {}\n", run.state.task));
    let complexity = safe.complexity.unwrap_or(Complexity::Complex).as_str();
    match &safe.sop {
        Some(sop) => note.push_str(&format!(
            "Complexity: {complexity}. SOP: `{sop}` — its instructions are above; plan by its steps.\n"
        )),
        None => note.push_str(&format!("Complexity: {complexity}. No SOP.\n")),
    }
    let functions = step_functions(space);
    note.push_str(&format!(
        "Actions a step may be now: {}",
        if functions.is_empty() { "none".to_owned() } else { functions.join(", ") }
    ));
    if let Some(why) = &space.note {
        note.push_str(&format!(" ({why})"));
    }
    note.push_str(".\n");
    if !safe.peers.is_empty() {
        note.push_str(&format!("Agents {COLLABORATE} may ask ({{agent, request}}):\n"));
        for peer in &safe.peers {
            note.push_str(&format!("- {}: {}\n", peer.id, peer.role.replace('\n', " ")));
        }
    }
    note.push_str(&format!(
        "Call {} with 1-{MAX_STEPS} steps {{tool, args}} that run in order; a failing \
         step stops the plan. A skill must be selected before its files or scripts are used.",
        PLAN.tool
    ));
    note
}

fn report_note(run: &Run, safe: &SafeState, stopped: Option<&str>, failed_step: bool) -> String {
    let mut note = head_line(run, &format!("report {}", safe.cycle));
    if let Some(plan) = &run.state.plan {
        note.push_str("Plan:\n");
        note.push_str(&plan.render());
    }
    note.push_str(&format!("Task: {}\n", run.state.task));
    if let Some(reason) = stopped {
        note.push_str(&format!("The run stops after this report: {reason}.\n"));
    }
    if failed_step
        && let Some(step) =
            safe.internal_plan.iter().find(|step| step.status == StepStatus::Skipped)
    {
        note.push_str(&format!(
            "The plan stopped at {} ({}): it failed, see its observation above.\n",
            step.id,
            step.step.title()
        ));
    }
    note.push_str(&format!(
        "Call {}: answer (what the user reads: results and facts from the \
         observations above, never invented ones) and task_completed (true only when the \
         observations hold the result; false to plan the next steps, saying in answer what is \
         still missing).",
        REPORT.tool
    ));
    note
}
