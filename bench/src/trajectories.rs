//! Foreign trajectories: the reasoning quality of other agents' recorded runs, in OpenAI chat
//! format, counted by the seed-000 rule that agent-core applies to its own runs.
//!
//! Input: a JSON array of runs, or JSON Lines with one run per line. A run is either a list of
//! messages or an object holding that list under `traj`, `messages` or `trajectory`, with an
//! optional `reward` (a number; 1 or more is a success) or `success` (a boolean). A message is
//! an object with a `role`, a `content` that is `null`, a string or a list of parts (strings, or
//! objects whose `text` counts as visible text; parts of type `thinking` or `reasoning` count as
//! reasoning), an optional `tool_calls` list (or the legacy single `function_call`) and optional
//! reasoning: a `reasoning_content`, `reasoning` or `thinking` string (the fields DeepSeek,
//! OpenRouter, vLLM and Ollama use), else OpenRouter's `reasoning_details` list.
//!
//! Rule (seed 000 §2.1.1, [`skills_agent_core::ReasoningMetrics`]): an assistant message with tool
//! calls is *reasoned* when it carries reasoning text or visible text that is more than markup
//! ([`skills_agent_core::reasoning_text_chars`]), else *silent*; either way it counts once per tool
//! call. `mean_reasoning_chars` is the reasoning characters of all acting messages divided by
//! the tool calls.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use skills_agent_core::reasoning_text_chars;

use crate::error::{Error, Result};

/// The only trajectory format read so far (`--format openai-chat`).
pub const OPENAI_CHAT: &str = "openai-chat";

/// Keys under which a run object may hold its messages, in the order they are looked up.
const MESSAGE_KEYS: [&str; 3] = ["traj", "messages", "trajectory"];

/// The reasoning quality of a set of recorded runs: the JSON line `cargo xtask bench
/// --trajectories` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryScore {
    /// Runs read.
    pub runs: u64,
    /// Tool calls made by assistant messages.
    pub tool_calls: u64,
    /// Tool calls made by messages without any reasoning.
    pub silent_calls: u64,
    /// `silent_calls / tool_calls` (0 without calls), rounded to 3 decimals like the seed.
    pub silent_call_rate: f64,
    /// Tool calls made by messages with some reasoning.
    pub reasoned_calls: u64,
    /// Reasoning characters per tool call (0 without calls), rounded to 1 decimal.
    pub mean_reasoning_chars: f64,
    /// Share of the runs with a `reward` or `success` that succeeded (`None` when no run says).
    pub success_rate: Option<f64>,
}

/// Reads `path` in `format` and scores it.
///
/// # Errors
///
/// [`Error::Io`] when the file cannot be read; [`Error::Trajectory`] naming the run and the
/// message that is malformed; [`Error::UnknownFormat`] for a format other than
/// [`OPENAI_CHAT`].
pub fn score_file(path: &Path, format: &str) -> Result<TrajectoryScore> {
    if format != OPENAI_CHAT {
        return Err(Error::UnknownFormat { format: format.to_owned() });
    }
    let text = std::fs::read_to_string(path).map_err(|error| Error::io(path, error))?;
    score_text(&text).map_err(|error| match error {
        Error::Trajectory { path: _, message } => {
            Error::Trajectory { path: path.display().to_string(), message }
        }
        other => other,
    })
}

