//! The report: `results.json` (every figure), `report.md` (the tables, with the seed-000
//! "Reasoning quality" section), a self-contained `report.html` with SVG charts, and
//! `report.svg`, those charts as one image.
//!
//! Everything here is a pure function of the run records, so two scripted runs give the same
//! `results.json` apart from the `wall_ms` fields.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::scenario::Category;
use crate::suite::RunRecord;

/// The figures of one strategy over its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategySummary {
    /// The strategy.
    pub strategy: String,
    /// Runs.
    pub runs: u64,
    /// Runs whose checks all passed.
    pub successes: u64,
    /// `successes / runs`.
    pub success_rate: f64,
    /// Runs per outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Turns, all runs.
    pub turns: u64,
    /// Model calls, all runs.
    pub model_calls: u64,
    /// Model calls per run.
    pub mean_model_calls: f64,
    /// Prompt tokens, all runs.
    pub prompt_tokens: u64,
    /// Completion tokens, all runs.
    pub completion_tokens: u64,
    /// Budgets used past their limit, all runs (0 expected).
    pub budget_overruns: u64,
    /// Runs that ended with a final text.
    pub final_text_present: u64,
    /// Context compactions.
    pub compactions: u64,
    /// Guardrail, policy and approval refusals.
    pub refusals: u64,
    /// Final answers refused once as ungrounded.
    #[serde(default)]
    pub ungrounded_refusals: u64,
    /// Runs that ended with an ungrounded answer (taken after a refusal, marked).
    #[serde(default)]
    pub ungrounded_answers: u64,
    /// Final answers refused once for leaving numbers of the task unused.
    #[serde(default)]
    pub incomplete_refusals: u64,
    /// Runs that `replay --check` reproduced.
    pub replay_reproduced: u64,
    /// Wall time of all runs, in milliseconds (differs between runs).
    pub wall_ms: u64,
    /// How often the first skill selected was one the task needs.
    #[serde(default)]
    pub first_selections: FirstSelections,
    /// The reasoning-quality block.
    pub reasoning: ReasoningSummary,
}

/// How often a strategy's first selection named a skill the task needs (see
/// [`RunRecord::first_selection_right`]), over all its runs of tasks that need one and over
/// those with the distractor skills installed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FirstSelections {
    /// Runs of tasks that need a skill.
    pub runs: u64,
    /// Of those, runs whose first selection named a skill the task needs.
    pub right: u64,
    /// Runs of tasks that need a skill, with the distractor skills installed.
    pub among_many_runs: u64,
    /// Of those, runs whose first selection named a skill the task needs.
    pub among_many_right: u64,
}

impl FirstSelections {
    fn of(runs: &[&RunRecord]) -> FirstSelections {
        let mut counts = FirstSelections::default();
        for run in runs {
            let Some(right) = run.first_selection_right else { continue };
            counts.runs += 1;
            counts.right += u64::from(right);
            if run.more_skills {
                counts.among_many_runs += 1;
                counts.among_many_right += u64::from(right);
            }
        }
        counts
    }
}

/// Seed 000's reasoning-quality figures for a strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningSummary {
    /// Calls without reasoning.
    pub silent_calls: u64,
    /// Calls with reasoning.
    pub reasoned_calls: u64,
    /// All calls.
    pub calls: u64,
    /// `silent_calls / calls` (0 without calls).
    pub silent_call_rate: f64,
    /// Reasoning characters per call over all runs.
    pub mean_reasoning_chars_per_call: f64,
    /// The median over the runs of each run's reasoning characters per call.
    pub median_reasoning_chars_per_call: f64,
    /// Meta-cognition warnings given, by reason, over all runs.
    pub warnings: BTreeMap<String, u64>,
}

/// Model calls of the strategies on the batchable scenarios every compared strategy ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchComparison {
    /// The scenarios compared.
    pub scenarios: Vec<String>,
    /// Model calls per strategy, summed over those scenarios.
    pub model_calls: BTreeMap<String, u64>,
    /// `react` calls divided by `plan-execute-think` calls (`None` when either is missing).
    pub react_over_plan_execute_think: Option<f64>,
}

