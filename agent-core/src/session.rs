//! The record and session layer: what a run's record begins with (`run_started`, its format
//! number), how a run is put together from it, and a run as a session — pieces of work, each
//! begun by an input (the task, an answer, a new task, a slash command) and ended by
//! `run_finished`. The public front ([`crate::Agent`]) and the re-runs of a record
//! ([`crate::replay`]) both stand on it.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Instant;

use model_adapter::Message;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::budget::Outcome;
use crate::config::{AgentConfig, DecideMode};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::event::{
    CommandExecuted, Event, EventBus, EventKind, Payload, RunFinished, UserInputEvent,
};
use crate::exec::Executor;
use crate::external::ExternalTool;
use crate::grounding::Grounding;
use crate::metrics::ReasoningMetrics;
use crate::run::{
    Ending, ExternalRecord, InputKind, ModelSource, RecordedDeadline, RecordedEnding, Run,
};
use crate::rundir::RunDir;
use crate::state::{Counters, RunState, SkillEntry};
use skills_agent_registry::SkillIndex;

/// Token usage of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
}

/// How a run ended. There is always a final text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The run id.
    pub run_id: String,
    /// Why it ended.
    pub outcome: Outcome,
    /// The answer for the user (the model's, or a degraded one).
    pub final_text: String,
    /// The run directory, when the run wrote one.
    pub run_dir: Option<PathBuf>,
    /// Turns.
    pub turns: u32,
    /// Model calls.
    pub model_calls: u32,
    /// Actions other than `final_answer`.
    pub tool_calls: u32,
    /// Scripts started.
    pub script_runs: u32,
    /// Token usage.
    pub usage: RunUsage,
    /// Think-Act metrics.
    pub reasoning_metrics: ReasoningMetrics,
    /// All counters.
    pub counters: Counters,
    /// `false` when the model's answer states a value (a number, a quoted name) that neither
    /// the task nor any result of the run shows: taken after one refusal, and not to be
    /// trusted.
    pub grounded: bool,
}

