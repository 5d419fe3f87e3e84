//! `plan-thought-replan` (seed 001, the 2026-02-16 revision) on scripted models: each item of
//! the seed's test plan — §10.1.1 to §10.1.10, then the regressions §10.2.1 to §10.2.3 — plus
//! the failure threshold, JSON mode, and a pending task answered from its run directory by
//! another agent. The actions are the built-in `todo` and `schedule` over the workspace store
//! (the seed's tools) and, once, a real skill script through the sandbox. Every run is
//! replayed from its own record, sessions continued with `Agent::send` included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use common::{Fixture, Ran, call, note, purposes, request_text, text, toolbox, well_formed};
use model_adapter::{FinishReason, MockModel, MockReply, ResponseFormat, ToolChoice};
use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use skills_agent_core::{
    Agent, AgentConfig, ConsoleOptions, ConsoleSink, DecideMode, EventKind, Outcome, RunResult,
    STORE_PATH, STRATEGIES, comparable, replay_check,
};

fn main() -> ExitCode {
    common::main(tests![
        plan_thought_replan_is_a_known_strategy,
        the_plan_comes_once_per_task,
        a_finished_item_is_followed_by_a_replan,
        the_answer_to_a_question_resumes_the_task_with_a_replan,
        thoughts_work_through_the_items_in_order,
        a_failed_action_is_observed_and_the_item_goes_on,
        thoughts_and_replans_count_steps_against_the_limit,
        the_step_limit_answer_says_what_is_done_why_and_what_next,
        an_empty_plan_asks_for_a_thought_that_ends_or_asks,
        unreadable_and_invalid_decisions_count_steps,
        the_limit_is_checked_before_every_step,
        slash_commands_run_while_a_question_waits_and_keep_the_task,
        progress_shows_the_plan_actions_results_and_completion,
        without_a_model_the_error_is_unchanged,
        consecutive_failures_leave_only_ask_user_or_done,
        a_repeated_script_run_leaves_only_ask_user_or_done,
        json_mode_asks_for_one_document_per_phase,
        a_pending_task_is_answered_from_its_run_directory,
        a_run_resumes_from_any_point_of_its_record,
    ])
}

fn config() -> AgentConfig {
    let mut config =
        AgentConfig { strategy: "plan-thought-replan".to_owned(), ..AgentConfig::default() };
    config.guard.ask_user = true;
    config
}

fn with_steps(max: u32) -> AgentConfig {
    let mut config = config();
    config.budgets.max_turns = max;
    config
}

fn plan(items: &[&str]) -> MockReply {
    call("plan", json!({"status": "planned", "plan": items}))
}

fn act(step: &str, tool: &str, args: Value) -> MockReply {
    let mut next_action = Map::new();
    next_action.insert("tool".to_owned(), json!(tool));
    next_action.insert("args".to_owned(), args);
    call(
        "thought",
        json!({"status": "continue", "current_step": step,
               "next_action": next_action, "question": null, "response": null}),
    )
}

fn todo(command: &str) -> MockReply {
    act(&format!("todo {command}"), "todo", json!({"command": command}))
}

fn ask(question: &str) -> MockReply {
    call(
        "thought",
        json!({"status": "ask_user", "current_step": "information is missing",
               "next_action": null, "question": question, "response": null}),
    )
}

fn done(response: Option<&str>) -> MockReply {
    call(
        "thought",
        json!({"status": "done", "current_step": "the item is finished",
               "next_action": null, "question": null, "response": response}),
    )
}

fn replanned(items: &[&str]) -> MockReply {
    call("replan", json!({"status": "replanned", "plan": items, "response": null}))
}

fn finish(answer: &str) -> MockReply {
    call("replan", json!({"status": "done", "plan": [], "response": answer}))
}

/// The record of a finished piece of work in `run_dir` (checked line by line).
fn ran(result: RunResult) -> Ran {
    let run_dir = result.run_dir.clone().unwrap();
    let events = well_formed(&run_dir);
    assert_eq!(events.last().map(|event| event.kind), Some(EventKind::RunFinished));
    Ran { result, events, run_dir }
}

/// Replays the whole record of `run_dir` and checks it is reproduced exactly.
async fn assert_replays(run_dir: &Path) {
    let report = replay_check(run_dir).await.unwrap();
    assert!(report.reproduced(), "{:?}", report.divergence);
    let recorded =
        well_formed(run_dir).iter().filter(|event| event.kind != EventKind::AssistantDelta).count();
    assert_eq!(report.events_compared, recorded);
    assert!(report.compliance.final_text_present);
}

/// The task's state (`strategy_state` of `state.json`).
fn task_state(ran: &Ran) -> Value {
    ran.state()["strategy_state"].clone()
}

/// `(step_count, successful_steps, failed_steps)`.
fn steps(ran: &Ran) -> (u64, u64, u64) {
    let state = task_state(ran);
    let number = |key: &str| state[key].as_u64().unwrap();
    (number("step_count"), number("successful_steps"), number("failed_steps"))
}

/// The `step` data of every `turn_started`.
fn turn_steps(ran: &Ran) -> Vec<Value> {
    ran.data(EventKind::TurnStarted).into_iter().map(|data| data["step"].clone()).collect()
}

/// `step.progress` of every thought turn.
fn current_items(ran: &Ran) -> Vec<String> {
    turn_steps(ran)
        .iter()
        .filter(|step| step["phase"] == "thought")
        .map(|step| text(&step["progress"]))
        .collect()
}

