//! Scripted `MockModel` scenarios for every rule of the run loop: guardrails, budgets and stop
//! conditions, stuck detection, the per-turn action automaton, compaction, redaction,
//! streaming and the plan — each checked on the outcome, the final text, the counters, the
//! requests the model received and the events of a real run directory.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{
    Fixture, Ran, answer, call, document, message_text, request_text, run_script, schema, select,
    text, tool, tool_names, toolbox,
};
use model_adapter::{ChatRequest, MockModel, MockReply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use skills_agent_core::{AgentConfig, EventKind, Outcome};

fn main() -> std::process::ExitCode {
    common::main_with_children(
        tests![
            a_script_runs_in_the_sandbox_and_the_answer_ends_the_run,
            a_hidden_skill_is_refused_unless_the_user_named_it,
            more_skill_bodies_than_the_turn_allows_are_refused,
            files_of_an_unselected_skill_are_refused_until_it_is_selected,
            only_the_scripts_of_a_selected_skill_can_run,
            a_file_read_in_full_is_not_offered_again,
            json_mode_offers_only_skills_that_share_words_with_the_task,
            the_turn_note_carries_the_reasoning_level_and_a_progress_notice,
            the_turn_note_shows_a_budget_once_few_are_left,
            the_turn_note_shows_the_selected_skills_once_until_they_change,
            a_long_output_is_shown_with_the_lines_the_task_names,
            the_turn_note_lists_the_results_so_far,
            the_turn_note_leaves_the_results_out_while_a_batch_is_under_way,
            a_second_select_straight_after_a_select_is_outside_the_action_space,
            the_turn_limit_ends_the_run_with_a_degraded_answer,
            the_tool_call_limit_counts_refused_calls_too,
            a_script_past_the_script_limit_is_not_run,
            a_context_that_cannot_fit_ends_the_run,
            the_time_limit_stops_the_run_before_the_next_turn,
            the_deterministic_answer_stands_in_when_the_degraded_call_fails,
            the_report_lists_each_result_once,
            identical_failing_actions_end_the_run_as_stuck,
            a_timed_out_script_gets_one_retry,
            a_failing_call_repeated_between_other_actions_ends_the_run_as_stuck,
            an_answer_without_the_figures_the_task_asks_for_gets_the_results,
            failures_of_one_kind_past_their_cap_end_the_run,
            each_failure_kind_has_its_own_retry_cap,
            every_failure_is_an_observation_of_its_kind,
            model_errors_past_their_cap_end_the_run_as_an_error,
            a_cancelled_run_ends_without_a_model_call,
            allowed_tools_and_user_rules_reach_the_sandbox_policy,
            a_plan_and_its_updates_are_events_state_and_notes,
            json_mode_asks_for_one_document_under_the_turns_schema,
            tool_calls_stream_the_action_name_and_the_answer_text,
            the_prompt_prefix_stays_the_same_from_turn_to_turn,
            compaction_shortens_old_observations_and_recall_brings_them_back,
            large_outputs_are_stored_by_sha256_and_keep_their_reference,
            a_model_summary_after_compaction_is_one_counted_call,
            secrets_from_env_config_and_script_output_never_reach_the_run_directory,
            events_are_numbered_enveloped_and_reach_every_sink,
            a_runs_directory_inside_the_workspace_is_read_only_to_scripts,
        ],
        tests![redacting_child],
    )
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

fn count(args: &[&str]) -> MockReply {
    run_script("csv-stats", "scripts/count.py", args)
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
        "[obs-2] run_script csv-stats/scripts/count.py data.csv → ok\nrows=3",
        "the model reads a run that worked by its output alone (format 33)"
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
        run_script("csv-stats", "data.csv", &[]),
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
    let script = |script: &str| run_script("csv-stats", script, &["data.csv"]);
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

async fn a_file_read_in_full_is_not_offered_again() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    fixture.file("csv-stats", "reference.md", "# Reference\nColumns are comma separated.\n");
    fixture.file("csv-stats", "notes.md", "# Notes\n");
    let load = || call("load_resource", json!({"skill": "csv-stats", "path": "reference.md"}));
    let model = Arc::new(MockModel::new(vec![
        select("csv-stats"),
        load(),
        // Small models repeat their last action verbatim.
        load(),
        answer("Comma separated."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let observations = ran.observations();
    assert_eq!(observations[1].0, "ok");
    assert_eq!(
        observations[2],
        (
            "refused".to_owned(),
            "`reference.md` of skill `csv-stats` was already loaded in full (see the earlier \
             observation): use it or answer"
                .to_owned()
        )
    );
    let requests = model.requests();
    let paths = |request: &ChatRequest| {
        let tool = request.tools.iter().find(|tool| tool.name == "load_resource");
        tool.map(|tool| tool.parameters["properties"]["path"]["enum"].clone())
    };
    assert_eq!(paths(&requests[1]), Some(json!(["notes.md", "reference.md"])));
    assert_eq!(paths(&requests[2]), Some(json!(["notes.md"])), "the read file is gone");
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
            // The refused select did not use the skill: it is still "just selected".
            &json!(["run_script", "final_answer"])
        ]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// A skill of shell scripts that log, fail, wait and print, and a second skill with a file.

/// The user message that asked for the degraded answer (the last message of the last request).
fn degraded_prompt(model: &MockModel) -> String {
    let requests = model.requests();
    let last = requests.last().unwrap();
    assert!(last.tools.is_empty(), "the degraded answer is asked without tools");
    assert_eq!(schema(last), Value::Null, "and without a schema");
    common::note(last)
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
        tool("sleep", &["8"]),
        MockReply::text("Out of time after the wait."),
        tool("log", &["late"]),
    ]));
    let mut config = AgentConfig::default();
    // Far above the time two turn heads take, even on a loaded 2-core CI machine (700 ms was
    // not: the limit once passed before the script's turn), far below the script's sleep.
    config.budgets.max_duration_ms = Some(4000);
    let ran = fixture.run(fixture.agent(&model, config), "Wait, then log").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxDuration);
    assert_eq!(ran.result.final_text, "Out of time after the wait.");
    assert_eq!(counters(&ran), (2, 3, 2, 1, 0));
    assert_eq!(ran.observations()[1], ("ok".to_owned(), "exit code 0\nstdout:\nslept".to_owned()));
    assert_eq!(model.remaining(), 1);
    assert_eq!(fixture.workspace_text("log.txt"), "");
    assert!(
        degraded_prompt(&model)
            .starts_with("The run must stop now: the time limit (4000 ms) was reached.")
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
    let expected = "I could not finish the task: the turn limit (2) was reached.\n\n\
                    What was tried:\n\
                    - select_skills toolbox: worked\n\
                    - run_script toolbox/scripts/log.sh one: worked\n\n\
                    What is known so far:\n\
                    - run_script toolbox/scripts/log.sh one: logged one\n\n\
                    What you could do:\n\
                    - still to do: Log two\n\
                    - run the task again with a larger budget, or split it into smaller tasks\n";
    // The degraded call fails, answers with a tool call instead of text, or with a JSON
    // document cut off at max_tokens (the local 1.5B in plan-execute-think).
    let cut_off = MockReply::response(&model_adapter::Response {
        text: "{\n  \"internal_analysis\": \"The results are in the correct units. The results"
            .to_owned(),
        finish_reason: model_adapter::FinishReason::Length,
        ..model_adapter::Response::default()
    });
    for degraded in
        [MockReply::error("the provider is overloaded", false), tool("log", &["two"]), cut_off]
    {
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
    assert_eq!(fixture.workspace_text("log.txt"), "one\none\none\n", "two was never logged");
    Ok(())
}

async fn the_report_lists_each_result_once() -> anyhow::Result<()> {
    // A plan-execute-think run that ran the same column total three times ended with it three
    // times under "What is known so far". From format 31 each result is listed once.
    let fixture = toolbox();
    let mut config = AgentConfig::default();
    config.budgets.max_turns = 3;
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("log", &["one"]),
        MockReply::error("the provider is overloaded", false),
    ]));
    let ran = fixture.run(fixture.agent(&model, config), "Log one, then two").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    assert_eq!(
        ran.result.final_text,
        "I could not finish the task: the turn limit (3) was reached.\n\n\
         What was tried:\n\
         - select_skills toolbox: worked\n\
         - run_script toolbox/scripts/log.sh one (2 times): worked\n\n\
         What is known so far:\n\
         - run_script toolbox/scripts/log.sh one: logged one\n\n\
         What you could do:\n\
         - run the task again with a larger budget, or split it into smaller tasks\n"
    );
    let report = skills_agent_core::replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn the_turn_note_carries_the_reasoning_level_and_a_progress_notice() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("fail", &["x"]),
        tool("fail", &["y"]),
        tool("fail", &["z"]),
        answer("It fails on x, y and z."),
    ]));
    let mut config = AgentConfig::default();
    config.guard.retry_caps.failed = 10;
    let ran = fixture.run(fixture.agent(&model, config), "Handle x, y and z").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let notes: Vec<String> = model.requests().iter().map(common::note).collect();
    let first_line = notes[0].lines().next().unwrap();
    assert!(first_line.ends_with(" · reasoning=lightweight"), "{first_line}");
    assert!(!notes[0].contains("Progress check:"), "no notice on the normal path: {}", notes[0]);
    // Silent calls (no text, no thinking) from the start; three failures in a row by turn 5:
    // the failure streak comes first, and at most two warnings are shown.
    assert!(
        notes[1].contains("Progress check:\n- 1 of 1 calls came with no reasoning"),
        "{}",
        notes[1]
    );
    let last = &notes[4];
    assert!(
        last.contains("Progress check:\n- The last 3 actions failed: change the approach instead of retrying it.\n- 4 of 4 calls came with no reasoning"),
        "{last}"
    );
    // The notice is never a message of its own: only the turn notes (kept in the transcript
    // from record format 7) carry it.
    let transcript: Vec<String> =
        model.requests()[4].messages.iter().rev().skip(1).map(message_text).collect();
    assert!(
        transcript
            .iter()
            .filter(|text| text.contains("Progress check"))
            .all(|text| text.starts_with("Turn ") && text.ends_with("Call exactly one tool."))
    );
    assert_eq!(transcript.iter().filter(|text| text.contains("Progress check")).count(), 3);
    Ok(())
}

