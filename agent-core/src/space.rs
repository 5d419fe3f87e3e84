//! The per-turn action space — the action automaton of `../shared/notes/small-models.md`:
//! which actions the run state allows this turn (skills not yet selected, ranked by relevance
//! to the task; scripts and files of selected skills only; no second select straight after a
//! select; only `final_answer` after an identical successful run repeats; the external tools
//! on offer), derived by [`action_space`], and rendered as the turn's JSON Schema or tools, so
//! that an action the state does not allow cannot even be written.

use model_adapter::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::action::{Action, Decision, EXTERNAL_PREFIX, MAX_OWN_FUNCTIONS};
use crate::config::{AgentConfig, DecideMode};
use crate::external::{ExternalTool, short_description, validate_arguments};
use crate::state::{ObservationStatus, RunState};

/// Whether the user named `skill` (config, or `/name` or `$name` in the task).
pub(crate) fn user_named(task: &str, config: &AgentConfig, skill: &str) -> bool {
    config.guard.user_named_skills.iter().any(|name| name == skill)
        || ["/", "$"].iter().any(|sigil| {
            let needle = format!("{sigil}{skill}");
            task.match_indices(&needle).any(|(at, _)| {
                let after = task[at + needle.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
            })
        })
}

pub(crate) use crate::rank::words;

/// What a skill's words are read from: its name and description.
fn skill_text(entry: &crate::state::SkillEntry) -> String {
    format!("{} {}", entry.name.replace('-', " "), entry.description)
}

/// The task's words that neither a selected skill's name or description nor a result of the
/// run holds: what the run has not yet found a skill or a result for.
/// Once the rules' arithmetic is done (from format 9) the [`ARITHMETIC_WORDS`] are never open.
/// From format 32 a task that counts two or more things together ("How many ERROR and WARN
/// lines … in total?", [`crate::grounding::totals_two_things`]) has its "total" done by the
/// answer too: with the counts in, the local 1.5B was offered csv-summary (whose description
/// says "total") and a regex helper for it, and tried both.
fn open_words(state: &RunState, rules: SpaceRules) -> std::collections::HashSet<String> {
    let mut covered: std::collections::HashSet<String> =
        state.result_words.iter().cloned().collect();
    for skill in &state.selected {
        if let Some(entry) = state.skill(&skill.name) {
            covered.extend(words(&skill_text(entry)));
        }
    }
    if rules.arithmetic_done() {
        covered.extend(ARITHMETIC_WORDS.map(str::to_owned));
        if rules.format >= crate::grounding::TOTAL_OF_TWO_SINCE_FORMAT
            && crate::grounding::totals_two_things(&state.task)
        {
            covered.extend(["total", "totals"].map(str::to_owned));
        }
    }
    if rules.format >= OPEN_FUNCTION_WORDS_SINCE_FORMAT {
        covered.extend(FUNCTION_WORDS.map(str::to_owned));
    }
    words(&state.task).into_iter().filter(|word| !covered.contains(word)).collect()
}

/// Words of a question that ask nothing of a skill, left out of what is open from format 32
/// ([`OPEN_FUNCTION_WORDS_SINCE_FORMAT`]; the ranking's stop words do not list them): with
/// the log analyzer's counts in, "How many ERROR and WARN lines does app.log have in total?"
/// kept "does" open, and the regex helper ("why a pattern does not match") was offered for it.
const FUNCTION_WORDS: [&str; 4] = ["does", "did", "doing", "done"];

/// The record format from which [`FUNCTION_WORDS`] are never open.
const OPEN_FUNCTION_WORDS_SINCE_FORMAT: u32 = 32;

/// Words that ask for arithmetic the final answer does itself (a sum or difference of results,
/// which the grounding accepts): once results are in, no skill is offered for them (asked to
/// add two column totals it had, the local 1.5B selected a slide-deck skill whose description
/// says "add a slide").
const ARITHMETIC_WORDS: [&str; 6] = ["add", "plus", "sum", "subtract", "minus", "difference"];

/// The record format from which an observation recalled once is not offered again.
pub(crate) const RECALL_ONCE_SINCE_FORMAT: u32 = 21;

/// The first record format that offers a plan with a task's first action only: the local 1.5B
/// sent one with 1 of 170 later actions on the whole react suite, and under jump-forward
/// decoding the optional member cost each of them a request and two generated tokens (the
/// closing brace and the end of text).
pub(crate) const PLAN_ON_FIRST_TURN_SINCE_FORMAT: u32 = 28;

/// What of the run, beside its state and configuration, shapes the action space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpaceRules {
    /// The record format the run follows ([`crate::RECORD_FORMAT`], or a re-run record's).
    pub(crate) format: u32,
    /// An answer of the current task was refused as ungrounded.
    pub(crate) ungrounded_refused: bool,
    /// The strategy lets the ranking narrow the first selection ([`SpaceRules::sure_first`];
    /// not `safe`, whose SOP lookup picks among the offered workflow skills).
    pub(crate) narrows_first: bool,
}

impl SpaceRules {
    /// The rules of the current format with no answer refused.
    #[cfg(test)]
    pub(crate) fn current() -> SpaceRules {
        SpaceRules { format: crate::RECORD_FORMAT, ungrounded_refused: false, narrows_first: true }
    }

    /// The plan is offered with a task's first action only, as the system prompt asks for it
    /// (from format 28; before, with every action until one was sent).
    fn plan_on_first_turn_only(self) -> bool {
        self.format >= PLAN_ON_FIRST_TURN_SINCE_FORMAT
    }

    /// A repeat of a call that already worked is no new result after a refused answer (from
    /// format 9, once an answer of the task was refused as ungrounded; see [`answer_refused`];
    /// after a refusal for the task's unused numbers, a repeat still frees the answer).
    fn repeat_not_new(self) -> bool {
        self.format >= 9 && self.ungrounded_refused
    }

    /// An admission after any refused answer is quote-free, bounded and may quote the task's
    /// words with digits (format 10; format 9 after an ungrounded refusal only: after one for
    /// the task's unused numbers, `[^0-9]*` let an unescaped quote end the JSON string).
    fn safe_admission(self) -> bool {
        self.format >= 10 || self.repeat_not_new()
    }

    /// After a repeated call, a skill for what is still open in the task is offered beside the
    /// answer (from format 10).
    fn open_after_repeat(self) -> bool {
        self.format >= 10
    }

    /// The answer does the task's simple arithmetic: no skill is offered for it once results
    /// are in (from format 9).
    fn arithmetic_done(self) -> bool {
        self.format >= 9
    }

    /// After a script call that worked while the task still gives values no call has used, the
    /// note names them instead of inviting the answer (from format 13).
    fn batch_note(self) -> bool {
        self.format >= crate::grounding::BATCH_NOTE_SINCE_FORMAT
    }

    /// The first selection offers the one skill the ranking is sure of, when there is one
    /// ([`SURE_RATIO`], from format 31).
    fn sure_first(self) -> bool {
        self.format >= SURE_FIRST_SINCE_FORMAT && self.narrows_first
    }

    /// The runtime makes the task's first selection itself when the ranking is sure of it
    /// (from format 32, [`SURE_SELECT_SINCE_FORMAT`]).
    fn sure_select(self) -> bool {
        self.format >= SURE_SELECT_SINCE_FORMAT && self.sure_first()
    }
}

/// The record format from which the task's first selection, when the ranking is sure of the
/// skill ([`SURE_RATIO`]) and nothing else is offered to select, is made by the runtime
/// without a model call ([`ActionSpace::sure`]): the offer left the model one skill, and its
/// answer was a thought of ~35 generated tokens (≈ 3 s on 2 cores) before a name it could
/// not choose otherwise.
pub(crate) const SURE_SELECT_SINCE_FORMAT: u32 = 32;

/// The record format from which a task's first selection offers only the best-ranked skill
/// when its score is [`SURE_RATIO`] times the next one's or more: asked "How many ERROR and
/// WARN lines does app.log have in total?" with 22 skills installed, the local 1.5B was offered
/// log-analyzer (BM25 11.2), regex-helper (4.7) and csv-summary (2.5), thought "load the
/// http-status-codes skill", selected csv-summary, and went through four skills before the
/// log analyzer. The others stay on offer once a skill is selected, for what it leaves open.
pub(crate) const SURE_FIRST_SINCE_FORMAT: u32 = 31;

