//! SSE decoding throughput (MB/s) and the per-delta cost of the whole stream path
//! (SSE + provider JSON + assembly), against a baseline that only parses the same JSON events.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use model_adapter::sse::SseDecoder;
use model_adapter::{Assembler, StreamDecoder};

const EVENTS: usize = 10_000;

/// A realistic OpenAI-style stream: `count` chunk events of one token each, then `[DONE]`.
fn openai_stream(count: usize) -> Vec<u8> {
    let mut text = String::new();
    for index in 0..count {
        text.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{index} \"}},\"finish_reason\":null}}]}}\r\n\r\n"
        ));
    }
    text.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n");
    text.into_bytes()
}

fn sse_decode(criterion: &mut Criterion) {
    let input = openai_stream(EVENTS);
    let mut group = criterion.benchmark_group("sse_decode");
    group.throughput(Throughput::Bytes(input.len() as u64));
    for chunk_size in [16usize, 1024, 65_536] {
        group.bench_function(format!("chunks_of_{chunk_size}"), |bencher| {
            bencher.iter(|| {
                let mut decoder = SseDecoder::new();
                let mut events = Vec::new();
                for chunk in input.chunks(chunk_size) {
                    decoder.feed(black_box(chunk), &mut events);
                }
                decoder.finish(&mut events);
                black_box(events.len())
            });
        });
    }
    group.finish();
}

fn per_delta(criterion: &mut Criterion) {
    let input = openai_stream(EVENTS);
    let mut group = criterion.benchmark_group("per_delta");
    // Elements = deltas, so criterion reports deltas per second; time per delta = 1 / that.
    group.throughput(Throughput::Elements(EVENTS as u64));
    group.bench_function("baseline_serde_json_parse_of_each_event", |bencher| {
        let payloads: Vec<&[u8]> = input
            .split(|byte| *byte == b'\n')
            .filter_map(|line| line.strip_prefix(b"data: "))
            .filter(|line| !line.starts_with(b"[DONE]"))
            .collect();
        bencher.iter(|| {
            let mut count = 0;
            for payload in &payloads {
                let value: serde_json::Value =
                    serde_json::from_slice(black_box(payload)).unwrap_or_default();
                count += usize::from(value.is_object());
            }
            black_box(count)
        });
    });
    group.bench_function("sse_openai_decode_and_assemble_1k_chunks", |bencher| {
        bencher.iter(|| {
            let mut decoder = StreamDecoder::openai();
            let mut deltas = Vec::new();
            let mut assembler = Assembler::new();
            for chunk in input.chunks(1024) {
                let _ = decoder.feed(black_box(chunk), &mut deltas);
                for delta in deltas.drain(..) {
                    assembler.push(&delta);
                }
            }
            let _ = decoder.finish(&mut deltas);
            black_box(assembler.finish().map(|response| response.text.len()))
        });
    });
    group.finish();
}

criterion_group!(benches, sse_decode, per_delta);
criterion_main!(benches);
