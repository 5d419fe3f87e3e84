//! An incremental (push) JSON parser for token streams: strict RFC 8259, chunks of any size,
//! path subscriptions, and string deltas — in one pass over the bytes.
//!
//! A language model emits a JSON action a few bytes at a time. Callers want to know
//! `$.action.type` as soon as it is parsed and to show `$.action.args.content` as it grows,
//! without re-parsing the whole buffer on every chunk (which is quadratic).
//! [`Parser`] is a hand-written state machine: every state that can straddle a chunk boundary —
//! inside a string, a `\uXXXX` escape or surrogate pair, a multi-byte UTF-8 character, a
//! number, a literal — is explicit, so each byte is looked at once, whatever the chunking.
//!
//! # Design
//!
//! * **Push, not pull.** [`Parser::feed`] takes a chunk and calls a [`Handler`] (any
//!   `FnMut(Event)`) for what happened in it; [`Parser::finish`] declares the end of input.
//! * **Subscriptions.** [`Parser::subscribe`] takes a [`Pattern`] (`$.a.b`, `$.a[*].c`,
//!   `$['k']`, `$.a[2]`, `$.*`) and a [`Capture`]: nothing (just `KeySeen` / `Started` /
//!   `Ended` events), the whole [`serde_json::Value`], the raw bytes, or string deltas.
//!   Matching is incremental: each open container keeps the subscriptions still alive below
//!   it, so unsubscribed parts of the document cost only the scan.
//! * **Bounded memory.** One small frame per open container plus the current key of each
//!   open object; captured values are the only other growth. Nesting is limited by
//!   [`Config::max_depth`] (default 512), never by the call stack: nothing recurses.
//! * **Strict.** RFC 8259 exactly: no trailing commas, comments, leading zeros, single
//!   quotes, unescaped control characters, invalid UTF-8, lone surrogate escapes, byte order
//!   marks, or trailing garbage. Errors name the byte offset and the JSON path, and a failed
//!   parser stays failed. It never panics on any input.
//!
//! # Policy for JSONTestSuite's implementation-defined (`i_`) cases
//!
//! * Numbers are accepted whatever their magnitude (`1e400`, `-1e-400`, 30-digit integers):
//!   the grammar allows them. A [`Capture::Value`] converts numbers the way `serde_json`
//!   does; one that does not fit an `f64` fails with [`Error::NumberOutOfRange`] —
//!   use [`Capture::Raw`] to keep the exact text.
//! * Lone or inverted surrogate escapes (`"\uD800"`, `"\uDFAA"`) are rejected: the decoded
//!   text must be valid Unicode.
//! * Invalid UTF-8 (overlong forms, encoded surrogates, code points above U+10FFFF, truncated
//!   sequences, Latin-1 bytes) is rejected, and so is UTF-16.
//! * A UTF-8 byte order mark is rejected (RFC 8259 §8.1: a parser *may* ignore it).
//! * 500 nested arrays are accepted under the default depth limit of 512.
//!
//! # Example
//!
//! ```
//! use stream_json::{Capture, Event, EventKind, Parser, ValueKind};
//!
//! let mut parser = Parser::new();
//! let kind = parser.subscribe("$.action.type", Capture::Value)?;
//! let text = parser.subscribe("$.action.args.content", Capture::Deltas)?;
//!
//! let mut log = Vec::new();
//! let mut handler = |event: Event<'_>| {
//!     let line = match event.kind {
//!         EventKind::Started(ValueKind::String) if event.subscription == kind => {
//!             format!("{} started", event.path)
//!         }
//!         EventKind::Value(value) => format!("{} = {value}", event.path),
//!         EventKind::StringDelta(delta) if event.subscription == text => {
//!             format!("{} += {delta:?}", event.path)
//!         }
//!         _ => return,
//!     };
//!     log.push(line);
//! };
//! let document = br#"{"action": {"type": "final_answer", "args": {"content": "Hello!"}}}"#;
//! for chunk in document.chunks(20) {
//!     parser.feed(chunk, &mut handler)?;
//! }
//! parser.finish(&mut handler)?;
//!
//! assert_eq!(log, [
//!     "$.action.type started",
//!     r#"$.action.type = "final_answer""#,
//!     r#"$.action.args.content += "Hel""#,
//!     r#"$.action.args.content += "lo!""#,
//! ]);
//! # Ok::<(), stream_json::Error>(())
//! ```
//!
//! Errors say where:
//!
//! ```
//! let mut parser = stream_json::Parser::new();
//! let error = parser.feed(br#"{"action": {"args": [1, 2,]}}"#, &mut |_: stream_json::Event<'_>| {}).unwrap_err();
//! assert_eq!(error.to_string(), "invalid JSON at byte 26 ($.action.args[2]): expected a JSON value, found ']'");
//! ```

mod error;
mod parser;
mod path;
mod pattern;

pub use error::{Error, Result};
pub use parser::{Capture, Config, Event, EventKind, Handler, Parser, SubscriptionId, ValueKind};
pub use path::{Path, PathSegment};
pub use pattern::{Pattern, Segment};

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
