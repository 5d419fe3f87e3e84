//! Excerpts: what a read returns — the whole text when it fits, else the Markdown section named
//! by a hint or the head and tail with an elision marker — plus the full size, a SHA-256 of the
//! whole file and its path, so the full file stays reachable by reference.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// How much of the file is in the excerpt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ExcerptContent {
    /// The whole text.
    Complete {
        /// The text.
        text: String,
    },
    /// The Markdown section whose heading matched the hint, from the heading to the next heading
    /// of the same or a higher level.
    Section {
        /// The heading that matched, as an ATX line (a setext heading in its ATX form).
        heading: String,
        /// The section (cut to the cap when `truncated`).
        text: String,
        /// Whether the section was longer than the cap.
        truncated: bool,
    },
    /// The start and the end of the text, with the middle left out.
    HeadTail {
        /// The first part.
        head: String,
        /// The last part.
        tail: String,
        /// How many bytes are left out between them.
        omitted_bytes: u64,
    },
    /// A binary file: reported, never dumped.
    Binary,
}

/// The result of reading a skill body or resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Excerpt {
    /// The path as requested, relative to the skill folder.
    pub relative_path: String,
    /// The resolved absolute path: the reference to the full file.
    pub file: PathBuf,
    /// The size of the whole file in bytes.
    pub total_bytes: u64,
    /// The SHA-256 of the whole file, in lower-case hex.
    pub sha256: String,
    /// What of the file is included.
    pub content: ExcerptContent,
    /// The Markdown headings of the text, when the excerpt is not complete (so a section can be
    /// asked for by name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headings: Vec<String>,
    /// The section hint that matched no heading, when one was given and missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed_section: Option<String>,
}

impl Excerpt {
    /// Whether the excerpt holds the whole text.
    pub fn is_complete(&self) -> bool {
        matches!(self.content, ExcerptContent::Complete { .. })
    }

    /// The excerpt as text for a model: the content, with a marker wherever something is left
    /// out that names the full file, its size and hash.
    pub fn render(&self) -> String {
        let reference = format!(
            "full file: {} ({} bytes, sha256 {})",
            self.file.display(),
            self.total_bytes,
            self.sha256
        );
        let mut output = String::new();
        match &self.content {
            ExcerptContent::Complete { text } => output.push_str(text),
            ExcerptContent::Section { heading, text, truncated } => {
                output.push_str(text);
                if *truncated {
                    let _ = write!(
                        output,
                        "\n[… section `{heading}` cut at the size cap; {reference} …]\n"
                    );
                }
            }
            ExcerptContent::HeadTail { head, tail, omitted_bytes } => {
                output.push_str(head);
                if !head.ends_with('\n') {
                    output.push('\n');
                }
                let _ = writeln!(output, "[… {omitted_bytes} bytes omitted; {reference} …]");
                output.push_str(tail);
            }
            ExcerptContent::Binary => {
                let _ = writeln!(output, "[binary file, not shown; {reference}]");
            }
        }
        if let Some(missed) = &self.missed_section {
            let _ = write!(output, "\n[no section found for `{missed}`]\n");
        }
        if !self.headings.is_empty() {
            output.push_str("\n[sections: ");
            output.push_str(&self.headings.join(" | "));
            output.push_str("]\n");
        }
        output
    }
}

/// The file as read: its hash and size, and either all of it or its head and tail.
pub(crate) struct FileBytes {
    pub(crate) total_bytes: u64,
    pub(crate) sha256: String,
    /// The whole file, when it is at most the scan limit.
    pub(crate) whole: Option<Vec<u8>>,
    /// The first bytes (always kept).
    pub(crate) head: Vec<u8>,
    /// The last bytes (when the whole file is not kept).
    pub(crate) tail: Vec<u8>,
}

