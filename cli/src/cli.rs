//! The commands: `run`, `chat`, `resume`, `replay`, `runs list`, `skills list|show|validate`,
//! `model start|stop|status`. Exit codes: 0 completed, 3 ended degraded (budget, stuck,
//! cancelled), 4 waiting for the user's answer (`needs_input`), 1 error, 2 usage or
//! configuration error.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use agent_core::{
    Agent, AgentConfig, ConsoleOptions, ConsoleSink, EventKind, ModelSettings, Outcome, Redactor,
    RunResult, replay_check, turns,
};
use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use skill_registry::{IndexConfig, Mode, SkillIndex, SkillRoot};
use tools_runtime::{ApprovalAnswer, ApprovalRequest, Approver, RuntimeConfig, SandboxHelper};

use crate::config::{self, Approval, Resolved};
use crate::local_model::{LocalModel, ModelSize, cache_dir};
use crate::models::{ModelSpec, connect};

/// `println!` that ends the process quietly when stdout is closed (`skills-agent runs list |
/// head -1`), as a Unix tool killed by SIGPIPE would, instead of panicking.
macro_rules! out {
    ($($argument:tt)*) => {
        print_line(format_args!($($argument)*))
    };
}

fn print_line(line: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout.write_fmt(line).and_then(|()| stdout.write_all(b"\n")) {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("skills-agent: cannot write to stdout: {error}");
        std::process::exit(1);
    }
}

/// Run LLM agents on Agent Skills: sandboxed scripts, budgets, run directories, replay.
#[derive(Debug, Parser)]
#[command(name = "skills-agent", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an agent on a task and print its answer.
    Run(RunArgs),
    /// An interactive session: type tasks, answers and /todo, /schedule, /view commands.
    Chat(ChatArgs),
    /// Continue an interrupted run, answer the question a run asked (--answer), or, in a
    /// terminal, reopen a finished run as a chat session.
    Resume {
        /// The run directory.
        run_dir: PathBuf,
        /// The answer to the run's question (it ended `needs_input`, exit code 4).
        #[arg(long, value_name = "TEXT")]
        answer: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Print a recorded run's turns; with --check, re-run it from its record and compare.
    Replay {
        /// The run directory.
        run_dir: PathBuf,
        /// Re-run against the recorded answers and results; exit 1 on any divergence.
        #[arg(long)]
        check: bool,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Recorded runs.
    Runs {
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// The skills the agent sees.
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Watch runs live and replay them in a browser (an HTTP server over a runs directory).
    Serve(crate::serve::ServeArgs),
    /// The embedded local model (llama.cpp + Qwen2.5-Coder from PyPI).
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// The MCP servers of `[mcp_servers]` in skills-agent.toml.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Start the configured servers (confined, as a run does), list their state and tools,
    /// and stop them.
    List {
        /// The workspace (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// List the runs in the runs directory, oldest first.
    List {
        /// The runs directory (default: .agent/runs under the workspace).
        #[arg(long)]
        runs_dir: Option<PathBuf>,
        /// The workspace (default: the current directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// One JSON array on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct SkillsArgs {
    /// Extra skill roots (searched after the project and user roots, before the builtin one).
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// The workspace (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the skills, the shadowed ones and any problems.
    List(SkillsArgs),
    /// Show one skill: metadata, files and body.
    Show {
        /// The skill's name.
        name: String,
        #[command(flatten)]
        args: SkillsArgs,
    },
    /// Check every skill against the Agent Skills format; exit 1 on any error.
    Validate {
        /// Treat every rule violation as an error.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        args: SkillsArgs,
    },
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Install (the first time) and start the model; prints its URL.
    Start(SizeArg),
    /// Stop the model.
    Stop(SizeArg),
    /// Say whether the model runs, and where.
    Status(SizeArg),
}

#[derive(Debug, Args)]
struct SizeArg {
    /// Which model.
    #[arg(long, default_value = "1.5b", value_parser = ["1.5b", "0.5b"])]
    size: String,
}

/// Flags shared by `run` and `resume`.
#[derive(Debug, Args)]
struct CommonArgs {
    /// local, local:0.5b, openai:MODEL, anthropic:MODEL, mock:FILE, replay:RUN_DIR.
    #[arg(long, value_name = "SPEC")]
    model: Option<String>,
    /// Skill roots to add (searched after the project and user roots).
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// Where scripts run (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Where run directories go (default: .agent/runs under the workspace).
    #[arg(long)]
    runs_dir: Option<PathBuf>,
    /// When to ask before running a script.
    #[arg(long, value_enum)]
    approval: Option<Approval>,
    /// One JSON line with the result on stdout.
    #[arg(long)]
    json: bool,
    /// Print nothing but the final answer.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    flags: RunFlags,
    /// The task.
    task: String,
}

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    flags: RunFlags,
    /// Reopen this run directory's session instead of starting a new one.
    #[arg(long, value_name = "RUN_DIR")]
    resume: Option<PathBuf>,
}

/// Settings of new work: strategy and budgets.
#[derive(Debug, Args, Default)]
struct RunFlags {
    /// Let the model ask you a question (`ask_user`): without a terminal the run then ends with
    /// exit code 4 and `resume RUN_DIR --answer TEXT` continues it (always on in `chat`).
    #[arg(long)]
    ask_user: bool,
    /// The loop strategy (default: react).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(agent_core::STRATEGIES.iter().copied()))]
    strategy: Option<String>,
    /// Maximum turns (default 12; rounds for plan-execute-think).
    #[arg(long)]
    max_turns: Option<u32>,
    /// Maximum actions other than the final answer (default 30).
    #[arg(long)]
    max_tool_calls: Option<u32>,
    /// Maximum scripts run (default 6).
    #[arg(long)]
    max_script_runs: Option<u32>,
    /// Maximum characters of context sent to the model (default 48,000; 22,000 for the
    /// local 1.5B model, 11,000 for the 0.5B).
    #[arg(long)]
    max_context_chars: Option<usize>,
}

/// A usage or configuration error (exit 2).
#[derive(Debug)]
struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub(crate) fn usage(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(error.to_string()))
}

/// Parses the command line and runs the command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime =
        match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("skills-agent: cannot start the async runtime: {error}");
                return ExitCode::from(1);
            }
        };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("skills-agent: {error:#}");
            if error.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