async fn the_turn_note_shows_a_budget_once_few_are_left() -> anyhow::Result<()> {
    // Record format 20: every note stays in the transcript, so what it repeats costs prompt
    // tokens each turn. After the first turn (whose note is whole) the counters show once three
    // or fewer are left, and "Plan: none yet" no more.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("log", &["two"]),
        answer("Logged one and two."),
    ]));
    let mut config = AgentConfig::default();
    config.budgets.max_script_runs = 4;
    let ran = fixture.run(fixture.agent(&model, config), "Log one, then two").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let lines: Vec<String> = model
        .requests()
        .iter()
        .map(|request| common::note(request).lines().next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        lines,
        [
            "Turn 1 of 12 · tool calls 0/30 · script runs 0/4 · reasoning=lightweight",
            "Turn 2 of 12 · reasoning=standard",
            "Turn 3 of 12 · script runs 1/4 · reasoning=standard",
            "Turn 4 of 12 · script runs 2/4 · reasoning=standard",
        ]
    );
    let notes: Vec<String> = model.requests().iter().map(common::note).collect();
    assert!(notes[0].contains("\nPlan: none yet (you may send one with your action).\n"));
    assert!(notes[1..].iter().all(|note| !note.contains("Plan:")), "{notes:?}");
    assert!(notes.iter().all(|note| note.ends_with(".\nCall exactly one tool.")));
    Ok(())
}

async fn the_turn_note_shows_the_selected_skills_once_until_they_change() -> anyhow::Result<()> {
    // Record format 35: each note stays in the transcript, and the line of selected skills
    // (~13 tokens on the embedded model) was evaluated again every turn for a selection that
    // had not changed. A compact note shows it when it differs from the last one shown.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["one"]),
        tool("log", &["two"]),
        select("notes"),
        tool("log", &["three"]),
        answer("Logged one, two and three."),
    ]));
    let ran =
        fixture.run(fixture.agent(&model, AgentConfig::default()), "Log one, two, three").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let skills: Vec<Option<String>> = model
        .requests()
        .iter()
        .map(|request| {
            common::note(request)
                .lines()
                .find(|line| line.starts_with("Selected skills:"))
                .map(str::to_owned)
        })
        .collect();
    let toolbox = "Selected skills: toolbox (scripts: scripts/fail.sh, scripts/log.sh, \
                   scripts/print.sh, scripts/sleep.sh);";
    let both = format!("{toolbox} notes;");
    assert_eq!(
        skills,
        [None, Some(toolbox.to_owned()), None, None, Some(both), None],
        "turn 1: none selected; 2: toolbox; 3-4: unchanged; 5: notes too; 6: unchanged"
    );
    let report = skills_agent_core::replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn the_turn_note_lists_the_results_so_far() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["a"]),
        tool("fail", &["b"]),
        tool("print", &["2", "w"]),
        tool("log", &["a"]),
        answer("Logged a; b fails; printed two lines."),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Log a, handle b, print w twice")
        .await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let results: Vec<String> = model
        .requests()
        .iter()
        .map(|request| {
            let note = common::note(request);
            note.split_once("Results so far:\n")
                .map(|(_, rest)| rest.split_once("Task: ").unwrap().0.to_owned())
                .unwrap_or_default()
        })
        .collect();
    // Not before two calls have run; then one line per call with what it printed or why it
    // failed; an identical call again moves to the end instead of showing twice.
    assert_eq!(
        results,
        [
            "",
            "",
            "",
            "- run_script toolbox/scripts/log.sh a: logged a\n\
             - run_script toolbox/scripts/fail.sh b: failed: cannot handle b\n",
            "- run_script toolbox/scripts/log.sh a: logged a\n\
             - run_script toolbox/scripts/fail.sh b: failed: cannot handle b\n\
             - run_script toolbox/scripts/print.sh 2 w: line 1 of 2: w · line 2 of 2: w\n",
            "- run_script toolbox/scripts/fail.sh b: failed: cannot handle b\n\
             - run_script toolbox/scripts/print.sh 2 w: line 1 of 2: w · line 2 of 2: w\n\
             - run_script toolbox/scripts/log.sh a: logged a\n",
        ]
    );
    Ok(())
}

async fn the_turn_note_leaves_the_results_out_while_a_batch_is_under_way() -> anyhow::Result<()> {
    // From format 30 a batch over the task's values shows no results list while values are
    // left (the note says to run the next one), and the whole list once the answer is due.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["1"]),
        tool("log", &["2"]),
        tool("log", &["3"]),
        answer("Logged 1, 2 and 3."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Log 1, 2 and 3.").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let notes: Vec<String> = model.requests().iter().map(common::note).collect();
    assert!(notes[3].contains("The task also gives 3, which no script call has used"), "{notes:?}");
    assert!(notes[..4].iter().all(|note| !note.contains("Results so far")), "{notes:?}");
    assert!(
        notes[4].contains(
            "Results so far:\n- run_script toolbox/scripts/log.sh 1: logged 1\n\
             - run_script toolbox/scripts/log.sh 2: logged 2\n\
             - run_script toolbox/scripts/log.sh 3: logged 3\n"
        ),
        "{}",
        notes[4]
    );
    Ok(())
}

/// The report a stuck task ends with: no model call (the model is in a loop).
fn stuck_report(reason: &str, tried: &str, known: &str) -> String {
    format!(
        "I could not finish the task: {reason}.\n\nWhat was tried:\n{tried}\nWhat is known so \
         far:\n{known}\nWhat you could do:\n- read the error above: give the value, file or \
         skill it asks for, then run the task again\n"
    )
}

async fn identical_failing_actions_end_the_run_as_stuck() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("fail", &["x"]),
        tool("fail", &["x"]),
        tool("fail", &["x"]),
        MockReply::text("The script keeps failing on x."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Handle x").await?;
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    // The repeats are refused without running: the same arguments give the same error.
    assert_eq!(ran.statuses(), ["ok", "failed", "refused", "refused"]);
    assert_eq!(counters(&ran), (4, 4, 4, 1, 2));
    assert_eq!(
        ran.observations()[2].1,
        "this exact call already failed (obs-2: cannot handle x); the same arguments give the \
         same error: change the arguments, use another script, or answer with what is known"
    );
    assert_eq!(
        ran.result.final_text,
        stuck_report(
            "the same failing action (run_script toolbox/scripts/fail.sh x) came 3 times in a row",
            "- select_skills toolbox: worked\n\
             - run_script toolbox/scripts/fail.sh x (3 times): failed: cannot handle x\n",
            "- no result yet: any value would be a guess\n",
        )
    );
    assert_eq!(model.remaining(), 1, "no degraded call");
    Ok(())
}

async fn a_timed_out_script_gets_one_retry() -> anyhow::Result<()> {
    // A timeout may be the machine's load, not the call (format 9): the same call runs once
    // more, and is refused after a second timeout.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("sleep", &["5"]),
        tool("log", &["a"]),
        tool("sleep", &["5"]),
        tool("sleep", &["5"]),
        MockReply::text("unused"),
    ]));
    let mut config = AgentConfig::default();
    // Long enough for `log` on a loaded machine (200 ms timed it out beside a live bench).
    config.scripts.timeout_ms = 1_000;
    let ran = fixture.run(fixture.agent(&model, config), "Sleep, then log").await?;
    assert_eq!(ran.statuses(), ["ok", "timeout", "ok", "timeout", "refused"]);
    assert_eq!(ran.result.script_runs, 3);
    assert!(
        ran.observations()[4].1.starts_with("this exact call already timed out (obs-4)"),
        "{}",
        ran.observations()[4].1
    );
    // Three non-ok ends of one action: stuck, as before.
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    Ok(())
}

