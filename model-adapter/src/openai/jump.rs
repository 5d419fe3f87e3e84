//! [`SchemaFormat::JumpForward`](super::SchemaFormat::JumpForward): a schema-constrained
//! answer in parts, the runtime writing what the schema fixes (see
//! [`crate::gbnf::jump`]). Each part is one streamed request whose assistant message starts
//! with the document so far (llama.cpp continues it) and whose grammar admits that part alone;
//! the caller sees one stream, as if the model had written the whole document.

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{OpenAiConfig, OpenAiStreamDecoder, encode_request};
use crate::error::Result;
use crate::gbnf::jump;
use crate::http::{DeltaStream, PreparedRequest, Transport, WireDecoder};
use crate::types::{
    ChatRequest, Delta, FinishReason, Message, ResponseFormat, ServerTimings, Usage,
};

/// The answer to `request` (whose response format is the json_schema `schema`, which
/// [`jump::covers`]) as one stream of deltas.
pub(super) fn stream(
    transport: &Arc<Transport>,
    config: &OpenAiConfig,
    request: &ChatRequest,
    schema: Value,
) -> DeltaStream {
    let (sender, receiver) = mpsc::channel::<Result<Delta>>(64);
    let transport = Arc::clone(transport);
    let config = config.clone();
    let request = request.clone();
    tokio::spawn(async move {
        if let Err(error) = run(&transport, &config, &request, &schema, &sender).await {
            let _ = sender.send(Err(error)).await;
        }
    });
    Box::pin(futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    }))
}

/// The usage of a document written in parts: the first request's prompt (what the caller
/// asked), every part's generated tokens, and the server's time for all of them (the fixed
/// text it evaluated counted with the prompt tokens in `timings.prompt_n`).
#[derive(Default)]
struct Totals {
    usage: Option<Usage>,
    /// Tokens of a dropped request (no usage reported) before any request reported one.
    unreported: u64,
}

impl Totals {
    fn add(&mut self, part: &Usage) {
        let Some(total) = &mut self.usage else {
            let mut first = *part;
            first.completion_tokens += std::mem::take(&mut self.unreported);
            self.usage = Some(first);
            return;
        };
        total.completion_tokens += part.completion_tokens;
        total.reasoning_tokens += part.reasoning_tokens;
        if let Some(timings) = &part.timings {
            let sum = total.timings.get_or_insert(ServerTimings {
                cache_n: timings.cache_n,
                ..ServerTimings::default()
            });
            sum.prompt_n += timings.prompt_n;
            sum.prompt_ms += timings.prompt_ms;
            sum.predicted_n += timings.predicted_n;
            sum.predicted_ms += timings.predicted_ms;
        }
    }

    /// A dropped request's `pieces`, one token each as llama.cpp streams them.
    fn add_unreported(&mut self, pieces: u64) {
        match &mut self.usage {
            Some(total) => total.completion_tokens += pieces,
            None => self.unreported += pieces,
        }
    }

    fn generated(&self) -> u64 {
        self.usage.as_ref().map_or(self.unreported, |usage| usage.completion_tokens)
    }
}

/// Send `delta`; `false` when the caller has gone.
async fn send(sender: &mpsc::Sender<Result<Delta>>, delta: Delta) -> bool {
    sender.send(Ok(delta)).await.is_ok()
}

async fn finish(
    sender: &mpsc::Sender<Result<Delta>>,
    totals: Totals,
    reason: FinishReason,
) -> Result<()> {
    if let Some(usage) = totals.usage {
        send(sender, Delta::Usage { usage }).await;
    }
    send(sender, Delta::Finish { reason }).await;
    Ok(())
}

