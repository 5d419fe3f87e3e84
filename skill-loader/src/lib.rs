//! Scoped reads of skill bodies and resources: containment, size caps, excerpts.
//!
//! The registry (level 1) knows only names and descriptions. This crate reads the rest, on
//! demand: a skill's `SKILL.md` body (level 2) and the files in its folder (level 3).
//!
//! **Platform: Unix** (Linux, macOS, the BSDs; tested on Linux): descriptor-relative opens and
//! device/inode checks, `openat2` on Linux and Android. Other targets stop with a
//! `compile_error!`.
//!
//! # Design
//!
//! * **Containment.** Every path is resolved by [`SkillFolder`]: absolute paths and `..` are
//!   refused before touching the file system; symlinks are resolved and anything that lands
//!   outside the folder is refused; directories, FIFOs, sockets and devices are refused from
//!   their metadata and never opened. The open itself is relative to a descriptor of the folder,
//!   with `O_NOFOLLOW | O_NONBLOCK` (on Linux `openat2` with `RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS`), and the opened file's device and inode must equal what the check
//!   saw, so a file swapped for a link between check and open is refused too. Each refusal is
//!   its own [`Error`] variant.
//! * **Size caps.** A text within its cap ([`LoaderConfig`]) comes back whole. A larger one comes
//!   back as an [`Excerpt`]: the Markdown section named by the hint (a heading match), or the
//!   head and the tail with the middle elided, plus the file's full size, SHA-256 and path, and
//!   its headings so a section can be asked for. Binary files are reported, not dumped; text in an
//!   8-bit encoding is shown with U+FFFD for the bytes that are not UTF-8. Files
//!   are read once and hashed as they stream; memory stays bounded by the scan limit.
//! * **Listing.** [`SkillLoader::list_resources`] gives path, size and kind of every entry
//!   without reading any file.
//!
//! `SKILL.md` itself may be a symlink out of the folder (the registry follows those); the body
//! is read from the file the registry indexed, with the same identity check. Resources must
//! resolve inside the folder.
//!
//! # Example
//!
//! ```
//! use skill_loader::{ExcerptContent, LoaderConfig, SkillLoader};
//! use skills_agent_registry::{IndexConfig, RootKind, SkillIndex, SkillRoot};
//!
//! let root = std::env::temp_dir().join(format!("skill-loader-doctest-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("notes/references"))?;
//! std::fs::write(root.join("notes/SKILL.md"), "---\nname: notes\ndescription: Take notes.\n---\n# Notes\nRead references/style.md.\n")?;
//! std::fs::write(root.join("notes/references/style.md"), "# Style\nShort.\n# Tone\nKind.\n")?;
//!
//! let index = SkillIndex::build(&[SkillRoot::new(RootKind::Project, &root)], &IndexConfig::default())?;
//! let skill = index.get("notes").expect("indexed");
//! let loader = SkillLoader::new(LoaderConfig::default());
//!
//! let body = loader.load_skill_body(skill)?;
//! assert_eq!(body.content, ExcerptContent::Complete { text: "# Notes\nRead references/style.md.\n".into() });
//!
//! let tone = loader.load_resource(skill, "references/style.md", Some("tone"))?;
//! assert!(matches!(tone.content, ExcerptContent::Section { ref text, .. } if text == "# Tone\nKind.\n"));
//!
//! assert!(loader.load_resource(skill, "../notes/SKILL.md", None).is_err());
//! std::fs::remove_dir_all(&root)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(unix))]
compile_error!(
    "skill-loader needs a Unix target: it opens files relative to a folder descriptor with \
     O_NOFOLLOW and checks their device and inode"
);

mod containment;
mod error;
mod excerpt;
mod listing;

use std::fs;
use std::path::Path;

use skills_agent_registry::{SKILL_FILE_NAME, Skill};

pub use containment::{CheckedPath, SkillFolder};
pub use error::{Error, Result};
pub use excerpt::{Excerpt, ExcerptContent};
pub use listing::{ResourceEntry, ResourceKind, ResourceListing};

