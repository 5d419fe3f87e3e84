//! Skill metadata (level 1 of progressive disclosure) and its validation against the format.
//!
//! The rules are the public Agent Skills format (agentskills.io) plus Claude Code's extension
//! fields. [`build_skill`] turns parsed frontmatter into a [`Skill`], reporting every broken
//! rule; whether a rule is a warning or an error depends on the [`Mode`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use unicode_normalization::UnicodeNormalization as _;

use crate::diagnostic::{Diagnostic, Mode, Rule, Severity};
use crate::frontmatter::{Field, ParsedFrontmatter, QuoteReason};

/// The longest valid `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest valid `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The longest valid `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// Keys of Claude Code and other agents that are recognised and kept in [`Skill::extra`]
/// without an `unknown-key` diagnostic.
pub const KNOWN_EXTENSION_KEYS: &[&str] = &["context", "agent", "hooks"];

/// Where a root sits in the priority order. Declaration order is priority order: a project
/// skill shadows a user skill of the same name, which shadows an extra one, which shadows a
/// builtin one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    /// Skills of the project being worked on (`./.skills`, `./.agents/skills`, `./.claude/skills`).
    Project,
    /// Skills of the user (`~/.config/skills-agent/skills`, `~/.agents/skills`, `~/.claude/skills`).
    User,
    /// Extra roots named in configuration or on the command line, in the order given.
    Extra,
    /// Skills shipped with the runtime.
    Builtin,
}

impl RootKind {
    /// The lower-case name used in output (`project`, `user`, `extra`, `builtin`).
    pub fn as_str(self) -> &'static str {
        match self {
            RootKind::Project => "project",
            RootKind::User => "user",
            RootKind::Extra => "extra",
            RootKind::Builtin => "builtin",
        }
    }
}

/// A directory that holds skill folders, and its place in the priority order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillRoot {
    /// The priority class of the root.
    pub kind: RootKind,
    /// The directory, as configured.
    pub path: PathBuf,
}

impl SkillRoot {
    /// A root of `kind` at `path`.
    pub fn new(kind: RootKind, path: impl Into<PathBuf>) -> Self {
        SkillRoot { kind, path: path.into() }
    }
}

/// Where a skill came from: the kind and path of its root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillSource {
    /// The priority class of the root.
    pub kind: RootKind,
    /// The root directory, as configured.
    pub root: PathBuf,
}

/// The controls a skill declares: fields that change how the runtime may use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Controls {
    /// `disable-model-invocation`: the model must not select the skill on its own (default false).
    pub disable_model_invocation: bool,
    /// `user-invocable`: the user may invoke the skill as a command (default true).
    pub user_invocable: bool,
    /// `allowed-tools`: the tools the skill may use without asking, when declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// `license`: the skill's licence name or a reference to a licence file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// `compatibility`: environment requirements (≤ 500 characters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// `metadata`: free string-to-string properties.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// `argument-hint` (Claude Code): what arguments the skill expects when invoked as a command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// `model` (Claude Code): the model the skill asks for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Default for Controls {
    fn default() -> Self {
        Controls {
            disable_model_invocation: false,
            user_invocable: true,
            allowed_tools: None,
            license: None,
            compatibility: None,
            metadata: BTreeMap::new(),
            argument_hint: None,
            model: None,
        }
    }
}

/// One indexed skill: metadata only, never the body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// The skill's name (the folder name when the frontmatter has none, in lenient mode).
    pub name: String,
    /// What the skill does and when to use it.
    pub description: String,
    /// The root the skill was found in.
    pub source: SkillSource,
    /// The `SKILL.md` file, as reached from the root (symlinks not resolved).
    pub path: PathBuf,
    /// The skill folder, as reached from the root.
    pub directory: PathBuf,
    /// Declared controls.
    pub controls: Controls,
    /// Every other frontmatter field, kept as written (unknown keys, extension keys, and known
    /// keys whose value had the wrong type).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Value>,
}

/// Where a skill file sits, for validation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SkillFile<'a> {
    pub(crate) path: &'a Path,
    pub(crate) directory: &'a Path,
    pub(crate) folder_name: &'a str,
    pub(crate) source: &'a SkillSource,
}

