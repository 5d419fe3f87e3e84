//! Path patterns (`$.a.b`, `$.a[*].c`, `$['k']`, `$.a[2]`): a small, strict JSONPath subset.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// One step of a [`Pattern`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Segment {
    /// An object member with exactly this name (`.name`, `['name']`, `["name"]`).
    Key(String),
    /// An array element at this index (`[2]`).
    Index(u64),
    /// Any member of an object or any element of an array (`.*`, `[*]`).
    Wildcard,
}

impl Segment {
    /// Whether this segment selects the child named `key` of an object.
    pub fn matches_key(&self, key: &[u8]) -> bool {
        match self {
            Segment::Key(name) => name.as_bytes() == key,
            Segment::Index(_) => false,
            Segment::Wildcard => true,
        }
    }

    /// Whether this segment selects the element at `index` of an array.
    pub fn matches_index(&self, index: u64) -> bool {
        match self {
            Segment::Key(_) => false,
            Segment::Index(wanted) => *wanted == index,
            Segment::Wildcard => true,
        }
    }
}

/// A parsed path pattern: `$` followed by segments.
///
/// Grammar (a subset of RFC 9535 JSONPath, singular selectors and wildcards only):
///
/// ```text
/// pattern   = "$" *(S segment)              ; no blank before "$" or after the last segment
/// segment   = "." name | ".*" | "[" S selector S "]"
/// selector  = "*" | index | quoted
/// name      = (ALPHA / "_" / non-ASCII) *(ALPHA / DIGIT / "_" / non-ASCII)
/// index     = "0" | [1-9] *DIGIT            ; at most 2^53 - 1, no sign, no leading zeros
/// quoted    = "'" ... "'" | '"' ... '"'     ; escapes \\ \' \" \/ \b \f \n \r \t \uXXXX
/// S         = *(" " / "\t" / "\n" / "\r")
/// ```
///
/// As RFC 9535 §2.3.3 says, an index is an integer in the I-JSON range (at most
/// 2^53 − 1 = 9007199254740991) written without a `+` sign or leading zeros (`01`, `-0` are
/// not indices). Recursive descent (`..`), filters, slices, negative indices and unions are
/// rejected with [`Error::InvalidPattern`].
///
/// ```
/// use stream_json::{Pattern, Segment};
/// let pattern: Pattern = "$.steps[*]['title']".parse().unwrap();
/// assert_eq!(pattern.segments(), &[
///     Segment::Key("steps".into()), Segment::Wildcard, Segment::Key("title".into()),
/// ]);
/// assert!("$..x".parse::<Pattern>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    text: String,
    segments: Vec<Segment>,
}

impl Pattern {
    /// Parses a pattern.
    pub fn parse(text: &str) -> Result<Pattern> {
        let segments = PatternParser { text, chars: text.char_indices().collect(), at: 0 }.run()?;
        Ok(Pattern { text: text.to_owned(), segments })
    }

    /// The segments after `$`.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for Pattern {
    type Err = Error;

