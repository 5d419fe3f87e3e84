//! Loop strategies. A strategy decides how the model is asked and in what order; validating
//! and executing an action, counting it and recording it happen in [`crate::run::Run`], the
//! one place every strategy calls.
//!
//! `react` (seed 002): one Decide per turn — the model returns one action plus an optional
//! plan or plan patch; the runtime validates, executes and feeds the observation back, until
//! `final_answer`, a budget, or a stuck loop ends the run.

use serde_json::json;

use crate::action::{Action, ActionSpace, parse_answer};
use crate::budget::Outcome;
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::EventKind;
use crate::guard;
use crate::run::{Answer, Ending, Run};
use crate::state::ObservationStatus;

/// The names of the strategies this build knows.
pub const STRATEGIES: [&str; 1] = ["react"];

/// Runs `run` to its end with the strategy its configuration names.
pub(crate) async fn drive(run: &mut Run) -> Result<Ending> {
    react(run).await
}

/// The turn's note: budget, plan, selected skills, allowed actions, the task restated.
fn turn_note(run: &Run, space: &ActionSpace) -> String {
    let budgets = &run.config.budgets;
    let counters = &run.state.counters;
    let mut note = format!(
        "Turn {} of {} · tool calls {}/{} · script runs {}/{}\n",
        counters.turns + 1,
        budgets.max_turns,
        counters.tool_calls,
        budgets.max_tool_calls,
        counters.script_runs,
        budgets.max_script_runs
    );
    match &run.state.plan {
        Some(plan) => {
            note.push_str("Plan:\n");
            note.push_str(&plan.render());
        }
        None => note.push_str("Plan: none yet (you may send one with your action).\n"),
    }
    if !run.state.selected.is_empty() {
        note.push_str("Selected skills:");
        for skill in &run.state.selected {
            note.push_str(&format!(" {}", skill.name));
            if !skill.scripts.is_empty() {
                note.push_str(&format!(" (scripts: {})", skill.scripts.join(", ")));
            }
            note.push(';');
        }
        note.push('\n');
    }
    note.push_str(&format!("Task: {}\n", run.state.task));
    note.push_str(&format!("Allowed now: {}", space.allowed().join(", ")));
    if let Some(why) = &space.note {
        note.push_str(&format!(" ({why})"));
    }
    note.push_str(match run.config.decide {
        DecideMode::Json => ".\nReply with one JSON object holding exactly one action.",
        DecideMode::Tools => ".\nCall exactly one tool.",
    });
    note
}

/// ReAct with an explicit plan (seed 002).
async fn react(run: &mut Run) -> Result<Ending> {
    loop {
        if run.cancel.is_cancelled() || run.recorded_stop(Outcome::Cancelled) {
            return run.degrade(Outcome::Cancelled, "the run was cancelled").await;
        }
        if let Some((outcome, reason)) = run.budget_exhausted() {
            return run.degrade(outcome, &reason).await;
        }
        let space = guard::action_space(&run.state, &run.config);
        let note = turn_note(run, &space);
        if let Some((outcome, reason)) = run.fit_context(note.chars().count()).await? {
            return run.degrade(outcome, &reason).await;
        }
        // Compaction may have made observations recallable.
        let space = guard::action_space(&run.state, &run.config);
        let note = turn_note(run, &space);
        run.state.counters.turns += 1;
        let turn = run.state.counters.turns;
        run.bus.set_turn(turn);
        run.emit(
            EventKind::TurnStarted,
            json!({
                "budget": {
                    "turns": [turn, run.config.budgets.max_turns],
                    "tool_calls": [run.state.counters.tool_calls, run.config.budgets.max_tool_calls],
                    "script_runs": [run.state.counters.script_runs, run.config.budgets.max_script_runs],
                    "context_chars": [run.context.chars() + note.chars().count(), run.config.budgets.max_context_chars],
                },
                "allowed": space.allowed(),
            }),
        )?;
        let request = run.decide_request(&space, &note);
        let mode = run.config.decide;
        let mut reasoning = serde_json::Value::Null;
        let mut stop: Option<Ending> = None;
        match run.call_model("decide", request, Some(mode)).await? {
            Answer::Failed(error) => {
                run.observe(
                    None,
                    ObservationStatus::ModelError,
                    &format!("the model call failed: {error}"),
                    None,
                )?;
            }
            Answer::Response(response) => {
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
                    Ok(decision) => {
                        reasoning = run.record_reasoning(&response, &decision);
                        run.apply_plan(&decision)?;
                        match &decision.action {
                            Action::FinalAnswer { content } => {
                                match space.check(&decision.action) {
                                    Ok(()) => {
                                        run.emit(
                                            EventKind::ActionValidated,
                                            json!({"action": decision.action, "valid": true}),
                                        )?;
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

fn finish_turn(run: &mut Run, reasoning: &serde_json::Value) -> Result<()> {
    run.emit(
        EventKind::TurnFinished,
        json!({
            "counters": run.state.counters,
            "context_chars": run.context.chars(),
            "reasoning": reasoning,
        }),
    )?;
    run.checkpoint()
}
