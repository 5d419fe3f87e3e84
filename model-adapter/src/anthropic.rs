//! Anthropic Messages (`POST {base_url}/v1/messages`): request encoding, response and stream
//! decoding (thinking and signature deltas, redacted thinking, tool-use input deltas, in-stream
//! `error` events).
//!
//! `response_format = json_schema` is sent as a forced tool whose input schema is the schema
//! (the long-standing Anthropic way to get schema-shaped JSON); its input comes back as text.
//!
//! Extended thinking: each `thinking` block ends with one [`Delta::ThinkingSignature`] (sent at
//! its `content_block_stop`), each `redacted_thinking` block is one [`Delta::RedactedThinking`];
//! the assembler keeps them as [`ThinkingBlock`](crate::ThinkingBlock)s with their places among
//! the text and tool_use blocks, and an assistant message sends them back in those places,
//! unchanged, because the API rejects a tool-use turn whose thinking was altered, reordered or
//! dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::http::{
    DeltaStream, HttpConfig, PreparedRequest, Transport, WireDecoder, WireError, WireResult,
    body_excerpt,
};
use crate::provider::ModelProvider;
use crate::sse::SseEvent;
use crate::types::{
    AnswerPiece, ChatRequest, ContentPart, Delta, FinishReason, Message, Response, ResponseFormat,
    ThinkingBlockContent, ToolChoice, Usage, answer_layout, joined_text,
};

/// The `anthropic-version` header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` sent when the request has none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 1024;

/// Where and how to reach an Anthropic-compatible server.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// The server root, e.g. `https://api.anthropic.com` or `http://127.0.0.1:8080`.
    pub base_url: String,
    /// Sent as `x-api-key` when present.
    pub api_key: Option<String>,
    /// Timeouts and retries.
    pub http: HttpConfig,
    /// Beta features, sent as one `anthropic-beta` header when not empty, e.g.
    /// [`INTERLEAVED_THINKING_BETA`] for thinking between tool calls on Claude 4 models.
    pub betas: Vec<String>,
}

/// The beta that lets Claude 4 models think between tool calls (interleaved thinking).
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

impl AnthropicConfig {
    /// A configuration with default timeouts and retries and no betas.
    pub fn new(base_url: impl Into<String>) -> AnthropicConfig {
        AnthropicConfig {
            base_url: base_url.into(),
            api_key: None,
            http: HttpConfig::default(),
            betas: Vec::new(),
        }
    }
}

/// The Anthropic Messages provider.
#[derive(Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    transport: Arc<Transport>,
}

impl AnthropicProvider {
    /// A provider for `config`.
    pub fn new(config: AnthropicConfig) -> Result<AnthropicProvider> {
        let transport = Arc::new(Transport::new(config.http)?);
        Ok(AnthropicProvider { config, transport })
    }

