//! Loop strategies other than `react`, on scripted models over real skills and real scripts:
//! `plan-execute-think` (seed 003) — a plan run and a completing think, a batch cut short by a
//! failing step, a plan of too many steps rejected and counted, the round limit answered with
//! the last `user_summary`, the forced summary call and the deterministic text behind it,
//! JSON mode, replay and resume.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use common::{call, purposes, request_text, toolbox};
use model_adapter::{MockModel, MockReply, ResponseFormat, ToolChoice};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use skills_agent_core::{AgentConfig, DecideMode, EventKind, Outcome, STRATEGIES, replay_check};

fn main() -> ExitCode {
    common::main(tests![
        plan_execute_think_is_a_known_strategy,
        a_plan_runs_and_a_completing_think_answers,
        a_failing_step_ends_the_batch_and_think_follows,
        a_plan_of_more_than_eight_steps_is_rejected_and_counted,
        a_round_that_only_selected_skills_goes_on_to_the_next_plan,
        a_batch_ends_after_a_step_that_selected_a_skill,
        a_planned_repeat_of_a_call_that_worked_is_not_run_again,
        a_plan_holds_a_step_for_each_value_of_the_task_left,
        a_round_whose_every_step_was_refused_cannot_complete,
        a_step_refused_before_it_ran_does_not_end_the_batch,
        a_round_whose_every_step_was_refused_does_not_count_toward_the_limit,
        a_round_past_its_time_limit_goes_to_think,
        the_round_limit_answers_with_the_last_user_summary,
        without_a_summary_one_forced_call_answers_then_a_deterministic_text,
        json_mode_asks_for_one_document_under_each_phase_schema,
        replay_reproduces_a_plan_execute_think_run,
        a_plan_execute_think_run_resumes_from_any_point_of_its_record,
    ])
}

const TASK: &str = "Log one and two with the toolbox";

fn config() -> AgentConfig {
    AgentConfig { strategy: "plan-execute-think".to_owned(), ..AgentConfig::default() }
}

/// A `plan_tool_call` answer with `steps` as `(tool, args)`.
fn plan(complexity: Option<&str>, steps: &[(&str, Value)]) -> MockReply {
    let steps: Vec<Value> =
        steps.iter().map(|(tool, args)| json!({"tool": tool, "args": args})).collect();
    let mut arguments = json!({"reasoning": "next batch", "steps": steps});
    if let Some(complexity) = complexity {
        arguments["complexity"] = json!(complexity);
    }
    call("plan_tool_call", arguments)
}

fn select_step() -> (&'static str, Value) {
    ("select_skills", json!({"names": ["toolbox"]}))
}

fn script_step(script: &str, args: &[&str]) -> (&'static str, Value) {
    (
        "run_script",
        json!({"skill": "toolbox", "script": format!("scripts/{script}.sh"), "args": args}),
    )
}

fn think(summary: &str, completed: bool) -> MockReply {
    call(
        "think",
        json!({
            "internal_analysis": "looked at the observations",
            "user_summary": summary,
            "task_completed": completed,
            "next_steps_preview": "",
        }),
    )
}

/// The replies of the two-round run most tests start from: a round that only selects the
/// skill (no think: nothing ran to think about), then a round running its scripts.
fn two_rounds() -> Vec<MockReply> {
    vec![
        plan(Some("simple"), &[select_step()]),
        plan(None, &[script_step("log", &["one"]), script_step("log", &["two"])]),
        think("Logged one and two.", true),
    ]
}

/// A run of `first`, then a round logging "one" and a think completing with "Logged one.",
/// which is its answer (with the fixture, which holds the run's folders).
async fn logging_one_after(
    first: Vec<MockReply>,
) -> anyhow::Result<(common::Ran, Arc<MockModel>, common::Fixture)> {
    let fixture = toolbox();
    let last = vec![plan(None, &[script_step("log", &["one"])]), think("Logged one.", true)];
    let model = Arc::new(MockModel::new([first, last].concat()));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, "Logged one.")
    );
    Ok((ran, model, fixture))
}