/// The format of the records (`events.jsonl`) this build writes and re-runs. Replay, resume
/// and send re-run a record with today's code and compare event for event, so a record whose
/// events were shaped by another build cannot be reproduced exactly; the number says so up
/// front. Raise it whenever what a run records changes (a new field in an event a re-run
/// compares, a new event kind, a changed prompt or schema). `0` stands for the records written
/// before formats were numbered; 1 the first numbered one; 2 adds the turn note after a call
/// that worked and keeps a select "just made" across refused selects (other requests); 3 adds
/// "Results so far" to react's turn note and plan-execute-think's think note, and in JSON mode
/// offers no unrelated skill once the related ones are selected (other schemas); 4 adds to
/// `run_started` what a faithful resume needs (skill roots and their skills' content hashes,
/// the launcher's model spec, approval and configuration files) — records of format 3 still
/// re-run, since a re-run re-emits the recorded `run_started`; 5 checks final answers against
/// what the run saw (a refused ungrounded answer, `grounded: false`) — older records re-run
/// without the check; 6 refuses a repeat of a call that failed, ends a task stuck once one
/// failing action came [`crate::GuardConfig::stuck_repeats`] times in it (not only in a row),
/// ends a stuck run with a report written from the record, and appends the results to a
/// completed answer without figures for a task with figures; 7 keeps each turn's note in the
/// transcript (the next request's prompt starts with what the model already read) and leaves a
/// failed model call out of it — records of 3 to 6 re-run as they were written; 8 checks a
/// final answer's file names and codes too, lets no result of a call made with a guessed
/// figure ground it, refuses once an answer that leaves numbers of the task unused while a
/// call used another, counts only a usage line's plain words as stated arguments, and takes a
/// JSON-mode final answer cut by the token limit as written so far (react); 9 takes a repeat
/// of a call that already worked as no new result after a refused ungrounded answer (the
/// answer must still admit that the value is unknown, with no figure in its thought and no
/// quote in the admission, which may quote the task's words with digits), offers no skill for
/// the task's arithmetic words ("add", "sum", …) once results are in, gives a timed-out
/// call, or a tool call that failed, one retry before a repeat is refused, grounds a script
/// or resource named as the notes write it (`skill/scripts/x.py`), and appends the results to
/// a figure-less answer to a task that asks for a quantity; 10 takes a count the task asks for
/// ("how many words", in a task with no figure) only from a run whose results name the thing
/// counted or write the figure bare (not as another label's value), refuses once an answer that restates one result where the task asks to combine
/// two ("add A to B"), names after a completed answer the files its scripts ran on when neither
/// the task nor the answer names one, offers after a repeated call the skill for what the task
/// still has no result for, says first in the note that refuses an example's value that the
/// same call may be made again, cuts long values in the refusal note, and makes the admission after any
/// refused answer quote-free and bounded; 11 needs a call for each time the task writes a
/// number ("5 miles to km; … 5 kg to lb"), refuses a second answer that restates another
/// single result where the task asks to combine two (naming both), and refuses once a call
/// with an argument that leaves out an inner letter of the task's word (`GB` for "GiB"); 12
/// refuses once an answer that states no figure where the task asks to combine values, and in
/// plan-execute-think lets a round that only selected skills go on to the next plan without a
/// think and without counting toward the round limit (twice a run at most), lists in the plan
/// note the task's values no script call has used yet and asks for a step each, answers a
/// refusal that names every needed value with a think alone, and lets no think complete after
/// a round whose every step was refused while the task has no result; and refuses once a call
/// with an argument that writes a value with its unit while the unit is an argument too
/// (`"1 nmi", "nmi", "m"`); 13 names, after a script call that worked while the task still
/// gives values no call has used, those values in the turn's note instead of inviting the
/// answer; 14 refuses again a call made again after a refusal for a respelled word, a value
/// written with its unit or an example's value (no leave to repeat it; with `ask_user` on offer
/// the same call still runs), and counts those refusals toward `stuck`; 15 ends a
/// plan-execute-think batch after a step that selected a skill (the rest was planned before its
/// instructions were read) and lets the think after a refusal that names every value the
/// answer needs run past the round limit; 16 shows plan-execute-think's last plan in the plan
/// note without its reasoning and without the steps a selection cut off, takes a word of
/// sixteen digits or more among letters as a code an answer must have seen, and appends to an
/// answer that states a figure of any of the task's runs the results of the runs on the task's
/// values that it leaves out; 17 bounds plan-execute-think's plan reasoning and next-step
/// preview at 120 characters (300 before), and takes an answer whose digits are no result's
/// figure as one that states none (it gets the task's results after it); 18 shows the call to
/// make in a refusal that knows it (a respelled word as the task writes it, a value written
/// with its unit as the value alone, an example's file pattern as the task's kind of file, an
/// optional last argument the error named left out) and offers no other skill in the turn
/// after such a refusal; 19 shows that call without the optional last argument in the turn
/// right after the failure, and after a refused example file name the call on the one file of
/// its kind the run's scripts found; 20 writes compact notes after a task's first turn (the tool
/// calls and script runs used only once few are left, no "Plan: none yet", no "Reply with one
/// JSON object" line); 21 shows a long script output by its first lines, the lines that name a
/// word of the task the skill's instructions do not use and its last line, and offers an
/// observation to `recall_observation` only until it was recalled once; 22 refuses once, with
/// `ask_user` on offer, an answer that gives one of several like results the task names none of
/// (`units sum` beside `amount sum` for "the total of the column"); 23 follows a call that
/// failed on an argument its error names with the call that writes the task's word in its
/// place, when one word of the task is a value the skill's instructions or the error show; 24
/// grounds a count the task asks for, of a thing no result names, only by a figure a result or
/// the user writes (or a document's line naming the thing), not a skill's example figure, and
/// refuses once an answer that restates two or more results where the task combines them; 25
/// lets the answer after a refusal that names every value it needs write figures (with no new
/// result between, it was held to an admission); 26 takes a script refused for a file
/// placeholder, in a task that names no file, off the offer until a script gives a result (then
/// shows it on the one file found), and, where the task asks a statistic of a column, refuses
/// once an answer with no figure and grounds a figure only a document writes by a document line
/// naming the column; 27 refuses, after a script ran, an answer that names none of the units
/// the task asks to convert into ("convert that many pounds to kilograms" answered "The units
/// total 212."; a second time only after a new result), writes the call a refusal shows in the next turn's note, and keeps
/// plan-execute-think's answer refused only as incomplete as its ending at a limit; 28 offers a
/// plan with a task's first action only, as the system prompt asks for it; 29 works out, in the
/// refusal of an ungrounded answer where the task combines values, that arithmetic on the
/// results the answer names, follows a refused example word that spells out a symbol the
/// task writes (`celsius` for "20 C") with the call that writes the symbol, refuses an
/// argument that leaves out the first letter of a unit the task writes (`mi` for "1 nmi"),
/// shows, in the refusal of an unconverted answer, the result lines that already convert, and
/// refuses once more the same one result restated where the task combines values, with the
/// results' lines to combine; 30 refuses a value written with its unit before two words of
/// letters however they spell the unit (`"212 lbs" pounds kilograms`), with the value alone,
/// checks a quoted quantity in an answer (`212 lbs`) as its number, leaves the results list
/// out of a turn's note while a batch over the task's values is under way, and refuses once an
/// answer that gives none of the results' figures for a column the task names; 31 marks done,
/// without running it again, a batch's step that repeats a script run or tool call that
/// already worked (the steps after it ran; before, only the answer was left on offer), lists
/// each result once in a stopped task's report, takes the commands every usage line shows
/// (`dates.py between …`, `dates.py weekday …`) as the script's own words, refuses once a
/// command written with its values as one argument or after them, with the call as the usage
/// writes it (when the call also copies an example's values, the call without them), and
/// offers a task's first selection the best-ranked skill alone when its score
/// is twice the next one's or more (not in `safe`); in plan-execute-think a round whose every
/// step was refused does not count toward the round limit (twice a run at most); and the
/// refusal of an answer that names no unit the task converts into shows every conversion line
/// of the results whose figure the answer leaves out; 32 makes that sure first selection in
/// the runtime, without a model call, in a turn of its own (`action_validated.chosen_by:
/// "ranking"`; react and plan-execute-think), and reads a task that counts two or more things
/// together ("How many ERROR and WARN lines … in total?") as one that adds them, and follows
/// the refusal of an ungrounded answer that works out the task's arithmetic with the answer
/// alone (a think alone in plan-execute-think), and cuts the call a refusal shows for a
/// script's misplaced command to that command's own usage line, the command first; and a
/// plan-execute-think step refused before it ran no longer ends its round's batch; 33 shows
/// the model a script run that worked, with nothing on stderr, by its output alone (the
/// record keeps its `exit code 0` and `stdout:` lines), and focuses a long output whose first
/// lines name a word of the task that the call's arguments do not hold (`rows: 20` for "How
/// many rows does sales.csv have?"); 34 counts a script call refused before it ran as using
/// none of the task's values (the batch's progress, the plan note's values left, the answer's
/// completeness); 35 leaves the line of selected skills out of react's compact turn note when
/// the last such line the transcript shows is the same; 36 follows the refusal of an answer
/// that names none of the units the task converts into, where the results already convert into
/// each of them, with the answer alone; 37 refuses once an answer where a column the task
/// asks a statistic of has no result line while another named column has them (its call never
/// ran), takes no text that ends inside a document it copied (an open `{`, `[` or code span)
/// as a stopped run's report, and keeps no plan-execute-think summary of a think that does not
/// complete as the ending at a limit (the degraded answer, else the report, stands in); 38
/// refuses an answer that names a unit the task converts into with none of the results'
/// figures in it as one that names none of them, and takes no stopped run's answer that gives
/// none of the results' figures, where they give some and the task writes figures or asks for
/// a quantity, as its report; 39 takes no stopped run's answer that repeats the runtime's
/// words ten in a row (a refusal note of the task, the instruction asking for it) as its
/// report.
pub const RECORD_FORMAT: u32 = 39;