/// The texts of the to-do list in the workspace store.
fn todos(fixture: &Fixture) -> Vec<String> {
    let store: Value =
        serde_json::from_slice(&std::fs::read(fixture.workspace.join(STORE_PATH)).unwrap())
            .unwrap();
    store["todos"].as_array().unwrap().iter().map(|item| text(&item["text"])).collect()
}

async fn plan_thought_replan_is_a_known_strategy() -> anyhow::Result<()> {
    assert!(STRATEGIES.contains(&"plan-thought-replan"));
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(Vec::new()));
    fixture.agent(&model, config()).build()?;
    Ok(())
}

/// §10.1.1: the first (non-slash) input of a task triggers one plan call; the thoughts and
/// replans after it never plan again; a new task in the session plans once more.
async fn the_plan_comes_once_per_task() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["add milk", "add eggs"]),
        todo("add milk"),
        done(Some("Milk is on the list.")),
        replanned(&["add eggs"]),
        todo("add eggs"),
        done(None),
        finish("Milk and eggs are on your to-do list."),
        // The second task.
        plan(&["read the list"]),
        todo("list"),
        done(Some("Two open items.")),
        finish("You have two open to-dos: milk and eggs."),
    ]));
    let agent = fixture.agent(&model, config()).build()?;
    let first = ran(agent.run("Put milk and eggs on my to-do list").await?);
    assert_eq!(first.result.outcome, Outcome::Completed);
    assert_eq!(first.result.final_text, "Milk and eggs are on your to-do list.");
    assert_eq!(
        purposes(&first.events),
        ["plan", "thought", "thought", "replan", "thought", "thought", "replan"]
    );
    // Plan before the first turn; turns are the thought and replan calls.
    assert!(first.first_seq(EventKind::PlanCreated) < first.first_seq(EventKind::TurnStarted));
    assert_eq!((first.result.turns, first.result.model_calls, first.result.tool_calls), (6, 7, 2));
    let created = first.data(EventKind::PlanCreated);
    assert_eq!(created.len(), 1);
    assert_eq!(created[0]["items"], json!(["add milk", "add eggs"]));
    assert_eq!(created[0]["task"], 1);
    assert_eq!(todos(&fixture), ["milk", "eggs"]);
    let state = task_state(&first);
    assert_eq!((state["task"].clone(), state["plan_initialized"].clone()), (json!(1), json!(true)));
    assert_eq!(steps(&first), (8, 8, 0));
    // Each phase offers exactly its own tool, named in tool_choice.
    let named: Vec<ToolChoice> =
        model.requests().iter().map(|request| request.tool_choice.clone()).collect();
    let choice = |tool: &str| ToolChoice::Named(tool.to_owned());
    assert_eq!(
        named[..4],
        [choice("plan"), choice("thought"), choice("thought"), choice("replan")]
    );

    let second = ran(agent.send(&first.run_dir, "What is on my to-do list now?").await?);
    assert_eq!(second.result.outcome, Outcome::Completed);
    assert_eq!(second.result.final_text, "You have two open to-dos: milk and eggs.");
    let inputs = second.data(EventKind::UserInput);
    assert_eq!(inputs[0]["kind"], "task");
    let input = second.events.iter().position(|event| event.kind == EventKind::UserInput).unwrap();
    assert_eq!(purposes(&second.events[input..]), ["plan", "thought", "thought", "replan"]);
    assert_eq!(second.data(EventKind::PlanCreated).len(), 2, "one plan per task");
    let state = task_state(&second);
    assert_eq!(state["task"], 2);
    assert_eq!(state["plan_items"], json!(["read the list"]));
    assert_eq!(steps(&second), (4, 4, 0), "steps count per task");
    assert_eq!(model.remaining(), 0);
    assert_replays(&second.run_dir).await;
    Ok(())
}

/// §10.1.2: without any clarification, the thought that finishes an item is followed by a
/// replan, which may extend the plan; the replan sees the item's result.
async fn a_finished_item_is_followed_by_a_replan() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["add milk"]),
        todo("add milk"),
        done(Some("Milk added as #1.")),
        replanned(&["check the list"]),
        todo("list"),
        done(None),
        finish("Milk is on the list."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), "Add milk and check").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let phases: Vec<String> = turn_steps(&ran).iter().map(|step| text(&step["phase"])).collect();
    assert_eq!(phases, ["thought", "thought", "replan", "thought", "thought", "replan"]);
    // Every `done` thought is the last of its inner loop: a replan comes next.
    let kinds: Vec<(EventKind, &Value)> = ran
        .events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ThoughtDecided | EventKind::TurnStarted))
        .map(|event| (event.kind, &event.data))
        .collect();
    for (index, (kind, data)) in kinds.iter().enumerate() {
        if *kind == EventKind::ThoughtDecided && data["status"] == "done" {
            assert_eq!(kinds[index + 1].1["step"]["phase"], "replan");
        }
    }
    let requests = model.requests();
    let replan_note = note(&requests[3]);
    assert!(replan_note.contains("Review the plan: plan item 1/1 is finished."), "{replan_note}");
    assert!(replan_note.contains("Result of the finished item: Milk added as #1."));
    let updates = ran.data(EventKind::PlanUpdated);
    assert_eq!(updates.len(), 2);
    assert_eq!(
        (&updates[0]["status"], &updates[0]["items"], &updates[0]["current_plan_index"]),
        (&json!("replanned"), &json!(["check the list"]), &json!(0))
    );
    assert_eq!(updates[0]["progress"], "Replanning done: 1 steps");
    assert_eq!(updates[1]["status"], "done");
    assert_eq!(task_state(&ran)["replans"], 2);
    assert_replays(&ran.run_dir).await;
    Ok(())
}

