//! Launching work: the flags a run takes, the settings merged from them, and an [`Agent`]
//! prepared with its model, skills, sandbox, approver, console and MCP servers (`prepare`), for
//! `run`, `resume` and `chat` alike; the usage errors (exit 2) and the exit code of an outcome.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use async_trait::async_trait;
use clap::{Args, ValueEnum};
use skills_agent_core::{Agent, ConsoleOptions, ConsoleSink, Outcome, Redactor};
use skills_agent_registry::SkillRoot;
use tools_runtime::{ApprovalAnswer, ApprovalRequest, Approver, RuntimeConfig, SandboxHelper};

use crate::config::{self, Approval, Resolved};
use skills_agent_models::local_model::cache_dir;
use skills_agent_models::specs::{ModelSpec, connect_after};

/// Flags shared by `run` and `resume`.
#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    /// local, local:0.5b, openai:MODEL, anthropic:MODEL, mock:FILE, replay:RUN_DIR.
    #[arg(long, value_name = "SPEC")]
    pub(crate) model: Option<String>,
    /// Skill roots to add (searched after the project and user roots).
    #[arg(long = "skills", value_name = "DIR")]
    pub(crate) skills: Vec<PathBuf>,
    /// Where scripts run (default: the current directory).
    #[arg(long)]
    pub(crate) workspace: Option<PathBuf>,
    /// Where run directories go (default: .agent/runs under the workspace).
    #[arg(long)]
    pub(crate) runs_dir: Option<PathBuf>,
    /// When to ask before running a script.
    #[arg(long, value_enum)]
    pub(crate) approval: Option<Approval>,
    /// One JSON line with the result on stdout.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print nothing but the final answer.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Resuming: how many model answers the record already has (a `mock:` model starts after
    /// them).
    #[arg(skip)]
    pub(crate) answered: usize,
    /// More sinks for the run's events (a fleet worker's engine sink).
    #[arg(skip)]
    pub(crate) sinks: Vec<Arc<dyn skills_agent_core::EventSink>>,
}

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    pub(crate) common: CommonArgs,
    #[command(flatten)]
    pub(crate) flags: RunFlags,
    /// Reopen this run directory's session instead of starting a new one.
    #[arg(long, value_name = "RUN_DIR")]
    pub(crate) resume: Option<PathBuf>,
}

/// Settings of new work: strategy and budgets.
#[derive(Debug, Args, Default)]
pub(crate) struct RunFlags {
    /// Let the model ask you a question (`ask_user`): without a terminal the run then ends with
    /// exit code 4 and `resume RUN_DIR --answer TEXT` continues it (always on in `chat`).
    #[arg(long)]
    pub(crate) ask_user: bool,
    /// The loop strategy (default: react).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(skills_agent_core::STRATEGIES.iter().copied()))]
    pub(crate) strategy: Option<String>,
    /// Maximum turns (default 12; rounds for plan-execute-think).
    #[arg(long)]
    pub(crate) max_turns: Option<u32>,
    /// Maximum actions other than the final answer (default 30).
    #[arg(long)]
    pub(crate) max_tool_calls: Option<u32>,
    /// Maximum scripts run (default 6).
    #[arg(long)]
    pub(crate) max_script_runs: Option<u32>,
    /// Maximum characters of context sent to the model (default 48,000; 22,000 for the
    /// local 1.5B model, 11,000 for the 0.5B).
    #[arg(long)]
    pub(crate) max_context_chars: Option<usize>,
}

impl RunFlags {
    /// What these flags set above every other source of settings.
    fn overrides(&self) -> config::RunOverrides {
        config::RunOverrides {
            strategy: self.strategy.clone(),
            max_turns: self.max_turns,
            max_tool_calls: self.max_tool_calls,
            max_script_runs: self.max_script_runs,
            max_context_chars: self.max_context_chars,
        }
    }
}

/// A usage or configuration error (exit 2).
#[derive(Debug)]
pub(crate) struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub(crate) fn usage(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(error.to_string()))
}

pub(crate) fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

pub(crate) fn workspace_of(flag: Option<PathBuf>) -> Result<PathBuf> {
    let workspace = match flag {
        Some(path) => path,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    workspace
        .canonicalize()
        .map_err(|error| usage(format!("workspace {}: {error}", workspace.display())))
}

/// The skill roots: project > user > extra (`--skills`, config) > builtin.
pub(crate) fn skill_roots(workspace: &Path, extra: &[PathBuf]) -> Vec<SkillRoot> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut roots: Vec<SkillRoot> =
        skills_agent_registry::default_roots(workspace, home.as_deref())
            .into_iter()
            .filter(|root| root.kind != skills_agent_registry::RootKind::Builtin)
            .collect();
    roots.extend(skills_agent_registry::extra_roots(extra.iter().cloned()));
    let builtin = cache_dir()
        .ok()
        .and_then(|cache| {
            skills_agent_registry::write_builtin_skills(&cache.join("builtin-skills")).ok()
        })
        .unwrap_or_else(skills_agent_registry::builtin_root);
    roots.push(builtin);
    roots
}