/// How many times the next skill's score the best one's must be for the ranking to be sure:
/// on the bench's tasks with every example skill installed, each task whose best skill
/// scores twice the next one's or more needs that skill (convert-batch-4 2.6×, find-many-
/// patterns 2.2×, csv-units-mean 2.0×); the tasks that need two skills score below (1.0–1.4×).
const SURE_RATIO: f64 = 2.0;

/// Where a batch of script calls over the task's values stands, after a call of it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Batch {
    /// The values no script call has used yet, listed as the refusal of an incomplete answer
    /// lists them.
    Left(String),
    /// Two or more of the task's values used, none left.
    Done,
}

/// Whether a batch over the task's values is under way after a script run that worked: some
/// of its values used, some left ([`batch_left`]).
pub(crate) fn batch_under_way(state: &RunState, rules: SpaceRules) -> bool {
    matches!(batch_left(state, rules), Some(Batch::Left(_)))
}

/// After a script run that worked, where the batch over the task's values stands: one or more
/// of the task's numbers used and some left, or two or more used and none left (see
/// [`crate::grounding::unused_task_numbers`]); `None` when the task is no batch.
fn batch_left(state: &RunState, rules: SpaceRules) -> Option<Batch> {
    if !rules.batch_note()
        || !state
            .actions
            .last()
            .is_some_and(|record| matches!(record.action, Some(Action::RunScript { .. })))
    {
        return None;
    }
    let args = state.task_script_args(rules.format >= crate::state::USED_BY_RUNS_SINCE_FORMAT);
    let (used, unused) = crate::grounding::unused_task_numbers(&state.task, &args, "", true);
    match (used, unused.is_empty()) {
        (0, _) | (1, true) => None,
        (_, true) => Some(Batch::Done),
        (_, false) => Some(Batch::Left(crate::grounding::value_list(&unused))),
    }
}

/// The most skills a small model (JSON mode) is offered to select at once, best first.
pub(crate) const MAX_OFFERED_SKILLS: usize = 3;

/// Catalog names with their relevance to the task (BM25, [`crate::rank`]), best first.
pub(crate) fn scored_skills(state: &RunState) -> Vec<(f64, String)> {
    crate::rank::rank_skills(&state.task, &state.catalog)
        .into_iter()
        .map(|(name, score)| (score, name))
        .collect()
}

/// The actions this turn allows, derived from the state.
pub(crate) fn action_space(
    state: &RunState,
    config: &AgentConfig,
    rules: SpaceRules,
) -> ActionSpace {
    let last = state.actions.last();
    let repeat_not_new = rules.repeat_not_new();
    let refused = answer_refused(state, repeat_not_new);
    let mut space = ActionSpace {
        max_select: match config.decide {
            DecideMode::Json => 1,
            DecideMode::Tools => config.guard.max_bodies_per_turn.max(1),
        },
        plan_field: if state.plan.is_some() {
            PlanField::PlanUpdate
        } else if rules.plan_on_first_turn_only() && state.task_actions().next().is_some() {
            PlanField::None
        } else {
            PlanField::Plan
        },
        ..ActionSpace::default()
    };
    // An identical successful script run, repeated: only the answer is left.
    if let Some(record) = last
        && record.is_result()
        && state.actions[..state.actions.len() - 1].iter().any(|earlier| {
            earlier.status == ObservationStatus::Ok && earlier.action == record.action
        })
    {
        space.note = Some(
            match record.action {
                Some(Action::CallTool { .. }) => {
                    "that tool was already called with the same arguments: answer now"
                }
                _ => "that script already ran with the same arguments: answer now",
            }
            .to_owned(),
        );
        space.plan_field = PlanField::None;
        // The repeat brings nothing new: a refused answer still has to admit (the local 1.5B
        // re-ran the call its refused checksum came after, then gave the checksum again), and
        // so does the thought before it (free, it stated the refused figure again, and the
        // answer after it ran on as "will be ouch, it's ouch, …" to the token limit).
        if refused && repeat_not_new {
            space.answer_without_figures = true;
            space.thought_without_figures = true;
            space.quote_free = true;
            space.admission_words = task_words_with_digits(&state.task);
            space.note = Some(
                "that call already ran with the same arguments and gives no new value: say \
                 that you cannot tell, and what is missing"
                    .to_owned(),
            );
        } else if rules.open_after_repeat() {
            // A repeat while part of the task has no result yet: the skill for that part is
            // offered beside the answer (asked to total a column and convert three values,
            // the local 1.5B thought "I need to convert 1 nmi to m" and ran the CSV summary
            // again, three times).
            let (offer, _) = select_offer(state, config, rules, true);
            if !offer.is_empty() {
                space.note = Some(format!(
                    "that call already ran with the same arguments. Part of the task has no \
                     result yet: select {} for it, or answer now",
                    offer.join(" or ")
                ));
                space.select = offer;
            }
        }
        return space;
    }
    // A skill was just selected: nothing but answers that were not actions at all, or selects
    // that were refused, came since (else one refused select opens the door to the next, which
    // is how the local 1.5B spent plan-execute-think's rounds selecting skill after skill; a
    // refused attempt to use the skill still frees the select, as the skill may be the wrong one).
    let just_selected = state
        .actions
        .iter()
        .rev()
        .find(|record| {
            let not_done = matches!(
                record.status,
                ObservationStatus::InvalidAction
                    | ObservationStatus::Refused
                    | ObservationStatus::ModelError
            );
            !(not_done && matches!(record.action, None | Some(Action::SelectSkills { .. })))
        })
        .is_some_and(|record| {
            record.status == ObservationStatus::Ok
                && matches!(record.action, Some(Action::SelectSkills { .. }))
        });
    if !just_selected {
        let (offer, sure) = select_offer(state, config, rules, false);
        space.sure = sure
            && offer.len() == 1
            && rules.sure_select()
            && state.task_actions().next().is_none();
        space.select = offer;
    } else {
        space.note = Some("a skill was just selected: use it or answer".to_owned());
    }
    // After a call that worked, small models tend to make the same call again (measured on the
    // local 1.5B: an MCP call made twice in every run): say that its result is in.
    if last.is_some_and(crate::state::ActionRecord::is_result) {
        space.note = Some(match batch_left(state, rules) {
            // Told "answer if it is enough" after the first of eight conversions, the local
            // 1.5B answered with that one result, was refused for the seven left, ran the next,
            // answered again: a refused answer per value, and the turns ran out.
            Some(Batch::Left(left)) => format!(
                "the last call worked and its result is above. The task also gives {left}, \
                 which no script call has used: run the script for the next one, one call per \
                 value, then answer with every result"
            ),
            // Led through the batch, the 1.5B then ran its first call again, or wrote a
            // thought about another skill's description: say the batch is done.
            Some(Batch::Done) => "the last call worked: every value the task gives has its \
                                  result now (Results so far). Answer with every result, do not \
                                  repeat a call"
                .to_owned(),
            None => "the last call worked and its result is above: answer if it is enough, do \
                     not repeat it"
                .to_owned(),
        });
    }
    for skill in &state.selected {
        // A file already read whole is in the transcript: offering it again only invites the
        // small models' habit of repeating their last action.
        let unread: Vec<String> = skill
            .resources
            .iter()
            .filter(|path| !loaded_whole(state, &skill.name, path))
            .cloned()
            .collect();
        if !unread.is_empty() {
            space
                .referenced
                .extend(skill.referenced.iter().filter(|path| unread.contains(path)).cloned());
            space.load.push((skill.name.clone(), unread));
        }
        if !skill.scripts.is_empty()
            && state.task_counters().script_runs < config.budgets.max_script_runs
        {
            space.run.push((skill.name.clone(), skill.scripts.clone()));
        }
    }
    if refused {
        space.answer_without_figures = true;
        space.quote_free = rules.safe_admission();
        if space.quote_free {
            space.admission_words = task_words_with_digits(&state.task);
        }
        space.note = Some(
            "your answer was refused: no result of this run shows its figure. Find the value \
             with an action, or admit that you cannot: what you tried and what is missing"
                .to_owned(),
        );
    }
    // Scripts with a usage: their argument counts go into the schema.
    for (skill, scripts) in &space.run {
        let Some(selected) = state.selected_skill(skill) else { continue };
        for script in scripts {
            if let Some(usage) = selected.usage_of(script) {
                let arity = [usage.min_args, usage.max_args.unwrap_or(0)];
                space.arities.push((skill.clone(), script.clone(), arity));
            }
        }
    }
    let (describe, call) = external_offer(state, config);
    space.describe = describe;
    space.call = call;
    // From format 21 an observation recalled once is whole again in the transcript (and the
    // recall's own observation can be compacted and recalled in turn): it is not offered again
    // (the local 1.5B recalled one output six times in a row).
    let recalled = |id: &String| {
        state.actions.iter().any(|record| {
            record.status == ObservationStatus::Ok
                && matches!(&record.action, Some(Action::RecallObservation { id: recalled }) if recalled == id)
        })
    };
    space.recall = state
        .compacted
        .iter()
        .filter(|id| rules.format < RECALL_ONCE_SINCE_FORMAT || !recalled(id))
        .cloned()
        .collect();
    space.builtins = config.guard.builtin_tools;
    space.ask_user = config.guard.ask_user;
    space
}

