//! Grounded final answers and arguments from the skill's usage: an answer that states a value
//! nothing in the run shows is refused once with a note naming the value, a second is taken
//! and marked `grounded: false`; a script call with a placeholder copied from SKILL.md, or
//! with more arguments than its usage shows, is refused before it runs; and every path replays
//! exactly — checked on the observations, the counters, `run_finished`, `state.json` and the
//! requests the model received, for react and plan-execute-think.

// A harness = false test binary: unwrap and expect are how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::{
    Fixture, Ran, answer, call, request_text, run_script, select, text, tool, tool_names, toolbox,
};
use model_adapter::{MockModel, MockReply};
use pretty_assertions::assert_eq;
use serde_json::json;
use skills_agent_core::{AgentConfig, EventKind, Outcome, replay_check};

fn main() -> std::process::ExitCode {
    common::main(tests![
        an_ungrounded_answer_is_refused_once_then_taken_and_marked,
        an_answer_from_a_scripts_output_is_taken_at_once,
        after_a_refusal_the_honest_answer_is_grounded,
        a_think_that_completes_with_an_invented_figure_is_refused_once,
        placeholders_and_argument_counts_are_held_to_the_skills_usage,
        a_scripts_command_is_written_as_its_usage_writes_it,
        a_file_placeholder_without_a_file_in_the_task_says_to_find_it,
        a_script_refused_for_a_file_the_task_does_not_name_waits_for_a_result,
        an_answer_with_no_figure_for_a_columns_total_is_refused_once,
        an_answer_that_never_converts_is_refused_once,
        a_think_refused_as_incomplete_is_the_ending_at_a_limit,
        an_unconverted_answer_is_refused_again_only_after_a_new_result,
        a_value_copied_from_an_example_is_refused_until_it_changes,
        a_result_of_a_guessed_figure_grounds_nothing,
        a_batch_answered_after_its_first_item_is_refused_once,
        an_answer_with_one_result_gets_the_runs_on_the_tasks_values_after_it,
        digits_that_are_no_results_figure_leave_an_answer_figure_less,
        a_final_answer_cut_by_the_token_limit_is_checked_like_any_other,
        a_refused_example_path_grounds_no_answer,
        a_repeat_of_a_call_that_worked_brings_no_new_result,
        a_script_named_as_the_notes_write_it_is_grounded,
        a_quantity_answered_without_a_figure_gets_the_results,
        a_count_no_result_names_is_refused_once,
        a_skills_example_figure_is_no_count,
        one_result_where_the_task_adds_two_is_refused_once,
        an_answer_with_no_figure_where_the_task_adds_two_is_refused_once,
        a_plan_execute_think_round_after_both_results_refused_only_thinks,
        a_refusal_that_names_every_value_gets_its_think_past_the_round_limit,
        an_answer_that_names_no_file_gets_the_files_the_scripts_ran_on,
        a_second_single_result_where_the_task_adds_two_is_refused_too,
        both_results_side_by_side_where_the_task_adds_them_are_refused_once,
        an_argument_that_respells_the_tasks_word_is_refused,
        a_value_written_with_its_unit_beside_the_unit_is_refused_until_it_changes,
        a_value_with_its_unit_before_two_units_is_refused_with_the_value_alone,
        an_answer_missing_a_named_columns_figure_is_refused_once_with_its_line,
        a_number_the_task_writes_twice_needs_two_calls,
        a_repeated_failure_names_the_argument_the_error_names,
        a_repeated_failure_on_an_optional_last_argument_shows_the_call_without_it,
        a_failure_on_a_word_the_task_does_not_write_shows_the_call_with_the_tasks_word,
        an_example_file_pattern_is_followed_by_the_tasks_kinds_of_file,
        an_example_file_name_is_followed_by_the_one_file_found,
        a_refused_example_value_made_again_ends_the_run_stuck_by_the_third,
        an_invented_sum_is_refused_with_the_sum_worked_out,
        an_example_word_for_the_tasks_symbol_is_followed_by_the_call_with_it,
        a_unit_with_its_first_letter_left_out_is_refused_with_the_tasks_unit,
        a_call_refused_before_it_ran_uses_none_of_the_tasks_values,
        an_unconverted_answer_after_the_conversion_ran_is_shown_its_line,
        the_same_one_result_again_is_refused_with_the_lines_to_combine,
        a_named_column_no_call_ran_for_is_refused_once_in_plan_execute_think,
        a_summary_cut_off_inside_a_copied_call_is_no_ending_at_a_limit,
        a_target_unit_named_without_its_figure_is_refused_with_the_line,
    ])
}

async fn replays_exactly(ran: &Ran) {
    let report = replay_check(&ran.run_dir).await.unwrap();
    assert_eq!(report.divergence, None, "{}", ran.run_dir.display());
    assert!(report.reproduced());
}

/// Runs the task on the toolbox fixture (kept: its folder holds the run) and checks that the
/// run replays exactly.
async fn run(replies: Vec<MockReply>, config: AgentConfig) -> (Fixture, Ran, Arc<MockModel>) {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(replies));
    // The task gives the figures the scripts are run with: from format 8 the result of a call
    // made with a figure nothing gave grounds no answer.
    let task = "How many lines does notes.txt have? Print it 3 times as x.";
    let ran = fixture.run(fixture.agent(&model, config), task);
    let ran = ran.await.unwrap();
    replays_exactly(&ran).await;
    (fixture, ran, model)
}

async fn an_ungrounded_answer_is_refused_once_then_taken_and_marked() -> anyhow::Result<()> {
    let invented = "The file notes.txt has 10 lines.";
    let (_fixture, ran, model) =
        run(vec![answer(invented), answer(invented)], AgentConfig::default()).await;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, invented);
    assert!(!ran.result.grounded);
    let observations = ran.observations();
    assert_eq!(observations.len(), 1);
    assert_eq!(observations[0].0, "refused");
    let note = &observations[0].1;
    assert!(note.contains("(10)") && note.contains("unknown"), "{note}");
    // The model saw the note before its second answer, and an answer that admits it cannot
    // tell, with no figure, was the only answer it could write.
    let second = &model.requests()[1];
    assert!(request_text(second).contains(note.as_str()));
    let final_answer = second.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    let pattern = &final_answer.parameters["properties"]["content"]["pattern"];
    assert_eq!(pattern, &json!("^I (cannot|could not|do not know)[^0-9\"]{0,400}$"));
    let first = &model.requests()[0];
    let final_answer = first.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    assert_eq!(final_answer.parameters["properties"]["content"].get("pattern"), None);
    let finished = ran.finished();
    assert_eq!(finished["grounded"], json!(false));
    assert_eq!(finished["reasoning_metrics"]["ungrounded_refusals"], json!(1));
    assert_eq!(finished["reasoning_metrics"]["ungrounded_answers"], json!(1));
    assert_eq!(ran.result.reasoning_metrics.ungrounded_answers, 1);
    assert_eq!(ran.state()["reasoning"]["ungrounded_refusals"], json!(1));
    assert_eq!(ran.result.counters.refusals, 1);
    Ok(())
}

async fn an_answer_from_a_scripts_output_is_taken_at_once() -> anyhow::Result<()> {
    // print.sh 3 x prints "line 1 of 3: x" … "line 3 of 3: x".
    let replies = vec![
        select("toolbox"),
        tool("print", &["3", "x"]),
        answer("It printed 3 lines, the last \"line 3 of 3: x\"; 1 + 2 = 3, and 6 in all."),
    ];
    let (_fixture, ran, _) = run(replies, AgentConfig::default()).await;
    assert!(ran.result.grounded);
    assert_eq!(ran.statuses(), ["ok", "ok"]);
    let finished = ran.finished();
    // Nothing is written for a grounded answer: records keep their shape.
    assert_eq!(finished.get("grounded"), None);
    assert_eq!(finished["reasoning_metrics"].get("ungrounded_refusals"), None);
    Ok(())
}

async fn after_a_refusal_the_honest_answer_is_grounded() -> anyhow::Result<()> {
    let honest = "I cannot tell: no installed skill counts the lines of a file.";
    // A failed call after the refusal is no result: the answer is still held to an admission.
    let replies = vec![
        answer("notes.txt has 12 lines"),
        select("toolbox"),
        tool("fail", &["x"]),
        answer(honest),
    ];
    let (_fixture, ran, model) = run(replies, AgentConfig::default()).await;
    let last = model.requests().last().unwrap().clone();
    let final_answer = last.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    assert!(final_answer.parameters["properties"]["content"]["pattern"].is_string());
    assert_eq!(ran.result.final_text, honest);
    assert!(ran.result.grounded);
    assert_eq!(ran.result.reasoning_metrics.ungrounded_refusals, 1);
    assert_eq!(ran.result.reasoning_metrics.ungrounded_answers, 0);
    assert_eq!(ran.finished().get("grounded"), None);
    Ok(())
}

async fn a_repeat_of_a_call_that_worked_brings_no_new_result() -> anyhow::Result<()> {
    // The local 1.5B's way out of the admission: run the call its refused answer came after
    // again, then give the refused value again. From format 9 the repeat is no new result.
    let honest = "I cannot tell: printing does not count the lines of notes.txt.";
    let replies = vec![
        select("toolbox"),
        tool("print", &["3", "x"]),
        answer("notes.txt has 12 lines"),
        tool("print", &["3", "x"]),
        answer(honest),
    ];
    let (_fixture, ran, model) = run(replies, AgentConfig::default()).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok"]);
    let last = model.requests().last().unwrap().clone();
    let names: Vec<&str> = last.tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["final_answer"]);
    // From format 9 the admission leaves quotes out (a grammar let one end the JSON string).
    let content = &last.tools[0].parameters["properties"]["content"];
    assert_eq!(content["pattern"], json!("^I (cannot|could not|do not know)[^0-9\"]{0,400}$"));
    assert_eq!(ran.result.final_text, honest);
    assert!(ran.result.grounded);
    // A call that was not made before is a new result: the pattern goes.
    let replies = vec![
        select("toolbox"),
        tool("print", &["3", "x"]),
        answer("notes.txt has 12 lines"),
        tool("print", &["3", "y"]),
        answer("It printed 3 lines."),
    ];
    let (_fixture, ran, model) = run(replies, AgentConfig::default()).await;
    let last = model.requests().last().unwrap().clone();
    let final_answer = last.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    assert_eq!(final_answer.parameters["properties"]["content"].get("pattern"), None);
    assert_eq!(ran.result.final_text, "It printed 3 lines.");
    Ok(())
}

