//! The fleet commands over NATS JetStream (the `skills-agent-fleet` crate): `worker` runs
//! queued tasks as `run` does, `submit` queues tasks (and with `--wait` follows one on the
//! console), `fleet status` shows workers, queue and outcomes, `fetch` writes a run's
//! directory and changed files.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use async_trait::async_trait;
use clap::{Args, Subcommand, ValueEnum};
use futures_util::StreamExt;
use serde_json::json;
use skills_agent_core::{ConsoleOptions, ConsoleSink, EventKind, EventSink};
use skills_agent_fleet::{
    Credentials, Ended, Fleet, FleetConfig, Job, JobResult, Runner, TaskSpec, TaskState, Worker,
    WorkerOptions,
};

use crate::config::Approval;
use crate::launch::{
    CommonArgs, Interrupts, RunFlags, environment, prepare, print, usage, workspace_of,
};

/// Where the fleet is: the server and the prefix of its names.
#[derive(Debug, Args, Clone)]
pub(crate) struct EngineArgs {
    /// The NATS server (JetStream on), e.g. nats://127.0.0.1:4222 (default: $NATS_URL).
    /// Credentials come from NATS_CREDS (a .creds file), NATS_TOKEN, or NATS_USER and
    /// NATS_PASSWORD.
    #[arg(long, value_name = "URL")]
    pub(crate) nats: Option<String>,
    /// The prefix of the fleet's subjects, streams and buckets.
    #[arg(long, default_value = skills_agent_fleet::DEFAULT_PREFIX)]
    pub(crate) prefix: String,
    /// Servers that keep each stream and bucket, when the fleet's are first created (3 on a
    /// 3-node cluster; existing ones keep theirs).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) replicas: usize,
}

impl EngineArgs {
    pub(crate) fn config(&self) -> Result<FleetConfig> {
        let env = environment();
        let url = match &self.nats {
            Some(url) => url.clone(),
            None => env
                .iter()
                .find(|(name, value)| name == "NATS_URL" && !value.is_empty())
                .map(|(_, value)| value.clone())
                .ok_or_else(|| usage("no NATS server: pass --nats URL (or set NATS_URL)"))?,
        };
        let mut config = FleetConfig::new(url);
        config.prefix = self.prefix.clone();
        config.replicas = self.replicas;
        config.credentials = Credentials::from_env(&env);
        Ok(config)
    }

