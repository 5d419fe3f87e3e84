//! Model connections for skills-agent: OpenAI-compatible Chat Completions and Anthropic
//! Messages over HTTP, streaming, retries, structured actions, and scripted/replayed models.
//!
//! # Design
//!
//! Everything above this crate speaks one provider-neutral vocabulary ([`ChatRequest`],
//! [`Response`], [`Delta`]); only this crate knows provider JSON. A provider implements
//! [`ModelProvider`] (`chat` and `stream`) and is stored as `Arc<dyn ModelProvider>`.
//!
//! * **One assembler.** Streams are decoded into normalised [`Delta`]s (text, thinking and its
//!   block ends, redacted thinking, tool-call start, argument fragments, usage, finish).
//!   Non-streamed bodies are translated into the same deltas and go through the same
//!   [`Assembler`], so `chat` and an assembled `stream` give equal responses. A stream without
//!   its terminal event (`[DONE]`, `message_stop`) is [`Error::Truncated`]; a tool call cut off
//!   by `finish_reason = length` is reported in `invalid_tool_calls`, never repaired.
//! * **SSE** ([`sse::SseDecoder`]) handles `\n`, `\r\n`, `\r`, line endings split across chunks,
//!   multi-line `data:`, comments and UTF-8 split across chunks, looking at each byte once.
//!   [`StreamDecoder`] runs SSE plus a provider's event decoding without IO (captured streams,
//!   fuzzing, benchmarks).
//! * **Errors are classified** ([`Error::is_retryable`]): 408/409/429/5xx/529, in-stream
//!   `overloaded_error`, connection failures and timeouts before any content are retried with
//!   jittered exponential backoff ([`RetryPolicy`]), honouring `retry-after-ms`, `retry-after`
//!   and `x-should-retry`. Once a content delta reached the caller, nothing is retried: the
//!   error says how many deltas were delivered. Timeouts: connect, first byte, idle.
//! * **Forced tool choice.** OpenAI, vLLM and DeepSeek take a named `tool_choice` natively;
//!   llama.cpp ignores it, so [`NamedToolChoice::JsonSchema`] sends the tool's schema as a
//!   grammar-constrained `response_format` instead and reports the JSON as that tool's call.
//!   Anthropic takes `{"type":"tool"}` natively; its `response_format = json_schema` is sent as a
//!   forced tool whose input comes back as text.
//! * **Property order is kept where a schema asks for it.** Constrained decoders (llama.cpp's
//!   grammars, OpenAI's structured outputs) make the model write properties in the order the
//!   schema lists them, but `serde_json` sorts keys. A schema object with a
//!   [`PROPERTY_ORDERING`] array (`"propertyOrdering"`, the keyword Gemini defines) has its
//!   `properties` sent in that order and the keyword left out, so `thought` can come before
//!   `action`.
//! * **Thinking survives a tool round trip.** Anthropic's `thinking` blocks (each with its
//!   `signature`) and `redacted_thinking` blocks stay separate, in order, each with its place
//!   among the text and tool calls ([`Response::thinking_blocks`], [`ThinkingBlock`]);
//!   [`Message::from_response`] keeps them in [`Thinking::blocks`] and the Anthropic encoder
//!   sends them back unchanged, as the API requires for a tool-use turn with thinking on. The
//!   unified [`Response::thinking`] text is still every block's text. Extended thinking is
//!   asked for with [`ChatRequest::thinking`] (Anthropic) and [`ChatRequest::reasoning_effort`]
//!   (OpenAI reasoning models); each provider ignores the other's field, and both are off by
//!   default. With thinking on, Anthropic requests leave `temperature` out and refuse a forced
//!   tool choice, as the API does (README: "Thinking and reasoning effort").
//! * **Structured actions** ([`structured`]) stream the model's JSON through `stream-json`, so
//!   callers see `$.action.type` as soon as it is parsed, validate the result against the JSON
//!   Schema (the `jsonschema` crate) and re-ask once with the validation error.
//! * **Test doubles.** [`MockModel`] answers from a script and records requests;
//!   [`RecordingModel`] records a real model's calls and [`ReplayModel`] plays them back,
//!   failing loudly when the request sequence diverges.
//!
//! # Example
//!
//! ```
//! use model_adapter::{ChatRequest, Message, MockModel, MockReply, ModelProvider};
//! use serde_json::json;
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! runtime.block_on(async {
//!     let model = MockModel::new(vec![
//!         MockReply::thinking_then_text("The user greets.", "Hello!"),
//!         MockReply::tool_call("read_file", &json!({"path": "README.md"})),
//!     ]);
//!     let request = ChatRequest::new("mock", vec![Message::user("hi")]);
//!     let first = model.chat(&request).await.unwrap();
//!     assert_eq!((first.thinking.as_str(), first.text.as_str()), ("The user greets.", "Hello!"));
//!     let second = model.chat(&request).await.unwrap();
//!     assert_eq!(second.tool_calls[0].arguments, json!({"path": "README.md"}));
//!     assert_eq!(model.requests().len(), 2);
//! });
//! ```

mod anthropic;
mod assemble;
mod decode;
mod error;
mod gbnf;
mod http;
mod mock;
mod openai;
mod ordered;
mod provider;
mod replay;
pub mod retry;
pub mod sse;
#[cfg(feature = "structured")]
pub mod structured;
mod types;

pub use anthropic::{
    ANTHROPIC_VERSION, AnthropicConfig, AnthropicProvider, DEFAULT_MAX_TOKENS,
    INTERLEAVED_THINKING_BETA,
};
pub use assemble::Assembler;
pub use decode::StreamDecoder;
pub use error::{Error, Result, TimeoutPhase};
pub use http::{DeltaStream, HttpConfig};
pub use mock::{MockModel, MockReply};
pub use openai::{MaxTokensField, NamedToolChoice, OpenAiConfig, OpenAiProvider, SchemaFormat};
pub use ordered::PROPERTY_ORDERING;
pub use provider::{ModelProvider, collect_stream};
pub use replay::{RecordedCall, RecordingModel, ReplayModel, read_recording, write_recording};
pub use retry::RetryPolicy;
#[cfg(feature = "structured")]
pub use structured::{ActionEvent, ActionOutcome, StructuredAction, Watch};
pub use types::{
    ChatRequest, ContentPart, Delta, FinishReason, InvalidToolCall, Message, ReasoningEffort,
    Response, ResponseFormat, ServerTimings, Thinking, ThinkingBlock, ThinkingBlockContent,
    ThinkingConfig, Tool, ToolCall, ToolChoice, Usage,
};

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
