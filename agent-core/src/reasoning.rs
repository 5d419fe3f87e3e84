//! Think-Act protocol (seed 000): the reasoning-level signal of the runtime metadata line and
//! the meta-cognition notice of the dynamic context. Detecting and counting silent calls is
//! [`crate::metrics`]'s (plain data in the run state).
//!
//! Signal. The task's route — read-only, may write, cross-file or large data — gives a
//! reasoning level (lightweight / standard / complete) appended to the turn's runtime
//! metadata line as ` · reasoning=LEVEL`.
//!
//! Notice. Four conditions, in the seed's priority order (near the turn limit, consecutive
//! failures, a refusal with nothing executed, mostly silent calls), at most two warnings, as
//! text for the turn note: no extra turn, no message of its own in the transcript.

use std::path::Path;

use crate::action::Action;
use crate::state::{ObservationStatus, RunState};

/// The sub-agent protocol (seed 000 §2.3.2, in our words): what an agent working for another
/// agent is told about reasoning and reporting.
pub(crate) const SUBAGENT_PROTOCOL: &str = "Reasoning and reporting: before any tool call, say \
in one sentence what you know from the last result and in one sentence which call you make and \
why; never call silently, and keep it short. When done, report in plain words what you did, \
the key result and the files or data involved; when you fail, say what went wrong, the likely \
cause and which steps were done.";

/// Whether the task's actions may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteHint {
    /// No skill selected yet: the route is not known.
    Unknown,
    /// The selected skills can only be read (no script they may run).
    ReadOnly,
    /// A selected skill has a script it may run (scripts write to the workspace).
    MayWrite,
}

/// What the runtime knows of the task's route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Route {
    pub(crate) write: WriteHint,
    /// The task names two or more files of the workspace.
    pub(crate) cross_file: bool,
    /// The files the task names hold [`LARGE_INPUT_BYTES`] or more together.
    pub(crate) large_data: bool,
}

/// Input bytes from which a task counts as large-data.
pub(crate) const LARGE_INPUT_BYTES: u64 = 1 << 20;

impl Route {
    /// The route from the run state and the sizes of the workspace files the task names
    /// ([`input_sizes`]).
    pub(crate) fn of(state: &RunState, input_sizes: &[u64]) -> Route {
        let write = if state.selected.is_empty() {
            WriteHint::Unknown
        } else if state.selected.iter().any(|skill| {
            !skill.scripts.is_empty()
                && state.skill(&skill.name).is_none_or(|entry| {
                    entry.allowed_tools.as_deref().is_none_or(|tools| {
                        tools.iter().any(|tool| {
                            let tool = tool.trim();
                            tool == "Bash" || tool.starts_with("Bash(")
                        })
                    })
                })
        }) {
            WriteHint::MayWrite
        } else {
            WriteHint::ReadOnly
        };
        Route {
            write,
            cross_file: input_sizes.len() >= 2,
            large_data: input_sizes.iter().sum::<u64>() >= LARGE_INPUT_BYTES,
        }
    }
}

/// How much reasoning the runtime suggests before a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReasoningLevel {
    /// Observe, then act.
    Lightweight,
    /// One sentence of observation and one of decision.
    Standard,
    /// Observation, analysis and decision.
    Complete,
}

impl ReasoningLevel {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReasoningLevel::Lightweight => "lightweight",
            ReasoningLevel::Standard => "standard",
            ReasoningLevel::Complete => "complete",
        }
    }
}

/// The seed's rule, in its order: read-only is lightweight; cross-file or large data is
/// complete; may-write is standard; an unknown route is lightweight.
pub(crate) fn reasoning_level(route: Route) -> ReasoningLevel {
    if route.write == WriteHint::ReadOnly {
        ReasoningLevel::Lightweight
    } else if route.cross_file || route.large_data {
        ReasoningLevel::Complete
    } else if route.write == WriteHint::MayWrite {
        ReasoningLevel::Standard
    } else {
        ReasoningLevel::Lightweight
    }
}

