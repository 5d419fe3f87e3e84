//! `plan-thought-replan` (seed 001, the 2026-02-16 revision): two loops per task.
//!
//! - **Outer**: `plan` once per new task (the first non-slash input), then the inner loop for
//!   the current plan item, then `replan` — which either replaces the plan (`replanned`, the
//!   cursor aligned to the new list) or ends the task with the answer (`done`). A replan also
//!   follows the user's answer to a clarification.
//! - **Inner**: `thought` → act → observe for the current plan item, as many rounds as the item
//!   needs, items strictly in order; a thought says `continue` (one action, run through
//!   [`Run::act`]), `ask_user` (the task is suspended, see below) or `done` (the item is
//!   finished; its `response` goes to the replan).
//!
//! Each phase is one model call forced to a named tool (`plan`, `thought`, `replan`) or, in
//! [`DecideMode::Json`], one document under the phase's schema (there the schema holds the
//! field-rule matrix of seed §5 as one variant per status, so a grammar cannot write a
//! document that breaks it). The contracts are checked in Rust in any case:
//!
//! - plan `{status: "planned", plan: [string]}` — at most [`MAX_PLAN_ITEMS`] non-empty items;
//!   an empty plan is allowed (the next thought may then only say `done` or `ask_user`);
//! - thought `{status, current_step, next_action, question, response}` — `continue` needs
//!   `current_step` and `next_action {tool, args}` (an action of the turn's action space other
//!   than `final_answer` and `ask_user`; the built-in `todo` and `schedule` are always offered;
//!   a string `args` — the seed's `input` — is the command of `todo`/`schedule`) with
//!   `question` and `response` empty; `ask_user` needs `current_step` and `question`, with
//!   `next_action` and `response` empty; `done` has `next_action` and `question` empty and an
//!   optional `response`;
//! - replan `{status: "replanned"|"done", plan, response}` — `replanned` needs a non-empty
//!   plan, `done` a non-empty response (the final answer).
//!
//! **Steps** (seed §1.1, §2.3): `max_turns` is the step limit. Every thought attempt, every
//! replan attempt (a failed model call, an unreadable answer or a broken field rule included)
//! and every action handed to the runtime (refused ones included) is one step; `plan` is not,
//! nor is asking the user or waiting for the answer. The limit is checked before every step —
//! at the head of each loop round and again before a thought's action runs — so the count never
//! passes the limit and nothing runs once it is reached; the run then ends `max_turns` with the
//! degraded answer of [`Run::degrade`] (done so far, the blocker, next steps — the plan items
//! left). Turns count the thought and replan calls (the first task's plan comes before turn 1,
//! a later task's plan before its first turn), so `counters.turns` never outruns the steps.
//!
//! **Failures**: after [`FAILURE_THRESHOLD`] failed steps in a row (unreadable or invalid
//! decisions, failed model calls, actions that did not end `ok`; reset by an `ok` action, a
//! valid replan, a finished item or the user's answer) the thought may only say `ask_user` or
//! `done`. The shared failure caps (`guard.retry_caps`, `guard.stuck_repeats`) still end a run
//! that keeps failing.
//!
//! **Clarifications**: `ask_user` (offered when `guard.ask_user` is on) keeps the pending task
//! in `strategy_state` (`awaiting_clarification`, plan, cursor, counts) and ends the work
//! `needs_input`; the next non-slash input is the answer ([`InputKind::Answer`]) and the task
//! goes on with a replan. Slash commands in between are the session layer's and leave the
//! pending task alone.
//!
//! **Progress** (seed §7): `plan_created.progress` ("Planning done: N steps"),
//! `turn_started.step.progress` ("Current plan item: i/N - …", "Replanning: …"),
//! `thought_decided.progress` ("Thought: run an action — …", "Thought: step done", "Thought:
//! ask for clarification"), the action and its result in `action_executed`, and
//! `plan_updated.progress` ("Replanning done: M steps", "Replanning done: the task is
//! complete").

use model_adapter::{ContentPart, Message, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::action::{Action, action_from};
use crate::budget::Outcome;
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::{Payload, PlanChange, ThoughtDecided};
use crate::run::{Ending, InputKind, Run, Stop};
use crate::space::ActionSpace;
use crate::state::{Plan, PlanStep, StepStatus};

use super::kernel::{self, Contract, Flow, Position, Prepared, Strategy, forced_arguments};
use super::notes::{budget_line, push_notice, skills_lines};

/// The strategy's name in `AgentConfig::strategy`.
pub(super) const NAME: &str = "plan-thought-replan";
/// The forced contract of the plan phase.
const PLAN: Contract = Contract {
    tool: "plan",
    description: "Plan the task once: the steps to do, in order, as short sentences.",
};
/// The forced contract of the thought phase.
const THOUGHT: Contract = Contract {
    tool: "thought",
    description: "Decide for the current plan item: continue with one action, ask_user, or \
                  done when the item is finished.",
};
/// The forced contract of the replan phase.
const REPLAN: Contract = Contract {
    tool: "replan",
    description: "Review the plan after a finished item or the user's answer: replanned with \
                  the steps left, or done with the final answer.",
};
/// Items one plan may hold.
const MAX_PLAN_ITEMS: usize = 8;
/// Plan calls per task before the task itself becomes the only plan item.
const PLAN_ATTEMPTS: u32 = 2;
/// Failed steps in a row after which a thought may only say `ask_user` or `done`.
const FAILURE_THRESHOLD: u32 = 2;
const ITEM_MAX: usize = 200;
const STEP_MAX: usize = 200;
const QUESTION_MAX: usize = 400;
const RESPONSE_MAX: usize = 4_000;
/// What the session layer puts before the user's answer.
const ANSWER_PREFIX: &str = "The user answers: ";

/// One question the task asked and the answer it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Clarification {
    question: String,
    answer: String,
}

