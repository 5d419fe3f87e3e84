//! Scripted `MockModel` scenarios for every rule of the run loop: guardrails, budgets and stop
//! conditions, stuck detection, the per-turn action automaton, compaction, redaction,
//! streaming and the plan — each checked on the outcome, the final text, the counters, the
//! requests the model received and the events of a real run directory.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use agent_core::{AgentConfig, EventKind, Outcome};
use common::{Fixture, Ran, call, document, message_text, request_text, schema, text, tool_names};
use model_adapter::{ChatRequest, MockModel, MockReply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    common::main(tests![
        a_script_runs_in_the_sandbox_and_the_answer_ends_the_run,
        a_hidden_skill_is_refused_unless_the_user_named_it,
        more_skill_bodies_than_the_turn_allows_are_refused,
        files_of_an_unselected_skill_are_refused_until_it_is_selected,
        only_the_scripts_of_a_selected_skill_can_run,
        a_second_select_straight_after_a_select_is_outside_the_action_space,
        the_turn_limit_ends_the_run_with_a_degraded_answer,
        the_tool_call_limit_counts_refused_calls_too,
        a_script_past_the_script_limit_is_not_run,
        a_context_that_cannot_fit_ends_the_run,
        the_time_limit_stops_the_run_before_the_next_turn,
        the_deterministic_answer_stands_in_when_the_degraded_call_fails,
        identical_failing_actions_end_the_run_as_stuck,
        failures_of_one_kind_past_their_cap_end_the_run,
        every_failure_is_an_observation_of_its_kind,
        model_errors_past_their_cap_end_the_run_as_an_error,
        a_cancelled_run_ends_without_a_model_call,
    ])
}

/// A skill `csv-stats` with a python script that counts the rows of a CSV file, an unrelated
/// skill `alpha-dates`, and `data.csv` in the workspace.
fn csv_fixture() -> Fixture {
    let fixture = Fixture::new();
    fixture.skill(
        "csv-stats",
        "Counts rows and columns of CSV files.",
        "",
        "Run scripts/count.py with the CSV path.",
    );
    fixture.file(
        "csv-stats",
        "scripts/count.py",
        "import sys\nrows = open(sys.argv[1]).read().splitlines()\nprint(f'rows={len(rows) - 1}')\n",
    );
    fixture.skill("alpha-dates", "Formats calendar dates and times.", "", "Use ISO 8601.");
    std::fs::write(fixture.workspace.join("data.csv"), "a,b\n1,2\n3,4\n5,6\n").unwrap();
    fixture
}

const TASK: &str = "How many rows does the CSV file data.csv have?";

fn select(name: &str) -> MockReply {
    call("select_skills", json!({"names": [name]}))
}

fn count(args: &[&str]) -> MockReply {
    call("run_script", json!({"skill": "csv-stats", "script": "scripts/count.py", "args": args}))
}

fn answer(content: &str) -> MockReply {
    call("final_answer", json!({"content": content}))
}

/// What the model saw last before its note: the newest observation of `request`.
fn last_observation(request: &ChatRequest) -> String {
    let messages = &request.messages;
    message_text(&messages[messages.len() - 2])
}

/// `(status, content)` pairs of the observations, for whole-value comparison.
fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(status, content)| ((*status).to_owned(), (*content).to_owned())).collect()
}

fn counters(ran: &Ran) -> (u32, u32, u32, u32, u32) {
    let counters = &ran.result.counters;
    (
        counters.turns,
        counters.model_calls,
        counters.tool_calls,
        counters.script_runs,
        counters.refusals,
    )
}