async fn a_script_named_as_the_notes_write_it_is_grounded() -> anyhow::Result<()> {
    // The notes write a call as `skill/scripts/x.sh`, and so may an answer (format 9).
    let said = "toolbox/scripts/print.sh printed 3 lines of x.";
    let replies = vec![select("toolbox"), tool("print", &["3", "x"]), answer(said)];
    let (_fixture, ran, _) = run(replies, AgentConfig::default()).await;
    assert_eq!(ran.statuses(), ["ok", "ok"]);
    assert_eq!(ran.result.final_text, said);
    assert!(ran.result.grounded);
    Ok(())
}

async fn a_quantity_answered_without_a_figure_gets_the_results() -> anyhow::Result<()> {
    // A task that asks "how many" and gives no figure, answered with no figure: the results
    // follow the answer (format 9), so the user sees the value.
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("print", &["3", "x"]),
        answer("The script ran and printed the answer."),
    ]));
    let task = "How many lines does the print script of toolbox print?";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(
        ran.result.final_text,
        "The script ran and printed the answer.\n\nResults:\n- run_script \
         toolbox/scripts/print.sh 3 x: line 1 of 3: x · line 2 of 3: x · line 3 of 3: x"
    );
    Ok(())
}

async fn a_count_no_result_names_is_refused_once() -> anyhow::Result<()> {
    // Asked for a count of words, the local 1.5B ran a file search and answered "1 word" from
    // its `matches: 1`. From format 10 a count the task asks for needs a result that names
    // the thing counted.
    let run = |replies: Vec<MockReply>| async move {
        let fixture = toolbox();
        fixture.script("toolbox", "scripts/search.sh", "echo \"file: $1\"\necho \"matches: 1\"");
        let model = Arc::new(MockModel::new(replies));
        let task = "How many words does notes.txt have?";
        let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await.unwrap();
        replays_exactly(&ran).await;
        (fixture, ran, model)
    };
    let search = || run_script("toolbox", "scripts/search.sh", &["notes.txt"]);
    let honest = "I cannot tell how many words notes.txt has: the search counts matches only.";
    let replies =
        vec![select("toolbox"), search(), answer("notes.txt has 1 word."), answer(honest)];
    let (_fixture, ran, model) = run(replies).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused"]);
    let note = &ran.observations()[2].1;
    assert!(note.contains("(1 word)"), "{note}");
    let last = model.requests().last().unwrap().clone();
    let final_answer = last.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    assert!(final_answer.parameters["properties"]["content"]["pattern"].is_string());
    assert_eq!(ran.result.final_text, honest);
    assert!(ran.result.grounded);
    // The figure said of what the result names is taken at once.
    let said = "notes.txt: 1 match.";
    let (_fixture, ran, _) = run(vec![select("toolbox"), search(), answer(said)]).await;
    assert_eq!(ran.statuses(), ["ok", "ok"]);
    assert_eq!(ran.result.final_text, said);
    Ok(())
}

async fn a_skills_example_figure_is_no_count() -> anyhow::Result<()> {
    // Asked for a count of words, the local 1.5B searched for the file and answered "0 words":
    // file-finder's SKILL.md says "`matches: 0` means nothing was found". From format 24 a
    // skill's example figure grounds no count of a thing no result names.
    let fixture = Fixture::new();
    fixture.skill(
        "finder",
        "Finds files.",
        "",
        "Run `scripts/find.sh PATTERN`. `matches: 0` means none.",
    );
    fixture.script("finder", "scripts/find.sh", "echo \"file: $1\"\necho \"matches: 1\"");
    let honest = "I cannot tell how many words TASK.md has: the search does not count words.";
    let model = Arc::new(MockModel::new(vec![
        select("finder"),
        find(&["TASK.md"]),
        answer("TASK.md has 0 words."),
        answer(honest),
    ]));
    let task = "How many words does TASK.md have?";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused"]);
    let note = &ran.observations()[2].1;
    assert!(note.contains("(0 words)"), "{note}");
    assert_eq!(ran.result.final_text, honest);
    assert!(ran.result.grounded);
    Ok(())
}

/// The task to add two column totals on the toolbox with a `total.sh`: the model selects,
/// totals `amount`, answers with that total alone, totals `units`, then gives `rest`. The run
/// replays exactly.
/// A plan-execute-think `think` with this summary.
fn think(summary: &str, completed: bool) -> MockReply {
    call(
        "think",
        json!({"internal_analysis": "looked at the observations", "user_summary": summary,
               "task_completed": completed, "next_steps_preview": ""}),
    )
}

/// A plan-execute-think plan of one step.
fn plan(tool: &str, args: &serde_json::Value) -> MockReply {
    call("plan_tool_call", json!({"reasoning": "next", "steps": [{"tool": tool, "args": args}]}))
}

/// A task that adds two column totals, on the toolbox with a `total.sh` that prints either.
const ADD_TWO_TOTALS: &str =
    "Add the total of the amount column to the total of the units column: what is the sum?";

/// The toolbox with `scripts/total.sh COLUMN`, which prints that column's total.
fn totals_toolbox() -> Fixture {
    let fixture = toolbox();
    fixture.script(
        "toolbox",
        "scripts/total.sh",
        "case \"$1\" in amount) echo \"amount sum: 1705.47\";; *) echo \"units sum: 212\";; esac",
    );
    fixture
}

/// react on [`ADD_TWO_TOTALS`]: the amount total fetched and restated as the answer, the units
/// total fetched, then `rest`.
async fn add_two_totals(rest: Vec<MockReply>) -> anyhow::Result<Ran> {
    Ok(add_two_totals_with_model(rest).await?.0)
}

/// [`add_two_totals`], with the model (its requests).
async fn add_two_totals_with_model(rest: Vec<MockReply>) -> anyhow::Result<(Ran, Arc<MockModel>)> {
    let fixture = totals_toolbox();
    let total = |column: &str| run_script("toolbox", "scripts/total.sh", &[column]);
    let start = vec![
        select("toolbox"),
        total("amount"),
        answer("The total of the amount column is 1705.47."),
        total("units"),
    ];
    let model = Arc::new(MockModel::new([start, rest].concat()));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), ADD_TWO_TOTALS).await?;
    replays_exactly(&ran).await;
    Ok((ran, model))
}

/// plan-execute-think on [`ADD_TWO_TOTALS`]: `first` (a plan selecting the toolbox), then a
/// round per total, each think restating that one total, then a think with the sum. The run
/// replays exactly and completes with the sum (with the fixture, which holds the run's folders).
async fn both_totals_refused_then_summed(
    first: MockReply,
) -> anyhow::Result<(Ran, Arc<MockModel>, Fixture)> {
    let fixture = totals_toolbox();
    let think = |summary: &str| think(summary, true);
    let total = |column: &str| {
        plan(
            "run_script",
            &json!({"skill": "toolbox", "script": "scripts/total.sh", "args": [column]}),
        )
    };
    let summed = "1705.47 + 212 = 1917.47";
    let model = Arc::new(MockModel::new(vec![
        first,
        total("amount"),
        think("The total of the amount column is 1705.47."),
        total("units"),
        think("The total of the units column is 212."),
        think(summed),
    ]));
    let config = AgentConfig { strategy: "plan-execute-think".into(), ..AgentConfig::default() };
    let ran = fixture.run(fixture.agent(&model, config), ADD_TWO_TOTALS).await?;
    replays_exactly(&ran).await;
    assert_eq!((ran.result.outcome, ran.result.final_text.as_str()), (Outcome::Completed, summed));
    assert_eq!(model.remaining(), 0);
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 2);
    Ok((ran, model, fixture))
}

async fn a_plan_execute_think_round_after_both_results_refused_only_thinks() -> anyhow::Result<()> {
    // Refused for restating one total, then the other, with "work out their sum (1705.47 +
    // 212)", the local 1.5B had to plan a step first, ran a total again, and answered with it.
    // From format 12 the next round is a think alone.
    let first = plan("select_skills", &json!({"names": ["toolbox"]}));
    let (ran, model, _fixture) = both_totals_refused_then_summed(first).await?;
    let turns = ran.data(EventKind::TurnStarted);
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[3]["allowed"], json!(["think"]));
    // A medium task's three rounds, moved on by the selecting one: within the limit.
    assert_eq!(turns[3]["round"], json!([4, 4]));
    assert_eq!(ran.state()["strategy_state"].get("closing_rounds"), None);
    let seen = request_text(&model.requests()[5]);
    assert!(seen.contains("their sum (1705.47 + 212)"), "{seen}");
    let note = common::note(&model.requests()[5]);
    assert!(note.contains("Your last summary: answer not accepted yet"), "{note}");
    assert!(note.contains("work out the arithmetic in internal_analysis first"), "{note}");
    Ok(())
}

async fn a_refusal_that_names_every_value_gets_its_think_past_the_round_limit() -> anyhow::Result<()>
{
    // Judged simple (two rounds), the local 1.5B ran the two totals in its last two rounds, was
    // refused with the sum to work out, and the round limit ended the run before it could
    // answer ("Next steps: add the total of the amount column to …"). From format 15 that
    // think runs past the limit, once.
    let first = call(
        "plan_tool_call",
        json!({"reasoning": "next", "complexity": "simple",
               "steps": [{"tool": "select_skills", "args": {"names": ["toolbox"]}}]}),
    );
    let (ran, _model, _fixture) = both_totals_refused_then_summed(first).await?;
    let turns = ran.data(EventKind::TurnStarted);
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[2]["round"], json!([3, 3]));
    assert_eq!(turns[3]["round"], json!([4, 4]));
    assert_eq!(turns[3]["allowed"], json!(["think"]));
    let state = ran.state();
    assert_eq!(state["strategy_state"]["closing_rounds"], 1);
    assert_eq!(state["strategy_state"]["max_rounds"], 2);
    Ok(())
}

