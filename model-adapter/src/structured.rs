//! Structured actions: ask for JSON matching a schema, stream it through `stream-json` so callers
//! see subscribed paths early, validate the result, and re-ask once with the validation error.
//!
//! Validation uses the maintained `jsonschema` crate (default features off: no remote `$ref`
//! resolution, so a schema can never make the process reach the network).

use futures_util::StreamExt;
use serde_json::Value;
use stream_json::{Capture, Event, EventKind, Parser};

use crate::assemble::Assembler;
use crate::error::{Error, Result};
use crate::provider::ModelProvider;
use crate::types::{ChatRequest, Delta, Message, Response, ResponseFormat};

/// What to report for a watched path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// The whole value, as soon as it is complete (e.g. `$.action.type`).
    Value,
    /// A string value's text as it arrives (e.g. `$.action.args.content`).
    Deltas,
}

/// Something the caller can act on before the answer is complete.
#[derive(Debug, Clone, PartialEq)]
pub enum ActionEvent {
    /// A watched value is complete.
    Value {
        /// Where, e.g. `$.action.type`.
        path: String,
        /// The value.
        value: Value,
    },
    /// More text of a watched string.
    StringDelta {
        /// Where, e.g. `$.action.args.content`.
        path: String,
        /// The new text (never repeats earlier text).
        text: String,
    },
    /// The answer was invalid; the model is asked again with this error.
    RepairRequested {
        /// The attempt about to start (2 for the one repair).
        attempt: u32,
        /// The parse or validation error sent back to the model.
        error: String,
    },
}

/// A valid structured answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionOutcome {
    /// The validated document.
    pub value: Value,
    /// The model's final response.
    pub response: Response,
    /// Model calls made (1, or 2 after a repair).
    pub attempts: u32,
    /// The errors of the failed attempts, oldest first (their count is the failure count).
    pub failures: Vec<String>,
}

/// A JSON Schema for one kind of structured answer, plus the paths to report early.
#[derive(Debug)]
pub struct StructuredAction {
    name: String,
    schema: Value,
    validator: jsonschema::Validator,
    watches: Vec<(String, Watch)>,
}

/// Model calls per structured answer: the first try and one repair.
pub const MAX_ATTEMPTS: u32 = 2;

impl StructuredAction {
    /// Compiles `schema`; `name` is what providers see as the schema's name.
    pub fn new(name: impl Into<String>, schema: Value) -> Result<StructuredAction> {
        let name = name.into();
        let validator = jsonschema::validator_for(&schema).map_err(|error| {
            Error::InvalidSchema { name: name.clone(), message: error.to_string() }
        })?;
        Ok(StructuredAction { name, schema, validator, watches: Vec::new() })
    }

    /// Reports the value or string deltas at `pattern` (a `stream-json` path pattern) while the
    /// answer streams. The pattern is checked when [`run`](StructuredAction::run) starts.
    pub fn watch(mut self, pattern: impl Into<String>, watch: Watch) -> StructuredAction {
        self.watches.push((pattern.into(), watch));
        self
    }

    /// Parses and validates a complete answer; the error text is what the repair re-ask sends.
    pub fn validate(&self, text: &str) -> std::result::Result<Value, String> {
        let value: Value = serde_json::from_str(text.trim())
            .map_err(|error| format!("the answer is not valid JSON: {error}"))?;
        self.check(&value)?;
        Ok(value)
    }

