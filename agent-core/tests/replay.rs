//! Replay equality: recorded runs re-run from their own `events.jsonl` reproduce their events,
//! their compliance is scored, and tampered records are reported, never a panic.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{
    CancelAt, Fixture, Ran, ScriptedApprover, answer, call, document, script_rule, select, tool,
    toolbox,
};
use model_adapter::{MockModel, MockReply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use skills_agent_core::{
    AgentConfig, CancellationToken, DecideMode, Event, EventKind, Outcome, RECORD_FORMAT,
    ReplayReport, compliance, read_events, replay_check, turns,
};
use tools_runtime::{ApprovalMode, Decision, RuleSet};

fn main() -> std::process::ExitCode {
    common::main(tests![
        a_recorded_run_replays_to_the_same_events,
        runs_in_json_mode_and_runs_that_stopped_early_replay_too,
        a_tampered_record_is_reported,
        a_record_of_another_format_is_named_not_continued,
        compliance_scores_sequence_budgets_and_policy_hits,
    ])
}

/// Replays `ran` and checks that it reproduced every recorded event but the streamed deltas.
async fn replays_exactly(ran: &Ran) -> ReplayReport {
    let report = replay_check(&ran.run_dir).await.unwrap();
    assert_eq!(report.divergence, None, "{}", ran.run_dir.display());
    assert!(report.reproduced());
    let compared =
        ran.events.iter().filter(|event| event.kind != EventKind::AssistantDelta).count();
    assert_eq!(report.events_compared, compared);
    assert_eq!(report.run_id, ran.result.run_id);
    report
}

/// A run with every kind of step: a plan, a refusal, a failure, a policy denial, an approval,
/// a stored large output, compactions and a recall, and a final answer.
async fn record_a_busy_run(fixture: &Fixture) -> Ran {
    fixture.script("toolbox", "scripts/deny.sh", "echo should not run");
    let mut runtime = fixture.runtime();
    runtime.policy.approval_mode = ApprovalMode::AskForRisky;
    runtime.policy.rules = RuleSet {
        rules: vec![
            script_rule(fixture, "toolbox", "scripts/deny.sh", Decision::Forbidden),
            script_rule(fixture, "toolbox", "scripts/log.sh", Decision::Prompt),
        ],
        default: Decision::Allow,
    };
    let mut steps = vec![
        call(
            "select_skills",
            json!({"names": ["toolbox"], "plan": {"goal": "exercise the runtime", "steps": [
                {"id": "s1", "title": "Try the scripts", "status": "in_progress"},
            ]}}),
        ),
        call("load_resource", json!({"skill": "notes", "path": "reference.md"})),
        tool("fail", &["x"]),
        tool("deny", &[]),
        tool("log", &["approved"]),
        tool("print", &["60", "big"]),
        tool("print", &["20", "small"]),
        tool("print", &["20", "more"]),
    ]
    .into_iter();
    let mut recalled = false;
    let model = common::FnModel::new(move |request| {
        let recallable = common::recallable(request);
        if !recalled && recallable.len() >= 2 {
            recalled = true;
            return call("recall_observation", json!({"id": recallable[1]}));
        }
        steps.next().unwrap_or_else(|| answer("Tried every script; one was denied."))
    });
    let mut config = AgentConfig::default();
    config.budgets.max_context_chars = 6_000;
    config.context.compact_at = 0.6;
    config.context.keep_recent_observations = 2;
    config.context.inline_observation_chars = 600;
    let builder = fixture
        .agent_with(model, config)
        .runtime(runtime)
        .approver(ScriptedApprover::new(vec![true]));
    fixture.run(builder, "Exercise the toolbox").await.unwrap()
}

async fn a_recorded_run_replays_to_the_same_events() -> anyhow::Result<()> {
    let fixture = toolbox();
    let ran = record_a_busy_run(&fixture).await;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    for kind in [
        EventKind::PlanCreated,
        EventKind::ApprovalRequired,
        EventKind::ApprovalGranted,
        EventKind::Compaction,
        EventKind::AssistantDelta,
    ] {
        assert!(!ran.data(kind).is_empty(), "the run has {}", kind.as_str());
    }
    assert!(ran.data(EventKind::ObservationRecorded).iter().any(|data| !data["stored"].is_null()));
    let statuses = ran.statuses();
    for status in ["refused", "failed", "denied"] {
        assert!(statuses.contains(&status.to_owned()), "{statuses:?}");
    }
    assert!(
        ran.data(EventKind::ActionExecuted)
            .iter()
            .any(|data| data["action"]["type"] == "recall_observation")
    );
    // The replay needs the events and the stored observations only: nothing else is read, and
    // nothing is written.
    std::fs::remove_file(ran.run_dir.join("state.json"))?;
    std::fs::remove_file(ran.run_dir.join("final.md"))?;
    let before = std::fs::read(ran.run_dir.join("events.jsonl"))?;
    let report = replays_exactly(&ran).await;
    assert_eq!(std::fs::read(ran.run_dir.join("events.jsonl"))?, before);
    assert_eq!(
        common::files_under(&ran.run_dir)
            .iter()
            .filter(|path| !path.starts_with(ran.run_dir.join("observations")))
            .count(),
        2,
        "events.jsonl and inputs/request.txt"
    );
    // The turn sequence, rebuilt from the events.
    assert_eq!(report.turns, turns(&ran.events));
    let steps: Vec<String> =
        report.turns.iter().map(|turn| turn.steps.join("; ")).collect::<Vec<_>>()[..6].to_vec();
    assert_eq!(
        steps,
        [
            "select_skills toolbox → ok",
            "load_resource notes/reference.md → refused",
            "run_script toolbox/scripts/fail.sh x → failed",
            "run_script toolbox/scripts/deny.sh → denied",
            // The context is compacted after the denied run (format 7 keeps the turn notes):
            // the model recalls an observation at once.
            "recall_observation obs-2 → ok",
            "run_script toolbox/scripts/log.sh approved → ok",
        ]
    );
    let last = report.turns.last().unwrap();
    assert_eq!((last.turn, last.model_calls), (ran.result.turns, 1));
    assert_eq!(last.steps, ["final_answer → ok"]);
    // Compliance of a clean run: every check passes; the refusal and the denial are counted.
    assert_eq!(report.compliance.score, 1.0);
    assert!(report.compliance.sequence_violations.is_empty());
    assert!(report.compliance.budget_overruns.is_empty());
    assert!(report.compliance.final_text_present);
    assert_eq!(
        report.compliance.policy_hits,
        [("denied".to_owned(), 1), ("refused".to_owned(), 1)].into_iter().collect()
    );
    Ok(())
}

async fn runs_in_json_mode_and_runs_that_stopped_early_replay_too() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut recorded = Vec::new();

    // JSON mode, with an invalid answer and a streamed final answer.
    let json_mode = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
    let model = Arc::new(MockModel::new(vec![
        document("select_skills", json!({"names": ["toolbox"]}), json!({"thought": "logs"})),
        MockReply::text("not a document"),
        document(
            "run_script",
            json!({"skill": "toolbox", "script": "scripts/log.sh", "args": ["a"]}),
            json!({}),
        ),
        document("final_answer", json!({"content": "Logged a, as asked."}), json!({})),
    ]));
    recorded.push(fixture.run(fixture.agent(&model, json_mode), "Log a").await?);

    // A stream that breaks after the action's name: `action_planned` came, then the error.
    let broken = MockReply::Deltas {
        deltas: vec![model_adapter::Delta::ToolCallStart {
            index: 0,
            id: "call_1".to_owned(),
            name: "select_skills".to_owned(),
        }],
    };
    let model = Arc::new(MockModel::new(vec![broken, answer("Nothing to log.")]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Log c").await?;
    let kinds: Vec<EventKind> = ran.events.iter().map(|event| event.kind).collect();
    let planned = kinds.iter().position(|kind| *kind == EventKind::ActionPlanned).unwrap();
    assert_eq!(kinds[planned + 1], EventKind::ModelResponse);
    assert!(ran.events[planned + 1].data.get("error").is_some(), "the stream broke");
    recorded.push(ran);

    // The turn limit, with a degraded answer that fails: the deterministic text.
    let mut config = AgentConfig::default();
    config.budgets.max_turns = 2;
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["b"]),
        MockReply::error("overloaded", true),
    ]));
    recorded.push(fixture.run(fixture.agent(&model, config), "Log b").await?);

    // Stuck on one failing action.
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("fail", &["y"]),
        tool("fail", &["y"]),
        tool("fail", &["y"]),
        MockReply::text("y cannot be handled."),
    ]));
    recorded.push(fixture.run(fixture.agent(&model, AgentConfig::default()), "Handle y").await?);

    // The clock: the replay stops where the original's time ran out, not where its own does.
    let mut config = AgentConfig::default();
    // Far above two turn heads on a loaded machine, far below the script's sleep.
    config.budgets.max_duration_ms = Some(4000);
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("sleep", &["8"]),
        MockReply::text("Out of time."),
    ]));
    recorded.push(fixture.run(fixture.agent(&model, config), "Wait").await?);

    // Cancelled between two turns, and cancelled while a script ran.
    let between_turns: fn(&Event) -> bool =
        |event| event.kind == EventKind::TurnFinished && event.turn == 1;
    let during_script: fn(&Event) -> bool = |event| {
        event.kind == EventKind::ActionValidated
            && event.data["valid"] == true
            && event.data["action"]["type"] == "run_script"
    };
    for when in [between_turns, during_script] {
        let token = CancellationToken::new();
        let model = Arc::new(MockModel::new(vec![select("toolbox"), tool("sleep", &["30"])]));
        let builder = fixture
            .agent(&model, AgentConfig::default())
            .cancellation(token.clone())
            .sink(Arc::new(CancelAt { token, when }));
        recorded.push(fixture.run(builder, "Sleep").await?);
    }

    let outcomes: Vec<Outcome> = recorded.iter().map(|ran| ran.result.outcome).collect();
    assert_eq!(
        outcomes,
        [
            Outcome::Completed,
            Outcome::Completed,
            Outcome::MaxTurns,
            Outcome::Stuck,
            Outcome::MaxDuration,
            Outcome::Cancelled,
            Outcome::Cancelled
        ]
    );
    assert_eq!(recorded[5].result.turns, 1);
    assert_eq!(recorded[6].result.turns, 2);
    assert_eq!(recorded[6].result.script_runs, 1);
    assert!(recorded[6].data(EventKind::ActionExecuted).len() == 1, "the script never finished");
    for ran in &recorded {
        replays_exactly(ran).await;
    }
    Ok(())
}

