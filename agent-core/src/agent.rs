//! The embedding API: [`Agent::builder`], [`Agent::run`], [`Agent::resume`], and the
//! [`RunResult`] every run ends with.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use model_adapter::{Message, ModelProvider};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use skill_loader::{LoaderConfig, SkillLoader};
use skill_registry::{IndexConfig, SkillIndex, SkillRoot};
use tokio_util::sync::CancellationToken;
use tools_runtime::{ApprovalAnswer, ApprovalRequest, Approver, Runtime, RuntimeConfig};

use crate::budget::Outcome;
use crate::config::{AgentConfig, DecideMode};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::event::{Event, EventBus, EventKind, EventSink, JsonlSink};
use crate::exec::{Executor, LiveTools};
use crate::external::{ExternalTool, ExternalTools};
use crate::reasoning::ReasoningMetrics;
use crate::replay::Recording;
use crate::run::{
    Ending, ExternalRecord, InputKind, ModelSource, RecordedDeadline, RecordedEnding, Run,
};
use crate::rundir::{Redactor, RunDir, new_run_id};
use crate::state::{Counters, RunState, SkillEntry};

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
}

/// Builds an [`Agent`].
#[derive(Debug)]
pub struct AgentBuilder {
    model: Option<Arc<dyn ModelProvider>>,
    config: AgentConfig,
    roots: Vec<SkillRoot>,
    index_config: IndexConfig,
    loader_config: LoaderConfig,
    runtime: Option<RuntimeConfig>,
    workspace: Option<PathBuf>,
    runs_dir: Option<PathBuf>,
    sinks: Vec<Arc<dyn EventSink>>,
    approver: Option<Arc<dyn Approver>>,
    redactor: Redactor,
    cancel: CancellationToken,
    external: Option<Arc<dyn ExternalTools>>,
}

/// Runs tasks: one model, one set of skill roots, one sandbox configuration.
#[derive(Debug)]
pub struct Agent {
    model: Arc<dyn ModelProvider>,
    config: AgentConfig,
    roots: Vec<SkillRoot>,
    index_config: IndexConfig,
    loader_config: LoaderConfig,
    runtime: Option<RuntimeConfig>,
    workspace: PathBuf,
    runs_dir: Option<PathBuf>,
    sinks: Vec<Arc<dyn EventSink>>,
    approver: Option<Arc<dyn Approver>>,
    redactor: Arc<Redactor>,
    cancel: CancellationToken,
    external: Option<Arc<dyn ExternalTools>>,
}

impl Agent {
    /// A builder with default settings (react, native tools, default budgets, no sandbox
    /// runtime: scripts are refused until [`AgentBuilder::runtime`] is set).
    pub fn builder() -> AgentBuilder {
        AgentBuilder {
            model: None,
            config: AgentConfig::default(),
            roots: Vec::new(),
            index_config: IndexConfig::default(),
            loader_config: LoaderConfig::default(),
            runtime: None,
            workspace: None,
            runs_dir: None,
            sinks: Vec::new(),
            approver: None,
            redactor: Redactor::new(),
            cancel: CancellationToken::new(),
            external: None,
        }
    }
}

impl AgentBuilder {
    /// The model (required).
    pub fn model(mut self, model: Arc<dyn ModelProvider>) -> AgentBuilder {
        self.model = Some(model);
        self
    }

    /// Strategy, decide mode, model settings, budgets, guardrails, context and script settings.
    pub fn config(mut self, config: AgentConfig) -> AgentBuilder {
        self.config = config;
        self
    }

    /// Skill roots in priority order (see `skill_registry::default_roots`).
    pub fn skill_roots(mut self, roots: Vec<SkillRoot>) -> AgentBuilder {
        self.roots = roots;
        self
    }

    /// Indexing settings.
    pub fn index_config(mut self, config: IndexConfig) -> AgentBuilder {
        self.index_config = config;
        self
    }