    fn check(&self, value: &Value) -> std::result::Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(5)
            .map(|error| {
                let location = error.instance_path().to_string();
                let location = if location.is_empty() { "/".to_owned() } else { location };
                format!("at {location}: {error}")
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("the answer does not match the schema: {}", problems.join("; ")))
        }
    }

    /// Streams one structured answer from `model`, reporting watched paths through `on_event`,
    /// and re-asks once if the answer does not parse or validate.
    pub async fn run(
        &self,
        model: &dyn ModelProvider,
        request: &ChatRequest,
        mut on_event: impl FnMut(ActionEvent) + Send,
    ) -> Result<ActionOutcome> {
        let mut request = request.clone();
        request.response_format = ResponseFormat::JsonSchema {
            name: self.name.clone(),
            schema: self.schema.clone(),
            strict: true,
        };
        let mut failures = Vec::new();
        for attempt in 1..=MAX_ATTEMPTS {
            let (response, streamed) = self.attempt(model, &request, &mut on_event).await?;
            let verdict = streamed.and_then(|value| self.check(&value).map(|()| value));
            match verdict {
                Ok(value) => {
                    return Ok(ActionOutcome { value, response, attempts: attempt, failures });
                }
                Err(error) => {
                    failures.push(error.clone());
                    if attempt == MAX_ATTEMPTS {
                        break;
                    }
                    on_event(ActionEvent::RepairRequested {
                        attempt: attempt + 1,
                        error: error.clone(),
                    });
                    request.messages.push(Message::from_response(&response));
                    request.messages.push(Message::user(format!(
                        "Your previous answer was invalid: {error}. Reply again with only a JSON \
                         document that satisfies the schema."
                    )));
                }
            }
        }
        Err(Error::InvalidStructuredOutput {
            name: self.name.clone(),
            attempts: MAX_ATTEMPTS,
            message: failures.last().cloned().unwrap_or_default(),
        })
    }

    /// One streamed call: the response and the parsed document (or the parse error).
    async fn attempt(
        &self,
        model: &dyn ModelProvider,
        request: &ChatRequest,
        on_event: &mut (impl FnMut(ActionEvent) + Send),
    ) -> Result<(Response, std::result::Result<Value, String>)> {
        let mut parser = Parser::new();
        let whole = parser.subscribe("$", Capture::Value).map_err(|error| {
            Error::InvalidSchema { name: self.name.clone(), message: error.to_string() }
        })?;
        let mut watched = Vec::new();
        for (pattern, watch) in &self.watches {
            let capture = match watch {
                Watch::Value => Capture::Value,
                Watch::Deltas => Capture::Deltas,
            };
            let id = parser.subscribe(pattern, capture).map_err(|error| Error::InvalidSchema {
                name: self.name.clone(),
                message: format!("bad watch pattern {pattern}: {error}"),
            })?;
            watched.push(id);
        }
        let mut document = None;
        let mut handler = |event: Event<'_>| {
            if event.subscription == whole {
                if let EventKind::Value(value) = event.kind {
                    document = Some(value);
                }
                return;
            }
            if !watched.contains(&event.subscription) {
                return;
            }
            let path = event.path.to_string();
            match event.kind {
                EventKind::Value(value) => on_event(ActionEvent::Value { path, value }),
                EventKind::StringDelta(text) => {
                    on_event(ActionEvent::StringDelta { path, text: text.to_owned() })
                }
                EventKind::KeySeen
                | EventKind::Started(_)
                | EventKind::Raw(_)
                | EventKind::Ended => {}
                _ => {}
            }
        };
        let mut stream = model.stream(request).await?;
        let mut assembler = Assembler::new();
        let mut parse_error = None;
        let mut delivered = 0;
        while let Some(item) = stream.next().await {
            let delta = item?;
            if delta.is_content() {
                delivered += 1;
            }
            if let Delta::Text { text } = &delta
                && parse_error.is_none()
                && let Err(error) = parser.feed(text.as_bytes(), &mut handler)
            {
                parse_error = Some(format!("the answer is not valid JSON: {error}"));
            }
            assembler.push(&delta);
            if assembler.is_finished() {
                break;
            }
        }
        let response = assembler
            .finish()
            .ok_or(Error::Truncated { url: "structured action stream".to_owned(), delivered })?;
        if parse_error.is_none()
            && let Err(error) = parser.finish(&mut handler)
        {
            parse_error = Some(format!("the answer is not valid JSON: {error}"));
        }
        let parsed = match (parse_error, document) {
            (Some(error), _) => Err(error),
            (None, Some(value)) => Ok(value),
            (None, None) => Err("the answer is empty".to_owned()),
        };
        Ok((response, parsed))
    }
}