/// Collects the diagnostics of one skill file and remembers whether any was an error.
struct Reporter<'a> {
    path: &'a Path,
    mode: Mode,
    diagnostics: &'a mut Vec<Diagnostic>,
    has_error: bool,
}

impl Reporter<'_> {
    fn report(&mut self, rule: Rule, line: Option<usize>, message: String) {
        let diagnostic = Diagnostic::new(self.path, self.mode, rule, line, message);
        self.has_error |= diagnostic.severity == Severity::Error;
        self.diagnostics.push(diagnostic);
    }

    /// The value of `field` as text: strings as they are, numbers and booleans converted with a
    /// `field-type` diagnostic, `null` as absent, lists and mappings refused.
    fn text(&mut self, field: &Field) -> Option<String> {
        match &field.value {
            Value::String(text) => Some(text.clone()),
            Value::Null => None,
            Value::Bool(_) | Value::Number(_) => {
                self.report(
                    Rule::FieldType,
                    Some(field.line),
                    format!("`{}` should be a string, read {} as text", field.key, field.value),
                );
                Some(field.value.to_string())
            }
            Value::Array(_) | Value::Object(_) => {
                self.report(
                    Rule::FieldType,
                    Some(field.line),
                    format!(
                        "`{}` should be a string, found {}",
                        field.key,
                        json_kind(&field.value)
                    ),
                );
                None
            }
        }
    }

    fn boolean(&mut self, field: &Field, default: bool) -> bool {
        match &field.value {
            Value::Bool(value) => *value,
            // `"true"`, and YAML 1.1's `yes`/`on` (which YAML 1.2 reads as strings but PyYAML
            // and older tools read as booleans): the author's intent is clear.
            Value::String(text)
                if ["true", "yes", "on"].iter().any(|word| text.eq_ignore_ascii_case(word)) =>
            {
                self.report(
                    Rule::FieldType,
                    Some(field.line),
                    quoted_boolean(&field.key, text, true),
                );
                true
            }
            Value::String(text)
                if ["false", "no", "off"].iter().any(|word| text.eq_ignore_ascii_case(word)) =>
            {
                self.report(
                    Rule::FieldType,
                    Some(field.line),
                    quoted_boolean(&field.key, text, false),
                );
                false
            }
            other => {
                self.report(
                    Rule::FieldType,
                    Some(field.line),
                    format!(
                        "`{}` should be true or false, found {}; using {default}",
                        field.key,
                        json_kind(other)
                    ),
                );
                default
            }
        }
    }
}

