//! A scenario: a task over the bundled skills, a scripted model per strategy, budgets, and a
//! checker that judges a run from what it left behind (its events and the workspace).

use model_adapter::{Delta, FinishReason, MockReply};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skills_agent_core::{Budgets, Event, Payload};

/// What a scenario exercises (the report groups by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// One skill, one script.
    OneSkill,
    /// Several skills in one task.
    MultiSkill,
    /// Many independent steps (where planned batches save model calls).
    Batchable,
    /// The task needs an answer from the user.
    Clarification,
    /// A script fails; the agent recovers or gives up cleanly.
    FailingScript,
    /// A budget runs out; the run ends with a degraded answer.
    BudgetExhaustion,
    /// The model's answer is not a valid action.
    MalformedOutput,
    /// The model tries what it may not (an unknown skill, a script before its skill).
    DisallowedSkill,
    /// The model acts without saying why.
    SilentCalls,
    /// The model reasons before each call (text or thinking).
    Reasoned,
    /// No installed skill can answer: the honest answer says so, with no invented value.
    Unanswerable,
    /// The key fact is only in a skill's reference file.
    Reference,
}

impl Category {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::OneSkill => "one_skill",
            Category::MultiSkill => "multi_skill",
            Category::Batchable => "batchable",
            Category::Clarification => "clarification",
            Category::FailingScript => "failing_script",
            Category::BudgetExhaustion => "budget_exhaustion",
            Category::MalformedOutput => "malformed_output",
            Category::DisallowedSkill => "disallowed_skill",
            Category::SilentCalls => "silent_calls",
            Category::Reasoned => "reasoned",
            Category::Unanswerable => "unanswerable",
            Category::Reference => "reference",
        }
    }
}

/// A call the run must have made (BFCL-style): an action of this type, executed with status
/// `ok`, whose arguments hold every key of `args` with exactly that value (with `prefix`, a list may go
/// on after the expected items: `["sales.csv"]` accepts `["sales.csv", "amount"]`). Like
/// BFCL's possible answers, an expected value may be `{"any_of": [A, B, …]}`: any of them
/// holds (a unit's other names: `mi`, `mile`, `miles`); see [`any_of`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedCall {
    /// The action type (`run_script`, `select_skills`, …).
    pub action: String,
    /// The arguments that must match (a subset of the call's arguments).
    pub args: Value,
    /// Whether an expected list only has to start the actual one.
    #[serde(default)]
    pub prefix: bool,
}

/// How a run of the scenario is judged. Every part must hold for success.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// The outcome the run must end with (`completed`, `max_turns`, `needs_input`, …).
    pub outcome: String,
    /// Facts the final text must contain.
    pub facts: Vec<String>,
    /// Workspace files that must exist after the run, with text each must contain.
    pub files: Vec<(String, String)>,
    /// Calls that must have been executed.
    pub calls: Vec<ExpectedCall>,
    /// Action types that must never have been executed with status `ok`.
    pub never_ok: Vec<String>,
    /// The answer must admit that it cannot tell ("cannot", "unable", "unknown"…) and be
    /// grounded: no value taken after a refusal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admits: bool,
}

/// Words an answer that cannot tell uses (lower case).
const ADMISSIONS: [&str; 9] = [
    "cannot",
    "can't",
    "can not",
    "could not",
    "couldn't",
    "unable",
    "unknown",
    "not able",
    "do not know",
];

impl Check {
    /// A run that completes with an answer holding `facts`.
    pub fn completed(facts: &[&str]) -> Check {
        Check::ends(skills_agent_core::Outcome::Completed, facts)
    }

    /// A run that ends with `outcome` and a final text holding `facts`.
    pub fn ends(outcome: skills_agent_core::Outcome, facts: &[&str]) -> Check {
        Check {
            outcome: outcome.as_str().to_owned(),
            facts: facts.iter().map(|fact| (*fact).to_owned()).collect(),
            files: Vec::new(),
            calls: Vec::new(),
            never_ok: Vec::new(),
            admits: false,
        }
    }

