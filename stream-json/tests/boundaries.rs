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
        // Invalid UTF-8 after plain text, in keys, and of every kind: overlong forms, a
        // surrogate, above U+10FFFF, a lone continuation byte, bytes that never start one.
        b"{\"s\":\"abcdefghij\xc0\x80klm\"}",
        b"{\"k\xe0\x80\x80ey\":1}",
        b"[\"0123456789\xed\xa0\x80\"]",
        b"[\"\xf4\x90\x80\x80 and more text\"]",
        b"[\"caf\xc3\xa9 \x80\"]",
        b"[\"\xf5\x80\x80\x80\",\"\xff\"]",
        b"[\"\xe4\xb8\xadx\xf0\x9f\x98\"]",
        br#"{"s":"\ud800x"}"#,
        br#"{"n":01}"#,
        br#"{"n":1.}"#,
        br#"{"l":nul}"#,
        br#"{"a":[1,]}"#,
    ] {
        // How much of a string's text goes out as deltas before an error depends on the
        // chunking (see `EventKind::StringDelta`): everything else must be the same.
        let without_deltas = |(lines, result): (Vec<String>, Result<(), String>)| {
            let lines: Vec<String> =
                lines.into_iter().filter(|line| !line.contains(" delta ")).collect();
            (lines, result)
        };
        let subscriptions = subscriptions();
        let whole = without_deltas(common::run_pieces([document], &subscriptions));
        assert!(whole.1.is_err(), "{}", String::from_utf8_lossy(document));
        for split in 0..=document.len() {
            let (head, tail) = document.split_at(split);
            assert_eq!(without_deltas(common::run_pieces([head, tail], &subscriptions)), whole);
        }
    }
}

#[test]
fn equal_chunks_of_every_size() {
    // Bytes one above a special byte ('#' after '"', ']' after '\', '!' after ' ') right
    // after escapes and near chunk ends: the word-at-a-time scan must not take them for
    // special bytes, whatever the chunk size.
    let document = r##"{"s":["\"#\\]\u0000!","a\"#b\\]c\n!d","\ud83d\ude00#]!caf\u00e9 ]#","#]!\"\\\/ é中😀","12345678\"#"],"\"#k\\]":"\t!"}"##
        .as_bytes();
    let subscriptions = subscriptions();
    let whole = common::run_pieces([document], &subscriptions);
    assert_eq!(whole.1, Ok(()));
    for size in 1..=document.len() {
        assert_eq!(
            common::run_pieces(document.chunks(size), &subscriptions),
            whole,
            "chunks of {size} bytes"
        );
    }
}
