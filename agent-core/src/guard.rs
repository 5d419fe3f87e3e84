//! Guardrails (seed 002 §5.2): what is refused and why (checked against the turn's action
//! space, [`crate::space`]), when repeated failures mean the run is stuck, and the
//! deterministic answer used when even the degraded model call fails.

use std::collections::HashMap;

use crate::action::Action;
use crate::budget::Outcome;
use crate::config::AgentConfig;
use crate::space::{ActionSpace, loaded_whole, user_named};
use crate::state::{ActionRecord, ObservationStatus, RunState, StepStatus};
use tools_runtime::Decision;

/// What the guard says about an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    /// Not run; the model is told why.
    Refused(ObservationStatus, String),
    /// Not run, and the run must stop: a budget was hit.
    OverBudget(Outcome, String),
}

/// Checks `action` against the guardrails, then against the turn's action space.
pub(crate) fn check(
    state: &RunState,
    config: &AgentConfig,
    space: &ActionSpace,
    action: &Action,
) -> Verdict {
    let refused = |message: String| Verdict::Refused(ObservationStatus::Refused, message);
    match action {
        Action::SelectSkills { names } => {
            if names.len() > config.guard.max_bodies_per_turn {
                return refused(format!(
                    "at most {} skill bodies may be loaded per turn; select them in batches",
                    config.guard.max_bodies_per_turn
                ));
            }
            for name in names {
                match state.skill(name) {
                    None => {
                        return Verdict::Refused(
                            ObservationStatus::InvalidAction,
                            format!("there is no skill `{name}` in the catalog"),
                        );
                    }
                    Some(entry)
                        if entry.disable_model_invocation
                            && !user_named(&state.task, config, name) =>
                    {
                        return refused(format!(
                            "skill `{name}` has disable-model-invocation: true; only the user can \
                             invoke it (by naming /{name})"
                        ));
                    }
                    Some(_) => {}
                }
                if state.selected_skill(name).is_some() {
                    return refused(format!(
                        "skill `{name}` is already selected; use its files or answer"
                    ));
                }
            }
        }
        Action::LoadResource { skill, .. } | Action::RunScript { skill, .. } => {
            if state.selected_skill(skill).is_none() {
                return refused(format!(
                    "skill `{skill}` is not selected: select_skills it before using its files"
                ));
            }
            if let Action::LoadResource { path, section: None, .. } = action
                && loaded_whole(state, skill, path)
            {
                return refused(format!(
                    "`{path}` of skill `{skill}` was already loaded in full (see the earlier \
                     observation): use it or answer"
                ));
            }
            if let Action::RunScript { skill, script, args } = action
                && let Some(message) = usage_refusal(state, skill, script, args)
            {
                return refused(message);
            }
            if matches!(action, Action::RunScript { .. })
                && state.task_counters().script_runs >= config.budgets.max_script_runs
            {
                return Verdict::OverBudget(
                    Outcome::MaxScriptRuns,
                    format!(
                        "the script-run limit ({}) was reached",
                        config.budgets.max_script_runs
                    ),
                );
            }
        }
        Action::CallTool { name, .. } => {
            if let Some(tool) = state.tools.iter().find(|tool| &tool.name == name)
                && tool.decision == Decision::Forbidden
            {
                return Verdict::Refused(
                    ObservationStatus::Denied,
                    format!(
                        "tool `{name}` is forbidden by the policy (the `[mcp_servers.{}]` rules): \
                         it is never called",
                        crate::external::server_of(name)
                    ),
                );
            }
        }
        Action::DescribeTools { .. }
        | Action::RecallObservation { .. }
        | Action::Todo { .. }
        | Action::Schedule { .. }
        | Action::AskUser { .. }
        | Action::FinalAnswer { .. } => {}
    }
    match space.check(action) {
        Ok(()) => Verdict::Allowed,
        Err(message) => Verdict::Refused(ObservationStatus::InvalidAction, message),
    }
}

/// How a placeholder refusal says that the task names no file, so the file must be found by
/// another script first (`Run::action_space` looks for it from format 26).
pub(crate) const FIND_FILE_FIRST: &str = "the task names no file: find it first";

