//! The parser's current location (`$.action.args[2]`), borrowed from its frame stack.

use std::fmt::{self, Write as _};

/// One open container on the parser's stack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    pub(crate) is_object: bool,
    /// Whether the location includes this frame's current child (a complete key, or an
    /// element index). False right after `{`, while a key is being read, and after a ','
    /// in an object.
    pub(crate) has_child: bool,
    /// Index of the current element (arrays only).
    pub(crate) index: u64,
    /// Where this frame's current key starts in the shared key buffer (objects); the key
    /// ends where the next frame's key starts, or at the end of the buffer.
    pub(crate) key_start: usize,
    /// Where this container's live subscriptions start in the shared live stack.
    pub(crate) live_start: usize,
}

/// One step of a concrete [`Path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathSegment<'a> {
    /// An object member name.
    Key(&'a str),
    /// An array index.
    Index(u64),
}

/// A concrete location in the document, e.g. `$.action.args[2]`, borrowed from the parser.
///
/// `Display` writes it in JSONPath normalized form (`.name` for identifier-like names,
/// `['…']` with escapes otherwise), which [`Pattern::parse`](crate::Pattern::parse) reads back.
#[derive(Clone, Copy)]
pub struct Path<'a> {
    frames: &'a [Frame],
    keys: &'a [u8],
}

impl<'a> Path<'a> {
    pub(crate) fn new(frames: &'a [Frame], keys: &'a [u8]) -> Path<'a> {
        Path { frames, keys }
    }

    /// The steps from the root to this location.
    pub fn segments(&self) -> impl Iterator<Item = PathSegment<'a>> + 'a {
        let frames = self.frames;
        let keys = self.keys;
        frames.iter().enumerate().filter(|(_, frame)| frame.has_child).map(move |(i, frame)| {
            if frame.is_object {
                let end = frames.get(i + 1).map_or(keys.len(), |next| next.key_start);
                let key = keys.get(frame.key_start..end).unwrap_or_default();
                PathSegment::Key(valid_prefix(key))
            } else {
                PathSegment::Index(frame.index)
            }
        })
    }

    /// Number of steps from the root.
    pub fn depth(&self) -> usize {
        self.frames.iter().filter(|frame| frame.has_child).count()
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('$')?;
        for segment in self.segments() {
            match segment {
                PathSegment::Index(index) => write!(f, "[{index}]")?,
                PathSegment::Key(key) => write_key(f, key)?,
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Path({self})")
    }
}

fn write_key(f: &mut fmt::Formatter<'_>, key: &str) -> fmt::Result {
    let mut chars = key.chars();
    let shorthand = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if shorthand {
        f.write_char('.')?;
        return f.write_str(key);
    }
    f.write_str("['")?;
    for c in key.chars() {
        match c {
            '\'' => f.write_str("\\'")?,
            '\\' => f.write_str("\\\\")?,
            '\u{8}' => f.write_str("\\b")?,
            '\u{c}' => f.write_str("\\f")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if u32::from(c) < 0x20 => write!(f, "\\u{:04x}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    f.write_str("']")
}

/// The longest valid UTF-8 prefix (a key cut at `max_key_bytes` may end mid-character).
fn valid_prefix(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => std::str::from_utf8(&bytes[..error.valid_up_to()]).unwrap_or_default(),
    }
}
