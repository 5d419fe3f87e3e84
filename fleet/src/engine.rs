//! The engine side of a fleet: connecting, the streams and buckets (created idempotently),
//! submitting tasks with their workspaces, the runs bucket, a task's events (read whole or
//! followed live), dead letters, the fleet's status, and fetching a run's files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use futures_util::{Stream, StreamExt};
use skills_agent_core::{Event, EventKind};

use crate::archive;
use crate::config::{Credentials, FleetConfig, Names};
use crate::error::{Error, Result};
use crate::task::{
    DeadLetter, FleetStatus, RunStatus, Task, TaskSpec, TaskState, WorkerInfo, is_task_id,
    new_task_id, now,
};

/// How long a worker's heartbeat stays in the workers bucket without a newer one.
pub(crate) const HEARTBEAT_TTL: Duration = Duration::from_secs(30);

/// A connection to one fleet's streams and buckets.
#[derive(Clone)]
pub struct Fleet {
    config: FleetConfig,
    names: Names,
    js: jetstream::Context,
    runs: kv::Store,
    workers: kv::Store,
    files: object_store::ObjectStore,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Fleet")
            .field("url", &self.config.url)
            .field("prefix", &self.names.prefix)
            .finish_non_exhaustive()
    }
}

/// What [`Fleet::fetch`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The run directory (`<into>/run/<run_id>` or `<into>/run/<task_id>` before the run has
    /// an id).
    pub run_dir: PathBuf,
    /// The folder with the files the run created or changed in its workspace (`<into>/workspace`).
    pub workspace: PathBuf,
    /// How many workspace files the run created or changed.
    pub changed_files: usize,
}

