//! Shared fixture of agent-core's integration tests: a small test runner (the test binaries
//! double as tools-runtime's sandbox helper, so scripts run through the real sandbox under
//! `cargo test -p skills-agent-core` as under `cargo test --workspace`), temp skill folders with real
//! scripts, an agent wired to a scripted `MockModel`, and readers for what a run leaves behind.

// Test helpers: a failed setup step should stop the test loudly, like in a #[test] body, and
// scripted answers read best written inline (`call("x", json!({…}))`).
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::needless_pass_by_value
)]

use std::future::Future;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

use model_adapter::{
    ChatRequest, ContentPart, Message, MockModel, MockReply, ModelProvider, ResponseFormat,
};
use serde_json::{Value, json};
use skills_agent_core::{
    Agent, AgentBuilder, AgentConfig, Event, EventKind, RunResult, read_events,
};
use skills_agent_registry::{RootKind, SkillRoot};
use tools_runtime::{ApprovalMode, RuntimeConfig, SandboxHelper};

/// One test: an async function returning `anyhow::Result<()>`.
pub type TestFn = fn() -> Pin<Box<dyn Future<Output = anyhow::Result<()>>>>;

/// The list of `(name, test)` for [`main`], from the names of async test functions.
#[macro_export]
macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        vec![$((
            stringify!($name),
            (|| Box::pin($name()) as std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>>>>)
                as $crate::common::TestFn,
        )),*]
    };
}

/// The variable that makes a test binary run one of its child modes (see [`child`]).
pub const CHILD_VAR: &str = "AGENT_CORE_TEST_CHILD";
/// The fixture folder a child process works in (see [`Fixture::reopen`]).
pub const BASE_VAR: &str = "AGENT_CORE_TEST_BASE";