/// §10.1.3: `ask_user` suspends the task (its state in the run directory); the answer
/// resumes it with a replan, not a new plan.
async fn the_answer_to_a_question_resumes_the_task_with_a_replan() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["find the day", "put it on the schedule"]),
        ask("Which day is the appointment?"),
        replanned(&["put it on the schedule"]),
        act("scheduling", "schedule", json!({"command": "add 2026-03-03 10:00 :: dentist"})),
        done(Some("Scheduled as #1.")),
        finish("The dentist is on your schedule for 2026-03-03 10:00."),
    ]));
    let agent = fixture.agent(&model, config()).build()?;
    let asked = ran(agent.run("Put my dentist appointment on the schedule").await?);
    assert_eq!(asked.result.outcome, Outcome::NeedsInput);
    assert_eq!(asked.result.final_text, "Which day is the appointment?");
    assert_eq!(purposes(&asked.events), ["plan", "thought"]);
    assert_eq!(
        asked.data(EventKind::InputRequested)[0]["question"],
        "Which day is the appointment?"
    );
    let state = asked.state();
    assert_eq!(state["pending_question"], "Which day is the appointment?");
    let task = &state["strategy_state"];
    assert_eq!(task["awaiting_clarification"], true);
    assert_eq!(task["last_ask_user_question"], "Which day is the appointment?");
    assert_eq!(task["plan_items"], json!(["find the day", "put it on the schedule"]));
    assert_eq!(task["current_plan_index"], 0);
    assert_eq!(steps(&asked), (1, 1, 0), "the asking thought counts; asking does not");

    let answered = ran(agent.send(&asked.run_dir, "March 3rd at 10:00").await?);
    assert_eq!(answered.result.outcome, Outcome::Completed);
    assert_eq!(answered.result.final_text, "The dentist is on your schedule for 2026-03-03 10:00.");
    assert_eq!(
        purposes(&answered.events),
        ["plan", "thought", "replan", "thought", "thought", "replan"]
    );
    assert_eq!(answered.data(EventKind::UserInput)[0]["kind"], "answer");
    assert_eq!(answered.data(EventKind::PlanCreated).len(), 1, "no new plan for an answer");
    // The answer is the result of the asking call, and the replan's note names it.
    let replan = &model.requests()[2];
    assert!(request_text(replan).contains("The user answers: March 3rd at 10:00"));
    let replan_note = note(replan);
    assert!(replan_note.contains("Review the plan: the user answered the question."));
    assert!(replan_note.contains(
        "You asked: Which day is the appointment? — the user answered: March 3rd at 10:00"
    ));
    let task = task_state(&answered);
    assert_eq!(
        task["clarification_history"],
        json!([{"question": "Which day is the appointment?", "answer": "March 3rd at 10:00"}])
    );
    assert_eq!(task["awaiting_clarification"], false);
    assert!(answered.state()["pending_question"].is_null());
    assert_eq!(steps(&answered), (6, 6, 0));
    assert_replays(&answered.run_dir).await;
    Ok(())
}

/// §10.1.4: thoughts take the plan's items in order, one or more rounds per item; a replan
/// that repeats finished items continues after them.
async fn thoughts_work_through_the_items_in_order() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["add milk", "add eggs", "add bread"]),
        todo("add milk"),
        done(None),
        replanned(&["add milk", "add eggs", "add bread"]),
        todo("add eggs"),
        done(None),
        replanned(&["add bread"]),
        todo("add bread"),
        done(None),
        finish("Milk, eggs and bread are on the list."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), "Add milk, eggs and bread").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(
        current_items(&ran),
        [
            "Current plan item: 1/3 - add milk",
            "Current plan item: 1/3 - add milk",
            "Current plan item: 2/3 - add eggs",
            "Current plan item: 2/3 - add eggs",
            "Current plan item: 1/1 - add bread",
            "Current plan item: 1/1 - add bread",
        ]
    );
    assert_eq!(todos(&fixture), ["milk", "eggs", "bread"]);
    let cursors: Vec<&Value> =
        ran.data(EventKind::PlanUpdated).iter().map(|data| &data["current_plan_index"]).collect();
    assert_eq!(cursors, [&json!(1), &json!(0), &json!(1)]);
    let task = task_state(&ran);
    assert_eq!(task["completed_items"], json!(["add milk", "add eggs", "add bread"]));
    assert_eq!(task["current_plan_index"], 1);
    let plan = ran.state()["plan"].clone();
    assert_eq!(plan["steps"], json!([{"id": "s1", "title": "add bread", "status": "done"}]));
    assert_replays(&ran.run_dir).await;
    Ok(())
}