/// The external tools the catalog offers: all but forbidden ones.
pub(crate) fn offered_tools(state: &RunState) -> Vec<&ExternalTool> {
    state.tools.iter().filter(|tool| tool.decision != tools_runtime::Decision::Forbidden).collect()
}

/// Whether the catalog names the offered tools only (too many, or too long to list whole).
pub(crate) fn tools_summarised(tools: &[&ExternalTool], config: &AgentConfig) -> bool {
    let settings = &config.tools;
    tools.len() > settings.catalog_max_tools
        || tools
            .iter()
            .map(|tool| crate::external::catalog_line(tool).chars().count())
            .sum::<usize>()
            > settings.catalog_chars
}

/// Tools `describe_tools` may describe and tools `call_tool` may call: every offered tool is
/// callable when the catalog lists them whole, else only those described so far.
fn external_offer(state: &RunState, config: &AgentConfig) -> (Vec<String>, Vec<ExternalTool>) {
    let offered = offered_tools(state);
    if !tools_summarised(&offered, config) {
        return (Vec::new(), offered.into_iter().cloned().collect());
    }
    let described: std::collections::HashSet<&str> = state
        .actions
        .iter()
        .filter(|record| record.status == ObservationStatus::Ok)
        .filter_map(|record| match &record.action {
            Some(Action::DescribeTools { names }) => Some(names),
            _ => None,
        })
        .flatten()
        .map(String::as_str)
        .collect();
    let mut describe = Vec::new();
    let mut call = Vec::new();
    for tool in offered {
        if described.contains(tool.name.as_str()) {
            call.push(tool.clone());
        } else {
            describe.push(tool.name.clone());
        }
    }
    (describe, call)
}

/// Whether `skill`'s `path` was already loaded whole (no section) with success.
pub(crate) fn loaded_whole(state: &RunState, skill: &str, path: &str) -> bool {
    state.actions.iter().any(|record| {
        record.status == ObservationStatus::Ok
            && matches!(&record.action, Some(Action::LoadResource { skill: loaded, path: read, section: None })
                if loaded == skill && read == path)
    })
}

/// The actions a turn allows, derived from the run state (the per-turn action automaton).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct ActionSpace {
    /// Skills `select_skills` may name, most relevant first (empty: no select this turn).
    pub select: Vec<String>,
    /// Names per `select_skills` call.
    pub max_select: usize,
    /// Selected skills with readable files, and those files.
    pub load: Vec<(String, Vec<String>)>,
    /// Selected skills with scripts, and those scripts.
    pub run: Vec<(String, Vec<String>)>,
    /// Files of `load` that the skills' bodies name, in the order they name them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub referenced: Vec<String>,
    /// External tools the catalog only names, which `describe_tools` may describe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub describe: Vec<String>,
    /// External tools `call_tool` may call (described, not forbidden).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call: Vec<ExternalTool>,
    /// Observations compaction shortened, which `recall_observation` may bring back.
    pub recall: Vec<String>,
    /// Offer the built-in `todo` and `schedule` tools.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub builtins: bool,
    /// Offer `ask_user`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ask_user: bool,
    /// Offer a `plan` (no plan yet) or a `plan_update` (a plan exists).
    pub plan_field: PlanField,
    /// Why the space is narrower than usual (shown to the model), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Offered scripts whose SKILL.md usage says how many arguments they take:
    /// `(skill, script, [min, max])` (`max` 0: any number). With one script on offer its `args`
    /// say so; in JSON mode each script gets its own `run_script` variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arities: Vec<(String, String, [usize; 2])>,
    /// `final_answer`'s content must admit that the value is unknown, with no digit: the last
    /// answer was refused for a figure no result shows, and no result came since.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub answer_without_figures: bool,
    /// The JSON-mode thought may hold no digit either (only the admission is left).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thought_without_figures: bool,
    /// The admission's pattern leaves out `"` (from format 9).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quote_free: bool,
    /// `select` is the task's first selection and holds the one skill the ranking is sure of:
    /// the runtime selects it without asking the model (from format 32).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sure: bool,
    /// Words of the task with digits that the admission may still write whole ("SHA-256"),
    /// from format 9.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_words: Vec<String>,
}

/// Which plan field the turn's schema offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PlanField {
    /// None.
    #[default]
    None,
    /// `plan`, a full plan.
    Plan,
    /// `plan_update`, a patch.
    PlanUpdate,
}

/// The skills a turn offers to select: with a small model (JSON mode) only those related to
/// the task, and once results are in only those related to what is still open, the best few.
/// With `open_only`, nothing unless results are in and the offer is held to what is still
/// open. Also whether the offer is the first selection's sure choice ([`SURE_RATIO`], from
/// format 31), its best skill alone.
fn select_offer(
    state: &RunState,
    config: &AgentConfig,
    rules: SpaceRules,
    open_only: bool,
) -> (Vec<String>, bool) {
    let scored = scored_skills(state);
    // A small model (JSON mode) picks skills unrelated to the task when offered them: when
    // some skill shares words with the task, only those are offered (and any the user
    // named), none once they are all selected (the local 1.5B selected csv-summary after
    // finishing a batch of conversions, then answered with one result). Native tool
    // callers see them all, ranked.
    let relevant_only =
        config.decide == DecideMode::Json && scored.iter().any(|(score, _)| *score > 0.0);
    // Once results are in, a skill is offered only for what is still open: task words
    // that neither the selected skills' descriptions nor the results cover (after a CSV
    // summary listed a column `units`, the local 1.5B selected the unit converter for
    // "How many units were sold").
    let open = (relevant_only && !state.result_words.is_empty()).then(|| open_words(state, rules));
    if open_only && open.is_none() {
        return (Vec::new(), false);
    }
    // The first selection, when the ranking is sure: the best skill alone (format 31).
    let sure_of = match scored.as_slice() {
        [(best, name), (next, _), ..]
            if rules.sure_first()
                && relevant_only
                && open.is_none()
                && state.selected.is_empty()
                && *best >= SURE_RATIO * *next =>
        {
            Some(name.clone())
        }
        _ => None,
    };
    let mut offer: Vec<String> = scored
        .into_iter()
        .filter(|(score, name)| {
            let related = match &open {
                Some(open) => state.skill(name).is_some_and(|entry| {
                    words(&skill_text(entry)).iter().any(|word| open.contains(word))
                }),
                None => !relevant_only || *score > 0.0,
            };
            related || user_named(&state.task, config, name)
        })
        .map(|(_, name)| name)
        .filter(|name| state.selected_skill(name).is_none())
        .filter(|name| {
            state.skill(name).is_some_and(|entry| !entry.disable_model_invocation)
                || user_named(&state.task, config, name)
        })
        .collect();
    // Only the best few: with many skills installed, most share some word with any task,
    // and a small model takes one of them.
    let sure = sure_of.is_some_and(|name| offer.first() == Some(&name));
    if relevant_only {
        let mut kept = 0;
        offer.retain(|name| {
            kept += 1;
            let most = if sure { 1 } else { MAX_OFFERED_SKILLS };
            kept <= most || user_named(&state.task, config, name)
        });
    }
    (offer, sure)
}