/// Scores the text of a trajectories file (OpenAI chat format).
///
/// # Errors
///
/// [`Error::Trajectory`] naming the run and the message that is malformed (the path is
/// `<input>`).
pub fn score_text(text: &str) -> Result<TrajectoryScore> {
    let bad = |message: String| Error::Trajectory { path: "<input>".to_owned(), message };
    let runs = match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(runs)) => runs,
        // One run on its own (a file per trajectory, or JSON Lines of one line).
        Ok(Value::Object(run)) if MESSAGE_KEYS.iter().any(|key| run.contains_key(*key)) => {
            vec![Value::Object(run)]
        }
        Ok(other) => {
            let found = match &other {
                Value::Object(object) => format!(
                    "an object with keys {}",
                    object.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                ),
                other => kind(other).to_owned(),
            };
            return Err(bad(format!(
                "the top level is neither a JSON array of runs (nor JSON Lines of runs) nor one \
                 run (an object with `traj`, `messages` or `trajectory`): {found}"
            )));
        }
        Err(error) => match json_lines(text) {
            Some(runs) => runs.map_err(bad)?,
            None => return Err(bad(format!("not JSON: {error}"))),
        },
    };
    let mut tally = Tally::default();
    let (mut judged, mut succeeded) = (0u64, 0u64);
    for (run_index, run) in runs.iter().enumerate() {
        let (messages, success) =
            run_parts(run).map_err(|message| bad(format!("run {run_index}: {message}")))?;
        if let Some(success) = success {
            judged += 1;
            succeeded += u64::from(success);
        }
        for (message_index, message) in messages.iter().enumerate() {
            let counted = count_message(message).map_err(|message| {
                bad(format!("run {run_index}: message {message_index}: {message}"))
            })?;
            if let Some(acting) = counted {
                tally.add(acting);
            }
        }
    }
    let tool_calls = tally.silent + tally.reasoned;
    let per_call =
        |value: u64| if tool_calls == 0 { 0.0 } else { value as f64 / tool_calls as f64 };
    Ok(TrajectoryScore {
        runs: runs.len() as u64,
        tool_calls,
        silent_calls: tally.silent,
        silent_call_rate: round(per_call(tally.silent), 1000.0),
        reasoned_calls: tally.reasoned,
        mean_reasoning_chars: round(per_call(tally.chars), 10.0),
        success_rate: (judged > 0).then(|| round(succeeded as f64 / judged as f64, 1000.0)),
    })
}

/// One assistant message that calls tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Acting {
    calls: u64,
    chars: u64,
    /// Reasoning the provider hid (a `redacted_thinking` part): reasoned, no characters.
    redacted: bool,
}

/// The seed's counters ([`skills_agent_core::ReasoningMetrics`]'s rule, redacted thinking included).
#[derive(Debug, Default)]
struct Tally {
    silent: u64,
    reasoned: u64,
    chars: u64,
}

impl Tally {
    fn add(&mut self, acting: Acting) {
        if acting.chars > 0 || acting.redacted {
            self.reasoned += acting.calls;
        } else {
            self.silent += acting.calls;
        }
        self.chars += acting.chars;
    }
}

/// The runs of a JSON Lines text (`None` when its first line is no JSON value of its own, so the
/// text was meant as one JSON document); an error names the line (counted from 1).
fn json_lines(text: &str) -> Option<std::result::Result<Vec<Value>, String>> {
    let mut lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
    let first: Value = serde_json::from_str(lines.next()?.1).ok()?;
    let rest = lines.map(|(index, line)| {
        serde_json::from_str(line).map_err(|error| format!("line {}: not JSON: {error}", index + 1))
    });
    Some(std::iter::once(Ok(first)).chain(rest).collect())
}

fn round(value: f64, scale: f64) -> f64 {
    (value * scale).round() / scale
}

/// The messages of a run and whether it succeeded (when it says).
fn run_parts(run: &Value) -> std::result::Result<(&[Value], Option<bool>), String> {
    match run {
        Value::Array(messages) => Ok((messages, None)),
        Value::Object(object) => {
            let Some((key, messages)) =
                MESSAGE_KEYS.iter().find_map(|key| object.get(*key).map(|value| (*key, value)))
            else {
                return Err(format!(
                    "an object run needs its messages under `traj`, `messages` or `trajectory` (keys: {})",
                    object.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
                ));
            };
            let Value::Array(messages) = messages else {
                return Err(format!("`{key}` is not a list of messages"));
            };
            let success = match (object.get("success"), object.get("reward")) {
                (Some(Value::Bool(success)), _) => Some(*success),
                (Some(Value::Null) | None, Some(Value::Number(reward))) => {
                    Some(reward.as_f64().is_some_and(|reward| reward >= 1.0))
                }
                (Some(Value::Null) | None, Some(Value::Null) | None) => None,
                (Some(other), _) => {
                    return Err(format!("`success` is not a boolean: {other}"));
                }
                (_, Some(other)) => return Err(format!("`reward` is not a number: {other}")),
            };
            Ok((messages, success))
        }
        other => Err(format!("a run is a list of messages or an object, not {}", kind(other))),
    }
}

