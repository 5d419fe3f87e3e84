//! Turns a sequence of [`Delta`]s into the final [`Response`]; the one place answers are assembled.
//!
//! Providers translate their non-streaming bodies into deltas too, so a streamed and a
//! non-streamed answer go through the same code and compare equal.

use serde_json::Value;

use crate::types::{
    Delta, FinishReason, InvalidToolCall, Response, ThinkingBlock, ThinkingBlockContent, ToolCall,
    Usage,
};

/// Collects deltas; [`finish`](Assembler::finish) gives the response.
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    thinking: String,
    signature: Option<String>,
    /// Where in `thinking` the current thinking block's text starts.
    block_start: usize,
    /// Closed blocks; `tool_calls_before` counts every call started, valid or not, until
    /// `finish` renumbers it.
    blocks: Vec<ThinkingBlock>,
    calls: Vec<PartialCall>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    retries: u32,
}

#[derive(Debug)]
struct PartialCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

impl Assembler {
    /// An empty assembler.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Adds one delta.
    pub fn push(&mut self, delta: &Delta) {
        match delta {
            Delta::Text { text } => self.text.push_str(text),
            Delta::Thinking { text } => self.thinking.push_str(text),
            Delta::ThinkingSignature { signature } => {
                let text = self.thinking.get(self.block_start..).unwrap_or_default().to_owned();
                self.block_start = self.thinking.len();
                // An unsigned block cannot be verified when sent back: its text stays in
                // `thinking` only.
                if !signature.is_empty() {
                    self.signature = Some(signature.clone());
                    self.push_block(ThinkingBlockContent::Thinking {
                        thinking: text,
                        signature: signature.clone(),
                    });
                }
            }
            Delta::RedactedThinking { data } => {
                self.block_start = self.thinking.len();
                self.push_block(ThinkingBlockContent::RedactedThinking { data: data.clone() });
            }
            Delta::ToolCallStart { index, id, name } => {
                let call = self.call(*index);
                if call.id.is_empty() {
                    call.id.clone_from(id);
                }
                if call.name.is_empty() {
                    call.name.clone_from(name);
                }
            }
            Delta::ToolCallArguments { index, fragment } => {
                self.call(*index).arguments.push_str(fragment);
            }
            Delta::Usage { usage } => self.usage = Some(*usage),
            Delta::Retry { .. } => self.retries += 1,
            Delta::Finish { reason } => self.finish = Some(reason.clone()),
        }
    }

    fn push_block(&mut self, content: ThinkingBlockContent) {
        self.blocks.push(ThinkingBlock {
            content,
            text_offset: self.text.len(),
            tool_calls_before: self.calls.len(),
        });
    }

