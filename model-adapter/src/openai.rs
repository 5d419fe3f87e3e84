//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`): OpenAI, vLLM,
//! llama.cpp, Ollama, DeepSeek. Request encoding, response and stream decoding into deltas.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

mod jump;

use crate::error::{Error, Result};
use crate::http::{
    DeltaStream, HttpConfig, PreparedRequest, Transport, WireDecoder, WireError, WireResult,
    body_excerpt,
};
use crate::provider::ModelProvider;
use crate::sse::SseEvent;
use crate::types::{
    ChatRequest, ContentPart, Delta, FinishReason, Message, Response, ResponseFormat,
    ServerTimings, ToolChoice, Usage, joined_text,
};

/// How a named `tool_choice` reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NamedToolChoice {
    /// Send `tool_choice: {"type":"function","function":{"name":…}}` (OpenAI, vLLM, DeepSeek).
    #[default]
    Native,
    /// The server ignores a named choice (llama.cpp does): send that tool's parameter schema as
    /// a grammar-constrained `response_format` json_schema instead, without tools, and report the
    /// JSON answer as a call to that tool.
    JsonSchema,
}

/// Which request field carries `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    /// `max_tokens`: llama.cpp, vLLM, Ollama, DeepSeek and most compatible servers.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's own API, where `max_tokens` is deprecated and
    /// rejected by reasoning models (o-series, gpt-5).
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// `MaxCompletionTokens` for OpenAI's own API (`api.openai.com`), `MaxTokens` elsewhere.
    pub fn for_base_url(base_url: &str) -> MaxTokensField {
        let host = base_url.split("://").nth(1).unwrap_or(base_url);
        let host = host.split(['/', ':']).next().unwrap_or(host);
        if host.eq_ignore_ascii_case("api.openai.com") {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        }
    }

    fn name(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// How a json_schema response format reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaFormat {
    /// `response_format: {"type": "json_schema", …}` (OpenAI, vLLM, llama.cpp, Ollama).
    #[default]
    ResponseFormat,
    /// llama.cpp only: the schema as a GBNF `grammar` that writes the document on one line,
    /// the grammar llama.cpp builds from it with `": "` and `", "` where it allows any
    /// whitespace. A small model writes a schema-constrained document pretty-printed when
    /// whitespace is allowed: a `run_script` action took 79 tokens on Qwen2.5-Coder, 65 on one
    /// line (53 with no spaces at all, but then the 1.5B got arguments wrong: 2 of 6 tasks
    /// right against 4 of 6). A schema with a keyword the conversion does not cover
    /// (`pattern`, `$ref`, numeric bounds, …) is sent as `response_format`.
    OneLineGrammar,
    /// llama.cpp only: [`OneLineGrammar`](SchemaFormat::OneLineGrammar), and the text the
    /// schema fixes (keys, separators, a one-value enum, closing brackets) is written by the
    /// client, not generated: the answer is streamed in parts, each request continuing the
    /// document so far (an assistant prefill) under a grammar for the next part the model
    /// chooses or writes (jump-forward decoding). The fixed text is evaluated with the prompt,
    /// as a batch; a schema the walk does not cover is sent whole, as `OneLineGrammar`.
    JumpForward,
}

/// Where and how to reach an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The API root including the version, e.g. `https://api.openai.com/v1` or
    /// `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<String>,
    /// Timeouts and retries.
    pub http: HttpConfig,
    /// How a named tool choice is expressed.
    pub named_tool_choice: NamedToolChoice,
    /// Which field carries the token limit (chosen from the base URL by `new`).
    pub max_tokens_field: MaxTokensField,
    /// How a json_schema response format is sent.
    pub schema_format: SchemaFormat,
}

impl OpenAiConfig {
    /// A configuration with default timeouts and retries, native tool choice, and the token
    /// limit field that the server at `base_url` expects ([`MaxTokensField::for_base_url`]).
    pub fn new(base_url: impl Into<String>) -> OpenAiConfig {
        let base_url = base_url.into();
        let max_tokens_field = MaxTokensField::for_base_url(&base_url);
        OpenAiConfig {
            base_url,
            api_key: None,
            http: HttpConfig::default(),
            named_tool_choice: NamedToolChoice::Native,
            max_tokens_field,
            schema_format: SchemaFormat::ResponseFormat,
        }
    }
}

