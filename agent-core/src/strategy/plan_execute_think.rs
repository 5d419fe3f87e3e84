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
//! ends the run `max_turns` too. From record format 12 a round whose batch only selected
//! skills whose scripts wait to run goes on to the next plan without a think and does not
//! count toward `max_rounds` (twice a run at most); a plan must hold a step for each of the
//! task's values no script call has used yet (when two or more are left); and the round after
//! a refused answer whose note names every value the answer needs is a think alone; a think
//! may not complete after a round whose every step was refused while the task has no result.
//! From format 15 a batch ends after a step that selected a skill (the steps after it were
//! planned before its instructions were read), and the think after a refusal that names every
//! value the answer needs runs past the round limit (once a task: such a refusal comes once).
//! From format 31 a step that repeats a script run or tool call that already worked is marked
//! done without running again, and the batch goes on ([`kernel::already_done`]); and a round
//! whose every step was refused does not count toward `max_rounds` (twice a run at most).
//! From format 32 the task's first selection, when the skill ranking is sure of one skill, is
//! the runtime's, in a turn of its own before the first round ([`kernel::sure_selection`]), and
//! a step refused before it ran (a guardrail, an example's value) does not end the batch.
//! From format 37 a think that does not complete leaves no ending behind: a limit ends the
//! run with an answer refused only as incomplete (format 27), else as [`Run::degrade`] does.
//! Every way out gives a text: the last `user_summary` kept, else one
//! forced summary call without tools ([`Run::degrade`]), else a deterministic text.

use model_adapter::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::action::{Action, action_from};
use crate::budget::Outcome;
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::{Payload, PlanChange};
use crate::grounding;
use crate::run::{Ending, Run, Stop};
use crate::space::ActionSpace;
use crate::state::{ActionRecord, ObservationStatus, Plan, PlanStep, StepStatus};

use super::kernel::{
    self, Accepted, Batch, BatchEnd, Contract, Flow, PlanReply, Position, Prepared, Strategy,
    forced_arguments,
};
use super::notes::{budget_line, push_notice, results_lines, skills_lines};

/// The strategy's name in `AgentConfig::strategy`.
pub(super) const NAME: &str = "plan-execute-think";
/// The forced contract of the Plan phase.
const PLAN: Contract = Contract {
    tool: "plan_tool_call",
    description: "Plan the next batch of 1-8 actions over the skills; they run in order.",
};
/// The forced contract of the Think phase.
const THINK: Contract = Contract {
    tool: "think",
    description: "Assess the round's results and say whether the task is done.",
};
/// The record format from which a step refused before it ran does not end its round's batch
/// (a step that ran and failed still does).
const REFUSED_STEP_SINCE_FORMAT: u32 = 32;
/// Steps one plan may hold.
const MAX_STEPS: usize = 8;
/// Rounds that only selected skills and go on without a think nor counting toward the round
/// limit (format 12); a later one is a round like any other.
const MAX_PREPARATION_ROUNDS: u32 = 2;
/// Rounds whose every step was refused that do not count toward the round limit (format 31);
/// a later one is a round like any other.
const MAX_REFUSED_ROUNDS: u32 = 2;
const REASONING_MAX: usize = 300;
/// The bound of a plan's reasoning and a think's next-step preview from format 17: at 300 the
/// local 1.5B filled the plan's reasoning to the bound in half its plans (median 283
/// characters, ~65 of a plan call's ~100 generated tokens).
const REASONING_SHORT: usize = 120;
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
    /// Rounds that only selected skills whose scripts wait to run (format 12): they skip the
    /// think and do not count toward `max_rounds`.
    #[serde(skip_serializing_if = "is_zero")]
    preparation_rounds: u32,
    /// Rounds past the limit, each a think alone after a refusal that named every value the
    /// answer needs (format 15).
    #[serde(skip_serializing_if = "is_zero")]
    closing_rounds: u32,
    /// Rounds whose every step was refused (format 31): they do not count toward
    /// `max_rounds` (twice a run at most).
    #[serde(skip_serializing_if = "is_zero")]
    refused_rounds: u32,
    /// Plans rejected (too many steps, no steps, a step that is no action).
    rejected_plans: u32,
    /// The last think's `user_summary` that was taken (until format 37; from it, a think that
    /// does not complete leaves none), or (format 27) refused only as incomplete: the answer
    /// when the run ends without completion.
    last_user_summary: Option<String>,
    /// The current round's batch stopped at the round time limit.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    timed_out: bool,
    /// The note that refused the last think's answer (kept in memory only: a re-run of the
    /// record refuses it again).
    #[serde(skip)]
    refusal: Option<String>,
}

