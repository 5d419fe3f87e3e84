//! Helpers shared by the integration tests: run a document through a parser at a given
//! chunking and render the events as comparable lines.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use stream_json::{Capture, Event, EventKind, Parser};

pub fn capture_from_name(name: &str) -> Capture {
    match name {
        "none" => Capture::None,
        "value" => Capture::Value,
        "raw" => Capture::Raw,
        "deltas" => Capture::Deltas,
        other => panic!("unknown capture {other:?}"),
    }
}

/// One event rendered as a line: `<subscription> <path> <kind>`.
pub fn render(event: &Event<'_>) -> String {
    let kind = match &event.kind {
        EventKind::KeySeen => "key".to_owned(),
        EventKind::Started(kind) => format!("started {kind:?}"),
        EventKind::StringDelta(delta) => format!("delta {}", serde_json::to_string(delta).unwrap()),
        EventKind::Value(value) => format!("value {value}"),
        EventKind::Raw(raw) => {
            format!("raw {}", serde_json::to_string(&String::from_utf8_lossy(raw)).unwrap())
        }
        EventKind::Ended => "ended".to_owned(),
        other => format!("{other:?}"),
    };
    format!("{} {} {kind}", event.subscription.index(), event.path)
}

/// Parses `document` in `chunk`-byte pieces with the given subscriptions; returns the rendered
/// events, with consecutive deltas of one subscription merged (chunking decides how text is
/// split, not what it is), and the error message if any.
pub fn run(
    document: &[u8],
    subscriptions: &[(String, Capture)],
    chunk: usize,
) -> (Vec<String>, Result<(), String>) {
    run_pieces(document.chunks(chunk.max(1)), subscriptions)
}

/// Like [`run`], with the pieces given explicitly.
pub fn run_pieces<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    subscriptions: &[(String, Capture)],
) -> (Vec<String>, Result<(), String>) {
    let mut parser = Parser::new();
    for (pattern, capture) in subscriptions {
        parser.subscribe(pattern, *capture).unwrap();
    }
    let mut lines: Vec<String> = Vec::new();
    let mut pending_delta: Option<(usize, String, String)> = None;
    let mut handler = |event: Event<'_>| {
        if let EventKind::StringDelta(delta) = event.kind {
            assert!(!delta.is_empty(), "empty delta at {}", event.path);
            let id = event.subscription.index();
            let path = event.path.to_string();
            match &mut pending_delta {
                Some((pending_id, pending_path, text))
                    if *pending_id == id && *pending_path == path =>
                {
                    text.push_str(delta)
                }
                _ => {
                    flush(&mut lines, &mut pending_delta);
                    pending_delta = Some((id, path, delta.to_owned()));
                }
            }
            return;
        }
        flush(&mut lines, &mut pending_delta);
        lines.push(render(&event));
    };
    let mut result = Ok(());
    for piece in pieces {
        if let Err(error) = parser.feed(piece, &mut handler) {
            result = Err(error.to_string());
            break;
        }
    }
    if result.is_ok() {
        result = parser.finish(&mut handler).map_err(|error| error.to_string());
    }
    flush(&mut lines, &mut pending_delta);
    (lines, result)
}

fn flush(lines: &mut Vec<String>, pending: &mut Option<(usize, String, String)>) {
    if let Some((id, path, text)) = pending.take() {
        lines.push(format!("{id} {path} delta {}", serde_json::to_string(&text).unwrap()));
    }
}
