//! The local model's provider: the embedded server is meant to stay up, so a call that finds it
//! gone (killed, crashed, out of memory) starts it again, as `run` does when it is not running,
//! and makes the call on the new server. The failed call itself is the run's to handle: agent-core
//! records it as a `model_error` observation and asks again at the next turn, which lands here.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures_util::StreamExt;
use model_adapter::{
    ChatRequest, Delta, DeltaStream, ModelProvider, NamedToolChoice, OpenAiConfig, OpenAiProvider,
    Response, SchemaFormat,
};

use crate::local_model::{LocalModel, ServerState};

/// A [`ModelProvider`] on the local server of one size that restarts the server when a call
/// fails and the server is not running any more.
#[derive(Debug)]
pub struct RestartingLocal {
    inner: Arc<Server>,
}

/// The server's model and the provider on its current process.
#[derive(Debug)]
struct Server {
    model: LocalModel,
    current: Mutex<Arc<OpenAiProvider>>,
}

impl RestartingLocal {
    /// The provider on `model`'s server, which runs as `state`.
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    pub fn new(model: LocalModel, state: &ServerState) -> anyhow::Result<RestartingLocal> {
        let current = Mutex::new(Arc::new(provider_on(state)?));
        Ok(RestartingLocal { inner: Arc::new(Server { current, model }) })
    }
}

impl Server {
    fn current(&self) -> Arc<OpenAiProvider> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// After `error`: the provider on a restarted server when the server is gone (and could be
    /// started again), `None` when it runs (the error is the call's own) or cannot start.
    async fn restarted(&self, error: &model_adapter::Error) -> Option<Arc<OpenAiProvider>> {
        let model = self.model.clone();
        let running = tokio::task::spawn_blocking(move || model.running()).await.ok()?;
        if running.is_some() {
            return None;
        }
        eprintln!(
            "model: the local {} model server stopped ({error}); starting it again",
            self.model.size().as_str()
        );
        let model = self.model.clone();
        let state = match tokio::task::spawn_blocking(move || model.start()).await {
            Ok(Ok(state)) => state,
            Ok(Err(start)) => {
                eprintln!("model: the local model did not start again: {start:#}");
                return None;
            }
            Err(_) => return None,
        };
        let provider = Arc::new(provider_on(&state).ok()?);
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = provider.clone();
        Some(provider)
    }
}

/// The OpenAI-compatible provider on a running local server.
pub(crate) fn provider_on(state: &ServerState) -> anyhow::Result<OpenAiProvider> {
    let mut config = OpenAiConfig::new(format!("{}/v1", state.url()));
    config.named_tool_choice = NamedToolChoice::JsonSchema;
    // One-line action documents: pretty-printed ones cost the 1.5B a fifth more generated tokens,
    // and their whitespace broke the reuse of its cached answer in the next request.
    config.schema_format = SchemaFormat::OneLineGrammar;
    // The text an action's schema fixes is written by the client, not generated (jump-forward
    // decoding; models/BENCHMARKS.md); `SKILLS_AGENT_JUMP_FORWARD=off` sends each document whole.
    if jump_forward(std::env::var("SKILLS_AGENT_JUMP_FORWARD").ok().as_deref()) {
        config.schema_format = SchemaFormat::JumpForward;
    }
    Ok(OpenAiProvider::new(config)?)
}

/// Whether `SKILLS_AGENT_JUMP_FORWARD` (unset: on) asks for jump-forward decoding.
fn jump_forward(setting: Option<&str>) -> bool {
    !matches!(setting.map(str::trim), Some("off" | "0" | "false" | "no"))
}

/// Where a stream on the local server stands.
enum Phase {
    /// Nothing but retry notices yet: an error now comes before any delta reached the run, so
    /// the call can still be made on a restarted server.
    Opening(DeltaStream),
    /// Past its first delta (or on the restarted server): passed on as it comes.
    Open(DeltaStream),
}

#[async_trait]
impl ModelProvider for RestartingLocal {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<Response> {
        let server = &self.inner;
        match server.current().chat(request).await {
            Err(error) => match server.restarted(&error).await {
                Some(provider) => provider.chat(request).await,
                None => Err(error),
            },
            answered => answered,
        }
    }

    /// A server that is gone shows as the stream's first item other than a retry notice, an
    /// error after the provider's retries (it connects lazily); the call is then made on a
    /// restarted server, its stream taking this one's place. Retry notices pass on as they
    /// come, so the console shows a slow or unreachable server's retries when they happen.
    async fn stream(&self, request: &ChatRequest) -> model_adapter::Result<DeltaStream> {
        let stream = match self.inner.current().stream(request).await {
            Ok(stream) => stream,
            Err(error) => {
                return match self.inner.restarted(&error).await {
                    Some(provider) => provider.stream(request).await,
                    None => Err(error),
                };
            }
        };
        let server = Arc::clone(&self.inner);
        let request = Arc::new(request.clone());
        let deltas = futures_util::stream::unfold(Some(Phase::Opening(stream)), move |phase| {
            let (server, request) = (Arc::clone(&server), Arc::clone(&request));
            async move {
                match phase? {
                    Phase::Open(mut stream) => {
                        stream.next().await.map(|item| (item, Some(Phase::Open(stream))))
                    }
                    Phase::Opening(mut stream) => match stream.next().await? {
                        Ok(retry @ Delta::Retry { .. }) => {
                            Some((Ok(retry), Some(Phase::Opening(stream))))
                        }
                        Ok(first) => Some((Ok(first), Some(Phase::Open(stream)))),
                        Err(error) => {
                            let Some(provider) = server.restarted(&error).await else {
                                return Some((Err(error), None));
                            };
                            match provider.stream(&request).await {
                                Ok(mut restarted) => restarted
                                    .next()
                                    .await
                                    .map(|item| (item, Some(Phase::Open(restarted)))),
                                Err(error) => Some((Err(error), None)),
                            }
                        }
                    },
                }
            }
        });
        Ok(Box::pin(deltas))
    }
}