async fn a_script_runs_in_the_sandbox_and_the_answer_ends_the_run() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    let model = Arc::new(MockModel::new(vec![
        select("csv-stats"),
        count(&["data.csv"]),
        answer("data.csv has 3 rows."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "data.csv has 3 rows.");
    assert_eq!(counters(&ran), (3, 3, 2, 1, 0));
    assert_eq!(ran.observations()[1], ("ok".to_owned(), "exit code 0\nstdout:\nrows=3".to_owned()));
    assert_eq!(
        last_observation(&model.requests()[2]),
        "[obs-2] run_script csv-stats/scripts/count.py data.csv → ok\nexit code 0\nstdout:\nrows=3"
    );
    assert_eq!(ran.data(EventKind::ActionExecuted)[1]["result"]["exit_code"], 0);
    assert_eq!(text(&ran.finished()["outcome"]), "completed");
    assert_eq!(std::fs::read_to_string(ran.run_dir.join("final.md"))?, "data.csv has 3 rows.\n");
    Ok(())
}

async fn a_hidden_skill_is_refused_unless_the_user_named_it() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    fixture.skill(
        "deploy",
        "Deploys the service to production.",
        "disable-model-invocation: true\n",
        "Run the deployment checklist.",
    );
    let refusal = "skill `deploy` has disable-model-invocation: true; only the user can invoke \
                   it (by naming /deploy)";

    // Not named: not in the catalog, not in the enum, and refused when asked for anyway.
    let model =
        Arc::new(MockModel::new(vec![select("deploy"), answer("I may not deploy by myself.")]));
    let ran =
        fixture.run(fixture.agent(&model, AgentConfig::default()), "Deploy the service").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "I may not deploy by myself.");
    assert_eq!(counters(&ran), (2, 2, 1, 0, 1));
    assert_eq!(ran.observations(), pairs(&[("refused", refusal)]));
    let requests = model.requests();
    assert!(!message_text(&requests[0].messages[0]).contains("deploy:"));
    assert_eq!(
        requests[0].tools[0].parameters["properties"]["names"]["items"]["enum"],
        json!(["alpha-dates", "csv-stats"]),
        "no overlap with the task: catalog order"
    );
    assert_eq!(
        last_observation(&requests[1]),
        format!("[obs-1] select_skills deploy → refused\n{refusal}")
    );
    assert_eq!(ran.data(EventKind::ActionValidated)[0]["valid"], false);
    assert!(ran.data(EventKind::ActionExecuted).is_empty(), "nothing ran");

    // Named in the task (`/deploy`) or in the configuration: offered and loaded.
    let mut named = AgentConfig::default();
    named.guard.user_named_skills = vec!["deploy".to_owned()];
    for (config, task) in [
        (AgentConfig::default(), "Please run /deploy for the service"),
        (named, "Deploy the service"),
    ] {
        let model = Arc::new(MockModel::new(vec![select("deploy"), answer("Deployed.")]));
        let ran = fixture.run(fixture.agent(&model, config), task).await?;
        assert_eq!(
            (ran.result.outcome, ran.result.counters.refusals),
            (Outcome::Completed, 0),
            "{task}"
        );
        assert_eq!(ran.observations()[0].0, "ok", "{task}");
        assert!(ran.observations()[0].1.contains("Run the deployment checklist."), "{task}");
        let requests = model.requests();
        assert!(
            message_text(&requests[0].messages[0]).contains("- deploy: Deploys the service"),
            "{task}: the catalog shows a skill the user named"
        );
        let offered = &requests[0].tools[0].parameters["properties"]["names"]["items"]["enum"];
        assert!(offered.as_array().unwrap().contains(&json!("deploy")), "{task}: {offered}");
    }
    Ok(())
}