async fn one_result_where_the_task_adds_two_is_refused_once() -> anyhow::Result<()> {
    // Asked to add two column totals, the local 1.5B summarised one column and answered with
    // its total. From format 10 that answer is refused once, and the second total frees it.
    let summed = "1705.47 + 212 = 1917.47";
    let ran = add_two_totals(vec![answer(summed)]).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok"]);
    let note = &ran.observations()[2].1;
    assert!(note.contains("1705.47 is one result"), "{note}");
    assert_eq!(ran.result.final_text, summed);
    assert!(ran.result.grounded);
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    Ok(())
}

async fn an_answer_that_names_no_file_gets_the_files_the_scripts_ran_on() -> anyhow::Result<()> {
    // The task names no file, the run found one and ran a script on it, and the answer said
    // "the file named in the task": from format 10 the file follows the answer.
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/count.sh", "echo \"lines: 3\"");
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        run_script("toolbox", "scripts/count.sh", &["./notes.txt"]),
        answer("The file named in the task has 3 lines."),
    ]));
    let task = "Find the notes file and count its lines.";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "ok"]);
    assert_eq!(ran.result.final_text, "The file named in the task has 3 lines.\n\nFile: notes.txt");
    Ok(())
}

async fn a_think_that_completes_with_an_invented_figure_is_refused_once() -> anyhow::Result<()> {
    let print = json!({"skill": "toolbox", "script": "scripts/print.sh", "args": ["3", "x"]});
    let replies = vec![
        plan("select_skills", &json!({"names": ["toolbox"]})),
        plan("run_script", &print),
        think("It printed 7 lines.", true),
        plan("run_script", &print),
        think("It printed 3 lines.", true),
    ];
    let config = AgentConfig { strategy: "plan-execute-think".into(), ..AgentConfig::default() };
    let (_fixture, ran, model) = run(replies, config).await;
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "It printed 3 lines.");
    assert!(ran.result.grounded);
    assert_eq!(ran.result.reasoning_metrics.ungrounded_refusals, 1);
    // The refusal answered the think call, and the next round's plan saw it.
    assert_eq!(model.remaining(), 0);
    let seen = request_text(&model.requests()[3]);
    assert!(seen.contains("answer not accepted") && seen.contains("(7)"), "{seen}");
    let finishes = ran.data(EventKind::RunFinished);
    assert_eq!(finishes.len(), 1);
    assert_eq!(text(&finishes[0]["outcome"]), "completed");
    Ok(())
}

async fn placeholders_and_argument_counts_are_held_to_the_skills_usage() -> anyhow::Result<()> {
    let fixture = Fixture::new();
    fixture.skill(
        "conv",
        "Converts a value between units.",
        "",
        "Run `scripts/conv.sh VALUE FROM TO`, for example:\n\n```\nscripts/conv.sh 5km mi\n```",
    );
    fixture.script("conv", "scripts/conv.sh", "echo \"converted $*\"");
    let run = |args: &[&str]| run_script("conv", "scripts/conv.sh", args);
    let model = Arc::new(MockModel::new(vec![
        select("conv"),
        run(&["VALUE", "km", "mi"]),
        run(&["<value named in the task>", "km", "mi"]),
        run(&["5", "km", "mi", "12", "km", "mi"]),
        run(&["5", "km", "mi"]),
        answer("5 km are converted: converted 5 km mi"),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Convert 5 km to mi; see notes.md")
        .await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "refused", "refused", "ok"]);
    let observations = ran.observations();
    let placeholder = &observations[1].1;
    assert!(
        placeholder.starts_with(
            "`VALUE` is a placeholder from the skill's usage (SKILL.md: \
         `scripts/conv.sh VALUE FROM TO`)"
        ) && placeholder.ends_with("the task names notes.md"),
        "{placeholder}"
    );
    assert!(observations[2].1.starts_with("`<value named in the task>` is a placeholder"));
    let count = &observations[3].1;
    assert!(
        count.starts_with("`scripts/conv.sh` takes 2 to 3 arguments")
            && count.contains("not 6: for several values, run it once per value"),
        "{count}"
    );
    assert_eq!(ran.result.script_runs, 1);
    // After the select, the schema holds the usage's argument count.
    let tools = &model.requests()[1].tools;
    let run_script = tools.iter().find(|tool| tool.name == "run_script").unwrap();
    let args = &run_script.parameters["properties"]["args"];
    // One more than the usage shows: skills add an optional one in prose.
    assert_eq!((&args["minItems"], &args["maxItems"]), (&json!(2), &json!(4)));
    // The selected skill's usage is in the record, so a re-run or a resume sees it.
    let selected = &ran.state()["selected"][0]["usage"][0];
    assert_eq!(selected["example"], json!("scripts/conv.sh VALUE FROM TO"));
    Ok(())
}

async fn a_scripts_command_is_written_as_its_usage_writes_it() -> anyhow::Result<()> {
    // A skill whose script takes a command ("Run `scripts/dates.py between 2026-01-05
    // 2026-02-06` or `scripts/dates.py weekday 2026-01-05`"): the local 1.5B had `weekday`
    // refused as an example's value (only the first usage line's words counted), and ran
    // `"between 2026-03-01 2026-04-15"` as one argument until the run ended stuck.
    let fixture = Fixture::new();
    fixture.skill(
        "dates",
        "Date arithmetic.",
        "",
        "Run `scripts/dates.sh between 2026-01-05 2026-02-06` or `scripts/dates.sh weekday 2026-01-05`.",
    );
    fixture.script(
        "dates",
        "scripts/dates.sh",
        "case \"$1\" in weekday) echo \"weekday of $2: Friday\";; \
         between) echo \"days: 45\";; *) echo \"usage: dates.sh between DATE DATE | weekday DATE\" >&2; exit 2;; esac",
    );
    let run = |args: &[&str]| run_script("dates", "scripts/dates.sh", args);
    let model = Arc::new(MockModel::new(vec![
        select("dates"),
        run(&["between 2026-01-05 2026-02-06", "weekday 2026-12-25"]),
        run(&["2026-12-25", "weekday"]),
        run(&["weekday", "2026-12-25"]),
        run(&["between 2026-03-01 2026-04-15", "2026-03-01"]),
        run(&["between", "2026-03-01", "2026-04-15"]),
        answer("2026-12-25 is a Friday, and there are 45 days between the two dates."),
    ]));
    let task = "What weekday is 2026-12-25, and how many days are between 2026-03-01 and \
                2026-04-15?";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "refused", "ok", "refused", "ok"]);
    let mut observations = ran.observations();
    // An example's values beside the task's (format 31): the call without them, its command
    // first, is shown.
    let example = observations.remove(1).1;
    assert!(
        example.starts_with("`between 2026-01-05 2026-02-06` is from an example")
            && example.ends_with(
                "Make this call: {\"skill\": \"dates\", \"script\": \"scripts/dates.sh\", \
                 \"args\": [\"weekday\", \"2026-12-25\"]}"
            ),
        "{example}"
    );
    assert_eq!(
        observations[1].1,
        "`weekday` is the script's command: it comes first, before its values. Make this call: \
         {\"skill\": \"dates\", \"script\": \"scripts/dates.sh\", \"args\": [\"weekday\", \"2026-12-25\"]}"
    );
    assert_eq!(
        observations[3].1,
        "`between 2026-03-01 2026-04-15` holds the script's command and its values in one \
         argument: write each as an argument of its own. Make this call: {\"skill\": \"dates\", \
         \"script\": \"scripts/dates.sh\", \"args\": [\"between\", \"2026-03-01\", \"2026-04-15\"]}"
    );
    assert_eq!(ran.result.outcome, Outcome::Completed);
    Ok(())
}

