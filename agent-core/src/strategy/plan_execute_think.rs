//! `plan-execute-think` (seed 003): rounds of
//!
//! 1. **Plan** — one model call forced to the named tool `plan_tool_call` (or, in
//!    [`DecideMode::Json`], one JSON document under its schema): `{reasoning, steps: [{tool,
//!    args}], complexity?}` with 1–8 steps, each an action the turn's action space allows
//!    (`final_answer` is never a step). More than 8 steps, no steps, or a step that is not an
//!    action is rejected: the round ends with an `invalid_action` observation, counted in
//!    `strategy_state.rejected_plans` and by the failure caps.
//! 2. **Execute** — the steps one after the other through [`Run::act`] (guardrails, budgets,
//!    execution, observation; the action space is derived again before each step). A step
//!    that does not end `ok` ends the batch; so does the tool-call or script-run limit.
//! 3. **Think** — one model call forced to the named tool `think`: `{internal_analysis,
//!    user_summary, task_completed, next_steps_preview?}`; `user_summary` must be non-empty.
//!    `task_completed: true` ends the run `completed` with that summary.
//!
//! One round is one turn: `max_turns` counts rounds, and `max_rounds` by the task's complexity
//! (the first plan's `complexity`: simple 2, medium 3, complex 5; medium until a plan says)
//! ends the run `max_turns` too. Every way out gives a text: the last `user_summary`, else one
//! forced summary call without tools ([`Run::degrade`]), else a deterministic text.

use model_adapter::{Message, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::action::{Action, ActionSpace, action_from};
use crate::budget::Outcome;
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::EventKind;
use crate::guard;
use crate::run::{Ending, Run};
use crate::state::{ObservationStatus, Plan, PlanStep, StepStatus};

use super::{ask, finish_turn, forced_arguments, forced_request, skills_lines, start_turn};

/// The strategy's name in `AgentConfig::strategy`.
pub(super) const NAME: &str = "plan-execute-think";
/// The forced tool of the Plan phase.
const PLAN_TOOL: &str = "plan_tool_call";
/// The forced tool of the Think phase.
const THINK_TOOL: &str = "think";
/// Steps one plan may hold.
const MAX_STEPS: usize = 8;
const REASONING_MAX: usize = 300;
const ANALYSIS_MAX: usize = 600;
const SUMMARY_MAX: usize = 4_000;

/// How much work the task is, as the first plan judges it (seed 003's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Complexity {
    Simple,
    Medium,
    Complex,
}

impl Complexity {
    fn max_rounds(self) -> u32 {
        match self {
            Complexity::Simple => 2,
            Complexity::Medium => 3,
            Complexity::Complex => 5,
        }
    }

    fn steps_per_round(self) -> &'static str {
        match self {
            Complexity::Simple => "3-5",
            Complexity::Medium => "5-8",
            Complexity::Complex => "6-8",
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Complexity::Simple => "simple",
            Complexity::Medium => "medium",
            Complexity::Complex => "complex",
        }
    }
}

/// The strategy's state, kept in `RunState::strategy_state` (and so in `state.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
struct RoundState {
    strategy: &'static str,
    /// Rounds started.
    round: u32,
    /// The first plan's judgement (`None` until a plan gave one).
    complexity: Option<Complexity>,
    /// The round limit that judgement sets.
    max_rounds: u32,
    /// Plans rejected (too many steps, no steps, a step that is no action).
    rejected_plans: u32,
    /// The last think's `user_summary`: the answer when the run ends without completion.
    last_user_summary: Option<String>,
    /// The current round's batch stopped at the round time limit.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    timed_out: bool,
}

impl RoundState {
    fn complexity(&self) -> Complexity {
        self.complexity.unwrap_or(Complexity::Medium)
    }
}

/// A valid plan.
#[derive(Debug, Clone, PartialEq)]
struct RoundPlan {
    reasoning: Option<String>,
    complexity: Option<Complexity>,
    steps: Vec<Action>,
}

