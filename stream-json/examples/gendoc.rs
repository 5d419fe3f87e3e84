//! Writes one of the benchmark documents to stdout, at any size, for whole-process
//! measurements of `sjcheck` and the `contenders` example (no large file is committed).
//!
//! ```text
//! cargo run -q --release -p stream-json --example gendoc -- action 10000000 > /tmp/action_10m.json
//! cargo run -q --release -p stream-json --example gendoc -- twitter 20000000 > /tmp/twitter_20m.json
//! ```
//!
//! `action BYTES` is about BYTES of the model-like action document of `benches/common/mod.rs` (long strings
//! dense in escapes and multi-byte UTF-8); `twitter BYTES` is the twitter-like document with
//! as many statuses as make about BYTES. Deterministic: the same arguments give the same bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../benches/common/mod.rs"]
mod common;

use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "usage: gendoc action|twitter BYTES";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, bytes] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let Ok(bytes) = bytes.parse::<usize>() else {
        eprintln!("gendoc: BYTES must be a number, got {bytes:?}\n{USAGE}");
        return ExitCode::from(2);
    };
    let document = match kind.as_str() {
        "action" => common::action_document_of_size(bytes),
        "twitter" => common::twitter_document_of_size(bytes),
        other => {
            eprintln!("gendoc: unknown document kind {other:?}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match std::io::stdout().lock().write_all(&document) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gendoc: cannot write the document: {error}");
            ExitCode::from(1)
        }
    }
}
