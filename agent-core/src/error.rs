//! The crate's error type: only what stops a run outright (IO on the run directory, a bad
//! configuration, a recording that cannot be read). What the model can fix is an observation.

use std::path::PathBuf;

/// What went wrong outside the model's reach.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The run directory or one of its files could not be written or read. (The IO error is
    /// part of the message, not a `source`: a report that prints the chain would say it twice.)
    #[error("run directory {path}: {error}")]
    RunDirectory {
        /// The file or folder.
        path: PathBuf,
        /// The IO error.
        error: std::io::Error,
    },
    /// The run could not record its start (the disk is full, the folder not writable): its
    /// folder, which held nothing to resume, was removed.
    #[error("run directory {path}: {error}; the run did not start, and nothing of it was kept")]
    NotStarted {
        /// The file or folder that could not be written.
        path: PathBuf,
        /// The IO error.
        error: std::io::Error,
    },
    /// The agent was configured in a way that cannot run.
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// The skill roots could not be indexed.
    #[error("cannot index the skill roots: {0}")]
    Registry(#[from] skills_agent_registry::Error),
    /// A recorded run (`events.jsonl`) could not be read or does not describe a run.
    #[error("recorded run {path}: {message}")]
    Recording {
        /// The events file.
        path: PathBuf,
        /// What is wrong, with the line number where there is one.
        message: String,
    },
    /// Resuming found the recorded events and the re-run disagreeing.
    #[error("cannot resume {path}: {message}")]
    Resume {
        /// The run directory.
        path: PathBuf,
        /// Where the re-run departed from the record.
        message: String,
    },
    /// An event could not be serialised.
    #[error("cannot serialise an event: {0}")]
    Serialise(#[from] serde_json::Error),
    /// An [`EventSink`](crate::EventSink) other than the run directory could not keep an
    /// event (an engine that stores the record, a forwarder): the run stops, as when its own
    /// file cannot be written, so nothing is lost silently.
    #[error("event sink {sink}: {message}")]
    Sink {
        /// Which sink (its own short name, e.g. `nats`).
        sink: String,
        /// What failed and what to do.
        message: String,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::RunDirectory { path: path.into(), error: source }
    }
}
