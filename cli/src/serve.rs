//! `skills-agent serve`: an HTTP server over a runs directory, to watch runs live and replay
//! them in a browser.
//!
//! Everything comes from the run directories (`events.jsonl` is the source of truth), so the
//! server needs no access to the agents writing them: a run started by any process shows up.
//!
//! * `GET /` — the single page (`serve/index.html`, embedded in the binary).
//! * `GET /api/info` — `{allow_start, strategies}`, for the page.
//! * `GET /api/runs` — the runs, oldest first: `run_id`, `status` (`finished` when the record
//!   ends with `run_finished`, `running` when it does not and grew in the last five minutes,
//!   `interrupted` otherwise), `outcome`, `strategy`, `model`, `turns`, `task`, `started`,
//!   `updated`, `events`, `last_seq`.
//! * `GET /api/runs/{id}` — the same summary plus `state` (`state.json`), `result` (the last
//!   `run_finished` data) and `final_text` (`final.md`).
//! * `GET /api/runs/{id}/events` — Server-Sent Events: the recorded events in order (SSE `id`
//!   = `seq`, `data` = the event's JSON), one `caught_up` event (data: the last seq sent) when
//!   the record is replayed, then every complete line appended later. A torn last line is not
//!   an event until its newline arrives. `Last-Event-ID` (or `?after=SEQ`) resumes after that
//!   seq; `?follow=false` ends the stream after the replay instead.
//! * `GET /api/runs/{id}/observations/{sha256}` — a stored observation (`text/plain`).
//! * `GET /api/runs/{id}/blobs/{sha256}.{ext}` — an image or other binary content an external
//!   (MCP) tool returned, as `action_executed`'s `result.blobs` lists it; typed by extension,
//!   sandboxed, and a download (`Content-Disposition: attachment`) for the kinds a browser
//!   could run (SVG, PDF, unknown bytes).
//! * `POST /api/runs` `{task, strategy?, model?}` — only with `--allow-start`: starts
//!   `skills-agent run` (this binary) in the workspace, writing to the served runs directory,
//!   and answers `201 {run_id}` once the run's record exists (`202 {run_id: null}` when it
//!   takes longer than a minute, e.g. while the local model starts). The request must be
//!   `application/json`, which a cross-site form cannot send without the browser asking first.
//!
//! Run ids and observation references are checked lexically (`is_valid_run_id`,
//! `is_sha256_hex`) before any path is built, so no request reaches outside the runs directory.
//! The server listens on loopback by default and then, without a token, only answers requests
//! whose `Host` is a loopback name (no DNS rebinding). Any other address needs `--allow-remote`
//! and a bearer token (`--token` or `SKILLS_AGENT_SERVE_TOKEN`; honoured on loopback too), which
//! every `/api/` request must then carry (`Authorization: Bearer TOKEN`, or `?token=TOKEN` for
//! `EventSource`, which cannot set headers); the page takes it from `#token=TOKEN`.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::IntoFuture;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use clap::Args;
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use skills_agent_core::{
    Event, EventKind, Payload, is_sha256_hex, is_valid_run_id, read_complete_events,
};
use tokio::io::{AsyncBufReadExt, AsyncSeekExt};

use crate::launch::usage;

/// The page, embedded.
const INDEX_HTML: &str = include_str!("serve/index.html");

/// The variable a token may come from (safer than the command line, which `ps` shows).
const TOKEN_VARIABLE: &str = "SKILLS_AGENT_SERVE_TOKEN";

/// How often a followed `events.jsonl` is looked at for new lines.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A run whose record has not grown for this long is `interrupted`, not `running`.
const RUNNING_WINDOW: Duration = Duration::from_secs(300);

/// How long `POST /api/runs` waits for the new run's record before answering without its id.
const START_WAIT: Duration = Duration::from_secs(60);

