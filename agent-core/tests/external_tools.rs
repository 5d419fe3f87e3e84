//! External (MCP) tools as actions: an in-process `ExternalTools` (a small calculator server
//! and friends) offered next to the skills, called under validation, policy, approval, budgets
//! and timeouts, recorded, and replayed exactly without the server.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    Ran, ScriptedApprover, answer, call, document, request_text, schema, schema_actions,
    schema_args, select, tool, tool_names, toolbox,
};
use model_adapter::MockModel;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use skills_agent_core::{
    AgentConfig, ConsoleOptions, ConsoleSink, DecideMode, EventKind, ExternalBlob, ExternalOutcome,
    ExternalTool, ExternalTools, Outcome, compliance, replay_check,
};
use tools_runtime::{ApprovalMode, Decision};

fn main() -> std::process::ExitCode {
    common::main(tests![
        a_run_mixing_a_skill_script_and_a_tool_replays_exactly,
        json_mode_offers_tools_in_the_schema_and_checks_arguments,
        forbidden_tools_are_not_offered_and_calls_are_refused,
        prompt_tools_ask_the_approver_or_are_refused,
        failing_and_slow_calls_become_observations,
        a_failed_or_timed_out_tool_call_gets_one_retry,
        blobs_are_stored_by_hash,
        tool_calls_count_against_max_tool_calls,
        a_long_tool_list_is_summarised_and_described_on_demand,
        a_changed_tool_list_is_recorded_and_replayed,
        a_failed_server_is_reported_and_the_run_goes_on,
        plan_execute_think_steps_call_tools,
        a_session_reopens_a_run_with_tools_and_goes_on_live,
    ])
}

/// A calculator server and a few misbehaving tools, in process. `add` adds `a` and `b`,
/// `echo` returns its text (and, once, makes `calc` offer a new tool `square`), `fail` is a
/// tool error, `crash` a server gone, `sleep` never answers, `image` returns a PNG.
#[derive(Debug)]
struct FakeServers {
    tools: Mutex<Vec<ExternalTool>>,
    calls: Mutex<Vec<(String, Value, Option<Duration>)>>,
    servers: Value,
}

fn number_schema(names: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> =
        names.iter().map(|name| ((*name).to_owned(), json!({"type": "number"}))).collect();
    json!({"type": "object", "properties": properties, "required": names})
}

fn external(name: &str, description: &str, schema: Value) -> ExternalTool {
    ExternalTool {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema,
        decision: Decision::Allow,
        timeout: None,
    }
}

impl FakeServers {
    fn new(tools: Vec<ExternalTool>) -> Arc<FakeServers> {
        Arc::new(FakeServers {
            tools: Mutex::new(tools),
            calls: Mutex::new(Vec::new()),
            servers: json!([{"name": "calc", "transport": "stdio", "state": "running", "tools": 2}]),
        })
    }

