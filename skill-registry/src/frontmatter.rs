//! Bounded reading of a `SKILL.md` head and parsing of its YAML frontmatter (never the body).
//!
//! [`read_frontmatter`] reads the file in 2 KiB chunks and stops at the closing `---` line, so
//! a skill with a 200 KB body costs one or two small reads. [`parse_yaml`] turns the YAML into
//! an ordered list of top-level fields, each with the file line of its key, and does the lenient
//! retry for unquoted `key: value: more` lines.

use std::io::{self, Read};

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};
use serde_json::Value;

/// Bytes asked for per read: enough for almost every real frontmatter in one read.
pub(crate) const READ_CHUNK_BYTES: usize = 2048;

/// The raw frontmatter of a skill file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawFrontmatter {
    /// The YAML between the delimiter lines, CRLF normalised to LF.
    pub(crate) yaml: String,
    /// The 1-based file line of the first YAML line (2 for a file that starts with `---`).
    pub(crate) first_line: usize,
    /// The 1-based file line of the first byte that is not UTF-8, when there is one (such bytes
    /// are read as U+FFFD, as editors and other agents do).
    pub(crate) invalid_utf8_line: Option<usize>,
}

/// Why no frontmatter could be taken from the head of a file.
#[derive(Debug)]
pub(crate) enum HeadProblem {
    /// The first line is not `---`.
    Missing,
    /// The file starts with a UTF-16 byte order mark (Windows "Unicode" text).
    Utf16,
    /// The file ended before a closing `---` line.
    Unclosed,
    /// No closing `---` line within the read limit.
    TooLarge { limit: usize },
    /// Reading failed.
    Io(io::Error),
}

/// The outcome of a bounded read, with the number of bytes it read either way.
#[derive(Debug)]
pub(crate) struct HeadRead {
    pub(crate) result: Result<RawFrontmatter, HeadProblem>,
    pub(crate) bytes_read: u64,
}

/// Whether a line (without its line break) is a `---` delimiter (trailing blanks allowed).
fn is_delimiter(line: &[u8]) -> bool {
    line.trim_ascii_end() == b"---"
}

/// Reads the frontmatter from the head of `reader`, reading at most `max_bytes`.
///
/// A UTF-8 byte order mark before the opening `---` is skipped; CRLF and LF line breaks are both
/// accepted. The body after the closing `---` line is never asked for beyond the read chunk the
/// closing line falls in.
pub(crate) fn read_frontmatter(reader: &mut impl Read, max_bytes: usize) -> HeadRead {
    let mut buffer: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES.min(max_bytes));
    let mut bytes_read: u64 = 0;
    let mut next_line_start = 0usize;
    let mut line_number = 1usize;
    let mut yaml_start: Option<usize> = None;
    let mut at_end = false;
    loop {
        // Examine every complete line (and at the end, the last partial one).
        loop {
            let rest = &buffer[next_line_start..];
            let (line, consumed) = match rest.iter().position(|&byte| byte == b'\n') {
                Some(newline) => (&rest[..newline], newline + 1),
                None if at_end && !rest.is_empty() => (rest, rest.len()),
                None => break,
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match yaml_start {
                None => {
                    let line = if line_number == 1 {
                        line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
                    } else {
                        line
                    };
                    if !is_delimiter(line) {
                        let utf16 = line_number == 1
                            && (line.starts_with(b"\xFF\xFE") || line.starts_with(b"\xFE\xFF"));
                        let problem = if utf16 { HeadProblem::Utf16 } else { HeadProblem::Missing };
                        return HeadRead { result: Err(problem), bytes_read };
                    }
                    yaml_start = Some(next_line_start + consumed);
                }
                Some(start) => {
                    if is_delimiter(line) {
                        let result = Ok(yaml_text(&buffer[start..next_line_start]));
                        return HeadRead { result, bytes_read };
                    }
                }
            }
            next_line_start += consumed;
            line_number += 1;
        }
        if at_end {
            let problem =
                if yaml_start.is_some() { HeadProblem::Unclosed } else { HeadProblem::Missing };
            return HeadRead { result: Err(problem), bytes_read };
        }
        if buffer.len() >= max_bytes {
            let problem = if yaml_start.is_some() {
                HeadProblem::TooLarge { limit: max_bytes }
            } else {
                HeadProblem::Missing
            };
            return HeadRead { result: Err(problem), bytes_read };
        }
        let old_length = buffer.len();
        let wanted = READ_CHUNK_BYTES.min(max_bytes - old_length);
        buffer.resize(old_length + wanted, 0);
        match reader.read(&mut buffer[old_length..]) {
            Ok(0) => {
                buffer.truncate(old_length);
                at_end = true;
            }
            Ok(count) => {
                buffer.truncate(old_length + count);
                bytes_read += count as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => buffer.truncate(old_length),
            Err(error) => return HeadRead { result: Err(HeadProblem::Io(error)), bytes_read },
        }
    }
}

/// Decodes the YAML bytes (bytes that are not UTF-8 become U+FFFD, and the line of the first is
/// kept for a diagnostic) and normalises CRLF to LF.
fn yaml_text(bytes: &[u8]) -> RawFrontmatter {
    let (text, invalid_utf8_line) = match std::str::from_utf8(bytes) {
        Ok(text) => (std::borrow::Cow::Borrowed(text), None),
        Err(error) => {
            let valid = &bytes[..error.valid_up_to()];
            let line = 2 + valid.iter().filter(|&&byte| byte == b'\n').count();
            (String::from_utf8_lossy(bytes), Some(line))
        }
    };
    RawFrontmatter { yaml: text.replace("\r\n", "\n"), first_line: 2, invalid_utf8_line }
}

/// One top-level frontmatter field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// The key, as written.
    pub(crate) key: String,
    /// The 1-based file line of the key.
    pub(crate) line: usize,
    /// The value, as JSON (YAML scalars resolved by the YAML 1.2 core schema).
    pub(crate) value: Value,
}