/// §10.1.5: a failed action is an observation the next thought sees; the inner loop goes on
/// with the same item, and the replan comes when the item is finished. With a real script.
async fn a_failed_action_is_observed_and_the_item_goes_on() -> anyhow::Result<()> {
    let fixture = toolbox();
    let script = |name: &str, arg: &str| json!({"skill": "toolbox", "script": format!("scripts/{name}.sh"), "args": [arg]});
    let model = Arc::new(MockModel::new(vec![
        plan(&["log one with the toolbox"]),
        act("select the toolbox", "select_skills", json!({"names": ["toolbox"]})),
        act("try the fail script", "run_script", script("fail", "x")),
        act("log one", "run_script", script("log", "one")),
        done(Some("Logged one.")),
        finish("Logged one."),
    ]));
    // The task names x: with `ask_user` on offer, an argument no text states is asked for.
    let task = "Log one with the toolbox, after trying x";
    let ran = fixture.run(fixture.agent(&model, config()), task).await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(fixture.workspace_text("log.txt"), "one\n");
    assert_eq!(ran.statuses(), ["ok", "failed", "ok"]);
    assert_eq!(
        purposes(&ran.events),
        ["plan", "thought", "thought", "thought", "thought", "replan"]
    );
    // All four thoughts were about the one item; the replan came after the fourth.
    assert_eq!(current_items(&ran), vec!["Current plan item: 1/1 - log one with the toolbox"; 4]);
    let after_failure = &model.requests()[3];
    assert!(request_text(after_failure).contains("cannot handle x"));
    assert_eq!(steps(&ran), (8, 7, 1));
    assert_eq!(task_state(&ran)["consecutive_failures"], 0);
    assert_replays(&ran.run_dir).await;
    Ok(())
}

/// §10.1.6: thoughts, replans and actions count; the plan does not; the count meets the
/// limit (`max_turns`) exactly.
async fn thoughts_and_replans_count_steps_against_the_limit() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["add milk", "add eggs"]),
        todo("add milk"),
        done(None),
        replanned(&["add eggs"]),
        MockReply::text("Milk is on the list; eggs are not: the step limit was reached."),
    ]));
    let ran = fixture.run(fixture.agent(&model, with_steps(4)), "Add milk and eggs").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    assert_eq!(purposes(&ran.events), ["plan", "thought", "thought", "replan", "degraded_answer"]);
    // Steps used before each turn's decision, of the limit.
    let before: Vec<Value> = turn_steps(&ran).iter().map(|step| step["steps"].clone()).collect();
    assert_eq!(before, [json!([0, 4]), json!([2, 4]), json!([3, 4])]);
    assert_eq!(steps(&ran), (4, 4, 0));
    assert_eq!(ran.result.turns, 3, "turns count the thought and replan calls");
    // The plan is no step: with one step, the plan and one thought run.
    let model = Arc::new(MockModel::new(vec![
        plan(&["add milk"]),
        done(None),
        MockReply::text("Nothing was added: the step limit was reached."),
    ]));
    let ran = fixture.run(fixture.agent(&model, with_steps(1)), "Add milk").await?;
    assert_eq!(purposes(&ran.events), ["plan", "thought", "degraded_answer"]);
    assert_eq!(steps(&ran), (1, 1, 0));
    assert_replays(&ran.run_dir).await;
    Ok(())
}

/// §10.1.7: at the step limit the answer has the done part, the reason and next steps —
/// from the degraded-answer call, or deterministic when that call fails.
async fn the_step_limit_answer_says_what_is_done_why_and_what_next() -> anyhow::Result<()> {
    let replies = || vec![plan(&["add milk", "add eggs"]), todo("add milk"), done(None)];
    let fixture = toolbox();
    let mut scripted = replies();
    scripted.push(MockReply::text("Done: milk. Blocked: step limit. Next: add eggs."));
    let model = Arc::new(MockModel::new(scripted));
    let ran = fixture.run(fixture.agent(&model, with_steps(3)), "Add milk and eggs").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    assert_eq!(ran.result.final_text, "Done: milk. Blocked: step limit. Next: add eggs.");
    assert_eq!(ran.finished()["degraded"], true);
    let last = model.requests().pop().unwrap();
    assert!(last.tools.is_empty());
    let prompt = note(&last);
    for part in [
        "the step limit (3 steps: thoughts, replans and actions) was reached",
        "what was done",
        "what blocked the task",
        "the next steps",
    ] {
        assert!(prompt.contains(part), "{part}: {prompt}");
    }
    assert_replays(&ran.run_dir).await;
    // The degraded call fails (the script has no reply): the deterministic text.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(replies()));
    let ran = fixture.run(fixture.agent(&model, with_steps(3)), "Add milk and eggs").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    let answer = &ran.result.final_text;
    for part in [
        "I could not finish the task: the step limit (3 steps: thoughts, replans and actions) \
         was reached.",
        "What was tried:\n- todo add milk: worked",
        "What you could do:\n- still to do: add eggs",
    ] {
        assert!(answer.contains(part), "{part}: {answer}");
    }
    assert_replays(&ran.run_dir).await;
    Ok(())
}

/// §10.1.8: an empty plan leads to a thought that may only say `done` or `ask_user` (the
/// schema and the check agree), then to the replan — no crash, no endless loop.
async fn an_empty_plan_asks_for_a_thought_that_ends_or_asks() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&[]),
        todo("list"),
        done(Some("Nothing needed doing.")),
        finish("There was nothing to do."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), "Do nothing").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "There was nothing to do.");
    assert_eq!(ran.data(EventKind::PlanCreated)[0]["progress"], "Planning done: 0 steps");
    assert_eq!(current_items(&ran)[0], "Current plan item: none (no item left)");
    let thought = &model.requests()[1].tools[0].parameters;
    assert_eq!(thought["properties"]["status"]["enum"], json!(["ask_user", "done"]));
    assert_eq!(thought["properties"]["next_action"], json!({"type": "null"}));
    let observations = ran.observations();
    assert_eq!(observations.len(), 1);
    assert!(observations[0].1.starts_with(
        "status `continue` is not allowed now (the plan has no item to work on); allowed: \
         ask_user, done"
    ));
    assert_eq!(purposes(&ran.events), ["plan", "thought", "thought", "replan"]);
    assert_replays(&ran.run_dir).await;
    // Or it asks.
    let model = Arc::new(MockModel::new(vec![plan(&[]), ask("What should I do?")]));
    let ran = fixture.run(fixture.agent(&model, config()), "Do something").await?;
    assert_eq!(ran.result.outcome, Outcome::NeedsInput);
    assert_eq!(ran.result.final_text, "What should I do?");
    // Without ask_user only `done` is left.
    let mut quiet = config();
    quiet.guard.ask_user = false;
    let model = Arc::new(MockModel::new(vec![plan(&[]), done(None), finish("Nothing to do.")]));
    let ran = fixture.run(fixture.agent(&model, quiet), "Do nothing").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let thought = &model.requests()[1].tools[0].parameters;
    assert_eq!(thought["properties"]["status"]["enum"], json!(["done"]));
    assert_eq!(thought["properties"]["question"], json!({"type": "null"}));
    Ok(())
}

