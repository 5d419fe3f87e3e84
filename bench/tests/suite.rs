//! The scripted suite end to end: every scenario on every strategy it scripts, through the
//! real agent and sandbox (this binary is the sandbox helper), each passing its checks,
//! reproduced by replay, within its budgets. `BENCH_OUT=DIR` keeps the run directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;

use bench::catalog::scenarios;
use bench::report::{Results, summarise, write};
use bench::suite::{RunRecord, SuiteConfig, run_scripted};
use serde_json::Value;

/// Runs whose replay diverges from the record because of agent-core, not the bench: a tool
/// call whose arguments are not JSON streams `action_planned` live, which the replay of the
/// recorded (invalid) answer does not emit. Listed so that the suite notices when it is fixed.
const KNOWN_REPLAY_DIVERGENCES: &[&str] = &[];

fn passed(record: &RunRecord) -> bool {
    let name = format!("{}/{}", record.scenario, record.strategy);
    let known = KNOWN_REPLAY_DIVERGENCES.contains(&name.as_str());
    record.success
        && record.replay_reproduced != known
        && record.budget_overruns.is_empty()
        && record.sequence_violations.is_empty()
}

/// `results.json` with the timings zeroed.
fn without_timings(path: &std::path::Path) -> Value {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fn zero(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, inner) in map.iter_mut() {
                    if key == "wall_ms" {
                        *inner = Value::from(0);
                    } else {
                        zero(inner);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(zero),
            _ => {}
        }
    }
    zero(&mut value);
    value
}

/// The report exists and parses, holds the seed's sections and the batch comparison, and a
/// second scripted run gives the same `results.json` apart from timings.
fn report_checks(records: Vec<RunRecord>, out: &std::path::Path, config: &SuiteConfig) -> bool {
    let mut ok = true;
    let mut check = |name: &str, passed: bool| {
        println!("test {name} ... {}", if passed { "ok" } else { "FAILED" });
        ok &= passed;
    };
    let results = summarise("scripted", "scripted", records);
    let written = write(&results, out).unwrap();
    let text = std::fs::read_to_string(&written.results).unwrap();
    let parsed: Result<Results, _> = serde_json::from_str(&text);
    check("report/results_json_parses_back", parsed.as_ref().is_ok_and(|back| *back == results));
    let markdown = std::fs::read_to_string(&written.markdown).unwrap();
    check(
        "report/markdown_has_the_seed_sections",
        [
            "## Strategies",
            "## Categories",
            "## First skill selected",
            "## Reasoning quality",
            "| silent-call rate |",
            "## Batchable scenarios: model calls",
            "## Scenarios",
        ]
        .iter()
        .all(|section| markdown.contains(section)),
    );
    let html = std::fs::read_to_string(&written.html).unwrap();
    check(
        "report/html_is_self_contained_with_charts",
        html.starts_with("<!DOCTYPE html>")
            && html.matches("<svg").count() >= 6
            && !html.contains("<script")
            && !html.contains("https://"),
    );
    let svg = std::fs::read_to_string(&written.svg).unwrap();
    check(
        "report/svg_stacks_the_charts",
        svg.starts_with("<svg ")
            && svg.matches("<svg ").count() == html.matches("<svg ").count() + 1,
    );
    if config.filter.is_none() {
        let ratio = results.batchable.react_over_plan_execute_think;
        println!(
            "react / plan-execute-think model calls on batchable scenarios: {ratio:?} ({:?})",
            results.batchable.model_calls
        );
        check(
            "report/plan_execute_think_saves_calls_on_batches",
            ratio.is_some_and(|ratio| ratio > 1.0),
        );
        check("report/at_least_30_scenarios", results.scenarios >= 30);
        // Determinism: a second scripted run gives the same figures apart from timings.
        let second = tempfile::tempdir().unwrap();
        let mut again = config.clone();
        again.out = second.path().to_owned();
        let records = run_scripted(&scenarios(), &again, &mut |_| {}).unwrap();
        let written_again =
            write(&summarise("scripted", "scripted", records), second.path()).unwrap();
        check(
            "report/two_scripted_runs_give_the_same_results",
            without_timings(&written.results) == without_timings(&written_again.results),
        );
    }
    ok
}

fn main() -> ExitCode {
    if let Some(code) = bench::run_sandbox_helper_if_requested() {
        return code;
    }
    let filter = std::env::args().skip(1).find(|argument| !argument.starts_with('-'));
    let out = tempfile::tempdir().unwrap();
    let out_path = std::env::var_os("BENCH_OUT").map_or_else(|| out.path().to_owned(), Into::into);
    let mut config = SuiteConfig::new(&out_path);
    config.filter = filter;
    println!("\nrunning the scripted suite");
    let records = run_scripted(&scenarios(), &config, &mut |record| {
        let ok = passed(record);
        println!(
            "test {}/{} ... {} ({} model calls, outcome {})",
            record.scenario,
            record.strategy,
            if ok { "ok" } else { "FAILED" },
            record.model_calls,
            record.outcome
        );
        if !ok {
            println!(
                "    failures: {:?}, replay reproduced: {}, overruns: {:?}, violations: {:?}",
                record.failures,
                record.replay_reproduced,
                record.budget_overruns,
                record.sequence_violations
            );
        }
    })
    .unwrap();
    let runs = records.len();
    let mut failed = records.iter().filter(|record| !passed(record)).count();
    failed += usize::from(!report_checks(records, &out_path, &config));
    println!(
        "\ntest result: {}. {} runs; {failed} failed\n",
        if failed == 0 { "ok" } else { "FAILED" },
        runs
    );
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
