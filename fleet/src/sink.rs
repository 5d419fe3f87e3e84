//! The engine keeps the record: an [`EventSink`] that publishes each event to the task's
//! subject and waits for the stream's acknowledgement before the run goes on, storing first
//! the files the event points at (a stored observation, the workspace's changes after an
//! action), so that an acknowledged event always has what a resume on another machine needs.
//!
//! Each publish says which stream sequence it expects to follow
//! (`Nats-Expected-Last-Subject-Sequence`) and carries a message id (`Nats-Msg-Id`): a retry
//! after a lost acknowledgement is not stored twice, and a worker whose task was given to
//! another worker meanwhile is refused at its next event and stops, instead of writing a
//! second history.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use skills_agent_core::{Event, EventKind, EventSink};

use crate::archive::{self, Manifest};
use crate::engine::Fleet;
use crate::error::{Error, Result};
use crate::task::{RunStatus, TaskState, now};

/// How long a publish is retried while the engine is unreachable before the run stops.
const ENGINE_WAIT: Duration = Duration::from_secs(60);

/// What a sink stores beside the events: the task's workspace (to store its changes after
/// each action) and the runs folder (for stored observations).
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The run's workspace.
    pub workspace: PathBuf,
    /// The folder holding the run directory.
    pub runs_dir: PathBuf,
    /// The workspace as it was unpacked (changes are counted from it).
    pub base: Manifest,
}

#[derive(Debug)]
struct SinkState {
    /// The stream sequence of the task's last stored event (0: none yet).
    last: u64,
    /// Set when another worker took the task over: every later event is refused.
    superseded: bool,
    /// The task's state as this worker last wrote it.
    status: RunStatus,
}

/// Publishes a run's events to its task's subject (see the module docs). Use it inside a
/// multi-threaded Tokio runtime (the CLI's): `record` waits for the acknowledgement with
/// `block_in_place`.
#[derive(Debug)]
pub struct EngineSink {
    fleet: Fleet,
    task_id: String,
    subject: String,
    checkpoint: Option<Checkpoint>,
    handle: tokio::runtime::Handle,
    state: Mutex<SinkState>,
}