async fn more_skill_bodies_than_the_turn_allows_are_refused() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    fixture.skill("csv-plot", "Plots CSV columns.", "", "Plot.");
    let model = Arc::new(MockModel::new(vec![
        call("select_skills", json!({"names": ["csv-stats", "csv-plot", "alpha-dates"]})),
        call("select_skills", json!({"names": ["csv-stats", "csv-plot"]})),
        answer("Both loaded."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, "Both loaded.")
    );
    assert_eq!(counters(&ran), (3, 3, 2, 0, 1));
    let refusal = "at most 2 skill bodies may be loaded per turn; select them in batches";
    assert_eq!(ran.observations()[0], ("refused".to_owned(), refusal.to_owned()));
    assert_eq!(ran.observations()[1].0, "ok");
    let requests = model.requests();
    assert_eq!(requests[0].tools[0].parameters["properties"]["names"]["maxItems"], 2);
    assert!(last_observation(&requests[1]).ends_with(refusal));
    let state: Value = serde_json::from_slice(&std::fs::read(ran.run_dir.join("state.json"))?)?;
    let selected: Vec<&str> = state["selected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|skill| skill["name"].as_str().unwrap())
        .collect();
    assert_eq!(selected, ["csv-stats", "csv-plot"]);
    Ok(())
}

async fn files_of_an_unselected_skill_are_refused_until_it_is_selected() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    fixture.file("csv-stats", "reference.md", "# Reference\nColumns are comma separated.\n");
    let model = Arc::new(MockModel::new(vec![
        count(&["data.csv"]),
        call("load_resource", json!({"skill": "csv-stats", "path": "reference.md"})),
        // The small model's habit: the data file as the script.
        call("run_script", json!({"skill": "csv-stats", "script": "data.csv", "args": []})),
        answer("I could not count them."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(counters(&ran), (4, 4, 3, 0, 3));
    let refusal = "skill `csv-stats` is not selected: select_skills it before using its files";
    assert_eq!(
        ran.observations(),
        pairs(&[("refused", refusal), ("refused", refusal), ("refused", refusal)])
    );
    assert!(ran.data(EventKind::ActionExecuted).is_empty(), "nothing ran");
    let requests = model.requests();
    for request in &requests[1..] {
        assert!(last_observation(request).ends_with(refusal));
        assert_eq!(
            tool_names(request),
            ["select_skills", "final_answer"],
            "no file of an unselected skill is offered"
        );
    }
    Ok(())
}

async fn only_the_scripts_of_a_selected_skill_can_run() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    fixture.file("csv-stats", "reference.md", "# Reference\n");
    let script = |script: &str| {
        call("run_script", json!({"skill": "csv-stats", "script": script, "args": ["data.csv"]}))
    };
    let model = Arc::new(MockModel::new(vec![
        select("csv-stats"),
        script("data.csv"),
        script("../x"),
        script("reference.md"),
        answer("No script for that."),
    ]));
    let mut config = AgentConfig::default();
    config.guard.retry_caps.invalid_action = 5;
    let ran = fixture.run(fixture.agent(&model, config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(counters(&ran), (5, 5, 4, 0, 0));
    let not_a_script = |name: &str| {
        format!("`{name}` is not a script of skill `csv-stats`; its scripts: scripts/count.py")
    };
    assert_eq!(
        ran.observations()[1..].to_vec(),
        vec![
            ("invalid_action".to_owned(), not_a_script("data.csv")),
            ("invalid_action".to_owned(), not_a_script("../x")),
            ("invalid_action".to_owned(), not_a_script("reference.md")),
        ]
    );
    assert_eq!(ran.data(EventKind::ActionExecuted).len(), 1, "only the select ran");
    let requests = model.requests();
    assert!(last_observation(&requests[2]).ends_with(&not_a_script("data.csv")));
    assert_eq!(
        requests[1].tools[1].parameters["properties"]["script"]["enum"],
        json!(["scripts/count.py"])
    );
    Ok(())
}

async fn a_second_select_straight_after_a_select_is_outside_the_action_space() -> anyhow::Result<()>
{
    let fixture = csv_fixture();
    let model =
        Arc::new(MockModel::new(vec![select("csv-stats"), select("alpha-dates"), answer("Done.")]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    assert_eq!((ran.result.outcome, ran.result.final_text.as_str()), (Outcome::Completed, "Done."));
    assert_eq!(counters(&ran), (3, 3, 2, 0, 0));
    let refusal = "`select_skills` is not allowed now (a skill was just selected: use it or \
                   answer); allowed: run_script, final_answer";
    assert_eq!(ran.observations()[1], ("invalid_action".to_owned(), refusal.to_owned()));
    let requests = model.requests();
    assert_eq!(tool_names(&requests[1]), ["run_script", "final_answer"]);
    assert!(last_observation(&requests[2]).ends_with(refusal));
    let allowed: Vec<&Value> =
        ran.data(EventKind::TurnStarted).iter().map(|data| &data["allowed"]).collect();
    assert_eq!(
        allowed,
        [
            &json!(["select_skills", "final_answer"]),
            &json!(["run_script", "final_answer"]),
            &json!(["select_skills", "run_script", "final_answer"])
        ]
    );
    let _ = (document, request_text, schema);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A skill of shell scripts that log, fail, wait and print, and a second skill with a file.

/// Skill `toolbox` (scripts `log.sh ARG` appends ARG to `log.txt` in the workspace, `fail.sh`
/// exits 3, `sleep.sh SECONDS`, `print.sh N WORD` prints N numbered lines) and skill `notes`
/// (a `reference.md`).
fn toolbox() -> Fixture {
    let fixture = Fixture::new();
    fixture.skill("toolbox", "Logs, fails, waits and prints for tests.", "", "Use the scripts.");
    fixture.script("toolbox", "scripts/log.sh", "echo \"$1\" >> log.txt\necho \"logged $1\"");
    fixture.script("toolbox", "scripts/fail.sh", "echo \"cannot handle $1\" >&2\nexit 3");
    fixture.script("toolbox", "scripts/sleep.sh", "sleep \"$1\"\necho slept");
    fixture.script(
        "toolbox",
        "scripts/print.sh",
        "i=1\nwhile [ $i -le \"$1\" ]; do echo \"line $i of $1: $2\"; i=$((i+1)); done",
    );
    fixture.skill("notes", "Reference notes about logging.", "", "Read reference.md.");
    fixture.file("notes", "reference.md", "# Notes\nLog one line per call.\n");
    fixture
}

fn tool(script: &str, args: &[&str]) -> MockReply {
    call(
        "run_script",
        json!({"skill": "toolbox", "script": format!("scripts/{script}.sh"), "args": args}),
    )
}

/// The user message that asked for the degraded answer (the last message of the last request).
fn degraded_prompt(model: &MockModel) -> String {
    let requests = model.requests();
    let last = requests.last().unwrap();
    assert!(last.tools.is_empty(), "the degraded answer is asked without tools");
    assert_eq!(schema(last), Value::Null, "and without a schema");
    message_text(last.messages.last().unwrap())
}

/// The event types after the last `turn_finished`.
fn tail_after_last_turn(ran: &Ran) -> Vec<&'static str> {
    let kinds = ran.kinds();
    let last = kinds.iter().rposition(|kind| *kind == "turn_finished").unwrap();
    kinds[last + 1..].to_vec()
}

async fn the_turn_limit_ends_the_run_with_a_degraded_answer() -> anyhow::Result<()> {
    let fixture = toolbox();
    let degraded = "Done: logged one. Blocked: the turn limit. Next: log two.";
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        MockReply::text(degraded),
        tool("log", &["two"]),
    ]));
    let mut config = AgentConfig::default();
    config.budgets.max_turns = 2;
    let ran = fixture.run(fixture.agent(&model, config), "Log one, then two").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    assert_eq!(ran.result.final_text, degraded);
    assert_eq!(ran.final_md(), format!("{degraded}\n"));
    assert_eq!(counters(&ran), (2, 3, 2, 1, 0));
    assert_eq!(model.remaining(), 1, "nothing asked after the degraded answer");
    assert_eq!(fixture.workspace_text("log.txt"), "one\n", "nothing ran after the limit");
    assert!(
        degraded_prompt(&model)
            .starts_with("The run must stop now: the turn limit (2) was reached.")
    );
    assert_eq!(
        tail_after_last_turn(&ran),
        ["model_request", "model_response", "run_finished"],
        "one model call, no third turn"
    );
    assert_eq!(ran.data(EventKind::ModelRequest)[2]["purpose"], "degraded_answer");
    assert_eq!(ran.finished()["degraded"], true);
    assert_eq!(ran.finished()["outcome"], "max_turns");
    assert_eq!(ran.state()["outcome"], "max_turns");
    assert_eq!(ran.state()["counters"]["model_calls"], 3);
    Ok(())
}

async fn the_tool_call_limit_counts_refused_calls_too() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        call("load_resource", json!({"skill": "notes", "path": "reference.md"})),
        MockReply::text("Two calls were all I had."),
    ]));
    let mut config = AgentConfig::default();
    config.budgets.max_tool_calls = 2;
    let ran = fixture.run(fixture.agent(&model, config), "Read the notes").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxToolCalls);
    assert_eq!(ran.result.final_text, "Two calls were all I had.");
    assert_eq!(counters(&ran), (2, 3, 2, 0, 1));
    assert_eq!(ran.statuses(), ["ok", "refused"]);
    assert!(
        degraded_prompt(&model)
            .starts_with("The run must stop now: the tool-call limit (2) was reached.")
    );
    Ok(())
}

