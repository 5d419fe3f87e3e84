//! Integration tests against a real model: llama.cpp serving Qwen2.5-Coder-0.5B-Instruct, started
//! by `cargo xtask local-llm start` (CI does this and sets `SKILLS_AGENT_LLM_URL`) or by
//! `skills-agent model start` (found through its state file). Skipped, with a printed reason,
//! when no model runs. They assert structure, never wording, and keep generations short
//! (temperature 0, small `max_tokens`).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::io::Write;
use std::time::Duration;

use futures_util::StreamExt;
use model_adapter::{
    ActionEvent, AnthropicConfig, AnthropicProvider, ChatRequest, Delta, FinishReason, Message,
    ModelProvider, NamedToolChoice, OpenAiConfig, OpenAiProvider, Response, ResponseFormat,
    SchemaFormat, StructuredAction, Tool, ToolChoice, Watch,
};
use serde_json::{Value, json};

/// The server root: `SKILLS_AGENT_LLM_URL`, else the embedded model that `skills-agent model
/// start` (the README's main job) or `cargo xtask local-llm start` left running — its state file
/// under `$SKILLS_AGENT_CACHE` or `~/.cache/skills-agent`, the 0.5B first, when `/health`
/// answers. `None`, after saying why, when there is none.
fn server_url() -> Option<String> {
    let mut err = std::io::stderr();
    if let Ok(url) = std::env::var("SKILLS_AGENT_LLM_URL")
        && !url.trim().is_empty()
    {
        return Some(url.trim().trim_end_matches('/').to_owned());
    }
    let cache =
        std::env::var_os("SKILLS_AGENT_CACHE").map(std::path::PathBuf::from).or_else(|| {
            std::env::var_os("HOME")
                .map(|home| std::path::Path::new(&home).join(".cache/skills-agent"))
        });
    for size in ["0.5b", "1.5b"] {
        let state = cache.as_ref().map(|cache| cache.join("local-model").join(size).join("state"));
        let port = state.and_then(|path| std::fs::read_to_string(path).ok()).and_then(|text| {
            text.lines().find_map(|line| line.strip_prefix("port=")?.parse().ok())
        });
        if let Some(port) = port
            && healthy(port)
        {
            // The real stderr, past the test harness's capture, so it shows which model ran.
            let _ = writeln!(err, "using the running {size} model at http://127.0.0.1:{port}");
            return Some(format!("http://127.0.0.1:{port}"));
        }
    }
    let _ = writeln!(
        err,
        "skipping: no local model (start one with `skills-agent model start` or `cargo xtask \
         local-llm start`, or export SKILLS_AGENT_LLM_URL)"
    );
    None
}

/// Whether llama.cpp's `/health` on 127.0.0.1:`port` answers 200.
fn healthy(port: u16) -> bool {
    use std::io::Read;
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = [0u8; 12];
    stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.ends_with(b" 200")
}

fn openai(url: &str, named: NamedToolChoice) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(format!("{url}/v1"));
    config.named_tool_choice = named;
    OpenAiProvider::new(config).unwrap()
}

fn anthropic(url: &str) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig::new(url)).unwrap()
}

fn short_request(prompt: &str, max_tokens: u32) -> ChatRequest {
    let mut request = ChatRequest::new("local", vec![Message::user(prompt)]);
    request.temperature = Some(0.0);
    request.max_tokens = Some(max_tokens);
    request
}

fn weather_request() -> ChatRequest {
    let mut request = short_request("What is the weather in Paris?", 60);
    request.tools = vec![Tool {
        name: "get_weather".into(),
        description: "Get the current weather for a city".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }];
    request
}

fn assert_plain_answer(response: &Response) {
    assert!(!response.text.trim().is_empty(), "no text: {response:?}");
    assert!(
        matches!(response.finish_reason, FinishReason::Stop | FinishReason::Length),
        "{response:?}"
    );
    let usage = response.usage.unwrap_or_else(|| panic!("no usage: {response:?}"));
    assert!(usage.prompt_tokens > 0 && usage.completion_tokens > 0, "{usage:?}");
    assert!(response.tool_calls.is_empty() && response.invalid_tool_calls.is_empty());
}

