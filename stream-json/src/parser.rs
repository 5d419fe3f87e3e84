//! The push parser: one state machine over bytes, with path subscriptions and captures.
//!
//! Every state that can straddle a chunk boundary is explicit: inside a string, an escape
//! (`\uXXXX`, a surrogate pair), a multi-byte UTF-8 character, a number, a literal. A chunk is
//! scanned once, front to back; nothing is re-lexed when the next chunk arrives.

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::path::{Frame, Path};
use crate::pattern::Pattern;

/// Parser limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Maximum container nesting. Opening one more `[` or `{` is [`Error::TooDeep`].
    /// Default 512.
    pub max_depth: usize,
    /// Object keys longer than this are kept only in part for paths and matching (they never
    /// equal a subscribed name), so a hostile key cannot grow memory without bound. Keys inside
    /// a [`Capture::Value`] are always kept whole. Default 64 KiB; raised automatically to fit
    /// the longest name in a subscribed pattern.
    pub max_key_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config { max_depth: 512, max_key_bytes: 64 * 1024 }
    }
}

/// What a subscription delivers for each value at its path, besides the
/// [`EventKind::KeySeen`], [`EventKind::Started`] and [`EventKind::Ended`] events that every
/// subscription gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capture {
    /// Nothing more: react to where values are, not what they are.
    None,
    /// The whole value as a `serde_json::Value`, once complete ([`EventKind::Value`]).
    Value,
    /// The value's exact bytes as they appeared in the input ([`EventKind::Raw`]).
    Raw,
    /// For string values, the decoded text as it arrives ([`EventKind::StringDelta`]); the
    /// deltas concatenate to the whole string and never repeat text.
    Deltas,
}

/// Identifies a subscription in [`Event`]s; returned by [`Parser::subscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriptionId(u32);

impl SubscriptionId {
    /// The subscription's position in the order of `subscribe` calls, from 0.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The JSON type of a value, known from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// `{`
    Object,
    /// `[`
    Array,
    /// `"`
    String,
    /// `-` or a digit
    Number,
    /// `t` or `f`
    Bool,
    /// `n`
    Null,
}

/// What happened at a subscribed path.
///
/// For each value whose path matches a subscription, events arrive in this order:
/// `KeySeen` (object members only, as soon as the key is complete), `Started`, then any
/// `StringDelta`s, then `Value` or `Raw`, then `Ended`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EventKind<'a> {
    /// The member's key is complete; its value has not started yet.
    KeySeen,
    /// The value's first byte has been read.
    Started(ValueKind),
    /// More decoded text of a string value ([`Capture::Deltas`]). Never empty. Text is sent
    /// at the end of each chunk and at the end of the string, at most once per string and
    /// chunk. If the document turns out to be invalid, the text sent before the error is a
    /// prefix of the string up to the error; how much of it was sent depends on the chunking.
    StringDelta(&'a str),
    /// The complete value ([`Capture::Value`]).
    Value(Value),
    /// The complete value's exact input bytes ([`Capture::Raw`]).
    Raw(&'a [u8]),
    /// The value is complete.
    Ended,
}

/// One event for one subscription.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// Which subscription matched.
    pub subscription: SubscriptionId,
    /// Where the value is, e.g. `$.action.args[2]`.
    pub path: Path<'a>,
    /// What happened.
    pub kind: EventKind<'a>,
}