async fn dispatch(command: Command) -> Result<u8> {
    match command {
        Command::Run(args) => run(args).await,
        Command::Chat(args) => crate::chat::chat(args).await,
        Command::Resume { run_dir, answer, common } => resume(&run_dir, answer, common).await,
        Command::Replay { run_dir, check, json } => replay(&run_dir, check, json).await,
        Command::Runs { command: RunsCommand::List { runs_dir, workspace, json } } => {
            runs_list(runs_dir, workspace, json)
        }
        Command::Skills { command } => skills(command),
        Command::Serve(args) => crate::serve::serve(args).await,
        Command::Model { command } => model(&command),
        Command::Mcp { command: McpCommand::List { workspace, json } } => {
            mcp_list(workspace, json).await
        }
    }
}

fn environment() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .collect()
}

fn workspace_of(flag: Option<PathBuf>) -> Result<PathBuf> {
    let workspace = match flag {
        Some(path) => path,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    workspace
        .canonicalize()
        .map_err(|error| usage(format!("workspace {}: {error}", workspace.display())))
}

/// The skill roots: project > user > extra (`--skills`, config) > builtin.
fn skill_roots(workspace: &Path, extra: &[PathBuf]) -> Vec<SkillRoot> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut roots: Vec<SkillRoot> = skill_registry::default_roots(workspace, home.as_deref())
        .into_iter()
        .filter(|root| root.kind != skill_registry::RootKind::Builtin)
        .collect();
    roots.extend(skill_registry::extra_roots(extra.iter().cloned()));
    let builtin = cache_dir()
        .ok()
        .and_then(|cache| skill_registry::write_builtin_skills(&cache.join("builtin-skills")).ok())
        .unwrap_or_else(skill_registry::builtin_root);
    roots.push(builtin);
    roots
}

