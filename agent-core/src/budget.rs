//! How a run ends (seed 002 §8.2). Every outcome comes with a final text for the user.

use serde::{Deserialize, Serialize};

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The model gave its final answer.
    Completed,
    /// `max_turns` was reached (degraded answer).
    MaxTurns,
    /// `max_tool_calls` was reached (degraded answer).
    MaxToolCalls,
    /// The model asked for a script after `max_script_runs` (degraded answer).
    MaxScriptRuns,
    /// `max_duration` passed (degraded answer).
    MaxDuration,
    /// The context could not be brought under `max_context_chars` (degraded answer).
    Context,
    /// The same failing action, or failures of one kind, repeated past their cap.
    Stuck,
    /// The caller cancelled the run.
    Cancelled,
    /// The model kept failing (after model-adapter's retries).
    Error,
    /// The run asked the user a question (`ask_user`) and waits for the answer; the final
    /// text is the question. [`Agent::send`](crate::Agent::send) continues it.
    NeedsInput,
}

impl Outcome {
    /// The exit code of the `skills-agent` CLI for a run that ended this way: 0 completed,
    /// 1 error, 4 waiting for the user's answer, 3 the degraded endings (budgets, stuck,
    /// cancelled).
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Completed => 0,
            Outcome::Error => 1,
            Outcome::NeedsInput => 4,
            _ => 3,
        }
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::MaxTurns => "max_turns",
            Outcome::MaxToolCalls => "max_tool_calls",
            Outcome::MaxScriptRuns => "max_script_runs",
            Outcome::MaxDuration => "max_duration",
            Outcome::Context => "context",
            Outcome::Stuck => "stuck",
            Outcome::Cancelled => "cancelled",
            Outcome::Error => "error",
            Outcome::NeedsInput => "needs_input",
        }
    }

    /// Whether the final text is a degraded answer rather than the model's own.
    pub fn is_degraded(self) -> bool {
        !matches!(self, Outcome::Completed | Outcome::NeedsInput)
    }
}
