//! The embedded model's prompt cache outlives its server: `model stop` saves the slots, the next
//! `model start` restores them, and a request that was answered before the restart finds its
//! prompt already evaluated (its own test binary, since it stops the server the other
//! local-model tests share; it leaves a server running, as it found one).
//!
//! Runs only when `SKILLS_AGENT_LOCAL_RUN=1` (CI starts the 1.5B model first), never on a model
//! someone started for their own use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};
use skills_agent_models::{LocalModel, ModelSize, cache_dir};

#[path = "common/live.rs"]
#[allow(dead_code)] // only the gate is used here
mod live;

/// One chat completion on 127.0.0.1:`port` (HTTP/1.1, `connection: close`): its `usage` and
/// `timings`.
fn complete(port: u16, body: &Value) -> Value {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(300))).unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: \
         application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, payload) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{response}");
    serde_json::from_str(payload).unwrap_or_else(|error| panic!("{error}: {payload}"))
}

#[test]
fn a_restarted_model_server_finds_the_prompts_it_had_evaluated() {
    if !live::server_may_be_stopped() {
        return;
    }
    let model = LocalModel::new(ModelSize::parse("1.5b").unwrap(), cache_dir().unwrap());
    // A server started by this build's launcher (one started before it saves nothing).
    model.stop().unwrap();
    let before = model.start().unwrap();
    // A prompt no earlier request sent (the process id and the time), long enough to matter.
    let nonce = format!("{} {:?}", std::process::id(), std::time::SystemTime::now());
    let catalog: String = (1..=40)
        .map(|n| format!("- skill-{n}: reads file kind {n} and prints its figure {n}.\n"))
        .collect();
    let body = json!({
        "messages": [
            {"role": "system", "content": format!("Session {nonce}. Skills:\n{catalog}")},
            {"role": "user", "content": "Which skill reads file kind 7? Answer with its name."},
        ],
        "max_tokens": 8,
        "temperature": 0,
    });
    let first = complete(before.port, &body);
    let prompt = first["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(prompt > 400, "a long prompt: {first}");

    assert!(model.stop().unwrap(), "the server ran");
    let after = model.start().unwrap();
    assert_ne!(after.pid, before.pid, "a new server runs");
    let again = complete(after.port, &body);
    let cached = again["timings"]["cache_n"].as_u64().unwrap();
    eprintln!("after the restart: {cached} of {prompt} prompt tokens from the restored cache");
    assert!(cached * 10 >= prompt * 9, "at least 90 % of the prompt restored: {again}");
}