    fn calculator() -> Arc<FakeServers> {
        FakeServers::new(vec![
            external("mcp__calc__add", "Adds two numbers.", number_schema(&["a", "b"])),
            external(
                "mcp__calc__echo",
                "Echoes a text.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
        ])
    }

    fn calls(&self) -> Vec<(String, Value, Option<Duration>)> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl ExternalTools for FakeServers {
    fn tools(&self) -> Vec<ExternalTool> {
        self.tools.lock().unwrap().clone()
    }

    fn servers(&self) -> Value {
        self.servers.clone()
    }

    async fn call(
        &self,
        name: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> ExternalOutcome {
        self.calls.lock().unwrap().push((name.to_owned(), arguments.clone(), timeout));
        let number = |key: &str| arguments.get(key).and_then(Value::as_f64).unwrap_or(0.0);
        let done = |text: String, structured: Option<Value>| ExternalOutcome::Done {
            is_error: false,
            text,
            structured,
            blobs: Vec::new(),
        };
        match name.rsplit("__").next().unwrap_or_default() {
            "add" => {
                let sum = number("a") + number("b");
                done(format!("{sum}"), Some(json!({"sum": sum})))
            }
            "square" => done(format!("{}", number("x") * number("x")), None),
            "echo" => {
                let mut tools = self.tools.lock().unwrap();
                if !tools.iter().any(|tool| tool.name == "mcp__calc__square") {
                    tools.push(external("mcp__calc__square", "Squares x.", number_schema(&["x"])));
                }
                done(arguments["text"].as_str().unwrap_or_default().to_owned(), None)
            }
            "fail" => ExternalOutcome::Done {
                is_error: true,
                text: "division by zero".to_owned(),
                structured: None,
                blobs: Vec::new(),
            },
            "crash" => ExternalOutcome::Failed {
                reason: "server `calc` is unavailable: it exited (signal 9)".to_owned(),
            },
            "sleep" => {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
                done("woke".to_owned(), None)
            }
            "image" => ExternalOutcome::Done {
                is_error: false,
                text: "a red dot".to_owned(),
                structured: None,
                blobs: vec![ExternalBlob {
                    mime_type: Some("image/png".to_owned()),
                    uri: None,
                    data: b"\x89PNG\r\n\x1a\nnot really a png".to_vec(),
                }],
            },
            other => ExternalOutcome::Failed { reason: format!("unknown tool `{other}`") },
        }
    }
}

/// Replays `ran` and checks that every recorded event came out again.
async fn replays_exactly(ran: &Ran) {
    let report = replay_check(&ran.run_dir).await.unwrap();
    assert_eq!(report.divergence, None, "{}", ran.run_dir.display());
    assert!(report.reproduced());
}

async fn a_run_mixing_a_skill_script_and_a_tool_replays_exactly() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["sum"]),
        call("mcp__calc__add", json!({"thought": "the calculator adds", "a": 2, "b": 3})),
        answer("2 + 3 = 5, logged."),
    ]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone());
    let ran = fixture.run(builder, "Add 2 and 3 with the calculator and log it").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!((ran.result.tool_calls, ran.result.script_runs), (3, 1));
    assert_eq!(servers.calls().len(), 1);
    assert_eq!(servers.calls()[0].0, "mcp__calc__add");
    // The default timeout is passed on (the tools set none).
    assert_eq!(servers.calls()[0].2, Some(Duration::from_millis(60_000)));
    let requests = model.requests();
    let first = &requests[0];
    let system = request_text(first);
    assert!(system.contains("- mcp__calc__add: Adds two numbers. Arguments: a: number, b: number"));
    assert!(tool_names(first).contains(&"mcp__calc__add".to_owned()), "{:?}", tool_names(first));
    assert!(!tool_names(first).contains(&"call_tool".to_owned()));
    // The function takes a thought first, which never reaches the server.
    let add = first.tools.iter().find(|tool| tool.name == "mcp__calc__add").unwrap();
    assert_eq!(add.parameters["propertyOrdering"], json!(["thought", "a", "b"]));
    assert_eq!(servers.calls()[0].1, json!({"a": 2, "b": 3}));
    let turns = ran.data(EventKind::TurnFinished);
    assert_eq!(turns[2]["reasoning"]["silent"], json!(false), "{:?}", turns[2]);
    let note = common::note(first);
    assert!(
        note.contains("Allowed now: select_skills, mcp__calc__add, mcp__calc__echo, final_answer"),
        "{note}"
    );
    let observations = ran.observations();
    assert_eq!(observations[1].0, "ok");
    assert_eq!(observations[2], ("ok".to_owned(), observations[2].1.clone()));
    assert!(observations[2].1.contains("5\nstructured content: {\"sum\":5.0}"), "{observations:?}");
    let servers_event = ran.data(EventKind::ToolServers);
    assert_eq!(servers_event.len(), 1);
    assert_eq!(servers_event[0]["servers"][0]["name"], "calc");
    assert_eq!(ran.kinds()[1], "tool_servers");
    let executed = ran.data(EventKind::ActionExecuted);
    assert_eq!(
        executed[2]["action"],
        json!({"type": "call_tool", "args": {"name": "mcp__calc__add", "arguments": {"a": 2, "b": 3}}})
    );
    assert_eq!(executed[2]["result"]["server"], "calc");
    let score = compliance(&ran.events);
    assert_eq!(score.external_calls, 1);
    assert!(score.sequence_violations.is_empty());
    replays_exactly(&ran).await;
    // The servers were not asked again.
    assert_eq!(servers.calls().len(), 1);
    Ok(())
}