/// The test binary's `main` without child modes.
pub fn main(tests: Vec<(&'static str, TestFn)>) -> ExitCode {
    main_with_children(tests, Vec::new())
}

/// The test binary's `main`: the sandbox helper when tools-runtime starts it as one, one of
/// `children` when [`CHILD_VAR`] names it (a test started this binary as a real child process),
/// else a minimal libtest look-alike (name filters, `--exact`, `--list`, `--skip`), each test on
/// its own current-thread runtime, one after the other.
pub fn main_with_children(
    tests: Vec<(&'static str, TestFn)>,
    children: Vec<(&'static str, TestFn)>,
) -> ExitCode {
    if let Some(code) = tools_runtime::run_sandbox_helper_if_requested() {
        return code;
    }
    if let Ok(wanted) = std::env::var(CHILD_VAR) {
        let Some((_, child)) = children.iter().find(|(name, _)| *name == wanted) else {
            eprintln!("no child mode `{wanted}` in this test binary");
            return ExitCode::FAILURE;
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        return match runtime.block_on(child()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("child `{wanted}` failed: {error:?}");
                ExitCode::FAILURE
            }
        };
    }
    let mut filters = Vec::new();
    let mut skips = Vec::new();
    let (mut exact, mut list) = (false, false);
    let mut arguments = std::env::args().skip(1);
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--exact" => exact = true,
            "--list" => list = true,
            "--skip" => skips.extend(arguments.next()),
            "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" => {
                arguments.next();
            }
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter.to_owned()),
        }
    }
    let matches = |name: &str, pattern: &String| {
        if exact { name == pattern } else { name.contains(pattern.as_str()) }
    };
    let total = tests.len();
    let selected: Vec<(&str, TestFn)> = tests
        .into_iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| matches(name, f)))
        .filter(|(name, _)| !skips.iter().any(|skip| name.contains(skip.as_str())))
        .collect();
    if list {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let started = std::time::Instant::now();
    println!("\nrunning {} tests", selected.len());
    let mut failures = Vec::new();
    for (name, test) in &selected {
        let outcome = std::panic::catch_unwind(|| {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(test())
        });
        match outcome {
            Ok(Ok(())) => println!("test {name} ... ok"),
            Ok(Err(error)) => {
                println!("test {name} ... FAILED");
                failures.push((*name, format!("{error:?}")));
            }
            Err(panic) => {
                println!("test {name} ... FAILED");
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                    .unwrap_or_else(|| "panicked".to_owned());
                failures.push((*name, message));
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:\n");
        for (name, message) in &failures {
            println!("---- {name} ----\n{message}\n");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; \
         finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failures.len(),
        failures.len(),
        total - selected.len(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// A scratch area: `skills/` (one skill root), `workspace/` (where scripts run) and `runs/`
/// (run directories, outside the workspace).
pub struct Fixture {
    /// Removes the folder when the fixture that made it is dropped (not in a child process).
    _owner: Option<tempfile::TempDir>,
    pub base: PathBuf,
    pub skills: PathBuf,
    pub workspace: PathBuf,
    pub runs: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let owner = tempfile::Builder::new().prefix("agent-core-test-").tempdir().unwrap();
        // Skill folders must be readable by whoever the sandbox runs scripts as.
        std::fs::set_permissions(owner.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut fixture = Fixture::reopen(owner.path());
        for directory in [&fixture.skills, &fixture.workspace, &fixture.runs] {
            std::fs::create_dir(directory).unwrap();
        }
        std::fs::set_permissions(&fixture.skills, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&fixture.workspace, std::fs::Permissions::from_mode(0o700))
            .unwrap();
        fixture._owner = Some(owner);
        fixture
    }

    /// The fixture a parent test made in `base`, seen from a child process (not removed when
    /// dropped).
    pub fn reopen(base: &Path) -> Fixture {
        Fixture {
            _owner: None,
            base: base.to_owned(),
            skills: base.join("skills"),
            workspace: base.join("workspace"),
            runs: base.join("runs"),
        }
    }

    /// The fixture of the parent test, in a child process started by [`child`].
    pub fn of_parent() -> Fixture {
        Fixture::reopen(Path::new(&std::env::var(BASE_VAR).unwrap()))
    }

    /// A command that runs this test binary as its child mode `mode` over this fixture.
    pub fn child(&self, mode: &str) -> std::process::Command {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .env(CHILD_VAR, mode)
            .env(BASE_VAR, &self.base)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        command
    }

    /// The only run directory under `runs/` (panics unless there is exactly one).
    pub fn only_run_dir(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&self.runs)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "run directories: {dirs:?}");
        dirs.pop().unwrap()
    }

    /// The text of `name` in the workspace (empty when it does not exist).
    pub fn workspace_text(&self, name: &str) -> String {
        std::fs::read_to_string(self.workspace.join(name)).unwrap_or_default()
    }

    /// Writes `skills/SKILL/RELATIVE` as a shell script (run through `sh`).
    pub fn script(&self, skill: &str, relative: &str, body: &str) {
        self.file(skill, relative, &format!("#!/bin/sh\n{body}\n"));
    }

    /// Writes `skills/NAME/SKILL.md` with `extra` front-matter lines and `body`.
    pub fn skill(&self, name: &str, description: &str, extra: &str, body: &str) -> PathBuf {
        let folder = self.skills.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"),
        )
        .unwrap();
        folder
    }

    /// Writes a file of skill `skill` (parents created).
    pub fn file(&self, skill: &str, relative: &str, content: &str) {
        let path = self.skills.join(skill).join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
    }

    /// The sandbox runtime: this test binary as the helper, no approval prompts.
    pub fn runtime(&self) -> RuntimeConfig {
        let mut config = RuntimeConfig::new(SandboxHelper::current_exe().unwrap());
        config.policy.approval_mode = ApprovalMode::Never;
        config
    }

    /// An agent over the fixture's skills, workspace, runs directory and sandbox.
    pub fn agent(&self, model: &Arc<MockModel>, config: AgentConfig) -> AgentBuilder {
        self.agent_with(model.clone(), config)
    }

    /// [`Fixture::agent`] with any model provider.
    pub fn agent_with(&self, model: Arc<dyn ModelProvider>, config: AgentConfig) -> AgentBuilder {
        Agent::builder()
            .model(model)
            .config(config)
            .skill_roots(vec![SkillRoot::new(RootKind::Project, &self.skills)])
            .workspace(&self.workspace)
            .runs_dir(&self.runs)
            .runtime(self.runtime())
    }

    /// Runs `task` with `builder`, checks the run directory's `events.jsonl` (see
    /// [`well_formed`]) and reads its events back.
    pub async fn run(&self, builder: AgentBuilder, task: &str) -> anyhow::Result<Ran> {
        let agent = builder.build()?;
        let result = agent.run(task).await?;
        let run_dir = result.run_dir.clone().ok_or_else(|| anyhow::anyhow!("no run directory"))?;
        let events = well_formed(&run_dir);
        assert_eq!(events.last().map(|event| event.kind), Some(EventKind::RunFinished));
        Ok(Ran { result, events, run_dir })
    }
}

/// Checks `events.jsonl` of `run_dir` line by line — one JSON object per line with exactly the
/// envelope `{ts, run_id, seq, turn, type, data}`, `ts` in RFC 3339 UTC with milliseconds,
/// `run_id` the directory's name, `seq` 1, 2, 3…, turns never going back, `run_started` first
/// and once — and returns its events.
pub fn well_formed(run_dir: &Path) -> Vec<Event> {
    let path = run_dir.join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "events.jsonl ends with a full line");
    let run_id = run_dir.file_name().unwrap().to_str().unwrap();
    let mut turn = 0;
    for (index, line) in text.lines().enumerate() {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("line {}: {error}: {line}", index + 1));
        let mut keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["data", "run_id", "seq", "ts", "turn", "type"], "line {}", index + 1);
        let ts = value["ts"].as_str().unwrap().as_bytes();
        let digits = |range: std::ops::Range<usize>| ts[range].iter().all(u8::is_ascii_digit);
        assert!(
            ts.len() == 24
                && digits(0..4)
                && ts[4] == b'-'
                && digits(5..7)
                && ts[7] == b'-'
                && digits(8..10)
                && ts[10] == b'T'
                && digits(11..13)
                && ts[13] == b':'
                && digits(14..16)
                && ts[16] == b':'
                && digits(17..19)
                && ts[19] == b'.'
                && digits(20..23)
                && ts[23] == b'Z',
            "line {}: ts {}",
            index + 1,
            value["ts"]
        );
        assert_eq!(value["run_id"], run_id, "line {}", index + 1);
        assert_eq!(value["seq"], index as u64 + 1, "line {}: seq", index + 1);
        let this_turn = value["turn"].as_u64().unwrap();
        assert!(this_turn >= turn, "line {}: turn {this_turn} after {turn}", index + 1);
        turn = this_turn;
        assert!(value["data"].is_object(), "line {}: data is an object", index + 1);
        assert_eq!(
            value["type"] == "run_started",
            index == 0,
            "line {}: run_started comes first and once",
            index + 1
        );
    }
    read_events(&path).unwrap()
}

