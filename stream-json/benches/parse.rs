//! Throughput of stream-json against serde_json, actson, struson and the re-parse-per-chunk
//! approach of LLM SDKs, on model-like action documents (10 KB, 100 KB, 1 MB) and a
//! twitter-like document. Ratios go into `stream-json/BENCHMARKS.md`.
//!
//! `cargo bench -p stream-json --bench parse` (medians: `target/criterion/*/*/new/estimates.json`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{actson_events, inputs, reparse_per_chunk, stream_json, struson_skip};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    for (name, document) in inputs() {
        // Every contender must accept the input.
        serde_json::from_slice::<serde_json::Value>(&document).unwrap();
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Bytes(document.len() as u64));
        group.sample_size(if document.len() > 500_000 { 10 } else { 20 });
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.bench_function("stream_json_one_chunk", |b| {
            b.iter(|| stream_json(black_box(&document), document.len()))
        });
        group.bench_function("stream_json_chunks_16", |b| {
            b.iter(|| stream_json(black_box(&document), 16))
        });
        group.bench_function("serde_json_value", |b| {
            b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(&document)).unwrap())
        });
        group
            .bench_function("actson_one_chunk", |b| b.iter(|| actson_events(black_box(&document))));
        group.bench_function("struson_skip", |b| b.iter(|| struson_skip(black_box(&document))));
        if document.len() <= 200 * 1024 && name.starts_with("action") {
            // The baseline must do its real work: every repaired prefix parses.
            let chunks = document.len().div_ceil(16);
            let parsed = reparse_per_chunk(&document, 16);
            assert_eq!(parsed, chunks, "{name}: only {parsed} of {chunks} prefixes parsed");
            group.sample_size(10);
            group.bench_with_input(
                BenchmarkId::new("reparse_per_chunk", 16),
                &document,
                |b, document| b.iter(|| reparse_per_chunk(black_box(document), 16)),
            );
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
