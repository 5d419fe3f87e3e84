//! Runs skills-agent tasks across machines on NATS JetStream.
//!
//! A fleet is a set of names under one prefix on one NATS server (or cluster) with JetStream
//! on: a work-queue stream of tasks, a stream of run events with one subject per task, a KV
//! bucket of run states, a KV bucket of worker heartbeats, an object store of workspaces and
//! run files, and a dead-letter stream. [`Fleet::connect`] creates what is missing.
//!
//! - [`Fleet::submit`] packs a workspace ([`archive`]), stores it, and queues a [`Task`].
//! - A [`Worker`] takes tasks, unpacks each into a private folder, and runs it through the
//!   caller's [`Runner`] (the CLI runs it as `run` does) with an [`EngineSink`] on the record:
//!   every event is stored in the engine, acknowledged, before the run goes on. A task whose
//!   worker died is taken by another worker, which rebuilds the run directory from the stored
//!   events and resumes it (nothing recorded as done is done again).
//! - [`Fleet::follow`], [`Fleet::status`], [`Fleet::runs`] and [`Fleet::fetch`] show the work.
//!
//! The crate knows agent-core's events and nothing of models, skills or sandboxes: what a run
//! is, is the [`Runner`]'s business.
//!
//! ```no_run
//! use skills_agent_fleet::{Fleet, FleetConfig, TaskSpec};
//!
//! # async fn example() -> Result<(), skills_agent_fleet::Error> {
//! let fleet = Fleet::connect(FleetConfig::new("nats://127.0.0.1:4222")).await?;
//! let spec = TaskSpec { task: "How many lines does README.md have?".into(), ..TaskSpec::default() };
//! let task = fleet.submit(spec, Some(std::path::Path::new("."))).await?;
//! println!("queued {}", task.id);
//! let status = fleet.status().await?;
//! println!("{} workers, {} queued", status.workers.len(), status.queued);
//! # Ok(())
//! # }
//! ```

pub mod archive;
mod config;
mod engine;
mod error;
mod sink;
mod task;
mod worker;

pub use config::{Credentials, DEFAULT_PREFIX, FleetConfig, Names};
pub use engine::{Fetched, Fleet};
pub use error::{Error, Result};
pub use sink::{Checkpoint, EngineSink};
pub use task::{
    DeadLetter, FleetStatus, RunStatus, Task, TaskSpec, TaskState, WorkerInfo, is_task_id,
};
pub use worker::{Ended, Job, JobResult, Log, Runner, Worker, WorkerOptions, WorkerSummary};

/// The README's Rust examples, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