async fn a_failing_call_repeated_between_other_actions_ends_the_run_as_stuck() -> anyhow::Result<()>
{
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("fail", &["x"]),
        tool("log", &["a"]),
        tool("fail", &["x"]),
        tool("log", &["b"]),
        tool("fail", &["x"]),
        MockReply::text("unused"),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Handle x").await?;
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    assert_eq!(ran.statuses(), ["ok", "failed", "ok", "refused", "ok", "refused"]);
    assert_eq!(
        ran.result.final_text,
        stuck_report(
            "the same failing action (run_script toolbox/scripts/fail.sh x) came 3 times in \
             this task",
            "- select_skills toolbox: worked\n\
             - run_script toolbox/scripts/fail.sh x (3 times): failed: cannot handle x\n\
             - run_script toolbox/scripts/log.sh a: worked\n\
             - run_script toolbox/scripts/log.sh b: worked\n",
            "- run_script toolbox/scripts/log.sh a: logged a\n\
             - run_script toolbox/scripts/log.sh b: logged b\n",
        )
    );
    assert_eq!(model.remaining(), 1);
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
    assert_eq!(ran.statuses(), ["ok", "failed", "failed", "ok", "failed", "failed", "failed"]);
    let failed =
        |x: &str| format!("- run_script toolbox/scripts/fail.sh {x}: failed: cannot handle {x}\n");
    assert_eq!(
        ran.result.final_text,
        stuck_report(
            "3 failed failures in a row (cap 2)",
            &format!(
                "- select_skills toolbox: worked\n{}{}- run_script toolbox/scripts/log.sh ok: \
                 worked\n{}{}{}",
                failed("a"),
                failed("b"),
                failed("c"),
                failed("d"),
                failed("e")
            ),
            "- run_script toolbox/scripts/log.sh ok: logged ok\n",
        )
    );
    assert_eq!(model.remaining(), 1, "no degraded call");
    Ok(())
}

async fn each_failure_kind_has_its_own_retry_cap() -> anyhow::Result<()> {
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/deny.sh", "echo should not run");
    let mut runtime = fixture.runtime();
    runtime.policy.rules = tools_runtime::RuleSet {
        rules: vec![common::script_rule(
            &fixture,
            "toolbox",
            "scripts/deny.sh",
            tools_runtime::Decision::Forbidden,
        )],
        default: tools_runtime::Decision::Allow,
    };
    let load = |path: &str| call("load_resource", json!({"skill": "notes", "path": path}));
    // Two different failing actions of one kind in a row, each kind capped at one.
    let cases: [(&str, [MockReply; 2]); 6] = [
        ("invalid_action", [call("teleport", json!({})), call("fly", json!({}))]),
        ("refused", [load("reference.md"), load("other.md")]),
        ("denied", [tool("deny", &["a"]), tool("deny", &["b"])]),
        ("failed", [tool("fail", &["a"]), tool("fail", &["b"])]),
        ("timeout", [tool("sleep", &["5"]), tool("sleep", &["6"])]),
        ("model_error", [MockReply::error("timeout", true), MockReply::error("reset", true)]),
    ];
    for (kind, [first, second]) in cases {
        let model = Arc::new(MockModel::new(vec![
            select("toolbox"),
            first,
            second,
            MockReply::text(&format!("Stopped after two {kind} failures.")),
        ]));
        let mut config = AgentConfig::default();
        config.scripts.timeout_ms = 200;
        config.guard.stuck_repeats = 10;
        config.guard.retry_caps = skills_agent_core::RetryCaps {
            model_error: 1,
            invalid_action: 1,
            refused: 1,
            failed: 1,
            timeout: 1,
        };
        let builder = fixture.agent(&model, config).runtime(runtime.clone());
        let ran = fixture.run(builder, "Fail twice").await?;
        let expected = if kind == "model_error" { Outcome::Error } else { Outcome::Stuck };
        assert_eq!(ran.result.outcome, expected, "{kind}");
        assert_eq!(ran.statuses(), ["ok", kind, kind], "{kind}");
        let reason = format!("2 {kind} failures in a row (cap 1)");
        if kind == "model_error" {
            // Model errors are not a loop of the model's: it is asked for the answer.
            assert_eq!(ran.result.final_text, format!("Stopped after two {kind} failures."));
            assert!(
                degraded_prompt(&model).starts_with(&format!("The run must stop now: {reason}.")),
                "{kind}"
            );
        } else {
            let text = &ran.result.final_text;
            assert!(text.starts_with(&format!("I could not finish the task: {reason}.")), "{text}");
            assert_eq!(model.remaining(), 1, "{kind}: no degraded call");
        }
    }
    Ok(())
}

async fn every_failure_is_an_observation_of_its_kind() -> anyhow::Result<()> {
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/deny.sh", "echo should not run > denied.txt");
    let mut runtime = fixture.runtime();
    runtime.policy.rules = tools_runtime::RuleSet {
        rules: vec![common::script_rule(
            &fixture,
            "toolbox",
            "scripts/deny.sh",
            tools_runtime::Decision::Forbidden,
        )],
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
    // The model saw each kind by name, in the next request ...
    let requests = model.requests();
    for (index, header) in [
        (1, "[obs-1] → invalid_action"),
        (5, "[obs-5] run_script toolbox/scripts/fail.sh x → failed"),
        (6, "[obs-6] run_script toolbox/scripts/sleep.sh 5 → timeout"),
        (7, "[obs-7] load_resource notes/reference.md → refused"),
        (8, "[obs-8] run_script toolbox/scripts/deny.sh → denied"),
    ] {
        assert!(last_observation(&requests[index]).starts_with(header), "request {index}");
    }
    // ... but a failed model call (format 7): the next request is the one the failed call had,
    // its note replaced by the new one.
    let texts: Vec<String> = requests[3].messages.iter().map(message_text).collect();
    assert!(texts.iter().all(|text| !text.contains("model_error")), "{texts:?}");
    assert_eq!(requests[3].messages.len(), requests[2].messages.len());
    assert_eq!(
        requests[3].messages[..requests[3].messages.len() - 1],
        requests[2].messages[..requests[2].messages.len() - 1]
    );
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
        "I could not finish the task: 5 model_error failures in a row (cap 4).\n\n\
         What was tried:\n\
         - 5 model calls that failed, the last: the model call failed: mock model: connection \
         reset\n\n\
         What is known so far:\n- no result yet: any value would be a guess\n\n\
         What you could do:\n\
         - the model calls kept failing: check the model or its provider (the run's events \
         hold each error), then run the task again\n"
    );
    let responses = ran.data(EventKind::ModelResponse);
    assert_eq!(responses[5]["purpose"], "degraded_answer");
    assert!(text(&responses[5]["error"]).contains("the script has no reply for request 6"));
    Ok(())
}

