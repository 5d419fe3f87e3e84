//! Property tests: any `SKILL.md` content — random bytes or YAML-shaped noise — indexes without a
//! panic, reads at most the frontmatter limit, and either yields a skill or explains why not.

// Test helpers outside `#[test]` functions: a failure to set up the temporary folder fails the test.
#![allow(clippy::unwrap_used)]

use std::fs;

use proptest::prelude::*;
use skills_agent_registry::{
    IndexConfig, Mode, RootKind, Severity, SkillIndex, SkillRoot, SkillSource, validate_skill_text,
};

fn index_one(contents: &[u8], mode: Mode) -> SkillIndex {
    let temporary = tempfile::tempdir().unwrap();
    let folder = temporary.path().join("some-skill");
    fs::create_dir_all(&folder).unwrap();
    fs::write(folder.join("SKILL.md"), contents).unwrap();
    let config = IndexConfig { mode, max_frontmatter_bytes: 4096, ..IndexConfig::default() };
    SkillIndex::build(&[SkillRoot::new(RootKind::Project, temporary.path())], &config).unwrap()
}

fn check(contents: &[u8]) {
    for mode in [Mode::Lenient, Mode::Strict] {
        let index = index_one(contents, mode);
        assert!(index.stats.frontmatter_bytes_read <= 4096);
        let has_error = index.diagnostics.iter().any(|d| d.severity == Severity::Error);
        // Exactly one of: the skill was indexed, or an error says why not.
        assert_eq!(index.skills.len() == 1, !has_error, "{:?}", index.diagnostics);
        // The in-memory validator agrees with the index (below the read limit).
        if contents.len() < 4096 {
            let source = SkillSource { kind: RootKind::Project, root: "/root".into() };
            let (skill, diagnostics) =
                validate_skill_text(contents, "/root/some-skill/SKILL.md".as_ref(), &source, mode);
            assert_eq!(skill.is_some(), index.skills.len() == 1);
            let rules = |list: &[skills_agent_registry::Diagnostic]| {
                list.iter().map(|d| (d.rule, d.line)).collect::<Vec<_>>()
            };
            assert_eq!(rules(&diagnostics), rules(&index.diagnostics));
        }
    }
}

const PIECES: &[&str] = &[
    "---\n",
    "name: some-skill\n",
    "description: ",
    "Use when: x",
    "\"quoted: yes\"",
    "'it''s'",
    "|-\n  block\n",
    ">\n  folded\n",
    "metadata:\n  a: 1\n",
    "allowed-tools: [Read, Bash(x:*)]\n",
    "- item\n",
    "{ flow: map }",
    "&anchor x\n",
    "*anchor\n",
    "!!binary aGVsbG8=\n",
    "\r\n",
    "\t",
    "\u{feff}",
    "é",
    "<tag>",
    "---",
    "...\n",
    "key: value\n",
    "\n",
    "  ",
    "? complex\n: value\n",
    "%YAML 1.2\n",
    "disable-model-invocation: yes\n",
    "user-invocable: \"false\"\n",
    "#",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(contents in proptest::collection::vec(any::<u8>(), 0..3000)) {
        check(&contents);
    }

    #[test]
    fn yaml_shaped_noise_never_panics(pieces in proptest::collection::vec(0..PIECES.len(), 0..40)) {
        let mut contents = String::from("---\n");
        for piece in pieces {
            contents.push_str(PIECES[piece]);
        }
        contents.push_str("\n---\nbody\n");
        check(contents.as_bytes());
    }
}
