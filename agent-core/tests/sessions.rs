//! A run as a session: `ask_user` ends the work `needs_input` with the question kept in the
//! run directory, `Agent::send` answers it (or gives a new task, with fresh budgets, or runs
//! a slash command without the model), all in one run directory that replay reproduces.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::ExitCode;
use std::sync::Arc;

use common::{answer, call, document, request_text, run_script, select, tool, tool_names, toolbox};
use model_adapter::{MockModel, MockReply};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use skills_agent_core::{AgentConfig, DecideMode, EventKind, Outcome, STORE_PATH, replay_check};

fn main() -> ExitCode {
    common::main(tests![
        ask_user_is_offered_only_when_configured,
        a_question_ends_the_work_and_the_answer_continues_it,
        a_slash_command_runs_without_the_model_and_keeps_the_question,
        a_new_task_continues_the_transcript_with_fresh_budgets,
        the_builtin_tools_are_actions_when_configured,
        json_mode_answers_arrive_as_user_messages,
        send_and_resume_refuse_the_wrong_kind_of_run,
        an_answer_interrupted_midway_resumes_after_its_input,
        an_argument_the_task_does_not_state_is_asked_for,
        a_choice_the_task_does_not_make_is_asked_for,
    ])
}

fn asking() -> AgentConfig {
    let mut config = AgentConfig::default();
    config.guard.ask_user = true;
    config
}

fn events_of(run_dir: &std::path::Path) -> Vec<skills_agent_core::Event> {
    common::well_formed(run_dir)
}

fn kinds(events: &[skills_agent_core::Event]) -> Vec<&'static str> {
    events.iter().map(|event| event.kind.as_str()).collect()
}

fn state(run_dir: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(run_dir.join("state.json")).unwrap()).unwrap()
}

async fn ask_user_is_offered_only_when_configured() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![answer("done")]));
    fixture.run(fixture.agent(&model, AgentConfig::default()), "Say done").await?;
    assert!(!tool_names(&model.requests()[0]).contains(&"ask_user".to_owned()));
    let model = Arc::new(MockModel::new(vec![answer("done")]));
    fixture.run(fixture.agent(&model, asking()), "Say done").await?;
    assert!(tool_names(&model.requests()[0]).contains(&"ask_user".to_owned()));
    // A model that asks anyway, unoffered, is told so and goes on.
    let model = Arc::new(MockModel::new(vec![
        call("ask_user", json!({"question": "Which file?"})),
        answer("done"),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), "Say done").await?;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.statuses(), ["invalid_action"]);
    Ok(())
}

async fn a_question_ends_the_work_and_the_answer_continues_it() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        call("ask_user", json!({"question": "Which word should I log?", "thought": "unclear"})),
        tool("log", &["banana"]),
        answer("Logged banana."),
    ]));
    let agent = fixture.agent(&model, asking()).build()?;
    let first = agent.run("Log the word I have in mind").await?;
    assert_eq!(first.outcome, Outcome::NeedsInput);
    assert_eq!(first.final_text, "Which word should I log?");
    let run_dir = first.run_dir.clone().unwrap();
    assert_eq!(std::fs::read_to_string(run_dir.join("final.md"))?, "Which word should I log?\n");
    assert_eq!(state(&run_dir)["pending_question"], "Which word should I log?");
    assert_eq!(state(&run_dir)["outcome"], "needs_input");
    let events = events_of(&run_dir);
    assert_eq!(kinds(&events).last(), Some(&"run_finished"));
    let finished = &events.last().unwrap().data;
    assert_eq!(
        (finished["outcome"].clone(), finished["degraded"].clone()),
        (json!("needs_input"), json!(false))
    );

    let second = agent.send(&run_dir, "banana").await?;
    assert_eq!(second.outcome, Outcome::Completed);
    assert_eq!(second.final_text, "Logged banana.");
    assert_eq!(second.run_dir.as_deref(), Some(run_dir.as_path()));
    assert_eq!(fixture.workspace_text("log.txt"), "banana\n");
    // The answer is the result of the call that asked.
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert!(request_text(&requests[2]).contains("The user answers: banana"));
    let events = events_of(&run_dir);
    let inputs: Vec<&Value> =
        events.iter().filter(|e| e.kind == EventKind::UserInput).map(|e| &e.data).collect();
    assert_eq!(inputs, [&json!({"text": "banana", "kind": "answer"})]);
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::RunFinished).count(), 2);
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::InputRequested).count(), 1);
    assert!(state(&run_dir).get("pending_question").is_none());
    assert_eq!(state(&run_dir)["outcome"], "completed");
    assert_eq!(std::fs::read_to_string(run_dir.join("final.md"))?, "Logged banana.\n");
    let report = replay_check(&run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    assert_eq!(report.compliance.score, 1.0, "{:?}", report.compliance);
    Ok(())
}