    /// A run that completes with an answer that admits it cannot tell, or stops (a budget,
    /// stuck) with a text that does (see [`Check::admits`]).
    pub fn admits() -> Check {
        Check { admits: true, ..Check::completed(&[]) }
    }

    /// Requires an executed `action` whose arguments hold `args`.
    pub fn call(mut self, action: &str, args: Value) -> Check {
        self.calls.push(ExpectedCall { action: action.to_owned(), args, prefix: false });
        self
    }

    /// Requires `run_script SKILL SCRIPT` with arguments that start with `args` (an optional
    /// argument the skill allows may follow).
    pub fn script_starting(mut self, skill: &str, script: &str, args: &[&str]) -> Check {
        self.calls.push(ExpectedCall {
            action: "run_script".to_owned(),
            args: json!({"skill": skill, "script": script, "args": args}),
            prefix: true,
        });
        self
    }

    /// Requires `run_script SKILL SCRIPT ARGS…` to have been executed.
    pub fn script(self, skill: &str, script: &str, args: &[&str]) -> Check {
        self.call("run_script", json!({"skill": skill, "script": script, "args": args}))
    }

    /// Requires that `action` never succeeded.
    pub fn never_ok(mut self, action: &str) -> Check {
        self.never_ok.push(action.to_owned());
        self
    }

    /// The skills the task needs: the `skill` of each call the check expects, in order, each
    /// once (empty for a task no skill answers).
    pub fn needed_skills(&self) -> Vec<String> {
        let mut skills: Vec<String> = Vec::new();
        for call in &self.calls {
            if let Some(skill) = call.args.get("skill").and_then(Value::as_str)
                && !skills.iter().any(|known| known == skill)
            {
                skills.push(skill.to_owned());
            }
        }
        skills
    }

    /// Requires the workspace file `path` to exist and contain `text`.
    pub fn file(mut self, path: &str, text: &str) -> Check {
        self.files.push((path.to_owned(), text.to_owned()));
        self
    }

    /// What fails in a run: its events and the workspace it ran in. Empty when it passes. A
    /// figure counts where the answer writes it whole: `20` is not in `2026`, nor `212` in
    /// `2120`; a decimal may go on with more digits (`6.213711922` in `6.2137119224`).
    pub fn failures(&self, events: &[Event], workspace: &std::path::Path) -> Vec<String> {
        let mut failures = Vec::new();
        let Some(finished) = skills_agent_core::last_finished(events) else {
            return vec!["the run has no run_finished event".to_owned()];
        };
        let outcome = finished.outcome.as_str();
        // A task no skill can answer may also end degraded (exit code 3: a budget, stuck),
        // as long as the text admits it: the issue's "exit 0 with that answer, or 3". A run
        // the bench cancelled, or one whose model failed, is no answer.
        let admitted_stop = self.admits
            && finished.outcome.is_degraded()
            && !matches!(
                finished.outcome,
                skills_agent_core::Outcome::Cancelled | skills_agent_core::Outcome::Error
            );
        if outcome != self.outcome && !admitted_stop {
            failures.push(format!("outcome {outcome}, expected {}", self.outcome));
        }
        let final_text = finished.final_text.as_str();
        for fact in &self.facts {
            if !states(final_text, fact) {
                failures.push(format!("the answer lacks `{fact}`"));
            }
        }
        if self.admits {
            let lower = final_text.to_lowercase();
            if !ADMISSIONS.iter().any(|words| lower.contains(words)) {
                failures.push("the answer does not say that it cannot tell".to_owned());
            }
            if !finished.grounded {
                failures.push("the answer states a value nothing in the run shows".to_owned());
            }
        }
        for (path, text) in &self.files {
            match std::fs::read_to_string(workspace.join(path)) {
                Ok(content) if content.contains(text.as_str()) => {}
                Ok(_) => failures.push(format!("{path} lacks `{text}`")),
                Err(_) => failures.push(format!("{path} was not produced")),
            }
        }
        // Each executed action as its JSON (`{type, args}`), which the expectations match.
        let executed: Vec<(Value, &str)> = events
            .iter()
            .filter_map(|event| match event.payload() {
                Ok(Payload::ActionExecuted(executed)) => Some((
                    serde_json::to_value(&executed.action).unwrap_or_default(),
                    executed.status.as_str(),
                )),
                _ => None,
            })
            .collect();
        for expected in &self.calls {
            // A call that failed does not count: a script run with a wrong column must not
            // pass the check of the run with the right one that its prefix matches.
            let found = executed.iter().any(|(action, status)| {
                *status == "ok"
                    && action.get("type").and_then(Value::as_str) == Some(expected.action.as_str())
                    && holds(
                        action.get("args").unwrap_or(&Value::Null),
                        &expected.args,
                        expected.prefix,
                    )
            });
            if !found {
                failures.push(format!(
                    "no successful {} call with {}",
                    expected.action,
                    brief(&expected.args)
                ));
            }
        }
        for forbidden in &self.never_ok {
            if executed.iter().any(|(action, status)| {
                action.get("type").and_then(Value::as_str) == Some(forbidden.as_str())
                    && *status == "ok"
            }) {
                failures.push(format!("{forbidden} succeeded, which it must not"));
            }
        }
        failures
    }
}