async fn run(
    transport: &Arc<Transport>,
    config: &OpenAiConfig,
    request: &ChatRequest,
    schema: &Value,
    sender: &mpsc::Sender<Result<Delta>>,
) -> Result<()> {
    let mut written: Vec<String> = Vec::new();
    let mut sent = String::new();
    let mut totals = Totals::default();
    loop {
        let Some(segment) = jump::segment(schema, &written) else {
            // The document is complete: the fixed text after the last part, then the end.
            let document = jump::step(schema, &written).map(|step| step.prefix).unwrap_or_default();
            if let Some(rest) = document.get(sent.len()..).filter(|rest| !rest.is_empty()) {
                send(sender, Delta::Text { text: rest.to_owned() }).await;
            }
            return finish(sender, totals, FinishReason::Stop).await;
        };
        // The fixed text goes out with the part's first delta: a server that is gone then shows
        // as an error before any content (a caller may still make the call again elsewhere).
        let mut fixed = segment.prefix.get(sent.len()..).map(str::to_owned).unwrap_or_default();
        sent.clone_from(&segment.prefix);
        // What the model wrote of this part so far, across requests (a stop word met inside a
        // string makes a second one), and the grammar of what is left of it.
        let mut text = String::new();
        let mut grammar = segment.grammar.clone();
        let part = loop {
            let Some(left) = tokens_left(request, &totals) else {
                return finish(sender, totals, FinishReason::Length).await;
            };
            let body = part_body(request, config, &sent, &grammar, segment.stop.as_deref(), left)?;
            let prepared = prepared(config, &body)?;
            let decoder = || -> Box<dyn WireDecoder> { Box::new(OpenAiStreamDecoder::default()) };
            let mut stream = transport.stream(prepared, decoder);
            // A request's usage, the last it reports (llama.cpp also puts its timings in the
            // last text chunk when it stops at a stop word: counted once).
            let (mut reason, mut usage, mut pieces, mut looped) = (None, None, 0u64, false);
            while let Some(item) = stream.next().await {
                let delta = item?;
                if delta.is_content()
                    && !fixed.is_empty()
                    && !send(sender, Delta::Text { text: std::mem::take(&mut fixed) }).await
                {
                    return Ok(());
                }
                match delta {
                    Delta::Text { text: more } => {
                        text.push_str(&more);
                        sent.push_str(&more);
                        pieces += 1;
                        if !send(sender, Delta::Text { text: more }).await {
                            return Ok(());
                        }
                        // A loop under greedy decoding does not end before the token limit:
                        // the request is dropped here (llama.cpp stops a generation whose
                        // client has gone).
                        if looping(&text) {
                            looped = true;
                            break;
                        }
                    }
                    Delta::Usage { usage: reported } => usage = Some(reported),
                    Delta::Finish { reason: why } => reason = Some(why),
                    other => {
                        if !send(sender, other).await {
                            return Ok(());
                        }
                    }
                }
            }
            match usage {
                Some(usage) => totals.add(&usage),
                // A dropped request reports nothing: its pieces are counted with the
                // document's generated tokens.
                None => totals.add_unreported(pieces),
            }
            if !fixed.is_empty() {
                send(sender, Delta::Text { text: std::mem::take(&mut fixed) }).await;
            }
            // A string that loops is ended where the loop was seen (its closing quote and the
            // tail, under a grammar for those alone), as its maximum length would end it; a
            // loop elsewhere is cut, as the token limit would cut it.
            if looped {
                match segment.closed(&text) {
                    Some(closing) => {
                        grammar = closing;
                        continue;
                    }
                    None => break Err(FinishReason::Length),
                }
            }
            let reason = reason.unwrap_or(FinishReason::Length);
            if reason != FinishReason::Stop {
                break Err(reason);
            }
            // A server that wrote the stop word (one that does not take `stop`) ended the part
            // at its end-of-text token, as without one.
            let kept_word = segment.stop.as_deref().is_some_and(|word| text.ends_with(word));
            if segment.stop.is_none() || kept_word {
                break segment.tail.part(&text).map(str::to_owned).ok_or(FinishReason::Length);
            }
            // The server left the stop word out: the model wrote it, so it is the caller's too.
            let word = segment.stop.clone().unwrap_or_default();
            match segment.stopped(&text) {
                jump::Stopped::Whole(whole) => {
                    send(sender, Delta::Text { text: word.clone() }).await;
                    sent.push_str(&word);
                    break segment.tail.part(&whole).map(str::to_owned).ok_or(FinishReason::Length);
                }
                jump::Stopped::Inside(rest) => {
                    send(sender, Delta::Text { text: word.clone() }).await;
                    sent.push_str(&word);
                    text.push_str(&word);
                    grammar = rest;
                }
                jump::Stopped::Cut => break Err(FinishReason::Length),
            }
        };
        // Cut short (the token limit): the document ends here, as a whole answer would.
        let part = match part {
            Ok(part) => part,
            Err(reason) => return finish(sender, totals, reason).await,
        };
        written.push(part);
    }
}

