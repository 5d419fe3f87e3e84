//! The builtin skills: valid in strict mode, and the embedded copies equal the shipped folder.

use anyhow::Result;
use pretty_assertions::assert_eq;
use skill_registry::{
    IndexConfig, Mode, RootKind, SkillIndex, builtin_root, default_roots, write_builtin_skills,
};

#[test]
fn builtin_skills_pass_strict_validation() -> Result<()> {
    let strict = IndexConfig { mode: Mode::Strict, ..IndexConfig::default() };
    let index = SkillIndex::build(&[builtin_root()], &strict)?;
    assert_eq!(index.diagnostics, vec![]);
    let names: Vec<&str> = index.skills.iter().map(|skill| skill.name.as_str()).collect();
    assert_eq!(names, vec!["skill-authoring"]);
    assert_eq!(index.skills[0].source.kind, RootKind::Builtin);
    Ok(())
}

#[test]
fn written_builtin_skills_index_like_the_shipped_ones() -> Result<()> {
    let temporary = tempfile::tempdir()?;
    let written = write_builtin_skills(temporary.path())?;
    let config = IndexConfig::default();
    let from_written = SkillIndex::build(&[written], &config)?;
    let from_shipped = SkillIndex::build(&[builtin_root()], &config)?;
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

#[test]
fn default_roots_are_project_then_user_then_builtin() {
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
            format!("builtin {}", builtin_root().path.display()),
        ]
    );
}
