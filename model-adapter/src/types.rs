//! Provider-neutral request, response and delta types; every provider converts to and from these.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One model call: the conversation so far plus how the model may answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The provider's model name.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Functions the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// Whether and which tool the model must call.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Whether the model may call several tools in one answer (`None`: provider default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Free text or JSON constrained by a schema.
    #[serde(default)]
    pub response_format: ResponseFormat,
    /// Sampling temperature (`None`: provider default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Upper bound on generated tokens (`None`: provider default; Anthropic requires one, 1024
    /// is sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Anthropic extended thinking with a token budget (`None`: off). OpenAI-compatible
    /// providers ignore it (use [`reasoning_effort`](ChatRequest::reasoning_effort) there).
    /// Anthropic sends `"thinking": {"type": "enabled", "budget_tokens": N}`, leaves
    /// `temperature` out (the API accepts no temperature change with thinking), sends
    /// `max_tokens` = N + [`DEFAULT_MAX_TOKENS`](crate::DEFAULT_MAX_TOKENS) when `max_tokens` is
    /// unset, and refuses a forced tool choice ([`ToolChoice::Required`], [`ToolChoice::Named`],
    /// a json_schema response format) with [`Error::InvalidRequest`](crate::Error::InvalidRequest),
    /// as the API does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    /// How hard an OpenAI reasoning model (o-series, gpt-5, gpt-oss) thinks, sent as
    /// `reasoning_effort` (`None`: the model's default). Anthropic ignores it (use
    /// [`thinking`](ChatRequest::thinking) there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// Anthropic extended thinking: how many tokens the model may spend reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingConfig {
    /// The thinking budget in tokens (the API wants at least 1024, and less than `max_tokens`
    /// unless interleaved thinking is on).
    pub budget_tokens: u32,
}

/// An OpenAI reasoning model's effort, sent as `reasoning_effort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// `"low"`: fast, few reasoning tokens.
    Low,
    /// `"medium"`: the usual default.
    Medium,
    /// `"high"`: the most reasoning.
    High,
}

impl ReasoningEffort {
    /// The wire word (`"low"`, `"medium"`, `"high"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl ChatRequest {
    /// A request with these messages and every option at its default.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: None,
            response_format: ResponseFormat::Text,
            temperature: None,
            max_tokens: None,
            stop: Vec::new(),
            thinking: None,
            reasoning_effort: None,
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions for the model.
    System {
        /// Text parts, joined by newlines where a provider wants one string.
        content: Vec<ContentPart>,
    },
    /// What the user said.
    User {
        /// Text parts.
        content: Vec<ContentPart>,
    },
    /// An earlier model answer, sent back for context.
    Assistant {
        /// The visible text (may be empty).
        #[serde(default)]
        content: String,
        /// The reasoning: its text, and Anthropic's blocks with their signatures, which are
        /// sent back unchanged (the API requires it for a tool-use turn with thinking on).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thinking: Option<Thinking>,
        /// The tool calls the model made.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a tool call.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The result text.
        content: String,
        /// Whether the tool failed. Sent as Anthropic's `is_error`; OpenAI's wire has no such
        /// field, so there only `content` tells the model.
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    /// A system message with one text part.
    pub fn system(text: impl Into<String>) -> Message {
        Message::System { content: vec![ContentPart::Text { text: text.into() }] }
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User { content: vec![ContentPart::Text { text: text.into() }] }
    }

    /// The assistant message that records `response` in the conversation, its thinking blocks
    /// included, so that the next request carries them back unchanged.
    pub fn from_response(response: &Response) -> Message {
        let thinking = if response.thinking.is_empty()
            && response.thinking_signature.is_none()
            && response.thinking_blocks.is_empty()
        {
            None
        } else {
            Some(Thinking {
                text: response.thinking.clone(),
                signature: response.thinking_signature.clone(),
                blocks: response.thinking_blocks.clone(),
            })
        };
        Message::Assistant {
            content: response.text.clone(),
            thinking,
            tool_calls: response.tool_calls.clone(),
        }
    }
}

/// One part of a multi-part message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
}

/// Joins the text parts with newlines.
pub(crate) fn joined_text(parts: &[ContentPart]) -> String {
    let mut text = String::new();
    for part in parts {
        match part {
            ContentPart::Text { text: part_text } => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(part_text);
            }
        }
    }
    text
}

