//! The action vocabulary: what the model may ask for, how an answer (native tool calls or one
//! structured JSON document) becomes a [`Decision`], and the per-turn [`ActionSpace`] — the
//! action automaton of `../shared/notes/small-models.md` — rendered as a JSON Schema or as the
//! turn's tools, so that an action the state does not allow cannot even be written.

use model_adapter::{Response, Tool};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::external::{ExternalTool, short_description, validate_arguments};
use crate::state::{Plan, PlanUpdate};

/// One action the model asks the runtime to perform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "args", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Load the bodies of these skills (level 2).
    SelectSkills {
        /// Skill names, at most the per-turn body limit.
        names: Vec<String>,
    },
    /// Read a file of a selected skill (level 3), whole or as an excerpt.
    LoadResource {
        /// The selected skill.
        skill: String,
        /// The path relative to the skill folder.
        path: String,
        /// A Markdown heading to excerpt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        section: Option<String>,
    },
    /// Run a script of a selected skill in the sandbox.
    RunScript {
        /// The selected skill.
        skill: String,
        /// The script's path relative to the skill folder (`scripts/…`).
        script: String,
        /// Arguments.
        #[serde(default)]
        args: Vec<String>,
    },
    /// Show the descriptions and argument schemas of external tools the catalog only names
    /// (a long tool list is summarised, like skill bodies are loaded on demand).
    DescribeTools {
        /// Tool names (`mcp__SERVER__TOOL`).
        names: Vec<String>,
    },
    /// Call an external (MCP) tool.
    CallTool {
        /// The tool (`mcp__SERVER__TOOL`).
        name: String,
        /// Its arguments, which must fit its input schema.
        #[serde(default = "empty_object")]
        arguments: Value,
    },
    /// Bring back the full text of an observation that compaction shortened.
    RecallObservation {
        /// The observation id (`obs-N`).
        id: String,
    },
    /// The built-in to-do list in the workspace store (`add TEXT`, `done N`, `remove N`,
    /// `list`); offered when [`GuardConfig::builtin_tools`](crate::GuardConfig) is on.
    Todo {
        /// The command.
        command: String,
    },
    /// The built-in schedule in the workspace store (`add WHEN :: WHAT`, `remove N`, `list`).
    Schedule {
        /// The command.
        command: String,
    },
    /// Ask the user a question; the run ends `needs_input` until the answer comes
    /// ([`Agent::send`](crate::Agent::send)). Offered when
    /// [`GuardConfig::ask_user`](crate::GuardConfig) is on.
    AskUser {
        /// The question.
        question: String,
    },
    /// The answer for the user; ends the run.
    FinalAnswer {
        /// The answer text.
        content: String,
    },
}

/// The names of the actions, in the order they are offered.
pub const ACTION_NAMES: [&str; 10] = [
    "select_skills",
    "load_resource",
    "run_script",
    "describe_tools",
    "call_tool",
    "recall_observation",
    "todo",
    "schedule",
    "ask_user",
    "final_answer",
];

impl Action {
    /// The action's wire name (`run_script`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Action::SelectSkills { .. } => "select_skills",
            Action::LoadResource { .. } => "load_resource",
            Action::RunScript { .. } => "run_script",
            Action::DescribeTools { .. } => "describe_tools",
            Action::CallTool { .. } => "call_tool",
            Action::RecallObservation { .. } => "recall_observation",
            Action::Todo { .. } => "todo",
            Action::Schedule { .. } => "schedule",
            Action::AskUser { .. } => "ask_user",
            Action::FinalAnswer { .. } => "final_answer",
        }
    }

    /// A short human-readable form for the console and compacted context.
    pub fn summary(&self) -> String {
        match self {
            Action::SelectSkills { names } => format!("select_skills {}", names.join(", ")),
            Action::LoadResource { skill, path, section } => match section {
                Some(section) => format!("load_resource {skill}/{path} #{section}"),
                None => format!("load_resource {skill}/{path}"),
            },
            Action::RunScript { skill, script, args } => {
                let mut text = format!("run_script {skill}/{script}");
                for arg in args {
                    text.push(' ');
                    text.push_str(arg);
                }
                text
            }
            Action::DescribeTools { names } => format!("describe_tools {}", names.join(", ")),
            Action::CallTool { name, arguments } => {
                let mut text = format!("call_tool {name} {arguments}");
                if text.chars().count() > 160 {
                    text = text.chars().take(159).collect();
                    text.push('…');
                }
                text
            }
            Action::RecallObservation { id } => format!("recall_observation {id}"),
            Action::Todo { command } => format!("todo {command}"),
            Action::Schedule { command } => format!("schedule {command}"),
            Action::AskUser { question } => {
                format!("ask_user ({} chars)", question.chars().count())
            }
            Action::FinalAnswer { content } => {
                format!("final_answer ({} chars)", content.chars().count())
            }
        }
    }
}

