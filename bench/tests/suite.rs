//! The scripted suite end to end: every scenario on every strategy it scripts, through the
//! real agent and sandbox (this binary is the sandbox helper), each passing its checks,
//! reproduced by replay, within its budgets. `BENCH_OUT=DIR` keeps the run directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::ExitCode;

use bench::catalog::scenarios;
use bench::suite::{RunRecord, SuiteConfig, run_scripted};

/// Runs whose replay diverges from the record because of agent-core, not the bench: a tool
/// call whose arguments are not JSON streams `action_planned` live, which the replay of the
/// recorded (invalid) answer does not emit. Listed so that the suite notices when it is fixed.
const KNOWN_REPLAY_DIVERGENCES: &[&str] = &["broken-arguments/react"];

fn passed(record: &RunRecord) -> bool {
    let name = format!("{}/{}", record.scenario, record.strategy);
    let known = KNOWN_REPLAY_DIVERGENCES.contains(&name.as_str());
    record.success
        && record.replay_reproduced != known
        && record.budget_overruns.is_empty()
        && record.sequence_violations.is_empty()
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
    let failed = records.iter().filter(|record| !passed(record)).count();
    println!(
        "\ntest result: {}. {} runs; {failed} failed\n",
        if failed == 0 { "ok" } else { "FAILED" },
        records.len()
    );
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