/// Reads `file` once: hashes all of it, keeps all of it up to `max_scan_bytes`, otherwise keeps
/// only `edge_bytes` at each end. Memory stays bounded whatever the file size.
pub(crate) fn read_file(
    file: &mut impl Read,
    path: &Path,
    max_scan_bytes: usize,
    edge_bytes: usize,
) -> Result<FileBytes> {
    let mut hasher = Sha256::new();
    let mut total: u64 = 0;
    let mut whole: Option<Vec<u8>> = Some(Vec::new());
    let mut head: Vec<u8> = Vec::new();
    let mut tail: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let count = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(count) => count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
        };
        let bytes = &chunk[..count];
        hasher.update(bytes);
        total += count as u64;
        if head.len() < edge_bytes {
            let wanted = (edge_bytes - head.len()).min(bytes.len());
            head.extend_from_slice(&bytes[..wanted]);
        }
        if let Some(kept) = &mut whole {
            if kept.len() + bytes.len() <= max_scan_bytes {
                kept.extend_from_slice(bytes);
            } else {
                // Too big to keep: from here on only the tail is tracked.
                let start = kept.len().saturating_sub(edge_bytes);
                tail = kept.split_off(start);
                whole = None;
            }
        }
        if whole.is_none() {
            tail.extend_from_slice(bytes);
            if tail.len() > 2 * edge_bytes.max(1) {
                tail.drain(..tail.len() - edge_bytes);
            }
        }
    }
    if whole.is_none() && tail.len() > edge_bytes {
        tail.drain(..tail.len() - edge_bytes);
    }
    let digest = hasher.finalize();
    let mut sha256 = String::with_capacity(64);
    for byte in digest.iter() {
        let _ = write!(sha256, "{byte:02x}");
    }
    Ok(FileBytes { total_bytes: total, sha256, whole, head, tail })
}

/// Whether bytes look binary: a NUL byte in the first 8 KiB.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|&byte| byte == 0)
}

/// Decodes bytes that are not all UTF-8 as text, with U+FFFD for the bad bytes (Latin-1 or
/// Windows-1252 text, as editors show it); `None` when they also hold control bytes other than
/// tab, line breaks, form feed and escape, which text in any 8-bit encoding does not.
fn decode_text(bytes: &[u8]) -> Option<String> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Some(text.to_owned());
    }
    let control = |byte: &u8| *byte < 0x20 && !matches!(byte, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b);
    if bytes.iter().any(control) {
        return None;
    }
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The whole file as text ([`decode_text`]), `None` for binary.
pub(crate) fn whole_text(whole: Vec<u8>) -> Option<String> {
    match String::from_utf8(whole) {
        Ok(text) => Some(text),
        Err(error) => decode_text(error.as_bytes()),
    }
}

/// `head` without an incomplete UTF-8 sequence at its end (a character cut by the byte limit),
/// as text ([`decode_text`]); `None` for binary.
pub(crate) fn head_text(head: &[u8]) -> Option<String> {
    let complete = match std::str::from_utf8(head) {
        Err(error) if error.error_len().is_none() => &head[..error.valid_up_to()],
        _ => head,
    };
    decode_text(complete)
}

/// `tail` without the continuation bytes at its start (the rest of a character cut by the byte
/// limit), as text ([`decode_text`]); `None` for binary.
pub(crate) fn tail_text(tail: &[u8]) -> Option<String> {
    let cut = tail.iter().take(3).take_while(|&&byte| byte & 0xC0 == 0x80).count();
    decode_text(&tail[cut..])
}

/// The largest index ≤ `index` that is a char boundary of `text`.
fn floor_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The smallest index ≥ `index` that is a char boundary of `text`.
fn ceil_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// Cuts `text` to its first `cap` bytes, preferring to end after a line break.
pub(crate) fn head_of(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let end = floor_boundary(text, cap);
    let cut = &text[..end];
    match cut.rfind('\n') {
        Some(newline) if newline + 1 >= end * 4 / 5 => &cut[..=newline],
        _ => cut,
    }
}

