//! The MCP client against real servers: the npm reference servers (`server-everything`,
//! `server-filesystem`, installed by `.ci/mcp-servers.sh`, found through
//! `SKILLS_AGENT_MCP_SERVERS`) and a scripted node server that pages, hangs and misbehaves on
//! purpose (`tests/data/scripted-server.mjs`). Every stdio server runs through the real
//! sandbox: this binary doubles as tools-runtime's helper.

// A test binary without libtest (it doubles as the sandbox helper), so clippy's test
// allowances do not apply on their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::json;
use skills_agent_mcp::{
    BlobKind, CallError, EnvSpec, Launch, McpHub, ServerConfig, ServerState, ToolRule,
};
use tools_runtime::{ApprovalMode, LayerStatus, Runtime, RuntimeConfig, SandboxHelper};

type TestFn = fn() -> Pin<Box<dyn Future<Output = Result<()>>>>;

macro_rules! tests {
    ($($name:ident),* $(,)?) => {
        vec![$((stringify!($name), (|| Box::pin($name()) as Pin<Box<dyn Future<Output = Result<()>>>>) as TestFn)),*]
    };
}

fn main() -> ExitCode {
    if let Some(code) = tools_runtime::run_sandbox_helper_if_requested() {
        return code;
    }
    let tests = tests![
        config_example_in_readme_parses,
        everything_lists_and_calls_tools,
        scripted_server_pages_and_relists_on_list_changed,
        a_server_killed_mid_call_is_unavailable_and_the_hub_goes_on,
        servers_that_never_answer_time_out,
        a_server_answering_garbage_fails_to_start,
        filesystem_server_is_confined_to_the_workspace,
        http_server_with_bearer_token,
    ];
    let filters: Vec<String> =
        std::env::args().skip(1).filter(|argument| !argument.starts_with('-')).collect();
    if std::env::args().any(|argument| argument == "--list") {
        for (name, _) in &tests {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let selected: Vec<_> = tests
        .into_iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, test) in selected {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let started = Instant::now();
        let outcome = runtime.block_on(test());
        runtime.shutdown_timeout(Duration::from_secs(5));
        match outcome {
            Ok(()) => println!("test {name} ... ok ({:.1?})", started.elapsed()),
            Err(error) => {
                println!("test {name} ... FAILED ({:.1?})\n{error:?}\n", started.elapsed());
                failed.push(name);
            }
        }
    }
    if failed.is_empty() {
        println!("\ntest result: ok");
        ExitCode::SUCCESS
    } else {
        println!("\ntest result: FAILED: {failed:?}");
        ExitCode::FAILURE
    }
}

/// The npm install prefix of the reference servers, or `None` (with a loud message) when the
/// variable is unset outside CI. In CI a missing variable is a failure.
fn servers_prefix() -> Result<Option<PathBuf>> {
    match std::env::var_os("SKILLS_AGENT_MCP_SERVERS") {
        Some(prefix) => {
            let prefix = PathBuf::from(prefix);
            ensure!(
                prefix.join("node_modules/@modelcontextprotocol/server-everything").is_dir(),
                "SKILLS_AGENT_MCP_SERVERS={} holds no server-everything; run .ci/mcp-servers.sh",
                prefix.display()
            );
            Ok(Some(prefix))
        }
        None if std::env::var_os("CI").is_some() => bail!(
            "SKILLS_AGENT_MCP_SERVERS is not set: run `export SKILLS_AGENT_MCP_SERVERS=\"$(.ci/mcp-servers.sh)\"` first"
        ),
        None => {
            eprintln!(
                "\n!!!!! SKIPPED: SKILLS_AGENT_MCP_SERVERS is not set, so the real MCP reference servers \
                 are not tested. Run `export SKILLS_AGENT_MCP_SERVERS=\"$(.ci/mcp-servers.sh)\"` !!!!!\n"
            );
            Ok(None)
        }
    }
}

fn everything_script(prefix: &Path) -> String {
    prefix
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

fn filesystem_script(prefix: &Path) -> String {
    prefix
        .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
        .display()
        .to_string()
}

fn scripted_server() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/scripted-server.mjs")
        .display()
        .to_string()
}

fn node(args: Vec<String>) -> ServerConfig {
    ServerConfig { command: Some("node".to_owned()), args, ..ServerConfig::default() }
}

fn launch(workspace: &Path) -> Launch {
    let mut config = RuntimeConfig::new(SandboxHelper::current_exe().unwrap());
    config.policy.approval_mode = ApprovalMode::Never;
    Launch {
        runtime: Arc::new(Runtime::new(config)),
        workspace: workspace.to_path_buf(),
        base_environment: vec![("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())],
    }
}

fn state_of(hub: &McpHub, server: &str) -> ServerState {
    hub.servers()
        .into_iter()
        .find(|status| status.name == server)
        .map(|status| status.state)
        .unwrap()
}

/// Waits (up to 20 s) until `condition` holds.
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        ensure!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn config_example_in_readme_parses() -> Result<()> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))?;
    let start = readme.find("```toml\n").context("README has a toml example")? + 8;
    let end = start + readme[start..].find("```").context("closed")?;
    #[derive(serde::Deserialize)]
    struct File {
        mcp_servers: BTreeMap<String, ServerConfig>,
    }
    let file: File = toml::from_str(&readme[start..end])?;
    ensure!(!file.mcp_servers.is_empty());
    for (name, config) in &file.mcp_servers {
        config.validate(name)?;
    }
    Ok(())
}

