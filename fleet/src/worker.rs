//! A worker: takes tasks from the work queue (as many at once as its concurrency), gives each
//! a private workspace unpacked from the engine, runs it through the caller's [`Runner`] with
//! an [`EngineSink`] on the record, keeps the task with progress acknowledgements while the
//! run is alive, stores the run's files, and acknowledges the task only once `run_finished`
//! is stored. A task whose run already began elsewhere (a killed worker) is resumed from the
//! events in the engine; a task that failed every try goes to dead-letter.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer};
use async_trait::async_trait;
use futures_util::StreamExt;
use skills_agent_core::{CancellationToken, EventKind, EventSink, RunResult};

use crate::archive::{self, Manifest};
use crate::engine::{Fleet, HEARTBEAT_TTL, write_events};
use crate::error::{Error, Result};
use crate::sink::{Checkpoint, EngineSink};
use crate::task::{DeadLetter, RunStatus, Task, TaskState, WorkerInfo, now};

/// One task for a [`Runner`]: what to run, where, and the sink that must see every event.
#[derive(Debug)]
pub struct Job {
    /// The task.
    pub task: Task,
    /// Which try this is (1 for the first).
    pub attempt: u32,
    /// The task's private workspace, unpacked from the engine.
    pub workspace: PathBuf,
    /// Where the run directory goes.
    pub runs_dir: PathBuf,
    /// The run directory to resume (rebuilt from the engine) when the run began on another
    /// worker; `None` for a new run.
    pub resume: Option<PathBuf>,
    /// The sink to add to the agent: the engine keeps the record.
    pub sink: Arc<dyn EventSink>,
}

/// How a job ended: the run's result and `run`'s exit code for it.
#[derive(Debug)]
pub struct JobResult {
    /// The run's result.
    pub run: RunResult,
    /// The exit code `run` gives this outcome.
    pub exit_code: u8,
}

/// Runs one job as the CLI's `run` (or `resume`) does.
#[async_trait]
pub trait Runner: Send + Sync {
    /// Runs the job to its end. `Err` is a try that failed before the run could finish
    /// (a model that cannot start, a bad spec): the task is tried again, then dead-lettered
    /// with this reason.
    async fn run(&self, job: Job) -> std::result::Result<JobResult, String>;
}

/// Hears one line per task a worker ended: the task id and how it ended.
pub type Log = Arc<dyn Fn(&str, &Ended) + Send + Sync>;

/// A worker's settings.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Its name in heartbeats and task states (unique in the fleet).
    pub name: String,
    /// How many tasks it runs at once.
    pub concurrency: usize,
    /// Where task folders go (`<work_root>/<prefix>/<task id>/{workspace,runs}`). Workers of
    /// one fleet should use the same path (the default does), so that a run moved between
    /// them sees the same paths.
    pub work_root: PathBuf,
    /// Keep each task's folder after it finished (for debugging).
    pub keep: bool,
}

impl WorkerOptions {
    /// A worker named `name` running one task at a time under
    /// `$TMPDIR/skills-agent-fleet`.
    pub fn new(name: impl Into<String>) -> WorkerOptions {
        WorkerOptions {
            name: name.into(),
            concurrency: 1,
            work_root: std::env::temp_dir().join("skills-agent-fleet"),
            keep: false,
        }
    }
}

/// What a worker did before it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerSummary {
    /// Tasks whose run finished here.
    pub finished: u64,
    /// Tries that failed here (handed back or dead-lettered).
    pub failed: u64,
    /// Tasks handed back unfinished when the worker was told to stop at once.
    pub handed_back: u64,
}

/// A finished run, as the runs bucket keeps it.
#[derive(Debug)]
struct Done {
    run_id: String,
    outcome: String,
    exit_code: u8,
    final_text: String,
}

#[derive(Debug, Default)]
struct Shared {
    current: BTreeSet<String>,
    summary: WorkerSummary,
}

/// Takes and runs tasks (see the module docs).
#[derive(Debug, Clone)]
pub struct Worker {
    fleet: Fleet,
    options: WorkerOptions,
    shared: Arc<Mutex<Shared>>,
}

/// How a task's try ended, for the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The run finished with this outcome and exit code.
    Finished {
        /// The outcome.
        outcome: String,
        /// `run`'s exit code.
        exit_code: u8,
    },
    /// The try failed and the task was handed back for another try.
    Retried(String),
    /// The task went to dead-letter.
    Dead(String),
    /// Another worker holds the task now.
    Superseded,
    /// The worker was told to stop at once; the task was handed back.
    HandedBack,
}