    /// Size caps for skill bodies and resources.
    pub fn loader_config(mut self, config: LoaderConfig) -> AgentBuilder {
        self.loader_config = config;
        self
    }

    /// The sandbox runtime for `run_script` (without one, scripts are refused).
    pub fn runtime(mut self, config: RuntimeConfig) -> AgentBuilder {
        self.runtime = Some(config);
        self
    }

    /// The workspace scripts run in (default: the current directory).
    pub fn workspace(mut self, workspace: impl Into<PathBuf>) -> AgentBuilder {
        self.workspace = Some(workspace.into());
        self
    }

    /// Where run directories are created (without one, events go to the sinks only).
    pub fn runs_dir(mut self, runs_dir: impl Into<PathBuf>) -> AgentBuilder {
        self.runs_dir = Some(runs_dir.into());
        self
    }

    /// Adds an event sink (console, broadcast, memory…).
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> AgentBuilder {
        self.sinks.push(sink);
        self
    }

    /// The approver asked when the policy says so (approval events are emitted around it).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> AgentBuilder {
        self.approver = Some(approver);
        self
    }

    /// The secrets to redact (see [`Redactor::from_env`]).
    pub fn redactor(mut self, redactor: Redactor) -> AgentBuilder {
        self.redactor = redactor;
        self
    }

    /// External tools (MCP servers) offered next to the skills: listed in the catalog,
    /// called through `call_tool` (or, natively, as functions named after them) under the
    /// same validation, policy, approval, budgets, events and replay as every action.
    pub fn external_tools(mut self, tools: Arc<dyn ExternalTools>) -> AgentBuilder {
        self.external = Some(tools);
        self
    }

    /// A token that cancels runs (the current turn stops; the run ends `cancelled`).
    pub fn cancellation(mut self, token: CancellationToken) -> AgentBuilder {
        self.cancel = token;
        self
    }

    /// The agent.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] without a model, with an unknown strategy, or with zero budgets.
    pub fn build(self) -> Result<Agent> {
        let Some(model) = self.model else {
            return Err(Error::Config("no model: call AgentBuilder::model".to_owned()));
        };
        validate_config(&self.config)?;
        let workspace = match self.workspace {
            Some(workspace) => workspace,
            None => std::env::current_dir().map_err(|error| {
                Error::Config(format!("cannot read the current directory: {error}"))
            })?,
        };
        Ok(Agent {
            model,
            config: self.config,
            roots: self.roots,
            index_config: self.index_config,
            loader_config: self.loader_config,
            runtime: self.runtime,
            workspace,
            runs_dir: self.runs_dir,
            sinks: self.sinks,
            approver: self.approver,
            redactor: Arc::new(self.redactor),
            cancel: self.cancel,
            external: self.external,
        })
    }
}

fn validate_config(config: &AgentConfig) -> Result<()> {
    if !crate::strategy::STRATEGIES.contains(&config.strategy.as_str()) {
        return Err(Error::Config(format!(
            "unknown strategy `{}`; known: {}",
            config.strategy,
            crate::strategy::STRATEGIES.join(", ")
        )));
    }
    crate::strategy::check_safe_config(&config.safe).map_err(Error::Config)?;
    let budgets = &config.budgets;
    if budgets.max_turns == 0 || budgets.max_context_chars == 0 {
        return Err(Error::Config("max_turns and max_context_chars must be at least 1".to_owned()));
    }
    if config.model.max_tokens == 0 {
        return Err(Error::Config("model.max_tokens must be at least 1".to_owned()));
    }
    if !(config.context.compact_at > 0.0 && config.context.compact_at <= 1.0) {
        return Err(Error::Config(format!(
            "context.compact_at must be in (0, 1], got {}",
            config.context.compact_at
        )));
    }
    Ok(())
}

/// Emits approval events around the user's approver.
#[derive(Debug)]
struct EventingApprover {
    inner: Arc<dyn Approver>,
    bus: EventBus,
}

