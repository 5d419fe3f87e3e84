//! Resume: a run killed with SIGKILL — a real child process running the agent — goes on from
//! its run directory. The interrupted turn is redone (but an action whose result was recorded
//! without its observation is completed from `last_execution.json`, not run again), nothing the
//! record shows done is done again, and the finished record replays like one that never
//! stopped.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{Fixture, answer, call, copy_dir, select, tool, toolbox, wait_for, well_formed};
use model_adapter::{ChatRequest, MockModel, MockReply, ModelProvider};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sha2::Digest;
use skills_agent_core::{AgentConfig, Event, EventKind, Outcome, replay_check};

fn main() -> std::process::ExitCode {
    common::main_with_children(
        tests![
            a_run_killed_while_the_model_answers_resumes_without_redoing_anything,
            a_run_killed_inside_a_script_redoes_that_turn_only,
            a_run_killed_between_a_result_and_its_observation_does_not_run_the_script_again,
            a_run_resumes_from_any_point_of_its_record,
            only_an_unfinished_run_is_resumed,
        ],
        tests![
            child_blocked_in_the_model,
            child_blocked_in_a_script,
            child_stalled_after_a_script_result
        ],
    )
}

const TASK: &str = "Log one, then two";

/// The scripted model of the killed runs: replies until `block_at` (1-based), where it never
/// answers.
#[derive(Debug)]
struct BlockingModel {
    inner: MockModel,
    block_at: usize,
}

#[async_trait::async_trait]
impl ModelProvider for BlockingModel {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<model_adapter::Response> {
        self.inner.chat(request).await
    }

    async fn stream(
        &self,
        request: &ChatRequest,
    ) -> model_adapter::Result<model_adapter::DeltaStream> {
        if self.inner.requests().len() + 1 == self.block_at {
            std::future::pending::<()>().await;
        }
        self.inner.stream(request).await
    }
}

/// Child: select, log one, log two, then a model that never answers the fourth call.
async fn child_blocked_in_the_model() -> anyhow::Result<()> {
    let fixture = Fixture::of_parent();
    let model = BlockingModel {
        inner: MockModel::new(vec![
            select("toolbox"),
            tool("log", &["one"]),
            tool("log", &["two"]),
        ]),
        block_at: 4,
    };
    fixture.agent_with(Arc::new(model), AgentConfig::default()).build()?.run(TASK).await?;
    anyhow::bail!("the run was meant to block, not finish")
}

/// Child: select, log one, then a script that blocks until the parent lets it through.
async fn child_blocked_in_a_script() -> anyhow::Result<()> {
    let fixture = Fixture::of_parent();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("block", &[]),
    ]));
    fixture.agent(&model, AgentConfig::default()).build()?.run(TASK).await?;
    anyhow::bail!("the run was meant to block, not finish")
}

/// A sink after the run directory's that never returns from the `action_executed` of a
/// `log two` script: the event is in the file, its observation never will be.
#[derive(Debug)]
struct StallAfterLogTwo;

impl skills_agent_core::EventSink for StallAfterLogTwo {
    fn record(&self, event: &Event) -> skills_agent_core::Result<()> {
        if event.kind == EventKind::ActionExecuted
            && event.data["action"]["args"]["args"] == json!(["two"])
        {
            loop {
                std::thread::park();
            }
        }
        Ok(())
    }
}

/// Child: select, log one, log two — and stall right after log two's result is recorded.
async fn child_stalled_after_a_script_result() -> anyhow::Result<()> {
    let fixture = Fixture::of_parent();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("log", &["two"]),
    ]));
    let agent = fixture.agent(&model, AgentConfig::default()).sink(Arc::new(StallAfterLogTwo));
    agent.build()?.run(TASK).await?;
    anyhow::bail!("the run was meant to stall, not finish")
}

/// The text of `run_dir`'s `events.jsonl` (empty before it exists).
fn events_text(run_dir: Option<PathBuf>) -> String {
    run_dir
        .map(|dir| std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default())
        .unwrap_or_default()
}

/// The run directory under `runs/`, once the child made it.
fn run_dir_of(fixture: &Fixture) -> Option<PathBuf> {
    std::fs::read_dir(&fixture.runs).ok()?.next().map(|entry| entry.unwrap().path())
}

