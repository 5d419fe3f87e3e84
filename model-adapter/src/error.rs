//! The crate's one error type, and the retryable/permanent classification the retry loop uses.

use std::time::Duration;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutPhase {
    /// Waiting for the response headers or the first body byte.
    FirstByte,
    /// Waiting for the next body chunk after an earlier one.
    Idle,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeoutPhase::FirstByte => f.write_str("the first byte"),
            TimeoutPhase::Idle => f.write_str("the next chunk"),
        }
    }
}

/// Everything that can go wrong talking to a model.
///
/// Errors that happen while a stream is being read carry `delivered`, the number of content
/// deltas the caller had already received: such an error is only retried when `delivered` is 0,
/// because the caller cannot un-see text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request could not be sent (connection refused, DNS, TLS, reset before a response).
    #[error("cannot reach {url}: {message}")]
    Connect {
        /// The endpoint.
        url: String,
        /// What the HTTP client said.
        message: String,
    },
    /// The server answered with a non-success HTTP status.
    #[error("http status {status} from {url}: {message}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The provider's error message (or the body's start when it is not JSON).
        message: String,
        /// The provider's error type or code (`rate_limit_exceeded`, `insufficient_quota`,
        /// `overloaded_error`, ...), when it sent one.
        code: Option<String>,
        /// How long the server asked us to wait (`retry-after-ms` / `retry-after`).
        retry_after: Option<Duration>,
        /// The server's `x-should-retry` header, which overrides the status classification.
        should_retry: Option<bool>,
    },
    /// The provider reported an error inside a successful (HTTP 200) stream.
    #[error("provider error in the stream from {url} after {delivered} deltas: {kind}: {message}")]
    StreamError {
        /// The endpoint.
        url: String,
        /// The provider's error type (`overloaded_error`, `server_error`, ...).
        kind: String,
        /// The provider's message.
        message: String,
        /// Content deltas already delivered to the caller.
        delivered: u64,
    },
    /// The stream ended (EOF) without its terminal event (`[DONE]`, `message_stop`).
    #[error("the stream from {url} ended without its terminal event after {delivered} deltas")]
    Truncated {
        /// The endpoint.
        url: String,
        /// Content deltas already delivered to the caller.
        delivered: u64,
    },
    /// The connection broke while the body was being read.
    #[error("the connection to {url} broke after {delivered} deltas: {message}")]
    ConnectionLost {
        /// The endpoint.
        url: String,
        /// What the HTTP client said.
        message: String,
        /// Content deltas already delivered to the caller.
        delivered: u64,
    },
    /// A configured timeout ran out.
    #[error(
        "timed out after {after:?} waiting for {phase} from {url} ({delivered} deltas delivered)"
    )]
    Timeout {
        /// The endpoint.
        url: String,
        /// Which wait ran out.
        phase: TimeoutPhase,
        /// The configured limit.
        after: Duration,
        /// Content deltas already delivered to the caller.
        delivered: u64,
    },
    /// The provider sent bytes that do not follow its own wire format.
    #[error("malformed {what} from {url}: {message}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What was being parsed (`stream event`, `response body`).
        what: String,
        /// What is wrong, with the offending text's start.
        message: String,
    },
    /// The request cannot be expressed for this provider.
    #[error("invalid request for {provider}: {message}")]
    InvalidRequest {
        /// The provider name.
        provider: String,
        /// What is wrong.
        message: String,
    },
    /// A scripted [`MockModel`](crate::MockModel) failure, or its script ran out.
    #[error("mock model: {message}")]
    Mock {
        /// What the script said (or that it ran out).
        message: String,
        /// Whether the scripted failure is classified as retryable.
        retryable: bool,
    },
    /// A [`ReplayModel`](crate::ReplayModel) got a request the recording does not have.
    #[error("replay diverged at call {index}: {message}")]
    ReplayDiverged {
        /// Zero-based call number.
        index: usize,
        /// Which field differs, or that the recording ran out.
        message: String,
    },
    /// A recording, fixture or schema file could not be read or parsed.
    #[error("cannot read {path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A JSON Schema given for structured output is itself invalid.
    #[error("invalid json schema {name}: {message}")]
    InvalidSchema {
        /// The schema's name.
        name: String,
        /// What the schema compiler said.
        message: String,
    },
    /// Structured output still failed to parse or validate after the repair re-ask.
    #[error("structured output for {name} is invalid after {attempts} attempts: {message}")]
    InvalidStructuredOutput {
        /// The schema's name.
        name: String,
        /// Model calls made (first try plus repairs).
        attempts: u32,
        /// The last parse or validation error.
        message: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Stream error kinds that mean "try again later", whatever provider sent them.
const RETRYABLE_STREAM_KINDS: [&str; 4] =
    ["overloaded_error", "api_error", "rate_limit_error", "server_error"];

impl Error {
    /// Whether the same request may succeed if sent again.
    ///
    /// Retryable: HTTP 408, 409, 429 (but not `insufficient_quota`), 5xx and 529, connection
    /// failures, timeouts, truncated streams and in-stream `overloaded_error` — all only while no
    /// content delta has been delivered. The `x-should-retry` header overrides the status rule.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Connect { .. } => true,
            Error::Status { status, code, should_retry, .. } => {
                if let Some(should_retry) = should_retry {
                    return *should_retry;
                }
                if code.as_deref() == Some("insufficient_quota") {
                    return false;
                }
                matches!(status, 408 | 409 | 429) || *status >= 500
            }
            Error::StreamError { kind, delivered, .. } => {
                *delivered == 0 && RETRYABLE_STREAM_KINDS.contains(&kind.as_str())
            }
            Error::Truncated { delivered, .. }
            | Error::ConnectionLost { delivered, .. }
            | Error::Timeout { delivered, .. } => *delivered == 0,
            Error::Mock { retryable, .. } => *retryable,
            Error::Malformed { .. }
            | Error::InvalidRequest { .. }
            | Error::ReplayDiverged { .. }
            | Error::File { .. }
            | Error::InvalidSchema { .. }
            | Error::InvalidStructuredOutput { .. } => false,
        }
    }

    /// The wait the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Status { retry_after, .. } => *retry_after,
            Error::Connect { .. }
            | Error::StreamError { .. }
            | Error::Truncated { .. }
            | Error::ConnectionLost { .. }
            | Error::Timeout { .. }
            | Error::Malformed { .. }
            | Error::InvalidRequest { .. }
            | Error::Mock { .. }
            | Error::ReplayDiverged { .. }
            | Error::File { .. }
            | Error::InvalidSchema { .. }
            | Error::InvalidStructuredOutput { .. } => None,
        }
    }

    /// The same error with `delivered` set, for errors raised while a stream was being read.
    pub(crate) fn with_delivered(mut self, count: u64) -> Error {
        match &mut self {
            Error::StreamError { delivered, .. }
            | Error::Truncated { delivered, .. }
            | Error::ConnectionLost { delivered, .. }
            | Error::Timeout { delivered, .. } => *delivered = count,
            Error::Connect { .. }
            | Error::Status { .. }
            | Error::Malformed { .. }
            | Error::InvalidRequest { .. }
            | Error::Mock { .. }
            | Error::ReplayDiverged { .. }
            | Error::File { .. }
            | Error::InvalidSchema { .. }
            | Error::InvalidStructuredOutput { .. } => {}
        }
        self
    }
}