/// The OpenAI-compatible provider.
#[derive(Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    transport: Arc<Transport>,
}

impl OpenAiProvider {
    /// A provider for `config`.
    pub fn new(config: OpenAiConfig) -> Result<OpenAiProvider> {
        let transport = Arc::new(Transport::new(config.http)?);
        Ok(OpenAiProvider { config, transport })
    }

    /// The schema of a request answered in parts ([`SchemaFormat::JumpForward`]): a json_schema
    /// answer without tools, whose every document the walk covers.
    fn jump_schema(&self, request: &ChatRequest) -> Option<Value> {
        if self.config.schema_format != SchemaFormat::JumpForward || !request.tools.is_empty() {
            return None;
        }
        match &request.response_format {
            ResponseFormat::JsonSchema { schema, .. }
                if crate::gbnf::one_line_grammar(schema).is_some()
                    && crate::gbnf::jump::covers(schema) =>
            {
                Some(schema.clone())
            }
            _ => None,
        }
    }

    /// The HTTP request, and a maker of decoders for its answer.
    fn prepare(
        &self,
        request: &ChatRequest,
        stream: bool,
    ) -> Result<(PreparedRequest, impl Fn() -> Box<dyn WireDecoder> + Send + 'static)> {
        let (body, emulated_tool) = encode_request(request, stream, &self.config)?;
        let mut headers = Vec::new();
        if let Some(key) = &self.config.api_key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        let url = format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'));
        let decoder = move || -> Box<dyn WireDecoder> {
            Box::new(OpenAiStreamDecoder {
                emulated_tool: emulated_tool.clone(),
                ..OpenAiStreamDecoder::default()
            })
        };
        Ok((PreparedRequest::json("openai", url, headers, &body)?, decoder))
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    async fn chat(&self, request: &ChatRequest) -> Result<Response> {
        if let Some(schema) = self.jump_schema(request) {
            let mut assembler = crate::Assembler::new();
            let mut deltas = jump::stream(&self.transport, &self.config, request, schema);
            while let Some(delta) = futures_util::StreamExt::next(&mut deltas).await {
                assembler.push(&delta?);
            }
            return assembler.finish().ok_or_else(|| Error::InvalidRequest {
                provider: "openai".to_owned(),
                message: "the answer written in parts ended without its finish".to_owned(),
            });
        }
        let (prepared, decoder) = self.prepare(request, false)?;
        self.transport.chat(&prepared, decoder).await
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream> {
        if let Some(schema) = self.jump_schema(request) {
            return Ok(jump::stream(&self.transport, &self.config, request, schema));
        }
        let (prepared, decoder) = self.prepare(request, true)?;
        Ok(self.transport.stream(prepared, decoder))
    }
}

/// The request body, and the tool name when a named choice is emulated with json_schema.
pub(crate) fn encode_request(
    request: &ChatRequest,
    stream: bool,
    config: &OpenAiConfig,
) -> Result<(Value, Option<String>)> {
    let (named_tool_choice, max_tokens_field) = (config.named_tool_choice, config.max_tokens_field);
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert(
        "messages".into(),
        Value::Array(request.messages.iter().map(encode_message).collect()),
    );
    let mut emulated_tool = None;
    let mut response_format = request.response_format.clone();
    match (&request.tool_choice, named_tool_choice) {
        (ToolChoice::Named(name), NamedToolChoice::JsonSchema) => {
            let tool = request.tools.iter().find(|tool| &tool.name == name).ok_or_else(|| {
                Error::InvalidRequest {
                    provider: "openai".to_owned(),
                    message: format!("tool_choice names `{name}`, which is not among the tools"),
                }
            })?;
            response_format = ResponseFormat::JsonSchema {
                name: tool.name.clone(),
                schema: tool.parameters.clone(),
                strict: true,
            };
            emulated_tool = Some(name.clone());
        }
        (tool_choice, NamedToolChoice::Native | NamedToolChoice::JsonSchema) => {
            if !request.tools.is_empty() {
                let tools: Vec<Value> = request
                    .tools
                    .iter()
                    .map(|tool| {
                        json!({"type": "function", "function": {
                            "name": tool.name, "description": tool.description,
                            "parameters": tool.parameters}})
                    })
                    .collect();
                body.insert("tools".into(), Value::Array(tools));
                let choice = match tool_choice {
                    ToolChoice::Auto => json!("auto"),
                    ToolChoice::None => json!("none"),
                    ToolChoice::Required => json!("required"),
                    ToolChoice::Named(name) => {
                        json!({"type": "function", "function": {"name": name}})
                    }
                };
                body.insert("tool_choice".into(), choice);
                if let Some(parallel) = request.parallel_tool_calls {
                    body.insert("parallel_tool_calls".into(), json!(parallel));
                }
            }
        }
    }
    match response_format {
        ResponseFormat::Text => {}
        ResponseFormat::JsonSchema { schema, .. }
            if matches!(
                config.schema_format,
                SchemaFormat::OneLineGrammar | SchemaFormat::JumpForward
            ) && let Some(grammar) = crate::gbnf::one_line_grammar(&schema) =>
        {
            body.insert("grammar".into(), Value::String(grammar));
        }
        ResponseFormat::JsonSchema { name, schema, strict } => {
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": strict}}),
            );
        }
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(max_tokens) = request.max_tokens {
        body.insert(max_tokens_field.name().into(), json!(max_tokens));
    }
    // Anthropic's `thinking` budget has no Chat Completions field: it is not sent here.
    if let Some(effort) = request.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort.as_str()));
    }
    if !request.stop.is_empty() {
        body.insert("stop".into(), json!(request.stop));
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok((Value::Object(body), emulated_tool))
}

