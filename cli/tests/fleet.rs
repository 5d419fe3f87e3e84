//! The fleet from the outside: a real `nats-server -js` on a free loopback port with a private
//! store, real `skills-agent worker` processes, `submit`, `fleet status` and `fetch`, scripted
//! (`mock:`) runs with real scripts in the sandbox. Without `nats-server` on PATH these tests
//! skip with a printed reason; under CI (`CI` set) they fail instead (`.ci/run` installs
//! Debian's `nats-server`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "common/live.rs"]
mod live;

/// A JetStream server for one test, killed on drop.
struct Nats {
    child: Child,
    url: String,
    port: u16,
    store: PathBuf,
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nats_server() -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("nats-server"))
            .find(|candidate| candidate.is_file())
    })
}

/// A loopback port for one of this binary's servers: below the kernel's ephemeral range (so
/// no `bind(0)`, here or in a CLI under test, is handed it) and used once per process (so a
/// server restarted on its port, or a cluster's lost node, never finds another test's server
/// there: CI once saw a test read another test's fleet).
fn fresh_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let slot = NEXT.fetch_add(1, Ordering::Relaxed);
    assert!(slot < 100, "this test binary asked for more than 100 server ports");
    let block = u16::try_from(std::process::id() % 120).unwrap();
    20_000 + block * 100 + slot
}

impl Nats {
    /// Starts a server, or `None` (skip) when `nats-server` is not installed outside CI.
    fn start(store: &Path) -> Option<Nats> {
        let Some(binary) = nats_server() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "nats-server is not installed (apt-get install nats-server); CI must run the \
                 fleet tests"
            );
            eprintln!("skipping: nats-server is not installed (apt-get install nats-server)");
            return None;
        };
        // A port can be held by a process outside this test binary (a server left over from
        // an earlier run): then the server exits, and the next port is tried.
        for _ in 0..5 {
            let port = fresh_port();
            if let Some(child) = Nats::try_spawn(&binary, port, store) {
                let url = format!("nats://127.0.0.1:{port}");
                return Some(Nats { child, url, port, store: store.to_owned() });
            }
        }
        panic!("nats-server did not start on any of five ports");
    }

    fn spawn(binary: &Path, port: u16, store: &Path) -> Child {
        Nats::try_spawn(binary, port, store).expect("nats-server exited at start")
    }

    /// Starts the server on `port` and waits until it listens there; `None` when it exited
    /// first (the port was taken). The server says it listens by writing its ports file
    /// (`nats-server_<pid>.ports`): a connection that succeeds could reach another server on
    /// the port while this one is still failing to bind it.
    fn try_spawn(binary: &Path, port: u16, store: &Path) -> Option<Child> {
        let ports_dir = store.with_extension("ports");
        std::fs::create_dir_all(&ports_dir).unwrap();
        let mut child = Command::new(binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .arg("--ports_file_dir")
            .arg(&ports_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ports_file = ports_dir.join(format!("nats-server_{}.ports", child.id()));
        let started = Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                return None;
            }
            if ports_file.is_file() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(child);
            }
            assert!(started.elapsed() < Duration::from_secs(20), "nats-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server outright and starts it again on the same port and store.
    fn restart(&mut self, down_for: Duration) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        std::thread::sleep(down_for);
        self.child = Nats::spawn(&nats_server().unwrap(), self.port, &self.store);
    }
}

/// A workspace with a `counter` skill (`first.sh` and `second.sh` append to `side.log`), a
/// private home, a work root for the workers, and a server.
struct Fleet {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    nats: Nats,
    /// The servers the commands are given (`NATS_URL`): `nats`'s, or a cluster's.
    nats_url: String,
    workers: Vec<Child>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            let _ = worker.kill();
            let _ = worker.wait();
        }
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