/// Whether an answer of this task was refused as ungrounded (or incomplete) and no new result
/// came since: until one does, the answer may only say that the value is unknown (after a
/// refusal, the local 1.5B ran a failing conversion and gave the same invented temperature
/// again). With `repeat_not_new`, a repeat of a call that already worked is not new.
fn answer_refused(state: &RunState, repeat_not_new: bool) -> bool {
    let records: Vec<&crate::state::ActionRecord> = state.task_actions().collect();
    let Some(refusal) = records.iter().position(|record| {
        record.status == ObservationStatus::Refused
            && matches!(record.action, Some(Action::FinalAnswer { .. }))
    }) else {
        return false;
    };
    let new_result = |index: usize| {
        let record = records[index];
        record.is_result()
            && (!repeat_not_new
                || !records[..index].iter().any(|earlier| {
                    earlier.status == ObservationStatus::Ok && earlier.action == record.action
                }))
    };
    !(refusal + 1..records.len()).any(new_result)
}

/// What an answer may be after one was refused as ungrounded and no result came since: an
/// admission, with no figure (told only, or held to no digits, the local 1.5B wrote the same
/// invented figure again, then "has ****** lines").
const UNKNOWN_ANSWER: &str = "^I (cannot|could not|do not know)[^0-9]*$";

/// [`UNKNOWN_ANSWER`] without quotes and bounded (see [`ActionSpace::quote_free`]): llama.cpp
/// turns a pattern into grammar as written, so `[^0-9]` lets an unescaped `"` into the JSON
/// string and the server then fails the call ("does not match the expected peg-native
/// format"), and it ignores `maxLength` beside a pattern (an admission ran on as "ouch, it's
/// ouch, …" to the token limit): the bound is in the pattern.
const UNKNOWN_ANSWER_QUOTE_FREE: &str = r#"^I (cannot|could not|do not know)[^0-9"]{0,400}$"#;

/// The most task words an admission may quote whole.
const MAX_ADMISSION_WORDS: usize = 6;

/// The task's words that hold a digit and a letter, and only letters, digits and `.-_/`
/// ("SHA-256", "sales-2024.csv"; not a bare figure, which repeated would be any number), at
/// most [`MAX_ADMISSION_WORDS`], each once: an admission may write them (held to no digit at
/// all, the 1.5B wrote "the SHA-  checksum").
fn task_words_with_digits(task: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in task.split_whitespace() {
        let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let plain = word.chars().all(|c| c.is_ascii_alphanumeric() || ".-_/".contains(c));
        if plain
            && word.len() <= ARG_MAX
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic())
            && !found.iter().any(|known| known == word)
            && found.len() < MAX_ADMISSION_WORDS
        {
            found.push(word.to_owned());
        }
    }
    found
}