/// `run_started`: what a run's record begins with — everything a replay needs to run again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStart {
    /// [`RECORD_FORMAT`] of the build that wrote the record (0: before formats were numbered).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub record_format: u32,
    /// The build that wrote the record (`agent-core X.Y.Z`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub written_by: String,
    /// The task.
    pub task: String,
    /// The run's configuration (no secrets).
    pub config: AgentConfig,
    /// The skills the run sees, most relevant to the task first.
    pub catalog: Vec<SkillEntry>,
    /// The workspace, as given.
    pub workspace: String,
    /// The skill index's diagnostics (`{path, line, rule, message}`).
    #[serde(default)]
    pub diagnostics: Vec<Value>,
    /// Sizes of the workspace files the task names (the Think-Act route), measured once at
    /// the start so replay and resume see the same note whatever the workspace holds later.
    #[serde(default)]
    pub input_sizes: Vec<u64>,
    /// The external tools on offer at the start (the catalog's tools part).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ExternalTool>,
    /// The skill roots searched, in order of priority (format 4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skill_roots: Vec<RecordedRoot>,
    /// Each skill of the catalog's content hash (format 4): a resume refuses to go on with a
    /// skill that changed since the run began.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skill_hashes: BTreeMap<String, String>,
    /// How the launcher started the run — model spec, approval, configuration files — when it
    /// said (format 4; the CLI always does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RunOrigin>,
}