impl Fleet {
    fn new() -> Option<Fleet> {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let nats = Nats::start(&root.join("store"))?;
        let workspace = root.join("workspace");
        let home = root.join("home");
        let skill = workspace.join(".agents/skills/counter");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: counter\ndescription: Notes its runs. Use to count.\n---\nRun \
             `scripts/first.sh`, then `scripts/second.sh SECONDS`.\n",
        )
        .unwrap();
        for (name, body) in [
            ("first.sh", "#!/bin/sh\necho first >> side.log\necho done first\n"),
            // Sleeps as itself (`exec`), so that the process dies with the worker that ran it.
            ("second.sh", "#!/bin/sh\necho second >> side.log\nexec sleep \"$1\"\n"),
        ] {
            let path = skill.join("scripts").join(name);
            std::fs::write(&path, body).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let nats_url = nats.url.clone();
        Some(Fleet { _dir: dir, root, workspace, home, nats, nats_url, workers: Vec::new() })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skills-agent"));
        command
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("SKILLS_AGENT_CACHE", self.home.join("cache"))
            .env("NATS_URL", &self.nats_url)
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn start_worker(&mut self, name: &str, extra: &[&str]) -> u32 {
        self.start_worker_with(name, extra, &[])
    }

    /// A worker with `env` added to its environment.
    fn start_worker_with(&mut self, name: &str, extra: &[&str], env: &[(&str, &str)]) -> u32 {
        let work_root = self.root.join("work");
        let mut args = vec!["worker", "--name", name, "--work-root", work_root.to_str().unwrap()];
        args.extend_from_slice(extra);
        let log = std::fs::File::create(self.root.join(format!("{name}.log"))).unwrap();
        let mut command = self.command(&args);
        command.envs(env.iter().copied());
        let child = command.stdout(Stdio::null()).stderr(log).spawn().unwrap();
        let pid = child.id();
        self.workers.push(child);
        pid
    }

    fn worker_log(&self, name: &str) -> String {
        std::fs::read_to_string(self.root.join(format!("{name}.log"))).unwrap_or_default()
    }

    fn answers(&self, name: &str, answers: &Value) -> String {
        std::fs::write(self.workspace.join(name), answers.to_string()).unwrap();
        format!("mock:{name}")
    }

    fn status(&self) -> Value {
        let output = self.run(&["fleet", "status", "--json"]);
        assert_code(&output, 0);
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// Waits until `done` holds for the fleet's status (bounded).
    fn wait_for(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        self.wait_within(what, Duration::from_secs(180), done)
    }

    /// Waits until `done` holds for the fleet's status, at most `limit`. A status that cannot
    /// be read (a cluster electing a new leader) is read again.
    fn wait_within(&self, what: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let output = self.run(&["fleet", "status", "--json"]);
            let status = match output.status.code() {
                Some(0) => serde_json::from_slice(&output.stdout).unwrap(),
                _ => Value::String(text(&output.stderr)),
            };
            if status.is_object() && done(&status) {
                return status;
            }
            assert!(started.elapsed() < limit, "timed out waiting for {what}: {status:#}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn fetch(&self, id: &str) -> (PathBuf, PathBuf) {
        let into = self.root.join("fetched").join(id);
        let output = self.run(&["fetch", id, "--into", into.to_str().unwrap()]);
        assert_code(&output, 0);
        let run_dir = PathBuf::from(text(&output.stdout).trim());
        (run_dir, into.join("workspace"))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_code(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

fn events(run_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn outcome_count(status: &Value, outcome: &str) -> u64 {
    status["outcomes"][outcome].as_u64().unwrap_or(0)
}

fn processes_with(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
            String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(marker)
        })
    })
}

#[test]
fn three_workers_run_thirty_scripted_tasks_each_exactly_once() {
    let Some(mut fleet) = Fleet::new() else { return };
    let spec = fleet.answers(
        "answers.json",
        &json!([select(), script("first.sh", &[]), answer("Noted once.")]),
    );
    let lines: Vec<String> = (0..30)
        .map(|index| json!({"task": format!("Note run {index}"), "model": spec}).to_string())
        .collect();
    std::fs::write(fleet.root.join("tasks.jsonl"), lines.join("\n")).unwrap();
    let output = fleet.run(&["submit", "--file", fleet.root.join("tasks.jsonl").to_str().unwrap()]);
    assert_code(&output, 0);
    let ids: Vec<String> = text(&output.stdout).lines().map(str::to_owned).collect();
    assert_eq!(ids.len(), 30, "one task id per line");
    for name in ["w1", "w2", "w3"] {
        fleet.start_worker(name, &[]);
    }
    let status =
        fleet.wait_for("30 completed runs", |status| outcome_count(status, "completed") == 30);
    assert_eq!((status["queued"].as_u64(), status["running"].as_u64()), (Some(0), Some(0)));
    assert_eq!(status["dead"], json!([]));
    for id in &ids {
        let (run_dir, workspace) = fleet.fetch(id);
        let events = events(&run_dir);
        let finished = events.iter().filter(|event| event["type"] == "run_finished").count();
        assert_eq!(finished, 1, "{id}: one run_finished");
        let seqs: Vec<u64> = events.iter().map(|event| event["seq"].as_u64().unwrap()).collect();
        assert!(seqs.windows(2).all(|pair| pair[1] == pair[0] + 1), "{id}: seq {seqs:?}");
        assert_eq!(std::fs::read_to_string(workspace.join("side.log")).unwrap(), "first\n", "{id}");
        let check = fleet.run(&["replay", "--check", run_dir.to_str().unwrap()]);
        assert_code(&check, 0);
        assert!(text(&check.stdout).contains("reproduced exactly"), "{}", text(&check.stdout));
        let worker = events.iter().any(|event| event["type"] == "run_started");
        assert!(worker, "{id}: the record starts with run_started");
    }
    // The workers' heartbeats count every run once.
    let status = fleet.status();
    let finished: Vec<u64> = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["finished"].as_u64().unwrap())
        .collect();
    assert_eq!(finished.iter().sum::<u64>(), 30, "{status:#}");
    for name in ["w1", "w2", "w3"] {
        let log = fleet.worker_log(name);
        assert!(!log.contains("dead-lettered") && !log.contains("failed"), "{name}: {log}");
    }
}

#[test]
fn a_killed_workers_task_finishes_on_another_without_redoing_recorded_work() {
    let Some(mut fleet) = Fleet::new() else { return };
    // A distinct nap, to find the script's process.
    let nap = format!("3.{:06}", std::process::id() % 1_000_000);
    let spec = fleet.answers(
        "answers.json",
        &json!([
            select(),
            script("first.sh", &[]),
            script("second.sh", &[&nap]),
            answer("Both ran."),
        ]),
    );
    let first = fleet.start_worker("doomed", &["--ack-wait", "2"]);
    let output = fleet.run(&["submit", "--model", &spec, "Run both scripts"]);
    assert_code(&output, 0);
    let task_id = text(&output.stdout).trim().to_owned();
    let marker = format!("sleep {nap}");
    let started = Instant::now();
    while !processes_with(&marker) {
        assert!(started.elapsed() < Duration::from_secs(60), "second.sh never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Command::new("kill").args(["-KILL", &first.to_string()]).status().unwrap();
    assert!(killed.success());
    fleet.start_worker("heir", &["--ack-wait", "2"]);
    let status = fleet
        .wait_for("the task to finish elsewhere", |status| outcome_count(status, "completed") == 1);
    assert_eq!(status["dead"], json!([]));
    let (run_dir, workspace) = fleet.fetch(&task_id);
    let events = events(&run_dir);
    assert_eq!(events.iter().filter(|event| event["type"] == "run_finished").count(), 1);
    let seqs: Vec<u64> = events.iter().map(|event| event["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|pair| pair[1] > pair[0]), "seq strictly increasing: {seqs:?}");
    // first.sh (recorded as done before the kill) ran once: its line came with the workspace's
    // stored changes; second.sh (interrupted) ran again on the heir.
    assert_eq!(std::fs::read_to_string(workspace.join("side.log")).unwrap(), "first\nsecond\n");
    let executed: Vec<&str> = events
        .iter()
        .filter(|event| event["type"] == "action_executed")
        .filter_map(|event| event["data"]["action"]["args"]["script"].as_str())
        .collect();
    assert_eq!(executed, ["scripts/first.sh", "scripts/second.sh"], "each script recorded once");
    let check = fleet.run(&["replay", "--check", run_dir.to_str().unwrap()]);
    assert_code(&check, 0);
    let log = fleet.worker_log("heir");
    assert!(log.contains(&format!("{task_id}: finished: completed")), "{log}");
}

/// A worker SIGKILLed right after a script's `action_executed` was stored, before its
/// observation: the heir completes the action from the stored `last_execution.json` instead of
/// running the script again, so each script's line is in `side.log` once.
#[test]
fn a_worker_killed_between_a_script_result_and_its_observation_does_not_run_it_again() {
    let Some(mut fleet) = Fleet::new() else { return };
    let answers = json!([
        select(),
        script("first.sh", &[]),
        script("second.sh", &["0"]),
        answer("Both ran.")
    ]);
    // Where to kill: the seq of second.sh's `action_executed` in a local run of the same task,
    // in a copy of the workspace.
    let reference = fleet.root.join("reference");
    let copied = Command::new("cp").arg("-a").arg(&fleet.workspace).arg(&reference).status();
    assert!(copied.unwrap().success());
    std::fs::write(reference.join("answers.json"), answers.to_string()).unwrap();
    let local = fleet
        .command(&["run", "--quiet", "--model", "mock:answers.json", "Run both scripts"])
        .current_dir(&reference)
        .output()
        .unwrap();
    assert_code(&local, 0);
    let runs: Vec<PathBuf> = std::fs::read_dir(reference.join(".agent/runs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    let kill_after = events(&runs[0])
        .iter()
        .find(|event| {
            event["type"] == "action_executed"
                && event["data"]["action"]["args"]["script"] == "scripts/second.sh"
        })
        .map(|event| event["seq"].as_u64().unwrap())
        .unwrap();

    let spec = fleet.answers("answers.json", &answers);
    let kill_after = kill_after.to_string();
    fleet.start_worker_with(
        "doomed",
        &["--ack-wait", "2"],
        &[("SKILLS_AGENT_FAULT_KILL_AFTER_SEQ", &kill_after)],
    );
    let output = fleet.run(&["submit", "--model", &spec, "Run both scripts"]);
    assert_code(&output, 0);
    let task_id = text(&output.stdout).trim().to_owned();
    let started = Instant::now();
    while fleet.workers[0].try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(60), "the doomed worker never died");
        std::thread::sleep(Duration::from_millis(20));
    }
    fleet.start_worker("heir", &["--ack-wait", "2"]);
    let status = fleet
        .wait_for("the task to finish elsewhere", |status| outcome_count(status, "completed") == 1);
    assert_eq!(status["dead"], json!([]));
    let (run_dir, workspace) = fleet.fetch(&task_id);
    let events = events(&run_dir);
    assert_eq!(events.iter().filter(|event| event["type"] == "run_finished").count(), 1);
    assert_eq!(std::fs::read_to_string(workspace.join("side.log")).unwrap(), "first\nsecond\n");
    let executed: Vec<&str> = events
        .iter()
        .filter(|event| event["type"] == "action_executed")
        .filter_map(|event| event["data"]["action"]["args"]["script"].as_str())
        .collect();
    assert_eq!(executed, ["scripts/first.sh", "scripts/second.sh"], "each script recorded once");
    let check = fleet.run(&["replay", "--check", run_dir.to_str().unwrap()]);
    assert_code(&check, 0);
}

#[test]
fn a_poison_task_goes_to_dead_letter_with_its_reason() {
    let Some(mut fleet) = Fleet::new() else { return };
    fleet.start_worker("w1", &["--max-tries", "2"]);
    let output = fleet.run(&["submit", "--wait", "--model", "mock:no-such-answers.json", "Doomed"]);
    assert_code(&output, 1);
    assert!(
        text(&output.stderr).contains("dead-lettered after 2 tries"),
        "{}",
        text(&output.stderr)
    );
    let status = fleet.status();
    let dead = &status["dead"][0];
    assert_eq!(dead["attempts"], 2);
    assert!(dead["reason"].as_str().unwrap().contains("no-such-answers.json"), "{dead}");
    assert_eq!(outcome_count(&status, "dead"), 1);
    // An engine that is not there is a clear error naming it.
    let output = fleet.run(&["fleet", "status", "--nats", "nats://127.0.0.1:1"]);
    assert_code(&output, 1);
    assert!(text(&output.stderr).contains("cannot reach the NATS server at nats://127.0.0.1:1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_lists_a_running_fleet_run_and_streams_its_events_live() {
    use std::io::BufRead;
    let Some(mut fleet) = Fleet::new() else { return };
    let spec = fleet.answers(
        "answers.json",
        &json!([select(), script("first.sh", &[]), script("second.sh", &["2"]), answer("Done.")]),
    );
    fleet.start_worker("w1", &[]);
    let mirror = fleet.root.join("mirror");
    let mut serve = fleet
        .command(&["serve", "--nats", &fleet.nats.url.clone(), "--runs-dir"])
        .arg(&mirror)
        .args(["--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(fleet.root.join("serve.log")).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(serve.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let Some(url) = line.trim().strip_prefix("listening on ") else {
        let log = std::fs::read_to_string(fleet.root.join("serve.log")).unwrap_or_default();
        panic!("serve did not start: {line:?}\n{log}");
    };
    let url = url.trim_end_matches('/').to_owned();
    let port = url.rsplit(':').next().unwrap().to_owned();
    let base = format!("http://127.0.0.1:{port}");
    fleet.workers.push(serve);
    let output = fleet.run(&["submit", "--model", &spec, "Run both, slowly"]);
    assert_code(&output, 0);
    let client = reqwest::Client::new();
    // The run shows in the list while a worker runs it.
    let started = Instant::now();
    let run = loop {
        let runs: Value =
            client.get(format!("{base}/api/runs")).send().await.unwrap().json().await.unwrap();
        let running = runs["runs"]
            .as_array()
            .or_else(|| runs.as_array())
            .and_then(|runs| runs.first().cloned());
        if let Some(run) = running {
            break run;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the run never showed: {runs}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(run["status"], "running", "{run}");
    let run_id = run["run_id"].as_str().or_else(|| run["id"].as_str()).unwrap().to_owned();
    // Its events stream live, to the end.
    let mut response = client.get(format!("{base}/api/runs/{run_id}/events")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut seen = String::new();
    while !seen.contains("\"run_finished\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(60), response.chunk())
            .await
            .expect("no event before the deadline")
            .unwrap()
            .expect("the stream ended before run_finished");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    for kind in ["run_started", "action_executed", "observation_recorded"] {
        assert!(seen.contains(&format!("\"{kind}\"")), "{kind} missing from the stream");
    }
}

#[test]
fn a_server_killed_and_restarted_mid_queue_loses_nothing_and_runs_nothing_twice() {
    let Some(mut fleet) = Fleet::new() else { return };
    ten_tasks_through(&mut fleet, |fleet| fleet.nats.restart(Duration::from_secs(1)));
}

/// Ten tasks (select, `first.sh`, `second.sh 0.2`, answer) on two workers with a 5 s ack wait;
/// `disrupt` strikes once two are done. Then every task ends once: completed, one
/// `run_finished`, seq without a gap, `first.sh`'s line once (`second.sh` may have been redone
/// by a resume, which the record shows as one execution), and the record replays.
fn ten_tasks_through(fleet: &mut Fleet, disrupt: impl FnOnce(&mut Fleet)) {
    let spec = fleet.answers(
        "answers.json",
        &json!([select(), script("first.sh", &[]), script("second.sh", &["0.2"]), answer("Ok.")]),
    );
    let lines: Vec<String> = (0..10)
        .map(|index| json!({"task": format!("Task {index}"), "model": spec}).to_string())
        .collect();
    std::fs::write(fleet.root.join("tasks.jsonl"), lines.join("\n")).unwrap();
    let output = fleet.run(&["submit", "--file", fleet.root.join("tasks.jsonl").to_str().unwrap()]);
    assert_code(&output, 0);
    let ids: Vec<String> = text(&output.stdout).lines().map(str::to_owned).collect();
    fleet.start_worker("w1", &["--ack-wait", "5"]);
    fleet.start_worker("w2", &["--ack-wait", "5"]);
    fleet.wait_for("two runs done", |status| outcome_count(status, "completed") >= 2);
    disrupt(fleet);
    let status =
        fleet.wait_for("every run done", |status| outcome_count(status, "completed") == 10);
    assert_eq!(status["dead"], json!([]));
    for id in &ids {
        let (run_dir, workspace) = fleet.fetch(id);
        let events = events(&run_dir);
        assert_eq!(
            events.iter().filter(|event| event["type"] == "run_finished").count(),
            1,
            "{id}: one run_finished"
        );
        let seqs: Vec<u64> = events.iter().map(|event| event["seq"].as_u64().unwrap()).collect();
        assert!(seqs.windows(2).all(|pair| pair[1] == pair[0] + 1), "{id}: {seqs:?}");
        let side = std::fs::read_to_string(workspace.join("side.log")).unwrap();
        assert_eq!(side.matches("first").count(), 1, "{id}: {side}");
        let check = fleet.run(&["replay", "--check", run_dir.to_str().unwrap()]);
        assert_code(&check, 0);
    }
}

/// Three JetStream servers routed into one cluster on loopback, killed on drop.
struct Cluster {
    nodes: Vec<Child>,
    url: String,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
            let _ = node.wait();
        }
    }
}

impl Cluster {
    /// The README's 3-node configuration, on free loopback ports with stores under `root`.
    fn start(root: &Path) -> Cluster {
        let ports: Vec<u16> = (0..6).map(|_| fresh_port()).collect();
        let (clients, routes) = ports.split_at(3);
        let route_list: Vec<String> =
            routes.iter().map(|port| format!("nats-route://127.0.0.1:{port}")).collect();
        let mut nodes = Vec::new();
        for index in 0..3 {
            let config = root.join(format!("n{index}.conf"));
            std::fs::write(
                &config,
                format!(
                    "server_name: n{index}\nlisten: 127.0.0.1:{}\njetstream {{ store_dir: \"{}\" \
                     }}\ncluster {{\n  name: skills\n  listen: 127.0.0.1:{}\n  routes: [ {} ]\n}}\n",
                    clients[index],
                    root.join(format!("n{index}")).display(),
                    routes[index],
                    route_list.join(", ")
                ),
            )
            .unwrap();
            let log = std::fs::File::create(root.join(format!("n{index}.log"))).unwrap();
            nodes.push(
                Command::new(nats_server().unwrap())
                    .arg("-c")
                    .arg(&config)
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .unwrap(),
            );
        }
        let url = clients
            .iter()
            .map(|port| format!("nats://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",");
        Cluster { nodes, url }
    }
}

#[test]
fn a_three_node_cluster_keeps_the_fleet_through_the_loss_of_a_node() {
    let Some(mut fleet) = Fleet::new() else { return };
    let mut cluster = Cluster::start(&fleet.root);
    fleet.nats_url = cluster.url.clone();
    // The cluster elects its JetStream leader in a moment; the fleet's streams and buckets are
    // made with three replicas by the first command that reaches it.
    let started = Instant::now();
    loop {
        let output = fleet.run(&["fleet", "status", "--replicas", "3"]);
        if output.status.code() == Some(0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no cluster: {}",
            text(&output.stderr)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // A node dies for good: the others hold every stream and bucket, and elect new leaders.
    ten_tasks_through(&mut fleet, |_| {
        cluster.nodes[0].kill().unwrap();
        cluster.nodes[0].wait().unwrap();
    });
}

#[test]
fn a_stopped_worker_finishes_its_run_and_a_second_signal_hands_it_back() {
    let Some(mut fleet) = Fleet::new() else { return };
    let nap = format!("2.{:06}", std::process::id() % 1_000_000);
    let spec = fleet.answers(
        "answers.json",
        &json!([select(), script("first.sh", &[]), script("second.sh", &[&nap]), answer("Ok.")]),
    );
    let marker = format!("sleep {nap}");
    let wait_for_nap = || {
        let started = Instant::now();
        while !processes_with(&marker) {
            assert!(started.elapsed() < Duration::from_secs(60), "second.sh never started");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // One SIGTERM: no new task is taken, the run in progress finishes, the worker leaves.
    let pid = fleet.start_worker("gentle", &[]);
    let output = fleet.run(&["submit", "--model", &spec, "Finish me"]);
    assert_code(&output, 0);
    wait_for_nap();
    assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let status = fleet.workers[0].wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", fleet.worker_log("gentle"));
    assert_eq!(outcome_count(&fleet.status(), "completed"), 1, "{}", fleet.worker_log("gentle"));
    assert!(fleet.worker_log("gentle").contains("finished: completed"));
    // Two signals: the run is handed back at once and another worker finishes it.
    let pid = fleet.start_worker("hasty", &[]);
    let output = fleet.run(&["submit", "--model", &spec, "Hand me back"]);
    assert_code(&output, 0);
    let task_id = text(&output.stdout).trim().to_owned();
    wait_for_nap();
    for _ in 0..2 {
        assert!(Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = fleet.workers[1].wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", fleet.worker_log("hasty"));
    assert!(fleet.worker_log("hasty").contains("handed back"), "{}", fleet.worker_log("hasty"));
    fleet.start_worker("heir", &[]);
    fleet.wait_for("the handed-back task", |status| outcome_count(status, "completed") == 2);
    let (run_dir, workspace) = fleet.fetch(&task_id);
    assert_eq!(std::fs::read_to_string(workspace.join("side.log")).unwrap(), "first\nsecond\n");
    let events = events(&run_dir);
    assert_eq!(events.iter().filter(|event| event["type"] == "run_finished").count(), 1);
}

#[test]
fn two_live_tasks_on_the_local_model_through_one_worker() {
    if !live::local_model_enabled() {
        return;
    }
    let Some(mut fleet) = Fleet::new() else { return };
    let (task, expected) = live::example_task();
    let workspace = live::example_workspace(&fleet.root);
    // The worker finds the running local model as `run` does: through this user's cache.
    let skills = live::repo().join("examples/skills");
    let log = std::fs::File::create(fleet.root.join("live.log")).unwrap();
    let worker = Command::new(env!("CARGO_BIN_EXE_skills-agent"))
        .args(["worker", "--name", "live", "--model", "local", "--skills"])
        .arg(&skills)
        .arg("--work-root")
        .arg(fleet.root.join("work"))
        .env("NATS_URL", &fleet.nats.url)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    fleet.workers.push(worker);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let output = fleet.run(&["submit", "--workspace", workspace.to_str().unwrap(), &task]);
        assert_code(&output, 0);
        ids.push(text(&output.stdout).trim().to_owned());
    }
    // A 1.5B model on two loaded cores may take minutes per run: the bound only stops a hang.
    let status = fleet.wait_within("two live runs", Duration::from_secs(1800), |status| {
        status["outcomes"]
            .as_object()
            .is_some_and(|outcomes| outcomes.values().filter_map(Value::as_u64).sum::<u64>() == 2)
    });
    let log = std::fs::read_to_string(fleet.root.join("live.log")).unwrap_or_default();
    assert_eq!(outcome_count(&status, "completed"), 2, "{status:#}\n{log}");
    let output = fleet.run(&["runs", "list", "--nats", &fleet.nats.url.clone(), "--json"]);
    assert_code(&output, 0);
    let runs: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{runs:#}");
    for run in runs.as_array().unwrap() {
        let answer = run["final_text"].as_str().unwrap().replace(',', "");
        assert!(answer.contains(&expected), "expected {expected} in: {answer}");
    }
    for id in &ids {
        let (run_dir, _) = fleet.fetch(id);
        let check = fleet.run(&["replay", "--check", run_dir.to_str().unwrap()]);
        assert_code(&check, 0);
    }
}
