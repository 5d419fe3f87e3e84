//! The crate's error type: what failed, on which input, and what to do about it.

use std::path::PathBuf;

/// What went wrong talking to the engine or moving a task's files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The NATS server could not be reached (or refused the credentials).
    #[error(
        "cannot reach the NATS server at {url}: {message}; start one with `nats-server -js`, or \
         pass the right --nats URL and credentials"
    )]
    Connect {
        /// The URL tried.
        url: String,
        /// The client's error.
        message: String,
    },
    /// A JetStream operation failed (a stream, bucket or object store call).
    #[error("NATS JetStream: {what}: {message}")]
    Engine {
        /// What was being done.
        what: String,
        /// The server's or client's error.
        message: String,
    },
    /// The configuration cannot be used (a prefix with characters a subject cannot hold, …).
    #[error("fleet configuration: {0}")]
    Config(String),
    /// A workspace is larger than the limit a task may carry.
    #[error(
        "workspace {path} holds more than {limit} bytes (the task limit); leave large files out \
         with a .gitignore or .ignore file, or raise the limit (`workspace_limit`)"
    )]
    TooLarge {
        /// The workspace.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// A file or folder could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The IO error.
        error: std::io::Error,
    },
    /// An archive (a workspace or a run's files) is not one this crate wrote, or is damaged.
    #[error("archive {name}: {message}")]
    Archive {
        /// The object's name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// No task or run has this id.
    #[error("no task or run `{0}` in this fleet (`skills-agent runs list --nats URL` lists them)")]
    NotFound(String),
    /// A message in the engine is not what this crate expects (written by another version?).
    #[error("{what}: {message}")]
    Malformed {
        /// Which message or entry.
        what: String,
        /// What is wrong with it.
        message: String,
    },
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn engine(what: impl Into<String>, error: impl std::fmt::Display) -> Error {
        Error::Engine { what: what.into(), message: error.to_string() }
    }

    /// Whether the engine did not answer in time (the client's request timeout), as opposed to
    /// answering with an error.
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, Error::Engine { message, .. } if message.contains("timed out"))
    }

    /// Whether trying again may succeed: no answer in time, or an answer that a cluster gives
    /// while it elects a stream's leader or reconnects ("no stream found", "no responders"), as
    /// opposed to one that will not change (a message over the size limit, a refused
    /// permission, a bad key).
    pub(crate) fn is_transient(&self) -> bool {
        const PASSING: [&str; 10] = [
            "timed out",
            "no stream found",
            "stream not found",
            "no responders",
            "broken pipe",
            "disconnected",
            "connection",
            "unavailable",
            "leader",
            "503",
        ];
        match self {
            Error::Engine { message, .. } => {
                let message = message.to_lowercase();
                PASSING.iter().any(|passing| message.contains(passing))
            }
            _ => false,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Error {
        Error::Io { path: path.into(), error }
    }
}