/// Model reasoning, kept apart from the visible answer.
///
/// Anthropic sends `blocks` back when there are any, each in its place among the text and
/// tool_use blocks; otherwise (an older recording, a hand-made message) `text` with `signature`
/// as one thinking block, first. OpenAI-compatible providers send no reasoning back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thinking {
    /// The reasoning text (every block's text, concatenated).
    pub text: String,
    /// Anthropic's signature over the (last) thinking block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Anthropic's thinking and redacted_thinking blocks as the answer gave them, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<ThinkingBlock>,
}

/// One Anthropic `thinking` or `redacted_thinking` block of an answer, and where it stood.
///
/// Serialised flat: `{"type":"thinking","thinking":…,"signature":…,"text_offset":…,
/// "tool_calls_before":…}` or `{"type":"redacted_thinking","data":…,…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingBlock {
    /// The block as the provider sent it.
    #[serde(flatten)]
    pub content: ThinkingBlockContent,
    /// How many bytes of the answer's text came before this block.
    pub text_offset: usize,
    /// How many of the answer's (valid) tool calls came before this block.
    pub tool_calls_before: usize,
}

/// What a [`ThinkingBlock`] holds, in Anthropic's own field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ThinkingBlockContent {
    /// Reasoning text and the provider's signature over it.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The signature; the API checks it when the block comes back.
        signature: String,
    },
    /// Reasoning the provider encrypted (flagged by its safety systems); opaque.
    RedactedThinking {
        /// The encrypted reasoning.
        data: String,
    },
}

/// One piece of an assistant answer, in the order the provider gave them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum AnswerPiece<'a> {
    /// A run of visible text (never empty).
    Text(&'a str),
    /// A tool call and its position among the answer's calls.
    ToolCall(usize, &'a ToolCall),
    /// A thinking or redacted_thinking block.
    Block(&'a ThinkingBlockContent),
}

/// The answer's text, tool calls and thinking blocks in their original order: each block goes
/// where its `text_offset` and `tool_calls_before` put it; between two blocks, text comes before
/// tool calls (the order Claude writes them). Offsets past the end (the text was edited) are
/// clamped, and a text offset inside a character moves back to the character's start.
pub(crate) fn answer_layout<'a>(
    text: &'a str,
    tool_calls: &'a [ToolCall],
    blocks: &'a [ThinkingBlock],
) -> Vec<AnswerPiece<'a>> {
    let mut pieces = Vec::with_capacity(blocks.len() + tool_calls.len() + 2);
    let mut text_at = 0;
    let mut calls_at = 0;
    let mut flush = |pieces: &mut Vec<AnswerPiece<'a>>, text_end: usize, calls_end: usize| {
        if text_end > text_at {
            pieces.push(AnswerPiece::Text(&text[text_at..text_end]));
            text_at = text_end;
        }
        for (position, call) in tool_calls.iter().enumerate().take(calls_end).skip(calls_at) {
            pieces.push(AnswerPiece::ToolCall(position, call));
        }
        calls_at = calls_at.max(calls_end);
    };
    for block in blocks {
        let mut text_end = block.text_offset.min(text.len());
        while !text.is_char_boundary(text_end) {
            text_end -= 1;
        }
        flush(&mut pieces, text_end, block.tool_calls_before.min(tool_calls.len()));
        pieces.push(AnswerPiece::Block(&block.content));
    }
    flush(&mut pieces, text.len(), tool_calls.len());
    pieces
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The function name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// A JSON Schema for the arguments object.
    pub parameters: Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// Exactly this function.
    Named(String),
}

/// How the model must format its answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text.
    #[default]
    Text,
    /// A JSON document valid against `schema`.
    JsonSchema {
        /// A short name for the schema (letters, digits, `_`, `-`).
        name: String,
        /// The JSON Schema.
        schema: Value,
        /// Ask the provider to enforce the schema strictly.
        #[serde(default)]
        strict: bool,
    },
}

/// A complete, valid tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (answer it with [`Message::Tool`]).
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments, always a JSON object.
    pub arguments: Value,
}

/// A tool call that cannot be executed: cut off, unparsable or nameless. Never repaired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvalidToolCall {
    /// The provider's call id, if it sent one.
    pub id: String,
    /// The function name, if it sent one.
    pub name: String,
    /// The raw argument text as received.
    pub raw_arguments: String,
    /// Why the call is invalid.
    pub error: String,
}