/// Why the YAML could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum YamlProblem {
    /// The YAML does not parse, even after the lenient retry.
    Syntax { line: Option<usize>, message: String },
    /// The document is not a mapping (a list or a scalar); the YAML kind found.
    NotMapping { line: usize, found: &'static str },
}

/// Why the lenient retry quoted a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuoteReason {
    /// `key: value: more` — a plain value holding `: ` (or ending in `:`).
    Colon,
    /// Any other plain value that YAML rejects: one starting with `` ` ``, `@`, `%`, `*…*`,
    /// `[x] more`, `- x`, or a tab right after the colon.
    Other,
}

/// A file line that only parsed after its value was quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QuotedLine {
    /// The 1-based file line.
    pub(crate) line: usize,
    pub(crate) reason: QuoteReason,
}

/// The parsed frontmatter: its top-level fields in file order, and the file lines that only
/// parsed after quoting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedFrontmatter {
    pub(crate) fields: Vec<Field>,
    pub(crate) quoted_lines: Vec<QuotedLine>,
}

/// Parses the YAML of `raw`; when it does not parse, retries once with every single-line plain
/// value that YAML rejects on its own (`key: value: more`, `` key: `x` ``, `key: @x`, …) quoted,
/// and reports which lines needed it.
pub(crate) fn parse_yaml(raw: &RawFrontmatter) -> Result<ParsedFrontmatter, YamlProblem> {
    match parse_mapping(&raw.yaml, raw.first_line) {
        Ok(fields) => Ok(ParsedFrontmatter { fields, quoted_lines: Vec::new() }),
        Err(first_problem) => {
            let Some((quoted_yaml, quoted)) = quote_rejected_values(&raw.yaml) else {
                return Err(first_problem);
            };
            match parse_mapping(&quoted_yaml, raw.first_line) {
                Ok(fields) => Ok(ParsedFrontmatter {
                    fields,
                    quoted_lines: quoted
                        .into_iter()
                        .map(|(line, reason)| QuotedLine {
                            line: line + raw.first_line - 1,
                            reason,
                        })
                        .collect(),
                }),
                Err(_) => Err(first_problem),
            }
        }
    }
}

fn parse_mapping(yaml: &str, first_line: usize) -> Result<Vec<Field>, YamlProblem> {
    let file_line = |yaml_line: usize| yaml_line + first_line - 1;
    // An error found at the end of the input is reported on the last YAML line, not on the
    // closing `---` line.
    let last_yaml_line = yaml.trim_end_matches('\n').split('\n').count().max(1);
    let documents = MarkedYaml::load_from_str(yaml).map_err(|error| YamlProblem::Syntax {
        line: Some(file_line(error.marker().line().clamp(1, last_yaml_line))),
        message: error.info().to_owned(),
    })?;
    let Some(document) = documents.into_iter().next() else {
        return Ok(Vec::new());
    };
    let mapping = match &document.data {
        YamlData::Mapping(mapping) => mapping,
        YamlData::Value(Scalar::Null) => return Ok(Vec::new()),
        other => {
            return Err(YamlProblem::NotMapping {
                line: file_line(document.span.start.line()),
                found: kind_name(other),
            });
        }
    };
    Ok(mapping
        .iter()
        .map(|(key, value)| Field {
            key: scalar_text(key),
            line: file_line(key.span.start.line()),
            value: to_json(value),
        })
        .collect())
}