/// A skill root as `run_started` records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRoot {
    /// `project`, `user`, `extra` or `builtin`.
    pub kind: String,
    /// The folder, as configured.
    pub path: String,
}

/// How a launcher (the CLI) started a run: what `resume` needs, besides the record, to go on
/// the same way. No secrets: the model is its spec as given (`local`, `openai:gpt-4o`,
/// `mock:replies.json`), never a key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunOrigin {
    /// The model spec as given.
    pub model: String,
    /// The approval mode (`never`, `ask-for-risky`, `always`).
    #[serde(default)]
    pub approval: String,
    /// The configuration files read, in order of increasing precedence.
    #[serde(default)]
    pub config_sources: Vec<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// Each skill's content hash, by name: SHA-256 over the relative path and bytes of every
/// file under its folder, in path order (a symlink counts as its target's path). A folder
/// that cannot be read hashes what could be read and the error.
pub(crate) fn skill_hashes(index: &SkillIndex) -> BTreeMap<String, String> {
    index.skills.iter().map(|skill| (skill.name.clone(), tree_hash(&skill.directory))).collect()
}

fn tree_hash(root: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut pending = vec![root.to_owned()];
    let mut files = Vec::new();
    while let Some(directory) = pending.pop() {
        let entries = match std::fs::read_dir(&directory) {
            Ok(entries) => entries,
            Err(error) => {
                hasher.update(format!("unreadable {}: {error}\n", directory.display()));
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => pending.push(path),
                Ok(_) => files.push(path),
                Err(_) => {}
            }
        }
    }
    files.sort();
    for path in files {
        let relative = path.strip_prefix(root).unwrap_or(&path);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let target = std::fs::read_link(&path).unwrap_or_default();
                hasher.update(format!("-> {}", target.display()));
            }
            _ => match std::fs::read(&path) {
                Ok(bytes) => hasher.update(&bytes),
                Err(error) => hasher.update(format!("unreadable: {error}")),
            },
        }
        hasher.update([0]);
    }
    crate::rundir::lowercase_hex(&hasher.finalize())
}

