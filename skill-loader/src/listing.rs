//! Listing a skill's resources (path, size, kind) without reading any of them.

use std::fs;
use std::path::PathBuf;

use serde::Serialize;
use walkdir::WalkDir;

use skills_agent_registry::file_kind;

use crate::containment::SkillFolder;

/// What a resource is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum ResourceKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symlink; `inside` tells whether it resolves inside the skill folder (only those can be
    /// read).
    Symlink {
        /// Where the link points, as written.
        target: PathBuf,
        /// Whether it resolves inside the skill folder.
        inside: bool,
    },
    /// A FIFO, socket or device (never read).
    Special {
        /// What it is.
        what: &'static str,
    },
}

/// One entry of a skill folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceEntry {
    /// The path relative to the skill folder, with `/` separators.
    pub path: String,
    /// The size in bytes (of the link itself for a symlink).
    pub size: u64,
    /// What it is.
    #[serde(flatten)]
    pub kind: ResourceKind,
}

/// The entries of a skill folder, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceListing {
    /// The entries (`.git` is skipped).
    pub entries: Vec<ResourceEntry>,
    /// Whether the entry or depth limit left entries out.
    pub truncated: bool,
}

/// Lists `folder` to `max_depth` levels and at most `max_entries` entries.
pub(crate) fn list(folder: &SkillFolder, max_depth: usize, max_entries: usize) -> ResourceListing {
    let mut entries = Vec::new();
    let mut truncated = false;
    let walker = WalkDir::new(folder.path())
        .min_depth(1)
        .max_depth(max_depth.saturating_add(1))
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|entry| entry.file_name() != ".git");
    for entry in walker {
        let Ok(entry) = entry else {
            truncated = true;
            continue;
        };
        if entry.depth() > max_depth {
            truncated = true;
            continue;
        }
        if entries.len() >= max_entries {
            truncated = true;
            break;
        }
        let Ok(relative) = entry.path().strip_prefix(folder.path()) else {
            continue;
        };
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        let kind = if metadata.file_type().is_symlink() {
            let target = fs::read_link(entry.path()).unwrap_or_default();
            let inside = fs::canonicalize(entry.path())
                .is_ok_and(|resolved| resolved.starts_with(folder.path()));
            ResourceKind::Symlink { target, inside }
        } else if metadata.is_dir() {
            ResourceKind::Directory
        } else if metadata.is_file() {
            ResourceKind::File
        } else {
            ResourceKind::Special { what: file_kind(&metadata) }
        };
        let path = relative
            .components()
            .map(|component| component.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        entries.push(ResourceEntry { path, size: metadata.len(), kind });
    }
    ResourceListing { entries, truncated }
}
