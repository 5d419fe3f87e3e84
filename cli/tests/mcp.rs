//! `[mcp_servers]` from the outside, on the real npm reference servers (installed by
//! `.ci/mcp-servers.sh`, found through `SKILLS_AGENT_MCP_SERVERS`): `skills-agent mcp list`, and
//! a scripted (`mock:`) run that mixes a skill script and MCP tools, with a server that fails
//! to start, replayed exactly by `replay --check` without the servers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::needless_pass_by_value)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// The install prefix of the reference servers, `None` (loudly) when the variable is unset
/// outside CI; in CI a missing variable fails the test.
fn servers_prefix() -> Option<PathBuf> {
    match std::env::var_os("SKILLS_AGENT_MCP_SERVERS") {
        Some(prefix) => Some(PathBuf::from(prefix)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "SKILLS_AGENT_MCP_SERVERS is not set: export SKILLS_AGENT_MCP_SERVERS=\"$(.ci/mcp-servers.sh)\""
            );
            eprintln!(
                "\n!!!!! SKIPPED: SKILLS_AGENT_MCP_SERVERS is not set, so the CLI is not tested on \
                 the real MCP servers. Run `export SKILLS_AGENT_MCP_SERVERS=\"$(.ci/mcp-servers.sh)\"` !!!!!\n"
            );
            None
        }
    }
}

/// A workspace with skill `counter` (a script counting its arguments), a note file, and a
/// skills-agent.toml with the `everything` and `files` servers and one that cannot start.
struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
}