/// What differs, for a resume, between the skills a run began with (`run_started`'s hashes)
/// and those `index` holds now: one line per skill changed or gone.
pub(crate) fn changed_skills(start: &RunStart, index: &SkillIndex) -> Vec<String> {
    if start.skill_hashes.is_empty() {
        return Vec::new();
    }
    let now = skill_hashes(index);
    let directory = |name: &str| {
        start.catalog.iter().find(|skill| skill.name == name).map(|skill| skill.directory.clone())
    };
    start
        .skill_hashes
        .iter()
        .filter_map(|(name, hash)| {
            let place = directory(name).unwrap_or_default();
            match now.get(name) {
                None => {
                    Some(format!("skill `{name}` ({place}) is not in the skill roots any more"))
                }
                Some(current) if current != hash => {
                    // The recorded hash is untrusted text: cut by characters, never mid-char.
                    let short = |hash: &str| hash.chars().take(12).collect::<String>();
                    Some(format!(
                        "skill `{name}` ({place}) changed since the run began (content sha256 \
                         {} → {})",
                        short(hash),
                        short(current)
                    ))
                }
                Some(_) => None,
            }
        })
        .collect()
}

/// This build, as `run_started` names it.
pub(crate) fn written_by() -> String {
    concat!("agent-core ", env!("CARGO_PKG_VERSION")).to_owned()
}

impl RunStart {
    /// Why this build cannot continue the record, if it was written in another format.
    pub(crate) fn format_mismatch(&self) -> Option<String> {
        // Format 4 only adds to `run_started`, which a re-run takes from the record; format 5
        // checks answers only in records of its own format.
        let compatible = (3..=RECORD_FORMAT).contains(&self.record_format);
        (!compatible).then(|| {
            let writer = if self.written_by.is_empty() {
                "an earlier build".to_owned()
            } else {
                self.written_by.clone()
            };
            format!(
                "the record was written in record format {} by {writer}; this build ({}) \
                 re-runs records of formats 3 to {RECORD_FORMAT} only",
                self.record_format,
                written_by(),
            )
        })
    }
}

/// Why this build cannot continue (resume, send to) a record, judged from its events as
/// [`crate::read_events`] returns them: `Some(reason)` when the record was written in another
/// [`RECORD_FORMAT`] or does not start with a readable `run_started`. Lets a caller refuse before
/// it starts a model or servers; [`crate::Agent::resume`] and [`crate::Agent::send`] refuse the same records.
pub fn record_format_mismatch(events: &[Event]) -> Option<String> {
    let first = events.first().filter(|event| event.kind == EventKind::RunStarted);
    let Some(first) = first else {
        return Some("the record does not start with run_started".to_owned());
    };
    match first.payload() {
        Ok(Payload::RunStarted(start)) => start.format_mismatch(),
        Ok(_) => None,
        Err(error) => Some(format!("run_started does not describe a run: {error}")),
    }
}

/// What a run is made of besides its recorded start.
#[derive(Debug)]
pub(crate) struct RunParts {
    pub(crate) bus: EventBus,
    pub(crate) model: ModelSource,
    pub(crate) executor: Executor,
    pub(crate) run_dir: Option<RunDir>,
    pub(crate) cancel: CancellationToken,
    /// Re-running a record: how each of its finished pieces of work ended (`run_finished`),
    /// in order; the pieces after them run live.
    pub(crate) endings: VecDeque<RecordedEnding>,
    /// Re-running a record: the time limits it recorded as passed, in order.
    pub(crate) deadlines: VecDeque<RecordedDeadline>,
    /// Re-running a record: its `tool_servers` and `tools_changed`.
    pub(crate) external: ExternalRecord,
}

/// An input after a run's first task: recorded (a re-run: the file sizes the record measured)
/// or live (measured now).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UserInput {
    pub(crate) text: String,
    pub(crate) input_sizes: Option<Vec<u64>>,
}

