//! Property tests for the IO-free stream path: any chunking of a recorded stream gives the same
//! deltas, any line-ending style gives the same deltas, and arbitrary bytes never panic.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod common;

use common::{FIXTURES, data};
use model_adapter::{Delta, Error, StreamDecoder};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

fn decoder_for(name: &str) -> StreamDecoder {
    if name.starts_with("openai") { StreamDecoder::openai() } else { StreamDecoder::anthropic() }
}

/// Decodes `input` split at `cuts` (positions, any order, any count).
fn decode(name: &str, input: &[u8], cuts: &[usize]) -> Result<Vec<Delta>, Error> {
    let mut positions: Vec<usize> = cuts.iter().map(|cut| cut % (input.len() + 1)).collect();
    positions.sort_unstable();
    let mut decoder = decoder_for(name);
    let mut deltas = Vec::new();
    let mut start = 0;
    for position in positions.into_iter().chain([input.len()]) {
        decoder.feed(&input[start..position], &mut deltas)?;
        start = position;
    }
    decoder.finish(&mut deltas)?;
    Ok(deltas)
}

proptest! {
    #[test]
    fn any_chunking_and_line_ending_gives_the_same_deltas(
        fixture in 0..FIXTURES.len(),
        cuts in proptest::collection::vec(any::<usize>(), 0..40),
        ending in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
    ) {
        let name = FIXTURES[fixture];
        let original = data(&format!("{name}.sse"));
        let reference = decode(name, &original, &[]).unwrap();
        let rewritten = String::from_utf8(original).unwrap().replace('\n', ending).into_bytes();
        prop_assert_eq!(decode(name, &rewritten, &cuts).unwrap(), reference);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), anthropic in any::<bool>()) {
        let name = if anthropic { "anthropic" } else { "openai" };
        let _ = decode(name, &bytes, &[7, 31, 64]);
    }
}

#[test]
fn a_stream_without_its_terminal_event_is_truncated() {
    let text = String::from_utf8(data("anthropic_text.sse")).unwrap();
    let cut = text.replace("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "");
    let error = decode("anthropic", cut.as_bytes(), &[10]).unwrap_err();
    assert!(matches!(error, Error::Truncated { delivered: 2, .. }), "{error:?}");
    let deltas = decode("anthropic", text.as_bytes(), &[]).unwrap();
    assert_eq!(deltas.len(), 4, "two texts, usage, finish: {deltas:?}");
}

#[test]
fn an_anthropic_error_event_is_an_error_even_without_its_type_field() {
    let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{}}}\n\n\
                  event: error\ndata: {\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let error = decode("anthropic", stream.as_bytes(), &[]).unwrap_err();
    assert!(
        matches!(&error, Error::StreamError { kind, delivered: 0, .. } if kind == "overloaded_error"),
        "{error:?}"
    );
    assert!(error.is_retryable());
}

#[test]
fn a_tool_call_cut_by_the_context_window_is_invalid() {
    let text = String::from_utf8(data("anthropic_tools.sse")).unwrap();
    let cut = text
        .replace("ris\\\"}", "r")
        .replace("\"tool_use\"}", "\"model_context_window_exceeded\"}");
    let mut assembler = model_adapter::Assembler::new();
    for delta in decode("anthropic", cut.as_bytes(), &[]).unwrap() {
        assembler.push(&delta);
    }
    let response = assembler.finish().unwrap();
    assert_eq!(response.finish_reason, model_adapter::FinishReason::Length);
    assert_eq!(response.tool_calls, vec![]);
    assert_eq!(response.invalid_tool_calls[0].raw_arguments, "{\"city\": \"Par");
}

/// Text and thinking of a decoded stream, each concatenated.
fn text_and_thinking(deltas: &[Delta]) -> (String, String) {
    let mut text = String::new();
    let mut thinking = String::new();
    for delta in deltas {
        match delta {
            Delta::Text { text: piece } => text.push_str(piece),
            Delta::Thinking { text: piece } => thinking.push_str(piece),
            _ => {}
        }
    }
    (text, thinking)
}

#[test]
fn content_given_as_an_array_of_parts_is_read() {
    // Mistral's reasoning models stream `content` as parts, thinking included; other
    // OpenAI-compatible servers send `{"type":"text"}` parts.
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"Let me \"}]}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"thinking\",\"thinking\":[{\"type\":\"text\",\"text\":\"think.\"}]}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"The answer\"}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" is 4.\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let deltas = decode("openai", stream.as_bytes(), &[]).unwrap();
    assert_eq!(
        text_and_thinking(&deltas),
        ("The answer is 4.".to_owned(), "Let me think.".to_owned())
    );
}