async fn a_slash_command_runs_without_the_model_and_keeps_the_question() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        call("ask_user", json!({"question": "Which word?"})),
        answer("You meant apple."),
    ]));
    let agent = fixture.agent(&model, asking()).build()?;
    let first = agent.run("Guess my word").await?;
    let run_dir = first.run_dir.clone().unwrap();
    let added = agent.send(&run_dir, "/todo add buy milk").await?;
    assert_eq!(added.outcome, Outcome::NeedsInput);
    assert_eq!(
        added.final_text,
        "added to-do #1: buy milk\n\n(The task still waits for your answer: Which word?)"
    );
    let viewed = agent.send(&run_dir, "/view").await?;
    assert!(
        viewed
            .final_text
            .starts_with("to-do list (1 open, 0 done):\n[ ] #1 buy milk\nthe schedule is empty"),
        "{}",
        viewed.final_text
    );
    let bad = agent.send(&run_dir, "/schedule add tomorrow").await?;
    assert!(bad.final_text.contains("missing `::`"), "{}", bad.final_text);
    assert_eq!(model.requests().len(), 1, "slash commands call no model");
    assert_eq!(state(&run_dir)["pending_question"], "Which word?");
    let done = agent.send(&run_dir, "apple").await?;
    assert_eq!((done.outcome, done.final_text.as_str()), (Outcome::Completed, "You meant apple."));
    let events = events_of(&run_dir);
    let commands: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e.kind == EventKind::CommandExecuted)
        .map(|e| (&e.data["tool"], &e.data["status"]))
        .collect();
    assert_eq!(
        commands,
        [
            (&json!("todo"), &json!("ok")),
            (&json!("view"), &json!("ok")),
            (&json!("schedule"), &json!("failed"))
        ]
    );
    // A slash command after the work completed has no question to keep.
    let listed = agent.send(&run_dir, "/todo").await?;
    assert_eq!(
        (listed.outcome, listed.final_text.as_str()),
        (Outcome::Completed, "to-do list (1 open, 0 done):\n[ ] #1 buy milk")
    );
    // Replay takes the commands' outputs from the record, whatever the store holds now.
    std::fs::remove_file(fixture.workspace.join(STORE_PATH))?;
    let report = replay_check(&run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    assert!(report.compliance.sequence_violations.is_empty(), "{:?}", report.compliance);
    Ok(())
}

async fn a_new_task_continues_the_transcript_with_fresh_budgets() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut config = AgentConfig::default();
    config.budgets.max_turns = 2;
    let model = Arc::new(MockModel::new(vec![
        tool("log", &["x"]), // refused: not selected
        answer("First done."),
        select("toolbox"),
        answer("Second done."),
    ]));
    let agent = fixture.agent(&model, config).build()?;
    let first = agent.run("Log x").await?;
    assert_eq!((first.outcome, first.turns), (Outcome::Completed, 2));
    let run_dir = first.run_dir.clone().unwrap();
    let second = agent.send(&run_dir, "Now select the toolbox").await?;
    assert_eq!((second.outcome, second.final_text.as_str()), (Outcome::Completed, "Second done."));
    assert_eq!((second.turns, second.tool_calls), (4, 2), "counters add up over the run");
    let events = events_of(&run_dir);
    let budgets: Vec<Value> = events
        .iter()
        .filter(|e| e.kind == EventKind::TurnStarted)
        .map(|e| e.data["budget"]["turns"].clone())
        .collect();
    assert_eq!(budgets, [json!([1, 2]), json!([2, 2]), json!([1, 2]), json!([2, 2])]);
    let requests = model.requests();
    let third = request_text(&requests[2]);
    assert!(third.contains("First done."), "the transcript goes on");
    assert!(third.contains("New task: Now select the toolbox"));
    assert!(third.contains("Task: Now select the toolbox"), "the note restates the new task");
    assert_eq!(state(&run_dir)["task"], "Now select the toolbox");
    let report = replay_check(&run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    assert!(report.compliance.budget_overruns.is_empty(), "{:?}", report.compliance);
    Ok(())
}