/// A change to the lines of an `events.jsonl`.
type Edit = Box<dyn FnOnce(&mut Vec<Value>)>;

/// A copy of `run_dir` (with its observations) whose `events.jsonl` is `edit`ed line by line.
fn tampered(
    run_dir: &Path,
    copies: &Path,
    name: &str,
    edit: impl FnOnce(&mut Vec<Value>),
) -> PathBuf {
    let copy = copies.join(name);
    std::fs::create_dir_all(copy.join("observations")).unwrap();
    for file in common::files_under(&run_dir.join("observations")) {
        std::fs::copy(&file, copy.join("observations").join(file.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let mut lines: Vec<Value> =
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    edit(&mut lines);
    let mut out = String::new();
    for line in &lines {
        out.push_str(&line.to_string());
        out.push('\n');
    }
    std::fs::write(copy.join("events.jsonl"), out).unwrap();
    copy
}

/// The position of the `nth` event of `kind` in the lines.
fn position(lines: &[Value], kind: &str, nth: usize) -> usize {
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line["type"] == kind)
        .nth(nth)
        .map(|(index, _)| index)
        .unwrap()
}

async fn a_tampered_record_is_reported() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("print", &["80", "stored"]),
        answer("Logged and printed."),
    ]));
    let mut config = AgentConfig::default();
    config.context.inline_observation_chars = 600;
    let ran = fixture.run(fixture.agent(&model, config), "Log and print").await?;
    replays_exactly(&ran).await;
    let copies = tempfile::tempdir()?;
    let run_dir = &ran.run_dir;

    // Whatever was changed, the replay departs from the record at a named event.
    let diverges = |name: &str, edit: Edit| {
        let copy = tampered(run_dir, copies.path(), name, edit);
        async move { replay_check(&copy).await.unwrap().divergence.unwrap() }
    };
    // The model's final answer, changed.
    let divergence = diverges(
        "answer",
        Box::new(|lines| {
            let at = position(lines, "model_response", 3);
            lines[at]["data"]["response"]["tool_calls"][0]["arguments"]["content"] =
                json!("Something else.");
        }),
    )
    .await;
    assert_eq!(divergence.message, "the events differ");
    assert_eq!(divergence.recorded.unwrap()["type"], "action_validated");
    // An observation's text, changed: the next request is not the recorded one.
    let divergence = diverges(
        "observation",
        Box::new(|lines| {
            let at = position(lines, "observation_recorded", 1);
            lines[at]["data"]["content"] = json!("exit code 0\nstdout:\nlogged two");
        }),
    )
    .await;
    let (recorded, replayed) = (divergence.recorded.unwrap(), divergence.replayed.unwrap());
    assert_eq!(
        (&recorded["type"], &replayed["type"]),
        (&json!("model_request"), &json!("model_request"))
    );
    assert_ne!(recorded["data"]["request_sha256"], replayed["data"]["request_sha256"]);
    // A script's status, changed.
    let divergence = diverges(
        "status",
        Box::new(|lines| {
            let at = position(lines, "action_executed", 1);
            lines[at]["data"]["status"] = json!("failed");
        }),
    )
    .await;
    assert_eq!(divergence.recorded.unwrap()["type"], "observation_recorded");
    // An event left out.
    let divergence = diverges(
        "missing",
        Box::new(|lines| {
            let at = position(lines, "action_validated", 1);
            lines.remove(at);
        }),
    )
    .await;
    assert_eq!(divergence.replayed.unwrap()["type"], "action_validated");
    // The recorded settings, changed: the replay runs under them and stops early.
    let divergence = diverges(
        "settings",
        Box::new(|lines| lines[0]["data"]["config"]["budgets"]["max_turns"] = json!(2)),
    )
    .await;
    assert_eq!(divergence.recorded.unwrap()["type"], "turn_started");

    // Records that cannot be read are errors that say why.
    let error_of = |name: &str, edit: Edit| {
        let copy = tampered(run_dir, copies.path(), name, edit);
        async move { replay_check(&copy).await.unwrap_err().to_string() }
    };
    let error = error_of("order", Box::new(|lines| lines.swap(3, 4))).await;
    assert!(error.contains("line 5: seq 4 does not follow 5"), "{error}");
    let error = error_of(
        "unfinished",
        Box::new(|lines| {
            lines.pop();
        }),
    )
    .await;
    assert!(error.contains("the run has no run_finished event"), "{error}");
    let copy = tampered(run_dir, copies.path(), "not-json", |_| {});
    let mut text = std::fs::read_to_string(copy.join("events.jsonl"))?;
    text.insert_str(text.find('\n').unwrap() + 1, "{not json}\n");
    std::fs::write(copy.join("events.jsonl"), text)?;
    let error = replay_check(&copy).await.unwrap_err().to_string();
    assert!(error.contains("line 2: not an event"), "{error}");
    // A stored observation that no longer matches its SHA-256.
    let copy = tampered(run_dir, copies.path(), "stored", |_| {});
    let stored = common::files_under(&copy.join("observations"));
    assert_eq!(stored.len(), 1);
    std::fs::write(&stored[0], "edited")?;
    let error = replay_check(&copy).await.unwrap_err().to_string();
    assert!(error.contains("does not match its SHA-256"), "{error}");
    // Not a run directory at all.
    let error = replay_check(copies.path()).await.unwrap_err().to_string();
    assert!(error.contains("not a run directory"), "{error}");
    Ok(())
}

