//! Inputs and contenders shared by the criterion benchmark (`benches/parse.rs`) and the
//! instruction-count driver (`examples/contenders.rs`), so both measure the same work.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Write as _;

use stream_json::{Capture, Event, Parser};

/// A deterministic pseudo-random generator (no dependency, same inputs every run).
pub struct Lcg(u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "the",
    "model",
    "reads",
    "skill",
    "workbook",
    "quarterly",
    "revenue",
    "café",
    "naïve",
    "→",
    "résumé",
    "数据",
    "分析",
    "🚀",
    "table",
    "grew",
    "12%",
    "\\\"quoted\\\"",
    "line\\nbreak",
    "tab\\t",
    "\\u00e9",
    "\\ud83d\\ude00",
    "and",
    "of",
    "a",
    "with",
    "path/to/file.py",
    "<tag>",
    "{braces}",
];

/// A JSON string body (already escaped) of about `len` bytes.
pub fn text(rng: &mut Lcg, len: usize) -> String {
    let mut out = String::with_capacity(len + 16);
    while out.len() < len {
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        out.push(' ');
    }
    out
}

/// A model-like action document of about `size` bytes, mostly long strings.
pub fn action_document(size: usize) -> Vec<u8> {
    let mut rng = Lcg(size as u64);
    let steps: Vec<String> = (0..8)
        .map(|i| {
            format!(
                r#"{{"id":{i},"title":"{}","status":"{}"}}"#,
                text(&mut rng, 40),
                ["done", "in_progress", "pending"][i % 3]
            )
        })
        .collect();
    let thought = text(&mut rng, size / 5);
    let content = text(&mut rng, size * 7 / 10);
    format!(
        r#"{{"thought":"{thought}","plan_update":{{"steps":[{}]}},"action":{{"type":"final_answer","args":{{"content":"{content}","citations":["report.xlsx#Q3","report.xlsx#Q2"],"confidence":0.87}}}}}}"#,
        steps.join(",")
    )
    .into_bytes()
}

/// A twitter-like document: many small objects, short strings, numbers, nesting.
pub fn twitter_document(statuses: usize) -> Vec<u8> {
    let mut rng = Lcg(42);
    let mut out = String::from("{\"statuses\":[");
    for i in 0..statuses {
        if i > 0 {
            out.push(',');
        }
        let id = 505874924095815681u64 + rng.below(1_000_000);
        write!(
            out,
            r#"{{"metadata":{{"result_type":"recent","iso_language_code":"ja"}},"created_at":"Sun Aug 31 00:29:15 +0000 2014","id":{id},"id_str":"{id}","text":"{}","source":"<a href=\"https://example.com\" rel=\"nofollow\">web</a>","truncated":false,"in_reply_to_status_id":null,"user":{{"id":{},"name":"{}","screen_name":"user_{i}","location":"東京","description":"{}","followers_count":{},"friends_count":{},"verified":false,"entities":{{"description":{{"urls":[]}}}}}},"geo":null,"retweet_count":{},"favorite_count":{},"entities":{{"hashtags":[{{"text":"tag","indices":[0,4]}}],"urls":[],"user_mentions":[{{"screen_name":"a","id":{},"indices":[5,7]}}]}},"favorited":false,"retweeted":false,"lang":"ja"}}"#,
            text(&mut rng, 80),
            rng.below(1 << 40),
            text(&mut rng, 12),
            text(&mut rng, 60),
            rng.below(100_000),
            rng.below(5_000),
            rng.below(1000),
            rng.below(1000),
            rng.below(1 << 32),
        )
        .unwrap();
    }
    out.push_str(r#"],"search_metadata":{"completed_in":0.087,"max_id":505874924095815681,"query":"%E4%B8%80","count":100}}"#);
    out.into_bytes()
}

/// An action document of about `size` bytes (`action_document(n)` makes about 0.9 n).
pub fn action_document_of_size(size: usize) -> Vec<u8> {
    let first = action_document(size);
    if first.len() >= size || first.is_empty() {
        return first;
    }
    action_document(size * size / first.len())
}

/// A twitter-like document of at least `size` bytes (1,000 statuses make about 884 KB).
pub fn twitter_document_of_size(size: usize) -> Vec<u8> {
    let one = twitter_document(1).len();
    let mut statuses = size / one.max(1) + 1;
    loop {
        let document = twitter_document(statuses);
        if document.len() >= size || statuses > size {
            return document;
        }
        statuses += (size - document.len()) / one.max(1) + 1;
    }
}

pub fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("action_10k", action_document(10 * 1024)),
        ("action_100k", action_document(100 * 1024)),
        ("action_1m", action_document(1024 * 1024)),
        ("twitter_like", twitter_document(1000)),
    ]
}