/// The pending task (seed §4 `PendingPlanTask`), kept in `RunState::strategy_state` (and so
/// in `state.json`) after every step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TaskState {
    strategy: String,
    /// Tasks of the run so far (a session gives new ones); this is the last.
    task: u32,
    plan_initialized: bool,
    plan_items: Vec<String>,
    /// The item the thoughts work on; `plan_items.len()` when none is left.
    current_plan_index: usize,
    /// Items finished in this task, in order (a replan's list may repeat them).
    completed_items: Vec<String>,
    awaiting_clarification: bool,
    needs_replan: bool,
    /// Why the next replan comes (shown to the model).
    replan_trigger: Option<String>,
    /// The last valid thought, in short (progress).
    last_thought_snapshot: Option<String>,
    /// Steps of this task: thoughts, replans and actions.
    step_count: u32,
    successful_steps: u32,
    failed_steps: u32,
    consecutive_failures: u32,
    replans: u32,
    clarification_history: Vec<Clarification>,
    last_ask_user_question: Option<String>,
    /// The last finished item's result, for the replan.
    pending_final_response: Option<String>,
    /// The observation of the last step when it was an action that worked (a hint that the
    /// item may be finished).
    last_ok_observation: Option<String>,
}

impl TaskState {
    fn new(task: u32) -> TaskState {
        TaskState {
            strategy: NAME.to_owned(),
            task,
            plan_initialized: false,
            plan_items: Vec::new(),
            current_plan_index: 0,
            completed_items: Vec::new(),
            awaiting_clarification: false,
            needs_replan: false,
            replan_trigger: None,
            last_thought_snapshot: None,
            step_count: 0,
            successful_steps: 0,
            failed_steps: 0,
            consecutive_failures: 0,
            replans: 0,
            clarification_history: Vec::new(),
            last_ask_user_question: None,
            pending_final_response: None,
            last_ok_observation: None,
        }
    }

    /// The state's own rules; a broken one ends the run (`error`) rather than going on.
    fn check_invariants(&self) -> std::result::Result<(), String> {
        if self.current_plan_index > self.plan_items.len() {
            return Err(format!(
                "current_plan_index {} is past the plan's {} items",
                self.current_plan_index,
                self.plan_items.len()
            ));
        }
        if self.successful_steps + self.failed_steps != self.step_count {
            return Err(format!(
                "{} successful and {} failed steps do not add up to {} steps",
                self.successful_steps, self.failed_steps, self.step_count
            ));
        }
        if !self.plan_initialized {
            return Err("the task has no plan".to_owned());
        }
        if self.awaiting_clarification {
            return Err("the task still waits for the user's answer".to_owned());
        }
        Ok(())
    }

    fn current_item(&self) -> Option<&str> {
        self.plan_items.get(self.current_plan_index).map(String::as_str)
    }

    fn failed(&mut self) {
        self.failed_steps += 1;
        self.consecutive_failures += 1;
    }

    /// The statuses a thought may have now, and why fewer than all, if so.
    /// `answer_now` is the guard's reason when it leaves no skill action but the answer (an
    /// identical successful script run repeated).
    fn thought_statuses(
        &self,
        ask_user: bool,
        answer_now: Option<&str>,
    ) -> (Vec<&'static str>, Option<String>) {
        let (mut statuses, why) = if self.current_item().is_none() {
            (vec!["ask_user", "done"], Some("the plan has no item to work on".to_owned()))
        } else if self.consecutive_failures >= FAILURE_THRESHOLD {
            (
                vec!["ask_user", "done"],
                Some(format!("{} steps failed in a row", self.consecutive_failures)),
            )
        } else if let Some(why) = answer_now {
            (vec!["ask_user", "done"], Some(why.to_owned()))
        } else {
            (vec!["continue", "ask_user", "done"], None)
        };
        if !ask_user {
            statuses.retain(|status| *status != "ask_user");
        }
        (statuses, why)
    }

    /// Replaces the plan: leading items already finished in this task are skipped (a replan
    /// may give the whole list again or only what is left).
    fn replace_plan(&mut self, items: Vec<String>) {
        let done = items
            .iter()
            .take_while(|item| self.completed_items.iter().any(|finished| finished == *item))
            .count();
        self.plan_items = items;
        self.current_plan_index = done;
        self.needs_replan = false;
        self.replan_trigger = None;
        self.replans += 1;
    }
}

/// A valid thought.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Thought {
    current_step: String,
    decision: ThoughtDecision,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ThoughtDecision {
    Continue(Action),
    AskUser(String),
    Done(Option<String>),
}

impl ThoughtDecision {
    fn status(&self) -> &'static str {
        match self {
            ThoughtDecision::Continue(_) => "continue",
            ThoughtDecision::AskUser(_) => "ask_user",
            ThoughtDecision::Done(_) => "done",
        }
    }
}

/// A valid replan.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Replan {
    Replanned(Vec<String>),
    Done(String),
}

/// Plan once, then thought/act/observe per item and a replan after each (seed 001).
#[derive(Debug)]
pub(super) struct PlanThoughtReplan {
    task: TaskState,
    /// A new task: its plan is asked before the first turn.
    plan_first: bool,
}

impl PlanThoughtReplan {
    /// The pending task when the input answers its question, else a new task.
    pub(super) fn begin(run: &mut Run) -> PlanThoughtReplan {
        let previous: Option<TaskState> =
            serde_json::from_value(run.state.strategy_state.clone()).ok();
        match (run.input, previous) {
            (InputKind::Answer, Some(mut task)) if task.awaiting_clarification => {
                let answer = last_input_text(run);
                let question = task.last_ask_user_question.clone().unwrap_or_default();
                task.clarification_history.push(Clarification { question, answer });
                task.awaiting_clarification = false;
                task.needs_replan = true;
                task.replan_trigger = Some("the user answered the question".to_owned());
                task.consecutive_failures = 0;
                save(run, &task);
                PlanThoughtReplan { task, plan_first: false }
            }
            (InputKind::Answer | InputKind::Task, previous) => PlanThoughtReplan {
                task: TaskState::new(previous.map_or(1, |previous| previous.task + 1)),
                plan_first: true,
            },
        }
    }
}

