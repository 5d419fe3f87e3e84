//! Integration tests against a real model: llama.cpp serving Qwen2.5-Coder-0.5B-Instruct, started
//! by `cargo xtask local-llm start` (CI does this and sets `SKILLS_AGENT_LLM_URL`). Skipped, with
//! a printed reason, when the variable is unset. They assert structure, never wording, and keep
//! generations short (temperature 0, small `max_tokens`).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::io::Write;

use futures_util::StreamExt;
use model_adapter::{
    ActionEvent, AnthropicConfig, AnthropicProvider, ChatRequest, Delta, FinishReason, Message,
    ModelProvider, NamedToolChoice, OpenAiConfig, OpenAiProvider, Response, StructuredAction, Tool,
    ToolChoice, Watch,
};
use serde_json::{Value, json};

/// The server root, or `None` (after saying why) when the tests should not run.
fn server_url() -> Option<String> {
    match std::env::var("SKILLS_AGENT_LLM_URL") {
        Ok(url) if !url.is_empty() => Some(url.trim_end_matches('/').to_owned()),
        _ => {
            // Written to the real stderr, past the test harness's capture, so the reason shows.
            let _ = writeln!(
                std::io::stderr(),
                "skipping: SKILLS_AGENT_LLM_URL is not set (run `cargo xtask local-llm start` and \
                 export the URL it prints)"
            );
            None
        }
    }
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
