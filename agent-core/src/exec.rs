//! Executing validated actions: skill bodies and resources through skill-loader, scripts
//! through tools-runtime, or — when replaying or resuming — the results recorded in
//! `events.jsonl`. Every path ends in an [`Execution`]; nothing here decides what is allowed
//! (that is `guard`) or counts anything (that is `run`).

use std::collections::VecDeque;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use skill_loader::{ExcerptContent, ResourceKind, SkillLoader};
use skill_registry::SkillIndex;
use tools_runtime::{ExecOutcome, ExecRequest, RefusalKind, RuleSet, Runtime};

use crate::action::Action;
use crate::config::ScriptSettings;
use crate::event::EventKind;
use crate::state::{ObservationStatus, SelectedSkill};

/// The result of one executed action.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Execution {
    pub(crate) status: ObservationStatus,
    /// The full observation text for the model (before the inline cap).
    pub(crate) content: String,
    /// Details for `action_executed.result` (exit code, files, selected skills…).
    pub(crate) result: Value,
}

/// A recorded execution, replayed instead of running the action again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordedExecution {
    pub(crate) action: Value,
    pub(crate) execution: Execution,
    /// Events recorded while the action ran (approvals), re-emitted in order.
    pub(crate) side_events: Vec<(EventKind, Value)>,
}

/// What the live executor needs.
#[derive(Debug)]
pub(crate) struct LiveTools {
    pub(crate) index: SkillIndex,
    pub(crate) loader: SkillLoader,
    pub(crate) runtime: Option<Arc<Runtime>>,
    pub(crate) workspace: PathBuf,
    /// Paths scripts must not write (the runs directory when it lies inside the workspace).
    pub(crate) protected: Vec<PathBuf>,
    pub(crate) scripts: ScriptSettings,
}

/// Live tools, recorded executions, or recorded first and live after (resume).
#[derive(Debug)]
pub(crate) struct Executor {
    pub(crate) recorded: VecDeque<RecordedExecution>,
    /// Recorded outputs of slash commands, in order.
    pub(crate) commands: VecDeque<Execution>,
    pub(crate) live: Option<LiveTools>,
}

/// What went wrong when the record and the re-run disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Divergence(pub(crate) String);

impl Executor {
    /// Runs `action` (never `final_answer`): the next recorded execution when there is one
    /// (it must be for the same action), else live.
    /// Runs a built-in tool for a slash command: the next recorded output when replaying or
    /// catching up (`commands`), else live over the workspace store.
    pub(crate) fn command(&mut self, tool: &str, command: &str) -> Result<Execution, Divergence> {
        if let Some(recorded) = self.commands.pop_front() {
            return Ok(recorded);
        }
        match &self.live {
            Some(live) => Ok(crate::builtin::run(&live.workspace, tool, command)),
            None => Err(Divergence(format!("the record has no output for /{tool} {command}"))),
        }
    }

    pub(crate) async fn execute(
        &mut self,
        action: &Action,
        call_id: &str,
    ) -> Result<(Execution, Vec<(EventKind, Value)>), Divergence> {
        if let Some(recorded) = self.recorded.pop_front() {
            let wanted = serde_json::to_value(action).unwrap_or(Value::Null);
            if recorded.action != wanted {
                return Err(Divergence(format!(
                    "the record executed {} where the re-run asks for {wanted}",
                    recorded.action
                )));
            }
            return Ok((recorded.execution, recorded.side_events));
        }
        let Some(live) = &self.live else {
            return Err(Divergence(format!(
                "the record has no result for {}",
                serde_json::to_value(action).unwrap_or(Value::Null)
            )));
        };
        Ok((live.execute(action, call_id).await, Vec::new()))
    }
}

fn failed(status: ObservationStatus, message: String) -> Execution {
    Execution { status, result: json!({"error": message}), content: message }
}

