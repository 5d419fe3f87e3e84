//! Fuzz target: any `SKILL.md` bytes. Validation must not panic in either mode, a skill comes
//! back exactly when no error was reported, and strict mode never accepts what lenient rejects.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skills_agent_registry::{Mode, RootKind, Severity, SkillSource, validate_skill_text};

fuzz_target!(|contents: &[u8]| {
    let source = SkillSource { kind: RootKind::Project, root: "/skills".into() };
    let path = std::path::Path::new("/skills/fuzzed-skill/SKILL.md");
    let (lenient, lenient_diagnostics) = validate_skill_text(contents, path, &source, Mode::Lenient);
    let (strict, strict_diagnostics) = validate_skill_text(contents, path, &source, Mode::Strict);
    for (skill, diagnostics) in [(&lenient, &lenient_diagnostics), (&strict, &strict_diagnostics)] {
        let has_error = diagnostics.iter().any(|diagnostic| diagnostic.severity == Severity::Error);
        assert_eq!(skill.is_some(), !has_error);
    }
    if strict.is_some() {
        assert_eq!(strict, lenient);
    }
});