async fn a_script_past_the_script_limit_is_not_run() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("log", &["two"]),
        MockReply::text("Logged one; the script limit stopped two."),
    ]));
    let mut config = AgentConfig::default();
    config.budgets.max_script_runs = 1;
    let ran = fixture.run(fixture.agent(&model, config), "Log one, then two").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxScriptRuns);
    assert_eq!(ran.result.final_text, "Logged one; the script limit stopped two.");
    assert_eq!(counters(&ran), (3, 4, 3, 1, 1));
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    assert_eq!(
        ran.observations()[2],
        ("refused".to_owned(), "the script-run limit (1) was reached".to_owned())
    );
    let requests = model.requests();
    assert_eq!(
        tool_names(&requests[2]),
        ["select_skills", "final_answer"],
        "no run_script offered"
    );
    assert_eq!(ran.data(EventKind::ActionExecuted).len(), 2, "select and one script");
    assert!(
        degraded_prompt(&model)
            .starts_with("The run must stop now: the script-run limit (1) was reached.")
    );
    Ok(())
}

async fn a_context_that_cannot_fit_ends_the_run() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("print", &["200", "context filler text"]),
        MockReply::text("The output was too large to keep."),
    ]));
    let mut config = AgentConfig::default();
    config.budgets.max_context_chars = 6_000;
    config.context.inline_observation_chars = 100_000;
    let ran = fixture.run(fixture.agent(&model, config), "Print a lot").await?;
    assert_eq!(ran.result.outcome, Outcome::Context);
    assert_eq!(ran.result.final_text, "The output was too large to keep.");
    assert_eq!(counters(&ran), (2, 3, 2, 1, 0));
    let compaction = ran.data(EventKind::Compaction);
    assert_eq!(compaction.len(), 1, "compaction was tried first");
    assert_eq!(compaction[0]["compacted"], json!(["obs-1"]));
    let prompt = degraded_prompt(&model);
    assert!(prompt.starts_with("The run must stop now: the context ("), "{prompt}");
    assert!(prompt.contains("does not fit max_context_chars (6000) even after compaction"));
    Ok(())
}