    /// The HTTP request, and a maker of decoders for its answer.
    fn prepare(
        &self,
        request: &ChatRequest,
        stream: bool,
    ) -> Result<(PreparedRequest, impl Fn() -> Box<dyn WireDecoder> + Send + 'static)> {
        let (body, schema_tool) = encode_request(request, stream)?;
        let mut headers = vec![("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = &self.config.api_key {
            headers.push(("x-api-key".to_owned(), key.clone()));
        }
        if !self.config.betas.is_empty() {
            headers.push(("anthropic-beta".to_owned(), self.config.betas.join(",")));
        }
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let decoder = move || -> Box<dyn WireDecoder> {
            Box::new(AnthropicStreamDecoder {
                schema_tool: schema_tool.clone(),
                ..AnthropicStreamDecoder::default()
            })
        };
        Ok((PreparedRequest::json("anthropic", url, headers, &body)?, decoder))
    }
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    async fn chat(&self, request: &ChatRequest) -> Result<Response> {
        let (prepared, decoder) = self.prepare(request, false)?;
        self.transport.chat(&prepared, decoder).await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream> {
        let (prepared, decoder) = self.prepare(request, true)?;
        Ok(self.transport.stream(prepared, decoder))
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidRequest { provider: "anthropic".to_owned(), message }
}

/// The request body, and the forced tool's name when `response_format` is a json_schema.
pub(crate) fn encode_request(
    request: &ChatRequest,
    stream: bool,
) -> Result<(Value, Option<String>)> {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    // Thinking tokens count against max_tokens, which must exceed the budget: without a limit
    // of the caller's, the default answer length comes on top of the budget.
    let max_tokens = match (request.max_tokens, request.thinking) {
        (Some(max_tokens), _) => max_tokens,
        (None, Some(thinking)) => thinking.budget_tokens.saturating_add(DEFAULT_MAX_TOKENS),
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    body.insert("max_tokens".into(), json!(max_tokens));
    let mut system = Vec::new();
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message {
            Message::System { content } => {
                system.push(joined_text(content));
                continue;
            }
            Message::User { content } => (
                "user",
                content
                    .iter()
                    .filter_map(|part| match part {
                        ContentPart::Text { text } => {
                            (!text.is_empty()).then(|| json!({"type": "text", "text": text}))
                        }
                    })
                    .collect::<Vec<_>>(),
            ),
            Message::Assistant { content, thinking, tool_calls } => {
                let mut blocks = Vec::new();
                let thinking_blocks =
                    thinking.as_ref().map_or(&[][..], |thinking| thinking.blocks.as_slice());
                // Without blocks (an older recording, a hand-made message): the one signed
                // thinking, first.
                if thinking_blocks.is_empty()
                    && let Some(thinking) = thinking
                    && let Some(signature) = &thinking.signature
                {
                    blocks.push(json!({"type": "thinking", "thinking": thinking.text, "signature": signature}));
                }
                for piece in answer_layout(content, tool_calls, thinking_blocks) {
                    blocks.push(match piece {
                        AnswerPiece::Text(text) => json!({"type": "text", "text": text}),
                        AnswerPiece::ToolCall(_, call) => {
                            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
                        }
                        AnswerPiece::Block(ThinkingBlockContent::Thinking { thinking, signature }) => {
                            json!({"type": "thinking", "thinking": thinking, "signature": signature})
                        }
                        AnswerPiece::Block(ThinkingBlockContent::RedactedThinking { data }) => {
                            json!({"type": "redacted_thinking", "data": data})
                        }
                    });
                }
                ("assistant", blocks)
            }
            Message::Tool { tool_call_id, content, is_error } => (
                "user",
                vec![
                    json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content, "is_error": is_error}),
                ],
            ),
        };
        // The API rejects empty text blocks and messages without content (Claude itself sometimes
        // answers a tool result with nothing): such a message says nothing, so it is left out.
        if blocks.is_empty() {
            continue;
        }
        // Anthropic wants user and assistant turns to alternate: merge neighbours.
        match messages.last_mut() {
            Some((last_role, last_blocks)) if last_role == role => last_blocks.extend(blocks),
            Some(_) | None => messages.push((role.to_owned(), blocks)),
        }
    }
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert(
        "messages".into(),
        Value::Array(
            messages
                .into_iter()
                .map(|(role, blocks)| json!({"role": role, "content": blocks}))
                .collect(),
        ),
    );
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
        .collect();
    let mut tool_choice = match &request.tool_choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Named(name) => {
            if !request.tools.iter().any(|tool| &tool.name == name) {
                return Err(invalid(format!(
                    "tool_choice names `{name}`, which is not among the tools"
                )));
            }
            json!({"type": "tool", "name": name})
        }
    };
    let mut schema_tool = None;
    match &request.response_format {
        ResponseFormat::Text => {}
        ResponseFormat::JsonSchema { name, schema, strict: _ } => {
            if !request.tools.is_empty() {
                return Err(invalid(
                    "a json_schema response format cannot be combined with tools".to_owned(),
                ));
            }
            tools.push(json!({"name": name, "description": "Answer with this JSON structure.", "input_schema": schema}));
            tool_choice = json!({"type": "tool", "name": name});
            schema_tool = Some(name.clone());
        }
    }
    if let Some(thinking) = request.thinking {
        let forced = tool_choice
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind != "auto" && kind != "none");
        if forced && !tools.is_empty() {
            return Err(invalid(
                "thinking cannot be combined with a forced tool choice (required, a named tool, \
                 or a json_schema response format): with extended thinking the Messages API \
                 accepts only tool_choice auto or none"
                    .to_owned(),
            ));
        }
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": thinking.budget_tokens}),
        );
    }
    if !tools.is_empty() {
        if request.parallel_tool_calls == Some(false)
            && request.tool_choice != ToolChoice::None
            && let Some(choice) = tool_choice.as_object_mut()
        {
            choice.insert("disable_parallel_tool_use".into(), json!(true));
        }
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), tool_choice);
    }
    // The API accepts no temperature change with thinking: the caller's is left out.
    if let Some(temperature) = request.temperature.filter(|_| request.thinking.is_none()) {
        body.insert("temperature".into(), json!(temperature));
    }
    if !request.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(request.stop));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Ok((Value::Object(body), schema_tool))
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Anthropic counts cached input apart; `prompt_tokens` here includes it.
#[derive(Debug, Default, Clone, Copy)]
struct UsageParts {
    input: u64,
    cache_read: u64,
    cache_creation: u64,
    output: u64,
}

