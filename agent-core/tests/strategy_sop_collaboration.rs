//! The `safe` strategy (seed 004) on scripted models over real skills and real scripts: a
//! simple task planned without SOP lookup, a complex one planned by the SOP the model chose
//! (loaded through `select_skills`), two agents collaborating over the bus (ids, agent tags,
//! `pending_collaboration_id` in `state.json` while the requester waits), a peer that never
//! answers (the timeout, reproduced by replay without a clock), a late answer dropped,
//! planning failures (recovered, then the retry cap), a failing function step, JSON mode,
//! resume from any point, and the peers' memory across the tasks of a session. Every run is
//! replayed exactly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use common::{Fixture, call, purposes, request_text, schema, text, toolbox};
use model_adapter::{
    ChatRequest, DeltaStream, FinishReason, MockModel, MockReply, ModelProvider, Response,
    ResponseFormat, ToolChoice,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use skills_agent_core::{
    AgentConfig, DecideMode, Event, EventKind, Outcome, PeerAgent, STRATEGIES, SafeConfig,
    replay_check,
};

fn main() -> ExitCode {
    common::main(tests![
        safe_is_a_known_strategy_and_checks_its_peers,
        a_simple_task_is_planned_without_sop_lookup,
        a_complex_task_is_planned_by_the_sop_the_model_chose,
        two_agents_collaborate_over_the_bus,
        a_peer_that_never_answers_times_out_and_the_run_still_answers,
        a_late_answer_after_a_timeout_is_dropped_not_applied,
        a_peer_whose_model_fails_responds_with_an_error,
        a_planning_failure_is_observed_counted_and_planned_again,
        repeated_planning_failures_end_the_run_stuck_with_a_text,
        a_failing_function_step_stops_the_plan_and_the_report_sees_it,
        json_mode_asks_each_phase_for_one_document_under_its_schema,
        json_mode_drops_repeated_steps_and_keeps_a_failed_plan_open,
        a_collaboration_run_resumes_from_any_point_of_its_record,
        the_peers_remember_across_the_tasks_of_a_session,
    ])
}

const TASK: &str = "Log one with the toolbox";
const SOP: &str = "logging-workflow";
const SOP_BODY: &str = "Step 1: select the toolbox. Step 2: log the word with scripts/log.sh.";

fn config() -> AgentConfig {
    AgentConfig { strategy: "safe".to_owned(), ..AgentConfig::default() }
}

fn with_peers(peers: &[(&str, &str)], timeout_ms: u64) -> AgentConfig {
    AgentConfig {
        safe: SafeConfig {
            peers: peers
                .iter()
                .map(|(id, role)| PeerAgent { id: (*id).to_owned(), role: (*role).to_owned() })
                .collect(),
            collaboration_timeout_ms: timeout_ms,
            ..SafeConfig::default()
        },
        ..config()
    }
}

/// The toolbox skills plus a workflow skill (an SOP) about logging with the toolbox and an
/// unrelated one.
fn fixture() -> Fixture {
    let fixture = toolbox();
    fixture.skill(SOP, "Workflow for logging a word with the toolbox.", "", SOP_BODY);
    fixture.skill("release-checklist", "Checklist for shipping a release.", "", "Ship it.");
    fixture
}

fn judge(complexity: &str) -> MockReply {
    call("judge_complexity", json!({"complexity": complexity, "reasoning": "judged"}))
}

fn choose(sop: &str) -> MockReply {
    call("choose_sop", json!({"reasoning": "it fits", "sop": sop}))
}

fn plan(steps: &[(&str, Value)]) -> MockReply {
    let steps: Vec<Value> =
        steps.iter().map(|(tool, args)| json!({"tool": tool, "args": args})).collect();
    call("make_plan", json!({"reasoning": "the next steps", "steps": steps}))
}

fn report(answer: &str, completed: bool) -> MockReply {
    call("report", json!({"answer": answer, "task_completed": completed}))
}

fn select_step(name: &str) -> (&'static str, Value) {
    ("select_skills", json!({"names": [name]}))
}

fn script_step(script: &str, args: &[&str]) -> (&'static str, Value) {
    (
        "run_script",
        json!({"skill": "toolbox", "script": format!("scripts/{script}.sh"), "args": args}),
    )
}

fn ask_step(agent: &str, request: &str) -> (&'static str, Value) {
    ("request_collaboration", json!({"agent": agent, "request": request}))
}

/// `(kind, data)` of the collaboration events, in order.
fn collaboration(events: &[Event]) -> Vec<(&'static str, Value)> {
    events
        .iter()
        .filter(|event| event.kind.as_str().starts_with("collaboration_"))
        .map(|event| (event.kind.as_str(), event.data.clone()))
        .collect()
}

/// The statuses of the last plan event's steps.
fn step_statuses(events: &[Event]) -> Vec<String> {
    let last = events
        .iter()
        .rev()
        .find(|event| matches!(event.kind, EventKind::PlanCreated | EventKind::PlanUpdated))
        .unwrap();
    last.data["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| text(&step["status"]))
        .collect()
}

async fn assert_replayed(run_dir: &Path, events: usize) -> anyhow::Result<()> {
    let report = replay_check(run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    assert_eq!(report.events_compared, events);
    assert!(report.compliance.final_text_present);
    assert!(report.compliance.sequence_violations.is_empty(), "{:?}", report.compliance);
    Ok(())
}

/// A scripted model for a team: answers come from `inner` in order, except that a peer's
/// request (its system prompt starts `You are agent`) reads what `state.json` says is pending
/// first, and the first `hang` peer requests never get an answer.
#[derive(Debug)]
struct Team {
    inner: Arc<MockModel>,
    runs: PathBuf,
    hang: Mutex<u32>,
    pending_seen: Mutex<Vec<Value>>,
}

impl Team {
    fn new(replies: Vec<MockReply>, fixture: &Fixture, hang: u32) -> Arc<Team> {
        Arc::new(Team {
            inner: Arc::new(MockModel::new(replies)),
            runs: fixture.runs.clone(),
            hang: Mutex::new(hang),
            pending_seen: Mutex::new(Vec::new()),
        })
    }

    async fn before(&self, request: &ChatRequest) {
        if !common::message_text(&request.messages[0]).starts_with("You are agent `") {
            return;
        }
        let run_dir = std::fs::read_dir(&self.runs).unwrap().next().unwrap().unwrap().path();
        let state: Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("state.json")).unwrap()).unwrap();
        let pending = state["strategy_state"]["pending_collaboration_id"].clone();
        self.pending_seen.lock().unwrap().push(pending);
        let hang = {
            let mut hang = self.hang.lock().unwrap();
            let now = *hang > 0;
            *hang = hang.saturating_sub(1);
            now
        };
        if hang {
            std::future::pending::<()>().await;
        }
    }
}

#[async_trait::async_trait]
impl ModelProvider for Team {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<Response> {
        self.before(request).await;
        self.inner.chat(request).await
    }

    async fn stream(&self, request: &ChatRequest) -> model_adapter::Result<DeltaStream> {
        self.before(request).await;
        self.inner.stream(request).await
    }
}

async fn safe_is_a_known_strategy_and_checks_its_peers() -> anyhow::Result<()> {
    assert!(STRATEGIES.contains(&"safe"), "{STRATEGIES:?}");
    let fixture = fixture();
    let model = Arc::new(MockModel::new(Vec::new()));
    for (peers, complaint) in [
        (vec![("main", "the requester")], "not a peer id"),
        (vec![("Reviewer", "reviews")], "not a peer id"),
        (vec![("reviewer", " ")], "not a peer id"),
        (vec![("reviewer", "reviews"), ("reviewer", "again")], "named twice"),
    ] {
        let error =
            fixture.agent(&model, with_peers(&peers, 1_000)).build().unwrap_err().to_string();
        assert!(error.contains(complaint), "{error}");
    }
    let error = fixture.agent(&model, with_peers(&[], 0)).build().unwrap_err().to_string();
    assert!(error.contains("collaboration_timeout_ms"), "{error}");
    Ok(())
}

async fn a_simple_task_is_planned_without_sop_lookup() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("simple"),
        plan(&[select_step("toolbox"), script_step("log", &["one"])]),
        report("Logged one.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one.");
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    assert_eq!(purposes(&ran.events), ["judge_complexity", "make_plan", "report"]);
    assert_eq!(
        (ran.result.turns, ran.result.model_calls, ran.result.tool_calls, ran.result.script_runs),
        (2, 3, 2, 1)
    );
    assert_eq!(ran.statuses(), ["ok", "ok"]);
    // Each phase offers exactly its own tool, named in tool_choice.
    let forced: Vec<(Vec<String>, ToolChoice)> = model
        .requests()
        .iter()
        .map(|request| (common::tool_names(request), request.tool_choice.clone()))
        .collect();
    let named = |tool: &str| (vec![tool.to_owned()], ToolChoice::Named(tool.to_owned()));
    assert_eq!(forced, [named("judge_complexity"), named("make_plan"), named("report")]);
    // The plan is recorded with its steps' statuses, by the main agent.
    let created = ran.data(EventKind::PlanCreated);
    assert_eq!(created.len(), 1);
    assert_eq!(
        (created[0]["agent"].clone(), created[0]["cycle"].clone()),
        (json!("main"), json!(1))
    );
    assert_eq!(created[0]["complexity"], "simple");
    assert!(created[0]["sop"].is_null());
    let updates: Vec<(String, String)> = ran
        .data(EventKind::PlanUpdated)
        .iter()
        .map(|data| (text(&data["step"]), text(&data["status"])))
        .collect();
    assert_eq!(
        updates,
        [
            ("c1s1".to_owned(), "in_progress".to_owned()),
            ("c1s1".to_owned(), "done".to_owned()),
            ("c1s2".to_owned(), "in_progress".to_owned()),
            ("c1s2".to_owned(), "done".to_owned()),
        ]
    );
    let phases: Vec<Value> =
        ran.data(EventKind::TurnStarted).iter().map(|data| data["safe"].clone()).collect();
    assert_eq!(
        phases,
        [
            json!({"agent": "main", "phase": "judge"}),
            json!({"agent": "main", "phase": "plan", "cycle": 1}),
        ]
    );
    let state = ran.state();
    let safe = &state["strategy_state"];
    assert_eq!(safe["strategy"], "safe");
    assert_eq!(safe["complexity"], "simple");
    assert_eq!(safe["complexity_by_model"], true);
    assert_eq!(safe["sop_candidates"], json!([]));
    assert_eq!(safe["phase"], "done");
    assert_eq!(safe["internal_plan"][1]["step"]["function"]["type"], "run_script");
    assert_eq!(safe["internal_plan"][1]["status"], "done");
    assert!(safe["current_step"].is_null());
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn a_complex_task_is_planned_by_the_sop_the_model_chose() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("complex"),
        choose(SOP),
        plan(&[select_step("toolbox"), script_step("log", &["one"])]),
        report("Logged one by the workflow.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one by the workflow.");
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    assert_eq!(purposes(&ran.events), ["judge_complexity", "choose_sop", "make_plan", "report"]);
    assert_eq!((ran.result.turns, ran.result.tool_calls), (3, 3));
    // Only the workflow skill that matches the task is a candidate (not the unrelated
    // checklist, not the plain skills).
    let requests = model.requests();
    let choose_schema = &requests[1].tools[0].parameters;
    assert_eq!(choose_schema["properties"]["sop"]["enum"], json!([SOP, "none"]));
    assert!(request_text(&requests[1]).contains("Workflow for logging a word with the toolbox."));
    // The SOP is loaded by a real select_skills, whose observation answers the choice.
    let executed = ran.data(EventKind::ActionExecuted);
    assert_eq!(executed[0]["action"], json!({"type": "select_skills", "args": {"names": [SOP]}}));
    let observations = ran.observations();
    assert_eq!(observations[0].0, "ok");
    assert!(observations[0].1.contains(SOP_BODY), "{}", observations[0].1);
    // Planning sees the SOP's body and is told to follow it.
    let planning = request_text(&requests[2]);
    assert!(planning.contains(SOP_BODY));
    assert!(planning.contains(&format!("SOP: `{SOP}`")));
    let created = ran.data(EventKind::PlanCreated);
    assert_eq!(
        (created[0]["complexity"].clone(), created[0]["sop"].clone()),
        (json!("complex"), json!(SOP))
    );
    let state = ran.state();
    assert_eq!(state["strategy_state"]["sop"], SOP);
    assert_eq!(state["strategy_state"]["sop_candidates"], json!([SOP]));
    assert_replayed(&ran.run_dir, ran.events.len()).await?;

    // `none` loads nothing and plans without an SOP.
    let fixture = self::fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("complex"),
        choose("none"),
        plan(&[select_step("toolbox")]),
        plan(&[script_step("log", &["one"])]),
        report("Logged one.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    // A plan that only selected skills goes on to the next plan without a report.
    assert_eq!(
        purposes(&ran.events),
        ["judge_complexity", "choose_sop", "make_plan", "make_plan", "report"]
    );
    assert!(ran.state()["strategy_state"]["sop"].is_null());
    assert!(request_text(&model.requests()[2]).contains("No SOP."));
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

const REVIEWER: (&str, &str) = ("reviewer", "Reviews logs and says whether they are complete.");

async fn two_agents_collaborate_over_the_bus() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Team::new(
        vec![
            judge("simple"),
            plan(&[
                select_step("toolbox"),
                script_step("log", &["one"]),
                ask_step("reviewer", "Is a log of one line complete?"),
            ]),
            MockReply::text("Yes: one line is complete."),
            report("Logged one; the reviewer says the log is complete.", true),
        ],
        &fixture,
        0,
    );
    let config = with_peers(&[REVIEWER], 60_000);
    let ran = fixture.run(fixture.agent_with(model.clone(), config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one; the reviewer says the log is complete.");
    assert_eq!(
        purposes(&ran.events),
        ["judge_complexity", "make_plan", "collaborate:reviewer", "report"]
    );
    // The request is counted as a tool call; the peer's answer as a model call, not a turn.
    assert_eq!((ran.result.turns, ran.result.model_calls, ran.result.tool_calls), (2, 4, 3));
    assert_eq!(
        collaboration(&ran.events),
        [
            (
                "collaboration_requested",
                json!({"agent": "main", "id": "collab-1", "to": "reviewer",
                       "request": "Is a log of one line complete?", "timeout_ms": 60_000}),
            ),
            (
                "collaboration_received",
                json!({"agent": "reviewer", "id": "collab-1", "from": "main",
                       "request": "Is a log of one line complete?"}),
            ),
            (
                "collaboration_responded",
                json!({"agent": "reviewer", "id": "collab-1", "to": "main", "ok": true,
                       "response": "Yes: one line is complete."}),
            ),
        ]
    );
    // Request → the peer's own model call → response → the requester goes on.
    let requested = ran.first_seq(EventKind::CollaborationRequested);
    let responded = ran.first_seq(EventKind::CollaborationResponded);
    let peer_call = ran
        .events
        .iter()
        .find(|event| {
            event.kind == EventKind::ModelRequest && event.data["purpose"] == "collaborate:reviewer"
        })
        .unwrap()
        .seq;
    assert!(requested < peer_call && peer_call < responded);
    // The peer's model events carry its agent id; the main agent's carry none.
    for event in ran
        .events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ModelRequest | EventKind::ModelResponse))
    {
        let peer = event.data["purpose"] == "collaborate:reviewer";
        let tag = if peer { json!("reviewer") } else { Value::Null };
        assert_eq!(event.data.get("agent").cloned().unwrap_or(Value::Null), tag, "{event:?}");
    }
    let answered = ran
        .events
        .iter()
        .find(|event| {
            event.kind == EventKind::ObservationRecorded
                && text(&event.data["content"]).contains("Yes: one line is complete.")
        })
        .unwrap();
    assert!(answered.seq > responded);
    assert_eq!(answered.data["status"], "ok");
    assert!(text(&answered.data["content"]).starts_with("[collab-1] reviewer answered:"));
    // The peer has its own context: its role as system prompt, the request, no tools.
    let requests = model.inner.requests();
    let peer = &requests[2];
    assert_eq!(peer.messages.len(), 3);
    let system = common::message_text(&peer.messages[0]);
    assert!(system.starts_with("You are agent `reviewer`"), "{system}");
    assert!(system.contains(REVIEWER.1));
    assert!(!request_text(peer).contains("Skills catalog"));
    assert!(
        request_text(peer).contains("Request collab-1 from main:\nIs a log of one line complete?")
    );
    assert!(peer.tools.is_empty() && peer.response_format == ResponseFormat::Text);
    // The requester's report sees the answer.
    assert!(request_text(&requests[3]).contains("Yes: one line is complete."));
    // pending_collaboration_id was in state.json while the peer worked, and is cleared after.
    assert_eq!(*model.pending_seen.lock().unwrap(), [json!("collab-1")]);
    let state = ran.state();
    let safe = &state["strategy_state"];
    assert!(safe["pending_collaboration_id"].is_null());
    assert_eq!(
        safe["collaborations"],
        json!([{"id": "collab-1", "to": "reviewer", "request": "Is a log of one line complete?",
                "status": "answered"}])
    );
    assert_eq!(safe["peers"][0]["id"], "reviewer");
    assert_eq!(safe["peers"][0]["handled"], 1);
    assert_eq!(safe["peers"][0]["transcript"].as_array().unwrap().len(), 2);
    assert_eq!(safe["peers"][0]["queue"], json!([]));
    assert_eq!(step_statuses(&ran.events), ["done", "done", "done"]);
    let titles = &ran.data(EventKind::PlanCreated)[0]["plan"]["steps"];
    assert_eq!(titles[2]["title"], "ask reviewer: Is a log of one line complete?");
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

const SLOWPOKE: (&str, &str) = ("slowpoke", "Answers questions about logs, slowly.");

async fn a_peer_that_never_answers_times_out_and_the_run_still_answers() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Team::new(
        vec![
            judge("simple"),
            plan(&[ask_step("slowpoke", "How many lines should the log have?")]),
            report("The slowpoke did not answer in time; nothing was logged.", true),
        ],
        &fixture,
        u32::MAX,
    );
    let config = with_peers(&[SLOWPOKE], 200);
    let ran = fixture.run(fixture.agent_with(model.clone(), config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "The slowpoke did not answer in time; nothing was logged.");
    assert_eq!(
        purposes(&ran.events),
        ["judge_complexity", "make_plan", "collaborate:slowpoke", "report"]
    );
    let events = collaboration(&ran.events);
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(
        kinds,
        ["collaboration_requested", "collaboration_received", "collaboration_timed_out"]
    );
    assert_eq!(
        events[2].1,
        json!({"agent": "main", "id": "collab-1", "to": "slowpoke", "timeout_ms": 200})
    );
    // The cut call is recorded as failed: that is what replay reproduces the timeout from.
    let responses = ran.data(EventKind::ModelResponse);
    let cut = text(&responses[2]["error"]);
    assert!(cut.contains("timed out") && cut.contains("slowpoke"), "{cut}");
    let (status, content) = ran.observations().pop().unwrap();
    assert_eq!(status, "timeout");
    assert_eq!(content, "[collab-1] no answer from slowpoke within 200 ms: the request timed out");
    assert_eq!(step_statuses(&ran.events), ["skipped"]);
    assert!(request_text(&model.inner.requests()[2]).contains("the request timed out"));
    let state = ran.state();
    let safe = &state["strategy_state"];
    assert!(safe["pending_collaboration_id"].is_null());
    assert_eq!(safe["collaborations"][0]["status"], "timed_out");
    // The peer still holds the request it could not answer.
    assert_eq!(safe["peers"][0]["queue"][0]["id"], "collab-1");
    assert_eq!(safe["peers"][0]["queue"][0]["asked"], true);
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn a_late_answer_after_a_timeout_is_dropped_not_applied() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Team::new(
        vec![
            judge("simple"),
            plan(&[ask_step("slowpoke", "First question?")]),
            report("No answer yet.", false),
            plan(&[ask_step("slowpoke", "Second question?")]),
            MockReply::text("Answer to the first."),
            MockReply::text("Answer to the second."),
            report("The slowpoke answered the second question.", true),
        ],
        &fixture,
        1,
    );
    let config = with_peers(&[SLOWPOKE], 200);
    let ran = fixture.run(fixture.agent_with(model.clone(), config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(
        purposes(&ran.events),
        [
            "judge_complexity",
            "make_plan",
            "collaborate:slowpoke",
            "report",
            "make_plan",
            "collaborate:slowpoke",
            "collaborate:slowpoke",
            "report",
        ]
    );
    let events: Vec<(&str, String)> = collaboration(&ran.events)
        .into_iter()
        .map(|(kind, data)| (kind, text(&data["id"])))
        .collect();
    let expected = [
        ("collaboration_requested", "collab-1"),
        ("collaboration_received", "collab-1"),
        ("collaboration_timed_out", "collab-1"),
        ("collaboration_requested", "collab-2"),
        ("collaboration_received", "collab-2"),
        ("collaboration_responded", "collab-1"),
        ("collaboration_responded", "collab-2"),
        ("collaboration_dropped", "collab-1"),
    ];
    let expected: Vec<(&str, String)> =
        expected.iter().map(|(kind, id)| (*kind, (*id).to_owned())).collect();
    assert_eq!(events, expected);
    let dropped = ran.data(EventKind::CollaborationDropped);
    assert_eq!(
        *dropped[0],
        json!({"agent": "main", "id": "collab-1", "from": "slowpoke", "reason": "late",
               "response": "Answer to the first."})
    );
    // The late answer never reaches the requester; the awaited one does.
    let requests = model.inner.requests();
    let last = request_text(requests.last().unwrap());
    assert!(!last.contains("Answer to the first."));
    assert!(last.contains("[collab-2] slowpoke answered:\nAnswer to the second."));
    // The peer answered its oldest request first, in its own conversation.
    let peer_second = request_text(&requests[5]);
    assert!(
        peer_second.contains("Answer to the first.") && peer_second.contains("Second question?")
    );
    let state = ran.state();
    let statuses: Vec<String> = state["strategy_state"]["collaborations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|collaboration| text(&collaboration["status"]))
        .collect();
    assert_eq!(statuses, ["timed_out", "answered"]);
    assert_eq!(state["strategy_state"]["peers"][0]["queue"], json!([]));
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn a_peer_whose_model_fails_responds_with_an_error() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("simple"),
        plan(&[ask_step("reviewer", "Is the log complete?")]),
        MockReply::Error { message: "overloaded".to_owned(), retryable: false },
        report("The reviewer could not answer.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, with_peers(&[REVIEWER], 60_000)), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let responded = ran.data(EventKind::CollaborationResponded);
    assert_eq!(responded.len(), 1);
    assert_eq!(responded[0]["ok"], false);
    assert!(text(&responded[0]["response"]).contains("overloaded"));
    let (status, content) = ran.observations().pop().unwrap();
    assert_eq!(status, "failed");
    assert!(content.starts_with("[collab-1] reviewer could not answer: the model call failed"));
    assert!(ran.data(EventKind::CollaborationTimedOut).is_empty());
    let state = ran.state();
    assert_eq!(state["strategy_state"]["collaborations"][0]["status"], "failed");
    // The unanswered request leaves the peer's conversation; nothing stays queued.
    assert_eq!(state["strategy_state"]["peers"][0]["transcript"], json!([]));
    assert_eq!(state["strategy_state"]["peers"][0]["queue"], json!([]));
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn a_planning_failure_is_observed_counted_and_planned_again() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("simple"),
        plan(&[("rm_rf", json!({"path": "/"}))]),
        plan(&[select_step("toolbox"), script_step("log", &["one"])]),
        report("Logged one.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(purposes(&ran.events), ["judge_complexity", "make_plan", "make_plan", "report"]);
    let observations = ran.observations();
    assert_eq!(observations[0].0, "invalid_action");
    assert!(observations[0].1.contains("step 1: unknown action `rm_rf`"), "{}", observations[0].1);
    assert_eq!(ran.statuses(), ["invalid_action", "ok", "ok"]);
    // A rejected plan runs nothing and gets no report; the next turn plans again.
    assert_eq!((ran.result.turns, ran.result.tool_calls), (3, 2));
    assert_eq!(ran.state()["strategy_state"]["rejected_plans"], 1);
    assert_eq!(ran.data(EventKind::PlanCreated).len(), 1);
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn repeated_planning_failures_end_the_run_stuck_with_a_text() -> anyhow::Result<()> {
    let fixture = fixture();
    let nine: Vec<(&str, Value)> = (0..9).map(|_| select_step("toolbox")).collect();
    let model = Arc::new(MockModel::new(vec![
        judge("simple"),
        plan(&[]),
        plan(&nine),
        plan(&[ask_step("nobody", "Are you there?")]),
        MockReply::raw_tool_call("make_plan", "{\"steps\": [", FinishReason::ToolCalls),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    // A stuck run ends with the report from the record, without asking the model again.
    let text = &ran.result.final_text;
    for part in [
        "I could not finish the task: 4 invalid_action failures in a row (cap 3).",
        "- 4 answers of the model that were no valid action, the last: the call to `make_plan` \
         had unreadable arguments",
        "- the model's answers were not valid actions: try a larger model (--model) or a \
         simpler task",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert_eq!(
        purposes(&ran.events),
        ["judge_complexity", "make_plan", "make_plan", "make_plan", "make_plan"]
    );
    let messages: Vec<String> =
        ran.observations().into_iter().map(|(_, content)| content).collect();
    assert_eq!(ran.statuses(), ["invalid_action"; 4]);
    assert!(messages[0].contains("the plan has no steps"), "{}", messages[0]);
    assert!(messages[1].contains("the plan has 9 steps; at most 8"), "{}", messages[1]);
    assert!(
        messages[2].contains("`nobody` is not an agent to ask; agents: none"),
        "{}",
        messages[2]
    );
    assert!(messages[3].contains("unreadable arguments"), "{}", messages[3]);
    assert_eq!(ran.state()["strategy_state"]["rejected_plans"], 4);
    assert_eq!(ran.result.tool_calls, 0);
    assert_eq!(ran.finished()["degraded"], true);
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn a_failing_function_step_stops_the_plan_and_the_report_sees_it() -> anyhow::Result<()> {
    let fixture = fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("simple"),
        plan(&[select_step("toolbox"), script_step("fail", &["x"]), script_step("log", &["two"])]),
        report("The fail script could not handle x; nothing was logged.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.statuses(), ["ok", "failed"]);
    assert_eq!(fixture.workspace_text("log.txt"), "");
    assert_eq!(step_statuses(&ran.events), ["done", "skipped", "pending"]);
    assert!(request_text(&model.requests()[2]).contains("cannot handle x"));
    let state = ran.state();
    let statuses: Vec<String> = state["strategy_state"]["internal_plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| text(&step["status"]))
        .collect();
    assert_eq!(statuses, ["done", "skipped", "pending"]);
    assert_eq!(state["plan"]["steps"][2]["status"], "pending");
    assert_eq!((ran.result.tool_calls, ran.result.script_runs), (2, 1));
    assert_replayed(&ran.run_dir, ran.events.len()).await?;

    // A step the action space refuses when it runs (the toolbox has no files to load, which
    // the plan could not know before selecting it) fails the same way.
    let fixture = self::fixture();
    let model = Arc::new(MockModel::new(vec![
        judge("simple"),
        plan(&[
            select_step("toolbox"),
            ("load_resource", json!({"skill": "toolbox", "path": "missing.md"})),
        ]),
        report("There is no missing.md.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.statuses(), ["ok", "invalid_action"]);
    assert!(ran.observations()[1].1.starts_with("`load_resource` is not allowed now"));
    assert_eq!(step_statuses(&ran.events), ["done", "skipped"]);
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn json_mode_asks_each_phase_for_one_document_under_its_schema() -> anyhow::Result<()> {
    let fixture = fixture();
    let document = |value: Value| MockReply::text(&format!("```json\n{value}\n```"));
    let model = Arc::new(MockModel::new(vec![
        document(json!({"complexity": "complex", "reasoning": "a procedure"})),
        document(json!({"reasoning": "it fits", "sop": SOP})),
        document(json!({"reasoning": "load the toolbox", "steps": [
            {"args": {"names": ["toolbox"]}, "tool": "select_skills"}]})),
        document(json!({"reasoning": "log and check", "steps": [
            {"args": {"args": ["one"], "script": "scripts/log.sh", "skill": "toolbox"}, "tool": "run_script"},
            {"args": {"agent": "reviewer", "request": "Is one line enough?"}, "tool": "request_collaboration"}]})),
        MockReply::text("One line is enough."),
        document(json!({"answer": "Logged one; one line is enough.", "task_completed": true})),
    ]));
    let config = AgentConfig { decide: DecideMode::Json, ..with_peers(&[REVIEWER], 60_000) };
    let ran = fixture.run(fixture.agent(&model, config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one; one line is enough.");
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    let requests = model.requests();
    let names: Vec<String> = requests
        .iter()
        .map(|request| {
            assert!(request.tools.is_empty());
            match &request.response_format {
                ResponseFormat::JsonSchema { name, .. } => name.clone(),
                ResponseFormat::Text => "text".to_owned(),
            }
        })
        .collect();
    assert_eq!(
        names,
        ["judge_complexity", "choose_sop", "make_plan", "make_plan", "text", "report"]
    );
    // Small schemas whose enums come from the state.
    assert_eq!(
        schema(&requests[0])["properties"]["complexity"]["enum"],
        json!(["simple", "complex"])
    );
    assert_eq!(schema(&requests[1])["properties"]["sop"]["enum"], json!([SOP, "none"]));
    let tools = |request: &ChatRequest| -> Vec<Value> {
        schema(request)["properties"]["steps"]["items"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|variant| variant["properties"]["tool"]["const"].clone())
            .collect()
    };
    assert_eq!(tools(&requests[2]), [json!("select_skills"), json!("request_collaboration")]);
    assert_eq!(tools(&requests[3]), [json!("run_script"), json!("request_collaboration")]);
    let variants = schema(&requests[3])["properties"]["steps"]["items"]["anyOf"].clone();
    assert_eq!(
        variants[0]["properties"]["args"]["properties"]["skill"]["enum"],
        json!(["toolbox"])
    );
    assert_eq!(
        variants[1]["properties"]["args"]["properties"]["agent"]["enum"],
        json!(["reviewer"])
    );
    assert_eq!(schema(&requests[5])["required"], json!(["answer", "task_completed"]));
    // The system prompt describes the cycle, not react's document.
    let system = common::message_text(&requests[0].messages[0]);
    assert!(system.contains("SAFE cycle") && !system.contains("\"action\": {\"type\""), "{system}");
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

async fn json_mode_drops_repeated_steps_and_keeps_a_failed_plan_open() -> anyhow::Result<()> {
    let fixture = fixture();
    let document = |value: Value| MockReply::text(&value.to_string());
    let select = json!({"args": {"names": ["toolbox"]}, "tool": "select_skills"});
    let run = |script: &str, arg: &str| {
        json!({"args": {"args": [arg], "script": format!("scripts/{script}.sh"), "skill": "toolbox"},
               "tool": "run_script"})
    };
    let model = Arc::new(MockModel::new(vec![
        document(json!({"complexity": "simple", "reasoning": "one script"})),
        document(json!({"reasoning": "select", "steps": [select, select, select]})),
        document(json!({"reasoning": "try", "steps": [run("fail", "x")]})),
        document(json!({"answer": "The fail script failed.", "task_completed": false})),
        document(json!({"reasoning": "log", "steps": [run("log", "one"), run("log", "one")]})),
        document(json!({"answer": "Logged one.", "task_completed": true})),
    ]));
    let config = AgentConfig { decide: DecideMode::Json, ..config() };
    let ran = fixture.run(fixture.agent(&model, config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one.");
    // Copies of a step are left out: one select, one log.
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    assert_eq!(ran.statuses(), ["ok", "failed", "ok"]);
    let dropped: Vec<Value> = ran
        .data(EventKind::PlanCreated)
        .iter()
        .map(|data| data["repeats_dropped"].clone())
        .collect();
    assert_eq!(dropped, [json!(2)]);
    // After the failed step the report may only say the task goes on; otherwise it may end it.
    let requests = model.requests();
    let completed = |index: usize| schema(&requests[index])["properties"]["task_completed"].clone();
    assert_eq!(completed(3), json!({"enum": [false]}));
    assert!(
        request_text(&requests[3])
            .contains("The plan stopped at c2s1 (run_script toolbox/scripts/fail.sh x): it failed")
    );
    assert_eq!(completed(5), json!({"type": "boolean"}));
    assert_eq!(
        purposes(&ran.events),
        ["judge_complexity", "make_plan", "make_plan", "report", "make_plan", "report"]
    );
    assert_replayed(&ran.run_dir, ran.events.len()).await
}

fn collaboration_replies() -> Vec<MockReply> {
    vec![
        judge("complex"),
        choose(SOP),
        plan(&[
            select_step("toolbox"),
            script_step("log", &["one"]),
            ask_step("reviewer", "Is a log of one line complete?"),
        ]),
        MockReply::text("Yes: one line is complete."),
        report("Logged one; the reviewer agrees.", true),
    ]
}

async fn a_collaboration_run_resumes_from_any_point_of_its_record() -> anyhow::Result<()> {
    let fixture = fixture();
    let config = || with_peers(&[REVIEWER], 60_000);
    let model = Arc::new(MockModel::new(collaboration_replies()));
    let original = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(original.result.outcome, Outcome::Completed);
    let (lines, wanted) = original.record()?;
    let scratch = tempfile::tempdir()?;
    for kept in 1..lines.len() {
        let case = scratch.path().join(kept.to_string());
        let (runs, workspace, run_dir) = original.cut(&lines, kept, &case)?;
        // The workspace as the killed run left it.
        let prefix: Vec<Value> =
            lines[..kept].iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        let logged = prefix.iter().enumerate().any(|(index, event)| {
            event["type"] == "action_executed"
                && event["data"]["action"]["args"]["script"] == "scripts/log.sh"
                && index + 1 < prefix.len()
        });
        std::fs::create_dir_all(&workspace)?;
        std::fs::write(workspace.join("log.txt"), if logged { "one\n" } else { "" })?;
        let answered = prefix.iter().filter(|event| event["type"] == "model_response").count();
        let model = Arc::new(MockModel::new(collaboration_replies().split_off(answered)));
        let agent =
            fixture.agent(&model, config()).workspace(&workspace).runs_dir(&runs).build()?;
        let result =
            agent.resume(&run_dir).await.unwrap_or_else(|error| panic!("cut {kept}: {error}"));
        assert_eq!(result.outcome, Outcome::Completed, "cut {kept}");
        assert_eq!(model.remaining(), 0, "cut {kept}");
        assert_eq!(std::fs::read_to_string(workspace.join("log.txt"))?, "one\n", "cut {kept}");
        let events = common::well_formed(&run_dir);
        original.assert_resumed(&result, &events, &wanted, &format!("cut {kept}"));
        let state: Value = serde_json::from_slice(&std::fs::read(run_dir.join("state.json"))?)?;
        assert_eq!(state["strategy_state"], original.state()["strategy_state"], "cut {kept}");
    }
    Ok(())
}

async fn the_peers_remember_across_the_tasks_of_a_session() -> anyhow::Result<()> {
    let fixture = fixture();
    let mut replies = collaboration_replies();
    replies.extend([
        judge("simple"),
        plan(&[ask_step("reviewer", "And after a second line?")]),
        MockReply::text("Two lines are complete too."),
        report("The reviewer says two lines are complete too.", true),
    ]);
    let model = Arc::new(MockModel::new(replies));
    let agent = fixture.agent(&model, with_peers(&[REVIEWER], 60_000)).build()?;
    let first = agent.run(TASK).await?;
    assert_eq!(first.outcome, Outcome::Completed);
    let run_dir = first.run_dir.clone().unwrap();
    let second = agent.send(&run_dir, "Ask the reviewer about a second line").await?;
    assert_eq!(second.outcome, Outcome::Completed);
    assert_eq!(second.final_text, "The reviewer says two lines are complete too.");
    assert_eq!(model.remaining(), 0);
    // The peer's second request carries its first exchange: its state survived the message
    // cycle between the tasks.
    let requests = model.requests();
    let peer = request_text(&requests[7]);
    assert!(peer.contains("Request collab-1 from main:\nIs a log of one line complete?"), "{peer}");
    assert!(peer.contains("Yes: one line is complete."));
    assert!(peer.contains("Request collab-2 from main:\nAnd after a second line?"));
    let events = common::well_formed(&run_dir);
    let requested: Vec<String> = events
        .iter()
        .filter(|event| event.kind == EventKind::CollaborationRequested)
        .map(|event| text(&event.data["id"]))
        .collect();
    assert_eq!(requested, ["collab-1", "collab-2"]);
    let state: Value = serde_json::from_slice(&std::fs::read(run_dir.join("state.json"))?)?;
    let safe = &state["strategy_state"];
    assert_eq!(safe["tasks"], 2);
    assert_eq!(safe["task"], "Ask the reviewer about a second line");
    assert_eq!(safe["complexity"], "simple");
    assert!(safe["sop"].is_null(), "the SOP belongs to the first task");
    assert_eq!(safe["peers"][0]["handled"], 2);
    assert_eq!(safe["collaborations"].as_array().unwrap().len(), 2);
    let report = replay_check(&run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    assert_eq!(report.events_compared, events.len());
    Ok(())
}
