//! One whole run on the real local model: llama.cpp serving Qwen2.5-Coder-0.5B-Instruct,
//! started by `cargo xtask local-llm start` (CI does this and sets `SKILLS_AGENT_LLM_URL`) or
//! by `skills-agent model start` (found through its state file; any size), asked as `--model
//! local` asks it (the per-turn schema becomes grammars, jump-forward decoding), with a real
//! Python script run through the sandbox; once with react, once with plan-execute-think.
//! Skipped, with a printed reason, when no model runs.
//!
//! It asserts structure, never wording: the run ends with a final text, `events.jsonl` is well
//! formed, and the run replays exactly from its own record. It also prints how the wall time
//! splits between the model (timed by a wrapper around the provider), the actions (script runs
//! in the sandbox, file reads; from the events) and the runtime itself — the figure
//! `agent-core/BENCHMARKS.md` reports (run it with `--release` for that) — without asserting
//! on it: performance belongs to benchmarks.
//!
//! The binary doubles as tools-runtime's sandbox helper (`harness = false`, see
//! `common::main`), so the script runs under `cargo test -p skills-agent-core` too.

mod common;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_trait::async_trait;
use common::{Fixture, well_formed};
use futures_util::StreamExt;
use model_adapter::{
    ChatRequest, DeltaStream, ModelProvider, NamedToolChoice, OpenAiConfig, OpenAiProvider,
    Response, SchemaFormat,
};
use serde_json::Value;
use skills_agent_core::{AgentConfig, Budgets, DecideMode, EventKind, ModelSettings, replay_check};

fn main() -> ExitCode {
    common::main(tests![
        a_run_on_the_local_model_ends_with_an_answer_and_replays,
        a_plan_execute_think_run_on_the_local_model_takes_valid_actions,
    ])
}

/// The server root: `SKILLS_AGENT_LLM_URL`, else the embedded model that `skills-agent model
/// start` (the README's main job) or `cargo xtask local-llm start` left running — its state file
/// under `$SKILLS_AGENT_CACHE` or `~/.cache/skills-agent`, the 0.5B first, when `/health`
/// answers. `None`, after saying why, when there is none.
fn server_url() -> Option<String> {
    let mut err = std::io::stderr();
    if let Ok(url) = std::env::var("SKILLS_AGENT_LLM_URL")
        && !url.trim().is_empty()
    {
        return Some(url.trim().trim_end_matches('/').to_owned());
    }
    let cache =
        std::env::var_os("SKILLS_AGENT_CACHE").map(std::path::PathBuf::from).or_else(|| {
            std::env::var_os("HOME")
                .map(|home| std::path::Path::new(&home).join(".cache/skills-agent"))
        });
    for size in ["0.5b", "1.5b"] {
        let state = cache.as_ref().map(|cache| cache.join("local-model").join(size).join("state"));
        let port = state.and_then(|path| std::fs::read_to_string(path).ok()).and_then(|text| {
            text.lines().find_map(|line| line.strip_prefix("port=")?.parse().ok())
        });
        if let Some(port) = port
            && healthy(port)
        {
            // The real stderr, past the test harness's capture, so it shows which model ran.
            let _ = writeln!(err, "using the running {size} model at http://127.0.0.1:{port}");
            return Some(format!("http://127.0.0.1:{port}"));
        }
    }
    let _ = writeln!(
        err,
        "skipping: no local model (start one with `skills-agent model start` or `cargo xtask \
         local-llm start`, or export SKILLS_AGENT_LLM_URL)"
    );
    None
}

/// Whether llama.cpp's `/health` on 127.0.0.1:`port` answers 200.
fn healthy(port: u16) -> bool {
    use std::io::Read;
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(2))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = [0u8; 12];
    stream.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_ok()
        && stream.read_exact(&mut head).is_ok()
        && head.ends_with(b" 200")
}

