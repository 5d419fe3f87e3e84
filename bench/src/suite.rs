//! Running the scenarios: each (scenario, strategy) on its own copy of the example workspace,
//! through the real agent and sandbox, into its own run directory, scored from that
//! directory's `events.jsonl` alone.

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use model_adapter::{ChatRequest, Delta, DeltaStream, MockModel, MockReply, ModelProvider, Usage};
use serde::{Deserialize, Serialize};
use skills_agent_core::{
    Agent, AgentConfig, BudgetUse, CancellationToken, DecideMode, Event, EventKind, GuardConfig,
    ModelSettings, Payload, Redactor, compliance, read_events, replay_check,
};
use skills_agent_registry::{RootKind, SkillRoot};
use tools_runtime::{ApprovalMode, RuntimeConfig, SandboxHelper};

use crate::error::{Error, Result};
use crate::scenario::{Category, Scenario};

/// Where the bench finds its material and writes its runs.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// The folder holding `skills/` (the bundled skills) and `task/` (the workspace copied
    /// for every run): the repository's `examples/`.
    pub examples: PathBuf,
    /// The output folder; run directories go to `runs/SCENARIO/STRATEGY/` under it.
    pub out: PathBuf,
    /// Only these strategies (empty: every strategy a scenario has a script for).
    pub strategies: Vec<String>,
    /// Only these scenarios: a comma-separated list, each part a text the scenario's name
    /// contains or a category (`multi_skill`); see [`picks`].
    pub filter: Option<String>,
}

impl SuiteConfig {
    /// The repository's `examples/` and `out`.
    pub fn new(out: &Path) -> SuiteConfig {
        SuiteConfig {
            examples: Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples"),
            out: out.to_owned(),
            strategies: Vec::new(),
            filter: None,
        }
    }
}

/// The figures of one run, all read from its `events.jsonl` (apart from `wall_ms` and the
/// file checks of `failures`, which look at the workspace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The scenario.
    pub scenario: String,
    /// Its category.
    pub category: Category,
    /// The strategy.
    pub strategy: String,
    /// Whether every check passed.
    pub success: bool,
    /// The checks that failed.
    pub failures: Vec<String>,
    /// How the run ended (`completed`, `max_turns`, …).
    pub outcome: String,
    /// Whether it ended with a non-empty final text.
    pub final_text_present: bool,
    /// Turns.
    pub turns: u64,
    /// Model calls.
    pub model_calls: u64,
    /// Actions other than `final_answer`.
    pub tool_calls: u64,
    /// Scripts started.
    pub script_runs: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Context compactions.
    pub compactions: u64,
    /// Actions refused by guardrails, policy or approver.
    pub refusals: u64,
    /// Budget use against the limits.
    pub budgets: Vec<BudgetUse>,
    /// Budgets used past their limit (none expected).
    pub budget_overruns: Vec<String>,
    /// Action-sequence violations found by the compliance check.
    pub sequence_violations: Vec<String>,
    /// Calls made without reasoning.
    pub silent_calls: u64,
    /// Calls made with reasoning.
    pub reasoned_calls: u64,
    /// Reasoning characters of all acting answers.
    pub reasoning_chars: u64,
    /// Final answers refused once for stating a value nothing in the run showed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ungrounded_refusals: u64,
    /// Final answers refused once for leaving numbers of the task unused.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub incomplete_refusals: u64,
    /// Whether the answer the run ended with states a value nothing in the run showed
    /// (`run_finished.grounded: false`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ungrounded: bool,
    /// Meta-cognition warnings the turn notes gave, by reason (`turns`, `failures`,
    /// `refused`, `silent_calls`; seed 000 §2.3), from `model_request.notice`.
    pub warnings: BTreeMap<String, u64>,
    /// Whether `replay --check` reproduced the run from its record.
    pub replay_reproduced: bool,
    /// Whether the run's first `select_skills` named a skill the task needs (the skill of one
    /// of the calls its check expects); a run that selected nothing is a miss. `None` for a
    /// task that needs no skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_selection_right: Option<bool>,
    /// Whether the run had the distractor skills installed (`examples/more-skills`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub more_skills: bool,
    /// The folder holding the run directory, relative to the output folder.
    pub runs_dir: String,
    /// Wall time of the run in milliseconds (the only figure that differs between runs).
    pub wall_ms: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl RunRecord {
    /// Reasoning characters per call (0 without calls).
    pub fn reasoning_chars_per_call(&self) -> f64 {
        let calls = self.silent_calls + self.reasoned_calls;
        if calls == 0 { 0.0 } else { self.reasoning_chars as f64 / calls as f64 }
    }
}