    fn from_str(text: &str) -> Result<Pattern> {
        Pattern::parse(text)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The largest index RFC 9535 allows: 2^53 − 1, the I-JSON range of exact integers.
const MAX_INDEX: u64 = (1 << 53) - 1;

struct PatternParser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    /// Index into `chars`.
    at: usize,
}

impl PatternParser<'_> {
    fn run(mut self) -> Result<Vec<Segment>> {
        if self.peek() != Some('$') {
            return Err(self.error("a pattern starts with '$'"));
        }
        self.at += 1;
        let mut segments = Vec::new();
        loop {
            // RFC 9535 §2.2.1: blank space may separate segments, but may not end the query.
            let blank_start = self.at;
            self.skip_blank();
            let Some(c) = self.peek() else {
                if self.at > blank_start {
                    self.at = blank_start;
                    return Err(self.error("a pattern does not end with blank space"));
                }
                break;
            };
            match c {
                '.' => {
                    self.at += 1;
                    match self.peek() {
                        Some('.') => {
                            return Err(self.error("recursive descent ('..') is not supported"));
                        }
                        Some('*') => {
                            self.at += 1;
                            segments.push(Segment::Wildcard);
                        }
                        Some(c) if is_name_first(c) => segments.push(Segment::Key(self.name())),
                        Some(_) => {
                            return Err(self.error(
                                "expected a member name (letter, '_' or non-ASCII first) or '*' \
                                 after '.'; use ['...'] for other names",
                            ));
                        }
                        None => return Err(self.error("expected a member name or '*' after '.'")),
                    }
                }
                '[' => {
                    self.at += 1;
                    self.skip_blank();
                    let segment = match self.peek() {
                        Some('*') => {
                            self.at += 1;
                            Segment::Wildcard
                        }
                        Some(quote @ ('\'' | '"')) => {
                            self.at += 1;
                            Segment::Key(self.quoted(quote)?)
                        }
                        Some('0'..='9') => Segment::Index(self.index()?),
                        Some('-') if self.chars.get(self.at + 1).map(|&(_, c)| c) == Some('0') => {
                            return Err(self.error("'-0' is not an index (RFC 9535 §2.3.3)"));
                        }
                        Some('-') => {
                            return Err(self.error("negative indices are not supported"));
                        }
                        Some('+') => {
                            return Err(self.error("an index has no '+' sign (RFC 9535 §2.3.3)"));
                        }
                        Some(':' | '?' | '(') => {
                            return Err(self.error("slices and filters are not supported"));
                        }
                        _ => {
                            return Err(
                                self.error("expected '*', an index or a quoted name after '['")
                            );
                        }
                    };
                    self.skip_blank();
                    match self.peek() {
                        Some(']') => self.at += 1,
                        Some(',') => return Err(self.error("unions (',') are not supported")),
                        Some(':') => return Err(self.error("slices are not supported")),
                        _ => return Err(self.error("expected ']'")),
                    }
                    segments.push(segment);
                }
                _ => return Err(self.error("expected '.' or '['")),
            }
        }
        Ok(segments)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).map(|&(_, c)| c)
    }

    fn error(&self, message: &str) -> Error {
        Error::InvalidPattern {
            pattern: self.text.to_owned(),
            position: self.at,
            message: message.to_owned(),
        }
    }

    fn skip_blank(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
            self.at += 1;
        }
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            if !(is_name_first(c) || c.is_ascii_digit()) {
                break;
            }
            name.push(c);
            self.at += 1;
        }
        name
    }

    fn index(&mut self) -> Result<u64> {
        let start = self.at;
        let mut digits = String::new();
        while let Some(c @ '0'..='9') = self.peek() {
            digits.push(c);
            self.at += 1;
        }
        if digits.len() > 1 && digits.starts_with('0') {
            self.at = start;
            return Err(self.error("an index has no leading zeros"));
        }
        match digits.parse::<u64>() {
            Ok(index) if index <= MAX_INDEX => Ok(index),
            _ => {
                self.at = start;
                Err(self.error(
                    "index is outside the I-JSON range (at most 2^53 - 1 = 9007199254740991, \
                     RFC 9535 §2.3.3)",
                ))
            }
        }
    }

    fn quoted(&mut self, quote: char) -> Result<String> {
        let mut name = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unterminated quoted name"));
            };
            self.at += 1;
            match c {
                c if c == quote => return Ok(name),
                '\\' => {
                    let Some(escaped) = self.peek() else {
                        return Err(self.error("unterminated escape in quoted name"));
                    };
                    self.at += 1;
                    match escaped {
                        '\\' | '/' => name.push(escaped),
                        '\'' | '"' if escaped == quote => name.push(escaped),
                        'b' => name.push('\u{8}'),
                        'f' => name.push('\u{c}'),
                        'n' => name.push('\n'),
                        'r' => name.push('\r'),
                        't' => name.push('\t'),
                        'u' => name.push(self.unicode_escape()?),
                        _ => {
                            self.at -= 1;
                            return Err(self.error("invalid escape in quoted name"));
                        }
                    }
                }
                c if u32::from(c) < 0x20 => {
                    self.at -= 1;
                    return Err(self.error("control characters must be escaped in quoted names"));
                }
                c => name.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u16> {
        let mut value: u16 = 0;
        for _ in 0..4 {
            let digit = self.peek().and_then(|c| c.to_digit(16));
            let Some(digit) = digit else {
                return Err(self.error("expected four hex digits after \\u"));
            };
            value = value * 16 + digit as u16;
            self.at += 1;
        }
        Ok(value)
    }

    fn unicode_escape(&mut self) -> Result<char> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.peek() != Some('\\')
                    || self.chars.get(self.at + 1).map(|p| p.1) != Some('u')
                {
                    return Err(
                        self.error("a high surrogate must be followed by \\u low surrogate")
                    );
                }
                self.at += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(self.error("expected a low surrogate"));
                }
                0x10000 + ((u32::from(first) - 0xD800) << 10) + (u32::from(second) - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.error("lone low surrogate")),
            _ => u32::from(first),
        };
        char::from_u32(code).ok_or_else(|| self.error("invalid unicode escape"))
    }
}

fn is_name_first(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || !c.is_ascii()
}