#[async_trait]
impl Approver for EventingApprover {
    fn name(&self) -> String {
        self.inner.name()
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.bus.emit_or_keep(
            EventKind::ApprovalRequired,
            json!({"call_id": request.call_id, "skill": request.skill, "argv": request.argv, "reason": request.reason}),
        );
        let answer = self.inner.approve(request).await;
        match &answer {
            ApprovalAnswer::Approved => {
                self.bus
                    .emit_or_keep(EventKind::ApprovalGranted, json!({"call_id": request.call_id}));
            }
            ApprovalAnswer::Denied { reason } => self.bus.emit_or_keep(
                EventKind::ApprovalDenied,
                json!({"call_id": request.call_id, "reason": reason}),
            ),
        }
        answer
    }
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
    let summarised = !offered.is_empty() && crate::guard::tools_summarised(&offered, config);
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
        !entry.disable_model_invocation || crate::guard::user_named(task, config, &entry.name)
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

/// The catalog the run sees, most relevant to the task first (fixed for the run).
fn catalog_of(index: &SkillIndex) -> Vec<SkillEntry> {
    index
        .skills
        .iter()
        .map(|skill| SkillEntry {
            name: skill.name.clone(),
            description: skill.description.clone(),
            source: skill.source.kind.as_str().to_owned(),
            directory: skill.directory.display().to_string(),
            disable_model_invocation: skill.controls.disable_model_invocation,
            allowed_tools: skill.controls.allowed_tools.clone(),
        })
        .collect()
}

/// The format of the records (`events.jsonl`) this build writes and re-runs. Replay, resume
/// and send re-run a record with today's code and compare event for event, so a record whose
/// events were shaped by another build cannot be reproduced exactly; the number says so up
/// front. Raise it whenever what a run records changes (a new field in an event a re-run
/// compares, a new event kind, a changed prompt or schema). `0` stands for the records written
/// before formats were numbered; 1 the first numbered one; 2 adds the turn note after a call
/// that worked and keeps a select "just made" across refused selects (other requests); 3 adds
/// "Results so far" to react's turn note and plan-execute-think's think note, and in JSON mode
/// offers no unrelated skill once the related ones are selected (other schemas).
pub const RECORD_FORMAT: u32 = 3;

/// What `run_started` records: everything a replay needs to run again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunStart {
    /// [`RECORD_FORMAT`] of the build that wrote the record (0: before formats were numbered).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) record_format: u32,
    /// The build that wrote the record (`agent-core X.Y.Z`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) written_by: String,
    pub(crate) task: String,
    pub(crate) config: AgentConfig,
    pub(crate) catalog: Vec<SkillEntry>,
    pub(crate) workspace: String,
    #[serde(default)]
    pub(crate) diagnostics: Vec<Value>,
    /// Sizes of the workspace files the task names (the Think-Act route), measured once at
    /// the start so replay and resume see the same note whatever the workspace holds later.
    #[serde(default)]
    pub(crate) input_sizes: Vec<u64>,
    /// The external tools on offer at the start (the catalog's tools part).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) tools: Vec<ExternalTool>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// This build, as `run_started` names it.
pub(crate) fn written_by() -> String {
    concat!("agent-core ", env!("CARGO_PKG_VERSION")).to_owned()
}

impl RunStart {
    /// Why this build cannot continue the record, if it was written in another format.
    pub(crate) fn format_mismatch(&self) -> Option<String> {
        (self.record_format != RECORD_FORMAT).then(|| {
            let writer = if self.written_by.is_empty() {
                "an earlier build".to_owned()
            } else {
                self.written_by.clone()
            };
            format!(
                "the record was written in record format {} by {writer}; this build ({}) \
                 re-runs records of format {RECORD_FORMAT} only",
                self.record_format,
                written_by(),
            )
        })
    }
}

/// Why this build cannot continue (resume, send to) a record, judged from its events as
/// [`crate::read_events`] returns them: `Some(reason)` when the record was written in another
/// [`RECORD_FORMAT`] or does not start with a readable `run_started`. Lets a caller refuse before
/// it starts a model or servers; [`Agent::resume`] and [`Agent::send`] refuse the same records.
pub fn record_format_mismatch(events: &[Event]) -> Option<String> {
    let first = events.first().filter(|event| event.kind == EventKind::RunStarted);
    let Some(first) = first else {
        return Some("the record does not start with run_started".to_owned());
    };
    match serde_json::from_value::<RunStart>(first.data.clone()) {
        Ok(start) => start.format_mismatch(),
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
        },
        endings,
        deadlines,
        input: InputKind::Task,
        pending_call: None,
        context: Context::new(system, start.task.clone()),
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
    run.emit(EventKind::RunStarted, serde_json::to_value(start)?)?;
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
    run.replaying = run.endings.pop_front();
    let ending = crate::strategy::drive(run).await?;
    end_work(run, ending)
}

fn end_work(run: &mut Run, ending: Ending) -> Result<RunResult> {
    let Ending { outcome, final_text } = ending;
    let final_text = run.bus.redactor().redact(&final_text).into_owned();
    run.state.outcome = Some(outcome);
    run.emit(
        EventKind::RunFinished,
        json!({
            "outcome": outcome,
            "degraded": outcome.is_degraded(),
            "final_text": final_text,
            "counters": run.state.counters,
            "reasoning_metrics": run.state.reasoning,
        }),
    )?;
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
    })
}