impl Strategy for PlanThoughtReplan {
    async fn start(&mut self, run: &mut Run) -> Result<Option<Stop>> {
        if !self.plan_first {
            return Ok(None);
        }
        if run.cancel.is_cancelled() || run.recorded_stop(Outcome::Cancelled) {
            return Ok(Some(Stop::cancelled()));
        }
        plan_once(run, &mut self.task).await
    }

    /// The step limit (`max_turns`), then the run's budgets, then the task's invariants.
    fn limit(&self, run: &Run) -> Option<Stop> {
        limit(run, &self.task).or_else(|| {
            self.task.check_invariants().err().map(|broken| {
                Stop::new(Outcome::Error, format!("the task state is broken: {broken}"))
            })
        })
    }

    async fn turn(&mut self, run: &mut Run) -> Result<Flow> {
        if self.task.needs_replan {
            replan(run, &mut self.task).await
        } else {
            thought(run, &mut self.task).await
        }
    }
}

/// The limit a step would pass now: the step limit (`max_turns`), then the run's budgets.
fn limit(run: &Run, task: &TaskState) -> Option<Stop> {
    let max = run.config.budgets.max_turns;
    if task.step_count >= max {
        return Some(Stop::new(
            Outcome::MaxTurns,
            format!("the step limit ({max} steps: thoughts, replans and actions) was reached"),
        ));
    }
    run.budget_exhausted()
}

fn save(run: &mut Run, task: &TaskState) {
    run.state.strategy_state = serde_json::to_value(task).unwrap_or(Value::Null);
}

/// The text of the input the work began with: the last message of the transcript, which the
/// session layer wrote (the tool result of the asking call, or a user message).
fn last_input_text(run: &mut Run) -> String {
    let messages = run.context.messages(None);
    let text = match messages.last() {
        Some(Message::Tool { content, .. }) => content.clone(),
        Some(Message::User { content }) => content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Message::System { .. } | Message::Assistant { .. }) | None => String::new(),
    };
    run.context.recycle(messages);
    text.strip_prefix(ANSWER_PREFIX).unwrap_or(&text).trim().to_owned()
}

/// The guard's reason when it leaves no skill action but the answer (an identical successful
/// script run repeated, a skill without files just selected).
fn answer_now(run: &Run) -> Option<String> {
    let space = run.action_space();
    let skill_actions = space
        .allowed()
        .into_iter()
        .any(|name| !matches!(name, "final_answer" | "ask_user" | "todo" | "schedule"));
    space.note.filter(|_| !skill_actions)
}

/// The thought's action space: the turn's, with the built-in tools.
fn thought_space(run: &Run) -> ActionSpace {
    let mut space = run.action_space();
    space.builtins = true;
    space
}

/// The actions a thought's `next_action` may name: the space's, without `final_answer` and
/// `ask_user` (the thought's own statuses).
fn step_tools(space: &ActionSpace) -> Vec<&'static str> {
    space
        .allowed()
        .into_iter()
        .filter(|name| *name != "final_answer" && *name != "ask_user")
        .collect()
}

/// The run's plan from the task's items: finished ones done, the current one in progress.
fn mirror_plan(run: &mut Run, task: &TaskState, finished: bool) -> Plan {
    let steps = task
        .plan_items
        .iter()
        .enumerate()
        .map(|(index, item)| PlanStep {
            id: format!("s{}", index + 1),
            title: item.clone(),
            status: if index < task.current_plan_index {
                StepStatus::Done
            } else if finished {
                StepStatus::Skipped
            } else if index == task.current_plan_index {
                StepStatus::InProgress
            } else {
                StepStatus::Pending
            },
        })
        .collect();
    let plan = Plan { goal: run.state.task.clone(), steps, ..Plan::default() };
    run.state.plan = Some(plan.clone());
    plan
}

/// The task's plan, asked once. Not a step and not a turn. An unusable answer is asked again
/// once; then the task itself is the only item. Returns a limit that stopped it, if any.
async fn plan_once(run: &mut Run, task: &mut TaskState) -> Result<Option<Stop>> {
    let mut items = None;
    for attempt in 1..=PLAN_ATTEMPTS {
        // Not a turn: the tool list is read at the first thought's head.
        let note_of = |run: &Run| plan_note(run, &thought_space(run), attempt);
        let note = match kernel::fit_note(run, note_of).await? {
            Ok(note) => note,
            Err(stop) => return Ok(Some(stop)),
        };
        let Some(reply) =
            kernel::forced_call(run, "plan", PLAN, &note, plan_schema(), parse_plan).await?
        else {
            continue;
        };
        match reply.parsed {
            Err(message) => {
                kernel::reject_answer(run, &message, reply.tool_call_id.as_deref(), Some("plan"))?;
            }
            Ok(plan) => {
                run.record_reasoning_with(&reply.response, None);
                kernel::acknowledge(
                    run,
                    reply.tool_call_id,
                    format!(
                        "plan accepted: {} steps; the thought for the first one comes next",
                        plan.len()
                    ),
                );
                items = Some(plan);
                break;
            }
        }
    }
    let fallback = items.is_none();
    task.plan_items = items.unwrap_or_else(|| vec![clip(&run.state.task, ITEM_MAX)]);
    task.plan_initialized = true;
    save(run, task);
    // A new task starts without a plan (the session layer clears it).
    let created = run.state.plan.is_none();
    let plan = mirror_plan(run, task, false);
    let change = PlanChange {
        items: Some(task.plan_items.clone()),
        task: Some(task.task),
        progress: Some(format!("Planning done: {} steps", task.plan_items.len())),
        fallback: fallback.then(|| "no valid plan: the task is the only item".to_owned()),
        ..PlanChange::plan(plan)
    };
    run.emit(if created { Payload::PlanCreated(change) } else { Payload::PlanUpdated(change) })?;
    run.checkpoint()?;
    Ok(None)
}