impl Fixture {
    fn new(prefix: &Path) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workspace = root.join("workspace");
        let home = root.join("home");
        let skill = workspace.join(".agents/skills/counter");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: counter\ndescription: Counts the arguments it is given.\n---\nRun \
             `scripts/count.sh WORD...`; it prints `count: N`.\n",
        )
        .unwrap();
        let script = skill.join("scripts/count.sh");
        std::fs::write(&script, "#!/bin/sh\necho \"count: $#\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(workspace.join("notes.txt"), "the meeting is at noon\n").unwrap();
        let package = |name: &str| {
            prefix.join("node_modules/@modelcontextprotocol").join(name).join("dist/index.js")
        };
        std::fs::write(
            workspace.join("skills-agent.toml"),
            format!(
                "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\
                 tool_timeout_ms = 20000\n\
                 [mcp_servers.files]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n\
                 tools = {{ write_file = \"forbid\" }}\n\
                 [mcp_servers.broken]\ncommand = \"no-such-mcp-server-xyz\"\n",
                package("server-everything").display().to_string(),
                package("server-filesystem").display().to_string(),
                workspace.display().to_string(),
            ),
        )
        .unwrap();
        Fixture { _dir: dir, workspace, home }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
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
            .stdin(Stdio::null());
        command
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

#[test]
fn mcp_list_shows_servers_their_state_and_tools() {
    let Some(prefix) = servers_prefix() else { return };
    let fixture = Fixture::new(&prefix);
    let output = fixture.run(&["mcp", "list", "--json"]);
    assert_eq!(output.status.code(), Some(1), "a server failed: {}", text(&output.stderr));
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let servers = listed["servers"].as_array().unwrap();
    let names: Vec<&str> = servers.iter().map(|server| server["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["broken", "everything", "files"]);
    assert!(
        servers[0]["state"]["failed"]["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-mcp-server-xyz"),
        "{listed}"
    );
    assert_eq!(servers[1]["state"], "running");
    assert!(servers[1]["sandbox"].is_object(), "the sandbox report is kept: {listed}");
    let tools: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__everything__get-sum"), "{tools:?}");
    assert!(tools.contains(&"mcp__files__read_text_file"), "{tools:?}");
    let output = fixture.run(&["mcp", "list"]);
    let shown = text(&output.stdout);
    assert!(shown.contains("broken (stdio) · failed: "), "{shown}");
    assert!(shown.contains("everything (stdio) · running · "), "{shown}");
    assert!(shown.contains("  mcp__files__write_file [forbid] — "), "{shown}");
}

#[test]
fn a_run_mixing_a_skill_script_and_mcp_tools_replays_exactly() {
    let Some(prefix) = servers_prefix() else { return };
    let fixture = Fixture::new(&prefix);
    let answers = json!([
        call("select_skills", json!({"names": ["counter"]})),
        call(
            "run_script",
            json!({"skill": "counter", "script": "scripts/count.sh", "args": ["a", "b"]})
        ),
        call(
            "describe_tools",
            json!({"names": ["mcp__everything__get-sum", "mcp__files__read_text_file"]})
        ),
        call("mcp__everything__get-sum", json!({"a": 2, "b": 3})),
        call("mcp__files__read_text_file", json!({"path": fixture.workspace.join("notes.txt")})),
        call(
            "call_tool",
            json!({"name": "mcp__files__write_file", "arguments": {"path": "x", "content": "y"}})
        ),
        call("final_answer", json!({"content": "2 words, 2 + 3 = 5, the meeting is at noon."})),
    ]);
    std::fs::write(fixture.workspace.join("answers.json"), answers.to_string()).unwrap();
    let output = fixture.run(&[
        "run",
        "--model",
        "mock:answers.json",
        "--json",
        "Count, add, read the notes",
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("✗ MCP server `broken` failed: "), "{stderr}");
    assert!(stderr.contains("the run goes on without its tools"), "{stderr}");
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((result["tool_calls"].as_u64(), result["script_runs"].as_u64()), (Some(6), Some(1)));
    let run_dir = PathBuf::from(result["run_dir"].as_str().unwrap());
    let events: Vec<Value> = std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let observations: Vec<(&str, &str)> = events
        .iter()
        .filter(|event| event["type"] == "observation_recorded")
        .map(|event| {
            (event["data"]["status"].as_str().unwrap(), event["data"]["content"].as_str().unwrap())
        })
        .collect();
    assert_eq!(observations.len(), 6, "{observations:?}");
    assert!(observations[1].1.contains("count: 2"), "{observations:?}");
    assert_eq!(observations[3], ("ok", "The sum of 2 and 3 is 5."), "{observations:?}");
    assert_eq!(observations[4].0, "ok", "{observations:?}");
    assert!(observations[4].1.contains("the meeting is at noon"), "{observations:?}");
    assert_eq!(observations[5].0, "denied", "{observations:?}");
    let servers = events.iter().find(|event| event["type"] == "tool_servers").unwrap();
    assert_eq!(servers["data"]["servers"].as_array().unwrap().len(), 3);
    // The record alone reproduces the run: no server, no script.
    let output = fixture.run(&["replay", "--check", "--json", run_dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}{}", text(&output.stdout), text(&output.stderr));
}

/// A live process as `/proc` shows it: pid, start time (so a reused pid is not mistaken for
/// it), parent, command line.
#[derive(Debug, Clone)]
struct Process {
    pid: u32,
    start: String,
    parent: u32,
    cmdline: String,
}

/// Every live (not zombie) process.
fn processes() -> Vec<Process> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() < 20 || fields[0] == "Z" || fields[0] == "X" {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push(Process {
            pid,
            start: fields[19].to_owned(),
            parent: fields[1].parse().unwrap_or(0),
            cmdline: String::from_utf8_lossy(&cmdline).replace('\0', " "),
        });
    }
    found
}

/// The live descendants of `root`.
fn descendants(root: u32) -> Vec<Process> {
    let all = processes();
    let mut found: Vec<Process> = Vec::new();
    let mut parents = vec![root];
    while let Some(parent) = parents.pop() {
        for process in all.iter().filter(|process| process.parent == parent) {
            parents.push(process.pid);
            found.push(process.clone());
        }
    }
    found
}

/// SIGKILL of the CLI while its MCP servers run and a script (with a child, and a grandchild in
/// a session of its own) sleeps: every one of those processes dies — the servers and the
/// script run in PID namespaces whose init dies with the sandbox helper, which dies with the
/// CLI. Checked in `/proc` by pid and start time.
#[test]
fn sigkill_of_the_cli_leaves_no_mcp_server_or_script_behind() {
    signalled_cli_leaves_nothing_behind("KILL");
}

/// The same with SIGTERM, which the CLI handles: the run ends `cancelled` (exit 3), and on its
/// way out the CLI stops the script and its MCP servers.
#[test]
fn sigterm_of_the_cli_leaves_no_mcp_server_or_script_behind() {
    signalled_cli_leaves_nothing_behind("TERM");
}

/// Sends `signal` (`KILL` or `TERM`) to a CLI whose MCP servers run and whose script sleeps,
/// and checks that none of its processes outlives it.
fn signalled_cli_leaves_nothing_behind(signal: &str) {
    let Some(prefix) = servers_prefix() else { return };
    let fixture = Fixture::new(&prefix);
    let nap = fixture.workspace.join(".agents/skills/counter/scripts/nap.sh");
    std::fs::write(&nap, "#!/bin/sh\nsetsid sleep \"$2\" &\nsleep \"$1\"\n").unwrap();
    std::fs::set_permissions(&nap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let seconds = format!("{}", 400_000 + std::process::id() % 100_000);
    let detached = format!("{}", 500_000 + std::process::id() % 100_000);
    let answers = json!([
        call("select_skills", json!({"names": ["counter"]})),
        call(
            "run_script",
            json!({"skill": "counter", "script": "scripts/nap.sh", "args": [seconds, detached]})
        ),
        call("final_answer", json!({"content": "Rested."})),
    ]);
    std::fs::write(fixture.workspace.join("answers.json"), answers.to_string()).unwrap();
    let mut cli = fixture
        .command(&["run", "--model", "mock:answers.json", "--json", "Take a nap"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let ready = |tree: &[Process]| {
        let has = |text: &str| tree.iter().any(|process| process.cmdline.contains(text));
        let servers = tree.iter().filter(|process| process.cmdline.contains("dist/index.js"));
        has(&format!("sleep {seconds}"))
            && has(&format!("sleep {detached}"))
            && servers.count() >= 2
    };
    let mut tree = descendants(cli.id());
    while !ready(&tree) {
        assert!(std::time::Instant::now() < deadline, "never all running: {tree:#?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
        tree = descendants(cli.id());
    }
    let sent = Command::new("kill").args([&format!("-{signal}"), &cli.id().to_string()]).status();
    assert!(sent.unwrap().success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = cli.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = cli.kill();
            panic!("the CLI did not end within 60 s of SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    if signal == "TERM" {
        assert_eq!(status.code(), Some(3), "a SIGTERMed run ends cancelled");
    }
    let alive = |tree: &[Process]| -> Vec<Process> {
        let now = processes();
        tree.iter()
            .filter(|old| {
                now.iter().any(|process| process.pid == old.pid && process.start == old.start)
            })
            .cloned()
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !alive(&tree).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left = alive(&tree);
    for process in &left {
        let _ = Command::new("kill").args(["-KILL", &process.pid.to_string()]).status();
    }
    assert!(left.is_empty(), "outlived the CLI (SIG{signal}): {left:#?}");
}