async fn a_file_placeholder_without_a_file_in_the_task_says_to_find_it() -> anyhow::Result<()> {
    let fixture = Fixture::new();
    fixture.skill("lines", "Counts lines.", "", "Run `scripts/count.sh <file named in the task>`.");
    fixture.script("lines", "scripts/count.sh", "wc -l < \"$1\"");
    let model = Arc::new(MockModel::new(vec![
        select("lines"),
        call(
            "run_script",
            json!({"skill": "lines", "script": "scripts/count.sh", "args": ["<file named in the task>"]}),
        ),
        answer("I cannot tell: I do not know which file."),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Count the lines of the log file")
        .await?;
    assert_eq!(ran.statuses(), ["ok", "refused"]);
    let note = &ran.observations()[1].1;
    assert!(
        note.ends_with(
            "not a value: the task names no file: find it first (a skill that lists or finds \
             files), then run this script with its path"
        ),
        "{note}"
    );
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_script_refused_for_a_file_the_task_does_not_name_waits_for_a_result()
-> anyhow::Result<()> {
    let fixture = Fixture::new();
    fixture.skill("lines", "Counts lines.", "", "Run `scripts/count.sh <file named in the task>`.");
    fixture.script("lines", "scripts/count.sh", "wc -l < \"$1\"");
    fixture.skill("finder", "Finds files.", "", "Run `scripts/find.sh PATTERN`.");
    fixture.script("finder", "scripts/find.sh", "echo \"found $1: data.csv\"");
    std::fs::write(fixture.workspace.join("data.csv"), "one\ntwo\n")?;
    let count = |file: &str| {
        call("run_script", json!({"skill": "lines", "script": "scripts/count.sh", "args": [file]}))
    };
    let model = Arc::new(MockModel::new(vec![
        select("lines"),
        count("<file named in the task>"),
        select("finder"),
        call(
            "run_script",
            json!({"skill": "finder", "script": "scripts/find.sh", "args": ["*.csv"]}),
        ),
        count("data.csv"),
        answer("data.csv has 2 lines."),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Count the lines of the CSV file")
        .await?;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok", "ok", "ok"]);
    assert_eq!(ran.result.final_text, "data.csv has 2 lines.");
    // The scripts on offer before each call: count.sh waits from the refusal until find.sh
    // gives a result (format 26), and the note says why.
    let scripts = |request: usize| -> Vec<String> {
        let tools = &model.requests()[request].tools;
        tools.iter().find(|tool| tool.name == "run_script").map_or_else(Vec::new, |tool| {
            let text = tool.parameters.to_string();
            ["scripts/count.sh", "scripts/find.sh"]
                .into_iter()
                .filter(|script| text.contains(script))
                .map(str::to_owned)
                .collect()
        })
    };
    assert_eq!(scripts(1), ["scripts/count.sh"]);
    assert!(scripts(2).is_empty(), "{:?}", scripts(2));
    assert_eq!(scripts(3), ["scripts/find.sh"]);
    assert_eq!(scripts(4), ["scripts/count.sh", "scripts/find.sh"]);
    let waits = "lines/scripts/count.sh waits for a file name: find the file first";
    assert!(!request_text(&model.requests()[1]).contains(waits));
    assert!(request_text(&model.requests()[2]).contains(waits));
    // Once the finder has found the one CSV file, the refused call on it is shown.
    let found = "found `data.csv`: make this call: ";
    assert!(!request_text(&model.requests()[3]).contains(found));
    let note = request_text(&model.requests()[4]);
    assert!(note.contains(found) && note.contains("\"args\": [\"data.csv\"]"), "{note}");
    replays_exactly(&ran).await;
    Ok(())
}

async fn an_answer_with_no_figure_for_a_columns_total_is_refused_once() -> anyhow::Result<()> {
    let fixture = Fixture::new();
    fixture.skill("table", "Sums a column.", "", "Run `scripts/sum.sh FILE COLUMN`.");
    fixture.script("table", "scripts/sum.sh", "echo \"file: $1\"; echo \"$2 sum: 42\"");
    std::fs::write(fixture.workspace.join("data.csv"), "amount\n42\n")?;
    let model = Arc::new(MockModel::new(vec![
        select("table"),
        call(
            "run_script",
            json!({"skill": "table", "script": "scripts/sum.sh", "args": ["data.csv", "amount"]}),
        ),
        answer("The script ran on data.csv."),
        answer("The total of the amount column is 42."),
    ]));
    let task = "Tell me the total of the amount column of data.csv.";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused"]);
    assert_eq!(
        ran.observations()[2].1,
        "answer not accepted yet: the task asks for a figure of the `amount` column, and the \
         answer states none. Run the script that computes it (on the file the task or the \
         results name), then answer with that figure."
    );
    assert_eq!(ran.result.final_text, "The total of the amount column is 42.");
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    replays_exactly(&ran).await;
    Ok(())
}

/// A task that totals a column and converts the total.
const TOTAL_AND_CONVERT: &str =
    "Total the units column of sales.csv and convert that many pounds to kilograms.";

/// A workspace with sales.csv, and two skills: `table` (`scripts/sum.sh FILE COLUMN`, which
/// prints `COLUMN sum: 212`) and `units` (`scripts/convert.sh VALUE FROM TO`).
fn table_and_units() -> anyhow::Result<Fixture> {
    let fixture = Fixture::new();
    fixture.skill("table", "Sums a column.", "", "Run `scripts/sum.sh FILE COLUMN`.");
    fixture.script("table", "scripts/sum.sh", "echo \"file: $1\"; echo \"$2 sum: 212\"");
    fixture.skill("units", "Converts units.", "", "Run `scripts/convert.sh VALUE FROM TO`.");
    fixture.script("units", "scripts/convert.sh", "echo \"$1 $2 = 96.16158244 $3\"");
    std::fs::write(fixture.workspace.join("sales.csv"), "units\n212\n")?;
    Ok(fixture)
}

/// The call that totals the units column of sales.csv.
fn sum_units() -> serde_json::Value {
    json!({"skill": "table", "script": "scripts/sum.sh", "args": ["sales.csv", "units"]})
}

/// On [`table_and_units`]: the units total, the answer "The units total 212.", then `212 lb`
/// converted to kg, then `rest`.
fn unconverted_then_converts(rest: Vec<MockReply>) -> Vec<MockReply> {
    let mut replies = vec![
        select("table"),
        call("run_script", sum_units()),
        answer("The units total 212."),
        select("units"),
        call(
            "run_script",
            json!({"skill": "units", "script": "scripts/convert.sh", "args": ["212", "lb", "kg"]}),
        ),
    ];
    replies.extend(rest);
    replies
}

async fn an_answer_that_never_converts_is_refused_once() -> anyhow::Result<()> {
    let fixture = table_and_units()?;
    let model = Arc::new(MockModel::new(unconverted_then_converts(vec![answer(
        "The units total 212; 212 lb = 96.16158244 kg.",
    )])));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TOTAL_AND_CONVERT).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "ok"]);
    assert_eq!(
        ran.observations()[2].1,
        "answer not accepted yet: the task asks to convert to `kilograms`, and the answer states \
         no figure in it. Run the script that converts the value (select a skill that converts, \
         if the selected ones do not), then answer with the converted figure."
    );
    assert_eq!(ran.result.final_text, "The units total 212; 212 lb = 96.16158244 kg.");
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    assert!(ran.result.grounded);
    replays_exactly(&ran).await;
    Ok(())
}

async fn an_unconverted_answer_is_refused_again_only_after_a_new_result() -> anyhow::Result<()> {
    // plan-execute-think's first unconverted answer came before the total ("the total … is 1",
    // from a file search), and with one refusal a task the total was then taken unconverted.
    let sum = |column: &str| {
        call(
            "run_script",
            json!({"skill": "table", "script": "scripts/sum.sh", "args": ["sales.csv", column]}),
        )
    };
    let unconverted = "The units total 212.";
    let cases = [
        // No new result between: the second answer is taken.
        (vec![answer(unconverted)], vec!["ok", "ok", "refused"], 1),
        // A new result each time: refused again, twice a task at most.
        (
            vec![sum("amount"), answer(unconverted), sum("price"), answer(unconverted)],
            vec!["ok", "ok", "refused", "ok", "refused", "ok"],
            2,
        ),
    ];
    for (rest, statuses, refusals) in cases {
        let fixture = table_and_units()?;
        let start = vec![select("table"), call("run_script", sum_units()), answer(unconverted)];
        let model = Arc::new(MockModel::new([start, rest].concat()));
        let ran =
            fixture.run(fixture.agent(&model, AgentConfig::default()), TOTAL_AND_CONVERT).await?;
        assert_eq!(ran.statuses(), statuses);
        assert_eq!(ran.result.final_text, unconverted);
        assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, refusals);
        assert_eq!(model.remaining(), 0);
        replays_exactly(&ran).await;
    }
    Ok(())
}

/// The refusal of an answer with no figure in kilograms, after `212 lb = 96.16158244 kg`.
const KILOGRAMS_IN_RESULTS: &str = "answer not accepted yet: the task asks to convert to \
     `kilograms`, and the answer states no figure in it. The results above already give `212 lb \
     = 96.16158244 kg`: answer with the converted figures, together with the rest of what the \
     task asks.";

/// plan-execute-think on [`TOTAL_AND_CONVERT`] with a limit of two turns: the model selects
/// `table` and totals the units column, then gives `rest`; the run ends at the turn limit
/// having used every reply (with the fixture, which holds the run's folders).
async fn units_total_then_limit(rest: Vec<MockReply>) -> anyhow::Result<(Fixture, Ran)> {
    let fixture = table_and_units()?;
    let mut replies =
        vec![plan("select_skills", &json!({"names": ["table"]})), plan("run_script", &sum_units())];
    replies.extend(rest);
    let model = Arc::new(MockModel::new(replies));
    let mut config =
        AgentConfig { strategy: "plan-execute-think".into(), ..AgentConfig::default() };
    config.budgets.max_turns = 2;
    let ran = fixture.run(fixture.agent(&model, config), TOTAL_AND_CONVERT).await?;
    assert_eq!(model.remaining(), 0);
    assert_eq!(ran.result.outcome, Outcome::MaxTurns);
    Ok((fixture, ran))
}

async fn a_think_refused_as_incomplete_is_the_ending_at_a_limit() -> anyhow::Result<()> {
    // The local 1.5B's plan-execute-think answered "The total units column … is 212." in its
    // last round, was refused for not converting, and the run ended at the round limit with
    // the summary before it, "The CSV file `sales.csv` was found.". From format 27 the
    // refused answer, every figure of it grounded, is the ending.
    let (_fixture, ran) = units_total_then_limit(vec![think("The units total 212.", true)]).await?;
    assert_eq!(ran.result.final_text, "The units total 212.");
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_value_copied_from_an_example_is_refused_until_it_changes() -> anyhow::Result<()> {
    let fixture = finder(
        "Run `scripts/find.sh PATTERN [FOLDER]`. Add a folder to search less: `[\"*.md\", \"docs\"]`.",
        "echo \"found $*\"",
    );
    let (_, ran) = which_markdown(
        &fixture,
        vec![
            select("finder"),
            find(&["*.md", "docs"]),
            find(&["*.md", "docs"]),
            find(&["*.md"]),
            answer("found *.md"),
        ],
    )
    .await?;
    // Refused, and refused again when made again (format 14: made again when told it might,
    // the local 1.5B's refused calls failed every time); the call without the folder runs.
    assert_eq!(ran.statuses(), ["ok", "refused", "refused", "ok"]);
    let note = "`docs` is from an example in the skill's instructions, not from the task or a \
                result. Write the task's own value in its place (leave it out only when the task \
                gives none)";
    assert_eq!(ran.observations()[1].1, note);
    assert_eq!(ran.observations()[2].1, note);
    assert_eq!(ran.result.final_text, "found *.md");
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_result_of_a_guessed_figure_grounds_nothing() -> anyhow::Result<()> {
    // The task gives no figure: print.sh run with 4 prints "4", which grounds nothing.
    let fixture = toolbox();
    let honest = "I cannot tell: no skill reads the lines of notes.txt.";
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("print", &["4", "x"]),
        answer("notes.txt has 4 lines."),
        answer(honest),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "How many lines does notes.txt have?")
        .await?;
    // Without ask_user on offer the call runs; its answer is refused.
    assert_eq!(ran.statuses(), ["ok", "ok", "refused"]);
    let note = &ran.observations()[2].1;
    assert!(note.contains("(4)") && note.contains("scripts/print.sh with `4`"), "{note}");
    assert_eq!(ran.result.final_text, honest);
    assert!(ran.result.grounded);
    assert_eq!(ran.result.reasoning_metrics.ungrounded_refusals, 1);
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_batch_answered_after_its_first_item_is_refused_once() -> anyhow::Result<()> {
    let fixture = toolbox();
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("print", &["2", "a"]),
        answer("The last line is \"line 2 of 2: a\"."),
        tool("print", &["3", "b"]),
        answer("Printed 2 lines of a, then 3 lines of b."),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Print 2 lines of a, then 3 of b.")
        .await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok"]);
    let note = &ran.observations()[2].1;
    assert!(note.starts_with("answer not accepted yet: the task also gives 3,"), "{note}");
    // A batch (one script on several arguments): a run whose figures the answer does not
    // state has its result after the answer (here print.sh 2 a's "line 1").
    assert_eq!(
        ran.result.final_text,
        "Printed 2 lines of a, then 3 lines of b.\n\nResults:\n- run_script \
         toolbox/scripts/print.sh 2 a: line 1 of 2: a · line 2 of 2: a"
    );
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    assert_eq!(ran.finished()["reasoning_metrics"]["incomplete_refusals"], json!(1));
    // Refused once per task: the same answer given again is taken.
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        tool("print", &["2", "a"]),
        answer("Printed 2 lines of a."),
        answer("Printed 2 lines of a."),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Print 2 lines of a, then 3 of b.")
        .await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused"]);
    assert_eq!(ran.result.outcome, Outcome::Completed);
    replays_exactly(&ran).await;
    Ok(())
}

/// react on `task` with the totals toolbox and a `double.sh N` printing `N x = 2N y`: the
/// toolbox selected, then `replies`. The run replays exactly.
async fn doubling(task: &str, replies: Vec<MockReply>) -> anyhow::Result<Ran> {
    let fixture = totals_toolbox();
    fixture.script("toolbox", "scripts/double.sh", "echo \"$1 x = $(($1 * 2)) y\"");
    let model = Arc::new(MockModel::new([vec![select("toolbox")], replies].concat()));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    Ok(ran)
}

async fn an_answer_with_one_result_gets_the_runs_on_the_tasks_values_after_it() -> anyhow::Result<()>
{
    // Asked to total a column and convert three values, the local 1.5B ran all four and
    // answered with the total alone. From format 16 the runs on the task's values whose
    // figures the answer leaves out follow it (before, only a script run twice or more was a
    // batch, and only an answer with one of the batch's figures got the rest).
    let ran = doubling(
        "Total the amount column, and double 3 with the toolbox.",
        vec![
            run_script("toolbox", "scripts/total.sh", &["amount"]),
            run_script("toolbox", "scripts/double.sh", &["3"]),
            answer("The total of the amount column is 1705.47."),
        ],
    )
    .await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "ok"]);
    assert_eq!(
        ran.result.final_text,
        "The total of the amount column is 1705.47.\n\nResults:\n- run_script \
         toolbox/scripts/double.sh 3: 3 x = 6 y"
    );
    Ok(())
}

async fn digits_that_are_no_results_figure_leave_an_answer_figure_less() -> anyhow::Result<()> {
    // The local 1.5B summarised six conversions as "each conversion was successful … The exit
    // code is always 0": digits, but no result's figure. From format 17 such an answer gets
    // the task's results after it, as one with no digits at all does (here the digit is the
    // task's own "2 calls").
    let ran = doubling(
        "Double 3 and 4 with the toolbox, in 2 calls.",
        vec![
            run_script("toolbox", "scripts/double.sh", &["3"]),
            run_script("toolbox", "scripts/double.sh", &["4"]),
            answer("Done in 2 calls: each value was doubled."),
        ],
    )
    .await?;
    assert_eq!(
        ran.result.final_text,
        "Done in 2 calls: each value was doubled.\n\nResults:\n\
         - run_script toolbox/scripts/double.sh 3: 3 x = 6 y\n\
         - run_script toolbox/scripts/double.sh 4: 4 x = 8 y"
    );
    Ok(())
}

async fn a_final_answer_cut_by_the_token_limit_is_checked_like_any_other() -> anyhow::Result<()> {
    // The local 1.5B wrote a made-up checksum's digits until the token limit, each time.
    let cut = model_adapter::Response {
        text: format!(
            r#"{{"thought": "t", "action": {{"type": "final_answer", "args": {{"content": "229{}"#,
            "4".repeat(300)
        ),
        finish_reason: model_adapter::FinishReason::Length,
        ..model_adapter::Response::default()
    };
    let honest = "I cannot tell: no skill computes a checksum.";
    let model = Arc::new(MockModel::new(vec![
        MockReply::response(&cut),
        MockReply::text(
            &json!({"action": {"type": "final_answer", "args": {"content": honest}}}).to_string(),
        ),
    ]));
    let config =
        AgentConfig { decide: skills_agent_core::DecideMode::Json, ..AgentConfig::default() };
    let fixture = toolbox();
    let ran =
        fixture.run(fixture.agent(&model, config), "What is the SHA-256 of notes.txt?").await?;
    // The ranking is sure of `notes` (the file's name): the runtime selects it (format 32).
    // Taken cut, refused as ungrounded (not "not valid JSON"), then the admission.
    assert_eq!(ran.statuses(), ["ok", "refused"]);
    assert!(ran.observations()[1].1.starts_with("answer not accepted: this value (2294444"));
    assert_eq!(ran.result.final_text, honest);
    assert!(ran.result.grounded);
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_refused_example_path_grounds_no_answer() -> anyhow::Result<()> {
    let fixture = finder(
        "Run `scripts/find.sh PATTERN`. It prints:\n\n```text\nfile: data/invoice-2024.csv\n```",
        "echo \"found $*\"",
    );
    let (_, ran) = which_markdown(
        &fixture,
        vec![
            select("finder"),
            find(&["data/invoice-2024.csv"]),
            answer("The file is data/invoice-2024.csv."),
            answer("I cannot tell which files there are."),
        ],
    )
    .await?;
    // The call is refused (an example value); its path then grounds no answer.
    assert_eq!(ran.statuses(), ["ok", "refused", "refused"]);
    assert!(
        ran.observations()[2].1.contains("(data/invoice-2024.csv)"),
        "{:?}",
        ran.observations()[2]
    );
    assert!(ran.result.grounded);
    replays_exactly(&ran).await;
    Ok(())
}

async fn an_answer_with_no_figure_where_the_task_adds_two_is_refused_once() -> anyhow::Result<()> {
    // The local 1.5B's plan-execute-think summary of this task was "The script has run
    // successfully, and the results are available.", the totals only in its next-step preview.
    // From format 12 that is refused once; an admission is not, and neither is a second.
    let summed = "1705.47 + 212 = 1917.47";
    let vague = "The scripts have run successfully, and the results are available.";
    let ran = add_two_totals(vec![answer(vague), answer(summed)]).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "refused"]);
    let note = &ran.observations()[4].1;
    assert!(note.contains("the answer states no figure"), "{note}");
    assert!(note.contains("work out the arithmetic the task asks for"), "{note}");
    assert_eq!(ran.result.final_text, summed);
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 2);
    let admitted = "I cannot tell the sum from these results.";
    let ran = add_two_totals(vec![answer(admitted)]).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok"]);
    assert_eq!(ran.result.final_text, admitted);
    Ok(())
}

async fn a_second_single_result_where_the_task_adds_two_is_refused_too() -> anyhow::Result<()> {
    // Refused once for restating the amount total, the local 1.5B fetched the units total
    // and answered with that alone. From format 11 that is refused too, naming both and the
    // sum to work out.
    let summed = "1705.47 + 212 = 1917.47";
    let ran = add_two_totals(vec![answer("The total of the units column is 212."), answer(summed)])
        .await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "refused"]);
    let note = &ran.observations()[4].1;
    assert!(note.contains("1705.47 and 212 are results"), "{note}");
    assert!(note.contains("their sum (1705.47 + 212)"), "{note}");
    assert_eq!(ran.result.final_text, summed);
    assert!(ran.result.grounded);
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 2);
    Ok(())
}

