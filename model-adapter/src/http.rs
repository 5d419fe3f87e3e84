//! The HTTP transport shared by the providers: one POST with timeouts, error classification from
//! status and headers, the retry loop, and the streaming loop that feeds SSE events to a wire
//! decoder (or a whole JSON body, when the server answers a stream request with one) and
//! forwards deltas through a channel.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::Stream;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::assemble::assemble_all;
use crate::error::{Error, Result, TimeoutPhase};
use crate::retry::{RetryPolicy, parse_retry_after, parse_should_retry, random_jitter};
use crate::sse::{SseDecoder, SseEvent};
use crate::types::{Delta, Response};

/// A stream of normalised deltas; ends after [`Delta::Finish`] or with one `Err`.
pub type DeltaStream = Pin<Box<dyn Stream<Item = Result<Delta>> + Send>>;

/// Timeouts and retries for one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpConfig {
    /// TCP/TLS connect limit (default 10 s).
    pub connect_timeout: Duration,
    /// Limit for the response headers and the first body chunk (default 120 s: a local model
    /// may read a long prompt first).
    pub first_byte_timeout: Duration,
    /// Limit between two body chunks (default 60 s).
    pub idle_timeout: Duration,
    /// When to re-send.
    pub retry: RetryPolicy,
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
        }
    }
}

/// Turns one provider's answer into deltas: streamed, event by event, or as one JSON body.
pub(crate) trait WireDecoder: Send {
    /// Handles one event, appending deltas; `Ok(true)` when it was the terminal event.
    fn on_event(&mut self, event: &SseEvent, deltas: &mut Vec<Delta>) -> WireResult<bool>;

    /// Handles a whole non-streamed body, appending every delta up to the finish.
    fn on_body(&mut self, body: &[u8], deltas: &mut Vec<Delta>) -> WireResult<()>;
}

/// A wire-level failure, turned into an [`Error`] with the endpoint by the transport.
#[derive(Debug)]
pub(crate) enum WireError {
    /// The provider broke its own format.
    Malformed(String),
    /// The provider reported an error (`kind`, `message`).
    Provider(String, String),
}

pub(crate) type WireResult<T> = std::result::Result<T, WireError>;

impl WireError {
    pub(crate) fn into_error(self, url: &str, what: &str) -> Error {
        match self {
            WireError::Malformed(message) => {
                Error::Malformed { url: url.to_owned(), what: what.to_owned(), message }
            }
            WireError::Provider(kind, message) => {
                Error::StreamError { url: url.to_owned(), kind, message, delivered: 0 }
            }
        }
    }
}

