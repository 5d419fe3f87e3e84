//! Chunk boundaries anywhere: inside multi-byte UTF-8 characters, `\uXXXX` escapes, surrogate
//! pairs, numbers, literals and keys. Every two- and three-piece split of each document must
//! give the same events (values, raw bytes, merged deltas) as the whole document at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pretty_assertions::assert_eq;
use stream_json::Capture;

fn subscriptions() -> Vec<(String, Capture)> {
    vec![
        ("$".to_owned(), Capture::Value),
        ("$".to_owned(), Capture::Raw),
        ("$.*".to_owned(), Capture::Deltas),
        ("$.*".to_owned(), Capture::Value),
        ("$.*".to_owned(), Capture::Raw),
        ("$.*[*]".to_owned(), Capture::Deltas),
    ]
}

fn check_every_split(name: &str, document: &[u8]) {
    let subscriptions = subscriptions();
    let whole = common::run_pieces([document], &subscriptions);
    assert_eq!(whole.1, Ok(()), "{name} must be valid");
    for first in 0..=document.len() {
        let (head, tail) = document.split_at(first);
        assert_eq!(
            common::run_pieces([head, tail], &subscriptions),
            whole,
            "{name}: split {first}"
        );
        if document.len() <= 48 {
            for second in first..=document.len() {
                let (middle, last) = tail.split_at(second - first);
                assert_eq!(
                    common::run_pieces([head, middle, last], &subscriptions),
                    whole,
                    "{name}: splits {first}, {second}"
                );
            }
        }
    }
}

#[test]
fn multi_byte_utf8_characters() {
    // 2-, 3- and 4-byte characters, in values and in keys.
    check_every_split("utf8 values", "{\"s\":\"é中😀\u{7ff}\u{10ffff}\"}".as_bytes());
    check_every_split("utf8 key", "{\"ключ😀\":[\"中\"]}".as_bytes());
}

#[test]
fn unicode_escapes_and_surrogate_pairs() {
    check_every_split("escapes", br#"{"s":"\u0041\u00e9\u4E2D\ud83d\ude00\uD83D\uDE00"}"#);
    check_every_split("escaped key", br#"{"\ud83d\ude00k\n":["\"\\\/\b\f\n\r\t"]}"#);
}

#[test]
fn numbers_and_literals() {
    check_every_split("numbers", br#"{"n":[-0.5e-10,123456,0,-1,1E+2,3.25]}"#);
    check_every_split("literals", br#"{"l":[true,false,null]}"#);
    check_every_split("top level number", b"-1234.5678e-9");
    check_every_split("top level literal", b"false");
}

#[test]
fn model_like_action_document() {
    let document = br#"{"thought":"I should read the form.","action":{"type":"run_script","args":{"skill":"pdf","path":"scripts/fill.py","argv":["--in","a.pdf","caf\u00e9 \ud83d\ude00"]}}}"#;
    check_every_split("action", document);
}

#[test]
fn invalid_documents_fail_the_same_way_at_every_split() {
    for document in [
        &b"{\"s\":\"\xe4\xb8\"}"[..],
        br#"{"s":"\ud800x"}"#,
        br#"{"n":01}"#,
        br#"{"n":1.}"#,
        br#"{"l":nul}"#,
        br#"{"a":[1,]}"#,
    ] {
        let subscriptions = subscriptions();
        let whole = common::run_pieces([document], &subscriptions);
        assert!(whole.1.is_err(), "{}", String::from_utf8_lossy(document));
        for split in 0..=document.len() {
            let (head, tail) = document.split_at(split);
            assert_eq!(common::run_pieces([head, tail], &subscriptions), whole);
        }
    }
}