/// The key of an expected value that accepts any of several values.
const ANY_OF: &str = "any_of";

/// An expected argument value that holds when the actual one holds any of `alternatives`
/// (BFCL's list of possible answers for one parameter).
pub fn any_of<I, T>(alternatives: I) -> Value
where
    I: IntoIterator<Item = T>,
    T: Into<Value>,
{
    json!({ ANY_OF: alternatives.into_iter().map(Into::into).collect::<Vec<Value>>() })
}

/// The alternatives of an [`any_of`] value (none when its `any_of` is no list); `None` for any
/// other value, an object with keys beside `any_of` included.
fn alternatives(expected: &Value) -> Option<&[Value]> {
    match expected {
        Value::Object(map) if map.len() == 1 => {
            map.get(ANY_OF).map(|list| list.as_array().map_or(&[][..], Vec::as_slice))
        }
        _ => None,
    }
}

/// `expected` for a reader: each [`any_of`] shown as its first alternative, marked `|…` when
/// there are others (`["12", "mi|…", "km|…"]`).
fn brief(expected: &Value) -> Value {
    if let Some(alternatives) = alternatives(expected) {
        return match alternatives {
            [] => json!("(nothing)"),
            [only] => brief(only),
            [first, ..] => match brief(first) {
                Value::String(text) => Value::String(format!("{text}|…")),
                other => other,
            },
        };
    }
    match expected {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(key, value)| (key.clone(), brief(value))).collect())
        }
        Value::Array(items) => items.iter().map(brief).collect(),
        other => other.clone(),
    }
}

/// Whether `actual` holds every key of `expected` with the same value (objects), holds every
/// item of an expected list in order, holds one of an [`any_of`]'s alternatives, or equals it.
/// With `prefix`, an expected list holds when it starts the actual list.
fn holds(actual: &Value, expected: &Value, prefix: bool) -> bool {
    if let Some(alternatives) = alternatives(expected) {
        return alternatives.iter().any(|alternative| holds(actual, alternative, prefix));
    }
    match (expected, actual) {
        (Value::Object(expected), _) => expected
            .iter()
            .all(|(key, value)| actual.get(key).is_some_and(|actual| holds(actual, value, prefix))),
        (Value::Array(expected), Value::Array(actual)) => {
            let lengths_fit = if prefix {
                actual.len() >= expected.len()
            } else {
                actual.len() == expected.len()
            };
            lengths_fit
                && expected
                    .iter()
                    .zip(actual)
                    .all(|(expected, actual)| holds(actual, expected, prefix))
        }
        (other, _) => actual == other,
    }
}