async fn the_builtin_tools_are_actions_when_configured() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut config = AgentConfig::default();
    config.guard.builtin_tools = true;
    let model = Arc::new(MockModel::new(vec![
        call("todo", json!({"command": "add water the plants"})),
        call("schedule", json!({"command": "add 2026-11-24 08:00 :: water"})),
        call("todo", json!({"command": "done 7"})),
        answer("Noted."),
    ]));
    let ran = fixture.run(fixture.agent(&model, config), "Remind me to water the plants").await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "failed"]);
    assert_eq!(ran.result.tool_calls, 3);
    let names = tool_names(&model.requests()[0]);
    assert!(names.contains(&"todo".to_owned()) && names.contains(&"schedule".to_owned()));
    let store: Value = serde_json::from_slice(&std::fs::read(fixture.workspace.join(STORE_PATH))?)?;
    assert_eq!(store["todos"][0]["text"], "water the plants");
    assert_eq!(store["schedule"][0]["when"], "2026-11-24 08:00");
    let report = replay_check(&ran.run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn json_mode_answers_arrive_as_user_messages() -> anyhow::Result<()> {
    let fixture = toolbox();
    let mut config = asking();
    config.decide = DecideMode::Json;
    let model = Arc::new(MockModel::new(vec![
        document("ask_user", json!({"question": "Which colour?"}), json!({})),
        document("final_answer", json!({"content": "Blue it is."}), json!({})),
    ]));
    let agent = fixture.agent(&model, config).build()?;
    let first = agent.run("Pick my colour").await?;
    assert_eq!((first.outcome, first.final_text.as_str()), (Outcome::NeedsInput, "Which colour?"));
    let run_dir = first.run_dir.clone().unwrap();
    let second = agent.send(&run_dir, "blue").await?;
    assert_eq!(second.final_text, "Blue it is.");
    let requests = model.requests();
    // The answer is a user message of its own, before the turn's note.
    let users: Vec<String> = requests[1]
        .messages
        .iter()
        .filter(|message| matches!(message, model_adapter::Message::User { .. }))
        .map(common::message_text)
        .collect();
    assert_eq!(users[users.len() - 2], "The user answers: blue", "{users:?}");
    let report = replay_check(&run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn send_and_resume_refuse_the_wrong_kind_of_run() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![call("ask_user", json!({"question": "Which?"}))]));
    let agent = fixture.agent(&model, asking()).build()?;
    let first = agent.run("Do the thing").await?;
    let run_dir = first.run_dir.clone().unwrap();
    let error = agent.resume(&run_dir).await.unwrap_err().to_string();
    assert!(error.contains("waits for the user's answer"), "{error}");
    // An interrupted run (cut after its first turn) must be resumed before it takes input.
    let events = std::fs::read_to_string(run_dir.join("events.jsonl"))?;
    let cut: Vec<&str> =
        events.lines().take_while(|line| !line.contains("\"turn_finished\"")).collect();
    std::fs::write(run_dir.join("events.jsonl"), format!("{}\n", cut.join("\n")))?;
    let error = agent.send(&run_dir, "this").await.unwrap_err().to_string();
    assert!(error.contains("resume it first"), "{error}");
    let error = agent.send(&fixture.workspace, "this").await.unwrap_err().to_string();
    assert!(error.contains("events.jsonl"), "{error}");
    let _ = MockReply::text("");
    Ok(())
}

async fn an_answer_interrupted_midway_resumes_after_its_input() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        call("ask_user", json!({"question": "Which word?"})),
        tool("log", &["kiwi"]),
        answer("Logged kiwi."),
    ]));
    let agent = fixture.agent(&model, asking()).build()?;
    let run_dir = agent.run("Log my word").await?.run_dir.unwrap();
    agent.send(&run_dir, "kiwi").await?;
    // Cut the record just after the answer arrived (killed before the model was asked).
    let events = std::fs::read_to_string(run_dir.join("events.jsonl"))?;
    let mut kept = Vec::new();
    for line in events.lines() {
        kept.push(line);
        if line.contains("\"user_input\"") {
            break;
        }
    }
    std::fs::write(run_dir.join("events.jsonl"), format!("{}\n", kept.join("\n")))?;
    std::fs::remove_file(fixture.workspace.join("log.txt"))?;
    let again = Arc::new(MockModel::new(vec![tool("log", &["kiwi"]), answer("Logged kiwi.")]));
    let resumed = fixture.agent(&again, asking()).build()?.resume(&run_dir).await?;
    assert_eq!(
        (resumed.outcome, resumed.final_text.as_str()),
        (Outcome::Completed, "Logged kiwi.")
    );
    assert_eq!(again.requests().len(), 2, "only the unrecorded work asks the model");
    assert!(request_text(&again.requests()[0]).contains("The user answers: kiwi"));
    assert_eq!(fixture.workspace_text("log.txt"), "kiwi\n");
    let events = events_of(&run_dir);
    assert_eq!(events.iter().filter(|e| e.kind == EventKind::UserInput).count(), 1);
    let report = replay_check(&run_dir).await?;
    assert!(report.reproduced(), "{:?}", report.divergence);
    Ok(())
}

