//! Foreign trajectories, data-driven: each `tests/data/trajectories/NAME.json` (or `.jsonl`,
//! JSON Lines) is scored and compared with `NAME.expected.json` (the JSON line), or its error
//! with `NAME.error.txt`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use bench::trajectories::{OPENAI_CHAT, TrajectoryScore, score_file};
use pretty_assertions::assert_eq;

#[test]
fn every_case_scores_or_fails_as_recorded() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trajectories");
    let mut cases: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "json" || ext == "jsonl")
                && !path.to_string_lossy().ends_with(".expected.json")
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "cases: {cases:?}");
    for input in cases {
        let stem = input.file_stem().unwrap().to_string_lossy().into_owned();
        let expected = folder.join(format!("{stem}.expected.json"));
        let error = folder.join(format!("{stem}.error.txt"));
        let scored = score_file(&input, OPENAI_CHAT);
        if expected.exists() {
            let want = std::fs::read_to_string(&expected).unwrap();
            let score = scored.unwrap_or_else(|error| panic!("{stem}: {error}"));
            // The line printed is exactly the expected file (field order included).
            assert_eq!(serde_json::to_string(&score).unwrap(), want.trim(), "{stem}");
            let back: TrajectoryScore = serde_json::from_str(&want).unwrap();
            assert_eq!(back, score, "{stem}");
        } else {
            let want = std::fs::read_to_string(&error)
                .unwrap_or_else(|_| panic!("{stem}: neither .expected.json nor .error.txt"));
            let message = scored.err().unwrap_or_else(|| panic!("{stem}: scored")).to_string();
            assert!(message.contains(want.trim()), "{stem}: {message}");
            let file = input.file_name().unwrap().to_string_lossy().into_owned();
            assert!(message.contains(&file), "{stem}: the path: {message}");
        }
    }
}

#[test]
fn only_openai_chat_is_read() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trajectories");
    let error = score_file(&folder.join("empty.json"), "sharegpt").unwrap_err().to_string();
    assert_eq!(error, "unknown trajectory format `sharegpt` (known: openai-chat)");
    let missing = score_file(&folder.join("missing.json"), OPENAI_CHAT).unwrap_err().to_string();
    assert!(missing.contains("missing.json"), "{missing}");
}