async fn a_cancelled_run_ends_without_a_model_call() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![select("toolbox")]));
    let token = skills_agent_core::CancellationToken::new();
    token.cancel();
    let builder = fixture.agent(&model, AgentConfig::default()).cancellation(token);
    let ran = fixture.run(builder, "Log one").await?;
    assert_eq!(ran.result.outcome, Outcome::Cancelled);
    assert!(
        ran.result.final_text.starts_with("I could not finish the task: the run was cancelled."),
        "{}",
        ran.result.final_text
    );
    assert_eq!(model.requests().len(), 0);
    assert_eq!(ran.kinds(), ["run_started", "run_finished"]);
    Ok(())
}

async fn allowed_tools_and_user_rules_reach_the_sandbox_policy() -> anyhow::Result<()> {
    use tools_runtime::{ApprovalMode, Decision, RuleSet};
    let fixture = toolbox();
    // `gitty` allows git status only; `shelly` allows sh. Both scripts leave a file when run.
    fixture.skill(
        "gitty",
        "Shows the git status.",
        "allowed-tools: Bash(git status:*) Read\n",
        "Run scripts/status.sh.",
    );
    fixture.script("gitty", "scripts/status.sh", "echo ran > gitty.txt");
    fixture.skill("shelly", "Runs shell helpers.", "allowed-tools: Bash(sh:*)\n", "Run it.");
    fixture.script("shelly", "scripts/hello.sh", "echo ran >> shelly.txt\necho hello");
    fixture.script("shelly", "scripts/forbidden.sh", "echo ran > forbidden.txt");
    let rule = |skill: &str, script: &str, decision: Decision| {
        common::script_rule(&fixture, skill, script, decision)
    };
    let mut runtime = fixture.runtime();
    runtime.policy.approval_mode = ApprovalMode::AskForRisky;
    runtime.policy.rules = RuleSet {
        rules: vec![
            rule("toolbox", "scripts/log.sh", Decision::Prompt),
            rule("shelly", "scripts/forbidden.sh", Decision::Forbidden),
        ],
        default: Decision::Allow,
    };
    let approver = common::ScriptedApprover::new(vec![false, true]);
    let model = Arc::new(MockModel::new(vec![
        call("select_skills", json!({"names": ["gitty", "shelly"]})),
        run_script("gitty", "scripts/status.sh", &[]),
        run_script("shelly", "scripts/hello.sh", &[]),
        run_script("shelly", "scripts/forbidden.sh", &[]),
        select("toolbox"),
        tool("log", &["first"]),
        tool("log", &["second"]),
        answer("Done what the policy allowed."),
    ]));
    let builder =
        fixture.agent(&model, AgentConfig::default()).runtime(runtime).approver(approver.clone());
    let ran = fixture.run(builder, "Show the status and log").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.statuses(), ["ok", "denied", "ok", "denied", "ok", "denied", "ok"]);
    let observations = ran.observations();
    assert!(observations[1].1.starts_with("not run (PolicyForbidden)"), "{}", observations[1].1);
    assert!(observations[3].1.starts_with("not run (PolicyForbidden)"), "{}", observations[3].1);
    assert!(observations[5].1.starts_with("not run (ApprovalDenied)"), "{}", observations[5].1);
    assert_eq!(observations[2].1, "exit code 0\nstdout:\nhello");
    assert_eq!(
        (
            fixture.workspace_text("gitty.txt"),
            fixture.workspace_text("shelly.txt"),
            fixture.workspace_text("forbidden.txt"),
            fixture.workspace_text("log.txt"),
        ),
        (String::new(), "ran\n".to_owned(), String::new(), "second\n".to_owned())
    );
    assert_eq!(ran.result.counters.refusals, 3);
    // Approvals: asked twice, for the prompted command only, each answer an event.
    let asked = approver.asked();
    assert_eq!(asked.len(), 2);
    let log_rule = rule("toolbox", "scripts/log.sh", Decision::Prompt).prefix;
    assert_eq!(asked[0].argv, [&log_rule[0], &log_rule[1], "first"]);
    assert_eq!(asked[0].skill.as_deref(), Some("toolbox"));
    let approvals: Vec<&str> =
        ran.kinds().into_iter().filter(|kind| kind.starts_with("approval_")).collect();
    assert_eq!(
        approvals,
        ["approval_required", "approval_denied", "approval_required", "approval_granted"]
    );
    assert_eq!(ran.data(EventKind::ApprovalDenied)[0]["reason"], "not today");
    assert!(
        ran.first_seq(EventKind::ApprovalGranted)
            < ran.events.iter().rfind(|event| event.kind == EventKind::ActionExecuted).unwrap().seq
    );
    Ok(())
}

async fn a_plan_and_its_updates_are_events_state_and_notes() -> anyhow::Result<()> {
    let fixture = toolbox();
    let plan = json!({"goal": "log twice", "steps": [
        {"id": "s1", "title": "Log one", "status": "in_progress"},
        {"id": "s2", "title": "Log two", "status": "pending"},
    ]});
    let model = Arc::new(MockModel::new(vec![
        call("select_skills", json!({"names": ["toolbox"], "thought": "plan first", "plan": plan})),
        call(
            "run_script",
            json!({"skill": "toolbox", "script": "scripts/log.sh", "args": ["one"],
            "plan_update": {
                "update": [{"id": "s1", "status": "done"}, {"id": "s9", "status": "done"}],
                "add": [{"id": "s3", "title": "Report", "status": "pending"}],
            }}),
        ),
        call(
            "run_script",
            json!({"skill": "toolbox", "script": "scripts/log.sh", "args": ["two"],
            "plan": {"goal": "log twice, then report", "steps": [
                {"id": "s1", "title": "Log both", "status": "done"},
                {"id": "s2", "title": "Report", "status": "in_progress"},
            ]}}),
        ),
        call(
            "final_answer",
            json!({"content": "Logged one and two.",
                   "plan_update": {"update": [{"id": "s2", "status": "done"}]}}),
        ),
    ]));
    let ran =
        fixture.run(fixture.agent(&model, AgentConfig::default()), "Log one, then two").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let plan_events: Vec<(&str, u32)> = ran
        .events
        .iter()
        .filter(|event| event.kind.as_str().starts_with("plan_"))
        .map(|event| (event.kind.as_str(), event.turn))
        .collect();
    assert_eq!(
        plan_events,
        [("plan_created", 1), ("plan_updated", 2), ("plan_updated", 3), ("plan_updated", 4)]
    );
    let updated = ran.data(EventKind::PlanUpdated);
    assert_eq!(updated[0]["unknown_ids"], json!(["s9"]));
    assert_eq!(
        updated[0]["plan"]["steps"],
        json!([
            {"id": "s1", "title": "Log one", "status": "done"},
            {"id": "s2", "title": "Log two", "status": "pending"},
            {"id": "s3", "title": "Report", "status": "pending"},
        ])
    );
    assert_eq!(
        ran.state()["plan"],
        json!({"goal": "log twice, then report", "steps": [
            {"id": "s1", "title": "Log both", "status": "done"},
            {"id": "s2", "title": "Report", "status": "done"},
        ]})
    );
    // The plan is applied before the action of its turn and shown in the next turn's note.
    assert!(ran.first_seq(EventKind::PlanCreated) < ran.first_seq(EventKind::ActionValidated));
    let requests = model.requests();
    let note = common::note(&requests[1]);
    assert!(note.contains("Plan:\ngoal: log twice\n[>] s1 Log one\n[ ] s2 Log two\n"), "{note}");
    let note = common::note(&requests[2]);
    assert!(note.contains("[x] s1 Log one\n[ ] s2 Log two\n[ ] s3 Report\n"), "{note}");
    // The first turn offers a plan, later turns a patch.
    let properties = |request: &ChatRequest| {
        let properties = request.tools[0].parameters["properties"].as_object().unwrap().clone();
        (properties.contains_key("plan"), properties.contains_key("plan_update"))
    };
    assert_eq!(properties(&requests[0]), (true, false));
    assert_eq!(properties(&requests[1]), (false, true));
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n");
    Ok(())
}

