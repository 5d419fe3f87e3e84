//! The commands: `run`, `chat`, `resume`, `replay`, `runs list`, `skills list|show|validate`,
//! `model start|stop|status`. Exit codes: 0 completed, 3 ended degraded (budget, stuck,
//! cancelled), 4 waiting for the user's answer (`needs_input`), 1 error, 2 usage or
//! configuration error.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use skills_agent_core::{Outcome, RunResult, replay_check, turns};
use skills_agent_registry::{IndexConfig, Mode, SkillIndex, SkillRoot};
use tools_runtime::{RuntimeConfig, SandboxHelper};

use crate::config::{self, Approval};
use crate::launch::{
    ChatArgs, CommonArgs, Interrupts, Prepared, RunFlags, UsageError, environment, exit_code,
    prepare, skill_roots, usage, workspace_of,
};
use skills_agent_models::local_model::{LocalModel, ModelSize, cache_dir};

/// `println!` that ends the process quietly when stdout is closed (`skills-agent runs list |
/// head -1`), as a Unix tool killed by SIGPIPE would, instead of panicking.
macro_rules! out {
    ($($argument:tt)*) => {
        crate::launch::print_line(format_args!($($argument)*))
    };
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
        /// The run directory (with --nats: a fleet's task id or run id).
        run_dir: PathBuf,
        #[command(flatten)]
        engine: crate::fleet::EngineArgs,
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
    /// Take tasks from a fleet's work queue (NATS JetStream) and run each as `run` does.
    Worker(crate::fleet::WorkerArgs),
    /// Queue a task (or a file of tasks) for a fleet's workers; --wait follows it.
    Submit(crate::fleet::SubmitArgs),
    /// A fleet's workers, queue, outcomes and dead letters.
    Fleet {
        #[command(subcommand)]
        command: crate::fleet::FleetCommand,
    },
    /// Write a fleet run's directory and the workspace files it wrote into a folder.
    Fetch(crate::fleet::FetchArgs),
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
        /// List a fleet's tasks and runs instead (NATS JetStream).
        #[command(flatten)]
        engine: crate::fleet::EngineArgs,
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

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    flags: RunFlags,
    /// The task.
    task: String,
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
        Command::Replay { run_dir, engine, check, json } => {
            if engine.nats.is_some() {
                let id = run_dir.to_string_lossy().into_owned();
                let (_folder, run_dir) = crate::fleet::fetch_run(&engine, &id).await?;
                return replay(&run_dir, check, json).await;
            }
            replay(&run_dir, check, json).await
        }
        Command::Runs { command: RunsCommand::List { runs_dir, workspace, json, engine } } => {
            if engine.nats.is_some() {
                return crate::fleet::runs_list(&engine, json).await;
            }
            runs_list(runs_dir, workspace, json)
        }
        Command::Skills { command } => skills(command),
        Command::Serve(args) => crate::serve::serve(args).await,
        Command::Model { command } => model(&command),
        Command::Mcp { command: McpCommand::List { workspace, json } } => {
            mcp_list(workspace, json).await
        }
        Command::Worker(args) => crate::fleet::worker(args).await,
        Command::Submit(args) => crate::fleet::submit(args).await,
        Command::Fleet { command: crate::fleet::FleetCommand::Status { engine, json } } => {
            crate::fleet::status(&engine, json).await
        }
        Command::Fetch(args) => crate::fleet::fetch(args).await,
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
        matches!(
            status.state,
            skills_agent_mcp::ServerState::Failed { .. }
                | skills_agent_mcp::ServerState::Exited { .. }
        )
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
            "grounded": result.grounded,
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
async fn conclude(result: skills_agent_core::Result<RunResult>, prepared: Prepared) -> Result<u8> {
    let code = result.map(|result| report(&result, &prepared));
    prepared.shutdown().await;
    Ok(code?)
}

async fn resume(run_dir: &Path, answer: Option<String>, common: CommonArgs) -> Result<u8> {
    // The record, read once: whether it finished and how, the flags it began with, and the
    // call it stopped in.
    let events = crate::runs::run_events(run_dir).map_err(usage)?;
    let finished = crate::runs::finished(run_dir, &events).map_err(usage)?;
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
        if crate::runs::pending_question(run_dir).is_none() {
            return Err(usage(format!(
                "{} asks no question; `skills-agent chat --resume {}` continues it with a new task",
                run_dir.display(),
                run_dir.display()
            )));
        }
    } else if finished && crate::runs::ended_in_error(&events) {
        eprintln!(
            "{} ended with an error; continuing it with a new piece of work",
            run_dir.display()
        );
    } else if finished {
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            let args =
                ChatArgs { common, flags: RunFlags::default(), resume: Some(run_dir.to_owned()) };
            return crate::chat::chat(args).await;
        }
        return Err(usage(format!(
            "{} already finished{}; `skills-agent chat --resume {}` reopens it as a session",
            run_dir.display(),
            match crate::runs::pending_question(run_dir) {
                Some(question) =>
                    format!(" and waits for an answer to: {question} (--answer TEXT)"),
                None => String::new(),
            },
            run_dir.display()
        )));
    }
    let common = crate::runs::resume_args_of(run_dir, &events, common)?;
    let prepared = prepare(&common, None, Interrupts::OneRun).await?;
    if let Err(error) = crate::launch::refuse_changed_skills(&prepared, run_dir) {
        prepared.shutdown().await;
        return Err(error);
    }
    let result = match answer {
        Some(answer) => prepared.agent.send(run_dir, &answer).await,
        None if finished => prepared.agent.send(run_dir, CONTINUE_AFTER_ERROR).await,
        None => {
            if let Some(call) = crate::runs::unrecorded_call(&events) {
                eprintln!(
                    "note: the run stopped during `{call}`, before its result was recorded; it \
                     runs again now (if it changes files, check them afterwards)"
                );
            }
            prepared.agent.resume(run_dir).await
        }
    };
    conclude(result, prepared).await
}

/// The user message with which `resume` continues a run that ended with an error.
const CONTINUE_AFTER_ERROR: &str = "Continue the task from where it stopped: the last attempt \
     ended with an error before it was done. Steps whose results are above are done; do not \
     repeat them.";

async fn replay(run_dir: &Path, check: bool, json: bool) -> Result<u8> {
    let events = crate::runs::run_events(run_dir).map_err(usage)?;
    let turns = turns(&events);
    let finished = skills_agent_core::last_finished(&events);
    if !check {
        if json {
            out!(
                "{}",
                json!({"run_id": events.first().map(|event| &event.run_id), "turns": turns, "finished": finished.as_ref().and_then(|finished| serde_json::to_value(finished).ok())})
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
                Some(finished) => {
                    out!("outcome: {}\n\n{}", finished.outcome.as_str(), finished.final_text)
                }
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
                .filter(|diagnostic| diagnostic.severity == skills_agent_registry::Severity::Error)
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
                out!(
                    "it stays up between runs, the one process of skills-agent that outlives the \
                     command that started it (`skills-agent model stop --size {}` ends it)",
                    size.as_str()
                );
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