/// The field appended to the runtime metadata line (the turn note's first line):
/// ` · reasoning=LEVEL`.
pub(crate) fn reasoning_signal(state: &RunState, input_sizes: &[u64]) -> String {
    format!(" · reasoning={}", reasoning_level(Route::of(state, input_sizes)).as_str())
}

/// The sizes of the workspace files the task names (words that are relative paths of
/// existing files; absolute paths and `..` are ignored). Reads metadata only; call it once
/// per run.
pub(crate) fn input_sizes(task: &str, workspace: &Path) -> Vec<u64> {
    let mut seen: Vec<&str> = Vec::new();
    let mut sizes = Vec::new();
    for word in task_words(task) {
        if word.is_empty()
            || seen.contains(&word)
            || Path::new(word).is_absolute()
            || word.split('/').any(|part| part == "..")
        {
            continue;
        }
        seen.push(word);
        if let Ok(metadata) = std::fs::metadata(workspace.join(word))
            && metadata.is_file()
        {
            sizes.push(metadata.len());
        }
    }
    sizes
}

/// The task's words without the punctuation around them (a sentence's last full stop too).
fn task_words(task: &str) -> impl Iterator<Item = &str> {
    task.split_whitespace().map(|word| {
        let word = word.trim_matches(|c: char| "\"'`()[]{}<>,;:!?".contains(c));
        word.strip_suffix('.').unwrap_or(word)
    })
}

/// The words of the task that look like file names (`sales.csv`, `docs/README.md`: a name,
/// a dot, an extension of letters or digits), each once, in order. Text only.
pub(crate) fn named_files(task: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for word in task_words(task) {
        let Some((stem, extension)) = word.rsplit_once('.') else { continue };
        let looks = !stem.is_empty()
            && (1..=5).contains(&extension.len())
            && extension.chars().all(|c| c.is_ascii_alphanumeric())
            && extension.chars().any(|c| c.is_ascii_alphabetic())
            && !word.contains("://");
        if looks && !files.iter().any(|file| file == word) {
            files.push(word.to_owned());
        }
    }
    files
}

/// At most this many warnings in one notice.
const MAX_WARNINGS: usize = 2;

/// Consecutive failed actions from which condition 2 warns.
const FAILURE_STREAK: usize = 3;

/// The first line of a notice.
const NOTICE_HEADING: &str = "Progress check:";

/// The four conditions: the reason recorded for each (in `model_request.notice`) and a phrase
/// only its warning line carries, so the reasons can be read back from the request sent.
const WARNINGS: [(&str, &str); 4] = [
    ("turns", " turns used: finish the current step"),
    ("failures", " actions failed: change the approach"),
    ("refused", "- An action was refused and no script has run yet"),
    ("silent_calls", " calls came with no reasoning"),
];

/// The meta-cognition notice for the turn note, or `None` on the normal path. Conditions in
/// priority order, at most [`MAX_WARNINGS`]:
///
/// 1. at least 60% of `max_turns` used;
/// 2. the last three actions or more all failed (the seed's "consecutive failures ≥ 3";
///    until a first success this is its `failures >= 3 and successes == 0`);
/// 3. an action was refused (guardrail, policy or approver) and no script has run with
///    success — the seed's "execution guard fired, nothing written";
/// 4. silent calls are at least half of the calls (`silent > 0 && silent >= reasoned`).
pub(crate) fn notice(state: &RunState, max_turns: u32) -> Option<String> {
    let [(_, turns_used), (_, failed), (_, refused), (_, silent_calls)] = WARNINGS;
    let mut warnings: Vec<String> = Vec::new();
    let turns = state.task_counters().turns;
    if max_turns > 0 && u64::from(turns) * 5 >= u64::from(max_turns) * 3 {
        warnings.push(format!("- {turns} of {max_turns}{turns_used} and converge on an answer."));
    }
    let failures = state
        .actions
        .iter()
        .rev()
        .take_while(|record| record.status != ObservationStatus::Ok)
        .count();
    if warnings.len() < MAX_WARNINGS && failures >= FAILURE_STREAK {
        warnings.push(format!("- The last {failures}{failed} instead of retrying it."));
    }
    let executed = state.actions.iter().any(|record| {
        record.status == ObservationStatus::Ok
            && matches!(record.action, Some(Action::RunScript { .. }))
    });
    if warnings.len() < MAX_WARNINGS && state.counters.refusals > 0 && !executed {
        warnings
            .push(format!("{refused}: do the work with the allowed actions, do not describe it."));
    }
    let metrics = &state.reasoning;
    let (silent, reasoned) = (metrics.silent_call_count, metrics.reasoned_call_count);
    if warnings.len() < MAX_WARNINGS && silent > 0 && silent >= reasoned {
        warnings.push(format!(
            "- {silent} of {}{silent_calls}: before a call, say in one sentence what you saw and why this call (thinking counts).",
            silent + reasoned
        ));
    }
    if warnings.is_empty() {
        return None;
    }
    Some(format!("{NOTICE_HEADING}\n{}", warnings.join("\n")))
}