/// §10.1.9: an unreadable thought, a thought or replan that breaks a field rule, a call to
/// the wrong tool — each counts a step (failed), is observed, and the phase is asked again.
async fn unreadable_and_invalid_decisions_count_steps() -> anyhow::Result<()> {
    let replies = || {
        vec![
            plan(&["add milk"]),
            MockReply::raw_tool_call(
                "thought",
                "{\"status\": \"continue\"",
                FinishReason::ToolCalls,
            ),
            todo("add milk"),
            call(
                "thought",
                json!({"status": "done", "current_step": "x", "question": null, "response": null,
                       "next_action": {"tool": "todo", "args": {"command": "list"}}}),
            ),
            done(None),
            call("replan", json!({"status": "replanned", "plan": [], "response": null})),
            call("thought", json!({"status": "done"})),
            finish("Milk is on the list."),
        ]
    };
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(replies()));
    let ran = fixture.run(fixture.agent(&model, with_steps(8)), "Add milk").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(
        purposes(&ran.events),
        ["plan", "thought", "thought", "thought", "thought", "replan", "replan", "replan"]
    );
    assert_eq!(steps(&ran), (8, 4, 4));
    let before: Vec<Value> = turn_steps(&ran).iter().map(|step| step["steps"][0].clone()).collect();
    assert_eq!(before, [json!(0), json!(1), json!(3), json!(4), json!(5), json!(6), json!(7)]);
    let invalid: Vec<String> = ran
        .observations()
        .into_iter()
        .filter(|(status, _)| status == "invalid_action")
        .map(|(_, content)| content)
        .collect();
    let expected = [
        "the call to `thought` had unreadable arguments",
        "status `done` needs `next_action` to be null",
        "status `replanned` needs a non-empty `plan`",
        "expected a call to `replan`, got `thought`",
    ];
    assert_eq!(invalid.len(), expected.len());
    for (message, start) in invalid.iter().zip(expected) {
        assert!(message.starts_with(start), "{message}");
    }
    let rejected = ran
        .data(EventKind::ActionValidated)
        .into_iter()
        .filter(|data| data["valid"] == false)
        .map(|data| text(&data["phase"]))
        .collect::<Vec<_>>();
    assert_eq!(rejected, ["thought", "thought", "replan", "replan"]);
    assert_replays(&ran.run_dir).await;
    // The failed steps take part in the limit: one step less, no final replan.
    let model = Arc::new(MockModel::new(replies()));
    let ran = fixture.run(fixture.agent(&model, with_steps(7)), "Add milk").await?;
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    assert_eq!(steps(&ran), (7, 3, 4));
    assert_eq!(purposes(&ran.events).last().unwrap(), "degraded_answer");
    assert_eq!(purposes(&ran.events).iter().filter(|purpose| *purpose == "replan").count(), 2);
    Ok(())
}

/// §10.1.10: the limit is checked before every step — at the head of the outer loop (no
/// replan), at the head of the inner loop (no thought), and before a thought's action (it is
/// not run, its call is answered) — and nothing runs after it.
async fn the_limit_is_checked_before_every_step() -> anyhow::Result<()> {
    for (max, replies, expected) in [
        (1, vec![plan(&["add milk"]), todo("add milk")], vec!["plan", "thought"]),
        (2, vec![plan(&["add milk"]), todo("add milk")], vec!["plan", "thought"]),
        (
            3,
            vec![plan(&["add milk"]), todo("add milk"), done(None)],
            vec!["plan", "thought", "thought"],
        ),
    ] {
        let fixture = toolbox();
        let model = Arc::new(MockModel::new(replies));
        let ran = fixture.run(fixture.agent(&model, with_steps(max)), "Add milk").await?;
        assert_eq!(ran.result.outcome, Outcome::MaxTurns, "max {max}");
        let mut calls = expected.clone();
        calls.push("degraded_answer");
        assert_eq!(purposes(&ran.events), calls, "max {max}");
        assert_eq!(steps(&ran).0, u64::from(max), "the count never passes the limit");
        // After the last turn, only the degraded answer.
        let last_turn = ran.events.iter().rposition(|e| e.kind == EventKind::TurnFinished).unwrap();
        let after: Vec<&str> =
            ran.events[last_turn + 1..].iter().map(|event| event.kind.as_str()).collect();
        assert_eq!(after, ["model_request", "model_response", "run_finished"], "max {max}");
        let executed = ran.data(EventKind::ActionExecuted).len();
        if max == 1 {
            assert_eq!(executed, 0, "the action of the last step's thought is not run");
            assert!(!fixture.workspace.join(STORE_PATH).exists());
            let degraded = model.requests().pop().unwrap();
            assert!(request_text(&degraded).contains("not run: the step limit (1 steps"));
            assert!(ran.result.final_text.contains("before `todo add milk` could run"));
        } else {
            assert_eq!(executed, 1);
        }
        assert_replays(&ran.run_dir).await;
    }
    Ok(())
}

