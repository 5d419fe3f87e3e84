//! Head + tail capture: property tests against a reference built from the whole stream.

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use tools_runtime::{CapturedText, HeadTailBuffer};

/// The capture computed from the whole output at once.
fn reference(output: &[u8], limit: usize) -> CapturedText {
    let head_limit = limit / 2;
    let tail_limit = limit - head_limit;
    if output.len() <= limit {
        return CapturedText {
            text: String::from_utf8_lossy(output).into_owned(),
            truncated: false,
            total_bytes: output.len() as u64,
            retained_bytes: output.len() as u64,
            omitted_bytes: 0,
            omitted_lines: 0,
        };
    }
    let head = &output[..head_limit];
    let middle = &output[head_limit..output.len() - tail_limit];
    let tail = &output[output.len() - tail_limit..];
    let omitted_lines = middle.iter().filter(|byte| **byte == b'\n').count() as u64;
    CapturedText {
        text: format!(
            "{}\n[... {} bytes ({omitted_lines} lines) omitted ...]\n{}",
            String::from_utf8_lossy(head),
            middle.len(),
            String::from_utf8_lossy(tail)
        ),
        truncated: true,
        total_bytes: output.len() as u64,
        retained_bytes: limit as u64,
        omitted_bytes: middle.len() as u64,
        omitted_lines,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn chunked_capture_equals_the_whole_stream_reference(
        output in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), Just(0xff_u8), any::<u8>()], 0..600),
        limit in 2_usize..200,
        cuts in proptest::collection::vec(0_usize..600, 0..12),
    ) {
        let mut cuts: Vec<usize> = cuts.into_iter().filter(|cut| *cut <= output.len()).collect();
        cuts.push(0);
        cuts.push(output.len());
        cuts.sort_unstable();
        let mut buffer = HeadTailBuffer::new(limit);
        for window in cuts.windows(2) {
            buffer.push(&output[window[0]..window[1]]);
        }
        assert_eq!(buffer.finish(), reference(&output, limit));
    }
}

#[test]
fn an_exact_fit_is_not_truncated() {
    let mut buffer = HeadTailBuffer::new(4);
    buffer.push(b"ab");
    buffer.push(b"cd");
    assert_eq!(buffer.finish(), reference(b"abcd", 4));
    assert!(!buffer.finish().truncated);
}

#[test]
fn a_character_across_the_head_and_tail_halves_survives() {
    let mut buffer = HeadTailBuffer::new(4);
    buffer.push("aé!".as_bytes());
    assert_eq!(buffer.finish().text, "aé!");
}