/// Asks on the terminal; denies with a reason when there is none.
#[derive(Debug)]
struct TerminalApprover {
    interactive: bool,
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
    Session(Arc<std::sync::Mutex<agent_core::CancellationToken>>),
}

async fn prepare(
    common: &CommonArgs,
    run: Option<&RunFlags>,
    interrupts: Interrupts,
) -> Result<Prepared> {
    let env = environment();
    let workspace = workspace_of(common.workspace.clone())?;
    let Resolved {
        settings,
        mut budgets,
        scripts,
        context,
        guard,
        safe,
        mcp_servers,
        external_tools,
        ..
    } = config::load(&workspace, config::user_file().as_deref(), &env).map_err(usage)?;
    let spec = match common.model.as_deref().or(settings.model.as_deref()) {
        Some(text) => ModelSpec::parse(text).map_err(usage)?,
        None => ModelSpec::default_for(&env),
    };
    let context_set =
        settings.budgets.as_ref().is_some_and(|table| table.contains_key("max_context_chars"));
    if let Some(run) = run {
        budgets.max_turns = run.max_turns.unwrap_or(budgets.max_turns);
        budgets.max_tool_calls = run.max_tool_calls.unwrap_or(budgets.max_tool_calls);
        budgets.max_script_runs = run.max_script_runs.unwrap_or(budgets.max_script_runs);
        if let Some(chars) = run.max_context_chars {
            budgets.max_context_chars = chars;
        } else if !context_set {
            // The local server gives each of its two slots n_ctx / 2 tokens.
            if let ModelSpec::Local(size) = &spec {
                budgets.max_context_chars = match size {
                    ModelSize::B1_5 => 22_000,
                    ModelSize::B0_5 => 11_000,
                };
            }
        }
    }
    // A bad spec, file or key is the user's to fix (2); a local model that fails to start is not.
    let connected = connect(&spec, &env, &workspace).map_err(|error| match spec {
        ModelSpec::Local(_) => error,
        _ => usage(format!("{error:#}")),
    })?;
    let mut guard = guard;
    if run.is_some_and(|flags| flags.ask_user) || matches!(interrupts, Interrupts::Session(_)) {
        guard.ask_user = true;
    }
    let config = AgentConfig {
        strategy: run
            .and_then(|run| run.strategy.clone())
            .or(settings.strategy.clone())
            .unwrap_or_else(|| "react".to_owned()),
        decide: settings.decide.unwrap_or_else(|| spec.decide_mode()),
        model: ModelSettings {
            model: connected.name.clone(),
            temperature: settings.temperature.or(Some(0.0)),
            max_tokens: settings.max_tokens.unwrap_or(match spec {
                ModelSpec::Local(_) => 512,
                _ => 2_048,
            }),
        },
        budgets,
        guard,
        context,
        scripts,
        safe,
        tools: external_tools,
    };
    let mut extra = common.skills.clone();
    extra.extend(settings.skills.iter().cloned());
    let runs_dir = common
        .runs_dir
        .clone()
        .or(settings.runs_dir.clone())
        .unwrap_or_else(|| workspace.join(".agent").join("runs"));
    let mut runtime = RuntimeConfig::new(
        SandboxHelper::current_exe()
            .context("cannot find this binary to use as the sandbox helper")?,
    );
    runtime.policy.approval_mode =
        common.approval.or(settings.approval).unwrap_or(Approval::AskForRisky).mode();
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
    let cancel = agent_core::CancellationToken::new();
    // The SIGINT handler is installed here, before any line editor reads a line: rustyline
    // puts its own handler in place while it reads and restores the one it found, so a handler
    // registered later (by a task's first poll) would be replaced by the default, and Ctrl-C
    // would kill the process instead of cancelling the task.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot install the Ctrl-C handler")?;
    match interrupts {
        Interrupts::OneRun => {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                if interrupt.recv().await.is_some() {
                    eprintln!("\nskills-agent: cancelling (Ctrl-C again to quit at once)");
                    cancel.cancel();
                    if interrupt.recv().await.is_some() {
                        std::process::exit(130);
                    }
                }
            });
        }
        Interrupts::Session(current) => {
            tokio::spawn(async move {
                while interrupt.recv().await.is_some() {
                    if let Ok(token) = current.lock() {
                        eprintln!("\nskills-agent: cancelling this task (the session goes on)");
                        token.cancel();
                    }
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
        .cancellation(cancel);
    if let Some(console) = &console {
        builder = builder.sink(console.clone());
    }
    if let Some(mcp) = &mcp {
        builder = builder.external_tools(mcp.clone());
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

/// `skills-agent mcp list`: starts the configured servers as a run would, prints each with its
/// state and tools, and stops them. Exit code 1 when a server failed to start.
async fn mcp_list(workspace: Option<PathBuf>, json: bool) -> Result<u8> {
    let env = environment();
    let workspace = workspace_of(workspace)?;
    let resolved = config::load(&workspace, config::user_file().as_deref(), &env).map_err(usage)?;
    if resolved.mcp_servers.is_empty() {
        if json {
            out!("{}", json!({"servers": [], "tools": []}));
        } else {
            eprintln!(
                "no MCP servers configured: add [mcp_servers.NAME] tables to {}",
                workspace.join(config::WORKSPACE_FILE).display()
            );
        }
        return Ok(0);
    }
    let mut runtime = RuntimeConfig::new(
        SandboxHelper::current_exe()
            .context("cannot find this binary to use as the sandbox helper")?,
    );
    runtime.policy.approval_mode =
        resolved.settings.approval.unwrap_or(Approval::AskForRisky).mode();
    let Some(mcp) =
        crate::mcp_tools::start(&resolved.mcp_servers, &runtime, &workspace, &env).await
    else {
        return Ok(0);
    };
    let statuses = mcp.statuses();
    let tools = mcp.tool_infos();
    let failed = statuses.iter().any(|status| {
        matches!(status.state, mcp::ServerState::Failed { .. } | mcp::ServerState::Exited { .. })
    });
    if json {
        let servers: Vec<serde_json::Value> =
            statuses.iter().map(crate::mcp_tools::status_value).collect();
        let tools: Vec<serde_json::Value> = tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.qualified_name,
                    "server": tool.server,
                    "tool": tool.tool,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                    "rule": tool.rule,
                })
            })
            .collect();
        out!("{}", json!({"servers": servers, "tools": tools}));
    } else {
        out!("{}", crate::mcp_tools::render_list(&statuses, &tools).trim_end());
    }
    mcp.shutdown().await;
    Ok(u8::from(failed))
}

pub(crate) fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Completed => 0,
        Outcome::Error => 1,
        Outcome::NeedsInput => 4,
        _ => 3,
    }
}