/// Receives [`Event`]s during [`Parser::feed`] and [`Parser::finish`].
///
/// Any `FnMut(Event<'_>)` closure is a handler.
pub trait Handler {
    /// Called once per event, in document order.
    fn event(&mut self, event: Event<'_>);
}

impl<F: FnMut(Event<'_>) + ?Sized> Handler for F {
    fn event(&mut self, event: Event<'_>) {
        self(event);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A value must come: document start, after ':', after ',' in an array.
    Value,
    /// Right after '[': a value or ']'.
    ValueOrArrayEnd,
    /// Right after '{': a key or '}'.
    KeyOrObjectEnd,
    /// After ',' in an object: a key.
    Key,
    /// After a key: ':'.
    Colon,
    /// After a complete value: ',' or the closer, or (at the top) the end of input.
    AfterValue,
    /// Inside a string (a key when `string_is_key`), between characters.
    String,
    /// Inside a string, in an escape (`escape`) or a UTF-8 character (`utf8_need`) that the
    /// previous chunk cut. Kept apart from `String` so a chunk that continues plain text
    /// checks one state at entry.
    StringCut,
    /// Inside a number (where in it: `num`).
    Number,
    /// Inside `true`, `false` or `null`.
    Literal,
    /// `finish` succeeded.
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    /// After '-'.
    Minus,
    /// Integer part is "0".
    Zero,
    /// Integer part has a non-zero first digit.
    Int,
    /// After '.'.
    Dot,
    /// In the fraction digits.
    Frac,
    /// After 'e' or 'E'.
    Exp,
    /// After the exponent sign.
    ExpSign,
    /// In the exponent digits.
    ExpDigits,
}

impl Num {
    fn can_end(self) -> bool {
        match self {
            Num::Zero | Num::Int | Num::Frac | Num::ExpDigits => true,
            Num::Minus | Num::Dot | Num::Exp | Num::ExpSign => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After '\'.
    Backslash,
    /// In `\uXXXX`: `digits` read so far.
    Hex {
        digits: u8,
        code: u16,
    },
    /// After a high surrogate escape: '\' must follow.
    LowBackslash {
        high: u16,
    },
    /// After a high surrogate escape and '\': 'u' must follow.
    LowU {
        high: u16,
    },
    /// In the low surrogate's `\uXXXX`.
    LowHex {
        high: u16,
        digits: u8,
        code: u16,
    },
}

/// An internal error marker: the real [`Error`] is recorded in `Parser::failed`, so hot
/// paths return a zero-sized value instead of moving a large error around.
#[derive(Debug, Clone, Copy)]
struct Stop;

#[derive(Debug)]
struct Subscription {
    pattern: Pattern,
    capture: Capture,
}

/// A subscription matched by a value that is still open.
#[derive(Debug, Clone, Copy)]
struct Active {
    subscription: u32,
    /// Number of open containers when the value started.
    depth: usize,
    capture: Capture,
    /// Where the value's bytes start in `raw` ([`Capture::Raw`]).
    raw_start: usize,
}

/// A container being built for a [`Capture::Value`].
#[derive(Debug)]
enum Building {
    Array(Vec<Value>),
    Object(Map<String, Value>, String),
}

/// An incremental JSON parser: feed it chunks of any size, get events for subscribed paths.
///
/// ```
/// use stream_json::{Capture, EventKind, Parser};
///
/// let mut parser = Parser::new();
/// let answer = parser.subscribe("$.action.args.content", Capture::Deltas).unwrap();
/// let mut text = String::new();
/// let mut on_event = |event: stream_json::Event<'_>| {
///     if let EventKind::StringDelta(delta) = event.kind {
///         assert_eq!(event.subscription, answer);
///         text.push_str(delta);
///     }
/// };
/// for chunk in [&br#"{"action":{"type":"final_answer","args":{"content":"Hel"#[..], b"lo, w", b"orld\"}}}"] {
///     parser.feed(chunk, &mut on_event).unwrap();
/// }
/// parser.finish(&mut on_event).unwrap();
/// assert_eq!(text, "Hello, world");
/// ```
#[derive(Debug)]
pub struct Parser {
    config: Config,
    subscriptions: Vec<Subscription>,
    started: bool,
    failed: Option<Error>,
    state: State,
    /// Bytes consumed in earlier chunks.
    offset: u64,

    frames: Vec<Frame>,
    /// Current keys of all open objects, concatenated (see [`Frame::key_start`]).
    keys: Vec<u8>,
    /// Whether the key being read (or the current key of the top object) was cut at
    /// `max_key_bytes`.
    key_truncated: bool,
    /// Live subscriptions of all open containers, concatenated (see [`Frame::live_start`]).
    live: Vec<u32>,
    /// Subscriptions the next value matches exactly, and those it is a proper prefix of.
    pending_exact: Vec<u32>,
    pending_prefix: Vec<u32>,
    /// Whether `pending_*` were computed for the next value (at its key).
    selected: bool,
    active: Vec<Active>,

    // Strings.
    string_is_key: bool,
    /// Whether the string's decoded text is kept: always for a key (in `keys`), for a value
    /// string only under a capture or deltas (in `text`).
    string_keep: bool,
    string_deltas: bool,
    escape: Escape,
    /// Continuation bytes still needed by the current UTF-8 character.
    utf8_need: u8,
    /// Bytes of the current UTF-8 character already consumed.
    utf8_seen: u8,
    /// Allowed range of the next continuation byte.
    utf8_low: u8,
    utf8_high: u8,
    /// Decoded value string (valid UTF-8 except a trailing partial character).
    text: Vec<u8>,
    /// How much of `text` was sent as deltas.
    delta_from: usize,

    // Numbers and literals.
    num: Num,
    number_offset: u64,
    number_text: Vec<u8>,
    number_mark: usize,
    literal: &'static [u8],
    literal_matched: usize,

    // Captures.
    raw: Vec<u8>,
    raw_open: usize,
    raw_mark: usize,
    /// Depth of the outermost open [`Capture::Value`], if any.
    building_depth: Option<usize>,
    building: Vec<Building>,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::new()
    }
}

const WHITESPACE: [bool; 256] = {
    let mut table = [false; 256];
    table[b' ' as usize] = true;
    table[b'\t' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'\r' as usize] = true;
    table
};

/// Bytes that end a run of ASCII text inside a string: '"', '\\', control characters and
/// non-ASCII bytes (which start a UTF-8 character to validate).
const STRING_STOP: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = b < 0x20 || b >= 0x80 || b == b'"' as usize || b == b'\\' as usize;
        b += 1;
    }
    table
};

/// For each lead byte of a UTF-8 character: its length (0 when the byte cannot start a
/// character) and the allowed range of its second byte (RFC 3629: no overlong forms, no
/// surrogates, nothing above U+10FFFF). Later continuation bytes are 0x80 to 0xBF.
const UTF8_LEAD: [(u8, u8, u8); 256] = {
    let mut table = [(0, 0, 0); 256];
    let mut b = 0xC2;
    while b < 0xF5 {
        table[b] = match b {
            0xC2..=0xDF => (2, 0x80, 0xBF),
            0xE0 => (3, 0xA0, 0xBF),
            0xED => (3, 0x80, 0x9F),
            0xE1..=0xEF => (3, 0x80, 0xBF),
            0xF0 => (4, 0x90, 0xBF),
            0xF4 => (4, 0x80, 0x8F),
            _ => (4, 0x80, 0xBF),
        };
        b += 1;
    }
    table
};

/// Skips plain string text from `at`, validating UTF-8 as it goes; returns the position of
/// the first '"', '\\' or control character, of the first byte of a UTF-8 character that is
/// invalid or cut by the chunk's end, or the chunk's end.
///
/// ASCII text goes eight bytes at a time (Mycroft's zero-byte test): the lowest flagged byte
/// of a word is always a true match, so its position comes straight from `trailing_zeros`.
/// The last bytes of a chunk of 8 bytes or more are read as the chunk's last word,
/// overlapping bytes before `at`, which are replaced by a plain byte.
#[inline(always)]
fn scan_plain(chunk: &[u8], mut at: usize) -> usize {
    let len = chunk.len();
    loop {
        at = loop {
            if let Some(bytes) = chunk.get(at..at + 8) {
                let stop = stop_bytes(load_word(bytes));
                if stop != 0 {
                    break at + stop.trailing_zeros() as usize / 8;
                }
                at += 8;
                continue;
            }
            if at == len {
                return len;
            }
            if let Some(start) = len.checked_sub(8) {
                // The bytes before `at` become 'a' (not special, no borrow into the next byte).
                let seen = below_byte(at - start);
                let word = (load_word(&chunk[start..]) & !seen) | ((ONES * u64::from(b'a')) & seen);
                let stop = stop_bytes(word);
                if stop == 0 {
                    return len;
                }
                break start + stop.trailing_zeros() as usize / 8;
            }
            while at < len && !STRING_STOP[chunk[at] as usize] {
                at += 1;
            }
            if at == len {
                return len;
            }
            break at;
        };
        if chunk[at] < 0x80 {
            return at;
        }
        match utf8_char_len(chunk, at) {
            Some(char_len) => at += char_len,
            None => return at,
        }
    }
}

/// The length of the UTF-8 character starting with the non-ASCII byte at `at`, when it is
/// valid and complete in `chunk`.
#[inline(always)]
fn utf8_char_len(chunk: &[u8], at: usize) -> Option<usize> {
    let (char_len, low, high) = UTF8_LEAD[chunk[at] as usize];
    let char_len = usize::from(char_len);
    let rest = chunk.get(at + 1..at + char_len)?;
    let (&second, later) = rest.split_first()?;
    if second < low || second > high || later.iter().any(|&byte| byte & 0xC0 != 0x80) {
        return None;
    }
    Some(char_len)
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

#[inline(always)]
fn load_word(bytes: &[u8]) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

/// The high bit of every byte of `word` that is '"', '\\', a control character or
/// non-ASCII, and maybe of bytes above the first such byte.
#[inline(always)]
fn stop_bytes(word: u64) -> u64 {
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    (quote.wrapping_sub(ONES)
        | backslash.wrapping_sub(ONES)
        | word.wrapping_sub(ONES * 0x20)
        | word)
        & HIGHS
}

/// A mask of the bytes of a word before byte `n` (0 to 7).
#[inline(always)]
fn below_byte(n: usize) -> u64 {
    (1u64 << (8 * n)).wrapping_sub(1)
}

/// Four hex digits as a number.
#[inline]
fn hex4(digits: &[u8]) -> Option<u16> {
    digits.iter().try_fold(0u16, |code, &digit| Some(code << 4 | hex_digit(digit)?))
}

impl Parser {
    /// A parser with the default [`Config`].
    pub fn new() -> Parser {
        Parser::with_config(Config::default())
    }

    /// A parser with the given limits.
    pub fn with_config(config: Config) -> Parser {
        Parser {
            config,
            subscriptions: Vec::new(),
            started: false,
            failed: None,
            state: State::Value,
            offset: 0,
            frames: Vec::new(),
            keys: Vec::new(),
            key_truncated: false,
            live: Vec::new(),
            pending_exact: Vec::new(),
            pending_prefix: Vec::new(),
            selected: false,
            active: Vec::new(),
            string_is_key: false,
            string_keep: false,
            string_deltas: false,
            escape: Escape::None,
            utf8_need: 0,
            utf8_seen: 0,
            utf8_low: 0,
            utf8_high: 0,
            text: Vec::new(),
            delta_from: 0,
            num: Num::Zero,
            number_offset: 0,
            number_text: Vec::new(),
            number_mark: 0,
            literal: b"",
            literal_matched: 0,
            raw: Vec::new(),
            raw_open: 0,
            raw_mark: 0,
            building_depth: None,
            building: Vec::new(),
        }
    }

    /// Subscribes to the values at `pattern` (see [`Pattern`] for the syntax).
    ///
    /// Call before the first [`feed`](Parser::feed). The same value may match several
    /// subscriptions; each gets its own events, in subscription order.
    pub fn subscribe(&mut self, pattern: &str, capture: Capture) -> Result<SubscriptionId> {
        let pattern = Pattern::parse(pattern)?;
        self.subscribe_pattern(pattern, capture)
    }

    /// Like [`subscribe`](Parser::subscribe), with an already parsed [`Pattern`].
    pub fn subscribe_pattern(
        &mut self,
        pattern: Pattern,
        capture: Capture,
    ) -> Result<SubscriptionId> {
        if self.started {
            return Err(Error::SubscribeAfterStart);
        }
        let id = u32::try_from(self.subscriptions.len()).map_err(|_| Error::InvalidPattern {
            pattern: pattern.as_str().to_owned(),
            position: 0,
            message: "too many subscriptions".to_owned(),
        })?;
        for segment in pattern.segments() {
            if let crate::Segment::Key(name) = segment {
                self.config.max_key_bytes = self.config.max_key_bytes.max(name.len() + 1);
            }
        }
        self.subscriptions.push(Subscription { pattern, capture });
        Ok(SubscriptionId(id))
    }

    /// Total bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Parses the next chunk of the document, calling `handler` for every event.
    ///
    /// Chunks may split the document anywhere (inside a string, an escape, a UTF-8 character,
    /// a number). After an error the parser stays failed and returns the same error again.
    #[inline(always)]
    pub fn feed<H: Handler + ?Sized>(&mut self, chunk: &[u8], handler: &mut H) -> Result<()> {
        // Most pieces of a token stream are plain text inside one string: they take this
        // short path, inlined into the caller's loop; everything else goes through one call
        // of `feed_general`.
        let mut scanned = 0;
        if self.state == State::String {
            scanned = scan_plain(chunk, 0);
            if scanned == chunk.len() {
                self.push_string_bytes(chunk);
                // At the end of a chunk inside a string, only a raw capture and deltas have
                // work to do (see `end_chunk`).
                if self.raw_open > 0 || self.string_deltas {
                    self.end_chunk(chunk, handler);
                }
                self.offset += chunk.len() as u64;
                return Ok(());
            }
        }
        self.feed_general(chunk, scanned, handler)
    }

    /// [`feed`](Parser::feed) beyond its short path. When the parser is inside a string,
    /// `chunk[..scanned]` is plain, valid text, already scanned.
    #[inline(never)]
    fn feed_general<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        scanned: usize,
        handler: &mut H,
    ) -> Result<()> {
        // A failed parser is also in the `Finished` state.
        if self.state == State::Finished {
            return Err(self.failed.clone().unwrap_or(Error::AlreadyFinished));
        }
        self.started = true;
        let result = if self.state == State::String {
            match self.string_scanned(chunk, 0, scanned, handler) {
                Ok(at) => self.run(chunk, at, handler),
                Err(stop) => Err(stop),
            }
        } else {
            self.run(chunk, 0, handler)
        };
        match result {
            Ok(()) => {
                self.offset += chunk.len() as u64;
                Ok(())
            }
            Err(Stop) => Err(self.recorded_error()),
        }
    }

    /// Declares the end of input: the document must be complete.
    pub fn finish<H: Handler + ?Sized>(&mut self, handler: &mut H) -> Result<()> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.state == State::Finished {
            return Err(Error::AlreadyFinished);
        }
        self.started = true;
        self.raw_mark = 0;
        self.number_mark = 0;
        if self.state == State::Number
            && self.num.can_end()
            && self.frames.is_empty()
            && let Err(Stop) = self.end_number(&[], 0, handler)
        {
            return Err(self.recorded_error());
        }
        if self.state == State::AfterValue && self.frames.is_empty() {
            self.state = State::Finished;
            return Ok(());
        }
        let expected = self.expected_here();
        let error = Error::Incomplete { offset: self.offset, path: self.path_string(), expected };
        self.fail(error);
        Err(self.recorded_error())
    }