/// One HTTP request, ready to be sent (and re-sent).
#[derive(Debug, Clone)]
pub(crate) struct PreparedRequest {
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl PreparedRequest {
    /// A JSON POST to `url` with these headers (besides `content-type`).
    pub(crate) fn json(
        provider: &str,
        url: String,
        mut headers: Vec<(String, String)>,
        body: &Value,
    ) -> Result<PreparedRequest> {
        if let Some(error) = tls_missing(provider, &url, TLS) {
            return Err(error);
        }
        headers.insert(0, ("content-type".to_owned(), "application/json".to_owned()));
        let body = crate::ordered::to_vec(body).map_err(|error| Error::InvalidRequest {
            provider: provider.to_owned(),
            message: error.to_string(),
        })?;
        Ok(PreparedRequest { url, headers, body })
    }
}

#[derive(Debug)]
pub(crate) struct Transport {
    client: reqwest::Client,
    config: HttpConfig,
}

/// Whether this build speaks TLS (one of the `tls-*` features).
const TLS: bool = cfg!(any(feature = "tls-aws-lc", feature = "tls-ring"));

/// The error for an https `url` in a build without TLS (`tls` false): not retried, and it
/// says which features bring TLS.
fn tls_missing(provider: &str, url: &str, tls: bool) -> Option<Error> {
    let https = url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
    (https && !tls).then(|| Error::InvalidRequest {
        provider: provider.to_owned(),
        message: format!(
            "{url} needs TLS, and this build of model-adapter has none: build it with the \
             `tls-aws-lc` (default) or `tls-ring` feature, or use an http:// URL"
        ),
    })
}

/// With `tls-ring` alone, reqwest has no crypto provider of its own: ring becomes the process's
/// default unless the program installed one already (reqwest panics building a client with
/// none). skills-agent-mcp has the same function on purpose: the `cfg` reads this crate's own features,
/// and neither crate depends on the other (each can be picked alone).
fn install_crypto_provider() {
    #[cfg(all(feature = "tls-ring", not(feature = "tls-aws-lc")))]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one between the check and here: either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

impl Transport {
    pub(crate) fn new(config: HttpConfig) -> Result<Transport> {
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| Error::Connect {
                url: String::new(),
                message: format!("cannot build the http client: {error}"),
            })?;
        Ok(Transport { client, config })
    }

    /// Sends once; a non-success status becomes [`Error::Status`].
    async fn send_once(&self, request: &PreparedRequest) -> Result<reqwest::Response> {
        let mut builder = self.client.post(&request.url).body(request.body.clone());
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        let response =
            match tokio::time::timeout(self.config.first_byte_timeout, builder.send()).await {
                Err(_) => {
                    return Err(Error::Timeout {
                        url: request.url.clone(),
                        phase: TimeoutPhase::FirstByte,
                        after: self.config.first_byte_timeout,
                        delivered: 0,
                    });
                }
                Ok(Err(error)) => {
                    return Err(Error::Connect {
                        url: request.url.clone(),
                        message: error_chain(&error),
                    });
                }
                Ok(Ok(response)) => response,
            };
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let header = |name: &str| {
            response.headers().get(name).and_then(|value| value.to_str().ok()).map(str::to_owned)
        };
        let retry_after = parse_retry_after(
            header("retry-after-ms").as_deref(),
            header("retry-after").as_deref(),
            SystemTime::now(),
        );
        let should_retry = parse_should_retry(header("x-should-retry").as_deref());
        let body = self.read_body(&request.url, response).await.unwrap_or_default();
        let (message, code) = provider_error_message(&body);
        Err(Error::Status {
            url: request.url.clone(),
            status,
            message,
            code,
            retry_after,
            should_retry,
        })
    }

    /// Reads a whole body with the first-byte and idle limits.
    async fn read_body(&self, url: &str, mut response: reqwest::Response) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        let mut phase = TimeoutPhase::FirstByte;
        loop {
            let limit = self.limit(phase);
            match tokio::time::timeout(limit, response.chunk()).await {
                Err(_) => {
                    return Err(Error::Timeout {
                        url: url.to_owned(),
                        phase,
                        after: limit,
                        delivered: 0,
                    });
                }
                Ok(Err(error)) => {
                    return Err(Error::ConnectionLost {
                        url: url.to_owned(),
                        message: error_chain(&error),
                        delivered: 0,
                    });
                }
                Ok(Ok(None)) => return Ok(body),
                Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            }
            phase = TimeoutPhase::Idle;
        }
    }

    fn limit(&self, phase: TimeoutPhase) -> Duration {
        match phase {
            TimeoutPhase::FirstByte => self.config.first_byte_timeout,
            TimeoutPhase::Idle => self.config.idle_timeout,
        }
    }

    fn retry_delay(&self, retry: u32, error: &Error) -> Duration {
        self.config.retry.delay(retry, error.retry_after(), random_jitter())
    }