/// Why a script call does not fit the usage its SKILL.md shows: a placeholder copied as a
/// value (`<file named in the task>`, `VALUE`), or more or fewer arguments than any usage
/// shows. Told before anything runs, with the usage and the files the task names.
fn usage_refusal(state: &RunState, skill: &str, script: &str, args: &[String]) -> Option<String> {
    let usage = state.selected_skill(skill)?.usage_of(script);
    let placeholder = args.iter().find(|arg| crate::usage::is_placeholder(arg, usage, &state.task));
    let misfit = usage.filter(|usage| {
        args.len() < usage.min_args
            || usage.max_args.is_some_and(|max| args.len() > max + crate::usage::PROSE_ARGS)
    });
    if placeholder.is_none() && misfit.is_none() {
        return None;
    }
    let files = crate::reasoning::named_files(&state.task);
    let named = if files.is_empty() {
        String::new()
    } else {
        format!("; the task names {}", files.join(", "))
    };
    if let Some(placeholder) = placeholder {
        let shown =
            usage.map_or_else(String::new, |usage| format!(" (SKILL.md: `{}`)", usage.example));
        // The task names no file for a file placeholder: the value must be found first (on
        // the local 1.5B, "Find the CSV file … and total its amount column" went straight to
        // the CSV skill and was told to write a value the task does not give).
        let lower = placeholder.to_lowercase();
        let what = if files.is_empty() && (lower.contains("file") || lower.contains("path")) {
            format!(
                "{FIND_FILE_FIRST} (a skill that lists or finds files), then run this script \
                 with its path"
            )
        } else {
            format!("write the value the task gives in its place{named}")
        };
        return Some(format!(
            "`{placeholder}` is a placeholder from the skill's usage{shown}, not a value: {what}"
        ));
    }
    let usage = misfit?;
    let (min, max) = (usage.min_args, usage.max_args);
    let takes = match max {
        Some(max) if max == min => format!("{min}"),
        Some(max) => format!("{min} to {max}"),
        None => format!("at least {min}"),
    };
    let more = if max.is_some_and(|max| args.len() > max) {
        ": for several values, run it once per value"
    } else {
        ""
    };
    Some(format!(
        "`{script}` takes {takes} argument{} (SKILL.md: `{}`), not {}{more}{named}",
        if takes == "1" { "" } else { "s" },
        usage.example,
        args.len()
    ))
}

/// Consecutive failures, per kind and per identical action.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailureTracker {
    by_kind: HashMap<ObservationStatus, u32>,
    /// The last failing action and how many times in a row it failed. Answers that were no
    /// action (model errors, unreadable answers) are not actions: their per-kind caps apply.
    same_action: Option<(Action, u32)>,
    /// The observations of refusals that invite the same call again (an argument no source
    /// states, format 11): no step of a loop of the same failing action, in a row or across
    /// the task (`Run::repeated_in_task` asks [`FailureTracker::forgave`]).
    forgiven: Vec<String>,
}

impl FailureTracker {
    pub(crate) fn record(&mut self, action: Option<&Action>, status: ObservationStatus) {
        if status == ObservationStatus::Ok {
            self.by_kind.clear();
            self.same_action = None;
            return;
        }
        *self.by_kind.entry(status).or_insert(0) += 1;
        self.same_action = match (self.same_action.take(), action) {
            (Some((previous, count)), Some(action)) if previous == *action => {
                Some((previous, count + 1))
            }
            (_, action) => action.map(|action| (action.clone(), 1)),
        };
    }

    /// Takes the last recorded action, whose observation is `observation`, out of the
    /// same-action streak and out of the loops [`FailureTracker::forgave`] answers for (a
    /// refusal that invites the same call again); its kind still counts.
    pub(crate) fn forgive_last(&mut self, observation: String) {
        self.same_action = match self.same_action.take() {
            Some((action, count)) if count > 1 => Some((action, count - 1)),
            _ => None,
        };
        self.forgiven.push(observation);
    }

    /// A new piece of work (a task, an answer to the run's question): no failures in a row; the
    /// forgiven refusals stay forgiven (the observations are the run's).
    pub(crate) fn restart(&mut self) {
        self.by_kind.clear();
        self.same_action = None;
    }