use excerpt::{
    FileBytes, find_section, head_of, head_text, headings, looks_binary, read_file,
    strip_frontmatter, tail_of, tail_text, whole_text,
};

/// Size caps and limits of the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderConfig {
    /// The largest `SKILL.md` body returned whole, in bytes (default 48 KiB).
    pub max_body_bytes: usize,
    /// The largest resource text returned whole, in bytes (default 24 KiB).
    pub max_resource_bytes: usize,
    /// Files up to this size are held in memory for section search (default 16 MiB); larger
    /// files are streamed for the hash and only their head and tail are kept.
    pub max_scan_bytes: usize,
    /// How deep [`SkillLoader::list_resources`] goes (default 8 levels).
    pub max_listing_depth: usize,
    /// How many entries [`SkillLoader::list_resources`] returns at most (default 1000).
    pub max_listing_entries: usize,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        LoaderConfig {
            max_body_bytes: 48 * 1024,
            max_resource_bytes: 24 * 1024,
            max_scan_bytes: 16 * 1024 * 1024,
            max_listing_depth: 8,
            max_listing_entries: 1000,
        }
    }
}

/// Reads skill bodies and resources within the configured caps.
#[derive(Debug, Clone, Default)]
pub struct SkillLoader {
    config: LoaderConfig,
}

impl SkillLoader {
    /// A loader with `config`.
    pub fn new(config: LoaderConfig) -> Self {
        SkillLoader { config }
    }

    /// The loader's configuration.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// Reads the body of `skill` (its `SKILL.md` without the frontmatter), whole when within
    /// [`LoaderConfig::max_body_bytes`], else as head and tail.
    ///
    /// # Errors
    ///
    /// [`Error::ChangedSinceCheck`] when the file changed since it was resolved, [`Error::Io`],
    /// [`Error::NotRegularFile`] and [`Error::SkillFolder`].
    pub fn load_skill_body(&self, skill: &Skill) -> Result<Excerpt> {
        let folder = SkillFolder::open(&skill.directory)?;
        let (checked, file) = match folder.open_file(SKILL_FILE_NAME) {
            // `SKILL.md` symlinked out of the folder: the registry indexed that very file.
            Err(Error::OutsideSkill { .. }) => open_indexed_skill_file(&skill.path)?,
            other => other?,
        };
        self.excerpt(&checked, file, None, self.config.max_body_bytes, true)
    }

    /// Reads `relative_path` inside the folder of `skill`: whole when within
    /// [`LoaderConfig::max_resource_bytes`], else the section named by `section_hint` (a
    /// Markdown heading), else head and tail.
    ///
    /// # Errors
    ///
    /// Every containment refusal ([`Error::AbsolutePath`], [`Error::ParentTraversal`],
    /// [`Error::OutsideSkill`], [`Error::NotRegularFile`], [`Error::IsDirectory`],
    /// [`Error::ChangedSinceCheck`], …), [`Error::NotFound`] and [`Error::Io`].
    pub fn load_resource(
        &self,
        skill: &Skill,
        relative_path: &str,
        section_hint: Option<&str>,
    ) -> Result<Excerpt> {
        self.load_from_folder(&skill.directory, relative_path, section_hint)
    }

    /// [`SkillLoader::load_resource`] for a folder given by path.
    ///
    /// # Errors
    ///
    /// As [`SkillLoader::load_resource`].
    pub fn load_from_folder(
        &self,
        directory: &Path,
        relative_path: &str,
        section_hint: Option<&str>,
    ) -> Result<Excerpt> {
        let folder = SkillFolder::open(directory)?;
        let (checked, file) = folder.open_file(relative_path)?;
        self.excerpt(&checked, file, section_hint, self.config.max_resource_bytes, false)
    }

    /// Lists the entries of the folder of `skill` (path, size, kind), reading none of them.
    ///
    /// # Errors
    ///
    /// [`Error::SkillFolder`] when the folder cannot be opened.
    pub fn list_resources(&self, skill: &Skill) -> Result<ResourceListing> {
        let folder = SkillFolder::open(&skill.directory)?;
        Ok(listing::list(&folder, self.config.max_listing_depth, self.config.max_listing_entries))
    }