/// [`UNKNOWN_ANSWER_QUOTE_FREE`] that also lets `words` through whole.
fn admission_pattern(words: &[String]) -> String {
    let escaped: Vec<String> = words.iter().map(|word| word.replace('.', "\\.")).collect();
    format!(r#"^I (cannot|could not|do not know)([^0-9"]|{}){{0,400}}$"#, escaped.join("|"))
}

/// A thought with no figure and no quote, bounded in the pattern (see
/// [`UNKNOWN_ANSWER_QUOTE_FREE`] and [`ActionSpace::thought_without_figures`]).
const NO_FIGURES: &str = r#"^[^0-9"]{0,200}$"#;

/// The most scripts that get a `run_script` variant each in JSON mode (beyond, one for all).
const MAX_SCRIPT_VARIANTS: usize = 12;

/// `run_script`'s `args`: the skills and scripts it may name, and the arguments, held to
/// `arity` (`[min, max]` by the script's usage, `max` 0: any number; one more than the usage
/// shows is allowed, for an argument a skill describes in prose).
fn run_script_schema(skills: &[&String], scripts: &[&String], arity: Option<[usize; 2]>) -> Value {
    let mut args =
        json!({"type": "array", "items": {"type": "string", "maxLength": ARG_MAX}, "maxItems": 8});
    if let Some([min, max]) = arity {
        if min > 0 {
            args["minItems"] = json!(min.min(8));
        }
        if max > 0 {
            let max = max + crate::usage::PROSE_ARGS;
            args["maxItems"] = json!(max.clamp(min.min(8), 8));
        }
    }
    json!({
        "type": "object",
        "properties": {
            "skill": {"enum": skills},
            "script": {"enum": scripts},
            "args": args,
        },
        "required": ["skill", "script", "args"],
        // Which script before its arguments (sorted, a small model writes the arguments first
        // and puts the script's path among them).
        "propertyOrdering": ["skill", "script", "args"],
        "additionalProperties": false,
    })
}

const THOUGHT_MAX: usize = 300;
const ANSWER_MAX: usize = 4_000;
const ARG_MAX: usize = 200;
/// Tools per `describe_tools`.
const MAX_DESCRIBE: usize = 4;

impl ActionSpace {
    /// The names of the allowed actions, in offer order (`final_answer` is always allowed).
    pub(crate) fn allowed(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if !self.select.is_empty() {
            names.push("select_skills");
        }
        if !self.load.is_empty() {
            names.push("load_resource");
        }
        if !self.run.is_empty() {
            names.push("run_script");
        }
        if !self.describe.is_empty() {
            names.push("describe_tools");
        }
        if !self.call.is_empty() {
            names.push("call_tool");
        }
        if !self.recall.is_empty() {
            names.push("recall_observation");
        }
        if self.builtins {
            names.extend(["todo", "schedule"]);
        }
        if self.ask_user {
            names.push("ask_user");
        }
        names.push("final_answer");
        names
    }

    /// Whether `action` is inside the space; the error says what is allowed instead.
    pub(crate) fn check(&self, action: &Action) -> Result<(), String> {
        let name = action.name();
        if let Action::CallTool { name: tool, .. } = action
            && self.describe.contains(tool)
        {
            return Err(format!("tool `{tool}` is not described yet: describe_tools it first"));
        }
        if !self.allowed().contains(&name) {
            return Err(format!(
                "`{name}` is not allowed now{}; allowed: {}",
                self.note.as_deref().map(|note| format!(" ({note})")).unwrap_or_default(),
                self.allowed().join(", ")
            ));
        }
        match action {
            Action::SelectSkills { names } => {
                if names.is_empty() {
                    return Err("`select_skills` needs at least one skill name".to_owned());
                }
                if let Some(unknown) = names.iter().find(|name| !self.select.contains(name)) {
                    return Err(format!(
                        "skill `{unknown}` cannot be selected; selectable: {}",
                        self.select.join(", ")
                    ));
                }
                Ok(())
            }
            Action::LoadResource { skill, path, .. } => {
                let Some((_, files)) = self.load.iter().find(|(name, _)| name == skill) else {
                    return Err(format!(
                        "skill `{skill}` is not selected (select it first); loadable: {}",
                        names_of(&self.load)
                    ));
                };
                if !files.contains(path) {
                    return Err(format!(
                        "`{path}` is not a file of skill `{skill}`; its files: {}",
                        files.join(", ")
                    ));
                }
                Ok(())
            }
            Action::RunScript { skill, script, args } => {
                let Some((_, scripts)) = self.run.iter().find(|(name, _)| name == skill) else {
                    return Err(format!(
                        "skill `{skill}` has no runnable scripts or is not selected (select it \
                         first); runnable: {}",
                        names_of(&self.run)
                    ));
                };
                if !scripts.contains(script) {
                    return Err(format!(
                        "`{script}` is not a script of skill `{skill}`; its scripts: {}",
                        scripts.join(", ")
                    ));
                }
                if let Some(long) = args.iter().find(|arg| arg.chars().count() > ARG_MAX) {
                    return Err(format!(
                        "an argument is longer than {ARG_MAX} characters ({} chars)",
                        long.chars().count()
                    ));
                }
                Ok(())
            }
            Action::DescribeTools { names } => {
                if names.is_empty() {
                    return Err("`describe_tools` needs at least one tool name".to_owned());
                }
                if names.len() > MAX_DESCRIBE {
                    return Err(format!("describe at most {MAX_DESCRIBE} tools at a time"));
                }
                if let Some(unknown) = names.iter().find(|name| !self.describe.contains(name)) {
                    if self.call.iter().any(|tool| &tool.name == unknown) {
                        return Err(format!(
                            "`{unknown}` is already described: call it with call_tool"
                        ));
                    }
                    return Err(format!(
                        "there is no tool `{unknown}` to describe; describable: {}",
                        self.describe.join(", ")
                    ));
                }
                Ok(())
            }
            Action::CallTool { name, arguments } => {
                let Some(tool) = self.call.iter().find(|tool| &tool.name == name) else {
                    if self.describe.contains(name) {
                        return Err(format!(
                            "tool `{name}` is not described yet: describe_tools it first"
                        ));
                    }
                    let callable: Vec<&str> =
                        self.call.iter().map(|tool| tool.name.as_str()).collect();
                    return Err(format!(
                        "there is no tool `{name}`; callable: {}",
                        if callable.is_empty() { "none".to_owned() } else { callable.join(", ") }
                    ));
                };
                validate_arguments(tool, arguments)
            }
            Action::RecallObservation { id } => {
                if self.recall.contains(id) {
                    Ok(())
                } else {
                    Err(format!(
                        "`{id}` is not a shortened observation; recallable: {}",
                        self.recall.join(", ")
                    ))
                }
            }
            Action::Todo { command } | Action::Schedule { command } => {
                if command.trim().is_empty() {
                    Err(format!("`{name}` needs a command (`list`, `add …`)"))
                } else {
                    Ok(())
                }
            }
            Action::AskUser { question } => {
                if question.trim().is_empty() {
                    Err("`ask_user` needs a non-empty `question`".to_owned())
                } else {
                    Ok(())
                }
            }
            Action::FinalAnswer { content } => {
                if content.trim().is_empty() {
                    Err("`final_answer` needs non-empty `content`".to_owned())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The `args` schema of one allowed action.
    pub(crate) fn args_schema(&self, name: &str) -> Value {
        let string = |max: usize| json!({"type": "string", "maxLength": max});
        match name {
            "select_skills" => json!({
                "type": "object",
                "properties": {"names": {
                    "type": "array",
                    "items": {"enum": self.select},
                    "minItems": 1,
                    "maxItems": self.max_select.max(1),
                }},
                "required": ["names"],
                "additionalProperties": false,
            }),
            "load_resource" => {
                let skills: Vec<&String> = self.load.iter().map(|(skill, _)| skill).collect();
                let mut paths: Vec<&String> =
                    self.load.iter().flat_map(|(_, files)| files).collect();
                // The files a skill's body names first (in the order it names them): a small
                // model takes the first choice of an enum.
                let rank = |path: &String| {
                    self.referenced.iter().position(|named| named == path).unwrap_or(usize::MAX)
                };
                paths.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
                paths.dedup();
                json!({
                    "type": "object",
                    "properties": {
                        "skill": {"enum": skills},
                        "path": {"enum": paths},
                        "section": string(120),
                    },
                    "required": ["skill", "path"],
                    "propertyOrdering": ["skill", "path", "section"],
                    "additionalProperties": false,
                })
            }
            "run_script" => {
                let skills: Vec<&String> = self.run.iter().map(|(skill, _)| skill).collect();
                let mut scripts: Vec<&String> =
                    self.run.iter().flat_map(|(_, scripts)| scripts).collect();
                scripts.sort();
                scripts.dedup();
                let arity = match (scripts.as_slice(), self.arities.as_slice()) {
                    ([_], [(_, _, arity)]) => Some(*arity),
                    _ => None,
                };
                run_script_schema(&skills, &scripts, arity)
            }
            "describe_tools" => json!({
                "type": "object",
                "properties": {"names": {
                    "type": "array",
                    "items": {"enum": self.describe},
                    "minItems": 1,
                    "maxItems": MAX_DESCRIBE,
                }},
                "required": ["names"],
                "additionalProperties": false,
            }),
            "call_tool" => self.call_tool_schema(),
            "recall_observation" => json!({
                "type": "object",
                "properties": {"id": {"enum": self.recall}},
                "required": ["id"],
                "additionalProperties": false,
            }),
            "todo" | "schedule" => json!({
                "type": "object",
                "properties": {"command": string(ARG_MAX)},
                "required": ["command"],
                "additionalProperties": false,
            }),
            "ask_user" => json!({
                "type": "object",
                "properties": {"question": string(ARG_MAX * 2)},
                "required": ["question"],
                "additionalProperties": false,
            }),
            _ => {
                let mut content = string(ANSWER_MAX);
                if self.answer_without_figures {
                    content["pattern"] = json!(if !self.admission_words.is_empty() {
                        admission_pattern(&self.admission_words)
                    } else if self.quote_free {
                        UNKNOWN_ANSWER_QUOTE_FREE.to_owned()
                    } else {
                        UNKNOWN_ANSWER.to_owned()
                    });
                }
                json!({
                    "type": "object",
                    "properties": {"content": content},
                    "required": ["content"],
                    "additionalProperties": false,
                })
            }
        }
    }

    /// A call to an external tool whose own arguments include `thought`: the thought
    /// [`crate::parse_answer`] took out goes back into its arguments.
    pub(crate) fn restore_tool_thought(&self, decision: &mut Decision) {
        let Action::CallTool { name, arguments } = &mut decision.action else { return };
        let own = self.call.iter().find(|tool| &tool.name == name).is_some_and(|tool| {
            tool.input_schema.get("properties").and_then(|p| p.get("thought")).is_some()
        });
        if let (true, Some(thought), Value::Object(map)) = (own, &decision.thought, arguments) {
            map.insert("thought".to_owned(), Value::String(thought.clone()));
        }
    }

    /// Whether native tool calling offers each callable external tool as a function of its
    /// own (few tools, all named `mcp__…`, so that their calls cannot be taken for actions).
    pub(crate) fn external_functions(&self) -> bool {
        self.call.len() <= MAX_OWN_FUNCTIONS
            && self.call.iter().all(|tool| tool.name.starts_with(EXTERNAL_PREFIX))
    }

    /// `call_tool`'s arguments: one variant per tool (its name and its own input schema) when
    /// there are few, else a name from the enum and any object (checked after the answer).
    fn call_tool_schema(&self) -> Value {
        let variant = |name: Value, arguments: Value| {
            json!({
                "type": "object",
                "properties": {"name": name, "arguments": arguments},
                "required": ["name", "arguments"],
                "propertyOrdering": ["name", "arguments"],
                "additionalProperties": false,
            })
        };
        if self.call.len() > MAX_OWN_FUNCTIONS {
            let names: Vec<&str> = self.call.iter().map(|tool| tool.name.as_str()).collect();
            return variant(json!({"enum": names}), json!({"type": "object"}));
        }
        let variants: Vec<Value> = self
            .call
            .iter()
            .map(|tool| variant(json!({"const": tool.name}), tool.input_schema.clone()))
            .collect();
        if variants.len() == 1 {
            return variants.into_iter().next().unwrap_or(Value::Null);
        }
        json!({"anyOf": variants})
    }

    fn plan_property(&self) -> Option<(&'static str, Value)> {
        let step = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "maxLength": 8},
                "title": {"type": "string", "maxLength": 120},
                "status": {"enum": ["pending", "in_progress", "done", "skipped"]},
            },
            "required": ["id", "title", "status"],
            "additionalProperties": false,
        });
        match self.plan_field {
            PlanField::None => None,
            PlanField::Plan => Some((
                "plan",
                json!({
                    "type": "object",
                    "properties": {
                        "goal": {"type": "string", "maxLength": 200},
                        "steps": {"type": "array", "items": step, "minItems": 1, "maxItems": 6},
                    },
                    "required": ["goal", "steps"],
                    "additionalProperties": false,
                }),
            )),
            PlanField::PlanUpdate => Some((
                "plan_update",
                json!({
                    "type": "object",
                    "properties": {
                        "update": {"type": "array", "maxItems": 6, "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "maxLength": 8},
                                "status": {"enum": ["pending", "in_progress", "done", "skipped"]},
                            },
                            "required": ["id", "status"],
                            "additionalProperties": false,
                        }},
                        "add": {"type": "array", "items": step, "maxItems": 3},
                    },
                    "additionalProperties": false,
                }),
            )),
        }
    }

    /// The `args` schemas of `run_script` in JSON mode: one per script when several are on
    /// offer and some have a usage (each held to its own argument count), else the one.
    fn run_script_variants(&self) -> Vec<Value> {
        let offered: Vec<(&String, &String)> = self
            .run
            .iter()
            .flat_map(|(skill, scripts)| scripts.iter().map(move |script| (skill, script)))
            .collect();
        if offered.len() < 2 || self.arities.is_empty() || offered.len() > MAX_SCRIPT_VARIANTS {
            return vec![self.args_schema("run_script")];
        }
        offered
            .into_iter()
            .map(|(skill, script)| {
                let arity = self
                    .arities
                    .iter()
                    .find(|(s, p, _)| s == skill && p == script)
                    .map(|(_, _, arity)| *arity);
                run_script_schema(&[skill], &[script], arity)
            })
            .collect()
    }

    /// The JSON Schema of the turn's structured answer ([`DecideMode::Json`](crate::DecideMode::Json)).
    pub(crate) fn json_schema(&self) -> Value {
        let variant = |name: &str, args: Value| {
            json!({
                "type": "object",
                "properties": {"type": {"const": name}, "args": args},
                "required": ["type", "args"],
                // The name first: the runtime knows the action as soon as it is written.
                "propertyOrdering": ["type", "args"],
                "additionalProperties": false,
            })
        };
        let variants: Vec<Value> = self
            .allowed()
            .into_iter()
            .flat_map(|name| match name {
                "run_script" => self
                    .run_script_variants()
                    .into_iter()
                    .map(|args| variant(name, args))
                    .collect::<Vec<_>>(),
                _ => vec![variant(name, self.args_schema(name))],
            })
            .collect();
        let action = if variants.len() == 1 {
            variants.into_iter().next().unwrap_or(Value::Null)
        } else {
            json!({"anyOf": variants})
        };
        let mut properties = Map::new();
        let mut thought = json!({"type": "string", "maxLength": THOUGHT_MAX});
        if self.thought_without_figures {
            thought["pattern"] = json!(NO_FIGURES);
        }
        properties.insert("thought".into(), thought);
        properties.insert("action".into(), action);
        let mut order = vec!["thought", "action"];
        if let Some((name, schema)) = self.plan_property() {
            properties.insert(name.into(), schema);
            order.push(name);
        }
        // Think-Act: the thought is written before the action (model-adapter sends the
        // properties in this order; a grammar then asks for the reason first).
        json!({
            "type": "object",
            "properties": properties,
            "required": ["thought", "action"],
            "propertyOrdering": order,
            "additionalProperties": false,
        })
    }

    /// The turn's tools ([`DecideMode::Tools`](crate::DecideMode::Tools)): one per allowed
    /// action, each also taking an optional `thought` and the turn's plan field.
    pub(crate) fn tools(&self) -> Vec<Tool> {
        let own_functions = self.external_functions();
        let mut tools: Vec<Tool> = self
            .allowed()
            .into_iter()
            .filter(|name| !(own_functions && *name == "call_tool"))
            .map(|name| {
                let mut parameters = self.args_schema(name);
                if let Some(properties) =
                    parameters.get_mut("properties").and_then(Value::as_object_mut)
                {
                    properties.insert(
                        "thought".into(),
                        json!({"type": "string", "maxLength": THOUGHT_MAX,
                               "description": "why this action, in a sentence"}),
                    );
                    if let Some((field, schema)) = self.plan_property() {
                        properties.insert(field.into(), schema);
                    }
                }
                // The thought before the arguments (native tool callers that keep order).
                if let Some(object) = parameters.as_object_mut() {
                    let mut order = vec![json!("thought")];
                    if let Some(Value::Array(names)) = object.get(model_adapter::PROPERTY_ORDERING)
                    {
                        order.extend(names.iter().cloned());
                    }
                    object.insert(model_adapter::PROPERTY_ORDERING.into(), Value::Array(order));
                }
                Tool {
                    name: name.to_owned(),
                    description: tool_description(name).to_owned(),
                    parameters,
                }
            })
            .collect();
        if own_functions {
            // Each callable external tool as a function of its own, with its own schema (its
            // arguments are the tool's: no `thought` is added to them). Before `final_answer`.
            let at = tools.len().saturating_sub(1);
            let external = self.call.iter().map(|tool| {
                let mut parameters = tool.input_schema.clone();
                // A `thought` first, unless the tool has an argument of that name (Think-Act).
                if let Some(object) = parameters.as_object_mut()
                    && let Some(Value::Object(properties)) = object.get_mut("properties")
                    && !properties.contains_key("thought")
                {
                    let mut order = vec![json!("thought")];
                    order.extend(properties.keys().map(|name| json!(name)));
                    properties.insert(
                        "thought".into(),
                        json!({"type": "string", "maxLength": THOUGHT_MAX,
                               "description": "why this call, in a sentence"}),
                    );
                    object.insert(model_adapter::PROPERTY_ORDERING.into(), Value::Array(order));
                }
                Tool {
                    name: tool.name.clone(),
                    description: short_description(&tool.description, 300),
                    parameters,
                }
            });
            tools.splice(at..at, external);
        }
        tools
    }
}