impl EngineSink {
    /// A sink for `task_id`'s events, continuing after stream sequence `last` (0 for a new
    /// run), that writes `status` with the run's id once the run starts.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] outside a Tokio runtime.
    pub fn new(
        fleet: Fleet,
        task_id: &str,
        last: u64,
        status: RunStatus,
        checkpoint: Option<Checkpoint>,
    ) -> Result<EngineSink> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            Error::Config("an engine sink is made inside a Tokio runtime".to_owned())
        })?;
        Ok(EngineSink {
            subject: fleet.names().events_subject(task_id),
            fleet,
            task_id: task_id.to_owned(),
            checkpoint,
            handle,
            state: Mutex::new(SinkState { last, superseded: false, status }),
        })
    }

    /// Whether another worker took the task over while this one ran it.
    pub fn superseded(&self) -> bool {
        self.state.lock().map(|state| state.superseded).unwrap_or(true)
    }

    /// The stream sequence of the last event stored.
    pub fn last_sequence(&self) -> u64 {
        self.state.lock().map(|state| state.last).unwrap_or(0)
    }

    /// Stores the workspace's changes so far (`<task>/changes.tar`).
    pub(crate) async fn store_changes(&self) -> Result<()> {
        let Some(checkpoint) = &self.checkpoint else { return Ok(()) };
        let (workspace, base) = (checkpoint.workspace.clone(), checkpoint.base.clone());
        let limit = self.fleet.config().workspace_limit;
        let bytes = tokio::task::spawn_blocking(move || archive::changes(&workspace, &base, limit))
            .await
            .map_err(|error| Error::engine("packing the workspace changes", error))??;
        self.fleet.put_object(&format!("{}/changes.tar", self.task_id), bytes).await
    }

    async fn store(&self, event: &Event) -> Result<()> {
        let Some(checkpoint) = &self.checkpoint else { return Ok(()) };
        match event.kind {
            EventKind::ObservationRecorded => {
                if let Some(path) = event.data.pointer("/stored/path").and_then(|p| p.as_str()) {
                    let file = checkpoint.runs_dir.join(&event.run_id).join(path);
                    let bytes = std::fs::read(&file).map_err(|error| Error::io(&file, error))?;
                    self.fleet.put_object(&format!("{}/run/{path}", self.task_id), bytes).await?;
                }
                Ok(())
            }
            EventKind::ActionExecuted => {
                self.store_changes().await?;
                // The action's whole result, which a resume elsewhere completes the action from
                // if this worker dies before the observation (agent-core writes the file before
                // the event; an older one is told apart by its `seq`).
                let file = checkpoint.runs_dir.join(&event.run_id).join("last_execution.json");
                if let Ok(bytes) = std::fs::read(&file) {
                    let name = format!("{}/run/last_execution.json", self.task_id);
                    self.fleet.put_object(&name, bytes).await?;
                }
                Ok(())
            }
            EventKind::CommandExecuted | EventKind::RunFinished => self.store_changes().await,
            _ => Ok(()),
        }
    }

    async fn publish(&self, event: &Event, payload: Vec<u8>) -> Result<()> {
        let last = self.last_sequence();
        let started = Instant::now();
        let mut pause = Duration::from_millis(100);
        loop {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(
                async_nats::header::NATS_MESSAGE_ID,
                format!("{}:{}:{}", self.task_id, event.run_id, event.seq).as_str(),
            );
            headers.insert(
                async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
                last.to_string().as_str(),
            );
            let sent = self
                .fleet
                .jetstream()
                .publish_with_headers(self.subject.clone(), headers, payload.clone().into())
                .await;
            let acked = match sent {
                Ok(future) => future.await,
                Err(error) => Err(error),
            };
            match acked {
                Ok(ack) => {
                    if let Ok(mut state) = self.state.lock() {
                        state.last = ack.sequence;
                    }
                    return Ok(());
                }
                Err(error) if error.kind() == PublishErrorKind::WrongLastSequence => {
                    if let Ok(mut state) = self.state.lock() {
                        state.superseded = true;
                    }
                    return Err(Error::engine(
                        format!("storing event {} of {}", event.seq, self.task_id),
                        "another worker took this task over (its record moved on): this worker \
                         stops the run and leaves it to that one",
                    ));
                }
                Err(error) if started.elapsed() < ENGINE_WAIT => {
                    let _ = error;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(error) => {
                    return Err(Error::engine(
                        format!("storing event {} of {}", event.seq, self.task_id),
                        format!("{error} (the engine did not answer for {ENGINE_WAIT:?})"),
                    ));
                }
            }
        }
    }

    async fn keep(&self, event: &Event) -> Result<()> {
        if self.superseded() {
            return Err(Error::engine(
                format!("storing event {} of {}", event.seq, self.task_id),
                "another worker took this task over",
            ));
        }
        self.store(event).await?;
        let payload = serde_json::to_vec(event).map_err(|error| Error::engine("event", error))?;
        self.publish(event, payload).await?;
        if event.kind == EventKind::RunStarted {
            let status = self.state.lock().ok().map(|mut state| {
                state.status.run_id = Some(event.run_id.clone());
                state.status.state = TaskState::Running;
                state.status.updated = now();
                state.status.clone()
            });
            if let Some(status) = status {
                self.fleet.put_status(&status).await?;
            }
        }
        Ok(())
    }

    fn block<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> std::result::Result<T, String> {
        match tokio::runtime::Handle::try_current() {
            Ok(current)
                if current.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                Ok(tokio::task::block_in_place(|| self.handle.block_on(work)))
            }
            Ok(_) => Err("the engine sink needs a multi-threaded Tokio runtime (it waits for \
                          each acknowledgement)"
                .to_owned()),
            Err(_) => Ok(self.handle.block_on(work)),
        }
    }
}

impl EventSink for EngineSink {
    fn record(&self, event: &Event) -> skills_agent_core::Result<()> {
        let sink_error =
            |message: String| skills_agent_core::Error::Sink { sink: "nats".to_owned(), message };
        self.block(self.keep(event))
            .map_err(sink_error)?
            .map_err(|error| sink_error(error.to_string()))
    }
}