    fn call(&mut self, index: u32) -> &mut PartialCall {
        let position = match self.calls.iter().position(|call| call.index == index) {
            Some(position) => position,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[position]
    }

    /// Whether a [`Delta::Finish`] has been pushed.
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The response so far. `None` when no [`Delta::Finish`] arrived (the stream was truncated).
    ///
    /// Each tool call's arguments must parse as a JSON object (empty text counts as `{}`, a
    /// call without arguments); anything else, in particular a call cut off by
    /// `finish_reason = length`, lands in `invalid_tool_calls` with the raw text.
    pub fn finish(self) -> Option<Response> {
        let finish_reason = self.finish?;
        let mut tool_calls = Vec::new();
        let mut invalid_tool_calls = Vec::new();
        let cut_off = finish_reason == FinishReason::Length;
        // valid_before[n]: how many of the first n calls are valid.
        let mut valid_before = Vec::with_capacity(self.calls.len() + 1);
        valid_before.push(0);
        for call in self.calls {
            match validate_call(&call, cut_off) {
                Ok(arguments) => {
                    tool_calls.push(ToolCall { id: call.id, name: call.name, arguments })
                }
                Err(error) => invalid_tool_calls.push(InvalidToolCall {
                    id: call.id,
                    name: call.name,
                    raw_arguments: call.arguments,
                    error,
                }),
            }
            valid_before.push(tool_calls.len());
        }
        let mut thinking_blocks = self.blocks;
        for block in &mut thinking_blocks {
            block.tool_calls_before =
                valid_before.get(block.tool_calls_before).copied().unwrap_or(tool_calls.len());
        }
        Some(Response {
            text: self.text,
            thinking: self.thinking,
            thinking_signature: self.signature,
            thinking_blocks,
            tool_calls,
            invalid_tool_calls,
            finish_reason,
            usage: self.usage,
            retries: self.retries,
        })
    }
}

fn validate_call(call: &PartialCall, cut_off: bool) -> Result<Value, String> {
    if call.name.is_empty() {
        return Err("the tool call has no function name".to_owned());
    }
    if call.arguments.trim().is_empty() {
        if cut_off {
            return Err("the tool call was cut off by the token limit before its arguments".into());
        }
        return Ok(Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("the tool call arguments are not a JSON object".to_owned()),
        Err(error) if cut_off => {
            Err(format!("the tool call was cut off by the token limit: {error}"))
        }
        Err(error) => Err(format!("the tool call arguments are not valid JSON: {error}")),
    }
}

/// Assembles a complete delta list (a non-streamed answer translated into deltas).
pub(crate) fn assemble_all(deltas: &[Delta]) -> Option<Response> {
    let mut assembler = Assembler::new();
    for delta in deltas {
        assembler.push(delta);
    }
    assembler.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn start(index: u32, name: &str) -> Delta {
        Delta::ToolCallStart { index, id: format!("call_{index}"), name: name.into() }
    }

    fn arguments(index: u32, fragment: &str) -> Delta {
        Delta::ToolCallArguments { index, fragment: fragment.into() }
    }

    #[test]
    fn interleaved_parallel_calls_are_kept_apart() {
        let deltas = vec![
            Delta::Text { text: "I will ".into() },
            start(0, "a"),
            start(1, "b"),
            arguments(1, "{\"y\":"),
            arguments(0, "{\"x\":1}"),
            arguments(1, "2}"),
            start(2, "c"),
            Delta::Finish { reason: FinishReason::ToolCalls },
        ];
        let response = assemble_all(&deltas).unwrap();
        assert_eq!(
            response.tool_calls,
            vec![
                ToolCall { id: "call_0".into(), name: "a".into(), arguments: json!({"x": 1}) },
                ToolCall { id: "call_1".into(), name: "b".into(), arguments: json!({"y": 2}) },
                ToolCall { id: "call_2".into(), name: "c".into(), arguments: json!({}) },
            ]
        );
    }

    #[test]
    fn a_call_cut_off_by_length_is_invalid_not_repaired() {
        let deltas = vec![
            start(0, "write"),
            arguments(0, "{\"path\": \"a.txt\", \"content\": \"hel"),
            Delta::Finish { reason: FinishReason::Length },
        ];
        let response = assemble_all(&deltas).unwrap();
        assert_eq!(response.tool_calls, vec![]);
        assert_eq!(response.invalid_tool_calls.len(), 1);
        assert_eq!(
            response.invalid_tool_calls[0].raw_arguments,
            "{\"path\": \"a.txt\", \"content\": \"hel"
        );
        assert!(response.invalid_tool_calls[0].error.contains("cut off"));
    }

    #[test]
    fn thinking_blocks_keep_their_places_counted_in_valid_calls() {
        let signature = |signature: &str| Delta::ThinkingSignature { signature: signature.into() };
        let deltas = vec![
            // Unsigned reasoning (cannot be verified if sent back): text only, no block.
            Delta::Thinking { text: "loose ".into() },
            signature(""),
            Delta::Thinking { text: "first".into() },
            signature("s1"),
            Delta::Text { text: "Hi".into() },
            start(0, ""), // nameless: invalid
            start(1, "a"),
            Delta::RedactedThinking { data: "opaque".into() },
            Delta::Thinking { text: "second".into() },
            signature("s2"),
            start(2, "b"),
            Delta::Finish { reason: FinishReason::ToolCalls },
        ];
        let response = assemble_all(&deltas).unwrap();
        assert_eq!(response.thinking, "loose firstsecond");
        assert_eq!(response.thinking_signature.as_deref(), Some("s2"));
        assert_eq!(response.invalid_tool_calls.len(), 1);
        let place = |block: &ThinkingBlock| (block.text_offset, block.tool_calls_before);
        assert_eq!(
            response
                .thinking_blocks
                .iter()
                .map(|block| (&block.content, place(block)))
                .collect::<Vec<_>>(),
            vec![
                (
                    &ThinkingBlockContent::Thinking {
                        thinking: "first".into(),
                        signature: "s1".into()
                    },
                    (0, 0)
                ),
                (&ThinkingBlockContent::RedactedThinking { data: "opaque".into() }, (2, 1)),
                (
                    &ThinkingBlockContent::Thinking {
                        thinking: "second".into(),
                        signature: "s2".into()
                    },
                    (2, 1)
                ),
            ]
        );
    }

    #[test]
    fn no_finish_means_no_response() {
        assert_eq!(assemble_all(&[Delta::Text { text: "hi".into() }]), None);
    }
}
