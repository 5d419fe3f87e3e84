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
        /// The heading line that matched.
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

/// A Markdown heading: its level, title and the byte offset of its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Heading {
    pub(crate) level: usize,
    pub(crate) title: String,
    pub(crate) line: String,
    pub(crate) offset: usize,
}

/// The ATX headings of `text`, outside fenced code blocks.
pub(crate) fn headings(text: &str) -> Vec<Heading> {
    let mut found = Vec::new();
    let mut fence: Option<&str> = None;
    let mut offset = 0usize;
    for raw_line in text.split_inclusive('\n') {
        let line = raw_line.trim_end_matches(['\n', '\r']);
        let indented = line.len() - line.trim_start_matches(' ').len();
        let trimmed = line.trim_start_matches(' ');
        if indented <= 3 {
            if let Some(marker) = fence {
                if trimmed.starts_with(marker) {
                    fence = None;
                }
            } else if trimmed.starts_with("```") {
                fence = Some("```");
            } else if trimmed.starts_with("~~~") {
                fence = Some("~~~");
            } else {
                let level = trimmed.chars().take_while(|&character| character == '#').count();
                let rest = &trimmed[level..];
                if (1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
                    let title = rest.trim().trim_end_matches('#').trim().to_owned();
                    found.push(Heading { level, title, line: trimmed.to_owned(), offset });
                }
            }
        }
        offset += raw_line.len();
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

    #[test]
    fn headings_inside_fences_are_ignored() {
        let text = "# A\n```\n# not\n```\n## B\n";
        let titles: Vec<String> = headings(text).into_iter().map(|heading| heading.title).collect();
        assert_eq!(titles, vec!["A", "B"]);
    }
}