/// Builds a run from its recorded start; shared by `run`, `resume` and replay.
pub(crate) fn new_run(run_id: &str, start: &RunStart, parts: RunParts) -> Run {
    let RunParts { bus, model, executor, run_dir, cancel, endings, deadlines, external } = parts;
    let system = system_prompt(&start.config, &start.catalog, &start.tools, &start.task);
    Run {
        config: start.config.clone(),
        state: RunState {
            run_id: run_id.to_owned(),
            task: start.task.clone(),
            catalog: start.catalog.clone(),
            tools: start.tools.clone(),
            selected: Vec::new(),
            plan: None,
            counters: Counters::default(),
            reasoning: ReasoningMetrics::default(),
            actions: Vec::new(),
            compacted: Vec::new(),
            outcome: None,
            strategy_state: Value::Null,
            pending_question: None,
            task_base: Counters::default(),
            result_words: Default::default(),
        },
        endings,
        deadlines,
        input: InputKind::Task,
        pending_call: None,
        context: Context::new(system, start.task.clone()).keeping_notes(start.record_format >= 7),
        bus,
        model,
        executor,
        run_dir,
        cancel,
        started: Instant::now(),
        replaying: None,
        failures: Default::default(),
        next_observation: 0,
        observation_texts: Vec::new(),
        grounding: Grounding::new(start.record_format, &start.task),
        format: start.record_format,
        state_json: Default::default(),
        input_sizes: start.input_sizes.clone(),
        external,
    }
}

/// Drives a run: its first task, then each later input in order (answers, new tasks, slash
/// commands). Returns the result of the last piece of work.
pub(crate) async fn finish_run(
    run: &mut Run,
    start: &RunStart,
    inputs: VecDeque<UserInput>,
) -> Result<RunResult> {
    run.emit(Box::new(start.clone()))?;
    run.announce_tool_servers()?;
    run.external.fresh = true;
    let mut result = work(run, InputKind::Task).await?;
    for input in inputs {
        result = continue_with(run, input).await?;
    }
    Ok(result)
}

/// One piece of work: the strategy to its end, then `run_finished`, `final.md`, `state.json`.
async fn work(run: &mut Run, input: InputKind) -> Result<RunResult> {
    run.input = input;
    if input == InputKind::Task {
        run.grounding.refused = false;
        run.grounding.incomplete_at = None;
        run.grounding.combine_refused.clear();
        run.grounding.combine_figureless = false;
        run.grounding.answer_from_results = false;
        run.grounding.converted_in_results = false;
        run.grounding.choice_refused = false;
        run.grounding.target_refused = None;
    }
    run.replaying = run.endings.pop_front();
    let ending = crate::strategy::drive(run).await?;
    end_work(run, ending)
}

fn end_work(run: &mut Run, ending: Ending) -> Result<RunResult> {
    let Ending { outcome, mut final_text } = ending;
    if outcome == Outcome::Completed {
        final_text = run.with_found_files(run.with_results(final_text));
    }
    let final_text = run.bus.redactor().redact(&final_text).into_owned();
    run.state.outcome = Some(outcome);
    let grounded = !std::mem::take(&mut run.grounding.ungrounded);
    run.emit(RunFinished {
        outcome,
        degraded: outcome.is_degraded(),
        final_text: final_text.clone(),
        counters: run.state.counters.clone(),
        reasoning_metrics: run.state.reasoning.clone(),
        grounded,
    })?;
    if let Some(run_dir) = &run.run_dir
        && !run.bus.catching_up()
    {
        run_dir.write_file(Path::new("final.md"), format!("{final_text}\n").as_bytes())?;
    }
    run.checkpoint()?;
    let counters = run.state.counters.clone();
    Ok(RunResult {
        run_id: run.state.run_id.clone(),
        outcome,
        final_text,
        run_dir: run.run_dir.as_ref().map(|dir| dir.path().to_owned()),
        turns: counters.turns,
        model_calls: counters.model_calls,
        tool_calls: counters.tool_calls,
        script_runs: counters.script_runs,
        usage: RunUsage {
            prompt_tokens: counters.prompt_tokens,
            completion_tokens: counters.completion_tokens,
            cached_tokens: counters.cached_tokens,
        },
        reasoning_metrics: run.state.reasoning.clone(),
        counters,
        grounded,
    })
}

