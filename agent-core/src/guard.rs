//! Guardrails (seed 002 §5.2) and the per-turn action automaton: which actions the state
//! allows, what is refused and why, when repeated failures mean the run is stuck, and the
//! deterministic answer used when even the degraded model call fails.

use std::collections::HashMap;

use crate::action::{Action, ActionSpace, PlanField};
use crate::budget::Outcome;
use crate::config::{AgentConfig, DecideMode};
use crate::external::ExternalTool;
use crate::state::{ObservationStatus, RunState, StepStatus};
use tools_runtime::Decision;

/// Whether the user named `skill` (config, or `/name` or `$name` in the task).
pub(crate) fn user_named(task: &str, config: &AgentConfig, skill: &str) -> bool {
    config.guard.user_named_skills.iter().any(|name| name == skill)
        || ["/", "$"].iter().any(|sigil| {
            let needle = format!("{sigil}{skill}");
            task.match_indices(&needle).any(|(at, _)| {
                let after = task[at + needle.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
            })
        })
}

/// Lowercase words of three letters or more.
/// Words too common to say anything about relevance.
const STOP_WORDS: [&str; 58] = [
    "the", "and", "for", "with", "from", "that", "this", "what", "which", "when", "where", "who",
    "how", "are", "was", "were", "been", "has", "have", "had", "its", "his", "her", "their",
    "them", "they", "you", "your", "our", "use", "into", "about", "there", "here", "all", "any",
    "can", "not", "but", "one", "each", "these", "those", "some", "other", "then", "than", "also",
    "just", "only", "such", "will", "would", "should", "could", "please",
    // Descriptions say "Use when a task asks …": a task that says "task" is not about them.
    "task", "asks",
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() >= 3)
        .map(str::to_lowercase)
        .filter(|word| !STOP_WORDS.contains(&word.as_str()))
        .collect()
}

