//! A fault-injecting loopback server: rate limits, server errors, overload inside a 200 stream,
//! cuts before and after the first delta, missing terminal events, malformed data, stalls.
//! Each test checks what was retried (by counting requests) and what the caller saw.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use std::time::Duration;

use common::{Reply, Step, TestServer, chunk, chunked_sse_head, data, fast_http, sse_head};
use futures_util::StreamExt;
use model_adapter::{
    AnthropicConfig, AnthropicProvider, ChatRequest, Delta, Error, HttpConfig, Message,
    ModelProvider, OpenAiConfig, OpenAiProvider, Response, TimeoutPhase,
};
use pretty_assertions::assert_eq;

fn openai(url: &str, http: HttpConfig) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(format!("{url}/v1"));
    config.http = http;
    OpenAiProvider::new(config).unwrap()
}

fn anthropic(url: &str) -> AnthropicProvider {
    let mut config = AnthropicConfig::new(url);
    config.http = fast_http();
    AnthropicProvider::new(config).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest::new("test-model", vec![Message::user("hello")])
}

fn expected(name: &str) -> Response {
    serde_json::from_slice(&data(&format!("{name}.expected.json"))).unwrap()
}

/// Every item of a stream, errors included.
async fn drain(model: &dyn ModelProvider) -> Vec<Result<Delta, Error>> {
    let mut stream = model.stream(&request()).await.unwrap();
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item);
    }
    items
}

fn content(items: &[Result<Delta, Error>]) -> Vec<Delta> {
    items.iter().filter_map(|item| item.as_ref().ok()).filter(|d| d.is_content()).cloned().collect()
}

fn openai_text_body() -> String {
    String::from_utf8(data("openai_text.json")).unwrap()
}