    /// Whether the action whose observation is `observation` was forgiven: no step of a loop.
    pub(crate) fn forgave(&self, observation: &str) -> bool {
        self.forgiven.iter().any(|id| id == observation)
    }

    /// Whether the run is stuck, with the reason.
    pub(crate) fn stuck(&self, config: &AgentConfig) -> Option<String> {
        if let Some((action, count)) = &self.same_action
            && *count >= config.guard.stuck_repeats
        {
            return Some(format!(
                "the same failing action ({}) came {count} times in a row",
                action.summary()
            ));
        }
        let caps = &config.guard.retry_caps;
        for (status, count) in &self.by_kind {
            let cap = match status {
                ObservationStatus::Ok => continue,
                ObservationStatus::InvalidAction => caps.invalid_action,
                ObservationStatus::Refused | ObservationStatus::Denied => caps.refused,
                ObservationStatus::Failed => caps.failed,
                ObservationStatus::Timeout => caps.timeout,
                ObservationStatus::ModelError => caps.model_error,
            };
            if *count > cap {
                return Some(format!("{count} {} failures in a row (cap {cap})", status.as_str()));
            }
        }
        None
    }

    /// Consecutive model errors so far.
    pub(crate) fn model_errors(&self) -> u32 {
        self.by_kind.get(&ObservationStatus::ModelError).copied().unwrap_or(0)
    }
}

/// The titles of the plan's steps not done yet.
fn pending_steps(state: &RunState) -> Vec<&str> {
    state
        .plan
        .iter()
        .flat_map(|plan| &plan.steps)
        .filter(|step| matches!(step.status, StepStatus::Pending | StepStatus::InProgress))
        .map(|step| step.title.as_str())
        .collect()
}

/// The characters of a call's output or error a report line keeps.
const REPORT_CHARS: usize = 240;

/// Lines of a report's list: more than this and the rest are counted.
const REPORT_LINES: usize = 8;