async fn plan_execute_think_is_a_known_strategy() -> anyhow::Result<()> {
    assert!(STRATEGIES.starts_with(&["react", "plan-execute-think"]), "{STRATEGIES:?}");
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(Vec::new()));
    let mut config = config();
    config.strategy = "plan-thought-nothing".to_owned();
    let error = fixture.agent(&model, config).build().unwrap_err().to_string();
    assert!(error.contains("known: react, plan-execute-think"), "{error}");
    Ok(())
}

async fn a_plan_runs_and_a_completing_think_answers() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(two_rounds()));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one and two.");
    assert_eq!(ran.final_md(), "Logged one and two.\n");
    assert_eq!(
        (ran.result.turns, ran.result.model_calls, ran.result.tool_calls, ran.result.script_runs),
        (2, 3, 3, 2)
    );
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n");
    assert_eq!(purposes(&ran.events), ["plan", "plan", "think"]);
    assert_eq!(ran.statuses(), ["ok", "ok", "ok"]);
    // Each phase offers exactly its own tool, named in tool_choice.
    let requests = model.requests();
    let forced: Vec<(Vec<String>, ToolChoice)> = requests
        .iter()
        .map(|request| (common::tool_names(request), request.tool_choice.clone()))
        .collect();
    let named = |tool: &str| (vec![tool.to_owned()], ToolChoice::Named(tool.to_owned()));
    assert_eq!(forced, [named("plan_tool_call"), named("plan_tool_call"), named("think")]);
    // The first plan judges complexity; later ones may not; steps are the actions allowed now.
    let first = &requests[0].tools[0].parameters;
    assert_eq!(first["required"], json!(["reasoning", "steps", "complexity"]));
    // From format 17 a plan's reasoning and a think's preview are bounded at 120 characters
    // (at 300 the local 1.5B filled the reasoning to the bound in half its plans).
    assert_eq!(first["properties"]["reasoning"]["maxLength"], json!(120));
    let think = &requests[2].tools[0].parameters;
    assert_eq!(think["properties"]["next_steps_preview"]["maxLength"], json!(120));
    let second = &requests[1].tools[0].parameters;
    assert_eq!(second["required"], json!(["reasoning", "steps"]));
    let step_tools: Vec<&Value> = second["properties"]["steps"]["items"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|variant| &variant["properties"]["tool"]["const"])
        .collect();
    assert_eq!(step_tools, [&json!("run_script")]);
    // Each round's plan is recorded, with its steps' statuses after the batch.
    let plans = ran.data(EventKind::PlanUpdated);
    let last = plans.last().unwrap();
    assert_eq!(last["round"], 2);
    assert_eq!(last["not_run"], 0);
    let statuses: Vec<&Value> =
        last["plan"]["steps"].as_array().unwrap().iter().map(|step| &step["status"]).collect();
    assert_eq!(statuses, [&json!("done"), &json!("done")]);
    assert_eq!(ran.data(EventKind::PlanCreated).len(), 1);
    // The selecting round does not count toward the limit: a simple task's 2 rounds move to 3.
    let turns = ran.data(EventKind::TurnStarted);
    assert_eq!(turns[1]["round"], json!([2, 3]));
    let state = ran.state();
    assert_eq!(state["strategy_state"]["round"], 2);
    assert_eq!(state["strategy_state"]["preparation_rounds"], 1);
    assert_eq!(state["strategy_state"]["complexity"], "simple");
    assert_eq!(state["strategy_state"]["last_user_summary"], "Logged one and two.");
    Ok(())
}

