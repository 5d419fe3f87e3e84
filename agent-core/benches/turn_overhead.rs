//! Runtime overhead per turn: 200-turn runs on an instant model, the model's time taken out.
//!
//! Each run selects a skill, loads a ~1 KB section of one of its files every turn (a real
//! `load_resource` through skill-loader, no script; a section, since a file read whole is not
//! offered again) and answers on turn 200, with a real run directory:
//! `events.jsonl` written event by event and fsynced at every turn end, `state.json` rewritten
//! every turn, the context packed and hashed for every request. The model hands back a
//! prepared stream at once and timestamps each call, so the time from the return of one call to
//! the start of the next is the runtime's own work for one turn.
//!
//! Prints, per decide mode and per place of the runs directory (disk, and tmpfs where fsync is
//! free), the median µs/turn over 15 runs and for each quarter of the run (turns 1–50, 51–100,
//! 101–150, 151–199: the slope against history length); then Criterion times whole runs of 50,
//! 100 and 200 turns (its throughput line gives turns per second).
//!
//! `cargo bench -p skills-agent-core --bench turn_overhead` (`-- tmpfs` or `-- disk`: one place only);
//! figures go into `agent-core/BENCHMARKS.md`. `… -- --test` runs each part once, small.

// A benchmark's setup failing should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{BenchmarkId, Criterion, SamplingMode, Throughput};
use model_adapter::{ChatRequest, Delta, MockReply, ModelProvider, Response};
use serde_json::json;
use skills_agent_core::{Agent, AgentConfig, Budgets, DecideMode, Outcome};
use skills_agent_registry::{RootKind, SkillRoot};

/// Answers from a prepared list at once, and notes when each call began and ended.
#[derive(Debug)]
struct InstantModel {
    replies: Mutex<VecDeque<Vec<Delta>>>,
    /// `(entered, returned)` of every call.
    calls: Mutex<Vec<(Instant, Instant)>>,
}

impl InstantModel {
    fn new(replies: Vec<MockReply>) -> InstantModel {
        let replies = replies
            .into_iter()
            .map(|reply| match reply {
                MockReply::Deltas { deltas } => deltas,
                MockReply::Error { .. } => unreachable!("the bench scripts no errors"),
            })
            .collect();
        InstantModel { replies: Mutex::new(replies), calls: Mutex::new(Vec::new()) }
    }

    fn next(&self) -> model_adapter::Result<Vec<Delta>> {
        self.replies.lock().unwrap().pop_front().ok_or_else(|| model_adapter::Error::Mock {
            message: "the bench script ran out of replies".to_owned(),
            retryable: false,
        })
    }
}

#[async_trait]
impl ModelProvider for InstantModel {
    async fn chat(&self, _request: &ChatRequest) -> model_adapter::Result<Response> {
        unreachable!("agent-core streams every call")
    }

    async fn stream(
        &self,
        _request: &ChatRequest,
    ) -> model_adapter::Result<model_adapter::DeltaStream> {
        let entered = Instant::now();
        let deltas = self.next()?;
        let stream = Box::pin(futures_util::stream::iter(deltas.into_iter().map(Ok)));
        self.calls.lock().unwrap().push((entered, Instant::now()));
        Ok(stream)
    }
}

/// A skill root with one skill holding a ~1 KB reference file.
fn skills() -> tempfile::TempDir {
    let root = tempfile::Builder::new().prefix("agent-core-bench-skills-").tempdir().unwrap();
    let skill = root.path().join("notes");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: Reads the team's notes on releases.\n---\n\
         Read references/release.md before answering questions about releases.\n",
    )
    .unwrap();
    let line = "- step: tag the commit, build the artefacts, sign them and publish the notes\n";
    std::fs::write(skill.join("references/release.md"), format!("# Release\n{}", line.repeat(13)))
        .unwrap();
    root
}

