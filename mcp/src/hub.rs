//! `McpHub`: every configured server of a run — started, listed, called, watched, shut down.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion, Tool,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::config::{ServerConfig, ToolRule, qualified_name};
use crate::error::CallError;
use crate::launch::plan_stdio;
use crate::result::{CallResult, convert};

/// How stdio servers are started: the sandbox runtime, the workspace they may write, and the
/// environment `env`/`env_vars` names (and `bearer_token_env_var`) are read from.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The runtime whose confinement (and sandbox helper) starts stdio servers.
    pub runtime: Arc<tools_runtime::Runtime>,
    /// The workspace: the servers' default cwd and their only writable place.
    pub workspace: PathBuf,
    /// The caller's environment (usually `std::env::vars()`); a server sees only the names
    /// its table lists.
    pub base_environment: Vec<(String, String)>,
}

/// One server's state, as `skills-agent mcp list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// The table's name.
    pub name: String,
    /// `"stdio"` or `"http"`.
    pub transport: &'static str,
    /// Running, disabled, failed to start, or exited.
    pub state: ServerState,
    /// How many tools it offers (after the filters).
    pub tools: usize,
    /// The confinement layers of a stdio server's process (recorded at start).
    pub sandbox: Option<tools_runtime::SandboxReport>,
}

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Started, handshake and tool listing done.
    Running,
    /// `enabled = false` in its table.
    Disabled,
    /// It never started (bad table, refused by the sandbox, no answer in time, …).
    Failed {
        /// What failed, with the server's stderr tail when there is one.
        reason: String,
    },
    /// It stopped during the run (crashed, was killed, closed its connection).
    Exited {
        /// How it ended, with the server's stderr tail when there is one.
        reason: String,
    },
}

/// One tool on offer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The name the model calls: `mcp__SERVER__TOOL` (see [`qualified_name`]).
    pub qualified_name: String,
    /// The server's name.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// Its human-readable title, when it has one.
    pub title: Option<String>,
    /// Its description (empty when the server gave none).
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
    /// Allow, prompt or forbid (the table's `tools.NAME`, else `approval`).
    pub rule: ToolRule,
}

/// All configured servers of a run.
///
/// Starting never fails as a whole: a server that fails to start is recorded as failed (with
/// the reason) and the others go on. Methods take `&self`; share it behind an `Arc`.
#[derive(Debug)]
pub struct McpHub {
    servers: Vec<Server>,
}

/// What the client handler, the exit watcher and the hub share about one server.
#[derive(Debug)]
struct Shared {
    name: String,
    config: ServerConfig,
    state: watch::Sender<ServerState>,
    tools: Mutex<Vec<ToolInfo>>,
    /// Serialises re-listings so an older answer never overwrites a newer one.
    relisting: tokio::sync::Mutex<()>,
    /// A re-listing is queued: further `list_changed` notifications fold into it.
    relist_queued: AtomicBool,
}

#[derive(Debug)]
struct Server {
    shared: Arc<Shared>,
    transport: &'static str,
    sandbox: Option<tools_runtime::SandboxReport>,
    client: Option<RunningService<RoleClient, Handler>>,
    /// Dropping or sending stops the exit watcher, which then shuts the process down.
    stop: Option<oneshot::Sender<()>>,
    watcher: Option<JoinHandle<()>>,
    process_id: Option<u32>,
}

/// The client side of one connection: answers the server, re-lists on `list_changed`.
#[derive(Debug, Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("skills-agent", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // A burst of notifications costs one listing: the queued one has not started yet, so
        // it will see every change announced so far.
        if self.shared.relist_queued.swap(true, Ordering::SeqCst) {
            return;
        }
        let shared = self.shared.clone();
        // The handler runs on the connection's task: list from another one.
        tokio::spawn(async move {
            let _serial = shared.relisting.lock().await;
            shared.relist_queued.store(false, Ordering::SeqCst);
            match list_tools(&context.peer).await {
                Ok(tools) => shared.set_tools(tools),
                Err(ListError::Service(_)) if context.peer.is_transport_closed() => {
                    shared.mark_exited(CONNECTION_CLOSED.to_owned());
                }
                // A failed re-listing keeps the previous list: the tools still work.
                Err(_) => {}
            }
        });
    }
}