/// Everything `results.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// `scripted` or `live`.
    pub mode: String,
    /// The model (`scripted`, or the live model's spec).
    pub model: String,
    /// Scenarios run.
    pub scenarios: u64,
    /// Per strategy, in first-seen order.
    pub strategies: Vec<StrategySummary>,
    /// Batchable scenarios: model calls per strategy.
    pub batchable: BatchComparison,
    /// Every run.
    pub runs: Vec<RunRecord>,
}

fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { round3(part as f64 / whole as f64) }
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 { values[middle] } else { (values[middle - 1] + values[middle]) / 2.0 }
}

/// The strategies in first-seen order.
fn strategy_names(runs: &[RunRecord]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for run in runs {
        if !names.contains(&run.strategy) {
            names.push(run.strategy.clone());
        }
    }
    names
}

/// Summarises `runs`.
pub fn summarise(mode: &str, model: &str, runs: Vec<RunRecord>) -> Results {
    let strategies = strategy_names(&runs)
        .into_iter()
        .map(|strategy| {
            let mine: Vec<&RunRecord> =
                runs.iter().filter(|run| run.strategy == strategy).collect();
            let sum =
                |figure: fn(&RunRecord) -> u64| mine.iter().map(|run| figure(run)).sum::<u64>();
            let mut outcomes = BTreeMap::new();
            for run in &mine {
                *outcomes.entry(run.outcome.clone()).or_insert(0) += 1;
            }
            let (silent, reasoned) = (sum(|run| run.silent_calls), sum(|run| run.reasoned_calls));
            let calls = silent + reasoned;
            let chars = sum(|run| run.reasoning_chars);
            let count = mine.len() as u64;
            StrategySummary {
                strategy,
                runs: count,
                successes: sum(|run| u64::from(run.success)),
                success_rate: rate(sum(|run| u64::from(run.success)), count),
                outcomes,
                turns: sum(|run| run.turns),
                model_calls: sum(|run| run.model_calls),
                mean_model_calls: rate(sum(|run| run.model_calls), count),
                prompt_tokens: sum(|run| run.prompt_tokens),
                completion_tokens: sum(|run| run.completion_tokens),
                budget_overruns: sum(|run| run.budget_overruns.len() as u64),
                final_text_present: sum(|run| u64::from(run.final_text_present)),
                compactions: sum(|run| run.compactions),
                refusals: sum(|run| run.refusals),
                ungrounded_refusals: sum(|run| run.ungrounded_refusals),
                ungrounded_answers: sum(|run| u64::from(run.ungrounded)),
                incomplete_refusals: sum(|run| run.incomplete_refusals),
                replay_reproduced: sum(|run| u64::from(run.replay_reproduced)),
                wall_ms: sum(|run| run.wall_ms),
                first_selections: FirstSelections::of(&mine),
                reasoning: ReasoningSummary {
                    silent_calls: silent,
                    reasoned_calls: reasoned,
                    calls,
                    silent_call_rate: rate(silent, calls),
                    mean_reasoning_chars_per_call: round3(if calls == 0 {
                        0.0
                    } else {
                        chars as f64 / calls as f64
                    }),
                    median_reasoning_chars_per_call: round3(median(
                        mine.iter().map(|run| run.reasoning_chars_per_call()).collect(),
                    )),
                    warnings: mine.iter().flat_map(|run| &run.warnings).fold(
                        BTreeMap::new(),
                        |mut all, (reason, count)| {
                            *all.entry(reason.clone()).or_insert(0) += count;
                            all
                        },
                    ),
                },
            }
        })
        .collect();
    let batchable = compare_batches(&runs);
    Results {
        mode: mode.to_owned(),
        model: model.to_owned(),
        scenarios: scenario_rows(&runs).len() as u64,
        strategies,
        batchable,
        runs,
    }
}

