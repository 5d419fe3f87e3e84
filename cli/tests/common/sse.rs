//! A small SSE client over reqwest for the tests of `serve`: messages (`id`, `event`, `data`)
//! read from a streaming response, each within a deadline.

use std::time::Duration;

/// One SSE message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    pub(crate) id: Option<String>,
    pub(crate) event: Option<String>,
    pub(crate) data: String,
}

/// Reads SSE messages from a streaming response.
pub(crate) struct SseReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
    /// How long one read may wait for bytes before the test fails.
    deadline: Duration,
}

impl SseReader {
    /// Sends `request` and checks it answers 200 with `text/event-stream`.
    pub(crate) async fn open(request: reqwest::RequestBuilder, deadline: Duration) -> SseReader {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers().get("content-type").unwrap().to_str().unwrap(),
            "text/event-stream"
        );
        SseReader { response, buffer: Vec::new(), deadline }
    }

    /// The next message (comments skipped), or `None` when the stream ends.
    pub(crate) async fn next(&mut self) -> Option<Message> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\n\n") {
                let block: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let block = String::from_utf8(block).unwrap();
                let mut message = Message { id: None, event: None, data: String::new() };
                let mut any = false;
                for field in block.lines() {
                    if let Some(value) = field.strip_prefix("data:") {
                        message.data.push_str(value.strip_prefix(' ').unwrap_or(value));
                        any = true;
                    } else if let Some(value) = field.strip_prefix("id:") {
                        message.id = Some(value.trim().to_owned());
                    } else if let Some(value) = field.strip_prefix("event:") {
                        message.event = Some(value.trim().to_owned());
                    }
                }
                if any {
                    return Some(message);
                }
                continue;
            }
            let chunk = tokio::time::timeout(self.deadline, self.response.chunk())
                .await
                .expect("no SSE data before the deadline")
                .unwrap()?;
            self.buffer.extend_from_slice(&chunk);
        }
    }

    /// All messages up to the end of the stream.
    #[allow(dead_code)] // serve.rs reads whole streams; load.rs only follows them
    pub(crate) async fn rest(mut self) -> Vec<Message> {
        let mut messages = Vec::new();
        while let Some(message) = self.next().await {
            messages.push(message);
        }
        messages
    }
}
