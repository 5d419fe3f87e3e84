//! Think-Act metrics (seed 000): a model call that acts without saying why is a silent call.
//!
//! A call counts once per tool call it makes (a structured-JSON action counts as one). It is
//! reasoned when it carries thinking, a non-empty `thought`, or visible text that is more than
//! markup left around the call (whitespace or a bare code fence, as the local model writes
//! "```json\n" before its calls).

use serde::{Deserialize, Serialize};

/// Per-run reasoning counters, reported in the run result and in `run_finished`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningMetrics {
    /// Calls made with no reasoning at all.
    pub silent_call_count: u64,
    /// Calls made with some reasoning.
    pub reasoned_call_count: u64,
    /// Characters of reasoning across all acting answers.
    pub reasoning_chars_total: u64,
    /// `silent / (silent + reasoned)`, 0 when no call was made.
    pub silent_call_rate: f64,
}

/// What one answer contributed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnReasoning {
    /// Calls in the answer (tool calls, or 1 for a structured action).
    pub calls: u64,
    /// Characters of reasoning.
    pub reasoning_chars: u64,
    /// Whether the calls were silent.
    pub silent: bool,
}

/// Visible text minus markup: whitespace and code-fence lines do not count as reasoning.
pub fn reasoning_text_chars(text: &str) -> u64 {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !is_fence(line))
        .map(|line| line.chars().count() as u64)
        .sum()
}

fn is_fence(line: &str) -> bool {
    line.strip_prefix("```")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

impl ReasoningMetrics {
    /// Counts one acting answer: `calls` actions, with `reasoning_chars` of reasoning.
    pub fn record(&mut self, calls: u64, reasoning_chars: u64) -> TurnReasoning {
        let silent = reasoning_chars == 0;
        if silent {
            self.silent_call_count += calls;
        } else {
            self.reasoned_call_count += calls;
        }
        self.reasoning_chars_total += reasoning_chars;
        let total = self.silent_call_count + self.reasoned_call_count;
        self.silent_call_rate =
            if total == 0 { 0.0 } else { self.silent_call_count as f64 / total as f64 };
        TurnReasoning { calls, reasoning_chars, silent }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_around_a_call_is_not_reasoning() {
        assert_eq!(reasoning_text_chars("```json\n"), 0);
        assert_eq!(reasoning_text_chars("  \n```\n\n"), 0);
        assert_eq!(reasoning_text_chars("I will run it.\n```json"), 14);
    }

    #[test]
    fn calls_are_counted_per_call() {
        let mut metrics = ReasoningMetrics::default();
        metrics.record(2, 0);
        metrics.record(1, 10);
        assert_eq!((metrics.silent_call_count, metrics.reasoned_call_count), (2, 1));
        assert!((metrics.silent_call_rate - 2.0 / 3.0).abs() < 1e-9);
    }
}