impl RoundState {
    fn complexity(&self) -> Complexity {
        self.complexity.unwrap_or(Complexity::Medium)
    }

    /// The last round the run may start: the limit, moved on by each preparation round and
    /// each closing think.
    fn last_round(&self) -> u32 {
        self.max_rounds + self.preparation_rounds + self.closing_rounds + self.refused_rounds
    }
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if")]
fn is_zero(value: &u32) -> bool {
    *value == 0
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
#[derive(Debug)]
pub(super) struct PlanExecuteThink {
    rounds: RoundState,
}

impl PlanExecuteThink {
    pub(super) fn begin() -> PlanExecuteThink {
        PlanExecuteThink {
            rounds: RoundState {
                strategy: NAME,
                round: 0,
                complexity: None,
                max_rounds: Complexity::Medium.max_rounds(),
                preparation_rounds: 0,
                closing_rounds: 0,
                refused_rounds: 0,
                rejected_plans: 0,
                last_user_summary: None,
                timed_out: false,
                refusal: None,
            },
        }
    }
}

impl Strategy for PlanExecuteThink {
    /// The run's budgets, then the round limit the task's complexity sets — except for the
    /// think a refusal that names every value the answer needs asks for (format 15): the local
    /// 1.5B ran both totals of "add the total of amount to the total of units" in its last two
    /// rounds, was refused twice with the sum to work out, and the limit ended the run before it
    /// could answer.
    fn limit(&self, run: &Run) -> Option<Stop> {
        let rounds = &self.rounds;
        let closing = run.format >= grounding::SELECT_ENDS_BATCH_SINCE_FORMAT
            && run.grounding.answer_from_results;
        run.budget_exhausted().or_else(|| {
            (rounds.round >= rounds.last_round() && !closing).then(|| {
                let reason = format!(
                    "the round limit ({} for a {} task) was reached",
                    rounds.max_rounds,
                    rounds.complexity().as_str()
                );
                Stop::new(Outcome::MaxTurns, reason)
            })
        })
    }

    async fn turn(&mut self, run: &mut Run) -> Result<Flow> {
        let rounds = &mut self.rounds;
        let space_of = |run: &Run| run.action_space();
        let note_of = |run: &Run, space: &ActionSpace| plan_note(run, rounds, space);
        let Prepared { space, note } = match kernel::prepare(run, space_of, note_of).await? {
            Ok(prepared) => prepared,
            Err(stop) => return Ok(Flow::Stop(stop)),
        };
        // The task's first selection when the ranking is sure of the skill (format 32): the
        // runtime makes it in a turn of its own that is no round, so the first plan is made
        // with the skill's instructions read (a plan's steps after a selection are not run:
        // format 15).
        if let Some(stop) = kernel::sure_selection(run, &space, &note).await? {
            return Ok(stop.map_or(Flow::Continue, Flow::Stop));
        }
        // A refused answer whose note names every value it needs is answered by a think alone
        // (format 12): told "work out their sum (1705.47 + 212)", the local 1.5B had to plan a
        // step first, ran a total again, and answered with it.
        let rethink = std::mem::take(&mut run.grounding.answer_from_results);
        let steps_allowed = if rethink { Vec::new() } else { step_actions(&space) };
        rounds.round += 1;
        if rounds.round > rounds.last_round() {
            rounds.closing_rounds += 1;
        }
        save(run, rounds);
        let allowed =
            if steps_allowed.is_empty() { &[THINK.tool][..] } else { &[PLAN.tool, THINK.tool] };
        kernel::start_turn(
            run,
            note.chars().count(),
            allowed,
            Some(Position::Round([rounds.round, rounds.last_round()])),
        )?;
        // Plan (skipped when no action is left: only the think can conclude).
        let mut reasoning = None;
        let mut stop: Option<Stop> = None;
        let mut executed = false;
        if !steps_allowed.is_empty() {
            let batch = unused_values(run, &space).len().clamp(1, MAX_STEPS);
            let schema = plan_schema(&space, rounds.round, batch, reasoning_max(run));
            let parse = |response: &Response, mode| parse_plan(response, mode, &steps_allowed);
            if let Some(reply) =
                kernel::forced_call(run, "plan", PLAN, &note, schema, parse).await?
            {
                match reply.into_plan(run, |plan: &RoundPlan| plan.reasoning.as_deref())? {
                    PlanReply::Rejected => {
                        rounds.rejected_plans += 1;
                        save(run, rounds);
                    }
                    PlanReply::Accepted { plan, reasoning: stated, tool_call_id } => {
                        reasoning = stated;
                        if rounds.round == 1
                            && let Some(complexity) = plan.complexity
                        {
                            rounds.complexity = Some(complexity);
                            rounds.max_rounds = complexity.max_rounds();
                        }
                        kernel::acknowledge(
                            run,
                            tool_call_id,
                            format!(
                                "plan accepted: {} steps; their results follow",
                                plan.steps.len()
                            ),
                        );
                        save(run, rounds);
                        match execute(run, rounds, &plan).await? {
                            BatchEnd::Done { .. } => {}
                            BatchEnd::Stopped(stopped) if stopped.is_cancelled() => {
                                kernel::finish_turn(run, reasoning)?;
                                return Ok(Flow::Stop(stopped));
                            }
                            BatchEnd::Stopped(stopped) => stop = Some(stopped),
                        }
                        executed = true;
                    }
                }
            }
        }
        // A batch that only selected skills whose scripts wait to run has nothing to assess
        // (format 12): the next round plans the scripts at once, and this one does not count
        // toward the limit. The local 1.5B spent a think, and one of its two or three rounds,
        // on every selection ("The user has selected the unit-converter skill …").
        let preparation = executed
            && stop.is_none()
            && run.format >= grounding::ROUNDS_SINCE_FORMAT
            && rounds.preparation_rounds < MAX_PREPARATION_ROUNDS
            && only_prepared(run);
        if preparation {
            rounds.preparation_rounds += 1;
            save(run, rounds);
        }
        // A round whose every step was refused ran nothing: from format 31 it does not count
        // toward the limit either (twice a run at most). Judged "simple" (two rounds), the
        // local 1.5B had its placeholder file name refused, found the file in the next round,
        // and the limit ended the run before the total ran on it.
        if executed
            && stop.is_none()
            && !preparation
            && run.format >= kernel::REPEATS_SKIPPED_SINCE_FORMAT
            && rounds.refused_rounds < MAX_REFUSED_ROUNDS
            && all_refused(run)
        {
            rounds.refused_rounds += 1;
            save(run, rounds);
        }
        // Think: after an executed batch, or when no action is left.
        if (executed && !preparation) || steps_allowed.is_empty() {
            let stopped = stop.as_ref().map(|stop| stop.reason.as_str());
            let note =
                match kernel::fit_note(run, |run: &Run| think_note(run, rounds, stopped, rethink))
                    .await?
                {
                    Ok(note) => note,
                    Err(stop) => {
                        kernel::finish_turn(run, reasoning)?;
                        return Ok(Flow::Stop(stop));
                    }
                };
            let schema = think_schema(may_complete(run), reasoning_max(run));
            let answer =
                kernel::forced_answer(run, "think", THINK, &note, schema, parse_think, "").await?;
            if let Some(Accepted { value: think, response, tool_call_id }) = answer {
                let think_reasoning =
                    run.record_reasoning_with(&response, Some(&think.internal_analysis));
                if reasoning.is_none() {
                    reasoning = think_reasoning;
                }
                let completes = think.task_completed && may_complete(run);
                let refusal =
                    if completes { kernel::review_answer(run, &think.user_summary) } else { None };
                if let Some(note) = refusal {
                    // Not an answer yet: the next round must ground it or say it is unknown.
                    // From format 27 an answer refused only as incomplete is the ending if a
                    // limit comes first (it holds more of the task than earlier summaries).
                    if run.format >= grounding::PARTIAL_ENDING_SINCE_FORMAT
                        && run.reports(&think.user_summary)
                    {
                        rounds.last_user_summary = Some(think.user_summary);
                    }
                    rounds.refusal = Some(note.clone());
                    kernel::acknowledge(run, tool_call_id, note);
                    save(run, rounds);
                } else {
                    kernel::acknowledge(run, tool_call_id, "noted".to_owned());
                    // From format 37 a think that does not complete is no ending: its summary
                    // is the model's view of the round (on the local 1.5B, "The script
                    // `unit-converter` failed to find the column `length` …" after that call
                    // had worked), where a limit's report tells what ran and what it gave.
                    if completes || run.format < grounding::OPEN_THINK_SINCE_FORMAT {
                        rounds.last_user_summary = Some(think.user_summary.clone());
                    }
                    save(run, rounds);
                    if completes {
                        kernel::finish_turn(run, reasoning)?;
                        return Ok(Flow::End(Ending {
                            outcome: Outcome::Completed,
                            final_text: think.user_summary,
                        }));
                    }
                }
            }
        }
        kernel::finish_turn(run, reasoning)?;
        Ok(stop.map_or(Flow::Continue, Flow::Stop))
    }

    /// The guaranteed answer when the run ends without a completing think: the last
    /// `user_summary` (when it reports: see `Run::reports`), else one forced summary call
    /// without tools, else the report from the record.
    async fn end(&mut self, run: &mut Run, stop: Stop) -> Result<Ending> {
        match &self.rounds.last_user_summary {
            // A summary with an invented figure or the model's next step is no ending.
            Some(summary) if !stop.is_cancelled() && run.reports(summary) => {
                Ok(Ending { outcome: stop.outcome, final_text: summary.clone() })
            }
            Some(_) | None => run.degrade(stop).await,
        }
    }
}

fn save(run: &mut Run, rounds: &RoundState) {
    run.state.strategy_state = serde_json::to_value(rounds).unwrap_or(Value::Null);
}

/// A round's batch: the plan's actions, each mirrored as a step of the run's plan.
struct RoundBatch<'a> {
    rounds: &'a mut RoundState,
    actions: &'a [Action],
    steps: Vec<PlanStep>,
    /// Steps run so far.
    ran: usize,
    /// The batch ended after a step that selected a skill (format 15).
    cut_at_selection: bool,
    started: std::time::Instant,
}

impl Batch for RoundBatch<'_> {
    fn len(&self) -> usize {
        self.actions.len()
    }

