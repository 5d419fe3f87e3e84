//! Think-Act counters (seed 000): the per-run reasoning metrics the run state carries, and the
//! rule that counts them.
//!
//! Detection. An answer that acts (tool calls, or one structured-JSON action) is *reasoned*
//! when it carries thinking, a non-empty `thought` field, or visible text that is more than
//! markup left around the call — whitespace or a bare code fence, as the local model writes
//! "```json\n" before its calls. Otherwise it is *silent*. Either way it counts once per call
//! it makes (`silent_call_count += len(tool_calls)`; a structured action is one call).

use model_adapter::{Response, ThinkingBlockContent};
use serde::{Deserialize, Serialize};

/// Per-run reasoning counters, reported in the run result and in `run_finished` (a record
/// that lacks one reads it as 0).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ReasoningMetrics {
    /// Calls made with no reasoning at all.
    pub silent_call_count: u64,
    /// Calls made with some reasoning.
    pub reasoned_call_count: u64,
    /// Characters of reasoning across all acting answers.
    pub reasoning_chars_total: u64,
    /// `silent / (silent + reasoned)`, 0 when no call was made.
    pub silent_call_rate: f64,
    /// Final answers refused once because they stated a value nothing in the run shows
    /// (written only when not 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub ungrounded_refusals: u64,
    /// Ungrounded final answers taken anyway (the second of a task), each marked
    /// `grounded: false` (written only when not 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub ungrounded_answers: u64,
    /// Final answers refused once as incomplete: they left numbers of the task unused while a
    /// call used another (a batch answered after its first item), or, from format 10, restated
    /// one result where the task asks to combine two (from format 11 also a second, other
    /// result restated alone, from format 12 an answer with no figure, from format 22 an
    /// answer that gives one of several like results the task names none of; written only
    /// when not 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub incomplete_refusals: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// Characters of reasoning in visible text: the text trimmed, without the lines that are only
/// a code fence (```` ``` ```` or ```` ```json ````), so that markup around a call is not
/// reasoning.
pub fn reasoning_text_chars(text: &str) -> u64 {
    let kept: Vec<&str> = text.lines().filter(|line| !is_fence(line.trim())).collect();
    kept.join("\n").trim().chars().count() as u64
}