/// The reasons of the notice in a request's last message (the turn note), in the order given:
/// `turns`, `failures`, `refused`, `silent_calls`. Empty when the note carries no notice.
pub(crate) fn notice_reasons(note: &str) -> Vec<&'static str> {
    let Some(start) = note.find(NOTICE_HEADING) else { return Vec::new() };
    note[start + NOTICE_HEADING.len()..]
        .lines()
        .skip(1)
        .take_while(|line| line.starts_with("- "))
        .filter_map(|line| {
            WARNINGS.iter().find(|(_, phrase)| line.contains(phrase)).map(|(reason, _)| *reason)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::metrics::ReasoningMetrics;
    use crate::state::{ActionRecord, Counters, SelectedSkill, SkillEntry};

    /// An empty run state (through serde, so the fixture follows the state's fields).
    pub(super) fn state() -> RunState {
        serde_json::from_value(json!({
            "run_id": "r", "task": "t", "catalog": [], "selected": [], "actions": [],
            "counters": Counters::default(), "reasoning": ReasoningMetrics::default()
        }))
        .unwrap()
    }

    fn select(state: &mut RunState, name: &str, scripts: &[&str], allowed: Option<&[&str]>) {
        state.catalog.push(SkillEntry {
            name: name.to_owned(),
            description: "d".to_owned(),
            source: "project".to_owned(),
            directory: format!("/skills/{name}"),
            disable_model_invocation: false,
            allowed_tools: allowed.map(|tools| tools.iter().map(|t| (*t).to_owned()).collect()),
        });
        state.selected.push(SelectedSkill {
            name: name.to_owned(),
            scripts: scripts.iter().map(|s| (*s).to_owned()).collect(),
            resources: Vec::new(),
            usage: Vec::new(),
            referenced: Vec::new(),
        });
    }

    #[test]
    fn route_follows_the_selected_skills_and_inputs() {
        use ReasoningLevel::{Complete, Lightweight, Standard};
        let level = |state: &RunState, sizes: &[u64]| reasoning_level(Route::of(state, sizes));
        let mut run = state();
        // Nothing selected: unknown route, lightweight unless the inputs say complete.
        assert_eq!(level(&run, &[]), Lightweight);
        assert_eq!(level(&run, &[10, 20]), Complete);
        assert_eq!(level(&run, &[LARGE_INPUT_BYTES]), Complete);
        // Read-only wins over everything, as in the seed.
        select(&mut run, "notes", &[], None);
        assert_eq!(Route::of(&run, &[]).write, WriteHint::ReadOnly);
        assert_eq!(level(&run, &[10, 20]), Lightweight);
        // Scripts the skill's allowed-tools forbid do not write.
        select(&mut run, "locked", &["scripts/a.py"], Some(&["Read"]));
        assert_eq!(Route::of(&run, &[]).write, WriteHint::ReadOnly);
        // A runnable script may write: standard, complete with cross-file or large data.
        select(&mut run, "csv", &["scripts/sum.py"], Some(&["Bash(python3:*)"]));
        assert_eq!(level(&run, &[5]), Standard);
        assert_eq!(level(&run, &[5, 6]), Complete);
        assert_eq!(level(&run, &[LARGE_INPUT_BYTES + 1]), Complete);
        let mut open = state();
        select(&mut open, "any", &["scripts/x.sh"], None);
        assert_eq!(Route::of(&open, &[]).write, WriteHint::MayWrite);
        assert_eq!(reasoning_signal(&open, &[]), " · reasoning=standard");
    }

    #[test]
    fn input_sizes_are_the_named_workspace_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "12345").unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/b.csv"), "123").unwrap();
        let task = "Sum `a.csv` and data/b.csv, a.csv again; ignore data, ../x and /etc/passwd.";
        assert_eq!(input_sizes(task, dir.path()), vec![5, 3]);
    }

    pub(super) fn record(
        turn: u32,
        status: ObservationStatus,
        action: Option<Action>,
    ) -> ActionRecord {
        ActionRecord { turn, action, status, observation: format!("obs-{turn}") }
    }

    fn script() -> Action {
        Action::RunScript { skill: "s".into(), script: "scripts/a.py".into(), args: Vec::new() }
    }

    fn fail(state: &mut RunState, times: usize) {
        for _ in 0..times {
            let turn = state.actions.len() as u32 + 1;
            state.actions.push(record(turn, ObservationStatus::Failed, Some(script())));
        }
    }

    #[test]
    fn normal_path_has_no_notice() {
        let mut run = state();
        assert_eq!(notice(&run, 10), None);
        run.counters.turns = 5;
        fail(&mut run, 2);
        run.reasoning.record(1, 0);
        run.reasoning.record(2, 30);
        assert_eq!(notice(&run, 10), None);
    }

    #[test]
    fn condition_1_near_the_turn_limit() {
        let mut run = state();
        run.counters.turns = 5;
        assert_eq!(notice(&run, 10), None);
        run.counters.turns = 6;
        assert_eq!(
            notice(&run, 10).unwrap(),
            "Progress check:\n- 6 of 10 turns used: finish the current step and converge on an answer."
        );
        assert_eq!(notice(&run, 0), None);
    }

    #[test]
    fn condition_2_consecutive_failures() {
        let mut run = state();
        fail(&mut run, 2);
        assert_eq!(notice(&run, 0), None);
        fail(&mut run, 1);
        assert_eq!(
            notice(&run, 0).unwrap(),
            "Progress check:\n- The last 3 actions failed: change the approach instead of retrying it."
        );
        // A success breaks the streak; failures before it do not count.
        run.actions.push(record(4, ObservationStatus::Ok, Some(script())));
        fail(&mut run, 2);
        assert_eq!(notice(&run, 0), None);
    }

    #[test]
    fn condition_3_refused_with_nothing_executed() {
        let mut run = state();
        run.counters.refusals = 1;
        run.actions.push(record(1, ObservationStatus::Refused, Some(script())));
        assert!(notice(&run, 0).unwrap().contains("An action was refused and no script has run"));
        run.actions.push(record(2, ObservationStatus::Ok, Some(script())));
        assert_eq!(notice(&run, 0), None);
    }

    #[test]
    fn condition_4_mostly_silent_calls() {
        let mut run = state();
        run.reasoning.record(1, 12);
        run.reasoning.record(1, 0);
        assert_eq!(
            notice(&run, 0).unwrap(),
            "Progress check:\n- 1 of 2 calls came with no reasoning: before a call, say in one sentence what you saw and why this call (thinking counts)."
        );
        run.reasoning.record(1, 5);
        assert_eq!(notice(&run, 0), None);
    }

    #[test]
    fn priority_order_and_two_warning_cap() {
        let mut run = state();
        run.counters.turns = 9;
        run.counters.refusals = 1;
        fail(&mut run, 3);
        run.reasoning.record(3, 0);
        let all = notice(&run, 10).unwrap();
        let lines: Vec<&str> = all.lines().skip(1).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("9 of 10 turns used"));
        assert!(lines[1].contains("The last 3 actions failed"));
        // Without the first two, 3 and 4 show, in that order.
        run.counters.turns = 0;
        run.actions.clear();
        let lines: Vec<String> =
            notice(&run, 10).unwrap().lines().skip(1).map(str::to_owned).collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("refused"));
        assert!(lines[1].contains("came with no reasoning"));
        // 1 and 4: the lowest still shows when a slot is free.
        run.counters.turns = 9;
        run.counters.refusals = 0;
        let lines: Vec<String> =
            notice(&run, 10).unwrap().lines().skip(1).map(str::to_owned).collect();
        assert!(lines[0].contains("turns used") && lines[1].contains("no reasoning"));
    }

    #[test]
    fn notice_reasons_are_read_back_from_the_note() {
        let mut run = state();
        run.counters.turns = 9;
        run.counters.refusals = 1;
        fail(&mut run, 3);
        run.reasoning.record(3, 0);
        let note = |run: &RunState| {
            format!("Turn 10 of 10\n{}\nPlan: none yet\n", notice(run, 10).unwrap_or_default())
        };
        assert_eq!(notice_reasons(&note(&run)), ["turns", "failures"]);
        run.counters.turns = 0;
        run.actions.clear();
        assert_eq!(notice_reasons(&note(&run)), ["refused", "silent_calls"]);
        run.counters.refusals = 0;
        run.reasoning = ReasoningMetrics::default();
        assert!(notice_reasons(&note(&run)).is_empty());
        // A task that quotes a warning is not a notice.
        assert!(
            notice_reasons("Task: explain why 3 actions failed: change the approach").is_empty()
        );
    }
}