/// One inner round: a thought for the current item and, for `continue`, its action.
async fn thought(run: &mut Run, task: &mut TaskState) -> Result<Flow> {
    let answer_now = answer_now(run);
    let (statuses, narrowed) =
        task.thought_statuses(run.config.guard.ask_user, answer_now.as_deref());
    let note_of = |run: &Run, space: &ActionSpace| {
        thought_note(run, task, space, &statuses, narrowed.as_deref())
    };
    let Prepared { space, note } = match kernel::prepare(run, thought_space, note_of).await? {
        Ok(prepared) => prepared,
        Err(stop) => return Ok(Flow::Stop(stop)),
    };
    let tools = step_tools(&space);
    let item = plan_item(task);
    kernel::start_turn(
        run,
        note.chars().count(),
        &[THOUGHT.tool],
        Some(Position::Step(json!({
            "phase": "thought",
            "steps": [task.step_count, run.config.budgets.max_turns],
            "plan_item": item.as_ref().map(|(index, total, _)| json!([index, total])),
            "statuses": statuses,
            "progress": match &item {
                Some((index, total, text)) => format!("Current plan item: {index}/{total} - {text}"),
                None => "Current plan item: none (no item left)".to_owned(),
            },
        }))),
    )?;
    task.step_count += 1;
    task.last_ok_observation = None;
    save(run, task);
    let schema = thought_schema(run.config.decide, &statuses, &space, &tools);
    let parse = |response: &Response, mode| {
        parse_thought(response, mode, &statuses, narrowed.as_deref(), &tools)
    };
    let reply = kernel::forced_call(run, "thought", THOUGHT, &note, schema, parse).await?;
    let Some((response, thought, tool_call_id)) = accepted(run, task, reply, "thought")? else {
        return Ok(Flow::Continue);
    };
    let reasoning = run.record_reasoning_with(&response, Some(&thought.current_step));
    task.successful_steps += 1;
    task.last_thought_snapshot =
        Some(format!("{}: {}", thought.decision.status(), clip(&thought.current_step, 120)));
    let (action, question, response, progress) = match &thought.decision {
        ThoughtDecision::Continue(action) => (
            Some(action.clone()),
            None,
            None,
            format!("Thought: run an action — {}", action.summary()),
        ),
        ThoughtDecision::AskUser(question) => {
            (None, Some(question.clone()), None, "Thought: ask for clarification".to_owned())
        }
        ThoughtDecision::Done(response) => {
            (None, None, Some(response.clone()), "Thought: step done".to_owned())
        }
    };
    run.emit(ThoughtDecided {
        status: thought.decision.status().to_owned(),
        current_step: thought.current_step.clone(),
        plan_item: item.as_ref().map(|(index, total, _)| [*index as u64, *total as u64]),
        action,
        question,
        response,
        progress,
    })?;
    match thought.decision {
        ThoughtDecision::Continue(action) => {
            save(run, task);
            // The action is a step of its own: no step left, nothing runs.
            if let Some(stop) = limit(run, task) {
                kernel::answer_call(run, tool_call_id, format!("not run: {}", stop.reason), true);
                kernel::finish_turn(run, reasoning)?;
                let reason = format!("{} before `{}` could run", stop.reason, action.summary());
                return Ok(Flow::Stop(Stop::new(stop.outcome, reason)));
            }
            task.step_count += 1;
            let stopped = run.act(&action, &space, tool_call_id.as_deref()).await?;
            let ok = run.last_ok(&action);
            task.last_ok_observation = ok
                .then(|| run.state.actions.last().map(|record| record.observation.clone()))
                .flatten();
            if ok {
                task.successful_steps += 1;
                task.consecutive_failures = 0;
            } else {
                task.failed();
            }
            save(run, task);
            kernel::finish_turn(run, reasoning)?;
            Ok(stopped.map_or(Flow::Continue, Flow::Stop))
        }
        ThoughtDecision::AskUser(question) => {
            task.awaiting_clarification = true;
            task.last_ask_user_question = Some(question.clone());
            save(run, task);
            let ending = run.request_input(&question, tool_call_id)?;
            kernel::finish_turn(run, reasoning)?;
            Ok(Flow::End(ending))
        }
        ThoughtDecision::Done(response) => {
            let finished = task.current_item().map(str::to_owned);
            let position = format!(
                "{}/{}",
                (task.current_plan_index + 1).min(task.plan_items.len()),
                task.plan_items.len()
            );
            if let Some(item) = finished {
                task.completed_items.push(item);
                task.current_plan_index += 1;
            }
            task.pending_final_response = response;
            task.needs_replan = true;
            task.replan_trigger = Some(match task.plan_items.is_empty() {
                true => "the plan was empty".to_owned(),
                false => format!("plan item {position} is finished"),
            });
            task.consecutive_failures = 0;
            mirror_plan(run, task, false);
            save(run, task);
            kernel::acknowledge(
                run,
                tool_call_id,
                "noted: the item is finished; the plan is reviewed next".to_owned(),
            );
            kernel::finish_turn(run, reasoning)?;
            Ok(Flow::Continue)
        }
    }
}

/// `(index from 1, total, text)` of the current item.
fn plan_item(task: &TaskState) -> Option<(usize, usize, String)> {
    task.current_item()
        .map(|item| (task.current_plan_index + 1, task.plan_items.len(), item.to_owned()))
}

