//! The run state (seed 002 §4): request, skill catalog, selected skills, plan, counters and the
//! audit trail of actions. Serialisable; written to `state.json` at the end of every turn.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::Action;
use crate::metrics::ReasoningMetrics;
pub use crate::plan::{Plan, PlanStep, PlanUpdate, StepChange, StepStatus};

/// One skill of the level-1 catalog, as the run saw it (recorded in `run_started`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillEntry {
    /// The skill's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The root kind it came from (`project`, `user`, `extra`, `builtin`).
    pub source: String,
    /// Its folder.
    pub directory: String,
    /// `disable-model-invocation: true`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_model_invocation: bool,
    /// The skill's `allowed-tools`, when it declares them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
}

impl From<&skills_agent_registry::Skill> for SkillEntry {
    /// The catalog entry of an indexed skill (its frontmatter only).
    fn from(skill: &skills_agent_registry::Skill) -> SkillEntry {
        SkillEntry {
            name: skill.name.clone(),
            description: skill.description.clone(),
            source: skill.source.kind.as_str().to_owned(),
            directory: skill.directory.display().to_string(),
            disable_model_invocation: skill.controls.disable_model_invocation,
            allowed_tools: skill.controls.allowed_tools.clone(),
        }
    }
}

/// A skill the model selected: its body was loaded and its files listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedSkill {
    /// The skill's name.
    pub name: String,
    /// Files under `scripts/` (relative paths), the only things `run_script` may run.
    pub scripts: Vec<String>,
    /// Other readable files (relative paths), what `load_resource` offers.
    pub resources: Vec<String>,
    /// How SKILL.md shows its scripts called (the scripts it shows with arguments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<crate::usage::ScriptUsage>,
    /// The files of `resources` that SKILL.md names (`references/rates.md`), in the order it
    /// first names them: `load_resource` offers them first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub referenced: Vec<String>,
}

impl SelectedSkill {
    /// The usage SKILL.md shows for `script`, if any.
    pub fn usage_of(&self, script: &str) -> Option<&crate::usage::ScriptUsage> {
        self.usage.iter().find(|usage| usage.script == script)
    }
}

/// How an action ended, as the model is told and as counted for retry caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationStatus {
    /// It worked (a script that exited 0, a file read, skills loaded).
    Ok,
    /// The answer was not one valid action (parse, schema, unknown name).
    InvalidAction,
    /// A guardrail refused it (select first, hidden skill, too many bodies, budget).
    Refused,
    /// tools-runtime's policy or the approver said no.
    Denied,
    /// A script exited non-zero or was killed; a file could not be read.
    Failed,
    /// A script ran out of time.
    Timeout,
    /// The model call itself failed (after model-adapter's retries).
    ModelError,
}

impl ObservationStatus {
    /// The lowercase name used in events.
    pub fn as_str(self) -> &'static str {
        match self {
            ObservationStatus::Ok => "ok",
            ObservationStatus::InvalidAction => "invalid_action",
            ObservationStatus::Refused => "refused",
            ObservationStatus::Denied => "denied",
            ObservationStatus::Failed => "failed",
            ObservationStatus::Timeout => "timeout",
            ObservationStatus::ModelError => "model_error",
        }
    }
}

/// One entry of the audit trail: an action and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// The turn.
    pub turn: u32,
    /// The action (absent when the answer was not a valid action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// How it ended.
    pub status: ObservationStatus,
    /// The observation's id (`obs-N`).
    pub observation: String,
}

impl ActionRecord {
    /// Whether this is a result: a script run or tool call that ended `ok`.
    pub fn is_result(&self) -> bool {
        self.status == ObservationStatus::Ok && self.action.as_ref().is_some_and(Action::is_call)
    }
}

/// Usage counters of a run (a record that lacks one reads it as 0).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Decide turns started.
    pub turns: u32,
    /// Model calls made (decide, degraded answer, summaries).
    pub model_calls: u32,
    /// Actions other than `final_answer` the model asked for.
    pub tool_calls: u32,
    /// Scripts started.
    pub script_runs: u32,
    /// Prompt tokens reported by the provider.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
    /// Compactions of the context.
    pub compactions: u32,
    /// Actions refused by guardrails, policy or approver.
    pub refusals: u32,
}