/// Catalog names with their word overlap with the task, best first (stable).
pub(crate) fn scored_skills(state: &RunState) -> Vec<(usize, String)> {
    let task: std::collections::HashSet<String> = words(&state.task).into_iter().collect();
    let mut scored: Vec<(usize, usize, &str)> = state
        .catalog
        .iter()
        .enumerate()
        .map(|(position, entry)| {
            let text = format!("{} {}", entry.name.replace('-', " "), entry.description);
            let mut seen = std::collections::HashSet::new();
            let score = words(&text)
                .into_iter()
                .filter(|word| task.contains(word) && seen.insert(word.clone()))
                .count();
            (score, position, entry.name.as_str())
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(score, _, name)| (score, name.to_owned())).collect()
}

/// The actions this turn allows, derived from the state.
pub(crate) fn action_space(state: &RunState, config: &AgentConfig) -> ActionSpace {
    let last = state.actions.last();
    let mut space = ActionSpace {
        max_select: match config.decide {
            DecideMode::Json => 1,
            DecideMode::Tools => config.guard.max_bodies_per_turn.max(1),
        },
        plan_field: if state.plan.is_some() { PlanField::PlanUpdate } else { PlanField::Plan },
        ..ActionSpace::default()
    };
    // An identical successful script run, repeated: only the answer is left.
    if let Some(record) = last
        && record.status == ObservationStatus::Ok
        && matches!(record.action, Some(Action::RunScript { .. } | Action::CallTool { .. }))
        && state.actions[..state.actions.len() - 1].iter().any(|earlier| {
            earlier.status == ObservationStatus::Ok && earlier.action == record.action
        })
    {
        space.note = Some(
            match record.action {
                Some(Action::CallTool { .. }) => {
                    "that tool was already called with the same arguments: answer now"
                }
                _ => "that script already ran with the same arguments: answer now",
            }
            .to_owned(),
        );
        space.plan_field = PlanField::None;
        return space;
    }
    // A skill was just selected: nothing but answers that were not actions at all, or selects
    // that were refused, came since (else one refused select opens the door to the next, which
    // is how the local 1.5B spent plan-execute-think's rounds selecting skill after skill; a
    // refused attempt to use the skill still frees the select, as the skill may be the wrong one).
    let just_selected = state
        .actions
        .iter()
        .rev()
        .find(|record| {
            let not_done = matches!(
                record.status,
                ObservationStatus::InvalidAction
                    | ObservationStatus::Refused
                    | ObservationStatus::ModelError
            );
            !(not_done && matches!(record.action, None | Some(Action::SelectSkills { .. })))
        })
        .is_some_and(|record| {
            record.status == ObservationStatus::Ok
                && matches!(record.action, Some(Action::SelectSkills { .. }))
        });
    if !just_selected {
        let scored = scored_skills(state);
        // A small model (JSON mode) picks skills unrelated to the task when offered them: when
        // some skill shares words with the task, only those are offered (and any the user
        // named), none once they are all selected (the local 1.5B selected csv-summary after
        // finishing a batch of conversions, then answered with one result). Native tool
        // callers see them all, ranked.
        let relevant_only =
            config.decide == DecideMode::Json && scored.iter().any(|(score, _)| *score > 0);
        space.select = scored
            .into_iter()
            .filter(|(score, name)| {
                !relevant_only || *score > 0 || user_named(&state.task, config, name)
            })
            .map(|(_, name)| name)
            .filter(|name| state.selected_skill(name).is_none())
            .filter(|name| {
                state.skill(name).is_some_and(|entry| !entry.disable_model_invocation)
                    || user_named(&state.task, config, name)
            })
            .collect();
    } else {
        space.note = Some("a skill was just selected: use it or answer".to_owned());
    }
    // After a call that worked, small models tend to make the same call again (measured on the
    // local 1.5B: an MCP call made twice in every run): say that its result is in.
    if last.is_some_and(|record| {
        record.status == ObservationStatus::Ok
            && matches!(record.action, Some(Action::RunScript { .. } | Action::CallTool { .. }))
    }) {
        space.note = Some(
            "the last call worked and its result is above: answer if it is enough, do not \
             repeat it"
                .to_owned(),
        );
    }
    for skill in &state.selected {
        // A file already read whole is in the transcript: offering it again only invites the
        // small models' habit of repeating their last action.
        let unread: Vec<String> = skill
            .resources
            .iter()
            .filter(|path| !loaded_whole(state, &skill.name, path))
            .cloned()
            .collect();
        if !unread.is_empty() {
            space.load.push((skill.name.clone(), unread));
        }
        if !skill.scripts.is_empty()
            && state.task_counters().script_runs < config.budgets.max_script_runs
        {
            space.run.push((skill.name.clone(), skill.scripts.clone()));
        }
    }
    let (describe, call) = external_offer(state, config);
    space.describe = describe;
    space.call = call;
    space.recall = state.compacted.clone();
    space.builtins = config.guard.builtin_tools;
    space.ask_user = config.guard.ask_user;
    space
}

/// The external tools the catalog offers: all but forbidden ones.
pub(crate) fn offered_tools(state: &RunState) -> Vec<&ExternalTool> {
    state.tools.iter().filter(|tool| tool.decision != Decision::Forbidden).collect()
}

/// Whether the catalog names the offered tools only (too many, or too long to list whole).
pub(crate) fn tools_summarised(tools: &[&ExternalTool], config: &AgentConfig) -> bool {
    let settings = &config.tools;
    tools.len() > settings.catalog_max_tools
        || tools
            .iter()
            .map(|tool| crate::external::catalog_line(tool).chars().count())
            .sum::<usize>()
            > settings.catalog_chars
}

/// Tools `describe_tools` may describe and tools `call_tool` may call: every offered tool is
/// callable when the catalog lists them whole, else only those described so far.
fn external_offer(state: &RunState, config: &AgentConfig) -> (Vec<String>, Vec<ExternalTool>) {
    let offered = offered_tools(state);
    if !tools_summarised(&offered, config) {
        return (Vec::new(), offered.into_iter().cloned().collect());
    }
    let described: std::collections::HashSet<&str> = state
        .actions
        .iter()
        .filter(|record| record.status == ObservationStatus::Ok)
        .filter_map(|record| match &record.action {
            Some(Action::DescribeTools { names }) => Some(names),
            _ => None,
        })
        .flatten()
        .map(String::as_str)
        .collect();
    let mut describe = Vec::new();
    let mut call = Vec::new();
    for tool in offered {
        if described.contains(tool.name.as_str()) {
            call.push(tool.clone());
        } else {
            describe.push(tool.name.clone());
        }
    }
    (describe, call)
}

/// Whether `skill`'s `path` was already loaded whole (no section) with success.
fn loaded_whole(state: &RunState, skill: &str, path: &str) -> bool {
    state.actions.iter().any(|record| {
        record.status == ObservationStatus::Ok
            && matches!(&record.action, Some(Action::LoadResource { skill: loaded, path: read, section: None })
                if loaded == skill && read == path)
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_words_that_say_what_a_task_is_about_count() {
        assert_eq!(
            words("Convert each of these: 5 miles to km; 1 TB to GiB."),
            ["convert", "miles", "gib"]
        );
        // The boilerplate of skill descriptions.
        assert_eq!(
            words("Use when a task asks for the total of a column in a CSV file."),
            ["total", "column", "csv", "file"]
        );
    }
}
