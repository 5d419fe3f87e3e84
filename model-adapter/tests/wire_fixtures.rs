//! Recorded-style fixtures for both providers, served over loopback in every write pattern:
//! streamed and non-streamed answers assemble to the same expected Response, and the delta
//! sequence is identical however the bytes are split (nothing lost, nothing duplicated).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use std::sync::Arc;

use common::{FIXTURES, Reply, Step, TestServer, data, fast_http};
use futures_util::StreamExt;
use model_adapter::{
    AnthropicConfig, AnthropicProvider, ChatRequest, Delta, Message, ModelProvider, OpenAiConfig,
    OpenAiProvider, Response, collect_stream,
};
use pretty_assertions::assert_eq;

fn provider(name: &str, url: &str) -> Arc<dyn ModelProvider> {
    if name.starts_with("openai") {
        let mut config = OpenAiConfig::new(format!("{url}/v1"));
        config.http = fast_http();
        Arc::new(OpenAiProvider::new(config).unwrap())
    } else {
        let mut config = AnthropicConfig::new(url);
        config.http = fast_http();
        Arc::new(AnthropicProvider::new(config).unwrap())
    }
}

async fn stream_deltas(model: &dyn ModelProvider, request: &ChatRequest) -> Vec<Delta> {
    let mut stream = model.stream(request).await.unwrap();
    let mut deltas = Vec::new();
    while let Some(item) = stream.next().await {
        deltas.push(item.unwrap());
    }
    deltas
}

fn crlf(bytes: &[u8]) -> Vec<u8> {
    String::from_utf8(bytes.to_vec()).unwrap().replace('\n', "\r\n").into_bytes()
}

fn lone_cr(bytes: &[u8]) -> Vec<u8> {
    String::from_utf8(bytes.to_vec()).unwrap().replace('\n', "\r").into_bytes()
}

#[tokio::test]
async fn streamed_and_non_streamed_answers_assemble_to_the_expected_response() {
    for name in FIXTURES {
        let sse = data(&format!("{name}.sse"));
        let body = String::from_utf8(data(&format!("{name}.json"))).unwrap();
        let expected: Response =
            serde_json::from_slice(&data(&format!("{name}.expected.json"))).unwrap();
        let replies = vec![
            Reply::json(200, &[], &body),
            Reply::sse(&sse),
            Reply::sse_with(&sse, Step::WriteBytewise),
            Reply::sse_with(&crlf(&sse), Step::WriteBytewise),
            Reply::sse_with(&crlf(&sse), |bytes| Step::WriteChunked(bytes, 7)),
            Reply::sse_with(&lone_cr(&sse), |bytes| Step::WriteChunked(bytes, 3)),
        ];
        let patterns = replies.len() - 1;
        // A server that ignores `stream: true` and answers with one JSON body.
        let mut replies = replies;
        replies.push(Reply::json(200, &[], &body));
        let server = TestServer::start(replies).await;
        let model = provider(name, &server.url);
        let request = ChatRequest::new("test-model", vec![Message::user("hello")]);

        let chat = model.chat(&request).await.unwrap();
        assert_eq!(chat, expected, "{name}: non-streamed");

        let reference = stream_deltas(model.as_ref(), &request).await;
        let assembled = collect_stream(
            Box::pin(futures_util::stream::iter(reference.clone().into_iter().map(Ok))),
            |_| {},
        )
        .await
        .unwrap();
        assert_eq!(assembled, expected, "{name}: streamed");
        for pattern in 1..patterns {
            assert_eq!(
                stream_deltas(model.as_ref(), &request).await,
                reference,
                "{name}: write pattern {pattern}"
            );
        }
        assert_eq!(
            collect_stream(model.stream(&request).await.unwrap(), |_| {}).await.unwrap(),
            expected,
            "{name}: a JSON body to a stream request"
        );
    }
}