/// Flags of `skills-agent serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The runs directory (default: .agent/runs under the workspace).
    #[arg(long)]
    runs_dir: Option<PathBuf>,
    /// The workspace (default: the current directory).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Where to listen (port 0 picks a free port; the URL is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8737")]
    addr: SocketAddr,
    /// Allow an address other than loopback (a token is then required).
    #[arg(long)]
    allow_remote: bool,
    /// The bearer token every API request must carry (default: $SKILLS_AGENT_SERVE_TOKEN;
    /// at least 16 characters of A-Z a-z 0-9 . _ ~ -).
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Allow `POST /api/runs` to start runs (`skills-agent run` in the workspace).
    #[arg(long)]
    allow_start: bool,
    /// Serve a fleet's runs (NATS JetStream), mirrored into the runs directory (default:
    /// a folder in the cache) as they are stored.
    #[command(flatten)]
    engine: crate::fleet::EngineArgs,
}

#[derive(Debug)]
struct Server {
    runs_dir: PathBuf,
    token: Option<String>,
    /// Bound to loopback without a token: refuse requests for other host names.
    check_host: bool,
    /// Set with `--allow-start`.
    start: Option<Starter>,
    /// Run summaries by run id, kept while `events.jsonl` keeps its length and time.
    summaries: std::sync::Mutex<HashMap<String, CachedSummary>>,
}

#[derive(Debug, Clone)]
struct CachedSummary {
    length: u64,
    modified: SystemTime,
    /// Whether the record ends with `run_finished`.
    finished: bool,
    /// The summary without its `status`, which depends on the time.
    summary: Value,
}

/// What `POST /api/runs` needs: this binary, the workspace, and a lock so that one start at a
/// time looks for its new run directory.
#[derive(Debug)]
struct Starter {
    executable: PathBuf,
    workspace: PathBuf,
    lock: tokio::sync::Mutex<()>,
}

type Shared = Arc<Server>;

/// Runs the server until Ctrl-C.
pub(crate) async fn serve(args: ServeArgs) -> Result<u8> {
    let workspace = match args.workspace {
        Some(path) => path,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let mirror = match &args.engine.nats {
        Some(_) => {
            if args.allow_start {
                return Err(usage(
                    "--allow-start starts local runs; with --nats, `skills-agent submit` queues them",
                ));
            }
            let config = args.engine.config()?;
            let fleet = args.engine.connect(config).await?;
            Some(fleet)
        }
        None => None,
    };
    let runs_dir = match (&mirror, args.runs_dir) {
        (_, Some(dir)) => dir,
        (Some(fleet), None) => skills_agent_models::local_model::cache_dir()
            .context("cannot find the cache directory for the fleet's mirror; pass --runs-dir")?
            .join("fleet")
            .join(&fleet.names().prefix)
            .join("runs"),
        (None, None) => workspace.join(".agent").join("runs"),
    };
    if let Some(fleet) = mirror {
        std::fs::create_dir_all(&runs_dir)
            .map_err(|error| usage(format!("runs directory {}: {error}", runs_dir.display())))?;
        eprintln!(
            "mirroring fleet {} at {} into {}",
            fleet.names().prefix,
            fleet.config().url,
            runs_dir.display()
        );
        tokio::spawn(crate::fleet::mirror(fleet, runs_dir.clone()));
    }
    let start = if args.allow_start {
        let workspace = workspace
            .canonicalize()
            .map_err(|error| usage(format!("workspace {}: {error}", workspace.display())))?;
        let executable = std::env::current_exe().context("cannot find this binary")?;
        Some(Starter { executable, workspace, lock: tokio::sync::Mutex::new(()) })
    } else {
        None
    };
    let token =
        args.token.or_else(|| std::env::var(TOKEN_VARIABLE).ok().filter(|value| !value.is_empty()));
    if let Some(token) = &token
        && (token.len() < 16
            || !token.bytes().all(|byte| {
                byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'~' | b'-')
            }))
    {
        return Err(usage(
            "the token must be at least 16 characters of A-Z a-z 0-9 . _ ~ -".to_owned(),
        ));
    }
    let loopback = args.addr.ip().is_loopback();
    if !loopback && !args.allow_remote {
        return Err(usage(format!(
            "{} is not a loopback address: add --allow-remote and a token (--token or \
             {TOKEN_VARIABLE}) to listen there",
            args.addr
        )));
    }
    if !loopback && token.is_none() {
        return Err(usage(format!(
            "listening on {} needs a bearer token (--token or {TOKEN_VARIABLE})",
            args.addr
        )));
    }
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|error| usage(format!("cannot listen on {}: {error}", args.addr)))?;
    let local = listener.local_addr().context("cannot read the listening address")?;
    let server = Arc::new(Server {
        runs_dir,
        token,
        check_host: loopback,
        start,
        summaries: std::sync::Mutex::new(HashMap::new()),
    });
    let app = router(server.clone());
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "listening on http://{local}/");
        let _ = stdout.flush();
    }
    eprintln!("serving the runs in {}", server.runs_dir.display());
    // Ctrl-C ends the server at once: a graceful shutdown would wait for every open event
    // stream, which a browser keeps open for as long as the page is.
    tokio::select! {
        result = axum::serve(listener, app).into_future() => result.context("the server stopped")?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(0)
}