async fn both_results_side_by_side_where_the_task_adds_them_are_refused_once() -> anyhow::Result<()>
{
    // With both totals in, the local 1.5B answered "The total of the amount column is 1705.47
    // and the total of the units column is 212." and no sum. From format 24 that is refused
    // once, with the sum to work out.
    let summed = "1705.47 + 212 = 1917.47";
    let both =
        "The total of the amount column is 1705.47 and the total of the units column is 212.";
    let (ran, model) = add_two_totals_with_model(vec![answer(both), answer(summed)]).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "refused"]);
    let note = &ran.observations()[4].1;
    assert!(note.contains("1705.47 and 212 are results"), "{note}");
    assert!(note.contains("their sum (1705.47 + 212)"), "{note}");
    assert_eq!(ran.result.final_text, summed);
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 2);
    // The turn after it offers the answer alone.
    let turns = ran.data(EventKind::TurnStarted);
    assert_eq!(turns.last().unwrap()["allowed"], json!(["final_answer"]));
    let last = model.requests().last().cloned().unwrap();
    let final_answer = last.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    assert_eq!(final_answer.parameters["properties"]["content"].get("pattern"), None);
    // From format 25 that answer may write figures when the refusal was the task's first, with
    // no new result after it: it was held to an admission, as after an ungrounded answer (live:
    // "I cannot answer … Work out their sum (  +  )").
    let fixture = totals_toolbox();
    let total = |column: &str| run_script("toolbox", "scripts/total.sh", &[column]);
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        total("amount"),
        total("units"),
        answer(both),
        answer(summed),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), ADD_TWO_TOTALS).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "ok", "refused"]);
    assert_eq!(ran.result.final_text, summed);
    let last = model.requests().last().cloned().unwrap();
    let final_answer = last.tools.iter().find(|tool| tool.name == "final_answer").unwrap();
    assert_eq!(final_answer.parameters["properties"]["content"].get("pattern"), None);
    replays_exactly(&ran).await;
    // Once: the same answer again is taken.
    let ran = add_two_totals(vec![answer(both), answer(both)]).await?;
    assert_eq!(ran.result.final_text, both);
    Ok(())
}