fn quoted_boolean(key: &str, text: &str, value: bool) -> String {
    format!("`{key}` should be a boolean, not the string \"{text}\"; read as {value}")
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Splits an `allowed-tools` string into tools: separated by blanks or commas, except inside
/// parentheses (`Bash(git add:*)` is one tool).
pub fn split_allowed_tools(text: &str) -> Vec<String> {
    let mut tools = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for character in text.chars() {
        match character {
            '(' => {
                depth += 1;
                current.push(character);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(character);
            }
            ',' | ' ' | '\t' | '\n' | '\r' if depth == 0 => {
                if !current.is_empty() {
                    tools.push(std::mem::take(&mut current));
                }
            }
            _ => current.push(character),
        }
    }
    if !current.is_empty() {
        tools.push(current);
    }
    tools
}

/// Validates parsed frontmatter and builds the skill. Returns `None` when an error-severity
/// diagnostic was reported (the skill is skipped); the diagnostics are appended either way.
pub(crate) fn build_skill(
    file: SkillFile<'_>,
    parsed: ParsedFrontmatter,
    mode: Mode,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Skill> {
    let first_diagnostic = diagnostics.len();
    let mut reporter = Reporter { path: file.path, mode, diagnostics, has_error: false };
    for quoted in &parsed.quoted_lines {
        let (rule, message) = match quoted.reason {
            QuoteReason::Colon => (
                Rule::YamlUnquotedColon,
                "unquoted value contains `: `; read as a string (quote the value)",
            ),
            QuoteReason::Other => (
                Rule::YamlUnquotedValue,
                "unquoted value is not valid YAML here; read as a string (quote the value)",
            ),
        };
        reporter.report(rule, Some(quoted.line), message.to_owned());
    }
    let mut name: Option<(String, usize)> = None;
    let mut description: Option<(String, usize)> = None;
    let mut controls = Controls::default();
    let mut extra = BTreeMap::new();
    for field in parsed.fields {
        match field.key.as_str() {
            "name" => name = reporter.text(&field).map(|text| (text, field.line)),
            "description" => description = reporter.text(&field).map(|text| (text, field.line)),
            "license" => controls.license = reporter.text(&field),
            "compatibility" => {
                controls.compatibility = reporter.text(&field);
                if let Some(text) = &controls.compatibility {
                    let length = text.chars().count();
                    if length > MAX_COMPATIBILITY_CHARS {
                        reporter.report(
                            Rule::CompatibilityTooLong,
                            Some(field.line),
                            format!(
                                "`compatibility` has {length} characters, more than \
                                 {MAX_COMPATIBILITY_CHARS}"
                            ),
                        );
                    }
                }
            }
            "metadata" => match &field.value {
                Value::Object(entries) => {
                    for (key, value) in entries {
                        let text = match value {
                            Value::String(text) => text.clone(),
                            other => {
                                reporter.report(
                                    Rule::MetadataValue,
                                    Some(field.line),
                                    format!(
                                        "`metadata.{key}` should be a string, found {}; kept as \
                                         text",
                                        json_kind(other)
                                    ),
                                );
                                other.to_string()
                            }
                        };
                        controls.metadata.insert(key.clone(), text);
                    }
                }
                Value::Null => {}
                other => {
                    reporter.report(
                        Rule::FieldType,
                        Some(field.line),
                        format!("`metadata` should be a mapping, found {}", json_kind(other)),
                    );
                    extra.insert(field.key.clone(), field.value.clone());
                }
            },
            "allowed-tools" => match &field.value {
                Value::String(text) => controls.allowed_tools = Some(split_allowed_tools(text)),
                Value::Array(items) => {
                    reporter.report(
                        Rule::AllowedToolsFormat,
                        Some(field.line),
                        "`allowed-tools` is a list; the format asks for a space-separated string"
                            .to_owned(),
                    );
                    let tools = items
                        .iter()
                        .map(|item| match item {
                            Value::String(text) => text.trim().to_owned(),
                            other => other.to_string(),
                        })
                        .filter(|tool| !tool.is_empty())
                        .collect();
                    controls.allowed_tools = Some(tools);
                }
                Value::Null => {}
                other => {
                    reporter.report(
                        Rule::FieldType,
                        Some(field.line),
                        format!(
                            "`allowed-tools` should be a space-separated string, found {}",
                            json_kind(other)
                        ),
                    );
                    extra.insert(field.key.clone(), field.value.clone());
                }
            },
            "disable-model-invocation" => {
                controls.disable_model_invocation = reporter.boolean(&field, false);
            }
            "user-invocable" => controls.user_invocable = reporter.boolean(&field, true),
            "argument-hint" if field.value.is_array() => {
                // `argument-hint: [name | description]` is meant as text but parses as a list.
                reporter.report(
                    Rule::FieldType,
                    Some(field.line),
                    "`argument-hint` parses as a YAML list; read back as text (quote it)"
                        .to_owned(),
                );
                let items: Vec<String> = field
                    .value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|item| match item {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                controls.argument_hint = Some(format!("[{}]", items.join(", ")));
            }
            "argument-hint" | "model" => {
                let text = reporter.text(&field);
                if text.is_none() && !field.value.is_null() {
                    extra.insert(field.key.clone(), field.value.clone());
                }
                if field.key == "model" {
                    controls.model = text;
                } else {
                    controls.argument_hint = text;
                }
            }
            key if KNOWN_EXTENSION_KEYS.contains(&key) => {
                extra.insert(field.key.clone(), field.value);
            }
            _ => {
                reporter.report(
                    Rule::UnknownKey,
                    Some(field.line),
                    format!("unknown key `{}` (kept)", field.key),
                );
                extra.insert(field.key.clone(), field.value);
            }
        }
    }

    let name = check_name(&mut reporter, name, file.folder_name);
    let description = match description {
        None => {
            reporter.report(
                Rule::DescriptionMissing,
                None,
                "no `description`: the model cannot know when to use the skill".to_owned(),
            );
            String::new()
        }
        Some((text, line)) => check_description(&mut reporter, text.trim(), line),
    };
    let has_error = reporter.has_error;
    // This file's diagnostics in line order (file-level ones, without a line, first).
    diagnostics[first_diagnostic..].sort_by_key(|diagnostic| diagnostic.line);
    if has_error {
        return None;
    }
    Some(Skill {
        name,
        description,
        source: file.source.clone(),
        path: file.path.to_path_buf(),
        directory: file.directory.to_path_buf(),
        controls,
        extra,
    })
}

fn check_name(reporter: &mut Reporter<'_>, name: Option<(String, usize)>, folder: &str) -> String {
    let (name, line) = match name {
        Some((text, line)) if !text.trim().is_empty() => (text.trim().to_owned(), line),
        _ => {
            reporter.report(
                Rule::NameMissing,
                None,
                format!("no `name`; using the folder name `{folder}`"),
            );
            return folder.to_owned();
        }
    };
    // The rules apply to the NFKC form, as in `skills-ref` (a decomposed `é` is one letter).
    let normalized: String = name.nfkc().collect();
    let length = normalized.chars().count();
    if length > MAX_NAME_CHARS {
        reporter.report(
            Rule::NameTooLong,
            Some(line),
            format!("name `{name}` has {length} characters, more than {MAX_NAME_CHARS}"),
        );
    }
    // As the reference validator (`skills-ref`) reads the format: Unicode letters and digits
    // that are not upper or title case, and hyphens.
    if let Some(bad) = normalized.chars().find(|&character| {
        let lowercase = character.to_lowercase().eq(std::iter::once(character));
        !(character == '-' || (character.is_alphanumeric() && lowercase))
    }) {
        reporter.report(
            Rule::NameCharacters,
            Some(line),
            format!(
                "name `{name}` contains {bad:?}; only lowercase letters, digits and hyphens are \
                 allowed"
            ),
        );
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        reporter.report(
            Rule::NameHyphens,
            Some(line),
            format!("name `{name}` starts or ends with a hyphen or has two in a row"),
        );
    }
    // As `skills-ref` compares them: NFKC forms, so a folder name in another normal form
    // (macOS stores names decomposed, NFD) still matches.
    let same_as_folder = name == folder || normalized.chars().eq(folder.nfkc());
    if !same_as_folder {
        reporter.report(
            Rule::NameFolderMismatch,
            Some(line),
            format!("name `{name}` differs from the folder name `{folder}`"),
        );
    }
    name
}

fn check_description(reporter: &mut Reporter<'_>, text: &str, line: usize) -> String {
    if text.is_empty() {
        reporter.report(Rule::DescriptionEmpty, Some(line), "`description` is empty".to_owned());
    }
    let length = text.chars().count();
    if length > MAX_DESCRIPTION_CHARS {
        reporter.report(
            Rule::DescriptionTooLong,
            Some(line),
            format!("`description` has {length} characters, more than {MAX_DESCRIPTION_CHARS}"),
        );
    }
    if text.contains(['<', '>']) {
        reporter.report(
            Rule::DescriptionAngleBrackets,
            Some(line),
            "`description` contains `<` or `>`".to_owned(),
        );
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_rules(name: &str, folder: &str) -> Vec<Rule> {
        let mut diagnostics = Vec::new();
        let mut reporter = Reporter {
            path: Path::new("skills/x/SKILL.md"),
            mode: Mode::Strict,
            diagnostics: &mut diagnostics,
            has_error: false,
        };
        check_name(&mut reporter, Some((name.to_owned(), 2)), folder);
        diagnostics.into_iter().map(|diagnostic| diagnostic.rule).collect()
    }

    #[test]
    fn name_and_folder_are_compared_in_nfkc_form() {
        // "café" with a precomposed é (NFC) against a folder named with e + U+0301 (NFD).
        assert_eq!(name_rules("caf\u{e9}", "cafe\u{301}"), vec![]);
        assert_eq!(name_rules("cafe\u{301}", "caf\u{e9}"), vec![]);
        assert_eq!(name_rules("cafe", "caf\u{e9}"), vec![Rule::NameFolderMismatch]);
    }

    #[test]
    fn allowed_tools_keep_parenthesised_patterns_whole() {
        assert_eq!(
            split_allowed_tools("Bash(git add:*), Bash(git status:*) Read,Grep"),
            vec!["Bash(git add:*)", "Bash(git status:*)", "Read", "Grep"]
        );
    }
}