fn compare_batches(runs: &[RunRecord]) -> BatchComparison {
    let strategies = strategy_names(runs);
    let batch_runs: Vec<&RunRecord> =
        runs.iter().filter(|run| run.category == Category::Batchable).collect();
    let mut scenarios: Vec<String> = Vec::new();
    for run in &batch_runs {
        let everyone = strategies.iter().all(|strategy| {
            batch_runs
                .iter()
                .any(|other| other.scenario == run.scenario && &other.strategy == strategy)
        });
        if everyone && !scenarios.contains(&run.scenario) {
            scenarios.push(run.scenario.clone());
        }
    }
    let mut model_calls = BTreeMap::new();
    for run in batch_runs.iter().filter(|run| scenarios.contains(&run.scenario)) {
        *model_calls.entry(run.strategy.clone()).or_insert(0) += run.model_calls;
    }
    let ratio = match (model_calls.get("react"), model_calls.get("plan-execute-think")) {
        (Some(react), Some(planned)) if *planned > 0 => {
            Some(round3(*react as f64 / *planned as f64))
        }
        _ => None,
    };
    BatchComparison { scenarios, model_calls, react_over_plan_execute_think: ratio }
}

/// The paths written by [`write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `results.json`.
    pub results: PathBuf,
    /// `report.md`.
    pub markdown: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
    /// `report.svg`: the page's charts as one image.
    pub svg: PathBuf,
}

/// Writes `results.json`, `report.md`, `report.html` and `report.svg` into `out`.
///
/// # Errors
///
/// [`Error::Io`] when a file cannot be written.
pub fn write(results: &Results, out: &Path) -> Result<Written> {
    std::fs::create_dir_all(out).map_err(|error| Error::io(out, error))?;
    let json = serde_json::to_string_pretty(results)
        .map_err(|source| Error::Json { what: "results.json".to_owned(), source })?;
    let written = Written {
        results: out.join("results.json"),
        markdown: out.join("report.md"),
        html: out.join("report.html"),
        svg: out.join("report.svg"),
    };
    for (path, text) in [
        (&written.results, format!("{json}\n")),
        (&written.markdown, markdown(results)),
        (&written.html, crate::html::html(results)),
        (&written.svg, crate::html::summary_svg(results)),
    ] {
        std::fs::write(path, text).map_err(|error| Error::io(path, error))?;
    }
    Ok(written)
}

/// A percentage with one decimal.
pub(crate) fn percent(value: f64) -> String {
    format!("{:.1}%", value * 100.0)
}

/// The cell of a run in the per-scenario grid.
pub(crate) fn cell(run: &RunRecord) -> String {
    let mark = if run.success { "✓" } else { "✗" };
    format!("{mark} {} · {} calls", run.outcome, run.model_calls)
}

/// Scenarios in first-seen order with their category.
pub(crate) fn scenario_rows(runs: &[RunRecord]) -> Vec<(String, Category)> {
    let mut rows: Vec<(String, Category)> = Vec::new();
    for run in runs {
        if !rows.iter().any(|(name, _)| *name == run.scenario) {
            rows.push((run.scenario.clone(), run.category));
        }
    }
    rows
}

