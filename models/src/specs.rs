//! Model specs (`local`, `local:0.5b`, `openai:MODEL`, `anthropic:MODEL`, `mock:FILE`,
//! `replay:RUN_DIR`) turned into a provider, the way the agent should ask it, and a name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use model_adapter::{
    AnthropicConfig, AnthropicProvider, FinishReason, MockModel, MockReply, ModelProvider,
    OpenAiConfig, OpenAiProvider, Response, ToolCall,
};
use serde::Deserialize;
use skills_agent_core::{DecideMode, EventKind, Payload, read_events};

use crate::local_model::{LocalModel, ModelSize, cache_dir};
use crate::restart::RestartingLocal;

/// A parsed `--model` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// The embedded model of this size.
    Local(ModelSize),
    /// An OpenAI-compatible API (`OPENAI_API_KEY`, `OPENAI_BASE_URL`).
    OpenAi(String),
    /// Anthropic's Messages API (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`).
    Anthropic(String),
    /// Scripted answers from a JSON file.
    Mock(PathBuf),
    /// The model answers recorded in a run directory.
    Replay(PathBuf),
}

impl ModelSpec {
    /// Parses a spec; the error says what forms exist.
    pub fn parse(text: &str) -> Result<ModelSpec> {
        let (kind, rest) = text.split_once(':').unwrap_or((text, ""));
        let need = |what: &str| -> Result<String> {
            if rest.is_empty() {
                bail!("model spec `{text}` needs {what} after `{kind}:`");
            }
            Ok(rest.to_owned())
        };
        Ok(match kind {
            "local" if rest.is_empty() => ModelSpec::Local(ModelSize::B1_5),
            "local" => ModelSpec::Local(ModelSize::parse(rest).with_context(|| {
                format!("model spec `{text}`: the local model sizes are 1.5b (default) and 0.5b")
            })?),
            "openai" => ModelSpec::OpenAi(need("a model name")?),
            "anthropic" => ModelSpec::Anthropic(need("a model name")?),
            "mock" => ModelSpec::Mock(PathBuf::from(need("a file of scripted answers")?)),
            "replay" => ModelSpec::Replay(PathBuf::from(need("a run directory")?)),
            _ => bail!(
                "unknown model spec `{text}`: use local, local:0.5b, openai:MODEL, anthropic:MODEL, \
                 mock:FILE or replay:RUN_DIR"
            ),
        })
    }

    /// The spec as text, in the form [`ModelSpec::parse`] reads (`local`, `local:0.5b`,
    /// `openai:MODEL`, `mock:FILE` with the path as given, …).
    pub fn to_spec(&self) -> String {
        match self {
            ModelSpec::Local(ModelSize::B1_5) => "local".to_owned(),
            ModelSpec::Local(size) => format!("local:{}", size.as_str()),
            ModelSpec::OpenAi(model) => format!("openai:{model}"),
            ModelSpec::Anthropic(model) => format!("anthropic:{model}"),
            ModelSpec::Mock(path) => format!("mock:{}", path.display()),
            ModelSpec::Replay(path) => format!("replay:{}", path.display()),
        }
    }

    /// The default: `local` unless a provider key is set.
    pub fn default_for(env: &[(String, String)]) -> ModelSpec {
        let has = |name: &str| env.iter().any(|(key, value)| key == name && !value.is_empty());
        if has("OPENAI_API_KEY") {
            ModelSpec::OpenAi("gpt-4.1-mini".to_owned())
        } else if has("ANTHROPIC_API_KEY") {
            ModelSpec::Anthropic("claude-sonnet-4-5".to_owned())
        } else {
            ModelSpec::Local(ModelSize::B1_5)
        }
    }

    /// How the agent should ask this model: JSON under a grammar for the small local model,
    /// native tool calls elsewhere.
    pub fn decide_mode(&self) -> DecideMode {
        match self {
            ModelSpec::Local(_) => DecideMode::Json,
            ModelSpec::OpenAi(_)
            | ModelSpec::Anthropic(_)
            | ModelSpec::Mock(_)
            | ModelSpec::Replay(_) => DecideMode::Tools,
        }
    }
}

/// A connected model.
#[derive(Debug)]
pub struct Connected {
    /// The provider.
    pub provider: Arc<dyn ModelProvider>,
    /// The model name sent in requests.
    pub name: String,
    /// Values to redact (API keys).
    pub secrets: Vec<(String, String)>,
}

fn env_value(env: &[(String, String)], name: &str) -> Option<String> {
    env.iter().find(|(key, value)| key == name && !value.is_empty()).map(|(_, value)| value.clone())
}

/// Connects `spec`, starting the local model when it is not running (and saying so on stderr).
pub fn connect(spec: &ModelSpec, env: &[(String, String)], workspace: &Path) -> Result<Connected> {
    connect_after(spec, env, workspace, 0)
}

