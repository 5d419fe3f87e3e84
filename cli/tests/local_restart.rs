//! The embedded model's server killed while a run on it is going: the run starts it again and
//! completes the task (its own test binary, since it kills the server the other local-model
//! tests share; it leaves a server running, as it found one).
//!
//! Needs the model and leave to kill its server: runs only when `SKILLS_AGENT_LOCAL_RUN=1` (CI
//! starts the 1.5B model first), never on a model someone started for their own use.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use skills_agent_models::local_model::ServerState;
use skills_agent_models::{LocalModel, ModelSize, cache_dir};

#[path = "common/live.rs"]
mod live;

/// The running 1.5B server's state, waiting for it (bounded).
fn server(model: &LocalModel) -> ServerState {
    let started = Instant::now();
    loop {
        if let Some(state) = model.running() {
            return state;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "no local model server runs");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Whether a record in `runs` has an event of `kind`.
fn recorded(runs: &Path, kind: &str) -> bool {
    std::fs::read_dir(runs).into_iter().flatten().flatten().any(|run| {
        std::fs::read_to_string(run.path().join("events.jsonl"))
            .is_ok_and(|log| log.contains(&format!("\"type\":\"{kind}\"")))
    })
}

#[test]
fn a_killed_local_model_server_is_started_again_and_the_run_completes() {
    if !live::server_may_be_stopped() {
        return;
    }
    let model = LocalModel::new(ModelSize::parse("1.5b").unwrap(), cache_dir().unwrap());
    let before = server(&model);
    let (task, expected) = live::example_task();
    let dir = tempfile::tempdir().unwrap();
    let workspace = live::example_workspace(dir.path());
    let runs = dir.path().join("runs");
    let skills = live::repo().join("examples/skills");
    let child = Command::new(env!("CARGO_BIN_EXE_skills-agent"))
        .args(["run", "--model", "local", "--json", "--skills"])
        .arg(&skills)
        .arg("--workspace")
        .arg(&workspace)
        .arg("--runs-dir")
        .arg(&runs)
        .arg(&task)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server dies while the run's first model call is on it.
    let started = Instant::now();
    while !recorded(&runs, "model_request") {
        assert!(started.elapsed() < Duration::from_secs(120), "the run never asked the model");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let killed = Command::new("kill").args(["-KILL", &before.pid.to_string()]).status().unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    let result: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("no JSON result ({error}); stderr:\n{stderr}"));
    assert_eq!(output.status.code(), Some(0), "{result}");
    let answer = result["final_text"].as_str().unwrap().replace(',', "");
    assert!(answer.contains(&expected), "expected {expected} in: {answer}");
    assert!(stderr.contains("starting it again"), "{stderr}");
    let after = server(&model);
    assert_ne!(after.pid, before.pid, "a new server runs");
}
