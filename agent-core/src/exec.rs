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
use skills_agent_registry::SkillIndex;
use tools_runtime::{
    ApprovalRequest, Decision, ExecOutcome, ExecRequest, Refusal, RefusalKind, RuleSet, Runtime,
};

use crate::action::Action;
use crate::config::ScriptSettings;
use crate::event::Payload;
use crate::external::{ExternalOutcome, ExternalTool, ExternalTools};
use crate::rundir::{RunDir, sha256_hex};
use crate::state::{ObservationStatus, SelectedSkill};

pub(crate) mod builtin;

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
    pub(crate) action: Action,
    pub(crate) execution: Execution,
    /// Events recorded while the action ran (approvals), re-emitted in order.
    pub(crate) side_events: Vec<Payload>,
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
    /// External (MCP) tools, when the agent has some.
    pub(crate) external: Option<Arc<dyn ExternalTools>>,
    /// Default timeout of an external call.
    pub(crate) tool_timeout_ms: u64,
    /// Where blobs of external results are stored.
    pub(crate) run_dir: Option<RunDir>,
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
            Some(live) => Ok(builtin::run(&live.workspace, tool, command)),
            None => Err(Divergence(format!("the record has no output for /{tool} {command}"))),
        }
    }

    /// `tools` are the external tools on offer (for `describe_tools` and `call_tool`).
    pub(crate) async fn execute(
        &mut self,
        action: &Action,
        call_id: &str,
        tools: &[ExternalTool],
    ) -> Result<(Execution, Vec<Payload>), Divergence> {
        if let Some(recorded) = self.recorded.pop_front() {
            if recorded.action != *action {
                let json = |action: &Action| serde_json::to_value(action).unwrap_or(Value::Null);
                return Err(Divergence(format!(
                    "the record executed {} where the re-run asks for {}",
                    json(&recorded.action),
                    json(action)
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
        Ok((live.execute(action, call_id, tools).await, Vec::new()))
    }
}

fn failed(status: ObservationStatus, message: String) -> Execution {
    Execution { status, result: json!({"error": message}), content: message }
}

impl LiveTools {
    async fn execute(&self, action: &Action, call_id: &str, tools: &[ExternalTool]) -> Execution {
        match action {
            Action::DescribeTools { names } => {
                let found: Vec<&ExternalTool> = names
                    .iter()
                    .filter_map(|name| tools.iter().find(|tool| &tool.name == name))
                    .collect();
                if found.is_empty() {
                    return failed(
                        ObservationStatus::Failed,
                        format!("no such tool on offer now: {}", names.join(", ")),
                    );
                }
                let names: Vec<&str> = found.iter().map(|tool| tool.name.as_str()).collect();
                Execution {
                    status: ObservationStatus::Ok,
                    content: crate::external::describe(&found),
                    result: json!({"described": names}),
                }
            }
            Action::CallTool { name, arguments } => {
                match tools.iter().find(|tool| &tool.name == name) {
                    Some(tool) => self.call_tool(tool, arguments, call_id).await,
                    None => failed(
                        ObservationStatus::Failed,
                        format!(
                            "tool `{name}` is no longer on offer (its server changed its list)"
                        ),
                    ),
                }
            }
            Action::SelectSkills { names } => self.select(names),
            Action::LoadResource { skill, path, section } => {
                self.load(skill, path, section.as_deref())
            }
            Action::RunScript { skill, script, args } => {
                self.run_script(skill, script, args, call_id).await
            }
            Action::Todo { command } => builtin::run(&self.workspace, "todo", command),
            Action::Schedule { command } => builtin::run(&self.workspace, "schedule", command),
            // Recall, questions and final answers never reach the executor.
            Action::RecallObservation { .. }
            | Action::AskUser { .. }
            | Action::FinalAnswer { .. } => failed(
                ObservationStatus::InvalidAction,
                format!("`{}` is not executed by tools", action.name()),
            ),
        }
    }

    /// Approval of an external call whose policy decision is known: tools-runtime's
    /// `authorize` (approval mode, approver with its events, timeout, audit record). Without a
    /// sandbox runtime there is no approver: `prompt` is refused, `allow` goes ahead.
    async fn authorize(
        &self,
        request: &ApprovalRequest,
        decision: Decision,
    ) -> std::result::Result<(), Refusal> {
        if let Some(runtime) = &self.runtime {
            return runtime.authorize(request, decision).await;
        }
        let refusal = |kind: RefusalKind, message: String| Refusal { kind, message, sandbox: None };
        let what = request.argv.join(" ");
        match decision {
            Decision::Allow => Ok(()),
            Decision::Prompt => Err(refusal(
                RefusalKind::ApprovalUnavailable,
                format!("`{what}` needs approval but this agent has no runtime and no approver"),
            )),
            Decision::Forbidden => {
                Err(refusal(RefusalKind::PolicyForbidden, format!("policy forbids `{what}`")))
            }
        }
    }

    /// One external call: approval, the call under its timeout, blobs stored by hash.
    async fn call_tool(&self, tool: &ExternalTool, arguments: &Value, call_id: &str) -> Execution {
        let Some(external) = &self.external else {
            return failed(
                ObservationStatus::Failed,
                format!("tool `{}` cannot be called: this agent has no external tools", tool.name),
            );
        };
        let request = ApprovalRequest {
            call_id: call_id.to_owned(),
            skill: None,
            argv: vec![tool.name.clone(), arguments.to_string()],
            cwd: self.workspace.clone(),
            allow_network: false,
            reason: match tool.decision {
                Decision::Prompt => format!(
                    "the [mcp_servers.{}] rules say prompt for this tool",
                    crate::external::server_of(&tool.name)
                ),
                Decision::Allow | Decision::Forbidden => {
                    "the approval mode asks for every call".to_owned()
                }
            },
        };
        if let Err(refusal) = self.authorize(&request, tool.decision).await {
            return Execution {
                status: ObservationStatus::Denied,
                content: format!("not run ({:?}): {}", refusal.kind, refusal.message),
                result: json!({"tool": tool.name, "refused": refusal}),
            };
        }
        let timeout =
            tool.timeout.unwrap_or_else(|| std::time::Duration::from_millis(self.tool_timeout_ms));
        // The server side enforces `timeout`; this is the backstop for one that does not.
        let backstop = timeout + std::time::Duration::from_secs(2);
        let outcome = tokio::time::timeout(
            backstop,
            external.call(&tool.name, arguments.clone(), Some(timeout)),
        )
        .await;
        match outcome {
            Err(_) => Execution {
                status: ObservationStatus::Timeout,
                content: format!(
                    "the call to `{}` did not answer within {} ms",
                    tool.name,
                    timeout.as_millis()
                ),
                result: json!({"tool": tool.name, "timed_out": true}),
            },
            Ok(ExternalOutcome::Failed { reason }) => {
                let lower = reason.to_lowercase();
                let status = if lower.contains("timed out") || lower.contains("timeout") {
                    ObservationStatus::Timeout
                } else {
                    ObservationStatus::Failed
                };
                Execution {
                    status,
                    content: format!("the call to `{}` failed: {reason}", tool.name),
                    result: json!({"tool": tool.name, "error": reason}),
                }
            }
            Ok(ExternalOutcome::Done { is_error, text, structured, blobs }) => {
                let mut lines = Vec::new();
                let mut stored = Vec::new();
                for blob in &blobs {
                    let extension = crate::external::extension_for(blob.mime_type.as_deref());
                    let (path, sha256) = match &self.run_dir {
                        Some(run_dir) => match run_dir.store_blob(&blob.data, extension) {
                            Ok(stored) => (stored.path, stored.sha256),
                            Err(error) => {
                                lines.push(format!("[a blob could not be stored: {error}]"));
                                continue;
                            }
                        },
                        None => {
                            let sha256 = sha256_hex(&blob.data);
                            (format!("observations/{sha256}.{extension}"), sha256)
                        }
                    };
                    let mime = blob.mime_type.as_deref().unwrap_or("application/octet-stream");
                    let uri =
                        blob.uri.as_deref().map(|uri| format!(" from {uri}")).unwrap_or_default();
                    lines.push(format!(
                        "[{mime}, {} bytes{uri}: stored as {path}]",
                        blob.data.len()
                    ));
                    stored.push(json!({
                        "sha256": sha256,
                        "path": path,
                        "bytes": blob.data.len(),
                        "mime_type": blob.mime_type,
                        "uri": blob.uri,
                    }));
                }
                let mut content =
                    crate::external::observation_text(&text, structured.as_ref(), &lines);
                if is_error {
                    content = format!("the tool reported an error:\n{content}");
                }
                Execution {
                    status: if is_error {
                        ObservationStatus::Failed
                    } else {
                        ObservationStatus::Ok
                    },
                    content,
                    result: json!({
                        "tool": tool.name,
                        "server": crate::external::server_of(&tool.name),
                        "is_error": is_error,
                        "structured": structured.is_some(),
                        "blobs": stored,
                    }),
                }
            }
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
            let rendered = body.render();
            let usage = crate::usage::script_usages(&rendered, &scripts);
            content.push_str(&rendered);
            content.push('\n');
            if !scripts.is_empty() {
                content.push_str(&format!("Scripts (run_script): {}\n", scripts.join(", ")));
            }
            if !resources.is_empty() {
                content.push_str(&format!("Files (load_resource): {}\n", resources.join(", ")));
            }
            let referenced = referenced_files(&rendered, &resources);
            skills.push(SelectedSkill {
                name: name.clone(),
                scripts,
                resources,
                usage,
                referenced,
            });
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
/// The files of `resources` that `body` names, in the order it first names them (a path
/// inside a longer one, `a.md` in `data.md`, does not count).
fn referenced_files(body: &str, resources: &[String]) -> Vec<String> {
    let named_at = |path: &str| {
        body.match_indices(path).map(|(at, _)| at).find(|&at| {
            let before = body[..at].chars().next_back();
            let after = body[at + path.len()..].chars().next();
            let part = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '.');
            !before.is_some_and(part) && !after.is_some_and(|c| c != '.' && part(c))
        })
    };
    let mut named: Vec<(usize, &String)> =
        resources.iter().filter_map(|path| Some((named_at(path)?, path))).collect();
    named.sort();
    named.into_iter().map(|(_, path)| path.clone()).collect()
}

fn split_files(paths: impl Iterator<Item = String>) -> (Vec<String>, Vec<String>) {
    let mut scripts = Vec::new();
    let mut resources = Vec::new();
    for path in paths {
        if path.starts_with("scripts/") {
            scripts.push(path);
        } else if path != skills_agent_registry::SKILL_FILE_NAME {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_a_body_names_come_in_the_order_it_names_them() {
        let resources: Vec<String> =
            ["LICENSE.txt", "a.md", "references/codes.md", "references/rates.md", "data.md"]
                .iter()
                .map(|path| (*path).to_owned())
                .collect();
        let body = "Rates are in `references/rates.md`; error codes in references/codes.md.\n\
                    See data.md. Not a.md-like names: xa.md, a.mdx.";
        assert_eq!(
            referenced_files(body, &resources),
            ["references/rates.md", "references/codes.md", "data.md"]
        );
        assert!(referenced_files("", &resources).is_empty());
    }
}