/// A skill with a real script (`word-count` counts the words of a file), an unrelated skill,
/// and `notes.txt` in the workspace.
fn word_count_fixture() -> anyhow::Result<Fixture> {
    let fixture = Fixture::new();
    fixture.skill(
        "word-count",
        "Counts the words of a text file.",
        "",
        "Run scripts/count.py with the file's path; it prints `words=N`. Answer with N.",
    );
    fixture.file(
        "word-count",
        "scripts/count.py",
        "import sys\nwords = open(sys.argv[1]).read().split()\nprint(f'words={len(words)}')\n",
    );
    fixture.skill("date-format", "Formats calendar dates as ISO 8601.", "", "Use YYYY-MM-DD.");
    std::fs::write(fixture.workspace.join("notes.txt"), "the quick brown fox jumps\n")?;
    Ok(fixture)
}

const TASK: &str = "How many words does the file notes.txt have?";

/// Milliseconds summed over the `duration_ms` of every event of `kind` (each truncated to
/// whole milliseconds), and how many there were.
fn total_ms(events: &[skills_agent_core::Event], kind: EventKind) -> (u64, usize) {
    let durations: Vec<u64> = events
        .iter()
        .filter(|event| event.kind == kind)
        .filter_map(|event| event.data.get("duration_ms").and_then(Value::as_u64))
        .collect();
    (durations.iter().sum(), durations.len())
}

/// The provider, timed to the microsecond: each call counts from its start to the last delta
/// its stream delivers (what the runtime does with a delta in between is counted as the
/// model's, and is tiny next to the tokens it waits for).
#[derive(Debug)]
struct TimedModel {
    inner: OpenAiProvider,
    /// `(started, last delta)` of every call.
    calls: Arc<Mutex<Vec<(Instant, Instant)>>>,
}

impl TimedModel {
    fn start(&self) -> usize {
        let mut calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        calls.push((now, now));
        calls.len() - 1
    }

    fn model_time(&self) -> (Duration, usize) {
        let calls = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (calls.iter().map(|(started, ended)| *ended - *started).sum(), calls.len())
    }

    fn note_end(calls: &Mutex<Vec<(Instant, Instant)>>, index: usize) {
        let mut calls = calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        calls[index].1 = Instant::now();
    }
}

#[async_trait]
impl ModelProvider for TimedModel {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<Response> {
        let index = self.start();
        let response = self.inner.chat(request).await;
        TimedModel::note_end(&self.calls, index);
        response
    }

    async fn stream(&self, request: &ChatRequest) -> model_adapter::Result<DeltaStream> {
        let index = self.start();
        let stream = self.inner.stream(request).await;
        TimedModel::note_end(&self.calls, index);
        let calls = Arc::clone(&self.calls);
        Ok(Box::pin(stream?.inspect(move |_| TimedModel::note_end(&calls, index))))
    }
}
/// One run of `TASK` with `strategy` on the model at `url`, as `--model local` asks it, checked
/// for what every run must show: a final text, a well-formed `events.jsonl` that ends with
/// `run_finished`, and an exact replay.
struct LocalRun {
    /// Keeps the run directory until the test is done with it.
    _fixture: Fixture,
    result: skills_agent_core::RunResult,
    events: Vec<skills_agent_core::Event>,
    wall: Duration,
    model: Arc<TimedModel>,
}