/// Asks on the terminal; denies with a reason when there is none.
#[derive(Debug)]
pub(crate) struct TerminalApprover {
    pub(crate) interactive: bool,
}

#[async_trait]
impl Approver for TerminalApprover {
    fn name(&self) -> String {
        "terminal".to_owned()
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if !self.interactive {
            return ApprovalAnswer::Denied {
                reason: Some(
                    "approval needed but there is no terminal to ask (stdin is not a terminal); \
                     run in a terminal, or with --approval never and a policy that allows it"
                        .to_owned(),
                ),
            };
        }
        let prompt = format!("\napprove `{}`? ({}) [y/N] ", request.argv.join(" "), request.reason);
        let answer = tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr();
            let _ = stderr.write_all(prompt.as_bytes());
            let _ = stderr.flush();
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            line
        })
        .await
        .unwrap_or_default();
        if matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
            ApprovalAnswer::Approved
        } else {
            ApprovalAnswer::Denied { reason: Some("the user said no".to_owned()) }
        }
    }
}

pub(crate) struct Prepared {
    pub(crate) agent: Agent,
    /// The run's MCP servers, when `[mcp_servers]` configures some.
    pub(crate) mcp: Option<Arc<crate::mcp_tools::McpTools>>,
    pub(crate) console: Option<Arc<ConsoleSink>>,
    pub(crate) json: bool,
    pub(crate) strategy: String,
    pub(crate) model: String,
}

/// What Ctrl-C does: cancel the one run (a second press quits), or, in a session, cancel the
/// piece of work in progress (the session's current token) and nothing more.
pub(crate) enum Interrupts {
    OneRun,
    Session(Arc<std::sync::Mutex<skills_agent_core::CancellationToken>>),
    /// A fleet worker's run: the worker handles the signals (stop taking tasks, hand back).
    Worker,
}