async fn a_failing_step_ends_the_batch_and_think_follows() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(Some("medium"), &[select_step()]),
        plan(
            None,
            &[
                script_step("log", &["one"]),
                script_step("fail", &["x"]),
                script_step("log", &["two"]),
            ],
        ),
        think("Logged one; the second step failed.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one; the second step failed.");
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    assert_eq!(ran.statuses(), ["ok", "ok", "failed"]);
    assert_eq!(purposes(&ran.events), ["plan", "plan", "think"]);
    let last = *ran.data(EventKind::PlanUpdated).last().unwrap();
    assert_eq!((last["ran"].clone(), last["not_run"].clone()), (json!(2), json!(1)));
    let statuses: Vec<&Value> =
        last["plan"]["steps"].as_array().unwrap().iter().map(|step| &step["status"]).collect();
    assert_eq!(statuses, [&json!("done"), &json!("skipped"), &json!("pending")]);
    // The think saw the failure, and its note lists the round's results next to where the
    // summary is asked for.
    let think_request = &model.requests()[2];
    assert!(common::request_text(think_request).contains("cannot handle x"));
    let note = common::note(think_request);
    assert!(
        note.contains(
            "Results so far:\n- run_script toolbox/scripts/log.sh one: logged one\n\
             - run_script toolbox/scripts/fail.sh x: failed: cannot handle x\nTask: "
        ),
        "{note}"
    );
    Ok(())
}