/// One scenario: a task, the scripted answers per strategy, budgets and a check.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// A unique name (`csv-total`).
    pub name: String,
    /// What it exercises.
    pub category: Category,
    /// The task given to the agent.
    pub task: String,
    /// Budgets of every run.
    pub budgets: Budgets,
    /// Whether the agent may ask the user (`ask_user`).
    pub ask_user: bool,
    /// Whether `examples/more-skills` (eighteen other skills, most unrelated) is installed too.
    pub more_skills: bool,
    /// The scripted answers per strategy (`react`, `plan-execute-think`, …), in call order.
    pub scripts: Vec<(String, Vec<MockReply>)>,
    /// How a run is judged.
    pub check: Check,
}

impl Scenario {
    /// A scenario with the bench's default budgets (no wall-clock limits, so scripted runs
    /// never depend on timing) and no scripts yet.
    pub fn new(name: &str, category: Category, task: &str, check: Check) -> Scenario {
        Scenario {
            name: name.to_owned(),
            category,
            task: task.to_owned(),
            budgets: Budgets {
                max_duration_ms: None,
                round_timeout_ms: None,
                ..Budgets::default()
            },
            ask_user: false,
            more_skills: false,
            scripts: Vec::new(),
            check,
        }
    }

    /// Adds the scripted answers of `strategy`.
    pub fn script(mut self, strategy: &str, replies: Vec<MockReply>) -> Scenario {
        self.scripts.push((strategy.to_owned(), replies));
        self
    }

    /// Changes the budgets.
    pub fn budgets(mut self, change: impl FnOnce(&mut Budgets)) -> Scenario {
        change(&mut self.budgets);
        self
    }

    /// Lets the agent ask the user.
    pub fn with_ask_user(mut self) -> Scenario {
        self.ask_user = true;
        self
    }

    /// Installs `examples/more-skills` beside the bundled skills (a user's skills folder).
    pub fn with_more_skills(mut self) -> Scenario {
        self.more_skills = true;
        self
    }
}

/// Scripted answers, written the way models answer.
pub mod reply {
    use super::*;

    /// A silent tool call: no text, no thinking, no `thought`.
    // Scripts read best with the arguments written inline (`silent("x", json!({…}))`).
    #[allow(clippy::needless_pass_by_value)]
    pub fn silent(tool: &str, args: Value) -> MockReply {
        MockReply::tool_call(tool, &args)
    }

    /// A tool call with a `thought` argument (reasoned, as the local model writes it).
    pub fn thought(tool: &str, thought: &str, mut args: Value) -> MockReply {
        if let Value::Object(map) = &mut args {
            map.insert("thought".to_owned(), Value::String(thought.to_owned()));
        }
        MockReply::tool_call(tool, &args)
    }

    /// Visible text, then a tool call (reasoned, as chat models write it).
    pub fn said(text: &str, tool: &str, args: &Value) -> MockReply {
        call_with(vec![Delta::Text { text: text.to_owned() }], tool, args)
    }

    /// Thinking, then a tool call (reasoned, as thinking models write it).
    pub fn thinking(thinking: &str, tool: &str, args: &Value) -> MockReply {
        call_with(vec![Delta::Thinking { text: thinking.to_owned() }], tool, args)
    }

    fn call_with(mut deltas: Vec<Delta>, tool: &str, args: &Value) -> MockReply {
        deltas.push(Delta::ToolCallStart {
            index: 0,
            id: format!("call_{tool}_0"),
            name: tool.to_owned(),
        });
        deltas.push(Delta::ToolCallArguments { index: 0, fragment: args.to_string() });
        deltas.push(Delta::Finish { reason: FinishReason::ToolCalls });
        MockReply::Deltas { deltas }
    }

    /// A tool call whose arguments are not JSON.
    pub fn broken(tool: &str, raw: &str) -> MockReply {
        MockReply::raw_tool_call(tool, raw, FinishReason::ToolCalls)
    }