fn report(result: &RunResult, prepared: &Prepared) -> u8 {
    if prepared.json {
        let line = json!({
            "run_id": result.run_id,
            "run_dir": result.run_dir,
            "outcome": result.outcome,
            "final_text": result.final_text,
            "turns": result.turns,
            "model_calls": result.model_calls,
            "tool_calls": result.tool_calls,
            "script_runs": result.script_runs,
            "usage": {"prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens},
            "reasoning_metrics": result.reasoning_metrics,
        });
        out!("{line}");
    } else {
        if prepared.console.is_some()
            && let Some(dir) = &result.run_dir
        {
            eprintln!("run directory: {}", dir.display());
        }
        out!("{}", result.final_text);
    }
    if result.outcome == Outcome::NeedsInput
        && let Some(dir) = &result.run_dir
    {
        eprintln!(
            "the run waits for your answer: skills-agent resume {} --answer '…'",
            dir.display()
        );
    }
    // The user gets a final text either way; the code says whether it is the model's answer.
    exit_code(result.outcome)
}

async fn run(args: RunArgs) -> Result<u8> {
    if args.task.trim().is_empty() {
        return Err(usage("the task is empty"));
    }
    let prepared = prepare(&args.common, Some(&args.flags), Interrupts::OneRun).await?;
    let result = prepared.agent.run(&args.task).await;
    conclude(result, prepared).await
}

/// Reports a finished piece of work (or passes its error on), then stops what the run started
/// (MCP servers) either way.
async fn conclude(result: agent_core::Result<RunResult>, prepared: Prepared) -> Result<u8> {
    let code = result.map(|result| report(&result, &prepared));
    prepared.shutdown().await;
    Ok(code?)
}

async fn resume(run_dir: &Path, answer: Option<String>, common: CommonArgs) -> Result<u8> {
    let finished = crate::chat::finished(run_dir).map_err(usage)?;
    if let Some(answer) = &answer {
        if answer.trim().is_empty() {
            return Err(usage("the answer is empty"));
        }
        if !finished {
            return Err(usage(format!(
                "{} was interrupted before it finished: `skills-agent resume {}` first",
                run_dir.display(),
                run_dir.display()
            )));
        }
        if crate::chat::pending_question(run_dir).is_none() {
            return Err(usage(format!(
                "{} asks no question; `skills-agent chat --resume {}` continues it with a new task",
                run_dir.display(),
                run_dir.display()
            )));
        }
    } else if finished {
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            let args =
                ChatArgs { common, flags: RunFlags::default(), resume: Some(run_dir.to_owned()) };
            return crate::chat::chat(args).await;
        }
        return Err(usage(format!(
            "{} already finished{}; `skills-agent chat --resume {}` reopens it as a session",
            run_dir.display(),
            match crate::chat::pending_question(run_dir) {
                Some(question) =>
                    format!(" and waits for an answer to: {question} (--answer TEXT)"),
                None => String::new(),
            },
            run_dir.display()
        )));
    }
    let prepared = prepare(&common, None, Interrupts::OneRun).await?;
    let result = match answer {
        Some(answer) => prepared.agent.send(run_dir, &answer).await,
        None => prepared.agent.resume(run_dir).await,
    };
    conclude(result, prepared).await
}