/// A valid think.
#[derive(Debug, Clone, PartialEq)]
struct Think {
    internal_analysis: String,
    user_summary: String,
    task_completed: bool,
}

/// Plan → execute → think, round after round (seed 003).
pub(super) async fn drive(run: &mut Run) -> Result<Ending> {
    let mut rounds = RoundState {
        strategy: NAME,
        round: 0,
        complexity: None,
        max_rounds: Complexity::Medium.max_rounds(),
        rejected_plans: 0,
        last_user_summary: None,
        timed_out: false,
    };
    loop {
        if run.cancel.is_cancelled() || run.recorded_stop(Outcome::Cancelled) {
            return run.degrade(Outcome::Cancelled, "the run was cancelled").await;
        }
        if let Some((outcome, reason)) = run.budget_exhausted() {
            return end(run, &rounds, outcome, &reason).await;
        }
        if rounds.round >= rounds.max_rounds {
            let reason = format!(
                "the round limit ({} for a {} task) was reached",
                rounds.max_rounds,
                rounds.complexity().as_str()
            );
            return end(run, &rounds, Outcome::MaxTurns, &reason).await;
        }
        run.refresh_tools()?;
        let space = guard::action_space(&run.state, &run.config);
        let note = plan_note(run, &rounds, &space);
        if let Some((outcome, reason)) = run.fit_context(note.chars().count()).await? {
            return end(run, &rounds, outcome, &reason).await;
        }
        // Compaction may have made observations recallable.
        let space = guard::action_space(&run.state, &run.config);
        let steps_allowed = step_actions(&space);
        let note = plan_note(run, &rounds, &space);
        rounds.round += 1;
        save(run, &rounds);
        let allowed =
            if steps_allowed.is_empty() { &[THINK_TOOL][..] } else { &[PLAN_TOOL, THINK_TOOL] };
        start_turn(
            run,
            note.chars().count(),
            allowed,
            Some(("round", json!([rounds.round, rounds.max_rounds]))),
        )?;
        // Plan (skipped when no action is left: only the think can conclude).
        let mut reasoning = Value::Null;
        let mut stop: Option<(Outcome, String)> = None;
        let mut executed = false;
        if !steps_allowed.is_empty() {
            let request = forced_request(
                run,
                &note,
                PLAN_TOOL,
                describe(PLAN_TOOL),
                plan_schema(&space, rounds.round),
            );
            match ask(run, "plan", request, None).await? {
                None => {}
                Some(response) => {
                    let parsed = parse_plan(&response, run.config.decide, &steps_allowed);
                    let tool_call_id = run.push_answer(&response);
                    match parsed {
                        Err(message) => {
                            rounds.rejected_plans += 1;
                            save(run, &rounds);
                            run.emit(
                                EventKind::ActionValidated,
                                json!({"action": null, "valid": false, "error": message}),
                            )?;
                            run.observe(
                                None,
                                ObservationStatus::InvalidAction,
                                &message,
                                tool_call_id.as_deref(),
                            )?;
                        }
                        Ok(plan) => {
                            reasoning =
                                run.record_reasoning_with(&response, plan.reasoning.as_deref());
                            if rounds.round == 1
                                && let Some(complexity) = plan.complexity
                            {
                                rounds.complexity = Some(complexity);
                                rounds.max_rounds = complexity.max_rounds();
                            }
                            if let Some(id) = tool_call_id {
                                run.context.push(Message::Tool {
                                    tool_call_id: id,
                                    content: format!(
                                        "plan accepted: {} steps; their results follow",
                                        plan.steps.len()
                                    ),
                                    is_error: false,
                                });
                            }
                            save(run, &rounds);
                            match execute(run, &mut rounds, &plan).await? {
                                Batch::Done => {}
                                Batch::Stopped(outcome, reason) => stop = Some((outcome, reason)),
                                Batch::Cancelled => {
                                    finish_turn(run, &reasoning)?;
                                    return run
                                        .degrade(Outcome::Cancelled, "the run was cancelled")
                                        .await;
                                }
                            }
                            executed = true;
                        }
                    }
                }
            }
        }
        // Think: after an executed batch, or when no action is left.
        if executed || steps_allowed.is_empty() {
            let note = think_note(run, &rounds, stop.as_ref().map(|(_, reason)| reason.as_str()));
            if let Some((outcome, reason)) = run.fit_context(note.chars().count()).await? {
                finish_turn(run, &reasoning)?;
                return end(run, &rounds, outcome, &reason).await;
            }
            let request = forced_request(
                run,
                &note,
                THINK_TOOL,
                describe(THINK_TOOL),
                think_schema(may_complete(run)),
            );
            match ask(run, "think", request, None).await? {
                None => {}
                Some(response) => {
                    let parsed = parse_think(&response, run.config.decide);
                    let tool_call_id = run.push_answer(&response);
                    match parsed {
                        Err(message) => {
                            run.observe(
                                None,
                                ObservationStatus::InvalidAction,
                                &message,
                                tool_call_id.as_deref(),
                            )?;
                        }
                        Ok(think) => {
                            let think_reasoning = run
                                .record_reasoning_with(&response, Some(&think.internal_analysis));
                            if reasoning.is_null() {
                                reasoning = think_reasoning;
                            }
                            if let Some(id) = tool_call_id {
                                run.context.push(Message::Tool {
                                    tool_call_id: id,
                                    content: "noted".to_owned(),
                                    is_error: false,
                                });
                            }
                            rounds.last_user_summary = Some(think.user_summary.clone());
                            save(run, &rounds);
                            if think.task_completed && may_complete(run) {
                                finish_turn(run, &reasoning)?;
                                return Ok(Ending {
                                    outcome: Outcome::Completed,
                                    final_text: think.user_summary,
                                });
                            }
                        }
                    }
                }
            }
        }
        finish_turn(run, &reasoning)?;
        if let Some((outcome, reason)) = stop {
            return end(run, &rounds, outcome, &reason).await;
        }
        if let Some(reason) = run.failures.stuck(&run.config) {
            let outcome = if run.failures.model_errors() > run.config.guard.retry_caps.model_error {
                Outcome::Error
            } else {
                Outcome::Stuck
            };
            return end(run, &rounds, outcome, &reason).await;
        }
    }
}

