//! Replay equality: recorded runs re-run from their own `events.jsonl` reproduce their events,
//! their compliance is scored, and tampered records are reported, never a panic.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

fn main() -> std::process::ExitCode {
    common::main(tests![])
}