/// The user's next input to a finished piece of work: a slash command (run without the
/// model; a pending question stays pending), the answer to the pending question, or a new
/// task (its budgets start from zero; the transcript goes on).
async fn continue_with(run: &mut Run, input: UserInput) -> Result<RunResult> {
    let text = run.bus.redactor().redact(&input.text).into_owned();
    run.started = Instant::now();
    run.state.outcome = None;
    if let Some((tool, command)) = crate::builtin::parse_slash(&text) {
        run.replaying = run.endings.pop_front();
        run.emit(EventKind::UserInput, json!({"text": text, "kind": "command"}))?;
        let execution = run.executor.command(tool, &command).map_err(|divergence| {
            let path = run.run_dir.as_ref().map(|dir| dir.path().to_owned()).unwrap_or_default();
            Error::Resume { path, message: divergence.0 }
        })?;
        let output = run.bus.redactor().redact(&execution.content).into_owned();
        run.emit(
            EventKind::CommandExecuted,
            json!({"command": text, "tool": tool, "status": execution.status, "output": output}),
        )?;
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
    let mut data =
        json!({"text": text, "kind": if kind == InputKind::Task { "task" } else { "answer" }});
    if kind == InputKind::Task {
        data["input_sizes"] = json!(input_sizes);
    }
    run.emit(EventKind::UserInput, data)?;
    let answered = run.pending_call.take();
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
            run.state.plan = None;
            run.input_sizes = input_sizes;
        }
    }
    run.failures = Default::default();
    work(run, kind).await
}

impl Agent {
    fn live_tools(
        &self,
        index: SkillIndex,
        bus: &EventBus,
        runs_dir: Option<&Path>,
        run_dir: Option<&RunDir>,
    ) -> LiveTools {
        let runtime = self.runtime.clone().map(|mut config| {
            for skill in &index.skills {
                if !config.argument_read_roots.contains(&skill.directory) {
                    config.argument_read_roots.push(skill.directory.clone());
                }
            }
            let mut runtime = Runtime::new(config);
            if let Some(approver) = &self.approver {
                runtime = runtime.with_approver(Arc::new(EventingApprover {
                    inner: Arc::clone(approver),
                    bus: bus.clone(),
                }));
            }
            Arc::new(runtime)
        });
        // The runs directory must not be writable by scripts when it lies in the workspace.
        let protected =
            match (runs_dir.and_then(|dir| dir.canonicalize().ok()), self.workspace.canonicalize())
            {
                (Some(runs), Ok(workspace)) if runs.starts_with(&workspace) => vec![runs],
                _ => Vec::new(),
            };
        LiveTools {
            index,
            loader: SkillLoader::new(self.loader_config),
            runtime,
            workspace: self.workspace.clone(),
            protected,
            scripts: self.config.scripts.clone(),
            external: self.external.clone(),
            tool_timeout_ms: self.config.tools.timeout_ms,
            run_dir: run_dir.cloned(),
        }
    }