async fn json_mode_offers_tools_in_the_schema_and_checks_arguments() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    let add = |arguments: Value| {
        document(
            "call_tool",
            json!({"name": "mcp__calc__add", "arguments": arguments}),
            json!({"thought": "add them"}),
        )
    };
    let model = Arc::new(MockModel::new(vec![
        add(json!({"a": "two", "b": 3})),
        add(json!({"a": 2})),
        add(json!({"a": 2, "b": 3})),
        document("final_answer", json!({"content": "5"}), json!({"thought": "done"})),
    ]));
    let config = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
    let builder = fixture.agent(&model, config).external_tools(servers.clone());
    let ran = fixture.run(builder, "Add 2 and 3").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let first = schema(&model.requests()[0]);
    assert!(schema_actions(&first).contains(&"call_tool".to_owned()));
    let args = schema_args(&first, "call_tool");
    let variants = args["anyOf"].as_array().unwrap();
    assert_eq!(variants[0]["properties"]["name"], json!({"const": "mcp__calc__add"}));
    assert_eq!(variants[0]["properties"]["arguments"], number_schema(&["a", "b"]));
    assert_eq!(variants[0]["propertyOrdering"], json!(["name", "arguments"]));
    // The thought stays first.
    assert_eq!(first["propertyOrdering"][0], "thought");
    let observations = ran.observations();
    assert_eq!(observations[0].0, "invalid_action");
    assert!(observations[0].1.contains("/a"), "{}", observations[0].1);
    assert!(observations[0].1.contains("a: number, b: number"), "{}", observations[0].1);
    assert_eq!(observations[1].0, "invalid_action");
    assert!(observations[1].1.contains("\"b\" is a required property"), "{}", observations[1].1);
    assert_eq!(observations[2].0, "ok");
    // Invalid arguments never reach the server; they count as tool calls like any action.
    assert_eq!(servers.calls().len(), 1);
    assert_eq!(ran.result.tool_calls, 3);
    replays_exactly(&ran).await;
    Ok(())
}

async fn forbidden_tools_are_not_offered_and_calls_are_refused() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    servers.tools.lock().unwrap()[1].decision = Decision::Forbidden;
    let model = Arc::new(MockModel::new(vec![
        call("call_tool", json!({"name": "mcp__calc__echo", "arguments": {"text": "hi"}})),
        answer("The echo tool is forbidden."),
    ]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone());
    let ran = fixture.run(builder, "Echo hi").await?;
    let first = &model.requests()[0];
    assert!(!request_text(first).contains("mcp__calc__echo"));
    assert!(!tool_names(first).contains(&"mcp__calc__echo".to_owned()));
    let (status, content) = &ran.observations()[0];
    assert_eq!(status, "denied");
    assert!(
        content.contains("forbidden by the policy (the `[mcp_servers.calc]` rules)"),
        "{content}"
    );
    assert!(servers.calls().is_empty());
    assert_eq!(compliance(&ran.events).policy_hits.get("denied"), Some(&1));
    replays_exactly(&ran).await;
    Ok(())
}

async fn prompt_tools_ask_the_approver_or_are_refused() -> anyhow::Result<()> {
    // Approval mode `never` (the fixture's): a prompt tool is refused, never called.
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    servers.tools.lock().unwrap()[0].decision = Decision::Prompt;
    let add = || call("mcp__calc__add", json!({"a": 1, "b": 1}));
    let model = Arc::new(MockModel::new(vec![add(), answer("Not allowed.")]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone());
    let ran = fixture.run(builder, "Add 1 and 1").await?;
    assert!(request_text(&model.requests()[0]).contains("Adds two numbers. (asks the user)"));
    let (status, content) = &ran.observations()[0];
    assert_eq!(status, "denied");
    assert!(content.contains("needs approval but the approval mode is `never`"), "{content}");
    assert!(servers.calls().is_empty());
    replays_exactly(&ran).await;

    // Asked: denied once, approved once; the approval events are recorded and replayed.
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    servers.tools.lock().unwrap()[0].decision = Decision::Prompt;
    let approver = ScriptedApprover::new(vec![false, true]);
    let model = Arc::new(MockModel::new(vec![add(), add(), answer("2")]));
    let mut runtime = fixture.runtime();
    runtime.policy.approval_mode = ApprovalMode::AskForRisky;
    let builder = fixture
        .agent(&model, AgentConfig::default())
        .runtime(runtime)
        .approver(approver.clone())
        .external_tools(servers.clone());
    let ran = fixture.run(builder, "Add 1 and 1").await?;
    assert_eq!(ran.statuses(), vec!["denied", "ok"]);
    assert!(
        ran.observations()[0].1.contains("scripted denied `mcp__calc__add"),
        "{:?}",
        ran.observations()
    );
    let asked = approver.asked();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].argv, vec!["mcp__calc__add".to_owned(), "{\"a\":1,\"b\":1}".to_owned()]);
    assert!(asked[0].reason.contains("[mcp_servers.calc]"), "{}", asked[0].reason);
    assert_eq!(ran.data(EventKind::ApprovalDenied).len(), 1);
    assert_eq!(ran.data(EventKind::ApprovalGranted).len(), 1);
    assert_eq!(servers.calls().len(), 1);
    replays_exactly(&ran).await;
    assert_eq!(approver.asked().len(), 2, "replay asks nobody");
    Ok(())
}