impl UsageParts {
    fn update(&mut self, usage: &Value) {
        let set = |field: &str, slot: &mut u64| {
            if let Some(number) = usage.get(field).and_then(Value::as_u64) {
                *slot = number;
            }
        };
        set("input_tokens", &mut self.input);
        set("cache_read_input_tokens", &mut self.cache_read);
        set("cache_creation_input_tokens", &mut self.cache_creation);
        set("output_tokens", &mut self.output);
    }

    fn usage(self) -> Usage {
        Usage {
            prompt_tokens: self.input + self.cache_read + self.cache_creation,
            completion_tokens: self.output,
            cached_tokens: self.cache_read,
            reasoning_tokens: 0,
            timings: None,
        }
    }
}

/// The error a body or event reports: `{"type":"error","error":{...}}`, or any `error` field of an
/// event named `error`.
fn provider_error(value: &Value, event_name: &str) -> Option<WireError> {
    let error = value.get("error").filter(|_| {
        event_name == "error" || value.get("type").and_then(Value::as_str) == Some("error")
    })?;
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
    let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
    Some(WireError::Provider(kind.to_owned(), message.to_owned()))
}

fn push_text(deltas: &mut Vec<Delta>, delta: Delta) {
    let empty = match &delta {
        Delta::Text { text } | Delta::Thinking { text } => text.is_empty(),
        Delta::ThinkingSignature { .. }
        | Delta::RedactedThinking { .. }
        | Delta::ToolCallStart { .. }
        | Delta::ToolCallArguments { .. }
        | Delta::Usage { .. }
        | Delta::Retry { .. }
        | Delta::Finish { .. } => false,
    };
    if !empty {
        deltas.push(delta);
    }
}

/// The events that carry JSON this decoder must understand; any other event (`ping`, and types
/// added later) is skipped without being parsed, as the API documentation asks.
const KNOWN_EVENTS: [&str; 8] = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    // No `event:` line (a proxy dropped it): the JSON `type` decides.
    "message",
];

/// Decodes Messages stream events; `message_stop` is the terminal event.
#[derive(Debug, Default)]
pub(crate) struct AnthropicStreamDecoder {
    /// Content block index → tool call index for `tool_use` blocks, `None` for other blocks.
    blocks: BTreeMap<u64, Option<u32>>,
    /// Thinking blocks not yet ended → their signature so far (sent when the block ends).
    open_thinking: BTreeMap<u64, String>,
    usage: UsageParts,
    saw_usage: bool,
    finish: Option<FinishReason>,
    /// Set when json_schema is emulated with a forced tool: its input is reported as text.
    schema_tool: Option<String>,
}

impl WireDecoder for AnthropicStreamDecoder {
    fn on_event(&mut self, event: &SseEvent, deltas: &mut Vec<Delta>) -> WireResult<bool> {
        if !KNOWN_EVENTS.contains(&event.event.as_str()) {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(&event.data).map_err(|error| {
            WireError::Malformed(format!(
                "data is not JSON ({error}): {}",
                body_excerpt(event.data.as_bytes())
            ))
        })?;
        if let Some(error) = provider_error(&value, &event.event) {
            return Err(error);
        }
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.usage.update(usage);
                    self.saw_usage = true;
                }
            }
            "content_block_start" => {
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                self.on_block_start(
                    index,
                    value.get("content_block").unwrap_or(&Value::Null),
                    deltas,
                );
            }
            "content_block_delta" => {
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = value.get("delta").unwrap_or(&Value::Null);
                let text =
                    |field: &str| delta.get(field).and_then(Value::as_str).unwrap_or("").to_owned();
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => push_text(deltas, Delta::Text { text: text("text") }),
                    Some("thinking_delta") => {
                        self.open_thinking.entry(index).or_default();
                        push_text(deltas, Delta::Thinking { text: text("thinking") })
                    }
                    Some("signature_delta") => {
                        self.open_thinking.entry(index).or_default().push_str(&text("signature"))
                    }
                    Some("input_json_delta") => {
                        // Input for a block type we do not forward (`server_tool_use`, ...) is
                        // skipped with its block; input for a block never started is broken.
                        let block = *self.blocks.get(&index).ok_or_else(|| {
                            WireError::Malformed(format!(
                                "input_json_delta for block {index}, which was never started"
                            ))
                        })?;
                        let fragment = text("partial_json");
                        if let Some(tool_index) = block
                            && !fragment.is_empty()
                        {
                            deltas.push(self.arguments(tool_index, fragment));
                        }
                    }
                    Some(_) | None => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.finish = Some(finish_reason(reason));
                }
                if let Some(usage) = value.get("usage") {
                    self.usage.update(usage);
                    self.saw_usage = true;
                }
            }
            "content_block_stop" => {
                let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
                self.end_thinking(Some(index), deltas);
            }
            "message_stop" => {
                self.on_message_stop(deltas);
                return Ok(true);
            }
            // Future types sent under a known event name carry nothing to forward.
            _ => {}
        }
        Ok(false)
    }

    /// Each content block goes through the stream decoding as a complete
    /// `content_block_start`.
    fn on_body(&mut self, body: &[u8], deltas: &mut Vec<Delta>) -> WireResult<()> {
        let value: Value = serde_json::from_slice(body).map_err(|error| {
            WireError::Malformed(format!("not JSON ({error}): {}", body_excerpt(body)))
        })?;
        if let Some(error) = provider_error(&value, "") {
            return Err(error);
        }
        let content = value
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| WireError::Malformed(format!("no content: {}", body_excerpt(body))))?;
        for (index, block) in (0u64..).zip(content) {
            self.on_block_start(index, block, deltas);
            self.end_thinking(Some(index), deltas);
        }
        if let Some(usage) = value.get("usage") {
            self.usage.update(usage);
            self.saw_usage = true;
        }
        self.finish = value.get("stop_reason").and_then(Value::as_str).map(finish_reason);
        self.on_message_stop(deltas);
        Ok(())
    }
}