async fn an_argument_the_task_does_not_state_is_asked_for() -> anyhow::Result<()> {
    let fixture = toolbox();
    let question = "Which word should I log: apple or banana?";
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("log", &["apple"]),
        call("ask_user", json!({"question": question})),
    ]));
    let ran = fixture.agent(&model, asking()).build()?.run("Log the word I have in mind").await?;
    assert_eq!((ran.outcome, ran.final_text.as_str()), (Outcome::NeedsInput, question));
    let run_dir = ran.run_dir.unwrap();
    let observations: Vec<Value> = events_of(&run_dir)
        .iter()
        .filter(|event| event.kind == EventKind::ObservationRecorded)
        .map(|event| event.data.clone())
        .collect();
    assert_eq!(observations[1]["status"], "refused");
    assert_eq!(
        observations[1]["content"],
        "`apple` is not in the task or any result: if the task does not say it, ask the user \
         (ask_user) which one, naming the options; if it is right, make the same call again"
    );
    assert_eq!(fixture.workspace_text("log.txt"), "", "nothing ran");
    assert!(replay_check(&run_dir).await?.reproduced());

    // The same call made again runs; without `ask_user` on offer, it runs at once.
    for (config, replies) in [
        (asking(), vec![tool("log", &["apple"]), tool("log", &["apple"])]),
        (AgentConfig::default(), vec![tool("log", &["apple"])]),
    ] {
        let fixture = toolbox();
        let mut script = vec![select("toolbox")];
        script.extend(replies);
        script.push(answer("Logged apple."));
        let model = Arc::new(MockModel::new(script));
        let ran = fixture.agent(&model, config).build()?.run("Log a word").await?;
        assert_eq!(ran.outcome, Outcome::Completed);
        assert_eq!(fixture.workspace_text("log.txt"), "apple\n");
    }
    Ok(())
}

async fn a_choice_the_task_does_not_make_is_asked_for() -> anyhow::Result<()> {
    // Asked for "the total of the column", the local 1.5B summarised every column and answered
    // with the first sum. From format 22, with `ask_user` on offer, that answer is refused once.
    let task = "What is the total of the column in sales.csv?";
    let question = "Which column of sales.csv: units, unit_price or amount?";
    let sums = "echo 'units sum: 212'; echo 'unit_price sum: 229.44'; echo 'amount sum: 1705.47'";
    let script = |rest: Vec<MockReply>| {
        let mut replies =
            vec![select("toolbox"), run_script("toolbox", "scripts/sums.sh", &[]), answer("212")];
        replies.extend(rest);
        replies
    };
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/sums.sh", sums);
    let model =
        Arc::new(MockModel::new(script(vec![call("ask_user", json!({"question": question}))])));
    let ran = fixture.agent(&model, asking()).build()?.run(task).await?;
    assert_eq!((ran.outcome, ran.final_text.as_str()), (Outcome::NeedsInput, question));
    assert_eq!(ran.reasoning_metrics.incomplete_refusals, 1);
    let run_dir = ran.run_dir.unwrap();
    let refused: Vec<Value> = events_of(&run_dir)
        .iter()
        .filter(|event| event.kind == EventKind::ObservationRecorded)
        .map(|event| event.data.clone())
        .filter(|data| data["status"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(
        refused[0]["content"],
        "answer not accepted yet: it gives `units sum`, and the results give `unit_price sum`, \
         `amount sum` too; the task does not say which one it means. Ask the user (ask_user): \
         \"Which one do you mean: units, unit_price or amount?\" If the task does say, answer \
         with that one."
    );
    assert!(replay_check(&run_dir).await?.reproduced());

    // Once per task: the same answer again is taken. Without `ask_user` on offer, at once.
    for (config, rest) in [(asking(), vec![answer("212")]), (AgentConfig::default(), vec![])] {
        let fixture = toolbox();
        fixture.script("toolbox", "scripts/sums.sh", sums);
        let model = Arc::new(MockModel::new(script(rest)));
        let ran = fixture.agent(&model, config).build()?.run(task).await?;
        assert_eq!((ran.outcome, ran.final_text.as_str()), (Outcome::Completed, "212"));
        assert_eq!(model.remaining(), 0);
    }
    Ok(())
}
