//! The crate's error type: the few failures that stop indexing or a lookup outright.

use std::path::PathBuf;

/// What went wrong in the registry. Problems with single skills are [`crate::Diagnostic`]s, not
/// errors: one bad skill never stops the index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An include or exclude glob of the configuration does not parse.
    #[error("invalid glob `{pattern}`: {source}")]
    InvalidGlob {
        /// The pattern as configured.
        pattern: String,
        /// What the glob parser said.
        source: globset::Error,
    },
    /// No indexed skill has this name.
    #[error("no skill named `{name}`")]
    UnknownSkill {
        /// The name that was asked for.
        name: String,
    },
    /// Skills with this name exist, but none comes from the requested source.
    #[error("skill `{name}` does not come from {source_selector}")]
    UnknownSource {
        /// The name that was asked for.
        name: String,
        /// The selector, rendered for people.
        source_selector: String,
    },
    /// Writing the builtin skills to a directory failed.
    #[error("cannot write builtin skill file {path}: {source}")]
    BuiltinWrite {
        /// The file that could not be written.
        path: PathBuf,
        /// The underlying IO error.
        source: std::io::Error,
    },
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
