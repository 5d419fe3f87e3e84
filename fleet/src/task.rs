//! What travels through the engine: a task, its run's state, a worker's heartbeat, the fleet's
//! status and a dead letter. All JSON, one message or KV entry each.

use serde::{Deserialize, Serialize};

/// What to run: the task and the settings `run` takes as flags. A missing setting is the
/// worker's (its config file, its `--model`), as for `run` without the flag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// The task, as `run TASK` takes it.
    pub task: String,
    /// The loop strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// The model spec (`local`, `openai:MODEL`, `mock:FILE` — a relative file is looked up in
    /// the task's workspace first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether the model may ask a question (`ask_user`): a worker has no one to ask, so the
    /// run then ends `needs_input` (exit 4) with the question in its record, as `run
    /// --ask-user` does without a terminal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ask_user: bool,
    /// When scripts need approval (`never`, `ask-for-risky`, `always`); a worker has no
    /// terminal, so a script that needs approval is refused with the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// Maximum turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Maximum actions other than the final answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// Maximum scripts run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_script_runs: Option<u32>,
    /// Maximum characters of context sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context_chars: Option<usize>,
}

/// A task in the work queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// The task's id (`task-…`), also the token of its events subject.
    pub id: String,
    /// What to run.
    pub spec: TaskSpec,
    /// The object holding its workspace archive, when it carries one.
    pub workspace: Option<String>,
    /// When it was submitted (RFC 3339).
    pub submitted: String,
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Waiting for a worker.
    Queued,
    /// A worker runs it.
    Running,
    /// Its run finished (with any outcome) and its record is stored.
    Finished,
    /// It failed every try and went to dead-letter.
    Dead,
}

impl TaskState {
    /// The name, as JSON spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Finished => "finished",
            TaskState::Dead => "dead",
        }
    }
}

/// A task's state in the runs bucket (key: the task id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStatus {
    /// The task.
    pub task_id: String,
    /// The task's text.
    pub task: String,
    /// Where it is.
    pub state: TaskState,
    /// The worker that holds (or held) it.
    #[serde(default)]
    pub worker: Option<String>,
    /// Its run's id, once the run began.
    #[serde(default)]
    pub run_id: Option<String>,
    /// How many times a worker took it.
    #[serde(default)]
    pub attempts: u32,
    /// The run's outcome (`completed`, `budget_exhausted`, …), once finished.
    #[serde(default)]
    pub outcome: Option<String>,
    /// `run`'s exit code for that outcome, once finished (1 for a dead task).
    #[serde(default)]
    pub exit_code: Option<u8>,
    /// The final answer, once finished.
    #[serde(default)]
    pub final_text: Option<String>,
    /// The last error of a try that failed (or why the task is dead).
    #[serde(default)]
    pub error: Option<String>,
    /// When this state was written (RFC 3339).
    pub updated: String,
}

/// A worker's heartbeat in the workers bucket (key: its name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// The worker's name.
    pub name: String,
    /// How many tasks it runs at once.
    pub concurrency: usize,
    /// The tasks it runs now.
    pub current: Vec<String>,
    /// How many tasks it finished since it started.
    pub finished: u64,
    /// When it wrote this (RFC 3339).
    pub heartbeat: String,
}

/// A task that failed every try, on the dead-letter subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The task's id.
    pub task_id: String,
    /// The task (its spec and workspace object), when its message could be read.
    pub task: Option<Task>,
    /// How many times it was tried.
    pub attempts: u32,
    /// Why it failed (the last try's error).
    pub reason: String,
    /// When it was given up (RFC 3339).
    pub at: String,
}

/// The fleet at a glance (`fleet status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetStatus {
    /// The workers that sent a heartbeat lately.
    pub workers: Vec<WorkerInfo>,
    /// Tasks waiting for a worker.
    pub queued: u64,
    /// Tasks a worker holds.
    pub running: u64,
    /// Finished runs by outcome, and `dead` for dead-lettered tasks.
    pub outcomes: std::collections::BTreeMap<String, u64>,
    /// The dead-lettered tasks.
    pub dead: Vec<DeadLetter>,
}

/// The current time as RFC 3339 in UTC with milliseconds.
pub(crate) fn now() -> String {
    let since =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Howard Hinnant's days-to-civil: (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A new task id: `task-` + milliseconds since 1970 and 32 random bits, in hex (sortable by
/// submission time; a subject token).
pub(crate) fn new_task_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(millis);
    hasher.write_u32(std::process::id());
    format!("task-{millis:011x}-{:08x}", hasher.finish() as u32)
}

/// Whether `id` looks like a task id (a subject token, no path separators).
pub fn is_task_id(id: &str) -> bool {
    id.starts_with("task-")
        && id.len() <= 64
        && id.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_ids() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_418), (2025, 11, 26));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let id = new_task_id();
        assert!(is_task_id(&id), "{id}");
        assert_ne!(id, new_task_id());
        assert!(!is_task_id("task-../x"));
        assert!(now().ends_with('Z'));
    }

    #[test]
    fn a_task_line_with_a_typo_is_refused() {
        let error = serde_json::from_str::<TaskSpec>(r#"{"task": "x", "modle": "local"}"#);
        assert!(error.is_err());
        let spec: TaskSpec = serde_json::from_str(r#"{"task": "x", "model": "local"}"#).unwrap();
        assert_eq!(spec.model.as_deref(), Some("local"));
    }
}
