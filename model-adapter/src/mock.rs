//! `MockModel`: a scripted model for tests, which records every request it receives.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assemble::assemble_all;
use crate::error::{Error, Result};
use crate::http::DeltaStream;
use crate::provider::ModelProvider;
use crate::types::{
    AnswerPiece, ChatRequest, Delta, FinishReason, Response, ThinkingBlockContent, Usage,
    answer_layout,
};

/// One scripted answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MockReply {
    /// These deltas, streamed as they are; `chat` assembles them (no `finish` → truncated).
    Deltas {
        /// The deltas.
        deltas: Vec<Delta>,
    },
    /// A failure.
    Error {
        /// The error message.
        message: String,
        /// Whether it is classified as retryable.
        #[serde(default)]
        retryable: bool,
    },
}

/// Splits text into word-sized pieces so a scripted stream looks like a real one.
fn pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for character in text.chars() {
        if character == ' ' && !current.trim().is_empty() {
            pieces.push(std::mem::take(&mut current));
        }
        current.push(character);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

impl MockReply {
    /// A text-only answer.
    pub fn text(text: &str) -> MockReply {
        let mut deltas: Vec<Delta> =
            pieces(text).into_iter().map(|text| Delta::Text { text }).collect();
        deltas.push(Delta::Usage { usage: mock_usage(text) });
        deltas.push(Delta::Finish { reason: FinishReason::Stop });
        MockReply::Deltas { deltas }
    }

    /// Reasoning, then a text answer.
    pub fn thinking_then_text(thinking: &str, text: &str) -> MockReply {
        let mut deltas: Vec<Delta> =
            pieces(thinking).into_iter().map(|text| Delta::Thinking { text }).collect();
        deltas.extend(pieces(text).into_iter().map(|text| Delta::Text { text }));
        deltas.push(Delta::Usage { usage: mock_usage(text) });
        deltas.push(Delta::Finish { reason: FinishReason::Stop });
        MockReply::Deltas { deltas }
    }

    /// A single tool call with these arguments.
    pub fn tool_call(name: &str, arguments: &Value) -> MockReply {
        MockReply::raw_tool_call(name, &arguments.to_string(), FinishReason::ToolCalls)
    }

    /// A tool call whose argument text is given verbatim (use it for malformed JSON).
    pub fn raw_tool_call(name: &str, raw_arguments: &str, reason: FinishReason) -> MockReply {
        let mut deltas = vec![Delta::ToolCallStart {
            index: 0,
            id: format!("call_{name}_0"),
            name: name.to_owned(),
        }];
        deltas.extend(
            pieces(raw_arguments)
                .into_iter()
                .map(|fragment| Delta::ToolCallArguments { index: 0, fragment }),
        );
        deltas.push(Delta::Finish { reason });
        MockReply::Deltas { deltas }
    }

    /// The deltas that assemble into `response`, thinking blocks in their places included.
    ///
    /// Reasoning text that is in no block (OpenAI-compatible reasoning) comes first. A response
    /// whose `thinking` does not end with its blocks' texts (edited by hand) gets its reasoning
    /// and signature as one block, as before blocks existed.
    pub fn response(response: &Response) -> MockReply {
        let mut deltas = Vec::new();
        let block_text: String = response
            .thinking_blocks
            .iter()
            .filter_map(|block| match &block.content {
                ThinkingBlockContent::Thinking { thinking, .. } => Some(thinking.as_str()),
                ThinkingBlockContent::RedactedThinking { .. } => None,
            })
            .collect();
        let loose_thinking = response.thinking.strip_suffix(block_text.as_str());
        let blocks = match loose_thinking {
            Some(loose) => {
                if !loose.is_empty() {
                    deltas.push(Delta::Thinking { text: loose.to_owned() });
                    if !response.thinking_blocks.is_empty() {
                        // Ends the unsigned text so that it stays out of the first block.
                        deltas.push(Delta::ThinkingSignature { signature: String::new() });
                    }
                }
                response.thinking_blocks.as_slice()
            }
            None => {
                deltas.push(Delta::Thinking { text: response.thinking.clone() });
                &[]
            }
        };
        if blocks.is_empty()
            && let Some(signature) = &response.thinking_signature
        {
            deltas.push(Delta::ThinkingSignature { signature: signature.clone() });
        }
        for piece in answer_layout(&response.text, &response.tool_calls, blocks) {
            match piece {
                AnswerPiece::Text(text) => deltas.push(Delta::Text { text: text.to_owned() }),
                AnswerPiece::ToolCall(position, call) => {
                    let index = u32::try_from(position).unwrap_or(u32::MAX);
                    deltas.push(Delta::ToolCallStart {
                        index,
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                    deltas.push(Delta::ToolCallArguments {
                        index,
                        fragment: call.arguments.to_string(),
                    });
                }
                AnswerPiece::Block(ThinkingBlockContent::Thinking { thinking, signature }) => {
                    if !thinking.is_empty() {
                        deltas.push(Delta::Thinking { text: thinking.clone() });
                    }
                    deltas.push(Delta::ThinkingSignature { signature: signature.clone() });
                }
                AnswerPiece::Block(ThinkingBlockContent::RedactedThinking { data }) => {
                    deltas.push(Delta::RedactedThinking { data: data.clone() });
                }
            }
        }
        if let Some(usage) = response.usage {
            deltas.push(Delta::Usage { usage });
        }
        deltas.push(Delta::Finish { reason: response.finish_reason.clone() });
        MockReply::Deltas { deltas }
    }

    /// A scripted failure.
    pub fn error(message: &str, retryable: bool) -> MockReply {
        MockReply::Error { message: message.to_owned(), retryable }
    }
}

/// Made-up but plausible token counts (4 characters a token).
fn mock_usage(text: &str) -> Usage {
    Usage {
        prompt_tokens: 10,
        completion_tokens: (text.len() as u64).div_ceil(4),
        cached_tokens: 0,
        reasoning_tokens: 0,
        timings: None,
    }
}

/// Answers from a script, in order, and records the requests.
#[derive(Debug, Default)]
pub struct MockModel {
    script: Mutex<VecDeque<MockReply>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl MockModel {
    /// A model that gives these replies in order, then fails.
    pub fn new(replies: Vec<MockReply>) -> MockModel {
        MockModel { script: Mutex::new(replies.into()), requests: Mutex::new(Vec::new()) }
    }

    /// A model whose script is a JSON array of [`MockReply`] in `path`.
    pub fn from_file(path: &Path) -> Result<MockModel> {
        let file_error =
            |message: String| Error::File { path: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|error| file_error(error.to_string()))?;
        let replies: Vec<MockReply> =
            serde_json::from_str(&text).map_err(|error| file_error(error.to_string()))?;
        Ok(MockModel::new(replies))
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().map(|requests| requests.clone()).unwrap_or_default()
    }

    /// How many scripted replies are left.
    pub fn remaining(&self) -> usize {
        self.script.lock().map(|script| script.len()).unwrap_or(0)
    }

    fn next(&self, request: &ChatRequest) -> Result<Vec<Delta>> {
        let poisoned =
            || Error::Mock { message: "the mock's lock is poisoned".to_owned(), retryable: false };
        let index = {
            let mut requests = self.requests.lock().map_err(|_| poisoned())?;
            requests.push(request.clone());
            requests.len()
        };
        let reply = self.script.lock().map_err(|_| poisoned())?.pop_front();
        match reply {
            Some(MockReply::Deltas { deltas }) => Ok(deltas),
            Some(MockReply::Error { message, retryable }) => {
                Err(Error::Mock { message, retryable })
            }
            None => Err(Error::Mock {
                message: format!("the script has no reply for request {index}"),
                retryable: false,
            }),
        }
    }
}

#[async_trait]
impl ModelProvider for MockModel {
    async fn chat(&self, request: &ChatRequest) -> Result<Response> {
        let deltas = self.next(request)?;
        assemble_all(&deltas)
            .ok_or(Error::Truncated { url: "mock".to_owned(), delivered: deltas.len() as u64 })
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream> {
        let deltas = self.next(request)?;
        let finished = deltas.iter().any(|delta| matches!(delta, Delta::Finish { .. }));
        let count = deltas.len() as u64;
        let mut items: Vec<Result<Delta>> = deltas.into_iter().map(Ok).collect();
        if !finished {
            items.push(Err(Error::Truncated { url: "mock".to_owned(), delivered: count }));
        }
        Ok(Box::pin(futures_util::stream::iter(items)))
    }
}
