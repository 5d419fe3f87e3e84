//! The page of `skills-agent serve` in a real browser: headless Chromium driven through
//! chromedriver (WebDriver, with `fantoccini`) opens the page over a runs directory, sees the run
//! list and a finished run's timeline (turns, actions, observations, the plan, the answer), then
//! starts a run from the page's form and watches its events arrive while it runs, and shows the
//! image an MCP tool returned in a run. It saves screenshots under `target/browser/`.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/browser.sh` installs them): without
//! them the test fails when `CI` is set and is skipped, loudly, otherwise. Every wait is for a
//! condition on the page, with one deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use futures_util::FutureExt;
use serde_json::{Value, json};

/// How long any wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// How often a condition on the page is looked at again.
const POLL: Duration = Duration::from_millis(100);

/// The finished run's task and answer.
const TASK: &str = "What is the total of the amount column in sales.csv?";
const ANSWER: &str = "The total of the amount column is 1705.47 (20 sales).";

/// The live run's answer.
const LIVE_ANSWER: &str = "The gate opened after the go file appeared.";

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `name` in one of PATH's folders.
fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|folder| folder.join(name)).find(|file| file.is_file())
}

/// The folder screenshots go to: `$CARGO_TARGET_DIR/browser` or `target/browser` of the
/// workspace.
fn screenshot_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => workspace.join(dir),
        None => workspace.join("target"),
    };
    let dir = target.join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A workspace with the example task (`sales.csv`), the example `csv-summary` skill, a `gate`