/// Waits until `condition` holds, checking every 20 ms, for at most 60 s (a child process
/// reaching a point, never a fixed sleep standing in for an order of events).
pub async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Whether this process runs as root (a fresh file belongs to the effective uid).
pub fn is_root() -> bool {
    let probe = tempfile::tempfile().unwrap();
    probe.metadata().unwrap().uid() == 0
}

/// A finished run: its result, its recorded events and its directory.
pub struct Ran {
    pub result: RunResult,
    pub events: Vec<Event>,
    pub run_dir: PathBuf,
}

impl Ran {
    /// The record's lines as written, and the events (as `comparable` values, streamed text
    /// left out) that a re-run of any cut of it must reproduce.
    pub fn record(&self) -> anyhow::Result<(Vec<String>, Vec<Value>)> {
        let lines: Vec<String> = std::fs::read_to_string(self.run_dir.join("events.jsonl"))?
            .lines()
            .map(str::to_owned)
            .collect();
        let wanted: Vec<Value> = self
            .events
            .iter()
            .filter(|event| event.kind != EventKind::AssistantDelta)
            .map(skills_agent_core::comparable)
            .collect();
        Ok((lines, wanted))
    }

    /// The run directory as a run killed after its first `kept` lines left it, under
    /// `case/runs` (inputs copied): returns `(runs, workspace, run_dir)`, the workspace not
    /// yet created.
    pub fn cut(
        &self,
        lines: &[String],
        kept: usize,
        case: &Path,
    ) -> anyhow::Result<(PathBuf, PathBuf, PathBuf)> {
        let (runs, workspace) = (case.join("runs"), case.join("workspace"));
        let run_dir = runs.join(&self.result.run_id);
        copy_dir(&self.run_dir.join("inputs"), &run_dir.join("inputs"));
        let text: String = lines[..kept].iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(run_dir.join("events.jsonl"), text)?;
        Ok((runs, workspace, run_dir))
    }