/// `prepare` for the chat session.
pub(crate) async fn prepare_chat(
    args: &ChatArgs,
    current: Arc<std::sync::Mutex<agent_core::CancellationToken>>,
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

async fn replay(run_dir: &Path, check: bool, json: bool) -> Result<u8> {
    let events = crate::chat::run_events(run_dir).map_err(usage)?;
    let turns = turns(&events);
    let finished = events.iter().rev().find(|event| event.kind == EventKind::RunFinished);
    if !check {
        if json {
            out!(
                "{}",
                json!({"run_id": events.first().map(|event| &event.run_id), "turns": turns, "finished": finished.map(|event| &event.data)})
            );
        } else {
            for turn in &turns {
                out!(
                    "turn {} ({} model call{})",
                    turn.turn,
                    turn.model_calls,
                    if turn.model_calls == 1 { "" } else { "s" }
                );
                for step in &turn.steps {
                    out!("  {step}");
                }
            }
            match finished {
                Some(event) => out!(
                    "outcome: {}\n\n{}",
                    event.data.get("outcome").and_then(Value::as_str).unwrap_or("?"),
                    event.data.get("final_text").and_then(Value::as_str).unwrap_or("")
                ),
                None => out!(
                    "(the run did not finish: `skills-agent resume {}` continues it)",
                    run_dir.display()
                ),
            }
        }
        return Ok(0);
    }
    let report = replay_check(run_dir).await.map_err(usage)?;
    if json {
        out!("{}", serde_json::to_string(&report)?);
    } else {
        let compliance = &report.compliance;
        out!("run {}: {} events compared", report.run_id, report.events_compared);
        match &report.divergence {
            None => out!("replay: reproduced exactly"),
            Some(divergence) => {
                out!("replay: DIVERGED at event {}: {}", divergence.index, divergence.message);
                if let Some(recorded) = &divergence.recorded {
                    out!("  recorded: {recorded}");
                }
                if let Some(replayed) = &divergence.replayed {
                    out!("  replayed: {replayed}");
                }
            }
        }
        out!("compliance score: {:.2}", compliance.score);
        for budget in &compliance.budgets {
            out!("  {}: {}/{}", budget.name, budget.used, budget.limit);
        }
        for violation in compliance.sequence_violations.iter().chain(&compliance.budget_overruns) {
            out!("  violation: {violation}");
        }
        for (kind, count) in &compliance.policy_hits {
            out!("  policy hits ({kind}): {count}");
        }
        if !compliance.final_text_present {
            out!("  violation: no final text");
        }
    }
    Ok(if report.reproduced() { 0 } else { 1 })
}

fn runs_list(runs_dir: Option<PathBuf>, workspace: Option<PathBuf>, json: bool) -> Result<u8> {
    let runs_dir = match runs_dir {
        Some(dir) => dir,
        None => workspace_of(workspace)?.join(".agent").join("runs"),
    };
    let mut runs = Vec::new();
    let entries = match std::fs::read_dir(&runs_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if json {
                out!("[]")
            } else {
                out!("no runs in {} (the folder does not exist yet)", runs_dir.display())
            }
            return Ok(0);
        }
        Err(error) => return Err(usage(format!("runs directory {}: {error}", runs_dir.display()))),
    };
    let mut directories: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.join("events.jsonl").is_file())
        .collect();
    directories.sort();
    for directory in directories {
        // The fields `serve` lists (status `finished` or `interrupted`).
        match crate::serve::run_summary(&directory) {
            Ok(mut summary) => {
                summary["run_dir"] = json!(directory);
                runs.push(summary);
            }
            Err(error) => runs.push(json!({
                "run_id": directory.file_name().map(|name| name.to_string_lossy().into_owned()),
                "run_dir": directory,
                "status": "unreadable",
                "error": error.to_string(),
            })),
        }
    }
    if json {
        out!("{}", Value::Array(runs));
    } else if runs.is_empty() {
        out!("no runs in {}", runs_dir.display());
    } else {
        for run in &runs {
            let text = |key: &str| run.get(key).and_then(Value::as_str).unwrap_or("-").to_owned();
            out!(
                "{}  {:<11} {:<14} {:>3} turns  {}",
                text("run_id"),
                text("status"),
                text("outcome"),
                run.get("turns").and_then(Value::as_u64).unwrap_or(0),
                text("task").chars().take(70).collect::<String>()
            );
        }
    }
    Ok(0)
}