fn encode_parts(parts: &[ContentPart]) -> Value {
    match parts {
        [ContentPart::Text { text }] => json!(text),
        _ => Value::Array(
            parts
                .iter()
                .map(|part| match part {
                    ContentPart::Text { text } => json!({"type": "text", "text": text}),
                })
                .collect(),
        ),
    }
}

fn encode_message(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({"role": "system", "content": joined_text(content)}),
        Message::User { content } => json!({"role": "user", "content": encode_parts(content)}),
        // Reasoning is not sent back: Chat Completions has no input field for it.
        Message::Assistant { content, thinking: _, tool_calls } => {
            let mut fields = Map::new();
            fields.insert("role".into(), json!("assistant"));
            fields.insert(
                "content".into(),
                if content.is_empty() && !tool_calls.is_empty() {
                    Value::Null
                } else {
                    json!(content)
                },
            );
            if !tool_calls.is_empty() {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|call| {
                        json!({"id": call.id, "type": "function", "function": {
                            "name": call.name, "arguments": call.arguments.to_string()}})
                    })
                    .collect();
                fields.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(fields)
        }
        Message::Tool { tool_call_id, content, is_error: _ } => {
            json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
        }
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The usage a body or chunk reports: its `usage` object, with the server's `timings` beside it
/// (llama.cpp sends both in its last chunk). `timings` alone (a server without usage) gives
/// the token counts it implies. `None` when the object has neither.
fn decode_usage(object: &Value) -> Option<Usage> {
    let number = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    let float = |value: Option<&Value>| value.and_then(Value::as_f64).unwrap_or(0.0);
    let timings =
        object.get("timings").filter(|timings| timings.is_object()).map(|timings| ServerTimings {
            cache_n: number(timings.get("cache_n")),
            prompt_n: number(timings.get("prompt_n")),
            prompt_ms: float(timings.get("prompt_ms")),
            predicted_n: number(timings.get("predicted_n")),
            predicted_ms: float(timings.get("predicted_ms")),
        });
    match object.get("usage").filter(|usage| usage.is_object()) {
        Some(usage) => Some(Usage {
            prompt_tokens: number(usage.get("prompt_tokens")),
            completion_tokens: number(usage.get("completion_tokens")),
            cached_tokens: number(usage.pointer("/prompt_tokens_details/cached_tokens")),
            reasoning_tokens: number(usage.pointer("/completion_tokens_details/reasoning_tokens")),
            timings,
        }),
        None => timings.map(|timings| Usage {
            prompt_tokens: timings.cache_n + timings.prompt_n,
            completion_tokens: timings.predicted_n,
            cached_tokens: timings.cache_n,
            reasoning_tokens: 0,
            timings: Some(timings),
        }),
    }
}

/// The provider's error in a body or chunk (`{"error":{"type"|"code","message"}}` or
/// `{"error":"text"}`); `"error": null` is no error.
fn provider_error(value: &Value) -> Option<WireError> {
    match value.get("error")? {
        Value::Null => None,
        Value::String(message) => Some(WireError::Provider("error".to_owned(), message.clone())),
        error => {
            let kind = error
                .get("type")
                .and_then(Value::as_str)
                .or_else(|| error.get("code").and_then(Value::as_str))
                .unwrap_or("error");
            let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
            Some(WireError::Provider(kind.to_owned(), message.to_owned()))
        }
    }
}

/// One tool call of the answer as the stream has shown it so far.
#[derive(Debug)]
struct StreamedCall {
    index: u32,
    id: String,
    name: String,
    /// Whether [`Delta::ToolCallStart`] went out (it waits for the name).
    started: bool,
    /// Argument text that arrived before the name.
    pending_arguments: String,
}

/// Decodes `chat.completion.chunk` events; `[DONE]` is the terminal event.
///
/// Servers differ from OpenAI's own shape in ways real streams show: some omit
/// `tool_calls[].index` (Ollama, Gemini), matched here by call id (a fragment with neither
/// continues the latest call); some send arguments before `function.name` (the start waits for
/// the name, the arguments are held until then). A refusal (`refusal` instead of `content`) is
/// reported as text with [`FinishReason::ContentFilter`].
#[derive(Debug, Default)]
pub(crate) struct OpenAiStreamDecoder {
    finish: Option<FinishReason>,
    calls: Vec<StreamedCall>,
    refused: bool,
    /// Set when a named tool choice is emulated: text becomes that tool's arguments.
    emulated_tool: Option<String>,
}

impl WireDecoder for OpenAiStreamDecoder {
    fn on_event(&mut self, event: &SseEvent, deltas: &mut Vec<Delta>) -> WireResult<bool> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.on_done(deltas);
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(data).map_err(|error| {
            WireError::Malformed(format!(
                "data is not JSON ({error}): {}",
                body_excerpt(data.as_bytes())
            ))
        })?;
        if let Some(error) = provider_error(&value) {
            return Err(error);
        }
        if let Some(choice) = value.pointer("/choices/0") {
            self.on_choice_delta(choice.get("delta").unwrap_or(&Value::Null), deltas)?;
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(finish_reason(reason));
            }
        }
        if let Some(usage) = decode_usage(&value) {
            deltas.push(Delta::Usage { usage });
        }
        Ok(false)
    }

    /// The message goes through the stream decoding as one chunk's delta, its tool calls
    /// numbered by position.
    fn on_body(&mut self, body: &[u8], deltas: &mut Vec<Delta>) -> WireResult<()> {
        let value: Value = serde_json::from_slice(body).map_err(|error| {
            WireError::Malformed(format!("not JSON ({error}): {}", body_excerpt(body)))
        })?;
        if let Some(error) = provider_error(&value) {
            return Err(error);
        }
        let choice = value
            .pointer("/choices/0")
            .ok_or_else(|| WireError::Malformed(format!("no choices: {}", body_excerpt(body))))?;
        let mut message = choice.get("message").cloned().unwrap_or(Value::Null);
        if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for (index, call) in calls.iter_mut().enumerate() {
                if let Some(fields) = call.as_object_mut() {
                    fields.insert("index".into(), json!(index));
                }
            }
        }
        self.on_choice_delta(&message, deltas)?;
        if let Some(usage) = decode_usage(&value) {
            deltas.push(Delta::Usage { usage });
        }
        let reason = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("stop");
        self.finish = Some(finish_reason(reason));
        self.on_done(deltas);
        Ok(())
    }
}