/// What one Decide turn produced: one action, plus an optional plan or plan patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The model's stated reason, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
    /// The action.
    pub action: Action,
    /// A full replacement plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// A patch to the current plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_update: Option<PlanUpdate>,
}

/// What an answer was, when it was not one valid action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidAnswer {
    /// What is wrong, as the model will be told.
    pub message: String,
}

/// Reads a model answer as one decision.
///
/// A tool call named after an action is that action (its `thought`, `plan` and `plan_update`
/// arguments are taken out first); only the first call counts (one action per turn). Without
/// tool calls the text must be the structured document `{"thought"?, "action": {"type",
/// "args"}, "plan"?, "plan_update"?}` (a surrounding code fence is tolerated); in
/// [`DecideMode::Tools`](crate::DecideMode::Tools) plain prose with no tool call is the final
/// answer.
pub fn parse_answer(response: &Response, prose_is_final: bool) -> Result<Decision, InvalidAnswer> {
    if let Some(call) = response.tool_calls.first() {
        // An external tool offered as its own function: its arguments are the tool's own, plus
        // the `thought` the function offers (given back to a tool that has one of its own by
        // `ActionSpace::restore_tool_thought`).
        if call.name.starts_with(EXTERNAL_PREFIX) {
            let mut arguments = call.arguments.clone();
            let thought = match arguments.as_object_mut().and_then(|map| map.remove("thought")) {
                Some(Value::String(text)) if !text.trim().is_empty() => Some(text),
                Some(Value::String(_)) | None => None,
                Some(other) => {
                    if let Some(map) = arguments.as_object_mut() {
                        map.insert("thought".to_owned(), other);
                    }
                    None
                }
            };
            let action = Action::CallTool { name: call.name.clone(), arguments };
            return Ok(Decision { thought, action, plan: None, plan_update: None });
        }
        let Value::Object(mut arguments) = call.arguments.clone() else {
            return Err(invalid(format!(
                "the arguments of `{}` must be a JSON object, got {}",
                call.name, call.arguments
            )));
        };
        let extras = take_extras(&mut arguments)?;
        let action = action_from(&call.name, Value::Object(arguments))?;
        return Ok(Decision { thought: extras.0, action, plan: extras.1, plan_update: extras.2 });
    }
    if let Some(bad) = response.invalid_tool_calls.first() {
        return Err(invalid(format!(
            "the call to `{}` had unreadable arguments ({}); send one call with a JSON object",
            bad.name, bad.error
        )));
    }
    let text = strip_fence(&response.text);
    if text.is_empty() {
        return Err(invalid("the answer was empty; reply with exactly one action".to_owned()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(mut document)) => {
            let extras = take_extras(&mut document)?;
            let Some(action) = document.remove("action") else {
                if prose_is_final {
                    return Ok(final_text(response));
                }
                return Err(invalid("the document has no `action` field".to_owned()));
            };
            if let Some(key) = document.keys().next() {
                return Err(invalid(format!("unexpected field `{key}` beside `action`")));
            }
            let Value::Object(mut action) = action else {
                return Err(invalid("`action` must be an object {\"type\", \"args\"}".to_owned()));
            };
            let Some(Value::String(name)) = action.remove("type") else {
                return Err(invalid("`action.type` must name an action".to_owned()));
            };
            let args = action.remove("args").unwrap_or_else(|| Value::Object(Map::new()));
            if let Some(key) = action.keys().next() {
                return Err(invalid(format!("unexpected field `action.{key}`")));
            }
            let action = action_from(&name, args)?;
            Ok(Decision { thought: extras.0, action, plan: extras.1, plan_update: extras.2 })
        }
        Ok(_) | Err(_) if prose_is_final => Ok(final_text(response)),
        Ok(other) => Err(invalid(format!("the answer must be a JSON object, got {other}"))),
        Err(error) => Err(invalid(format!("the answer is not valid JSON: {error}"))),
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// The prefix of external tools' names (`mcp__SERVER__TOOL`).
pub(crate) const EXTERNAL_PREFIX: &str = "mcp__";

/// At most this many callable external tools are offered as functions of their own (native
/// tool calling) or as one schema variant each (JSON mode); more go through one `call_tool`
/// with a name and free-form arguments, checked against the tool's schema after the answer.
pub(crate) const MAX_OWN_FUNCTIONS: usize = 8;

fn final_text(response: &Response) -> Decision {
    Decision {
        thought: None,
        action: Action::FinalAnswer { content: response.text.trim().to_owned() },
        plan: None,
        plan_update: None,
    }
}

fn invalid(message: String) -> InvalidAnswer {
    InvalidAnswer { message }
}

type Extras = (Option<String>, Option<Plan>, Option<PlanUpdate>);

fn take_extras(object: &mut Map<String, Value>) -> Result<Extras, InvalidAnswer> {
    let thought = match object.remove("thought") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text).filter(|text| !text.trim().is_empty()),
        Some(other) => return Err(invalid(format!("`thought` must be a string, got {other}"))),
    };
    let plan = match object.remove("plan") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value(value)
                .map_err(|error| invalid(format!("`plan` is not a plan: {error}")))?,
        ),
    };
    let plan_update = match object.remove("plan_update") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value(value)
                .map_err(|error| invalid(format!("`plan_update` is not a plan patch: {error}")))?,
        ),
    };
    Ok((thought, plan, plan_update))
}

