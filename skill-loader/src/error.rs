//! The crate's error type: every refused or failed read, naming the path.

use std::io;
use std::path::PathBuf;

/// Why a skill file could not be read. Containment refusals are their own variants so a caller
/// (and the model, as an observation) can tell "outside the skill" from "missing".
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The skill folder itself cannot be opened.
    #[error("cannot open skill folder {path}: {source}")]
    SkillFolder {
        /// The folder.
        path: PathBuf,
        /// The underlying IO error.
        source: io::Error,
    },
    /// The requested path is empty or has a NUL byte.
    #[error("invalid resource path `{path}`: {reason}")]
    InvalidPath {
        /// The path as requested.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The requested path is absolute.
    #[error("resource path `{path}` is absolute; give a path relative to the skill folder")]
    AbsolutePath {
        /// The path as requested.
        path: String,
    },
    /// The requested path has a `..` component.
    #[error("resource path `{path}` contains `..`; paths must stay inside the skill folder")]
    ParentTraversal {
        /// The path as requested.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist in skill folder {folder}")]
    NotFound {
        /// The path as requested.
        path: String,
        /// The skill folder.
        folder: PathBuf,
    },
    /// The path resolves (through a symlink) to a place outside the skill folder.
    #[error("`{path}` resolves to {resolved}, outside skill folder {folder}; refused")]
    OutsideSkill {
        /// The path as requested.
        path: String,
        /// Where it resolves to.
        resolved: PathBuf,
        /// The skill folder.
        folder: PathBuf,
    },
    /// The path is a FIFO, socket or device; it is never opened.
    #[error("`{path}` is {kind}, not a regular file; refused")]
    NotRegularFile {
        /// The path as requested.
        path: String,
        /// What it is (`a FIFO`, `a character device`, …).
        kind: &'static str,
    },
    /// The path is a directory.
    #[error("`{path}` is a directory; list it with list_resources instead")]
    IsDirectory {
        /// The path as requested.
        path: String,
    },
    /// The file changed (replaced, or a component turned into a symlink) between the check and
    /// the open.
    #[error("`{path}` changed between check and open ({reason}); refused")]
    ChangedSinceCheck {
        /// The path as requested.
        path: String,
        /// What changed.
        reason: String,
    },
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying IO error.
        source: io::Error,
    },
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