    /// Records the error that stops the parser for good.
    fn fail(&mut self, error: Error) -> Stop {
        self.failed = Some(error);
        self.state = State::Finished;
        Stop
    }

    fn recorded_error(&self) -> Error {
        self.failed.clone().unwrap_or_else(|| Error::Syntax {
            offset: self.offset,
            path: self.path_string(),
            message: "internal error: the parser stopped without recording why".to_owned(),
        })
    }

    fn path_string(&self) -> String {
        Path::new(&self.frames, &self.keys).to_string()
    }

    #[cold]
    fn fail_syntax(&mut self, chunk: &[u8], at: usize, message: &str) -> Stop {
        let found = match chunk.get(at) {
            Some(&b) if b.is_ascii_graphic() || b == b' ' => format!("'{}'", b as char),
            Some(&b) => format!("byte 0x{b:02x}"),
            None => "end of input".to_owned(),
        };
        let error = Error::Syntax {
            offset: self.offset + at as u64,
            path: self.path_string(),
            message: format!("{message}, found {found}"),
        };
        self.fail(error)
    }

    fn expected_here(&self) -> String {
        let in_object = self.frames.last().map(|frame| frame.is_object);
        let after_value = match in_object {
            None => "end of input",
            Some(true) => "',' or '}'",
            Some(false) => "',' or ']'",
        };
        let expected = match self.state {
            State::Value => "a JSON value",
            State::ValueOrArrayEnd => "a JSON value or ']'",
            State::KeyOrObjectEnd => "a string key or '}'",
            State::Key => "a string key",
            State::Colon => "':'",
            State::AfterValue => after_value,
            State::String | State::StringCut if self.string_is_key => {
                "the rest of the key and its closing '\"'"
            }
            State::String | State::StringCut => "the rest of the string and its closing '\"'",
            State::Number if self.num.can_end() => after_value,
            State::Number => "more digits of the number",
            State::Literal => "the rest of the literal",
            State::Finished => "nothing",
        };
        match self.state {
            State::Literal => {
                format!("the rest of '{}'", std::str::from_utf8(self.literal).unwrap_or("literal"))
            }
            _ => expected.to_owned(),
        }
    }

