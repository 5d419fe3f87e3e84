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