/// Pages of `tools/list` followed before giving up on a server that never stops paging.
const MAX_TOOL_PAGES: usize = 100;
/// How often a stdio server's process is checked for an exit.
const EXIT_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
enum ListError {
    Service(ServiceError),
    Paging(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Service(error) => write!(f, "tools/list failed: {error}"),
            ListError::Paging(problem) => write!(f, "tools/list failed: {problem}"),
        }
    }
}

/// Lists every page of tools, following `nextCursor`.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    for _ in 0..MAX_TOOL_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let page = peer.list_tools(Some(params)).await.map_err(ListError::Service)?;
        tools.extend(page.tools);
        match page.next_cursor {
            None => return Ok(tools),
            Some(next) => {
                if !seen.insert(next.clone()) {
                    return Err(ListError::Paging(format!("the server repeated cursor `{next}`")));
                }
                cursor = Some(next);
            }
        }
    }
    Err(ListError::Paging(format!("more than {MAX_TOOL_PAGES} pages of tools")))
}

/// The reason of a server whose connection closed before its exit was seen.
const CONNECTION_CLOSED: &str = "the server closed its connection";

impl Shared {
    fn set_tools(&self, tools: Vec<Tool>) {
        let mut infos: Vec<ToolInfo> = Vec::new();
        let mut names = HashSet::new();
        for tool in tools {
            let name = tool.name.to_string();
            if !self.config.offers(&name) {
                continue;
            }
            let qualified = qualified_name(&self.name, &name);
            // Two server names that sanitise alike: the first one wins.
            if !names.insert(qualified.clone()) {
                continue;
            }
            infos.push(ToolInfo {
                qualified_name: qualified,
                server: self.name.clone(),
                rule: self.config.rule_for(&name),
                tool: name,
                title: tool
                    .title
                    .clone()
                    .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone())),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            });
        }
        if let Ok(mut slot) = self.tools.lock() {
            *slot = infos;
        }
    }

    fn tools(&self) -> Vec<ToolInfo> {
        self.tools.lock().map(|tools| tools.clone()).unwrap_or_default()
    }

    fn state(&self) -> ServerState {
        self.state.borrow().clone()
    }

    /// Marks a running server as exited (a failed start stays failed).
    fn mark_exited(&self, reason: String) {
        self.state.send_if_modified(|state| match state {
            ServerState::Running => {
                *state = ServerState::Exited { reason };
                true
            }
            ServerState::Exited { .. } | ServerState::Disabled | ServerState::Failed { .. } => {
                false
            }
        });
    }
}

fn with_stderr(reason: String, stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        reason
    } else {
        let start = stderr.char_indices().rev().nth(1999).map_or(0, |(index, _)| index);
        format!("{reason}; its stderr ends with:\n{}", &stderr[start..])
    }
}

/// Package runners (`npx -y PKG`, `uvx PKG`) download the server when it starts: inside the
/// sandbox there is no network (unless `network = true`) and `HOME` is private, so they cannot.
fn with_runner_hint(reason: String, config: &ServerConfig) -> String {
    const RUNNERS: [&str; 5] = ["npx", "uvx", "bunx", "pnpx", "yarn"];
    let program = config.command.as_deref().map(Path::new).and_then(Path::file_name);
    match program.and_then(|name| name.to_str()) {
        Some(runner) if RUNNERS.contains(&runner) && !config.network => format!(
            "{reason}\n`{runner}` fetches the server from the network when it starts, and this \
             server runs without network and with a private HOME: install it ahead (e.g. `npm \
             install --prefix DIR PACKAGE`) and set `command` to its entry point (`node \
             DIR/node_modules/PACKAGE/dist/index.js`), or set `network = true`"
        ),
        _ => reason,
    }
}

impl McpHub {
    /// Starts every enabled server at once (each within its `startup_timeout_ms`) and lists
    /// their tools. Never fails: see [`McpHub::servers`] for what started.
    pub async fn start(servers: &BTreeMap<String, ServerConfig>, launch: Launch) -> McpHub {
        let mut starting = tokio::task::JoinSet::new();
        for (index, (name, config)) in servers.iter().enumerate() {
            let (name, config, launch) = (name.clone(), config.clone(), launch.clone());
            starting.spawn(async move { (index, start_server(name, config, &launch).await) });
        }
        let mut started = Vec::new();
        while let Some(joined) = starting.join_next().await {
            // A start task only ends in a panic on a bug; that server is then left out.
            if let Ok(pair) = joined {
                started.push(pair);
            }
        }
        started.sort_by_key(|(index, _)| *index);
        McpHub { servers: started.into_iter().map(|(_, server)| server).collect() }
    }