/// [`connect`] for a run that already has `answered` model answers in its record (a resume):
/// a `mock:` model starts at the answer after them, since the record serves those calls; the
/// other models do not depend on it.
///
/// # Errors
///
/// As [`connect`].
pub fn connect_after(
    spec: &ModelSpec,
    env: &[(String, String)],
    workspace: &Path,
    answered: usize,
) -> Result<Connected> {
    match spec {
        ModelSpec::Local(size) => {
            let model = LocalModel::new(*size, cache_dir()?);
            let state = match model.running() {
                Some(state) => state,
                None => {
                    eprintln!(
                        "model: the local {} model is not running; starting it (`skills-agent model stop` ends it)",
                        size.as_str()
                    );
                    model.start()?
                }
            };
            Ok(Connected {
                provider: Arc::new(RestartingLocal::new(model, &state)?),
                name: size.model_name(),
                secrets: Vec::new(),
            })
        }
        ModelSpec::OpenAi(name) => {
            let key = env_value(env, "OPENAI_API_KEY");
            let base = env_value(env, "OPENAI_BASE_URL")
                .unwrap_or_else(|| "https://api.openai.com/v1".to_owned());
            if key.is_none() && base.contains("api.openai.com") {
                bail!(
                    "openai:{name} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a server without keys)"
                );
            }
            let mut config = OpenAiConfig::new(base);
            config.api_key = key.clone();
            let secrets =
                key.map(|key| vec![("OPENAI_API_KEY".to_owned(), key)]).unwrap_or_default();
            Ok(Connected {
                provider: Arc::new(OpenAiProvider::new(config)?),
                name: name.clone(),
                secrets,
            })
        }
        ModelSpec::Anthropic(name) => {
            let key = env_value(env, "ANTHROPIC_API_KEY");
            let base = env_value(env, "ANTHROPIC_BASE_URL")
                .unwrap_or_else(|| "https://api.anthropic.com".to_owned());
            if key.is_none() && base.contains("api.anthropic.com") {
                bail!(
                    "anthropic:{name} needs ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a server without keys)"
                );
            }
            let mut config = AnthropicConfig::new(base);
            config.api_key = key.clone();
            let secrets =
                key.map(|key| vec![("ANTHROPIC_API_KEY".to_owned(), key)]).unwrap_or_default();
            Ok(Connected {
                provider: Arc::new(AnthropicProvider::new(config)?),
                name: name.clone(),
                secrets,
            })
        }
        ModelSpec::Mock(file) => {
            let path = workspace.join(file);
            let path = if path.exists() { path } else { file.clone() };
            let replies: Vec<MockReply> = mock_replies(&path)?.into_iter().skip(answered).collect();
            Ok(Connected {
                provider: Arc::new(MockModel::new(replies)),
                name: "mock".to_owned(),
                secrets: Vec::new(),
            })
        }
        ModelSpec::Replay(run_dir) => {
            let events = read_events(&run_dir.join("events.jsonl"))
                .with_context(|| format!("replay:{}", run_dir.display()))?;
            let mut replies = Vec::new();
            for event in events.iter().filter(|event| event.kind == EventKind::ModelResponse) {
                let payload = event.payload().with_context(|| {
                    format!("replay: the response at seq {} is unreadable", event.seq)
                })?;
                let Payload::ModelResponse(answer) = payload else { continue };
                match (answer.response, answer.error) {
                    (Some(response), _) => replies.push(MockReply::response(&response)),
                    (None, error) => replies
                        .push(MockReply::error(error.as_deref().unwrap_or("model error"), false)),
                }
            }
            Ok(Connected {
                provider: Arc::new(MockModel::new(replies)),
                name: "replay".to_owned(),
                secrets: Vec::new(),
            })
        }
    }
}

/// One scripted answer of a `mock:` file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedAnswer {
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    #[serde(default)]
    arguments: serde_json::Value,
}

/// Reads a `mock:` file: a JSON array of `{"thinking"?, "text"?, "tool_calls"?: [{"name", "arguments"}]}`.
pub fn mock_replies(path: &Path) -> Result<Vec<MockReply>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the mock answers {}", path.display()))?;
    let answers: Vec<ScriptedAnswer> = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected a JSON array of {{\"thinking\"?, \"text\"?, \"tool_calls\"?: [{{\"name\", \"arguments\"}}]}}",
            path.display()
        )
    })?;
    Ok(answers
        .into_iter()
        .enumerate()
        .map(|(index, answer)| {
            let tool_calls: Vec<ToolCall> = answer
                .tool_calls
                .into_iter()
                .enumerate()
                .map(|(call, scripted)| ToolCall {
                    id: format!("call_{}_{call}", index + 1),
                    name: scripted.name,
                    arguments: if scripted.arguments.is_null() {
                        serde_json::json!({})
                    } else {
                        scripted.arguments
                    },
                })
                .collect();
            let finish_reason =
                if tool_calls.is_empty() { FinishReason::Stop } else { FinishReason::ToolCalls };
            MockReply::response(&Response {
                text: answer.text.unwrap_or_default(),
                thinking: answer.thinking.unwrap_or_default(),
                tool_calls,
                finish_reason,
                ..Response::default()
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_name_their_mistakes() {
        assert_eq!(ModelSpec::parse("local").unwrap(), ModelSpec::Local(ModelSize::B1_5));
        assert_eq!(ModelSpec::parse("local:0.5b").unwrap(), ModelSpec::Local(ModelSize::B0_5));
        assert_eq!(ModelSpec::parse("openai:gpt-x").unwrap(), ModelSpec::OpenAi("gpt-x".into()));
        assert!(
            ModelSpec::parse("openai:").unwrap_err().to_string().contains("needs a model name")
        );
        assert!(ModelSpec::parse("local:7b").unwrap_err().to_string().contains("1.5b"));
        assert!(
            ModelSpec::parse("gemini:x").unwrap_err().to_string().contains("unknown model spec")
        );
        let env = vec![("ANTHROPIC_API_KEY".to_owned(), "k".to_owned())];
        assert!(matches!(ModelSpec::default_for(&env), ModelSpec::Anthropic(_)));
        assert_eq!(ModelSpec::default_for(&[]), ModelSpec::Local(ModelSize::B1_5));
    }
}