async fn a_plan_of_more_than_eight_steps_is_rejected_and_counted() -> anyhow::Result<()> {
    let fixture = toolbox();
    let nine: Vec<(&str, Value)> = (0..9).map(|_| select_step()).collect();
    let notes = ("select_skills", json!({"names": ["notes"]}));
    let model = Arc::new(MockModel::new(vec![
        plan(Some("medium"), &nine),
        plan(Some("simple"), &[notes]),
        think("Selected the notes; nothing to log.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    // The rejected round ran nothing and had no think; its complexity was not taken.
    assert_eq!(purposes(&ran.events), ["plan", "plan", "think"]);
    let observations = ran.observations();
    assert_eq!(observations[0].0, "invalid_action");
    assert!(observations[0].1.contains("the plan has 9 steps; at most 8 steps per round"));
    assert_eq!(ran.statuses(), ["invalid_action", "ok"]);
    assert_eq!(ran.result.tool_calls, 1);
    let state = ran.state();
    assert_eq!(state["strategy_state"]["rejected_plans"], 1);
    assert_eq!(state["strategy_state"]["max_rounds"], 3);
    Ok(())
}

async fn the_round_limit_answers_with_the_last_user_summary() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(Some("simple"), &[select_step()]),
        plan(None, &[script_step("log", &["one"])]),
        think("Logged one; two is left.", false),
        plan(None, &[script_step("log", &["one"])]),
        think("Logged one again; two is left.", false),
        MockReply::text("Done: logged one. Blocked: the round limit. Next: log two."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    // From format 37 a think that does not complete is no ending (until then its summary was,
    // with no extra call): the degraded answer is asked for, as in react. Two rounds of work
    // for a simple task, after the round that only selected.
    assert_eq!(ran.result.final_text, "Done: logged one. Blocked: the round limit. Next: log two.");
    assert_eq!(purposes(&ran.events).last().map(String::as_str), Some("degraded_answer"));
    assert_eq!(ran.result.model_calls, 6);
    assert_eq!(ran.result.turns, 3);
    assert_eq!(model.remaining(), 0);
    assert_eq!(ran.finished()["degraded"], true);
    Ok(())
}

async fn without_a_summary_one_forced_call_answers_then_a_deterministic_text() -> anyhow::Result<()>
{
    for (forced, expected) in [
        (MockReply::text("Selected the toolbox; nothing logged."), None),
        (call("think", json!({"user_summary": "no"})), Some("I could not finish the task")),
    ] {
        let fixture = toolbox();
        let model = Arc::new(MockModel::new(vec![
            plan(Some("simple"), &[select_step()]),
            plan(None, &[script_step("log", &["one"])]),
            think("  ", false),
            plan(None, &[script_step("log", &["one"])]),
            call("think", json!({"internal_analysis": "done", "task_completed": false})),
            forced,
        ]));
        let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
        assert_eq!(ran.result.outcome, Outcome::MaxTurns);
        assert_eq!(
            purposes(&ran.events),
            ["plan", "plan", "think", "plan", "think", "degraded_answer"]
        );
        let last = model.requests().pop().unwrap();
        assert!(last.tools.is_empty(), "the forced summary offers no tools");
        match expected {
            None => assert_eq!(ran.result.final_text, "Selected the toolbox; nothing logged."),
            Some(start) => {
                assert!(ran.result.final_text.starts_with(start), "{}", ran.result.final_text);
                assert!(ran.result.final_text.contains("run_script toolbox/scripts/log.sh one"));
            }
        }
        let invalid: Vec<String> = ran
            .observations()
            .into_iter()
            .filter(|(status, _)| status == "invalid_action")
            .map(|(_, content)| content)
            .collect();
        assert_eq!(invalid.len(), 2);
        assert!(invalid[0].contains("non-empty `user_summary`"));
        assert!(ran.state()["strategy_state"]["last_user_summary"].is_null());
    }
    Ok(())
}

async fn json_mode_asks_for_one_document_under_each_phase_schema() -> anyhow::Result<()> {
    let fixture = toolbox();
    let document = |value: Value| MockReply::text(&format!("```json\n{value}\n```"));
    // The ranking is sure of toolbox: the runtime selects it in a turn of its own (format 32),
    // and the first plan is made with its instructions read.
    let model = Arc::new(MockModel::new(vec![
        document(json!({"complexity": "simple", "reasoning": "log", "steps": [
            {"args": {"args": ["one"], "script": "scripts/log.sh", "skill": "toolbox"}, "tool": "run_script"}]})),
        document(
            json!({"internal_analysis": "ok", "task_completed": true, "user_summary": "Logged one."}),
        ),
    ]));
    let config = AgentConfig { decide: DecideMode::Json, ..config() };
    let ran = fixture.run(fixture.agent(&model, config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "Logged one.");
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    let names: Vec<String> = model
        .requests()
        .iter()
        .map(|request| match &request.response_format {
            ResponseFormat::JsonSchema { name, .. } if request.tools.is_empty() => name.clone(),
            other => panic!("not a schema-only request: {other:?}"),
        })
        .collect();
    assert_eq!(names, ["plan_tool_call", "think"]);
    let validated = ran.data(EventKind::ActionValidated);
    assert_eq!(validated[0]["chosen_by"], "ranking", "{validated:?}");
    assert!(validated[1].get("chosen_by").is_none(), "{validated:?}");
    assert!(request_text(&model.requests()[0]).contains("Use the scripts."));
    let turns: Vec<&Value> =
        ran.data(EventKind::TurnStarted).into_iter().map(|turn| &turn["round"]).collect();
    assert_eq!(turns, [&Value::Null, &json!([1, 3])], "the selection's turn is no round");
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn replay_reproduces_a_plan_execute_think_run() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut replies = two_rounds();
    replies.insert(1, plan(None, &[script_step("fail", &["x"])]));
    replies.insert(2, think("The fail script failed.", false));
    replies.insert(3, MockReply::text("The fail script failed: cannot handle x."));
    let mut config = config();
    config.budgets.max_turns = 2;
    let model = Arc::new(MockModel::new(replies));
    let ran = fixture.run(fixture.agent(&model, config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    assert_eq!(ran.result.final_text, "The fail script failed: cannot handle x.");
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    assert_eq!(report.events_compared, ran.events.len());
    assert!(report.compliance.final_text_present);
    assert_eq!(report.turns.len(), 2);
    Ok(())
}

async fn a_plan_execute_think_run_resumes_from_any_point_of_its_record() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(two_rounds()));
    let original = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(original.result.outcome, Outcome::Completed);
    let (lines, wanted) = original.record()?;
    let scratch = tempfile::tempdir()?;
    for kept in 1..lines.len() {
        let case = scratch.path().join(kept.to_string());
        let (runs, workspace, run_dir) = original.cut(&lines, kept, &case)?;
        // The workspace as the killed run left it: logged lines whose observation was recorded.
        let prefix: Vec<Value> =
            lines[..kept].iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        let mut logged = String::new();
        for (index, event) in prefix.iter().enumerate() {
            if event["type"] == "action_executed" && index + 1 < prefix.len() {
                let args = &event["data"]["action"]["args"];
                if args["script"] == "scripts/log.sh" {
                    logged.push_str(&format!("{}\n", args["args"][0].as_str().unwrap()));
                }
            }
        }
        std::fs::create_dir_all(&workspace)?;
        std::fs::write(workspace.join("log.txt"), &logged)?;
        let answered = prefix.iter().filter(|event| event["type"] == "model_response").count();
        let model = Arc::new(MockModel::new(two_rounds().split_off(answered)));
        let agent =
            fixture.agent(&model, config()).workspace(&workspace).runs_dir(&runs).build()?;
        let result =
            agent.resume(&run_dir).await.unwrap_or_else(|error| panic!("cut {kept}: {error}"));
        assert_eq!(result.outcome, Outcome::Completed, "cut {kept}");
        assert_eq!(model.remaining(), 0, "cut {kept}");
        assert_eq!(std::fs::read_to_string(workspace.join("log.txt"))?, "one\ntwo\n", "cut {kept}");
        let events = common::well_formed(&run_dir);
        original.assert_resumed(&result, &events, &wanted, &format!("cut {kept}"));
    }
    Ok(())
}

async fn a_round_that_only_selected_skills_goes_on_to_the_next_plan() -> anyhow::Result<()> {
    // Taken: nothing ran to think about, so the next plan follows at once.
    let (ran, model, _fixture) =
        logging_one_after(vec![plan(Some("simple"), &[select_step()])]).await?;
    assert_eq!(purposes(&ran.events), ["plan", "plan", "think"]);
    assert_eq!(ran.state()["strategy_state"]["preparation_rounds"], 1);
    let requests = model.requests();
    // The second plan reads the skill's instructions and offers its scripts; its round line
    // counts the limit moved on by the selecting round.
    let note = common::request_text(&requests[1]);
    assert!(note.contains("Use the scripts."), "{note}");
    assert!(note.contains("Round 2 of 3"), "{note}");
    // Once a script ran, the think may complete.
    let second = &requests[2].tools[0].parameters["properties"]["task_completed"];
    assert_eq!(second, &json!({"type": "boolean"}));
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_batch_ends_after_a_step_that_selected_a_skill() -> anyhow::Result<()> {
    // The local 1.5B planned "select file-finder, run csv-summary on `<file named in the
    // task>`" and "select csv-summary, select unit-converter": steps planned before the
    // selected skill's instructions were read. From format 15 the batch ends after the
    // selection (before, the second select was refused: "a skill was just selected"), and the
    // round goes on to the next plan like one that only selected.
    let (ran, model, _fixture) =
        logging_one_after(vec![plan(Some("simple"), &[select_step(), select_step()])]).await?;
    assert_eq!(purposes(&ran.events), ["plan", "plan", "think"]);
    assert_eq!(ran.statuses(), ["ok", "ok"]);
    let first = ran.data(EventKind::PlanUpdated)[0];
    assert_eq!((first["ran"].clone(), first["not_run"].clone()), (json!(1), json!(1)));
    let statuses: Vec<&Value> =
        first["plan"]["steps"].as_array().unwrap().iter().map(|step| &step["status"]).collect();
    // From format 16 the steps cut off leave the plan (the next plan note showed them, and the
    // local 1.5B planned them again).
    assert_eq!(statuses, [&json!("done")]);
    assert_eq!(ran.state()["strategy_state"]["preparation_rounds"], 1);
    // The next plan reads the skill's instructions; its note shows the last plan without its
    // reasoning (format 16: the local 1.5B copied it into its next plan word for word).
    let note = common::request_text(&model.requests()[1]);
    assert!(note.contains("Use the scripts."), "{note}");
    let plan_note = common::note(&model.requests()[1]);
    assert!(
        plan_note.contains("Last round's plan:\n[x] r1s1 select_skills toolbox\n"),
        "{plan_note}"
    );
    assert!(!plan_note.contains("goal: next batch"), "{plan_note}");
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_planned_repeat_of_a_call_that_worked_is_not_run_again() -> anyhow::Result<()> {
    // The local 1.5B planned "total the amount column, convert 1 nmi to m" with the total
    // already in its results: the repeat ran, left only the answer on offer, and the
    // conversion was refused, round after round. From format 31 the repeat is marked done
    // without running, and the batch goes on.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(Some("medium"), &[select_step()]),
        plan(None, &[script_step("log", &["one"])]),
        think("Logged one.", false),
        plan(None, &[script_step("log", &["one"]), script_step("log", &["two"])]),
        think("Logged one and two.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, "Logged one and two.")
    );
    // "one" ran once: the repeat was not run, and "two" ran after it.
    assert_eq!(fixture.workspace_text("log.txt"), "one\ntwo\n");
    assert_eq!(ran.statuses(), ["ok", "ok", "ok"]);
    let last = *ran.data(EventKind::PlanUpdated).last().unwrap();
    assert_eq!((last["ran"].clone(), last["not_run"].clone()), (json!(2), json!(0)));
    let statuses: Vec<&Value> =
        last["plan"]["steps"].as_array().unwrap().iter().map(|step| &step["status"]).collect();
    assert_eq!(statuses, [&json!("done"), &json!("done")]);
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_step_refused_before_it_ran_does_not_end_the_batch() -> anyhow::Result<()> {
    // The local 1.5B copied a refused step (a column `mass` from an example) into each new
    // plan ahead of three conversions, which never ran. From format 32 a refused step is
    // skipped and the batch goes on; a step that ran and failed still ends it.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(Some("medium"), &[select_step()]),
        plan(None, &[script_step("fail", &["x"]), script_step("log", &["zero"])]),
        think("The fail script failed.", false),
        plan(
            None,
            &[
                script_step("fail", &["x"]),
                script_step("log", &["one"]),
                script_step("fail", &["y"]),
                script_step("log", &["two"]),
            ],
        ),
        think("Logged one.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), TASK).await?;
    assert_eq!(ran.result.final_text, "Logged one.");
    // The repeat of the failed call is refused, "one" runs after it, the new failure ends it.
    assert_eq!(
        ran.statuses(),
        ["ok", "failed", "refused", "ok", "failed"],
        "{:?}",
        ran.observations()
    );
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    let last = *ran.data(EventKind::PlanUpdated).last().unwrap();
    let statuses: Vec<&Value> =
        last["plan"]["steps"].as_array().unwrap().iter().map(|step| &step["status"]).collect();
    assert_eq!(statuses[..3], [&json!("skipped"), &json!("done"), &json!("skipped")]);
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_plan_holds_a_step_for_each_value_of_the_task_left() -> anyhow::Result<()> {
    // The local 1.5B planned one conversion of a four-item batch per round and ran out of
    // rounds. From format 12 the note lists the values no call has used and the schema asks
    // for a step each.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(Some("simple"), &[select_step()]),
        plan(None, &[script_step("log", &["4"])]),
        think("Logged 4.", false),
        plan(None, &[script_step("log", &["5"]), script_step("log", &["6"])]),
        think("Logged 4, 5 and 6.", true),
    ]));
    let ran =
        fixture.run(fixture.agent(&model, config()), "Log 4, 5 and 6 with the toolbox").await?;
    assert_eq!(ran.result.final_text, "Logged 4, 5 and 6.");
    let requests = model.requests();
    let min_steps = |index: usize| {
        requests[index].tools[0].parameters["properties"]["steps"]["minItems"].clone()
    };
    // Before any plan, and once one value is left, a plan may hold one step.
    assert_eq!((min_steps(0), min_steps(1), min_steps(3)), (json!(1), json!(3), json!(2)));
    let note = common::request_text(&requests[1]);
    assert!(note.contains("no script call has used yet: 4, 5, 6. Plan a step for each"), "{note}");
    let note = common::request_text(&requests[3]);
    assert!(note.contains("no script call has used yet: 5, 6."), "{note}");
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_round_whose_every_step_was_refused_cannot_complete() -> anyhow::Result<()> {
    // Told its example pattern was no value of the task, the local 1.5B's think completed
    // with file names from the skill's own document, nothing run. From format 12 a round whose
    // every step was refused may not complete while the task has no result.
    let unselected =
        ("run_script", json!({"skill": "notes", "script": "scripts/x.sh", "args": []}));
    let (ran, model, _fixture) = logging_one_after(vec![
        plan(Some("simple"), &[select_step()]),
        plan(None, &[unselected]),
        think("Done: the notes are logged.", true),
    ])
    .await?;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok"]);
    let requests = model.requests();
    let first = &requests[2].tools[0].parameters["properties"]["task_completed"];
    assert_eq!(first, &json!({"const": false}));
    let note = common::request_text(&requests[2]);
    assert!(
        note.contains("every step of it was refused, and no script has given a result"),
        "{note}"
    );
    let second = &requests[4].tools[0].parameters["properties"]["task_completed"];
    assert_eq!(second, &json!({"type": "boolean"}));
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_round_whose_every_step_was_refused_does_not_count_toward_the_limit() -> anyhow::Result<()>
{
    // Judged simple (two rounds), the local 1.5B had its placeholder file name refused, found
    // the file in the next round, and the limit ended the run before the total ran on it. From
    // format 31 a round that ran nothing does not count (the second round here), so the run
    // gets its two rounds of results.
    let unselected =
        ("run_script", json!({"skill": "notes", "script": "scripts/x.sh", "args": []}));
    let (ran, _model, _fixture) = logging_one_after(vec![
        plan(Some("simple"), &[select_step()]),
        plan(None, &[unselected]),
        think("Nothing ran yet.", false),
        plan(None, &[script_step("log", &["two"])]),
        think("Logged two.", false),
    ])
    .await?;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok", "ok"]);
    let state = ran.state();
    assert_eq!(state["strategy_state"]["refused_rounds"], 1);
    assert_eq!(state["strategy_state"]["round"], 4);
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn a_round_past_its_time_limit_goes_to_think() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut config = config();
    config.budgets.round_timeout_ms = Some(1000);
    let model = Arc::new(MockModel::new(vec![
        plan(Some("simple"), &[select_step()]),
        // The first step alone outlasts the limit: the second never starts.
        plan(None, &[script_step("sleep", &["2.5"]), script_step("log", &["late"])]),
        think("Waited; the logging did not run.", true),
    ]));
    let ran = fixture.run(fixture.agent(&model, config), TASK).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(fixture.workspace_text("log.txt"), "");
    assert_eq!(
        ran.data(EventKind::DeadlinePassed),
        [&json!({"what": "round", "step": 1, "limit_ms": 1000})]
    );
    let last = *ran.data(EventKind::PlanUpdated).last().unwrap();
    assert_eq!((last["ran"].clone(), last["not_run"].clone()), (json!(1), json!(1)));
    let note = common::request_text(&model.requests()[2]);
    assert!(note.contains("time limit (1000 ms) passed"), "{note}");
    // Replay runs no script and takes no time: the record says where the round stopped.
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}