    /// Every configured server, in name order, with its state now.
    pub fn servers(&self) -> Vec<ServerStatus> {
        self.servers
            .iter()
            .map(|server| {
                let state = server.shared.state();
                let tools = match state {
                    ServerState::Running => server.shared.tools().len(),
                    ServerState::Disabled
                    | ServerState::Failed { .. }
                    | ServerState::Exited { .. } => 0,
                };
                ServerStatus {
                    name: server.shared.name.clone(),
                    transport: server.transport,
                    state,
                    tools,
                    sandbox: server.sandbox.clone(),
                }
            })
            .collect()
    }

    /// The tools of the running servers, after `enabled_tools`/`disabled_tools`; re-read it
    /// each turn (a server may change its list or exit).
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.servers
            .iter()
            .filter(|server| server.shared.state() == ServerState::Running)
            .flat_map(|server| server.shared.tools())
            .collect()
    }

    /// Calls a tool by its qualified name, within `timeout` (else the server's
    /// `tool_timeout_ms`, else 60 s). `arguments` is a JSON object (or null for none).
    pub async fn call(
        &self,
        qualified_name: &str,
        arguments: serde_json::Value,
        timeout: Option<Duration>,
    ) -> Result<CallResult, CallError> {
        let Some((server, tool)) = self.servers.iter().find_map(|server| {
            server
                .shared
                .tools()
                .into_iter()
                .find(|tool| tool.qualified_name == qualified_name)
                .map(|tool| (server, tool))
        }) else {
            return Err(CallError::UnknownTool(qualified_name.to_owned()));
        };
        let shared = &server.shared;
        let unavailable =
            |reason: String| CallError::ServerUnavailable { server: shared.name.clone(), reason };
        match shared.state() {
            ServerState::Running => {}
            ServerState::Exited { reason } | ServerState::Failed { reason } => {
                return Err(unavailable(reason));
            }
            ServerState::Disabled => return Err(unavailable("it is disabled".to_owned())),
        }
        let Some(client) = &server.client else {
            return Err(unavailable("it has no connection".to_owned()));
        };
        let arguments = match arguments {
            serde_json::Value::Object(map) => Some(map),
            serde_json::Value::Null => None,
            other => {
                return Err(CallError::InvalidArguments {
                    tool: qualified_name.to_owned(),
                    reason: format!("arguments must be a JSON object, got `{other}`"),
                });
            }
        };
        let mut params = CallToolRequestParams::new(tool.tool.clone());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let after = timeout.unwrap_or_else(|| shared.config.tool_timeout());
        let answer = match tokio::time::timeout(after, client.call_tool(params)).await {
            Ok(answer) => answer,
            // Dropping the request sends `notifications/cancelled` to the server.
            Err(_) => {
                return Err(CallError::Timeout {
                    server: shared.name.clone(),
                    tool: tool.tool,
                    after,
                });
            }
        };
        match answer {
            Ok(result) => Ok(convert(result)),
            Err(ServiceError::McpError(error)) => {
                // A JSON-RPC error (unknown tool, invalid params): the model can act on it.
                Ok(CallResult {
                    is_error: true,
                    text: format!(
                        "the server answered with error {}: {}",
                        error.code.0, error.message
                    ),
                    structured: error.data,
                    blobs: Vec::new(),
                })
            }
            Err(error @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                let closed = matches!(error, ServiceError::TransportClosed)
                    || client.peer().is_transport_closed();
                if !closed {
                    // An HTTP request that failed on its way: the connection may recover.
                    return Err(unavailable(error.to_string()));
                }
                shared.mark_exited(CONNECTION_CLOSED.to_owned());
                if server.watcher.is_some() {
                    // The exit watcher replaces the reason with the exit status and stderr.
                    let mut state = shared.state.subscribe();
                    let exit_reported = state.wait_for(|state| {
                        !matches!(state, ServerState::Exited { reason } if reason == CONNECTION_CLOSED)
                    });
                    let _ = tokio::time::timeout(EXIT_POLL * 10, exit_reported).await;
                }
                Err(unavailable(match shared.state() {
                    ServerState::Exited { reason } | ServerState::Failed { reason } => reason,
                    ServerState::Running | ServerState::Disabled => error.to_string(),
                }))
            }
            Err(ServiceError::UnexpectedResponse) => Err(CallError::Protocol {
                server: shared.name.clone(),
                reason: format!(
                    "its answer to tools/call `{}` is not a tool result (MCP CallToolResult)",
                    tool.tool
                ),
            }),
            Err(error) => {
                Err(CallError::Protocol { server: shared.name.clone(), reason: error.to_string() })
            }
        }
    }

    /// The process id of stdio server `server` (the sandboxed process that speaks MCP), for
    /// diagnostics; `None` for HTTP servers and servers that did not start.
    pub fn process_id(&self, server: &str) -> Option<u32> {
        self.servers.iter().find(|s| s.shared.name == server).and_then(|s| s.process_id)
    }

    /// Closes every connection and stops every stdio server (process group and cgroup).
    pub async fn shutdown(self) {
        for mut server in self.servers {
            if let Some(client) = server.client.take() {
                let _ = client.cancel().await;
            }
            if let Some(stop) = server.stop.take() {
                let _ = stop.send(());
            }
            if let Some(watcher) = server.watcher.take() {
                let _ = watcher.await;
            }
        }
    }
}

