//! `RecordingModel` writes every call of a real model to JSON lines; `ReplayModel` answers from
//! such a recording and fails loudly as soon as the request sequence diverges from it.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::assemble::Assembler;
use crate::error::{Error, Result};
use crate::http::DeltaStream;
use crate::mock::MockReply;
use crate::provider::ModelProvider;
use crate::types::{ChatRequest, Delta, Response};

/// One recorded model call: one line of a recording file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// What was asked.
    pub request: ChatRequest,
    /// What came back.
    pub response: Response,
}

/// Reads a JSON-lines recording (blank lines skipped).
pub fn read_recording(path: &Path) -> Result<Vec<RecordedCall>> {
    let file_error = |message: String| Error::File { path: path.display().to_string(), message };
    let text = std::fs::read_to_string(path).map_err(|error| file_error(error.to_string()))?;
    let mut calls = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let call = serde_json::from_str(line)
            .map_err(|error| file_error(format!("line {}: {error}", number + 1)))?;
        calls.push(call);
    }
    Ok(calls)
}

/// Writes calls as JSON lines.
pub fn write_recording(path: &Path, calls: &[RecordedCall]) -> Result<()> {
    let file_error = |message: String| Error::File { path: path.display().to_string(), message };
    let mut text = String::new();
    for call in calls {
        text.push_str(&serde_json::to_string(call).map_err(|error| file_error(error.to_string()))?);
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|error| file_error(error.to_string()))
}

/// Wraps a provider and records each completed call (streamed calls once they finish).
#[derive(Debug)]
pub struct RecordingModel {
    inner: Arc<dyn ModelProvider>,
    calls: Arc<Mutex<Vec<RecordedCall>>>,
}

impl RecordingModel {
    /// Records the calls made through `inner`.
    pub fn new(inner: Arc<dyn ModelProvider>) -> RecordingModel {
        RecordingModel { inner, calls: Arc::new(Mutex::new(Vec::new())) }
    }

    /// The calls recorded so far.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.calls.lock().map(|calls| calls.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl ModelProvider for RecordingModel {
    async fn chat(&self, request: &ChatRequest) -> Result<Response> {
        let response = self.inner.chat(request).await?;
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(RecordedCall { request: request.clone(), response: response.clone() });
        }
        Ok(response)
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream> {
        let inner = self.inner.stream(request).await?;
        let calls = Arc::clone(&self.calls);
        let request = request.clone();
        let mut assembler = Some(Assembler::new());
        Ok(Box::pin(inner.map(move |item| {
            if let (Ok(delta), Some(current)) = (&item, assembler.as_mut()) {
                current.push(delta);
                if matches!(delta, Delta::Finish { .. })
                    && let Some(response) = assembler.take().and_then(Assembler::finish)
                    && let Ok(mut calls) = calls.lock()
                {
                    calls.push(RecordedCall { request: request.clone(), response });
                }
            }
            item
        })))
    }
}

/// Answers from a recording, in order; any other request is [`Error::ReplayDiverged`].
#[derive(Debug)]
pub struct ReplayModel {
    calls: Vec<RecordedCall>,
    next: Mutex<usize>,
}

impl ReplayModel {
    /// Replays these calls.
    pub fn new(calls: Vec<RecordedCall>) -> ReplayModel {
        ReplayModel { calls, next: Mutex::new(0) }
    }

    /// Replays the recording in `path` (JSON lines of [`RecordedCall`]).
    pub fn from_file(path: &Path) -> Result<ReplayModel> {
        Ok(ReplayModel::new(read_recording(path)?))
    }

    /// Calls not yet replayed.
    pub fn remaining(&self) -> usize {
        let next = self.next.lock().map(|next| *next).unwrap_or(self.calls.len());
        self.calls.len().saturating_sub(next)
    }

    fn answer(&self, request: &ChatRequest) -> Result<Response> {
        let mut next = self.next.lock().map_err(|_| Error::ReplayDiverged {
            index: 0,
            message: "the replay's lock is poisoned".to_owned(),
        })?;
        let index = *next;
        let recorded = self.calls.get(index).ok_or_else(|| Error::ReplayDiverged {
            index,
            message: format!("the recording has only {} calls", self.calls.len()),
        })?;
        let expected = serde_json::to_value(&recorded.request).unwrap_or(Value::Null);
        let actual = serde_json::to_value(request).unwrap_or(Value::Null);
        if let Some(difference) = first_difference(&expected, &actual, "") {
            return Err(Error::ReplayDiverged { index, message: difference });
        }
        *next += 1;
        Ok(recorded.response.clone())
    }
}

#[async_trait]
impl ModelProvider for ReplayModel {
    async fn chat(&self, request: &ChatRequest) -> Result<Response> {
        self.answer(request)
    }

    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream> {
        let response = self.answer(request)?;
        let deltas = match MockReply::response(&response) {
            MockReply::Deltas { deltas } => deltas,
            MockReply::Error { message, retryable } => {
                return Err(Error::Mock { message, retryable });
            }
        };
        Ok(Box::pin(futures_util::stream::iter(deltas.into_iter().map(Ok))))
    }
}

/// The JSON pointer of the first place where `actual` differs from `expected`, with both values.
fn first_difference(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    let short = |value: &Value| {
        let text = value.to_string();
        if text.chars().count() > 120 {
            format!("{}…", text.chars().take(120).collect::<String>())
        } else {
            text
        }
    };
    match (expected, actual) {
        (Value::Object(expected_fields), Value::Object(actual_fields)) => {
            let mut keys: Vec<&String> =
                expected_fields.keys().chain(actual_fields.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let child = format!("{path}/{key}");
                match (expected_fields.get(key), actual_fields.get(key)) {
                    (Some(left), Some(right)) => first_difference(left, right, &child),
                    (Some(left), None) => {
                        Some(format!("{child}: recorded {} but absent now", short(left)))
                    }
                    (None, Some(right)) => {
                        Some(format!("{child}: absent in the recording but now {}", short(right)))
                    }
                    (None, None) => None,
                }
            })
        }
        (Value::Array(expected_items), Value::Array(actual_items)) => {
            let shared = expected_items.len().min(actual_items.len());
            let item = (0..shared).find_map(|index| {
                first_difference(
                    &expected_items[index],
                    &actual_items[index],
                    &format!("{path}/{index}"),
                )
            });
            item.or_else(|| {
                (expected_items.len() != actual_items.len()).then(|| {
                    format!(
                        "{path}: recorded {} items but now {}",
                        expected_items.len(),
                        actual_items.len()
                    )
                })
            })
        }
        _ if expected == actual => None,
        _ => Some(format!(
            "{}: recorded {} but now {}",
            if path.is_empty() { "/" } else { path },
            short(expected),
            short(actual)
        )),
    }
}
