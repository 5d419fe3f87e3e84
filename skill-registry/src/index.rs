//! The skill index: every root walked in priority order, shadowing resolved, lookups by name
//! and by source.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Serialize;

use crate::diagnostic::{Diagnostic, Mode, Rule};
use crate::discovery::{Globs, RootWalk};
use crate::error::{Error, Result};
use crate::skill::{RootKind, Skill, SkillRoot};

/// How to index: validation mode, walk limits, globs, symlink policy, read limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfig {
    /// Lenient (default) or strict validation.
    pub mode: Mode,
    /// How many folder levels below a root are searched (default 6).
    pub max_depth: usize,
    /// How many directories are listed per root before the walk stops (default 2000).
    pub max_directories: usize,
    /// When not empty, only skill folders whose path relative to the root matches one of these
    /// globs are indexed (e.g. `pdf*`, `team/**`).
    pub include: Vec<String>,
    /// Folders whose path relative to the root matches one of these globs are not searched.
    pub exclude: Vec<String>,
    /// Follow symlinked skill folders and symlinked `SKILL.md` files (default true).
    pub follow_symlinks: bool,
    /// The most bytes read from the head of a `SKILL.md` to find the frontmatter (default 64 KiB).
    pub max_frontmatter_bytes: usize,
    /// Threads that open and read `SKILL.md` files of large folders in parallel (default 8;
    /// reading is IO-bound, so more threads than cores pays off on a cold cache). The result
    /// does not depend on it.
    pub reader_threads: usize,
}

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            mode: Mode::Lenient,
            max_depth: 6,
            max_directories: 2000,
            include: Vec::new(),
            exclude: Vec::new(),
            follow_symlinks: true,
            max_frontmatter_bytes: 64 * 1024,
            reader_threads: 8,
        }
    }
}

/// What happened to a root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum RootStatus {
    /// The root was walked (possibly cut short by a limit, which has its own diagnostic).
    Scanned,
    /// The root does not exist (normal for default roots a user never created).
    Missing,
    /// The root exists but cannot be read, or is not a directory.
    Unreadable {
        /// Why.
        message: String,
    },
    /// The root is the same directory as an earlier root; it was not walked twice.
    AlreadyScanned,
}

/// One root and what happened to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootReport {
    /// The priority class of the root.
    pub kind: RootKind,
    /// The root directory, as configured.
    pub path: PathBuf,
    /// What happened.
    #[serde(flatten)]
    pub status: RootStatus,
    /// How many directories were listed.
    pub directories_scanned: usize,
}

/// Counters of one indexing run (they show that bodies were not read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IndexStats {
    /// Directories listed, over all roots.
    pub directories_scanned: usize,
    /// `SKILL.md` files opened.
    pub skill_files_read: usize,
    /// Bytes read from `SKILL.md` files, over all of them.
    pub frontmatter_bytes_read: u64,
}

/// A skill hidden by another with the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShadowedSkill {
    /// The hidden skill.
    #[serde(flatten)]
    pub skill: Skill,
    /// The `SKILL.md` of the skill that wins.
    pub shadowed_by: PathBuf,
}

/// Picks one of several skills with the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSelector {
    /// The skill from a root of this kind.
    Kind(RootKind),
    /// The skill from this root directory (as configured).
    Root(PathBuf),
    /// The skill whose `SKILL.md` or folder is this path.
    Path(PathBuf),
}

impl SourceSelector {
    fn matches(&self, skill: &Skill) -> bool {
        match self {
            SourceSelector::Kind(kind) => skill.source.kind == *kind,
            SourceSelector::Root(root) => skill.source.root == *root,
            SourceSelector::Path(path) => skill.path == *path || skill.directory == *path,
        }
    }
}

impl fmt::Display for SourceSelector {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSelector::Kind(kind) => write!(formatter, "a {} root", kind.as_str()),
            SourceSelector::Root(root) => write!(formatter, "root {}", root.display()),
            SourceSelector::Path(path) => write!(formatter, "{}", path.display()),
        }
    }
}

/// The metadata of every usable skill, the shadowed ones, and every diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillIndex {
    /// The skills that win, sorted by name.
    pub skills: Vec<Skill>,
    /// Skills hidden by a same-named skill of a root of higher priority (or earlier in the same
    /// root).
    pub shadowed: Vec<ShadowedSkill>,
    /// Every problem, in discovery order.
    pub diagnostics: Vec<Diagnostic>,
    /// What happened to each root.
    pub roots: Vec<RootReport>,
    /// Counters.
    pub stats: IndexStats,
}

fn glob_set(patterns: &[String]) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = Glob::new(pattern)
            .map_err(|source| Error::InvalidGlob { pattern: pattern.clone(), source })?;
        builder.add(glob);
    }
    builder
        .build()
        .map(Some)
        .map_err(|source| Error::InvalidGlob { pattern: patterns.join(", "), source })
}