/// Whether this build speaks TLS to https servers (one of the `tls-*` features).
const TLS: bool = cfg!(any(feature = "tls-aws-lc", feature = "tls-ring"));

/// Why an https `url` cannot be reached by a build without TLS (`tls` false), if it cannot.
fn tls_missing(url: &str, tls: bool) -> Option<String> {
    let https = url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
    (https && !tls).then(|| {
        format!(
            "{url} needs TLS, and this build of skills-agent-mcp has none: build it with the \
             `tls-aws-lc` (default) or `tls-ring` feature, or use an http:// URL"
        )
    })
}

/// With `tls-ring` alone, reqwest has no crypto provider of its own: ring becomes the process's
/// default unless the program installed one already (reqwest panics building a client with
/// none). model-adapter has the same function on purpose: the `cfg` reads this crate's own features,
/// and neither crate depends on the other (each can be picked alone).
fn install_crypto_provider() {
    #[cfg(all(feature = "tls-ring", not(feature = "tls-aws-lc")))]
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one between the check and here: either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Starts one server; every failure becomes its state.
async fn start_server(name: String, config: ServerConfig, launch: &Launch) -> Server {
    let transport = if config.url.is_some() { "http" } else { "stdio" };
    let (state, _) = watch::channel(ServerState::Running);
    let shared = Arc::new(Shared {
        name: name.clone(),
        config: config.clone(),
        state,
        tools: Mutex::new(Vec::new()),
        relisting: tokio::sync::Mutex::new(()),
        relist_queued: AtomicBool::new(false),
    });
    let mut server = Server {
        shared: shared.clone(),
        transport,
        sandbox: None,
        client: None,
        stop: None,
        watcher: None,
        process_id: None,
    };
    let fail = |server: Server, reason: String| {
        server.shared.state.send_replace(ServerState::Failed { reason });
        server
    };
    if !config.enabled {
        shared.state.send_replace(ServerState::Disabled);
        return server;
    }
    if let Err(error) = config.validate(&name) {
        return fail(server, error.to_string());
    }
    let handler = Handler { shared: shared.clone() };
    let startup = config.startup_timeout();
    if let Some(url) = &config.url {
        if let Some(reason) = tls_missing(url, TLS) {
            return fail(server, reason);
        }
        install_crypto_provider();
        let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
        if let Some(variable) = &config.bearer_token_env_var {
            let token = launch.base_environment.iter().find(|(name, _)| name == variable);
            match token {
                Some((_, token)) if !token.is_empty() => {
                    transport_config = transport_config.auth_header(token.clone());
                }
                _ => {
                    return fail(
                        server,
                        format!(
                            "bearer_token_env_var `{variable}` is not set (or empty) in the \
                             environment: export it or remove the key"
                        ),
                    );
                }
            }
        }
        let transport = StreamableHttpClientTransport::from_config(transport_config);
        match connect(handler, transport, startup, &shared).await {
            Ok(client) => server.client = Some(client),
            Err(reason) => return fail(server, format!("could not connect to {url}: {reason}")),
        }
        return server;
    }

    let plan = plan_stdio(&config, &launch.workspace, &launch.base_environment);
    let spawned = crate::process::spawn(
        &launch.runtime,
        &name,
        &plan,
        config.network,
        &launch.base_environment,
        &launch.workspace,
    )
    .await;
    let mut process = match spawned {
        Ok(process) => process,
        Err(reason) => return fail(server, reason),
    };
    server.sandbox = Some(process.report.clone());
    server.process_id = process.id();
    let (Some(stdin), Some(stdout)) = (process.take_stdin(), process.take_stdout()) else {
        process.shutdown().await;
        return fail(server, "the server's stdin/stdout could not be opened".to_owned());
    };
    match connect(handler, (stdout, stdin), startup, &shared).await {
        Ok(client) => server.client = Some(client),
        Err(reason) => {
            let status = process.try_exit().await;
            let stderr = process.stderr_tail();
            process.shutdown().await;
            let reason = match status {
                Some(status) => format!("{reason} (the process ended: {status})"),
                None => reason,
            };
            let reason = with_stderr(reason, &stderr);
            return fail(server, with_runner_hint(reason, &config));
        }
    }
    let (stop, mut stopped) = oneshot::channel::<()>();
    let watched = shared.clone();
    server.stop = Some(stop);
    server.watcher = Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stopped => {
                    process.shutdown().await;
                    return;
                }
                () = tokio::time::sleep(EXIT_POLL) => {
                    if let Some(status) = process.try_exit().await {
                        let reason = with_stderr(format!("the server process exited ({status})"), &process.stderr_tail());
                        watched.state.send_if_modified(|state| match state {
                            ServerState::Running | ServerState::Exited { .. } => {
                                *state = ServerState::Exited { reason };
                                true
                            }
                            ServerState::Disabled | ServerState::Failed { .. } => false,
                        });
                        process.shutdown().await;
                        return;
                    }
                }
            }
        }
    }));
    server
}