    /// A resumed run is this run again: the same outcome, final text and counters, and
    /// `events` (its record after the resume) equal to `wanted` ([`Ran::record`]).
    pub fn assert_resumed(
        &self,
        result: &RunResult,
        events: &[Event],
        wanted: &[Value],
        case: &str,
    ) {
        assert_eq!(result.outcome, self.result.outcome, "{case}");
        assert_eq!(result.final_text, self.result.final_text, "{case}");
        assert_eq!(result.counters, self.result.counters, "{case}");
        let got: Vec<Value> = events
            .iter()
            .filter(|event| event.kind != EventKind::AssistantDelta)
            .map(skills_agent_core::comparable)
            .collect();
        assert_eq!(got, wanted, "{case}");
    }

    /// The event types in order.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.events.iter().map(|event| event.kind.as_str()).collect()
    }

    /// The `data` of every event of `kind`.
    pub fn data(&self, kind: EventKind) -> Vec<&Value> {
        self.events.iter().filter(|event| event.kind == kind).map(|event| &event.data).collect()
    }

    /// `(status, content)` of every observation.
    pub fn observations(&self) -> Vec<(String, String)> {
        self.data(EventKind::ObservationRecorded)
            .into_iter()
            .map(|data| (text(&data["status"]), text(&data["content"])))
            .collect()
    }

    /// The `run_finished` data.
    pub fn finished(&self) -> &Value {
        self.data(EventKind::RunFinished).last().copied().unwrap()
    }

    /// The `seq` of the first event of `kind` (panics when there is none).
    pub fn first_seq(&self, kind: EventKind) -> u64 {
        self.events.iter().find(|event| event.kind == kind).map(|event| event.seq).unwrap()
    }

    /// The statuses of the observations, in order.
    pub fn statuses(&self) -> Vec<String> {
        self.observations().into_iter().map(|(status, _)| status).collect()
    }

    /// `state.json`.
    pub fn state(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.run_dir.join("state.json")).unwrap()).unwrap()
    }

    /// `final.md`.
    pub fn final_md(&self) -> String {
        std::fs::read_to_string(self.run_dir.join("final.md")).unwrap()
    }
}

pub fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// `select_skills` of one skill.
pub fn select(name: &str) -> MockReply {
    call("select_skills", json!({"names": [name]}))
}

/// `final_answer`.
pub fn answer(content: &str) -> MockReply {
    call("final_answer", json!({"content": content}))
}

/// Skill `toolbox` (scripts `log.sh ARG` appends ARG to `log.txt` in the workspace, `fail.sh`
/// exits 3, `sleep.sh SECONDS`, `print.sh N WORD` prints N numbered lines) and skill `notes`
/// (a `reference.md`).
pub fn toolbox() -> Fixture {
    let fixture = Fixture::new();
    fixture.skill("toolbox", "Logs, fails, waits and prints for tests.", "", "Use the scripts.");
    fixture.script("toolbox", "scripts/log.sh", "echo \"$1\" >> log.txt\necho \"logged $1\"");
    fixture.script("toolbox", "scripts/fail.sh", "echo \"cannot handle $1\" >&2\nexit 3");
    fixture.script("toolbox", "scripts/sleep.sh", "sleep \"$1\"\necho slept");
    fixture.script(
        "toolbox",
        "scripts/print.sh",
        "i=1\nwhile [ $i -le \"$1\" ]; do echo \"line $i of $1: $2\"; i=$((i+1)); done",
    );
    fixture.skill("notes", "Reference notes about logging.", "", "Read reference.md.");
    fixture.file("notes", "reference.md", "# Notes\nLog one line per call.\n");
    fixture
}