async fn an_argument_that_respells_the_tasks_word_is_refused() -> anyhow::Result<()> {
    // "How many MB are 1 GiB?": the local 1.5B passed `GB`, which the converter also knows,
    // and answered 1000. From format 11 the call is refused once, naming the task's word.
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/convert.sh", "echo \"$1 $2 = converted $3\"");
    let convert = |unit: &str| run_script("toolbox", "scripts/convert.sh", &["1", unit, "MB"]);
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        convert("GB"),
        convert("GiB"),
        answer("1 GiB = converted MB"),
    ]));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "How many MB are 1 GiB?")
        .await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok"]);
    assert_eq!(
        ran.observations()[1].1,
        // From format 18 the refusal shows the call to make.
        "`GB` is not how the task writes it: the task writes `GiB`. Make this call: {\"skill\": \
         \"toolbox\", \"script\": \"scripts/convert.sh\", \"args\": [\"1\", \"GiB\", \"MB\"]}"
    );
    assert_eq!(ran.result.outcome, Outcome::Completed);
    Ok(())
}

/// A run of `task` that selects the toolbox, makes each of `calls` to a converter that echoes
/// its arguments, and answers `answer_text`; checked to replay exactly.
async fn converted(
    task: &str,
    calls: &[&[&str]],
    answer_text: &str,
) -> anyhow::Result<(Fixture, Ran)> {
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/convert.sh", "echo \"$1 $2 = converted $3\"");
    let mut replies = vec![select("toolbox")];
    replies.extend(calls.iter().map(|args| run_script("toolbox", "scripts/convert.sh", args)));
    replies.push(answer(answer_text));
    let model = Arc::new(MockModel::new(replies));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    Ok((fixture, ran))
}

async fn a_value_written_with_its_unit_beside_the_unit_is_refused_until_it_changes()
-> anyhow::Result<()> {
    // "convert 1 nmi to m": the local 1.5B ran `convert.py "1 nmi" nmi m`, which failed on the
    // unit `nmi m`. From format 12 the call is refused, naming the value alone; from format 14
    // the same call made again is refused again.
    let calls: [&[&str]; 5] = [
        &["1 nmi", "nmi", "m"],
        &["1", "nmi", "m"],
        &["2 nmi", "nmi", "m"],
        &["2 nmi", "nmi", "m"],
        &["2", "nmi", "m"],
    ];
    let answer_text = "1 nmi = converted m; 2 nmi = converted m";
    let (_fixture, ran) = converted("Convert 1 nmi and 2 nmi to m.", &calls, answer_text).await?;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok", "refused", "refused", "ok"]);
    assert_eq!(
        ran.observations()[1].1,
        "`1 nmi` holds the value and its unit, and `nmi` is an argument of its own too: write \
         the value alone (`1`) in its place. Make this call: {\"skill\": \"toolbox\", \
         \"script\": \"scripts/convert.sh\", \"args\": [\"1\", \"nmi\", \"m\"]}"
    );
    assert_eq!(ran.result.outcome, Outcome::Completed);
    Ok(())
}

async fn a_value_with_its_unit_before_two_units_is_refused_with_the_value_alone()
-> anyhow::Result<()> {
    // "convert that many pounds to kilograms": the local 1.5B ran `convert.py "212 lbs" pounds
    // kilograms`, which the converter read as 212 lb into the unit `pounds kilograms`. From
    // format 30 the call is refused with the value alone in its place, whatever the unit's
    // own argument spells, and an answer that quotes `212 lbs` is taken (no text of the run
    // writes `lbs`, but a quantity is checked as its number).
    let calls: [&[&str]; 2] =
        [&["212 lbs", "pounds", "kilograms"], &["212", "pounds", "kilograms"]];
    // The answer quotes the quantity as the model wrote it: checked as its number (format 30).
    let answer_text = "`212 lbs` = converted kilograms";
    let (_fixture, ran) =
        converted("Convert 212 pounds to kilograms.", &calls, answer_text).await?;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok"]);
    assert_eq!(
        ran.observations()[1].1,
        "`212 lbs` holds the value and its unit, and `pounds` is an argument of its own too: \
         write the value alone (`212`) in its place. Make this call: {\"skill\": \"toolbox\", \
         \"script\": \"scripts/convert.sh\", \"args\": [\"212\", \"pounds\", \"kilograms\"]}"
    );
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert!(ran.result.grounded, "the quoted quantity was taken as ungrounded");
    Ok(())
}

async fn an_answer_missing_a_named_columns_figure_is_refused_once_with_its_line()
-> anyhow::Result<()> {
    // "the total of the units, unit_price and amount columns": the local 1.5B answered with the
    // amount's sum for all three. From format 30 an answer with none of the results' figures
    // for a column the task names is refused once, with the lines that give them.
    let fixture = toolbox();
    fixture.script(
        "toolbox",
        "scripts/stats.sh",
        "echo 'apples min: 1'; echo 'apples sum: 3'; echo 'pears sum: 4'",
    );
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        run_script("toolbox", "scripts/stats.sh", &[]),
        answer("The total of the apples and pears columns is 4."),
        answer("apples: 3, pears: 4"),
    ]));
    let task = "What is the total of the apples and pears columns?";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused"]);
    assert_eq!(
        ran.observations()[2].1,
        "answer not accepted yet: the task asks a figure of the `apples` column, and the answer \
         gives none of the results' figures for it. The results give `apples sum: 3`. Answer \
         with the figure of each column the task names."
    );
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "apples: 3, pears: 4");
    assert_eq!(ran.result.counters.refusals, 1);
    Ok(())
}

async fn a_number_the_task_writes_twice_needs_two_calls() -> anyhow::Result<()> {
    // "5 miles to km; …; 5 kg to lb": 5 was used once, so the last conversion was never run.
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/convert.sh", "echo \"$1 $2 = 1$1 $3\"");
    let convert = |args: &[&str]| run_script("toolbox", "scripts/convert.sh", args);
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        convert(&["5", "mi", "km"]),
        convert(&["72", "F", "C"]),
        answer("5 mi = 15 km; 72 F = 172 C"),
        convert(&["5", "kg", "lb"]),
        answer("5 mi = 15 km; 72 F = 172 C; 5 kg = 15 lb"),
    ]));
    let task = "Convert each of these: 5 miles to km; 72 F to C; 5 kg to lb.";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "ok", "refused", "ok"]);
    let note = &ran.observations()[3].1;
    assert!(note.contains("the task also gives 5 (a second time)"), "{note}");
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    Ok(())
}

async fn a_repeated_failure_names_the_argument_the_error_names() -> anyhow::Result<()> {
    let fixture = toolbox();
    fixture.script(
        "toolbox",
        "scripts/convert.sh",
        "echo \"convert: unknown unit: '$2'; known units: lb, kg\" >&2\nexit 2",
    );
    let convert = run_script("toolbox", "scripts/convert.sh", &["212", "units", "kg"]);
    let honest = "I cannot convert: the converter does not know the unit.";
    let model =
        Arc::new(MockModel::new(vec![select("toolbox"), convert.clone(), convert, answer(honest)]));
    let task = "Total the units column and convert that many pounds to kilograms.";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "failed", "refused"]);
    let note = &ran.observations()[2].1;
    assert!(note.contains("the error names `units`: write another value"), "{note}");
    Ok(())
}

async fn a_repeated_failure_on_an_optional_last_argument_shows_the_call_without_it()
-> anyhow::Result<()> {
    // The local 1.5B ran `find_files.py "*.md" sales` three times, `sales` no folder. From
    // format 18 the refused repeat shows the call without the argument the usage makes
    // optional.
    let fixture = finder(
        "Run `scripts/find.sh PATTERN [FOLDER]`.",
        "if [ -n \"$2\" ]; then echo \"no such folder in the workspace: $2\" >&2; exit 2; fi\n\
         echo \"found TASK.md\"",
    );
    let (model, ran) = which_markdown(
        &fixture,
        vec![
            select("finder"),
            find(&["*.md", "sales"]),
            find(&["*.md", "sales"]),
            find(&["*.md"]),
            answer("TASK.md"),
        ],
    )
    .await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "failed", "refused", "ok"]);
    let note = &ran.observations()[2].1;
    assert!(
        note.ends_with(
            "the error names `sales`, which the script can do without: make this call: \
             {\"skill\": \"finder\", \"script\": \"scripts/find.sh\", \"args\": [\"*.md\"]}, \
             or write another value from the task or a result in its place"
        ),
        "{note}"
    );
    // From format 19 the turn right after the failure shows it already.
    let after = common::note(&model.requests()[2]);
    assert!(
        after.contains(
            "(the error names `sales`, which the script can do without: make this call: \
             {\"skill\": \"finder\", \"script\": \"scripts/find.sh\", \"args\": [\"*.md\"]}, \
             or write another value from the task or a result in its place)"
        ),
        "{after}"
    );
    assert_eq!(ran.result.final_text, "TASK.md");
    Ok(())
}