fn assert_weather_call(response: &Response) {
    assert_eq!(response.finish_reason, FinishReason::ToolCalls, "{response:?}");
    assert_eq!(response.tool_calls.len(), 1, "{response:?}");
    let call = &response.tool_calls[0];
    assert_eq!(call.name, "get_weather");
    assert!(!call.id.is_empty());
    assert!(call.arguments.get("city").is_some_and(Value::is_string), "{call:?}");
}

async fn streamed(model: &dyn ModelProvider, request: &ChatRequest) -> (Vec<Delta>, Response) {
    let mut deltas = Vec::new();
    let mut stream = model.stream(request).await.unwrap();
    while let Some(item) = stream.next().await {
        deltas.push(item.unwrap());
    }
    let response = model_adapter::collect_stream(
        Box::pin(futures_util::stream::iter(deltas.clone().into_iter().map(Ok))),
        |_| {},
    )
    .await
    .unwrap();
    (deltas, response)
}

#[tokio::test]
async fn openai_plain_chat_and_streaming() {
    let Some(url) = server_url() else { return };
    let model = openai(&url, NamedToolChoice::Native);
    let request = short_request("Say hello in one short sentence.", 16);
    assert_plain_answer(&model.chat(&request).await.unwrap());

    let (deltas, response) = streamed(&model, &request).await;
    assert_plain_answer(&response);
    let texts = deltas.iter().filter(|delta| matches!(delta, Delta::Text { .. })).count();
    assert!(texts > 1, "the answer should arrive in several deltas: {deltas:?}");
    assert!(matches!(deltas.last(), Some(Delta::Finish { .. })), "{deltas:?}");
}

#[tokio::test]
async fn anthropic_messages_chat_and_streaming() {
    let Some(url) = server_url() else { return };
    let model = anthropic(&url);
    let request = short_request("Say hello in one short sentence.", 16);
    assert_plain_answer(&model.chat(&request).await.unwrap());
    let (deltas, response) = streamed(&model, &request).await;
    assert_plain_answer(&response);
    assert!(matches!(deltas.last(), Some(Delta::Finish { .. })), "{deltas:?}");
}

#[tokio::test]
async fn tool_calls_on_both_apis() {
    let Some(url) = server_url() else { return };
    let request = weather_request();
    let openai_model = openai(&url, NamedToolChoice::Native);
    assert_weather_call(&openai_model.chat(&request).await.unwrap());
    let (deltas, response) = streamed(&openai_model, &request).await;
    assert_weather_call(&response);
    assert!(deltas.iter().any(|delta| matches!(delta, Delta::ToolCallStart { .. })));

    let anthropic_model = anthropic(&url);
    assert_weather_call(&anthropic_model.chat(&request).await.unwrap());
    assert_weather_call(&streamed(&anthropic_model, &request).await.1);
}

#[tokio::test]
async fn a_named_tool_choice_is_emulated_with_json_schema_on_llama_cpp() {
    let Some(url) = server_url() else { return };
    let mut request = weather_request();
    request.messages = vec![Message::user("Check the weather in Oslo.")];
    request.tool_choice = ToolChoice::Named("get_weather".into());
    let model = openai(&url, NamedToolChoice::JsonSchema);
    assert_weather_call(&model.chat(&request).await.unwrap());
    assert_weather_call(&streamed(&model, &request).await.1);
}

