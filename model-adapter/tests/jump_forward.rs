//! Jump-forward decoding (`SchemaFormat::JumpForward`) against a scripted llama.cpp-style
//! server: the answer is asked for in parts, each request continuing the document so far
//! under a grammar for the next part, and the caller sees one stream of the whole document.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use common::{Reply, TestServer, data, fast_http};
use futures_util::StreamExt;
use model_adapter::{
    ChatRequest, Delta, FinishReason, Message, ModelProvider, OpenAiConfig, OpenAiProvider,
    ResponseFormat, SchemaFormat,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// A turn's schema: a thought, then a `run_script` (one skill, one script) or an answer.
fn turn_schema() -> Value {
    serde_json::from_slice(&data("turn_schema.json")).unwrap()
}

/// llama.cpp's stream for one part: the text in pieces, then the finish and the usage with
/// the server's timings.
fn part(pieces: &[&str], prompt: u64, cached: u64, generated: u64) -> Reply {
    part_ending(pieces, "stop", prompt, cached, generated)
}

/// The same, ending for `reason` (`stop`: the end of text or a stop word; `length`: the
/// token limit).
fn part_ending(pieces: &[&str], reason: &str, prompt: u64, cached: u64, generated: u64) -> Reply {
    let mut body = String::new();
    for piece in pieces {
        let chunk =
            json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]});
    body.push_str(&format!("data: {finish}\n\n"));
    let usage = json!({
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": generated,
                  "prompt_tokens_details": {"cached_tokens": cached}},
        "timings": {"cache_n": cached, "prompt_n": prompt - cached, "prompt_ms": 10.0,
                    "predicted_n": generated, "predicted_ms": 100.0},
    });
    body.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
    Reply::sse(body.as_bytes())
}

/// llama.cpp's stream for a part it stopped at a stop word (left out of the text): its last
/// text chunk carries the timings too, before the usage chunk repeats them.
fn stopped_part(pieces: &[&str], prompt: u64, cached: u64, generated: u64) -> Reply {
    let timings = json!({"cache_n": cached, "prompt_n": prompt - cached, "prompt_ms": 10.0,
                         "predicted_n": generated, "predicted_ms": 100.0});
    let mut body = String::new();
    for (index, piece) in pieces.iter().enumerate() {
        let mut chunk =
            json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
        if index + 1 == pieces.len() {
            chunk["timings"] = timings.clone();
        }
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let usage = json!({
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": generated,
                  "prompt_tokens_details": {"cached_tokens": cached}},
        "timings": timings,
    });
    body.push_str(&format!("data: {finish}\n\ndata: {usage}\n\ndata: [DONE]\n\n"));
    Reply::sse(body.as_bytes())
}

fn provider(url: &str, format: SchemaFormat) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(format!("{url}/v1"));
    config.http = fast_http();
    config.schema_format = format;
    OpenAiProvider::new(config).unwrap()
}

fn request() -> ChatRequest {
    let mut request = ChatRequest::new("local", vec![Message::user("Convert 5 miles to km.")]);
    request.response_format = ResponseFormat::JsonSchema {
        name: "agent_action".to_owned(),
        schema: turn_schema(),
        strict: true,
    };
    request.max_tokens = Some(100);
    request
}

const DOCUMENT: &str = r#"{"thought": "Run the converter.", "action": {"type": "run_script", "args": {"skill": "unit-converter", "script": "scripts/convert.py", "args": ["5", "mi", "km"]}}}"#;