/// A scripted model that answers in order and reports token use like a provider would: the
/// prompt's and the answer's characters divided by four (so that strategies that send less
/// show it).
#[derive(Debug)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<MockReply>>,
}

impl ScriptedModel {
    /// A model answering `replies` in order (an error once they are used up).
    pub fn new(replies: Vec<MockReply>) -> ScriptedModel {
        ScriptedModel { replies: Mutex::new(replies.into()) }
    }

    /// Answers not used yet.
    pub fn remaining(&self) -> usize {
        self.replies.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn next(&self, request: &ChatRequest) -> MockModel {
        let reply =
            self.replies.lock().unwrap_or_else(PoisonError::into_inner).pop_front().unwrap_or_else(
                || MockReply::error("the scripted model has no answer left", false),
            );
        MockModel::new(vec![with_usage(reply, request)])
    }
}

fn with_usage(reply: MockReply, request: &ChatRequest) -> MockReply {
    let MockReply::Deltas { deltas } = reply else { return reply };
    let prompt_chars = serde_json::to_string(&request.messages).map_or(0, |text| text.len())
        + serde_json::to_string(&request.tools).map_or(0, |text| text.len());
    let mut completion_chars = 0;
    let mut kept: Vec<Delta> = Vec::with_capacity(deltas.len() + 1);
    for delta in deltas {
        match &delta {
            Delta::Text { text } | Delta::Thinking { text } => completion_chars += text.len(),
            Delta::ToolCallArguments { fragment, .. } => completion_chars += fragment.len(),
            Delta::ToolCallStart { name, .. } => completion_chars += name.len(),
            _ => {}
        }
        if !matches!(delta, Delta::Usage { .. }) {
            kept.push(delta);
        }
    }
    let usage = Usage {
        prompt_tokens: (prompt_chars as u64).div_ceil(4),
        completion_tokens: (completion_chars as u64).div_ceil(4),
        cached_tokens: 0,
        reasoning_tokens: 0,
        timings: None,
    };
    let at =
        kept.iter().position(|delta| matches!(delta, Delta::Finish { .. })).unwrap_or(kept.len());
    kept.insert(at, Delta::Usage { usage });
    MockReply::Deltas { deltas: kept }
}

#[async_trait::async_trait]
impl ModelProvider for ScriptedModel {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<model_adapter::Response> {
        self.next(request).chat(request).await
    }

    async fn stream(&self, request: &ChatRequest) -> model_adapter::Result<DeltaStream> {
        self.next(request).stream(request).await
    }
}

/// A real model for `--live` runs.
#[derive(Debug, Clone)]
pub struct LiveModel {
    /// The provider.
    pub provider: Arc<dyn ModelProvider>,
    /// The model name sent in requests.
    pub name: String,
    /// How the agent asks it (JSON under a grammar for the small local model).
    pub decide: DecideMode,
    /// Each run is cancelled after this long (it still ends with `run_finished` and a text).
    pub timeout: Duration,
    /// Values never written to the run directories (API keys), with their variable names.
    pub secrets: Vec<(String, String)>,
}

/// How one run asks its model.
#[derive(Debug, Clone, Default)]
pub struct RunSettings {
    /// The model name (`None`: the default of [`ModelSettings`]).
    pub model_name: Option<String>,
    /// Native tool calls or JSON.
    pub decide: Option<DecideMode>,
    /// Cancel the run after this long.
    pub timeout: Option<Duration>,
    /// Values to redact, with their variable names.
    pub secrets: Vec<(String, String)>,
}

/// Whether `filter` picks `scenario`: one of its comma-separated parts is a text the name
/// contains or the scenario's category (`find-then`, `units-to-kilograms,multi_skill`).
pub fn picks(filter: &str, scenario: &Scenario) -> bool {
    filter
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .any(|part| scenario.name.contains(part) || scenario.category.as_str() == part)
}

/// The (scenario, strategy) pairs the configuration selects, in scenario order.
pub fn selected<'a>(
    scenarios: &'a [Scenario],
    config: &SuiteConfig,
) -> Vec<(&'a Scenario, &'a str, &'a [MockReply])> {
    let mut pairs = Vec::new();
    for scenario in scenarios {
        if config.filter.as_deref().is_some_and(|filter| !picks(filter, scenario)) {
            continue;
        }
        for (strategy, replies) in &scenario.scripts {
            if config.strategies.is_empty() || config.strategies.contains(strategy) {
                pairs.push((scenario, strategy.as_str(), replies.as_slice()));
            }
        }
    }
    pairs
}