/// Token counts for one call, and the server's own timings where it reports them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, including cached ones.
    pub prompt_tokens: u64,
    /// Generated tokens, including reasoning.
    pub completion_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Generated tokens spent on reasoning (when the provider reports them).
    pub reasoning_tokens: u64,
    /// The model server's own clock for the call (llama.cpp's `timings`); absent for providers
    /// that do not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<ServerTimings>,
}

/// How long the model server itself spent on one call, as llama.cpp reports it in `timings`:
/// prompt tokens evaluated (besides those its cache served) and in how long, tokens generated
/// and in how long. Set against the call's wall time, it shows what the client adds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerTimings {
    /// Prompt tokens served from the server's cache (not evaluated).
    pub cache_n: u64,
    /// Prompt tokens evaluated.
    pub prompt_n: u64,
    /// Milliseconds spent evaluating them.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub predicted_n: u64,
    /// Milliseconds spent generating them.
    pub predicted_ms: f64,
}

/// Why the model stopped. Serialised as a plain string (`"stop"`, `"length"`, `"tool_calls"`,
/// `"content_filter"`, or the provider's own word).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    #[default]
    Stop,
    /// The token limit was hit.
    Length,
    /// The model called tools.
    ToolCalls,
    /// The provider withheld content (filter, refusal).
    ContentFilter,
    /// Any other provider reason, verbatim.
    Other(String),
}

impl From<String> for FinishReason {
    fn from(text: String) -> FinishReason {
        match text.as_str() {
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            _ => FinishReason::Other(text),
        }
    }
}

impl From<FinishReason> for String {
    fn from(reason: FinishReason) -> String {
        match reason {
            FinishReason::Stop => "stop".to_owned(),
            FinishReason::Length => "length".to_owned(),
            FinishReason::ToolCalls => "tool_calls".to_owned(),
            FinishReason::ContentFilter => "content_filter".to_owned(),
            FinishReason::Other(text) => text,
        }
    }
}

/// The whole answer to one call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Response {
    /// The visible text.
    pub text: String,
    /// The reasoning text (empty when the model gave none).
    pub thinking: String,
    /// Anthropic's signature over the (last) thinking block; every block's own signature is in
    /// `thinking_blocks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// Anthropic's signed thinking and redacted_thinking blocks, in order, with their places
    /// among the text and tool calls ([`Message::from_response`] carries them back). Empty for
    /// providers without blocks (OpenAI-compatible reasoning text is only in `thinking`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking_blocks: Vec<ThinkingBlock>,
    /// Valid tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Tool calls that cannot be executed (cut off by `length`, unparsable arguments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_tool_calls: Vec<InvalidToolCall>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Token counts, when the provider sent them.
    pub usage: Option<Usage>,
    /// How many times the request was re-sent after a retryable failure.
    pub retries: u32,
}

/// One normalised piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    /// More visible text.
    Text {
        /// The new text.
        text: String,
    },
    /// More reasoning text.
    Thinking {
        /// The new reasoning text.
        text: String,
    },
    /// The signature of the thinking block whose text came since the previous block ended;
    /// it ends that block (one per Anthropic thinking block, empty when the block was unsigned).
    ThinkingSignature {
        /// The block's whole signature.
        signature: String,
    },
    /// A whole Anthropic `redacted_thinking` block (encrypted reasoning, to be sent back as is).
    RedactedThinking {
        /// The encrypted reasoning.
        data: String,
    },
    /// A tool call begins.
    ToolCallStart {
        /// The call's position in this answer (0, 1, ...).
        index: u32,
        /// The provider's call id.
        id: String,
        /// The function name.
        name: String,
    },
    /// More argument text for a tool call.
    ToolCallArguments {
        /// The call's position, as in its start.
        index: u32,
        /// The new argument text (a fragment of a JSON object).
        fragment: String,
    },
    /// Token counts.
    Usage {
        /// The counts.
        usage: Usage,
    },
    /// The request failed retryably before any content arrived and is being re-sent.
    Retry {
        /// Which retry this is (1, 2, ...).
        attempt: u32,
        /// How long we wait before re-sending.
        delay_ms: u64,
        /// The failure.
        error: String,
    },
    /// The answer is complete. Always the last delta of a successful stream.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
    },
}