    pub(crate) async fn connect(&self, config: FleetConfig) -> Result<Fleet> {
        Fleet::connect(config).await.map_err(|error| match error {
            skills_agent_fleet::Error::Config(_) => usage(error),
            other => anyhow::Error::new(other),
        })
    }
}

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// How many tasks to run at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Skill roots to add to every task's (as `run --skills`).
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// The model of tasks that name none (default: the config's, else the local model).
    #[arg(long, value_name = "SPEC")]
    model: Option<String>,
    /// This worker's name in the fleet (default: host name and process id).
    #[arg(long)]
    name: Option<String>,
    /// Seconds a task may go unacknowledged before another worker gets it.
    #[arg(long, default_value_t = 30)]
    ack_wait: u64,
    /// Tries before a task goes to dead-letter.
    #[arg(long, default_value_t = 3)]
    max_tries: u32,
    /// Where task folders go (default: $TMPDIR/skills-agent-fleet; the same on every worker).
    #[arg(long, value_name = "DIR")]
    work_root: Option<PathBuf>,
    /// Keep each task's folder after it finished.
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SubmitArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// local, local:0.5b, openai:MODEL, anthropic:MODEL, mock:FILE (a relative FILE is looked
    /// up in the workspace first).
    #[arg(long, value_name = "SPEC")]
    model: Option<String>,
    /// When to ask before running a script (a worker has no terminal: asking means refusing).
    #[arg(long, value_enum)]
    approval: Option<Approval>,
    #[command(flatten)]
    flags: RunFlags,
    /// The folder the task works in, sent with it (default: the current directory; `.agent/`,
    /// `.git/` and ignored files stay home).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Send no workspace.
    #[arg(long, conflicts_with = "workspace")]
    no_workspace: bool,
    /// Follow the run on the console and exit with `run`'s exit code.
    #[arg(long)]
    wait: bool,
    /// One JSON line per task on stdout.
    #[arg(long)]
    json: bool,
    /// Submit every task of a JSON-lines file (`{"task": …, "strategy"?, "model"?,
    /// "workspace"?, …}` per line).
    #[arg(long, value_name = "TASKS.jsonl", conflicts_with = "task")]
    file: Option<PathBuf>,
    /// The task.
    task: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum FleetCommand {
    /// Workers, queue depth, runs by outcome and dead letters.
    Status {
        #[command(flatten)]
        engine: EngineArgs,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct FetchArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// A task id (`task-…`) or run id.
    id: String,
    /// Where to write `run/<run_id>/` and `workspace/` (the files the run wrote).
    #[arg(long, value_name = "DIR")]
    into: PathBuf,
}

fn approval_of(text: Option<&str>) -> std::result::Result<Option<Approval>, String> {
    text.map(|text| {
        Approval::from_str(text, true)
            .map_err(|_| format!("approval `{text}`: use never, ask-for-risky or always"))
    })
    .transpose()
}

/// Runs a fleet task as `run` (or `resume`, for a run moved here) does.
#[derive(Debug)]
struct CliRunner {
    skills: Vec<PathBuf>,
    model: Option<String>,
}

#[async_trait]
impl Runner for CliRunner {
    async fn run(&self, job: Job) -> std::result::Result<JobResult, String> {
        let spec = &job.task.spec;
        let mut common = CommonArgs {
            model: spec.model.clone().or_else(|| self.model.clone()),
            skills: self.skills.clone(),
            workspace: Some(job.workspace.clone()),
            runs_dir: Some(job.runs_dir.clone()),
            approval: approval_of(spec.approval.as_deref())?,
            json: false,
            quiet: true,
            answered: 0,
            sinks: vec![Arc::clone(&job.sink)],
        };
        let flags = RunFlags {
            ask_user: spec.ask_user,
            strategy: spec.strategy.clone(),
            max_turns: spec.max_turns,
            max_tool_calls: spec.max_tool_calls,
            max_script_runs: spec.max_script_runs,
            max_context_chars: spec.max_context_chars,
        };
        if let Some(strategy) = &spec.strategy
            && !skills_agent_core::STRATEGIES.contains(&strategy.as_str())
        {
            return Err(format!(
                "strategy `{strategy}`: use one of {}",
                skills_agent_core::STRATEGIES.join(", ")
            ));
        }
        let text = |error: anyhow::Error| format!("{error:#}");
        let (prepared, result) = match &job.resume {
            Some(run_dir) => {
                common = crate::runs::resume_args(run_dir, common).map_err(text)?;
                let prepared = prepare(&common, None, Interrupts::Worker).await.map_err(text)?;
                let result = prepared.agent.resume(run_dir).await;
                (prepared, result)
            }
            None => {
                let prepared =
                    prepare(&common, Some(&flags), Interrupts::Worker).await.map_err(text)?;
                let result = prepared.agent.run(&spec.task).await;
                (prepared, result)
            }
        };
        prepared.shutdown().await;
        let run = result.map_err(|error| error.to_string())?;
        let exit_code = run.outcome.exit_code();
        Ok(JobResult { run, exit_code })
    }
}

/// `skills-agent worker`: takes tasks until Ctrl-C or SIGTERM (then lets the runs in progress
/// finish; a second signal hands them back at once).
pub(crate) async fn worker(args: WorkerArgs) -> Result<u8> {
    if args.concurrency == 0 {
        return Err(usage("--concurrency must be at least 1"));
    }
    if args.max_tries == 0 {
        return Err(usage("--max-tries must be at least 1"));
    }
    let mut config = args.engine.config()?;
    config.ack_wait = Duration::from_secs(args.ack_wait.max(1));
    config.max_tries = args.max_tries;
    let fleet = args.engine.connect(config).await?;
    let name = args.name.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|host| host.trim().to_owned())
            .unwrap_or_else(|_| "worker".to_owned());
        format!("{host}-{}", std::process::id())
    });
    let mut options = WorkerOptions::new(name.clone());
    options.concurrency = args.concurrency;
    options.keep = args.keep;
    if let Some(root) = &args.work_root {
        options.work_root = root.clone();
    }
    let skills = args
        .skills
        .iter()
        .map(|root| {
            root.canonicalize()
                .map_err(|error| usage(format!("--skills {}: {error}", root.display())))
        })
        .collect::<Result<Vec<_>>>()?;
    let runner = Arc::new(CliRunner { skills, model: args.model.clone() });
    let (stop, abort) =
        (skills_agent_core::CancellationToken::new(), skills_agent_core::CancellationToken::new());
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot install the Ctrl-C handler")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    {
        let (stop, abort) = (stop.clone(), abort.clone());
        tokio::spawn(async move {
            let mut signals = 0;
            loop {
                tokio::select! {
                    Some(()) = interrupt.recv() => {}
                    Some(()) = terminate.recv() => {}
                    else => break,
                }
                signals += 1;
                if signals == 1 {
                    eprintln!(
                        "skills-agent worker: stopping: no new tasks; the runs in progress \
                         finish (signal again to hand them back now)"
                    );
                    stop.cancel();
                } else {
                    eprintln!("skills-agent worker: handing the runs in progress back");
                    abort.cancel();
                    break;
                }
            }
        });
    }
    eprintln!(
        "skills-agent worker {name}: taking tasks from {} (prefix {}, {} at once)",
        fleet.config().url,
        fleet.names().prefix,
        args.concurrency
    );
    let log = Arc::new(|task_id: &str, ended: &Ended| {
        let line = match ended {
            Ended::Finished { outcome, exit_code } => {
                format!("finished: {outcome} (exit {exit_code})")
            }
            Ended::Retried(reason) => format!("failed, handed back for another try: {reason}"),
            Ended::Dead(reason) => format!("dead-lettered: {reason}"),
            Ended::Superseded => "taken over by another worker; left to it".to_owned(),
            Ended::HandedBack => "handed back unfinished".to_owned(),
        };
        eprintln!("{task_id}: {line}");
    });
    let summary = Worker::new(fleet, options)
        .run(runner, stop, abort, log)
        .await
        .map_err(anyhow::Error::new)?;
    eprintln!(
        "skills-agent worker {name}: stopped ({} finished, {} failed tries, {} handed back)",
        summary.finished, summary.failed, summary.handed_back
    );
    Ok(0)
}