impl SkillIndex {
    /// Indexes `roots`: walks them in priority order (project, user, extra, builtin; the given
    /// order within a kind), reads only frontmatter, validates, and resolves shadowing.
    ///
    /// # Errors
    ///
    /// Only a bad glob in `config` is an error; unreadable roots and bad skills are reported in
    /// [`SkillIndex::roots`] and [`SkillIndex::diagnostics`].
    pub fn build(roots: &[SkillRoot], config: &IndexConfig) -> Result<SkillIndex> {
        let globs =
            Globs { include: glob_set(&config.include)?, exclude: glob_set(&config.exclude)? };
        let mut ordered: Vec<&SkillRoot> = roots.iter().collect();
        ordered.sort_by_key(|root| root.kind);

        let mut diagnostics = Vec::new();
        let mut stats = IndexStats::default();
        let mut found = Vec::new();
        let mut reports = Vec::new();
        let mut seen_roots = Vec::new();
        for root in ordered {
            let mut report = RootReport {
                kind: root.kind,
                path: root.path.clone(),
                status: RootStatus::Scanned,
                directories_scanned: 0,
            };
            match fs::metadata(&root.path) {
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    report.status = RootStatus::Missing;
                }
                Err(error) => {
                    let message =
                        format!("cannot read skill root {}: {error}", root.path.display());
                    diagnostics.push(root_diagnostic(&root.path, config.mode, message.clone()));
                    report.status = RootStatus::Unreadable { message };
                }
                Ok(metadata) if !metadata.is_dir() => {
                    let message = format!("skill root {} is not a directory", root.path.display());
                    diagnostics.push(root_diagnostic(&root.path, config.mode, message.clone()));
                    report.status = RootStatus::Unreadable { message };
                }
                Ok(metadata) => {
                    let identity = (metadata.dev(), metadata.ino());
                    if seen_roots.contains(&identity) {
                        report.status = RootStatus::AlreadyScanned;
                    } else {
                        seen_roots.push(identity);
                        let mut walk = RootWalk {
                            config,
                            globs: &globs,
                            diagnostics: &mut diagnostics,
                            stats: &mut stats,
                            found: &mut found,
                        };
                        let (scanned, status) = walk.walk(root, identity);
                        report.directories_scanned = scanned;
                        report.status = status;
                        stats.directories_scanned += scanned;
                    }
                }
            }
            reports.push(report);
        }

        let (skills, shadowed) = resolve_shadowing(found, config.mode, &mut diagnostics);
        Ok(SkillIndex { skills, shadowed, diagnostics, roots: reports, stats })
    }

    /// The winning skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|skill| skill.name == name)
    }

    /// The skill named `name`, from `source` when given (which may pick a shadowed skill).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownSkill`] when no skill has the name, [`Error::UnknownSource`] when none of
    /// the same-named skills matches `source`.
    pub fn select(&self, name: &str, source: Option<&SourceSelector>) -> Result<&Skill> {
        let mut candidates = self
            .skills
            .iter()
            .chain(self.shadowed.iter().map(|shadowed| &shadowed.skill))
            .filter(|skill| skill.name == name)
            .peekable();
        if candidates.peek().is_none() {
            return Err(Error::UnknownSkill { name: name.to_owned() });
        }
        match source {
            None => candidates.next().ok_or_else(|| Error::UnknownSkill { name: name.to_owned() }),
            Some(selector) => candidates.find(|skill| selector.matches(skill)).ok_or_else(|| {
                Error::UnknownSource {
                    name: name.to_owned(),
                    source_selector: selector.to_string(),
                }
            }),
        }
    }

    /// Roots that exist but could not be read (a missing root is not a problem).
    pub fn unreadable_roots(&self) -> impl Iterator<Item = &RootReport> {
        self.roots.iter().filter(|root| matches!(root.status, RootStatus::Unreadable { .. }))
    }
}

fn root_diagnostic(path: &Path, mode: Mode, message: String) -> Diagnostic {
    Diagnostic::new(path, mode, Rule::RootUnreadable, None, message)
}

/// Keeps the first skill of each name (skills arrive in priority order) and reports the rest.
fn resolve_shadowing(
    found: Vec<Skill>,
    mode: Mode,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Vec<Skill>, Vec<ShadowedSkill>) {
    let mut winners: BTreeMap<String, Skill> = BTreeMap::new();
    let mut shadowed = Vec::new();
    for skill in found {
        let Some(winner) = winners.get(&skill.name) else {
            winners.insert(skill.name.clone(), skill);
            continue;
        };
        let (rule, message) = if winner.source == skill.source {
            (
                Rule::DuplicateName,
                format!(
                    "skill `{}` is also defined by {} in the same root; this one is not used",
                    skill.name,
                    winner.path.display()
                ),
            )
        } else {
            (
                Rule::Shadowed,
                format!(
                    "skill `{}` is shadowed by {} ({} root)",
                    skill.name,
                    winner.path.display(),
                    winner.source.kind.as_str()
                ),
            )
        };
        diagnostics.push(Diagnostic::new(&skill.path, mode, rule, None, message));
        shadowed.push(ShadowedSkill { shadowed_by: winner.path.clone(), skill });
    }
    (winners.into_values().collect(), shadowed)
}