/// What an assistant message that calls tools contributes (`None` for other messages).
fn count_message(message: &Value) -> std::result::Result<Option<Acting>, String> {
    let Value::Object(object) = message else {
        return Err(format!("a message is an object, not {}", kind(message)));
    };
    let role = match object.get("role") {
        Some(Value::String(role)) => role.as_str(),
        Some(other) => return Err(format!("`role` is not a string: {other}")),
        None => return Err("the message has no `role`".to_owned()),
    };
    let mut visible = String::new();
    let mut reasoning = String::new();
    let mut redacted = false;
    match object.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => visible.push_str(text),
        Some(Value::Array(parts)) => {
            for (part_index, part) in parts.iter().enumerate() {
                match part {
                    Value::String(text) => push_line(&mut visible, text),
                    Value::Object(part) => {
                        let part_type = part.get("type").and_then(Value::as_str).unwrap_or("text");
                        let text = ["text", "thinking", "reasoning"]
                            .iter()
                            .find_map(|key| part.get(*key).and_then(Value::as_str))
                            .unwrap_or_default();
                        redacted |= part_type == "redacted_thinking";
                        if matches!(part_type, "thinking" | "reasoning" | "redacted_thinking") {
                            push_line(&mut reasoning, text);
                        } else {
                            push_line(&mut visible, text);
                        }
                    }
                    other => {
                        return Err(format!(
                            "content part {part_index} is neither a string nor an object: {}",
                            kind(other)
                        ));
                    }
                }
            }
        }
        Some(other) => {
            return Err(format!(
                "`content` is neither a string, a list of parts nor null: {}",
                kind(other)
            ));
        }
    }
    for key in ["reasoning_content", "reasoning", "thinking"] {
        match object.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => push_line(&mut reasoning, text),
            Some(other) => {
                return Err(format!("`{key}` is neither a string nor null: {}", kind(other)));
            }
        }
    }
    // OpenRouter sends the same reasoning as a string and as details: the details count only
    // when no string did.
    if reasoning.trim().is_empty() {
        redacted |= reasoning_details(object.get("reasoning_details"), &mut reasoning)?;
    }
    let calls = match object.get("tool_calls") {
        None | Some(Value::Null) => 0,
        Some(Value::Array(calls)) => {
            if let Some(index) = calls.iter().position(|call| !call.is_object()) {
                return Err(format!("tool call {index} is not an object"));
            }
            calls.len() as u64
        }
        Some(other) => return Err(format!("`tool_calls` is not a list: {}", kind(other))),
    };
    // The legacy single call of OpenAI's functions API, when no tool_calls list has calls.
    let calls = match (calls, object.get("function_call")) {
        (0, Some(Value::Object(_))) => 1,
        (_, None | Some(Value::Null) | Some(Value::Object(_))) => calls,
        (_, Some(other)) => {
            return Err(format!("`function_call` is not an object: {}", kind(other)));
        }
    };
    if role != "assistant" || calls == 0 {
        return Ok(None);
    }
    let chars = reasoning_text_chars(&visible) + reasoning.trim().chars().count() as u64;
    Ok(Some(Acting { calls, chars, redacted }))
}

/// Adds the readable text of OpenRouter's `reasoning_details` (`reasoning.text` parts' `text`,
/// `reasoning.summary` parts' `summary`) to `reasoning`; true when a part is encrypted (the
/// provider hid reasoning it did: reasoned, no characters).
fn reasoning_details(
    details: Option<&Value>,
    reasoning: &mut String,
) -> std::result::Result<bool, String> {
    let parts = match details {
        None | Some(Value::Null) => return Ok(false),
        Some(Value::Array(parts)) => parts,
        Some(other) => {
            return Err(format!("`reasoning_details` is not a list: {}", kind(other)));
        }
    };
    let mut encrypted = false;
    for (index, part) in parts.iter().enumerate() {
        let Value::Object(part) = part else {
            return Err(format!("reasoning detail {index} is not an object: {}", kind(part)));
        };
        let part_type = part.get("type").and_then(Value::as_str).unwrap_or_default();
        encrypted |= part_type == "reasoning.encrypted";
        if let Some(text) = ["text", "summary"].iter().find_map(|key| part.get(*key)) {
            push_line(reasoning, text.as_str().unwrap_or_default());
        }
    }
    Ok(encrypted)
}

fn push_line(text: &mut String, piece: &str) {
    if !text.is_empty() && !piece.is_empty() {
        text.push('\n');
    }
    text.push_str(piece);
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
