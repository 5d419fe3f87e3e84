//! Loop strategies. A strategy decides how the model is asked and in what order; validating
//! and executing an action, counting it and recording it happen in [`crate::run::Run`], the
//! one place every strategy calls. A strategy adds its own events and state
//! (`RunState::strategy_state`), never its own IO, and is deterministic given the recorded
//! model answers, so replay and resume work for every strategy unchanged.
//!
//! - `react` (seed 002, the default): one Decide per turn, see [`react`].
//! - `plan-execute-think` (seed 003): rounds of a forced plan call, a batch of actions, and a
//!   forced think call, see [`plan_execute_think`].
//! - `plan-thought-replan` (seed 001): plan once per task, thought → act → observe per plan
//!   item, a replan after each item and after a clarification, see [`plan_thought_replan`].
//! - `safe` (seed 004): complexity judgement, SOP lookup, a plan of function calls and
//!   collaboration requests to peer agents on an in-process bus, a report; see [`safe`].

mod plan_execute_think;
mod plan_thought_replan;
mod react;
mod safe;

use serde_json::json;

use model_adapter::{ChatRequest, Response, ResponseFormat, Tool, ToolChoice};
use serde_json::{Map, Value};

use crate::action::{Action, ActionSpace, strip_fence};
use crate::config::DecideMode;
use crate::error::Result;
use crate::event::EventKind;
use crate::reasoning;
use crate::run::{Answer, Ending, Run};
use crate::state::ObservationStatus;

/// The names of the strategies this build knows (`AgentConfig::strategy`).
pub const STRATEGIES: &[&str] = &["react", PLAN_EXECUTE_THINK, PLAN_THOUGHT_REPLAN, SAFE];

/// The name of the `plan-execute-think` strategy.
pub(crate) const PLAN_EXECUTE_THINK: &str = plan_execute_think::NAME;

/// The name of the `plan-thought-replan` strategy.
pub(crate) const PLAN_THOUGHT_REPLAN: &str = plan_thought_replan::NAME;

/// The name of the `safe` strategy.
pub(crate) const SAFE: &str = safe::NAME;

pub(crate) use safe::{PROTOCOL as SAFE_PROTOCOL, check_config as check_safe_config};

/// Runs `run` to its end with the strategy its configuration names (validated by the agent
/// builder; an unknown name runs `react`).
pub(crate) async fn drive(run: &mut Run) -> Result<Ending> {
    match run.config.strategy.as_str() {
        plan_execute_think::NAME => plan_execute_think::drive(run).await,
        plan_thought_replan::NAME => plan_thought_replan::drive(run).await,
        safe::NAME => safe::drive(run).await,
        _ => react::drive(run).await,
    }
}

/// Think-Act (seed 000): the meta-cognition notice, when one of its conditions holds, as
/// lines of the turn's note (never a message of its own).
pub(super) fn push_notice(run: &Run, note: &mut String) {
    if let Some(notice) = reasoning::notice(&run.state, run.config.budgets.max_turns) {
        note.push_str(&notice);
        note.push('\n');
    }
}

/// The turn's note: budget and reasoning level, any progress notice, plan, selected skills,
/// allowed actions, the task restated.
pub(super) fn turn_note(run: &Run, space: &ActionSpace) -> String {
    let budgets = &run.config.budgets;
    let counters = &run.state.task_counters();
    let mut note = format!(
        "Turn {} of {} · tool calls {}/{} · script runs {}/{}{}\n",
        counters.turns + 1,
        budgets.max_turns,
        counters.tool_calls,
        budgets.max_tool_calls,
        counters.script_runs,
        budgets.max_script_runs,
        reasoning::reasoning_signal(&run.state, &run.input_sizes)
    );
    push_notice(run, &mut note);
    match &run.state.plan {
        Some(plan) => {
            note.push_str("Plan:\n");
            note.push_str(&plan.render());
        }
        None => note.push_str("Plan: none yet (you may send one with your action).\n"),
    }
    note.push_str(&skills_lines(run));
    note.push_str(&results_lines(run));
    note.push_str(&format!("Task: {}\n", run.state.task));
    // Native tool calling offers few external tools as functions of their own: name them.
    let own_functions = run.config.decide == DecideMode::Tools && space.external_functions();
    let allowed: Vec<&str> = space
        .allowed()
        .into_iter()
        .flat_map(|name| match name {
            "call_tool" if own_functions => {
                space.call.iter().map(|tool| tool.name.as_str()).collect::<Vec<_>>()
            }
            name => vec![name],
        })
        .collect();
    note.push_str(&format!("Allowed now: {}", allowed.join(", ")));
    if let Some(why) = &space.note {
        note.push_str(&format!(" ({why})"));
    }
    note.push_str(match run.config.decide {
        DecideMode::Json => ".\nReply with one JSON object holding exactly one action.",
        DecideMode::Tools => ".\nCall exactly one tool.",
    });
    note
}

