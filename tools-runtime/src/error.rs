//! The crate's error type: failures of the runtime itself, not of the command it runs.

use std::path::PathBuf;

/// A failure of the runtime (the command's own failures are in [`ExecResult`](crate::ExecResult),
/// refusals in [`Refusal`](crate::Refusal)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The sandbox helper binary could not be found.
    #[error("sandbox helper not found (looked for {searched:?}); set RuntimeConfig::helper")]
    HelperNotFound {
        /// The paths that were tried.
        searched: Vec<PathBuf>,
    },
    /// The helper process could not be started.
    #[error("cannot start sandbox helper {path}: {source}")]
    Spawn {
        /// The helper path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Waiting for or reading from the command failed.
    #[error("cannot supervise the command {program}: {source}")]
    Supervise {
        /// The program being run.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The private temporary directory could not be prepared.
    #[error("cannot prepare the private tmp directory {path}: {source}")]
    PrivateTmp {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The request is malformed (empty program, zero output cap, …).
    #[error("invalid exec request: {0}")]
    InvalidRequest(String),
    /// An audit record could not be written.
    #[error("cannot write the audit record to {path}: {source}")]
    Audit {
        /// The audit log path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A service was refused before its program ran: the sandbox cannot provide what it needs,
    /// its working directory is outside the workspace, or its program is out of its reach.
    #[error("cannot start service `{name}`: {}", refusal.message)]
    ServiceRefused {
        /// The service's name.
        name: String,
        /// Why (the same refusal `run` would give a command, with the sandbox report when the
        /// helper refused).
        refusal: crate::exec::Refusal,
    },
    /// A service could not be started: its program is missing, or its user cannot reach or
    /// execute it, or the sandbox helper stopped before it started the program.
    #[error("cannot start service `{name}`: {reason}")]
    ServiceStart {
        /// The service's name.
        name: String,
        /// What went wrong and what to do.
        reason: String,
    },
    /// The helper plan could not be serialised.
    #[error("cannot serialise the sandbox plan: {0}")]
    Plan(#[from] serde_json::Error),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