/// Starts `mode` as a child process, waits until `ready` holds for the events written so far,
/// then kills the child with SIGKILL. Returns the run directory.
async fn run_and_kill(fixture: &Fixture, mode: &str, ready: impl Fn(&str) -> bool) -> PathBuf {
    let mut child = fixture.child(mode).spawn().unwrap();
    wait_for(mode, || {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child {mode} ended by itself: {status}");
        }
        ready(&events_text(run_dir_of(fixture)))
    })
    .await;
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "SIGKILL");
    run_dir_of(fixture).unwrap()
}

/// How many events of `kind` the record holds.
fn count(events: &[Event], kind: EventKind) -> usize {
    events.iter().filter(|event| event.kind == kind).count()
}

/// Checks what every resumed run must be: one run_started, one turn_started per turn, one
/// `action_executed` per action that was not interrupted, state.json and final.md of the end,
/// and an exact replay.
async fn check_resumed(run_dir: &Path, result: &skills_agent_core::RunResult) -> Vec<Event> {
    let events = well_formed(run_dir);
    assert_eq!(events.last().unwrap().kind, EventKind::RunFinished);
    let turns: Vec<u32> = events
        .iter()
        .filter(|event| event.kind == EventKind::TurnStarted)
        .map(|event| event.turn)
        .collect();
    assert_eq!(turns, (1..=result.turns).collect::<Vec<_>>());
    let state: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["counters"], serde_json::to_value(&result.counters).unwrap());
    assert_eq!(
        std::fs::read_to_string(run_dir.join("final.md")).unwrap(),
        format!("{}\n", result.final_text)
    );
    let report = replay_check(run_dir).await.unwrap();
    assert_eq!(report.divergence, None);
    events
}