    /// Parses one chunk from `at`. `raw_mark` and `number_mark` are 0 here: `end_chunk` resets them
    /// after keeping what an open capture needs, and they are set when a capture starts.
    #[inline(always)]
    fn run<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut at: usize,
        handler: &mut H,
    ) -> Result<(), Stop> {
        let len = chunk.len();
        while at < len {
            at = match self.state {
                State::String => self.string(chunk, at, handler)?,
                State::StringCut => self.string_cut(chunk, at)?,
                State::Number => self.number(chunk, at, handler)?,
                State::Literal => self.literal(chunk, at, handler)?,
                State::Value
                | State::ValueOrArrayEnd
                | State::KeyOrObjectEnd
                | State::Key
                | State::Colon
                | State::AfterValue
                | State::Finished => {
                    let byte = chunk[at];
                    if WHITESPACE[byte as usize] {
                        at + 1
                    } else {
                        self.structural(chunk, at, byte, handler)?
                    }
                }
            };
        }
        self.end_chunk_if_capturing(chunk, handler);
        Ok(())
    }

    /// The chunk ends: keep what open captures need from it (rare: only while capturing).
    #[inline]
    fn end_chunk_if_capturing<H: Handler + ?Sized>(&mut self, chunk: &[u8], handler: &mut H) {
        if self.raw_open > 0 || self.building_depth.is_some() || self.string_deltas {
            self.end_chunk(chunk, handler);
        }
    }

    fn end_chunk<H: Handler + ?Sized>(&mut self, chunk: &[u8], handler: &mut H) {
        let len = chunk.len();
        if self.raw_open > 0 {
            self.raw.extend_from_slice(&chunk[self.raw_mark.min(len)..]);
        }
        self.raw_mark = 0;
        if self.state == State::Number && self.building_depth.is_some() {
            self.number_text.extend_from_slice(&chunk[self.number_mark.min(len)..]);
        }
        self.number_mark = 0;
        if matches!(self.state, State::String | State::StringCut) && self.string_deltas {
            self.flush_delta(handler);
        }
    }

    #[inline(always)]
    fn structural<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        at: usize,
        byte: u8,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        match self.state {
            State::Value | State::ValueOrArrayEnd => {
                if self.state == State::ValueOrArrayEnd {
                    if byte == b']' {
                        return self.close(chunk, at, false, handler);
                    }
                    if let Some(frame) = self.frames.last_mut() {
                        frame.has_child = true;
                    }
                }
                self.start_value(chunk, at, byte, handler)
            }
            State::KeyOrObjectEnd | State::Key => match byte {
                b'"' => {
                    self.start_key();
                    Ok(at + 1)
                }
                b'}' if self.state == State::KeyOrObjectEnd => self.close(chunk, at, true, handler),
                _ if self.state == State::KeyOrObjectEnd => {
                    Err(self.fail_syntax(chunk, at, "expected a string key or '}'"))
                }
                _ => Err(self.fail_syntax(chunk, at, "expected a string key")),
            },
            State::Colon => {
                if byte == b':' {
                    self.state = State::Value;
                    Ok(at + 1)
                } else {
                    Err(self.fail_syntax(chunk, at, "expected ':'"))
                }
            }
            State::AfterValue => {
                let Some(frame) = self.frames.last_mut() else {
                    return Err(self.fail_syntax(chunk, at, "expected end of input"));
                };
                match (frame.is_object, byte) {
                    (true, b',') => {
                        frame.has_child = false;
                        self.state = State::Key;
                        Ok(at + 1)
                    }
                    (false, b',') => {
                        frame.index += 1;
                        self.state = State::Value;
                        Ok(at + 1)
                    }
                    (true, b'}') => self.close(chunk, at, true, handler),
                    (false, b']') => self.close(chunk, at, false, handler),
                    (true, _) => Err(self.fail_syntax(chunk, at, "expected ',' or '}'")),
                    (false, _) => Err(self.fail_syntax(chunk, at, "expected ',' or ']'")),
                }
            }
            State::Finished => Err(self.fail_syntax(chunk, at, "expected end of input")),
            State::String | State::StringCut | State::Number | State::Literal => {
                Err(self.fail_syntax(chunk, at, "internal error: not a structural state"))
            }
        }
    }

    #[inline(always)]
    fn start_value<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        at: usize,
        byte: u8,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        match byte {
            b'{' | b'[' => {
                if self.frames.len() >= self.config.max_depth {
                    let error = Error::TooDeep {
                        offset: self.offset + at as u64,
                        path: self.path_string(),
                        limit: self.config.max_depth,
                    };
                    return Err(self.fail(error));
                }
                let is_object = byte == b'{';
                let kind = if is_object { ValueKind::Object } else { ValueKind::Array };
                self.begin_value(kind, chunk, at, handler);
                if self.building_depth.is_some() {
                    self.building.push(if is_object {
                        Building::Object(Map::new(), String::new())
                    } else {
                        Building::Array(Vec::new())
                    });
                }
                let live_start = self.live.len();
                self.live.extend_from_slice(&self.pending_prefix);
                self.frames.push(Frame {
                    is_object,
                    has_child: false,
                    index: 0,
                    key_start: self.keys.len(),
                    live_start,
                });
                self.state = if is_object { State::KeyOrObjectEnd } else { State::ValueOrArrayEnd };
            }
            b'"' => {
                self.begin_value(ValueKind::String, chunk, at, handler);
                self.string_is_key = false;
                self.string_keep = self.string_deltas || self.building_depth.is_some();
                self.text.clear();
                self.delta_from = 0;
                self.state = State::String;
            }
            b'-' | b'0'..=b'9' => {
                self.begin_value(ValueKind::Number, chunk, at, handler);
                self.number_offset = self.offset + at as u64;
                self.number_text.clear();
                self.number_mark = at;
                self.num = match byte {
                    b'-' => Num::Minus,
                    b'0' => Num::Zero,
                    _ => Num::Int,
                };
                self.state = State::Number;
            }
            b't' | b'f' | b'n' => {
                let (kind, literal): (ValueKind, &'static [u8]) = match byte {
                    b't' => (ValueKind::Bool, b"true"),
                    b'f' => (ValueKind::Bool, b"false"),
                    _ => (ValueKind::Null, b"null"),
                };
                self.begin_value(kind, chunk, at, handler);
                self.literal = literal;
                self.literal_matched = 1;
                self.state = State::Literal;
            }
            _ => return Err(self.fail_syntax(chunk, at, "expected a JSON value")),
        }
        Ok(at + 1)
    }

    /// Works out which subscriptions the next value (whose path is the current location)
    /// matches exactly, and which it is a proper prefix of.
    #[inline(always)]
    fn select(&mut self) {
        self.pending_exact.clear();
        self.pending_prefix.clear();
        self.selected = true;
        // Nothing is alive below the current container: the common case, kept cheap.
        if self.frames.last().is_some_and(|frame| frame.live_start == self.live.len()) {
            return;
        }
        self.select_children();
    }

    fn select_children(&mut self) {
        if self.subscriptions.is_empty() {
            return;
        }
        let depth = self.frames.len();
        let Some(frame) = self.frames.last() else {
            for (id, subscription) in self.subscriptions.iter().enumerate() {
                let id = id as u32;
                if subscription.pattern.segments().is_empty() {
                    self.pending_exact.push(id);
                } else {
                    self.pending_prefix.push(id);
                }
            }
            return;
        };
        let key = self.keys.get(frame.key_start..).unwrap_or_default();
        for &id in &self.live[frame.live_start..] {
            let segments = self.subscriptions[id as usize].pattern.segments();
            let Some(segment) = segments.get(depth - 1) else { continue };
            let hit = if frame.is_object {
                !self.key_truncated && segment.matches_key(key)
                    || self.key_truncated && matches!(segment, crate::Segment::Wildcard)
            } else {
                segment.matches_index(frame.index)
            };
            if hit {
                if segments.len() == depth {
                    self.pending_exact.push(id);
                } else {
                    self.pending_prefix.push(id);
                }
            }
        }
    }

    /// A value starts at `at`: emit `Started`, open its captures.
    #[inline(always)]
    fn begin_value<H: Handler + ?Sized>(
        &mut self,
        kind: ValueKind,
        chunk: &[u8],
        at: usize,
        handler: &mut H,
    ) {
        if !self.selected {
            self.select();
        }
        self.selected = false;
        self.string_deltas = false;
        if !self.pending_exact.is_empty() {
            self.open_matches(kind, chunk, at, handler);
        }
    }

    /// The value starting at `at` matches `pending_exact`: emit `Started`, open captures.
    fn open_matches<H: Handler + ?Sized>(
        &mut self,
        kind: ValueKind,
        chunk: &[u8],
        at: usize,
        handler: &mut H,
    ) {
        let depth = self.frames.len();
        for index in 0..self.pending_exact.len() {
            let id = self.pending_exact[index];
            let capture = self.subscriptions[id as usize].capture;
            self.emit(handler, id, EventKind::Started(kind));
            let mut raw_start = 0;
            match capture {
                Capture::None => {}
                Capture::Raw => {
                    if self.raw_open == 0 {
                        self.raw.clear();
                        self.raw_mark = at;
                    } else {
                        self.flush_raw(chunk, at);
                    }
                    raw_start = self.raw.len();
                    self.raw_open += 1;
                }
                Capture::Value => {
                    if self.building_depth.is_none() {
                        self.building_depth = Some(depth);
                    }
                }
                Capture::Deltas => {
                    if kind == ValueKind::String {
                        self.string_deltas = true;
                    }
                }
            }
            self.active.push(Active { subscription: id, depth, capture, raw_start });
        }
    }

    fn start_key(&mut self) {
        self.string_is_key = true;
        self.string_keep = true;
        self.string_deltas = false;
        self.key_truncated = false;
        if let Some(frame) = self.frames.last_mut() {
            frame.has_child = false;
            self.keys.truncate(frame.key_start);
        }
        self.state = State::String;
    }

    /// A key is complete: the location now includes it.
    #[inline(always)]
    fn end_key<H: Handler + ?Sized>(&mut self, handler: &mut H) {
        if let Some(frame) = self.frames.last_mut() {
            frame.has_child = true;
        }
        self.select();
        for index in 0..self.pending_exact.len() {
            let id = self.pending_exact[index];
            self.emit(handler, id, EventKind::KeySeen);
        }
        if self.building_depth.is_some()
            && let (Some(Building::Object(_, pending_key)), Some(frame)) =
                (self.building.last_mut(), self.frames.last())
        {
            let key = self.keys.get(frame.key_start..).unwrap_or_default();
            *pending_key = String::from_utf8_lossy(key).into_owned();
        }
        self.state = State::Colon;
    }

    fn close<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        at: usize,
        is_object: bool,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        let Some(frame) = self.frames.pop() else {
            return Err(self.fail_syntax(chunk, at, "internal error: no open container"));
        };
        debug_assert_eq!(frame.is_object, is_object);
        self.live.truncate(frame.live_start);
        self.keys.truncate(frame.key_start);
        self.key_truncated = false;
        let value = if self.building_depth.is_some() {
            match self.building.pop() {
                Some(Building::Array(items)) => Some(Value::Array(items)),
                Some(Building::Object(map, _)) => Some(Value::Object(map)),
                None => None,
            }
        } else {
            None
        };
        self.end_value(chunk, at + 1, value, handler);
        Ok(at + 1)
    }

    /// The value at the current location ended just before `end` (exclusive) in `chunk`.
    /// `value` is the built value when a [`Capture::Value`] is open (`building_depth`).
    #[inline]
    fn end_value<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        end: usize,
        value: Option<Value>,
        handler: &mut H,
    ) {
        self.state = State::AfterValue;
        // Nothing matched and nothing is being built: the common case, kept cheap.
        if self.active.is_empty() && self.building_depth.is_none() {
            return;
        }
        self.close_matches(chunk, end, value, handler);
    }

    /// Emits the end-of-value events of the matches open at this depth and adds the value
    /// to the value being built.
    fn close_matches<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        end: usize,
        mut value: Option<Value>,
        handler: &mut H,
    ) {
        let depth = self.frames.len();
        if !self.active.is_empty() {
            let mut value_captures = self
                .active
                .iter()
                .rev()
                .take_while(|active| active.depth == depth)
                .filter(|active| active.capture == Capture::Value)
                .count();
            let mut finished = Vec::new();
            while let Some(active) = self.active.last().copied() {
                if active.depth != depth {
                    break;
                }
                self.active.pop();
                finished.push(active);
            }
            // Events in subscription order, as they were opened.
            for active in finished.into_iter().rev() {
                match active.capture {
                    Capture::None | Capture::Deltas => {}
                    Capture::Raw => {
                        self.flush_raw(chunk, end);
                        let start = active.raw_start.min(self.raw.len());
                        let raw = std::mem::take(&mut self.raw);
                        self.emit(handler, active.subscription, EventKind::Raw(&raw[start..]));
                        self.raw = raw;
                        self.raw_open -= 1;
                    }
                    Capture::Value => {
                        value_captures -= 1;
                        let captured = if value_captures == 0 && self.building.is_empty() {
                            value.take()
                        } else {
                            value.clone()
                        };
                        if let Some(captured) = captured {
                            self.emit(handler, active.subscription, EventKind::Value(captured));
                        }
                    }
                }
                self.emit(handler, active.subscription, EventKind::Ended);
            }
        }
        if let Some(value) = value {
            match self.building.last_mut() {
                Some(Building::Array(items)) => items.push(value),
                Some(Building::Object(map, key)) => {
                    map.insert(std::mem::take(key), value);
                }
                None => {}
            }
        }
        if self.building_depth == Some(depth) {
            self.building_depth = None;
        }
    }

    fn flush_raw(&mut self, chunk: &[u8], end: usize) {
        let from = self.raw_mark.min(end);
        self.raw.extend_from_slice(&chunk[from..end]);
        self.raw_mark = end;
    }

    fn emit<H: Handler + ?Sized>(&self, handler: &mut H, id: u32, kind: EventKind<'_>) {
        handler.event(Event {
            subscription: SubscriptionId(id),
            path: Path::new(&self.frames, &self.keys),
            kind,
        });
    }

    fn flush_delta<H: Handler + ?Sized>(&mut self, handler: &mut H) {
        let end = self.text.len().saturating_sub(self.utf8_seen as usize);
        if end <= self.delta_from {
            return;
        }
        let depth = self.frames.len();
        if let Ok(delta) = std::str::from_utf8(&self.text[self.delta_from..end]) {
            for active in self.active.iter().rev().take_while(|active| active.depth == depth) {
                if active.capture == Capture::Deltas {
                    handler.event(Event {
                        subscription: SubscriptionId(active.subscription),
                        path: Path::new(&self.frames, &self.keys),
                        kind: EventKind::StringDelta(delta),
                    });
                }
            }
        }
        self.delta_from = end;
    }

    /// Appends decoded string bytes to the key buffer or the text buffer, when the string's
    /// text is kept.
    #[inline(always)]
    fn push_string_bytes(&mut self, bytes: &[u8]) {
        if self.string_keep {
            self.keep_string_bytes(bytes);
        }
    }

    fn keep_string_bytes(&mut self, bytes: &[u8]) {
        if self.string_is_key {
            let key_start = self.frames.last().map_or(0, |frame| frame.key_start);
            let used = self.keys.len().saturating_sub(key_start);
            let room = self.config.max_key_bytes.saturating_sub(used);
            if bytes.len() > room && self.building_depth.is_none() {
                self.keys.extend_from_slice(&bytes[..room]);
                self.key_truncated = true;
            } else {
                self.keys.extend_from_slice(bytes);
            }
        } else {
            self.text.extend_from_slice(bytes);
        }
    }

    fn push_string_char(&mut self, c: char) {
        let mut buffer = [0; 4];
        self.push_string_bytes(c.encode_utf8(&mut buffer).as_bytes());
    }

    /// Inside a string, from `at`; returns where parsing continues.
    #[inline]
    fn string<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        at: usize,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        let scanned = scan_plain(chunk, at);
        self.string_scanned(chunk, at, scanned, handler)
    }

    /// Inside a string: `chunk[from..at]` is plain, valid text, already scanned; goes on from
    /// `at`; returns where parsing continues.
    ///
    /// UTF-8 is validated as the text is scanned (escapes are ASCII, so validating the raw
    /// bytes is the same as validating the text), so the first error in byte order is the one
    /// reported, whatever the chunking.
    #[inline(always)]
    fn string_scanned<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        from: usize,
        mut at: usize,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        let len = chunk.len();
        let mut run_start = from;
        loop {
            let Some(&byte) = chunk.get(at) else {
                self.push_string_bytes(&chunk[run_start..len]);
                return Ok(len);
            };
            match byte {
                b'"' => {
                    self.push_string_bytes(&chunk[run_start..at]);
                    return self.end_string(chunk, at + 1, handler);
                }
                b'\\' => {
                    self.push_string_bytes(&chunk[run_start..at]);
                    if let Some(after) = self.escape_in_chunk(chunk, at) {
                        run_start = after;
                        at = scan_plain(chunk, after);
                        continue;
                    }
                    // Cut by the chunk end (or invalid): byte by byte from here.
                    self.escape = Escape::Backslash;
                    self.state = State::StringCut;
                    return self.string_cut(chunk, at + 1);
                }
                0x80.. => {
                    // A UTF-8 character cut by the chunk end, or invalid: byte by byte from here.
                    self.utf8_slow(chunk, at, len)?;
                    debug_assert!(self.utf8_need > 0, "scan_plain stopped at a whole character");
                    self.push_string_bytes(&chunk[run_start..len]);
                    self.state = State::StringCut;
                    return Ok(len);
                }
                _ => {
                    return Err(self.fail_syntax(
                        chunk,
                        at,
                        "control characters must be escaped in strings",
                    ));
                }
            }
        }
    }

    /// Inside an escape or a UTF-8 character that a chunk boundary cut, from `at`: consumes
    /// its remaining bytes (as many as this chunk has); returns where parsing continues.
    #[cold]
    fn string_cut(&mut self, chunk: &[u8], at: usize) -> Result<usize, Stop> {
        let at = if self.escape != Escape::None {
            self.escape(chunk, at)?
        } else {
            self.utf8_cut(chunk, at)?
        };
        if self.escape == Escape::None && self.utf8_need == 0 {
            self.state = State::String;
        }
        Ok(at)
    }

    /// The rest of a UTF-8 character that a chunk boundary cut, from `at`.
    fn utf8_cut(&mut self, chunk: &[u8], at: usize) -> Result<usize, Stop> {
        let need = usize::from(self.utf8_need);
        if let Some(rest) = chunk.get(at..at + need)
            && let Some((&next, later)) = rest.split_first()
            && (self.utf8_low..=self.utf8_high).contains(&next)
            && later.iter().all(|&byte| byte & 0xC0 == 0x80)
        {
            (self.utf8_need, self.utf8_seen) = (0, 0);
            self.push_string_bytes(rest);
            return Ok(at + need);
        }
        let end = self.utf8_slow(chunk, at, chunk.len().min(at + need))?;
        self.push_string_bytes(&chunk[at..end]);
        Ok(end)
    }

    /// Decodes the escape starting with the '\\' at `at` when it is complete and valid inside
    /// this chunk (the common case); returns the position after it. `None` leaves the escape
    /// to the byte-by-byte state machine, which also produces the exact error.
    #[inline]
    fn escape_in_chunk(&mut self, chunk: &[u8], at: usize) -> Option<usize> {
        let decoded = match *chunk.get(at + 1)? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let code = hex4(chunk.get(at + 2..at + 6)?)?;
                let (scalar, after) = match code {
                    0xD800..=0xDBFF => {
                        let low = chunk.get(at + 6..at + 12)?;
                        if low[0] != b'\\' || low[1] != b'u' {
                            return None;
                        }
                        let low = hex4(&low[2..])?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return None;
                        }
                        let scalar = 0x10000
                            + ((u32::from(code) - 0xD800) << 10)
                            + (u32::from(low) - 0xDC00);
                        (scalar, at + 12)
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => (u32::from(code), at + 6),
                };
                if self.string_keep {
                    self.push_string_char(char::from_u32(scalar)?);
                }
                return Some(after);
            }
            _ => return None,
        };
        if self.string_keep {
            self.push_string_char(decoded);
        }
        Some(at + 2)
    }

    /// Validates UTF-8 in `chunk[from..to]` byte by byte, continuing a character begun
    /// earlier; reports the exact offending byte, and leaves a character cut at `to` pending.
    fn utf8_slow(&mut self, chunk: &[u8], from: usize, to: usize) -> Result<usize, Stop> {
        let (mut need, mut seen, mut low, mut high) =
            (self.utf8_need, self.utf8_seen, self.utf8_low, self.utf8_high);
        let mut at = from;
        let mut invalid = None;
        while at < to {
            let byte = chunk[at];
            if need == 0 {
                if byte < 0x80 {
                    at += 1;
                    continue;
                }
                (need, low, high) = match byte {
                    0xC2..=0xDF => (1, 0x80, 0xBF),
                    0xE0 => (2, 0xA0, 0xBF),
                    0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
                    0xED => (2, 0x80, 0x9F),
                    0xF0 => (3, 0x90, 0xBF),
                    0xF1..=0xF3 => (3, 0x80, 0xBF),
                    0xF4 => (3, 0x80, 0x8F),
                    _ => {
                        invalid = Some(at);
                        break;
                    }
                };
                seen = 1;
            } else {
                if byte < low || byte > high {
                    invalid = Some(at);
                    break;
                }
                need -= 1;
                seen = if need == 0 { 0 } else { seen + 1 };
                (low, high) = (0x80, 0xBF);
            }
            at += 1;
        }
        (self.utf8_need, self.utf8_seen, self.utf8_low, self.utf8_high) = (need, seen, low, high);
        match invalid {
            Some(at) => Err(self.fail_syntax(chunk, at, "invalid UTF-8 in string")),
            None => Ok(to),
        }
    }

    #[inline(always)]
    fn end_string<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        end: usize,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        if self.string_is_key {
            self.end_key(handler);
            return Ok(end);
        }
        if self.string_deltas {
            self.flush_delta(handler);
        }
        let value = if self.building_depth.is_some() {
            Some(Value::String(String::from_utf8_lossy(&self.text).into_owned()))
        } else {
            None
        };
        self.end_value(chunk, end, value, handler);
        Ok(end)
    }

    /// Inside an escape sequence cut by a chunk boundary (or invalid), from `at`: consumes
    /// bytes until the escape is complete or the chunk ends; returns where parsing continues.
    fn escape(&mut self, chunk: &[u8], mut at: usize) -> Result<usize, Stop> {
        let mut state = self.escape;
        while let Some(&byte) = chunk.get(at) {
            state = self.escape_byte(chunk, at, byte, state)?;
            at += 1;
            if state == Escape::None {
                break;
            }
        }
        self.escape = state;
        Ok(at)
    }

    /// One byte of an escape sequence: the state after it.
    #[inline]
    fn escape_byte(
        &mut self,
        chunk: &[u8],
        at: usize,
        byte: u8,
        state: Escape,
    ) -> Result<Escape, Stop> {
        Ok(match state {
            Escape::None => Escape::None,
            Escape::Backslash => {
                let decoded = match byte {
                    b'"' => Some('"'),
                    b'\\' => Some('\\'),
                    b'/' => Some('/'),
                    b'b' => Some('\u{8}'),
                    b'f' => Some('\u{c}'),
                    b'n' => Some('\n'),
                    b'r' => Some('\r'),
                    b't' => Some('\t'),
                    b'u' => None,
                    _ => return Err(self.fail_syntax(chunk, at, "invalid escape in string")),
                };
                match decoded {
                    Some(c) => {
                        self.push_string_char(c);
                        Escape::None
                    }
                    None => Escape::Hex { digits: 0, code: 0 },
                }
            }
            Escape::Hex { digits, code } => {
                let Some(digit) = hex_digit(byte) else {
                    return Err(self.fail_syntax(chunk, at, "expected a hex digit in \\u escape"));
                };
                let code = code << 4 | digit;
                if digits < 3 {
                    Escape::Hex { digits: digits + 1, code }
                } else {
                    match code {
                        0xD800..=0xDBFF => Escape::LowBackslash { high: code },
                        0xDC00..=0xDFFF => {
                            return Err(self.fail_syntax(
                                chunk,
                                at,
                                "lone low surrogate in \\u escape (expected a high surrogate first)",
                            ));
                        }
                        _ => {
                            let c = char::from_u32(u32::from(code)).unwrap_or('\u{fffd}');
                            self.push_string_char(c);
                            Escape::None
                        }
                    }
                }
            }
            Escape::LowBackslash { high } => {
                if byte != b'\\' {
                    return Err(self.fail_syntax(
                        chunk,
                        at,
                        "lone high surrogate: expected '\\' and a low surrogate escape",
                    ));
                }
                Escape::LowU { high }
            }
            Escape::LowU { high } => {
                if byte != b'u' {
                    return Err(self.fail_syntax(
                        chunk,
                        at,
                        "lone high surrogate: expected 'u' and a low surrogate",
                    ));
                }
                Escape::LowHex { high, digits: 0, code: 0 }
            }
            Escape::LowHex { high, digits, code } => {
                let Some(digit) = hex_digit(byte) else {
                    return Err(self.fail_syntax(chunk, at, "expected a hex digit in \\u escape"));
                };
                let code = code << 4 | digit;
                if digits < 3 {
                    Escape::LowHex { high, digits: digits + 1, code }
                } else {
                    if !(0xDC00..=0xDFFF).contains(&code) {
                        return Err(self.fail_syntax(
                            chunk,
                            at,
                            "lone high surrogate: the next escape is not a low surrogate",
                        ));
                    }
                    let scalar =
                        0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(code) - 0xDC00);
                    self.push_string_char(char::from_u32(scalar).unwrap_or('\u{fffd}'));
                    Escape::None
                }
            }
        })
    }

    /// Inside a number, from `at`; returns where parsing continues.
    #[inline(always)]
    fn number<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut at: usize,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        let len = chunk.len();
        let mut num = self.num;
        while at < len {
            let byte = chunk[at];
            num = match (num, byte) {
                (Num::Int | Num::Frac | Num::ExpDigits, b'0'..=b'9') => num,
                (Num::Minus, b'0') => Num::Zero,
                (Num::Minus, b'1'..=b'9') => Num::Int,
                (Num::Minus, _) => {
                    return Err(self.fail_syntax(chunk, at, "expected a digit after '-'"));
                }
                (Num::Zero, b'0'..=b'9') => {
                    return Err(self.fail_syntax(
                        chunk,
                        at,
                        "leading zeros are not allowed in numbers",
                    ));
                }
                (Num::Zero | Num::Int, b'.') => Num::Dot,
                (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
                (Num::Dot, b'0'..=b'9') => Num::Frac,
                (Num::Dot, _) => {
                    return Err(self.fail_syntax(chunk, at, "expected a digit after '.'"));
                }
                (Num::Exp, b'+' | b'-') => Num::ExpSign,
                (Num::Exp | Num::ExpSign, b'0'..=b'9') => Num::ExpDigits,
                (Num::Exp | Num::ExpSign, _) => {
                    return Err(self.fail_syntax(chunk, at, "expected a digit in the exponent"));
                }
                (Num::Zero | Num::Int | Num::Frac | Num::ExpDigits, _) => {
                    self.end_number(chunk, at, handler)?;
                    return Ok(at);
                }
            };
            at += 1;
        }
        self.num = num;
        Ok(len)
    }

    fn end_number<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        end: usize,
        handler: &mut H,
    ) -> Result<(), Stop> {
        let value = if self.building_depth.is_some() {
            self.number_text.extend_from_slice(&chunk[self.number_mark.min(end)..end]);
            let number = std::str::from_utf8(&self.number_text)
                .ok()
                .and_then(|text| serde_json::from_str::<serde_json::Number>(text).ok());
            match number {
                Some(number) => Some(Value::Number(number)),
                None => {
                    let error = Error::NumberOutOfRange {
                        offset: self.number_offset,
                        path: self.path_string(),
                    };
                    return Err(self.fail(error));
                }
            }
        } else {
            None
        };
        self.end_value(chunk, end, value, handler);
        Ok(())
    }

    /// Inside `true`, `false` or `null`, from `at`; returns where parsing continues.
    #[inline(always)]
    fn literal<H: Handler + ?Sized>(
        &mut self,
        chunk: &[u8],
        mut at: usize,
        handler: &mut H,
    ) -> Result<usize, Stop> {
        let len = chunk.len();
        while at < len && self.literal_matched < self.literal.len() {
            if chunk[at] != self.literal[self.literal_matched] {
                let word = std::str::from_utf8(self.literal).unwrap_or("literal");
                return Err(self.fail_syntax(
                    chunk,
                    at,
                    &format!("invalid literal (expected '{word}')"),
                ));
            }
            self.literal_matched += 1;
            at += 1;
        }
        if self.literal_matched == self.literal.len() {
            let value = self.building_depth.map(|_| match self.literal {
                b"true" => Value::Bool(true),
                b"false" => Value::Bool(false),
                _ => Value::Null,
            });
            self.end_value(chunk, at, value, handler);
        }
        Ok(at)
    }
}

#[inline]
fn hex_digit(byte: u8) -> Option<u16> {
    match byte {
        b'0'..=b'9' => Some(u16::from(byte - b'0')),
        b'a'..=b'f' => Some(u16::from(byte - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(byte - b'A' + 10)),
        _ => None,
    }
}