/// Everything the runtime knows about a run; written to `state.json` after every turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The run id.
    pub run_id: String,
    /// The user's request (redacted).
    pub task: String,
    /// The level-1 catalog the run saw.
    pub catalog: Vec<SkillEntry>,
    /// The external (MCP) tools on offer now (re-read before every turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<crate::external::ExternalTool>,
    /// Skills selected so far, in order.
    pub selected: Vec<SelectedSkill>,
    /// The current plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Counters.
    pub counters: Counters,
    /// Think-Act metrics.
    pub reasoning: ReasoningMetrics,
    /// The audit trail.
    pub actions: Vec<ActionRecord>,
    /// Ids of observations compacted out of the context (recallable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compacted: Vec<String>,
    /// Set when the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<crate::Outcome>,
    /// Free-form state a strategy keeps (persisted with the rest).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub strategy_state: Value,
    /// The question the run asked the user (`ask_user`) and waits to have answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_question: Option<String>,
    /// The counters when the current task began: budgets apply to each task of a run
    /// (a session takes several), counters add up over the run.
    #[serde(default, skip_serializing_if = "Counters::is_zero")]
    pub task_base: Counters,
    /// The words of the results that worked (script output, tool results): what the run has
    /// found out. Not saved: a re-run of the record rebuilds it.
    #[serde(skip)]
    pub(crate) result_words: std::collections::BTreeSet<String>,
}

/// The bytes of `state.json` — exactly `serde_json::to_vec_pretty` of the state — with each
/// audit-trail record serialised once, when it is new, so that the checkpoint of turn 200
/// costs what the checkpoint of turn 2 does. The audit trail is append-only; a shorter one
/// (another run's state) starts the cache over.
#[derive(Debug, Default)]
pub(crate) struct StateJson {
    /// The records so far, each as `\n    {…}` (pretty, at the depth of the `actions` array),
    /// separated by commas.
    audit: Vec<u8>,
    records: usize,
}

/// `"actions": []` as `to_vec_pretty` writes it for the state's own field: the only key at
/// the indentation of the top level (strings hold no raw line break, nested keys are deeper).
const EMPTY_AUDIT_TRAIL: &[u8] = b"\n  \"actions\": []";

impl StateJson {
    pub(crate) fn render(&mut self, state: &mut RunState) -> serde_json::Result<Vec<u8>> {
        if self.records > state.actions.len() {
            *self = StateJson::default();
        }
        for record in &state.actions[self.records..] {
            if self.records > 0 {
                self.audit.push(b',');
            }
            self.audit.extend_from_slice(b"\n    ");
            for byte in serde_json::to_vec_pretty(record)? {
                match byte {
                    b'\n' => self.audit.extend_from_slice(b"\n    "),
                    byte => self.audit.push(byte),
                }
            }
            self.records += 1;
        }
        let actions = std::mem::take(&mut state.actions);
        let rest = serde_json::to_vec_pretty(&*state);
        state.actions = actions;
        let rest = rest?;
        let found =
            rest.windows(EMPTY_AUDIT_TRAIL.len()).position(|window| window == EMPTY_AUDIT_TRAIL);
        let Some(at) = found else { return serde_json::to_vec_pretty(&*state) };
        if self.records == 0 {
            return Ok(rest);
        }
        let mut bytes = Vec::with_capacity(rest.len() + self.audit.len() + 8);
        bytes.extend_from_slice(&rest[..at]);
        bytes.extend_from_slice(b"\n  \"actions\": [");
        bytes.extend_from_slice(&self.audit);
        bytes.extend_from_slice(b"\n  ]");
        bytes.extend_from_slice(&rest[at + EMPTY_AUDIT_TRAIL.len()..]);
        Ok(bytes)
    }
}

impl Counters {
    /// Whether every counter is zero.
    pub fn is_zero(&self) -> bool {
        *self == Counters::default()
    }
}

