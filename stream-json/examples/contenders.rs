//! Runs one benchmark contender on one generated input, for instruction counting with
//! `valgrind --tool=callgrind` (repeatable on a busy machine, unlike wall-clock time).
//!
//! ```text
//! cargo build --release -p stream-json --example contenders
//! stream-json/benches/instructions.sh     # every input × contender, as a table
//! ```
//!
//! INPUT `file:PATH` reads the document from a file instead (the whole-process comparison
//! with `sjcheck` in `benches/whole_process.sh`: the file is read into memory, then parsed).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../benches/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, contender] = args.as_slice() else {
        eprintln!(
            "usage: contenders INPUT CONTENDER   (CONTENDER: none, size, stream_json_one_chunk, stream_json_chunks_N, serde_json_value, actson_one_chunk, struson_skip, reparse_per_chunk_16)"
        );
        return ExitCode::from(2);
    };
    let document = if let Some(path) = input.strip_prefix("file:") {
        match std::fs::read(path) {
            Ok(document) => document,
            Err(error) => {
                eprintln!("cannot read {path}: {error}");
                return ExitCode::from(2);
            }
        }
    } else if let Some((_, document)) = common::inputs().into_iter().find(|(name, _)| name == input)
    {
        document
    } else {
        eprintln!(
            "unknown input {input:?} (action_10k, action_100k, action_1m, twitter_like, file:PATH)"
        );
        return ExitCode::from(2);
    };
    match contender.as_str() {
        // Input generation alone, to subtract.
        "none" => {}
        "size" => println!("{}", document.len()),
        "stream_json_one_chunk" => _ = black_box(common::stream_json(&document, document.len())),
        "stream_json_chunks_16" => _ = black_box(common::stream_json(&document, 16)),
        // Any chunk size, for the per-feed cost at 1 and 4 bytes.
        other
            if other
                .strip_prefix("stream_json_chunks_")
                .is_some_and(|n| n.parse::<usize>().is_ok_and(|n| n > 0)) =>
        {
            let size = other["stream_json_chunks_".len()..].parse().unwrap();
            _ = black_box(common::stream_json(&document, size));
        }
        "serde_json_value" => {
            _ = black_box(serde_json::from_slice::<serde_json::Value>(&document).unwrap());
        }
        "actson_one_chunk" => _ = black_box(common::actson_events(&document)),
        "struson_skip" => common::struson_skip(&document),
        "reparse_per_chunk_16" => _ = black_box(common::reparse_per_chunk(&document, 16)),
        other => {
            eprintln!("unknown contender {other:?}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