/// The user's next input to a finished piece of work: a slash command (run without the
/// model; a pending question stays pending), the answer to the pending question, or a new
/// task (its budgets start from zero; the transcript goes on).
pub(crate) async fn continue_with(run: &mut Run, input: UserInput) -> Result<RunResult> {
    let text = run.bus.redactor().redact(&input.text).into_owned();
    run.started = Instant::now();
    run.state.outcome = None;
    if let Some((tool, command)) = crate::exec::builtin::parse_slash(&text) {
        run.replaying = run.endings.pop_front();
        run.emit(UserInputEvent { text: text.clone(), kind: "command".into(), input_sizes: None })?;
        let execution = run.executor.command(tool, &command).map_err(|divergence| {
            let path = run.run_dir.as_ref().map(|dir| dir.path().to_owned()).unwrap_or_default();
            Error::Resume { path, message: divergence.0 }
        })?;
        let output = run.bus.redactor().redact(&execution.content).into_owned();
        run.emit(CommandExecuted {
            command: text.clone(),
            tool: tool.to_owned(),
            status: execution.status,
            output: output.clone(),
        })?;
        let ending = match &run.state.pending_question {
            Some(question) => Ending {
                outcome: crate::budget::Outcome::NeedsInput,
                final_text: format!(
                    "{output}\n\n(The task still waits for your answer: {question})"
                ),
            },
            None => Ending { outcome: crate::budget::Outcome::Completed, final_text: output },
        };
        return end_work(run, ending);
    }
    let kind = match run.state.pending_question.take() {
        Some(_) => InputKind::Answer,
        None => InputKind::Task,
    };
    let input_sizes = match input.input_sizes {
        Some(sizes) => sizes,
        None => match (kind, &run.executor.live) {
            (InputKind::Task, Some(live)) => crate::reasoning::input_sizes(&text, &live.workspace),
            _ => Vec::new(),
        },
    };
    run.emit(UserInputEvent {
        text: text.clone(),
        kind: if kind == InputKind::Task { "task" } else { "answer" }.to_owned(),
        input_sizes: (kind == InputKind::Task).then(|| input_sizes.clone()),
    })?;
    let answered = run.pending_call.take();
    run.grounding.user_texts.push(text.clone());
    match kind {
        InputKind::Answer => {
            let content = format!("The user answers: {text}");
            match answered {
                Some(id) => {
                    run.context.push(Message::Tool { tool_call_id: id, content, is_error: false })
                }
                None => run.context.push(Message::user(content)),
            }
        }
        InputKind::Task => {
            if let Some(id) = answered {
                run.context.push(Message::Tool {
                    tool_call_id: id,
                    content: "delivered to the user".to_owned(),
                    is_error: false,
                });
            }
            run.context.push(Message::user(format!("New task: {text}")));
            run.state.task = text;
            run.state.task_base = run.state.counters.clone();
            run.state.result_words.clear();
            run.state.plan = None;
            run.input_sizes = input_sizes;
        }
    }
    run.failures.restart();
    work(run, kind).await
}

