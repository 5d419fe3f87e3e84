//! Subscription events, data-driven: `tests/data/subscriptions.json` holds documents and
//! subscriptions, `tests/data/subscriptions.expected` the events each must produce — the same
//! at every chunking. `STREAM_JSON_BLESS=1 cargo test` rewrites the expected file for review.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use pretty_assertions::assert_eq;
use stream_json::{Capture, Event, Parser};

fn render_all_cases() -> String {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&fs::read_to_string(data.join("subscriptions.json")).unwrap())
            .unwrap();
    let mut rendered = String::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let document = case["document"].as_str().unwrap().as_bytes();
        let subscriptions: Vec<(String, Capture)> = case["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                (
                    pair[0].as_str().unwrap().to_owned(),
                    common::capture_from_name(pair[1].as_str().unwrap()),
                )
            })
            .collect();
        let whole = common::run(document, &subscriptions, document.len());
        for chunk in 1..=9 {
            assert_eq!(
                common::run(document, &subscriptions, chunk),
                whole,
                "{name}: chunk {chunk}"
            );
        }
        writeln!(rendered, "## {name}").unwrap();
        for line in &whole.0 {
            writeln!(rendered, "{line}").unwrap();
        }
        writeln!(rendered, "-> {:?}\n", whole.1).unwrap();
    }
    rendered
}

#[test]
fn subscription_events_match_the_expected_file() {
    let expected_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/subscriptions.expected");
    let actual = render_all_cases();
    if std::env::var_os("STREAM_JSON_BLESS").is_some() {
        fs::write(&expected_path, &actual).unwrap();
    }
    let expected = fs::read_to_string(&expected_path).unwrap_or_default();
    assert_eq!(actual, expected);
}

#[test]
fn deltas_never_repeat_text_and_concatenate_to_the_string() {
    let text = "héllo \\n wörld 😀 \\ud83d\\ude00 \\\" end ".repeat(20);
    let document = format!("{{\"a\":\"{text}\"}}");
    let expected: String = serde_json::from_str::<serde_json::Value>(&document).unwrap()["a"]
        .as_str()
        .unwrap()
        .to_owned();
    for chunk in 1..=13 {
        let mut parser = Parser::new();
        parser.subscribe("$.a", Capture::Deltas).unwrap();
        let mut deltas: Vec<String> = Vec::new();
        let mut handler = |event: Event<'_>| {
            if let stream_json::EventKind::StringDelta(delta) = event.kind {
                deltas.push(delta.to_owned());
            }
        };
        let mut feeds = 0;
        for piece in document.as_bytes().chunks(chunk) {
            parser.feed(piece, &mut handler).unwrap();
            feeds += 1;
        }
        parser.finish(&mut handler).unwrap();
        assert_eq!(deltas.concat(), expected, "chunk {chunk}");
        // At most one delta per feed: text arrives as soon as it is complete, once.
        assert!(deltas.len() <= feeds, "chunk {chunk}: {} deltas for {feeds} feeds", deltas.len());
        assert!(deltas.iter().all(|delta| !delta.is_empty()));
    }
}

#[test]
fn key_seen_arrives_before_the_value_bytes() {
    let mut parser = Parser::new();
    parser.subscribe("$.action.type", Capture::None).unwrap();
    let mut seen = Vec::new();
    parser
        .feed(br#"{"action":{"type""#, &mut |event: Event<'_>| seen.push(common::render(&event)))
        .unwrap();
    assert_eq!(seen, ["0 $.action.type key"]);
    parser.feed(br#":"f"#, &mut |event: Event<'_>| seen.push(common::render(&event))).unwrap();
    assert_eq!(seen, ["0 $.action.type key", "0 $.action.type started String"]);
}

/// `tests/data/patterns.json`: each pattern with its segments, or the position (in
/// characters) and message of its error — RFC 9535's grammar for this crate's subset.
#[test]
fn patterns_parse_to_their_segments_or_fail_at_their_position() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/patterns.json");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    assert!(cases.len() > 40, "{} cases", cases.len());
    for case in &cases {
        let pattern = case["pattern"].as_str().unwrap();
        let actual = stream_json::Pattern::parse(pattern);
        if let Some(error) = case.get("error") {
            let expected = stream_json::Error::InvalidPattern {
                pattern: pattern.to_owned(),
                position: error["position"].as_u64().unwrap() as usize,
                message: error["message"].as_str().unwrap().to_owned(),
            };
            assert_eq!(actual, Err(expected), "{pattern:?}");
            continue;
        }
        let expected: Vec<stream_json::Segment> = case["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|segment| match segment {
                serde_json::Value::String(star) if star == "*" => stream_json::Segment::Wildcard,
                _ if segment.get("key").is_some() => {
                    stream_json::Segment::Key(segment["key"].as_str().unwrap().to_owned())
                }
                _ => stream_json::Segment::Index(segment["index"].as_u64().unwrap()),
            })
            .collect();
        let parsed = actual.unwrap_or_else(|error| panic!("{pattern:?}: {error}"));
        assert_eq!(parsed.segments(), expected.as_slice(), "{pattern:?}");
        assert_eq!(parsed.as_str(), pattern);
    }
}

