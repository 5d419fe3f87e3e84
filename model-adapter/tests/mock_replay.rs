//! MockModel scripts (text, thinking, tool calls, malformed arguments, errors, exhaustion) and
//! ReplayModel recordings (in-order answers, loud divergence), plus RecordingModel round trips.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use std::sync::Arc;

use common::data_path;
use model_adapter::{
    ChatRequest, Error, FinishReason, Message, MockModel, MockReply, ModelProvider, RecordingModel,
    ReplayModel, Tool, collect_stream, read_recording, write_recording,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn weather_request() -> ChatRequest {
    let mut request = ChatRequest::new("m", vec![Message::user("weather in Paris?")]);
    request.tools = vec![Tool {
        name: "get_weather".into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
    }];
    request
}

#[tokio::test]
async fn scripted_replies_stream_and_chat_alike_and_requests_are_recorded() {
    let script = || {
        vec![
            MockReply::text("plain answer here"),
            MockReply::thinking_then_text("hmm", "answer"),
            MockReply::tool_call("get_weather", &json!({"city": "Paris"})),
            MockReply::raw_tool_call("get_weather", "{\"city\": ", FinishReason::Length),
            MockReply::error("scripted outage", true),
        ]
    };
    let chat_model = MockModel::new(script());
    let stream_model = MockModel::new(script());
    let request = weather_request();
    for index in 0..4 {
        let chatted = chat_model.chat(&request).await.unwrap();
        let streamed =
            collect_stream(stream_model.stream(&request).await.unwrap(), |_| {}).await.unwrap();
        assert_eq!(chatted, streamed, "reply {index}");
    }
    let error = chat_model.chat(&request).await.unwrap_err();
    assert!(matches!(error, Error::Mock { retryable: true, .. }), "{error:?}");
    let exhausted = chat_model.chat(&request).await.unwrap_err();
    assert!(exhausted.to_string().contains("no reply for request 6"), "{exhausted}");
    assert_eq!(chat_model.requests().len(), 6);
    assert_eq!(chat_model.requests()[0], request);
}

#[tokio::test]
async fn cut_off_tool_calls_are_invalid_in_mock_answers_too() {
    let model = MockModel::new(vec![MockReply::raw_tool_call(
        "write",
        "{\"path\": \"a",
        FinishReason::Length,
    )]);
    let response = model.chat(&weather_request()).await.unwrap();
    assert_eq!(response.tool_calls, vec![]);
    assert_eq!(response.invalid_tool_calls[0].raw_arguments, "{\"path\": \"a");
}

#[tokio::test]
async fn scripts_load_from_files() {
    let directory = std::env::temp_dir().join(format!("model-adapter-mock-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("script.json");
    std::fs::write(&path, serde_json::to_string(&vec![MockReply::text("from a file")]).unwrap())
        .unwrap();
    let model = MockModel::from_file(&path).unwrap();
    assert_eq!(model.chat(&weather_request()).await.unwrap().text, "from a file");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[tokio::test]
async fn a_recording_replays_in_order_and_divergence_fails_loudly() {
    let calls = read_recording(&data_path("recording.jsonl")).unwrap();
    let replay = ReplayModel::new(calls.clone());
    let first = replay.chat(&calls[0].request).await.unwrap();
    assert_eq!(first.tool_calls[0].arguments, json!({"city": "Paris"}));
    let mut second = calls[1].request.clone();
    let streamed = collect_stream(replay.stream(&second).await.unwrap(), |_| {}).await.unwrap();
    assert_eq!(streamed, calls[1].response);
    assert_eq!(replay.remaining(), 0);

    let replay = ReplayModel::new(calls.clone());
    replay.chat(&calls[0].request).await.unwrap();
    second.messages[2] =
        Message::Tool { tool_call_id: "call_1".into(), content: "rainy".into(), is_error: false };
    let error = replay.chat(&second).await.unwrap_err();
    match error {
        Error::ReplayDiverged { index: 1, message } => {
            assert_eq!(message, "/messages/2/content: recorded \"sunny\" but now \"rainy\"");
        }
        other => panic!("expected divergence, got {other:?}"),
    }
    let error = ReplayModel::new(Vec::new()).chat(&calls[0].request).await.unwrap_err();
    assert!(matches!(error, Error::ReplayDiverged { index: 0, .. }), "{error:?}");
}

#[tokio::test]
async fn recording_a_model_and_replaying_it_gives_the_same_answers() {
    let mock: Arc<dyn ModelProvider> = Arc::new(MockModel::new(vec![
        MockReply::tool_call("get_weather", &json!({"city": "Oslo"})),
        MockReply::text("cold"),
    ]));
    let recorder = RecordingModel::new(mock);
    let request = weather_request();
    let live_first = recorder.chat(&request).await.unwrap();
    let live_second =
        collect_stream(recorder.stream(&request).await.unwrap(), |_| {}).await.unwrap();
    let directory =
        std::env::temp_dir().join(format!("model-adapter-replay-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("run.jsonl");
    write_recording(&path, &recorder.calls()).unwrap();
    let replay = ReplayModel::from_file(&path).unwrap();
    assert_eq!(replay.chat(&request).await.unwrap(), live_first);
    assert_eq!(replay.chat(&request).await.unwrap(), live_second);
    std::fs::remove_dir_all(&directory).unwrap();
}