/// The system message: the protocol and the catalog.
fn system_prompt(
    config: &AgentConfig,
    catalog: &[SkillEntry],
    tools: &[ExternalTool],
    task: &str,
) -> String {
    let mut text = String::from(
        "You complete the user's task with Agent Skills: folders with instructions (SKILL.md), \
         scripts and reference files. Each turn you choose exactly one action; the runtime \
         checks it, executes it and shows you the result as an observation. You never run \
         anything yourself.\n\
         Actions:\n\
         - select_skills: load the instructions of a skill from the catalog (do this before using its files)\n\
         - load_resource: read a file of a selected skill\n\
         - run_script: run a script of a selected skill; its output comes back as the observation\n\
         - recall_observation: show again an observation that was shortened\n",
    );
    let offered: Vec<&ExternalTool> =
        tools.iter().filter(|tool| tool.decision != tools_runtime::Decision::Forbidden).collect();
    let summarised = !offered.is_empty() && crate::space::tools_summarised(&offered, config);
    if summarised {
        text.push_str(
            "- describe_tools: show the description and arguments of external tools the catalog only names\n",
        );
    }
    if !offered.is_empty() {
        text.push_str(
            "- call_tool: call an external (MCP) tool with its name and arguments that fit its schema (with few tools, each is also offered as a function named after it)\n",
        );
    }
    if config.guard.builtin_tools {
        text.push_str(
            "- todo, schedule: the user's to-do list and schedule (`list`, `add …`, `done N`, `remove N`)\n",
        );
    }
    if config.guard.ask_user {
        text.push_str(
            "- ask_user: ask the user one question, only when the task cannot go on without it\n",
        );
    }
    // Think-Act (seed 000): the core principle, graded by the note's `reasoning=` level.
    text.push_str(
        "- final_answer: answer the user and end the run\n\
         Use facts from observations, never invented ones. Before every action, say in \
         `thought` what the last observation showed and what you do now and why (thinking \
         counts); never act silently. The note's reasoning= says how much: lightweight one \
         short clause, standard one sentence each, complete also the plan step it serves. As \
         soon as you know the answer, give final_answer.\n",
    );
    if config.strategy == crate::strategy::PLAN_EXECUTE_THINK {
        text.push_str(
            "This run works in rounds instead: plan_tool_call plans a batch of 1-8 of the \
             actions above (never final_answer) as steps {\"tool\", \"args\"}; the runtime \
             runs them in order (a failing step ends the batch) and shows their results; then \
             think says what they showed, gives user_summary (what the user reads) and \
             task_completed.\n",
        );
    } else if config.strategy == crate::strategy::PLAN_THOUGHT_REPLAN {
        text.push_str(
            "This run works in three calls instead: plan (once per task) lists the steps as \
             short sentences; then, for the current step, thought says continue (with \
             next_action {\"tool\", \"args\"}: one of the actions above except final_answer, \
             or todo / schedule, the user's to-do list and schedule), ask_user (if offered: a \
             question) or done (the step is finished; response: its result); after each \
             finished step replan gives the steps still to do (replanned) or ends the task \
             with response, the final answer for the user (done).\n",
        );
    } else if config.strategy == crate::strategy::SAFE {
        text.push_str(crate::strategy::SAFE_PROTOCOL);
    } else if config.decide == DecideMode::Json {
        text.push_str(
            "Reply with one JSON object: {\"thought\": \"<one sentence>\", \"action\": \
             {\"type\": \"<action>\", \"args\": {…}}}, and a \"plan\" {\"goal\", \"steps\": \
             [{\"id\", \"title\", \"status\"}]} on your first turn if the task has several steps.\n",
        );
    }
    text.push_str("\nSkills catalog (name: description):\n");
    let budget = config.context.catalog_chars;
    let mut used = 0;
    let mut omitted = 0;
    // The same rule as the guard's: a hidden skill is shown only when the user named it.
    let visible = catalog.iter().filter(|entry| {
        !entry.disable_model_invocation || crate::space::user_named(task, config, &entry.name)
    });
    for entry in visible {
        let line = format!("- {}: {}\n", entry.name, entry.description.replace('\n', " "));
        if used + line.chars().count() > budget {
            omitted += 1;
            continue;
        }
        used += line.chars().count();
        text.push_str(&line);
    }
    if omitted > 0 {
        text.push_str(&format!("({omitted} more skills left out for space)\n"));
    }
    text.push_str(&crate::external::catalog(&offered, summarised));
    text
}