/// §10.2.1: `/todo`, `/schedule` and `/view` run without the model while a question waits;
/// the pending task stays as it was, and the answer afterwards resumes it with a replan.
async fn slash_commands_run_while_a_question_waits_and_keep_the_task() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["find the day", "put it on the schedule"]),
        ask("Which day?"),
        replanned(&["put it on the schedule"]),
        act("scheduling", "schedule", json!({"command": "add Tuesday 09:00 :: dentist"})),
        done(None),
        finish("The dentist is on Tuesday 09:00."),
    ]));
    let agent = fixture.agent(&model, config()).build()?;
    let asked = ran(agent.run("Schedule the dentist").await?);
    assert_eq!(asked.result.outcome, Outcome::NeedsInput);
    let pending = task_state(&asked);
    let mut last = asked;
    for (command, output) in [
        ("/todo add call the dentist", "added to-do #1: call the dentist"),
        ("/view", "to-do list (1 open, 0 done):\n[ ] #1 call the dentist\nthe schedule is empty"),
        ("/schedule", "the schedule is empty"),
    ] {
        let sent = ran(agent.send(&last.run_dir, command).await?);
        assert_eq!(sent.result.outcome, Outcome::NeedsInput, "{command}");
        assert_eq!(
            sent.result.final_text,
            format!("{output}\n\n(The task still waits for your answer: Which day?)")
        );
        let executed = sent.data(EventKind::CommandExecuted);
        assert_eq!(executed.last().unwrap()["output"], output);
        assert_eq!(model.requests().len(), 2, "no model call for {command}");
        assert_eq!(task_state(&sent), pending, "the pending task is kept");
        assert_eq!(sent.state()["pending_question"], "Which day?");
        last = sent;
    }
    let answered = ran(agent.send(&last.run_dir, "Tuesday 09:00").await?);
    assert_eq!(answered.result.outcome, Outcome::Completed);
    assert_eq!(answered.result.final_text, "The dentist is on Tuesday 09:00.");
    assert_eq!(model.requests()[2].tool_choice, ToolChoice::Named("replan".to_owned()));
    assert_eq!(
        task_state(&answered)["clarification_history"],
        json!([{"question": "Which day?", "answer": "Tuesday 09:00"}])
    );
    assert_eq!(todos(&fixture), ["call the dentist"]);
    let kinds: Vec<String> =
        answered.data(EventKind::UserInput).iter().map(|data| text(&data["kind"])).collect();
    assert_eq!(kinds, ["command", "command", "command", "answer"]);
    assert_replays(&answered.run_dir).await;
    Ok(())
}

/// §10.2.2: the progress shows the plan list, each action and its result, and the end — on
/// the console, and as the seed's progress lines in the events.
async fn progress_shows_the_plan_actions_results_and_completion() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["add milk"]),
        todo("done 9"),
        todo("add milk"),
        done(None),
        finish("Milk is on the list."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), "Add milk").await?;
    let console = ConsoleSink::new(Box::new(std::io::sink()), ConsoleOptions::default());
    let shown: String = ran.events.iter().map(|event| console.render(event)).collect();
    for part in [
        "  plan\n    goal: Add milk\n    [>] s1 add milk\n",
        "✗ todo done 9 → failed",
        "✓ todo add milk → ok",
        "■ completed",
    ] {
        assert!(shown.contains(part), "{part}:\n{shown}");
    }
    let progress: Vec<String> = ran
        .events
        .iter()
        .filter_map(|event| {
            let data = &event.data;
            data.get("progress").or_else(|| data.get("step").and_then(|step| step.get("progress")))
        })
        .map(text)
        .collect();
    assert_eq!(
        progress,
        [
            "Planning done: 1 steps",
            "Current plan item: 1/1 - add milk",
            "Thought: run an action — todo done 9",
            "Current plan item: 1/1 - add milk",
            "Thought: run an action — todo add milk",
            "Current plan item: 1/1 - add milk",
            "Thought: step done",
            "Replanning: plan item 1/1 is finished",
            "Replanning done: the task is complete",
        ]
    );
    let results: Vec<String> =
        ran.data(EventKind::ActionExecuted).iter().map(|data| text(&data["status"])).collect();
    assert_eq!(results, ["failed", "ok"]);
    Ok(())
}

/// §10.2.3: without a model the builder's error is the same as for any strategy.
async fn without_a_model_the_error_is_unchanged() -> anyhow::Result<()> {
    let react = Agent::builder().build().unwrap_err().to_string();
    let ours = Agent::builder().config(config()).build().unwrap_err().to_string();
    assert_eq!(ours, react);
    assert!(ours.contains("no model: call AgentBuilder::model"), "{ours}");
    Ok(())
}