fn kind_name<'input>(data: &YamlData<'input, MarkedYaml<'input>>) -> &'static str {
    match data {
        YamlData::Sequence(_) => "a list",
        YamlData::Mapping(_) => "a mapping",
        YamlData::Value(_) | YamlData::Representation(..) => "a scalar",
        YamlData::Tagged(..) => "a tagged value",
        YamlData::Alias(_) => "an alias",
        YamlData::BadValue => "an invalid value",
    }
}

/// The text of a key node (keys that are not strings are rendered as YAML would print them).
fn scalar_text(node: &MarkedYaml<'_>) -> String {
    match to_json(node) {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// Converts a YAML node to JSON. Aliases and invalid values become `null`; non-finite floats
/// become strings.
pub(crate) fn to_json(node: &MarkedYaml<'_>) -> Value {
    match &node.data {
        YamlData::Value(scalar) => match scalar {
            Scalar::Null => Value::Null,
            Scalar::Boolean(value) => Value::Bool(*value),
            Scalar::Integer(value) => Value::from(*value),
            Scalar::FloatingPoint(value) => serde_json::Number::from_f64(value.into_inner())
                .map_or_else(|| Value::String(value.to_string()), Value::Number),
            Scalar::String(text) => Value::String(text.to_string()),
        },
        YamlData::Representation(text, _, _) => Value::String(text.to_string()),
        YamlData::Sequence(items) => Value::Array(items.iter().map(to_json).collect()),
        YamlData::Mapping(mapping) => Value::Object(
            mapping.iter().map(|(key, value)| (scalar_text(key), to_json(value))).collect(),
        ),
        YamlData::Tagged(_, inner) => to_json(inner),
        YamlData::Alias(_) | YamlData::BadValue => Value::Null,
    }
}

/// Rewrites every `key: value` whose plain value YAML rejects (see [`quoted_value`]) as
/// `key: 'value'`; a value continued on more indented lines is quoted as a whole. Lines that
/// continue a scalar of an earlier line (block scalars, quoted or plain values that parse) are
/// left alone. Returns the new text and the 1-based YAML lines changed with the reason, or
/// `None` when no value qualifies.
fn quote_rejected_values(yaml: &str) -> Option<(String, Vec<(usize, QuoteReason)>)> {
    let lines: Vec<&str> = yaml.split('\n').collect();
    let indent_of = |line: &str| line.len() - line.trim_start_matches([' ', '\t']).len();
    let is_blank = |line: &str| line.trim().is_empty() || line.trim_start().starts_with('#');
    let mut changed = Vec::new();
    let mut output: Vec<String> = Vec::with_capacity(lines.len());
    // The indentation of the last line whose key has a value on the same line: more indented
    // lines after it continue that value.
    let mut scalar_owner_indent: Option<usize> = None;
    let mut index = 0;
    while let Some(&line) = lines.get(index) {
        let indent = indent_of(line);
        if is_blank(line) || scalar_owner_indent.is_some_and(|owner| indent > owner) {
            output.push(line.to_owned());
            index += 1;
            continue;
        }
        scalar_owner_indent =
            line.split_once(':').filter(|(_, value)| !value.trim().is_empty()).map(|_| indent);
        // The value and the more indented lines that continue it (trailing blanks excluded).
        let mut last = index;
        for (offset, next) in lines[index + 1..].iter().enumerate() {
            if is_blank(next) {
                continue;
            }
            if indent_of(next) <= indent {
                break;
            }
            last = index + 1 + offset;
        }
        match quoted_value(&lines[index..=last]) {
            Some((quoted, reason)) => {
                output.push(quoted);
                changed.push((index + 1, reason));
                index = last + 1;
            }
            None => {
                output.push(line.to_owned());
                index += 1;
            }
        }
    }
    if changed.is_empty() { None } else { Some((output.join("\n"), changed)) }
}

/// Quotes the value of a `key: value` line (`lines[0]`, continued by `lines[1..]`) when it is
/// not valid YAML on its own and the value is a plain (unquoted, non-block) scalar. On a single
/// line a trailing ` # comment` stays a comment; continuation lines keep their text (inside
/// single quotes they fold as the plain scalar would).
fn quoted_value(lines: &[&str]) -> Option<(String, QuoteReason)> {
    let (&line, continuation) = lines.split_first()?;
    let indent_length = line.len() - line.trim_start_matches([' ', '\t']).len();
    let (indent, rest) = line.split_at(indent_length);
    let colon = rest.find(':')?;
    let key = &rest[..colon];
    let key_is_plain = !key.is_empty()
        && key.chars().all(|character| character.is_alphanumeric() || "-_.".contains(character));
    if !key_is_plain {
        return None;
    }
    let after = &rest[colon + 1..];
    if !after.starts_with([' ', '\t']) {
        return None;
    }
    let value = after.trim();
    if value.is_empty() || value.starts_with(['"', '\'', '|', '>', '#']) {
        return None;
    }
    // `[Beta] text` is text; `[unclosed` is a broken list, not something to guess at.
    let unclosed_flow = (value.starts_with('[') && !value.contains(']'))
        || (value.starts_with('{') && !value.contains('}'));
    // A lone `*name` is an alias of an anchor elsewhere in the document, not text.
    let alias = value.starts_with('*') && !value.ends_with('*') && !value.contains([' ', '\t']);
    if unclosed_flow || alias {
        return None;
    }
    let mut alone = rest.to_owned();
    for next in continuation {
        alone.push('\n');
        alone.push_str(next);
    }
    if MarkedYaml::load_from_str(&alone).is_ok() {
        return None;
    }
    let (text, comment) = match value.find(" #").or_else(|| value.find("\t#")) {
        Some(hash) if continuation.is_empty() => (value[..hash].trim_end(), &value[hash..]),
        _ => (value, ""),
    };
    let has_colon = |text: &str| text.contains(": ") || text.trim_end().ends_with(':');
    let reason = if has_colon(text) || continuation.iter().any(|next| has_colon(next)) {
        QuoteReason::Colon
    } else {
        QuoteReason::Other
    };
    let mut quoted = format!("{indent}{key}: '{}", text.replace('\'', "''"));
    for next in continuation {
        quoted.push('\n');
        quoted.push_str(&next.replace('\'', "''"));
    }
    quoted.push('\'');
    quoted.push_str(comment);
    Some((quoted, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, max_bytes: usize) -> HeadRead {
        read_frontmatter(&mut text.as_bytes(), max_bytes)
    }

    #[test]
    fn reads_until_the_closing_line_only() {
        let body = "x".repeat(100_000);
        let text = format!("---\nname: a\n---\n{body}");
        let head = read(&text, 65_536);
        assert_eq!(head.bytes_read, READ_CHUNK_BYTES as u64);
        assert_eq!(head.result.unwrap().yaml, "name: a\n");
    }

    #[test]
    fn closing_line_without_newline_at_end_of_file() {
        let head = read("---\nname: a\n---", 1024);
        assert_eq!(head.result.unwrap().yaml, "name: a\n");
    }

    #[test]
    fn quotes_only_plain_values_yaml_rejects() {
        let colon = |text: &str| Some((text.to_owned(), QuoteReason::Colon));
        let other = |text: &str| Some((text.to_owned(), QuoteReason::Other));
        assert_eq!(
            quoted_value(&["description: Use when: x"]),
            colon("description: 'Use when: x'")
        );
        assert_eq!(quoted_value(&["description: \"a: b\""]), None);
        assert_eq!(quoted_value(&["description: it's: x"]), colon("description: 'it''s: x'"));
        assert_eq!(quoted_value(&["  - a: b: c"]), None);
        assert_eq!(quoted_value(&["url: http://x"]), None);
        assert_eq!(quoted_value(&["tags: [a, b]"]), None);
        assert_eq!(quoted_value(&["description: C# and F#"]), None);
        assert_eq!(
            quoted_value(&["description: Use when: C# #1 issue"]),
            colon("description: 'Use when: C#' #1 issue")
        );
        assert_eq!(
            quoted_value(&["description: `git` helper"]),
            other("description: '`git` helper'")
        );
        assert_eq!(quoted_value(&["description: @mentions"]), other("description: '@mentions'"));
        assert_eq!(
            quoted_value(&["description: *Bold* text"]),
            other("description: '*Bold* text'")
        );
        assert_eq!(
            quoted_value(&["description: [Beta] tool"]),
            other("description: '[Beta] tool'")
        );
        assert_eq!(quoted_value(&["description: [unclosed list"]), None);
        assert_eq!(quoted_value(&["description: *anchored"]), None);
        assert_eq!(quoted_value(&["description: *bold*"]), other("description: '*bold*'"));
        assert_eq!(quoted_value(&["name:\tpdf"]), other("name: 'pdf'"));
    }

    #[test]
    fn a_continued_plain_value_is_quoted_as_a_whole() {
        let yaml = "description: Next.js apps.\n\n  Keywords: a, b\nlicense: MIT\n";
        let (text, changed) = quote_rejected_values(yaml).unwrap();
        assert_eq!(text, "description: 'Next.js apps.\n\n  Keywords: a, b'\nlicense: MIT\n");
        assert_eq!(changed, vec![(1, QuoteReason::Colon)]);
    }

    #[test]
    fn continuation_lines_are_never_quoted() {
        let yaml = "description: |\n  note: a: b\nother: x: y\n";
        let (text, changed) = quote_rejected_values(yaml).unwrap();
        assert_eq!(text, "description: |\n  note: a: b\nother: 'x: y'\n");
        assert_eq!(changed, vec![(3, QuoteReason::Colon)]);
    }
}