fn names_of(entries: &[(String, Vec<String>)]) -> String {
    let names: Vec<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// What each action does, as the model reads it.
pub(crate) fn tool_description(name: &str) -> &'static str {
    match name {
        "select_skills" => "Load the instructions (SKILL.md) of a skill from the catalog.",
        "load_resource" => {
            "Read a file of a selected skill (reference, asset), whole or one section."
        }
        "run_script" => {
            "Run a script of a selected skill in the sandbox; returns exit code and output."
        }
        "recall_observation" => {
            "Show again the full text of an earlier observation that was shortened."
        }
        "describe_tools" => {
            "Show the description and arguments of external tools the catalog only names."
        }
        "call_tool" => "Call an external (MCP) tool with arguments that fit its schema.",
        "todo" => "The user's to-do list: `list`, `add TEXT`, `done N`, `remove N`.",
        "schedule" => "The user's schedule: `list`, `add WHEN :: WHAT`, `remove N`.",
        "ask_user" => "Ask the user one question when the task cannot go on without their answer.",
        _ => "Answer the user and end the run.",
    }
}

#[cfg(test)]
mod tests {
    use model_adapter::{Response, ToolCall};
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::action::parse_answer;
    use crate::state::ActionRecord;

    #[test]
    fn after_a_result_only_skills_for_what_is_still_open_are_offered() {
        let entry = |name: &str, description: &str| json!({"name": name, "description": description, "source": "project", "directory": "d"});
        let mut state: RunState = serde_json::from_value(json!({
            "run_id": "r", "task": "How many units were sold in total according to sales.csv?",
            "catalog": [
                entry("csv-summary", "Summarise a CSV file: the total, mean of each column."),
                entry("unit-converter", "Convert a value between units of length or mass."),
                entry("file-finder", "Find files by name or content."),
            ],
            "selected": [{"name": "csv-summary", "scripts": ["scripts/s.py"], "resources": []}],
            "actions": [], "counters": {}, "reasoning": {}
        }))
        .unwrap();
        let config = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
        // Before a result: the converter shares "units" with the task.
        assert_eq!(action_space(&state, &config, SpaceRules::current()).select, ["unit-converter"]);
        // The summary printed a column `units`: nothing is left open for it.
        state.result_words.extend(words("column units: numeric, 20 values; units sum: 212"));
        assert_eq!(
            action_space(&state, &config, SpaceRules::current()).select,
            Vec::<String>::new()
        );
        // A task with a step the results do not cover still offers its skill.
        state.task = "Total the amount column of sales.csv and convert 5 miles to km".into();
        assert_eq!(action_space(&state, &config, SpaceRules::current()).select, ["unit-converter"]);
        // Native tool callers see every skill, ranked, as before.
        let tools = AgentConfig { decide: DecideMode::Tools, ..AgentConfig::default() };
        assert_eq!(action_space(&state, &tools, SpaceRules::current()).select.len(), 2);
        // Adding two results up is the answer's work (format 9), not a slide deck's.
        state.catalog.push(
            serde_json::from_value(entry("slide-deck", "Create slides: add a slide per topic."))
                .unwrap(),
        );
        state.task = "Add the total of the amount column to the total of units: the sum?".into();
        state.result_words.extend(words("amount sum: 1705.47"));
        assert_eq!(
            action_space(&state, &config, SpaceRules::current()).select,
            Vec::<String>::new()
        );
        let format_8 = SpaceRules { format: 8, ungrounded_refused: false, narrows_first: true };
        assert_eq!(action_space(&state, &config, format_8).select, ["slide-deck"]);
    }