/// Seed §2.2.6: after two failed steps in a row a thought may only ask or say done (schema,
/// note and check); the answer resets the count.
async fn consecutive_failures_leave_only_ask_user_or_done() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        plan(&["clear to-do 7"]),
        todo("done 7"),
        todo("done 8"),
        todo("done 9"),
        ask("Which to-do should I clear?"),
        replanned(&["leave the list as it is"]),
        done(None),
        finish("Nothing was cleared."),
    ]));
    let agent = fixture.agent(&model, config()).build()?;
    let asked = ran(agent.run("Clear to-do 7").await?);
    assert_eq!(asked.result.outcome, Outcome::NeedsInput);
    assert_eq!(asked.statuses(), ["failed", "failed", "invalid_action"]);
    let requests = model.requests();
    let narrowed = &requests[3];
    let schema = &narrowed.tools[0].parameters;
    assert_eq!(schema["properties"]["status"]["enum"], json!(["ask_user", "done"]));
    assert_eq!(schema["properties"]["next_action"], json!({"type": "null"}));
    assert!(note(narrowed).ends_with("Only ask_user or done now: 2 steps failed in a row."));
    assert!(asked.observations()[2].1.starts_with(
        "status `continue` is not allowed now (2 steps failed in a row); allowed: ask_user, done"
    ));
    let thought_statuses = |ran: &Ran| -> Vec<Value> {
        turn_steps(ran)
            .iter()
            .filter(|step| step["phase"] == "thought")
            .map(|step| step["statuses"].clone())
            .collect()
    };
    let all = json!(["continue", "ask_user", "done"]);
    let narrow = json!(["ask_user", "done"]);
    assert_eq!(
        thought_statuses(&asked),
        [all.clone(), all.clone(), narrow.clone(), narrow.clone()]
    );
    assert_eq!(task_state(&asked)["consecutive_failures"], 3);
    let answered = ran(agent.send(&asked.run_dir, "None, leave it").await?);
    assert_eq!(answered.result.outcome, Outcome::Completed);
    // The answer reset the count: the next thought may continue again.
    assert_eq!(
        thought_statuses(&answered),
        [all.clone(), all.clone(), narrow.clone(), narrow, all]
    );
    assert_eq!(task_state(&answered)["consecutive_failures"], 0);
    assert_replays(&answered.run_dir).await;
    Ok(())
}