fn router(server: Shared) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/api/info", get(info))
        .route("/api/runs", get(list_runs).post(start_run))
        .route("/api/runs/{id}", get(run_details))
        .route("/api/runs/{id}/events", get(run_events))
        .route("/api/runs/{id}/observations/{hash}", get(observation))
        .route("/api/runs/{id}/blobs/{name}", get(blob))
        .layer(middleware::from_fn_with_state(server.clone(), admit))
        .with_state(server)
}

/// An API error: a status and `{"error": message}`.
#[derive(Debug)]
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, axum::Json(json!({"error": self.1}))).into_response()
    }
}

/// The host check and the token check, before any handler.
async fn admit(State(server): State<Shared>, request: Request, next: Next) -> Response {
    if server.check_host && server.token.is_none() {
        let host = request.headers().get(header::HOST).and_then(|value| value.to_str().ok());
        if !host.is_some_and(is_loopback_host) {
            return ApiError(
                StatusCode::FORBIDDEN,
                "this server answers loopback names only".into(),
            )
            .into_response();
        }
    }
    if let Some(token) = &server.token
        && request.uri().path().starts_with("/api/")
    {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let query = request
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="));
        if !bearer.or(query).is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes())) {
            let mut response =
                ApiError(StatusCode::UNAUTHORIZED, "a bearer token is required".into())
                    .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback())
}

/// Compares without stopping at the first difference.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given.iter().zip(expected).fold(0u8, |difference, (a, b)| difference | (a ^ b)) == 0
}

async fn index() -> Response {
    let mut response = Html(INDEX_HTML).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self' data: blob:; media-src blob:",
        ),
    );
    response
}

/// The run directory of a checked id, which must hold an `events.jsonl`.
fn run_dir(server: &Server, id: &str) -> Result<PathBuf, ApiError> {
    if !is_valid_run_id(id) {
        return Err(ApiError(StatusCode::BAD_REQUEST, "not a run id".into()));
    }
    let directory = server.runs_dir.join(id);
    if !directory.join("events.jsonl").is_file() {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no run {id}")));
    }
    Ok(directory)
}

fn internal(error: impl std::fmt::Display) -> ApiError {
    ApiError(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
}

async fn info(State(server): State<Shared>) -> Response {
    axum::Json(json!({
        "allow_start": server.start.is_some(),
        "strategies": skills_agent_core::STRATEGIES,
    }))
    .into_response()
}

async fn list_runs(State(server): State<Shared>) -> Result<Response, ApiError> {
    let runs = tokio::task::spawn_blocking(move || {
        let Ok(entries) = std::fs::read_dir(&server.runs_dir) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| is_valid_run_id(name))
            .collect();
        ids.sort();
        ids.iter().filter_map(|id| summarize(&server, id)).collect::<Vec<Value>>()
    })
    .await
    .map_err(internal)?;
    Ok(axum::Json(Value::Array(runs)).into_response())
}

/// An `events.jsonl` as read: its complete events (through agent-core's one reader; a torn
/// last line is left out), with the file's length and time when it was opened.
#[derive(Debug)]
struct Record {
    events: Vec<Event>,
    length: u64,
    modified: SystemTime,
}

fn read_record(path: &Path) -> std::io::Result<Record> {
    let metadata = std::fs::metadata(path)?;
    let (length, modified) = (metadata.len(), metadata.modified()?);
    let events = read_complete_events(path).map_err(std::io::Error::other)?;
    Ok(Record { events, length, modified })
}