/// The report a stopped task ends with when the model gives none (format 6): what was tried
/// and how each call ended (a failure with its own error), what is known so far (the results'
/// first lines; each once with `distinct_results`, format 31), and what the user could do —
/// all from the record, never a thought.
pub(crate) fn report<'a>(
    state: &RunState,
    text_of: impl Fn(&str) -> &'a str,
    outcome: Outcome,
    reason: &str,
    distinct_results: bool,
) -> String {
    let records: Vec<&ActionRecord> = state.task_actions().collect();
    // One line per distinct action, in the order first tried, with how it last ended.
    let mut tried: Vec<(&Action, usize, &ActionRecord)> = Vec::new();
    for record in &records {
        let Some(action) = &record.action else { continue };
        if matches!(action, Action::FinalAnswer { .. } | Action::AskUser { .. }) {
            continue;
        }
        match tried.iter_mut().find(|(known, _, _)| *known == action) {
            Some(entry) => {
                entry.1 += 1;
                // A refused repeat tells less than the run it repeats.
                if record.status != ObservationStatus::Refused
                    || entry.2.status == ObservationStatus::Refused
                {
                    entry.2 = record;
                }
            }
            None => tried.push((action, 1, record)),
        }
    }
    let mut text = format!("I could not finish the task: {reason}.\n\nWhat was tried:\n");
    let unreadable = |status: ObservationStatus| -> Vec<&&ActionRecord> {
        records.iter().filter(|record| record.action.is_none() && record.status == status).collect()
    };
    let (invalid, model_errors) =
        (unreadable(ObservationStatus::InvalidAction), unreadable(ObservationStatus::ModelError));
    if tried.is_empty() && invalid.is_empty() && model_errors.is_empty() {
        text.push_str("- nothing\n");
    }
    for (action, times, record) in tried.iter().take(REPORT_LINES) {
        let how = match record.status {
            ObservationStatus::Ok => "worked".to_owned(),
            ObservationStatus::Failed => {
                format!(
                    "failed: {}",
                    crate::grounding::gist_within(text_of(&record.observation), REPORT_CHARS)
                )
            }
            ObservationStatus::Timeout => "timed out".to_owned(),
            _ => {
                format!(
                    "refused: {}",
                    crate::grounding::gist_within(text_of(&record.observation), REPORT_CHARS)
                )
            }
        };
        let times = if *times > 1 { format!(" ({times} times)") } else { String::new() };
        text.push_str(&format!("- {}{times}: {how}\n", action.summary()));
    }
    if tried.len() > REPORT_LINES {
        text.push_str(&format!("- and {} more\n", tried.len() - REPORT_LINES));
    }
    for (records, one, many) in [
        (
            &invalid,
            "answer of the model that was no valid action",
            "answers of the model that were no valid action",
        ),
        (&model_errors, "model call that failed", "model calls that failed"),
    ] {
        if let Some(last) = records.last() {
            let what = if records.len() == 1 { one } else { many };
            text.push_str(&format!(
                "- {} {what}, the last: {}\n",
                records.len(),
                crate::grounding::output_gist(text_of(&last.observation))
            ));
        }
    }
    text.push_str("\nWhat is known so far:\n");
    let results: Vec<&&ActionRecord> = records.iter().filter(|record| record.is_result()).collect();
    if results.is_empty() {
        text.push_str("- no result yet: any value would be a guess\n");
    }
    // From format 31 each result once, where it was last obtained (a run that repeated a
    // call listed its output as many times).
    let mut results = results;
    if distinct_results {
        let mut seen: Vec<&Action> = Vec::new();
        let mut distinct: Vec<&&ActionRecord> = results
            .iter()
            .rev()
            .filter(|record| match &record.action {
                Some(action) if seen.contains(&action) => false,
                Some(action) => {
                    seen.push(action);
                    true
                }
                None => true,
            })
            .copied()
            .collect();
        distinct.reverse();
        results = distinct;
    }
    for record in results.iter().rev().take(REPORT_LINES).rev() {
        let summary = record.action.as_ref().map(Action::summary).unwrap_or_default();
        text.push_str(&format!(
            "- {summary}: {}\n",
            crate::grounding::gist_within(text_of(&record.observation), REPORT_CHARS)
        ));
    }
    text.push_str("\nWhat you could do:\n");
    let pending = pending_steps(state);
    for title in &pending {
        text.push_str(&format!("- still to do: {title}\n"));
    }
    let advice = match outcome {
        Outcome::Error => {
            "- the model calls kept failing: check the model or its provider (the run's events \
             hold each error), then run the task again"
        }
        Outcome::Stuck if records.last().is_some_and(|record| record.action.is_none()) => {
            "- the model's answers were not valid actions: try a larger model (--model) or a \
             simpler task"
        }
        Outcome::Stuck => {
            "- read the error above: give the value, file or skill it asks for, then run the \
             task again"
        }
        Outcome::Cancelled => {
            "- run the task again (or `skills-agent resume` the run) to finish it"
        }
        _ => "- run the task again with a larger budget, or split it into smaller tasks",
    };
    text.push_str(advice);
    text.push('\n');
    text
}

/// The answer written when the degraded model call fails: what was done, the blocker, next
/// steps — from the state alone.
pub(crate) fn fallback_answer(state: &RunState, reason: &str) -> String {
    let mut text = String::from("The run stopped before the task was finished.\n\nDone so far:\n");
    let done: Vec<String> = state
        .actions
        .iter()
        .filter(|record| record.status == ObservationStatus::Ok)
        .filter_map(|record| {
            record
                .action
                .as_ref()
                .map(|action| format!("- {} ({})", action.summary(), record.observation))
        })
        .collect();
    if done.is_empty() {
        text.push_str("- nothing completed\n");
    } else {
        for line in done {
            text.push_str(&line);
            text.push('\n');
        }
    }
    text.push_str(&format!("\nBlocker: {reason}.\n\nNext steps:\n"));
    let pending = pending_steps(state);
    if pending.is_empty() {
        text.push_str("- run the task again with a larger budget, or narrow it down\n");
    } else {
        for title in pending {
            text.push_str(&format!("- {title}\n"));
        }
    }
    text
}