async fn json_mode_offers_only_skills_that_share_words_with_the_task() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    let select_enum = |request: &ChatRequest| {
        common::schema_args(&schema(request), "select_skills")["properties"]["names"]["items"]
            ["enum"]
            .clone()
    };
    let config =
        AgentConfig { decide: skills_agent_core::DecideMode::Json, ..AgentConfig::default() };
    // Two skills share words with the task: both, best first, and no unrelated one.
    let model = Arc::new(MockModel::new(vec![answer_document("No.")]));
    let both = "How many rows does data.csv have, and what dates does it hold?";
    fixture.run(fixture.agent(&model, config.clone()), both).await?;
    assert_eq!(select_enum(&model.requests()[0]), json!(["csv-stats", "alpha-dates"]));
    // One skill shares words with the task, the ranking is sure of it: the runtime selects it
    // without asking (format 32), and the transcript reads as if the model had.
    let model = Arc::new(MockModel::new(vec![
        document(
            "run_script",
            json!({"skill": "csv-stats", "script": "scripts/count.py", "args": ["data.csv"]}),
            json!({}),
        ),
        answer_document("data.csv has 3 rows."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config.clone()), TASK).await?;
    assert_eq!(ran.result.final_text, "data.csv has 3 rows.");
    let chosen = &ran.data(EventKind::ActionValidated)[0];
    assert_eq!(chosen["chosen_by"], "ranking", "{chosen}");
    assert_eq!(
        chosen["action"],
        json!({"type": "select_skills", "args": {"names": ["csv-stats"]}})
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2, "no model call for the selection");
    assert!(
        request_text(&requests[0]).contains(
            r#"{"thought": "I need to load the instructions of the csv-stats skill.", "action": {"type": "select_skills", "args": {"names": ["csv-stats"]}}}"#
        ),
        "{}",
        request_text(&requests[0])
    );
    assert!(request_text(&requests[0]).contains("Run scripts/count.py with the CSV path."));
    // Once every skill that shares words with the task is selected, no other one is offered.
    let offered = common::schema_actions(&schema(&requests[1]));
    assert!(offered.contains(&"run_script".to_owned()), "{offered:?}");
    assert!(!offered.contains(&"select_skills".to_owned()), "{offered:?}");
    let report = skills_agent_core::replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    // No skill shares a word with the task: all of them, in catalog order.
    let model = Arc::new(MockModel::new(vec![answer_document("No.")]));
    fixture.run(fixture.agent(&model, config), "Say hello").await?;
    assert_eq!(select_enum(&model.requests()[0]), json!(["alpha-dates", "csv-stats"]));
    // Native tool callers see every skill, ranked.
    let model = Arc::new(MockModel::new(vec![answer("No.")]));
    fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    assert_eq!(
        model.requests()[0].tools[0].parameters["properties"]["names"]["items"]["enum"],
        json!(["csv-stats", "alpha-dates"])
    );
    Ok(())
}

fn answer_document(content: &str) -> MockReply {
    document("final_answer", json!({"content": content}), json!({}))
}

async fn json_mode_asks_for_one_document_under_the_turns_schema() -> anyhow::Result<()> {
    let fixture = toolbox();
    let plan = json!({"goal": "log one", "steps": [{"id": "s1", "title": "Log one", "status": "pending"}]});
    let model = Arc::new(MockModel::new(vec![
        document(
            "select_skills",
            json!({"names": ["toolbox"]}),
            json!({"thought": "the toolbox logs", "plan": plan}),
        ),
        MockReply::text("I will now run the script."),
        document(
            "run_script",
            json!({"skill": "toolbox", "script": "scripts/log.sh", "args": ["one"]}),
            json!({"plan_update": {"update": [{"id": "s1", "status": "done"}]}}),
        ),
        document("final_answer", json!({"content": "Logged one line."}), json!({})),
    ]));
    let config =
        AgentConfig { decide: skills_agent_core::DecideMode::Json, ..AgentConfig::default() };
    // Two skills share words with the task (the ranking is not sure of one): the model picks.
    let ran = fixture.run(fixture.agent(&model, config), "Log one, as the notes say").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one line.");
    assert_eq!(ran.statuses(), ["ok", "invalid_action", "ok"]);
    assert!(
        ran.observations()[1].1.starts_with("the answer is not valid JSON"),
        "{:?}",
        ran.observations()[1]
    );
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    let requests = model.requests();
    for request in &requests {
        assert!(request.tools.is_empty(), "no tools in JSON mode");
    }
    assert!(message_text(&requests[0].messages[0]).contains("Reply with one JSON object"));
    // The grammar holds the reply to one document: after the first turn the note no longer
    // asks for it (format 20).
    assert!(
        common::note(&requests[0])
            .ends_with("Reply with one JSON object holding exactly one action.")
    );
    for request in &requests[1..] {
        let note = common::note(request);
        assert!(note.ends_with('.') && !note.contains("Reply with"), "{note}");
    }
    let first = schema(&requests[0]);
    assert_eq!(common::schema_actions(&first), ["select_skills", "final_answer"]);
    assert_eq!(
        common::schema_args(&first, "select_skills")["properties"]["names"],
        json!({"type": "array", "items": {"enum": ["notes", "toolbox"]}, "minItems": 1, "maxItems": 1}),
        "one skill per select in JSON mode; only those that share a term with the task (\"Log\" \
         and \"Logs\" meet), best first"
    );
    assert!(first["properties"].get("plan").is_some());
    assert_eq!(common::schema_actions(&schema(&requests[1])), ["run_script", "final_answer"]);
    // An invalid answer does not use the selected skill: the select is still "just made".
    let third = schema(&requests[2]);
    assert_eq!(common::schema_actions(&third), ["run_script", "final_answer"]);
    assert_eq!(
        common::schema_args(&third, "run_script")["properties"]["script"]["enum"],
        json!(["scripts/fail.sh", "scripts/log.sh", "scripts/print.sh", "scripts/sleep.sh"])
    );
    assert!(third["properties"].get("plan_update").is_some());
    // The document is what the model said: in JSON mode it goes back as plain assistant text.
    assert!(request_text(&requests[1]).contains("\"thought\":\"the toolbox logs\""));
    // After the script worked, the note says its result is in (small models repeat the call).
    let worked = "(the last call worked and its result is above: answer if it is enough, do not \
                  repeat it)";
    assert!(request_text(&requests[3]).contains(worked));
    assert!(!request_text(&requests[2]).contains(worked));
    // Streaming: the action's type as soon as it is parsed, the answer's text as deltas.
    let planned: Vec<&Value> =
        ran.data(EventKind::ActionPlanned).into_iter().map(|data| &data["type"]).collect();
    assert_eq!(planned, [&json!("select_skills"), &json!("run_script"), &json!("final_answer")]);
    check_streaming(&ran, "Logged one line.");
    assert_eq!(ran.state()["plan"]["steps"][0]["status"], "done");
    Ok(())
}

/// Every `action_planned` comes before the `model_response` of its call, and the final answer's
/// text arrives as `assistant_delta` events, in more than one piece, before its response.
fn check_streaming(ran: &Ran, answer: &str) {
    for (index, event) in ran.events.iter().enumerate() {
        if event.kind == EventKind::ActionPlanned {
            let response = ran.events[index..]
                .iter()
                .find(|later| later.kind == EventKind::ModelResponse)
                .unwrap();
            assert_eq!(response.turn, event.turn);
        }
    }
    let deltas: Vec<&skills_agent_core::Event> =
        ran.events.iter().filter(|event| event.kind == EventKind::AssistantDelta).collect();
    assert!(deltas.len() > 1, "the answer streamed in pieces: {deltas:?}");
    let streamed: String = deltas.iter().map(|event| text(&event.data["text"])).collect();
    assert_eq!(streamed, answer);
    let last_response =
        ran.events.iter().rfind(|event| event.kind == EventKind::ModelResponse).unwrap();
    let final_planned =
        ran.events.iter().rfind(|event| event.kind == EventKind::ActionPlanned).unwrap();
    assert_eq!(final_planned.data["type"], "final_answer");
    for delta in deltas {
        assert!(final_planned.seq < delta.seq && delta.seq < last_response.seq);
    }
}

async fn tool_calls_stream_the_action_name_and_the_answer_text() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    let model = Arc::new(MockModel::new(vec![
        select("csv-stats"),
        count(&["data.csv"]),
        answer("data.csv has 3 rows of data."),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TASK).await?;
    check_streaming(&ran, "data.csv has 3 rows of data.");
    let turn_kinds: Vec<&str> = ran
        .events
        .iter()
        .filter(|event| event.turn == 2)
        .map(|event| event.kind.as_str())
        .collect();
    assert_eq!(
        turn_kinds,
        [
            "turn_started",
            "model_request",
            "action_planned",
            "model_response",
            "action_validated",
            "action_executed",
            "observation_recorded",
            "turn_finished"
        ]
    );
    Ok(())
}

/// A tool call carrying token usage (`cached` prompt tokens served from the cache).
fn call_with_usage(name: &str, arguments: Value, cached: u64) -> MockReply {
    MockReply::response(&model_adapter::Response {
        tool_calls: vec![model_adapter::ToolCall {
            id: format!("call_{name}_{cached}"),
            name: name.to_owned(),
            arguments,
        }],
        finish_reason: model_adapter::FinishReason::ToolCalls,
        usage: Some(model_adapter::Usage {
            prompt_tokens: 1_000,
            completion_tokens: 20,
            cached_tokens: cached,
            reasoning_tokens: 0,
            timings: None,
        }),
        ..model_adapter::Response::default()
    })
}

async fn the_prompt_prefix_stays_the_same_from_turn_to_turn() -> anyhow::Result<()> {
    let fixture = toolbox();
    let log = |word: &str, cached: u64| {
        call_with_usage(
            "run_script",
            json!({"skill": "toolbox", "script": "scripts/log.sh", "args": [word]}),
            cached,
        )
    };
    let model = Arc::new(MockModel::new(vec![
        call_with_usage("select_skills", json!({"names": ["toolbox"]}), 0),
        log("one", 600),
        call_with_usage("load_resource", json!({"skill": "notes", "path": "reference.md"}), 700),
        log("two", 800),
        call_with_usage("final_answer", json!({"content": "Logged one and two."}), 900),
    ]));
    let ran =
        fixture.run(fixture.agent(&model, AgentConfig::default()), "Log one, then two").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let requests = model.requests();
    // Everything but the trailing note of a turn is the start of every later request.
    for (earlier, request) in requests.iter().enumerate() {
        let kept = request.messages.len() - 1;
        for later in &requests[earlier + 1..] {
            assert_eq!(later.messages[..kept], request.messages[..kept], "request {earlier}");
        }
    }
    assert!(ran.data(EventKind::Compaction).is_empty());
    // Cached prompt tokens are counted per call and summed.
    let cached: Vec<&Value> = ran
        .data(EventKind::ModelResponse)
        .into_iter()
        .map(|data| &data["response"]["usage"]["cached_tokens"])
        .collect();
    assert_eq!(cached, [&json!(0), &json!(600), &json!(700), &json!(800), &json!(900)]);
    assert_eq!(ran.result.usage.cached_tokens, 3_000);
    assert_eq!(ran.result.usage.prompt_tokens, 5_000);
    assert_eq!(ran.state()["counters"]["cached_tokens"], 3_000);
    Ok(())
}

async fn a_long_output_is_shown_with_the_lines_the_task_names() -> anyhow::Result<()> {
    // Record format 21: of an 18-line output, the model reads the first lines, those that name
    // a word of the task its skill's instructions do not use (`south`), and the last one. The
    // whole text is the observation's (stored, and what the answer check reads); no recall is
    // offered for the rest (the local 1.5B recalled it again and again).
    let fixture = toolbox();
    fixture.script(
        "toolbox",
        "scripts/table.sh",
        "echo 'rows: 4'\nfor region in north south east west; do\n  \
         for stat in min max mean sum; do echo \"$region $stat: $region\"; done\ndone\necho end",
    );
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("table", &[]),
        answer("It is west."),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "What is the figure for south?")
        .await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "It is west.", "grounded by the whole output");
    let requests = model.requests();
    let shown = last_observation(&requests[2]);
    assert_eq!(
        shown,
        "[obs-2] run_script toolbox/scripts/table.sh → ok\nrows: 4\n\
         north min: north\nnorth max: north\nsouth min: south\nsouth max: south\n\
         south mean: south\nsouth sum: south\nend\n\
         [10 of 18 lines left out: they name no word of the task]"
    );
    assert!(common::recallable(&requests[2]).is_empty());
    let recorded = ran.data(EventKind::ObservationRecorded);
    // The record keeps the run's `exit code 0` and `stdout:` lines the model was not shown.
    assert_eq!(
        common::text(&recorded[1]["content"]),
        format!("exit code 0\nstdout:\n{}", shown.split_once('\n').unwrap().1)
    );
    let stored = common::text(&recorded[1]["stored"]["path"]);
    let whole = std::fs::read_to_string(ran.run_dir.join(&stored))?;
    assert!(whole.contains("east mean: east") && whole.ends_with("end"), "{whole}");
    let report = skills_agent_core::replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

/// Settings under which a few 20-line outputs pass `compact_at` and get compacted.
fn compacting_config() -> AgentConfig {
    let mut config = AgentConfig::default();
    config.budgets.max_context_chars = 5_000;
    config.context.compact_at = 0.6;
    config.context.keep_recent_observations = 2;
    config
}

/// Selects `toolbox`, then prints `lines`-line outputs until the runtime offers to recall
/// two observations; recalls the second one (`obs-2`, the first output) once, then answers.
fn printing_model(lines: &'static str) -> Arc<common::FnModel> {
    let mut recalled = false;
    common::FnModel::new(move |request| {
        let recallable = common::recallable(request);
        if recallable.len() >= 2 && !recalled {
            recalled = true;
            return call("recall_observation", json!({"id": recallable[1]}));
        }
        match common::observations_in(request) {
            0 => select("toolbox"),
            seen if !recalled && seen < 12 => tool("print", &[lines, &format!("output {seen}")]),
            _ => answer("Printed and recalled."),
        }
    })
}

async fn compaction_shortens_old_observations_and_recall_brings_them_back() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = printing_model("20");
    let builder = fixture.agent_with(model.clone(), compacting_config());
    let ran = fixture.run(builder, "Print outputs").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let compactions: Vec<&skills_agent_core::Event> =
        ran.events.iter().filter(|event| event.kind == EventKind::Compaction).collect();
    // Each compaction cuts all but the two newest observations, the oldest first.
    assert_eq!(compactions[0].data["compacted"], json!(["obs-1"]));
    assert_eq!(compactions[1].data["compacted"], json!(["obs-2"]));
    for compaction in &compactions {
        assert!(compaction.data["after_chars"].as_u64() < compaction.data["before_chars"].as_u64());
    }
    assert_eq!(ran.result.counters.compactions as usize, compactions.len());
    let all_compacted: Vec<Value> = compactions
        .iter()
        .flat_map(|compaction| compaction.data["compacted"].as_array().unwrap().clone())
        .collect();
    assert_eq!(ran.state()["compacted"], Value::Array(all_compacted));
    // A compaction runs at the head of the next turn: its request is the first to show it.
    let requests = model.requests();
    let after = &requests[compactions[1].turn as usize];
    let before = &requests[compactions[0].turn as usize - 1];
    let shortened: Vec<String> = after
        .messages
        .iter()
        .map(message_text)
        .filter(|text| text.contains("[compacted;"))
        .collect();
    assert_eq!(shortened.len(), 2);
    assert!(shortened[0].starts_with("[obs-1] select_skills toolbox → ok\n# Skill `toolbox`"));
    assert!(shortened[0].ends_with("… [compacted; recall_observation obs-1 shows it again]"));
    assert_eq!(
        shortened[1],
        "[obs-2] run_script toolbox/scripts/print.sh 20 output 1 → ok\nline 1 of 20: output 1… \
         [compacted; recall_observation obs-2 shows it again]"
    );
    assert_eq!(after.messages[..2], before.messages[..2], "system and task are never rewritten");
    assert_eq!(common::recallable(before), Vec::<String>::new(), "nothing to recall before");
    assert_eq!(common::recallable(after), ["obs-1", "obs-2"]);
    // Recalled once, obs-2 is whole again in the transcript: not offered again (format 21).
    let recall_turn = ran
        .data(EventKind::ActionValidated)
        .iter()
        .position(|data| data["action"]["type"] == "recall_observation")
        .unwrap();
    assert!(!common::recallable(&requests[recall_turn + 1]).contains(&"obs-2".to_owned()));
    // Recall: the full text of obs-2 comes back as a new observation with the same content.
    let recorded = ran.data(EventKind::ObservationRecorded);
    let original = recorded.iter().find(|data| data["id"] == "obs-2").unwrap();
    let recall =
        recorded.iter().find(|data| data["action"]["type"] == "recall_observation").unwrap();
    assert_eq!(recall["action"]["args"]["id"], "obs-2");
    assert_eq!(recall["status"], "ok");
    assert_eq!(recall["content"], original["content"]);
    assert!(text(&original["content"]).ends_with("line 20 of 20: output 1"));
    Ok(())
}

