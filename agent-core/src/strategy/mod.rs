//! Loop strategies: how the model is asked and in what order. Each strategy implements
//! [`kernel::Strategy`] and decides only; the turn kernel ([`kernel`]) owns the loop (cancellation,
//! budgets, stuck detection, the ending) and the steps of a turn every strategy shares, and
//! [`crate::run::Run`] validates, executes, counts and records every action. A strategy adds
//! its own events and state (`RunState::strategy_state`), never its own IO, and is
//! deterministic given the recorded model answers, so replay and resume work for every
//! strategy unchanged.
//!
//! - `react` (seed 002, the default): one Decide per turn, see [`react`].
//! - `plan-execute-think` (seed 003): rounds of a forced plan call, a batch of actions, and a
//!   forced think call, see [`plan_execute_think`].
//! - `plan-thought-replan` (seed 001): plan once per task, thought → act → observe per plan
//!   item, a replan after each item and after a clarification, see [`plan_thought_replan`].
//! - `safe` (seed 004): SOP-driven collaboration — complexity judgement, SOP lookup, a plan of
//!   function calls and collaboration requests to peer agents on an in-process bus, a report;
//!   see [`sop_collaboration`].
//!
//! Adding a strategy: a file here with a type that implements [`kernel::Strategy`] (its `turn` asks
//! the model through [`kernel::prepare`], [`kernel::forced_call`] or [`Run::decide_request`],
//! and hands actions to [`Run::act`]), a `NAME`, and one line in [`drive`] and
//! [`STRATEGIES`].

mod kernel;
pub(crate) mod notes;
mod plan_execute_think;
mod plan_thought_replan;
mod react;
mod sop_collaboration;

use crate::error::Result;
use crate::run::{Ending, Run};

/// The names of the strategies this build knows (`AgentConfig::strategy`).
pub const STRATEGIES: &[&str] = &[react::NAME, PLAN_EXECUTE_THINK, PLAN_THOUGHT_REPLAN, SAFE];

/// The name of the `plan-execute-think` strategy.
pub(crate) const PLAN_EXECUTE_THINK: &str = plan_execute_think::NAME;

/// The name of the `plan-thought-replan` strategy.
pub(crate) const PLAN_THOUGHT_REPLAN: &str = plan_thought_replan::NAME;

/// The name of the `safe` strategy (SOP-driven collaboration; the name is the CLI's).
pub(crate) const SAFE: &str = sop_collaboration::NAME;

pub(crate) use kernel::REPEATS_SKIPPED_SINCE_FORMAT;
pub(crate) use sop_collaboration::{PROTOCOL as SAFE_PROTOCOL, check_config as check_safe_config};

/// Runs `run`'s current piece of work to its end with the strategy its configuration names
/// (validated by the agent builder; an unknown name runs `react`).
pub(crate) async fn drive(run: &mut Run) -> Result<Ending> {
    match run.config.strategy.as_str() {
        plan_execute_think::NAME => {
            kernel::drive(run, plan_execute_think::PlanExecuteThink::begin()).await
        }
        plan_thought_replan::NAME => {
            let strategy = plan_thought_replan::PlanThoughtReplan::begin(run);
            kernel::drive(run, strategy).await
        }
        sop_collaboration::NAME => {
            let strategy = sop_collaboration::SopCollaboration::begin(run);
            kernel::drive(run, strategy).await
        }
        _ => kernel::drive(run, react::React).await,
    }
}
