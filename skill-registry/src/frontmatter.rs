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
}

/// Why no frontmatter could be taken from the head of a file.
#[derive(Debug)]
pub(crate) enum HeadProblem {
    /// The first line is not `---`.
    Missing,
    /// The file ended before a closing `---` line.
    Unclosed,
    /// No closing `---` line within the read limit.
    TooLarge { limit: usize },
    /// The frontmatter is not UTF-8; the 1-based line of the first bad byte.
    Encoding { line: usize },
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
                        return HeadRead { result: Err(HeadProblem::Missing), bytes_read };
                    }
                    yaml_start = Some(next_line_start + consumed);
                }
                Some(start) => {
                    if is_delimiter(line) {
                        let result = yaml_text(&buffer[start..next_line_start]);
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

/// Decodes the YAML bytes (UTF-8 required) and normalises CRLF to LF.
fn yaml_text(bytes: &[u8]) -> Result<RawFrontmatter, HeadProblem> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(RawFrontmatter { yaml: text.replace("\r\n", "\n"), first_line: 2 }),
        Err(error) => {
            let valid = &bytes[..error.valid_up_to()];
            let line = 2 + valid.iter().filter(|&&byte| byte == b'\n').count();
            Err(HeadProblem::Encoding { line })
        }
    }
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

/// The parsed frontmatter: its top-level fields in file order, and the file lines that only
/// parsed after quoting (`key: value: more`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedFrontmatter {
    pub(crate) fields: Vec<Field>,
    pub(crate) quoted_lines: Vec<usize>,
}

/// Parses the YAML of `raw`; when it does not parse, retries once with unquoted
/// `key: value: more` values quoted and reports which lines needed it.
pub(crate) fn parse_yaml(raw: &RawFrontmatter) -> Result<ParsedFrontmatter, YamlProblem> {
    match parse_mapping(&raw.yaml, raw.first_line) {
        Ok(fields) => Ok(ParsedFrontmatter { fields, quoted_lines: Vec::new() }),
        Err(first_problem) => {
            let Some((quoted_yaml, quoted)) = quote_colon_values(&raw.yaml) else {
                return Err(first_problem);
            };
            match parse_mapping(&quoted_yaml, raw.first_line) {
                Ok(fields) => Ok(ParsedFrontmatter {
                    fields,
                    quoted_lines: quoted.iter().map(|line| line + raw.first_line - 1).collect(),
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

/// Rewrites lines of the form `key: value: more` (an unquoted plain value holding `: `, which
/// YAML rejects) as `key: 'value: more'`. Returns the new text and the 1-based YAML lines
/// changed, or `None` when no line qualifies.
fn quote_colon_values(yaml: &str) -> Option<(String, Vec<usize>)> {
    let mut changed = Vec::new();
    let mut output = String::with_capacity(yaml.len() + 16);
    for (index, line) in yaml.split('\n').enumerate() {
        if index > 0 {
            output.push('\n');
        }
        match quoted_line(line) {
            Some(quoted) => {
                output.push_str(&quoted);
                changed.push(index + 1);
            }
            None => output.push_str(line),
        }
    }
    if changed.is_empty() { None } else { Some((output, changed)) }
}

fn quoted_line(line: &str) -> Option<String> {
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
    let starts_plain =
        value.chars().next().is_some_and(|first| !"\"'|>[{&*!#%@`-?:,]}".contains(first));
    let needs_quoting = value.contains(": ") || value.ends_with(':');
    if !starts_plain || !needs_quoting || value.contains(" #") {
        return None;
    }
    Some(format!("{indent}{key}: '{}'", value.replace('\'', "''")))
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
    fn quotes_only_plain_values_with_colons() {
        assert_eq!(
            quoted_line("description: Use when: x"),
            Some("description: 'Use when: x'".into())
        );
        assert_eq!(quoted_line("description: \"a: b\""), None);
        assert_eq!(quoted_line("description: it's: x"), Some("description: 'it''s: x'".into()));
        assert_eq!(quoted_line("  - a: b: c"), None);
        assert_eq!(quoted_line("url: http://x"), None);
    }
}