    /// Seed 003's round timeout: a batch that has run too long goes to think. From format 15
    /// the batch also ends after a step that selected a skill: the steps after it were planned
    /// before its instructions were read (the local 1.5B planned "select file-finder, run
    /// csv-summary on `<file named in the task>`", or a second select the action space refuses
    /// right after one), and the next plan sees them.
    fn may_start(&mut self, run: &mut Run, index: usize) -> Result<bool> {
        if index > 0
            && run.format >= grounding::SELECT_ENDS_BATCH_SINCE_FORMAT
            && matches!(self.actions[index - 1], Action::SelectSkills { .. })
            && self.steps[index - 1].status == StepStatus::Done
        {
            self.cut_at_selection = true;
            return Ok(false);
        }
        if index > 0
            && let Some(limit) = run.config.budgets.round_timeout_ms
            && run.deadline_passed("round", index as u64, self.started, limit)?
        {
            self.rounds.timed_out = true;
            return Ok(false);
        }
        Ok(true)
    }

    async fn run_step(&mut self, run: &mut Run, index: usize) -> Result<(bool, Option<Stop>)> {
        let action = &self.actions[index];
        if kernel::already_done(run, action) {
            self.ran = index + 1;
            self.steps[index].status = StepStatus::Done;
            return Ok((true, None));
        }
        let space = run.action_space();
        let stop = run.act(action, &space, None).await?;
        self.ran = index + 1;
        let ok = run.last_ok(action);
        self.steps[index].status = if ok { StepStatus::Done } else { StepStatus::Skipped };
        // From format 32 a step refused before it ran (it changed nothing) does not end the
        // batch: the local 1.5B copied a refused step (a column `mass` from an example) into
        // each new plan ahead of three conversions, and they never ran, round after round.
        let refused = run.state.actions.last().is_some_and(|record| {
            record.status == ObservationStatus::Refused && record.action.as_ref() == Some(action)
        });
        if refused && run.format >= REFUSED_STEP_SINCE_FORMAT {
            return Ok((true, stop));
        }
        Ok((ok, stop))
    }
}