/// The first `events` events of the OpenAI text fixture (events are separated by blank lines).
fn openai_prefix(events: usize) -> Vec<u8> {
    let text = String::from_utf8(data("openai_text.sse")).unwrap();
    let parts: Vec<&str> = text.split_inclusive("\n\n").collect();
    parts[..events].concat().into_bytes()
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_waited_out_and_counted() {
    let server = TestServer::start(vec![
        Reply::json(
            429,
            &[("retry-after", "1")],
            r#"{"error":{"message":"slow down","type":"rate_limit_exceeded"}}"#,
        ),
        Reply::json(200, &[], &openai_text_body()),
    ])
    .await;
    let response = openai(&server.url, fast_http()).chat(&request()).await.unwrap();
    assert_eq!(response, Response { retries: 1, ..expected("openai_text") });
    assert_eq!(server.requests().len(), 2);

    let server = TestServer::start(vec![
        Reply::json(429, &[("retry-after-ms", "40"), ("retry-after", "9")], "{}"),
        Reply::sse(&data("openai_text.sse")),
    ])
    .await;
    let items = drain(&openai(&server.url, fast_http())).await;
    match &items[0] {
        Ok(Delta::Retry { attempt: 1, delay_ms: 40, error }) => {
            assert!(error.contains("429"), "{error}")
        }
        other => panic!("expected a retry notice, got {other:?}"),
    }
    assert!(items.iter().all(Result::is_ok));
    assert_eq!(
        items.last().unwrap().as_ref().unwrap(),
        &Delta::Finish { reason: model_adapter::FinishReason::Stop }
    );
}

#[tokio::test]
async fn server_error_then_success() {
    let server = TestServer::start(vec![
        Reply::json(500, &[], r#"{"error":{"message":"boom","type":"server_error"}}"#),
        Reply::json(200, &[], &openai_text_body()),
    ])
    .await;
    let response = openai(&server.url, fast_http()).chat(&request()).await.unwrap();
    assert_eq!(response.retries, 1);
    assert_eq!(response.text, "Héllo, wörld 🌍!");
}

#[tokio::test]
async fn persistent_overload_gives_up_after_the_configured_retries() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = TestServer::start(vec![
        Reply::json(529, &[], overloaded),
        Reply::json(529, &[], overloaded),
        Reply::json(529, &[], overloaded),
        Reply::json(200, &[], &String::from_utf8(data("anthropic_text.json")).unwrap()),
    ])
    .await;
    let error = anthropic(&server.url).chat(&request()).await.unwrap_err();
    match &error {
        Error::Status { status: 529, code, message, .. } => {
            assert_eq!(
                (code.as_deref(), message.as_str()),
                (Some("overloaded_error"), "Overloaded")
            );
        }
        other => panic!("expected a 529 status error, got {other:?}"),
    }
    assert!(error.is_retryable());
    assert_eq!(server.requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn permanent_errors_are_not_retried() {
    type Case = (u16, Vec<(&'static str, &'static str)>, &'static str);
    let cases: Vec<Case> = vec![
        (400, vec![], r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#),
        (401, vec![], r#"{"error":{"message":"no key","type":"authentication_error"}}"#),
        (404, vec![], "not found"),
        (
            429,
            vec![],
            r#"{"error":{"message":"pay up","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        ),
        (500, vec![("x-should-retry", "false")], r#"{"error":{"message":"no"}}"#),
    ];
    for (status, headers, body) in cases {
        let server = TestServer::start(vec![
            Reply::json(status, &headers, body),
            Reply::json(200, &[], &openai_text_body()),
        ])
        .await;
        let error = openai(&server.url, fast_http()).chat(&request()).await.unwrap_err();
        assert!(!error.is_retryable(), "{status}: {error}");
        assert!(matches!(error, Error::Status { status: got, .. } if got == status), "{error}");
        assert_eq!(server.requests().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn overload_inside_a_200_stream_before_any_delta_is_retried() {
    let server = TestServer::start(vec![
        Reply::sse(&data("anthropic_overloaded.sse")),
        Reply::sse(&data("anthropic_text.sse")),
    ])
    .await;
    let model = anthropic(&server.url);
    let response = model_adapter::collect_stream(model.stream(&request()).await.unwrap(), |_| {})
        .await
        .unwrap();
    assert_eq!(response, Response { retries: 1, ..expected("anthropic_text") });
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overload_after_a_delta_is_reported_not_retried() {
    let text = String::from_utf8(data("anthropic_text.sse")).unwrap();
    let events: Vec<&str> = text.split_inclusive("\n\n").collect();
    let mut body = events[..4].concat();
    body.push_str("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n");
    let server =
        TestServer::start(vec![Reply::sse(body.as_bytes()), Reply::sse(text.as_bytes())]).await;
    let items = drain(&anthropic(&server.url)).await;
    assert_eq!(content(&items), vec![Delta::Text { text: "Bonjour".into() }]);
    match items.last().unwrap() {
        Err(error @ Error::StreamError { kind, delivered: 1, .. }) => {
            assert_eq!(kind, "overloaded_error");
            assert!(!error.is_retryable());
        }
        other => panic!("expected the stream error, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_before_the_first_delta_is_retried() {
    let server = TestServer::start(vec![
        Reply {
            steps: vec![
                Step::Write(chunked_sse_head()),
                Step::Write(chunk(b": hi\n\n")),
                Step::Cut,
            ],
        },
        Reply { steps: vec![Step::Cut] },
        Reply::sse(&data("openai_text.sse")),
    ])
    .await;
    let items = drain(&openai(&server.url, fast_http())).await;
    let retries = items.iter().filter(|item| matches!(item, Ok(Delta::Retry { .. }))).count();
    assert_eq!(retries, 2);
    let response =
        model_adapter::collect_stream(Box::pin(futures_util::stream::iter(items)), |_| {})
            .await
            .unwrap();
    assert_eq!(response, Response { retries: 2, ..expected("openai_text") });
}

#[tokio::test]
async fn a_cut_after_the_first_delta_is_an_error_with_the_delivered_deltas_intact() {
    let prefix = openai_prefix(3);
    for (label, steps) in [
        (
            "chunked body cut",
            vec![Step::Write(chunked_sse_head()), Step::Write(chunk(&prefix)), Step::Cut],
        ),
        (
            "close-delimited body ends",
            vec![Step::Write(sse_head()), Step::WriteBytewise(prefix.clone()), Step::Cut],
        ),
    ] {
        let server =
            TestServer::start(vec![Reply { steps }, Reply::sse(&data("openai_text.sse"))]).await;
        let items = drain(&openai(&server.url, fast_http())).await;
        assert_eq!(
            content(&items),
            vec![Delta::Text { text: "Héllo".into() }, Delta::Text { text: ", wörld 🌍".into() }],
            "{label}"
        );
        let error = items.last().unwrap().as_ref().unwrap_err();
        assert!(
            matches!(
                error,
                Error::ConnectionLost { delivered: 2, .. } | Error::Truncated { delivered: 2, .. }
            ),
            "{label}: {error:?}"
        );
        assert!(!error.is_retryable());
        assert_eq!(server.requests().len(), 1, "{label}: never retried after deltas");
    }
}

#[tokio::test]
async fn a_stream_without_done_is_truncated_not_a_success() {
    let text = String::from_utf8(data("openai_text.sse")).unwrap();
    let without_done = text.replace("data: [DONE]\n\n", "");
    let server = TestServer::start(vec![Reply::sse(without_done.as_bytes())]).await;
    let model = openai(&server.url, fast_http());
    let error = model_adapter::collect_stream(model.stream(&request()).await.unwrap(), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Truncated { delivered: 4, .. }), "{error:?}");
}

#[tokio::test]
async fn a_malformed_data_line_is_a_permanent_error() {
    let mut body = openai_prefix(2);
    body.extend_from_slice(b"data: {\"choices\": [oops\n\ndata: [DONE]\n\n");
    let server =
        TestServer::start(vec![Reply::sse(&body), Reply::sse(&data("openai_text.sse"))]).await;
    let items = drain(&openai(&server.url, fast_http())).await;
    let error = items.last().unwrap().as_ref().unwrap_err();
    assert!(matches!(error, Error::Malformed { .. }), "{error:?}");
    assert!(error.to_string().contains("oops"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_idle_stream_times_out() {
    let mut http = fast_http();
    http.idle_timeout = Duration::from_millis(200);
    http.retry.max_retries = 0;
    let server = TestServer::start(vec![Reply {
        steps: vec![Step::Write(sse_head()), Step::Write(openai_prefix(2)), Step::Stall],
    }])
    .await;
    let items = drain(&openai(&server.url, http)).await;
    assert_eq!(content(&items), vec![Delta::Text { text: "Héllo".into() }]);
    let error = items.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(error, Error::Timeout { phase: TimeoutPhase::Idle, delivered: 1, .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_silent_server_hits_the_first_byte_timeout_and_is_retried() {
    let mut http = fast_http();
    http.first_byte_timeout = Duration::from_millis(200);
    http.retry.max_retries = 1;
    let server = TestServer::start(vec![
        Reply { steps: vec![Step::Stall] },
        Reply::json(200, &[], &openai_text_body()),
    ])
    .await;
    let response = openai(&server.url, http).chat(&request()).await.unwrap();
    assert_eq!(response.retries, 1);
}

#[tokio::test]
async fn connection_refused_is_a_retryable_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mut http = fast_http();
    http.retry.max_retries = 1;
    let error = openai(&url, http).chat(&request()).await.unwrap_err();
    assert!(matches!(error, Error::Connect { .. }), "{error:?}");
    assert!(error.is_retryable());
}
