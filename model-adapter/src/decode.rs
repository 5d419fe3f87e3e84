//! `StreamDecoder`: a provider's raw SSE bytes to normalised deltas with no IO, for replaying
//! captured streams, fuzzing and benchmarks. The HTTP providers run the same two stages.

use crate::anthropic::AnthropicStreamDecoder;
use crate::error::{Error, Result};
use crate::http::WireDecoder;
use crate::openai::OpenAiStreamDecoder;
use crate::sse::{SseDecoder, SseEvent};
use crate::types::Delta;

/// Where errors from a [`StreamDecoder`] say the bytes came from.
const SOURCE: &str = "raw stream";

/// SSE decoding plus one provider's event decoding, fed chunks of any size.
pub struct StreamDecoder {
    sse: SseDecoder,
    wire: Box<dyn WireDecoder>,
    events: Vec<SseEvent>,
    done: bool,
    delivered: u64,
}

impl std::fmt::Debug for StreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamDecoder")
            .field("done", &self.done)
            .field("delivered", &self.delivered)
            .finish()
    }
}

impl StreamDecoder {
    /// A decoder for OpenAI-compatible `chat.completion.chunk` streams.
    pub fn openai() -> StreamDecoder {
        StreamDecoder::with_wire(Box::new(OpenAiStreamDecoder::default()))
    }

    /// A decoder for Anthropic Messages streams.
    pub fn anthropic() -> StreamDecoder {
        StreamDecoder::with_wire(Box::new(AnthropicStreamDecoder::default()))
    }

    fn with_wire(wire: Box<dyn WireDecoder>) -> StreamDecoder {
        StreamDecoder {
            sse: SseDecoder::new(),
            wire,
            events: Vec::new(),
            done: false,
            delivered: 0,
        }
    }

    /// Whether the terminal event has been seen (later bytes are ignored).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Decodes `chunk`, appending the deltas it completes.
    pub fn feed(&mut self, chunk: &[u8], deltas: &mut Vec<Delta>) -> Result<()> {
        if self.done {
            return Ok(());
        }
        self.sse.feed(chunk, &mut self.events);
        self.drain(deltas)
    }

    /// Ends the input: [`Error::Truncated`] unless the terminal event was seen.
    pub fn finish(&mut self, deltas: &mut Vec<Delta>) -> Result<()> {
        if !self.done {
            self.sse.finish(&mut self.events);
            self.drain(deltas)?;
        }
        if self.done {
            Ok(())
        } else {
            Err(Error::Truncated { url: SOURCE.to_owned(), delivered: self.delivered })
        }
    }

    fn drain(&mut self, deltas: &mut Vec<Delta>) -> Result<()> {
        let mut events = std::mem::take(&mut self.events);
        let mut outcome = Ok(());
        for event in events.drain(..) {
            let before = deltas.len();
            match self.wire.on_event(&event, deltas) {
                Ok(terminal) => {
                    self.delivered += (deltas.len() - before) as u64;
                    if terminal {
                        self.done = true;
                        break;
                    }
                }
                Err(error) => {
                    let delivered = self.delivered;
                    outcome =
                        Err(error.into_error(SOURCE, "stream event").with_delivered(delivered));
                    break;
                }
            }
        }
        events.clear();
        self.events = events;
        outcome
    }
}