/// The success and model calls of each strategy per category, in the order categories first
/// appear.
fn categories_table(out: &mut String, results: &Results, strategies: &[&StrategySummary]) {
    let mut categories: Vec<Category> = Vec::new();
    for run in &results.runs {
        if !categories.contains(&run.category) {
            categories.push(run.category);
        }
    }
    let _ = writeln!(out, "\n## Categories\n");
    let names: Vec<&str> = strategies.iter().map(|summary| summary.strategy.as_str()).collect();
    let _ = writeln!(out, "| category | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(names.len()));
    for category in categories {
        let cells: Vec<String> = names
            .iter()
            .map(|strategy| {
                let runs: Vec<&RunRecord> = results
                    .runs
                    .iter()
                    .filter(|run| run.category == category && run.strategy == *strategy)
                    .collect();
                if runs.is_empty() {
                    return "-".to_owned();
                }
                let successes = runs.iter().filter(|run| run.success).count();
                let calls: u64 = runs.iter().map(|run| run.model_calls).sum();
                format!("{successes}/{} · {calls} calls", runs.len())
            })
            .collect();
        let _ = writeln!(out, "| {} | {} |", category.as_str(), cells.join(" | "));
    }
}

/// `report.md`.
pub fn markdown(results: &Results) -> String {
    let mut out = String::new();
    let strategies: Vec<&StrategySummary> = results.strategies.iter().collect();
    let _ = writeln!(out, "# skills-agent bench\n");
    let _ = writeln!(
        out,
        "Mode: {} (model: {}). {} scenarios, {} runs. Every run has its run directory; every \
         figure comes from its `events.jsonl`.\n",
        results.mode,
        results.model,
        results.scenarios,
        results.runs.len()
    );
    let _ = writeln!(out, "## Strategies\n");
    let _ = writeln!(
        out,
        "| strategy | runs | success | model calls (mean) | turns | prompt tokens | completion tokens | budget overruns | final text | compactions | refusals | ungrounded answers (refused / taken) | replay reproduced | wall time |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for summary in &strategies {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({}/{}) | {} ({:.2}) | {} | {} | {} | {} | {}/{} | {} | {} | {} / {} | {}/{} | {:.1} s |",
            summary.strategy,
            summary.runs,
            percent(summary.success_rate),
            summary.successes,
            summary.runs,
            summary.model_calls,
            summary.mean_model_calls,
            summary.turns,
            summary.prompt_tokens,
            summary.completion_tokens,
            summary.budget_overruns,
            summary.final_text_present,
            summary.runs,
            summary.compactions,
            summary.refusals,
            summary.ungrounded_refusals,
            summary.ungrounded_answers,
            summary.replay_reproduced,
            summary.runs,
            summary.wall_ms as f64 / 1000.0
        );
    }
    categories_table(&mut out, results, &strategies);
    let _ = writeln!(out, "\n## First skill selected\n");
    let _ = writeln!(
        out,
        "| strategy | a skill the task needs | with the distractor skills installed |"
    );
    let _ = writeln!(out, "|---|---|---|");
    for summary in &strategies {
        let selections = &summary.first_selections;
        let _ = writeln!(
            out,
            "| {} | {} ({}/{}) | {} ({}/{}) |",
            summary.strategy,
            percent(rate(selections.right, selections.runs)),
            selections.right,
            selections.runs,
            percent(rate(selections.among_many_right, selections.among_many_runs)),
            selections.among_many_right,
            selections.among_many_runs
        );
    }
    let _ = writeln!(
        out,
        "\nThe first `select_skills` that ran, against the skills of the calls the scenario's \
         check expects; a run that selected nothing counts as a miss, and scenarios that need \
         no skill are left out."
    );
    let mut outcome_names: Vec<&String> =
        strategies.iter().flat_map(|summary| summary.outcomes.keys()).collect();
    outcome_names.sort();
    outcome_names.dedup();
    let _ = writeln!(out, "\n## Outcomes\n");
    let _ = writeln!(
        out,
        "| strategy | {} |",
        outcome_names.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(outcome_names.len()));
    for summary in &strategies {
        let counts: Vec<String> = outcome_names
            .iter()
            .map(|name| summary.outcomes.get(*name).copied().unwrap_or(0).to_string())
            .collect();
        let _ = writeln!(out, "| {} | {} |", summary.strategy, counts.join(" | "));
    }
    let batch = &results.batchable;
    let _ = writeln!(out, "\n## Batchable scenarios: model calls\n");
    if !batch.scenarios.is_empty() {
        let names: Vec<&String> = batch.model_calls.keys().collect();
        let _ = writeln!(
            out,
            "| scenario | {} |",
            names.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(out, "|---|{}", "---|".repeat(names.len()));
        for scenario in &batch.scenarios {
            let calls: Vec<String> = names
                .iter()
                .map(|strategy| {
                    results
                        .runs
                        .iter()
                        .find(|run| &run.scenario == scenario && &&run.strategy == strategy)
                        .map_or_else(|| "-".to_owned(), |run| run.model_calls.to_string())
                })
                .collect();
            let _ = writeln!(out, "| {scenario} | {} |", calls.join(" | "));
        }
        let totals: Vec<String> = batch.model_calls.values().map(u64::to_string).collect();
        let _ = writeln!(out, "| **total** | {} |", totals.join(" | "));
    }
    match batch.react_over_plan_execute_think {
        Some(ratio) => {
            let _ = writeln!(
                out,
                "\nreact makes {ratio:.2}× the model calls of plan-execute-think on these scenarios \
                 (seed 003 claims about 6× fewer for plan-execute-think)."
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nNo batchable scenario ran with both react and plan-execute-think."
            );
        }
    }
    let _ = writeln!(out, "\n## Reasoning quality\n");
    let _ = writeln!(
        out,
        "| metric | {} |",
        strategies.iter().map(|s| s.strategy.as_str()).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(strategies.len()));
    let row = |label: &str, value: &dyn Fn(&ReasoningSummary) -> String| {
        let values: Vec<String> =
            strategies.iter().map(|summary| value(&summary.reasoning)).collect();
        format!("| {label} | {} |\n", values.join(" | "))
    };
    out.push_str(&row("silent-call rate", &|r| {
        format!("{} ({}/{})", percent(r.silent_call_rate), r.silent_calls, r.calls)
    }));
    out.push_str(&row("reasoned calls", &|r| format!("{}/{}", r.reasoned_calls, r.calls)));
    out.push_str(&row("mean reasoning chars per call", &|r| {
        format!("{:.1} chars", r.mean_reasoning_chars_per_call)
    }));
    out.push_str(&row("median reasoning chars per call (per run)", &|r| {
        format!("{:.1} chars", r.median_reasoning_chars_per_call)
    }));
    for (reason, label) in [
        ("turns", "warnings: turns running out"),
        ("failures", "warnings: consecutive failures"),
        ("refused", "warnings: refused, nothing executed"),
        ("silent_calls", "warnings: mostly silent calls"),
    ] {
        out.push_str(&row(label, &|r| r.warnings.get(reason).copied().unwrap_or(0).to_string()));
    }
    let _ = writeln!(
        out,
        "\nA call is silent when its answer carries no thinking, no `thought` (or a strategy's \
         own reasoning field) and no visible text beyond markup; it counts once per call \
         (seed 000 §2.1.1). A warning is one line of the meta-cognition notice in a turn note \
         (at most two per note, seed 000 §2.3), counted per model request from \
         `model_request.notice`."
    );
    let _ = writeln!(out, "\n## Scenarios\n");
    let names: Vec<&str> = strategies.iter().map(|summary| summary.strategy.as_str()).collect();
    let _ = writeln!(out, "| scenario | category | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|---|{}", "---|".repeat(names.len()));
    for (scenario, category) in scenario_rows(&results.runs) {
        let cells: Vec<String> = names
            .iter()
            .map(|strategy| {
                results
                    .runs
                    .iter()
                    .find(|run| run.scenario == scenario && run.strategy == *strategy)
                    .map_or_else(|| "-".to_owned(), cell)
            })
            .collect();
        let _ = writeln!(out, "| {scenario} | {} | {} |", category.as_str(), cells.join(" | "));
    }
    let failed: Vec<&RunRecord> = results.runs.iter().filter(|run| !run.success).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n## Failed checks\n");
        for run in failed {
            let _ =
                writeln!(out, "- {}/{}: {}", run.scenario, run.strategy, run.failures.join("; "));
        }
    }
    out
}
