//! The embedding API: [`Agent::builder`], [`Agent::run`], [`Agent::resume`], and the
//! [`RunResult`] every run ends with.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use model_adapter::ModelProvider;
use serde_json::json;
use skill_loader::{LoaderConfig, SkillLoader};
use skills_agent_registry::{IndexConfig, SkillIndex, SkillRoot};
use tokio_util::sync::CancellationToken;
use tools_runtime::{ApprovalAnswer, ApprovalRequest, Approver, Runtime, RuntimeConfig};

use crate::budget::Outcome;
use crate::config::AgentConfig;
use crate::error::{Error, Result};
use crate::event::{
    ApprovalDenied, ApprovalGranted, ApprovalRequired, EventBus, EventSink, JsonlSink,
};
use crate::exec::{Executor, LiveTools};
use crate::external::ExternalTools;
use crate::replay::Recording;
use crate::run::{ExternalRecord, ModelSource};
use crate::rundir::{Redactor, RunDir, new_run_id};
use crate::session::{
    RECORD_FORMAT, RecordedRoot, RunOrigin, RunParts, RunResult, RunStart, UserInput,
    changed_skills, finish_run, new_run, skill_hashes, written_by,
};
use crate::state::SkillEntry;

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
    origin: Option<RunOrigin>,
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
    origin: Option<RunOrigin>,
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
            origin: None,
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

    /// Skill roots in priority order (see `skills_agent_registry::default_roots`).
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

    /// How the launcher started the agent (model spec, approval, configuration files),
    /// recorded in `run_started` so that a resume can go on the same way.
    pub fn origin(mut self, origin: RunOrigin) -> AgentBuilder {
        self.origin = Some(origin);
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
            origin: self.origin,
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
        self.bus.emit_or_keep(ApprovalRequired {
            call_id: request.call_id.clone(),
            skill: request.skill.clone(),
            argv: request.argv.clone(),
            reason: request.reason.clone(),
        });
        let answer = self.inner.approve(request).await;
        let call_id = request.call_id.clone();
        match &answer {
            ApprovalAnswer::Approved => self.bus.emit_or_keep(ApprovalGranted { call_id }),
            ApprovalAnswer::Denied { reason } => {
                self.bus.emit_or_keep(ApprovalDenied { call_id, reason: reason.clone() });
            }
        }
        answer
    }
}

/// The catalog the run sees, most relevant to the task first (fixed for the run).
fn catalog_of(index: &SkillIndex) -> Vec<SkillEntry> {
    index.skills.iter().map(SkillEntry::from).collect()
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
    /// [`Error::Registry`], [`Error::RunDirectory`], [`Error::NotStarted`] (its start could
    /// not be recorded: its folder is removed), [`Error::Serialise`].
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
        let started = self.start_run(&run_id, task, index, run_dir.clone()).await;
        let Err(error) = started else { return started };
        // A run that could not record its start (a full disk) leaves no folder behind: there
        // is nothing in it to resume.
        let removed = run_dir.as_ref().is_some_and(RunDir::remove_if_unstarted);
        match error {
            Error::RunDirectory { path, error } if removed => {
                Err(Error::NotStarted { path, error })
            }
            other => Err(other),
        }
    }

    async fn start_run(
        &self,
        run_id: &str,
        task: String,
        index: SkillIndex,
        run_dir: Option<RunDir>,
    ) -> Result<RunResult> {
        if let Some(run_dir) = &run_dir {
            run_dir.write_file(Path::new("inputs/request.txt"), task.as_bytes())?;
        }
        let bus =
            EventBus::new(run_id, self.sinks_with(run_dir.as_ref())?, Arc::clone(&self.redactor));
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
            skill_roots: self
                .roots
                .iter()
                .map(|root| RecordedRoot {
                    kind: root.kind.as_str().to_owned(),
                    path: root.path.display().to_string(),
                })
                .collect(),
            skill_hashes: skill_hashes(&index),
            origin: self.origin.clone(),
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
        let mut run = new_run(run_id, &start, parts);
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

    /// What stands between a recorded run and a faithful resume with this agent's skill
    /// roots: one line per skill of the run that changed or is gone since it began (empty
    /// when nothing did, or when the record has no hashes — format 3).
    ///
    /// # Errors
    ///
    /// [`Error::Recording`] when the directory holds no readable run, [`Error::Registry`]
    /// when the roots cannot be indexed.
    pub fn changed_skills(&self, run_dir: &Path) -> Result<Vec<String>> {
        let directory = RunDir::open(run_dir)?;
        let recording = Recording::read(&directory.events_path(), true)?;
        let index = SkillIndex::build(&self.roots, &self.index_config)?;
        Ok(changed_skills(&recording.start, &index))
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
        let changed = changed_skills(&recording.start, &index);
        if !changed.is_empty() {
            return Err(Error::Resume {
                path: directory.path().to_owned(),
                message: format!(
                    "{}; a resume needs the skills the run began with: restore them, or start a \
                     new run",
                    changed.join("; ")
                ),
            });
        }
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