async fn failing_and_slow_calls_become_observations() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut slow = external("mcp__calc__sleep", "Never answers.", json!({"type": "object"}));
    slow.timeout = Some(Duration::from_millis(100));
    let servers = FakeServers::new(vec![
        external("mcp__calc__fail", "Divides by zero.", json!({"type": "object"})),
        external("mcp__calc__crash", "Kills the server.", json!({"type": "object"})),
        slow,
    ]);
    let model = Arc::new(MockModel::new(vec![
        call("mcp__calc__fail", json!({})),
        call("mcp__calc__crash", json!({})),
        call("mcp__calc__sleep", json!({})),
        answer("Every tool failed."),
    ]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone());
    let ran = fixture.run(builder, "Try the tools").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.statuses(), vec!["failed", "failed", "timeout"]);
    let observations = ran.observations();
    assert!(observations[0].1.contains("the tool reported an error:\ndivision by zero"));
    assert!(observations[1].1.contains("server `calc` is unavailable"), "{}", observations[1].1);
    assert!(observations[2].1.contains("did not answer within 100 ms"), "{}", observations[2].1);
    assert_eq!(servers.calls()[2].2, Some(Duration::from_millis(100)));
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_failed_or_timed_out_tool_call_gets_one_retry() -> anyhow::Result<()> {
    // A server that crashed or did not answer may work the second time (format 9); a third
    // identical call is refused without reaching it.
    let fixture = toolbox();
    let mut slow = external("mcp__calc__sleep", "Never answers.", json!({"type": "object"}));
    slow.timeout = Some(Duration::from_millis(100));
    let crash = external("mcp__calc__crash", "Kills the server.", json!({"type": "object"}));
    let servers = FakeServers::new(vec![crash, slow]);
    let model = Arc::new(MockModel::new(vec![
        call("mcp__calc__crash", json!({})),
        call("mcp__calc__sleep", json!({})),
        call("mcp__calc__crash", json!({})),
        call("mcp__calc__sleep", json!({})),
        call("mcp__calc__crash", json!({})),
        answer("The calculator server is down."),
    ]));
    let mut config = AgentConfig::default();
    config.guard.stuck_repeats = 10;
    let builder = fixture.agent(&model, config).external_tools(servers.clone());
    let ran = fixture.run(builder, "Try the tools").await?;
    assert_eq!(ran.statuses(), ["failed", "timeout", "failed", "timeout", "refused"]);
    assert_eq!(servers.calls().len(), 4);
    let refusal = &ran.observations()[4].1;
    assert!(refusal.starts_with("this exact call already failed (obs-3: "), "{refusal}");
    replays_exactly(&ran).await;
    Ok(())
}

async fn blobs_are_stored_by_hash() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers =
        FakeServers::new(vec![external("mcp__paint__image", "Paints.", json!({"type": "object"}))]);
    let model =
        Arc::new(MockModel::new(vec![call("mcp__paint__image", json!({})), answer("A red dot.")]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers);
    let ran = fixture.run(builder, "Paint").await?;
    let bytes = b"\x89PNG\r\n\x1a\nnot really a png";
    let blob = &ran.data(EventKind::ActionExecuted)[0]["result"]["blobs"][0];
    let sha256 = blob["sha256"].as_str().unwrap();
    let path = format!("observations/{sha256}.png");
    assert_eq!(blob["path"], path);
    assert_eq!(std::fs::read(ran.run_dir.join(&path))?, bytes);
    assert!(skills_agent_core::is_sha256_hex(sha256));
    let (status, content) = &ran.observations()[0];
    assert_eq!(status, "ok");
    assert_eq!(
        content,
        &format!("a red dot\n[image/png, {} bytes: stored as {path}]", bytes.len())
    );
    replays_exactly(&ran).await;
    Ok(())
}

