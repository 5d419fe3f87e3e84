//! A JSON Schema `pattern` as the GBNF body of a JSON string's contents.
//!
//! Covered: patterns anchored at both ends (`^…$`, as a schema's `pattern` is otherwise a
//! search anywhere in the string) built from literal characters, escaped metacharacters, `.`,
//! `\d`, `\w`, groups (`(…)`, `(?:…)`) with alternatives, character classes (`[a-z]`,
//! `[^0-9"]`) and the quantifiers `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`. Anything else
//! (lookaround, backreferences, `\s`, lazy quantifiers, an alternative at the top level) is
//! `None`, and the schema goes to the server as it is.
//!
//! The grammar writes the string as JSON text: a literal `"` or `\` is escaped, and a class or
//! `.` never writes a quote, a backslash or a control character (stricter than the pattern
//! where the pattern would allow one of those: an admission cannot end its JSON string early).

use std::fmt::Write as _;

/// The most a quantifier may repeat (larger bounds are not converted).
const MAX_REPEAT: u32 = 10_000;

/// What a class or `.` never writes: JSON's quote and backslash, DEL and control characters.
const NOT_IN_JSON_TEXT: &str = r#""\\\x7F\x00-\x1F"#;

/// The GBNF expression for the contents of a JSON string that `pattern` matches whole, or
/// `None` when the pattern uses something not covered.
pub(super) fn contents(pattern: &str) -> Option<String> {
    let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
    // `\$` at the end is an escaped dollar, not the anchor.
    if inner.ends_with('\\') && !inner.ends_with("\\\\") {
        return None;
    }
    let chars: Vec<char> = inner.chars().collect();
    let mut parser = Parser { chars, at: 0, depth: 0 };
    let branches = parser.alternatives()?;
    // A `|` at the top level leaves `^` and `$` on one branch each: not covered.
    if branches.len() != 1 || parser.at != parser.chars.len() {
        return None;
    }
    Some(branches.into_iter().next().unwrap_or_default())
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    /// Sequences separated by `|`, up to a `)` or the end.
    fn alternatives(&mut self) -> Option<Vec<String>> {
        let mut branches = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.at += 1;
            branches.push(self.sequence()?);
        }
        Some(branches)
    }

    /// Quantified atoms up to a `|`, a `)` or the end, as one GBNF sequence.
    fn sequence(&mut self) -> Option<String> {
        let mut items: Vec<String> = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let item = match self.quantifier()? {
                Some(suffix) => format!("{atom}{suffix}"),
                None => atom,
            };
            items.push(item);
        }
        Some(items.join(" "))
    }

    fn atom(&mut self) -> Option<String> {
        match self.next()? {
            '(' => {
                if self.depth >= 32 {
                    return None;
                }
                if self.peek() == Some('?') {
                    self.at += 1;
                    if self.next()? != ':' {
                        return None; // lookaround, named groups
                    }
                }
                self.depth += 1;
                let branches = self.alternatives()?;
                self.depth -= 1;
                if self.next()? != ')' {
                    return None;
                }
                Some(format!("({})", branches.join(" | ")))
            }
            '[' => self.class(),
            '.' => Some(format!("[^{NOT_IN_JSON_TEXT}]")),
            '\\' => match self.next()? {
                'd' => Some("[0-9]".to_owned()),
                'w' => Some("[a-zA-Z0-9_]".to_owned()),
                c if is_meta(c) || c == '/' || c == '-' || c == '"' => literal(c),
                _ => None,
            },
            '*' | '+' | '?' | '{' | '}' | ']' | '^' | '$' => None,
            c => literal(c),
        }
    }

    /// A quantifier after an atom, as GBNF writes it.
    fn quantifier(&mut self) -> Option<Option<String>> {
        let suffix = match self.peek() {
            Some('*') => "*".to_owned(),
            Some('+') => "+".to_owned(),
            Some('?') => "?".to_owned(),
            Some('{') => {
                let close = self.chars[self.at..].iter().position(|&c| c == '}')? + self.at;
                let body: String = self.chars[self.at + 1..close].iter().collect();
                let bound = |text: &str| text.parse::<u32>().ok().filter(|n| *n <= MAX_REPEAT);
                let suffix = match body.split_once(',') {
                    None => format!("{{{}}}", bound(&body)?),
                    Some((min, "")) => format!("{{{},}}", bound(min)?),
                    Some((min, max)) => {
                        let (min, max) = (bound(min)?, bound(max)?);
                        if max < min {
                            return None;
                        }
                        format!("{{{min},{max}}}")
                    }
                };
                self.at = close;
                suffix
            }
            _ => return Some(None),
        };
        self.at += 1;
        // A lazy or possessive quantifier, or two in a row: not covered.
        if matches!(self.peek(), Some('*' | '+' | '?' | '{')) {
            return None;
        }
        Some(Some(suffix))
    }

    /// A class after its `[`: its members as a GBNF class.
    fn class(&mut self) -> Option<String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.at += 1;
        }
        let mut members = String::new();
        let mut first = true;
        loop {
            let c = self.next()?;
            if c == ']' && !first {
                break;
            }
            first = false;
            let low = match c {
                '\\' => match self.next()? {
                    'd' => {
                        members.push_str("0-9");
                        continue;
                    }
                    'w' => {
                        members.push_str("a-zA-Z0-9_");
                        continue;
                    }
                    'n' => '\n',
                    't' => '\t',
                    escaped if !escaped.is_alphanumeric() => escaped,
                    _ => return None,
                },
                '[' => return None, // POSIX classes, nested sets
                c => c,
            };
            // A range `a-z` (a `-` first or last is itself).
            if self.peek() == Some('-') && self.chars.get(self.at + 1).is_some_and(|&c| c != ']') {
                self.at += 1;
                let high = match self.next()? {
                    '\\' => self.next().filter(|c| !c.is_alphanumeric())?,
                    c => c,
                };
                if high < low {
                    return None;
                }
                if !negated
                    && (in_json_escapes(low) || in_json_escapes(high) || spans_specials(low, high))
                {
                    return None;
                }
                let _ = write!(members, "{}-{}", class_char(low), class_char(high));
            } else {
                if !negated && in_json_escapes(low) {
                    return None;
                }
                members.push_str(&class_char(low));
            }
        }
        if negated {
            Some(format!("[^{members}{NOT_IN_JSON_TEXT}]"))
        } else if members.is_empty() {
            None
        } else {
            Some(format!("[{members}]"))
        }
    }
}