    /// Plain text, no call (a degraded answer's text, or an answer that forgot the tools).
    pub fn text(text: &str) -> MockReply {
        MockReply::text(text)
    }

    /// `select_skills` with a reason.
    pub fn select(names: &[&str], why: &str) -> MockReply {
        thought("select_skills", why, json!({"names": names}))
    }

    /// `run_script` with a reason.
    pub fn run(skill: &str, script: &str, args: &[&str], why: &str) -> MockReply {
        thought("run_script", why, json!({"skill": skill, "script": script, "args": args}))
    }

    /// `final_answer` with a reason.
    pub fn answer(content: &str) -> MockReply {
        thought("final_answer", "the observations answer the task", json!({"content": content}))
    }

    /// A `plan-execute-think` plan: `steps` as `(tool, args)`, with its reasoning (empty:
    /// silent) and, on the first round, the complexity.
    pub fn plan(reasoning: &str, complexity: Option<&str>, steps: Vec<(&str, Value)>) -> MockReply {
        let steps: Vec<Value> =
            steps.into_iter().map(|(tool, args)| json!({"tool": tool, "args": args})).collect();
        let mut arguments = json!({"reasoning": reasoning, "steps": steps});
        if let Some(complexity) = complexity {
            arguments["complexity"] = json!(complexity);
        }
        MockReply::tool_call("plan_tool_call", &arguments)
    }

    /// A `plan-execute-think` think.
    pub fn think(analysis: &str, summary: &str, completed: bool) -> MockReply {
        MockReply::tool_call(
            "think",
            &json!({
                "internal_analysis": analysis,
                "user_summary": summary,
                "task_completed": completed,
                "next_steps_preview": "",
            }),
        )
    }

    /// A `plan-thought-replan` plan of `items`.
    pub fn ptr_plan(items: &[&str]) -> MockReply {
        MockReply::tool_call("plan", &json!({"status": "planned", "plan": items}))
    }

    /// A `plan-thought-replan` thought that continues with `tool(args)` for `step`.
    pub fn ptr_act(step: &str, (tool, args): (&str, Value)) -> MockReply {
        MockReply::tool_call(
            "thought",
            &json!({"status": "continue", "current_step": step,
                    "next_action": {"tool": tool, "args": args}, "question": null, "response": null}),
        )
    }

    /// A `plan-thought-replan` thought that asks the user.
    pub fn ptr_ask(question: &str) -> MockReply {
        MockReply::tool_call(
            "thought",
            &json!({"status": "ask_user", "current_step": "information is missing",
                    "next_action": null, "question": question, "response": null}),
        )
    }

    /// A `plan-thought-replan` thought that finishes the item with `response`.
    pub fn ptr_done(response: &str) -> MockReply {
        MockReply::tool_call(
            "thought",
            &json!({"status": "done", "current_step": "the item is finished",
                    "next_action": null, "question": null, "response": response}),
        )
    }

    /// A `plan-thought-replan` replan that ends the task with `answer`.
    pub fn ptr_finish(answer: &str) -> MockReply {
        MockReply::tool_call("replan", &json!({"status": "done", "plan": [], "response": answer}))
    }

    /// A `safe` complexity judgement.
    pub fn safe_judge(complexity: &str) -> MockReply {
        MockReply::tool_call(
            "judge_complexity",
            &json!({"complexity": complexity, "reasoning": "judged from the task's steps"}),
        )
    }

    /// A `safe` plan of `steps` as `(tool, args)`.
    pub fn safe_plan(steps: Vec<(&str, Value)>) -> MockReply {
        let steps: Vec<Value> =
            steps.into_iter().map(|(tool, args)| json!({"tool": tool, "args": args})).collect();
        MockReply::tool_call(
            "make_plan",
            &json!({"reasoning": "the steps the task needs", "steps": steps}),
        )
    }

