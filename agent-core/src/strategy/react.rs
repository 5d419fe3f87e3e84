//! `react` (seed 002): one Decide per turn — the model returns one action plus an optional
//! plan or plan patch; the runtime validates, executes and feeds the observation back, until
//! `final_answer`, a budget, or a stuck loop ends the run.

use serde_json::json;

use crate::action::{Action, parse_answer};
use crate::budget::Outcome;
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::EventKind;
use crate::guard;
use crate::run::{Ending, Run};

use crate::state::ObservationStatus;

use super::{ask, finish_turn, start_turn, turn_note};

/// ReAct with an explicit plan (seed 002).
pub(super) async fn drive(run: &mut Run) -> Result<Ending> {
    loop {
        if run.cancel.is_cancelled() || run.recorded_stop(Outcome::Cancelled) {
            return run.degrade(Outcome::Cancelled, "the run was cancelled").await;
        }
        if let Some((outcome, reason)) = run.budget_exhausted() {
            return run.degrade(outcome, &reason).await;
        }
        run.refresh_tools()?;
        let space = guard::action_space(&run.state, &run.config);
        let note = turn_note(run, &space);
        if let Some((outcome, reason)) = run.fit_context(note.chars().count()).await? {
            return run.degrade(outcome, &reason).await;
        }
        // Compaction may have made observations recallable.
        let space = guard::action_space(&run.state, &run.config);
        let note = turn_note(run, &space);
        start_turn(run, note.chars().count(), &space.allowed(), None)?;
        let request = run.decide_request(&space, &note);
        let mode = run.config.decide;
        let mut reasoning = serde_json::Value::Null;
        let mut stop: Option<Ending> = None;
        match ask(run, "decide", request, Some(mode)).await? {
            None => {}
            Some(response) => {
                let parsed = parse_answer(&response, mode == DecideMode::Tools);
                let tool_call_id = run.push_answer(&response);
                match parsed {
                    Err(invalid) => {
                        run.emit(
                            EventKind::ActionValidated,
                            json!({"action": null, "valid": false, "error": invalid.message}),
                        )?;
                        run.observe(
                            None,
                            ObservationStatus::InvalidAction,
                            &invalid.message,
                            tool_call_id.as_deref(),
                        )?;
                    }
                    Ok(mut decision) => {
                        space.restore_tool_thought(&mut decision);
                        reasoning = run.record_reasoning(&response, &decision);
                        run.apply_plan(&decision)?;
                        match &decision.action {
                            Action::AskUser { question } => match space.check(&decision.action) {
                                Ok(()) => {
                                    run.emit(
                                        EventKind::ActionValidated,
                                        json!({"action": decision.action, "valid": true}),
                                    )?;
                                    stop = Some(run.request_input(question, tool_call_id)?);
                                }
                                Err(message) => {
                                    run.emit(
                                        EventKind::ActionValidated,
                                        json!({"action": decision.action, "valid": false, "error": message}),
                                    )?;
                                    run.observe(
                                        Some(&decision.action),
                                        ObservationStatus::InvalidAction,
                                        &message,
                                        tool_call_id.as_deref(),
                                    )?;
                                }
                            },
                            Action::FinalAnswer { content } => {
                                match space.check(&decision.action) {
                                    Ok(()) => {
                                        run.emit(
                                            EventKind::ActionValidated,
                                            json!({"action": decision.action, "valid": true}),
                                        )?;
                                        run.pending_call = tool_call_id;
                                        stop = Some(Ending {
                                            outcome: Outcome::Completed,
                                            final_text: content.trim().to_owned(),
                                        });
                                    }
                                    Err(message) => {
                                        run.emit(
                                        EventKind::ActionValidated,
                                        json!({"action": decision.action, "valid": false, "error": message}),
                                    )?;
                                        run.observe(
                                            Some(&decision.action),
                                            ObservationStatus::InvalidAction,
                                            &message,
                                            tool_call_id.as_deref(),
                                        )?;
                                    }
                                }
                            }
                            action => {
                                if let Some(outcome) =
                                    run.act(action, &space, tool_call_id.as_deref()).await?
                                {
                                    let reason = match outcome {
                                        Outcome::Cancelled => "the run was cancelled".to_owned(),
                                        _ => format!(
                                            "the script-run limit ({}) was reached",
                                            run.config.budgets.max_script_runs
                                        ),
                                    };
                                    finish_turn(run, &reasoning)?;
                                    return run.degrade(outcome, &reason).await;
                                }
                            }
                        }
                    }
                }
            }
        }
        finish_turn(run, &reasoning)?;
        if let Some(ending) = stop {
            return Ok(ending);
        }
        if let Some(reason) = run.failures.stuck(&run.config) {
            let outcome = if run.failures.model_errors() > run.config.guard.retry_caps.model_error {
                Outcome::Error
            } else {
                Outcome::Stuck
            };
            return run.degrade(outcome, &reason).await;
        }
    }
}
