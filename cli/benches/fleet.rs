//! The fleet's benchmark (issue 23; the figures are in `fleet/BENCHMARKS.md`): what storing each
//! event in JetStream costs against the local `events.jsonl`, how many scripted tasks per second
//! 1, 2 and 4 worker processes run, and how long a SIGKILLed worker's task takes to go on in
//! another worker.
//!
//! Everything is real, set up as `tests/fleet.rs` does: a `nats-server -js` on a free loopback
//! port with a private store in the system temp folder, `skills-agent worker` processes of this
//! build, tasks on the `mock:` model whose scripts run in the sandbox.
//!
//! - `events`: the same prepared events recorded one by one through the fleet's `EngineSink`
//!   (publish with the expected last subject sequence, wait for the stream's ack) and through
//!   agent-core's `JsonlSink` (the sink `run` writes `events.jsonl` with: one `write` per
//!   event, `fdatasync` at `flush`, which the agent calls at every turn end), each `record`
//!   timed alone; then a whole turn (its eight events, then `flush`) through each.
//! - `throughput`: 1, 2 and 4 workers (one task at a time each) are started and seen in the
//!   fleet's status, then a batch of tasks (select a skill, run one script, answer) is
//!   submitted with `submit --file`; timed from the start of `submit` until every task's state
//!   is `finished`.
//! - `takeover`: a worker is SIGKILLed while its task's script sleeps; another worker, already
//!   running, takes the task after the ack wait. Timed from the kill until the run's state
//!   names the new worker, until the interrupted script runs again there (the resume redoes
//!   the interrupted action first), and until the first event the new worker stores. The
//!   kills of a row are spread over the dead worker's cycle of progress acks.
//!
//! `cargo bench -p skills-agent --bench fleet` runs the three parts; `-- events`,
//! `-- throughput` or `-- takeover` runs one; `-- --quick` runs each small (a smoke test, not
//! figures). Without `nats-server` (on PATH or at /usr/sbin/nats-server) it says so and exits 0.
//! Every process it starts is killed when it ends, on an error too (their guards' `Drop`); a
//! Ctrl-C reaches them as well, since they stay in the bench's process group.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures_util::StreamExt;
use serde_json::{Value, json};
use skills_agent_core::{Event, EventKind, EventSink, JsonlSink};
use skills_agent_fleet::{EngineSink, Fleet, FleetConfig, RunStatus, TaskState};
use tokio::runtime::Runtime;

/// The CLI binary of this build (Cargo builds it for benches and names it here).
const BINARY: &str = env!("CARGO_BIN_EXE_skills-agent");

/// How much to measure; `--quick` makes every figure small.
#[derive(Debug, Clone)]
struct Settings {
    /// Which parts to run.
    parts: Vec<Part>,
    /// Rounds of the events part (one more, first, is a warm-up left out).
    event_rounds: usize,
    /// Events per case and round (turns, for the whole-turn cases).
    events_per_round: usize,
    /// How many workers each throughput row runs.
    worker_counts: Vec<usize>,
    /// Tasks per timed batch.
    tasks: usize,
    /// Timed batches per worker count.
    batches: usize,
    /// The ack waits the takeover part is measured with (the worker's `--ack-wait`, seconds).
    ack_waits: Vec<u64>,
    /// Kills per ack wait.
    takeovers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Events,
    Throughput,
    Takeover,
}

impl Settings {
    fn from_args() -> Result<Settings> {
        let mut parts = Vec::new();
        let mut quick = false;
        // Cargo passes `--bench`; other flags are ignored as well, except `--quick`.
        for arg in std::env::args().skip(1) {
            match arg.as_str() {
                "--quick" => quick = true,
                "events" => parts.push(Part::Events),
                "throughput" => parts.push(Part::Throughput),
                "takeover" => parts.push(Part::Takeover),
                flag if flag.starts_with('-') => {}
                other => bail!("unknown part `{other}`: use events, throughput or takeover"),
            }
        }
        if parts.is_empty() {
            parts = vec![Part::Events, Part::Throughput, Part::Takeover];
        }
        Ok(if quick {
            Settings {
                parts,
                event_rounds: 2,
                events_per_round: 20,
                worker_counts: vec![1, 2],
                tasks: 4,
                batches: 1,
                ack_waits: vec![2],
                takeovers: 1,
            }
        } else {
            Settings {
                parts,
                event_rounds: 10,
                events_per_round: 200,
                worker_counts: vec![1, 2, 4],
                tasks: 100,
                batches: 5,
                ack_waits: vec![2, 5],
                takeovers: 6,
            }
        })
    }
}