async fn run_on(url: &str, strategy: &str) -> anyhow::Result<LocalRun> {
    // As `--model local` sends it (`skills-agent-models`' `provider_on`): the per-turn schema
    // as grammars, the text they fix written by the client (jump-forward decoding).
    let mut config = OpenAiConfig::new(format!("{url}/v1"));
    config.named_tool_choice = NamedToolChoice::JsonSchema;
    config.schema_format = SchemaFormat::JumpForward;
    let model = Arc::new(TimedModel { inner: OpenAiProvider::new(config)?, calls: Arc::default() });
    let config = AgentConfig {
        strategy: strategy.to_owned(),
        decide: DecideMode::Json,
        model: ModelSettings { model: "local".to_owned(), temperature: Some(0.0), max_tokens: 200 },
        budgets: Budgets {
            max_turns: 6,
            max_tool_calls: 6,
            max_script_runs: 3,
            max_duration_ms: Some(240_000),
            ..Budgets::default()
        },
        ..AgentConfig::default()
    };
    let fixture = word_count_fixture()?;
    let agent = fixture.agent_with(model.clone(), config).build()?;
    let started = Instant::now();
    let result = agent.run(TASK).await?;
    let wall = started.elapsed();
    let run_dir = result.run_dir.clone().context("the run wrote no run directory")?;

    assert!(!result.final_text.trim().is_empty(), "{strategy}: no final text: {result:?}");
    let events = well_formed(&run_dir);
    assert_eq!(events.last().map(|event| event.kind), Some(EventKind::RunFinished));
    let report = replay_check(&run_dir).await?;
    assert!(
        report.reproduced(),
        "{strategy}: the replay departed from the record: {:?}",
        report.divergence
    );
    let actions: Vec<String> = events
        .iter()
        .filter(|event| event.kind == EventKind::ActionValidated)
        .map(|event| match event.data["action"].get("type").and_then(Value::as_str) {
            Some(kind) => kind.to_owned(),
            None => "(invalid)".to_owned(),
        })
        .collect();
    println!("{strategy}: actions: {}; final text: {:?}", actions.join(", "), result.final_text);
    Ok(LocalRun { _fixture: fixture, result, events, wall, model })
}

async fn a_run_on_the_local_model_ends_with_an_answer_and_replays() -> anyhow::Result<()> {
    let Some(url) = server_url() else { return Ok(()) };
    let LocalRun { result, events, wall, model, .. } = run_on(&url, "react").await?;
    // Runtime = wall − model − actions. The actions' times are whole milliseconds rounded
    // down, so the runtime's figure is an upper bound (by at most 1 ms per action).
    let wall_ms = wall.as_secs_f64() * 1e3;
    let (model_time, model_calls) = model.model_time();
    let model_ms = model_time.as_secs_f64() * 1e3;
    let (action_ms, actions) = total_ms(&events, EventKind::ActionExecuted);
    let runtime_ms = wall_ms - model_ms - action_ms as f64;
    println!(
        "local model run: {:?} after {} turns ({} scripts), {} events; wall {wall_ms:.0} ms = \
         model {model_ms:.0} ms ({model_calls} calls) + actions {action_ms} ms ({actions}) + \
         runtime {runtime_ms:.1} ms: {:.3} % of the wall time ({:.1} ms per turn)",
        result.outcome,
        result.turns,
        result.script_runs,
        events.len(),
        100.0 * runtime_ms / wall_ms,
        runtime_ms / f64::from(result.turns.max(1)),
    );
    Ok(())
}

/// plan-execute-think asks for a plan document (an array of step objects) before it acts. The
/// grammar holds every document the server sends back to the schema, so a document that does
/// not parse was cut by the adapter, not written so by the model: a stop word that closed an
/// array of objects early cut every plan on the real server while every scripted test passed
/// (2026-12-07). At least one action must validate, and no answer may be cut JSON.
async fn a_plan_execute_think_run_on_the_local_model_takes_valid_actions() -> anyhow::Result<()> {
    let Some(url) = server_url() else { return Ok(()) };
    let LocalRun { events, .. } = run_on(&url, "plan-execute-think").await?;
    let validated: Vec<&Value> = events
        .iter()
        .filter(|event| event.kind == EventKind::ActionValidated)
        .map(|event| &event.data)
        .collect();
    assert!(
        validated.iter().any(|data| data["valid"] == Value::Bool(true)),
        "no answer of the model validated: {validated:?}"
    );
    let cut: Vec<&&Value> = validated
        .iter()
        .filter(|data| data["error"].as_str().is_some_and(|error| error.contains("not valid JSON")))
        .collect();
    assert!(cut.is_empty(), "answers cut short of a whole document: {cut:?}");
    Ok(())
}