    fn sinks_with(&self, run_dir: Option<&RunDir>) -> Result<Vec<Arc<dyn EventSink>>> {
        let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
        if let Some(run_dir) = run_dir {
            sinks.push(Arc::new(JsonlSink::open(&run_dir.events_path())?));
        }
        sinks.extend(self.sinks.iter().cloned());
        Ok(sinks)
    }

    /// Runs `task` to its end. The result always carries a final text; `Err` means the run
    /// could not be recorded (run directory IO) or could not start (skill roots).
    ///
    /// # Errors
    ///
    /// [`Error::Registry`], [`Error::RunDirectory`], [`Error::Serialise`].
    pub async fn run(&self, task: &str) -> Result<RunResult> {
        let index = SkillIndex::build(&self.roots, &self.index_config)?;
        // Ids carry 16 random bits per second: draw again while the folder is taken (many
        // runs in one second, as a benchmark makes); `create` still refuses to reuse one.
        let mut run_id = new_run_id();
        if let Some(runs_dir) = &self.runs_dir {
            for _ in 0..16 {
                if !runs_dir.join(&run_id).exists() {
                    break;
                }
                run_id = new_run_id();
            }
        }
        let task = self.redactor.redact(task).into_owned();
        let run_dir = match &self.runs_dir {
            Some(runs_dir) => Some(RunDir::create(runs_dir, &run_id)?),
            None => None,
        };
        if let Some(run_dir) = &run_dir {
            run_dir.write_file(Path::new("inputs/request.txt"), task.as_bytes())?;
        }
        let bus =
            EventBus::new(&run_id, self.sinks_with(run_dir.as_ref())?, Arc::clone(&self.redactor));
        let start = RunStart {
            record_format: RECORD_FORMAT,
            written_by: written_by(),
            input_sizes: crate::reasoning::input_sizes(&task, &self.workspace),
            task,
            config: self.config.clone(),
            catalog: catalog_of(&index),
            workspace: self.workspace.display().to_string(),
            diagnostics: index
                .diagnostics
                .iter()
                .map(|diagnostic| json!({"path": diagnostic.path, "line": diagnostic.line, "rule": diagnostic.rule, "message": diagnostic.message}))
                .collect(),
            tools: self.external.as_ref().map(|external| external.tools()).unwrap_or_default(),
        };
        let executor = Executor {
            recorded: Default::default(),
            commands: Default::default(),
            live: Some(self.live_tools(index, &bus, self.runs_dir.as_deref(), run_dir.as_ref())),
        };
        let model =
            ModelSource { recorded: Default::default(), live: Some(Arc::clone(&self.model)) };
        let parts = RunParts {
            bus,
            model,
            executor,
            run_dir,
            cancel: self.cancel.clone(),
            endings: VecDeque::new(),
            deadlines: VecDeque::new(),
            external: ExternalRecord::default(),
        };
        let mut run = new_run(&run_id, &start, parts);
        finish_run(&mut run, &start, VecDeque::new()).await
    }

    /// Replaces the cancellation token later runs observe. A session gives each input its own
    /// token, so that cancelling stops one piece of work, not the session.
    pub fn set_cancellation(&mut self, token: CancellationToken) {
        self.cancel = token;
    }