/// The last `cap` bytes of `text`, preferring to start after a line break.
pub(crate) fn tail_of(text: &str, cap: usize) -> &str {
    if text.len() <= cap {
        return text;
    }
    let start = ceil_boundary(text, text.len() - cap);
    let cut = &text[start..];
    match cut.find('\n') {
        Some(newline) if newline < cap / 5 => &cut[newline + 1..],
        _ => cut,
    }
}

/// A Markdown heading: its level, title, the heading as an ATX line, and the byte offset where
/// it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Heading {
    pub(crate) level: usize,
    pub(crate) title: String,
    /// The ATX line as written (`## Title`), or the ATX form of a setext heading.
    pub(crate) line: String,
    pub(crate) offset: usize,
}

/// An open fenced code block: its fence character and length.
#[derive(Clone, Copy)]
struct Fence {
    character: char,
    length: usize,
}

/// The fence a line opens (three or more backticks or tildes; a backtick fence's info string
/// has no backtick), if any.
fn opening_fence(trimmed: &str) -> Option<Fence> {
    let character = trimmed.chars().next().filter(|&first| first == '`' || first == '~')?;
    let length = trimmed.chars().take_while(|&next| next == character).count();
    let info = &trimmed[length..];
    (length >= 3 && !(character == '`' && info.contains('`')))
        .then_some(Fence { character, length })
}

/// Whether a line closes `fence`: the same character, at least as many, nothing else but blanks.
fn closes(fence: Fence, trimmed: &str) -> bool {
    let length = trimmed.chars().take_while(|&next| next == fence.character).count();
    length >= fence.length && trimmed[length..].trim().is_empty()
}

/// The level of a setext underline (`===` is 1, `---` is 2), if the line is one.
fn setext_level(trimmed: &str) -> Option<usize> {
    let underline = trimmed.trim_end();
    let level = match underline.chars().next()? {
        '=' => 1,
        '-' => 2,
        _ => return None,
    };
    underline.chars().all(|character| character == underline.as_bytes()[0] as char).then_some(level)
}

/// Whether a line can continue a paragraph that a setext underline turns into a heading (not a
/// list item, block quote, table or HTML line, which CommonMark or common sense rules out).
fn is_paragraph_text(trimmed: &str) -> bool {
    let list_item = (trimmed.starts_with(['-', '*', '+']) && trimmed[1..].starts_with([' ', '\t']))
        || trimmed.split_once(['.', ')']).is_some_and(|(number, rest)| {
            !number.is_empty()
                && number.chars().all(|character| character.is_ascii_digit())
                && (rest.is_empty() || rest.starts_with([' ', '\t']))
        });
    !trimmed.is_empty() && !list_item && !trimmed.starts_with(['>', '|', '<'])
}

/// Strips a closed frontmatter block (`---` … `---`) from the start of a text.
pub(crate) fn strip_frontmatter(text: &str) -> &str {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return text;
    };
    if first.trim_end() != "---" {
        return text;
    }
    let mut offset = first.len();
    for line in lines {
        offset += line.len();
        if line.trim_end() == "---" {
            return &text[offset..];
        }
    }
    text
}

