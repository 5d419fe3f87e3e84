//! Fuzz target: arbitrary bytes, split at fuzzer-chosen points, through the SSE and provider
//! stream decoders (OpenAI and Anthropic) and the assembler must never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use model_adapter::{Assembler, StreamDecoder};

fuzz_target!(|input: &[u8]| {
    let Some((&control, bytes)) = input.split_first() else { return };
    let chunk_size = usize::from(control % 64) + 1;
    let mut decoder =
        if control & 0x80 == 0 { StreamDecoder::openai() } else { StreamDecoder::anthropic() };
    let mut deltas = Vec::new();
    let mut assembler = Assembler::new();
    for chunk in bytes.chunks(chunk_size) {
        if decoder.feed(chunk, &mut deltas).is_err() {
            return;
        }
        for delta in deltas.drain(..) {
            assembler.push(&delta);
        }
    }
    if decoder.finish(&mut deltas).is_ok() {
        for delta in deltas.drain(..) {
            assembler.push(&delta);
        }
        let _ = assembler.finish();
    }
});