    #[test]
    fn a_sure_ranking_offers_its_best_skill_alone_at_first() {
        let entry = |name: &str, description: &str| json!({"name": name, "description": description, "source": "project", "directory": "d"});
        let mut state: RunState = serde_json::from_value(json!({
            "run_id": "r", "task": "How many ERROR and WARN lines does app.log have?",
            "catalog": [
                entry("csv-summary", "Summarise a CSV file: how many rows, the total of a column."),
                entry("log-analyzer", "Count the ERROR, WARN and INFO lines of a log file."),
                entry("regex-helper", "Test a regular expression against lines of text."),
            ],
            "selected": [], "actions": [], "counters": {}, "reasoning": {}
        }))
        .unwrap();
        let config = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
        let scored = scored_skills(&state);
        assert!(scored[0].0 >= SURE_RATIO * scored[1].0, "{scored:?}");
        assert_eq!(action_space(&state, &config, SpaceRules::current()).select, ["log-analyzer"]);
        // From format 32 the runtime makes that selection itself (format 31: the model did).
        assert!(action_space(&state, &config, SpaceRules::current()).sure);
        let format_31 = SpaceRules { format: 31, ..SpaceRules::current() };
        assert_eq!(action_space(&state, &config, format_31).select, ["log-analyzer"]);
        assert!(!action_space(&state, &config, format_31).sure);
        // With the counts in, "in total" asks nothing of another skill (format 32): the
        // summary's "total" is the answer's own arithmetic.
        let mut counted = state.clone();
        counted.task = "How many ERROR and WARN lines does app.log have in total?".into();
        counted.selected = serde_json::from_value(
            json!([{"name": "log-analyzer", "scripts": ["scripts/levels.py"], "resources": []}]),
        )
        .unwrap();
        counted.result_words.extend(words("ERROR: 3\nWARN: 2\nINFO: 3"));
        counted.catalog.push(
            serde_json::from_value(entry(
                "regex-helper-2",
                "Test regular expressions: why a pattern does not match.",
            ))
            .unwrap(),
        );
        assert_eq!(
            action_space(&counted, &config, SpaceRules::current()).select,
            Vec::<String>::new()
        );
        assert_eq!(
            action_space(&counted, &config, format_31).select,
            ["csv-summary", "regex-helper-2"],
            "\"does\" was open too"
        );
        // Before format 31, the safe strategy (its SOP lookup picks among the offer), or native
        // tool callers: the best few that share a word with the task, ranked (all, for tools).
        let format_30 = SpaceRules { format: 30, ungrounded_refused: false, narrows_first: true };
        let safe = SpaceRules { narrows_first: false, ..SpaceRules::current() };
        for rules in [format_30, safe] {
            let offer = action_space(&state, &config, rules).select;
            assert_eq!(offer, ["log-analyzer", "regex-helper"], "{rules:?}");
        }
        let tools = AgentConfig { decide: DecideMode::Tools, ..AgentConfig::default() };
        assert_eq!(action_space(&state, &tools, SpaceRules::current()).select.len(), 3);
        // A ranking that is not sure offers the best few, and the model chooses.
        state.task = "How many lines of text does app.log have?".into();
        assert!(action_space(&state, &config, SpaceRules::current()).select.len() > 1);
        assert!(!action_space(&state, &config, SpaceRules::current()).sure);
    }

    #[test]
    fn a_plan_is_offered_with_the_first_action_only() {
        let mut state: RunState = serde_json::from_value(json!({
            "run_id": "r", "task": "Convert 5 miles to km",
            "catalog": [],
            "selected": [{"name": "unit-converter", "scripts": ["scripts/convert.py"], "resources": []}],
            "actions": [], "counters": {}, "reasoning": {}
        }))
        .unwrap();
        let config = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
        let plan = |state: &RunState, rules| action_space(state, &config, rules).plan_field;
        assert_eq!(plan(&state, SpaceRules::current()), PlanField::Plan);
        state.actions.push(ActionRecord {
            turn: 1,
            action: Some(Action::RunScript {
                skill: "unit-converter".into(),
                script: "scripts/convert.py".into(),
                args: vec!["5".into(), "miles".into(), "km".into()],
            }),
            status: ObservationStatus::Ok,
            observation: "obs-1".into(),
        });
        assert_eq!(plan(&state, SpaceRules::current()), PlanField::None);
        // Format 27 offered it until one was sent.
        let format_27 = SpaceRules { format: 27, ungrounded_refused: false, narrows_first: true };
        assert_eq!(plan(&state, format_27), PlanField::Plan);
        // A plan sent: its updates stay on offer.
        state.plan = Some(serde_json::from_value(json!({"goal": "g", "steps": []})).unwrap());
        assert_eq!(plan(&state, SpaceRules::current()), PlanField::PlanUpdate);
    }

    #[test]
    fn after_a_batch_item_the_note_names_the_values_no_call_has_used() {
        let convert = |turn: u32, args: [&str; 3]| ActionRecord {
            turn,
            action: Some(Action::RunScript {
                skill: "unit-converter".into(),
                script: "scripts/convert.py".into(),
                args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            }),
            status: ObservationStatus::Ok,
            observation: format!("obs-{turn}"),
        };
        let mut state: RunState = serde_json::from_value(json!({
            "run_id": "r", "task": "Convert: 5 miles to km; 72 F to C; 2 lb to oz",
            "catalog": [],
            "selected": [{"name": "unit-converter", "scripts": ["scripts/convert.py"], "resources": []}],
            "actions": [], "counters": {}, "reasoning": {}
        }))
        .unwrap();
        state.actions = vec![convert(2, ["5", "miles", "km"])];
        let config = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
        let note = action_space(&state, &config, SpaceRules::current()).note.unwrap();
        assert!(
            note.contains("The task also gives 72, 2, which no script call has used"),
            "{note}"
        );
        // Format 12: the answer is invited.
        let format_12 = SpaceRules { format: 12, ungrounded_refused: false, narrows_first: true };
        let note = action_space(&state, &config, format_12).note.unwrap();
        assert!(note.contains("answer if it is enough"), "{note}");
        // Every value used: the batch is done.
        state.actions.extend([convert(3, ["72", "F", "C"]), convert(4, ["2", "lb", "oz"])]);
        let note = action_space(&state, &config, SpaceRules::current()).note.unwrap();
        assert!(note.contains("every value the task gives has its result now"), "{note}");
        // One value, used: no batch.
        state.task = "Convert 5 miles to km".into();
        state.actions.truncate(1);
        let note = action_space(&state, &config, SpaceRules::current()).note.unwrap();
        assert!(note.contains("answer if it is enough"), "{note}");
        // No value of the task used yet (a file's summary): no batch to name.
        state.task = "Summarise sales.csv for 2024 and 2025".into();
        state.actions = vec![convert(2, ["sales.csv", "a", "b"])];
        let note = action_space(&state, &config, SpaceRules::current()).note.unwrap();
        assert!(note.contains("answer if it is enough"), "{note}");
    }

    #[test]
    fn after_a_repeat_the_skill_for_what_is_still_open_is_offered() {
        let entry = |name: &str, description: &str| json!({"name": name, "description": description, "source": "project", "directory": "d"});
        let summary = ActionRecord {
            turn: 2,
            action: Some(Action::RunScript {
                skill: "csv-summary".into(),
                script: "scripts/s.py".into(),
                args: vec!["sales.csv".into()],
            }),
            status: ObservationStatus::Ok,
            observation: "obs-2".into(),
        };
        let mut state: RunState = serde_json::from_value(json!({
            "run_id": "r", "task": "Total the amount column of sales.csv and convert 5 miles to km",
            "catalog": [
                entry("csv-summary", "Summarise a CSV file: the total, mean of each column."),
                entry("unit-converter", "Convert a value between units of length or mass."),
            ],
            "selected": [{"name": "csv-summary", "scripts": ["scripts/s.py"], "resources": []}],
            "actions": [], "counters": {}, "reasoning": {}
        }))
        .unwrap();
        state.result_words.extend(words("column amount: numeric; amount sum: 1705.47"));
        state.actions =
            vec![summary.clone(), ActionRecord { turn: 3, observation: "obs-3".into(), ..summary }];
        let config = AgentConfig { decide: DecideMode::Json, ..AgentConfig::default() };
        // The summary ran twice while "convert" has no result: the converter is offered.
        let space = action_space(&state, &config, SpaceRules::current());
        assert_eq!(space.select, ["unit-converter"]);
        assert!(space.note.unwrap().contains("select unit-converter for it, or answer now"));
        assert!(space.run.is_empty());
        // Format 9: only the answer.
        let format_9 = SpaceRules { format: 9, ungrounded_refused: false, narrows_first: true };
        assert!(action_space(&state, &config, format_9).select.is_empty());
        // Nothing open: only the answer.
        state.task = "Total the amount column of sales.csv".into();
        assert!(action_space(&state, &config, SpaceRules::current()).select.is_empty());
    }