/// The single-threaded tokio runtime the suite's runs go through, one after the other.
fn current_thread_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| {
        Error::Scenario { scenario: "*".to_owned(), message: format!("tokio: {error}") }
    })
}

/// Runs every selected (scenario, strategy) on its scripted model, one after the other,
/// calling `on_run` after each.
///
/// # Errors
///
/// A run that could not be set up or scored (not a failed check: a broken bench).
pub fn run_scripted(
    scenarios: &[Scenario],
    config: &SuiteConfig,
    on_run: &mut dyn FnMut(&RunRecord),
) -> Result<Vec<RunRecord>> {
    let runtime = current_thread_runtime()?;
    let mut records = Vec::new();
    for (scenario, strategy, replies) in selected(scenarios, config) {
        let model = Arc::new(ScriptedModel::new(replies.to_vec()));
        let settings = RunSettings::default();
        let mut record =
            runtime.block_on(run_one(scenario, strategy, model.clone(), &settings, config))?;
        let left = model.remaining();
        if left > 0 {
            record.failures.push(format!("{left} scripted answers were not used"));
            record.success = false;
        }
        on_run(&record);
        records.push(record);
    }
    Ok(records)
}

/// Runs every selected (scenario, strategy) whose check expects a completed or waiting run
/// (budget and stuck scenarios need a model that misbehaves on cue) on a real model, one
/// after the other, calling `on_run` after each. The checks are the scripted runs' checks.
///
/// # Errors
///
/// A run that could not be set up or scored.
pub fn run_live(
    scenarios: &[Scenario],
    config: &SuiteConfig,
    live: &LiveModel,
    on_run: &mut dyn FnMut(&RunRecord),
) -> Result<Vec<RunRecord>> {
    let runtime = current_thread_runtime()?;
    let settings = RunSettings {
        model_name: Some(live.name.clone()),
        decide: Some(live.decide),
        timeout: Some(live.timeout),
        secrets: live.secrets.clone(),
    };
    let mut records = Vec::new();
    for (scenario, strategy, _) in live_selected(scenarios, config) {
        let record = runtime.block_on(run_one(
            scenario,
            strategy,
            live.provider.clone(),
            &settings,
            config,
        ))?;
        on_run(&record);
        records.push(record);
    }
    Ok(records)
}

/// The pairs [`run_live`] runs: [`selected`] without the scenarios that expect a degraded end.
pub fn live_selected<'a>(
    scenarios: &'a [Scenario],
    config: &SuiteConfig,
) -> Vec<(&'a Scenario, &'a str, &'a [MockReply])> {
    selected(scenarios, config)
        .into_iter()
        .filter(|(scenario, _, _)| {
            matches!(scenario.check.outcome.as_str(), "completed" | "needs_input")
        })
        .collect()
}

