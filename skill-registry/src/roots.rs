//! The default skill roots and the builtin skills shipped with the runtime.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::skill::{RootKind, SkillRoot};

/// Project roots, relative to the project directory, in priority order.
pub const PROJECT_ROOTS: &[&str] = &[".skills", ".agents/skills", ".claude/skills"];

/// User roots, relative to the home directory, in priority order.
pub const USER_ROOTS: &[&str] =
    &[".config/skills-agent/skills", ".agents/skills", ".claude/skills"];

/// A builtin skill: its folder name and the files in it (path relative to the folder, text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinSkill {
    /// The folder name (equal to the skill's `name`).
    pub folder: &'static str,
    /// Relative path and contents of each file.
    pub files: &'static [(&'static str, &'static str)],
}

/// The builtin skills, embedded in the binary so an installed runtime can write them out.
pub const BUILTIN_SKILLS: &[BuiltinSkill] = &[BuiltinSkill {
    folder: "skill-authoring",
    files: &[("SKILL.md", include_str!("../builtin/skill-authoring/SKILL.md"))],
}];

/// The builtin root as shipped in the source tree of this crate (`skill-registry/builtin`).
///
/// Programs installed away from the source tree write the embedded copies out with
/// [`write_builtin_skills`] and use that directory instead.
pub fn builtin_root() -> SkillRoot {
    SkillRoot::new(RootKind::Builtin, concat!(env!("CARGO_MANIFEST_DIR"), "/builtin"))
}

/// Writes [`BUILTIN_SKILLS`] below `directory` (creating it) and returns it as the builtin root.
///
/// # Errors
///
/// [`Error::BuiltinWrite`] naming the file that could not be written.
pub fn write_builtin_skills(directory: &Path) -> Result<SkillRoot> {
    for skill in BUILTIN_SKILLS {
        for (relative, contents) in skill.files {
            let path = directory.join(skill.folder).join(relative);
            let parent = path.parent().unwrap_or(directory);
            fs::create_dir_all(parent)
                .and_then(|()| fs::write(&path, contents))
                .map_err(|source| Error::BuiltinWrite { path: path.clone(), source })?;
        }
    }
    Ok(SkillRoot::new(RootKind::Builtin, directory))
}

/// The default roots: the project roots below `project_directory`, the user roots below
/// `home_directory` (when known), then the builtin root. Missing roots are fine: indexing
/// reports them as missing, not as errors.
pub fn default_roots(project_directory: &Path, home_directory: Option<&Path>) -> Vec<SkillRoot> {
    let mut roots: Vec<SkillRoot> = PROJECT_ROOTS
        .iter()
        .map(|relative| SkillRoot::new(RootKind::Project, project_directory.join(relative)))
        .collect();
    if let Some(home) = home_directory {
        roots.extend(
            USER_ROOTS.iter().map(|relative| SkillRoot::new(RootKind::User, home.join(relative))),
        );
    }
    roots.push(builtin_root());
    roots
}

/// Extra roots from configuration, in the order given (all of kind [`RootKind::Extra`]).
pub fn extra_roots(paths: impl IntoIterator<Item = PathBuf>) -> Vec<SkillRoot> {
    paths.into_iter().map(|path| SkillRoot::new(RootKind::Extra, path)).collect()
}