/// A run's summary for `skills-agent runs list`: the fields `GET /api/runs` lists (see the
/// module's doc; `run_id` is the directory's name), with the status the record alone tells —
/// `finished`, or `interrupted` (what `resume` continues) — not the page's guess from recent
/// writes, which would call a run that died a minute ago `running`.
///
/// # Errors
///
/// When `events.jsonl` cannot be read.
pub(crate) fn run_summary(run_dir: &Path) -> std::io::Result<Value> {
    let record = read_record(&run_dir.join("events.jsonl"))?;
    let id = run_dir.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let (finished, mut summary) = summary_of(&id, &record.events);
    summary["status"] = json!(if finished { "finished" } else { "interrupted" });
    Ok(summary)
}

/// `finished` when the record ends with `run_finished`, `running` when it does not and grew in
/// the last five minutes, `interrupted` otherwise.
fn status_of(finished: bool, modified: SystemTime) -> &'static str {
    if finished {
        "finished"
    } else if modified.elapsed().is_ok_and(|age| age < RUNNING_WINDOW) {
        "running"
    } else {
        "interrupted"
    }
}

/// A run's summary from the cache, read again only when `events.jsonl` changed; `None` when
/// it cannot be read.
fn summarize(server: &Server, id: &str) -> Option<Value> {
    let path = server.runs_dir.join(id).join("events.jsonl");
    let metadata = std::fs::metadata(&path).ok()?;
    let (length, modified) = (metadata.len(), metadata.modified().ok()?);
    let cached = server
        .summaries
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(id)
        .filter(|cached| (cached.length, cached.modified) == (length, modified))
        .cloned();
    let cached = match cached {
        Some(cached) => cached,
        None => remember(server, id, &read_record(&path).ok()?),
    };
    Some(with_status(cached))
}

/// Summarises a record just read and keeps the summary in the cache.
fn remember(server: &Server, id: &str, record: &Record) -> CachedSummary {
    let (finished, summary) = summary_of(id, &record.events);
    let cached =
        CachedSummary { length: record.length, modified: record.modified, finished, summary };
    server
        .summaries
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(id.to_owned(), cached.clone());
    cached
}

fn with_status(cached: CachedSummary) -> Value {
    let mut summary = cached.summary;
    summary["status"] = json!(status_of(cached.finished, cached.modified));
    summary
}

/// Whether the record ends with `run_finished`, and the summary without its status.
fn summary_of(id: &str, events: &[Event]) -> (bool, Value) {
    let start = match events.first().map(Event::payload) {
        Some(Ok(Payload::RunStarted(start))) => Some(start),
        _ => None,
    };
    let finish = skills_agent_core::last_finished(events);
    let ends_finished = events.last().is_some_and(|event| event.kind == EventKind::RunFinished);
    let task: String =
        start.as_ref().map(|start| start.task.chars().take(200).collect()).unwrap_or_default();
    (
        ends_finished,
        json!({
            "run_id": id,
            "status": null,
            "outcome": finish.map(|finish| finish.outcome),
            "strategy": start.as_ref().map(|start| &start.config.strategy),
            "model": start.as_ref().map(|start| &start.config.model.model),
            "turns": events.last().map_or(0, |event| event.turn),
            "task": task,
            "started": events.first().map(|event| &event.ts),
            "updated": events.last().map(|event| &event.ts),
            "events": events.len(),
            "last_seq": events.last().map(|event| event.seq),
        }),
    )
}