/// skill whose script waits until the workspace holds a file `go`, and a private home.
struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (workspace, home) = (root.join("workspace"), root.join("home"));
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::copy(examples.join("task/sales.csv"), workspace.join("sales.csv")).unwrap();
        let skills = workspace.join(".agents/skills");
        copy_dir(&examples.join("skills/csv-summary"), &skills.join("csv-summary"));
        let gate = skills.join("gate");
        std::fs::create_dir_all(gate.join("scripts")).unwrap();
        std::fs::write(
            gate.join("SKILL.md"),
            "---\nname: gate\ndescription: Waits until the workspace holds a file named go. Use \
             to wait for a go-ahead.\n---\nRun `scripts/wait.sh`; it prints `gate open`.\n",
        )
        .unwrap();
        // The script's own wait is the run being slow, not the test waiting.
        let script = gate.join("scripts/wait.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\ni=0\nwhile [ ! -e go ] && [ $i -lt 500 ]; do sleep 0.1; i=$((i+1)); done\n\
             echo 'gate open'\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fixture { _dir: dir, workspace, home }
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

    fn answers(&self, name: &str, answers: &Value) -> String {
        std::fs::write(self.workspace.join(name), answers.to_string()).unwrap();
        format!("mock:{name}")
    }

    /// A finished `plan-execute-think` run over the example task: three planning rounds (select
    /// the skill, summarise the file, then the column), a think after each that ran a script,
    /// with the model's reasoning on most calls.
    fn finished_run(&self) {
        let plan = |thinking: &str, reasoning: &str, steps: Value| {
            json!({"thinking": thinking, "tool_calls": [{"name": "plan_tool_call",
                "arguments": {"reasoning": reasoning, "steps": steps, "complexity": "medium"}}]})
        };
        let think = |thinking: &str, summary: &str, done: bool, next: &str| {
            json!({"thinking": thinking, "tool_calls": [{"name": "think", "arguments": {
                "internal_analysis": thinking, "user_summary": summary, "task_completed": done,
                "next_steps_preview": next}}]})
        };
        let script = |args: &[&str]| {
            json!({"tool": "run_script", "args":
                {"skill": "csv-summary", "script": "scripts/csv_summary.py", "args": args}})
        };
        let spec = self.answers(
            "finished.json",
            &json!([
                plan(
                    "The task asks for a column total in a CSV file; csv-summary does that.",
                    "Load the csv-summary skill",
                    json!([{"tool": "select_skills", "args": {"names": ["csv-summary"]}}])
                ),
                plan(
                    "First look at the whole file to find the column's exact name.",
                    "Summarise sales.csv",
                    json!([script(&["sales.csv"])])
                ),
                think(
                    "The file has 20 rows and a numeric amount column.",
                    "sales.csv has 20 rows; amount is numeric",
                    false,
                    "sum the amount column"
                ),
                plan("", "Sum the amount column", json!([script(&["sales.csv", "amount"])])),
                think("amount sum: 1705.47 answers the task.", ANSWER, true, ""),
            ]),
        );
        let output = self
            .command(&["run", "--strategy", "plan-execute-think", "--model", &spec, TASK])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the finished run failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `skills-agent serve --allow-start` on an ephemeral loopback port, and its URL.
    fn serve(&self) -> (Process, String) {
        let mut child = self
            .command(&["serve", "--allow-start", "--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let url = line.trim().strip_prefix("listening on ").expect("serve did not start");
        (Process(child), url.to_owned())
    }
}

/// chromedriver on an ephemeral loopback port, and its URL once it answers.
fn start_chromedriver(chromedriver: &Path) -> (Process, String) {
    let mut child = Command::new(chromedriver)
        .arg("--port=0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut port = None;
    // "ChromeDriver was started successfully on port N." comes once it listens.
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.split(" started successfully on port ").nth(1) {
            port = Some(rest.trim_end_matches('.').trim().to_owned());
            break;
        }
    }
    let port = port.expect("chromedriver did not say its port");
    (Process(child), format!("http://127.0.0.1:{port}"))
}

/// A headless Chromium session: no sandbox (CI runs as root), no GPU, nothing that phones home
/// (this machine's network is closed), a fresh profile.
async fn browser(webdriver: &str, chromium: &Path, profile: &Path) -> Client {
    let arguments = [
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--window-size=1400,1000".to_owned(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {"binary": chromium, "args": arguments},
    });
    let Value::Object(capabilities) = capabilities else { unreachable!() };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(webdriver)
        .await
        .expect("chromedriver did not start a Chromium session")
}

/// Waits until `expression` (JavaScript) is truthy on the page and returns its value.
async fn wait_for(client: &Client, what: &str, expression: &str) -> Value {
    let script = format!("return ({expression});");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let value = client.execute(&script, Vec::new()).await.unwrap();
        let truthy = match &value {
            Value::Null => false,
            Value::Bool(flag) => *flag,
            Value::Number(number) => number.as_f64() != Some(0.0),
            Value::String(text) => !text.is_empty(),
            Value::Array(_) | Value::Object(_) => true,
        };
        if truthy {
            return value;
        }
        if Instant::now() > deadline {
            let page = client.execute("return document.body.innerText;", Vec::new()).await;
            panic!("the page never showed {what} (last: {value}); it shows:\n{page:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The texts of the timeline's steps of one kind (summary and body).
fn steps_of_kind(kind: &str) -> String {
    format!(
        "[...document.querySelectorAll('#timeline .step')].filter((step) => \
         step.querySelector('.kind') && step.querySelector('.kind').textContent === '{kind}')\
         .map((step) => step.textContent)"
    )
}

async fn screenshot(client: &Client, name: &str) -> PathBuf {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is no PNG");
    let path = screenshot_dir().join(name);
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
    path
}

#[tokio::test]
async fn the_page_shows_a_finished_run_and_follows_a_live_one() {
    let (Some(chromium), Some(chromedriver)) = (in_path("chromium"), in_path("chromedriver"))
    else {
        let message = "chromium and chromedriver are not in PATH; .ci/browser.sh installs them \
                       (Debian's chromium and chromium-driver)";
        if std::env::var_os("CI").is_some() {
            panic!("{message}");
        }
        eprintln!("\n*** SKIPPED the browser test: {message} ***\n");
        return;
    };
    let fixture = Fixture::new();
    fixture.finished_run();
    let (_server, url) = fixture.serve();
    let (_driver, webdriver) = start_chromedriver(&chromedriver);
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&webdriver, &chromium, profile.path()).await;
    let checks = AssertUnwindSafe(check_the_page(&client, &fixture, &url)).catch_unwind().await;
    let _ = client.close().await;
    if let Err(panic) = checks {
        std::panic::resume_unwind(panic);
    }
}

/// The checks, apart so that the browser is closed whatever they find.
async fn check_the_page(client: &Client, fixture: &Fixture, url: &str) {
    client.goto(url).await.unwrap();
    // The run list shows the finished run.
    wait_for(client, "one run in the list", "document.querySelectorAll('#runs .run').length === 1")
        .await;
    let listed =
        wait_for(client, "the run's entry", "document.querySelector('#runs .run').innerText").await;
    let listed = listed.as_str().unwrap();
    for part in [TASK, "finished", "completed", "plan-execute-think", "mock", "3 turns"] {
        assert!(listed.contains(part), "the run list lacks {part}: {listed}");
    }
    let finished_id =
        wait_for(client, "the run's id", "document.querySelector('#runs .run').dataset.runId")
            .await;
    client.execute("document.querySelector('#runs .run').click();", Vec::new()).await.unwrap();

    // Its timeline: turns, actions, observations, the plan, budgets, reasoning and the answer.
    wait_for(
        client,
        "the answer",
        &format!("document.getElementById('answer').textContent === {}", json!(ANSWER)),
    )
    .await;
    wait_for(
        client,
        "three turns",
        "document.querySelectorAll('#timeline details.turn').length === 4",
    )
    .await;
    let actions = wait_for(
        client,
        "three actions",
        &format!("{0}.length === 3 && {0}", steps_of_kind("action")),
    )
    .await;
    let actions = actions.to_string();
    for part in [
        "select_skills csv-summary",
        "run_script csv-summary/scripts/csv_summary.py sales.csv amount",
    ] {
        assert!(actions.contains(part), "the actions lack {part}: {actions}");
    }
    let observations = wait_for(
        client,
        "three observations",
        &format!("{0}.length === 3 && {0}", steps_of_kind("observation")),
    )
    .await;
    assert!(observations.to_string().contains("amount sum: 1705.47"), "{observations}");
    wait_for(client, "the plan, done", "document.querySelector('#plan li') && document.querySelector('#plan').innerText.includes('done')").await;
    // The gauges follow the counters to the end: 3 tool calls, 2 script runs.
    wait_for(
        client,
        "the budget gauges at the end",
        "document.querySelectorAll('#budgets .gauge').length === 4 && \
         document.getElementById('budgets').innerText.includes('3 / 30') && \
         document.getElementById('budgets').innerText.includes('2 / 6')",
    )
    .await;
    wait_for(
        client,
        "the reasoning metrics",
        "document.getElementById('reasoning').innerText.includes('silent')",
    )
    .await;
    wait_for(
        client,
        "the finished state",
        "document.getElementById('run-meta').innerText.includes('finished')",
    )
    .await;
    screenshot(client, "serve-finished.png").await;

    // A run started from the page: its events arrive while it runs.
    let spec = fixture.answers(
        "live.json",
        &json!([
            {"thinking": "Wait for the go-ahead.", "tool_calls": [{"name": "select_skills", "arguments": {"names": ["gate"]}}]},
            {"tool_calls": [{"name": "run_script", "arguments": {"skill": "gate", "script": "scripts/wait.sh", "args": []}}]},
            {"tool_calls": [{"name": "final_answer", "arguments": {"content": LIVE_ANSWER}}]},
        ]),
    );
    wait_for(
        client,
        "the start form",
        "document.getElementById('start-form').classList.contains('shown')",
    )
    .await;
    client
        .execute(
            "const form = document.getElementById('start-form'); form.elements.task.value = arguments[0]; \
             form.elements.strategy.value = 'react'; form.elements.model.value = arguments[1]; \
             form.querySelector('button').click();",
            vec![json!("Wait for the gate, then answer"), json!(spec)],
        )
        .await
        .unwrap();
    wait_for(
        client,
        "two runs in the list",
        "document.querySelectorAll('#runs .run').length === 2",
    )
    .await;
    let run_id = wait_for(client, "the new run opened", &format!("((/run=([A-Za-z0-9_-]+)/.exec(location.hash) || [])[1] || '').replace({finished_id}, '')")).await;
    let run_id = run_id.as_str().unwrap().to_owned();
    wait_for(
        client,
        "the live run's replay caught up",
        "document.getElementById('run-meta').innerText.includes('live')",
    )
    .await;
    wait_for(
        client,
        "the live run's first action",
        &format!("{}.some((text) => text.includes('select_skills gate'))", steps_of_kind("action")),
    )
    .await;
    // The script waits for `go`: it shows as running, there is no answer yet.
    wait_for(
        client,
        "the script running",
        &format!(
            "{}.some((text) => text.includes('gate/scripts/wait.sh'))",
            steps_of_kind("running")
        ),
    )
    .await;
    let before = wait_for(
        client,
        "the waiting run",
        "document.getElementById('answer').textContent === 'no answer yet' && \
         document.querySelectorAll('#timeline .step').length",
    )
    .await;
    wait_for(
        client,
        "the running state",
        "document.getElementById('run-meta').innerText.includes('running')",
    )
    .await;
    screenshot(client, "serve-live.png").await;
    std::fs::write(fixture.workspace.join("go"), "").unwrap();
    wait_for(
        client,
        "the live answer",
        &format!("document.getElementById('answer').textContent === {}", json!(LIVE_ANSWER)),
    )
    .await;
    let after = wait_for(client, "more steps", &format!("document.querySelectorAll('#timeline .step').length > {before} && document.querySelectorAll('#timeline .step').length")).await;
    assert!(after.as_u64() > before.as_u64(), "{before} -> {after}");
    let ran = wait_for(
        client,
        "the script's action",
        &format!(
            "{0}.filter((text) => text.includes('gate/scripts/wait.sh')).length && {0}",
            steps_of_kind("action")
        ),
    )
    .await;
    assert!(ran.to_string().contains("ok"), "{ran}");
    wait_for(client, "the run finished", &format!("document.getElementById('run-meta').innerText.includes('finished') && location.hash.includes({})", json!(run_id))).await;
    wait_for(client, "no step left running", &format!("{}.length === 0", steps_of_kind("running")))
        .await;

    // Back to the finished run (the picture in the README): its timeline is built anew.
    client.execute(&format!("location.hash = 'run=' + {finished_id};"), Vec::new()).await.unwrap();
    wait_for(
        client,
        "the finished run again",
        &format!(
            "document.getElementById('answer').textContent === {} && \
             document.querySelectorAll('#timeline details.turn').length === 4 && \
             {}.length === 3 && document.querySelectorAll('#runs .run.selected').length === 1",
            json!(ANSWER),
            steps_of_kind("action")
        ),
    )
    .await;
    // The start form emptied, and the window taller, to show more of the timeline (the window's
    // frame takes some of it).
    client
        .execute("document.getElementById('start-form').elements.model.value = '';", Vec::new())
        .await
        .unwrap();
    client.set_window_size(1400, 1300).await.unwrap();
    wait_for(client, "the taller window", "window.innerHeight > 1000").await;
    let picture = screenshot(client, "serve.png").await;
    shows_a_stored_image(client, fixture, &std::fs::read(picture).unwrap()).await;
}

/// A run whose MCP tool returned an image (the record as agent-core writes it, by hand): the
/// page fetches the stored blob on request and shows it (the page's CSP allows `blob:` images).
async fn shows_a_stored_image(client: &Client, fixture: &Fixture, png: &[u8]) {
    use sha2::Digest;
    let run_id = "20260101_000000_b10b";
    let run_dir = fixture.workspace.join(".agent/runs").join(run_id);
    std::fs::create_dir_all(run_dir.join("observations")).unwrap();
    let sha256: String =
        sha2::Sha256::digest(png).iter().map(|byte| format!("{byte:02x}")).collect();
    std::fs::write(run_dir.join(format!("observations/{sha256}.png")), png).unwrap();
    let event = |seq: u64, turn: u32, kind: &str, data: Value| {
        json!({"seq": seq, "ts": "2026-01-01T00:00:00.000Z", "run_id": run_id, "turn": turn,
               "type": kind, "data": data})
        .to_string()
            + "\n"
    };
    let call = json!({"type": "call_tool", "args": {"name": "mcp__everything__get-tiny-image", "arguments": {}}});
    let record = [
        event(1, 0, "run_started", json!({"task": "Show me the tiny image", "config": {}, "catalog": [], "workspace": "/w"})),
        event(2, 1, "turn_started", json!({})),
        event(3, 1, "action_executed", json!({"action": call, "status": "ok", "duration_ms": 12,
            "result": {"tool": "mcp__everything__get-tiny-image", "server": "everything", "is_error": false, "structured": false,
                       "blobs": [{"sha256": sha256, "path": format!("observations/{sha256}.png"), "bytes": png.len(), "mime_type": "image/png", "uri": null}]}})),
        event(4, 1, "run_finished", json!({"outcome": "completed", "final_text": "Here it is."})),
    ]
    .concat();
    std::fs::write(run_dir.join("events.jsonl"), record).unwrap();
    client.execute(&format!("location.hash = 'run={run_id}';"), Vec::new()).await.unwrap();
    wait_for(
        client,
        "the call and the image's button",
        "[...document.querySelectorAll('#timeline .step')].some((step) => step.textContent.includes('call_tool mcp__everything__get-tiny-image')) && \
         [...document.querySelectorAll('#timeline button')].some((b) => b.textContent.startsWith('show image/png'))",
    )
    .await;
    client
        .execute(
            "const steps = [...document.querySelectorAll('#timeline details.step')];              steps.forEach((step) => { step.open = true; });              [...document.querySelectorAll('#timeline button')].find((b) => b.textContent.startsWith('show image/png')).click();",
            Vec::new(),
        )
        .await
        .unwrap();
    let width = wait_for(
        client,
        "the stored image, decoded",
        "document.querySelector('#timeline img.blob') && document.querySelector('#timeline img.blob').complete && document.querySelector('#timeline img.blob').naturalWidth",
    )
    .await;
    assert!(width.as_u64().unwrap() > 100, "{width}");
    screenshot(client, "serve-blob.png").await;
}