/// The replies of a run of `turns` turns: select, `turns - 2` loads, answer.
fn replies(turns: usize, mode: DecideMode) -> Vec<MockReply> {
    let reply = |kind: &str, args: serde_json::Value| match mode {
        DecideMode::Tools => MockReply::tool_call(kind, &args),
        DecideMode::Json => MockReply::text(
            &json!({"thought": "next step", "action": {"type": kind, "args": args}}).to_string(),
        ),
    };
    let mut replies = vec![reply("select_skills", json!({"names": ["notes"]}))];
    for _ in 2..turns {
        replies.push(reply(
            "load_resource",
            json!({"skill": "notes", "path": "references/release.md", "section": "Release"}),
        ));
    }
    replies.push(reply("final_answer", json!({"content": "Tag, build, sign, publish."})));
    replies
}

fn config(turns: usize, mode: DecideMode) -> AgentConfig {
    let turns = turns as u32;
    AgentConfig {
        decide: mode,
        budgets: Budgets {
            max_turns: turns,
            max_tool_calls: turns,
            // Nothing is compacted: the request grows with every turn, the worst case for the
            // slope.
            max_context_chars: 10_000_000,
            ..Budgets::default()
        },
        ..AgentConfig::default()
    }
}

/// One run of `turns` turns; returns the runtime's time per turn (model calls taken out).
fn run_once(
    tokio: &tokio::runtime::Runtime,
    skills: &Path,
    runs: &Path,
    turns: usize,
    mode: DecideMode,
) -> Vec<Duration> {
    let model = Arc::new(InstantModel::new(replies(turns, mode)));
    let agent = Agent::builder()
        .model(model.clone())
        .config(config(turns, mode))
        .skill_roots(vec![SkillRoot::new(RootKind::Project, skills)])
        .workspace(skills)
        .runs_dir(fresh_runs_dir(runs))
        .build()
        .unwrap();
    let result = tokio.block_on(agent.run("How do we release?")).unwrap();
    assert_eq!(result.outcome, Outcome::Completed, "{}", result.final_text);
    assert_eq!(result.turns as usize, turns);
    let calls = model.calls.lock().unwrap();
    // Between the return of call k and the start of call k+1 the runtime does one whole turn's
    // work: the rest of turn k (reading the stream, validating, executing, events, state.json,
    // fsync) and the head of turn k+1 (budgets, action space, note, packing, hashing). The
    // gap after the last call (the run's finish) is not a turn and is left out.
    calls.windows(2).map(|pair| pair[1].0 - pair[0].1).collect()
}

/// A folder of its own under `runs` for each run: run ids carry 16 random bits per second, and
/// the bench starts thousands of runs in a few seconds.
fn fresh_runs_dir(runs: &Path) -> std::path::PathBuf {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    runs.join(RUNS.fetch_add(1, Ordering::Relaxed).to_string())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 }
}

/// The per-turn profile over `runs` runs of `turns` turns: the median of all turns and of each
/// quarter of the run.
fn profile(
    tokio: &tokio::runtime::Runtime,
    skills: &Path,
    target: Target,
    runs: usize,
    turns: usize,
) {
    // by_turn[k]: the gap after call k+1, over all runs.
    let mut by_turn: Vec<Vec<f64>> = vec![Vec::new(); turns - 1];
    let warm = run_once(tokio, skills, target.runs_dir, turns, target.mode);
    assert_eq!(warm.len(), turns - 1);
    for _ in 0..runs {
        let gaps = run_once(tokio, skills, target.runs_dir, turns, target.mode);
        for (turn, gap) in gaps.into_iter().enumerate() {
            by_turn[turn].push(gap.as_secs_f64() * 1e6);
        }
    }
    let mut all: Vec<f64> = by_turn.iter().flatten().copied().collect();
    let mut line = format!(
        "{:?} mode, runs dir on {}, {runs} runs of {turns} turns: median {:.0} µs/turn",
        target.mode,
        target.storage,
        median(&mut all)
    );
    let window = (turns / 4).max(1);
    let mut windows = Vec::new();
    for start in (0..turns - 1).step_by(window) {
        let end = (start + window).min(turns - 1);
        let mut values: Vec<f64> = by_turn[start..end].iter().flatten().copied().collect();
        let value = median(&mut values);
        windows.push(value);
        line.push_str(&format!("; turns {}–{}: {value:.0}", start + 1, end));
    }
    if let (Some(first), Some(last)) = (windows.first(), windows.last()) {
        line.push_str(&format!("; last/first quarter {:.2}", last / first));
    }
    println!("{line}");
}