async fn run_details(
    State(server): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let directory = run_dir(&server, &id)?;
    let details = tokio::task::spawn_blocking(move || {
        // One read of the record gives the summary (kept in the cache) and the result.
        let record = read_record(&directory.join("events.jsonl")).ok()?;
        let mut details = with_status(remember(&server, &id, &record));
        let result = skills_agent_core::last_finished(&record.events)
            .and_then(|finished| serde_json::to_value(finished).ok());
        let state = std::fs::read(directory.join("state.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        let final_text = std::fs::read_to_string(directory.join("final.md")).ok();
        details["state"] = state.unwrap_or(Value::Null);
        details["result"] = result.unwrap_or(Value::Null);
        details["final_text"] = final_text.map_or(Value::Null, Value::String);
        Some(details)
    })
    .await
    .map_err(internal)?;
    match details {
        Some(details) => Ok(axum::Json(details).into_response()),
        None => Err(ApiError(StatusCode::NOT_FOUND, "the run's events cannot be read".into())),
    }
}

async fn observation(
    State(server): State<Shared>,
    UrlPath((id, hash)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    if !is_sha256_hex(&hash) {
        return Err(ApiError(StatusCode::BAD_REQUEST, "not an observation reference".into()));
    }
    let directory = run_dir(&server, &id)?;
    let path = directory.join("observations").join(format!("{hash}.txt"));
    let is_file = tokio::fs::symlink_metadata(&path).await.is_ok_and(|meta| meta.is_file());
    if !is_file {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no observation {hash}")));
    }
    let bytes = tokio::fs::read(&path).await.map_err(internal)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        text,
    )
        .into_response())
}

/// The content type of a stored blob by the extension agent-core gives it, and whether a
/// browser may show it in place (else it is served as a download).
fn blob_type(extension: &str) -> Option<(&'static str, bool)> {
    Some(match extension {
        "png" => ("image/png", true),
        "jpg" => ("image/jpeg", true),
        "gif" => ("image/gif", true),
        "webp" => ("image/webp", true),
        "wav" => ("audio/wav", true),
        "mp3" => ("audio/mpeg", true),
        "txt" => ("text/plain; charset=utf-8", true),
        "json" => ("application/json", true),
        // SVG and PDF can carry scripts; unknown bytes are whatever they are.
        "svg" => ("image/svg+xml", false),
        "pdf" => ("application/pdf", false),
        "bin" => ("application/octet-stream", false),
        _ => return None,
    })
}

async fn blob(
    State(server): State<Shared>,
    UrlPath((id, name)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    let typed = name
        .split_once('.')
        .filter(|(hash, _)| is_sha256_hex(hash))
        .and_then(|(_, extension)| blob_type(extension));
    let Some((content_type, inline)) = typed else {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "not a blob reference (SHA-256 hex, a dot, a known extension)".into(),
        ));
    };
    let directory = run_dir(&server, &id)?;
    let path = directory.join("observations").join(&name);
    let is_file = tokio::fs::symlink_metadata(&path).await.is_ok_and(|meta| meta.is_file());
    if !is_file {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("no blob {name}")));
    }
    let bytes = tokio::fs::read(&path).await.map_err(internal)?;
    let disposition =
        if inline { "inline".to_owned() } else { format!("attachment; filename=\"{name}\"") };
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (header::CONTENT_SECURITY_POLICY, "sandbox; default-src 'none'".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        bytes,
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
struct EventsQuery {
    /// Keep the stream open for appended events (default true).
    follow: Option<bool>,
    /// Start after this seq (as `Last-Event-ID`).
    after: Option<u64>,
}

async fn run_events(
    State(server): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let directory = run_dir(&server, &id)?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(value) => {
            Some(value.to_str().ok().and_then(|text| text.trim().parse::<u64>().ok()).ok_or_else(
                || ApiError(StatusCode::BAD_REQUEST, "Last-Event-ID is not a seq".into()),
            )?)
        }
    };
    let tail = Tail {
        path: directory.join("events.jsonl"),
        reader: None,
        partial: Vec::new(),
        consumed: 0,
        retried_at: None,
        after: last_event_id.or(query.after).unwrap_or(0),
        follow: query.follow.unwrap_or(true),
        caught_up: false,
    };
    let stream = futures_util::stream::unfold(tail, |mut tail| async move {
        tail.next().await.map(|event| (Ok(event), tail))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A reader that follows an `events.jsonl` as it grows.
struct Tail {
    path: PathBuf,
    reader: Option<tokio::io::BufReader<tokio::fs::File>>,
    /// The bytes read of the line being read.
    partial: Vec<u8>,
    /// The length of the complete lines read (where the reader starts again).
    consumed: u64,
    /// Where a line that was not JSON was read again from, once.
    retried_at: Option<u64>,
    /// The last seq sent (events at or below it are skipped).
    after: u64,
    follow: bool,
    caught_up: bool,
}

impl Tail {
    /// The next SSE event, waiting for the file to grow when following; `None` ends the
    /// stream.
    ///
    /// `resume` cuts a torn last line off before it appends, so the bytes after the last
    /// complete line may change: a torn line is never kept across reads but read again from its
    /// start, and a line that is not JSON is read again once from its start before it is
    /// skipped.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            let reader = match &mut self.reader {
                Some(reader) => reader,
                None => {
                    let mut file = tokio::fs::File::open(&self.path).await.ok()?;
                    file.seek(std::io::SeekFrom::Start(self.consumed)).await.ok()?;
                    self.reader.insert(tokio::io::BufReader::new(file))
                }
            };
            let read = reader.read_until(b'\n', &mut self.partial).await.ok()?;
            if read > 0 && self.partial.ends_with(b"\n") {
                let line = std::mem::take(&mut self.partial);
                let Ok(value) = serde_json::from_slice::<Value>(&line) else {
                    if self.retried_at != Some(self.consumed) {
                        self.retried_at = Some(self.consumed);
                        self.reader = None;
                    } else {
                        self.consumed += line.len() as u64;
                    }
                    continue;
                };
                self.consumed += line.len() as u64;
                let Some(seq) = value.get("seq").and_then(Value::as_u64) else {
                    continue;
                };
                if seq <= self.after {
                    continue;
                }
                self.after = seq;
                // Re-serialised: one line, whatever whitespace the file had.
                let data = serde_json::to_string(&value).ok()?;
                return Some(SseEvent::default().id(seq.to_string()).data(data));
            }
            // At the end of the file; a torn line is read again from its start next time.
            if !self.partial.is_empty() {
                self.partial.clear();
                self.reader = None;
            }
            if !self.follow {
                return None;
            }
            if !self.caught_up {
                self.caught_up = true;
                return Some(SseEvent::default().event("caught_up").data(self.after.to_string()));
            }
            tokio::time::sleep(POLL_INTERVAL).await;
            // A file shorter than the lines read is read again from the start (the events
            // already sent are skipped by seq).
            let length = tokio::fs::metadata(&self.path).await.ok()?.len();
            if length < self.consumed {
                self.consumed = 0;
                self.reader = None;
            }
        }
    }
}