fn is_meta(c: char) -> bool {
    ".^$*+?()[]{}|\\".contains(c)
}

/// Whether `c` is written escaped in JSON text (a quote, a backslash, a control character).
fn in_json_escapes(c: char) -> bool {
    c == '"' || c == '\\' || (c as u32) < 0x20 || c == '\x7f'
}

/// Whether the range `low-high` holds the quote, the backslash or DEL.
fn spans_specials(low: char, high: char) -> bool {
    ['"', '\\', '\x7f'].iter().any(|c| (low..=high).contains(c))
}

/// `c` inside a GBNF class: ASCII punctuation and controls as `\xHH`, the rest as itself.
fn class_char(c: char) -> String {
    if c.is_ascii() && !c.is_ascii_alphanumeric() && c != ' ' {
        format!("\\x{:02X}", c as u32)
    } else {
        c.to_string()
    }
}

/// The literal `c` as the JSON text writes it, as a GBNF string literal.
fn literal(c: char) -> Option<String> {
    let json = match c {
        '"' => "\\\"".to_owned(),
        '\\' => "\\\\".to_owned(),
        c if in_json_escapes(c) => return None,
        c => c.to_string(),
    };
    let mut out = String::from('"');
    for c in json.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admission_patterns_convert() {
        assert_eq!(
            contents(r#"^I (cannot|could not|do not know)[^0-9"]{0,400}$"#).unwrap(),
            r#""I" " " ("c" "a" "n" "n" "o" "t" | "c" "o" "u" "l" "d" " " "n" "o" "t" | "d" "o" " " "n" "o" "t" " " "k" "n" "o" "w") [^0-9\x22"\\\x7F\x00-\x1F]{0,400}"#
        );
        assert_eq!(
            contents(r#"^[^0-9"]{0,200}$"#).unwrap(),
            r#"[^0-9\x22"\\\x7F\x00-\x1F]{0,200}"#
        );
        let words = contents(r#"^I (cannot)([^0-9"]|SHA-256|sales\.csv){0,400}$"#).unwrap();
        assert!(words.ends_with(r#"([^0-9\x22"\\\x7F\x00-\x1F] | "S" "H" "A" "-" "2" "5" "6" | "s" "a" "l" "e" "s" "." "c" "s" "v"){0,400}"#), "{words}");
    }

    #[test]
    fn literals_classes_and_quantifiers() {
        assert_eq!(contents(r"^a\.b?c*d+$").unwrap(), r#""a" "." "b"? "c"* "d"+"#);
        assert_eq!(contents(r"^[a-z_]{2,}\d{3}$").unwrap(), r#"[a-z\x5F]{2,} [0-9]{3}"#);
        assert_eq!(contents(r#"^\"$"#).unwrap(), r#""\\\"""#);
        assert_eq!(contents(r"^(?:x|)$").unwrap(), r#"("x" | )"#);
        assert_eq!(contents(r"^[-a]$").unwrap(), r"[\x2Da]");
    }

    #[test]
    fn what_is_not_covered_is_none() {
        for pattern in [
            "abc",          // not anchored
            "^a|b$",        // top-level alternative
            r"^\s+$",       // whitespace: JSON escapes
            "^(?=a)a$",     // lookahead
            r"^(a)\1$",     // backreference
            "^a*?$",        // lazy
            "^[\"a]$",      // a class that writes a quote
            "^[ -~]$",      // a range over the quote and backslash
            "^a{5,2}$",     // empty range
            "^a{0,20000}$", // too many
            "^(a$",         // unclosed
            "^[a$",         // unclosed class
            "^*$",
            r"^a\$", // an escaped dollar, no anchor
        ] {
            assert_eq!(contents(pattern), None, "{pattern}");
        }
    }
}
