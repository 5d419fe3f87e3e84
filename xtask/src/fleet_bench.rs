//! `cargo xtask bench --live --nats URL`: the live bench with its runs made by a fleet's
//! workers instead of this process.
//!
//! Every scenario and strategy the bench selects becomes one task: a fresh copy of the example
//! workspace, the scenario's task, strategy and budgets, `approval: never`, and the model spec.
//! The bench waits for every task, fetches each run with the files it wrote (applied onto the
//! copy it submitted, so the workspace checks see what the run left), and scores it exactly as
//! a local live run ([`bench::suite::score_run`]). A dead-lettered task counts as a failed run
//! with its reason.
//!
//! The workers must have the example skills (`skills-agent worker --skills examples/skills`);
//! each run is bounded by the worker's budgets (`max_duration_ms`, 15 min by default).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bench::suite::{RunRecord, SuiteConfig};
use skills_agent_fleet::{Credentials, Fleet, FleetConfig, RunStatus, TaskSpec, TaskState};

/// How often the runs' states are read.
const POLL: Duration = Duration::from_millis(500);

/// How often a wait with nothing finished says what it waits for.
const QUIET: Duration = Duration::from_secs(60);

/// Runs the scenarios `config` selects that a real model can pass on the fleet at `url`, every
/// task with model `spec`, and writes the report into `config.out`.
///
/// # Errors
///
/// The fleet cannot be reached or has no worker, a workspace cannot be copied or submitted, a
/// finished run cannot be fetched or scored, or the report cannot be written.
pub fn run_suite(
    config: &SuiteConfig,
    url: &str,
    spec: &str,
) -> Result<(bench::report::Results, bench::report::Written)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let runs = runtime.block_on(run_all(config, url, spec))?;
    let results = bench::report::summarise("live", spec, runs);
    let written = bench::report::write(&results, &config.out)?;
    Ok((results, written))
}

/// One submitted task and where its scenario's run goes.
struct Pending<'a> {
    /// Its place in the bench's order (the report lists runs in it, as a local run does).
    order: usize,
    scenario: &'a bench::scenario::Scenario,
    strategy: &'a str,
    task_id: String,
    /// `runs/SCENARIO/STRATEGY`, relative to the bench's output folder.
    relative: String,
}

async fn run_all(config: &SuiteConfig, url: &str, spec: &str) -> Result<Vec<RunRecord>> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let fleet_config =
        FleetConfig { credentials: Credentials::from_env(&env), ..FleetConfig::new(url) };
    let fleet =
        Fleet::connect(fleet_config).await.with_context(|| format!("the fleet at {url}"))?;
    if fleet.workers().await?.is_empty() {
        bail!(
            "no worker is running on the fleet at {url}: start one with `skills-agent worker \
             --nats {url} --skills examples/skills` (here or on another machine)"
        );
    }
    let scenarios = bench::catalog::scenarios();
    let mut pending = Vec::new();
    for (order, (scenario, strategy, _)) in
        bench::suite::live_selected(&scenarios, config).into_iter().enumerate()
    {
        let relative = format!("runs/{}/{strategy}", scenario.name);
        let folder = config.out.join(&relative);
        if folder.exists() {
            std::fs::remove_dir_all(&folder)
                .with_context(|| format!("clearing {}", folder.display()))?;
        }
        let workspace = folder.join("workspace");
        bench::suite::example_workspace(config, &workspace)?;
        let task_spec = TaskSpec {
            task: scenario.task.clone(),
            strategy: Some(strategy.to_owned()),
            model: Some(spec.to_owned()),
            ask_user: scenario.ask_user,
            approval: Some("never".to_owned()),
            max_turns: Some(scenario.budgets.max_turns),
            max_tool_calls: Some(scenario.budgets.max_tool_calls),
            max_script_runs: Some(scenario.budgets.max_script_runs),
            max_context_chars: Some(scenario.budgets.max_context_chars),
        };
        let task = fleet
            .submit(task_spec, Some(&workspace))
            .await
            .with_context(|| format!("submitting {}/{strategy}", scenario.name))?;
        pending.push(Pending { order, scenario, strategy, task_id: task.id, relative });
    }
    let total = pending.len();
    eprintln!("bench: {total} runs queued on {url}");
    let mut records = Vec::with_capacity(total);
    let mut last_news = Instant::now();
    while !pending.is_empty() {
        // One read of every run's state per poll.
        let mut states: HashMap<String, RunStatus> =
            fleet.runs().await?.into_iter().map(|run| (run.task_id.clone(), run)).collect();
        let mut index = 0;
        while index < pending.len() {
            let status = states.remove(&pending[index].task_id);
            let state = status.as_ref().map(|status| status.state);
            if !matches!(state, Some(TaskState::Finished | TaskState::Dead)) {
                index += 1;
                continue;
            }
            let done = pending.swap_remove(index);
            let record = match status {
                Some(status) if status.state == TaskState::Finished => {
                    score(&fleet, config, &done).await?
                }
                status => bench::suite::unfinished(
                    done.scenario,
                    done.strategy,
                    done.relative.clone(),
                    format!(
                        "task {} was dead-lettered: {}",
                        done.task_id,
                        status.and_then(|status| status.error).unwrap_or_default()
                    ),
                ),
            };
            eprintln!(
                "bench: {}/{total} {}/{}: {} ({})",
                records.len() + 1,
                record.scenario,
                record.strategy,
                if record.success { "passed" } else { "failed" },
                record.outcome
            );
            records.push((done.order, record));
            last_news = Instant::now();
        }
        if !pending.is_empty() {
            if last_news.elapsed() >= QUIET {
                let status = fleet.status().await?;
                eprintln!(
                    "bench: waiting for {} runs ({} queued, {} running, {} workers)",
                    pending.len(),
                    status.queued,
                    status.running,
                    status.workers.len()
                );
                last_news = Instant::now();
            }
            tokio::time::sleep(POLL).await;
        }
    }
    records.sort_by_key(|(order, _)| *order);
    Ok(records.into_iter().map(|(_, record)| record).collect())
}

/// Fetches a finished task's run into its folder (the run directory under `run/`, the files it
/// wrote applied onto the submitted workspace) and scores it.
async fn score(fleet: &Fleet, config: &SuiteConfig, done: &Pending<'_>) -> Result<RunRecord> {
    let folder = config.out.join(&done.relative);
    let fetched = fleet
        .fetch(&done.task_id, &folder)
        .await
        .with_context(|| format!("fetching task {}", done.task_id))?;
    // The run's wall time on its worker, from its record (without the wait in the queue).
    Ok(bench::suite::score_run(
        done.scenario,
        done.strategy,
        &fetched.run_dir,
        &fetched.workspace,
        done.relative.clone(),
        None,
    )
    .await?)
}