impl LiveTools {
    async fn execute(&self, action: &Action, call_id: &str) -> Execution {
        match action {
            Action::SelectSkills { names } => self.select(names),
            Action::LoadResource { skill, path, section } => {
                self.load(skill, path, section.as_deref())
            }
            Action::RunScript { skill, script, args } => {
                self.run_script(skill, script, args, call_id).await
            }
            Action::Todo { command } => crate::builtin::run(&self.workspace, "todo", command),
            Action::Schedule { command } => {
                crate::builtin::run(&self.workspace, "schedule", command)
            }
            // Recall, questions and final answers never reach the executor.
            Action::RecallObservation { .. }
            | Action::AskUser { .. }
            | Action::FinalAnswer { .. } => failed(
                ObservationStatus::InvalidAction,
                format!("`{}` is not executed by tools", action.name()),
            ),
        }
    }

    fn select(&self, names: &[String]) -> Execution {
        let mut content = String::new();
        let mut skills = Vec::new();
        let mut errors = Vec::new();
        for name in names {
            let Some(skill) = self.index.get(name) else {
                errors.push(format!("skill `{name}` is not in the index"));
                continue;
            };
            let body = match self.loader.load_skill_body(skill) {
                Ok(body) => body,
                Err(error) => {
                    errors.push(format!("cannot load skill `{name}`: {error}"));
                    continue;
                }
            };
            let (scripts, resources) = match self.loader.list_resources(skill) {
                Ok(listing) => {
                    split_files(listing.entries.into_iter().filter_map(|entry| match entry.kind {
                        ResourceKind::File => Some(entry.path),
                        ResourceKind::Symlink { inside: true, .. } => Some(entry.path),
                        _ => None,
                    }))
                }
                Err(error) => {
                    errors.push(format!("cannot list the files of skill `{name}`: {error}"));
                    (Vec::new(), Vec::new())
                }
            };
            content.push_str(&format!("# Skill `{name}` (SKILL.md)\n"));
            content.push_str(&body.render());
            content.push('\n');
            if !scripts.is_empty() {
                content.push_str(&format!("Scripts (run_script): {}\n", scripts.join(", ")));
            }
            if !resources.is_empty() {
                content.push_str(&format!("Files (load_resource): {}\n", resources.join(", ")));
            }
            skills.push(SelectedSkill { name: name.clone(), scripts, resources });
        }
        for error in &errors {
            content.push_str(error);
            content.push('\n');
        }
        let status =
            if skills.is_empty() { ObservationStatus::Failed } else { ObservationStatus::Ok };
        Execution {
            status,
            content: content.trim_end().to_owned(),
            result: json!({"skills": skills, "errors": errors}),
        }
    }

    fn load(&self, name: &str, path: &str, section: Option<&str>) -> Execution {
        let Some(skill) = self.index.get(name) else {
            return failed(
                ObservationStatus::Failed,
                format!("skill `{name}` is not in the index"),
            );
        };
        match self.loader.load_resource(skill, path, section) {
            Ok(excerpt) => {
                let complete = excerpt.is_complete();
                let binary = matches!(excerpt.content, ExcerptContent::Binary);
                Execution {
                    status: ObservationStatus::Ok,
                    content: excerpt.render(),
                    result: json!({
                        "path": path,
                        "total_bytes": excerpt.total_bytes,
                        "complete": complete,
                        "binary": binary,
                        "missed_section": excerpt.missed_section,
                    }),
                }
            }
            Err(error) => failed(
                ObservationStatus::Failed,
                format!("cannot read `{path}` of skill `{name}`: {error}"),
            ),
        }
    }

