//! Guardrails (seed 002 §5.2): what is refused and why (checked against the turn's action
//! space, [`crate::space`]), when repeated failures mean the run is stuck, and the
//! deterministic answer used when even the degraded model call fails.

use std::collections::HashMap;

use crate::action::Action;
use crate::budget::Outcome;
use crate::config::AgentConfig;
use crate::space::{ActionSpace, loaded_whole, user_named};
use crate::state::{ObservationStatus, RunState, StepStatus};
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

/// Why a script call does not fit the usage its SKILL.md shows: a placeholder copied as a
/// value (`<file named in the task>`, `VALUE`), or more or fewer arguments than any usage
/// shows. Told before anything runs, with the usage and the files the task names.
fn usage_refusal(state: &RunState, skill: &str, script: &str, args: &[String]) -> Option<String> {
    let usage = state.selected_skill(skill)?.usage_of(script);
    let shown = usage.map_or_else(String::new, |usage| format!(" (SKILL.md: `{}`)", usage.example));
    let files = crate::reasoning::named_files(&state.task);
    let named = if files.is_empty() {
        String::new()
    } else {
        format!("; the task names {}", files.join(", "))
    };
    if let Some(placeholder) =
        args.iter().find(|arg| crate::usage::is_placeholder(arg, usage, &state.task))
    {
        return Some(format!(
            "`{placeholder}` is a placeholder from the skill's usage{shown}, not a value: write \
             the value the task gives in its place{named}"
        ));
    }
    let usage = usage?;
    let (min, max) = (usage.min_args, usage.max_args);
    let takes = match max {
        Some(max) if max == min => format!("{min}"),
        Some(max) => format!("{min} to {max}"),
        None => format!("at least {min}"),
    };
    let fits =
        args.len() >= min && max.is_none_or(|max| args.len() <= max + crate::usage::PROSE_ARGS);
    (!fits).then(|| {
        let more = if max.is_some_and(|max| args.len() > max) {
            ": for several values, run it once per value"
        } else {
            ""
        };
        format!(
            "`{script}` takes {takes} argument{} (SKILL.md: `{}`), not {}{more}{named}",
            if takes == "1" { "" } else { "s" },
            usage.example,
            args.len()
        )
    })
}

/// Consecutive failures, per kind and per identical action.
#[derive(Debug, Clone, Default)]
pub(crate) struct FailureTracker {
    by_kind: HashMap<ObservationStatus, u32>,
    /// The last failing action and how many times in a row it failed. Answers that were no
    /// action (model errors, unreadable answers) are not actions: their per-kind caps apply.
    same_action: Option<(Action, u32)>,
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
    let pending: Vec<&str> = state
        .plan
        .iter()
        .flat_map(|plan| &plan.steps)
        .filter(|step| matches!(step.status, StepStatus::Pending | StepStatus::InProgress))
        .map(|step| step.title.as_str())
        .collect();
    if pending.is_empty() {
        text.push_str("- run the task again with a larger budget, or narrow it down\n");
    } else {
        for title in pending {
            text.push_str(&format!("- {title}\n"));
        }
    }
    text
}
