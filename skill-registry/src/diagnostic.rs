//! Diagnostics: every problem found while indexing, with file, line, rule id and message.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// How serious a diagnostic is. An [`Severity::Error`] on a skill means the skill was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// The skill (or root) was skipped, or the rule is enforced in strict mode.
    Error,
    /// The skill was loaded, but something is off.
    Warning,
    /// Worth knowing; nothing is wrong with the file (e.g. a shadowed skill).
    Info,
}

impl fmt::Display for Severity {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        })
    }
}

/// Which rule a diagnostic is about. The kebab-case id (see [`Rule::id`]) is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Rule {
    /// A root exists but cannot be listed.
    RootUnreadable,
    /// A directory below a root cannot be listed.
    DirectoryUnreadable,
    /// Discovery stopped at the directory limit of a root.
    DirectoryLimit,
    /// Directories deeper than the depth limit were not searched.
    DepthLimit,
    /// A symlink points back to one of its own ancestors.
    SymlinkCycle,
    /// A symlink points nowhere.
    SymlinkDangling,
    /// A symlink was not followed because following symlinks is switched off.
    SymlinkNotFollowed,
    /// `SKILL.md` is not a regular file (a directory, FIFO, device or socket).
    SkillFileNotRegular,
    /// `SKILL.md` cannot be opened or read.
    SkillFileUnreadable,
    /// A file named like `SKILL.md` in another case (`skill.md`), which is not recognised.
    SkillFileName,
    /// The file does not start with a `---` line.
    FrontmatterMissing,
    /// No closing `---` line was found.
    FrontmatterUnclosed,
    /// The frontmatter is larger than the read limit.
    FrontmatterTooLarge,
    /// The frontmatter is not valid UTF-8 (the bad bytes are read as U+FFFD).
    FrontmatterEncoding,
    /// The frontmatter is not a YAML mapping.
    FrontmatterNotMapping,
    /// The YAML does not parse.
    YamlSyntax,
    /// An unquoted `key: value: more` line, read as a string by the lenient retry.
    YamlUnquotedColon,
    /// Another unquoted value YAML rejects (`` `x` ``, `@x`, `*x* y`, `[x] y`, a tab after the
    /// colon), read as a string by the lenient retry.
    YamlUnquotedValue,
    /// A field has the wrong YAML type.
    FieldType,
    /// A key that neither the Agent Skills format nor a known extension defines.
    UnknownKey,
    /// `name` is absent or empty.
    NameMissing,
    /// `name` is longer than 64 characters.
    NameTooLong,
    /// `name` has characters other than lowercase letters, digits and hyphens.
    NameCharacters,
    /// `name` starts or ends with a hyphen or has two in a row.
    NameHyphens,
    /// `name` differs from the skill's folder name.
    NameFolderMismatch,
    /// `description` is absent.
    DescriptionMissing,
    /// `description` is empty or only whitespace.
    DescriptionEmpty,
    /// `description` is longer than 1024 characters.
    DescriptionTooLong,
    /// `description` contains `<` or `>`.
    DescriptionAngleBrackets,
    /// `compatibility` is longer than 500 characters.
    CompatibilityTooLong,
    /// A `metadata` value is not a string.
    MetadataValue,
    /// `allowed-tools` is a YAML list, not the space-separated string of the format.
    AllowedToolsFormat,
    /// Two skills in the same root have the same name; the later one is not used.
    DuplicateName,
    /// A skill is hidden by a skill of the same name in a root of higher priority.
    Shadowed,
}