fn index(args: &SkillsArgs, mode: Mode) -> Result<(SkillIndex, Vec<SkillRoot>)> {
    let workspace = workspace_of(args.workspace.clone())?;
    let env = environment();
    let settings =
        config::load(&workspace, config::user_file().as_deref(), &env).map_err(usage)?.settings;
    let mut extra = args.skills.clone();
    extra.extend(settings.skills);
    for path in &args.skills {
        if !path.is_dir() {
            return Err(usage(format!("--skills {}: not a directory", path.display())));
        }
    }
    let roots = skill_roots(&workspace, &extra);
    let config = IndexConfig { mode, ..IndexConfig::default() };
    Ok((SkillIndex::build(&roots, &config)?, roots))
}

fn skills(command: SkillsCommand) -> Result<u8> {
    match command {
        SkillsCommand::List(args) => {
            let (index, _) = index(&args, Mode::Lenient)?;
            if args.json {
                out!("{}", skills_json(&index));
                return Ok(0);
            }
            if index.skills.is_empty() {
                out!("no skills found");
            }
            for skill in &index.skills {
                let description: String =
                    skill.description.replace('\n', " ").chars().take(90).collect();
                let hidden = if skill.controls.disable_model_invocation {
                    " (user-invoked only)"
                } else {
                    ""
                };
                out!("{:<24} {:<8} {description}{hidden}", skill.name, skill.source.kind.as_str());
            }
            for shadowed in &index.shadowed {
                out!(
                    "{:<24} {:<8} shadowed by {}",
                    shadowed.skill.name,
                    shadowed.skill.source.kind.as_str(),
                    shadowed.shadowed_by.display()
                );
            }
            if !index.diagnostics.is_empty() {
                out!(
                    "{} problem(s): run `skills-agent skills validate` for details",
                    index.diagnostics.len()
                );
            }
            Ok(0)
        }
        SkillsCommand::Show { name, args } => {
            let (index, _) = index(&args, Mode::Lenient)?;
            let Some(skill) = index.get(&name) else {
                let known: Vec<&str> =
                    index.skills.iter().map(|skill| skill.name.as_str()).collect();
                bail!(
                    "no skill named `{name}`; known: {}",
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                );
            };
            let loader = skill_loader::SkillLoader::new(skill_loader::LoaderConfig::default());
            let body = loader
                .load_skill_body(skill)
                .with_context(|| format!("cannot read the body of `{name}`"))?;
            let files =
                loader.list_resources(skill).map(|listing| listing.entries).unwrap_or_default();
            if args.json {
                out!("{}", json!({"skill": skill, "files": files, "body": body.render()}));
                return Ok(0);
            }
            out!(
                "name:        {}\ndescription: {}\nsource:      {} ({})\nfolder:      {}",
                skill.name,
                skill.description,
                skill.source.kind.as_str(),
                skill.source.root.display(),
                skill.directory.display()
            );
            if let Some(tools) = &skill.controls.allowed_tools {
                out!("allowed-tools: {}", tools.join(" "));
            }
            if skill.controls.disable_model_invocation {
                out!("disable-model-invocation: true (only the user can invoke it)");
            }
            out!("files:");
            for file in &files {
                out!("  {} ({} bytes)", file.path, file.size);
            }
            out!("\n{}", body.render());
            Ok(0)
        }
        SkillsCommand::Validate { strict, args } => {
            let mode = if strict { Mode::Strict } else { Mode::Lenient };
            let (index, _) = index(&args, mode)?;
            let errors = index
                .diagnostics
                .iter()
                .filter(|diagnostic| diagnostic.severity == skill_registry::Severity::Error)
                .count();
            if args.json {
                out!("{}", skills_json(&index));
            } else {
                for diagnostic in &index.diagnostics {
                    out!(
                        "{}:{}: {:?} [{}] {}",
                        diagnostic.path.display(),
                        diagnostic.line.unwrap_or(0),
                        diagnostic.severity,
                        diagnostic.rule.id(),
                        diagnostic.message
                    );
                }
                out!(
                    "{} skill(s) valid, {} error(s), {} warning(s)",
                    index.skills.len(),
                    errors,
                    index.diagnostics.len() - errors
                );
            }
            Ok(if errors == 0 { 0 } else { 1 })
        }
    }
}