/// Runs `scenario` with `strategy` on `model` in a fresh copy of the example workspace and
/// scores it from its run directory.
///
/// # Errors
///
/// A run that could not be set up, built or scored.
pub async fn run_one(
    scenario: &Scenario,
    strategy: &str,
    model: Arc<dyn ModelProvider>,
    settings: &RunSettings,
    config: &SuiteConfig,
) -> Result<RunRecord> {
    let broken = |message: String| Error::Scenario { scenario: scenario.name.clone(), message };
    let base = tempfile::Builder::new()
        .prefix("skills-agent-bench-")
        .tempdir()
        .map_err(|error| broken(format!("a temporary folder: {error}")))?;
    set_mode(base.path(), 0o755)?;
    let skills = base.path().join("skills");
    let workspace = base.path().join("workspace");
    copy_tree(&config.examples.join("skills"), &skills)?;
    let mut roots = vec![SkillRoot::new(RootKind::Project, &skills)];
    if scenario.more_skills {
        let more = base.path().join("more-skills");
        copy_tree(&config.examples.join("more-skills"), &more)?;
        roots.push(SkillRoot::new(RootKind::User, &more));
    }
    example_workspace(config, &workspace)?;
    let runs_relative = format!("runs/{}/{strategy}", scenario.name);
    let runs = config.out.join(&runs_relative);
    if runs.exists() {
        std::fs::remove_dir_all(&runs).map_err(|error| Error::io(&runs, error))?;
    }
    std::fs::create_dir_all(&runs).map_err(|error| Error::io(&runs, error))?;
    let helper = SandboxHelper::current_exe()
        .map_err(|error| broken(format!("the sandbox helper: {error}")))?;
    let mut runtime = RuntimeConfig::new(helper);
    runtime.policy.approval_mode = ApprovalMode::Never;
    let defaults = AgentConfig::default();
    let agent_config = AgentConfig {
        strategy: strategy.to_owned(),
        decide: settings.decide.unwrap_or(defaults.decide),
        model: ModelSettings {
            model: settings.model_name.clone().unwrap_or(defaults.model.model.clone()),
            ..defaults.model.clone()
        },
        budgets: scenario.budgets.clone(),
        guard: GuardConfig { ask_user: scenario.ask_user, ..GuardConfig::default() },
        ..defaults
    };
    let mut redactor = Redactor::new();
    for (name, value) in &settings.secrets {
        redactor.add(name, value);
    }
    let cancel = CancellationToken::new();
    let agent_error = |source| Error::Agent { scenario: scenario.name.clone(), source };
    let agent = Agent::builder()
        .model(model)
        .config(agent_config)
        .skill_roots(roots)
        .workspace(&workspace)
        .runs_dir(&runs)
        .runtime(runtime)
        .redactor(redactor)
        .cancellation(cancel.clone())
        .build()
        .map_err(agent_error)?;
    let started = Instant::now();
    let result = match settings.timeout {
        None => agent.run(&scenario.task).await,
        Some(timeout) => {
            // Cancelled, the run still ends with `run_finished` (outcome `cancelled`).
            let timer = {
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(timeout).await;
                    cancel.cancel();
                })
            };
            let result = agent.run(&scenario.task).await;
            timer.abort();
            result
        }
    }
    .map_err(agent_error)?;
    let wall_ms = started.elapsed().as_millis() as u64;
    let run_dir =
        result.run_dir.ok_or_else(|| broken("the run wrote no run directory".to_owned()))?;
    score_run(scenario, strategy, &run_dir, &workspace, runs_relative, Some(wall_ms)).await
}

/// Scores a finished run of `scenario` with `strategy` from its run directory and the
/// workspace it ran in (the end of [`run_one`]; a run made elsewhere, by a fleet's worker, and
/// fetched is scored alike). `runs_relative` is where the report says its runs are; `wall_ms`
/// the run's wall time, or `None` for the time from its first event to its last (a fleet's
/// run: its time on the worker, without the wait in the queue).
///
/// # Errors
///
/// A record that cannot be read or replayed.
pub async fn score_run(
    scenario: &Scenario,
    strategy: &str,
    run_dir: &Path,
    workspace: &Path,
    runs_relative: String,
    wall_ms: Option<u64>,
) -> Result<RunRecord> {
    let agent_error = |source| Error::Agent { scenario: scenario.name.clone(), source };
    let events = read_events(&run_dir.join("events.jsonl")).map_err(agent_error)?;
    let wall_ms = wall_ms.unwrap_or_else(|| recorded_wall_ms(&events));
    let replay = replay_check(run_dir).await.map_err(agent_error)?;
    let failures = scenario.check.failures(&events, workspace);
    let record = score_events(&events);
    let needed = scenario.check.needed_skills();
    Ok(RunRecord {
        scenario: scenario.name.clone(),
        category: scenario.category,
        strategy: strategy.to_owned(),
        success: failures.is_empty(),
        failures,
        replay_reproduced: replay.reproduced(),
        first_selection_right: (!needed.is_empty())
            .then(|| first_selection(&events).is_some_and(|skill| needed.contains(&skill))),
        more_skills: scenario.more_skills,
        runs_dir: runs_relative,
        wall_ms,
        ..record
    })
}

/// The first skill the run's first executed `select_skills` named, whatever became of it.
fn first_selection(events: &[Event]) -> Option<String> {
    events.iter().find_map(|event| match event.payload() {
        Ok(Payload::ActionExecuted(executed)) => {
            let action = serde_json::to_value(&executed.action).ok()?;
            (action.get("type")?.as_str()? == "select_skills")
                .then(|| action.pointer("/args/names/0")?.as_str().map(str::to_owned))
                .flatten()
        }
        _ => None,
    })
}