/// The shortest stretch of a part's text, in bytes, that [`looping`] reads as a loop.
const LOOP_BYTES: usize = 80;

/// The longest repeated unit, in bytes, that [`looping`] looks for.
const LOOP_PERIOD: usize = 32;

/// Whether `text` ends in a loop: its last `max(LOOP_BYTES, 6 × period)` bytes repeat one unit
/// of at most [`LOOP_PERIOD`] bytes (`22944e22944e…`, written by the local 1.5B as a checksum
/// until the token limit, 768 tokens). Prose, numbers, paths and hashes do not; a line of 80
/// dashes would.
fn looping(text: &str) -> bool {
    let bytes = text.as_bytes();
    (1..=LOOP_PERIOD).any(|period| {
        let span = LOOP_BYTES.max(6 * period);
        bytes.len() >= span && {
            let tail = &bytes[bytes.len() - span..];
            tail.iter().zip(&tail[period..]).all(|(a, b)| a == b)
        }
    })
}

/// What is left of the caller's token limit (`Some(None)`: no limit; `None`: none left).
fn tokens_left(request: &ChatRequest, totals: &Totals) -> Option<Option<u32>> {
    let Some(max) = request.max_tokens else { return Some(None) };
    let left = u64::from(max).saturating_sub(totals.generated());
    (left > 0).then(|| Some(u32::try_from(left).unwrap_or(max)))
}

/// The body of one part's request: the caller's, continuing `prefix` as the assistant's
/// answer under `grammar` (in place of the schema), stopping at `stop`.
fn part_body(
    request: &ChatRequest,
    config: &OpenAiConfig,
    prefix: &str,
    grammar: &str,
    stop: Option<&str>,
    max_tokens: Option<u32>,
) -> Result<Value> {
    let mut part_request = request.clone();
    part_request.messages.push(Message::Assistant {
        content: prefix.to_owned(),
        thinking: None,
        tool_calls: Vec::new(),
    });
    part_request.response_format = ResponseFormat::Text;
    part_request.max_tokens = max_tokens;
    if let Some(word) = stop {
        part_request.stop.push(word.to_owned());
    }
    let (mut body, _) = encode_request(&part_request, true, config)?;
    if let Value::Object(fields) = &mut body {
        fields.insert("grammar".into(), Value::String(grammar.to_owned()));
    }
    Ok(body)
}

/// One part's request, on a connection of its own: llama.cpp's server closes one after a
/// stream, and the next part, sent at once, found the pooled connection closed under it (a
/// retry, 0.25 s+).
fn prepared(config: &OpenAiConfig, body: &Value) -> Result<PreparedRequest> {
    let mut headers = vec![("connection".to_owned(), "close".to_owned())];
    if let Some(key) = &config.api_key {
        headers.push(("authorization".to_owned(), format!("Bearer {key}")));
    }
    let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
    PreparedRequest::json("openai", url, headers, body)
}

#[cfg(test)]
mod tests {
    use super::looping;

    #[test]
    fn a_repeated_unit_is_a_loop_and_prose_is_not() {
        assert!(looping(&format!("The checksum is `{}", "22944e".repeat(14))));
        assert!(looping(&"ab".repeat(40)));
        assert!(looping(&"0".repeat(80)));
        assert!(looping(&"the same sentence, again. ".repeat(7)));
        // Below the span, and text that does not repeat.
        assert!(!looping(&"22944e".repeat(13)));
        assert!(!looping(&"0".repeat(79)));
        assert!(!looping(
            "The SHA-256 checksum of sales.csv is \
             9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08."
        ));
        assert!(!looping(
            "1 nmi = 1852 m, 20 C = 68 F, 1 GiB = 1073.741824 MB; the amount total is 1705.47."
        ));
        assert!(!looping(""));
        // Multi-byte text is read as bytes: no panic, and a loop of it is one.
        assert!(looping(&"é".repeat(40)));
        assert!(!looping("ééé"));
    }
}