/// The guaranteed answer when the run ends without a completing think: the last
/// `user_summary`, else one forced summary call without tools, else a deterministic text.
async fn end(run: &mut Run, rounds: &RoundState, outcome: Outcome, reason: &str) -> Result<Ending> {
    match &rounds.last_user_summary {
        Some(summary) if outcome != Outcome::Cancelled => {
            Ok(Ending { outcome, final_text: summary.clone() })
        }
        Some(_) | None => run.degrade(outcome, reason).await,
    }
}

fn save(run: &mut Run, rounds: &RoundState) {
    run.state.strategy_state = serde_json::to_value(rounds).unwrap_or(Value::Null);
}

/// How a batch ended.
enum Batch {
    /// All steps ran, or a step failed (the think sees it).
    Done,
    /// A budget was hit: think once more, then end with this outcome.
    Stopped(Outcome, String),
    /// The run was cancelled: end now.
    Cancelled,
}

/// Runs the plan's steps in order; the plan (one step per action) is recorded with
/// `plan_created`/`plan_updated` before and after.
async fn execute(run: &mut Run, rounds: &mut RoundState, plan: &RoundPlan) -> Result<Batch> {
    let mut steps: Vec<PlanStep> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(index, action)| PlanStep {
            id: format!("r{}s{}", rounds.round, index + 1),
            title: action.summary(),
            status: StepStatus::Pending,
        })
        .collect();
    let goal = plan.reasoning.clone().unwrap_or_default();
    let kind =
        if run.state.plan.is_some() { EventKind::PlanUpdated } else { EventKind::PlanCreated };
    let current = Plan { goal: goal.clone(), steps: steps.clone(), ..Plan::default() };
    run.state.plan = Some(current.clone());
    run.emit(kind, json!({"plan": current, "round": rounds.round}))?;
    let mut batch = Batch::Done;
    let mut ran = 0;
    let started = std::time::Instant::now();
    rounds.timed_out = false;
    for (index, action) in plan.steps.iter().enumerate() {
        // Seed 003's round timeout: a batch that has run too long goes to think.
        if index > 0
            && let Some(limit) = run.config.budgets.round_timeout_ms
            && run.deadline_passed("round", index as u64, started, limit)?
        {
            rounds.timed_out = true;
            break;
        }
        if run.state.task_counters().tool_calls >= run.config.budgets.max_tool_calls {
            batch = Batch::Stopped(
                Outcome::MaxToolCalls,
                format!("the tool-call limit ({}) was reached", run.config.budgets.max_tool_calls),
            );
            break;
        }
        let space = guard::action_space(&run.state, &run.config);
        let stopped = run.act(action, &space, None).await?;
        ran = index + 1;
        let ok = run.state.actions.last().is_some_and(|record| {
            record.status == ObservationStatus::Ok && record.action.as_ref() == Some(action)
        });
        steps[index].status = if ok { StepStatus::Done } else { StepStatus::Skipped };
        match stopped {
            Some(Outcome::Cancelled) => return Ok(Batch::Cancelled),
            Some(outcome) => {
                batch = Batch::Stopped(
                    outcome,
                    format!(
                        "the script-run limit ({}) was reached",
                        run.config.budgets.max_script_runs
                    ),
                );
                break;
            }
            None if !ok => break,
            None => {}
        }
    }
    let current = Plan { goal, steps, ..Plan::default() };
    run.state.plan = Some(current.clone());
    run.emit(
        EventKind::PlanUpdated,
        json!({"plan": current, "round": rounds.round, "ran": ran, "not_run": plan.steps.len() - ran}),
    )?;
    Ok(batch)
}