impl AnthropicStreamDecoder {
    /// Ends the thinking block at `index` (`None`: every open one) with its signature, which
    /// tells the assembler where the block's text stops.
    fn end_thinking(&mut self, index: Option<u64>, deltas: &mut Vec<Delta>) {
        let ended = match index {
            Some(index) => self.open_thinking.remove(&index).into_iter().collect(),
            None => std::mem::take(&mut self.open_thinking).into_values().collect::<Vec<_>>(),
        };
        for signature in ended {
            deltas.push(Delta::ThinkingSignature { signature });
        }
    }

    /// A content block begins (streamed: empty or with its first text; non-streamed: whole).
    fn on_block_start(&mut self, index: u64, block: &Value, deltas: &mut Vec<Delta>) {
        // Blocks follow each other: one that never got its content_block_stop ends here.
        self.end_thinking(None, deltas);
        let text = |field: &str| block.get(field).and_then(Value::as_str).unwrap_or("").to_owned();
        let block_type = block.get("type").and_then(Value::as_str);
        if block_type != Some("tool_use") {
            self.blocks.insert(index, None);
        }
        match block_type {
            Some("text") => push_text(deltas, Delta::Text { text: text("text") }),
            Some("thinking") => {
                push_text(deltas, Delta::Thinking { text: text("thinking") });
                self.open_thinking.insert(index, text("signature"));
            }
            Some("redacted_thinking") => {
                deltas.push(Delta::RedactedThinking { data: text("data") })
            }
            Some("tool_use") => {
                let tool_index =
                    u32::try_from(self.blocks.values().flatten().count()).unwrap_or(u32::MAX);
                self.blocks.insert(index, Some(tool_index));
                if self.schema_tool.is_none() {
                    deltas.push(Delta::ToolCallStart {
                        index: tool_index,
                        id: text("id"),
                        name: text("name"),
                    });
                }
                if let Some(input) = block
                    .get("input")
                    .filter(|input| input.as_object().is_some_and(|fields| !fields.is_empty()))
                {
                    deltas.push(self.arguments(tool_index, input.to_string()));
                }
            }
            // Server tool blocks and future types carry nothing we forward.
            Some(_) | None => {}
        }
    }

    /// The answer is complete: usage, then the finish.
    fn on_message_stop(&mut self, deltas: &mut Vec<Delta>) {
        self.end_thinking(None, deltas);
        if self.saw_usage {
            deltas.push(Delta::Usage { usage: self.usage.usage() });
        }
        let reason = self.finish.take().unwrap_or(FinishReason::Stop);
        let reason = match (&self.schema_tool, reason) {
            (Some(_), FinishReason::ToolCalls) => FinishReason::Stop,
            (_, reason) => reason,
        };
        deltas.push(Delta::Finish { reason });
    }