    /// A non-streaming call with retries; a decoder from `make_decoder` turns the body into
    /// deltas.
    pub(crate) async fn chat(
        &self,
        request: &PreparedRequest,
        make_decoder: impl Fn() -> Box<dyn WireDecoder>,
    ) -> Result<Response> {
        let mut retries = 0;
        loop {
            let attempt = async {
                let response = self.send_once(request).await?;
                let body = self.read_body(&request.url, response).await?;
                let mut deltas = Vec::new();
                make_decoder()
                    .on_body(&body, &mut deltas)
                    .map_err(|error| error.into_error(&request.url, "response body"))?;
                assemble_all(&deltas).ok_or_else(|| Error::Malformed {
                    url: request.url.clone(),
                    what: "response body".to_owned(),
                    message: "the response has no finish reason".to_owned(),
                })
            };
            match attempt.await {
                Ok(mut response) => {
                    response.retries = retries;
                    return Ok(response);
                }
                Err(error) if error.is_retryable() && retries < self.config.retry.max_retries => {
                    retries += 1;
                    tokio::time::sleep(self.retry_delay(retries, &error)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// A streaming call with retries before the first content delta, run on a spawned task.
    pub(crate) fn stream(
        self: &Arc<Self>,
        request: PreparedRequest,
        make_decoder: impl Fn() -> Box<dyn WireDecoder> + Send + 'static,
    ) -> DeltaStream {
        let (sender, receiver) = mpsc::channel::<Result<Delta>>(64);
        let transport = Arc::clone(self);
        tokio::spawn(async move {
            let mut retries = 0;
            loop {
                let mut delivered = 0;
                let outcome = tokio::select! {
                    outcome = transport.stream_attempt(&request, make_decoder(), &sender, &mut delivered) => outcome,
                    () = sender.closed() => return,
                };
                let error = match outcome {
                    Ok(()) => return,
                    Err(error) => error.with_delivered(delivered),
                };
                if delivered == 0
                    && error.is_retryable()
                    && retries < transport.config.retry.max_retries
                {
                    retries += 1;
                    let delay = transport.retry_delay(retries, &error);
                    let notice = Delta::Retry {
                        attempt: retries,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        error: error.to_string(),
                    };
                    if sender.send(Ok(notice)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    continue;
                }
                let _ = sender.send(Err(error)).await;
                return;
            }
        });
        Box::pin(futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        }))
    }

    async fn stream_attempt(
        &self,
        request: &PreparedRequest,
        mut decoder: Box<dyn WireDecoder>,
        sender: &mpsc::Sender<Result<Delta>>,
        delivered: &mut u64,
    ) -> Result<()> {
        let mut response = self.send_once(request).await?;
        let mut deltas = Vec::new();
        let json_content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim_start().starts_with("application/json"));
        let mut sse = SseDecoder::new();
        let mut events = Vec::new();
        let mut phase = TimeoutPhase::FirstByte;
        loop {
            let limit = self.limit(phase);
            let outcome = tokio::time::timeout(limit, response.chunk()).await;
            let end_of_stream = match outcome {
                Err(_) => {
                    return Err(Error::Timeout {
                        url: request.url.clone(),
                        phase,
                        after: limit,
                        delivered: 0,
                    });
                }
                Ok(Err(error)) => {
                    return Err(Error::ConnectionLost {
                        url: request.url.clone(),
                        message: error_chain(&error),
                        delivered: 0,
                    });
                }
                Ok(Ok(None)) => {
                    sse.finish(&mut events);
                    true
                }
                Ok(Ok(Some(chunk))) => {
                    if json_content_type
                        && phase == TimeoutPhase::FirstByte
                        && chunk.trim_ascii_start().starts_with(b"{")
                    {
                        // One JSON body, not an event stream (a server or proxy that ignores
                        // `stream: true`): it is the whole answer.
                        let mut body = chunk.to_vec();
                        body.extend_from_slice(&self.read_body(&request.url, response).await?);
                        decoder
                            .on_body(&body, &mut deltas)
                            .map_err(|error| error.into_error(&request.url, "response body"))?;
                        forward(&mut deltas, sender, delivered).await;
                        return Ok(());
                    }
                    sse.feed(&chunk, &mut events);
                    false
                }
            };
            phase = TimeoutPhase::Idle;
            for event in events.drain(..) {
                let terminal = decoder
                    .on_event(&event, &mut deltas)
                    .map_err(|error| error.into_error(&request.url, "stream event"))?;
                if !forward(&mut deltas, sender, delivered).await || terminal {
                    return Ok(());
                }
            }
            if end_of_stream {
                return Err(Error::Truncated { url: request.url.clone(), delivered: 0 });
            }
        }
    }
}

/// Sends `deltas` to the caller, counting content deltas in `delivered`; `false` when the caller
/// has gone away.
async fn forward(
    deltas: &mut Vec<Delta>,
    sender: &mpsc::Sender<Result<Delta>>,
    delivered: &mut u64,
) -> bool {
    for delta in deltas.drain(..) {
        if delta.is_content() {
            *delivered += 1;
        }
        if sender.send(Ok(delta)).await.is_err() {
            return false;
        }
    }
    true
}

/// The error and its sources in one line (reqwest's top-level message alone hides the cause).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The message and code of an OpenAI (`{"error":{"message","type","code"}}`) or Anthropic
/// (`{"type":"error","error":{"type","message"}}`) error body; the body's start otherwise.
pub(crate) fn provider_error_message(body: &[u8]) -> (String, Option<String>) {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|value| value.get("error"));
    match error {
        Some(Value::Object(fields)) => {
            let message =
                fields.get("message").and_then(Value::as_str).unwrap_or("no message").to_owned();
            let code = fields
                .get("code")
                .and_then(Value::as_str)
                .or_else(|| fields.get("type").and_then(Value::as_str))
                .map(str::to_owned);
            (message, code)
        }
        Some(Value::String(message)) => (message.clone(), None),
        _ => (body_excerpt(body), None),
    }
}

/// The first 200 characters of a body, for error messages.
pub(crate) fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut excerpt: String = text.chars().take(200).collect();
    if text.chars().nth(200).is_some() {
        excerpt.push('…');
    }
    if excerpt.is_empty() { "empty body".to_owned() } else { excerpt }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_https_url_without_tls_is_a_request_error_that_names_the_features() {
        let error = tls_missing("openai", "https://api.openai.com/v1/chat/completions", false);
        let Some(error @ Error::InvalidRequest { .. }) = error else {
            panic!("expected an invalid request, got {error:?}")
        };
        assert!(!error.is_retryable());
        let message = error.to_string();
        assert!(message.contains("`tls-aws-lc`") && message.contains("`tls-ring`"), "{message}");
        assert!(tls_missing("openai", "https://api.openai.com/v1", true).is_none());
        assert!(tls_missing("local", "http://127.0.0.1:8080/v1", false).is_none());
    }
}
