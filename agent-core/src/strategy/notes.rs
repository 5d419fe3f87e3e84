//! The notes a strategy puts at the end of its prompt each turn: budgets and the reasoning
//! level, the progress notice, the plan, the selected skills, the results so far, the allowed
//! actions, the task restated. Notes are the only per-turn text; the context before them stays
//! a stable prefix.

use crate::action::Action;
use crate::config::DecideMode;
use crate::reasoning;
use crate::run::Run;
use crate::space::ActionSpace;
use crate::state::ObservationStatus;

/// Think-Act (seed 000): the meta-cognition notice, when one of its conditions holds, as
/// lines of the turn's note (never a message of its own).
pub(crate) fn push_notice(run: &Run, note: &mut String) {
    if let Some(notice) = reasoning::notice(&run.state, run.config.budgets.max_turns) {
        note.push_str(&notice);
        note.push('\n');
    }
}

/// The record format from which a note after the task's first turn is compact ([`budget_line`],
/// [`turn_note`]): the tool calls and script runs used show only once few are left, no "Plan:
/// none yet", and a JSON-mode note no longer asks for one JSON object (the grammar or the
/// provider's schema already holds the reply to one). Each note stays in the
/// transcript and is evaluated once: on the embedded model these ~40 tokens were a third of a
/// turn's note and ~10 % of the new prompt of a turn after a script run.
pub(crate) const COMPACT_SINCE_FORMAT: u32 = 20;

/// Whether this turn's note is compact: from [`COMPACT_SINCE_FORMAT`], after the task's first
/// turn. The first note stays whole: without its last line the 1.5B's first thoughts turned to
/// the past tense ("I have loaded the instructions for …", before any action) and a task no
/// skill can answer got an answer.
fn compact(run: &Run) -> bool {
    run.format >= COMPACT_SINCE_FORMAT && run.state.task_counters().turns > 0
}

/// How many tool calls or script runs left make the compact note show that budget.
const FEW_LEFT: u32 = 3;

/// The first line of every note: where the work stands (`position`: "Turn 2 of 8", "Round 1 of
/// 3", …), the tool calls and script runs used (in a compact note only when few are left), and
/// the reasoning level.
pub(crate) fn budget_line(run: &Run, position: &str) -> String {
    let budgets = &run.config.budgets;
    let counters = run.state.task_counters();
    let compact = compact(run);
    let mut line = position.to_owned();
    for (what, used, max) in [
        ("tool calls", counters.tool_calls, budgets.max_tool_calls),
        ("script runs", counters.script_runs, budgets.max_script_runs),
    ] {
        if !compact || max.saturating_sub(used) <= FEW_LEFT {
            line.push_str(&format!(" · {what} {used}/{max}"));
        }
    }
    line.push_str(&reasoning::reasoning_signal(&run.state, &run.input_sizes));
    line.push('\n');
    line
}

/// The turn's note: budget and reasoning level, any progress notice, plan, selected skills,
/// allowed actions, the task restated.
pub(crate) fn turn_note(run: &Run, space: &ActionSpace) -> String {
    let compact = compact(run);
    let turns = run.state.task_counters().turns;
    let turn = format!("Turn {} of {}", turns + 1, run.config.budgets.max_turns);
    let mut note = budget_line(run, &turn);
    push_notice(run, &mut note);
    match &run.state.plan {
        Some(plan) => {
            note.push_str("Plan:\n");
            note.push_str(&plan.render());
        }
        None if compact => {}
        None => note.push_str("Plan: none yet (you may send one with your action).\n"),
    }
    let skills = skills_lines(run);
    // The line as the transcript last shows it (a compacted note shows none).
    let shown_before = compact
        && run.format >= SKILLS_ONCE_SINCE_FORMAT
        && !skills.is_empty()
        && run
            .context
            .kept_notes()
            .find_map(|kept| kept.lines().find(|line| line.starts_with(SKILLS_LINE)))
            .is_some_and(|line| skills.trim_end() == line);
    if !shown_before {
        note.push_str(&skills);
    }
    if !(run.format >= RESULTS_AT_ANSWER_SINCE_FORMAT
        && crate::space::batch_under_way(&run.state, run.space_rules()))
    {
        note.push_str(&results_lines(run));
    }
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
        DecideMode::Json if compact => ".",
        DecideMode::Json => ".\nReply with one JSON object holding exactly one action.",
        DecideMode::Tools => ".\nCall exactly one tool.",
    });
    note
}

/// The record format from which a compact turn note leaves out the line of selected skills
/// when the last one the transcript shows is the same: each note stays in
/// the transcript, and on the embedded model the line (~13 tokens) was evaluated again every
/// turn of a task for a selection that had not changed (the schema's skill and script enums
/// hold the names anyway).
pub(crate) const SKILLS_ONCE_SINCE_FORMAT: u32 = 35;

/// The record format from which a turn's note leaves out the results list while a batch over
/// the task's values is under way (some used, some left: the note says to run the next one),
/// and shows it again where the batch is done and the answer is due. Each note stays in the
/// transcript, so a list repeated every turn of a batch is evaluated again and again: on the
/// local 1.5B a batch of four conversions sent ~25 tokens per result per turn for a list the
/// next call does not need.
pub(crate) const RESULTS_AT_ANSWER_SINCE_FORMAT: u32 = 30;

/// The most recent calls the note's results list shows.
const RESULTS_SHOWN: usize = 8;

/// The note's "Results so far", once two or more different scripts or tool calls have run in
/// the task: one line per call (the latest of identical ones), oldest first, with the first
/// lines of what it printed or why it failed. On the local 1.5B, a batch of conversions ended
/// with an answer that held only the last result: the earlier ones sat far up the transcript.
pub(crate) fn results_lines(run: &Run) -> String {
    let results: Vec<(&Action, ObservationStatus, &str)> = run
        .state
        .latest_actions(|record| {
            record.action.as_ref().is_some_and(Action::is_call)
                && matches!(
                    record.status,
                    ObservationStatus::Ok | ObservationStatus::Failed | ObservationStatus::Timeout
                )
        })
        .into_iter()
        .filter_map(|record| {
            let text = run.observation_text(&record.observation);
            Some((record.action.as_ref()?, record.status, text))
        })
        .collect();
    if results.len() < 2 {
        return String::new();
    }
    let mut lines = String::from("Results so far:\n");
    for (action, status, text) in &results[results.len().saturating_sub(RESULTS_SHOWN)..] {
        let gist = crate::grounding::output_gist(text);
        let line = match status {
            ObservationStatus::Ok => format!("- {}: {gist}\n", action.summary()),
            ObservationStatus::Timeout => format!("- {}: timed out\n", action.summary()),
            _ => format!("- {}: failed: {gist}\n", action.summary()),
        };
        lines.push_str(&line);
    }
    lines
}

/// How the note's line of selected skills begins.
const SKILLS_LINE: &str = "Selected skills:";

/// The note's line of selected skills and their scripts (empty before a select).
pub(crate) fn skills_lines(run: &Run) -> String {
    let mut line = String::new();
    if !run.state.selected.is_empty() {
        line.push_str(SKILLS_LINE);
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