async fn a_failure_on_a_word_the_task_does_not_write_shows_the_call_with_the_tasks_word()
-> anyhow::Result<()> {
    // Asked to "convert that many pounds to kilograms", the local 1.5B ran `convert.py 212 units
    // kg` three times, told that the error names `units`. From format 23 the turn right after
    // the failure, and the refusal of a repeat, show the call with the task's `pounds`.
    let fixture = Fixture::new();
    fixture.skill(
        "conv",
        "Converts units.",
        "",
        "Run `scripts/convert.sh VALUE FROM TO`. Units: symbols or full names such as `miles`, \
         `pounds`.",
    );
    fixture.script(
        "conv",
        "scripts/convert.sh",
        "case \"$2\" in kg|lb|pounds) echo \"$1 $2 = 96.16 $3\";; \
         *) echo \"convert: unknown unit: '$2'; known units: kg, lb\" >&2; exit 2;; esac",
    );
    let convert = |from: &str| run_script("conv", "scripts/convert.sh", &["212", from, "kg"]);
    let model = Arc::new(MockModel::new(vec![
        select("conv"),
        convert("units"),
        convert("units"),
        convert("pounds"),
        answer("212 pounds are 96.16 kg."),
    ]));
    let task = "The units column sums to 212: convert that many pounds to kilograms.";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "failed", "refused", "ok"]);
    let shown = "the error names `units`, and the task writes `pounds`: make this call: \
                 {\"skill\": \"conv\", \"script\": \"scripts/convert.sh\", \"args\": [\"212\", \
                 \"pounds\", \"kg\"]}, or write another value from the task or a result in its place";
    let after = common::note(&model.requests()[2]);
    assert!(after.contains(shown), "{after}");
    let refusal = &ran.observations()[2].1;
    assert!(refusal.starts_with("this exact call already failed"), "{refusal}");
    assert!(refusal.ends_with(shown), "{refusal}");
    // After a refusal that shows the call, no other skill is on offer.
    assert_eq!(
        ran.data(EventKind::TurnStarted)[3]["allowed"],
        json!(["run_script", "final_answer"])
    );
    assert_eq!(ran.result.final_text, "212 pounds are 96.16 kg.");
    assert!(ran.result.grounded);
    Ok(())
}

async fn an_example_file_pattern_is_followed_by_the_tasks_kinds_of_file() -> anyhow::Result<()> {
    // The usage line is the example itself: its `*.csv` is the skill's, not the task's.
    let fixture = finder_shown("*.csv", "echo \"found $*\"");
    let (model, ran) = which_markdown(
        &fixture,
        vec![select("finder"), find(&["*.csv"]), find(&["*.md"]), answer("found *.md")],
    )
    .await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok"]);
    let note = &ran.observations()[1].1;
    assert!(note.starts_with("`*.csv` is from an example in the skill's instructions"), "{note}");
    assert!(
        note.ends_with(
            "(leave it out only when the task gives none). The task's Markdown files: `*.md`. \
             Make this call: {\"skill\": \"finder\", \"script\": \"scripts/find.sh\", \
             \"args\": [\"*.md\"]}"
        ),
        "{note}"
    );
    // The turn after it offers no other skill (the local 1.5B took markdown-toc), and from
    // format 27 its note writes the call.
    let after = common::note(&model.requests()[2]);
    assert!(
        after.contains(
            "Allowed now: run_script, final_answer (make this call: {\"skill\": \"finder\", \
             \"script\": \"scripts/find.sh\", \"args\": [\"*.md\"]})"
        ),
        "{after}"
    );
    Ok(())
}

async fn an_example_file_name_is_followed_by_the_one_file_found() -> anyhow::Result<()> {
    // A script shown a file name takes a path: a pattern in its place is no call to make (the
    // local 1.5B ran `csv_summary.py *.csv` when shown it). From format 19 the one file of the
    // example's kind that a script found is (told only the task's kind of file, the 1.5B made
    // the refused call twice more).
    let script =
        "if [ \"$1\" = \"*.csv\" ]; then echo \"file: Sales.csv\"; else echo \"read $1\"; fi";
    let example = || find(&["data/invoice-2024.csv"]);
    let shown = "The task's CSV files: `*.csv`. Found: `Sales.csv`. Make this call: {\"skill\": \
                 \"finder\", \"script\": \"scripts/find.sh\", \"args\": [\"Sales.csv\"]}";
    let cases = [
        (vec![example(), answer("I do not know.")], "The task's CSV files: `*.csv`"),
        (vec![find(&["*.csv"]), example(), find(&["Sales.csv"]), answer("read Sales.csv")], shown),
    ];
    for (replies, ending) in cases {
        let fixture = finder_shown("data/invoice-2024.csv", script);
        let model = Arc::new(MockModel::new([vec![select("finder")], replies].concat()));
        let ran = fixture
            .run(fixture.agent(&model, AgentConfig::default()), "Read the CSV file.")
            .await?;
        replays_exactly(&ran).await;
        let refused = ran.statuses().iter().position(|status| status == "refused").unwrap();
        let note = &ran.observations()[refused].1;
        assert!(note.ends_with(ending), "{note}");
        if ending == shown {
            let after = common::note(&model.requests()[refused + 1]);
            let call = "(make this call: {\"skill\": \"finder\", \"script\": \
                        \"scripts/find.sh\", \"args\": [\"Sales.csv\"]})";
            assert!(after.contains(call), "{after}");
            assert_eq!(ran.result.final_text, "read Sales.csv");
        }
    }
    Ok(())
}

async fn a_refused_example_value_made_again_ends_the_run_stuck_by_the_third() -> anyhow::Result<()>
{
    // The example's folder is refused, and so is the same call made again (format 14): three
    // refusals of it in a row end the run as stuck, within three repeats.
    let fixture = finder(
        "Run `scripts/find.sh PATTERN [FOLDER]`. Add a folder to search less: `[\"*.md\", \"docs\"]`.",
        "if [ -n \"$2\" ]; then echo \"no such folder: $2\" >&2; exit 2; fi\necho \"found TASK.md\"",
    );
    let (_, ran) = which_markdown(
        &fixture,
        vec![
            select("finder"),
            find(&["*.md", "docs"]),
            find(&["*.md", "docs"]),
            find(&["*.md", "docs"]),
            find(&["*.md"]),
            answer("TASK.md"),
        ],
    )
    .await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "refused", "refused"]);
    assert_eq!(ran.result.outcome, Outcome::Stuck);
    assert!(ran.result.final_text.contains("came 3 times in a row"), "{}", ran.result.final_text);
    Ok(())
}

/// A fixture with one skill, `finder` ("Finds files."), whose SKILL.md body is `body` and whose
/// `scripts/find.sh` is `script`.
fn finder(body: &str, script: &str) -> Fixture {
    let fixture = Fixture::new();
    fixture.skill("finder", "Finds files.", "", body);
    fixture.script("finder", "scripts/find.sh", script);
    fixture
}

/// [`finder`] whose body shows one call of it, on `example`, beside a `markdown-toc` skill
/// (whose name holds a Markdown task's word: the local 1.5B selected it).
fn finder_shown(example: &str, script: &str) -> Fixture {
    let fixture = finder(
        &format!(
            "Run the script:\n\n```json\n{{\"skill\": \"finder\", \"script\": \
             \"scripts/find.sh\", \"args\": [\"{example}\"]}}\n```"
        ),
        script,
    );
    fixture.skill("markdown-toc", "Builds a Markdown table of contents.", "", "Run it.");
    fixture
}

/// "Which Markdown files are there?" run on `fixture` with the default configuration, the
/// model answering `replies`.
async fn which_markdown(
    fixture: &Fixture,
    replies: Vec<MockReply>,
) -> anyhow::Result<(Arc<MockModel>, Ran)> {
    let model = Arc::new(MockModel::new(replies));
    let ran = fixture
        .run(fixture.agent(&model, AgentConfig::default()), "Which Markdown files are there?")
        .await?;
    Ok((model, ran))
}

/// `run_script` of `finder`'s `scripts/find.sh` with `args`.
fn find(args: &[&str]) -> MockReply {
    run_script("finder", "scripts/find.sh", args)
}

async fn an_invented_sum_is_refused_with_the_sum_worked_out() -> anyhow::Result<()> {
    // Both totals fetched, the 1.5B added them itself, wrongly (1917.84), and the refusal said
    // only "do not guess": it ran the script again and gave up. From format 29 the refusal
    // works the sum out on the results the answer names, and says to answer with it.
    let fixture = totals_toolbox();
    let total = |column: &str| run_script("toolbox", "scripts/total.sh", &[column]);
    let summed = "1705.47 + 212 = 1917.47";
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        total("amount"),
        total("units"),
        answer("The amount total is 1705.47 and the units total is 212; their sum is 1917.84."),
        answer(summed),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), ADD_TWO_TOTALS).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "ok", "refused"]);
    assert_eq!(
        ran.observations()[3].1,
        "answer not accepted: this value (1917.84) appears neither in the task nor in any result \
         of this run. The results your answer names: 1705.47 and 212; 1705.47 + 212 = 1917.47. \
         If that is the figure the task asks for, answer with it and the values it comes from."
    );
    assert_eq!((ran.result.outcome, ran.result.final_text.as_str()), (Outcome::Completed, summed));
    // From format 32 nothing is left to run after that refusal: the answer alone.
    assert_eq!(tool_names(&model.requests()[4]), ["final_answer"]);
    assert!(ran.result.grounded);
    assert_eq!(ran.result.reasoning_metrics.ungrounded_refusals, 1);
    assert_eq!(ran.result.reasoning_metrics.ungrounded_answers, 0);
    assert_eq!(model.remaining(), 0);
    Ok(())
}

async fn an_example_word_for_the_tasks_symbol_is_followed_by_the_call_with_it() -> anyhow::Result<()>
{
    // Asked for "20 C to F", the 1.5B wrote the example's `celsius`, was told to write the
    // task's own value, and made the refused call twice more (stuck). From format 29 the
    // refusal shows the call with the task's `C`, and the next turn's note writes it.
    let fixture = Fixture::new();
    fixture.skill(
        "units",
        "Converts units.",
        "",
        "Run `scripts/convert.sh VALUE FROM TO`. Units: symbols or full names such as \
         `miles`, `celsius`.",
    );
    fixture.script("units", "scripts/convert.sh", "echo \"$1 $2 = 68 $3\"");
    let convert = |args: &[&str]| run_script("units", "scripts/convert.sh", args);
    let model = Arc::new(MockModel::new(vec![
        select("units"),
        convert(&["20", "celsius", "F"]),
        convert(&["20", "C", "F"]),
        answer("20 C = 68 F"),
    ]));
    let ran =
        fixture.run(fixture.agent(&model, AgentConfig::default()), "Convert 20 C to F.").await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok"]);
    let shown = r#"{"skill": "units", "script": "scripts/convert.sh", "args": ["20", "C", "F"]}"#;
    assert_eq!(
        ran.observations()[1].1,
        format!(
            "`celsius` is from an example in the skill's instructions, not from the task or a \
             result. Write the task's own value in its place (leave it out only when the task \
             gives none). Make this call: {shown}"
        )
    );
    assert!(request_text(&model.requests()[2]).contains(&format!("make this call: {shown}")));
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, "20 C = 68 F")
    );
    Ok(())
}