impl Fleet {
    /// Connects to the server and makes sure the fleet's streams, buckets and object store
    /// exist (creating what is missing; existing ones are used as they are).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a bad prefix, [`Error::Connect`] when the server cannot be
    /// reached or refuses the credentials, [`Error::Engine`] when JetStream is off (`-js`) or
    /// a stream cannot be created.
    pub async fn connect(config: FleetConfig) -> Result<Fleet> {
        let names = config.names()?;
        if !(1..=5).contains(&config.replicas) {
            return Err(Error::Config(format!(
                "{} replicas: JetStream keeps 1 to 5 (3 on a 3-node cluster)",
                config.replicas
            )));
        }
        let replicas = config.replicas;
        let connect_error = |message: String| Error::Connect { url: config.url.clone(), message };
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("skills-agent-fleet {}", names.prefix))
            .connection_timeout(Duration::from_secs(5));
        options = match &config.credentials {
            Credentials::None => options,
            Credentials::UserPassword { user, password } => {
                options.user_and_password(user.clone(), password.clone())
            }
            Credentials::Token(token) => options.token(token.clone()),
            Credentials::CredsFile(path) => {
                options.credentials_file(path).await.map_err(|error| {
                    connect_error(format!("the credentials file {}: {error}", path.display()))
                })?
            }
        };
        // A cluster's servers, comma-separated (as `NATS_URL` lists them for the `nats` tool).
        let servers: Vec<&str> =
            config.url.split(',').map(str::trim).filter(|url| !url.is_empty()).collect();
        if servers.is_empty() {
            return Err(connect_error("no server in the URL (e.g. nats://127.0.0.1:4222)".into()));
        }
        let client =
            options.connect(servers).await.map_err(|error| connect_error(error.to_string()))?;
        let js = jetstream::new(client.clone());
        let ensure_stream = |name: &String, subjects: Vec<String>, retention| {
            let name = name.clone();
            let config = stream::Config {
                name: name.clone(),
                subjects,
                retention,
                storage: stream::StorageType::File,
                duplicate_window: Duration::from_secs(120),
                num_replicas: replicas,
                ..Default::default()
            };
            let js = js.clone();
            async move {
                match js.get_or_create_stream(config).await {
                    Ok(stream) => Ok(stream),
                    // Another client (a worker starting beside `submit`) made it between this
                    // one's look and its create, which then fails: the stream is there.
                    Err(error) => js.get_stream(&name).await.map_err(|_| {
                        Error::engine(
                            format!("stream {name}"),
                            format!("{error} (is JetStream on? start the server with `-js`)"),
                        )
                    }),
                }
            }
        };
        ensure_stream(
            &names.tasks_stream,
            vec![names.tasks_subject.clone()],
            stream::RetentionPolicy::WorkQueue,
        )
        .await?;
        ensure_stream(
            &names.events_stream,
            vec![format!("{}.events.*", names.prefix)],
            stream::RetentionPolicy::Limits,
        )
        .await?;
        ensure_stream(
            &names.dead_stream,
            vec![names.dead_subject.clone()],
            stream::RetentionPolicy::Limits,
        )
        .await?;
        let runs = key_value(&js, &names.runs_bucket, Duration::ZERO, replicas).await?;
        let workers = key_value(&js, &names.workers_bucket, HEARTBEAT_TTL, replicas).await?;
        let files = match js.get_object_store(&names.files_bucket).await {
            Ok(store) => store,
            Err(_) => {
                let created = js
                    .create_object_store(object_store::Config {
                        bucket: names.files_bucket.clone(),
                        storage: stream::StorageType::File,
                        num_replicas: replicas,
                        ..Default::default()
                    })
                    .await;
                match created {
                    Ok(store) => store,
                    // Made by another client meanwhile (see the streams above)?
                    Err(error) => js.get_object_store(&names.files_bucket).await.map_err(|_| {
                        Error::engine(format!("object store {}", names.files_bucket), error)
                    })?,
                }
            }
        };
        Ok(Fleet { config, names, js, runs, workers, files })
    }

    /// The configuration it was connected with.
    pub fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// The fleet's names.
    pub fn names(&self) -> &Names {
        &self.names
    }

    pub(crate) fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// Submits a task: its workspace (if any) goes to the object store (see
    /// [`archive::pack`] for what is left out), its state to the runs bucket (`queued`), then
    /// the task to the work queue. Returns the task as queued.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] past the workspace limit, [`Error::Io`] when the workspace cannot
    /// be read, [`Error::Engine`] when the engine refuses.
    pub async fn submit(&self, spec: TaskSpec, workspace: Option<&Path>) -> Result<Task> {
        if spec.task.trim().is_empty() {
            return Err(Error::Config("the task is empty".to_owned()));
        }
        let id = new_task_id();
        let workspace = match workspace {
            Some(folder) => {
                let folder = folder.to_owned();
                let limit = self.config.workspace_limit;
                let bytes = tokio::task::spawn_blocking(move || archive::pack(&folder, limit))
                    .await
                    .map_err(|error| Error::engine("packing the workspace", error))??;
                let name = format!("{id}/workspace.tar");
                self.put_object(&name, bytes).await?;
                Some(name)
            }
            None => None,
        };
        let task = Task { id: id.clone(), spec, workspace, submitted: now() };
        let status = RunStatus {
            task_id: id.clone(),
            task: task.spec.task.clone(),
            state: TaskState::Queued,
            worker: None,
            run_id: None,
            attempts: 0,
            outcome: None,
            exit_code: None,
            final_text: None,
            error: None,
            updated: now(),
        };
        self.put_status(&status).await?;
        let payload = serde_json::to_vec(&task).map_err(|error| Error::engine("task", error))?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
        self.js
            .publish_with_headers(self.names.tasks_subject.clone(), headers, payload.into())
            .await
            .map_err(|error| Error::engine("queueing the task", error))?
            .await
            .map_err(|error| Error::engine("queueing the task", error))?;
        Ok(task)
    }

    /// A task's state, if the fleet knows the task.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the bucket cannot be read, [`Error::Malformed`] for an entry
    /// that is not a state.
    pub async fn run_status(&self, task_id: &str) -> Result<Option<RunStatus>> {
        if !is_task_id(task_id) {
            return Ok(None);
        }
        let entry = self
            .runs
            .get(task_id)
            .await
            .map_err(|error| Error::engine(format!("reading the state of {task_id}"), error))?;
        entry
            .map(|bytes| {
                serde_json::from_slice(&bytes).map_err(|error| Error::Malformed {
                    what: format!("the state of {task_id}"),
                    message: error.to_string(),
                })
            })
            .transpose()
    }

    pub(crate) async fn put_status(&self, status: &RunStatus) -> Result<()> {
        let bytes = bytes::Bytes::from(
            serde_json::to_vec(status).map_err(|error| Error::engine("state", error))?,
        );
        write_with_retries(|| async {
            self.runs.put(&status.task_id, bytes.clone()).await.map_err(|error| {
                Error::engine(format!("writing the state of {}", status.task_id), error)
            })
        })
        .await?;
        Ok(())
    }

    /// Every task's state, oldest first (task ids sort by submission time).
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the bucket cannot be read.
    pub async fn runs(&self) -> Result<Vec<RunStatus>> {
        read_with_retries(|| self.runs_once()).await
    }

    async fn runs_once(&self) -> Result<Vec<RunStatus>> {
        let keys = keys_of(&self.runs, "listing the runs").await?;
        let mut statuses = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(status) = self.run_status(&key).await? {
                statuses.push(status);
            }
        }
        Ok(statuses)
    }

    /// The state of the task with this id, or of the task whose run has this id.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] when no task or run has it.
    pub async fn find(&self, id: &str) -> Result<RunStatus> {
        if let Some(status) = self.run_status(id).await? {
            return Ok(status);
        }
        self.runs()
            .await?
            .into_iter()
            .find(|status| status.run_id.as_deref() == Some(id))
            .ok_or_else(|| Error::NotFound(id.to_owned()))
    }

    /// The stream sequence of the last event of a task (0 when it has none).
    pub(crate) async fn last_event_sequence(&self, task_id: &str) -> Result<u64> {
        let stream = self.events_stream().await?;
        match stream.get_last_raw_message_by_subject(&self.names.events_subject(task_id)).await {
            Ok(message) => Ok(message.sequence),
            Err(error) if error.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(0),
            Err(error) => Err(Error::engine(format!("the events of {task_id}"), error)),
        }
    }

    async fn events_stream(&self) -> Result<stream::Stream> {
        self.js
            .get_stream(&self.names.events_stream)
            .await
            .map_err(|error| Error::engine(format!("stream {}", self.names.events_stream), error))
    }

    /// The events of a task's run stored so far, in order, with the stream sequence of the
    /// last one (0 when there is none).
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the stream cannot be read, [`Error::Malformed`] for a message
    /// that is not an event.
    pub async fn events(&self, task_id: &str) -> Result<(Vec<Event>, u64)> {
        read_with_retries(|| self.events_once(task_id)).await
    }

    /// One message get per event (the stream's leader answers), rather than an ephemeral
    /// consumer, which a cluster that lost a node may place on the lost node.
    async fn events_once(&self, task_id: &str) -> Result<(Vec<Event>, u64)> {
        let last = self.last_event_sequence(task_id).await?;
        if last == 0 {
            return Ok((Vec::new(), 0));
        }
        let stream = self.events_stream().await?;
        let subject = self.names.events_subject(task_id);
        let mut events = Vec::new();
        let mut next = 1;
        while next <= last {
            let message = stream
                .raw_message_builder()
                .sequence(next)
                .next_by_subject(subject.clone())
                .send()
                .await
                .map_err(|error| Error::engine(format!("reading {subject}"), error))?;
            let event: Event =
                serde_json::from_slice(&message.payload).map_err(|error| Error::Malformed {
                    what: format!("event {} of {subject}", message.sequence),
                    message: error.to_string(),
                })?;
            events.push(event);
            next = message.sequence + 1;
        }
        Ok((events, last))
    }

    /// A task's events as they are stored: the ones so far, then each new one, with its
    /// stream sequence. The stream never ends by itself; stop at `run_finished` (or when
    /// [`Fleet::run_status`] says the task is dead).
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the consumer cannot be created.
    pub async fn follow(
        &self,
        task_id: &str,
    ) -> Result<impl Stream<Item = Result<(Event, u64)>> + Send + Unpin + use<>> {
        let stream = self.events_stream().await?;
        let subject = self.names.events_subject(task_id);
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: subject.clone(),
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|error| Error::engine(format!("following {subject}"), error))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|error| Error::engine(format!("following {subject}"), error))?;
        Ok(Box::pin(messages.map(move |message| {
            let message =
                message.map_err(|error| Error::engine(format!("reading {subject}"), error))?;
            let sequence = message.info().map(|info| info.stream_sequence).unwrap_or(0);
            let event: Event =
                serde_json::from_slice(&message.payload).map_err(|error| Error::Malformed {
                    what: format!("event {sequence} of {subject}"),
                    message: error.to_string(),
                })?;
            Ok((event, sequence))
        })))
    }

    pub(crate) async fn put_object(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        write_with_retries(|| async {
            let mut reader = std::io::Cursor::new(bytes.as_slice());
            self.files
                .put(name, &mut reader)
                .await
                .map_err(|error| Error::engine(format!("storing {name}"), error))
        })
        .await?;
        Ok(())
    }

    /// An object's bytes, or `None` when there is no such object.
    pub(crate) async fn get_object(&self, name: &str) -> Result<Option<Vec<u8>>> {
        read_with_retries(|| self.get_object_once(name)).await
    }

    /// An object read chunk by chunk with the stream's message gets, which the stream's leader
    /// answers, rather than through an ephemeral consumer (`ObjectStore::get`), which a cluster
    /// that lost a node may place on the lost node; its SHA-256 digest is checked as
    /// `ObjectStore::get` checks it.
    async fn get_object_once(&self, name: &str) -> Result<Option<Vec<u8>>> {
        use base64::Engine as _;
        use sha2::Digest as _;
        let failed =
            |error: &dyn std::fmt::Display| Error::engine(format!("reading {name}"), error);
        let info = match self.files.info(name).await {
            Ok(info) if !info.deleted => info,
            Ok(_) => return Ok(None),
            Err(error) if error.kind() == object_store::InfoErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(failed(&error)),
        };
        let stream = self
            .js
            .get_stream_no_info(format!("OBJ_{}", self.names.files_bucket))
            .await
            .map_err(|error| failed(&error))?;
        let subject = format!("$O.{}.C.{}", self.names.files_bucket, info.nuid);
        let mut bytes = Vec::with_capacity(info.size);
        let mut next = 1;
        for _ in 0..info.chunks {
            let chunk = stream
                .raw_message_builder()
                .sequence(next)
                .next_by_subject(subject.clone())
                .send()
                .await
                .map_err(|error| failed(&error))?;
            bytes.extend_from_slice(&chunk.payload);
            next = chunk.sequence + 1;
        }
        let digest = format!(
            "SHA-256={}",
            base64::engine::general_purpose::URL_SAFE.encode(sha2::Sha256::digest(&bytes))
        );
        if bytes.len() != info.size || info.digest.as_deref().is_some_and(|want| want != digest) {
            return Err(failed(&format!(
                "{} bytes in {} chunks do not match the object's size ({}) or digest",
                bytes.len(),
                info.chunks,
                info.size
            )));
        }
        Ok(Some(bytes))
    }

    /// The workers that sent a heartbeat within the last half minute.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the bucket cannot be read.
    pub async fn workers(&self) -> Result<Vec<WorkerInfo>> {
        read_with_retries(|| self.workers_once()).await
    }

    async fn workers_once(&self) -> Result<Vec<WorkerInfo>> {
        let names = keys_of(&self.workers, "listing the workers").await?;
        let mut workers = Vec::new();
        for name in names {
            let entry = self
                .workers
                .get(&name)
                .await
                .map_err(|error| Error::engine("reading a heartbeat", error))?;
            if let Some(info) = entry.and_then(|bytes| serde_json::from_slice(&bytes).ok()) {
                workers.push(info);
            }
        }
        Ok(workers)
    }

    pub(crate) async fn heartbeat(&self, info: &WorkerInfo) -> Result<()> {
        let bytes = serde_json::to_vec(info).map_err(|error| Error::engine("heartbeat", error))?;
        self.workers
            .put(encode_key(&info.name), bytes.into())
            .await
            .map_err(|error| Error::engine("writing the heartbeat", error))?;
        Ok(())
    }

    pub(crate) async fn forget_worker(&self, name: &str) {
        let _ = self.workers.delete(encode_key(name)).await;
    }

    /// The tasks that failed every try.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the stream cannot be read.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>> {
        read_with_retries(|| self.dead_letters_once()).await
    }

    /// Read with message gets (no consumer, see [`Fleet::events`]).
    async fn dead_letters_once(&self) -> Result<Vec<DeadLetter>> {
        let failed = |error: &dyn std::fmt::Display| Error::engine("the dead letters", error);
        let mut stream =
            self.js.get_stream(&self.names.dead_stream).await.map_err(|error| failed(&error))?;
        let state = stream.info().await.map_err(|error| failed(&error))?.state.clone();
        let mut letters = Vec::new();
        let mut next = state.first_sequence.max(1);
        while state.messages > 0 && next <= state.last_sequence {
            let message = match stream
                .raw_message_builder()
                .sequence(next)
                .next_by_subject(self.names.dead_subject.clone())
                .send()
                .await
            {
                Ok(message) => message,
                Err(error) if error.kind() == stream::RawMessageErrorKind::NoMessageFound => break,
                Err(error) => return Err(failed(&error)),
            };
            if let Ok(letter) = serde_json::from_slice(&message.payload) {
                letters.push(letter);
            }
            next = message.sequence + 1;
        }
        Ok(letters)
    }

    pub(crate) async fn dead_letter(&self, letter: &DeadLetter) -> Result<()> {
        let payload =
            serde_json::to_vec(letter).map_err(|error| Error::engine("dead letter", error))?;
        self.js
            .publish(self.names.dead_subject.clone(), payload.into())
            .await
            .map_err(|error| Error::engine("dead-lettering", error))?
            .await
            .map_err(|error| Error::engine("dead-lettering", error))?;
        Ok(())
    }

    /// The fleet at a glance: workers, tasks waiting and held, finished runs by outcome, and
    /// the dead letters.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when a stream or bucket cannot be read.
    pub async fn status(&self) -> Result<FleetStatus> {
        let workers = self.workers().await?;
        let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
        let (mut queued, mut running) = (0, 0);
        for status in self.runs().await? {
            match status.state {
                TaskState::Queued => queued += 1,
                TaskState::Running => running += 1,
                TaskState::Finished => {
                    *outcomes.entry(status.outcome.unwrap_or_default()).or_default() += 1;
                }
                TaskState::Dead => *outcomes.entry("dead".to_owned()).or_default() += 1,
            }
        }
        let dead = self.dead_letters().await?;
        Ok(FleetStatus { workers, queued, running, outcomes, dead })
    }

    /// Writes a task's run into `into`: the run directory (`run/<run_id>/`, its events from
    /// the engine and its stored files) and the files the run created or changed in its
    /// workspace (`workspace/`).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown id, [`Error::Engine`], [`Error::Archive`] or
    /// [`Error::Io`] when a part cannot be read or written.
    pub async fn fetch(&self, id: &str, into: &Path) -> Result<Fetched> {
        let status = self.find(id).await?;
        let task_id = status.task_id.clone();
        let run_name = status.run_id.clone().unwrap_or_else(|| task_id.clone());
        let run_dir = into.join("run").join(&run_name);
        self.write_run(&task_id, &run_dir).await?;
        let workspace = into.join("workspace");
        let changed_files = match self.get_object(&format!("{task_id}/changes.tar")).await? {
            Some(bytes) => archive::apply(&format!("{task_id}/changes.tar"), &bytes, &workspace)?,
            None => {
                std::fs::create_dir_all(&workspace)
                    .map_err(|error| Error::io(&workspace, error))?;
                0
            }
        };
        Ok(Fetched { run_dir, workspace, changed_files })
    }

    /// Writes the run directory of a task into `run_dir`: the files its worker stored at the
    /// end (or, before that, the stored observations) and `events.jsonl` from the engine.
    /// Returns the events written.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`], [`Error::Archive`] or [`Error::Io`] when a part cannot be read or
    /// written, [`Error::Malformed`] for a record naming a run id agent-core does not write.
    pub async fn write_run(&self, task_id: &str, run_dir: &Path) -> Result<Vec<Event>> {
        let (events, _) = self.events(task_id).await?;
        if let Some(first) = events.first()
            && !skills_agent_core::is_valid_run_id(&first.run_id)
        {
            return Err(Error::Malformed {
                what: format!("the events of {task_id}"),
                message: format!("run id `{}` is not one agent-core writes", first.run_id),
            });
        }
        let name = format!("{task_id}/run.tar");
        match self.get_object(&name).await? {
            Some(bytes) => {
                archive::apply(&name, &bytes, run_dir)?;
            }
            None => self.restore_stored(task_id, &events, run_dir).await?,
        }
        write_events(run_dir, &events)?;
        Ok(events)
    }

    /// Writes the stored observation files the events name into `run_dir` (a run moved to
    /// another worker needs them to resume; a mirror, to show them), and `last_execution.json`
    /// when the events end with an action's result.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] for a stored path that is not `observations/<sha256>.txt`,
    /// [`Error::Engine`] or [`Error::Io`] when a file cannot be read or written.
    pub async fn restore_stored(
        &self,
        task_id: &str,
        events: &[Event],
        run_dir: &Path,
    ) -> Result<()> {
        for event in events.iter().filter(|event| event.kind == EventKind::ObservationRecorded) {
            let Some(path) = event.data.pointer("/stored/path").and_then(|path| path.as_str())
            else {
                continue;
            };
            let Some(sha) = event.data.pointer("/stored/sha256").and_then(|sha| sha.as_str())
            else {
                continue;
            };
            if !skills_agent_core::is_sha256_hex(sha) || path != format!("observations/{sha}.txt") {
                return Err(Error::Malformed {
                    what: format!("event {} of {task_id}", event.seq),
                    message: format!("stored path `{path}` is not observations/<sha256>.txt"),
                });
            }
            if let Some(bytes) = self.get_object(&format!("{task_id}/run/{path}")).await? {
                let target = run_dir.join(path);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|error| Error::io(parent, error))?;
                }
                std::fs::write(&target, bytes).map_err(|error| Error::io(&target, error))?;
            }
        }
        // A record that ends with an action's result: that result in full, if it was stored,
        // so the resume records its observation instead of running the action again.
        if events.last().is_some_and(|event| event.kind == EventKind::ActionExecuted)
            && let Some(bytes) =
                self.get_object(&format!("{task_id}/run/last_execution.json")).await?
        {
            let target = run_dir.join("last_execution.json");
            std::fs::create_dir_all(run_dir).map_err(|error| Error::io(run_dir, error))?;
            std::fs::write(&target, bytes).map_err(|error| Error::io(&target, error))?;
        }
        Ok(())
    }
}