async fn everything_lists_and_calls_tools() -> Result<()> {
    let Some(prefix) = servers_prefix()? else { return Ok(()) };
    let workspace = tempfile::tempdir()?;
    let mut everything = node(vec![everything_script(&prefix), "stdio".to_owned()]);
    everything.disabled_tools = vec!["get-env".to_owned()];
    everything.startup_timeout_ms = Some(30_000);
    let mut few = node(vec![everything_script(&prefix), "stdio".to_owned()]);
    few.enabled_tools =
        Some(vec!["echo".to_owned(), "get-sum".to_owned(), "not-offered".to_owned()]);
    few.approval = ToolRule::Forbid;
    few.tools = BTreeMap::from([("echo".to_owned(), ToolRule::Prompt)]);
    few.startup_timeout_ms = Some(30_000);
    // The package's own launcher (`node_modules/.bin`, a symlink to a `#!/usr/bin/env node`
    // script): its package and `node_modules` are found from the symlink.
    let launcher = ServerConfig {
        command: Some(prefix.join("node_modules/.bin/mcp-server-everything").display().to_string()),
        args: vec!["stdio".to_owned()],
        enabled_tools: Some(vec!["get-env".to_owned()]),
        env_vars: vec!["MCP_TEST_PASSED".to_owned(), "MCP_TEST_API_KEY".to_owned()],
        env: EnvSpec::Values(BTreeMap::from([("MCP_TEST_FIXED".to_owned(), "fixed".to_owned())])),
        startup_timeout_ms: Some(30_000),
        ..ServerConfig::default()
    };
    let servers = BTreeMap::from([
        ("launcher".to_owned(), launcher),
        ("few".to_owned(), few),
        ("everything".to_owned(), everything),
        (
            "broken".to_owned(),
            ServerConfig {
                command: Some("no-such-mcp-server-xyz".to_owned()),
                ..ServerConfig::default()
            },
        ),
        ("off".to_owned(), ServerConfig { enabled: false, ..node(vec![]) }),
        ("bad name!".to_owned(), node(vec![])),
    ]);
    let mut launch = launch(workspace.path());
    launch.base_environment.extend([
        ("MCP_TEST_PASSED".to_owned(), "passed".to_owned()),
        ("MCP_TEST_NOT_LISTED".to_owned(), "withheld".to_owned()),
        ("MCP_TEST_API_KEY".to_owned(), "listed-key".to_owned()),
        ("OTHER_API_TOKEN".to_owned(), "unlisted-token".to_owned()),
    ]);
    let hub = McpHub::start(&servers, launch).await;
    let statuses = hub.servers();
    let names: Vec<&str> = statuses.iter().map(|status| status.name.as_str()).collect();
    ensure!(names == ["bad name!", "broken", "everything", "few", "launcher", "off"], "{names:?}");
    // A server sees the names its table lists and fixed values, never the whole environment.
    let environment = hub.call("mcp__launcher__get-env", json!({}), None).await?;
    let environment: BTreeMap<String, String> = serde_json::from_str(&environment.text)?;
    ensure!(
        environment.get("MCP_TEST_PASSED").map(String::as_str) == Some("passed"),
        "{environment:?}"
    );
    ensure!(
        environment.get("MCP_TEST_FIXED").map(String::as_str) == Some("fixed"),
        "{environment:?}"
    );
    ensure!(!environment.contains_key("MCP_TEST_NOT_LISTED"), "{environment:?}");
    // A secret-looking name passes when the table lists it (the server's API key), and only
    // then.
    ensure!(
        environment.get("MCP_TEST_API_KEY").map(String::as_str) == Some("listed-key"),
        "{environment:?}"
    );
    ensure!(!environment.contains_key("OTHER_API_TOKEN"), "{environment:?}");
    ensure!(
        environment.get("HOME").is_some_and(|home| !home.starts_with("/root")),
        "{environment:?}"
    );
    let everything_status = &statuses[2];
    ensure!(everything_status.state == ServerState::Running, "{everything_status:?}");
    ensure!(everything_status.transport == "stdio");
    ensure!(everything_status.tools >= 10, "{everything_status:?}");
    match &statuses[1].state {
        ServerState::Failed { reason } => {
            ensure!(reason.contains("no-such-mcp-server-xyz"), "{reason}");
        }
        other => bail!("a missing command should fail to start, got {other:?}"),
    }
    ensure!(
        matches!(&statuses[0].state, ServerState::Failed { reason } if reason.contains("server name"))
    );
    ensure!(statuses[5].state == ServerState::Disabled);
    ensure!(
        statuses[4].state == ServerState::Running && statuses[4].tools == 1,
        "{:?}",
        statuses[4]
    );
    ensure!(
        statuses[3].state == ServerState::Running && statuses[3].tools == 2,
        "{:?}",
        statuses[3]
    );

    let tools = hub.tools();
    let few: Vec<(&str, ToolRule)> = tools
        .iter()
        .filter(|tool| tool.server == "few")
        .map(|tool| (tool.qualified_name.as_str(), tool.rule))
        .collect();
    ensure!(
        few == [("mcp__few__echo", ToolRule::Prompt), ("mcp__few__get-sum", ToolRule::Forbid)],
        "enabled_tools and rules: {few:?}"
    );
    let names: Vec<&str> = tools.iter().map(|tool| tool.qualified_name.as_str()).collect();
    for expected in
        ["mcp__everything__echo", "mcp__everything__get-sum", "mcp__everything__get-tiny-image"]
    {
        ensure!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    ensure!(!names.contains(&"mcp__everything__get-env"), "disabled_tools must filter: {names:?}");
    let sum = tools.iter().find(|tool| tool.tool == "get-sum").unwrap();
    ensure!(sum.input_schema["properties"]["a"]["type"] == "number", "{:?}", sum.input_schema);
    ensure!(sum.title.as_deref() == Some("Get Sum Tool"));

    let echo = hub.call("mcp__everything__echo", json!({"message": "hello"}), None).await?;
    ensure!(!echo.is_error && echo.text == "Echo: hello", "{echo:?}");
    let sum = hub.call("mcp__everything__get-sum", json!({"a": 2, "b": 3}), None).await?;
    ensure!(sum.text == "The sum of 2 and 3 is 5.", "{sum:?}");

    // A tool error is a result the model can read, not a failed call.
    let error = hub.call("mcp__everything__get-sum", json!({"a": "two", "b": 3}), None).await?;
    ensure!(error.is_error, "{error:?}");
    ensure!(!error.text.is_empty());

    let image = hub.call("mcp__everything__get-tiny-image", json!({}), None).await?;
    ensure!(image.blobs.len() == 1, "{image:?}");
    let blob = &image.blobs[0];
    ensure!(blob.kind == BlobKind::Image && blob.mime_type.as_deref() == Some("image/png"));
    ensure!(blob.data.starts_with(b"\x89PNG\r\n\x1a\n"), "decoded PNG bytes");
    ensure!(image.text.contains("The image above is the MCP logo."), "{}", image.text);

    let structured = hub
        .call("mcp__everything__get-structured-content", json!({"location": "Chicago"}), None)
        .await?;
    ensure!(
        structured.structured.as_ref().is_some_and(|value| value["temperature"].is_number()),
        "{structured:?}"
    );

    let resource = hub
        .call(
            "mcp__everything__get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
            None,
        )
        .await?;
    ensure!(
        resource.blobs.iter().any(|blob| blob.kind == BlobKind::Resource
            && blob.uri.is_some()
            && !blob.data.is_empty()),
        "{resource:?}"
    );

    let unknown = hub.call("mcp__everything__get-env", json!({}), None).await;
    ensure!(matches!(unknown, Err(CallError::UnknownTool(_))), "{unknown:?}");
    let bad_arguments = hub.call("mcp__everything__echo", json!([1]), None).await;
    ensure!(matches!(bad_arguments, Err(CallError::InvalidArguments { .. })), "{bad_arguments:?}");

    // server-everything registers more tools once initialised and says so with list_changed.
    wait_until("the late tool is listed", || {
        hub.tools()
            .iter()
            .any(|tool| tool.qualified_name == "mcp__everything__simulate-research-query")
    })
    .await?;
    hub.shutdown().await;
    Ok(())
}

async fn scripted_server_pages_and_relists_on_list_changed() -> Result<()> {
    let workspace = tempfile::tempdir()?;
    let servers = BTreeMap::from([
        ("scripted".to_owned(), node(vec![scripted_server(), "paged".to_owned()])),
        ("prompts-only".to_owned(), node(vec![scripted_server(), "no-tools".to_owned()])),
    ]);
    let hub = McpHub::start(&servers, launch(workspace.path())).await;
    ensure!(state_of(&hub, "scripted") == ServerState::Running, "{:?}", hub.servers());
    // A server without the tools capability runs and offers nothing (tools/list is not asked).
    ensure!(state_of(&hub, "prompts-only") == ServerState::Running, "{:?}", hub.servers());
    let names: Vec<String> = hub.tools().into_iter().map(|tool| tool.tool).collect();
    ensure!(
        names == ["echo", "hang", "add_tool", "bad_result", "tool_4"],
        "all three pages: {names:?}"
    );
    let added = hub.call("mcp__scripted__add_tool", json!({}), None).await?;
    ensure!(added.text == "added late_tool");
    wait_until("late_tool is listed after list_changed", || {
        hub.tools().iter().any(|tool| tool.qualified_name == "mcp__scripted__late_tool")
    })
    .await?;
    let late = hub.call("mcp__scripted__late_tool", json!({"text": "x"}), None).await?;
    ensure!(late.text == r#"{"text":"x"}"#, "{late:?}");
    let pid = hub.process_id("scripted").context("a stdio server has a process")?;
    ensure!(Path::new(&format!("/proc/{pid}")).exists());
    hub.shutdown().await;
    ensure!(!Path::new(&format!("/proc/{pid}")).exists(), "shutdown stops the server");
    Ok(())
}

async fn a_server_killed_mid_call_is_unavailable_and_the_hub_goes_on() -> Result<()> {
    let workspace = tempfile::tempdir()?;
    let servers = BTreeMap::from([
        ("victim".to_owned(), node(vec![scripted_server(), "paged".to_owned()])),
        ("other".to_owned(), node(vec![scripted_server(), "paged".to_owned()])),
    ]);
    let hub = Arc::new(McpHub::start(&servers, launch(workspace.path())).await);
    let pid = hub.process_id("victim").context("the victim has a process")?;
    let calling = {
        let hub = hub.clone();
        tokio::spawn(async move { hub.call("mcp__victim__hang", json!({}), None).await })
    };
    // The call is in flight (it never gets an answer); kill the server under it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status()?;
    ensure!(status.success(), "kill {pid}");
    let outcome = tokio::time::timeout(Duration::from_secs(20), calling).await??;
    match outcome {
        Err(CallError::ServerUnavailable { server, reason }) => {
            ensure!(server == "victim");
            ensure!(reason.contains("exited") && reason.contains("SIGKILL"), "{reason}");
        }
        other => bail!("expected ServerUnavailable, got {other:?}"),
    }
    wait_until("the victim is marked exited", || {
        matches!(state_of(&hub, "victim"), ServerState::Exited { .. })
    })
    .await?;
    let again = hub.call("mcp__victim__echo", json!({}), None).await;
    ensure!(matches!(again, Err(CallError::ServerUnavailable { .. })), "{again:?}");
    ensure!(
        hub.tools().iter().all(|tool| tool.server == "other"),
        "an exited server offers no tools"
    );
    let other = hub.call("mcp__other__echo", json!({"text": "still here"}), None).await?;
    ensure!(other.text.contains("still here"));
    Arc::into_inner(hub).context("no other owner")?.shutdown().await;
    Ok(())
}

async fn servers_that_never_answer_time_out() -> Result<()> {
    let workspace = tempfile::tempdir()?;
    let mut silent = node(vec![scripted_server(), "silent".to_owned()]);
    silent.startup_timeout_ms = Some(1500);
    let mut hanging = node(vec![scripted_server(), "paged".to_owned()]);
    hanging.tool_timeout_ms = Some(1000);
    // Not an MCP server at all: reads nothing, answers nothing.
    let sleeper = ServerConfig {
        command: Some("sleep".to_owned()),
        args: vec![SLEEP_SECONDS.to_owned()],
        startup_timeout_ms: Some(1000),
        ..ServerConfig::default()
    };
    let servers = BTreeMap::from([
        ("silent".to_owned(), silent),
        ("hanging".to_owned(), hanging),
        ("sleeper".to_owned(), sleeper),
    ]);
    let started = Instant::now();
    let hub = McpHub::start(&servers, launch(workspace.path())).await;
    ensure!(started.elapsed() < Duration::from_secs(15), "start waited {:?}", started.elapsed());
    match state_of(&hub, "silent") {
        ServerState::Failed { reason } => {
            ensure!(
                reason.contains("no answer to initialize") && reason.contains("1500 ms"),
                "{reason}"
            );
        }
        other => bail!("a silent server must fail to start, got {other:?}"),
    }
    match state_of(&hub, "sleeper") {
        ServerState::Failed { reason } => {
            ensure!(
                reason.contains("no answer to initialize") && reason.contains("1000 ms"),
                "{reason}"
            );
        }
        other => bail!("`sleep` must fail to start, got {other:?}"),
    }
    // A server that failed to start is stopped, not left behind.
    ensure!(sleep_processes()? == 0, "the sleeper still runs");
    let before = Instant::now();
    let outcome = hub.call("mcp__hanging__hang", json!({}), None).await;
    ensure!(
        matches!(&outcome, Err(CallError::Timeout { server, tool, after }) if server == "hanging" && tool == "hang" && *after == Duration::from_secs(1)),
        "{outcome:?}"
    );
    ensure!(before.elapsed() < Duration::from_secs(10));
    let message = outcome.unwrap_err().to_string();
    ensure!(message.contains("tool_timeout_ms"), "{message}");
    // The call's own timeout wins over the table's.
    let outcome = hub.call("mcp__hanging__hang", json!({}), Some(Duration::from_millis(300))).await;
    ensure!(
        matches!(&outcome, Err(CallError::Timeout { after, .. }) if after.as_millis() == 300),
        "{outcome:?}"
    );
    // A result that is not a CallToolResult: an error within the call's time, no panic.
    let outcome = hub.call("mcp__hanging__bad_result", json!({}), None).await;
    ensure!(
        matches!(&outcome, Err(error @ CallError::Protocol { .. }) if error.to_string().contains("tools/call `bad_result`")),
        "{outcome:?}"
    );
    // The server still works after cancelled calls.
    let echo = hub.call("mcp__hanging__echo", json!({"text": "after"}), None).await?;
    ensure!(echo.text.contains("after"));
    hub.shutdown().await;
    Ok(())
}

const SLEEP_SECONDS: &str = "987654";

/// How many `sleep 987654` processes run on the machine.
fn sleep_processes() -> Result<usize> {
    let wanted = format!("sleep\0{SLEEP_SECONDS}\0");
    let mut count = 0;
    for entry in std::fs::read_dir("/proc")? {
        let Ok(cmdline) = std::fs::read(entry?.path().join("cmdline")) else { continue };
        if cmdline.ends_with(wanted.as_bytes()) {
            count += 1;
        }
    }
    Ok(count)
}

async fn a_server_answering_garbage_fails_to_start() -> Result<()> {
    let workspace = tempfile::tempdir()?;
    let mut garbage = node(vec![scripted_server(), "garbage".to_owned()]);
    garbage.startup_timeout_ms = Some(1500);
    let mut exits = node(vec![
        "-e".to_owned(),
        "console.error('bad config, giving up'); process.exit(3)".to_owned(),
    ]);
    exits.startup_timeout_ms = Some(10_000);
    let outside = ServerConfig { cwd: Some("..".into()), ..node(vec![scripted_server()]) };
    let servers = BTreeMap::from([
        ("garbage".to_owned(), garbage),
        ("exits".to_owned(), exits),
        ("outside".to_owned(), outside),
    ]);
    let hub = McpHub::start(&servers, launch(workspace.path())).await;
    ensure!(matches!(state_of(&hub, "garbage"), ServerState::Failed { .. }), "{:?}", hub.servers());
    match state_of(&hub, "exits") {
        ServerState::Failed { reason } => {
            ensure!(reason.contains("bad config, giving up"), "{reason}")
        }
        other => bail!("{other:?}"),
    }
    match state_of(&hub, "outside") {
        ServerState::Failed { reason } => {
            ensure!(reason.contains("outside the workspace"), "{reason}")
        }
        other => bail!("a cwd outside the workspace must be refused, got {other:?}"),
    }
    ensure!(hub.tools().is_empty());
    hub.shutdown().await;
    Ok(())
}

async fn filesystem_server_is_confined_to_the_workspace() -> Result<()> {
    let Some(prefix) = servers_prefix()? else { return Ok(()) };
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("inside.txt"), "inside text")?;
    // Outside the workspace: beside it in /tmp, and under the home directory.
    let beside = tempfile::tempdir()?;
    let home = PathBuf::from(std::env::var_os("HOME").context("HOME")?);
    let in_home = tempfile::tempdir_in(&home)?;
    let secrets = [beside.path().join("secret.txt"), in_home.path().join("secret.txt")];
    for secret in &secrets {
        std::fs::write(secret, "TOP SECRET")?;
    }
    // The server is told it may serve the whole machine (`/`; the workspace is listed first so
    // that creating a file does not walk down from `/`): only the sandbox keeps it inside.
    let mut files = node(vec![
        filesystem_script(&prefix),
        workspace.path().display().to_string(),
        "/".to_owned(),
        // Naming a directory outside the workspace grants nothing either.
        beside.path().display().to_string(),
    ]);
    files.startup_timeout_ms = Some(30_000);
    let hub =
        McpHub::start(&BTreeMap::from([("files".to_owned(), files)]), launch(workspace.path()))
            .await;
    let status = hub.servers().remove(0);
    ensure!(status.state == ServerState::Running, "{status:?}");

    let sandbox = status.sandbox.as_ref().context("a stdio server has a sandbox report")?;
    ensure!(sandbox.layers.values().any(|status| *status == LayerStatus::Active), "{sandbox:?}");
    let listing = hub
        .call(
            "mcp__files__list_directory",
            json!({"path": workspace.path().display().to_string()}),
            None,
        )
        .await?;
    ensure!(listing.text.contains("inside.txt"), "{listing:?}");
    let inside = workspace.path().join("inside.txt").display().to_string();
    let read = hub.call("mcp__files__read_text_file", json!({"path": inside}), None).await?;
    ensure!(!read.is_error && read.text.contains("inside text"), "{read:?}");
    let written = workspace.path().join("written.txt");
    let write = hub
        .call(
            "mcp__files__write_file",
            json!({"path": written.display().to_string(), "content": "new"}),
            None,
        )
        .await?;
    ensure!(!write.is_error, "write inside: {write:?}");
    ensure!(std::fs::read_to_string(&written)? == "new");

    for secret in &secrets {
        let path = secret.display().to_string();
        let read = hub.call("mcp__files__read_text_file", json!({"path": path}), None).await;
        // The server allows `/`, so the refusal is the sandbox's (EACCES from Landlock).
        if let Ok(result) = &read {
            ensure!(
                result.is_error
                    && !result.text.contains("TOP SECRET")
                    && result.text.contains("EACCES"),
                "read {path}: {result:?}"
            );
        }
        let write = hub
            .call("mcp__files__write_file", json!({"path": path, "content": "overwritten"}), None)
            .await;
        if let Ok(result) = &write {
            ensure!(result.is_error, "write {path}: {result:?}");
        }
        ensure!(std::fs::read_to_string(secret)? == "TOP SECRET", "{path} must be untouched");
        let created = secret.with_file_name("created.txt");
        let _ = hub
            .call(
                "mcp__files__write_file",
                json!({"path": created.display().to_string(), "content": "x"}),
                None,
            )
            .await;
        ensure!(!created.exists(), "{} must not be created", created.display());
    }
    hub.shutdown().await;
    Ok(())
}

async fn http_server_with_bearer_token() -> Result<()> {
    let Some(prefix) = servers_prefix()? else { return Ok(()) };
    let workspace = tempfile::tempdir()?;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    // The HTTP server itself is test scaffolding: a plain child process on loopback.
    let mut server = tokio::process::Command::new("node")
        .args([everything_script(&prefix), "streamableHttp".to_owned()])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        ensure!(Instant::now() < deadline, "the HTTP server did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let remote = ServerConfig {
        url: Some(url.clone()),
        bearer_token_env_var: Some("MCP_TEST_TOKEN".to_owned()),
        ..ServerConfig::default()
    };
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.local_addr()?.port()
    };
    let unreachable = ServerConfig {
        url: Some(format!("http://127.0.0.1:{closed_port}/mcp")),
        startup_timeout_ms: Some(5_000),
        ..ServerConfig::default()
    };
    let missing = ServerConfig {
        bearer_token_env_var: Some("MCP_MISSING_TOKEN".to_owned()),
        ..remote.clone()
    };
    let mut launch = launch(workspace.path());
    launch.base_environment.push(("MCP_TEST_TOKEN".to_owned(), "secret-token".to_owned()));
    let hub = McpHub::start(
        &BTreeMap::from([
            ("remote".to_owned(), remote),
            ("missing".to_owned(), missing),
            ("unreachable".to_owned(), unreachable),
        ]),
        launch,
    )
    .await;
    let statuses = hub.servers();
    ensure!(
        statuses[1].name == "remote" && statuses[1].state == ServerState::Running,
        "{statuses:?}"
    );
    ensure!(statuses[1].transport == "http" && statuses[1].sandbox.is_none());
    ensure!(
        matches!(&statuses[0].state, ServerState::Failed { reason } if reason.contains("MCP_MISSING_TOKEN")),
        "{statuses:?}"
    );
    ensure!(
        matches!(&statuses[2].state, ServerState::Failed { reason } if reason.contains(&format!("127.0.0.1:{closed_port}"))),
        "{statuses:?}"
    );
    let sum = hub.call("mcp__remote__get-sum", json!({"a": 40, "b": 2}), None).await?;
    ensure!(sum.text == "The sum of 40 and 2 is 42.", "{sum:?}");
    hub.shutdown().await;
    server.kill().await?;
    Ok(())
}