#[test]
fn subscribe_after_feeding_is_an_error() {
    let mut parser = Parser::new();
    parser.feed(b"[", &mut |_: Event<'_>| {}).unwrap();
    assert_eq!(parser.subscribe("$", Capture::Value), Err(stream_json::Error::SubscribeAfterStart));
}

#[test]
fn a_failed_parser_stays_failed_and_a_finished_one_refuses_more() {
    let mut parser = Parser::new();
    let mut ignore = |_: Event<'_>| {};
    let error = parser.feed(b"[1,,", &mut ignore).unwrap_err();
    assert_eq!(error.offset(), Some(3));
    assert_eq!(error.path(), Some("$[1]"));
    assert_eq!(parser.feed(b"2]", &mut ignore), Err(error.clone()));
    assert_eq!(parser.finish(&mut ignore), Err(error));

    let mut parser = Parser::new();
    parser.feed(b"{}", &mut ignore).unwrap();
    parser.finish(&mut ignore).unwrap();
    assert_eq!(parser.feed(b" ", &mut ignore), Err(stream_json::Error::AlreadyFinished));
}

#[test]
fn depth_limit_is_configurable_and_never_overflows_the_stack() {
    let deep = "[".repeat(100_000);
    let mut parser =
        Parser::with_config(stream_json::Config { max_depth: 10, ..Default::default() });
    let error = parser.feed(deep.as_bytes(), &mut |_: Event<'_>| {}).unwrap_err();
    assert!(matches!(error, stream_json::Error::TooDeep { offset: 10, limit: 10, .. }), "{error}");

    // A huge limit: 100k levels parse without recursion; a Value capture builds iteratively.
    let document = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let mut parser =
        Parser::with_config(stream_json::Config { max_depth: 200_000, ..Default::default() });
    parser.subscribe("$", Capture::Value).unwrap();
    let mut captured = None;
    let mut handler = |event: Event<'_>| {
        if let stream_json::EventKind::Value(value) = event.kind {
            captured = Some(value);
        }
    };
    parser.feed(document.as_bytes(), &mut handler).unwrap();
    parser.finish(&mut handler).unwrap();
    let mut value = captured.unwrap();
    let mut depth = 0;
    // Dismantle iteratively: dropping a 100k-deep Value recursively would overflow.
    while let serde_json::Value::Array(mut items) = value {
        depth += 1;
        value = items.pop().unwrap_or(serde_json::Value::Null);
    }
    assert_eq!(depth, 100_000);
}

#[test]
fn number_out_of_range_fails_only_inside_a_value_capture() {
    let document = br#"{"big":1e400,"ok":1}"#;
    let mut parser = Parser::new();
    parser.subscribe("$.big", Capture::Raw).unwrap();
    let mut raw = Vec::new();
    let mut handler = |event: Event<'_>| {
        if let stream_json::EventKind::Raw(bytes) = event.kind {
            raw.extend_from_slice(bytes);
        }
    };
    parser.feed(document, &mut handler).unwrap();
    parser.finish(&mut handler).unwrap();
    assert_eq!(raw, b"1e400");

    let mut parser = Parser::new();
    parser.subscribe("$", Capture::Value).unwrap();
    let error = parser.feed(document, &mut |_: Event<'_>| {}).unwrap_err();
    assert_eq!(
        error.to_string(),
        "number at byte 7 ($.big) is out of range for a captured serde_json::Value; \
         subscribe with Capture::Raw to keep its text"
    );
}

#[test]
fn hostile_long_keys_are_kept_in_part_and_never_match() {
    let long_key = "k".repeat(200_000);
    let document = format!(r#"{{"{long_key}":{{"x":1}},"x":2}}"#);
    let mut parser = Parser::new();
    parser.subscribe("$.*.x", Capture::Value).unwrap();
    parser.subscribe(&format!("$.{}", "k".repeat(100)), Capture::Value).unwrap();
    let mut events = Vec::new();
    let mut handler = |event: Event<'_>| {
        if let stream_json::EventKind::Value(value) = &event.kind {
            events.push((event.subscription.index(), event.path.depth(), value.clone()));
        }
    };
    parser.feed(document.as_bytes(), &mut handler).unwrap();
    parser.finish(&mut handler).unwrap();
    assert_eq!(events, vec![(0, 2, serde_json::json!(1))]);
}