/// The text and the thinking of a `content` given as an array of parts; other part types
/// (images, audio references) carry no text and are skipped.
fn content_parts(parts: &[Value]) -> (String, String) {
    fn texts(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => out.push_str(text),
            Value::Array(items) => {
                for item in items {
                    if let Some(text) = item.get("text").and_then(Value::as_str) {
                        out.push_str(text);
                    }
                }
            }
            _ => {}
        }
    }
    let mut text = String::new();
    let mut thinking = String::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => texts(part.get("text").unwrap_or(&Value::Null), &mut text),
            Some("thinking") => texts(part.get("thinking").unwrap_or(&Value::Null), &mut thinking),
            _ => {}
        }
    }
    (text, thinking)
}

impl OpenAiStreamDecoder {
    /// One chunk's `delta` (or a whole non-streamed `message`).
    fn on_choice_delta(&mut self, delta: &Value, deltas: &mut Vec<Delta>) -> WireResult<()> {
        let text = |field: &str| delta.get(field).and_then(Value::as_str).filter(|t| !t.is_empty());
        if let Some(thinking) = text("reasoning_content").or_else(|| text("reasoning")) {
            deltas.push(Delta::Thinking { text: thinking.to_owned() });
        }
        // `content` is a string, or (Mistral's reasoning models, some proxies) an array of
        // `{"type":"text","text":…}` and `{"type":"thinking","thinking":…}` parts.
        let parts =
            delta.get("content").and_then(Value::as_array).map(|parts| content_parts(parts));
        if let Some((_, thinking)) = parts.as_ref().filter(|(_, thinking)| !thinking.is_empty()) {
            deltas.push(Delta::Thinking { text: thinking.clone() });
        }
        let content = match &parts {
            Some((text, _)) => Some(text.as_str()).filter(|text| !text.is_empty()),
            None => text("content"),
        };
        if let Some(content) = content {
            match &self.emulated_tool {
                Some(name) => {
                    if self.calls.is_empty() {
                        let call = StreamedCall {
                            index: 0,
                            id: emulated_call_id(name),
                            name: name.clone(),
                            started: false,
                            pending_arguments: String::new(),
                        };
                        self.calls.push(call);
                    }
                    self.on_call_fragment(0, content, deltas);
                }
                None => deltas.push(Delta::Text { text: content.to_owned() }),
            }
        }
        if let Some(refusal) = text("refusal") {
            self.refused = true;
            deltas.push(Delta::Text { text: refusal.to_owned() });
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let field = |pointer: &str| {
                call.pointer(pointer).and_then(Value::as_str).filter(|text| !text.is_empty())
            };
            let id = field("/id");
            let position = self.call_position(call.get("index"), id, call)?;
            let known = &mut self.calls[position];
            if let Some(id) = id
                && known.id.is_empty()
            {
                id.clone_into(&mut known.id);
            }
            if let Some(name) = field("/function/name")
                && known.name.is_empty()
            {
                name.clone_into(&mut known.name);
            }
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(arguments)) => arguments.clone(),
                Some(Value::Null) | None => String::new(),
                // A few servers send a non-streamed call's arguments as an object.
                Some(other) => other.to_string(),
            };
            self.on_call_fragment(position, &arguments, deltas);
        }
        Ok(())
    }

    /// Where the call this fragment belongs to is kept, adding it when it is new.
    fn call_position(
        &mut self,
        index: Option<&Value>,
        id: Option<&str>,
        call: &Value,
    ) -> WireResult<usize> {
        let index = match index {
            Some(Value::Null) | None => {
                let by_id = id.and_then(|id| self.calls.iter().find(|known| known.id == id));
                match (by_id, id) {
                    (Some(known), _) => known.index,
                    // A new id: a new call after every call seen so far.
                    (None, Some(_)) => self
                        .calls
                        .iter()
                        .map(|known| known.index.saturating_add(1))
                        .max()
                        .unwrap_or(0),
                    // Neither index nor id: more of the latest call.
                    (None, None) => self.calls.last().map_or(0, |last| last.index),
                }
            }
            Some(index) => {
                index.as_u64().and_then(|index| u32::try_from(index).ok()).ok_or_else(|| {
                    WireError::Malformed(format!("tool call index is not a small number: {call}"))
                })?
            }
        };
        if let Some(position) = self.calls.iter().position(|known| known.index == index) {
            return Ok(position);
        }
        self.calls.push(StreamedCall {
            index,
            id: String::new(),
            name: String::new(),
            started: false,
            pending_arguments: String::new(),
        });
        Ok(self.calls.len() - 1)
    }

    /// Argument text for the call at `position`; starts the call once its name is known.
    fn on_call_fragment(&mut self, position: usize, arguments: &str, deltas: &mut Vec<Delta>) {
        let Some(call) = self.calls.get_mut(position) else { return };
        if !call.started {
            call.pending_arguments.push_str(arguments);
            if call.name.is_empty() {
                return;
            }
            call.started = true;
            deltas.push(Delta::ToolCallStart {
                index: call.index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            let pending = std::mem::take(&mut call.pending_arguments);
            if !pending.is_empty() {
                deltas.push(Delta::ToolCallArguments { index: call.index, fragment: pending });
            }
        } else if !arguments.is_empty() {
            deltas.push(Delta::ToolCallArguments {
                index: call.index,
                fragment: arguments.to_owned(),
            });
        }
    }

    /// The end of the answer: calls that never got a name go out nameless (the assembler
    /// reports them invalid), then the finish.
    fn on_done(&mut self, deltas: &mut Vec<Delta>) {
        for call in self.calls.iter_mut().filter(|call| !call.started) {
            call.started = true;
            deltas.push(Delta::ToolCallStart {
                index: call.index,
                id: call.id.clone(),
                name: String::new(),
            });
            let pending = std::mem::take(&mut call.pending_arguments);
            if !pending.is_empty() {
                deltas.push(Delta::ToolCallArguments { index: call.index, fragment: pending });
            }
        }
        let reason = self.finish.take().unwrap_or(FinishReason::Stop);
        let reason = match (&self.emulated_tool, self.refused, reason) {
            (_, true, FinishReason::Stop) => FinishReason::ContentFilter,
            (Some(_), false, FinishReason::Stop) => FinishReason::ToolCalls,
            (_, _, reason) => reason,
        };
        deltas.push(Delta::Finish { reason });
    }
}

fn emulated_call_id(name: &str) -> String {
    format!("call_{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    #[test]
    fn usage_takes_the_servers_timings_and_timings_alone_give_the_counts() {
        let timings = json!({"cache_n": 20, "prompt_n": 5, "prompt_ms": 100.5,
            "prompt_per_second": 49.8, "predicted_n": 7, "predicted_ms": 560.0});
        let both = json!({"usage": {"prompt_tokens": 25, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 20}}, "timings": timings});
        let expected = ServerTimings {
            cache_n: 20,
            prompt_n: 5,
            prompt_ms: 100.5,
            predicted_n: 7,
            predicted_ms: 560.0,
        };
        let usage = decode_usage(&both).unwrap();
        assert_eq!((usage.prompt_tokens, usage.cached_tokens), (25, 20));
        assert_eq!(usage.timings, Some(expected));
        let alone = decode_usage(&json!({"timings": timings})).unwrap();
        assert_eq!(
            (alone.prompt_tokens, alone.completion_tokens, alone.cached_tokens),
            (25, 7, 20)
        );
        // Other providers: no timings, and none serialised.
        let plain = decode_usage(&json!({"usage": {"prompt_tokens": 3}})).unwrap();
        assert_eq!(plain.timings, None);
        assert!(!serde_json::to_string(&plain).unwrap().contains("timings"));
        assert_eq!(decode_usage(&json!({"choices": []})), None);
        // A broken timings object is not one.
        assert_eq!(decode_usage(&json!({"timings": "soon"})), None);
    }

    #[test]
    fn the_token_limit_field_follows_the_server() {
        assert_eq!(
            MaxTokensField::for_base_url("https://api.openai.com/v1"),
            MaxTokensField::MaxCompletionTokens
        );
        assert_eq!(
            MaxTokensField::for_base_url("https://API.OpenAI.com:443/v1/"),
            MaxTokensField::MaxCompletionTokens
        );
        for other in [
            "http://127.0.0.1:8080/v1",
            "https://api.deepseek.com/v1",
            "https://api.openai.com.example.net/v1",
            "localhost:11434/v1",
        ] {
            assert_eq!(MaxTokensField::for_base_url(other), MaxTokensField::MaxTokens, "{other}");
        }

        let mut request = ChatRequest::new("m", vec![Message::user("hi")]);
        request.max_tokens = Some(64);
        for (field, name, absent) in [
            (MaxTokensField::MaxTokens, "max_tokens", "max_completion_tokens"),
            (MaxTokensField::MaxCompletionTokens, "max_completion_tokens", "max_tokens"),
        ] {
            let config =
                OpenAiConfig { max_tokens_field: field, ..OpenAiConfig::new("http://h/v1") };
            let (body, _) = encode_request(&request, false, &config).unwrap();
            assert_eq!(body[name], 64);
            assert!(body.get(absent).is_none());
        }
    }

    #[test]
    fn a_schema_goes_as_a_one_line_grammar_when_asked_and_covered() {
        let mut config = OpenAiConfig::new("http://127.0.0.1:8080/v1");
        let mut request = ChatRequest::new("local", vec![Message::user("hi")]);
        let covered = json!({"type": "object", "properties": {"a": {"enum": ["x", "y"]}},
                             "required": ["a"], "additionalProperties": false});
        request.response_format =
            ResponseFormat::JsonSchema { name: "action".into(), schema: covered, strict: true };
        let (plain, _) = encode_request(&request, false, &config).unwrap();
        assert_eq!(plain["response_format"]["type"], "json_schema");
        assert!(plain.get("grammar").is_none());
        config.schema_format = SchemaFormat::OneLineGrammar;
        let (body, _) = encode_request(&request, false, &config).unwrap();
        assert!(body.get("response_format").is_none());
        let grammar = body["grammar"].as_str().unwrap();
        assert!(grammar.starts_with("root ::= r"), "{grammar}");
        assert!(grammar.contains(r#"r0 ::= "\"x\"" | "\"y\"""#), "{grammar}");
        // Not covered (a pattern): the response format as before.
        request.response_format = ResponseFormat::JsonSchema {
            name: "action".into(),
            schema: json!({"type": "string", "pattern": "^a"}),
            strict: true,
        };
        let (body, _) = encode_request(&request, false, &config).unwrap();
        assert_eq!(body["response_format"]["json_schema"]["schema"]["pattern"], "^a");
        assert!(body.get("grammar").is_none());
    }

    #[test]
    fn reasoning_effort_is_sent_and_the_anthropic_budget_is_not() {
        let config = OpenAiConfig::new("http://127.0.0.1:8080/v1");
        let encode = |request: &ChatRequest| encode_request(request, false, &config).unwrap().0;
        let mut request = ChatRequest::new("o4-mini", vec![Message::user("hi")]);
        let plain = encode(&request);
        request.thinking = Some(crate::types::ThinkingConfig { budget_tokens: 4096 });
        assert_eq!(encode(&request), plain);
        for (effort, word) in [
            (crate::ReasoningEffort::Low, "low"),
            (crate::ReasoningEffort::Medium, "medium"),
            (crate::ReasoningEffort::High, "high"),
        ] {
            request.reasoning_effort = Some(effort);
            let mut expected = plain.clone();
            expected["reasoning_effort"] = json!(word);
            assert_eq!(encode(&request), expected);
        }
    }
}