async fn the_time_limit_stops_the_run_before_the_next_turn() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("sleep", &["1.5"]),
        MockReply::text("Out of time after the wait."),
        tool("log", &["late"]),
    ]));
    let mut config = AgentConfig::default();
    // Far above the time two turn heads take, far below the script's sleep.
    config.budgets.max_duration_ms = Some(700);
    let ran = fixture.run(fixture.agent(&model, config), "Wait, then log").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxDuration);
    assert_eq!(ran.result.final_text, "Out of time after the wait.");
    assert_eq!(counters(&ran), (2, 3, 2, 1, 0));
    assert_eq!(ran.observations()[1], ("ok".to_owned(), "exit code 0\nstdout:\nslept".to_owned()));
    assert_eq!(model.remaining(), 1);
    assert_eq!(fixture.workspace_text("log.txt"), "");
    assert!(
        degraded_prompt(&model)
            .starts_with("The run must stop now: the time limit (700 ms) was reached.")
    );
    Ok(())
}

async fn the_deterministic_answer_stands_in_when_the_degraded_call_fails() -> anyhow::Result<()> {
    let fixture = toolbox();
    let plan = json!({"goal": "log twice", "steps": [
        {"id": "s1", "title": "Log one", "status": "in_progress"},
        {"id": "s2", "title": "Log two", "status": "pending"},
    ]});
    let mut config = AgentConfig::default();
    config.budgets.max_turns = 2;
    let expected = "The run stopped before the task was finished.\n\nDone so far:\n\
                    - select_skills toolbox (obs-1)\n\
                    - run_script toolbox/scripts/log.sh one (obs-2)\n\n\
                    Blocker: the turn limit (2) was reached.\n\nNext steps:\n- Log two\n";
    // The degraded call fails, or answers with a tool call instead of text.
    for degraded in [MockReply::error("the provider is overloaded", false), tool("log", &["two"])] {
        let model = Arc::new(MockModel::new(vec![
            call("select_skills", json!({"names": ["toolbox"], "plan": plan})),
            call(
                "run_script",
                json!({"skill": "toolbox", "script": "scripts/log.sh", "args": ["one"],
                       "plan_update": {"update": [{"id": "s1", "status": "done"}]}}),
            ),
            degraded,
        ]));
        let ran = fixture.run(fixture.agent(&model, config.clone()), "Log one, then two").await?;
        assert_eq!(ran.result.outcome, Outcome::MaxTurns);
        assert_eq!(ran.result.final_text, expected);
        assert_eq!(ran.finished()["final_text"], expected);
        assert_eq!(ran.result.model_calls, 3, "the failed call is counted");
        assert_eq!(model.remaining(), 0);
    }
    assert_eq!(fixture.workspace_text("log.txt"), "one\none\n", "two was never logged");
    Ok(())
}

