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
}

impl Totals {
    fn add(&mut self, part: &Usage) {
        let Some(total) = &mut self.usage else {
            self.usage = Some(*part);
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

    fn generated(&self) -> u64 {
        self.usage.as_ref().map_or(0, |usage| usage.completion_tokens)
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
        let mut part_request = request.clone();
        part_request.messages.push(Message::Assistant {
            content: segment.prefix.clone(),
            thinking: None,
            tool_calls: Vec::new(),
        });
        part_request.response_format = ResponseFormat::Text;
        if let Some(max) = request.max_tokens {
            let left = u64::from(max).saturating_sub(totals.generated());
            if left == 0 {
                return finish(sender, totals, FinishReason::Length).await;
            }
            part_request.max_tokens = Some(u32::try_from(left).unwrap_or(max));
        }
        let (mut body, _) = encode_request(&part_request, true, config)?;
        if let Value::Object(fields) = &mut body {
            fields.insert("grammar".into(), Value::String(segment.grammar.clone()));
        }
        // A new connection per part: llama.cpp's server closes one after a stream, and the next
        // part, sent at once, found the pooled connection closed under it (a retry, 0.25 s+).
        let mut headers = vec![("connection".to_owned(), "close".to_owned())];
        if let Some(key) = &config.api_key {
            headers.push(("authorization".to_owned(), format!("Bearer {key}")));
        }
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        let prepared = PreparedRequest::json("openai", url, headers, &body)?;
        let decoder = || -> Box<dyn WireDecoder> { Box::new(OpenAiStreamDecoder::default()) };
        let mut part = transport.stream(prepared, decoder);
        let mut text = String::new();
        let mut reason = None;
        while let Some(item) = part.next().await {
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
                    if !send(sender, Delta::Text { text: more }).await {
                        return Ok(());
                    }
                }
                Delta::Usage { usage } => totals.add(&usage),
                Delta::Finish { reason: why } => reason = Some(why),
                other => {
                    if !send(sender, other).await {
                        return Ok(());
                    }
                }
            }
        }
        if !fixed.is_empty() {
            send(sender, Delta::Text { text: fixed }).await;
        }
        sent.push_str(&text);
        let reason = reason.unwrap_or(FinishReason::Length);
        let part = segment.tail.part(&text).filter(|_| reason == FinishReason::Stop);
        let Some(part) = part else {
            // Cut short (the token limit): the document ends here, as a whole answer would.
            let reason = if reason == FinishReason::Stop { FinishReason::Length } else { reason };
            return finish(sender, totals, reason).await;
        };
        written.push(part.to_owned());
    }
}