/// `skills-agent submit`.
pub(crate) async fn submit(args: SubmitArgs) -> Result<u8> {
    let mut tasks: Vec<(TaskSpec, Option<PathBuf>)> = Vec::new();
    let base = TaskSpec {
        task: String::new(),
        strategy: args.flags.strategy.clone(),
        ask_user: args.flags.ask_user,
        model: args.model.clone(),
        approval: args.approval.and_then(|approval| {
            approval.to_possible_value().map(|value| value.get_name().to_owned())
        }),
        max_turns: args.flags.max_turns,
        max_tool_calls: args.flags.max_tool_calls,
        max_script_runs: args.flags.max_script_runs,
        max_context_chars: args.flags.max_context_chars,
    };
    let default_workspace =
        if args.no_workspace { None } else { Some(workspace_of(args.workspace.clone())?) };
    match (&args.file, &args.task) {
        (Some(file), _) => {
            if args.wait {
                return Err(usage("--wait follows one task; submit a --file without it"));
            }
            let text = std::fs::read_to_string(file)
                .map_err(|error| usage(format!("{}: {error}", file.display())))?;
            for (number, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let at = |message: String| {
                    usage(format!("{}:{}: {message}", file.display(), number + 1))
                };
                let mut value: serde_json::Value =
                    serde_json::from_str(line).map_err(|error| at(error.to_string()))?;
                let workspace = match value.as_object_mut().and_then(|map| map.remove("workspace"))
                {
                    Some(serde_json::Value::String(path)) => {
                        Some(workspace_of(Some(PathBuf::from(path)))?)
                    }
                    Some(other) => {
                        return Err(at(format!("`workspace` must be a path, not {other}")));
                    }
                    None => default_workspace.clone(),
                };
                let line_spec: TaskSpec =
                    serde_json::from_value(value).map_err(|error| at(error.to_string()))?;
                if line_spec.task.trim().is_empty() {
                    return Err(at("the task is empty".to_owned()));
                }
                let spec = TaskSpec {
                    task: line_spec.task,
                    strategy: line_spec.strategy.or_else(|| base.strategy.clone()),
                    ask_user: line_spec.ask_user || base.ask_user,
                    model: line_spec.model.or_else(|| base.model.clone()),
                    approval: line_spec.approval.or_else(|| base.approval.clone()),
                    max_turns: line_spec.max_turns.or(base.max_turns),
                    max_tool_calls: line_spec.max_tool_calls.or(base.max_tool_calls),
                    max_script_runs: line_spec.max_script_runs.or(base.max_script_runs),
                    max_context_chars: line_spec.max_context_chars.or(base.max_context_chars),
                };
                tasks.push((spec, workspace));
            }
        }
        (None, Some(task)) => {
            if task.trim().is_empty() {
                return Err(usage("the task is empty"));
            }
            tasks.push((TaskSpec { task: task.clone(), ..base }, default_workspace));
        }
        (None, None) => return Err(usage("give a TASK, or --file TASKS.jsonl")),
    }
    for (spec, _) in &tasks {
        if let Some(approval) = &spec.approval {
            approval_of(Some(approval)).map_err(usage)?;
        }
        if let Some(model) = &spec.model {
            skills_agent_models::specs::ModelSpec::parse(model).map_err(usage)?;
        }
    }
    let fleet = args.engine.connect(args.engine.config()?).await?;
    let mut last = None;
    for (spec, workspace) in tasks {
        let task = fleet.submit(spec, workspace.as_deref()).await.map_err(|error| match error {
            skills_agent_fleet::Error::TooLarge { .. } | skills_agent_fleet::Error::Io { .. } => {
                usage(error)
            }
            other => anyhow::Error::new(other),
        })?;
        if args.json && !args.wait {
            print(&json!({"task_id": task.id, "task": task.spec.task}).to_string());
        } else if !args.wait {
            print(&task.id);
        }
        last = Some(task.id);
    }
    match (args.wait, last) {
        (true, Some(task_id)) => wait(&fleet, &task_id, args.json).await,
        _ => Ok(0),
    }
}