/// One outer round: the replan after a finished item or the user's answer.
async fn replan(run: &mut Run, task: &mut TaskState) -> Result<Flow> {
    let note = match kernel::fit_note(run, |run: &Run| replan_note(run, task)).await? {
        Ok(note) => note,
        Err(stop) => return Ok(Flow::Stop(stop)),
    };
    let trigger = task.replan_trigger.clone().unwrap_or_else(|| "the plan is reviewed".to_owned());
    kernel::start_turn(
        run,
        note.chars().count(),
        &[REPLAN.tool],
        Some(Position::Step(json!({
            "phase": "replan",
            "steps": [task.step_count, run.config.budgets.max_turns],
            "progress": format!("Replanning: {trigger}"),
        }))),
    )?;
    task.step_count += 1;
    task.last_ok_observation = None;
    save(run, task);
    let schema = replan_schema(run.config.decide);
    let reply = kernel::forced_call(run, "replan", REPLAN, &note, schema, parse_replan).await?;
    let Some((response, decision, tool_call_id)) = accepted(run, task, reply, "replan")? else {
        return Ok(Flow::Continue);
    };
    let reasoning = run.record_reasoning_with(&response, None);
    task.successful_steps += 1;
    task.consecutive_failures = 0;
    match decision {
        Replan::Replanned(items) => {
            task.replace_plan(items);
            task.pending_final_response = None;
            save(run, task);
            let plan = mirror_plan(run, task, false);
            run.emit(Payload::PlanUpdated(PlanChange {
                items: Some(task.plan_items.clone()),
                status: Some("replanned".to_owned()),
                current_plan_index: Some(task.current_plan_index as u64),
                progress: Some(format!("Replanning done: {} steps", task.plan_items.len())),
                ..PlanChange::plan(plan)
            }))?;
            let next = match plan_item(task) {
                Some((index, total, text)) => format!("item {index}/{total} ({text}) is next"),
                None => "no item is left".to_owned(),
            };
            let content = format!("plan updated: {} steps; {next}", task.plan_items.len());
            kernel::acknowledge(run, tool_call_id, content);
            kernel::finish_turn(run, reasoning)?;
            Ok(Flow::Continue)
        }
        Replan::Done(answer) => {
            if let Some(note) = kernel::review_answer(run, &answer) {
                // The task is not done with an answer nothing grounds: replan again.
                kernel::acknowledge(run, tool_call_id, note);
                save(run, task);
                kernel::finish_turn(run, reasoning)?;
                return Ok(Flow::Continue);
            }
            task.needs_replan = false;
            task.replan_trigger = None;
            task.replans += 1;
            save(run, task);
            let plan = mirror_plan(run, task, true);
            run.emit(Payload::PlanUpdated(PlanChange {
                items: Some(task.plan_items.clone()),
                status: Some("done".to_owned()),
                current_plan_index: Some(task.current_plan_index as u64),
                progress: Some("Replanning done: the task is complete".to_owned()),
                ..PlanChange::plan(plan)
            }))?;
            run.pending_call = tool_call_id;
            kernel::finish_turn(run, reasoning)?;
            Ok(Flow::End(Ending { outcome: Outcome::Completed, final_text: answer }))
        }
    }
}

/// A thought's or replan's answer, when it was given and keeps its contract. A failed call or
/// a broken contract is a failed step (the latter also `action_validated` and an
/// `invalid_action` observation in `phase`) and ends the turn.
fn accepted<T>(
    run: &mut Run,
    task: &mut TaskState,
    reply: Option<kernel::Reply<T>>,
    phase: &str,
) -> Result<Option<(Response, T, Option<String>)>> {
    let failure = match reply {
        Some(kernel::Reply { response, parsed: Ok(value), tool_call_id }) => {
            return Ok(Some((response, value, tool_call_id)));
        }
        Some(kernel::Reply { parsed: Err(message), tool_call_id, .. }) => {
            Some((message, tool_call_id))
        }
        None => None,
    };
    task.failed();
    save(run, task);
    if let Some((message, tool_call_id)) = failure {
        kernel::reject_answer(run, &message, tool_call_id.as_deref(), Some(phase))?;
    }
    kernel::finish_turn(run, None)?;
    Ok(None)
}

/// `text` cut to `max` characters.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => text[..cut].to_owned(),
        None => text.to_owned(),
    }
}

fn text_schema(max: usize) -> Value {
    json!({"type": "string", "maxLength": max})
}

fn items_schema(min: usize) -> Value {
    json!({
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": ITEM_MAX},
        "minItems": min,
        "maxItems": MAX_PLAN_ITEMS,
    })
}

fn object_schema(properties: Map<String, Value>) -> Value {
    let required: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    schema.insert("additionalProperties".into(), json!(false));
    Value::Object(schema)
}

fn one_of(mut variants: Vec<Value>) -> Value {
    if variants.len() == 1 {
        return variants.pop().unwrap_or(Value::Null);
    }
    json!({"anyOf": variants})
}

/// The schema of `plan`.
fn plan_schema() -> Value {
    let mut properties = Map::new();
    properties.insert("status".into(), json!({"enum": ["planned"]}));
    properties.insert("plan".into(), items_schema(0));
    object_schema(properties)
}

/// The schema of `thought` with these statuses. Tools mode: one object with nullable fields
/// (providers want an object at the top). JSON mode: one variant per status, so the field-rule
/// matrix is in the grammar.
fn thought_schema(
    mode: DecideMode,
    statuses: &[&str],
    space: &ActionSpace,
    tools: &[&str],
) -> Value {
    let action = one_of(
        tools
            .iter()
            .map(|name| {
                let mut properties = Map::new();
                properties.insert("tool".into(), json!({"const": name}));
                properties.insert("args".into(), space.args_schema(name));
                object_schema(properties)
            })
            .collect(),
    );
    let null = json!({"type": "null"});
    let nullable = |max: usize| json!({"type": ["string", "null"], "maxLength": max});
    let required_text = |max: usize| json!({"type": "string", "minLength": 1, "maxLength": max});
    match mode {
        DecideMode::Tools => {
            let has = |status: &str| statuses.contains(&status);
            let mut properties = Map::new();
            properties.insert("status".into(), json!({"enum": statuses}));
            properties.insert("current_step".into(), text_schema(STEP_MAX));
            properties.insert(
                "next_action".into(),
                if has("continue") { json!({"anyOf": [null, action]}) } else { null.clone() },
            );
            properties.insert(
                "question".into(),
                if has("ask_user") { nullable(QUESTION_MAX) } else { null.clone() },
            );
            properties
                .insert("response".into(), if has("done") { nullable(RESPONSE_MAX) } else { null });
            object_schema(properties)
        }
        DecideMode::Json => one_of(
            statuses
                .iter()
                .map(|status| {
                    let mut properties = Map::new();
                    properties.insert("status".into(), json!({"const": status}));
                    let (step, next_action, question, response) = match *status {
                        "continue" => {
                            (required_text(STEP_MAX), action.clone(), null.clone(), null.clone())
                        }
                        "ask_user" => (
                            required_text(STEP_MAX),
                            null.clone(),
                            required_text(QUESTION_MAX),
                            null.clone(),
                        ),
                        _ => (
                            text_schema(STEP_MAX),
                            null.clone(),
                            null.clone(),
                            nullable(RESPONSE_MAX),
                        ),
                    };
                    properties.insert("current_step".into(), step);
                    properties.insert("next_action".into(), next_action);
                    properties.insert("question".into(), question);
                    properties.insert("response".into(), response);
                    object_schema(properties)
                })
                .collect(),
        ),
    }
}