/// A record names the format it was written in; one of another format (here: from before
/// formats were numbered) is still scored, a divergence says why it was to be expected, and
/// send and resume refuse to continue it instead of failing half-way.
async fn a_record_of_another_format_is_named_not_continued() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![select("toolbox"), answer("Done.")]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Look").await?;
    let started = &ran.events[0];
    assert_eq!(started.data["record_format"], json!(RECORD_FORMAT));
    assert!(started.data["written_by"].as_str().unwrap().starts_with("agent-core "));
    assert_eq!(replays_exactly(&ran).await.record_format, RECORD_FORMAT);

    let copies = tempfile::tempdir()?;
    // The same record labelled as one from before formats were numbered: it re-runs as that
    // format did (no kept turn notes, so the context differs from the first turn's end on),
    // and the difference is reported with the reason it was to be expected.
    let old = tampered(&ran.run_dir, copies.path(), "old", |lines| {
        let data = lines[0]["data"].as_object_mut().unwrap();
        data.remove("record_format");
        data.remove("written_by");
    });
    let report = replay_check(&old).await?;
    assert_eq!(report.record_format, 0);
    let message = report.divergence.unwrap().message;
    assert!(message.starts_with("the events differ (the record was written in record format 0 by an earlier build; this build (agent-core "), "{message}");
    assert!(message.ends_with("replay it with that build)"), "{message}");
    // Continuing it is refused up front, with what to do instead; the record is left as it was.
    let before = std::fs::read(old.join("events.jsonl"))?;
    let agent = fixture.agent(&model, AgentConfig::default()).build()?;
    let error = agent.send(&old, "Next task").await.unwrap_err().to_string();
    assert!(error.contains("record format 0 by an earlier build"), "{error}");
    assert!(error.contains("start a new run"), "{error}");
    let error = agent.resume(&old).await.unwrap_err().to_string();
    assert!(error.contains("record format 0"), "{error}");
    assert_eq!(std::fs::read(old.join("events.jsonl"))?, before);
    Ok(())
}

