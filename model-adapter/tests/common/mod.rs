//! A scripted loopback HTTP/1.1 server for the tests: one scripted reply per connection,
//! fault injection (byte-at-a-time writes, cuts, stalls) and recording of the requests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use model_adapter::{HttpConfig, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One thing the server does on a connection.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes in one call.
    Write(Vec<u8>),
    /// Write these bytes one at a time.
    WriteBytewise(Vec<u8>),
    /// Write these bytes in pieces of this size.
    WriteChunked(Vec<u8>, usize),
    /// Close the connection abruptly (the reply ends here).
    Cut,
    /// Send nothing more until the client goes away.
    Stall,
}

/// The whole scripted answer to one connection.
#[derive(Debug, Clone)]
pub struct Reply {
    pub steps: Vec<Step>,
}

impl Reply {
    /// `200` with an SSE body that ends when the connection closes.
    pub fn sse(body: &[u8]) -> Reply {
        Reply { steps: vec![Step::Write(sse_head()), Step::Write(body.to_vec())] }
    }

    /// `200` with an SSE body written with `write`.
    pub fn sse_with(body: &[u8], write: fn(Vec<u8>) -> Step) -> Reply {
        Reply { steps: vec![Step::Write(sse_head()), write(body.to_vec())] }
    }

    /// A complete JSON response with this status and extra headers.
    pub fn json(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        ));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        Reply { steps: vec![Step::Write(bytes)] }
    }
}

/// Response head for a close-delimited event stream.
pub fn sse_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
        .to_vec()
}

/// Response head for a chunked event stream (a cut mid-body is then a transport error).
pub fn chunked_sse_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        .to_vec()
}

/// One chunk of a chunked body.
pub fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut framed = format!("{:x}\r\n", bytes.len()).into_bytes();
    framed.extend_from_slice(bytes);
    framed.extend_from_slice(b"\r\n");
    framed
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The server; it stops when dropped.
#[derive(Debug)]
pub struct TestServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Serves `replies` to successive connections; further connections are cut at once.
    pub async fn start(replies: Vec<Reply>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            let mut replies = replies.into_iter();
            loop {
                let Ok((socket, _)) = listener.accept().await else { return };
                let reply = replies.next();
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    serve(socket, reply, recorded).await;
                });
            }
        });
        TestServer { url, requests, task }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut socket: TcpStream, reply: Option<Reply>, recorded: Arc<Mutex<Vec<Recorded>>>) {
    socket.set_nodelay(true).unwrap();
    let Some(request) = read_request(&mut socket).await else { return };
    recorded.lock().unwrap().push(request);
    let Some(reply) = reply else { return };
    for step in reply.steps {
        let written = match step {
            Step::Write(bytes) => socket.write_all(&bytes).await,
            Step::WriteBytewise(bytes) => {
                let mut result = Ok(());
                for byte in bytes {
                    result = socket.write_all(&[byte]).await;
                    if result.is_err() {
                        break;
                    }
                }
                result
            }
            Step::WriteChunked(bytes, size) => {
                let mut result = Ok(());
                for piece in bytes.chunks(size) {
                    result = socket.write_all(piece).await;
                    if result.is_err() {
                        break;
                    }
                }
                result
            }
            Step::Cut => return,
            Step::Stall => {
                let mut sink = [0u8; 64];
                while let Ok(read) = socket.read(&mut sink).await {
                    if read == 0 {
                        break;
                    }
                }
                return;
            }
        };
        if written.is_err() {
            return;
        }
    }
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 4096];
    let head_end = loop {
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position;
        }
        let read = socket.read(&mut piece).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&piece[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut piece).await.ok()?;
        if read == 0 {
            return None;
        }
        body.extend_from_slice(&piece[..read]);
    }
    Some(Recorded { method, path, headers, body })
}

/// Test configuration: short waits so retries cost milliseconds, limits that never hit by luck.
pub fn fast_http() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(5),
        first_byte_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        retry: RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(4),
            max_retry_after: Duration::from_secs(2),
        },
    }
}

/// The recorded-style stream fixtures: `NAME.sse` (the stream), `NAME.json` (the same answer
/// non-streamed) and `NAME.expected.json` (the Response both assemble to); the prefix names the
/// provider.
pub const FIXTURES: [&str; 13] = [
    "openai_text",
    // Recorded from llama.cpp's server (the embedded model): usage and `timings` in the last chunk.
    "openai_llamacpp_timings",
    "openai_tools",
    "openai_length_cut",
    "openai_parallel_usage_chunk",
    "openai_refusal",
    "openai_no_index",
    "openai_late_name",
    "anthropic_text",
    "anthropic_tools",
    "anthropic_thinking_tools_real",
    "anthropic_interleaved_thinking",
    "anthropic_redacted_thinking",
];

pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

pub fn data(name: &str) -> Vec<u8> {
    std::fs::read(data_path(name)).unwrap()
}