/// stream-json with path tracking and two subscriptions, no capture.
pub fn stream_json(document: &[u8], chunk: usize) -> usize {
    let mut parser = Parser::new();
    parser.subscribe("$.action.type", Capture::None).unwrap();
    parser.subscribe("$.action.args.content", Capture::None).unwrap();
    let mut events = 0;
    let mut handler = |_: Event<'_>| events += 1;
    for piece in document.chunks(chunk) {
        parser.feed(piece, &mut handler).unwrap();
    }
    parser.finish(&mut handler).unwrap();
    events
}

pub fn actson_events(document: &[u8]) -> usize {
    use actson::JsonParser;
    use actson::feeder::SliceJsonFeeder;
    let mut parser = JsonParser::new(SliceJsonFeeder::new(document));
    let mut events = 0;
    while let Some(_event) = parser.next_event().unwrap() {
        events += 1;
    }
    events
}

pub fn struson_skip(document: &[u8]) {
    use struson::reader::{JsonReader, JsonStreamReader};
    let mut reader = JsonStreamReader::new(document);
    reader.skip_value().unwrap();
    reader.consume_trailing_whitespace().unwrap();
}

/// What the LLM SDKs do: on every chunk, close what is open in the text so far and parse the
/// whole buffer again.
pub fn reparse_per_chunk(document: &[u8], chunk: usize) -> usize {
    let mut buffer = Vec::with_capacity(document.len());
    let mut parsed = 0;
    for piece in document.chunks(chunk) {
        buffer.extend_from_slice(piece);
        let repaired = repair(&buffer);
        if serde_json::from_slice::<serde_json::Value>(&repaired).is_ok() {
            parsed += 1;
        }
    }
    parsed
}

/// Completes a JSON prefix: closes an open string, drops a dangling ',' or partial
/// token, gives a dangling key a null value, and closes open containers.
pub fn repair(prefix: &[u8]) -> Vec<u8> {
    let mut stack = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut last_safe = 0;
    for (i, &byte) in prefix.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
                last_safe = i + 1;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                stack.push(byte);
                last_safe = i + 1;
            }
            b'}' | b']' => {
                stack.pop();
                last_safe = i + 1;
            }
            b',' | b':' => last_safe = i + 1,
            _ => {}
        }
    }
    let mut out = prefix.to_vec();
    if in_string {
        // SDKs see decoded text: a UTF-8 character cut by the chunk is not there yet.
        if let Err(error) = std::str::from_utf8(&out)
            && error.error_len().is_none()
        {
            out.truncate(error.valid_up_to());
        }
        trim_partial_escape(&mut out);
        out.push(b'"');
    } else {
        out.truncate(last_safe);
    }
    while matches!(out.last(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        out.pop();
    }
    match out.last() {
        Some(b',') => {
            out.pop();
        }
        Some(b':') => out.extend_from_slice(b"null"),
        Some(b'"') if stack.last() == Some(&b'{') && ends_with_key(&out) => {
            out.extend_from_slice(b":null")
        }
        _ => {}
    }
    for open in stack.iter().rev() {
        out.push(if *open == b'{' { b'}' } else { b']' });
    }
    out
}

/// Drops an escape cut by the chunk at the end of an open string: a lone `\`, a `\u` with
/// fewer than four hex digits, or a high surrogate whose low half has not arrived.
fn trim_partial_escape(text: &mut Vec<u8>) {
    loop {
        let tail_start = text.len().saturating_sub(12);
        let Some(slash) = text[tail_start..].iter().rposition(|&b| b == b'\\') else { return };
        let slash = tail_start + slash;
        let preceding = text[..slash].iter().rev().take_while(|&&b| b == b'\\').count();
        if preceding % 2 == 1 {
            // `\\` is a complete escape of a backslash.
            return;
        }
        let escape = &text[slash + 1..];
        let partial = match escape {
            [] => true,
            [b'u', hex @ ..] if hex.len() < 4 => true,
            [b'u', hex @ ..] if hex.len() == 4 => {
                let code = u16::from_str_radix(std::str::from_utf8(hex).unwrap_or("0"), 16);
                matches!(code, Ok(0xD800..=0xDBFF))
            }
            _ => false,
        };
        if !partial {
            return;
        }
        text.truncate(slash);
    }
}

/// Whether the string that ends `text` is an object key (preceded by '{' or ',').
fn ends_with_key(text: &[u8]) -> bool {
    let mut i = text.len().saturating_sub(1);
    let mut escaped_quote;
    while i > 0 {
        i -= 1;
        if text[i] == b'"' {
            escaped_quote = text[..i].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1;
            if !escaped_quote {
                break;
            }
        }
    }
    let before = text[..i].iter().rev().find(|b| !b.is_ascii_whitespace());
    matches!(before, Some(b'{' | b','))
}