    /// A `safe` report.
    pub fn safe_report(answer: &str, completed: bool) -> MockReply {
        MockReply::tool_call("report", &json!({"answer": answer, "task_completed": completed}))
    }

    /// A plan step `select_skills`.
    pub fn select_step(names: &[&str]) -> (&'static str, Value) {
        ("select_skills", json!({"names": names}))
    }

    /// A plan step `run_script`.
    pub fn run_step(skill: &str, script: &str, args: &[&str]) -> (&'static str, Value) {
        ("run_script", json!({"skill": skill, "script": script, "args": args}))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use pretty_assertions::assert_eq;
    use skills_agent_core::{EventKind, Outcome};

    use super::*;

    fn event(seq: u64, kind: EventKind, data: Value) -> Event {
        Event { ts: String::new(), run_id: "r".to_owned(), seq, turn: 1, kind, data }
    }

    pub(crate) fn executed(seq: u64, action: &Value, status: &str) -> Event {
        event(seq, EventKind::ActionExecuted, json!({"action": action, "status": status}))
    }

    pub(crate) fn finished(outcome: &str, text: &str) -> Event {
        event(99, EventKind::RunFinished, json!({"outcome": outcome, "final_text": text}))
    }

    #[test]
    fn a_run_passes_only_when_every_part_of_the_check_holds() {
        let workspace = tempfile::tempdir().unwrap();
        std::fs::write(workspace.path().join("out.txt"), "total 12").unwrap();
        let check = Check::completed(&["1705.47"])
            .script("csv-summary", "scripts/csv_summary.py", &["sales.csv", "amount"])
            .never_ok("ask_user")
            .file("out.txt", "total");
        // (A recorded action has no keys beyond its own: events are typed, so an extra key in
        // `args` cannot be in a record; `holds` still lets an expectation name fewer keys.)
        let script = json!({"type": "run_script", "args": {
            "skill": "csv-summary", "script": "scripts/csv_summary.py", "args": ["sales.csv", "amount"]}});
        let good = vec![executed(1, &script, "ok"), finished("completed", "It is 1705.47.")];
        assert_eq!(check.failures(&good, workspace.path()), Vec::<String>::new());

        let wrong_args = json!({"type": "run_script", "args": {
            "skill": "csv-summary", "script": "scripts/csv_summary.py", "args": ["sales.csv"]}});
        let asked = json!({"type": "ask_user", "args": {"question": "?"}});
        let bad = vec![
            executed(1, &wrong_args, "ok"),
            executed(2, &asked, "ok"),
            finished("max_turns", "about 1700"),
        ];
        let check = check.file("missing.txt", "x");
        assert_eq!(
            check.failures(&bad, workspace.path()),
            vec![
                "outcome max_turns, expected completed".to_owned(),
                "the answer lacks `1705.47`".to_owned(),
                "missing.txt was not produced".to_owned(),
                format!("no successful run_script call with {}", check.calls[0].args),
                "ask_user succeeded, which it must not".to_owned(),
            ]
        );
        let failed = vec![executed(1, &script, "failed"), finished("completed", "It is 1705.47.")];
        assert_eq!(Check::completed(&[]).failures(&failed, workspace.path()), Vec::<String>::new());
        assert_eq!(
            check.failures(&failed, workspace.path())[..2],
            [
                "missing.txt was not produced".to_owned(),
                format!("no successful run_script call with {}", check.calls[0].args)
            ]
        );
        assert_eq!(
            Check::ends(Outcome::Stuck, &[]).failures(&[], workspace.path()),
            vec!["the run has no run_finished event".to_owned()]
        );
    }

    #[test]
    fn an_admission_may_end_the_run_degraded_but_not_cancelled() {
        let workspace = tempfile::tempdir().unwrap();
        let check = Check::admits();
        let fine = |outcome: &str, text: &str| {
            let events = [event(
                99,
                EventKind::RunFinished,
                json!({
                "outcome": outcome, "final_text": text, "grounded": true}),
            )];
            check.failures(&events, workspace.path()).is_empty()
        };
        assert!(fine("completed", "I cannot tell the checksum."));
        assert!(fine(
            "stuck",
            "I could not finish the task: the same failing action came 3 times."
        ));
        assert!(fine("max_turns", "I could not finish the task: the turn limit (12) was reached."));
        assert!(!fine("cancelled", "I could not finish the task: the run was cancelled."));
        assert!(!fine("stuck", "The checksum is 42."));
    }

    #[test]
    fn expected_arguments_are_a_subset_compared_exactly() {
        assert!(holds(&json!({"a": [1, 2], "b": 3}), &json!({"a": [1, 2]}), false));
        assert!(!holds(&json!({"a": [1, 2, 3]}), &json!({"a": [1, 2]}), false));
        assert!(!holds(&json!({"a": "1"}), &json!({"a": 1}), false));
        assert!(!holds(&json!(null), &json!({"a": 1}), false));
        assert!(holds(&json!({"a": {"b": 1, "c": 2}}), &json!({"a": {"b": 1}}), false));
        // A prefix: the expected items first, anything after.
        assert!(holds(&json!({"a": [1, 2, 3]}), &json!({"a": [1, 2]}), true));
        assert!(holds(&json!({"a": [1, 2]}), &json!({"a": [1, 2]}), true));
        assert!(!holds(&json!({"a": [1]}), &json!({"a": [1, 2]}), true));
        assert!(!holds(&json!({"a": [2, 1]}), &json!({"a": [1, 2]}), true));
    }

    #[test]
    fn an_expected_value_may_list_its_possible_answers() {
        let miles = any_of(["mi", "mile", "miles"]);
        let expected = json!({"args": ["12", miles, "km"]});
        assert!(holds(&json!({"args": ["12", "mi", "km"]}), &expected, false));
        assert!(holds(&json!({"args": ["12", "miles", "km"]}), &expected, false));
        assert!(!holds(&json!({"args": ["12", "nmi", "km"]}), &expected, false));
        assert!(!holds(&json!({"args": ["12", "miles"]}), &expected, false));
        assert!(!holds(&json!({"args": ["12", "miles", "km", "x"]}), &expected, false));
        assert!(holds(&json!({"args": ["12", "mile", "km", "x"]}), &expected, true));
        // Alternatives may be any value, nested ones included; none at all never holds.
        assert!(holds(&json!({"n": 2}), &json!({"n": any_of([1, 2])}), false));
        assert!(holds(&json!([1, [2, 3]]), &json!([1, any_of([json!([2, 3]), json!(4)])]), false));
        assert!(!holds(&json!("a"), &any_of(Vec::<Value>::new()), false));
        // A reader sees the first alternative of each.
        assert_eq!(brief(&expected), json!({"args": ["12", "mi|…", "km"]}));
        assert_eq!(brief(&any_of([json!([any_of(["a", "b"])]), json!(["c"])])), json!(["a|…"]));
        assert_eq!(brief(&any_of(["x"])), json!("x"));
        // An object with other keys beside `any_of` is an ordinary expected object.
        let literal = json!({"any_of": [1], "b": 2});
        assert!(holds(&json!({"any_of": [1], "b": 2}), &literal, false));
        assert!(!holds(&json!({"any_of": 1, "b": 2}), &literal, false));
    }
}

/// Whether `text` writes `fact` as a whole: not inside a longer word or number (see
/// [`Check::failures`]). A fact that is a number and a word (`20 rows`) also holds when the
/// number is stated with the word, singular or plural, among the few words around it: "the
/// number of rows is 20" and "rows: 20" state `20 rows` as well.
fn states(text: &str, fact: &str) -> bool {
    if let Some((number, word)) = fact.split_once(' ')
        && number.starts_with(|c: char| c.is_ascii_digit())
        && !word.contains(' ')
        && word.chars().all(char::is_alphabetic)
        && !written(text, fact)
    {
        return near(text, number, word);
    }
    written(text, fact)
}

/// The words before and after a number among which [`states`] looks for what it counts.
const NEAR_WORDS: usize = 4;

/// Whether `text` states `number` with `word` (or its singular) among the [`NEAR_WORDS`]
/// words on either side, in the same sentence and with no other number between them.
fn near(text: &str, number: &str, word: &str) -> bool {
    let stem = |w: &str| w.strip_suffix('s').unwrap_or(w).to_owned();
    let wanted = stem(&word.to_lowercase());
    for line in text.lines() {
        // Each word, trimmed of punctuation, and whether a sentence ends after it.
        let words: Vec<(String, bool)> = line
            .split_whitespace()
            .map(|w| {
                let ends = w.ends_with(['.', ';', '!', '?']);
                (
                    w.trim_matches(|c: char| !c.is_alphanumeric() && c != '.')
                        .trim_end_matches('.')
                        .to_lowercase(),
                    ends,
                )
            })
            .collect();
        let is_number = |w: &str| w.starts_with(|c: char| c.is_ascii_digit());
        for (i, (w, _)) in words.iter().enumerate() {
            if w != number {
                continue;
            }
            // Outward from the number, each way, until a sentence ends or another number.
            let before = (1..=NEAR_WORDS.min(i)).map(|k| i - k).take_while(|&j| !words[j].1);
            let after =
                (i + 1..words.len().min(i + 1 + NEAR_WORDS)).take_while(|&j| !words[j - 1].1);
            for side in [before.collect::<Vec<_>>(), after.collect()] {
                for j in side {
                    if is_number(&words[j].0) {
                        break;
                    }
                    if stem(&words[j].0) == wanted {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// Whether `text` writes `fact` as it is, as a whole.
fn written(text: &str, fact: &str) -> bool {
    let starts_digit = fact.starts_with(|c: char| c.is_ascii_digit());
    let ends_digit = fact.ends_with(|c: char| c.is_ascii_digit());
    text.match_indices(fact).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + fact.len()..].chars();
        let (next, then) = (after.next(), after.next());
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        // `1.5` does not state `5`, nor `20.5` state `20`: a number is not a decimal's part.
        let decimal = fact.contains('.');
        let joined_before = before.is_some_and(word)
            || (before == Some('.') && digit(text[..at].chars().rev().nth(1)));
        let joined_after =
            next.is_some_and(word) || (!decimal && matches!(next, Some('.' | ',')) && digit(then));
        let clean_before = !starts_digit || !joined_before;
        let clean_after = !ends_digit || (decimal && digit(next)) || !joined_after;
        clean_before && clean_after
    })
}

#[cfg(test)]
mod states_tests {
    use super::states;

    #[test]
    fn a_fact_is_stated_whole() {
        assert!(states("sales.csv has 20 rows.", "20"));
        assert!(states("20", "20"));
        assert!(states("(20)", "20"));
        assert!(!states("in 2026", "20"));
        assert!(!states("20.5 rows", "20"));
        assert!(!states("1.20 rows", "20"));
        assert!(!states("2120 units", "212"));
        assert!(states("212, 1705.47.", "212"));
        assert!(states("6.2137119224 mi", "6.213711922"));
        assert!(!states("16.213711922 mi", "6.213711922"));
        assert!(states("Which column do you mean?", "Which column"));
        assert!(states("Which columns?", "Which column"));
        assert!(states("at 1,852 m", "1,852"));
        // A number with what it counts, in other words around it.
        assert!(states("sales.csv has 20 rows.", "20 rows"));
        assert!(states("The number of rows is 20.", "20 rows"));
        assert!(states("rows: 20; amount 1705.47", "20 rows"));
        assert!(states("It has 20 data rows", "20 rows"));
        assert!(!states("The number of rows is 21, and 20 columns.", "20 rows"));
        assert!(!states("20 units. The rows are many.", "20 rows"));
        assert!(!states("rows: 20.5", "20 rows"));
    }
}
