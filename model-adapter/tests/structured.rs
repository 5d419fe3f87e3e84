//! Structured actions over a scripted model: early path events while the JSON streams,
//! validation against the action schema, and exactly one counted repair re-ask.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use common::data;
use model_adapter::{
    ActionEvent, ChatRequest, Delta, Error, FinishReason, Message, MockModel, MockReply,
    ResponseFormat, StructuredAction, Watch,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn action() -> StructuredAction {
    let schema: Value = serde_json::from_slice(&data("action_schema.json")).unwrap();
    StructuredAction::new("agent_action", schema)
        .unwrap()
        .watch("$.action.type", Watch::Value)
        .watch("$.action.args.content", Watch::Deltas)
}

fn text_reply(pieces: &[&str]) -> MockReply {
    let mut deltas: Vec<Delta> =
        pieces.iter().map(|text| Delta::Text { text: (*text).to_owned() }).collect();
    deltas.push(Delta::Finish { reason: FinishReason::Stop });
    MockReply::Deltas { deltas }
}

/// Events in a comparable form, in order.
fn describe(events: &[ActionEvent]) -> Value {
    Value::Array(
        events
            .iter()
            .map(|event| match event {
                ActionEvent::Value { path, value } => {
                    json!({"value": {"path": path, "value": value}})
                }
                ActionEvent::StringDelta { path, text } => {
                    json!({"delta": {"path": path, "text": text}})
                }
                ActionEvent::RepairRequested { attempt, error } => {
                    json!({"repair": {"attempt": attempt, "error": error}})
                }
            })
            .collect(),
    )
}

#[tokio::test]
async fn paths_are_reported_while_the_json_streams() {
    let model = MockModel::new(vec![text_reply(&[
        "{\"action\": {\"type\": \"final_",
        "answer\", \"args\": {\"content\": \"Hel",
        "lo wo",
        "rld\"}}}",
    ])]);
    let request = ChatRequest::new("mock", vec![Message::user("say hello")]);
    let mut events = Vec::new();
    let outcome = action().run(&model, &request, |event| events.push(event)).await.unwrap();
    let expected: Value = serde_json::from_slice(&data("structured_events.json")).unwrap();
    assert_eq!(describe(&events), expected);
    assert_eq!(
        outcome.value,
        json!({"action": {"type": "final_answer", "args": {"content": "Hello world"}}})
    );
    assert_eq!((outcome.attempts, outcome.failures.len()), (1, 0));
    let sent = &model.requests()[0];
    assert!(
        matches!(&sent.response_format, ResponseFormat::JsonSchema { name, strict: true, .. } if name == "agent_action")
    );
}

#[tokio::test]
async fn malformed_json_gets_one_repair_with_the_error() {
    let model = MockModel::new(vec![
        text_reply(&[
            "{\"action\": {\"type\": \"final_answer\", \"args\": {\"content\": \"x\"}},}",
        ]),
        text_reply(&[
            "{\"action\": {\"type\": \"final_answer\", \"args\": {\"content\": \"fixed\"}}}",
        ]),
    ]);
    let request = ChatRequest::new("mock", vec![Message::user("go")]);
    let mut events = Vec::new();
    let outcome = action().run(&model, &request, |event| events.push(event)).await.unwrap();
    assert_eq!(outcome.attempts, 2);
    assert_eq!(outcome.failures.len(), 1);
    assert!(outcome.failures[0].contains("byte"), "names the offset: {}", outcome.failures[0]);
    let repairs: Vec<&ActionEvent> = events
        .iter()
        .filter(|event| matches!(event, ActionEvent::RepairRequested { .. }))
        .collect();
    assert_eq!(repairs.len(), 1);
    let second = &model.requests()[1];
    assert_eq!(second.messages.len(), 3, "the bad answer and the repair request are appended");
    match (&second.messages[1], &second.messages[2]) {
        (Message::Assistant { content, .. }, Message::User { .. }) => {
            assert!(content.ends_with(",}"))
        }
        other => panic!("unexpected repair conversation: {other:?}"),
    }
}

#[tokio::test]
async fn a_schema_violation_twice_is_an_error_after_two_attempts() {
    let wrong = "{\"action\": {\"type\": \"dance\", \"args\": {\"content\": \"x\"}}}";
    let model = MockModel::new(vec![text_reply(&[wrong]), text_reply(&[wrong])]);
    let request = ChatRequest::new("mock", vec![Message::user("go")]);
    let error = action().run(&model, &request, |_| {}).await.unwrap_err();
    match error {
        Error::InvalidStructuredOutput { attempts: 2, message, .. } => {
            assert!(message.contains("/action/type"), "{message}");
        }
        other => panic!("expected InvalidStructuredOutput, got {other:?}"),
    }
    assert_eq!(model.remaining(), 0);
}

#[test]
fn an_invalid_schema_is_refused() {
    let error = StructuredAction::new("bad", json!({"type": 12})).unwrap_err();
    assert!(matches!(error, Error::InvalidSchema { .. }), "{error:?}");
}