#[tokio::test]
async fn the_request_bodies_follow_each_wire_format() {
    let sse = data("openai_text.sse");
    let server = TestServer::start(vec![Reply::sse(&sse)]).await;
    let mut config = OpenAiConfig::new(format!("{}/v1", server.url));
    config.api_key = Some("sk-test".into());
    let model = OpenAiProvider::new(config).unwrap();
    let request: ChatRequest = serde_json::from_slice(&data("request_tools.json")).unwrap();
    collect_stream(model.stream(&request).await.unwrap(), |_| {}).await.unwrap();
    let recorded = &server.requests()[0];
    assert_eq!(
        (recorded.method.as_str(), recorded.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test"));
    let expected: serde_json::Value =
        serde_json::from_slice(&data("request_tools.openai.json")).unwrap();
    assert_eq!(recorded.json(), expected);

    let sse = data("anthropic_text.sse");
    let server = TestServer::start(vec![Reply::sse(&sse)]).await;
    let mut config = AnthropicConfig::new(server.url.clone());
    config.api_key = Some("sk-ant".into());
    let model = AnthropicProvider::new(config).unwrap();
    collect_stream(model.stream(&request).await.unwrap(), |_| {}).await.unwrap();
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("sk-ant"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    let expected: serde_json::Value =
        serde_json::from_slice(&data("request_tools.anthropic.json")).unwrap();
    assert_eq!(recorded.json(), expected);
}

/// Both emulations, streamed and not: OpenAI's named tool choice sent as json_schema comes back
/// as a call to that tool; Anthropic's json_schema sent as a forced tool comes back as text.
#[tokio::test]
async fn emulated_tool_choice_and_schema_answers_are_rewritten_the_same_both_ways() {
    let mut request: ChatRequest = serde_json::from_slice(&data("request_tools.json")).unwrap();
    let server = TestServer::start(vec![
        Reply::json(200, &[], &String::from_utf8(data("openai_json_answer.json")).unwrap()),
        Reply::sse(&data("openai_json_answer.sse")),
    ])
    .await;
    let mut config = OpenAiConfig::new(format!("{}/v1", server.url));
    config.http = fast_http();
    config.named_tool_choice = model_adapter::NamedToolChoice::JsonSchema;
    let model = OpenAiProvider::new(config).unwrap();
    let expected = Response {
        tool_calls: vec![model_adapter::ToolCall {
            id: "call_get_weather".into(),
            name: "get_weather".into(),
            arguments: serde_json::json!({"city": "Paris"}),
        }],
        finish_reason: model_adapter::FinishReason::ToolCalls,
        ..Response::default()
    };
    assert_eq!(model.chat(&request).await.unwrap(), expected);
    assert_eq!(
        collect_stream(model.stream(&request).await.unwrap(), |_| {}).await.unwrap(),
        expected
    );

    request.tools.clear();
    request.tool_choice = model_adapter::ToolChoice::Auto;
    request.response_format = model_adapter::ResponseFormat::JsonSchema {
        name: "get_weather".into(),
        schema: serde_json::json!({"type": "object"}),
        strict: true,
    };
    let server = TestServer::start(vec![
        Reply::json(200, &[], &String::from_utf8(data("anthropic_tools.json")).unwrap()),
        Reply::sse(&data("anthropic_tools.sse")),
    ])
    .await;
    let model = provider("anthropic", &server.url);
    let mut expected: Response =
        serde_json::from_slice(&data("anthropic_tools.expected.json")).unwrap();
    expected.tool_calls.clear();
    expected.finish_reason = model_adapter::FinishReason::Stop;
    // The non-streamed body carries the input as an object (re-serialised compactly), the
    // stream as the model's own text.
    expected.text = "Checking.{\"city\":\"Paris\"}".into();
    assert_eq!(model.chat(&request).await.unwrap(), expected);
    expected.text = "Checking.{\"city\": \"Paris\"}".into();
    assert_eq!(
        collect_stream(model.stream(&request).await.unwrap(), |_| {}).await.unwrap(),
        expected
    );
}