async fn large_outputs_are_stored_by_sha256_and_keep_their_reference() -> anyhow::Result<()> {
    use sha2::Digest;
    let fixture = toolbox();
    let model = printing_model("60");
    let mut config = compacting_config();
    config.context.inline_observation_chars = 600;
    let ran = fixture.run(fixture.agent_with(model.clone(), config), "Print outputs").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let recorded = ran.data(EventKind::ObservationRecorded);
    let big = recorded.iter().find(|data| data["id"] == "obs-2").unwrap();
    let stored = &big["stored"];
    let sha256 = text(&stored["sha256"]);
    assert_eq!(stored["path"], format!("observations/{sha256}.txt"));
    let full = std::fs::read_to_string(ran.run_dir.join(text(&stored["path"])))?;
    let digest: String =
        sha2::Sha256::digest(full.as_bytes()).iter().map(|byte| format!("{byte:02x}")).collect();
    assert_eq!(digest, sha256);
    assert_eq!(stored["bytes"], full.len());
    assert_eq!(big["chars"], full.chars().count());
    assert!(full.starts_with("exit code 0\nstdout:\nline 1 of 60: output 1\n"));
    assert!(full.ends_with("line 60 of 60: output 1"));
    // The model sees head and tail with the reference, not the whole text.
    let shown = text(&big["content"]);
    let left_out = full.chars().count() - 400 - 200;
    assert_eq!(
        shown,
        format!(
            "{}\n… [{left_out} of {} characters left out; full text in observations/{sha256}.txt] …\n{}",
            full.chars().take(400).collect::<String>(),
            full.chars().count(),
            full.chars().skip(full.chars().count() - 200).collect::<String>()
        )
    );
    // Compacted, it keeps its id and its file reference; recalled, the same excerpt returns.
    let requests = model.requests();
    let compacted = requests
        .iter()
        .flat_map(|request| request.messages.iter().map(message_text))
        .find(|text| text.starts_with("[obs-2]") && text.contains("[compacted;"))
        .unwrap();
    assert!(
        compacted.ends_with(&format!(
            "[compacted; recall_observation obs-2 shows it again; full text in observations/{sha256}.txt]"
        )),
        "{compacted}"
    );
    let recall =
        recorded.iter().find(|data| data["action"]["type"] == "recall_observation").unwrap();
    assert_eq!(recall["action"]["args"]["id"], "obs-2");
    assert_eq!(recall["content"], big["content"], "the same head and tail, the same reference");
    assert_eq!(recall["stored"], big["stored"]);
    let files = common::files_under(&ran.run_dir.join("observations"));
    let names: Vec<String> =
        files.iter().map(|path| path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for data in &recorded {
        if let Some(sha) = data["stored"]["sha256"].as_str() {
            assert!(names.contains(&format!("{sha}.txt")), "{sha}");
        }
    }
    assert_eq!(
        names.len(),
        recorded
            .iter()
            .filter(|data| !data["stored"].is_null())
            .map(|data| &data["stored"]["sha256"])
            .collect::<std::collections::HashSet<_>>()
            .len(),
        "one file per content"
    );
    Ok(())
}

async fn a_model_summary_after_compaction_is_one_counted_call() -> anyhow::Result<()> {
    let fixture = toolbox();
    let summary = "obs-1 loaded the toolbox skill.";
    for fails in [false, true] {
        let printing = printing_model("20");
        let model = common::FnModel::new({
            let printing = printing.clone();
            move |request| {
                let last = common::note(request);
                if request.tools.is_empty() && last.starts_with("Summarise") {
                    return if fails {
                        MockReply::error("summary failed", false)
                    } else {
                        MockReply::text(summary)
                    };
                }
                printing.choose(request)
            }
        });
        let mut config = compacting_config();
        config.context.summarize_with_model = true;
        let ran = fixture.run(fixture.agent_with(model.clone(), config), "Print outputs").await?;
        assert_eq!(ran.result.outcome, Outcome::Completed, "fails: {fails}");
        let compactions = ran.data(EventKind::Compaction);
        let purposes: Vec<&Value> =
            ran.data(EventKind::ModelRequest).into_iter().map(|data| &data["purpose"]).collect();
        let summaries = purposes.iter().filter(|purpose| **purpose == "summary").count();
        assert_eq!(summaries, compactions.len(), "one summary call per compaction");
        assert_eq!(ran.result.model_calls as usize, ran.result.turns as usize + summaries);
        let requests = model.requests();
        let summary_request = requests.iter().position(|request| request.tools.is_empty()).unwrap();
        assert!(common::note(&requests[summary_request]).starts_with(
            "Summarise in at most 8 short lines what the observations obs-1 established"
        ));
        let next = request_text(&requests[summary_request + 1]);
        if fails {
            assert_eq!(compactions[0]["summary"], "");
            assert!(!next.contains("Summary of compacted observations"));
        } else {
            assert_eq!(compactions[0]["summary"], summary);
            assert!(next.contains(&format!("Summary of compacted observations obs-1:\n{summary}")));
        }
    }
    Ok(())
}

const ENV_SECRET: &str = "sk-envplanted-4f9a1c7e2b55";
const CONFIG_SECRET: &str = "db-pass-93jd81ks0q";

async fn secrets_from_env_config_and_script_output_never_reach_the_run_directory()
-> anyhow::Result<()> {
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/cat.sh", "cat \"$1\"");
    // The script's output carries both secrets, once short and once inside a stored output.
    std::fs::write(
        fixture.workspace.join("token.txt"),
        format!("token={ENV_SECRET} db={CONFIG_SECRET}\n"),
    )?;
    let mut big: String = (1..=80).map(|line| format!("filler line {line}\n")).collect();
    big.insert_str(big.len() / 2, &format!("hidden {ENV_SECRET} and {CONFIG_SECRET}\n"));
    std::fs::write(fixture.workspace.join("big.txt"), big)?;
    // A real environment: the key is a variable of the child process, found by its name; the
    // other is named in the configuration.
    let status = fixture
        .child("redacting_child")
        .env("SKILLS_TEST_API_KEY", ENV_SECRET)
        .env("DEPLOY_DB_URL", CONFIG_SECRET)
        .status()?;
    assert!(status.success(), "the child run failed: {status}");
    let run_dir = fixture.only_run_dir();
    let events = common::well_formed(&run_dir);
    let files = common::files_under(&run_dir);
    let names: Vec<String> = files
        .iter()
        .map(|path| path.strip_prefix(&run_dir).unwrap().display().to_string())
        .collect();
    for expected in ["events.jsonl", "final.md", "inputs/request.txt", "state.json"] {
        assert!(names.contains(&expected.to_owned()), "{names:?}");
    }
    assert!(names.iter().any(|name| name.starts_with("observations/")), "{names:?}");
    for file in &files {
        let bytes = std::fs::read(file)?;
        let content = String::from_utf8_lossy(&bytes);
        for secret in [ENV_SECRET, CONFIG_SECRET] {
            assert!(!content.contains(secret), "{} holds {secret}", file.display());
        }
    }
    let final_md = std::fs::read_to_string(run_dir.join("final.md"))?;
    assert_eq!(
        final_md,
        "The token was [REDACTED:SKILLS_TEST_API_KEY] and the password [REDACTED:DEPLOY_DB_URL].\n"
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("inputs/request.txt"))?,
        "Check the token [REDACTED:SKILLS_TEST_API_KEY] in token.txt"
    );
    let observation =
        events.iter().filter(|event| event.kind == EventKind::ObservationRecorded).nth(1).unwrap();
    assert_eq!(
        observation.data["content"],
        "exit code 0\nstdout:\ntoken=[REDACTED:SKILLS_TEST_API_KEY] db=[REDACTED:DEPLOY_DB_URL]"
    );
    Ok(())
}