async fn tool_calls_count_against_max_tool_calls() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    let add = || call("mcp__calc__add", json!({"a": 1, "b": 2}));
    let echo = |text: &str| call("mcp__calc__echo", json!({"text": text}));
    let model =
        Arc::new(MockModel::new(vec![add(), echo("one"), echo("two"), answer("Stopped early.")]));
    let mut config = AgentConfig::default();
    config.budgets.max_tool_calls = 2;
    let builder = fixture.agent(&model, config).external_tools(servers.clone());
    let ran = fixture.run(builder, "Add, then echo").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxToolCalls);
    assert_eq!(ran.result.tool_calls, 2);
    assert_eq!(ran.result.script_runs, 0);
    assert_eq!(servers.calls().len(), 2);
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_long_tool_list_is_summarised_and_described_on_demand() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut tools: Vec<ExternalTool> = (0..20)
        .map(|n| {
            external(
                &format!("mcp__big__t{n}"),
                &format!("Tool number {n} does something long-winded."),
                number_schema(&["x"]),
            )
        })
        .collect();
    tools.push(external("mcp__calc__add", "Adds two numbers.", number_schema(&["a", "b"])));
    let servers = FakeServers::new(tools);
    let model = Arc::new(MockModel::new(vec![
        call("call_tool", json!({"name": "mcp__calc__add", "arguments": {"a": 1, "b": 2}})),
        call("describe_tools", json!({"names": ["mcp__calc__add"]})),
        call("mcp__calc__add", json!({"a": 1, "b": 2})),
        answer("3"),
    ]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone());
    let ran = fixture.run(builder, "Add 1 and 2").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let requests = model.requests();
    let system = request_text(&requests[0]);
    assert!(system.contains("- server big: mcp__big__t0, mcp__big__t1,"), "{system}");
    assert!(system.contains("- server calc: mcp__calc__add\n"), "{system}");
    assert!(!system.contains("Adds two numbers"), "descriptions are loaded on demand");
    assert!(tool_names(&requests[0]).contains(&"describe_tools".to_owned()));
    assert!(!tool_names(&requests[0]).iter().any(|name| name.starts_with("mcp__")));
    let observations = ran.observations();
    assert_eq!(observations[0].0, "invalid_action");
    assert!(observations[0].1.contains("describe_tools it first"), "{}", observations[0].1);
    assert_eq!(observations[1].0, "ok");
    assert!(
        observations[1].1.contains("## mcp__calc__add\nAdds two numbers."),
        "{}",
        observations[1].1
    );
    assert!(observations[1].1.contains("\"required\":[\"a\",\"b\"]"), "{}", observations[1].1);
    // Described: now offered as a function of its own.
    assert!(tool_names(&requests[2]).contains(&"mcp__calc__add".to_owned()));
    assert_eq!(
        observations[2],
        ("ok".to_owned(), "3\nstructured content: {\"sum\":3.0}".to_owned())
    );
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_changed_tool_list_is_recorded_and_replayed() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    let model = Arc::new(MockModel::new(vec![
        call("mcp__calc__echo", json!({"text": "hello"})),
        call("mcp__calc__square", json!({"x": 4})),
        answer("16"),
    ]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone());
    let ran = fixture.run(builder, "Echo, then square 4").await?;
    assert_eq!(ran.statuses(), vec!["ok", "ok"]);
    let changed = ran.data(EventKind::ToolsChanged);
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0]["added"], json!(["mcp__calc__square"]));
    let event = ran.events.iter().find(|event| event.kind == EventKind::ToolsChanged).unwrap();
    let console = ConsoleSink::new(Box::new(std::io::sink()), ConsoleOptions::default());
    assert_eq!(console.render(event), "  · MCP tools changed · new: mcp__calc__square\n");
    let requests = model.requests();
    assert!(!tool_names(&requests[0]).contains(&"mcp__calc__square".to_owned()));
    assert!(tool_names(&requests[1]).contains(&"mcp__calc__square".to_owned()));
    assert!(
        request_text(&requests[1]).contains("The external tools changed. New: mcp__calc__square.")
    );
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_failed_server_is_reported_and_the_run_goes_on() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = Arc::new(FakeServers {
        tools: Mutex::new(Vec::new()),
        calls: Mutex::new(Vec::new()),
        servers: json!([
            {"name": "broken", "transport": "stdio", "state": {"failed": {"reason": "`nope` not found in PATH"}}, "tools": 0},
        ]),
    });
    let model = Arc::new(MockModel::new(vec![answer("No tools, still an answer.")]));
    let builder = fixture.agent(&model, AgentConfig::default()).external_tools(servers);
    let ran = fixture.run(builder, "Anything").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let event = ran.events.iter().find(|event| event.kind == EventKind::ToolServers).unwrap();
    let console = ConsoleSink::new(Box::new(std::io::sink()), ConsoleOptions::default());
    let lines = console.render(event);
    assert!(
        lines.contains("✗ MCP server `broken` failed: `nope` not found in PATH — the run goes on without its tools"),
        "{lines}"
    );
    // No tools on offer: nothing about them in the prompt.
    assert!(!request_text(&model.requests()[0]).contains("call_tool"));
    replays_exactly(&ran).await;
    Ok(())
}