/// The most recent calls the note's results list shows.
const RESULTS_SHOWN: usize = 8;

/// The characters of a call's output a results line keeps.
const RESULT_CHARS: usize = 100;

/// The note's "Results so far", once two or more different scripts or tool calls have run in
/// the task: one line per call (the latest of identical ones), oldest first, with the first
/// lines of what it printed or why it failed. On the local 1.5B, a batch of conversions ended
/// with an answer that held only the last result: the earlier ones sat far up the transcript.
pub(super) fn results_lines(run: &Run) -> String {
    let first_turn = run.state.task_base.turns;
    let mut results: Vec<(&Action, ObservationStatus, &str)> = Vec::new();
    for record in run.state.actions.iter().filter(|record| record.turn > first_turn) {
        let Some(action @ (Action::RunScript { .. } | Action::CallTool { .. })) = &record.action
        else {
            continue;
        };
        if !matches!(
            record.status,
            ObservationStatus::Ok | ObservationStatus::Failed | ObservationStatus::Timeout
        ) {
            continue;
        }
        let text = run
            .observation_texts
            .iter()
            .rev()
            .find(|(id, _)| *id == record.observation)
            .map_or("", |(_, text)| text.as_str());
        results.retain(|(earlier, _, _)| *earlier != action);
        results.push((action, record.status, text));
    }
    if results.len() < 2 {
        return String::new();
    }
    let mut lines = String::from("Results so far:\n");
    for (action, status, text) in &results[results.len().saturating_sub(RESULTS_SHOWN)..] {
        let gist = output_gist(text);
        let line = match status {
            ObservationStatus::Ok => format!("- {}: {gist}\n", action.summary()),
            ObservationStatus::Timeout => format!("- {}: timed out\n", action.summary()),
            _ => format!("- {}: failed: {gist}\n", action.summary()),
        };
        lines.push_str(&line);
    }
    lines
}

/// The first lines of a call's output, joined, cut at [`RESULT_CHARS`]: without the
/// runtime's framing (`exit code N`, `stdout:`, `stderr:`) and blank lines.
fn output_gist(text: &str) -> String {
    let mut gist = String::new();
    for line in text.lines().map(str::trim) {
        let framing = line.is_empty()
            || line == "stdout:"
            || line == "stderr:"
            || line.strip_prefix("exit code ").is_some_and(|code| code.parse::<i64>().is_ok());
        if framing {
            continue;
        }
        if !gist.is_empty() {
            gist.push_str(" · ");
        }
        gist.push_str(line);
        if gist.chars().count() >= RESULT_CHARS {
            break;
        }
    }
    if gist.chars().count() > RESULT_CHARS {
        gist = gist.chars().take(RESULT_CHARS - 1).collect();
        gist.push('…');
    }
    if gist.is_empty() { "(no output)".to_owned() } else { gist }
}