    #[test]
    fn each_script_with_a_usage_gets_its_own_argument_count_in_json_mode() {
        let run = |skill: &str, script: &str| (skill.to_owned(), vec![script.to_owned()]);
        let mut space = ActionSpace {
            run: vec![run("csv", "scripts/sum.py"), run("finder", "scripts/find.py")],
            arities: vec![("finder".into(), "scripts/find.py".into(), [1, 2])],
            ..ActionSpace::default()
        };
        let variants = space.json_schema()["properties"]["action"]["anyOf"].clone();
        let scripts: Vec<(Value, Value)> = variants
            .as_array()
            .unwrap()
            .iter()
            .filter(|variant| variant["properties"]["type"]["const"] == "run_script")
            .map(|variant| {
                let args = &variant["properties"]["args"]["properties"];
                (args["script"]["enum"].clone(), args["args"]["maxItems"].clone())
            })
            .collect();
        assert_eq!(
            scripts,
            [(json!(["scripts/sum.py"]), json!(8)), (json!(["scripts/find.py"]), json!(3))]
        );
        // Tools: one run_script, its args held only when one script is on offer.
        assert_eq!(space.args_schema("run_script")["properties"]["args"]["maxItems"], json!(8));
        space.run.truncate(1);
        space.run[0] = run("finder", "scripts/find.py");
        let args = &space.args_schema("run_script")["properties"]["args"];
        assert_eq!((&args["minItems"], &args["maxItems"]), (&json!(1), &json!(3)));
    }

    #[test]
    fn files_a_skill_names_are_offered_first() {
        let space = ActionSpace {
            load: vec![(
                "notes".to_owned(),
                vec![
                    "LICENSE.txt".to_owned(),
                    "assets/a.md".to_owned(),
                    "references/r.md".to_owned(),
                ],
            )],
            referenced: vec!["references/r.md".to_owned()],
            ..ActionSpace::default()
        };
        let schema = space.args_schema("load_resource");
        assert_eq!(
            schema["properties"]["path"]["enum"],
            json!(["references/r.md", "LICENSE.txt", "assets/a.md"])
        );
    }

    #[test]
    fn only_words_that_say_what_a_task_is_about_count() {
        assert_eq!(
            words("Convert each of these: 5 miles to km; 1 TB to GiB."),
            ["convert", "miles", "gib"]
        );
        // The boilerplate of skill descriptions.
        assert_eq!(
            words("Use when a task asks for the total of a column in a CSV file."),
            ["total", "column", "csv", "file"]
        );
    }

    #[test]
    fn external_tools_are_functions_of_their_own_only_when_few_and_prefixed() {
        let tool = |name: &str| ExternalTool {
            name: name.to_owned(),
            description: "Adds.".to_owned(),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}),
            decision: tools_runtime::Decision::Allow,
            timeout: None,
        };
        let names = |space: &ActionSpace| -> Vec<String> {
            space.tools().into_iter().map(|tool| tool.name).collect()
        };
        let mut space =
            ActionSpace { call: vec![tool("mcp__calc__add")], ..ActionSpace::default() };
        assert_eq!(names(&space), vec!["mcp__calc__add", "final_answer"]);
        // A tool with an argument named `thought` keeps it: parse takes it out, restore puts it back.
        let mut own = tool("mcp__calc__note");
        own.input_schema = json!({"type": "object", "properties": {"thought": {"type": "string"}}});
        let with_own = ActionSpace { call: vec![own], ..ActionSpace::default() };
        assert_eq!(with_own.tools()[0].parameters.get("propertyOrdering"), None);
        let response = Response {
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "mcp__calc__note".into(),
                arguments: json!({"thought": "remember"}),
            }],
            ..Response::default()
        };
        let mut decision = parse_answer(&response, true).unwrap();
        assert_eq!(decision.thought.as_deref(), Some("remember"));
        with_own.restore_tool_thought(&mut decision);
        assert_eq!(
            decision.action,
            Action::CallTool {
                name: "mcp__calc__note".into(),
                arguments: json!({"thought": "remember"})
            }
        );
        let call = |arguments: Value| Action::CallTool { name: "mcp__calc__add".into(), arguments };
        assert!(space.check(&call(json!({"a": 1}))).is_ok());
        assert!(
            space.check(&call(json!({}))).unwrap_err().contains("\"a\" is a required property")
        );
        space.call = vec![tool("final_answer_tool")];
        assert_eq!(names(&space), vec!["call_tool", "final_answer"]);
        space.call = (0..=MAX_OWN_FUNCTIONS).map(|n| tool(&format!("mcp__s__t{n}"))).collect();
        assert_eq!(names(&space), vec!["call_tool", "final_answer"]);
        let schema = space.args_schema("call_tool");
        assert_eq!(
            schema["properties"]["name"]["enum"].as_array().unwrap().len(),
            MAX_OWN_FUNCTIONS + 1
        );
    }

    #[test]
    fn an_admission_may_quote_the_tasks_words_with_digits() {
        let task = "What is the SHA-256 of sales-2024.csv, (v2) and 42? And of sales-2024.csv?";
        let words = task_words_with_digits(task);
        assert_eq!(words, ["SHA-256", "sales-2024.csv", "v2"]);
        assert_eq!(
            admission_pattern(&words),
            r#"^I (cannot|could not|do not know)([^0-9"]|SHA-256|sales-2024\.csv|v2){0,400}$"#
        );
        assert_eq!(task_words_with_digits("Convert 20 C to F"), Vec::<String>::new());
        let space = ActionSpace {
            answer_without_figures: true,
            quote_free: true,
            admission_words: words,
            ..ActionSpace::default()
        };
        let content = &space.json_schema()["properties"]["action"]["properties"]["args"]["properties"]
            ["content"];
        assert!(content["pattern"].as_str().unwrap().contains("|SHA-256|"), "{content}");
    }

    #[test]
    fn an_admission_without_figures_holds_the_thought_too_when_asked() {
        let admission = ActionSpace { answer_without_figures: true, ..ActionSpace::default() };
        let schema = admission.json_schema();
        assert_eq!(schema["properties"]["thought"].get("pattern"), None);
        assert_eq!(
            schema["properties"]["action"]["properties"]["args"]["properties"]["content"]["pattern"],
            json!(UNKNOWN_ANSWER)
        );
        let held = ActionSpace { thought_without_figures: true, quote_free: true, ..admission };
        let schema = held.json_schema();
        assert_eq!(schema["properties"]["thought"]["pattern"], json!(NO_FIGURES));
        assert_eq!(
            schema["properties"]["action"]["properties"]["args"]["properties"]["content"]["pattern"],
            json!(UNKNOWN_ANSWER_QUOTE_FREE)
        );
    }

    #[test]
    fn the_space_refuses_what_it_does_not_offer() {
        let space = ActionSpace {
            select: vec!["csv".into()],
            max_select: 1,
            run: vec![("csv".into(), vec!["scripts/sum.py".into()])],
            ..ActionSpace::default()
        };
        assert_eq!(space.allowed(), vec!["select_skills", "run_script", "final_answer"]);
        assert!(space.check(&Action::SelectSkills { names: vec!["csv".into()] }).is_ok());
        let error = space
            .check(&Action::RunScript {
                skill: "csv".into(),
                script: "data.csv".into(),
                args: vec![],
            })
            .unwrap_err();
        assert!(error.contains("not a script of skill `csv`"), "{error}");
        let error = space
            .check(&Action::LoadResource { skill: "csv".into(), path: "x".into(), section: None })
            .unwrap_err();
        assert!(error.contains("not allowed now"), "{error}");
        let schema = space.json_schema();
        assert_eq!(schema["properties"]["action"]["anyOf"].as_array().unwrap().len(), 3);
    }
}