async fn compliance_scores_sequence_budgets_and_policy_hits() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        answer("Logged one."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Log one").await?;
    let clean = compliance(&ran.events);
    assert_eq!(clean.score, 1.0);
    let budgets: Vec<(String, u64, u64)> = clean
        .budgets
        .iter()
        .map(|budget| (budget.name.clone(), budget.used, budget.limit))
        .collect();
    assert_eq!(
        budgets,
        [
            ("turns".to_owned(), 3, 12),
            ("tool_calls".to_owned(), 2, 30),
            ("script_runs".to_owned(), 1, 6)
        ]
    );
    assert!(clean.policy_hits.is_empty());

    // The same record, edited: a script of a skill never selected, a budget overrun, an empty
    // final text and an event after the end. Each check fails; nothing panics.
    let mut events: Vec<Event> = read_events(&ran.run_dir.join("events.jsonl"))?;
    let mut rogue =
        events.iter().find(|event| event.kind == EventKind::ActionExecuted).unwrap().clone();
    rogue.data["action"] =
        json!({"type": "run_script", "args": {"skill": "notes", "script": "x.sh", "args": []}});
    rogue.seq = 0;
    events.insert(1, rogue);
    let finished = events.iter_mut().find(|event| event.kind == EventKind::RunFinished).unwrap();
    finished.data["counters"]["turns"] = json!(13);
    finished.data["final_text"] = json!("  ");
    let mut late = finished.clone();
    late.kind = EventKind::TurnStarted;
    late.seq += 1;
    events.push(late);
    let broken = compliance(&events);
    assert_eq!(broken.score, 0.0);
    assert_eq!(broken.sequence_violations.len(), 2, "{:?}", broken.sequence_violations);
    assert_eq!(
        broken.sequence_violations[0],
        "seq 0: run_script on skill `notes`, which was not selected before"
    );
    assert!(broken.sequence_violations[1].contains("turn_started after run_finished"));
    assert_eq!(broken.budget_overruns, ["turns: 13 used, limit 12"]);
    assert!(!broken.final_text_present);

    // A run that stops at its limit is within it; the approver's denial is a policy hit.
    let mut runtime = fixture.runtime();
    runtime.policy.approval_mode = ApprovalMode::AskForRisky;
    runtime.policy.rules = RuleSet {
        rules: vec![script_rule(&fixture, "toolbox", "scripts/log.sh", Decision::Prompt)],
        default: Decision::Allow,
    };
    let mut config = AgentConfig::default();
    config.budgets.max_turns = 2;
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["two"]),
        MockReply::text("The approver said no."),
    ]));
    let builder =
        fixture.agent(&model, config).runtime(runtime).approver(ScriptedApprover::new(vec![false]));
    let ran = fixture.run(builder, "Log two").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    let limited = compliance(&ran.events);
    assert_eq!(limited.score, 1.0);
    assert_eq!(limited.budgets[0].used, limited.budgets[0].limit);
    assert_eq!(
        limited.policy_hits,
        [("approval_denied".to_owned(), 1), ("denied".to_owned(), 1)].into_iter().collect()
    );
    replays_exactly(&ran).await;
    Ok(())
}