/// The child of the redaction test: one run whose task, model answers and script outputs hold
/// the secrets of its environment. It fails if the model or a sink ever saw one.
async fn redacting_child() -> anyhow::Result<()> {
    let fixture = common::Fixture::of_parent();
    let redactor =
        skills_agent_core::Redactor::from_env(std::env::vars(), &["DEPLOY_DB_URL".to_owned()]);
    let secrets = [std::env::var("SKILLS_TEST_API_KEY")?, std::env::var("DEPLOY_DB_URL")?];
    let cat = |file: &str| run_script("toolbox", "scripts/cat.sh", &[file]);
    let model = Arc::new(MockModel::new(vec![
        call(
            "select_skills",
            json!({"names": ["toolbox"], "thought": format!("the password is {}", secrets[1])}),
        ),
        cat("token.txt"),
        cat("big.txt"),
        answer(&format!("The token was {} and the password {}.", secrets[0], secrets[1])),
    ]));
    let sink = Arc::new(skills_agent_core::MemorySink::new());
    let mut config = AgentConfig::default();
    config.context.inline_observation_chars = 600;
    let builder = fixture.agent(&model, config).redactor(redactor).sink(sink.clone());
    let result =
        builder.build()?.run(&format!("Check the token {} in token.txt", secrets[0])).await?;
    anyhow::ensure!(result.outcome == Outcome::Completed, "{:?}", result.outcome);
    let seen_by_model = serde_json::to_string(&model.requests())?;
    let seen_by_sink = serde_json::to_string(&sink.events())?;
    for secret in &secrets {
        anyhow::ensure!(!seen_by_model.contains(secret.as_str()), "the model saw a secret");
        anyhow::ensure!(!seen_by_sink.contains(secret.as_str()), "a sink saw a secret");
        anyhow::ensure!(!result.final_text.contains(secret.as_str()), "the result holds it");
    }
    anyhow::ensure!(
        seen_by_model.contains("[REDACTED:SKILLS_TEST_API_KEY]"),
        "the model saw the redacted form"
    );
    Ok(())
}