/// One configuration of the profile.
#[derive(Clone, Copy)]
struct Target<'a> {
    mode: DecideMode,
    storage: &'a str,
    runs_dir: &'a Path,
}

fn group_name(storage: &str) -> String {
    format!("instant_model_runs_dir_on_{storage}")
}

/// Whole runs of 50, 100 and 200 turns under Criterion (throughput in turns).
fn whole_runs(
    criterion: &mut Criterion,
    tokio: &tokio::runtime::Runtime,
    skills: &Path,
    runs_dir: &Path,
    storage: &str,
) {
    let mut group = criterion.benchmark_group(group_name(storage));
    group
        // A 200-turn run on disk takes ~0.15 s: equal samples, not Criterion's growing ones.
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6));
    for turns in [50usize, 100, 200] {
        group.throughput(Throughput::Elements(turns as u64));
        group.bench_with_input(
            BenchmarkId::new("tools_mode_turns", turns),
            &turns,
            |bencher, &turns| {
                bencher.iter_batched(
                    || {
                        let model: Arc<dyn ModelProvider> =
                            Arc::new(InstantModel::new(replies(turns, DecideMode::Tools)));
                        Agent::builder()
                            .model(model)
                            .config(config(turns, DecideMode::Tools))
                            .skill_roots(vec![SkillRoot::new(RootKind::Project, skills)])
                            .workspace(skills)
                            .runs_dir(fresh_runs_dir(runs_dir))
                            .build()
                            .unwrap()
                    },
                    |agent| {
                        let result = tokio.block_on(agent.run("How do we release?")).unwrap();
                        assert_eq!(result.turns as usize, turns);
                    },
                    criterion::BatchSize::PerIteration,
                );
            },
        );
    }
    group.finish();
}

/// Where run directories go: the system temp directory (a disk: the per-turn fsync waits for
/// the device) and, when there is one, tmpfs (`/dev/shm`: fsync returns at once, so what is left
/// is the runtime's own work).
fn storages() -> Vec<(&'static str, tempfile::TempDir)> {
    let mut storages = vec![(
        "disk",
        tempfile::Builder::new().prefix("agent-core-bench-runs-").tempdir().unwrap(),
    )];
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        storages.push((
            "tmpfs",
            tempfile::Builder::new().prefix("agent-core-bench-runs-").tempdir_in(shm).unwrap(),
        ));
    }
    storages
}

fn main() {
    let test_mode = std::env::args().any(|argument| argument == "--test");
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let skills = skills();
    // A positional argument is Criterion's name filter; the profile follows it too
    // (`-- tmpfs` runs only the tmpfs parts).
    let filters: Vec<String> =
        std::env::args().skip(1).filter(|argument| !argument.starts_with('-')).collect();
    let storages: Vec<_> = storages()
        .into_iter()
        .filter(|(storage, _)| {
            let group = group_name(storage);
            filters.is_empty() || filters.iter().any(|filter| group.contains(filter.as_str()))
        })
        .collect();
    let (runs, turns) = if test_mode { (1, 20) } else { (15, 200) };
    for (storage, directory) in &storages {
        for mode in [DecideMode::Tools, DecideMode::Json] {
            let target = Target { mode, storage, runs_dir: directory.path() };
            profile(&tokio, skills.path(), target, runs, turns);
        }
    }
    let mut criterion = Criterion::default().configure_from_args();
    for (storage, directory) in &storages {
        whole_runs(&mut criterion, &tokio, skills.path(), directory.path(), storage);
    }
    criterion.final_summary();
}