fn skills_json(index: &SkillIndex) -> Value {
    json!({
        "skills": index.skills,
        "shadowed": index.shadowed.iter().map(|shadowed| json!({"skill": shadowed.skill, "shadowed_by": shadowed.shadowed_by})).collect::<Vec<_>>(),
        "diagnostics": index.diagnostics,
    })
}

fn model(command: &ModelCommand) -> Result<u8> {
    let (size, action) = match command {
        ModelCommand::Start(size) => (size, "start"),
        ModelCommand::Stop(size) => (size, "stop"),
        ModelCommand::Status(size) => (size, "status"),
    };
    let size = ModelSize::parse(&size.size).ok_or_else(|| usage("--size is 1.5b or 0.5b"))?;
    let model = LocalModel::new(size, cache_dir()?);
    match action {
        "start" => {
            let state = model.start()?;
            out!("{}", state.url());
            Ok(0)
        }
        "stop" => {
            if model.stop()? {
                eprintln!("model: stopped the {} model", size.as_str());
            } else {
                eprintln!("model: the {} model was not running", size.as_str());
            }
            Ok(0)
        }
        _ => match model.running() {
            Some(state) => {
                out!("the {} model runs at {} (pid {})", size.as_str(), state.url(), state.pid);
                Ok(0)
            }
            None => {
                out!(
                    "the {0} model is not running (`skills-agent model start --size {0}` starts it)",
                    size.as_str()
                );
                Ok(1)
            }
        },
    }
}