/// The ATX and setext headings of `text`, outside fenced code blocks and outside a leading
/// closed `---` frontmatter block (its last key line would otherwise read as a setext heading).
pub(crate) fn headings(text: &str) -> Vec<Heading> {
    let mut found = Vec::new();
    let mut fence: Option<Fence> = None;
    // The paragraph being read (its start offset and its lines), which a setext underline
    // would make a heading.
    let mut paragraph: Option<(usize, Vec<&str>)> = None;
    let body = strip_frontmatter(text);
    let mut offset = text.len() - body.len();
    for raw_line in body.split_inclusive('\n') {
        let line_offset = offset;
        offset += raw_line.len();
        let line = raw_line.trim_end_matches(['\n', '\r']);
        let indented = line.len() - line.trim_start_matches(' ').len();
        let trimmed = line.trim_start_matches(' ');
        if let Some(open) = fence {
            if indented <= 3 && closes(open, trimmed) {
                fence = None;
            }
            continue;
        }
        if indented > 3 {
            // Indented code, or the lazy continuation of a paragraph.
            if let Some((_, lines)) = &mut paragraph {
                lines.push(trimmed.trim());
            }
            continue;
        }
        if let Some(open) = opening_fence(trimmed) {
            fence = Some(open);
            paragraph = None;
            continue;
        }
        if let Some(level) = setext_level(trimmed) {
            // An underline under a paragraph makes it a heading; anywhere else it is a
            // thematic break (or a stray line), which starts no paragraph.
            if let Some((start, lines)) = paragraph.take() {
                let title = lines.join(" ");
                let line = format!("{} {title}", "#".repeat(level));
                found.push(Heading { level, title, line, offset: start });
            }
            continue;
        }
        let level = trimmed.chars().take_while(|&character| character == '#').count();
        let rest = &trimmed[level..];
        if (1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
            let title = rest.trim().trim_end_matches('#').trim().to_owned();
            found.push(Heading { level, title, line: trimmed.to_owned(), offset: line_offset });
            paragraph = None;
            continue;
        }
        if is_paragraph_text(trimmed) {
            match &mut paragraph {
                Some((_, lines)) => lines.push(trimmed.trim()),
                None => paragraph = Some((line_offset, vec![trimmed.trim()])),
            }
        } else {
            paragraph = None;
        }
    }
    found
}

fn normalise(text: &str) -> String {
    text.trim_start_matches('#').split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// The section of `text` named by `hint`: an exact (case- and space-insensitive) heading match
/// first, else the first heading containing the hint. Returns the heading line and the section.
pub(crate) fn find_section<'a>(text: &'a str, hint: &str) -> Option<(String, &'a str)> {
    let wanted = normalise(hint);
    if wanted.is_empty() {
        return None;
    }
    let all = headings(text);
    let position = all
        .iter()
        .position(|heading| normalise(&heading.title) == wanted)
        .or_else(|| all.iter().position(|heading| normalise(&heading.title).contains(&wanted)))?;
    let heading = &all[position];
    let end = all[position + 1..]
        .iter()
        .find(|next| next.level <= heading.level)
        .map_or(text.len(), |next| next.offset);
    Some((heading.line.clone(), &text[heading.offset..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_respect_char_boundaries() {
        let text = "ééééé";
        assert_eq!(head_of(text, 3), "é");
        assert_eq!(tail_of(text, 3), "é");
    }

    fn titles(text: &str) -> Vec<(usize, String)> {
        headings(text).into_iter().map(|heading| (heading.level, heading.title)).collect()
    }

    #[test]
    fn setext_headings_count_and_thematic_breaks_do_not() {
        let text = "Title\n=====\n\ntext\n\n---\n\nTwo\nlines\n---\n- item\n---\n";
        assert_eq!(titles(text), vec![(1, "Title".into()), (2, "Two lines".into())]);
    }

    #[test]
    fn only_a_matching_fence_closes_a_fence() {
        let text = "````md\n```\n# a\n```\n````\n~~~\n```\n# b\n~~~\n```py\n```py\n# c\n```\n# d\n";
        assert_eq!(titles(text), vec![(1, "d".into())]);
    }

    #[test]
    fn frontmatter_lines_are_not_setext_headings() {
        assert_eq!(titles("---\ntitle: x\n---\n# A\n"), vec![(1, "A".into())]);
        assert_eq!(titles("---\n# A\n"), vec![(1, "A".into())]);
    }

    #[test]
    fn headings_inside_fences_are_ignored() {
        let text = "# A\n```\n# not\n```\n## B\n";
        let titles: Vec<String> = headings(text).into_iter().map(|heading| heading.title).collect();
        assert_eq!(titles, vec!["A", "B"]);
    }
}