/// The actions a step may be now: the turn's action space without `final_answer`.
fn step_actions(space: &ActionSpace) -> Vec<&'static str> {
    space.allowed().into_iter().filter(|name| *name != "final_answer").collect()
}

/// The schema of `plan_tool_call`: steps drawn from the actions the space allows now.
fn plan_schema(space: &ActionSpace, round: u32) -> Value {
    let variants: Vec<Value> = step_actions(space)
        .into_iter()
        .map(|name| {
            json!({
                "type": "object",
                "properties": {"tool": {"const": name}, "args": space.args_schema(name)},
                "required": ["tool", "args"],
                "propertyOrdering": ["tool", "args"],
                "additionalProperties": false,
            })
        })
        .collect();
    let mut properties = Map::new();
    properties.insert("reasoning".into(), json!({"type": "string", "maxLength": REASONING_MAX}));
    properties.insert(
        "steps".into(),
        json!({"type": "array", "items": {"anyOf": variants}, "minItems": 1, "maxItems": MAX_STEPS}),
    );
    let mut required = vec!["reasoning", "steps"];
    if round == 1 {
        properties.insert("complexity".into(), json!({"enum": ["simple", "medium", "complex"]}));
        required.push("complexity");
    }
    // Sent in this order (model-adapter): the reasoning first, the judgement, then the steps.
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "propertyOrdering": ["reasoning", "complexity", "steps"],
        "additionalProperties": false,
    })
}

/// The schema of `think`.
fn think_schema(may_complete: bool) -> Value {
    let completed = if may_complete { json!({"type": "boolean"}) } else { json!({"const": false}) };
    json!({
        "type": "object",
        "properties": {
            "internal_analysis": {"type": "string", "maxLength": ANALYSIS_MAX},
            "user_summary": {"type": "string", "minLength": 1, "maxLength": SUMMARY_MAX},
            "task_completed": completed,
            "next_steps_preview": {"type": "string", "maxLength": REASONING_MAX},
        },
        "required": ["internal_analysis", "user_summary", "task_completed"],
        // What the results showed and what the user reads come before the verdict.
        "propertyOrdering": ["internal_analysis", "user_summary", "task_completed", "next_steps_preview"],
        "additionalProperties": false,
    })
}