/// A writer into a shared buffer (for the console sink).
#[derive(Clone, Default)]
struct SharedBuffer(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn events_are_numbered_enveloped_and_reach_every_sink() -> anyhow::Result<()> {
    let fixture = csv_fixture();
    let model = Arc::new(MockModel::new(vec![
        select("csv-stats"),
        count(&["data.csv"]),
        answer("data.csv has 3 rows."),
    ]));
    let broadcast = skills_agent_core::BroadcastSink::new(1_024);
    let mut subscriber = broadcast.subscribe();
    let memory = Arc::new(skills_agent_core::MemorySink::new());
    let console_out = SharedBuffer::default();
    let console = skills_agent_core::ConsoleSink::new(
        Box::new(console_out.clone()),
        skills_agent_core::ConsoleOptions { color: false, stream_answer: true },
    );
    let builder = fixture
        .agent(&model, AgentConfig::default())
        .sink(Arc::new(broadcast))
        .sink(memory.clone())
        .sink(Arc::new(console));
    let ran = fixture.run(builder, TASK).await?;
    // The file, the memory sink and the broadcast subscriber got the same events, all fields.
    assert_eq!(memory.events(), ran.events);
    let mut received = Vec::new();
    while let Ok(event) = subscriber.try_recv() {
        received.push(event);
    }
    assert_eq!(received, ran.events);
    // seq strictly increasing from 1; turns framed by turn_started / turn_finished.
    let seqs: Vec<u64> = ran.events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=ran.events.len() as u64).collect::<Vec<_>>());
    for turn in 1..=3 {
        let kinds: Vec<&str> = ran
            .events
            .iter()
            .filter(|event| event.turn == turn)
            .map(|event| event.kind.as_str())
            .collect();
        assert_eq!(kinds.first(), Some(&"turn_started"), "turn {turn}");
        let end = if turn == 3 { "run_finished" } else { "turn_finished" };
        assert_eq!(kinds.last(), Some(&end), "turn {turn}");
    }
    assert_eq!(ran.events[0].turn, 0);
    assert_eq!(ran.events[0].run_id, ran.result.run_id);
    assert_eq!(ran.run_dir.file_name().unwrap().to_str(), Some(ran.result.run_id.as_str()));
    // One line per event in events.jsonl.
    let lines = std::fs::read_to_string(ran.run_dir.join("events.jsonl"))?.lines().count();
    assert_eq!(lines, ran.events.len());
    // The console showed the run as it happened.
    let shown = String::from_utf8(console_out.0.lock().unwrap().clone())?;
    assert!(shown.contains(&ran.result.run_id), "{shown}");
    assert!(shown.contains("data.csv has 3 rows."), "{shown}");
    assert!(
        shown.contains("completed · 3 turns · 3 model calls · 2 tool calls · 1 script run"),
        "{shown}"
    );
    Ok(())
}

async fn a_runs_directory_inside_the_workspace_is_read_only_to_scripts() -> anyhow::Result<()> {
    let fixture = toolbox();
    // Tries to append to every file of every run, and to plant a file among the runs.
    fixture.script(
        "toolbox",
        "scripts/tamper.sh",
        "status=0\nfor file in runs/*/events.jsonl runs/*/inputs/request.txt; do\n  \
         echo tampered >> \"$file\" || status=1\ndone\necho planted > runs/planted.txt || status=1\n\
         exit $status",
    );
    let runs = fixture.workspace.join("runs");
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("tamper", &[]),
        answer("The run directory stayed as it was."),
    ]));
    let builder = fixture.agent(&model, AgentConfig::default()).runs_dir(&runs);
    let ran = fixture.run(builder, "Tamper with the runs").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.statuses(), ["ok", "failed"]);
    let refused = &ran.observations()[1].1;
    for target in [
        format!("runs/{}/events.jsonl", ran.result.run_id),
        format!("runs/{}/inputs/request.txt", ran.result.run_id),
        "runs/planted.txt".to_owned(),
    ] {
        assert!(refused.contains(&format!("cannot create {target}: ")), "{refused}");
    }
    assert!(!runs.join("planted.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ran.run_dir.join("inputs/request.txt"))?,
        "Tamper with the runs"
    );
    let text = std::fs::read_to_string(ran.run_dir.join("events.jsonl"))?;
    assert!(!text.contains("tampered\n"), "events.jsonl was not written to by the script");
    assert!(ran.run_dir.join("artifacts").is_dir());
    Ok(())
}

async fn an_answer_without_the_figures_the_task_asks_for_gets_the_results() -> anyhow::Result<()> {
    for (answer_text, expected) in [
        (
            "Printed them both.",
            "Printed them both.\n\nResults:\n\
             - run_script toolbox/scripts/print.sh 2 w: line 1 of 2: w · line 2 of 2: w\n\
             - run_script toolbox/scripts/log.sh 3: logged 3",
        ),
        // An answer with figures, or one that admits it cannot tell, stays as written.
        ("Printed 2 lines and logged 3.", "Printed 2 lines and logged 3."),
        ("I cannot tell what was printed.", "I cannot tell what was printed."),
    ] {
        let fixture = toolbox();
        let model = Arc::new(MockModel::new(vec![
            select("toolbox"),
            tool("print", &["2", "w"]),
            tool("log", &["3"]),
            answer(answer_text),
        ]));
        let ran = fixture
            .run(fixture.agent(&model, AgentConfig::default()), "Print 2 lines of w, then log 3")
            .await?;
        assert_eq!(ran.result.final_text, expected);
        assert_eq!(ran.finished()["final_text"], expected);
    }
    Ok(())
}
