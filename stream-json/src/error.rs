//! The one error type of the crate: what failed, at which byte offset and JSON path.

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while parsing a pattern or a document.
///
/// Document errors carry the byte offset (counted from the first byte ever fed, across all
/// chunks) and the JSON path where the parser stood, e.g. `$.action.args[2]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document breaks the JSON grammar (RFC 8259).
    #[error("invalid JSON at byte {offset} ({path}): {message}")]
    Syntax {
        /// Byte offset of the offending byte.
        offset: u64,
        /// JSON path where the parser stood.
        path: String,
        /// What was expected and what was found.
        message: String,
    },
    /// The input ended before the document was complete.
    #[error("incomplete JSON at end of input (byte {offset}, {path}): expected {expected}")]
    Incomplete {
        /// Total number of bytes fed.
        offset: u64,
        /// JSON path where the parser stood.
        path: String,
        /// What the parser was still waiting for.
        expected: String,
    },
    /// Containers are nested deeper than [`Config::max_depth`](crate::Config::max_depth).
    #[error(
        "JSON nested too deep at byte {offset} ({path}): more than {limit} levels; \
         raise Config::max_depth if the input is trusted"
    )]
    TooDeep {
        /// Byte offset of the opening bracket that went over the limit.
        offset: u64,
        /// JSON path of the container that went over the limit.
        path: String,
        /// The configured limit.
        limit: usize,
    },
    /// A number inside a [`Capture::Value`](crate::Capture::Value) does not fit an `f64`
    /// (e.g. `1e400`). The document itself is valid JSON; capture it with
    /// [`Capture::Raw`](crate::Capture::Raw) to keep the exact text.
    #[error(
        "number at byte {offset} ({path}) is out of range for a captured serde_json::Value; \
         subscribe with Capture::Raw to keep its text"
    )]
    NumberOutOfRange {
        /// Byte offset of the number's first byte.
        offset: u64,
        /// JSON path of the number.
        path: String,
    },
    /// A path pattern given to [`Parser::subscribe`](crate::Parser::subscribe) or
    /// [`Pattern::parse`](crate::Pattern::parse) is malformed or unsupported.
    #[error("invalid path pattern {pattern:?} at character {position}: {message}")]
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// Character index (0-based) where the problem is.
        position: usize,
        /// What is wrong.
        message: String,
    },
    /// [`Parser::subscribe`](crate::Parser::subscribe) was called after bytes were fed.
    #[error("subscriptions must be added before the first byte is fed")]
    SubscribeAfterStart,
    /// [`Parser::feed`](crate::Parser::feed) or [`Parser::finish`](crate::Parser::finish)
    /// was called after `finish` succeeded.
    #[error("the document is already finished; create a new Parser for the next document")]
    AlreadyFinished,
}

impl Error {
    /// The byte offset of a document error, if this is one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Syntax { offset, .. }
            | Error::Incomplete { offset, .. }
            | Error::TooDeep { offset, .. }
            | Error::NumberOutOfRange { offset, .. } => Some(*offset),
            Error::InvalidPattern { .. } | Error::SubscribeAfterStart | Error::AlreadyFinished => {
                None
            }
        }
    }

    /// The JSON path of a document error (e.g. `$.action.args[2]`), if this is one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Error::Syntax { path, .. }
            | Error::Incomplete { path, .. }
            | Error::TooDeep { path, .. }
            | Error::NumberOutOfRange { path, .. } => Some(path),
            Error::InvalidPattern { .. } | Error::SubscribeAfterStart | Error::AlreadyFinished => {
                None
            }
        }
    }
}