fn parse_plan(
    response: &Response,
    mode: DecideMode,
    allowed: &[&str],
) -> std::result::Result<RoundPlan, String> {
    let mut arguments = forced_arguments(response, mode, PLAN_TOOL)?;
    let reasoning = match arguments.remove("reasoning") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text).filter(|text| !text.trim().is_empty()),
        Some(other) => return Err(format!("`reasoning` must be a string, got {other}")),
    };
    let complexity = match arguments.remove("complexity") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value(value)
                .map_err(|_| "`complexity` must be one of simple, medium, complex".to_owned())?,
        ),
    };
    arguments.remove("estimated_steps");
    let Some(Value::Array(steps)) = arguments.remove("steps") else {
        return Err("the plan needs `steps`: an array of 1-8 {tool, args}".to_owned());
    };
    if let Some(key) = arguments.keys().next() {
        return Err(format!("unexpected field `{key}` in the plan"));
    }
    if steps.is_empty() {
        return Err("the plan has no steps; plan 1-8 steps".to_owned());
    }
    if steps.len() > MAX_STEPS {
        return Err(format!(
            "the plan has {} steps; at most {MAX_STEPS} steps per round",
            steps.len()
        ));
    }
    let mut actions = Vec::with_capacity(steps.len());
    for (index, step) in steps.into_iter().enumerate() {
        let Value::Object(mut step) = step else {
            return Err(format!("step {} must be an object {{tool, args}}", index + 1));
        };
        let Some(Value::String(tool)) = step.remove("tool") else {
            return Err(format!("step {} needs `tool`, the name of an action", index + 1));
        };
        if !allowed.contains(&tool.as_str()) {
            return Err(format!(
                "step {}: `{tool}` is not a step allowed now; allowed: {}",
                index + 1,
                allowed.join(", ")
            ));
        }
        let args = step
            .remove("args")
            .or_else(|| step.remove("arguments"))
            .unwrap_or_else(|| Value::Object(Map::new()));
        let action = action_from(&tool, args)
            .map_err(|invalid| format!("step {}: {}", index + 1, invalid.message))?;
        actions.push(action);
    }
    Ok(RoundPlan { reasoning, complexity, steps: actions })
}

fn parse_think(response: &Response, mode: DecideMode) -> std::result::Result<Think, String> {
    let arguments = forced_arguments(response, mode, THINK_TOOL)?;
    let text = |key: &str| arguments.get(key).and_then(Value::as_str).unwrap_or_default().trim();
    let user_summary = text("user_summary");
    if user_summary.is_empty() {
        return Err("`think` needs a non-empty `user_summary` for the user".to_owned());
    }
    let task_completed = match arguments.get("task_completed") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(done)) => *done,
        Some(other) => return Err(format!("`task_completed` must be true or false, got {other}")),
    };
    Ok(Think {
        internal_analysis: text("internal_analysis").to_owned(),
        user_summary: user_summary.to_owned(),
        task_completed,
    })
}

/// The Plan phase's note: round and budgets, the last plan, the skills, the task, the
/// actions a step may be.
fn plan_note(run: &Run, rounds: &RoundState, space: &ActionSpace) -> String {
    let mut note = round_line(run, rounds, rounds.round + 1);
    super::push_notice(run, &mut note);
    if let Some(plan) = &run.state.plan {
        note.push_str("Last round's plan:\n");
        note.push_str(&plan.render());
    }
    note.push_str(&skills_lines(run));
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str(&format!("Step actions allowed now: {}", step_actions(space).join(", ")));
    if let Some(why) = &space.note {
        note.push_str(&format!(" ({why})"));
    }
    let complexity = if rounds.round == 0 {
        "; and judge the task's complexity (simple, medium, complex)".to_owned()
    } else {
        format!(" (about {} steps suit this task)", rounds.complexity().steps_per_round())
    };
    note.push_str(&format!(
        ".\nPlan the next batch: call {PLAN_TOOL} with 1-{MAX_STEPS} steps {{tool, args}} that \
         run in order{complexity}. A skill must be selected before its files or scripts are used."
    ));
    note
}