async fn a_unit_with_its_first_letter_left_out_is_refused_with_the_tasks_unit() -> anyhow::Result<()>
{
    // "convert 1 nmi to m": plan-execute-think on the local 1.5B ran `convert.py 1 mi m` and
    // answered with a mile in metres. From format 29 the call is refused, with the task's unit.
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/convert.sh", "echo \"$1 $2 = 1852 $3\"");
    let convert = |unit: &str| run_script("toolbox", "scripts/convert.sh", &["1", unit, "m"]);
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        convert("mi"),
        convert("nmi"),
        answer("1 nmi = 1852 m"),
    ]));
    let ran =
        fixture.run(fixture.agent(&model, AgentConfig::default()), "Convert 1 nmi to m.").await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok"]);
    assert_eq!(
        ran.observations()[1].1,
        "`mi` is not how the task writes it: the task writes `nmi`. Make this call: {\"skill\": \
         \"toolbox\", \"script\": \"scripts/convert.sh\", \"args\": [\"1\", \"nmi\", \"m\"]}"
    );
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, "1 nmi = 1852 m")
    );
    Ok(())
}

async fn a_call_refused_before_it_ran_uses_none_of_the_tasks_values() -> anyhow::Result<()> {
    // "convert 1 nmi to m, 20 C to F and 1 GiB to MB": plan-execute-think on the local 1.5B
    // had `["1", "mi", "m"]` refused, then ran `["1", "nmi", "m"]`; the refused call counted as
    // the task's second "1", and an answer without `1 GiB` was taken. From format 34 a call
    // refused before it ran uses none of the task's values.
    let fixture = toolbox();
    fixture.script("toolbox", "scripts/convert.sh", "echo \"$1 $2 = 1852 $3\"");
    let convert =
        |from: &str, to: &str| run_script("toolbox", "scripts/convert.sh", &["1", from, to]);
    let model = Arc::new(MockModel::new(vec![
        select("toolbox"),
        convert("mi", "m"),
        convert("nmi", "m"),
        answer("1 nmi = 1852 m"),
        convert("GiB", "MB"),
        answer("1 nmi = 1852 m; 1 GiB = 1852 MB"),
    ]));
    let task = "Convert 1 nmi to m and 1 GiB to MB.";
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), task).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "refused", "ok", "refused", "ok"]);
    assert!(
        ran.observations()[3].1.starts_with(
            "answer not accepted yet: the task also gives 1 (a second time), which no script \
             call has used."
        ),
        "{}",
        ran.observations()[3].1
    );
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, "1 nmi = 1852 m; 1 GiB = 1852 MB")
    );
    Ok(())
}

async fn an_unconverted_answer_after_the_conversion_ran_is_shown_its_line() -> anyhow::Result<()> {
    // The local 1.5B ran every conversion of a batch, answered with the one total that needed
    // none, and was told twice to "run the script that converts". From format 29 the refusal
    // shows the result lines that already convert.
    let fixture = table_and_units()?;
    let converted = "212 lb = 96.16158244 kg";
    let model = Arc::new(MockModel::new(vec![
        select("table"),
        call("run_script", sum_units()),
        select("units"),
        call(
            "run_script",
            json!({"skill": "units", "script": "scripts/convert.sh", "args": ["212", "lb", "kg"]}),
        ),
        answer("The units total 212."),
        answer(converted),
    ]));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TOTAL_AND_CONVERT).await?;
    replays_exactly(&ran).await;
    assert_eq!(ran.statuses(), ["ok", "ok", "ok", "ok", "refused"]);
    assert_eq!(ran.observations()[4].1, KILOGRAMS_IN_RESULTS);
    // From format 36, with every figure it needs in the results, the answer alone.
    let after = &model.requests()[5];
    assert_eq!(tool_names(after), ["final_answer"]);
    assert!(
        common::note(after).contains(
            "(the refusal above shows the converted figures the answer needs: answer with them \
             and the rest of what the task asks)"
        ),
        "{}",
        common::note(after)
    );
    assert_eq!(
        (ran.result.outcome, ran.result.final_text.as_str()),
        (Outcome::Completed, converted)
    );
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    Ok(())
}

async fn the_same_one_result_again_is_refused_with_the_lines_to_combine() -> anyhow::Result<()> {
    // Refused once for giving the amount total alone, the local 1.5B ran the script again and
    // gave the same answer, which was taken. From format 29 it is refused once more, with the
    // results' lines to combine; a third time it is taken.
    let once = "The total of the amount column is 1705.47.";
    let summed = "1705.47 + 212 = 1917.47";
    let (ran, model) = add_two_totals_with_model(vec![answer(once), answer(summed)]).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "refused"]);
    assert_eq!(
        ran.observations()[4].1,
        "answer not accepted yet: the task asks to combine values, and the results give `amount \
         sum: 1705.47` and `units sum: 212`. Work out their sum (1705.47 + 212) and answer with \
         that result and the values it comes from."
    );
    assert_eq!((ran.result.outcome, ran.result.final_text.as_str()), (Outcome::Completed, summed));
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 2);
    assert_eq!(model.remaining(), 0);
    // From format 32 nothing is left to run after those lines: the answer alone.
    let last = model.requests().pop().unwrap();
    assert_eq!(tool_names(&last), ["final_answer"]);
    // Only once: the same answer a third time is taken.
    let (ran, _) = add_two_totals_with_model(vec![answer(once), answer(once)]).await?;
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "refused"]);
    assert_eq!(ran.result.final_text, once);
    Ok(())
}

async fn a_named_column_no_call_ran_for_is_refused_once_in_plan_execute_think() -> anyhow::Result<()>
{
    // "give the total of the units, unit_price and amount columns": the local 1.5B's
    // plan-execute-think summarised `units` alone and completed with its figures. From format
    // 37 a named column no result gives a line of, beside one that has them, leaves the answer
    // incomplete: refused once, and the next round runs the call for it.
    let fixture = table_and_units()?;
    let sum = |column: &str| json!({"skill": "table", "script": "scripts/sum.sh", "args": ["sales.csv", column]});
    let model = Arc::new(MockModel::new(vec![
        plan("select_skills", &json!({"names": ["table"]})),
        plan("run_script", &sum("units")),
        think("The units total 212.", true),
        plan("run_script", &sum("amount")),
        think("The units total 212 and the amount total 212.", true),
    ]));
    let config = AgentConfig { strategy: "plan-execute-think".into(), ..AgentConfig::default() };
    let task = "For sales.csv, give the total of the units and amount columns.";
    let ran = fixture.run(fixture.agent(&model, config), task).await?;
    assert_eq!(model.remaining(), 0);
    assert_eq!(ran.result.outcome, Outcome::Completed);
    assert_eq!(ran.result.final_text, "The units total 212 and the amount total 212.");
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 1);
    let note = "answer not accepted yet: the task asks a figure of the `amount` column, and no \
                result gives it yet: run the script for it too. Answer with the figure of each \
                column the task names.";
    let requests = model.requests();
    assert!(request_text(&requests[3]).contains(note), "{}", request_text(&requests[3]));
    replays_exactly(&ran).await;
    Ok(())
}

async fn a_summary_cut_off_inside_a_copied_call_is_no_ending_at_a_limit() -> anyhow::Result<()> {
    // The local 1.5B's plan-execute-think copied a note's "Make this call: {\"skill\": …}" into
    // its summary, whose string ended at the first quote, and the turn limit ended the run with
    // "… Make this call: {". From format 37 such a text is no report: the degraded answer is
    // asked for, and when it is cut off too, the report from the record stands in.
    // From format 38 neither is a degraded answer that gives none of the results' figures
    // (the 1.5B's was an early failure of the run, after two results).
    let cut = "The script ran, but the task writes `nmi`. Make this call: {";
    // From format 39 neither is one that repeats the runtime's words (the 1.5B began one with
    // the instruction that asked for it: "The run must stop now: …").
    for degraded in [
        "Done: the units total 212. Next: make this call: {",
        "The script failed to find the column `length` in sales.csv.",
        "Write the final answer for the user with three short parts: what was done: the units \
         total 212.",
    ] {
        let (_fixture, ran) =
            units_total_then_limit(vec![think(cut, false), MockReply::text(degraded)]).await?;
        let ending = &ran.result.final_text;
        assert!(ending.starts_with("I could not finish the task: "), "{ending}");
        assert!(ending.contains("units sum: 212"), "{ending}");
        replays_exactly(&ran).await;
    }
    Ok(())
}

async fn a_target_unit_named_without_its_figure_is_refused_with_the_line() -> anyhow::Result<()> {
    // After `212 lb = 96.16158244 kg` the local 1.5B answered "The total of the `units` column
    // is 212, and it has been converted from pounds to kilograms.", and the answer was taken:
    // it names `kilograms`. From format 38 a unit named with none of the results' figures in
    // it is refused like one not named, with the line that converts, and then the answer alone.
    let fixture = table_and_units()?;
    let named = "The units total 212, and it has been converted from pounds to kilograms.";
    let converted = "The units total 212; 212 lb = 96.16158244 kg.";
    let model =
        Arc::new(MockModel::new(unconverted_then_converts(vec![answer(named), answer(converted)])));
    let ran = fixture.run(fixture.agent(&model, AgentConfig::default()), TOTAL_AND_CONVERT).await?;
    assert_eq!(model.remaining(), 0);
    assert_eq!(ran.statuses(), ["ok", "ok", "refused", "ok", "ok", "refused"]);
    assert_eq!(ran.observations()[5].1, KILOGRAMS_IN_RESULTS);
    // Nothing is left to run: the answer alone is on offer.
    let last = &model.requests()[6];
    assert_eq!(tool_names(last), ["final_answer"]);
    assert_eq!(ran.result.final_text, converted);
    assert_eq!(ran.result.reasoning_metrics.incomplete_refusals, 2);
    replays_exactly(&ran).await;
    Ok(())
}
