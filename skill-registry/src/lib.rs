//! Skill roots, a metadata-only index of Agent Skills, frontmatter parsing and validation.
//!
//! A skill is a folder with a `SKILL.md` whose YAML frontmatter (between two `---` lines) names
//! and describes it; the body below is instructions for the model. This crate builds the
//! *index* (level 1 of progressive disclosure): for every skill under a set of roots, its name,
//! description, source and controls, and nothing of the body.
//!
//! **Platform: Unix** (Linux, macOS, the BSDs; tested on Linux). `SKILL.md` is opened with
//! `O_NOFOLLOW | O_NONBLOCK` and symlink cycles are found by device and inode; the `fadvise`
//! read hint is Linux/Android only. Other targets stop with a `compile_error!`.
//!
//! # Design
//!
//! * **Roots and priority.** A [`SkillRoot`] has a [`RootKind`]: project > user > extra >
//!   builtin ([`default_roots`] gives the usual directories, [`builtin_root`] the skills shipped
//!   with the runtime, embedded in the binary and written into a cache directory at first use).
//!   Two skills with the same name: the one from the higher-priority root wins, the other lands
//!   in [`SkillIndex::shadowed`] with a `shadowed` diagnostic, and [`SkillIndex::select`] with a
//!   [`SourceSelector`] can still pick it.
//! * **Discovery** is a breadth-first walk (`walkdir` one level at a time, sorted), bounded by
//!   depth and directory count, with include/exclude globs (`globset`). Dot-directories and
//!   `node_modules` are skipped; symlinked folders and `SKILL.md` files are followed, and a
//!   symlink back to an ancestor is reported as a cycle. Limits that cut the walk are reported.
//! * **Bounded reads.** Only the head of each `SKILL.md` is read, in 2 KiB reads, up to the
//!   closing `---` line ([`IndexConfig::max_frontmatter_bytes`] caps it). A skill with a 200 KB
//!   body costs one 2 KiB read. [`IndexStats`] counts the bytes.
//! * **YAML** is parsed with `saphyr` (YAML 1.2, maintained, keeps line positions), so every
//!   diagnostic carries the file line of the offending key.
//! * **Validation** follows the Agent Skills format (name and description rules; optional
//!   `license`, `compatibility`, `metadata`, `allowed-tools`) and recognises Claude Code's
//!   controls (`disable-model-invocation`, `user-invocable`, `argument-hint`, `model`). Unknown
//!   keys are kept in [`Skill::extra`]. In [`Mode::Lenient`] (the default) recoverable problems
//!   are warnings and the skill is loaded; a missing description or unparseable YAML skips the
//!   skill with an error; a one-line unquoted value YAML rejects (`key: value: more`,
//!   `` key: `x` ``, `key: @x`, …) is retried as a string with a warning, and bytes that are not
//!   UTF-8 are read as U+FFFD with a warning. In [`Mode::Strict`] every violation is an error. Each [`Diagnostic`] names the
//!   file, the line when known, the [`Rule`] and a message; one bad skill never hides another.
//! * **Catalog.** [`Catalog::render`] writes the level-1 list for the model within a character
//!   budget and reports which skills were left out.
//!
//! # Example
//!
//! ```
//! use skills_agent_registry::{Catalog, IndexConfig, RootKind, SkillIndex, SkillRoot};
//!
//! let root = std::env::temp_dir().join(format!("skill-registry-doctest-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("pdf-forms"))?;
//! std::fs::write(
//!     root.join("pdf-forms/SKILL.md"),
//!     "---\nname: pdf-forms\ndescription: >-\n  Fill PDF forms.\n  Use for PDF form fields.\n---\n# Body\n",
//! )?;
//!
//! let index = SkillIndex::build(&[SkillRoot::new(RootKind::Project, &root)], &IndexConfig::default())?;
//! let skill = index.get("pdf-forms").expect("indexed");
//! assert_eq!(skill.description, "Fill PDF forms. Use for PDF form fields.");
//! assert!(index.diagnostics.is_empty());
//!
//! let catalog = Catalog::render(&index, 2000);
//! assert!(catalog.text.starts_with("- pdf-forms: Fill PDF forms."));
//! std::fs::remove_dir_all(&root)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(unix))]
compile_error!(
    "skills-agent-registry needs a Unix target: it opens SKILL.md with O_NOFOLLOW | O_NONBLOCK and \
     identifies folders by device and inode"
);

mod catalog;
mod diagnostic;
mod discovery;
mod error;
mod frontmatter;
mod index;
mod roots;
mod skill;

pub use catalog::Catalog;
pub use diagnostic::{Diagnostic, Mode, Rule, Severity};
pub use discovery::{SKILL_FILE_NAME, file_kind, validate_skill_text};
pub use error::{Error, Result};
pub use index::{
    IndexConfig, IndexStats, RootReport, RootStatus, ShadowedSkill, SkillIndex, SourceSelector,
};
pub use roots::{
    BUILTIN_CACHE_FOLDER, BUILTIN_SKILLS, BuiltinSkill, PROJECT_ROOTS, USER_ROOTS,
    builtin_cache_dir, builtin_root, default_roots, extra_roots, write_builtin_skills,
};
pub use skill::{
    Controls, KNOWN_EXTENSION_KEYS, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS,
    RootKind, Skill, SkillRoot, SkillSource, split_allowed_tools,
};

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
