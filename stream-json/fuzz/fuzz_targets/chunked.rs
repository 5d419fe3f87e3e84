//! Fuzz target: any bytes, any chunking. The parser must not panic and must give the same
//! verdict at three chunkings. On valid documents the events (deltas merged) are the same and
//! the root value equals serde_json's; on invalid ones, the events other than deltas are the
//! same, and the text sent before the error may differ only in how much of the last string
//! had arrived (one is a prefix of the other).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stream_json::{Capture, Event, EventKind, Parser};

const SUBSCRIPTIONS: &[(&str, Capture)] = &[
    ("$", Capture::Value),
    ("$", Capture::Raw),
    ("$.*", Capture::Deltas),
    ("$[*].*", Capture::Value),
    ("$.a[0]", Capture::None),
];

/// Events as lines, consecutive deltas of one subscription merged; and the verdict.
fn run(document: &[u8], chunk: usize) -> (Vec<String>, Result<(), String>, Option<serde_json::Value>) {
    let mut parser = Parser::new();
    for (pattern, capture) in SUBSCRIPTIONS {
        parser.subscribe(pattern, *capture).unwrap();
    }
    let mut lines: Vec<String> = Vec::new();
    let mut root = None;
    let mut handler = |event: Event<'_>| {
        let id = event.subscription.index();
        let line = match event.kind {
            EventKind::StringDelta(delta) => {
                assert!(!delta.is_empty());
                let prefix = format!("{id} {} delta ", event.path);
                if let Some(last) = lines.last_mut()
                    && last.starts_with(&prefix)
                {
                    last.push_str(delta);
                    return;
                }
                format!("{prefix}{delta}")
            }
            EventKind::Value(value) => {
                if id == 0 {
                    root = Some(value.clone());
                }
                format!("{id} {} value {value}", event.path)
            }
            other => format!("{id} {} {other:?}", event.path),
        };
        lines.push(line);
    };
    let mut verdict = Ok(());
    for piece in document.chunks(chunk.max(1)) {
        if let Err(error) = parser.feed(piece, &mut handler) {
            verdict = Err(error.to_string());
            break;
        }
    }
    if verdict.is_ok() {
        verdict = parser.finish(&mut handler).map_err(|error| error.to_string());
    }
    (lines, verdict, root)
}

fn split_deltas(lines: &[String]) -> (Vec<&String>, Vec<&String>) {
    lines.iter().partition(|line| !line.contains(" delta "))
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, document)) = data.split_first() else { return };
    let whole = run(document, document.len());
    for chunk in [1, 2 + usize::from(selector % 31)] {
        let chunked = run(document, chunk);
        assert_eq!(chunked.1, whole.1, "verdict differs at chunk {chunk}");
        if whole.1.is_ok() {
            assert_eq!(chunked.0, whole.0, "events differ at chunk {chunk}");
            continue;
        }
        let (chunked_events, chunked_deltas) = split_deltas(&chunked.0);
        let (whole_events, whole_deltas) = split_deltas(&whole.0);
        assert_eq!(chunked_events, whole_events, "events differ at chunk {chunk}");
        let (short, long) = if chunked_deltas.len() <= whole_deltas.len() {
            (&chunked_deltas, &whole_deltas)
        } else {
            (&whole_deltas, &chunked_deltas)
        };
        assert!(long.len() - short.len() <= 1, "deltas differ at chunk {chunk}");
        for (index, line) in short.iter().enumerate() {
            let complete = index + 1 < short.len();
            let same = if complete { line == &long[index] } else {
                long[index].starts_with(line.as_str()) || line.starts_with(long[index].as_str())
            };
            assert!(same, "delta text differs at chunk {chunk}: {line:?} vs {:?}", long[index]);
        }
    }
    if let Ok(expected) = serde_json::from_slice::<serde_json::Value>(document) {
        assert_eq!(whole.1, Ok(()), "serde_json accepts, stream-json rejects");
        assert_eq!(whole.2, Some(expected));
    }
});