    async fn run_script(
        &self,
        name: &str,
        script: &str,
        args: &[String],
        call_id: &str,
    ) -> Execution {
        let Some(runtime) = &self.runtime else {
            return failed(
                ObservationStatus::Denied,
                "scripts cannot run: this agent has no sandbox runtime configured".to_owned(),
            );
        };
        let Some(skill) = self.index.get(name) else {
            return failed(
                ObservationStatus::Failed,
                format!("skill `{name}` is not in the index"),
            );
        };
        let mut request = match ExecRequest::for_skill_script(
            name,
            &skill.directory,
            script,
            args.to_vec(),
            &self.workspace,
        ) {
            Ok(request) => request,
            Err(refusal) => return failed(ObservationStatus::Denied, refusal.message),
        };
        if let Some(interpreter) = interpreter_for(Path::new(&request.program)) {
            let script_path = std::mem::replace(&mut request.program, interpreter.to_owned());
            request.args.insert(0, script_path);
        }
        request.call_id = call_id.to_owned();
        request.skill_rules =
            skill.controls.allowed_tools.as_deref().map(RuleSet::from_allowed_tools);
        request.protected_paths.extend(self.protected.iter().cloned());
        request.timeout = std::time::Duration::from_millis(self.scripts.timeout_ms);
        request.max_output_bytes = self.scripts.max_output_bytes;
        request.allow_network = self.scripts.allow_network;
        match runtime.run(&request).await {
            Ok(ExecOutcome::Ran(result)) => {
                let status = if result.timed_out {
                    ObservationStatus::Timeout
                } else if result.exit_code == Some(0) {
                    ObservationStatus::Ok
                } else {
                    ObservationStatus::Failed
                };
                let mut content = match (result.exit_code, result.signal, result.timed_out) {
                    (_, _, true) => format!("timed out after {} ms", self.scripts.timeout_ms),
                    (Some(code), _, false) => format!("exit code {code}"),
                    (None, Some(signal), false) => format!("killed by signal {signal}"),
                    (None, None, false) => "ended without an exit status".to_owned(),
                };
                if !result.stdout.is_empty() {
                    content.push_str("\nstdout:\n");
                    content.push_str(result.stdout.trim_end());
                }
                if !result.stderr.is_empty() {
                    content.push_str("\nstderr:\n");
                    content.push_str(result.stderr.trim_end());
                }
                if result.likely_denied {
                    content.push_str("\n(the sandbox probably denied an operation: writes go to the workspace only, no network)");
                }
                Execution {
                    status,
                    content,
                    result: json!({
                        "exit_code": result.exit_code,
                        "signal": result.signal,
                        "timed_out": result.timed_out,
                        "stdout_bytes": result.stdout_total_bytes,
                        "stderr_bytes": result.stderr_total_bytes,
                        "stdout_truncated": result.stdout_truncated,
                        "stderr_truncated": result.stderr_truncated,
                        "duration_ms": result.duration_ms,
                        "sandbox": result.sandbox,
                    }),
                }
            }
            Ok(ExecOutcome::Refused(refusal)) => Execution {
                status: match refusal.kind {
                    RefusalKind::SandboxUnavailable => ObservationStatus::Failed,
                    _ => ObservationStatus::Denied,
                },
                content: format!("not run ({:?}): {}", refusal.kind, refusal.message),
                result: json!({"refused": refusal}),
            },
            Err(error) => failed(
                ObservationStatus::Failed,
                format!("the script could not be started: {error}"),
            ),
        }
    }
}

/// Scripts are the files under `scripts/`; the rest (but `SKILL.md`) are resources.
fn split_files(paths: impl Iterator<Item = String>) -> (Vec<String>, Vec<String>) {
    let mut scripts = Vec::new();
    let mut resources = Vec::new();
    for path in paths {
        if path.starts_with("scripts/") {
            scripts.push(path);
        } else if path != skill_registry::SKILL_FILE_NAME {
            resources.push(path);
        }
    }
    (scripts, resources)
}

/// The interpreter for a script that is not executable itself (by extension).
fn interpreter_for(script: &Path) -> Option<&'static str> {
    let executable = std::fs::metadata(script)
        .map(|metadata| metadata.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    if executable {
        return None;
    }
    match script.extension().and_then(|extension| extension.to_str()) {
        Some("py") => Some("python3"),
        Some("sh") => Some("sh"),
        Some("bash") => Some("bash"),
        Some("js" | "mjs") => Some("node"),
        Some("rb") => Some("ruby"),
        Some("pl") => Some("perl"),
        _ => None,
    }
}