impl Rule {
    /// The stable kebab-case id of the rule, as it appears in JSON output.
    pub fn id(self) -> &'static str {
        match self {
            Rule::RootUnreadable => "root-unreadable",
            Rule::DirectoryUnreadable => "directory-unreadable",
            Rule::DirectoryLimit => "directory-limit",
            Rule::DepthLimit => "depth-limit",
            Rule::SymlinkCycle => "symlink-cycle",
            Rule::SymlinkDangling => "symlink-dangling",
            Rule::SymlinkNotFollowed => "symlink-not-followed",
            Rule::SkillFileNotRegular => "skill-file-not-regular",
            Rule::SkillFileUnreadable => "skill-file-unreadable",
            Rule::SkillFileName => "skill-file-name",
            Rule::FrontmatterMissing => "frontmatter-missing",
            Rule::FrontmatterUnclosed => "frontmatter-unclosed",
            Rule::FrontmatterTooLarge => "frontmatter-too-large",
            Rule::FrontmatterEncoding => "frontmatter-encoding",
            Rule::FrontmatterNotMapping => "frontmatter-not-mapping",
            Rule::YamlSyntax => "yaml-syntax",
            Rule::YamlUnquotedColon => "yaml-unquoted-colon",
            Rule::YamlUnquotedValue => "yaml-unquoted-value",
            Rule::FieldType => "field-type",
            Rule::UnknownKey => "unknown-key",
            Rule::NameMissing => "name-missing",
            Rule::NameTooLong => "name-too-long",
            Rule::NameCharacters => "name-characters",
            Rule::NameHyphens => "name-hyphens",
            Rule::NameFolderMismatch => "name-folder-mismatch",
            Rule::DescriptionMissing => "description-missing",
            Rule::DescriptionEmpty => "description-empty",
            Rule::DescriptionTooLong => "description-too-long",
            Rule::DescriptionAngleBrackets => "description-angle-brackets",
            Rule::CompatibilityTooLong => "compatibility-too-long",
            Rule::MetadataValue => "metadata-value",
            Rule::AllowedToolsFormat => "allowed-tools-format",
            Rule::DuplicateName => "duplicate-name",
            Rule::Shadowed => "shadowed",
        }
    }

    /// The severity of a violation in lenient mode (the default, for running skills).
    ///
    /// In strict mode every warning becomes an error; information stays information except for
    /// format rules (`allowed-tools-format`).
    pub fn lenient_severity(self) -> Severity {
        match self {
            Rule::RootUnreadable
            | Rule::SkillFileNotRegular
            | Rule::SkillFileUnreadable
            | Rule::FrontmatterMissing
            | Rule::FrontmatterUnclosed
            | Rule::FrontmatterTooLarge
            | Rule::FrontmatterNotMapping
            | Rule::YamlSyntax
            | Rule::DescriptionMissing
            | Rule::DescriptionEmpty => Severity::Error,
            Rule::DirectoryUnreadable
            | Rule::DirectoryLimit
            | Rule::DepthLimit
            | Rule::SymlinkCycle
            | Rule::SymlinkDangling
            | Rule::SkillFileName
            | Rule::FrontmatterEncoding
            | Rule::YamlUnquotedColon
            | Rule::YamlUnquotedValue
            | Rule::FieldType
            | Rule::UnknownKey
            | Rule::NameMissing
            | Rule::NameTooLong
            | Rule::NameCharacters
            | Rule::NameHyphens
            | Rule::NameFolderMismatch
            | Rule::DescriptionTooLong
            | Rule::DescriptionAngleBrackets
            | Rule::CompatibilityTooLong
            | Rule::MetadataValue
            | Rule::DuplicateName => Severity::Warning,
            // A YAML list of tools is Claude Code's common form: fine for running, not the format.
            Rule::SymlinkNotFollowed | Rule::Shadowed | Rule::AllowedToolsFormat => Severity::Info,
        }
    }

    /// The severity of a violation in `mode`. In strict mode every rule of the format is an
    /// error, including the ones that are only information in lenient mode.
    pub fn severity(self, mode: Mode) -> Severity {
        match (mode, self) {
            (Mode::Lenient, rule) => rule.lenient_severity(),
            (Mode::Strict, Rule::AllowedToolsFormat) => Severity::Error,
            (Mode::Strict, rule) => match rule.lenient_severity() {
                Severity::Error | Severity::Warning => Severity::Error,
                Severity::Info => Severity::Info,
            },
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.id())
    }
}

/// How hard validation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// For running: recoverable problems are warnings and the skill is loaded anyway.
    #[default]
    Lenient,
    /// For `validate`: every rule violation is an error and the skill is skipped.
    Strict,
}

/// One problem, naming the file, the line when known, the rule and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file or directory the problem is in.
    pub path: PathBuf,
    /// The 1-based line in `path`, when the problem has one.
    pub line: Option<usize>,
    /// The rule that was broken.
    pub rule: Rule,
    /// How serious it is (depends on the [`Mode`]).
    pub severity: Severity,
    /// What is wrong, in lower case, naming the input.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic about `path` for `rule`, with the rule's severity in `mode`.
    pub(crate) fn new(
        path: &std::path::Path,
        mode: Mode,
        rule: Rule,
        line: Option<usize>,
        message: String,
    ) -> Diagnostic {
        Diagnostic { path: path.to_path_buf(), line, rule, severity: rule.severity(mode), message }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.severity, self.path.display())?;
        if let Some(line) = self.line {
            write!(formatter, ":{line}")?;
        }
        write!(formatter, ": [{}] {}", self.rule, self.message)
    }
}