/// Runs the plan's steps in order; the plan (one step per action) is recorded with
/// `plan_created`/`plan_updated` before and after (not after a cancellation).
async fn execute(run: &mut Run, rounds: &mut RoundState, plan: &RoundPlan) -> Result<BatchEnd> {
    let steps: Vec<PlanStep> = plan
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
    let created = run.state.plan.is_none();
    let current = Plan { goal: goal.clone(), steps: steps.clone(), ..Plan::default() };
    run.state.plan = Some(current.clone());
    let change = PlanChange { round: Some(rounds.round), ..PlanChange::plan(current) };
    run.emit(if created { Payload::PlanCreated(change) } else { Payload::PlanUpdated(change) })?;
    rounds.timed_out = false;
    let round = rounds.round;
    let mut batch = RoundBatch {
        rounds,
        actions: &plan.steps,
        steps,
        ran: 0,
        cut_at_selection: false,
        started: std::time::Instant::now(),
    };
    let end = kernel::run_batch(run, &mut batch).await?;
    if matches!(&end, BatchEnd::Stopped(stop) if stop.is_cancelled()) {
        return Ok(end);
    }
    let mut steps = batch.steps;
    // From format 16 the steps a selection cut off leave the plan (`not_run` counts them): the
    // next plan note showed "[ ] run_script csv-summary … <file named in the task>", and the
    // local 1.5B planned it again.
    if batch.cut_at_selection && run.format >= grounding::SHORT_PLAN_NOTE_SINCE_FORMAT {
        steps.truncate(batch.ran);
    }
    let current = Plan { goal, steps, ..Plan::default() };
    run.state.plan = Some(current.clone());
    run.emit(Payload::PlanUpdated(PlanChange {
        round: Some(round),
        ran: Some(batch.ran as u64),
        not_run: Some((plan.steps.len() - batch.ran) as u64),
        ..PlanChange::plan(current)
    }))?;
    Ok(end)
}