/// The handshake and the first listing, within `startup`.
async fn connect<T, E, A>(
    handler: Handler,
    transport: T,
    startup: Duration,
    shared: &Shared,
) -> Result<RunningService<RoleClient, Handler>, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let handshake = async {
        let client = handler
            .serve(transport)
            .await
            .map_err(|error| format!("initialize failed: {error}"))?;
        // A server without the tools capability (prompts or resources only) offers none.
        let offers_tools =
            client.peer().peer_info().is_none_or(|info| info.capabilities.tools.is_some());
        // A list_changed that arrives meanwhile re-lists after this listing, never before.
        let _serial = shared.relisting.lock().await;
        let tools = if offers_tools {
            list_tools(client.peer()).await.map_err(|error| error.to_string())?
        } else {
            Vec::new()
        };
        shared.set_tools(tools);
        Ok::<_, String>(client)
    };
    match tokio::time::timeout(startup, handshake).await {
        Ok(result) => result,
        Err(_) => Err(format!(
            "no answer to initialize and tools/list within {} ms (raise startup_timeout_ms if \
             the server is slow to start; check that it speaks MCP on stdout)",
            startup.as_millis()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_runners_without_network_get_a_hint() {
        let npx = ServerConfig { command: Some("npx".to_owned()), ..ServerConfig::default() };
        let hinted = with_runner_hint("no answer".to_owned(), &npx);
        assert!(hinted.starts_with("no answer\n`npx` fetches the server"), "{hinted}");
        assert!(hinted.contains("npm install --prefix"), "{hinted}");
        let networked = ServerConfig { network: true, ..npx.clone() };
        assert_eq!(with_runner_hint("no answer".to_owned(), &networked), "no answer");
        let node = ServerConfig { command: Some("/usr/bin/node".to_owned()), ..npx };
        assert_eq!(with_runner_hint("no answer".to_owned(), &node), "no answer");
    }

    #[test]
    fn an_https_server_without_tls_says_which_features_bring_it() {
        let reason = tls_missing("HTTPS://mcp.example/mcp", false).unwrap();
        assert!(reason.contains("`tls-aws-lc`") && reason.contains("`tls-ring`"), "{reason}");
        assert_eq!(tls_missing("https://mcp.example/mcp", true), None);
        assert_eq!(tls_missing("http://127.0.0.1:8080/mcp", false), None);
    }

    #[test]
    fn the_hub_can_be_shared_between_tasks() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<McpHub>();
        shared::<Launch>();
    }
}
