//! SSE decoding throughput (MB/s) and per-delta overhead of the OpenAI stream path.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use model_adapter::sse::SseDecoder;

/// A realistic OpenAI-style stream: `count` chunk events of a few tokens each, then `[DONE]`.
fn openai_stream(count: usize) -> Vec<u8> {
    let mut text = String::new();
    for index in 0..count {
        text.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {index} \"}},\"finish_reason\":null}}]}}\r\n\r\n"
        ));
    }
    text.push_str("data: [DONE]\r\n\r\n");
    text.into_bytes()
}

fn sse_decode(criterion: &mut Criterion) {
    let input = openai_stream(10_000);
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

criterion_group!(benches, sse_decode);
criterion_main!(benches);
