//! The builtin skills: valid in strict mode, the embedded copies equal the shipped folder, and
//! the builtin root is written from the embedded copies into the cache, never read from the
//! source tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;
use pretty_assertions::assert_eq;
use skills_agent_registry::{
    BUILTIN_SKILLS, IndexConfig, Mode, RootKind, SkillIndex, SkillRoot, builtin_root,
    default_roots, write_builtin_skills,
};

/// The builtin skills' folder in this crate's sources, the one `BUILTIN_SKILLS` embeds.
fn shipped() -> SkillRoot {
    SkillRoot::new(RootKind::Builtin, Path::new(env!("CARGO_MANIFEST_DIR")).join("builtin"))
}

#[test]
fn builtin_skills_pass_strict_validation() -> Result<()> {
    let strict = IndexConfig { mode: Mode::Strict, ..IndexConfig::default() };
    let index = SkillIndex::build(&[shipped()], &strict)?;
    assert_eq!(index.diagnostics, vec![]);
    let names: Vec<&str> = index.skills.iter().map(|skill| skill.name.as_str()).collect();
    assert_eq!(names, vec!["skill-authoring"]);
    assert_eq!(index.skills[0].source.kind, RootKind::Builtin);
    Ok(())
}

/// Every file below `directory`, relative path to contents.
fn files_below(directory: &Path) -> Result<BTreeMap<PathBuf, String>> {
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(directory) {
        let entry = entry?;
        if entry.file_type().is_file() {
            let relative = entry.path().strip_prefix(directory)?.to_path_buf();
            files.insert(relative, std::fs::read_to_string(entry.path())?);
        }
    }
    Ok(files)
}

#[test]
fn every_shipped_file_is_embedded_as_it_is() -> Result<()> {
    let embedded: BTreeMap<PathBuf, String> = BUILTIN_SKILLS
        .iter()
        .flat_map(|skill| {
            skill.files.iter().map(|(relative, contents)| {
                (Path::new(skill.folder).join(relative), (*contents).to_owned())
            })
        })
        .collect();
    assert_eq!(embedded, files_below(&shipped().path)?);
    Ok(())
}

#[test]
fn written_builtin_skills_index_like_the_shipped_ones() -> Result<()> {
    let temporary = tempfile::tempdir()?;
    let written = write_builtin_skills(temporary.path())?;
    let config = IndexConfig::default();
    let from_written = SkillIndex::build(&[written], &config)?;
    let from_shipped = SkillIndex::build(&[shipped()], &config)?;
    let describe = |index: &SkillIndex| {
        index
            .skills
            .iter()
            .map(|skill| (skill.name.clone(), skill.description.clone(), skill.controls.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(describe(&from_written), describe(&from_shipped));
    Ok(())
}

/// Set in the child process of [`the_builtin_root_is_written_into_the_cache`]: the cache it
/// was given.
const CHILD: &str = "SKILL_REGISTRY_TEST_CACHE";

/// `builtin_root` and `default_roots` write into `$SKILLS_AGENT_CACHE`, so they run in a child
/// process of this test binary with that variable set to a temporary directory (a test cannot
/// set the variable for itself, and must not write into the real cache).
#[test]
fn the_builtin_root_is_written_into_the_cache() -> Result<()> {
    if let Some(cache) = std::env::var_os(CHILD) {
        return check_builtin_root_in(Path::new(&cache));
    }
    let cache = tempfile::tempdir()?;
    let status = Command::new(std::env::current_exe()?)
        .args(["--exact", "the_builtin_root_is_written_into_the_cache", "--test-threads=1"])
        .env(CHILD, cache.path())
        .env("SKILLS_AGENT_CACHE", cache.path())
        .status()?;
    assert!(status.success(), "the child test failed: {status}");
    Ok(())
}

fn check_builtin_root_in(cache: &Path) -> Result<()> {
    let root = builtin_root();
    assert_eq!(root.kind, RootKind::Builtin);
    assert_eq!(root.path, cache.join("builtin-skills"));
    assert_eq!(files_below(&root.path)?, files_below(&shipped().path)?);
    let index = SkillIndex::build(&[root], &IndexConfig::default())?;
    assert_eq!(index.skills.len(), 1);
    assert_eq!(index.skills[0].source.root, cache.join("builtin-skills"));

    let roots = default_roots("/work/project".as_ref(), Some("/home/someone".as_ref()));
    let rendered: Vec<String> = roots
        .iter()
        .map(|root| format!("{} {}", root.kind.as_str(), root.path.display()))
        .collect();
    assert_eq!(
        rendered,
        vec![
            "project /work/project/.skills".to_owned(),
            "project /work/project/.agents/skills".to_owned(),
            "project /work/project/.claude/skills".to_owned(),
            "user /home/someone/.config/skills-agent/skills".to_owned(),
            "user /home/someone/.agents/skills".to_owned(),
            "user /home/someone/.claude/skills".to_owned(),
            format!("builtin {}", cache.join("builtin-skills").display()),
        ]
    );
    Ok(())
}