/// Follows a task's events on the console until its run finishes (or it is dead-lettered);
/// prints the final answer (or a JSON line) and returns `run`'s exit code.
async fn wait(fleet: &Fleet, task_id: &str, json: bool) -> Result<u8> {
    eprintln!("task {task_id} queued; waiting for a worker (Ctrl-C stops waiting, not the task)");
    let console = (!json).then(|| {
        ConsoleSink::new(
            Box::new(std::io::stderr()),
            ConsoleOptions { color: std::io::stderr().is_terminal(), stream_answer: true },
        )
    });
    let mut events = fleet.follow(task_id).await.map_err(anyhow::Error::new)?;
    let mut check = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            item = events.next() => {
                let Some(item) = item else { break };
                let (event, _) = item.map_err(anyhow::Error::new)?;
                if let Some(console) = &console {
                    let _ = console.record(&event);
                }
                if event.kind == EventKind::RunFinished {
                    break;
                }
            }
            _ = check.tick() => {
                if let Some(status) = fleet.run_status(task_id).await.map_err(anyhow::Error::new)?
                    && status.state == TaskState::Dead
                {
                    eprintln!(
                        "task {task_id} is dead-lettered after {} tries: {}",
                        status.attempts,
                        status.error.unwrap_or_default()
                    );
                    if json {
                        print(&json!({"task_id": task_id, "state": "dead"}).to_string());
                    }
                    return Ok(1);
                }
            }
        }
    }
    // The state is written just after `run_finished` is stored: wait for it briefly.
    let mut status = None;
    for _ in 0..100 {
        status = fleet.run_status(task_id).await.map_err(anyhow::Error::new)?;
        if status.as_ref().is_some_and(|status| status.state == TaskState::Finished) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status =
        status.ok_or_else(|| anyhow::anyhow!("task {task_id} has no state in the fleet"))?;
    if json {
        print(&serde_json::to_string(&status)?);
    } else {
        print(status.final_text.as_deref().unwrap_or_default());
    }
    Ok(status.exit_code.unwrap_or(1))
}

/// `skills-agent fleet status`.
pub(crate) async fn status(engine: &EngineArgs, json: bool) -> Result<u8> {
    let fleet = engine.connect(engine.config()?).await?;
    let status = fleet.status().await.map_err(anyhow::Error::new)?;
    if json {
        print(&serde_json::to_string(&status)?);
        return Ok(0);
    }
    print(&format!("fleet {} at {}", fleet.names().prefix, fleet.config().url));
    print(&format!("workers: {}", status.workers.len()));
    for worker in &status.workers {
        print(&format!(
            "  {}  {}/{} running  {} finished  last heartbeat {}",
            worker.name,
            worker.current.len(),
            worker.concurrency,
            worker.finished,
            worker.heartbeat
        ));
    }
    print(&format!("tasks: {} queued, {} running", status.queued, status.running));
    let outcomes: Vec<String> =
        status.outcomes.iter().map(|(outcome, count)| format!("{outcome} {count}")).collect();
    print(&format!(
        "runs by outcome: {}",
        if outcomes.is_empty() { "none yet".to_owned() } else { outcomes.join(", ") }
    ));
    for letter in &status.dead {
        print(&format!(
            "  dead: {} after {} tries: {}",
            letter.task_id, letter.attempts, letter.reason
        ));
    }
    Ok(0)
}