    fn excerpt(
        &self,
        checked: &CheckedPath,
        mut file: fs::File,
        section_hint: Option<&str>,
        cap: usize,
        is_skill_body: bool,
    ) -> Result<Excerpt> {
        let edge_bytes = (cap / 2).max(1);
        let FileBytes { total_bytes, sha256, whole, head, tail } = read_file(
            &mut file,
            &checked.absolute,
            self.config.max_scan_bytes.max(cap),
            edge_bytes,
        )?;
        let mut excerpt = Excerpt {
            relative_path: checked.requested.clone(),
            file: checked.absolute.clone(),
            total_bytes,
            sha256,
            content: ExcerptContent::Binary,
            headings: Vec::new(),
            missed_section: None,
        };
        // The whole file when it is kept: the head alone is only half the cap, which may be
        // shorter than the window the check looks at.
        if looks_binary(whole.as_deref().unwrap_or(&head)) {
            return Ok(excerpt);
        }
        let Some(whole) = whole else {
            // Too large to scan: head and tail only (cut to char boundaries).
            let (Some(head_text), Some(tail_text)) = (head_text(&head), tail_text(&tail)) else {
                return Ok(excerpt);
            };
            let head_text = if is_skill_body { strip_frontmatter(&head_text) } else { &head_text };
            let head_text = head_of(head_text, edge_bytes).to_owned();
            let tail_text = tail_of(&tail_text, edge_bytes).to_owned();
            let shown = (head_text.len() + tail_text.len()) as u64;
            excerpt.content = ExcerptContent::HeadTail {
                omitted_bytes: total_bytes.saturating_sub(shown),
                head: head_text,
                tail: tail_text,
            };
            excerpt.missed_section = section_hint.map(str::to_owned);
            return Ok(excerpt);
        };
        // Text in an 8-bit encoding is shown with U+FFFD for the bytes that are not UTF-8, as
        // editors do, rather than hidden as binary.
        let Some(text) = whole_text(whole) else {
            return Ok(excerpt);
        };
        let text = if is_skill_body { strip_frontmatter(&text) } else { &text[..] };
        if let Some(hint) = section_hint {
            match find_section(text, hint) {
                Some((heading, section)) => {
                    let truncated = section.len() > cap;
                    excerpt.content = ExcerptContent::Section {
                        heading,
                        text: head_of(section, cap).to_owned(),
                        truncated,
                    };
                    if truncated {
                        excerpt.headings = heading_titles(text);
                    }
                    return Ok(excerpt);
                }
                None => excerpt.missed_section = Some(hint.to_owned()),
            }
        }
        if text.len() <= cap {
            excerpt.content = ExcerptContent::Complete { text: text.to_owned() };
            if excerpt.missed_section.is_none() {
                return Ok(excerpt);
            }
        } else {
            let head_text = head_of(text, edge_bytes);
            let tail_text = tail_of(text, edge_bytes);
            excerpt.content = ExcerptContent::HeadTail {
                omitted_bytes: (text.len() - head_text.len() - tail_text.len()) as u64,
                head: head_text.to_owned(),
                tail: tail_text.to_owned(),
            };
        }
        excerpt.headings = heading_titles(text);
        Ok(excerpt)
    }
}

fn heading_titles(text: &str) -> Vec<String> {
    headings(text).into_iter().map(|heading| heading.line).collect()
}

/// Opens the `SKILL.md` the registry indexed when it is a symlink leading out of its folder:
/// resolved once, opened with `O_NOFOLLOW | O_NONBLOCK`, identity checked.
fn open_indexed_skill_file(path: &Path) -> Result<(CheckedPath, fs::File)> {
    let resolved =
        fs::canonicalize(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let parent = resolved.parent().unwrap_or(Path::new("/"));
    let folder = SkillFolder::open(parent)?;
    let name =
        resolved.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let (mut checked, file) = folder.open_file(&name)?;
    checked.requested = SKILL_FILE_NAME.to_owned();
    Ok((checked, file))
}

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