/// The schema of `replan` (as `thought_schema`: flat for tools, one variant per status in JSON
/// mode).
fn replan_schema(mode: DecideMode) -> Value {
    match mode {
        DecideMode::Tools => {
            let mut properties = Map::new();
            properties.insert("status".into(), json!({"enum": ["replanned", "done"]}));
            properties.insert("plan".into(), items_schema(0));
            properties.insert(
                "response".into(),
                json!({"type": ["string", "null"], "maxLength": RESPONSE_MAX}),
            );
            object_schema(properties)
        }
        DecideMode::Json => {
            let mut replanned = Map::new();
            replanned.insert("status".into(), json!({"const": "replanned"}));
            replanned.insert("plan".into(), items_schema(1));
            replanned.insert("response".into(), json!({"type": "null"}));
            let mut done = Map::new();
            done.insert("status".into(), json!({"const": "done"}));
            done.insert("plan".into(), items_schema(0));
            done.insert(
                "response".into(),
                json!({"type": "string", "minLength": 1, "maxLength": RESPONSE_MAX}),
            );
            json!({"anyOf": [object_schema(replanned), object_schema(done)]})
        }
    }
}

/// A string field that may be empty: absent, `null`, or blank is `None`.
fn optional_text(
    arguments: &mut Map<String, Value>,
    key: &str,
    max: usize,
) -> std::result::Result<Option<String>, String> {
    match arguments.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => {
            let text = text.trim();
            if text.chars().count() > max {
                return Err(format!("`{key}` is longer than {max} characters"));
            }
            Ok(Some(text.to_owned()).filter(|text| !text.is_empty()))
        }
        Some(other) => Err(format!("`{key}` must be a string or null, got {other}")),
    }
}

/// `status`, a string one of `allowed`.
fn status(
    arguments: &mut Map<String, Value>,
    allowed: &[&str],
    narrowed: Option<&str>,
) -> std::result::Result<String, String> {
    let why = narrowed.map(|why| format!(" ({why})")).unwrap_or_default();
    match arguments.remove("status") {
        Some(Value::String(status)) if allowed.contains(&status.as_str()) => Ok(status),
        Some(Value::String(status)) => Err(format!(
            "status `{status}` is not allowed now{why}; allowed: {}",
            allowed.join(", ")
        )),
        Some(other) => Err(format!("`status` must be one of {}, got {other}", allowed.join(", "))),
        None => Err(format!("`status` is required: one of {}", allowed.join(", "))),
    }
}

/// A plan list: non-empty strings, at most [`MAX_PLAN_ITEMS`].
fn plan_items(value: Option<Value>) -> std::result::Result<Vec<String>, String> {
    let Some(Value::Array(values)) = value else {
        return Err("`plan` must be an array of steps (strings)".to_owned());
    };
    if values.len() > MAX_PLAN_ITEMS {
        return Err(format!(
            "the plan has {} steps; at most {MAX_PLAN_ITEMS} are allowed",
            values.len()
        ));
    }
    values
        .into_iter()
        .enumerate()
        .map(|(index, value)| match value {
            Value::String(text) if text.trim().is_empty() => {
                Err(format!("plan step {} is empty", index + 1))
            }
            Value::String(text) if text.trim().chars().count() > ITEM_MAX => {
                Err(format!("plan step {} is longer than {ITEM_MAX} characters", index + 1))
            }
            Value::String(text) => Ok(text.trim().to_owned()),
            other => Err(format!("plan step {} must be a string, got {other}", index + 1)),
        })
        .collect()
}

fn no_other_fields(arguments: &Map<String, Value>, what: &str) -> std::result::Result<(), String> {
    match arguments.keys().next() {
        Some(key) => Err(format!("unexpected field `{key}` in the {what}")),
        None => Ok(()),
    }
}

fn parse_plan(response: &Response, mode: DecideMode) -> std::result::Result<Vec<String>, String> {
    let mut arguments = forced_arguments(response, mode, PLAN.tool)?;
    status(&mut arguments, &["planned"], None)?;
    let items = plan_items(arguments.remove("plan"))?;
    no_other_fields(&arguments, "plan")?;
    Ok(items)
}

