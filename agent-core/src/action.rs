//! The action vocabulary: what the model may ask for, and how an answer (native tool calls or
//! one structured JSON document) becomes a [`Decision`]. Which actions a turn offers is
//! [`crate::space`]'s.

use model_adapter::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::plan::{Plan, PlanUpdate};

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
pub(crate) const ACTION_NAMES: [&str; 10] = [
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

    /// Whether the action computes something: a script run or an external tool call (what
    /// the grounding check and the notes count as results).
    pub fn is_call(&self) -> bool {
        matches!(self, Action::RunScript { .. } | Action::CallTool { .. })
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
pub(crate) struct Decision {
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
pub(crate) struct InvalidAnswer {
    /// What is wrong, as the model will be told.
    pub message: String,
}

/// A JSON-mode final answer the token limit cut inside its `content` (format 8): the answer
/// up to the cut, closed. The local 1.5B asked for a checksum wrote "229444…" until the limit,
/// the same each time it was asked again; taken cut, the answer goes to the grounding check
/// like any other (which refuses the made-up figure) instead of failing as invalid JSON.
pub(crate) fn cut_final_answer(response: &Response) -> Option<Decision> {
    if response.finish_reason != model_adapter::FinishReason::Length
        || !response.tool_calls.is_empty()
        || !response.invalid_tool_calls.is_empty()
    {
        return None;
    }
    let text = strip_fence(&response.text);
    // A cut escape (`\` or `\u00`) is dropped with what follows it.
    let text = match text.rfind('\\') {
        Some(at) if text.len() - at <= 6 => &text[..at],
        _ => text,
    };
    let closed = format!("{text}\"}}}}}}");
    let decision = parse_answer(&Response { text: closed, ..Response::default() }, false).ok()?;
    matches!(decision.action, Action::FinalAnswer { .. }).then_some(decision)
}

/// Reads a model answer as one decision.
///
/// A tool call named after an action is that action (its `thought`, `plan` and `plan_update`
/// arguments are taken out first); only the first call counts (one action per turn). Without
/// tool calls the text must be the structured document `{"thought"?, "action": {"type",
/// "args"}, "plan"?, "plan_update"?}` (a surrounding code fence is tolerated); in
/// [`DecideMode::Tools`](crate::DecideMode::Tools) plain prose with no tool call is the final
/// answer.
pub(crate) fn parse_answer(
    response: &Response,
    prose_is_final: bool,
) -> Result<Decision, InvalidAnswer> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use model_adapter::ToolCall;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn text(text: &str) -> Response {
        Response { text: text.to_owned(), ..Response::default() }
    }

    #[test]
    fn a_final_answer_cut_by_the_token_limit_is_taken_cut() {
        let cut = |text: &str, reason: model_adapter::FinishReason| {
            cut_final_answer(&Response {
                text: text.to_owned(),
                finish_reason: reason,
                ..Response::default()
            })
            .map(|decision| decision.action)
        };
        let length = model_adapter::FinishReason::Length;
        let answer =
            r#"{"thought": "t", "action": {"type": "final_answer", "args": {"content": "2294444"#;
        assert_eq!(
            cut(answer, length.clone()),
            Some(Action::FinalAnswer { content: "2294444".to_owned() })
        );
        let escaped = r#"{"action": {"type": "final_answer", "args": {"content": "a\u00"#;
        assert_eq!(
            cut(escaped, length.clone()),
            Some(Action::FinalAnswer { content: "a".to_owned() })
        );
        // Not cut by the limit, cut in the thought, or another action: nothing to take.
        assert_eq!(cut(answer, model_adapter::FinishReason::Stop), None);
        assert_eq!(cut(r#"{"thought": "4444"#, length.clone()), None);
        let script = r#"{"action": {"type": "run_script", "args": {"skill": "s", "script": "x"#;
        assert_eq!(cut(script, length), None);
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
}