    fn arguments(&self, index: u32, fragment: String) -> Delta {
        match self.schema_tool {
            Some(_) => Delta::Text { text: fragment },
            None => Delta::ToolCallArguments { index, fragment },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ReasoningEffort, ThinkingConfig, Tool, ToolCall};
    use pretty_assertions::assert_eq;

    fn thinking_request() -> ChatRequest {
        let mut request = ChatRequest::new("claude", vec![Message::user("weather?")]);
        request.tools = vec![Tool {
            name: "get_weather".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }];
        request.thinking = Some(ThinkingConfig { budget_tokens: 2048 });
        request
    }

    #[test]
    fn thinking_is_sent_with_room_for_the_answer_and_without_temperature() {
        let mut request = thinking_request();
        request.temperature = Some(0.3);
        request.reasoning_effort = Some(ReasoningEffort::Low);
        let (body, _) = encode_request(&request, false).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "claude",
                "max_tokens": 2048 + DEFAULT_MAX_TOKENS,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "weather?"}]}],
                "thinking": {"type": "enabled", "budget_tokens": 2048},
                "tools": [{"name": "get_weather", "description": "", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "auto"},
            })
        );
        // The caller's own limit is kept (interleaved thinking allows a budget above it).
        request.max_tokens = Some(1500);
        assert_eq!(encode_request(&request, false).unwrap().0["max_tokens"], 1500);
        // Without thinking, temperature goes out as before.
        request.thinking = None;
        assert_eq!(encode_request(&request, false).unwrap().0["temperature"], json!(0.3f32));
    }

    #[test]
    fn thinking_with_a_forced_tool_choice_is_refused_before_sending() {
        for choice in [ToolChoice::Required, ToolChoice::Named("get_weather".into())] {
            let mut request = thinking_request();
            request.tool_choice = choice.clone();
            let error = encode_request(&request, false).unwrap_err();
            assert!(
                matches!(&error, Error::InvalidRequest { message, .. } if message.contains("forced tool choice")),
                "{choice:?}: {error:?}"
            );
        }
        let mut request = thinking_request();
        request.tools.clear();
        request.response_format = ResponseFormat::JsonSchema {
            name: "answer".into(),
            schema: json!({"type": "object"}),
            strict: true,
        };
        assert!(matches!(encode_request(&request, false), Err(Error::InvalidRequest { .. })));
        // auto and none are allowed; so is `required` without any tool (no tool_choice is sent).
        for choice in [ToolChoice::Auto, ToolChoice::None] {
            let mut request = thinking_request();
            request.tool_choice = choice;
            assert!(encode_request(&request, false).is_ok());
        }
        let mut request = thinking_request();
        request.tools.clear();
        request.tool_choice = ToolChoice::Required;
        assert!(encode_request(&request, false).is_ok());
    }

    #[test]
    fn a_thinking_block_without_its_stop_event_ends_at_the_next_block() {
        let mut decoder = AnthropicStreamDecoder::default();
        let mut deltas = Vec::new();
        for data in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"a"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s1"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"hi"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"b"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"s"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"2"}}"#,
            r#"{"type":"message_stop"}"#,
        ] {
            let event = SseEvent { event: "message".into(), data: data.into(), id: None };
            decoder.on_event(&event, &mut deltas).unwrap();
        }
        assert_eq!(
            deltas,
            vec![
                Delta::Thinking { text: "a".into() },
                Delta::ThinkingSignature { signature: "s1".into() },
                Delta::Text { text: "hi".into() },
                Delta::Thinking { text: "b".into() },
                // Pieces of one block's signature are sent whole, when the block ends.
                Delta::ThinkingSignature { signature: "s2".into() },
                Delta::Finish { reason: FinishReason::Stop },
            ]
        );
    }

    #[test]
    fn empty_answers_and_empty_text_parts_are_left_out_of_the_request() {
        let request = ChatRequest::new(
            "claude",
            vec![
                Message::user("list files"),
                Message::Assistant {
                    content: String::new(),
                    thinking: None,
                    tool_calls: vec![ToolCall {
                        id: "toolu_1".into(),
                        name: "ls".into(),
                        arguments: json!({}),
                    }],
                },
                Message::Tool {
                    tool_call_id: "toolu_1".into(),
                    content: "a.txt".into(),
                    is_error: false,
                },
                // Claude answered the tool result with an empty end_turn.
                Message::Assistant { content: String::new(), thinking: None, tool_calls: vec![] },
                Message::User { content: vec![ContentPart::Text { text: String::new() }] },
                Message::user("and now?"),
            ],
        );
        let (body, _) = encode_request(&request, false).unwrap();
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "list files"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": false},
                    {"type": "text", "text": "and now?"}]},
            ])
        );
    }
}