/// The record format from which a script call refused before it ran (a respelled unit, an
/// example's value, a repeat of a failure) uses none of the task's values
/// ([`RunState::task_script_args`]). In plan-execute-think, "convert 1 nmi to m, 20 C to F and
/// 1 GiB to MB" had a refused `["1", "mi", "m"]` count as the second "1": the plan note never
/// listed `1 GiB` again, and the answer without it was taken as complete.
pub(crate) const USED_BY_RUNS_SINCE_FORMAT: u32 = 34;

impl RunState {
    /// The counters of the current task: turns, tool calls and script runs since the task
    /// began (what the budgets limit); the other counters are the run's.
    pub fn task_counters(&self) -> Counters {
        let base = &self.task_base;
        let mut used = self.counters.clone();
        used.turns = used.turns.saturating_sub(base.turns);
        used.tool_calls = used.tool_calls.saturating_sub(base.tool_calls);
        used.script_runs = used.script_runs.saturating_sub(base.script_runs);
        used
    }

    /// The arguments of the current task's script calls, in order. With `ran_only` (from
    /// format 34, [`USED_BY_RUNS_SINCE_FORMAT`]) a call refused before it ran uses none of its
    /// values.
    pub(crate) fn task_script_args(&self, ran_only: bool) -> Vec<&str> {
        self.task_actions()
            .filter(|record| {
                !(ran_only
                    && matches!(
                        record.status,
                        ObservationStatus::Refused | ObservationStatus::Denied
                    ))
            })
            .filter_map(|record| match &record.action {
                Some(Action::RunScript { args, .. }) => Some(args),
                _ => None,
            })
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// The action records of the current task (a chat's earlier tasks are done).
    pub(crate) fn task_actions(&self) -> impl DoubleEndedIterator<Item = &ActionRecord> {
        let first_turn = self.task_base.turns;
        self.actions.iter().filter(move |record| record.turn > first_turn)
    }

    /// The latest record of each distinct action of the current task that `keep` takes, in
    /// the order of those latest records (a call made again counts where it was made last).
    pub(crate) fn latest_actions(
        &self,
        keep: impl Fn(&ActionRecord) -> bool,
    ) -> Vec<&ActionRecord> {
        let mut latest: Vec<&ActionRecord> = Vec::new();
        for record in self.task_actions().filter(|record| keep(record)) {
            latest.retain(|earlier| earlier.action != record.action);
            latest.push(record);
        }
        latest
    }

    /// The catalog entry of `name`.
    pub fn skill(&self, name: &str) -> Option<&SkillEntry> {
        self.catalog.iter().find(|entry| entry.name == name)
    }

    /// The selected skill `name`.
    pub fn selected_skill(&self, name: &str) -> Option<&SelectedSkill> {
        self.selected.iter().find(|skill| skill.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_json_is_the_pretty_serialisation() {
        let mut state = RunState {
            run_id: "r".into(),
            task: "a task with \"actions\": [] in it\nand a line break".into(),
            catalog: Vec::new(),
            tools: Vec::new(),
            selected: Vec::new(),
            plan: None,
            counters: Counters::default(),
            reasoning: ReasoningMetrics::default(),
            actions: Vec::new(),
            compacted: Vec::new(),
            outcome: None,
            strategy_state: serde_json::json!({"actions": [], "nested": {"actions": []}}),
            pending_question: None,
            task_base: Counters::default(),
            result_words: Default::default(),
        };
        let mut json = StateJson::default();
        let mut check = |state: &mut RunState| {
            let want = serde_json::to_vec_pretty(&*state).unwrap();
            assert_eq!(
                String::from_utf8(json.render(state).unwrap()).unwrap(),
                String::from_utf8(want).unwrap()
            );
        };
        check(&mut state);
        for turn in 1..=4 {
            state.actions.push(ActionRecord {
                turn,
                action: (turn != 2).then(|| Action::LoadResource {
                    skill: "notes".into(),
                    path: "a \"b\".md".into(),
                    section: Some("S".into()),
                }),
                status: ObservationStatus::Ok,
                observation: format!("obs-{turn}"),
            });
            state.counters.turns = turn;
            check(&mut state);
        }
        state.compacted.push("obs-1".into());
        state.plan = Some(Plan::default());
        check(&mut state);
        // Another, shorter audit trail starts over.
        state.actions.truncate(1);
        check(&mut state);
    }
}