/// Writes `events` as `run_dir/events.jsonl` (one line each, as agent-core writes them).
pub(crate) fn write_events(run_dir: &Path, events: &[Event]) -> Result<()> {
    std::fs::create_dir_all(run_dir).map_err(|error| Error::io(run_dir, error))?;
    let mut text = String::new();
    for event in events {
        let line = serde_json::to_string(event).map_err(|error| Error::engine("event", error))?;
        text.push_str(&line);
        text.push('\n');
    }
    let path = run_dir.join("events.jsonl");
    std::fs::write(&path, text).map_err(|error| Error::io(&path, error))
}

/// How many times a read is tried when the engine does not answer in time: in a cluster, while
/// a stream elects a new leader after losing a node, or when a key listing's ephemeral consumer
/// is placed on the lost node (Debian's 2.9 server was seen doing so for about one read in four)
/// or waits for an entry that is gone ([`LISTING_WAIT`]). Events, objects and dead letters are
/// read with message gets, which the stream's leader answers.
const READ_TRIES: u32 = 4;

/// `read`, tried again while it times out (at most [`READ_TRIES`] times).
async fn read_with_retries<T, F>(mut read: impl FnMut() -> F) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let mut tries = 1;
    loop {
        match read().await {
            Err(error) if error.is_timeout() && tries < READ_TRIES => tries += 1,
            done => return done,
        }
    }
}