pub(crate) async fn prepare(
    common: &CommonArgs,
    run: Option<&RunFlags>,
    interrupts: Interrupts,
) -> Result<Prepared> {
    let env = environment();
    let workspace = workspace_of(common.workspace.clone())?;
    let resolved = config::load(&workspace, config::user_file().as_deref(), &env).map_err(usage)?;
    let spec = match common.model.as_deref().or(resolved.settings.model.as_deref()) {
        Some(text) => ModelSpec::parse(text).map_err(usage)?,
        None => ModelSpec::default_for(&env),
    };
    // A bad spec, file or key is the user's to fix (2); a local model that fails to start is not.
    let connected =
        connect_after(&spec, &env, &workspace, common.answered).map_err(|error| match spec {
            ModelSpec::Local(_) => error,
            _ => usage(format!("{error:#}")),
        })?;
    // A session can always ask: the next line is the answer.
    let ask_user =
        run.is_some_and(|flags| flags.ask_user) || matches!(interrupts, Interrupts::Session(_));
    let overrides = run.map(RunFlags::overrides);
    let config = resolved.agent_config(overrides.as_ref(), ask_user, &spec, &connected.name);
    let Resolved { settings, mcp_servers, files, .. } = resolved;
    let mut extra = common.skills.clone();
    for root in &settings.skills {
        if !extra.contains(root) {
            extra.push(root.clone());
        }
    }
    let runs_dir = common
        .runs_dir
        .clone()
        .or(settings.runs_dir.clone())
        .unwrap_or_else(|| workspace.join(".agent").join("runs"));
    let mut runtime = RuntimeConfig::new(
        SandboxHelper::current_exe()
            .context("cannot find this binary to use as the sandbox helper")?,
    );
    let approval = common.approval.or(settings.approval).unwrap_or(Approval::AskForRisky);
    runtime.policy.approval_mode = approval.mode();
    let origin = skills_agent_core::RunOrigin {
        model: spec.to_spec(),
        approval: approval
            .to_possible_value()
            .map(|value| value.get_name().to_owned())
            .unwrap_or_default(),
        config_sources: files.iter().map(|file| file.display().to_string()).collect(),
    };
    let mut redactor = Redactor::from_env(env.iter().cloned(), &settings.redact_env);
    for (name, value) in &connected.secrets {
        redactor.add(name, value);
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    // A session prints each answer once, after the work (a streamed answer would repeat).
    let stream_answer = matches!(interrupts, Interrupts::OneRun);
    let console = (!common.quiet).then(|| {
        Arc::new(ConsoleSink::new(
            Box::new(std::io::stderr()),
            ConsoleOptions { color: std::io::stderr().is_terminal(), stream_answer },
        ))
    });
    let cancel = skills_agent_core::CancellationToken::new();
    // The SIGINT handler is installed here, before any line editor reads a line: rustyline
    // puts its own handler in place while it reads and restores the one it found, so a handler
    // registered later (by a task's first poll) would be replaced by the default, and Ctrl-C
    // would kill the process instead of cancelling the task.
    let signals = || -> Result<_> {
        let interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .context("cannot install the Ctrl-C handler")?;
        // SIGTERM (a service manager, `kill`, a CI timeout) stops a run as Ctrl-C does: the
        // run is cancelled, its script and MCP servers are stopped, and the record ends
        // `cancelled`; a process killed outright would leave the script's children running.
        let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("cannot install the SIGTERM handler")?;
        Ok((interrupt, terminate))
    };
    match interrupts {
        Interrupts::Worker => {}
        Interrupts::OneRun => {
            let (mut interrupt, mut terminate) = signals()?;
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let interrupted = tokio::select! {
                    signal = interrupt.recv() => signal.map(|()| "Ctrl-C"),
                    signal = terminate.recv() => signal.map(|()| "SIGTERM"),
                };
                if let Some(what) = interrupted {
                    eprintln!("\nskills-agent: {what}: cancelling (Ctrl-C again to quit at once)");
                    cancel.cancel();
                    if interrupt.recv().await.is_some() {
                        std::process::exit(130);
                    }
                }
            });
        }
        Interrupts::Session(current) => {
            let (mut interrupt, mut terminate) = signals()?;
            let cancel_current =
                |current: &std::sync::Mutex<skills_agent_core::CancellationToken>| {
                    if let Ok(token) = current.lock() {
                        token.cancel();
                    }
                };
            let for_terminate = Arc::clone(&current);
            tokio::spawn(async move {
                while interrupt.recv().await.is_some() {
                    eprintln!("\nskills-agent: cancelling this task (the session goes on)");
                    cancel_current(&current);
                }
            });
            // SIGTERM ends the session: the task in progress is cancelled (its script
            // stopped), then the process leaves.
            tokio::spawn(async move {
                if terminate.recv().await.is_some() {
                    eprintln!("\nskills-agent: SIGTERM: cancelling the task and leaving");
                    cancel_current(&for_terminate);
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    std::process::exit(143);
                }
            });
        }
    }
    let strategy = config.strategy.clone();
    let model_name = connected.name.clone();
    // Started with the run's sandbox settings; a server that fails is recorded (tool_servers)
    // and told on the console, and the run goes on without it.
    let mcp = crate::mcp_tools::start(&mcp_servers, &runtime, &workspace, &env).await;
    let mut builder = Agent::builder()
        .model(connected.provider)
        .config(config)
        .skill_roots(skill_roots(&workspace, &extra))
        .runtime(runtime)
        .workspace(&workspace)
        .runs_dir(runs_dir)
        .approver(Arc::new(TerminalApprover { interactive }))
        .redactor(redactor)
        .cancellation(cancel)
        .origin(origin);
    if let Some(console) = &console {
        builder = builder.sink(console.clone());
    }
    if let Some(mcp) = &mcp {
        builder = builder.external_tools(mcp.clone());
    }
    for sink in &common.sinks {
        builder = builder.sink(Arc::clone(sink));
    }
    if let Some(fault) = crate::faults::KillAfterSeq::from_env(&env).map_err(usage)? {
        builder = builder.sink(Arc::new(fault));
    }
    let agent = builder.build().map_err(usage)?;
    Ok(Prepared { agent, mcp, console, json: common.json, strategy, model: model_name })
}

impl Prepared {
    /// Stops the run's MCP servers (after the agent is done with them).
    pub(crate) async fn shutdown(self) {
        let Prepared { agent, mcp, .. } = self;
        drop(agent);
        if let Some(mcp) = mcp {
            mcp.shutdown().await;
        }
    }
}

/// A usage error when a skill of the run in `run_dir` changed or is gone since the run began:
/// a resume with other skills would not continue the same run.
pub(crate) fn refuse_changed_skills(prepared: &Prepared, run_dir: &Path) -> Result<()> {
    let changed = prepared.agent.changed_skills(run_dir).map_err(usage)?;
    if changed.is_empty() {
        return Ok(());
    }
    Err(usage(format!(
        "{}: {}; a resume needs the skills the run began with — restore them, or start a new run",
        run_dir.display(),
        changed.join("; ")
    )))
}

pub(crate) fn exit_code(outcome: Outcome) -> u8 {
    outcome.exit_code()
}

/// `prepare` for the chat session.
pub(crate) async fn prepare_chat(
    args: &ChatArgs,
    current: Arc<std::sync::Mutex<skills_agent_core::CancellationToken>>,
) -> Result<Prepared> {
    prepare(&args.common, Some(&args.flags), Interrupts::Session(current)).await
}

impl ChatArgs {
    pub(crate) fn resume_dir(&self) -> Option<&Path> {
        self.resume.as_deref()
    }

    pub(crate) fn json(&self) -> bool {
        self.common.json
    }
}

/// Prints one line on stdout (see `out!`).
pub(crate) fn print(text: &str) {
    print_line(format_args!("{text}"));
}

pub(crate) fn print_line(line: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout.write_fmt(line).and_then(|()| stdout.write_all(b"\n")) {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("skills-agent: cannot write to stdout: {error}");
        std::process::exit(1);
    }
}