async fn plan_execute_think_steps_call_tools() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    let add = json!({"name": "mcp__calc__add", "arguments": {"a": 4, "b": 5}});
    let model = Arc::new(MockModel::new(vec![
        call(
            "plan_tool_call",
            json!({
                "reasoning": "add with the calculator",
                "complexity": "simple",
                "steps": [
                    {"tool": "call_tool", "args": add},
                    {"tool": "call_tool", "args": {"name": "mcp__calc__echo", "arguments": {"text": "9"}}},
                ],
            }),
        ),
        call(
            "think",
            json!({
                "internal_analysis": "the tool said 9",
                "user_summary": "4 + 5 = 9",
                "task_completed": true,
                "next_steps_preview": "",
            }),
        ),
    ]));
    let config =
        AgentConfig { strategy: "plan-execute-think".to_owned(), ..AgentConfig::default() };
    let builder = fixture.agent(&model, config).external_tools(servers.clone());
    let ran = fixture.run(builder, "Add 4 and 5 and echo it").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed, "{:?}", ran.observations());
    assert_eq!(ran.statuses(), vec!["ok", "ok"]);
    assert!(ran.observations()[0].1.starts_with("9\n"), "{:?}", ran.observations());
    // The plan's schema offers call_tool with the tool's own arguments.
    let plan_tools = &model.requests()[0].tools;
    let steps = plan_tools[0].parameters["properties"]["steps"]["items"].to_string();
    assert!(steps.contains("\"const\":\"call_tool\""), "{steps}");
    assert!(steps.contains("\"const\":\"mcp__calc__add\""), "{steps}");
    assert_eq!(servers.calls().len(), 2);
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_session_reopens_a_run_with_tools_and_goes_on_live() -> anyhow::Result<()> {
    let fixture = toolbox();
    let servers = FakeServers::calculator();
    let model = Arc::new(MockModel::new(vec![
        call("mcp__calc__add", json!({"a": 1, "b": 1})),
        answer("2"),
        call("mcp__calc__add", json!({"a": 2, "b": 2})),
        answer("4"),
    ]));
    let agent =
        fixture.agent(&model, AgentConfig::default()).external_tools(servers.clone()).build()?;
    let first = agent.run("Add 1 and 1").await?;
    let run_dir = first.run_dir.clone().unwrap();
    let second = agent.send(&run_dir, "Now add 2 and 2").await?;
    assert_eq!((second.outcome, second.final_text.as_str()), (Outcome::Completed, "4"));
    // The record was re-emitted (one tool_servers), the first call not made again.
    let events = common::well_formed(&run_dir);
    assert_eq!(events.iter().filter(|event| event.kind == EventKind::ToolServers).count(), 1);
    let calls: Vec<Value> =
        servers.calls().into_iter().map(|(_, arguments, _)| arguments).collect();
    assert_eq!(calls, vec![json!({"a": 1, "b": 1}), json!({"a": 2, "b": 2})]);
    let report = replay_check(&run_dir).await?;
    assert_eq!(report.divergence, None);
    Ok(())
}