/// The actions a step may be now: the turn's action space without `final_answer`.
fn step_actions(space: &ActionSpace) -> Vec<&'static str> {
    space.allowed().into_iter().filter(|name| *name != "final_answer").collect()
}

/// The bound of a plan's reasoning and a think's next-step preview.
fn reasoning_max(run: &Run) -> usize {
    if run.format >= grounding::SHORT_REASONING_SINCE_FORMAT {
        REASONING_SHORT
    } else {
        REASONING_MAX
    }
}

/// The schema of `plan_tool_call`: steps drawn from the actions the space allows now, at
/// least `min_steps` of them, its reasoning at most `reasoning_max` characters.
fn plan_schema(space: &ActionSpace, round: u32, min_steps: usize, reasoning_max: usize) -> Value {
    let variants: Vec<Value> = step_actions(space)
        .into_iter()
        .map(|name| kernel::step_schema(space, name, true))
        .collect();
    let mut properties = Map::new();
    properties.insert("reasoning".into(), json!({"type": "string", "maxLength": reasoning_max}));
    properties.insert(
        "steps".into(),
        json!({"type": "array", "items": {"anyOf": variants}, "minItems": min_steps, "maxItems": MAX_STEPS}),
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

/// The schema of `think`, its next-step preview at most `reasoning_max` characters.
fn think_schema(may_complete: bool, reasoning_max: usize) -> Value {
    let completed = if may_complete { json!({"type": "boolean"}) } else { json!({"const": false}) };
    json!({
        "type": "object",
        "properties": {
            "internal_analysis": {"type": "string", "maxLength": ANALYSIS_MAX},
            "user_summary": {"type": "string", "minLength": 1, "maxLength": SUMMARY_MAX},
            "task_completed": completed,
            "next_steps_preview": {"type": "string", "maxLength": reasoning_max},
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
    let mut arguments = forced_arguments(response, mode, PLAN.tool)?;
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
    let arguments = forced_arguments(response, mode, THINK.tool)?;
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
    push_notice(run, &mut note);
    if let Some(plan) = &run.state.plan {
        note.push_str("Last round's plan:\n");
        // From format 16 without its reasoning: the local 1.5B wrote the one shown back as
        // its next plan's, word for word, round after round (~70 tokens each way).
        if run.format >= grounding::SHORT_PLAN_NOTE_SINCE_FORMAT {
            let steps = Plan { goal: String::new(), ..plan.clone() };
            note.push_str(&steps.render());
        } else {
            note.push_str(&plan.render());
        }
    }
    note.push_str(&skills_lines(run));
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str(&unused_values_line(run, space));
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
        ".\nPlan the next batch: call {} with 1-{MAX_STEPS} steps {{tool, args}} that \
         run in order{complexity}. A skill must be selected before its files or scripts are used.",
        PLAN.tool
    ));
    note
}

/// The task's values that no script call has used yet, when scripts may run and two or more
/// are left (format 12): the plan note lists them and the plan must hold a step for each (up
/// to the most a plan may hold). The local 1.5B planned one conversion of "5 miles to km; 10
/// km to miles; 72 F to C; 2 lb to oz" per round and ran out of rounds, told or not.
fn unused_values(run: &Run, space: &ActionSpace) -> Vec<String> {
    if run.format < grounding::ROUNDS_SINCE_FORMAT
        || !run.grounding.strict
        || !step_actions(space).contains(&"run_script")
    {
        return Vec::new();
    }
    let args = run.task_script_args();
    let (_, unused) = grounding::unused_task_numbers(&run.state.task, &args, "", true);
    if unused.len() < 2 { Vec::new() } else { unused }
}

/// The plan note's line for [`unused_values`] (empty when there are none).
fn unused_values_line(run: &Run, space: &ActionSpace) -> String {
    let unused = unused_values(run, space);
    if unused.is_empty() {
        return String::new();
    }
    format!(
        "Values of the task no script call has used yet: {}. Plan a step for each value a \
         script needs ({} steps or more).\n",
        unused.join(", "),
        unused.len().min(MAX_STEPS)
    )
}

/// The Think phase's note.
fn think_note(run: &Run, rounds: &RoundState, stopped: Option<&str>, rethink: bool) -> String {
    let mut note = round_line(run, rounds, rounds.round);
    // The figures next to where the summary is asked for (the local 1.5B summarised a batch of
    // eight conversions as "the units have been correctly converted", without one figure).
    note.push_str(&results_lines(run));
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
    if let Some(why) = completion_bar(run) {
        note.push_str(&format!("task_completed must be false this round: {why}.\n"));
    }
    // A think alone after a refusal that named every value (format 12): the refusal again,
    // and the arithmetic first (the local 1.5B wrote both totals in its summary and the sum
    // only in its next-step preview, after it).
    if rethink && let Some(refusal) = &rounds.refusal {
        note.push_str(&format!(
            "Your last summary: {refusal}\nNothing more needs to run: work out the arithmetic in \
             internal_analysis first, then write its result in user_summary.\n"
        ));
    }
    note.push_str(&format!(
        "Call {}: internal_analysis (what the results show), user_summary (the \
         answer the user reads, with the figures and facts the results give, not a description \
         of what was done), task_completed (true \
         only when an observation above holds the answer; loaded instructions are not a \
         result), next_steps_preview.",
        THINK.tool
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
/// `notes/small-models.md`: the state narrows what may be written). From format 12 not either
/// when every step of the round was refused and the task has no result yet.
fn may_complete(run: &Run) -> bool {
    completion_bar(run).is_none()
}

/// Why this round's think may not say the task is done ([`may_complete`]), for its note.
fn completion_bar(run: &Run) -> Option<&'static str> {
    let batch = this_round(run);
    if batch.is_empty() {
        return None;
    }
    let only_selected =
        batch.iter().all(|record| matches!(record.action, Some(Action::SelectSkills { .. })));
    if only_selected && !unrun_scripts(run).is_empty() {
        return Some("it only loaded instructions, and their scripts have not run");
    }
    // From format 12 neither may a round whose every step was refused, in a task with no
    // result yet: told its example pattern `*.csv` was no value of the task, the local 1.5B
    // completed with "The Markdown files in the workspace are `*.md` and `docs`.", nothing run.
    (run.format >= grounding::ROUNDS_SINCE_FORMAT
        && all_refused(run)
        && !run.state.task_actions().any(ActionRecord::is_result))
    .then_some("every step of it was refused, and no script has given a result yet")
}

/// Whether this round's batch ran steps and every one of them was refused.
fn all_refused(run: &Run) -> bool {
    let batch = this_round(run);
    !batch.is_empty()
        && batch.iter().all(|record| {
            matches!(record.status, ObservationStatus::Refused | ObservationStatus::InvalidAction)
        })
}

/// Whether this round's batch only selected skills, each select taken, while their scripts
/// wait to run: a round with nothing to think about (format 12). A refused select is not.
fn only_prepared(run: &Run) -> bool {
    let batch = this_round(run);
    !batch.is_empty()
        && batch.iter().all(|record| {
            matches!(record.action, Some(Action::SelectSkills { .. }))
                && record.status == ObservationStatus::Ok
        })
        && !unrun_scripts(run).is_empty()
}

/// The records of this round's batch (empty when its plan ran nothing).
fn this_round(run: &Run) -> Vec<&ActionRecord> {
    let turn = run.state.counters.turns;
    run.state.actions.iter().filter(|record| record.turn == turn).collect()
}

/// The first line of a round's notes.
fn round_line(run: &Run, rounds: &RoundState, round: u32) -> String {
    budget_line(run, &format!("Round {round} of {}", rounds.last_round()))
}