/// The time from a record's first event to its last, from their `ts` (0 when unreadable).
fn recorded_wall_ms(events: &[Event]) -> u64 {
    let (Some(first), Some(last)) = (events.first(), events.last()) else { return 0 };
    match (millis(&first.ts), millis(&last.ts)) {
        (Some(first), Some(last)) => u64::try_from(last - first).unwrap_or(0),
        _ => 0,
    }
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

/// The record of a run that never finished (a fleet's dead task): failed, with `why`.
pub fn unfinished(
    scenario: &Scenario,
    strategy: &str,
    runs_relative: String,
    why: String,
) -> RunRecord {
    RunRecord {
        scenario: scenario.name.clone(),
        category: scenario.category,
        strategy: strategy.to_owned(),
        failures: vec![why],
        outcome: "none".to_owned(),
        runs_dir: runs_relative,
        ..RunRecord::empty()
    }
}

impl RunRecord {
    fn empty() -> RunRecord {
        RunRecord {
            scenario: String::new(),
            category: Category::OneSkill,
            strategy: String::new(),
            success: false,
            failures: Vec::new(),
            outcome: String::new(),
            final_text_present: false,
            turns: 0,
            model_calls: 0,
            tool_calls: 0,
            script_runs: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            compactions: 0,
            refusals: 0,
            budgets: Vec::new(),
            budget_overruns: Vec::new(),
            sequence_violations: Vec::new(),
            silent_calls: 0,
            reasoned_calls: 0,
            reasoning_chars: 0,
            ungrounded_refusals: 0,
            incomplete_refusals: 0,
            ungrounded: false,
            warnings: BTreeMap::new(),
            replay_reproduced: false,
            first_selection_right: None,
            more_skills: false,
            runs_dir: String::new(),
            wall_ms: 0,
        }
    }
}

/// The figures of a run from its events alone (the last `run_finished` and
/// [`skills_agent_core::compliance`]); the identity fields are left empty.
pub fn score_events(events: &[Event]) -> RunRecord {
    let finished = skills_agent_core::last_finished(events);
    let counters = finished.as_ref().map(|finished| finished.counters.clone()).unwrap_or_default();
    let metrics = finished.as_ref().map(|finished| &finished.reasoning_metrics);
    let reasoning =
        |metric: fn(&skills_agent_core::ReasoningMetrics) -> u64| metrics.map_or(0, metric);
    let compliance = compliance(events);
    let mut warnings = BTreeMap::new();
    for event in events.iter().filter(|event| event.kind == EventKind::ModelRequest) {
        let Ok(Payload::ModelRequest(request)) = event.payload() else { continue };
        for reason in request.notice.into_iter().flatten() {
            *warnings.entry(reason).or_insert(0) += 1;
        }
    }
    RunRecord {
        outcome: finished.as_ref().map_or("none", |finished| finished.outcome.as_str()).to_owned(),
        final_text_present: compliance.final_text_present,
        turns: u64::from(counters.turns),
        model_calls: u64::from(counters.model_calls),
        tool_calls: u64::from(counters.tool_calls),
        script_runs: u64::from(counters.script_runs),
        prompt_tokens: counters.prompt_tokens,
        completion_tokens: counters.completion_tokens,
        compactions: u64::from(counters.compactions),
        refusals: u64::from(counters.refusals),
        budgets: compliance.budgets,
        budget_overruns: compliance.budget_overruns,
        sequence_violations: compliance.sequence_violations,
        silent_calls: reasoning(|metrics| metrics.silent_call_count),
        reasoned_calls: reasoning(|metrics| metrics.reasoned_call_count),
        reasoning_chars: reasoning(|metrics| metrics.reasoning_chars_total),
        ungrounded_refusals: reasoning(|metrics| metrics.ungrounded_refusals),
        incomplete_refusals: reasoning(|metrics| metrics.incomplete_refusals),
        ungrounded: finished.as_ref().is_some_and(|finished| !finished.grounded),
        warnings,
        ..RunRecord::empty()
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|error| Error::io(path, error))
}

/// Writes a fresh copy of the example workspace (`examples/task/`, without `.agent/`) into
/// `into`, as every scenario's run starts from.
///
/// # Errors
///
/// A file that cannot be read or written.
pub fn example_workspace(config: &SuiteConfig, into: &Path) -> Result<()> {
    copy_tree(&config.examples.join("task"), into)?;
    set_mode(into, 0o700)
}

/// Copies a folder tree (files and folders only), folders 0755 and files 0644 so that the
/// sandbox's user can read the skills.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|error| Error::io(to, error))?;
    set_mode(to, 0o755)?;
    let entries = std::fs::read_dir(from).map_err(|error| Error::io(from, error))?;
    let mut paths = Vec::new();
    for entry in entries {
        paths.push(entry.map_err(|error| Error::io(from, error))?.path());
    }
    paths.sort();
    for path in paths {
        let Some(name) = path.file_name() else { continue };
        let target = to.join(name);
        let metadata = std::fs::symlink_metadata(&path).map_err(|error| Error::io(&path, error))?;
        if metadata.is_dir() {
            if name == ".agent" {
                continue;
            }
            copy_tree(&path, &target)?;
        } else if metadata.is_file() {
            std::fs::copy(&path, &target).map_err(|error| Error::io(&target, error))?;
            set_mode(&target, 0o644)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_picks_by_name_part_or_category() {
        let scenarios = crate::catalog::scenarios();
        let names = |filter: &str| -> Vec<&str> {
            scenarios
                .iter()
                .filter(|scenario| picks(filter, scenario))
                .map(|scenario| scenario.name.as_str())
                .collect()
        };
        assert_eq!(names("units-to-kilograms"), ["units-to-kilograms"]);
        let multi = names("multi_skill");
        assert!(multi.contains(&"find-then-total") && multi.contains(&"sum-of-two-totals"));
        assert!(scenarios.iter().all(|s| multi.contains(&s.name.as_str())
            == (s.category == crate::scenario::Category::MultiSkill)));
        let both = names("find-csv, units-to-kilograms");
        assert_eq!(both.len(), names("find-csv").len() + 1, "{both:?}");
        assert!(names(",").is_empty() && names("no-such-scenario").is_empty());
    }

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
        let event = |seq: u64, ts: &str| Event {
            ts: ts.to_owned(),
            run_id: "run".to_owned(),
            seq,
            turn: 0,
            kind: EventKind::RunStarted,
            data: serde_json::Value::Null,
        };
        let events = [
            event(1, "2026-11-26T10:00:00.000Z"),
            event(2, "2026-11-26T10:00:01.000Z"),
            event(3, "2026-11-26T10:00:02.250Z"),
        ];
        assert_eq!(recorded_wall_ms(&events), 2250);
        assert_eq!(recorded_wall_ms(&events[..1]), 0);
        assert_eq!(recorded_wall_ms(&[]), 0);
        assert_eq!(recorded_wall_ms(&[event(1, "late"), event(2, "2026-11-26T10:00:00Z")]), 0);
    }

    #[test]
    fn the_first_selection_is_scored_against_the_skills_the_check_expects() {
        use crate::scenario::Check;
        use crate::scenario::tests::executed;
        use serde_json::json;
        let select = |names: &[&str]| json!({"type": "select_skills", "args": {"names": names}});
        let run = json!({"type": "run_script", "args": {
            "skill": "file-finder", "script": "scripts/find_files.py", "args": ["*.csv"]}});
        let check = Check::completed(&["1705.47"])
            .script("file-finder", "scripts/find_files.py", &["*.csv"])
            .script("csv-summary", "scripts/csv_summary.py", &["sales.csv"])
            .script("file-finder", "scripts/find_files.py", &["*.md"]);
        assert_eq!(check.needed_skills(), ["file-finder", "csv-summary"]);
        assert!(Check::admits().needed_skills().is_empty());

        // The first select that ran counts, whatever came after it; its first name is the choice.
        let events = [
            executed(1, &select(&["csv-summary", "pptx"]), "ok"),
            executed(2, &select(&["file-finder"]), "ok"),
            executed(3, &run, "ok"),
        ];
        assert_eq!(first_selection(&events).as_deref(), Some("csv-summary"));
        assert_eq!(first_selection(&events[1..]).as_deref(), Some("file-finder"));
        assert_eq!(first_selection(&events[2..]), None);
        assert_eq!(first_selection(&[executed(1, &select(&[]), "invalid_action")]), None);
    }
}
