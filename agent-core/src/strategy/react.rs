//! `react` (seed 002): one Decide per turn — the model returns one action plus an optional
//! plan or plan patch; the runtime validates, executes and feeds the observation back, until
//! `final_answer`, a budget, or a stuck loop ends the run.

use crate::action::{cut_final_answer, parse_answer};
use crate::config::DecideMode;
use crate::error::Result;
use crate::run::Run;

use super::kernel::{self, Flow, Strategy};
use super::notes::turn_note;

/// The strategy's name in `AgentConfig::strategy`.
pub(super) const NAME: &str = "react";

/// ReAct with an explicit plan (seed 002). It keeps no state of its own.
#[derive(Debug)]
pub(super) struct React;

impl Strategy for React {
    async fn turn(&mut self, run: &mut Run) -> Result<Flow> {
        let space_of = |run: &Run| run.action_space();
        let kernel::Prepared { space, note } =
            match kernel::prepare(run, space_of, turn_note).await? {
                Ok(prepared) => prepared,
                Err(stop) => return Ok(Flow::Stop(stop)),
            };
        if let Some(stop) = kernel::sure_selection(run, &space, &note).await? {
            return Ok(stop.map_or(Flow::Continue, Flow::Stop));
        }
        kernel::start_turn(run, note.chars().count(), &space.allowed(), None)?;
        let request = run.decide_request(&space, &note);
        let mode = run.config.decide;
        let mut reasoning = None;
        let mut flow = Flow::Continue;
        if let Some(response) = kernel::ask(run, "decide", request, Some(mode)).await? {
            let parsed = parse_answer(&response, mode == DecideMode::Tools).or_else(|invalid| {
                match run.grounding.strict.then(|| cut_final_answer(&response)).flatten() {
                    Some(decision) => Ok(decision),
                    None => Err(invalid),
                }
            });
            let tool_call_id = run.push_answer(&response);
            match parsed {
                Err(invalid) => {
                    kernel::reject_answer(run, &invalid.message, tool_call_id.as_deref(), None)?;
                }
                Ok(mut decision) => {
                    space.restore_tool_thought(&mut decision);
                    reasoning = run.record_reasoning(&response, &decision);
                    run.apply_plan(&decision)?;
                    if let Some(ended) =
                        kernel::final_action(run, &decision.action, &space, tool_call_id.clone())?
                    {
                        flow = ended;
                    } else if let Some(stop) =
                        run.act(&decision.action, &space, tool_call_id.as_deref()).await?
                    {
                        flow = Flow::Stop(stop);
                    }
                }
            }
        }
        kernel::finish_turn(run, reasoning)?;
        Ok(flow)
    }
}