#[tokio::test]
async fn json_schema_structured_output_streams_path_events() {
    let Some(url) = server_url() else { return };
    let schema = json!({
        "type": "object",
        "properties": {"action": {"type": "object", "properties": {
            "type": {"type": "string", "enum": ["greet", "leave"]},
            "message": {"type": "string", "maxLength": 40}
        }, "required": ["type", "message"]}},
        "required": ["action"]
    });
    let action = StructuredAction::new("agent_action", schema)
        .unwrap()
        .watch("$.action.type", Watch::Value)
        .watch("$.action.message", Watch::Deltas);
    let request = short_request("The user said hi. Pick an action.", 60);
    for model in [
        Box::new(openai(&url, NamedToolChoice::Native)) as Box<dyn ModelProvider>,
        Box::new(anthropic(&url)),
    ] {
        let mut events = Vec::new();
        let outcome =
            action.run(model.as_ref(), &request, |event| events.push(event)).await.unwrap();
        let action_type = outcome.value.pointer("/action/type").unwrap();
        assert!(
            events.iter().any(|event| matches!(event, ActionEvent::Value { path, value } if path == "$.action.type" && value == action_type)),
            "{events:?}"
        );
        assert!(outcome.response.usage.is_some());
    }
}

#[tokio::test]
async fn a_one_line_grammar_writes_the_document_on_one_line() {
    let Some(url) = server_url() else { return };
    // Optional members, a const, an enum, a bounded array and string: what actions use.
    let schema = json!({
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": 80},
            "action": {"type": "object", "properties": {
                "type": {"const": "run_script"},
                "args": {"type": "array", "items": {"type": "string", "maxLength": 20},
                         "minItems": 1, "maxItems": 3}
            }, "required": ["type", "args"], "additionalProperties": false,
               "propertyOrdering": ["type", "args"]},
            "note": {"type": "string", "maxLength": 20}
        },
        "required": ["thought", "action"],
        "propertyOrdering": ["thought", "action"],
        "additionalProperties": false
    });
    let mut request = short_request(
        "Run the script with the arguments 12, mi and km. Answer in pretty-printed JSON.",
        120,
    );
    request.response_format =
        ResponseFormat::JsonSchema { name: "action".into(), schema, strict: true };
    let mut config = OpenAiConfig::new(format!("{url}/v1"));
    config.schema_format = SchemaFormat::OneLineGrammar;
    let model = OpenAiProvider::new(config).unwrap();
    for response in [model.chat(&request).await.unwrap(), streamed(&model, &request).await.1] {
        let value: Value = serde_json::from_str(&response.text).unwrap();
        // One space after each colon and comma, nothing else between the tokens, and the
        // members in the schema's order.
        assert_eq!(stray_whitespace(&response.text), 0, "{}", response.text);
        assert!(response.text.starts_with(r#"{"thought": ""#), "{}", response.text);
        assert!(response.text.contains(r#"", "action": {"type": "run_script", "args": ["#));
        assert_eq!(value["action"]["type"], "run_script");
        let args = value["action"]["args"].as_array().unwrap();
        assert!((1..=3).contains(&args.len()), "{value}");
        assert!(value["thought"].as_str().unwrap().chars().count() <= 80);
    }
}

#[tokio::test]
async fn jump_forward_writes_a_valid_document_in_parts_with_fewer_generated_tokens() {
    let Some(url) = server_url() else { return };
    // A choice of two actions (an anyOf told apart by its const), a one-value enum, a free
    // string and array, and an optional member at the end: what a turn's schema holds.
    let variant = |name: &str, args: Value| {
        json!({"type": "object", "properties": {"type": {"const": name}, "args": args},
               "required": ["type", "args"], "propertyOrdering": ["type", "args"],
               "additionalProperties": false})
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": 80},
            "action": {"anyOf": [
                variant("run_script", json!({"type": "object", "properties": {
                    "script": {"enum": ["scripts/convert.py"]},
                    "args": {"type": "array", "items": {"type": "string", "maxLength": 20},
                             "minItems": 1, "maxItems": 3}},
                    "required": ["script", "args"], "propertyOrdering": ["script", "args"],
                    "additionalProperties": false})),
                variant("final_answer", json!({"type": "object", "properties": {
                    "content": {"type": "string", "maxLength": 80}},
                    "required": ["content"], "additionalProperties": false})),
            ]},
            "note": {"type": "string", "maxLength": 20}
        },
        "required": ["thought", "action"],
        "propertyOrdering": ["thought", "action"],
        "additionalProperties": false
    });
    let mut request =
        short_request("Convert 12 miles to km with scripts/convert.py (VALUE FROM TO).", 120);
    request.response_format =
        ResponseFormat::JsonSchema { name: "action".into(), schema: schema.clone(), strict: true };
    let mut generated = Vec::new();
    for format in [SchemaFormat::OneLineGrammar, SchemaFormat::JumpForward] {
        let mut config = OpenAiConfig::new(format!("{url}/v1"));
        config.schema_format = format;
        let model = OpenAiProvider::new(config).unwrap();
        let (deltas, response) = streamed(&model, &request).await;
        // No part found its connection closed under it (each part opens its own).
        let retries: Vec<&Delta> =
            deltas.iter().filter(|delta| matches!(delta, Delta::Retry { .. })).collect();
        assert!(retries.is_empty(), "{format:?}: {retries:?}");
        assert_eq!(response.finish_reason, FinishReason::Stop, "{format:?}: {response:?}");
        let value: Value = serde_json::from_str(&response.text)
            .unwrap_or_else(|error| panic!("{format:?}: {error}: {}", response.text));
        assert_eq!(stray_whitespace(&response.text), 0, "{}", response.text);
        assert!(response.text.starts_with(r#"{"thought": ""#), "{}", response.text);
        let kind = value["action"]["type"].as_str().unwrap();
        assert!(["run_script", "final_answer"].contains(&kind), "{value}");
        if kind == "run_script" {
            assert_eq!(value["action"]["args"]["script"], "scripts/convert.py", "{value}");
        }
        // The stream is the document, piece by piece.
        let streamed_text: String = deltas
            .iter()
            .filter_map(|delta| match delta {
                Delta::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(streamed_text, response.text);
        generated.push(response.usage.unwrap().completion_tokens);
        if format == SchemaFormat::JumpForward {
            let again = model.chat(&request).await.unwrap();
            assert!(serde_json::from_str::<Value>(&again.text).is_ok(), "{}", again.text);
        }
    }
    // The keys, the const, the enum and the brackets are not generated.
    let _ = writeln!(std::io::stderr(), "generated tokens, whole / in parts: {generated:?}");
    assert!(generated[1] < generated[0], "{generated:?}");
}

/// Whitespace characters of `json` outside its strings other than one space after a `:` or `,`.
fn stray_whitespace(json: &str) -> usize {
    let (mut inside, mut escaped, mut count, mut last) = (false, false, 0, ' ');
    for c in json.chars() {
        match (inside, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => inside = !inside,
            (false, _, ' ') if matches!(last, ':' | ',') => {}
            (false, _, c) if c.is_whitespace() => count += 1,
            _ => {}
        }
        last = c;
    }
    count
}

#[tokio::test]
async fn a_tool_result_round_trip_is_accepted_on_both_apis() {
    let Some(url) = server_url() else { return };
    let models: [Box<dyn ModelProvider>; 2] =
        [Box::new(openai(&url, NamedToolChoice::Native)), Box::new(anthropic(&url))];
    for model in models {
        let mut request = weather_request();
        let first = model.chat(&request).await.unwrap();
        assert_weather_call(&first);
        request.messages.push(Message::from_response(&first));
        request.messages.push(Message::Tool {
            tool_call_id: first.tool_calls[0].id.clone(),
            content: "{\"temperature_c\": 21, \"sky\": \"clear\"}".into(),
            is_error: false,
        });
        // The final answer without tools (a forced summary): the template still renders the
        // earlier call and its result.
        request.tools.clear();
        let second = model.chat(&request).await.unwrap();
        assert!(second.tool_calls.is_empty(), "{second:?}");
        assert!(!second.text.trim().is_empty(), "{second:?}");
        assert!(second.usage.is_some(), "{second:?}");
    }
}