/// Ends a turn: `turn_finished` with the counters, then `state.json` and an fsync.
pub(super) fn finish_turn(run: &mut Run, reasoning: &serde_json::Value) -> Result<()> {
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

/// The note's line of selected skills and their scripts (empty before a select).
pub(super) fn skills_lines(run: &Run) -> String {
    let mut line = String::new();
    if !run.state.selected.is_empty() {
        line.push_str("Selected skills:");
        for skill in &run.state.selected {
            line.push_str(&format!(" {}", skill.name));
            if !skill.scripts.is_empty() {
                line.push_str(&format!(" (scripts: {})", skill.scripts.join(", ")));
            }
            line.push(';');
        }
        line.push('\n');
    }
    line
}

/// Starts a turn: counts it and emits `turn_started` with the budgets (the context with a
/// note of `note_chars`), the names the model may call, and `extra` fields of the strategy.
pub(super) fn start_turn(
    run: &mut Run,
    note_chars: usize,
    allowed: &[&str],
    extra: Option<(&str, Value)>,
) -> Result<()> {
    // Strategies that do not read the tool list at the head of their turn read it here.
    if !run.external.fresh {
        run.refresh_tools()?;
    }
    run.external.fresh = false;
    run.state.counters.turns += 1;
    run.bus.set_turn(run.state.counters.turns);
    let used = run.state.task_counters();
    let mut data = json!({
        "budget": {
            "turns": [used.turns, run.config.budgets.max_turns],
            "tool_calls": [used.tool_calls, run.config.budgets.max_tool_calls],
            "script_runs": [used.script_runs, run.config.budgets.max_script_runs],
            "context_chars": [run.context.chars() + note_chars, run.config.budgets.max_context_chars],
        },
        "allowed": allowed,
    });
    if let (Some((key, value)), Some(map)) = (extra, data.as_object_mut()) {
        map.insert(key.to_owned(), value);
    }
    run.emit(EventKind::TurnStarted, data)
}

/// Asks the model once; a failed call becomes a `model_error` observation and `None`.
pub(super) async fn ask(
    run: &mut Run,
    purpose: &str,
    request: ChatRequest,
    mode: Option<DecideMode>,
) -> Result<Option<Response>> {
    match run.call_model(purpose, request, mode).await? {
        Answer::Response(response) => Ok(Some(response)),
        Answer::Failed(error) => {
            run.observe(
                None,
                ObservationStatus::ModelError,
                &format!("the model call failed: {error}"),
                None,
            )?;
            Ok(None)
        }
    }
}

/// The request of a forced phase: the context, the phase's note, and exactly one tool, named
/// in `tool_choice` — or, in [`DecideMode::Json`], its schema as the response format.
pub(super) fn forced_request(
    run: &mut Run,
    note: &str,
    tool: &str,
    description: &str,
    schema: Value,
) -> ChatRequest {
    let mut request =
        ChatRequest::new(run.config.model.model.clone(), run.context.messages(Some(note)));
    request.temperature = run.config.model.temperature;
    request.max_tokens = Some(run.config.model.max_tokens);
    match run.config.decide {
        DecideMode::Tools => {
            request.tools = vec![Tool {
                name: tool.to_owned(),
                description: description.to_owned(),
                parameters: schema,
            }];
            request.tool_choice = ToolChoice::Named(tool.to_owned());
            request.parallel_tool_calls = Some(false);
        }
        DecideMode::Json => {
            request.response_format =
                ResponseFormat::JsonSchema { name: tool.to_owned(), schema, strict: true };
        }
    }
    request
}

/// The arguments of the forced call `tool`: its tool call, or (JSON mode) the document.
pub(super) fn forced_arguments(
    response: &Response,
    mode: DecideMode,
    tool: &str,
) -> std::result::Result<Map<String, Value>, String> {
    let value = if let Some(call) = response.tool_calls.first() {
        if call.name != tool {
            return Err(format!("expected a call to `{tool}`, got `{}`", call.name));
        }
        call.arguments.clone()
    } else if let Some(bad) = response.invalid_tool_calls.first() {
        return Err(format!("the call to `{}` had unreadable arguments ({})", bad.name, bad.error));
    } else if mode == DecideMode::Json {
        serde_json::from_str(strip_fence(&response.text))
            .map_err(|error| format!("the answer is not valid JSON: {error}"))?
    } else {
        return Err(format!("expected a call to `{tool}`, got no tool call"));
    };
    match value {
        Value::Object(map) => Ok(map),
        other => Err(format!("the arguments of `{tool}` must be a JSON object, got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gist_is_the_first_lines_of_the_output_without_the_framing() {
        assert_eq!(
            output_gist("exit code 0\nstdout:\n5 mi = 8.04672 km\nquantity: length"),
            "5 mi = 8.04672 km · quantity: length"
        );
        assert_eq!(
            output_gist("exit code 2\nstderr:\n\nconvert: unknown unit"),
            "convert: unknown unit"
        );
        assert_eq!(output_gist("exit code 0"), "(no output)");
        assert_eq!(output_gist(""), "(no output)");
        // A line that only looks like framing stays.
        assert_eq!(output_gist("exit code zero"), "exit code zero");
        let long = format!("exit code 0\nstdout:\n{}\nnever shown", "é".repeat(300));
        let gist = output_gist(&long);
        assert_eq!(gist.chars().count(), RESULT_CHARS);
        assert!(gist.ends_with('…') && !gist.contains("never"), "{gist}");
    }
}