/// How long a write (a state, an object) is tried again before it fails: a cluster electing a
/// stream's new leader answers "no stream found" or nothing for a few seconds. Writes are
/// idempotent (the same state, the same object under the same name).
const WRITE_WAIT: Duration = Duration::from_secs(30);

/// `write`, tried again with a growing pause (0.1 s to 2 s) while it fails with an error that
/// may pass ([`Error::is_transient`]), for [`WRITE_WAIT`]; any other error at once.
async fn write_with_retries<T, F>(mut write: impl FnMut() -> F) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        match write().await {
            Err(error) if error.is_transient() && started.elapsed() + pause < WRITE_WAIT => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            done => return done,
        }
    }
}

/// How long listing a bucket's keys may take before it counts as timed out (and is tried
/// again): the listing's consumer announces how many entries it will deliver, and waits for
/// them forever if one expires first (a heartbeat past its 30 s) or is lost with a node.
const LISTING_WAIT: Duration = Duration::from_secs(10);

/// A bucket's keys, sorted.
async fn keys_of(store: &kv::Store, what: &str) -> Result<Vec<String>> {
    let listing = async {
        let mut keys = Vec::new();
        let mut listing = store.keys().await.map_err(|error| Error::engine(what, error))?;
        while let Some(key) = listing.next().await {
            keys.push(key.map_err(|error| Error::engine(what, error))?);
        }
        keys.sort();
        Ok(keys)
    };
    tokio::time::timeout(LISTING_WAIT, listing)
        .await
        .unwrap_or_else(|_| Err(Error::engine(what, format!("timed out after {LISTING_WAIT:?}"))))
}