#[derive(Debug, Deserialize)]
struct StartRequest {
    task: String,
    strategy: Option<String>,
    model: Option<String>,
}

/// The run ids in the runs directory that have a record.
fn recorded_runs(runs_dir: &Path) -> HashSet<String> {
    let Ok(entries) = std::fs::read_dir(runs_dir) else {
        return HashSet::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| is_valid_run_id(name) && runs_dir.join(name).join("events.jsonl").is_file())
        .collect()
}

/// A run that appeared since `before`: the one whose first event is a `run_started` of
/// `task`, or the only one (the recorded task may differ by a redacted secret).
fn new_run(runs_dir: &Path, before: &HashSet<String>, task: &str) -> Option<String> {
    let mut new: Vec<String> = recorded_runs(runs_dir).difference(before).cloned().collect();
    new.sort();
    let same_task = new.iter().find(|id| {
        read_record(&runs_dir.join(id).join("events.jsonl")).is_ok_and(|record| {
            matches!(record.events.first().map(Event::payload),
                Some(Ok(Payload::RunStarted(start))) if start.task == task)
        })
    });
    match (same_task, new.as_slice()) {
        (Some(id), _) => Some(id.clone()),
        (None, [only]) => Some(only.clone()),
        (None, _) => None,
    }
}

async fn start_run(
    State(server): State<Shared>,
    axum::Json(request): axum::Json<StartRequest>,
) -> Result<Response, ApiError> {
    let Some(starter) = &server.start else {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "starting runs is off (serve --allow-start turns it on)".into(),
        ));
    };
    let bad = |message: String| ApiError(StatusCode::BAD_REQUEST, message);
    if request.task.trim().is_empty() {
        return Err(bad("the task is empty".into()));
    }
    if let Some(strategy) = &request.strategy
        && !skills_agent_core::STRATEGIES.contains(&strategy.as_str())
    {
        return Err(bad(format!(
            "unknown strategy `{strategy}`; known: {}",
            skills_agent_core::STRATEGIES.join(", ")
        )));
    }
    if let Some(model) = &request.model {
        skills_agent_models::specs::ModelSpec::parse(model)
            .map_err(|error| bad(format!("{error:#}")))?;
    }
    let _one_at_a_time = starter.lock.lock().await;
    let runs_dir = server.runs_dir.clone();
    let before = {
        let runs_dir = runs_dir.clone();
        tokio::task::spawn_blocking(move || recorded_runs(&runs_dir)).await.map_err(internal)?
    };
    let mut command = tokio::process::Command::new(&starter.executable);
    command.arg("run").arg("--quiet").arg("--workspace").arg(&starter.workspace);
    command.arg("--runs-dir").arg(&runs_dir);
    if let Some(strategy) = &request.strategy {
        command.arg(format!("--strategy={strategy}"));
    }
    if let Some(model) = &request.model {
        command.arg(format!("--model={model}"));
    }
    command
        .arg("--")
        .arg(&request.task)
        .current_dir(&starter.workspace)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().map_err(internal)?;
    let deadline = Instant::now() + START_WAIT;
    loop {
        let exited = child.try_wait().map_err(internal)?;
        let found = {
            let (runs_dir, before, task) = (runs_dir.clone(), before.clone(), request.task.clone());
            tokio::task::spawn_blocking(move || new_run(&runs_dir, &before, &task))
                .await
                .map_err(internal)?
        };
        if found.is_some() || Instant::now() > deadline {
            // The run goes on; its output is drained and its exit collected in the background.
            tokio::spawn(async move {
                let _ = child.wait_with_output().await;
            });
            let status = if found.is_some() { StatusCode::CREATED } else { StatusCode::ACCEPTED };
            return Ok((status, axum::Json(json!({"run_id": found}))).into_response());
        }
        if let Some(status) = exited {
            let output =
                tokio::time::timeout(Duration::from_secs(2), child.wait_with_output()).await;
            let stderr = match output {
                Ok(Ok(output)) => String::from_utf8_lossy(&output.stderr).trim().to_owned(),
                Ok(Err(_)) | Err(_) => String::new(),
            };
            return Err(ApiError(
                if status.code() == Some(2) {
                    StatusCode::BAD_REQUEST
                } else {
                    StatusCode::INTERNAL_SERVER_ERROR
                },
                format!("the run did not start ({status}): {stderr}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in ["localhost", "localhost:8737", "127.0.0.1:1", "127.1.2.3", "[::1]:80", "[::1]"]
        {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["example.com", "10.0.0.1:80", "localhost.evil.com", "[::2]:80", ""] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_run_summary_comes_from_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("20260101_000000_aaaa");
        std::fs::create_dir(&run).unwrap();
        // The smallest record the one reader takes: envelopes with their run id, and
        // payloads with their required fields.
        let lines = [
            json!({"seq": 1, "turn": 0, "ts": "t1", "run_id": "r", "type": "run_started", "data": {"task": "Sum", "config": {"strategy": "react", "model": {"model": "mock"}}, "catalog": [], "workspace": "."}}),
            json!({"seq": 2, "turn": 1, "ts": "t2", "run_id": "r", "type": "run_finished", "data": {"outcome": "completed", "final_text": ""}}),
        ];
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(run.join("events.jsonl"), format!("{text}{{\"torn")).unwrap();
        assert_eq!(
            run_summary(&run).unwrap(),
            json!({"run_id": "20260101_000000_aaaa", "status": "finished", "outcome": "completed",
                "strategy": "react", "model": "mock", "turns": 1, "task": "Sum", "started": "t1",
                "updated": "t2", "events": 2, "last_seq": 2})
        );
        assert!(run_summary(dir.path()).is_err());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abcdefghijklmnop", b"abcdefghijklmnop"));
        assert!(!same_secret(b"abcdefghijklmnoq", b"abcdefghijklmnop"));
        assert!(!same_secret(b"abc", b"abcdefghijklmnop"));
    }
}
