//! The provider trait every model connection implements, and the helper that assembles a stream.

use async_trait::async_trait;
use futures_util::StreamExt;

use crate::assemble::Assembler;
use crate::error::{Error, Result};
use crate::http::DeltaStream;
use crate::types::{ChatRequest, Response};

/// A model connection, stored as `Arc<dyn ModelProvider>`.
///
/// `chat` and an assembled `stream` give equal [`Response`]s for the same answer.
#[async_trait]
pub trait ModelProvider: Send + Sync + std::fmt::Debug {
    /// One non-streaming call (retried per the provider's policy).
    async fn chat(&self, request: &ChatRequest) -> Result<Response>;

    /// One streaming call: normalised deltas, ending with [`Delta::Finish`](crate::Delta::Finish)
    /// or one error. Retries happen only before the first content delta.
    async fn stream(&self, request: &ChatRequest) -> Result<DeltaStream>;
}

/// Drains `stream` into a [`Response`], calling `on_delta` for each delta as it arrives.
///
/// A stream that ends without [`Delta::Finish`](crate::Delta::Finish) is
/// [`Error::Truncated`], never a partial success.
pub async fn collect_stream(
    mut stream: DeltaStream,
    mut on_delta: impl FnMut(&crate::Delta) + Send,
) -> Result<Response> {
    let mut assembler = Assembler::new();
    let mut delivered = 0;
    while let Some(item) = stream.next().await {
        let delta = item?;
        on_delta(&delta);
        if delta.is_content() {
            delivered += 1;
        }
        assembler.push(&delta);
        if assembler.is_finished() {
            break;
        }
    }
    assembler.finish().ok_or(Error::Truncated { url: "stream".to_owned(), delivered })
}