fn sha256_of(request: &ChatRequest) -> String {
    let digest = sha2::Sha256::digest(serde_json::to_vec(request).unwrap());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

async fn a_run_killed_while_the_model_answers_resumes_without_redoing_anything()
-> anyhow::Result<()> {
    let fixture = toolbox();
    let run_dir = run_and_kill(&fixture, "child_blocked_in_the_model", |events| {
        events.contains(r#""turn":4,"type":"model_request""#)
    })
    .await;
    let killed = well_formed(&run_dir);
    assert_eq!(killed.last().unwrap().kind, EventKind::ModelRequest);
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n");

    // The resumed run asks the model only what the record has no answer for, with the very
    // request the killed run had sent.
    let model = Arc::new(MockModel::new(vec![answer("Logged one and two.")]));
    let agent = fixture.agent(&model, AgentConfig::default()).build()?;
    let result = agent.resume(&run_dir).await?;
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!(result.final_text, "Logged one and two.");
    assert_eq!((result.turns, result.model_calls, result.script_runs), (4, 4, 2));
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(killed.last().unwrap().data["request_sha256"], sha256_of(&requests[0]));
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n", "no script ran again");
    let events = check_resumed(&run_dir, &result).await;
    assert_eq!(events[..killed.len()], killed[..], "the record is kept as it was");
    assert_eq!(count(&events, EventKind::ActionExecuted), 3);
    assert_eq!(count(&events, EventKind::ModelRequest), 4);
    Ok(())
}

async fn a_run_killed_inside_a_script_redoes_that_turn_only() -> anyhow::Result<()> {
    let fixture = toolbox();
    // Logs that it started, then waits until the parent lets it through.
    fixture.script(
        "toolbox",
        "scripts/block.sh",
        "echo block >> log.txt\nwhile [ ! -e resumed ]; do sleep 0.05; done\necho through",
    );
    let run_dir = run_and_kill(&fixture, "child_blocked_in_a_script", |_| {
        fixture.workspace_text("log.txt") == "one\nblock\n"
    })
    .await;
    let killed = well_formed(&run_dir);
    let last = killed.last().unwrap();
    assert_eq!((last.kind, last.turn), (EventKind::ActionValidated, 3));
    assert_eq!(last.data["action"]["args"]["script"], "scripts/block.sh");
    // The sandbox went down with the agent: the blocked script is not left running.
    wait_for("the script to end with its agent", || {
        !std::fs::read_dir("/proc").unwrap().any(|entry| {
            std::fs::read(entry.unwrap().path().join("cmdline"))
                .is_ok_and(|cmdline| cmdline.windows(8).any(|window| window == b"block.sh"))
        })
    })
    .await;

    std::fs::write(fixture.workspace.join("resumed"), "")?;
    let model = Arc::new(MockModel::new(vec![answer("Logged one; the block script got through.")]));
    let agent = fixture.agent(&model, AgentConfig::default()).build()?;
    let result = agent.resume(&run_dir).await?;
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!((result.turns, result.model_calls, result.script_runs), (4, 4, 2));
    assert_eq!(model.requests().len(), 1, "turn 3's answer came from the record");
    // `one` was recorded as done and ran once; the interrupted script ran again.
    assert_eq!(fixture.workspace_text("log.txt"), "one\nblock\nblock\n");
    let events = check_resumed(&run_dir, &result).await;
    let observations: Vec<(&Value, u32)> = events
        .iter()
        .filter(|event| event.kind == EventKind::ObservationRecorded)
        .map(|event| (&event.data["content"], event.turn))
        .collect();
    assert_eq!(observations[2], (&json!("exit code 0\nstdout:\nthrough"), 3));
    assert_eq!(count(&events, EventKind::ActionExecuted), 3);
    Ok(())
}

/// Killed after a script's `action_executed` was written but before its observation: the
/// resume takes the result from `last_execution.json` (written before the event) and records
/// the observation, instead of running the script a second time.
async fn a_run_killed_between_a_result_and_its_observation_does_not_run_the_script_again()
-> anyhow::Result<()> {
    let fixture = toolbox();
    let run_dir = run_and_kill(&fixture, "child_stalled_after_a_script_result", |events| {
        events.lines().last().is_some_and(|line| {
            line.contains(r#""type":"action_executed""#) && line.contains(r#"["two"]"#)
        })
    })
    .await;
    let killed = well_formed(&run_dir);
    assert_eq!(killed.last().unwrap().kind, EventKind::ActionExecuted);
    assert!(run_dir.join("last_execution.json").is_file());
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n");

    let model = Arc::new(MockModel::new(vec![answer("Logged one and two.")]));
    let agent = fixture.agent(&model, AgentConfig::default()).build()?;
    let result = agent.resume(&run_dir).await?;
    assert_eq!(result.outcome, Outcome::Completed);
    assert_eq!((result.turns, result.model_calls, result.script_runs), (4, 4, 2));
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n", "log two ran once");
    assert!(!run_dir.join("last_execution.json").exists(), "removed once recorded");
    let events = check_resumed(&run_dir, &result).await;
    assert_eq!(events[..killed.len()], killed[..], "the record is kept as it was");
    assert_eq!(count(&events, EventKind::ActionExecuted), 3);
    let observation = events
        .iter()
        .filter(|event| event.kind == EventKind::ObservationRecorded)
        .nth(2)
        .map(|event| (event.turn, event.seq, event.data["content"].clone()));
    assert_eq!(observation.map(|(turn, seq, _)| (turn, seq)), Some((3, killed.len() as u64 + 1)));
    Ok(())
}

/// The run every cut of `a_run_resumes_from_any_point_of_its_record` continues.
fn replies() -> Vec<MockReply> {
    vec![
        call(
            "select_skills",
            json!({"names": ["toolbox"], "plan": {"goal": "log", "steps": [
                {"id": "s1", "title": "Log one", "status": "pending"},
            ]}}),
        ),
        tool("log", &["one"]),
        call("load_resource", json!({"skill": "notes", "path": "reference.md"})),
        tool("print", &["40", "stored"]),
        tool("log", &["two"]),
        answer("Logged one and two; printed forty lines."),
    ]
}

async fn a_run_resumes_from_any_point_of_its_record() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut config = AgentConfig::default();
    config.context.inline_observation_chars = 600;
    let model = Arc::new(MockModel::new(replies()));
    let original = fixture.run(fixture.agent(&model, config.clone()), TASK).await?;
    assert_eq!(original.result.outcome, Outcome::Completed);
    assert!(
        original.data(EventKind::ObservationRecorded).iter().any(|data| !data["stored"].is_null())
    );
    let full_log = fixture.workspace_text("log.txt");
    assert_eq!(full_log, "one\ntwo\n");
    let (lines, wanted) = original.record()?;
    let scratch = tempfile::tempdir()?;
    // Killed after `kept` whole lines, some with half of the next line written (a torn write).
    for kept in 1..lines.len() {
        for torn in [false, true] {
            if torn && kept % 5 != 0 {
                continue;
            }
            let case = scratch.path().join(format!("{kept}-{torn}"));
            let (runs, workspace) = (case.join("runs"), case.join("workspace"));
            let run_dir = runs.join(&original.result.run_id);
            copy_dir(&original.run_dir.join("observations"), &run_dir.join("observations"));
            copy_dir(&original.run_dir.join("inputs"), &run_dir.join("inputs"));
            let mut text: String = lines[..kept].iter().map(|line| format!("{line}\n")).collect();
            if torn {
                text.push_str(&lines[kept][..lines[kept].len() / 2]);
            }
            std::fs::write(run_dir.join("events.jsonl"), text)?;
            // The workspace as the killed run left it: the scripts recorded as executed ran.
            // An `action_executed` without its observation is redone, so it is not counted.
            let prefix: Vec<Value> =
                lines[..kept].iter().map(|line| serde_json::from_str(line).unwrap()).collect();
            let mut logged = String::new();
            for (index, event) in prefix.iter().enumerate() {
                if event["type"] == "action_executed"
                    && event["data"]["action"]["args"]["script"] == "scripts/log.sh"
                    && index + 1 < prefix.len()
                {
                    logged.push_str(&format!(
                        "{}\n",
                        event["data"]["action"]["args"]["args"][0].as_str().unwrap()
                    ));
                }
            }
            std::fs::create_dir_all(&workspace)?;
            std::fs::write(workspace.join("log.txt"), &logged)?;
            // The model answers only what the record does not hold.
            let answered = prefix.iter().filter(|event| event["type"] == "model_response").count();
            let model = Arc::new(MockModel::new(replies().split_off(answered)));
            let agent = fixture
                .agent(&model, config.clone())
                .workspace(&workspace)
                .runs_dir(&runs)
                .build()?;
            let result =
                agent.resume(&run_dir).await.unwrap_or_else(|error| panic!("cut {kept}: {error}"));
            assert_eq!(result.outcome, Outcome::Completed, "cut {kept}");
            assert_eq!(model.remaining(), 0, "cut {kept}");
            assert_eq!(std::fs::read_to_string(workspace.join("log.txt"))?, full_log, "cut {kept}");
            let events = check_resumed(&run_dir, &result).await;
            original.assert_resumed(
                &result,
                &events,
                &wanted,
                &format!("cut {kept} (torn: {torn})"),
            );
        }
    }
    Ok(())
}

async fn only_an_unfinished_run_is_resumed() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![select("toolbox"), answer("Nothing to log.")]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    let agent =
        fixture.agent(&Arc::new(MockModel::new(Vec::new())), AgentConfig::default()).build()?;
    let error = agent.resume(&ran.run_dir).await.unwrap_err().to_string();
    assert!(error.contains("the run already finished; there is nothing to resume"), "{error}");
    // An empty record, and a folder that is not a run directory.
    std::fs::write(ran.run_dir.join("events.jsonl"), "")?;
    let error = agent.resume(&ran.run_dir).await.unwrap_err().to_string();
    assert!(error.contains("no events"), "{error}");
    let error = agent.resume(&fixture.workspace).await.unwrap_err().to_string();
    assert!(error.contains("not a run directory"), "{error}");
    // A record the re-run cannot reproduce (a model answer edited after the fact) is refused
    // with the event where they part, and nothing is appended to it.
    let model = Arc::new(MockModel::new(vec![select("toolbox"), tool("log", &["x"]), answer("x")]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    let text = std::fs::read_to_string(ran.run_dir.join("events.jsonl"))?;
    let mut lines: Vec<Value> =
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let last_turn_start = lines.iter().rposition(|line| line["type"] == "turn_started").unwrap();
    lines.truncate(last_turn_start);
    let response = lines.iter_mut().rfind(|line| line["type"] == "model_response").unwrap();
    response["data"]["response"]["tool_calls"][0]["arguments"]["args"] = json!(["y"]);
    let edited: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(ran.run_dir.join("events.jsonl"), &edited)?;
    let error = agent.resume(&ran.run_dir).await.unwrap_err().to_string();
    assert!(error.contains("differs from the record"), "{error}");
    assert_eq!(std::fs::read_to_string(ran.run_dir.join("events.jsonl"))?, edited);
    assert_eq!(fixture.workspace_text("log.txt"), "x\n", "the edited action did not run");
    Ok(())
}