/// The Think phase's note.
fn think_note(run: &Run, rounds: &RoundState, stopped: Option<&str>) -> String {
    let mut note = round_line(run, rounds, rounds.round);
    // The figures next to where the summary is asked for (the local 1.5B summarised a batch of
    // eight conversions as "the units have been correctly converted", without one figure).
    note.push_str(&super::results_lines(run));
    note.push_str(&format!("Task: {}\n", run.state.task));
    if let Some(reason) = stopped {
        note.push_str(&format!("The run stops after this think: {reason}.\n"));
    }
    if rounds.timed_out {
        note.push_str(&format!(
            "The round's time limit ({} ms) passed: the rest of the batch did not run.\n",
            run.config.budgets.round_timeout_ms.unwrap_or_default()
        ));
    }
    let unrun = unrun_scripts(run);
    if !unrun.is_empty() {
        note.push_str(&format!("Scripts selected but not run yet: {}.\n", unrun.join(", ")));
    }
    if !may_complete(run) {
        note.push_str(
            "task_completed must be false this round: it only loaded instructions, and their \
             scripts have not run.\n",
        );
    }
    note.push_str(&format!(
        "Call {THINK_TOOL}: internal_analysis (what the results show), user_summary (the \
         answer the user reads, with the figures and facts the results give, not a description \
         of what was done), task_completed (true \
         only when an observation above holds the answer; loaded instructions are not a \
         result), next_steps_preview."
    ));
    note
}

/// The scripts of selected skills that no action of the run has run.
fn unrun_scripts(run: &Run) -> Vec<String> {
    let ran = |skill: &str, script: &str| {
        run.state.actions.iter().any(|record| {
            matches!(&record.action, Some(Action::RunScript { skill: s, script: p, .. })
                if s == skill && p == script)
        })
    };
    run.state
        .selected
        .iter()
        .flat_map(|skill| skill.scripts.iter().map(move |script| (skill, script)))
        .filter(|(skill, script)| !ran(&skill.name, script))
        .map(|(skill, script)| format!("{}/{script}", skill.name))
        .collect()
}

/// Whether this round's think may say the task is done. Not when the round's batch only
/// selected skills while their scripts wait to run: loaded instructions are no result, and a
/// small model otherwise "completes" with a number it never computed (the action automaton of
/// `notes/small-models.md`: the state narrows what may be written).
fn may_complete(run: &Run) -> bool {
    let turn = run.state.counters.turns;
    let mut batch = run.state.actions.iter().filter(|record| record.turn == turn).peekable();
    if batch.peek().is_none() {
        return true;
    }
    let only_selected =
        batch.all(|record| matches!(record.action, Some(Action::SelectSkills { .. })));
    !only_selected || unrun_scripts(run).is_empty()
}

fn round_line(run: &Run, rounds: &RoundState, round: u32) -> String {
    let budgets = &run.config.budgets;
    let counters = &run.state.task_counters();
    format!(
        "Round {round} of {} · tool calls {}/{} · script runs {}/{}{}\n",
        rounds.max_rounds,
        counters.tool_calls,
        budgets.max_tool_calls,
        counters.script_runs,
        budgets.max_script_runs,
        crate::reasoning::reasoning_signal(&run.state, &run.input_sizes)
    )
}

/// What the forced tool `tool` of this strategy does, as the model reads it.
fn describe(tool: &str) -> &'static str {
    if tool == PLAN_TOOL {
        "Plan the next batch of 1-8 actions over the skills; they run in order."
    } else {
        "Assess the round's results and say whether the task is done."
    }
}