/// The tokens the signal and the notice add to a turn on the normal path, with real tokenizers
/// (`cargo test -p skills-agent-core --lib token_overhead -- --nocapture` prints them).
#[cfg(test)]
mod token_overhead {
    use super::*;

    #[test]
    fn normal_path_adds_at_most_five_tokens() {
        let encodings = [
            ("o200k_base", tiktoken_rs::o200k_base().unwrap()),
            ("cl100k_base", tiktoken_rs::cl100k_base().unwrap()),
        ];
        let line = "Turn 3 of 12 · tool calls 2/40 · script runs 1/5";
        for (name, bpe) in &encodings {
            let base = bpe.encode_with_special_tokens(line).len();
            for level in
                [ReasoningLevel::Lightweight, ReasoningLevel::Standard, ReasoningLevel::Complete]
            {
                let signal = format!(" · reasoning={}", level.as_str());
                let with = bpe.encode_with_special_tokens(&format!("{line}{signal}")).len();
                let alone = bpe.encode_with_special_tokens(&signal).len();
                println!(
                    "{name}: {:<11} +{} tokens in the metadata line ({} alone); notice: 0",
                    level.as_str(),
                    with - base,
                    alone
                );
                assert!(with - base <= 5, "{name} {}: +{}", level.as_str(), with - base);
            }
            // The off-normal path, for the record: each warning alone, then the longest pair.
            let mut state = tests::state();
            state.counters.turns = 8;
            state.counters.refusals = 1;
            state.reasoning.record(5, 0);
            state.reasoning.record(2, 40);
            for turn in 1..=3 {
                state.actions.push(tests::record(turn, ObservationStatus::Failed, None));
            }
            let tokens = |state: &RunState| {
                bpe.encode_with_special_tokens(&notice(state, 12).unwrap_or_default()).len()
            };
            let first_two = tokens(&state);
            state.counters.turns = 0;
            let second_and_third = tokens(&state);
            state.actions.clear();
            let last_two = tokens(&state);
            println!(
                "{name}: a notice with warnings 1+2: {first_two} tokens, 2+3: {second_and_third}, 3+4: {last_two}"
            );
        }
    }
}