impl Worker {
    /// A worker on `fleet`.
    pub fn new(fleet: Fleet, options: WorkerOptions) -> Worker {
        Worker { fleet, options, shared: Arc::default() }
    }

    fn info(&self) -> WorkerInfo {
        let shared = self
            .shared
            .lock()
            .map(|shared| (shared.current.iter().cloned().collect(), shared.summary.finished));
        let (current, finished) = shared.unwrap_or_default();
        WorkerInfo {
            name: self.options.name.clone(),
            concurrency: self.options.concurrency,
            current,
            finished,
            heartbeat: now(),
        }
    }

    /// Takes tasks until `stop` is cancelled, then lets the runs in progress finish; when
    /// `abort` is cancelled, hands them back at once (nak) instead. `log` hears one line per
    /// task taken and ended.
    ///
    /// # Errors
    ///
    /// [`Error::Engine`] when the work queue's consumer cannot be created or read.
    pub async fn run(
        &self,
        runner: Arc<dyn Runner>,
        stop: CancellationToken,
        abort: CancellationToken,
        log: Log,
    ) -> Result<WorkerSummary> {
        let names = self.fleet.names().clone();
        let config = self.fleet.config().clone();
        let stream = self
            .fleet
            .jetstream()
            .get_stream(&names.tasks_stream)
            .await
            .map_err(|error| Error::engine(format!("stream {}", names.tasks_stream), error))?;
        let consumer: consumer::PullConsumer = stream
            .get_or_create_consumer(
                &names.workers_consumer,
                consumer::pull::Config {
                    durable_name: Some(names.workers_consumer.clone()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: config.ack_wait,
                    max_deliver: -1,
                    ..Default::default()
                },
            )
            .await
            .map_err(|error| Error::engine("the workers' consumer", error))?;
        let beat = {
            let worker = self.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    let _ = worker.fleet.heartbeat(&worker.info()).await;
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(HEARTBEAT_TTL / 6) => {}
                    }
                }
            })
        };
        let slots = Arc::new(tokio::sync::Semaphore::new(self.options.concurrency.max(1)));
        let mut running = tokio::task::JoinSet::new();
        loop {
            let permit = tokio::select! {
                () = stop.cancelled() => break,
                permit = Arc::clone(&slots).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            while running.try_join_next().is_some() {}
            let batch =
                consumer.fetch().max_messages(1).expires(Duration::from_secs(1)).messages().await;
            let mut batch = match batch {
                Ok(batch) => batch,
                Err(_) => {
                    // The engine is away (a restart): wait and ask again; async-nats reconnects.
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                    }
                }
            };
            let message = tokio::select! {
                () = stop.cancelled() => break,
                message = batch.next() => message,
            };
            let Some(Ok(message)) = message else { continue };
            let worker = self.clone();
            let runner = Arc::clone(&runner);
            let abort = abort.clone();
            let log = Arc::clone(&log);
            running.spawn(async move {
                let _permit = permit;
                let message = Arc::new(message);
                let ended = worker.take(Arc::clone(&message), runner, abort).await;
                let task_id = task_id_of(&message);
                log(&task_id, &ended);
                let _ = worker.fleet.heartbeat(&worker.info()).await;
            });
        }
        tokio::select! {
            () = async { while running.join_next().await.is_some() {} } => {}
            () = abort.cancelled() => {
                // Each task sees `abort` and hands its message back before it returns.
                while running.join_next().await.is_some() {}
            }
        }
        beat.abort();
        self.fleet.forget_worker(&self.options.name).await;
        Ok(self.shared.lock().map(|shared| shared.summary).unwrap_or_default())
    }

    /// One delivery of a task: runs it (or resumes it, or dead-letters it) and settles the
    /// message.
    async fn take(
        &self,
        message: Arc<jetstream::Message>,
        runner: Arc<dyn Runner>,
        abort: CancellationToken,
    ) -> Ended {
        let attempt = message
            .info()
            .map(|info| u32::try_from(info.delivered).unwrap_or(u32::MAX))
            .unwrap_or(1);
        let task: Task = match serde_json::from_slice(&message.payload) {
            Ok(task) => task,
            Err(error) => {
                let reason = format!("the task message is not a task: {error}");
                let letter = DeadLetter {
                    task_id: task_id_of(&message),
                    task: None,
                    attempts: attempt,
                    reason: reason.clone(),
                    at: now(),
                };
                let _ = self.fleet.dead_letter(&letter).await;
                let _ = message.double_ack().await;
                return Ended::Dead(reason);
            }
        };
        let previous = self.fleet.run_status(&task.id).await.ok().flatten();
        if attempt > self.fleet.config().max_tries {
            let reason =
                previous.as_ref().and_then(|status| status.error.clone()).unwrap_or_else(|| {
                    "the worker that held it stopped before the run finished, on every try \
                     (killed, or the machine went away)"
                        .to_owned()
                });
            return self.bury(&message, task, attempt - 1, reason, previous).await;
        }
        if let Ok(mut shared) = self.shared.lock() {
            shared.current.insert(task.id.clone());
        }
        // Keep the task while the run is alive: progress every third of the ack wait.
        let keeper = {
            let message = Arc::clone(&message);
            let every = (self.fleet.config().ack_wait / 3).max(Duration::from_millis(100));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let _ = message.ack_with(AckKind::Progress).await;
                }
            })
        };
        let ended = tokio::select! {
            ended = self.attempt(&message, &task, attempt, previous, runner) => ended,
            () = abort.cancelled() => {
                let _ = message.ack_with(AckKind::Nak(None)).await;
                if let Ok(mut shared) = self.shared.lock() {
                    shared.summary.handed_back += 1;
                }
                Ended::HandedBack
            }
        };
        keeper.abort();
        if let Ok(mut shared) = self.shared.lock() {
            shared.current.remove(&task.id);
        }
        if !self.options.keep {
            let _ = std::fs::remove_dir_all(self.task_dir(&task.id));
        }
        ended
    }

    fn task_dir(&self, task_id: &str) -> PathBuf {
        self.options.work_root.join(&self.fleet.names().prefix).join(task_id)
    }

    async fn attempt(
        &self,
        message: &jetstream::Message,
        task: &Task,
        attempt: u32,
        previous: Option<RunStatus>,
        runner: Arc<dyn Runner>,
    ) -> Ended {
        let mut status = previous.unwrap_or_else(|| RunStatus {
            task_id: task.id.clone(),
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
        });
        status.state = TaskState::Running;
        status.worker = Some(self.options.name.clone());
        status.attempts = attempt;
        status.updated = now();
        let _ = self.fleet.put_status(&status).await;
        match self.try_once(task, attempt, status.clone(), runner).await {
            Ok(Some(done)) => {
                status.state = TaskState::Finished;
                status.run_id = Some(done.run_id);
                status.outcome = Some(done.outcome.clone());
                status.exit_code = Some(done.exit_code);
                status.final_text = Some(done.final_text);
                status.error = None;
                status.updated = now();
                if let Err(error) = self.fleet.put_status(&status).await {
                    return self.retry(message, task, attempt, status, error.to_string()).await;
                }
                let _ = message.double_ack().await;
                if let Ok(mut shared) = self.shared.lock() {
                    shared.summary.finished += 1;
                }
                Ended::Finished { outcome: done.outcome, exit_code: done.exit_code }
            }
            Ok(None) => Ended::Superseded,
            Err(reason) => self.retry(message, task, attempt, status, reason).await,
        }
    }

    /// A try failed: hand the task back for another try, or bury it after the last one.
    async fn retry(
        &self,
        message: &jetstream::Message,
        task: &Task,
        attempt: u32,
        mut status: RunStatus,
        reason: String,
    ) -> Ended {
        if let Ok(mut shared) = self.shared.lock() {
            shared.summary.failed += 1;
        }
        if attempt >= self.fleet.config().max_tries {
            return self.bury(message, task.clone(), attempt, reason, Some(status)).await;
        }
        status.state = TaskState::Queued;
        status.error = Some(reason.clone());
        status.updated = now();
        let _ = self.fleet.put_status(&status).await;
        let _ = message.ack_with(AckKind::Nak(Some(Duration::from_millis(500)))).await;
        Ended::Retried(reason)
    }

    async fn bury(
        &self,
        message: &jetstream::Message,
        task: Task,
        attempts: u32,
        reason: String,
        status: Option<RunStatus>,
    ) -> Ended {
        let mut status = status.unwrap_or_else(|| RunStatus {
            task_id: task.id.clone(),
            task: task.spec.task.clone(),
            state: TaskState::Dead,
            worker: None,
            run_id: None,
            attempts,
            outcome: None,
            exit_code: None,
            final_text: None,
            error: None,
            updated: now(),
        });
        status.state = TaskState::Dead;
        status.exit_code = Some(1);
        status.error = Some(reason.clone());
        status.updated = now();
        let letter = DeadLetter {
            task_id: task.id.clone(),
            task: Some(task),
            attempts,
            reason: reason.clone(),
            at: now(),
        };
        let _ = self.fleet.dead_letter(&letter).await;
        let _ = self.fleet.put_status(&status).await;
        let _ = message.double_ack().await;
        Ended::Dead(reason)
    }

    /// Prepares the task's folder and runs it. `Ok(None)`: another worker holds it now.
    async fn try_once(
        &self,
        task: &Task,
        attempt: u32,
        status: RunStatus,
        runner: Arc<dyn Runner>,
    ) -> std::result::Result<Option<Done>, String> {
        let folder = self.task_dir(&task.id);
        let workspace = folder.join("workspace");
        let runs_dir = folder.join("runs");
        if folder.exists() {
            std::fs::remove_dir_all(&folder)
                .map_err(|error| format!("{}: {error}", folder.display()))?;
        }
        std::fs::create_dir_all(&workspace)
            .map_err(|error| format!("{}: {error}", workspace.display()))?;
        std::fs::create_dir_all(&runs_dir)
            .map_err(|error| format!("{}: {error}", runs_dir.display()))?;
        let text = |error: Error| error.to_string();
        if let Some(object) = &task.workspace {
            let bytes = self.fleet.get_object(object).await.map_err(text)?.ok_or_else(|| {
                format!("the task's workspace {object} is not in the object store")
            })?;
            archive::apply(object, &bytes, &workspace).map_err(text)?;
        }
        let base = Manifest::of(&workspace).map_err(text)?;
        let changes = format!("{}/changes.tar", task.id);
        if let Some(bytes) = self.fleet.get_object(&changes).await.map_err(text)? {
            archive::apply(&changes, &bytes, &workspace).map_err(text)?;
        }
        let (events, last) = self.fleet.events(&task.id).await.map_err(text)?;
        let resume = match events.first() {
            None => None,
            Some(first) => {
                if !skills_agent_core::is_valid_run_id(&first.run_id) {
                    return Err(format!("the task's record names run `{}`", first.run_id));
                }
                let run_dir = runs_dir.join(&first.run_id);
                write_events(&run_dir, &events).map_err(text)?;
                self.fleet.restore_stored(&task.id, &events, &run_dir).await.map_err(text)?;
                Some(run_dir)
            }
        };
        let checkpoint =
            Checkpoint { workspace: workspace.clone(), runs_dir: runs_dir.clone(), base };
        let sink = Arc::new(
            EngineSink::new(self.fleet.clone(), &task.id, last, status, Some(checkpoint))
                .map_err(text)?,
        );
        // A run whose `run_finished` is the last stored event finished: only the task's
        // acknowledgement was lost (the worker died just after). Nothing is run again.
        if events.last().map(|event| event.kind) == Some(EventKind::RunFinished)
            && let Some(finished) = skills_agent_core::last_finished(&events)
        {
            return Ok(Some(Done {
                run_id: events.first().map(|event| event.run_id.clone()).unwrap_or_default(),
                outcome: finished.outcome.as_str().to_owned(),
                exit_code: finished.outcome.exit_code(),
                final_text: finished.final_text,
            }));
        }
        let job = Job {
            task: task.clone(),
            attempt,
            workspace: workspace.clone(),
            runs_dir: runs_dir.clone(),
            resume,
            sink: Arc::clone(&sink) as Arc<dyn EventSink>,
        };
        let result = runner.run(job).await;
        if sink.superseded() {
            return Ok(None);
        }
        let result = result?;
        sink.store_changes().await.map_err(text)?;
        if let Some(run_dir) = &result.run.run_dir {
            let bytes = archive::pack_folder(run_dir).map_err(text)?;
            self.fleet.put_object(&format!("{}/run.tar", task.id), bytes).await.map_err(text)?;
        }
        Ok(Some(Done {
            run_id: result.run.run_id,
            outcome: result.run.outcome.as_str().to_owned(),
            exit_code: result.exit_code,
            final_text: result.run.final_text,
        }))
    }
}

fn task_id_of(message: &jetstream::Message) -> String {
    serde_json::from_slice::<serde_json::Value>(&message.payload)
        .ok()
        .and_then(|value| value.get("id").and_then(|id| id.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "(unreadable task)".to_owned())
}