async fn identical_failing_actions_end_the_run_as_stuck() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("fail", &["x"]),
        tool("fail", &["x"]),
        tool("fail", &["x"]),
        MockReply::text("The script keeps failing on x."),
        tool("fail", &["x"]),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Handle x").await?;
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    assert_eq!(ran.result.final_text, "The script keeps failing on x.");
    assert_eq!(counters(&ran), (4, 5, 4, 3, 0));
    assert_eq!(ran.statuses(), ["ok", "failed", "failed", "failed"]);
    assert_eq!(model.remaining(), 1);
    assert!(degraded_prompt(&model).starts_with(
        "The run must stop now: the same failing action (run_script toolbox/scripts/fail.sh x) \
         came 3 times in a row."
    ));
    Ok(())
}

async fn failures_of_one_kind_past_their_cap_end_the_run() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("fail", &["a"]),
        tool("fail", &["b"]),
        // A success starts the count again.
        tool("log", &["ok"]),
        tool("fail", &["c"]),
        tool("fail", &["d"]),
        tool("fail", &["e"]),
        MockReply::text("Every input fails."),
    ]));
    let mut config = AgentConfig::default();
    config.guard.retry_caps.failed = 2;
    let ran = fixture.run(fixture.agent(&model, config), "Handle a to e").await?;
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    assert_eq!(ran.result.final_text, "Every input fails.");
    assert_eq!(ran.statuses(), ["ok", "failed", "failed", "ok", "failed", "failed", "failed"]);
    assert!(
        degraded_prompt(&model)
            .starts_with("The run must stop now: 3 failed failures in a row (cap 2).")
    );
    Ok(())
}

