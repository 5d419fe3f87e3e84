//! The bench's one error type.

use std::path::{Path, PathBuf};

/// What went wrong in the bench.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A trajectories file is malformed: the message names the run and the message.
    #[error("{path}: {message}")]
    Trajectory {
        /// The file (`<input>` for text).
        path: String,
        /// What is wrong, and where.
        message: String,
    },
    /// A trajectory format the bench does not read.
    #[error("unknown trajectory format `{format}` (known: openai-chat)")]
    UnknownFormat {
        /// The format asked for.
        format: String,
    },
    /// A scenario could not be set up or run (not a failed check: a broken bench).
    #[error("scenario {scenario}: {message}")]
    Scenario {
        /// The scenario.
        scenario: String,
        /// What failed.
        message: String,
    },
    /// The agent failed to build or to run.
    #[error("scenario {scenario}: {source}")]
    Agent {
        /// The scenario.
        scenario: String,
        /// The cause.
        source: skills_agent_core::Error,
    },
    /// A report could not be encoded.
    #[error("encoding {what}: {source}")]
    Json {
        /// What was being encoded.
        what: String,
        /// The cause.
        source: serde_json::Error,
    },
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io { path: path.to_owned(), source }
    }
}

/// The bench's result type.
pub type Result<T> = std::result::Result<T, Error>;
