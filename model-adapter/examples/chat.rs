//! `chat`: one model call from the command line; the stable interface other tools rely on.
//!
//! ```text
//! cargo run -q -p model-adapter --example chat -- --provider openai|anthropic --base-url URL \
//!     --model NAME [--api-key-env VAR] [--stream] [--tools FILE] \
//!     [--tool-choice auto|none|required|NAME] [--schema FILE] \
//!     [--named-tool-choice native|json-schema] [--max-tokens N] [--temperature T] \
//!     [--thinking-budget N] [--reasoning-effort low|medium|high] [--beta NAME]... PROMPT
//! ```
//!
//! With `--stream`, each normalised delta is printed as a JSON line as it arrives. The final
//! Response is always printed as one JSON line
//! `{"text","thinking","tool_calls":[{"id","name","arguments"}],"finish_reason","usage","retries"}`
//! (`thinking_signature`, `thinking_blocks` and `invalid_tool_calls` only when not empty).
//! `--thinking-budget` is Anthropic's extended thinking, `--reasoning-effort` an OpenAI reasoning
//! model's; each provider ignores the other's. `--beta` adds an `anthropic-beta` value.
//! Exit 1 with the typed error message on a failed call, 2 on a usage error.
//! `--base-url` is the API root: `…/v1` for OpenAI-compatible servers, the server root for
//! Anthropic (`/v1/messages` is appended).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use model_adapter::{
    AnthropicConfig, AnthropicProvider, ChatRequest, Delta, Message, ModelProvider,
    NamedToolChoice, OpenAiConfig, OpenAiProvider, ReasoningEffort, ResponseFormat, ThinkingConfig,
    Tool, ToolChoice, collect_stream,
};
use serde_json::Value;

const USAGE: &str = "usage: chat --provider openai|anthropic --base-url URL --model NAME \
[--api-key-env VAR] [--stream] [--tools FILE] [--tool-choice auto|none|required|NAME] \
[--schema FILE] [--named-tool-choice native|json-schema] [--max-tokens N] [--temperature T] \
[--thinking-budget N] [--reasoning-effort low|medium|high] [--beta NAME]... PROMPT";

#[derive(Debug, Default)]
struct Options {
    provider: String,
    base_url: String,
    model: String,
    api_key_env: Option<String>,
    stream: bool,
    tools: Option<String>,
    tool_choice: Option<String>,
    schema: Option<String>,
    named_tool_choice: NamedToolChoice,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    thinking_budget: Option<u32>,
    reasoning_effort: Option<ReasoningEffort>,
    betas: Vec<String>,
    prompt: String,
}

fn parse_options(arguments: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut prompt = None;
    let mut index = 0;
    while index < arguments.len() {
        let argument = arguments[index].as_str();
        let mut value = || {
            index += 1;
            arguments.get(index).cloned().ok_or_else(|| format!("{argument} needs a value"))
        };
        match argument {
            "--provider" => options.provider = value()?,
            "--base-url" => options.base_url = value()?,
            "--model" => options.model = value()?,
            "--api-key-env" => options.api_key_env = Some(value()?),
            "--stream" => options.stream = true,
            "--tools" => options.tools = Some(value()?),
            "--tool-choice" => options.tool_choice = Some(value()?),
            "--schema" => options.schema = Some(value()?),
            "--named-tool-choice" => {
                options.named_tool_choice = match value()?.as_str() {
                    "native" => NamedToolChoice::Native,
                    "json-schema" => NamedToolChoice::JsonSchema,
                    other => return Err(format!("unknown --named-tool-choice {other}")),
                }
            }
            "--max-tokens" => {
                options.max_tokens =
                    Some(value()?.parse().map_err(|_| "--max-tokens needs a number".to_owned())?)
            }
            "--temperature" => {
                options.temperature =
                    Some(value()?.parse().map_err(|_| "--temperature needs a number".to_owned())?)
            }
            "--thinking-budget" => {
                options.thinking_budget = Some(
                    value()?.parse().map_err(|_| "--thinking-budget needs a number".to_owned())?,
                )
            }
            "--reasoning-effort" => {
                options.reasoning_effort = Some(match value()?.as_str() {
                    "low" => ReasoningEffort::Low,
                    "medium" => ReasoningEffort::Medium,
                    "high" => ReasoningEffort::High,
                    other => return Err(format!("unknown --reasoning-effort {other}")),
                })
            }
            "--beta" => options.betas.push(value()?),
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            text => {
                if prompt.replace(text.to_owned()).is_some() {
                    return Err("give exactly one PROMPT".to_owned());
                }
            }
        }
        index += 1;
    }
    options.prompt = prompt.ok_or("missing PROMPT")?;
    for (flag, given) in [
        ("--provider", &options.provider),
        ("--base-url", &options.base_url),
        ("--model", &options.model),
    ] {
        if given.is_empty() {
            return Err(format!("missing {flag}"));
        }
    }
    Ok(options)
}