/// `run_script` of `toolbox`'s `scripts/SCRIPT.sh` with `args`.
pub fn tool(script: &str, args: &[&str]) -> MockReply {
    run_script("toolbox", &format!("scripts/{script}.sh"), args)
}

/// A `run_script` call of `skill`'s `script` with `args`.
pub fn run_script(skill: &str, script: &str, args: &[&str]) -> MockReply {
    call("run_script", json!({"skill": skill, "script": script, "args": args}))
}

/// A native tool call answer.
pub fn call(name: &str, arguments: Value) -> MockReply {
    MockReply::tool_call(name, &arguments)
}

/// A structured JSON answer `{"action": {"type", "args"}}` plus `extra` top-level fields,
/// keys in sorted order (`args` before `type`), as a grammar built from the turn's schema has
/// the model write them.
pub fn document(kind: &str, args: Value, extra: Value) -> MockReply {
    let mut document = json!({"action": {"type": kind, "args": args}});
    if let (Value::Object(map), Value::Object(extra)) = (&mut document, extra) {
        map.extend(extra);
    }
    MockReply::text(&document.to_string())
}

/// The text of a message (text parts joined; tool results; assistant text and calls).
pub fn message_text(message: &Message) -> String {
    match message {
        Message::System { content } | Message::User { content } => content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Message::Tool { content, .. } => content.clone(),
        Message::Assistant { content, tool_calls, .. } => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|call| format!("{}({})", call.name, call.arguments))
                .collect();
            format!("{content}{}", calls.join(""))
        }
    }
}

/// The last message of a request: the turn's (or the phase's) note.
pub fn note(request: &ChatRequest) -> String {
    message_text(request.messages.last().unwrap())
}

/// The whole request as one text (to search for what the model was shown).
pub fn request_text(request: &ChatRequest) -> String {
    request.messages.iter().map(message_text).collect::<Vec<_>>().join("\n")
}

/// The tool names a request offered.
pub fn tool_names(request: &ChatRequest) -> Vec<String> {
    request.tools.iter().map(|tool| tool.name.clone()).collect()
}

/// The JSON schema a request carried (`Value::Null` for free text).
pub fn schema(request: &ChatRequest) -> Value {
    match &request.response_format {
        ResponseFormat::JsonSchema { schema, .. } => schema.clone(),
        ResponseFormat::Text => Value::Null,
    }
}

/// The action types a JSON-mode schema allows, in order.
pub fn schema_actions(schema: &Value) -> Vec<String> {
    let action = &schema["properties"]["action"];
    let variants = match action.get("anyOf").and_then(Value::as_array) {
        Some(variants) => variants.clone(),
        None => vec![action.clone()],
    };
    variants.iter().map(|variant| text(&variant["properties"]["type"]["const"])).collect()
}

/// The `args` schema of `kind` in a JSON-mode schema.
pub fn schema_args(schema: &Value, kind: &str) -> Value {
    let action = &schema["properties"]["action"];
    let variants = match action.get("anyOf").and_then(Value::as_array) {
        Some(variants) => variants.clone(),
        None => vec![action.clone()],
    };
    variants
        .into_iter()
        .find(|variant| variant["properties"]["type"]["const"] == kind)
        .map(|variant| variant["properties"]["args"].clone())
        .unwrap_or(Value::Null)
}

/// Every file under `directory`, recursively.
pub fn files_under(directory: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![directory.to_owned()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

type Chooser = Box<dyn FnMut(&ChatRequest) -> MockReply + Send>;

/// A model that picks each answer from the request it is sent (for runs whose course depends
/// on what the runtime offers, such as when compaction happens), recording the requests.
pub struct FnModel {
    chooser: std::sync::Mutex<Chooser>,
    requests: std::sync::Mutex<Vec<ChatRequest>>,
}

impl std::fmt::Debug for FnModel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("FnModel").finish_non_exhaustive()
    }
}

