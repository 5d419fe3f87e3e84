//! `skills-agent serve` from the outside: the binary listens on an ephemeral loopback port and
//! a reqwest client checks the API — the run list, SSE replay order, live follow of a record
//! appended line by line (a torn line is not an event until its newline arrives),
//! `Last-Event-ID` resume, refused traversal in run ids and observation references, the host
//! check, and the token rules off loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[path = "common/sse.rs"]
mod sse;
use sse::{Message, SseReader};

/// How long any wait for the server may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

const TOKEN: &str = "test-token-0123456789";

/// `skills-agent serve ARGS` with a private HOME, config and cache under `home` and no
/// provider keys.
fn command(args: &[&str], home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills-agent"));
    command
        .arg("serve")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("SKILLS_AGENT_CACHE", home.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The server, killed when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    /// Serves `runs_dir` on loopback (with a home inside it, which no run id can name).
    fn start(runs_dir: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--runs-dir", runs_dir.to_str().unwrap(), "--addr", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Server::start_with(&args, &runs_dir.join(".home"))
    }

    fn start_with(args: &[&str], home: &Path) -> Server {
        let mut child = command(args, home).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!("the server did not start: {}", String::from_utf8_lossy(&output.stderr));
        };
        // Connect through loopback whatever address it listens on.
        let port = url.trim_end_matches('/').rsplit(':').next().unwrap();
        Server { child, base: format!("http://127.0.0.1:{port}") }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(DEADLINE).build().unwrap()
}

fn event(run_id: &str, seq: u64, turn: u32, kind: &str, data: Value) -> Value {
    let mut event = json!({"ts": format!("2026-01-01T00:00:{:02}.000Z", seq % 60), "run_id": run_id, "seq": seq, "turn": turn, "type": kind});
    event["data"] = data;
    event
}

fn line(event: &Value) -> String {
    format!("{event}\n")
}

/// A finished react run: start, one turn with a stored observation, the answer.
fn finished_run(run_id: &str) -> Vec<Value> {
    vec![
        event(
            run_id,
            1,
            0,
            "run_started",
            json!({"task": "Sum the column", "config": {"strategy": "react", "model": {"model": "mock"}}, "catalog": [], "workspace": "/w"}),
        ),
        event(
            run_id,
            2,
            1,
            "turn_started",
            json!({"budget": {"turns": [1, 12], "tool_calls": [0, 30]}}),
        ),
        event(
            run_id,
            3,
            1,
            "observation_recorded",
            json!({"id": "o1", "status": "ok", "chars": 5000, "content": "head…", "stored": {"sha256": "a".repeat(64), "path": format!("observations/{}.txt", "a".repeat(64)), "bytes": 5000}}),
        ),
        event(run_id, 4, 2, "assistant_delta", json!({"text": "The total "})),
        event(run_id, 5, 2, "assistant_delta", json!({"text": "is 42."})),
        event(
            run_id,
            6,
            2,
            "run_finished",
            json!({"outcome": "completed", "final_text": "The total is 42.", "counters": {}, "reasoning_metrics": {}, "degraded": false}),
        ),
    ]
}

fn write_run(runs_dir: &Path, run_id: &str, events: &[Value]) -> PathBuf {
    let directory = runs_dir.join(run_id);
    std::fs::create_dir_all(directory.join("observations")).unwrap();
    let text: String = events.iter().map(line).collect();
    std::fs::write(directory.join("events.jsonl"), text).unwrap();
    directory
}

fn append(path: &Path, text: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file.flush().unwrap();
}

fn seqs(messages: &[Message]) -> Vec<u64> {
    messages
        .iter()
        .map(|message| {
            serde_json::from_str::<Value>(&message.data).unwrap()["seq"].as_u64().unwrap()
        })
        .collect()
}

#[tokio::test]
async fn lists_runs_with_status_strategy_model_turns_and_outcome() {
    let runs = tempfile::tempdir().unwrap();
    write_run(runs.path(), "20260101_000000_aaaa", &finished_run("20260101_000000_aaaa"));
    let second = finished_run("20260101_000001_bbbb");
    let second_dir = write_run(runs.path(), "20260101_000001_bbbb", &second[..3]);
    std::fs::create_dir(runs.path().join("not-a-run")).unwrap();
    let server = Server::start(runs.path(), &[]);
    let response = client().get(server.url("/api/runs")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let list: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(
        list,
        json!([
            {"run_id": "20260101_000000_aaaa", "status": "finished", "outcome": "completed", "strategy": "react", "model": "mock", "turns": 2, "task": "Sum the column", "started": "2026-01-01T00:00:01.000Z", "updated": "2026-01-01T00:00:06.000Z", "events": 6, "last_seq": 6},
            {"run_id": "20260101_000001_bbbb", "status": "running", "outcome": null, "strategy": "react", "model": "mock", "turns": 1, "task": "Sum the column", "started": "2026-01-01T00:00:01.000Z", "updated": "2026-01-01T00:00:03.000Z", "events": 3, "last_seq": 3},
        ])
    );
    let details: Value = serde_json::from_str(
        &client()
            .get(server.url("/api/runs/20260101_000000_aaaa"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(details["result"]["final_text"], "The total is 42.");
    assert_eq!(details["status"], "finished");
    assert_eq!(details["state"], Value::Null);
    // The list follows the records as they grow.
    let rest: String = second[3..].iter().map(line).collect();
    append(&second_dir.join("events.jsonl"), &rest);
    let list: Value = serde_json::from_str(
        &client().get(server.url("/api/runs")).send().await.unwrap().text().await.unwrap(),
    )
    .unwrap();
    assert_eq!(
        (&list[1]["status"], &list[1]["outcome"], &list[1]["events"]),
        (&json!("finished"), &json!("completed"), &json!(6))
    );
    let missing = client().get(server.url("/api/runs/20990101_000000_zzzz")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let page = client().get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'")
    );
    let html = page.text().await.unwrap();
    for part in ["<html", "new EventSource(", "/api/runs", "caught_up", "assistant_delta"] {
        assert!(html.contains(part), "the page lacks {part}");
    }
    // No outside resources: everything is in the one page.
    assert!(!html.contains("http://") && !html.contains("https://"));
}

#[tokio::test]
async fn replays_recorded_events_in_order_and_resumes_after_last_event_id() {
    let runs = tempfile::tempdir().unwrap();
    let run_id = "20260101_000000_aaaa";
    let events = finished_run(run_id);
    write_run(runs.path(), run_id, &events);
    let server = Server::start(runs.path(), &[]);
    let url = server.url(&format!("/api/runs/{run_id}/events?follow=false"));
    let messages = SseReader::open(client().get(&url), DEADLINE).await.rest().await;
    assert_eq!(seqs(&messages), vec![1, 2, 3, 4, 5, 6]);
    for (message, event) in messages.iter().zip(&events) {
        assert_eq!(message.id.as_deref(), Some(event["seq"].to_string().as_str()));
        assert_eq!(serde_json::from_str::<Value>(&message.data).unwrap(), *event);
    }
    let resumed = SseReader::open(client().get(&url).header("Last-Event-ID", "4"), DEADLINE)
        .await
        .rest()
        .await;
    assert_eq!(seqs(&resumed), vec![5, 6]);
    let after = server.url(&format!("/api/runs/{run_id}/events?follow=false&after=5"));
    assert_eq!(seqs(&SseReader::open(client().get(&after), DEADLINE).await.rest().await), vec![6]);
    let bad = client().get(&url).header("Last-Event-ID", "x").send().await.unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn follows_a_run_as_its_record_grows_line_by_line() {
    let runs = tempfile::tempdir().unwrap();
    let run_id = "20260101_000000_cccc";
    let events = finished_run(run_id);
    let directory = write_run(runs.path(), run_id, &events[..2]);
    let path = directory.join("events.jsonl");
    // A torn line: not an event until its newline arrives.
    let third = line(&events[2]);
    let (head, tail) = third.split_at(third.len() / 2);
    append(&path, head);
    let server = Server::start(runs.path(), &[]);
    let url = server.url(&format!("/api/runs/{run_id}/events"));
    let mut reader = SseReader::open(client().get(&url), DEADLINE).await;
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(reader.next().await.unwrap());
    }
    assert_eq!(seqs(&received[..2]), vec![1, 2]);
    assert_eq!(received[2].event.as_deref(), Some("caught_up"));
    assert_eq!(received[2].data, "2");
    append(&path, tail);
    let message = reader.next().await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&message.data).unwrap(), events[2]);
    for event in &events[3..] {
        append(&path, &line(event));
        let message = reader.next().await.unwrap();
        assert_eq!(serde_json::from_str::<Value>(&message.data).unwrap(), *event);
        assert_eq!(message.id, Some(event["seq"].to_string()));
    }
    // A session goes on after `run_finished`: the stream stays open.
    let input = event(run_id, 7, 2, "user_input", json!({"text": "and the mean?", "kind": "task"}));
    append(&path, &line(&input));
    let message = reader.next().await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&message.data).unwrap(), input);
}

#[tokio::test]
async fn serves_stored_observations_and_refuses_traversal() {
    let runs = tempfile::tempdir().unwrap();
    let run_id = "20260101_000000_aaaa";
    let directory = write_run(runs.path(), run_id, &finished_run(run_id));
    let hash = "a".repeat(64);
    std::fs::write(directory.join(format!("observations/{hash}.txt")), "the whole text").unwrap();
    std::fs::write(runs.path().join("secret.txt"), "secret").unwrap();
    let server = Server::start(runs.path(), &[]);
    let response = client()
        .get(server.url(&format!("/api/runs/{run_id}/observations/{hash}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "the whole text");
    let missing = client()
        .get(server.url(&format!("/api/runs/{run_id}/observations/{}", "b".repeat(64))))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    // A stored name that is a symlink out of the run is not followed.
    let link = "c".repeat(64);
    std::os::unix::fs::symlink(
        runs.path().join("secret.txt"),
        directory.join(format!("observations/{link}.txt")),
    )
    .unwrap();
    let linked = client()
        .get(server.url(&format!("/api/runs/{run_id}/observations/{link}")))
        .send()
        .await
        .unwrap();
    assert_eq!(linked.status(), 404);
    assert_ne!(linked.text().await.unwrap(), "secret");
    for path in [
        "/api/runs/..%2Fsecret.txt".to_owned(),
        "/api/runs/..%2F..%2Fetc/events".to_owned(),
        "/api/runs/%2Fetc%2Fpasswd".to_owned(),
        format!("/api/runs/{run_id}%2F..%2F{run_id}/events"),
        "/api/runs/.hidden".to_owned(),
        format!("/api/runs/{run_id}/observations/..%2F..%2Fsecret"),
        format!("/api/runs/{run_id}/observations/..%2Fevents.jsonl"),
        format!("/api/runs/{run_id}/observations/{}", "A".repeat(64)),
        format!("/api/runs/{run_id}/observations/{hash}.txt"),
    ] {
        let response = client().get(server.url(&path)).send().await.unwrap();
        assert_eq!(response.status(), 400, "{path}");
        let body = response.text().await.unwrap();
        assert!(!body.contains("secret") && !body.contains("the whole text"), "{path}: {body}");
    }
    // Requests for another host name (DNS rebinding) are refused on loopback.
    let rebound = client()
        .get(server.url("/api/runs"))
        .header("Host", "evil.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
}

#[tokio::test]
async fn serves_stored_blobs_typed_and_sandboxed() {
    let runs = tempfile::tempdir().unwrap();
    let run_id = "20260101_000000_bbbb";
    let directory = write_run(runs.path(), run_id, &finished_run(run_id));
    let (png, svg) = (format!("{}.png", "a".repeat(64)), format!("{}.svg", "b".repeat(64)));
    let png_bytes = b"\x89PNG\r\n\x1a\n not really an image".to_vec();
    std::fs::write(directory.join("observations").join(&png), &png_bytes).unwrap();
    std::fs::write(directory.join("observations").join(&svg), "<svg><script>1</script></svg>")
        .unwrap();
    std::fs::write(runs.path().join("secret.png"), "secret").unwrap();
    let server = Server::start(runs.path(), &[]);
    let get = |name: String| {
        let url = server.url(&format!("/api/runs/{run_id}/blobs/{name}"));
        async move { client().get(url).send().await.unwrap() }
    };
    let header = |response: &reqwest::Response, name: &str| {
        response.headers().get(name).map(|value| value.to_str().unwrap().to_owned())
    };
    // An image: typed by its extension, shown in place, sandboxed, never sniffed.
    let response = get(png.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type").as_deref(), Some("image/png"));
    assert_eq!(header(&response, "content-disposition").as_deref(), Some("inline"));
    assert_eq!(header(&response, "x-content-type-options").as_deref(), Some("nosniff"));
    assert!(header(&response, "content-security-policy").unwrap().starts_with("sandbox"));
    assert_eq!(response.bytes().await.unwrap().to_vec(), png_bytes);
    // SVG can run scripts: a download, not a page of this origin.
    let response = get(svg.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "content-disposition"),
        Some(format!("attachment; filename=\"{svg}\""))
    );
    // Missing, or a symlink out of the run: not found.
    assert_eq!(get(format!("{}.png", "c".repeat(64))).await.status(), 404);
    let link = format!("{}.png", "d".repeat(64));
    std::os::unix::fs::symlink(
        runs.path().join("secret.png"),
        directory.join("observations").join(&link),
    )
    .unwrap();
    let linked = get(link).await;
    assert_eq!(linked.status(), 404);
    assert!(!linked.text().await.unwrap().contains("secret"));
    // Anything but a hash and a known extension is refused before a path is built.
    for name in [
        "a".repeat(64),
        format!("{}.exe", "a".repeat(64)),
        format!("{}.png.txt", "a".repeat(64)),
        format!("{}.png", "A".repeat(64)),
        "..%2Fevents.jsonl".to_owned(),
        "..%2F..%2Fsecret.png".to_owned(),
        format!("{}.png", "a".repeat(63)),
    ] {
        let response = get(name.clone()).await;
        assert_eq!(response.status(), 400, "{name}");
        assert!(!response.text().await.unwrap().contains("secret"), "{name}");
    }
}

#[tokio::test]
async fn a_token_is_required_off_loopback_and_checked_when_set() {
    let runs = tempfile::tempdir().unwrap();
    let runs_dir = runs.path().to_str().unwrap();
    for (args, message) in [
        (vec!["--addr", "0.0.0.0:0"], "--allow-remote"),
        (vec!["--addr", "0.0.0.0:0", "--allow-remote"], "token"),
        (vec!["--token", "short"], "at least 16"),
    ] {
        let mut full = vec!["--runs-dir", runs_dir];
        full.extend(args.iter().copied());
        let output = command(&full, &runs.path().join(".home")).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let run_id = "20260101_000000_aaaa";
    write_run(runs.path(), run_id, &finished_run(run_id));
    let remote = Server::start_with(
        &["--runs-dir", runs_dir, "--addr", "0.0.0.0:0", "--allow-remote", "--token", TOKEN],
        &runs.path().join(".home"),
    );
    let local = Server::start(runs.path(), &["--token", TOKEN]);
    for server in [&remote, &local] {
        let refused = client().get(server.url("/api/runs")).send().await.unwrap();
        assert_eq!(refused.status(), 401);
        let wrong = client()
            .get(server.url("/api/runs"))
            .bearer_auth("test-token-0123456780")
            .send()
            .await
            .unwrap();
        assert_eq!(wrong.status(), 401);
        let allowed =
            client().get(server.url("/api/runs")).bearer_auth(TOKEN).send().await.unwrap();
        assert_eq!(allowed.status(), 200);
        let events = server.url(&format!("/api/runs/{run_id}/events?follow=false&token={TOKEN}"));
        assert_eq!(
            seqs(&SseReader::open(client().get(&events), DEADLINE).await.rest().await).len(),
            6
        );
        // The page holds no data; it asks for the token.
        assert_eq!(client().get(server.url("/")).send().await.unwrap().status(), 200);
    }
}

fn post_json(server: &Server, body: &Value) -> reqwest::RequestBuilder {
    client()
        .post(server.url("/api/runs"))
        .header("content-type", "application/json")
        .body(body.to_string())
}

#[tokio::test]
async fn starts_a_run_only_when_allowed_and_streams_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (workspace, home) = (root.join("workspace"), root.join("home"));
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let answers = json!([{"tool_calls": [{"name": "final_answer", "arguments": {"content": "Hello from the server."}}]}]);
    std::fs::write(workspace.join("answers.json"), answers.to_string()).unwrap();
    let runs_dir = workspace.join(".agent/runs");
    let task = json!({"task": "Say hello", "model": "mock:answers.json", "strategy": "react"});

    let closed = Server::start_with(
        &["--workspace", workspace.to_str().unwrap(), "--addr", "127.0.0.1:0"],
        &home,
    );
    assert_eq!(post_json(&closed, &task).send().await.unwrap().status(), 403);
    let info = client().get(closed.url("/api/info")).send().await.unwrap().text().await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&info).unwrap()["allow_start"], false);
    drop(closed);

    let server = Server::start_with(
        &["--workspace", workspace.to_str().unwrap(), "--addr", "127.0.0.1:0", "--allow-start"],
        &home,
    );
    let info = client().get(server.url("/api/info")).send().await.unwrap().text().await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&info).unwrap()["allow_start"], true);
    for (body, expected) in [
        (json!({"task": "  ", "model": "mock:answers.json"}), "empty"),
        (json!({"task": "x", "strategy": "guess"}), "unknown strategy"),
        (json!({"task": "x", "model": "nonsense:x"}), "unknown model spec"),
        (json!({"task": "x", "model": "mock:missing.json"}), "did not start"),
    ] {
        let response = post_json(&server, &body).send().await.unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let text = response.text().await.unwrap();
        assert!(text.contains(expected), "{body}: {text}");
    }
    // A form post (no JSON content type) is not accepted.
    let form = client()
        .post(server.url("/api/runs"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("task=x")
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 415);

    let response = post_json(&server, &task).send().await.unwrap();
    assert_eq!(response.status(), 201);
    let run_id = serde_json::from_str::<Value>(&response.text().await.unwrap()).unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(runs_dir.join(&run_id).join("events.jsonl").is_file());
    let url = server.url(&format!("/api/runs/{run_id}/events"));
    let mut reader = SseReader::open(client().get(&url), DEADLINE).await;
    let finished = loop {
        let message = reader.next().await.expect("the stream ended before run_finished");
        if message.event.is_some() {
            continue;
        }
        let event: Value = serde_json::from_str(&message.data).unwrap();
        if event["type"] == "run_finished" {
            break event;
        }
    };
    assert_eq!(finished["data"]["final_text"], "Hello from the server.");
    assert_eq!(finished["data"]["outcome"], "completed");
}

#[tokio::test]
async fn follows_a_record_whose_torn_line_is_cut_off_by_resume() {
    let runs = tempfile::tempdir().unwrap();
    let run_id = "20260101_000000_dddd";
    let events = finished_run(run_id);
    let directory = write_run(runs.path(), run_id, &events[..2]);
    let path = directory.join("events.jsonl");
    let valid = std::fs::metadata(&path).unwrap().len();
    append(
        &path,
        r#"{"ts":"2026-01-01T00:00:03.000Z","run_id":"20260101_000000_dddd","seq":3,"tu"#,
    );
    let server = Server::start(runs.path(), &[]);
    let url = server.url(&format!("/api/runs/{run_id}/events"));
    let mut reader = SseReader::open(client().get(&url), DEADLINE).await;
    let mut received = Vec::new();
    for _ in 0..3 {
        received.push(reader.next().await.unwrap());
    }
    assert_eq!(seqs(&received[..2]), vec![1, 2]);
    assert_eq!(received[2].event.as_deref(), Some("caught_up"));
    // What `resume` does: cut the torn line off, then append the events that follow.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(valid).unwrap();
    let rest: String = events[2..].iter().map(line).collect();
    append(&path, &rest);
    let mut followed = Vec::new();
    for _ in 2..events.len() {
        followed.push(reader.next().await.unwrap());
    }
    assert_eq!(seqs(&followed), vec![3, 4, 5, 6]);
    assert_eq!(serde_json::from_str::<Value>(&followed[0].data).unwrap(), events[2]);
}