/// `skills-agent fetch`.
pub(crate) async fn fetch(args: FetchArgs) -> Result<u8> {
    let fleet = args.engine.connect(args.engine.config()?).await?;
    let fetched = fleet.fetch(&args.id, &args.into).await.map_err(|error| match error {
        skills_agent_fleet::Error::NotFound(_) => usage(error),
        other => anyhow::Error::new(other),
    })?;
    eprintln!(
        "run directory: {}\nworkspace files the run wrote: {} in {}",
        fetched.run_dir.display(),
        fetched.changed_files,
        fetched.workspace.display()
    );
    print(&fetched.run_dir.display().to_string());
    Ok(0)
}

/// Keeps `runs_dir` a copy of the fleet's runs for `serve --nats`: a finished run is written
/// once (its events and files), a running one followed event by event (appended as they are
/// stored, so the page's live view works as for a local run). Runs forever.
pub(crate) async fn mirror(fleet: Fleet, runs_dir: PathBuf) {
    let mut seen = std::collections::HashSet::new();
    loop {
        if let Ok(runs) = fleet.runs().await {
            for status in runs {
                let Some(run_id) = status.run_id.clone() else { continue };
                if !skills_agent_core::is_valid_run_id(&run_id) || seen.contains(&status.task_id) {
                    continue;
                }
                seen.insert(status.task_id.clone());
                let (fleet, run_dir) = (fleet.clone(), runs_dir.join(&run_id));
                tokio::spawn(async move {
                    let result = if status.state == TaskState::Running {
                        follow_into(&fleet, &status.task_id, &run_dir).await
                    } else {
                        fleet.write_run(&status.task_id, &run_dir).await.map(|_| ())
                    };
                    if let Err(error) = result {
                        eprintln!("skills-agent serve: run {run_id} ({}): {error}", status.task_id);
                    }
                });
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Appends a running task's events to `run_dir/events.jsonl` as they are stored, with the
/// observation files they point at, until `run_finished`.
async fn follow_into(
    fleet: &Fleet,
    task_id: &str,
    run_dir: &std::path::Path,
) -> skills_agent_fleet::Result<()> {
    use std::io::Write;
    let io =
        |error: std::io::Error| skills_agent_fleet::Error::Io { path: run_dir.to_owned(), error };
    std::fs::create_dir_all(run_dir).map_err(io)?;
    let mut file = std::fs::File::create(run_dir.join("events.jsonl")).map_err(io)?;
    let mut events = fleet.follow(task_id).await?;
    while let Some(item) = events.next().await {
        let (event, _) = item?;
        fleet.restore_stored(task_id, std::slice::from_ref(&event), run_dir).await?;
        let mut line =
            serde_json::to_string(&event).map_err(|error| io(std::io::Error::other(error)))?;
        line.push('\n');
        file.write_all(line.as_bytes()).map_err(io)?;
        if event.kind == EventKind::RunFinished {
            break;
        }
    }
    Ok(())
}

/// `skills-agent runs list --nats`: the fleet's tasks, oldest first.
pub(crate) async fn runs_list(engine: &EngineArgs, json: bool) -> Result<u8> {
    let fleet = engine.connect(engine.config()?).await?;
    let runs = fleet.runs().await.map_err(anyhow::Error::new)?;
    if json {
        print(&serde_json::to_string(&runs)?);
        return Ok(0);
    }
    if runs.is_empty() {
        eprintln!("no tasks in fleet {} yet", fleet.names().prefix);
    }
    for status in &runs {
        print(&format!(
            "{}  {:<8}  {:<20}  {:<16}  {:<12}  {}",
            status.task_id,
            status.state.as_str(),
            status.run_id.as_deref().unwrap_or("-"),
            status.outcome.as_deref().unwrap_or("-"),
            status.worker.as_deref().unwrap_or("-"),
            status.task.replace('\n', " ").chars().take(60).collect::<String>()
        ));
    }
    Ok(0)
}

/// The run directory of a fleet run, written into a fresh temporary folder (for `replay
/// --nats`); the folder lives as long as the returned guard.
pub(crate) async fn fetch_run(
    engine: &EngineArgs,
    id: &str,
) -> Result<(tempfile::TempDir, PathBuf)> {
    let fleet = engine.connect(engine.config()?).await?;
    let status = fleet.find(id).await.map_err(|error| match error {
        skills_agent_fleet::Error::NotFound(_) => usage(error),
        other => anyhow::Error::new(other),
    })?;
    let folder = tempfile::tempdir().context("cannot make a temporary folder")?;
    let run_dir = folder.path().join(status.run_id.as_deref().unwrap_or(&status.task_id));
    fleet.write_run(&status.task_id, &run_dir).await.map_err(anyhow::Error::new)?;
    Ok((folder, run_dir))
}