impl FnModel {
    pub fn new(choose: impl FnMut(&ChatRequest) -> MockReply + Send + 'static) -> Arc<FnModel> {
        Arc::new(FnModel {
            chooser: std::sync::Mutex::new(Box::new(choose)),
            requests: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// The answer to `request` (not recorded: for a model that delegates to this one).
    pub fn choose(&self, request: &ChatRequest) -> MockReply {
        (self.chooser.lock().unwrap())(request)
    }

    /// A one-reply mock holding the answer to `request`.
    fn answer(&self, request: &ChatRequest) -> MockModel {
        self.requests.lock().unwrap().push(request.clone());
        MockModel::new(vec![self.choose(request)])
    }
}

#[async_trait::async_trait]
impl ModelProvider for FnModel {
    async fn chat(&self, request: &ChatRequest) -> model_adapter::Result<model_adapter::Response> {
        self.answer(request).chat(request).await
    }

    async fn stream(
        &self,
        request: &ChatRequest,
    ) -> model_adapter::Result<model_adapter::DeltaStream> {
        self.answer(request).stream(request).await
    }
}

/// The ids `recall_observation` may take in a tools-mode request (empty when not offered).
pub fn recallable(request: &ChatRequest) -> Vec<String> {
    request
        .tools
        .iter()
        .find(|tool| tool.name == "recall_observation")
        .and_then(|tool| tool.parameters["properties"]["id"]["enum"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(text)
        .collect()
}

/// How many observations a tools-mode request carries (each answers one tool call).
pub fn observations_in(request: &ChatRequest) -> usize {
    request.messages.iter().filter(|message| matches!(message, Message::Tool { .. })).count()
}

/// Answers approval requests from a script (`true` approves) and keeps what it was asked.
#[derive(Debug)]
pub struct ScriptedApprover {
    answers: std::sync::Mutex<Vec<bool>>,
    asked: std::sync::Mutex<Vec<tools_runtime::ApprovalRequest>>,
}

impl ScriptedApprover {
    pub fn new(answers: Vec<bool>) -> Arc<ScriptedApprover> {
        Arc::new(ScriptedApprover {
            answers: std::sync::Mutex::new(answers),
            asked: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The requests it answered.
    pub fn asked(&self) -> Vec<tools_runtime::ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl tools_runtime::Approver for ScriptedApprover {
    fn name(&self) -> String {
        "scripted".to_owned()
    }

    async fn approve(
        &self,
        request: &tools_runtime::ApprovalRequest,
    ) -> tools_runtime::ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        if self.answers.lock().unwrap().remove(0) {
            tools_runtime::ApprovalAnswer::Approved
        } else {
            tools_runtime::ApprovalAnswer::Denied { reason: Some("not today".to_owned()) }
        }
    }
}

/// A sink that cancels a run's token at the first event `when` picks (a cancellation at a
/// known point of the run, without timing).
#[derive(Debug)]
pub struct CancelAt {
    pub token: skills_agent_core::CancellationToken,
    pub when: fn(&Event) -> bool,
}

impl skills_agent_core::EventSink for CancelAt {
    fn record(&self, event: &Event) -> skills_agent_core::Result<()> {
        if (self.when)(event) {
            self.token.cancel();
        }
        Ok(())
    }
}

/// A user rule for the `sh` command line of a skill's script (scripts without the executable
/// bit run as `sh SCRIPT ARGS`).
pub fn script_rule(
    fixture: &Fixture,
    skill: &str,
    script: &str,
    decision: tools_runtime::Decision,
) -> tools_runtime::PrefixRule {
    let path = fixture.skills.join(skill).join(script).canonicalize().unwrap();
    tools_runtime::PrefixRule {
        prefix: vec!["sh".to_owned(), path.display().to_string()],
        decision,
    }
}

/// Copies the files under `from` to the same places under `to` (parents created).
pub fn copy_dir(from: &Path, to: &Path) {
    for file in files_under(from) {
        let target = to.join(file.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, target).unwrap();
    }
}

/// The purposes of the model calls, in order.
pub fn purposes(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|event| event.kind == EventKind::ModelRequest)
        .map(|event| text(&event.data["purpose"]))
        .collect()
}
