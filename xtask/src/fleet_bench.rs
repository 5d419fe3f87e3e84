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

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bench::suite::{RunRecord, SuiteConfig};
use skills_agent_fleet::{Credentials, Fleet, FleetConfig, TaskSpec, TaskState};

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
    for (scenario, strategy, _) in bench::suite::live_selected(&scenarios, config) {
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
        pending.push(Pending { scenario, strategy, task_id: task.id, relative });
    }
    let total = pending.len();
    eprintln!("bench: {total} runs queued on {url}");
    let mut records = Vec::with_capacity(total);
    let mut last_news = Instant::now();
    while !pending.is_empty() {
        let mut index = 0;
        while index < pending.len() {
            let status = fleet.run_status(&pending[index].task_id).await?;
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
            records.push(record);
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
    // The report lists runs in the bench's order, as a local run does.
    let order: Vec<(String, String)> = bench::suite::live_selected(&scenarios, config)
        .into_iter()
        .map(|(scenario, strategy, _)| (scenario.name.clone(), strategy.to_owned()))
        .collect();
    records.sort_by_key(|record| {
        order.iter().position(|(scenario, strategy)| {
            *scenario == record.scenario && *strategy == record.strategy
        })
    });
    Ok(records)
}

/// Fetches a finished task's run into its folder (the run directory under `run/`, the files it
/// wrote applied onto the submitted workspace) and scores it.
async fn score(fleet: &Fleet, config: &SuiteConfig, done: &Pending<'_>) -> Result<RunRecord> {
    let folder = config.out.join(&done.relative);
    let fetched = fleet
        .fetch(&done.task_id, &folder)
        .await
        .with_context(|| format!("fetching task {}", done.task_id))?;
    let wall_ms = wall_ms(&fetched.run_dir.join("events.jsonl")).unwrap_or(0);
    Ok(bench::suite::score_run(
        done.scenario,
        done.strategy,
        &fetched.run_dir,
        &fetched.workspace,
        done.relative.clone(),
        wall_ms,
    )
    .await?)
}

/// The time from a record's first event to its last, from their `ts` (the run's wall time on
/// its worker, without the wait in the queue).
fn wall_ms(events: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(events).ok()?;
    let ts = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|event| event["ts"].as_str().and_then(millis))
    };
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let first = ts(lines.next()?)?;
    let last = lines.next_back().map_or(Some(first), ts)?;
    u64::try_from(last - first).ok()
}

/// Milliseconds since the epoch of an RFC 3339 UTC time as agent-core writes it
/// (`2026-11-26T23:59:00.123Z`).
fn millis(ts: &str) -> Option<i64> {
    let (date, time) = ts.strip_suffix('Z')?.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock = clock.splitn(3, ':').map(str::parse::<i64>);
    let (hour, minute, second) = (clock.next()?.ok()?, clock.next()?.ok()?, clock.next()?.ok()?);
    let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_as_agent_core_writes_them() {
        assert_eq!(millis("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(millis("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        // Across midnight, a month end and a leap day.
        let before = millis("2028-02-29T23:59:59.900Z").unwrap();
        assert_eq!(millis("2028-03-01T00:00:00.100Z").unwrap() - before, 200);
        assert_eq!(millis("2026-11-26T23:59:00.123Z"), Some(1_795_737_540_123));
        assert_eq!(millis("2026-11-26 23:59:00Z"), None);
        assert_eq!(millis("garbage"), None);
    }

    #[test]
    fn a_record_s_wall_time_runs_from_its_first_event_to_its_last() {
        let dir = std::env::temp_dir().join(format!("xtask-wall-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("events.jsonl");
        std::fs::write(
            &file,
            "{\"ts\":\"2026-11-26T10:00:00.000Z\"}\n{\"ts\":\"2026-11-26T10:00:01.000Z\"}\n\
             {\"ts\":\"2026-11-26T10:00:02.250Z\"}\n",
        )
        .unwrap();
        assert_eq!(wall_ms(&file), Some(2250));
        std::fs::write(&file, "{\"ts\":\"2026-11-26T10:00:00.000Z\"}\n").unwrap();
        assert_eq!(wall_ms(&file), Some(0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