/// A thought, checked against the field-rule matrix (seed §5.2).
fn parse_thought(
    response: &Response,
    mode: DecideMode,
    statuses: &[&str],
    narrowed: Option<&str>,
    tools: &[&str],
) -> std::result::Result<Thought, String> {
    let mut arguments = forced_arguments(response, mode, THOUGHT.tool)?;
    let status = status(&mut arguments, statuses, narrowed)?;
    let current_step = optional_text(&mut arguments, "current_step", STEP_MAX)?;
    let question = optional_text(&mut arguments, "question", QUESTION_MAX)?;
    let answer = optional_text(&mut arguments, "response", RESPONSE_MAX)?;
    let next_action = match arguments.remove("next_action") {
        None | Some(Value::Null) => None,
        Some(value) => Some(value),
    };
    no_other_fields(&arguments, "thought")?;
    let must_be_empty = |field: &str, present: bool| match present {
        true => Err(format!("status `{status}` needs `{field}` to be null")),
        false => Ok(()),
    };
    let required = |field: &str| format!("status `{status}` needs `{field}`");
    let decision = match status.as_str() {
        "continue" => {
            must_be_empty("question", question.is_some())?;
            must_be_empty("response", answer.is_some())?;
            let Some(next_action) = next_action else {
                return Err(required("next_action {tool, args}"));
            };
            ThoughtDecision::Continue(next_action_of(next_action, tools)?)
        }
        "ask_user" => {
            must_be_empty("next_action", next_action.is_some())?;
            must_be_empty("response", answer.is_some())?;
            ThoughtDecision::AskUser(question.ok_or_else(|| required("question"))?)
        }
        _ => {
            must_be_empty("next_action", next_action.is_some())?;
            must_be_empty("question", question.is_some())?;
            ThoughtDecision::Done(answer)
        }
    };
    let current_step = match (&decision, current_step) {
        (ThoughtDecision::Done(_), step) => step.unwrap_or_default(),
        (_, Some(step)) => step,
        (_, None) => return Err(required("current_step")),
    };
    Ok(Thought { current_step, decision })
}

/// `next_action`: `{tool, args}` naming one of `tools`.
fn next_action_of(value: Value, tools: &[&str]) -> std::result::Result<Action, String> {
    let Value::Object(mut map) = value else {
        return Err(format!("`next_action` must be an object {{tool, args}}, got {value}"));
    };
    let Some(Value::String(tool)) = map.remove("tool") else {
        return Err("`next_action.tool` must name an action".to_owned());
    };
    let args = match (map.remove("args"), map.remove("input")) {
        (Some(args), None) | (None, Some(args)) => args,
        (None, None) => return Err("`next_action` needs `args`".to_owned()),
        (Some(_), Some(_)) => {
            return Err("`next_action` takes `args` or `input`, not both".to_owned());
        }
    };
    no_other_fields(&map, "next_action")?;
    if !tools.contains(&tool.as_str()) {
        return Err(format!(
            "`{tool}` is not an action a step can take now; allowed: {}",
            tools.join(", ")
        ));
    }
    // The seed's `input` is a string: the command of the built-in tools.
    let args = match args {
        Value::String(command) if tool == "todo" || tool == "schedule" => {
            json!({"command": command})
        }
        args => args,
    };
    action_from(&tool, args).map_err(|invalid| format!("next_action: {}", invalid.message))
}

/// A replan, checked against its rules (seed §5.3).
fn parse_replan(response: &Response, mode: DecideMode) -> std::result::Result<Replan, String> {
    let mut arguments = forced_arguments(response, mode, REPLAN.tool)?;
    let status = status(&mut arguments, &["replanned", "done"], None)?;
    let plan = arguments.remove("plan");
    let answer = optional_text(&mut arguments, "response", RESPONSE_MAX)?;
    no_other_fields(&arguments, "replan")?;
    if status == "done" {
        if let Some(plan) = plan.filter(|plan| !plan.is_null()) {
            plan_items(Some(plan))?;
        }
        return answer
            .map(Replan::Done)
            .ok_or_else(|| "status `done` needs `response`: the final answer".to_owned());
    }
    let items = plan_items(plan)?;
    if items.is_empty() {
        return Err("status `replanned` needs a non-empty `plan` (or say done)".to_owned());
    }
    Ok(Replan::Replanned(items))
}

/// The step line of a note: step, budgets and the reasoning level.
fn step_line(run: &Run, task: &TaskState) -> String {
    budget_line(run, &format!("Step {} of {}", task.step_count + 1, run.config.budgets.max_turns))
}

fn plan_lines(task: &TaskState) -> String {
    if task.plan_items.is_empty() {
        return "Plan: empty\n".to_owned();
    }
    let mut text = String::from("Plan:\n");
    for (index, item) in task.plan_items.iter().enumerate() {
        let mark = if index < task.current_plan_index {
            "[x]"
        } else if index == task.current_plan_index {
            "[>]"
        } else {
            "[ ]"
        };
        text.push_str(&format!("{mark} {}. {item}\n", index + 1));
    }
    text
}

fn clarification_lines(task: &TaskState) -> String {
    let mut text = String::new();
    for clarification in &task.clarification_history {
        text.push_str(&format!(
            "You asked: {} — the user answered: {}\n",
            clarification.question, clarification.answer
        ));
    }
    text
}

fn plan_note(run: &Run, space: &ActionSpace, attempt: u32) -> String {
    let mut note = format!("Task: {}\n", run.state.task);
    note.push_str(&format!("Actions a step can use: {}.\n", step_tools(space).join(", ")));
    if attempt > 1 {
        note.push_str("Your last plan was not valid (see above): send a valid one.\n");
    }
    note.push_str(&format!(
        "Call {} with status \"planned\" and plan: the steps of this task, in order, each \
         a short sentence in the task's own words saying what to find out or do (not the names \
         of actions); at most {MAX_PLAN_ITEMS}, [] when nothing needs doing. For example, for \
         \"How many lines does notes.txt have?\": [\"count the lines of notes.txt with a skill's \
         script\", \"answer with the count\"]. Only plan: do not answer the task here.",
        PLAN.tool
    ));
    note
}