async fn every_failure_is_an_observation_of_its_kind() -> anyhow::Result<()> {
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/deny.sh", "echo should not run > denied.txt");
    let skill_dir = fixture.skills.join("toolbox").canonicalize()?;
    let mut runtime = fixture.runtime();
    runtime.policy.rules = tools_runtime::RuleSet {
        rules: vec![tools_runtime::PrefixRule {
            prefix: vec!["sh".to_owned(), skill_dir.join("scripts/deny.sh").display().to_string()],
            decision: tools_runtime::Decision::Forbidden,
        }],
        default: tools_runtime::Decision::Allow,
    };
    let model = Arc::new(MockModel::new(vec![
        MockReply::raw_tool_call(
            "run_script",
            "{\"skill\": \"toolbox\", \"scr",
            model_adapter::FinishReason::ToolCalls,
        ),
        call("teleport", json!({"to": "mars"})),
        MockReply::error("upstream answered 503", true),
        select("toolbox"),
        tool("fail", &["x"]),
        tool("sleep", &["5"]),
        call("load_resource", json!({"skill": "notes", "path": "reference.md"})),
        tool("deny", &[]),
        answer("Nothing worked."),
    ]));
    let mut config = AgentConfig::default();
    config.scripts.timeout_ms = 300;
    let builder = fixture.agent(&model, config).runtime(runtime);
    let ran = fixture.run(builder, "Try everything").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Nothing worked.");
    assert_eq!(
        ran.statuses(),
        [
            "invalid_action",
            "invalid_action",
            "model_error",
            "ok",
            "failed",
            "timeout",
            "refused",
            "denied"
        ]
    );
    let observations = ran.observations();
    assert!(
        observations[0].1.starts_with("the call to `run_script` had unreadable arguments"),
        "{}",
        observations[0].1
    );
    assert!(observations[1].1.starts_with("unknown action `teleport`"), "{}", observations[1].1);
    assert_eq!(observations[2].1, "the model call failed: mock model: upstream answered 503");
    assert_eq!(observations[4].1, "exit code 3\nstderr:\ncannot handle x");
    assert_eq!(observations[5].1, "timed out after 300 ms");
    assert!(observations[7].1.starts_with("not run (PolicyForbidden)"), "{}", observations[7].1);
    assert_eq!(fixture.workspace_text("denied.txt"), "", "the denied script never ran");
    let executed = ran.data(EventKind::ActionExecuted);
    assert_eq!(executed[1]["result"]["exit_code"], 3);
    assert_eq!(executed[2]["result"]["timed_out"], true);
    assert_eq!(executed[3]["status"], "denied");
    // The model saw each kind by name, in the next request.
    let requests = model.requests();
    for (index, header) in [
        (1, "[obs-1] → invalid_action"),
        (3, "[obs-3] → model_error"),
        (5, "[obs-5] run_script toolbox/scripts/fail.sh x → failed"),
        (6, "[obs-6] run_script toolbox/scripts/sleep.sh 5 → timeout"),
        (7, "[obs-7] load_resource notes/reference.md → refused"),
        (8, "[obs-8] run_script toolbox/scripts/deny.sh → denied"),
    ] {
        assert!(last_observation(&requests[index]).starts_with(header), "request {index}");
    }
    Ok(())
}

async fn model_errors_past_their_cap_end_the_run_as_an_error() -> anyhow::Result<()> {
    let fixture = toolbox();
    let failure = || MockReply::error("connection reset", true);
    // Five failed decide calls; the degraded call finds the script empty and fails too.
    let model =
        Arc::new(MockModel::new(vec![failure(), failure(), failure(), failure(), failure()]));
    let mut config = AgentConfig::default();
    config.guard.retry_caps.model_error = 4;
    let ran = fixture.run(fixture.agent(&model, config), "Log one").await?;
    assert_eq!(ran.result.outcome, Outcome::Error);
    assert_eq!(counters(&ran), (5, 6, 0, 0, 0));
    assert_eq!(ran.statuses(), ["model_error"; 5]);
    assert_eq!(
        ran.result.final_text,
        "The run stopped before the task was finished.\n\nDone so far:\n- nothing completed\n\n\
         Blocker: 5 model_error failures in a row (cap 4).\n\nNext steps:\n\
         - run the task again with a larger budget, or narrow it down\n"
    );
    let responses = ran.data(EventKind::ModelResponse);
    assert_eq!(responses[5]["purpose"], "degraded_answer");
    assert!(text(&responses[5]["error"]).contains("the script has no reply for request 6"));
    Ok(())
}

async fn a_cancelled_run_ends_without_a_model_call() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![select("toolbox")]));
    let token = agent_core::CancellationToken::new();
    token.cancel();
    let builder = fixture.agent(&model, AgentConfig::default()).cancellation(token);
    let ran = fixture.run(builder, "Log one").await?;
    assert_eq!(ran.result.outcome, Outcome::Cancelled);
    assert!(ran.result.final_text.contains("Blocker: the run was cancelled."));
    assert_eq!(model.requests().len(), 0);
    assert_eq!(ran.kinds(), ["run_started", "run_finished"]);
    Ok(())
}