impl Delta {
    /// Whether this delta carries model output (as opposed to a retry notice).
    pub fn is_content(&self) -> bool {
        match self {
            Delta::Text { .. }
            | Delta::Thinking { .. }
            | Delta::ThinkingSignature { .. }
            | Delta::RedactedThinking { .. }
            | Delta::ToolCallStart { .. }
            | Delta::ToolCallArguments { .. }
            | Delta::Usage { .. }
            | Delta::Finish { .. } => true,
            Delta::Retry { .. } => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn block(text_offset: usize, tool_calls_before: usize, data: &str) -> ThinkingBlock {
        ThinkingBlock {
            content: ThinkingBlockContent::RedactedThinking { data: data.into() },
            text_offset,
            tool_calls_before,
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "f".into(), arguments: json!({}) }
    }

    fn describe(pieces: &[AnswerPiece<'_>]) -> Vec<String> {
        pieces
            .iter()
            .map(|piece| match piece {
                AnswerPiece::Text(text) => format!("text {text}"),
                AnswerPiece::ToolCall(position, call) => format!("call {position} {}", call.id),
                AnswerPiece::Block(ThinkingBlockContent::RedactedThinking { data }) => {
                    format!("block {data}")
                }
                AnswerPiece::Block(ThinkingBlockContent::Thinking { thinking, .. }) => {
                    format!("block {thinking}")
                }
            })
            .collect()
    }

    #[test]
    fn blocks_go_back_to_their_places_among_text_and_tool_calls() {
        let calls = [call("a"), call("b")];
        let blocks = [block(0, 0, "1"), block(6, 1, "2"), block(6, 1, "3"), block(11, 2, "4")];
        assert_eq!(
            describe(&answer_layout("Hello world", &calls, &blocks)),
            [
                "block 1",
                "text Hello ",
                "call 0 a",
                "block 2",
                "block 3",
                "text world",
                "call 1 b",
                "block 4"
            ]
        );
        // No blocks: text, then the calls (the order before blocks existed).
        assert_eq!(
            describe(&answer_layout("Hi", &calls, &[])),
            ["text Hi", "call 0 a", "call 1 b"]
        );
    }

    #[test]
    fn places_past_an_edited_answer_are_clamped_to_it() {
        // The text was shortened and a call removed after the answer: blocks stay in order, at
        // the end; an offset inside a character moves to its start.
        let blocks = [block(2, 0, "1"), block(40, 5, "2")];
        assert_eq!(
            describe(&answer_layout("éa", &[call("a")], &blocks)),
            ["text é", "block 1", "text a", "call 0 a", "block 2"]
        );
        assert_eq!(describe(&answer_layout("é", &[], &[block(1, 0, "1")])), ["block 1", "text é"]);
    }

    #[test]
    fn thinking_blocks_serialise_flat_in_anthropic_field_names() {
        let blocks = vec![
            ThinkingBlock {
                content: ThinkingBlockContent::Thinking {
                    thinking: "hmm".into(),
                    signature: "sig".into(),
                },
                text_offset: 0,
                tool_calls_before: 0,
            },
            block(3, 1, "opaque"),
        ];
        let wire = json!([
            {"type": "thinking", "thinking": "hmm", "signature": "sig", "text_offset": 0, "tool_calls_before": 0},
            {"type": "redacted_thinking", "data": "opaque", "text_offset": 3, "tool_calls_before": 1},
        ]);
        assert_eq!(serde_json::to_value(&blocks).unwrap(), wire);
        assert_eq!(serde_json::from_value::<Vec<ThinkingBlock>>(wire).unwrap(), blocks);
        // An assistant message without blocks serialises as before they existed.
        let message =
            Message::from_response(&Response { text: "hi".into(), ..Response::default() });
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"role": "assistant", "content": "hi"})
        );
    }

    #[test]
    fn finish_reasons_are_plain_strings_both_ways() {
        for (reason, text) in [
            (FinishReason::Stop, "\"stop\""),
            (FinishReason::ToolCalls, "\"tool_calls\""),
            (FinishReason::Other("pause_turn".into()), "\"pause_turn\""),
        ] {
            assert_eq!(serde_json::to_string(&reason).unwrap(), text);
            assert_eq!(serde_json::from_str::<FinishReason>(text).unwrap(), reason);
        }
    }
}