fn read_json(path: &str) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("cannot read {path}: {error}"))?;
    serde_json::from_str(&text).map_err(|error| format!("{path} is not JSON: {error}"))
}

/// Tools as `[{name, description, parameters}]` or OpenAI's `[{type, function: {...}}]`.
fn read_tools(path: &str) -> Result<Vec<Tool>, String> {
    let Value::Array(items) = read_json(path)? else {
        return Err(format!("{path}: expected a JSON array of tools"));
    };
    items
        .into_iter()
        .map(|item| {
            let item = item.get("function").cloned().unwrap_or(item);
            serde_json::from_value(item).map_err(|error| format!("{path}: bad tool: {error}"))
        })
        .collect()
}

fn build_request(options: &Options) -> Result<ChatRequest, String> {
    let mut request =
        ChatRequest::new(options.model.clone(), vec![Message::user(options.prompt.clone())]);
    if let Some(path) = &options.tools {
        request.tools = read_tools(path)?;
    }
    request.tool_choice = match options.tool_choice.as_deref() {
        None | Some("auto") => ToolChoice::Auto,
        Some("none") => ToolChoice::None,
        Some("required") => ToolChoice::Required,
        Some(name) => ToolChoice::Named(name.to_owned()),
    };
    if let Some(path) = &options.schema {
        let name: String = Path::new(path)
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|character| {
                if character.is_ascii_alphanumeric() || character == '-' { character } else { '_' }
            })
            .collect();
        request.response_format =
            ResponseFormat::JsonSchema { name, schema: read_json(path)?, strict: true };
    }
    request.max_tokens = options.max_tokens;
    request.temperature = options.temperature;
    request.thinking =
        options.thinking_budget.map(|budget_tokens| ThinkingConfig { budget_tokens });
    request.reasoning_effort = options.reasoning_effort;
    Ok(request)
}

fn build_provider(options: &Options) -> Result<Arc<dyn ModelProvider>, String> {
    let api_key = match &options.api_key_env {
        Some(variable) => Some(
            std::env::var(variable)
                .map_err(|_| format!("the environment variable {variable} is not set"))?,
        ),
        None => None,
    };
    match options.provider.as_str() {
        "openai" => {
            let mut config = OpenAiConfig::new(options.base_url.clone());
            config.api_key = api_key;
            config.named_tool_choice = options.named_tool_choice;
            Ok(Arc::new(OpenAiProvider::new(config).map_err(|error| error.to_string())?))
        }
        "anthropic" => {
            let mut config = AnthropicConfig::new(options.base_url.clone());
            config.api_key = api_key;
            config.betas.clone_from(&options.betas);
            Ok(Arc::new(AnthropicProvider::new(config).map_err(|error| error.to_string())?))
        }
        other => Err(format!("unknown --provider {other} (openai or anthropic)")),
    }
}

fn print_json(value: &impl serde::Serialize) {
    match serde_json::to_string(value) {
        Ok(line) => println!("{line}"),
        Err(error) => eprintln!("error: cannot print JSON: {error}"),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let (request, provider) = match parse_options(&arguments).and_then(|options| {
        Ok((build_request(&options)?, build_provider(&options)?, options.stream))
    }) {
        Ok((request, provider, stream)) => ((request, stream), provider),
        Err(message) => {
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (request, stream) = request;
    let result = if stream {
        match provider.stream(&request).await {
            Ok(deltas) => collect_stream(deltas, |delta: &Delta| print_json(delta)).await,
            Err(error) => Err(error),
        }
    } else {
        provider.chat(&request).await
    };
    match result {
        Ok(response) => {
            print_json(&response);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