/// The guard's "answer now" (an identical successful script run repeated) narrows the next
/// thought to `ask_user` or `done`, with the guard's reason; an `ok` action is pointed out as
/// a possible end of the item.
async fn a_repeated_script_run_leaves_only_ask_user_or_done() -> anyhow::Result<()> {
    let fixture = toolbox();
    let log = json!({"skill": "toolbox", "script": "scripts/log.sh", "args": ["one"]});
    let model = Arc::new(MockModel::new(vec![
        plan(&["log one"]),
        act("select", "select_skills", json!({"names": ["toolbox"]})),
        act("log one", "run_script", log.clone()),
        act("log one again", "run_script", log),
        done(Some("Logged one.")),
        finish("Logged one."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config()), "Log one").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    let statuses: Vec<Value> = turn_steps(&ran)
        .iter()
        .filter(|step| step["phase"] == "thought")
        .map(|step| step["statuses"].clone())
        .collect();
    let all = json!(["continue", "ask_user", "done"]);
    assert_eq!(statuses, [all.clone(), all.clone(), all, json!(["ask_user", "done"])]);
    let requests = model.requests();
    assert!(
        note(&requests[3]).contains(
            "The last action worked (obs-2): if its result completes this item, say done"
        )
    );
    assert!(note(&requests[4]).ends_with(
        "Only ask_user or done now: that script already ran with the same arguments: answer now."
    ));
    assert_replays(&ran.run_dir).await;
    Ok(())
}

/// JSON mode: one document per phase under the phase's schema, whose variants hold the
/// field-rule matrix; an unreadable document counts a step; the answer is a user message.
async fn json_mode_asks_for_one_document_per_phase() -> anyhow::Result<()> {
    let fixture = toolbox();
    let document = |value: Value| MockReply::text(&format!("```json\n{value}\n```"));
    let model = Arc::new(MockModel::new(vec![
        document(json!({"plan": ["add milk"], "status": "planned"})),
        MockReply::text("{\"status\": "),
        document(json!({"current_step": "need the amount", "next_action": null,
                        "question": "How much milk?", "response": null, "status": "ask_user"})),
        document(json!({"plan": ["add milk"], "response": null, "status": "replanned"})),
        document(json!({"current_step": "adding", "question": null, "response": null,
                        "status": "continue",
                        "next_action": {"args": {"command": "add 2 l milk"}, "tool": "todo"}})),
        document(json!({"current_step": "", "next_action": null, "question": null,
                        "response": "Added.", "status": "done"})),
        document(json!({"plan": [], "response": "2 l of milk are on the list.", "status": "done"})),
    ]));
    let config = AgentConfig { decide: DecideMode::Json, ..config() };
    let agent = fixture.agent(&model, config).build()?;
    let asked = ran(agent.run("Add milk").await?);
    assert_eq!(asked.result.outcome, Outcome::NeedsInput);
    let answered = ran(agent.send(&asked.run_dir, "2 litres").await?);
    assert_eq!(answered.result.outcome, Outcome::Completed);
    assert_eq!(answered.result.final_text, "2 l of milk are on the list.");
    assert_eq!(todos(&fixture), ["2 l milk"]);
    assert!(answered.observations()[0].1.starts_with("the answer is not valid JSON"));
    assert_eq!(steps(&answered), (7, 6, 1));
    let requests = model.requests();
    let names: Vec<String> = requests
        .iter()
        .map(|request| match &request.response_format {
            ResponseFormat::JsonSchema { name, .. } if request.tools.is_empty() => name.clone(),
            other => panic!("not a schema-only request: {other:?}"),
        })
        .collect();
    assert_eq!(names, ["plan", "thought", "thought", "replan", "thought", "thought", "replan"]);
    let thought = common::schema(&requests[1]);
    let variants = thought["anyOf"].as_array().unwrap();
    let consts: Vec<&Value> =
        variants.iter().map(|variant| &variant["properties"]["status"]["const"]).collect();
    assert_eq!(consts, [&json!("continue"), &json!("ask_user"), &json!("done")]);
    assert_eq!(variants[0]["properties"]["question"], json!({"type": "null"}));
    let tools: Vec<&Value> = variants[0]["properties"]["next_action"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|variant| &variant["properties"]["tool"]["const"])
        .collect();
    assert_eq!(tools, [&json!("select_skills"), &json!("todo"), &json!("schedule")]);
    let replan = common::schema(&requests[3]);
    assert_eq!(replan["anyOf"][0]["properties"]["plan"]["minItems"], 1);
    assert_eq!(replan["anyOf"][1]["properties"]["response"]["minLength"], 1);
    // JSON mode has no tool call to answer: the answer comes as a user message.
    assert!(note(&requests[3]).contains("Review the plan"));
    assert!(request_text(&requests[3]).contains("The user answers: 2 litres"));
    assert_replays(&answered.run_dir).await;
    Ok(())
}

/// A task suspended by `ask_user` is in its run directory: another agent (another process,
/// another model) sends the answer and the task goes on with a replan.
async fn a_pending_task_is_answered_from_its_run_directory() -> anyhow::Result<()> {
    let fixture = toolbox();
    let first =
        Arc::new(MockModel::new(vec![plan(&["find the item", "add it"]), ask("Add what?")]));
    let asked = {
        let agent = fixture.agent(&first, config()).build()?;
        ran(agent.run("Add something to my list").await?)
    };
    assert_eq!(asked.result.outcome, Outcome::NeedsInput);
    let on_disk = asked.state();
    assert_eq!(on_disk["outcome"], "needs_input");
    assert_eq!(on_disk["pending_question"], "Add what?");
    let task = &on_disk["strategy_state"];
    assert_eq!(task["strategy"], "plan-thought-replan");
    assert_eq!(task["awaiting_clarification"], true);
    assert_eq!(task["plan_items"], json!(["find the item", "add it"]));
    assert_eq!(task["step_count"], 1);
    let second = Arc::new(MockModel::new(vec![
        replanned(&["add it"]),
        todo("add milk"),
        done(None),
        finish("Milk is on the list."),
    ]));
    let agent = fixture.agent(&second, config()).build()?;
    let answered = ran(agent.send(&asked.run_dir, "Milk").await?);
    assert_eq!(answered.result.outcome, Outcome::Completed);
    assert_eq!(answered.result.final_text, "Milk is on the list.");
    assert_eq!(second.requests().len(), 4);
    assert_eq!(second.requests()[0].tool_choice, ToolChoice::Named("replan".to_owned()));
    assert_eq!(todos(&fixture), ["milk"]);
    assert_eq!(steps(&answered), (6, 6, 0), "the asking thought, then five");
    assert_eq!(answered.data(EventKind::RunStarted).len(), 1);
    assert_replays(&answered.run_dir).await;
    Ok(())
}

/// A run killed after any event of its record resumes to the same end: nothing recorded is
/// asked or run again, the strategy's state is rebuilt from the record.
async fn a_run_resumes_from_any_point_of_its_record() -> anyhow::Result<()> {
    let replies = || {
        vec![
            plan(&["look at the list", "answer"]),
            call("thought", json!({"status": "continue"})),
            todo("list"),
            done(Some("The list is empty.")),
            replanned(&["answer"]),
            done(None),
            finish("Your to-do list is empty."),
        ]
    };
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(replies()));
    let original = fixture.run(fixture.agent(&model, config()), "What is on my list?").await?;
    assert_eq!(original.result.outcome, Outcome::Completed);
    let (lines, wanted) = original.record()?;
    let scratch = tempfile::tempdir()?;
    for kept in 1..lines.len() {
        let case = scratch.path().join(kept.to_string());
        let (runs, workspace) = (case.join("runs"), case.join("workspace"));
        let run_dir = runs.join(&original.result.run_id);
        std::fs::create_dir_all(run_dir.join("inputs"))?;
        std::fs::create_dir_all(&workspace)?;
        std::fs::copy(
            original.run_dir.join("inputs/request.txt"),
            run_dir.join("inputs/request.txt"),
        )?;
        let text: String = lines[..kept].iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(run_dir.join("events.jsonl"), text)?;
        let answered = lines[..kept]
            .iter()
            .filter(|line| serde_json::from_str::<Value>(line).unwrap()["type"] == "model_response")
            .count();
        let model = Arc::new(MockModel::new(replies().split_off(answered)));
        let agent =
            fixture.agent(&model, config()).workspace(&workspace).runs_dir(&runs).build()?;
        let result =
            agent.resume(&run_dir).await.unwrap_or_else(|error| panic!("cut {kept}: {error}"));
        assert_eq!(result.final_text, original.result.final_text, "cut {kept}");
        assert_eq!(result.counters, original.result.counters, "cut {kept}");
        assert_eq!(model.remaining(), 0, "cut {kept}");
        let got: Vec<Value> = well_formed(&run_dir)
            .iter()
            .filter(|event| event.kind != EventKind::AssistantDelta)
            .map(comparable)
            .collect();
        assert_eq!(got, wanted, "cut {kept}");
        let state: Value = serde_json::from_slice(&std::fs::read(run_dir.join("state.json"))?)?;
        assert_eq!(state["strategy_state"], task_state(&original), "cut {kept}");
    }
    Ok(())
}