#[tokio::test]
async fn the_model_writes_three_parts_and_the_caller_sees_one_document() {
    let server = TestServer::start(vec![
        part(&[r#" "Run the"#, r#" converter.","#], 50, 40, 6),
        part(&[r#" "run"#, r#"_script","#], 58, 56, 4),
        part(&[r#" ["5", "mi""#, r#", "km"]}}}"#], 84, 62, 9),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let mut stream = model.stream(&request()).await.unwrap();
    let (mut text, mut usage, mut finish) = (String::new(), None, None);
    while let Some(delta) = stream.next().await {
        match delta.unwrap() {
            Delta::Text { text: more } => text.push_str(&more),
            Delta::Usage { usage: counted } => usage = Some(counted),
            Delta::Finish { reason } => finish = Some(reason),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(text, DOCUMENT);
    assert_eq!(finish, Some(FinishReason::Stop));
    // The caller's prompt, every part's generated tokens, and the server's time for all.
    let usage = usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens), (50, 40, 19));
    let timings = usage.timings.unwrap();
    assert_eq!((timings.cache_n, timings.prompt_n, timings.predicted_n), (40, 10 + 2 + 22, 19));

    let requests: Vec<Value> = server.requests().iter().map(|request| request.json()).collect();
    assert_eq!(requests.len(), 3);
    let prefills: Vec<&Value> =
        requests.iter().map(|body| body["messages"].as_array().unwrap().last().unwrap()).collect();
    assert_eq!(prefills[0], &json!({"role": "assistant", "content": r#"{"thought":"#}));
    assert_eq!(
        prefills[1],
        &json!({"role": "assistant", "content": r#"{"thought": "Run the converter.", "action": {"type":"#})
    );
    assert_eq!(
        prefills[2]["content"],
        r#"{"thought": "Run the converter.", "action": {"type": "run_script", "args": {"skill": "unit-converter", "script": "scripts/convert.py", "args":"#
    );
    for request in server.requests() {
        // A connection of its own: the server closes one after a stream.
        assert_eq!(request.header("connection"), Some("close"));
    }
    for body in &requests {
        // Each part has its own grammar; the schema is not sent beside it.
        assert!(body["grammar"].as_str().unwrap().starts_with("root ::= "), "{body}");
        assert_eq!(body.get("response_format"), None);
        assert_eq!(body["stream"], true);
    }
    assert!(requests[1]["grammar"].as_str().unwrap().contains(r#"" \"run_script\",""#));
    // The token limit is what is left of the caller's.
    let limits: Vec<&Value> = requests.iter().map(|body| &body["max_tokens"]).collect();
    assert_eq!(limits, [&json!(100), &json!(94), &json!(90)]);
}

#[tokio::test]
async fn chat_assembles_the_same_document() {
    let server = TestServer::start(vec![
        part(&[r#" "Run the converter.","#], 50, 40, 6),
        part(&[r#" "run_script","#], 58, 56, 4),
        part(&[r#" ["5", "mi", "km"]}}}"#], 84, 62, 9),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    assert_eq!(response.text, DOCUMENT);
    assert_eq!(response.finish_reason, FinishReason::Stop);
}

#[tokio::test]
async fn a_part_cut_by_the_token_limit_ends_the_answer_there() {
    let cut = part_ending(&[r#" "Run the conv"#], "length", 50, 40, 6);
    let server = TestServer::start(vec![cut]).await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    assert_eq!(response.text, r#"{"thought": "Run the conv"#);
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_part_that_loops_is_cut_at_once_as_the_limit_would_cut_it() {
    // Greedy decoding does not leave a loop: the local 1.5B wrote `22944e` until the token
    // limit (768 tokens). The part is cut once its text repeats one unit for 80 bytes, and
    // the rest of the stream is not read.
    let mut pieces = vec![r#" [""#];
    pieces.extend(std::iter::repeat_n("22944e", 40));
    pieces.push(r#""]}}}"#);
    let server = TestServer::start(vec![
        part(&[r#" "Run the converter.","#], 50, 40, 6),
        part(&[r#" "run_script","#], 58, 56, 4),
        part_ending(&pieces, "length", 84, 62, 42),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    let expected = format!(
        r#"{{"thought": "Run the converter.", "action": {{"type": "run_script", "args": {{"skill": "unit-converter", "script": "scripts/convert.py", "args": ["{}"#,
        "22944e".repeat(14)
    );
    assert_eq!(response.text, expected);
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert_eq!(server.requests().len(), 3);
    // The dropped part reported nothing: its 15 pieces count as its tokens.
    let usage = response.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (50, 6 + 4 + 15));
}

#[tokio::test]
async fn a_string_that_loops_is_closed_where_the_loop_was_seen() {
    // The local 1.5B asked "Which unit? (m, km, ft, mi, nmi, m, cm, mm, …" until the token
    // limit: an answer cut there is no JSON. A string that loops is ended where the loop was
    // seen, under a grammar for its closing alone, and the document stays whole.
    let mut pieces = vec![r#" "Which unit? ("#];
    pieces.extend(std::iter::repeat_n("m, cm, in, ", 30));
    let server = TestServer::start(vec![
        part(&[r#" "Ask which unit.","#], 50, 40, 6),
        part(&[r#" "final_answer","#], 58, 56, 2),
        part_ending(&pieces, "length", 70, 66, 31),
        stopped_part(&[], 160, 150, 1),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    let document: Value = serde_json::from_str(&response.text).unwrap();
    let content = document["action"]["args"]["content"].as_str().unwrap();
    // The loop seen once its last 80 bytes repeat `m, cm, in, ` (11 bytes): 8 pieces.
    assert_eq!(content, format!("Which unit? ({}", "m, cm, in, ".repeat(8)));
    assert_eq!(response.finish_reason, FinishReason::Stop);
    let requests: Vec<Value> = server.requests().iter().map(|request| request.json()).collect();
    assert_eq!(requests.len(), 4);
    assert!(requests[3]["grammar"].as_str().unwrap().starts_with(r#"root ::= "\"" "}}}""#));
    // The dropped request's 9 pieces count as its tokens.
    assert_eq!(response.usage.unwrap().completion_tokens, 6 + 2 + 9 + 1);
}

#[tokio::test]
async fn a_thought_that_loops_is_closed_and_its_tokens_counted() {
    // The first part loops: no request has reported usage yet, and its pieces still count.
    let mut pieces = vec![r#" "Run "#];
    pieces.extend(std::iter::repeat_n("it, ", 30));
    let server = TestServer::start(vec![
        part_ending(&pieces, "length", 50, 40, 31),
        stopped_part(&[], 90, 85, 1),
        part(&[r#" "final_answer","#], 98, 96, 2),
        part(&[r#" "42 km"}}}"#], 110, 106, 3),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    let document: Value = serde_json::from_str(&response.text).unwrap();
    assert_eq!(document["thought"], format!("Run {}", "it, ".repeat(20)));
    assert_eq!(document["action"], json!({"type": "final_answer", "args": {"content": "42 km"}}));
    // 21 pieces dropped, then the closing (1), the choice (2) and the answer (3).
    assert_eq!(response.usage.unwrap().completion_tokens, 21 + 1 + 2 + 3);
}

#[tokio::test]
async fn a_schema_the_walk_does_not_cover_goes_whole_as_one_grammar() {
    let server = TestServer::start(vec![part(&[r#"{"a": "x"}"#], 50, 40, 6)]).await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let mut request = request();
    request.response_format = ResponseFormat::JsonSchema {
        name: "either".to_owned(),
        schema: json!({"anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false},
            {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": false},
        ]}),
        strict: true,
    };
    let mut stream = model.stream(&request).await.unwrap();
    let mut text = String::new();
    while let Some(delta) = stream.next().await {
        if let Delta::Text { text: more } = delta.unwrap() {
            text.push_str(&more);
        }
    }
    assert_eq!(text, r#"{"a": "x"}"#);
    let body = server.requests()[0].json();
    assert!(body["grammar"].as_str().unwrap().starts_with("root ::= "));
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_server_that_is_gone_shows_as_an_error_before_any_content() {
    // Every connection is cut at once: the fixed start of the document is not sent either, so
    // a caller may still make the call again (the local model's restart does).
    let server = TestServer::start(Vec::new()).await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let mut stream = model.stream(&request()).await.unwrap();
    let first = loop {
        match stream.next().await {
            Some(Ok(delta)) if !delta.is_content() => continue,
            other => break other,
        }
    };
    assert!(matches!(first, Some(Err(_))), "{first:?}");
}

#[tokio::test]
async fn a_server_that_leaves_out_the_stop_word_gives_the_same_document() {
    // llama.cpp stops at a part's stop word (its end and the punctuation after it) without
    // sampling the end-of-text token, and leaves the word out of the text.
    let server = TestServer::start(vec![
        stopped_part(&[r#" "Run the"#, r#" converter."#], 50, 40, 5),
        stopped_part(&[r#" "run"#, r#"_script"#], 58, 56, 3),
        stopped_part(&[r#" ["5", "mi""#, r#", "km""#], 84, 62, 8),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    assert_eq!(response.text, DOCUMENT);
    assert_eq!(response.finish_reason, FinishReason::Stop);
    // Each part counted once, though its timings came twice.
    let usage = response.usage.unwrap();
    assert_eq!(usage.completion_tokens, 16);
    assert_eq!(usage.timings.unwrap().predicted_n, 16);
    let stops: Vec<Value> =
        server.requests().iter().map(|request| request.json()["stop"].clone()).collect();
    assert_eq!(stops, [json!([r#"","#]), json!([r#"","#]), json!(["]}}}"])]);
}

#[tokio::test]
async fn a_stop_word_inside_a_thought_goes_on_with_the_rest_of_the_string() {
    // The model writes `"Say \"hi\", then go.",`: the server stops at the first `",`, inside
    // the string; the part goes on from there under a grammar for the rest of the string.
    let server = TestServer::start(vec![
        part(&[r#" "Say \"hi\"#], 50, 40, 5),
        part(&[" then go."], 60, 56, 3),
        part(&[r#" "final_answer"#], 70, 66, 2),
        part(&[r#" "42 km"#], 80, 76, 3),
    ])
    .await;
    let model = provider(&server.url, SchemaFormat::JumpForward);
    let response = model.chat(&request()).await.unwrap();
    let document: Value = serde_json::from_str(&response.text).unwrap();
    assert_eq!(document["thought"], r#"Say "hi", then go."#);
    assert_eq!(document["action"], json!({"type": "final_answer", "args": {"content": "42 km"}}));
    assert_eq!(response.finish_reason, FinishReason::Stop);

    let requests: Vec<Value> = server.requests().iter().map(|request| request.json()).collect();
    assert_eq!(requests.len(), 4);
    let second = &requests[1];
    let prefill = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(prefill["content"], r#"{"thought": "Say \"hi\","#);
    // 300 characters at most, 9 written (`Say "hi",`): the rest is 291 at most.
    let grammar = second["grammar"].as_str().unwrap();
    assert!(grammar.starts_with(r#"root ::= char{0,291} "\"" ",""#), "{grammar}");
    assert_eq!(second["stop"], json!([r#"","#]));
    assert_eq!(requests[3]["stop"], json!([r#""}}}"#]));
}