pub(crate) fn action_from(name: &str, args: Value) -> Result<Action, InvalidAnswer> {
    if !ACTION_NAMES.contains(&name) {
        return Err(invalid(format!(
            "unknown action `{name}`; the actions are {}",
            ACTION_NAMES.join(", ")
        )));
    }
    let mut document = Map::new();
    document.insert("type".to_owned(), Value::String(name.to_owned()));
    document.insert("args".to_owned(), args);
    serde_json::from_value(Value::Object(document))
        .map_err(|error| invalid(format!("bad arguments for `{name}`: {error}")))
}

/// The text of `answer` without a surrounding Markdown code fence.
pub(crate) fn strip_fence(answer: &str) -> &str {
    let text = answer.trim();
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map_or("", |(_, body)| body);
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

/// The actions a turn allows, derived from the run state (the per-turn action automaton).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ActionSpace {
    /// Skills `select_skills` may name, most relevant first (empty: no select this turn).
    pub select: Vec<String>,
    /// Names per `select_skills` call.
    pub max_select: usize,
    /// Selected skills with readable files, and those files.
    pub load: Vec<(String, Vec<String>)>,
    /// Selected skills with scripts, and those scripts.
    pub run: Vec<(String, Vec<String>)>,
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
}

/// Which plan field the turn's schema offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanField {
    /// None.
    #[default]
    None,
    /// `plan`, a full plan.
    Plan,
    /// `plan_update`, a patch.
    PlanUpdate,
}

const THOUGHT_MAX: usize = 300;
const ANSWER_MAX: usize = 4_000;
const ARG_MAX: usize = 200;
/// Tools per `describe_tools`.
const MAX_DESCRIBE: usize = 4;

