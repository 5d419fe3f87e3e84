//! The default skill roots and the builtin skills shipped with the runtime.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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

/// The folder below the cache directory that [`builtin_root`] writes the builtin skills into.
pub const BUILTIN_CACHE_FOLDER: &str = "builtin-skills";

/// Where [`builtin_root`] writes the builtin skills: `$SKILLS_AGENT_CACHE/builtin-skills`, else
/// `$HOME/.cache/skills-agent/builtin-skills` (the skills-agent cache), `None` when neither
/// variable is set.
pub fn builtin_cache_dir() -> Option<PathBuf> {
    cache_dir_from(|name| std::env::var_os(name))
}

/// [`builtin_cache_dir`] with the environment read through `variable`.
fn cache_dir_from(variable: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let present = |name: &str| variable(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let cache = present("SKILLS_AGENT_CACHE")
        .or_else(|| present("HOME").map(|home| home.join(".cache").join("skills-agent")))?;
    Some(cache.join(BUILTIN_CACHE_FOLDER))
}

/// The builtin root: the embedded [`BUILTIN_SKILLS`], written at the first call in a process
/// into [`builtin_cache_dir`] (with [`write_builtin_skills`]); later calls return the same root.
///
/// Nothing is read from the source tree this crate was built from, so an installed binary works
/// anywhere. When no cache directory is known (neither `SKILLS_AGENT_CACHE` nor `HOME` is set)
/// or it cannot be written, the root still names the directory it wanted (an empty path when
/// none is known) and indexing reports it as missing or unreadable: the builtin skills are then
/// absent, never taken from elsewhere. Programs with their own cache write the skills there
/// with [`write_builtin_skills`] instead.
pub fn builtin_root() -> SkillRoot {
    static ROOT: OnceLock<SkillRoot> = OnceLock::new();
    ROOT.get_or_init(|| {
        let directory = builtin_cache_dir().unwrap_or_default();
        if directory.as_os_str().is_empty() {
            return SkillRoot::new(RootKind::Builtin, directory);
        }
        write_builtin_skills(&directory)
            .unwrap_or_else(|_| SkillRoot::new(RootKind::Builtin, directory))
    })
    .clone()
}

/// Writes [`BUILTIN_SKILLS`] below `directory` (creating it) and returns it as the builtin root.
///
/// A file that already holds the embedded contents is left alone; another is replaced through a
/// temporary file and a rename, so a process reading it concurrently sees the old or the new
/// contents, never a partly written file.
///
/// # Errors
///
/// [`Error::BuiltinWrite`] naming the file that could not be written.
pub fn write_builtin_skills(directory: &Path) -> Result<SkillRoot> {
    for skill in BUILTIN_SKILLS {
        for (relative, contents) in skill.files {
            let path = directory.join(skill.folder).join(relative);
            write_if_changed(&path, contents.as_bytes())
                .map_err(|source| Error::BuiltinWrite { path: path.clone(), source })?;
        }
    }
    Ok(SkillRoot::new(RootKind::Builtin, directory))
}

/// Writes `contents` to `path` unless it already holds them: into a temporary file beside it,
/// then renamed over it.
fn write_if_changed(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    if fs::read(path).is_ok_and(|existing| existing == contents) {
        return Ok(());
    }
    let parent = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".tmp-{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    fs::write(&temporary, contents).and_then(|()| fs::rename(&temporary, path)).inspect_err(|_| {
        let _ = fs::remove_file(&temporary);
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn environment<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.into())
    }

    #[test]
    fn the_cache_is_skills_agent_cache_else_below_home() {
        let both = [("SKILLS_AGENT_CACHE", "/var/cache/agent"), ("HOME", "/home/someone")];
        assert_eq!(
            cache_dir_from(environment(&both)),
            Some(PathBuf::from("/var/cache/agent/builtin-skills"))
        );
        let home = [("SKILLS_AGENT_CACHE", ""), ("HOME", "/home/someone")];
        assert_eq!(
            cache_dir_from(environment(&home)),
            Some(PathBuf::from("/home/someone/.cache/skills-agent/builtin-skills"))
        );
        assert_eq!(cache_dir_from(environment(&[("HOME", "")])), None);
        assert_eq!(cache_dir_from(environment(&[])), None);
    }

    #[test]
    fn writing_twice_keeps_the_files_and_replaces_changed_ones() -> anyhow::Result<()> {
        let temporary = tempfile::tempdir()?;
        let skill = &BUILTIN_SKILLS[0];
        let path = temporary.path().join(skill.folder).join(skill.files[0].0);
        write_builtin_skills(temporary.path())?;
        assert_eq!(fs::read_to_string(&path)?, skill.files[0].1);
        fs::write(&path, "edited")?;
        write_builtin_skills(temporary.path())?;
        assert_eq!(fs::read_to_string(&path)?, skill.files[0].1);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap_or(temporary.path()))?
            .map(|entry| entry.map(|entry| entry.file_name()))
            .collect::<std::io::Result<_>>()?;
        assert_eq!(names, vec![OsString::from(skill.files[0].0)], "no temporary file is left");
        Ok(())
    }
}