fn thought_note(
    run: &Run,
    task: &TaskState,
    space: &ActionSpace,
    statuses: &[&str],
    narrowed: Option<&str>,
) -> String {
    let mut note = step_line(run, task);
    push_notice(run, &mut note);
    note.push_str(&plan_lines(task));
    note.push_str(&skills_lines(run));
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str(&clarification_lines(task));
    match plan_item(task) {
        Some((index, total, item)) => {
            note.push_str(&format!("Current plan item {index}/{total}: {item}\n"));
        }
        None => note.push_str("There is no plan item to work on.\n"),
    }
    if let Some(id) = &task.last_ok_observation {
        note.push_str(&format!(
            "The last action worked ({id}): if its result completes this item, say done with \
             that result as response.\n"
        ));
    }
    note.push_str(&format!("Call {} with one status:\n", THOUGHT.tool));
    for status in statuses {
        let line = match *status {
            "continue" => {
                let mut line = format!(
                    "- continue: current_step (what you do now for this item) and next_action \
                     {{\"tool\", \"args\"}} with tool one of: {}",
                    step_tools(space).join(", ")
                );
                if let Some(why) = &space.note {
                    line.push_str(&format!(" ({why})"));
                }
                line.push_str("; question and response null\n");
                line
            }
            "ask_user" => "- ask_user: current_step and question (only when the task lacks \
                           information only the user has); next_action and response null\n"
                .to_owned(),
            _ => "- done: this item is finished; response: its result in a sentence (or null); \
                  next_action and question null\n"
                .to_owned(),
        };
        note.push_str(&line);
    }
    if let Some(why) = narrowed {
        note.push_str(&format!("Only {} now: {why}.", statuses.join(" or ")));
    }
    note.trim_end().to_owned()
}

fn replan_note(run: &Run, task: &TaskState) -> String {
    let mut note = step_line(run, task);
    push_notice(run, &mut note);
    note.push_str(&plan_lines(task));
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str(&clarification_lines(task));
    if let Some(trigger) = &task.replan_trigger {
        note.push_str(&format!("Review the plan: {trigger}.\n"));
    }
    if let Some(result) = &task.pending_final_response {
        note.push_str(&format!("Result of the finished item: {result}\n"));
    }
    note.push_str(&format!(
        "Call {}: status \"replanned\" with plan: the steps still to do, in order (not \
         empty), response null; or status \"done\" with response: the final answer for the user, \
         with the results from the observations.",
        REPLAN.tool
    ));
    note
}

#[cfg(test)]
mod tests {
    use model_adapter::ToolCall;
    use pretty_assertions::assert_eq;

    use super::*;

    fn call(name: &str, arguments: Value) -> Response {
        Response {
            tool_calls: vec![ToolCall { id: "c".into(), name: name.into(), arguments }],
            ..Response::default()
        }
    }

    /// The contract table (`tests/data/ptr/contracts.json`): each case is an answer to one
    /// phase and what it must parse as, or the start of the error it must give.
    #[test]
    fn contracts_table() {
        let table: Value =
            serde_json::from_str(include_str!("../../tests/data/ptr/contracts.json")).unwrap();
        let tools = ["select_skills", "todo", "schedule"];
        for case in table.as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let phase = case["phase"].as_str().unwrap();
            let statuses: Vec<&str> = case
                .get("statuses")
                .and_then(Value::as_array)
                .map(|list| list.iter().filter_map(Value::as_str).collect())
                .unwrap_or_else(|| vec!["continue", "ask_user", "done"]);
            let response = call(phase, case["arguments"].clone());
            let got: std::result::Result<Value, String> = match phase {
                "plan" => parse_plan(&response, DecideMode::Tools).map(|items| json!(items)),
                "thought" => parse_thought(&response, DecideMode::Tools, &statuses, None, &tools)
                    .map(|thought| {
                        let detail = match &thought.decision {
                            ThoughtDecision::Continue(action) => json!(action),
                            ThoughtDecision::AskUser(question) => json!(question),
                            ThoughtDecision::Done(response) => json!(response),
                        };
                        json!([thought.decision.status(), thought.current_step, detail])
                    }),
                _ => parse_replan(&response, DecideMode::Tools).map(|replan| match replan {
                    Replan::Replanned(items) => json!(["replanned", items]),
                    Replan::Done(answer) => json!(["done", answer]),
                }),
            };
            match (case.get("expect"), case.get("error").and_then(Value::as_str), got) {
                (Some(want), None, Ok(got)) => assert_eq!(&got, want, "case {name}"),
                (None, Some(start), Err(message)) => {
                    assert!(message.starts_with(start), "case {name}: {message}");
                }
                (_, _, got) => panic!("case {name}: got {got:?}"),
            }
        }
    }

    #[test]
    fn a_replan_skips_the_items_already_finished() {
        let mut task = TaskState::new(1);
        task.plan_initialized = true;
        task.completed_items = vec!["a".into()];
        task.replace_plan(vec!["a".into(), "b".into()]);
        assert_eq!((task.current_plan_index, task.current_item()), (1, Some("b")));
        task.replace_plan(vec!["b".into(), "a".into()]);
        assert_eq!(task.current_plan_index, 0);
        task.replace_plan(vec!["a".into()]);
        assert_eq!((task.current_plan_index, task.current_item()), (1, None));
        assert_eq!(task.check_invariants(), Ok(()));
    }

    #[test]
    fn broken_invariants_are_named() {
        let mut task = TaskState::new(1);
        task.plan_initialized = true;
        task.plan_items = vec!["a".into()];
        task.current_plan_index = 2;
        assert!(task.check_invariants().unwrap_err().contains("current_plan_index 2 is past"));
        task.current_plan_index = 1;
        task.step_count = 1;
        assert!(task.check_invariants().unwrap_err().contains("do not add up"));
        task.failed_steps = 1;
        assert_eq!(task.check_invariants(), Ok(()));
    }

    #[test]
    fn failures_and_an_empty_plan_narrow_the_statuses() {
        let mut task = TaskState::new(1);
        assert_eq!(task.thought_statuses(true, None).0, ["ask_user", "done"]);
        task.plan_items = vec!["a".into()];
        assert_eq!(task.thought_statuses(true, None), (vec!["continue", "ask_user", "done"], None));
        assert_eq!(task.thought_statuses(false, None).0, ["continue", "done"]);
        task.consecutive_failures = FAILURE_THRESHOLD;
        assert_eq!(
            task.thought_statuses(true, None),
            (vec!["ask_user", "done"], Some("2 steps failed in a row".to_owned()))
        );
        assert_eq!(task.thought_statuses(false, None).0, ["done"]);
        task.consecutive_failures = 0;
        assert_eq!(
            task.thought_statuses(true, Some("answer now")),
            (vec!["ask_user", "done"], Some("answer now".to_owned()))
        );
    }
}
