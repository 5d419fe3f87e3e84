//! The skills-agent bench: how well agents reason and how much they spend, strategy by
//! strategy, and the reasoning quality of other agents' recorded runs.
//!
//! # Design
//!
//! Two inputs, one rule. *Scenarios* run the real agent (`agent-core`: the bundled skills, the
//! sandbox, budgets, guardrails) on scripted models, one script per strategy, each run writing
//! its own run directory; a run is scored from its `events.jsonl` alone, with the code
//! `skills-agent replay --check` uses ([`skills_agent_core::read_events`], [`skills_agent_core::compliance`],
//! [`skills_agent_core::replay_check`]), so a scripted run and a live one are scored alike.
//! *Trajectories* are other agents' runs in OpenAI chat format ([`trajectories`]); their tool
//! calls are counted silent or reasoned by the seed-000 rule agent-core applies to its own
//! answers ([`skills_agent_core::reasoning_text_chars`]).
//!
//! # Example
//!
//! Score two recorded runs: the first called a tool silently, the second said why first.
//!
//! ```
//! let runs = r#"[
//!   [{"role": "user", "content": "list the files"},
//!    {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function"}]}],
//!   {"messages": [{"role": "assistant", "content": "I will list them.",
//!                  "tool_calls": [{"id": "2"}, {"id": "3"}]}],
//!    "reward": 1}
//! ]"#;
//! let score = bench::trajectories::score_text(runs)?;
//! assert_eq!((score.runs, score.tool_calls, score.silent_calls, score.reasoned_calls), (2, 3, 1, 2));
//! assert_eq!(score.silent_call_rate, 0.333);
//! assert_eq!(score.success_rate, Some(1.0));
//! # Ok::<(), bench::Error>(())
//! ```

pub mod catalog;
mod error;
mod html;
pub mod ranking;
pub mod report;
pub mod scenario;
pub mod suite;
pub mod trajectories;

pub use error::{Error, Result};

/// Runs tools-runtime's sandbox helper when this process was started as one, and returns its
/// exit code (`None`: carry on). A binary that runs the scenarios (the bench's test binaries,
/// `cargo xtask`) calls it first in `main`: the bench's sandbox runtime uses the running
/// binary as its helper.
pub fn run_sandbox_helper_if_requested() -> Option<std::process::ExitCode> {
    tools_runtime::run_sandbox_helper_if_requested()
}

/// Runs every scripted scenario of [`catalog::scenarios`] that `config` selects, with a
/// progress bar on stderr, and writes the report into `config.out`.
///
/// # Errors
///
/// A run that could not be set up or scored, or a report file that could not be written.
pub fn run_scripted_suite(
    config: &suite::SuiteConfig,
) -> Result<(report::Results, report::Written)> {
    let scenarios = catalog::scenarios();
    let total = suite::selected(&scenarios, config).len() as u64;
    with_progress(total, config, "scripted", "scripted", |on_run| {
        suite::run_scripted(&scenarios, config, on_run)
    })
}

/// Runs the scenarios `config` selects that a real model can pass ([`suite::live_selected`])
/// on `live`, with a progress bar on stderr, and writes the report into `config.out`.
/// `spec` names the model in the report.
///
/// # Errors
///
/// A run that could not be set up or scored, or a report file that could not be written.
pub fn run_live_suite(
    config: &suite::SuiteConfig,
    live: &suite::LiveModel,
    spec: &str,
) -> Result<(report::Results, report::Written)> {
    let scenarios = catalog::scenarios();
    let total = suite::live_selected(&scenarios, config).len() as u64;
    with_progress(total, config, "live", spec, |on_run| {
        suite::run_live(&scenarios, config, live, on_run)
    })
}

fn with_progress(
    total: u64,
    config: &suite::SuiteConfig,
    mode: &str,
    model: &str,
    run: impl FnOnce(&mut dyn FnMut(&suite::RunRecord)) -> Result<Vec<suite::RunRecord>>,
) -> Result<(report::Results, report::Written)> {
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40.cyan/blue} {pos}/{len} runs · {elapsed} · {msg}",
    ) {
        bar.set_style(style);
    }
    let runs = run(&mut |record| {
        bar.set_message(format!("{}/{}", record.scenario, record.strategy));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    let results = report::summarise(mode, model, runs);
    let written = report::write(&results, &config.out)?;
    Ok((results, written))
}