    /// Continues a run that was interrupted (killed mid-turn): the recorded events are
    /// reproduced from the record — model answers and executed actions are not asked or run
    /// again — and the run goes on live from where the record ends. The interrupted turn is
    /// redone from its last recorded step; nothing recorded as done is done twice.
    ///
    /// # Errors
    ///
    /// [`Error::Recording`] when the directory holds no readable run or a finished one,
    /// [`Error::Resume`] when the re-run departs from the record (changed skills, settings).
    pub async fn resume(&self, run_dir: &Path) -> Result<RunResult> {
        self.reopen(run_dir, None).await
    }

    /// Gives a finished run the user's next input and runs it: the answer to the question the
    /// run asked (outcome `needs_input`), a new task in the same run (a session: the
    /// transcript goes on, budgets start again), or a slash command (`/todo …`, `/schedule
    /// …`, `/view`, run without the model; a pending question stays pending). The record is
    /// reproduced first, as by [`Agent::resume`]; then `user_input` and the new work are
    /// appended to the same run directory.
    ///
    /// # Errors
    ///
    /// [`Error::Recording`] when the directory holds no readable run or an interrupted one
    /// (resume it first), [`Error::Resume`] when the re-run departs from the record.
    pub async fn send(&self, run_dir: &Path, input: &str) -> Result<RunResult> {
        self.reopen(run_dir, Some(input)).await
    }

    async fn reopen(&self, run_dir: &Path, input: Option<&str>) -> Result<RunResult> {
        let directory = RunDir::open(run_dir)?;
        let recording = Recording::read(&directory.events_path(), true)?;
        if let Some(mismatch) = recording.start.format_mismatch() {
            return Err(Error::Recording {
                path: directory.events_path(),
                message: format!(
                    "{mismatch}: continue it with the build that wrote it, or start a new run \
                     (the record itself is intact and still reads: `replay` scores it)"
                ),
            });
        }
        recording.truncate_partial_line(&directory.events_path())?;
        match (recording.finished, input) {
            (true, None) => {
                return Err(Error::Recording {
                    path: directory.events_path(),
                    message: match recording.endings.last().map(|ending| ending.outcome) {
                        Some(Outcome::NeedsInput) => "the run waits for the user's answer to \
                                                      its question: send the answer"
                            .to_owned(),
                        _ => "the run already finished; there is nothing to resume".to_owned(),
                    },
                });
            }
            (false, Some(_)) => {
                return Err(Error::Recording {
                    path: directory.events_path(),
                    message: "the run was interrupted before it finished: resume it first"
                        .to_owned(),
                });
            }
            _ => {}
        }
        let index = SkillIndex::build(&self.roots, &self.index_config)?;
        let bus = EventBus::new(
            &recording.run_id,
            self.sinks_with(Some(&directory))?,
            Arc::clone(&self.redactor),
        );
        bus.expect(recording.comparable_events(), recording.last_seq, directory.path());
        let live = self.live_tools(index, &bus, directory.path().parent(), Some(&directory));
        let executor = Executor {
            recorded: recording.executions.clone().into(),
            commands: recording.commands.clone().into(),
            live: Some(live),
        };
        let model = ModelSource {
            recorded: recording.calls.clone().into(),
            live: Some(Arc::clone(&self.model)),
        };
        let parts = RunParts {
            bus,
            model,
            executor,
            run_dir: Some(directory),
            cancel: self.cancel.clone(),
            endings: recording.endings.clone().into(),
            deadlines: recording.deadlines.clone().into(),
            external: recording.external(),
        };
        let mut inputs: VecDeque<UserInput> = recording.inputs.clone().into();
        if let Some(text) = input {
            inputs.push_back(UserInput { text: text.to_owned(), input_sizes: None });
        }
        let mut run = new_run(&recording.run_id, &recording.start, parts);
        finish_run(&mut run, &recording.start, inputs).await
    }
}