fn is_fence(line: &str) -> bool {
    line.strip_prefix("```")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

impl ReasoningMetrics {
    /// Counts one acting answer: `calls` actions, with `reasoning_chars` of reasoning.
    pub fn record(&mut self, calls: u64, reasoning_chars: u64) -> TurnReasoning {
        self.tally(calls, reasoning_chars, reasoning_chars > 0)
    }

    /// Counts one acting answer from the response itself. `thought` is the decision's
    /// `thought` field; `text_is_action` says the visible text is the structured action
    /// document (JSON mode without tool calls), not prose around a call.
    ///
    /// Thinking and `thought` count trimmed; a redacted thinking block is reasoning the
    /// provider hid (reasoned, no characters). Invalid tool calls are calls the model made.
    pub(crate) fn record_answer(
        &mut self,
        response: &Response,
        thought: Option<&str>,
        text_is_action: bool,
    ) -> TurnReasoning {
        let calls = (response.tool_calls.len() + response.invalid_tool_calls.len()).max(1) as u64;
        let visible = if text_is_action { 0 } else { reasoning_text_chars(&response.text) };
        let thinking = response.thinking.trim().chars().count() as u64;
        let thought = thought.map_or(0, |text| text.trim().chars().count() as u64);
        let chars = visible + thinking + thought;
        let redacted = response
            .thinking_blocks
            .iter()
            .any(|block| matches!(block.content, ThinkingBlockContent::RedactedThinking { .. }));
        self.tally(calls, chars, chars > 0 || redacted)
    }

    fn tally(&mut self, calls: u64, reasoning_chars: u64, reasoned: bool) -> TurnReasoning {
        if reasoned {
            self.reasoned_call_count += calls;
        } else {
            self.silent_call_count += calls;
        }
        self.reasoning_chars_total += reasoning_chars;
        let total = self.silent_call_count + self.reasoned_call_count;
        self.silent_call_rate =
            if total == 0 { 0.0 } else { self.silent_call_count as f64 / total as f64 };
        TurnReasoning { calls, reasoning_chars, silent: !reasoned }
    }
}

#[cfg(test)]
mod tests {
    use model_adapter::{InvalidToolCall, ThinkingBlock, ToolCall};
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    use super::*;

    fn call(name: &str) -> ToolCall {
        ToolCall { id: format!("call-{name}"), name: name.to_owned(), arguments: json!({}) }
    }

    /// The data-driven table: each case is an answer and what it must count as.
    #[test]
    fn detection_table() {
        let table: Value =
            serde_json::from_str(include_str!("../tests/data/reasoning/detection.json")).unwrap();
        for case in table.as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let response = Response {
                text: case["text"].as_str().unwrap_or_default().to_owned(),
                thinking: case["thinking"].as_str().unwrap_or_default().to_owned(),
                tool_calls: (0..case["tool_calls"].as_u64().unwrap_or(0))
                    .map(|n| call(&format!("t{n}")))
                    .collect(),
                ..Response::default()
            };
            let mut metrics = ReasoningMetrics::default();
            let turn = metrics.record_answer(
                &response,
                case["thought"].as_str(),
                case["text_is_action"].as_bool().unwrap_or(false),
            );
            let want = &case["expect"];
            assert_eq!(
                (turn.calls, turn.reasoning_chars, turn.silent),
                (
                    want["calls"].as_u64().unwrap(),
                    want["chars"].as_u64().unwrap(),
                    want["silent"].as_bool().unwrap()
                ),
                "case {name}"
            );
            let (silent, reasoned) = if turn.silent { (turn.calls, 0) } else { (0, turn.calls) };
            assert_eq!(
                (metrics.silent_call_count, metrics.reasoned_call_count),
                (silent, reasoned),
                "case {name}"
            );
        }
    }

    #[test]
    fn markup_around_a_call_is_not_reasoning() {
        assert_eq!(reasoning_text_chars("```json\n"), 0);
        assert_eq!(reasoning_text_chars("  \n```\n\n"), 0);
        assert_eq!(reasoning_text_chars("I will run it.\n```json"), 14);
        // Like the seed's `len(content.strip())`, inner line breaks count.
        assert_eq!(reasoning_text_chars("\n a\n\nb \n"), 4);
        // A fence with more on its line is not bare.
        assert_eq!(reasoning_text_chars("```json {\"a\": 1}"), 16);
    }

    #[test]
    fn calls_are_counted_per_call() {
        let mut metrics = ReasoningMetrics::default();
        metrics.record(2, 0);
        metrics.record(1, 10);
        assert_eq!((metrics.silent_call_count, metrics.reasoned_call_count), (2, 1));
        assert_eq!(metrics.reasoning_chars_total, 10);
        assert!((metrics.silent_call_rate - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn invalid_calls_count_and_redacted_thinking_is_reasoning() {
        let mut metrics = ReasoningMetrics::default();
        let response = Response {
            text: "```json\n".to_owned(),
            tool_calls: vec![call("a")],
            invalid_tool_calls: vec![InvalidToolCall {
                id: "b".to_owned(),
                name: "b".to_owned(),
                raw_arguments: "{".to_owned(),
                error: "cut off".to_owned(),
            }],
            ..Response::default()
        };
        let turn = metrics.record_answer(&response, None, false);
        assert_eq!((turn.calls, turn.silent), (2, true));
        let redacted = Response {
            thinking_blocks: vec![ThinkingBlock {
                content: ThinkingBlockContent::RedactedThinking { data: "xyz".to_owned() },
                text_offset: 0,
                tool_calls_before: 0,
            }],
            tool_calls: vec![call("a")],
            ..Response::default()
        };
        let turn = metrics.record_answer(&redacted, None, false);
        assert_eq!((turn.calls, turn.reasoning_chars, turn.silent), (1, 0, false));
        assert_eq!((metrics.silent_call_count, metrics.reasoned_call_count), (2, 1));
    }
}