impl ActionSpace {
    /// The names of the allowed actions, in offer order (`final_answer` is always allowed).
    pub fn allowed(&self) -> Vec<&'static str> {
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
    pub fn check(&self, action: &Action) -> Result<(), String> {
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
                paths.sort();
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
                json!({
                    "type": "object",
                    "properties": {
                        "skill": {"enum": skills},
                        "script": {"enum": scripts},
                        "args": {"type": "array", "items": string(ARG_MAX), "maxItems": 8},
                    },
                    "required": ["skill", "script", "args"],
                    // Which script before its arguments (sorted, a small model writes the
                    // arguments first and puts the script's path among them).
                    "propertyOrdering": ["skill", "script", "args"],
                    "additionalProperties": false,
                })
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
            _ => json!({
                "type": "object",
                "properties": {"content": string(ANSWER_MAX)},
                "required": ["content"],
                "additionalProperties": false,
            }),
        }
    }

    /// A call to an external tool whose own arguments include `thought`: the thought
    /// [`parse_answer`] took out goes back into its arguments.
    pub fn restore_tool_thought(&self, decision: &mut Decision) {
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

    /// The JSON Schema of the turn's structured answer ([`DecideMode::Json`](crate::DecideMode::Json)).
    pub fn json_schema(&self) -> Value {
        let variants: Vec<Value> = self
            .allowed()
            .into_iter()
            .map(|name| {
                json!({
                    "type": "object",
                    "properties": {"type": {"const": name}, "args": self.args_schema(name)},
                    "required": ["type", "args"],
                    // The name first: the runtime knows the action as soon as it is written.
                    "propertyOrdering": ["type", "args"],
                    "additionalProperties": false,
                })
            })
            .collect();
        let action = if variants.len() == 1 {
            variants.into_iter().next().unwrap_or(Value::Null)
        } else {
            json!({"anyOf": variants})
        };
        let mut properties = Map::new();
        properties.insert("thought".into(), json!({"type": "string", "maxLength": THOUGHT_MAX}));
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
    pub fn tools(&self) -> Vec<Tool> {
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
    use super::*;
    use model_adapter::ToolCall;
    use pretty_assertions::assert_eq;

    fn text(text: &str) -> Response {
        Response { text: text.to_owned(), ..Response::default() }
    }

    #[test]
    fn structured_documents_and_tool_calls_give_the_same_decision() {
        let document = r#"{"thought":"run it","action":{"type":"run_script","args":{"skill":"csv","script":"scripts/sum.py","args":["a.csv"]}}}"#;
        let from_text = parse_answer(&text(document), false).unwrap();
        let call = Response {
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "run_script".into(),
                arguments: json!({"thought": "run it", "skill": "csv", "script": "scripts/sum.py", "args": ["a.csv"]}),
            }],
            ..Response::default()
        };
        assert_eq!(parse_answer(&call, true).unwrap(), from_text);
        assert_eq!(from_text.thought.as_deref(), Some("run it"));
    }

    #[test]
    fn fenced_json_is_read_and_prose_is_final_only_in_tools_mode() {
        let fenced =
            "```json\n{\"action\":{\"type\":\"final_answer\",\"args\":{\"content\":\"42\"}}}\n```";
        assert_eq!(
            parse_answer(&text(fenced), false).unwrap().action,
            Action::FinalAnswer { content: "42".into() }
        );
        assert_eq!(
            parse_answer(&text("It is 42."), true).unwrap().action,
            Action::FinalAnswer { content: "It is 42.".into() }
        );
        let error = parse_answer(&text("It is 42."), false).unwrap_err();
        assert!(error.message.starts_with("the answer is not valid JSON"), "{}", error.message);
    }

    #[test]
    fn unknown_actions_and_bad_arguments_are_named() {
        let error =
            parse_answer(&text(r#"{"action":{"type":"rm_rf","args":{}}}"#), false).unwrap_err();
        assert!(error.message.contains("unknown action `rm_rf`"), "{}", error.message);
        let error =
            parse_answer(&text(r#"{"action":{"type":"run_script","args":{"skill":1}}}"#), false)
                .unwrap_err();
        assert!(error.message.contains("bad arguments for `run_script`"), "{}", error.message);
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