/// A KV bucket, created when missing. The bucket's stream is created here with the settings
/// async-nats gives one (history 1, roll-ups, direct gets, discard new): its own
/// `create_key_value` first reads the account's info, whose reply from a 2.9 server (Debian's)
/// it cannot parse.
async fn key_value(
    js: &jetstream::Context,
    bucket: &str,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store> {
    if let Ok(store) = js.get_key_value(bucket).await {
        return Ok(store);
    }
    let created = js
        .get_or_create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age,
            storage: stream::StorageType::File,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            num_replicas: replicas,
            ..Default::default()
        })
        .await;
    // When the create failed, another client may have made the bucket meanwhile.
    match (js.get_key_value(bucket).await, created) {
        (Ok(store), _) => Ok(store),
        (Err(_), Err(error)) => Err(Error::engine(format!("bucket {bucket}"), error)),
        (Err(error), Ok(_)) => Err(Error::engine(format!("bucket {bucket}"), error)),
    }
}

/// A worker name as a KV key (letters, digits, `-`, `_`, `=`, `.` and `/` are allowed; the rest
/// becomes `_`).
fn encode_key(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=') { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_write_is_tried_again_only_while_its_error_may_pass() {
        let tries = AtomicUsize::new(0);
        let outcome = write_with_retries(|| async {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0 => Err(Error::engine("writing the state of t1", "no stream found for subject")),
                _ => Ok(()),
            }
        })
        .await;
        assert!(outcome.is_ok());
        assert_eq!(tries.load(Ordering::SeqCst), 2, "a leader election passes");

        let tries = AtomicUsize::new(0);
        let outcome: Result<()> = write_with_retries(|| async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(Error::engine("storing result.tar", "maximum payload exceeded"))
        })
        .await;
        assert!(outcome.unwrap_err().to_string().contains("maximum payload exceeded"));
        assert_eq!(tries.load(Ordering::SeqCst), 1, "a write too large fails at once");
    }
}