fn main() -> ExitCode {
    let Some(nats) = nats_server() else {
        println!(
            "fleet bench: skipped: nats-server is not installed (looked on PATH and at \
             /usr/sbin/nats-server; `apt-get install nats-server`)"
        );
        return ExitCode::SUCCESS;
    };
    match run(&nats) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("fleet bench: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(nats: &Path) -> Result<()> {
    let settings = Settings::from_args()?;
    // The CLI's own runtime: multi-threaded, two workers (the engine sink needs one).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot build the Tokio runtime")?;
    let version = Command::new(nats).arg("--version").output().map_or_else(
        |error| format!("unknown ({error})"),
        |output| String::from_utf8_lossy(&output.stdout).trim().to_owned(),
    );
    println!("fleet bench: {} ({version}), skills-agent at {BINARY}", nats.display());
    println!(
        "load average at the start: {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    for part in &settings.parts {
        match part {
            Part::Events => events_part(&runtime, nats, &settings)?,
            Part::Throughput => throughput_part(&runtime, nats, &settings)?,
            Part::Takeover => takeover_part(&runtime, nats, &settings)?,
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Processes: the server, the workers, a fleet's folder.
// ---------------------------------------------------------------------------------------------

/// `nats-server` on PATH, else in /usr/sbin (Debian installs it there, off a user's PATH).
fn nats_server() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

/// A child process killed (SIGKILL) and reaped when dropped, on an error path too.
#[derive(Debug)]
struct Guarded {
    name: String,
    child: Child,
}

impl Guarded {
    /// Kills it now; returns the instant just before the signal was sent.
    fn kill(&mut self) -> Result<Instant> {
        let at = Instant::now();
        self.child.kill().with_context(|| format!("cannot kill {}", self.name))?;
        self.child.wait().with_context(|| format!("cannot reap {}", self.name))?;
        Ok(at)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JetStream server on a free loopback port with its store in a given folder.
#[derive(Debug)]
struct NatsServer {
    _process: Guarded,
    url: String,
}

impl NatsServer {
    fn start(binary: &Path, store: &Path) -> Result<NatsServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .context("cannot find a free loopback port")?
            .port();
        let child = Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        // Guarded at once: if it never listens, returning the error kills it.
        let server = NatsServer {
            _process: Guarded { name: "nats-server".to_owned(), child },
            url: format!("nats://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            ensure!(
                started.elapsed() < Duration::from_secs(20),
                "nats-server did not listen on port {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

/// A fleet on this machine, as `tests/fleet.rs` builds one: a private folder with a workspace
/// holding the `counter` skill (`first.sh` appends a line to `side.log`; `second.sh SECONDS`
/// appends one and sleeps), a private home, a work root for the workers, and a server.
/// Dropping it kills the workers, then the server, then removes the folder.
#[derive(Debug)]
struct Scene {
    // Dropped in this order: workers, server, folder.
    workers: Vec<Guarded>,
    server: NatsServer,
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scene {
    fn new(nats: &Path) -> Result<Scene> {
        let dir = tempfile::tempdir().context("cannot make a temporary folder")?;
        let root = dir.path().canonicalize()?;
        let workspace = root.join("workspace");
        let home = root.join("home");
        let skill = workspace.join(".agents/skills/counter");
        std::fs::create_dir_all(skill.join("scripts"))?;
        std::fs::create_dir_all(&home)?;
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: counter\ndescription: Notes its runs. Use to count.\n---\nRun \
             `scripts/first.sh`, then `scripts/second.sh SECONDS`.\n",
        )?;
        for (name, body) in [
            ("first.sh", "#!/bin/sh\necho first >> side.log\necho done first\n"),
            // Sleeps as itself (`exec`), so that the process dies with the worker that ran it.
            ("second.sh", "#!/bin/sh\necho second >> side.log\nexec sleep \"$1\"\n"),
        ] {
            let path = skill.join("scripts").join(name);
            std::fs::write(&path, body)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        let server = NatsServer::start(nats, &root.join("store"))?;
        Ok(Scene { workers: Vec::new(), server, root, workspace, home, _dir: dir })
    }

    /// The CLI with a clean environment pointing at this fleet (as the tests run it).
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BINARY);
        command
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("SKILLS_AGENT_CACHE", self.home.join("cache"))
            .env("NATS_URL", &self.server.url)
            .stdin(Stdio::null());
        command
    }

    /// Starts `skills-agent worker --name NAME` with `extra` flags; its stderr goes to
    /// `<root>/NAME.log`.
    fn start_worker(&mut self, name: &str, extra: &[&str]) -> Result<()> {
        let work_root = self.root.join("work");
        let work_root = work_root.to_string_lossy();
        let mut args = vec!["worker", "--name", name, "--work-root", &work_root];
        args.extend_from_slice(extra);
        let log = std::fs::File::create(self.root.join(format!("{name}.log")))?;
        let child = self
            .command(&args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start worker {name} ({BINARY})"))?;
        self.workers.push(Guarded { name: name.to_owned(), child });
        Ok(())
    }

    fn worker_mut(&mut self, name: &str) -> Result<&mut Guarded> {
        self.workers
            .iter_mut()
            .find(|worker| worker.name == name)
            .with_context(|| format!("no worker {name}"))
    }

    fn worker_logs(&self) -> String {
        self.workers
            .iter()
            .map(|worker| {
                let log = std::fs::read_to_string(self.root.join(format!("{}.log", worker.name)))
                    .unwrap_or_default();
                format!("--- {}:\n{log}", worker.name)
            })
            .collect()
    }

    /// Writes the mock model's answers into the workspace; returns the model spec.
    fn answers(&self, file: &str, answers: &Value) -> Result<String> {
        std::fs::write(self.workspace.join(file), answers.to_string())?;
        Ok(format!("mock:{file}"))
    }

    /// Runs `skills-agent submit ARGS`; returns the task ids it printed (one a line).
    fn submit(&self, args: &[&str]) -> Result<Vec<String>> {
        let mut full = vec!["submit"];
        full.extend_from_slice(args);
        let output = self.command(&full).output().context("cannot run `skills-agent submit`")?;
        ensure!(
            output.status.success(),
            "`skills-agent submit` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect())
    }
}

fn select() -> Value {
    json!({"tool_calls": [{"name": "select_skills", "arguments": {"names": ["counter"]}}]})
}

fn script(name: &str, args: &[&str]) -> Value {
    json!({"tool_calls": [{"name": "run_script", "arguments":
        {"skill": "counter", "script": format!("scripts/{name}"), "args": args}}]})
}

fn answer(content: &str) -> Value {
    json!({"tool_calls": [{"name": "final_answer", "arguments": {"content": content}}]})
}

async fn connect(url: &str) -> Result<Fleet> {
    Fleet::connect(FleetConfig::new(url)).await.with_context(|| format!("cannot connect to {url}"))
}

/// Waits until every worker in `names` has a heartbeat in the fleet's status (so it pulls).
async fn wait_for_workers(fleet: &Fleet, names: &[&str]) -> Result<()> {
    let started = Instant::now();
    loop {
        let workers = fleet.workers().await?;
        if names.iter().all(|name| workers.iter().any(|worker| worker.name == *name)) {
            return Ok(());
        }
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "workers {names:?} did not show in the fleet's status within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The processes whose command line contains `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok().map(|pid| (pid, entry)))
        .filter(|(_, entry)| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(marker)
            })
        })
        .map(|(pid, _)| pid)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Figures.
// ---------------------------------------------------------------------------------------------

/// The median and the 90th percentile (nearest rank) of some durations.
#[derive(Debug, Clone, Copy)]
struct Spread {
    median: Duration,
    p90: Duration,
    count: usize,
}

impl Spread {
    fn of(samples: &[Duration]) -> Spread {
        let mut sorted = samples.to_vec();
        sorted.sort();
        let rank = |fraction: f64| {
            let index = (fraction * sorted.len() as f64).ceil() as usize;
            sorted.get(index.saturating_sub(1)).copied().unwrap_or_default()
        };
        Spread { median: rank(0.5), p90: rank(0.9), count: sorted.len() }
    }
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn seconds(duration: Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

// ---------------------------------------------------------------------------------------------
// Part 1: per event, the engine sink against the local JSONL sink.
// ---------------------------------------------------------------------------------------------

/// One event as a run records it (the envelope; `seq` is set per sample).
fn event(kind: &str, turn: u32, data: Value) -> Result<Event> {
    let kind = serde_json::from_value(json!(kind))
        .with_context(|| format!("the bench's `{kind}` is not an event type"))?;
    Ok(Event {
        ts: "2026-11-27T03:17:20.335Z".to_owned(),
        run_id: "20261127_031720_81f0".to_owned(),
        seq: 0,
        turn,
        kind,
        data,
    })
}

/// A `model_response` of a local model deciding to run a script: its reasoning, the tool call
/// and the usage (~1 KB of JSON, the largest event of a common turn).
fn model_response() -> Result<Event> {
    let thinking = "The user wants to know how many lines README.md has. The counter skill is \
        selected and its instructions say to run scripts/first.sh before anything else, then \
        scripts/second.sh with the number of seconds to wait. The first script has not run \
        yet in this run, so that is the next step; it takes no arguments. After it prints its \
        result I will read the output, check that the exit code is 0, and only then decide \
        whether the second script is needed or whether I can already give the final answer \
        with the count. Running it now.";
    event(
        "model_response",
        2,
        json!({
            "duration_ms": 2412,
            "purpose": "decide",
            "response": {
                "finish_reason": "tool_calls",
                "retries": 0,
                "text": "",
                "thinking": thinking,
                "tool_calls": [{
                    "arguments": {"args": [], "script": "scripts/first.sh", "skill": "counter"},
                    "id": "call_2_0",
                    "name": "run_script",
                }],
                "usage": {"prompt_tokens": 1874, "completion_tokens": 143, "cached_tokens": 1536,
                    "reasoning_tokens": 118},
            },
        }),
    )
}

/// A small event: `turn_started` (~250 bytes).
fn turn_started() -> Result<Event> {
    event(
        "turn_started",
        2,
        json!({"allowed": ["run_script", "final_answer"], "budget": {"context_chars": [1874, 48000],
            "script_runs": [0, 6], "tool_calls": [1, 30], "turns": [2, 12]}}),
    )
}

/// The eight events of a turn that runs a script, as a `run` of the counter skill records them
/// (copied from a real `events.jsonl`, with the larger `model_response` above).
fn turn() -> Result<Vec<Event>> {
    let action = json!({"args": {"args": [], "script": "scripts/first.sh", "skill": "counter"},
        "type": "run_script"});
    let on = "active";
    Ok(vec![
        turn_started()?,
        event(
            "model_request",
            2,
            json!({"chars": 1874, "json_schema": false, "messages": 5,
                "notice": ["silent_calls"], "purpose": "decide",
                "request_sha256": "028400181239e724c740bb12f72e01ecdcd96fe9a30df731a91ee488331302fa",
                "tools": ["run_script", "final_answer"]}),
        )?,
        event("action_planned", 2, json!({"type": "run_script"}))?,
        model_response()?,
        event("action_validated", 2, json!({"action": action, "valid": true}))?,
        event(
            "action_executed",
            2,
            json!({"action": action, "duration_ms": 71, "status": "ok", "result": {
                "duration_ms": 35, "exit_code": 0, "signal": null, "timed_out": false,
                "stderr_bytes": 0, "stderr_truncated": false, "stdout_bytes": 11,
                "stdout_truncated": false,
                "sandbox": {"backend": "direct",
                    "cgroup_versions": {"memory": "v1", "pids": "v1"},
                    "layers": {"bubblewrap": "not_requested", "cgroup_memory": on,
                        "cgroup_pids": on, "clean_environment": on, "drop_privileges": on,
                        "ipc_namespace": on, "landlock": on, "network_namespace": on,
                        "no_new_privileges": on, "parent_death_signal": on,
                        "process_group": on, "read_only_mounts": on, "rlimits": on,
                        "seccomp": on, "seccomp_root_filter": on, "seccomp_socket_filter": on},
                    "notes": {
                        "cgroup_memory": concat!("cgroup v1 under /sys/fs/cgroup/memory/",
                            "process_api/8ffd36c787c9bc8991b89468635e4416"),
                        "cgroup_pids": "cgroup v1 under /sys/fs/cgroup/pids",
                        "drop_privileges":
                            "uid 0 gid 0 without capabilities, securebits 0xef locked",
                        "read_only_mounts": concat!("20 host mounts read-only; protected: ",
                            "/tmp/ws/.agents/skills/counter, /tmp/ws/.agent/runs")}}}}),
        )?,
        event(
            "observation_recorded",
            2,
            json!({"action": action, "chars": 30, "content": "exit code 0\nstdout:\ndone first",
                "id": "obs-2", "status": "ok", "stored": null}),
        )?,
        event(
            "turn_finished",
            2,
            json!({"context_chars": 1580, "counters": {"cached_tokens": 0, "compactions": 0,
                "completion_tokens": 0, "model_calls": 2, "prompt_tokens": 0, "refusals": 0,
                "script_runs": 1, "tool_calls": 2, "turns": 2},
                "reasoning": {"calls": 1, "reasoning_chars": 0, "silent": true}}),
        )?,
    ])
}

/// What one case records: one event per sample, or a whole turn then `flush`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    Small,
    Large,
    Turn,
}

impl Shape {
    fn label(self) -> &'static str {
        match self {
            Shape::Small => "turn_started (one event)",
            Shape::Large => "model_response (one event)",
            Shape::Turn => "a turn: 8 events, then flush",
        }
    }
}

/// One sink of one case, numbering the events it records (`seq` must grow: the engine sink's
/// message id is built from it, and the server drops a repeated id as a duplicate).
struct Case {
    shape: Shape,
    engine: bool,
    sink: Arc<dyn EventSink>,
    events: Vec<Event>,
    next_seq: u64,
    samples: Vec<Duration>,
}

impl Case {
    /// Records one sample: its events, each `record` timed alone (`Small`, `Large`), or the
    /// turn's events and `flush` timed together (`Turn`).
    fn sample(&mut self, keep: bool) -> Result<()> {
        let mut events = self.events.clone();
        for event in &mut events {
            self.next_seq += 1;
            event.seq = self.next_seq;
        }
        let started = Instant::now();
        for event in &events {
            self.sink.record(event)?;
        }
        if self.shape == Shape::Turn {
            self.sink.flush()?;
        }
        let elapsed = started.elapsed();
        if keep {
            self.samples.push(elapsed);
        }
        Ok(())
    }
}

fn events_part(runtime: &Runtime, nats: &Path, settings: &Settings) -> Result<()> {
    println!("\n## Per event: EngineSink (publish + ack) against JsonlSink (events.jsonl)\n");
    // Both in the system temp folder: the server's store and the JSONL files on one disk.
    let dir = tempfile::tempdir().context("cannot make a temporary folder")?;
    let server = NatsServer::start(nats, &dir.path().join("store"))?;
    let fleet = runtime.block_on(connect(&server.url))?;
    let sizes = [
        (Shape::Small, serde_json::to_vec(&turn_started()?)?.len() + 1),
        (Shape::Large, serde_json::to_vec(&model_response()?)?.len() + 1),
        (
            Shape::Turn,
            turn()?
                .iter()
                .map(|event| serde_json::to_vec(event).map_or(0, |line| line.len() + 1))
                .sum(),
        ),
    ];
    let (rounds, per_round) = (settings.event_rounds, settings.events_per_round);
    let folder = dir.path().to_owned();
    // Recorded inside a task of the multi-threaded runtime, as the worker runs an agent: the
    // engine sink then waits for each ack with `block_in_place`, exactly as in a run.
    let cases = runtime.block_on(async move {
        tokio::spawn(async move {
            let mut cases = Vec::new();
            for shape in [Shape::Small, Shape::Large, Shape::Turn] {
                let events = match shape {
                    Shape::Small => vec![turn_started()?],
                    Shape::Large => vec![model_response()?],
                    Shape::Turn => turn()?,
                };
                let task_id = format!("task-bench-{shape:?}").to_lowercase();
                let status = RunStatus {
                    task_id: task_id.clone(),
                    task: "bench".to_owned(),
                    state: TaskState::Running,
                    worker: Some("bench".to_owned()),
                    run_id: None,
                    attempts: 1,
                    outcome: None,
                    exit_code: None,
                    final_text: None,
                    error: None,
                    updated: String::new(),
                };
                // No checkpoint: only the events are stored (no workspace changes, no files).
                let engine = EngineSink::new(fleet.clone(), &task_id, 0, status, None)?;
                let jsonl = JsonlSink::open(&folder.join(format!("{task_id}.jsonl")))?;
                for (engine, sink) in
                    [(false, Arc::new(jsonl) as Arc<dyn EventSink>), (true, Arc::new(engine))]
                {
                    let events = events.clone();
                    cases.push(Case { shape, engine, sink, events, next_seq: 0, samples: vec![] });
                }
            }
            // Round 0 warms up (connections, page cache, the server's first block); each round
            // takes the cases in a different order, so that a drift of the machine's load
            // spreads over all of them.
            for round in 0..=rounds {
                let count = cases.len();
                for offset in 0..count {
                    let case = &mut cases[(round + offset) % count];
                    for _ in 0..per_round {
                        case.sample(round > 0)?;
                    }
                }
            }
            anyhow::Ok(cases)
        })
        .await
        .context("the measuring task failed")?
    })?;
    drop(server);

    let spreads: BTreeMap<(Shape, bool), Spread> =
        cases.iter().map(|case| ((case.shape, case.engine), Spread::of(&case.samples))).collect();
    println!("Each figure: µs per `record` (per turn: the 8 records and `flush`); {rounds} rounds");
    println!("of {per_round} after a warm-up round; JetStream file storage, server defaults.\n");
    println!(
        "| what | bytes | JSONL median | JSONL p90 | engine median | engine p90 \
         | engine ÷ JSONL (median) | samples |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (shape, bytes) in sizes {
        let (Some(jsonl), Some(engine)) =
            (spreads.get(&(shape, false)), spreads.get(&(shape, true)))
        else {
            continue;
        };
        let ratio = micros(engine.median) / micros(jsonl.median).max(0.001);
        println!(
            "| {} | {bytes} | {:.1} | {:.1} | {:.0} | {:.0} | {ratio:.2}× | {} |",
            shape.label(),
            micros(jsonl.median),
            micros(jsonl.p90),
            micros(engine.median),
            micros(engine.p90),
            engine.count,
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Part 2: throughput with 1, 2 and 4 workers.
// ---------------------------------------------------------------------------------------------

/// Submits `count` scripted tasks with `submit --file`; returns the time from the start of
/// `submit` until every task is `finished` (completed), and how long `submit` itself took.
fn run_batch(
    runtime: &Runtime,
    scene: &Scene,
    fleet: &Fleet,
    spec: &str,
    label: &str,
    count: usize,
) -> Result<(Duration, Duration)> {
    let lines: Vec<String> = (0..count)
        .map(|index| {
            json!({"task": format!("Note run {label}-{index}"), "model": spec}).to_string()
        })
        .collect();
    let file = scene.root.join(format!("tasks-{label}.jsonl"));
    std::fs::write(&file, lines.join("\n"))?;
    let started = Instant::now();
    let ids = scene.submit(&["--file", &file.to_string_lossy()])?;
    let submitted = started.elapsed();
    ensure!(ids.len() == count, "submit printed {} task ids for {count} tasks", ids.len());
    // Each poll reads the states of the tasks not seen finished yet, oldest first, up to the
    // first unfinished one (the queue hands tasks out in order, so that is one or two reads).
    let mut pending = ids.as_slice();
    runtime.block_on(async {
        while let Some(id) = pending.first() {
            let status = fleet.run_status(id).await?;
            match status.as_ref().map(|status| status.state) {
                Some(TaskState::Finished) => {
                    let outcome = status.and_then(|status| status.outcome).unwrap_or_default();
                    ensure!(outcome == "completed", "task {id} ended {outcome}");
                    pending = &pending[1..];
                    continue;
                }
                Some(TaskState::Dead) => bail!("task {id} was dead-lettered"),
                Some(TaskState::Queued | TaskState::Running) | None => {}
            }
            ensure!(
                started.elapsed() < Duration::from_secs(600),
                "{} of {count} tasks unfinished after 600 s; the workers said:\n{}",
                pending.len(),
                scene.worker_logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::Ok(())
    })?;
    Ok((started.elapsed(), submitted))
}

fn throughput_part(runtime: &Runtime, nats: &Path, settings: &Settings) -> Result<()> {
    println!("\n## Throughput: scripted tasks through real worker processes\n");
    let (tasks, batches) = (settings.tasks, settings.batches);
    let mut rows = Vec::new();
    for &count in &settings.worker_counts {
        let mut scene = Scene::new(nats)?;
        let spec = scene.answers(
            "answers.json",
            &json!([select(), script("first.sh", &[]), answer("Noted once.")]),
        )?;
        let names: Vec<String> = (1..=count).map(|index| format!("w{index}")).collect();
        for name in &names {
            scene.start_worker(name, &[])?;
        }
        let fleet = runtime.block_on(connect(&scene.server.url))?;
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        runtime.block_on(wait_for_workers(&fleet, &names))?;
        // Not timed: a first task per worker (its first sandbox, the builtin skills' cache).
        run_batch(runtime, &scene, &fleet, &spec, "warm-up", 2 * count)?;
        let mut elapsed = Vec::new();
        let mut submit = Vec::new();
        for batch in 1..=batches {
            let (all, submitted) =
                run_batch(runtime, &scene, &fleet, &spec, &format!("batch{batch}"), tasks)?;
            println!(
                "{count} worker(s), batch {batch}: {tasks} tasks in {} ({:.2} tasks/s; \
                 submit took {})",
                seconds(all),
                tasks as f64 / all.as_secs_f64(),
                seconds(submitted)
            );
            elapsed.push(all);
            submit.push(submitted);
        }
        let log = scene.worker_logs();
        ensure!(!log.contains("dead-lettered") && !log.contains("failed"), "a try failed:\n{log}");
        rows.push((count, Spread::of(&elapsed), Spread::of(&submit), elapsed));
    }
    println!("\n{tasks} tasks a batch (select a skill, run first.sh in the sandbox, answer),");
    println!("timed from the start of `submit --file` until every task is finished;");
    println!("median of {batches} batch(es) after a warm-up batch.\n");
    println!(
        "| workers | batch time (median) | tasks/s | ms per task | vs 1 worker | submit alone \
         | batches (s) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---|");
    let single = rows.first().map(|(_, spread, _, _)| spread.median);
    for (count, spread, submit, all) in &rows {
        let rate = tasks as f64 / spread.median.as_secs_f64();
        let speedup =
            single.map_or(1.0, |single| single.as_secs_f64() / spread.median.as_secs_f64());
        let each: Vec<String> =
            all.iter().map(|time| format!("{:.1}", time.as_secs_f64())).collect();
        println!(
            "| {count} | {} | {rate:.2} | {:.0} | {speedup:.2}× | {} | {} |",
            seconds(spread.median),
            spread.median.as_secs_f64() * 1000.0 / tasks as f64,
            seconds(submit.median),
            each.join(", ")
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Part 3: a SIGKILLed worker's task goes on in another worker.
// ---------------------------------------------------------------------------------------------

/// How long the script the worker is killed in sleeps, in whole seconds (a distinct fraction
/// is added to find its process).
const NAP_SECONDS: u64 = 6;

/// What one takeover took, from the kill.
#[derive(Debug)]
struct Takeover {
    /// Until the run's state names the new worker (it took the redelivered task).
    taken: Duration,
    /// Until the interrupted script runs again, in the new worker (the run goes on: the
    /// resume redoes the interrupted action first).
    script_again: Duration,
    /// Until the first event the new worker stored, and which: the redone action's
    /// `action_executed`, once the script's nap is over.
    first_event: (Duration, EventKind),
    /// Until the task finished on the new worker.
    finished: Duration,
}

/// One kill: `phase` (0 to 1) places it within the dead worker's cycle of progress acks (sent
/// every third of the ack wait), so that the kills of a row spread over the whole cycle.
fn takeover_once(
    runtime: &Runtime,
    nats: &Path,
    ack_wait: u64,
    index: usize,
    phase: f64,
) -> Result<Takeover> {
    let mut scene = Scene::new(nats)?;
    // A distinct nap, to find the script's process; long enough to kill the worker in it.
    let nap = format!("{NAP_SECONDS}.{:03}{index:03}", std::process::id() % 1000);
    let spec = scene.answers(
        "answers.json",
        &json!([
            select(),
            script("first.sh", &[]),
            script("second.sh", &[&nap]),
            answer("Both ran."),
        ]),
    )?;
    let ack = ack_wait.to_string();
    scene.start_worker("doomed", &["--ack-wait", &ack])?;
    let fleet = runtime.block_on(connect(&scene.server.url))?;
    runtime.block_on(wait_for_workers(&fleet, &["doomed"]))?;
    let ids = scene.submit(&["--model", &spec, "Run both scripts"])?;
    let task_id = ids.first().context("submit printed no task id")?.clone();
    // The doomed worker took the task and runs second.sh.
    let marker = format!("sleep {nap}");
    let started = Instant::now();
    let doomed_script = loop {
        let pids = pids_with(&marker);
        if !pids.is_empty() {
            break pids;
        }
        ensure!(
            started.elapsed() < Duration::from_secs(60),
            "second.sh never started; the workers said:\n{}",
            scene.worker_logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The heir is running and pulling before the kill.
    scene.start_worker("heir", &["--ack-wait", &ack])?;
    runtime.block_on(wait_for_workers(&fleet, &["doomed", "heir"]))?;
    // Follow the task's events live, each with the instant it arrived.
    let (sender, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let follower = {
        let (fleet, task_id) = (fleet.clone(), task_id.clone());
        runtime.spawn(async move {
            let mut live = fleet.follow(&task_id).await?;
            while let Some(item) = live.next().await {
                let (event, sequence) = item?;
                if sender.send((Instant::now(), event.kind, sequence)).is_err() {
                    break;
                }
            }
            anyhow::Ok(())
        })
    };
    let result = runtime.block_on(async {
        // Caught up: the follower has the last stored event (the doomed worker is in the
        // script and stores nothing until it returns).
        let (_, last) = fleet.events(&task_id).await?;
        let mut seen = 0;
        while seen < last {
            let (_, _, sequence) = arrived.recv().await.context("the follower stopped")?;
            seen = sequence;
        }
        tokio::time::sleep(Duration::from_secs(ack_wait).mul_f64(phase / 3.0)).await;
        ensure!(
            doomed_script.iter().all(|pid| pids_with(&marker).contains(pid)),
            "second.sh ended before the kill: make NAP_SECONDS longer"
        );
        let killed = scene.worker_mut("doomed")?.kill()?;
        let (mut taken, mut script_again, mut first_event) = (None, None, None);
        // Every 10 ms: the events that arrived, the script's processes, the run's state.
        loop {
            while let Ok((at, kind, sequence)) = arrived.try_recv() {
                if first_event.is_none() && sequence > last {
                    first_event = Some((at.duration_since(killed), kind));
                }
            }
            if script_again.is_none()
                && pids_with(&marker).iter().any(|pid| !doomed_script.contains(pid))
            {
                script_again = Some(killed.elapsed());
            }
            let status = fleet.run_status(&task_id).await?.context("the task has no state")?;
            if taken.is_none() && status.worker.as_deref() == Some("heir") {
                taken = Some(killed.elapsed());
            }
            match status.state {
                TaskState::Finished => {
                    let outcome = status.outcome.unwrap_or_default();
                    ensure!(outcome == "completed", "the task ended {outcome}");
                    return Ok(Takeover {
                        taken: taken.context("the heir never showed in the run's state")?,
                        script_again: script_again
                            .context("the task finished but second.sh was not seen again")?,
                        first_event: first_event
                            .context("the task finished without a new event")?,
                        finished: killed.elapsed(),
                    });
                }
                TaskState::Dead => bail!("the task was dead-lettered"),
                TaskState::Queued | TaskState::Running => {}
            }
            ensure!(
                killed.elapsed() < Duration::from_secs(ack_wait + 120),
                "the task did not finish within the ack wait + 120 s; the workers said:\n{}",
                scene.worker_logs()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    follower.abort();
    result
}

/// `median (min–max)` of some durations, in seconds.
fn range(samples: &[Duration]) -> String {
    let (min, max) = (samples.iter().min(), samples.iter().max());
    let (min, max) = (min.copied().unwrap_or_default(), max.copied().unwrap_or_default());
    format!(
        "{:.2} s ({:.2}–{:.2})",
        Spread::of(samples).median.as_secs_f64(),
        min.as_secs_f64(),
        max.as_secs_f64()
    )
}

fn takeover_part(runtime: &Runtime, nats: &Path, settings: &Settings) -> Result<()> {
    println!("\n## Takeover: a worker SIGKILLed while its task's script sleeps\n");
    let mut rows = Vec::new();
    for &ack_wait in &settings.ack_waits {
        let mut all = Vec::new();
        for index in 0..settings.takeovers {
            let phase = index as f64 / settings.takeovers as f64;
            let takeover = takeover_once(runtime, nats, ack_wait, index, phase)?;
            println!(
                "--ack-wait {ack_wait}: taken after {}, script again after {}, first new event \
                 ({}) after {}, finished after {}",
                seconds(takeover.taken),
                seconds(takeover.script_again),
                takeover.first_event.1.as_str(),
                seconds(takeover.first_event.0),
                seconds(takeover.finished)
            );
            all.push(takeover);
        }
        rows.push((ack_wait, all));
    }
    println!("\nFrom the SIGKILL until the run's state names the heir (taken), until the");
    println!("interrupted script runs again in the heir (goes on), and until the heir stored its");
    println!(
        "first event (after the script's {NAP_SECONDS} s nap); target: goes on ≤ ack wait + 2 s.\n"
    );
    println!(
        "| ack wait | kills | taken: median (min–max) | goes on: median (min–max) \
         | goes on − ack wait (max) | first new event (median) | target met |"
    );
    println!("|---:|---:|---|---|---:|---:|---|");
    for (ack_wait, all) in &rows {
        let taken: Vec<Duration> = all.iter().map(|takeover| takeover.taken).collect();
        let again: Vec<Duration> = all.iter().map(|takeover| takeover.script_again).collect();
        let first: Vec<Duration> = all.iter().map(|takeover| takeover.first_event.0).collect();
        let worst = again.iter().max().copied().unwrap_or_default();
        let over = worst.as_secs_f64() - *ack_wait as f64;
        println!(
            "| {ack_wait} s | {} | {} | {} | {over:+.2} s | {} | {} |",
            all.len(),
            range(&taken),
            range(&again),
            seconds(Spread::of(&first).median),
            if over < 2.0 { "yes" } else { "no" }
        );
    }
    Ok(())
}
