//! Events (seed 002 §4.4): the envelope `{ts, run_id, seq, turn, type, data}`, the typed
//! payloads that are the record format ([`Payload`], `payload.rs`), the one reader of records
//! (`read.rs`), the sinks that consume events (JSONL file, in-process broadcast, memory,
//! console), and the bus that serialises, numbers, redacts and fans them out. `seq` is
//! strictly increasing within a run.

use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::rundir::Redactor;

pub mod payload;
mod read;

pub use payload::*;
pub(crate) use read::read_lines;
pub use read::{last_finished, read_complete_events, read_events};

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// When it happened (RFC 3339, UTC, milliseconds).
    pub ts: String,
    /// The run.
    pub run_id: String,
    /// Position in the run, from 1, strictly increasing.
    pub seq: u64,
    /// The turn (0 before the first turn).
    pub turn: u32,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// The details, whose shape depends on `kind`: a [`Payload`], read with
    /// [`Event::payload`].
    pub data: Value,
}

/// Keys whose values depend on the clock, left out when two runs are compared.
const CLOCK_KEYS: [&str; 3] = ["ts", "duration_ms", "elapsed_ms"];

/// The event as a JSON value without its clock-dependent fields (`ts`, `duration_ms`,
/// `elapsed_ms`, at any depth) and its `seq` (replay compares sequences, and leaves out
/// `assistant_delta` events, whose cut depends on the provider's stream).
pub fn comparable(event: &Event) -> Value {
    let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
    strip_clock(&mut value);
    if let Value::Object(map) = &mut value {
        map.remove("seq");
    }
    value
}

fn strip_clock(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in CLOCK_KEYS {
                map.remove(key);
            }
            map.values_mut().for_each(strip_clock);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_clock),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
    }
}

/// A consumer of events.
pub trait EventSink: Send + Sync + fmt::Debug {
    /// Takes one event. An error stops the run (nothing may be lost silently).
    fn record(&self, event: &Event) -> Result<()>;
    /// Called at the end of every turn and of the run (the JSONL sink fsyncs here).
    fn flush(&self) -> Result<()> {
        Ok(())
    }
}

/// Appends each event as one JSON line with one `write` call; `flush` fsyncs.
#[derive(Debug)]
pub struct JsonlSink {
    path: PathBuf,
    file: Mutex<File>,
}

impl JsonlSink {
    /// Opens (creating or appending to) `path`.
    pub fn open(path: &Path) -> Result<JsonlSink> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| Error::io(path, error))?;
        Ok(JsonlSink { path: path.to_owned(), file: Mutex::new(file) })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl EventSink for JsonlSink {
    fn record(&self, event: &Event) -> Result<()> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        lock(&self.file).write_all(&line).map_err(|error| Error::io(&self.path, error))
    }

    fn flush(&self) -> Result<()> {
        lock(&self.file).sync_data().map_err(|error| Error::io(&self.path, error))
    }
}

/// Sends every event to in-process subscribers (a tokio broadcast channel). Slow subscribers
/// lose the oldest events (they see `RecvError::Lagged`); the run never waits for them.
#[derive(Debug, Clone)]
pub struct BroadcastSink {
    sender: tokio::sync::broadcast::Sender<Event>,
}

impl BroadcastSink {
    /// A channel keeping up to `capacity` events per subscriber.
    pub fn new(capacity: usize) -> BroadcastSink {
        BroadcastSink { sender: tokio::sync::broadcast::channel(capacity.max(1)).0 }
    }

    /// A new subscriber, receiving events from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Event> {
        self.sender.subscribe()
    }
}

impl EventSink for BroadcastSink {
    fn record(&self, event: &Event) -> Result<()> {
        // No subscriber is not an error.
        let _ = self.sender.send(event.clone());
        Ok(())
    }
}

/// Keeps every event in memory (tests, replay).
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<Event>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.events).clone()
    }
}

impl EventSink for MemorySink {
    fn record(&self, event: &Event) -> Result<()> {
        lock(&self.events).push(event.clone());
        Ok(())
    }
}

/// Numbers, redacts and fans out events; shared with the approval wrapper.
#[derive(Debug, Clone)]
pub(crate) struct EventBus {
    inner: Arc<Mutex<BusInner>>,
}

#[derive(Debug)]
struct BusInner {
    run_id: String,
    seq: u64,
    turn: u32,
    sinks: Vec<Arc<dyn EventSink>>,
    redactor: Arc<Redactor>,
    /// Recorded events a resumed run must reproduce before it writes anything new.
    expected: VecDeque<Event>,
    /// The last `seq` of the record; new events continue after it.
    resume_last_seq: u64,
    resume_path: PathBuf,
    failure: Option<String>,
}

impl EventBus {
    pub(crate) fn new(
        run_id: &str,
        sinks: Vec<Arc<dyn EventSink>>,
        redactor: Arc<Redactor>,
    ) -> EventBus {
        EventBus {
            inner: Arc::new(Mutex::new(BusInner {
                run_id: run_id.to_owned(),
                seq: 0,
                turn: 0,
                sinks,
                redactor,
                expected: VecDeque::new(),
                resume_last_seq: 0,
                resume_path: PathBuf::new(),
                failure: None,
            })),
        }
    }

    /// Resuming: the first events emitted must equal `recorded` (clock fields aside) and are
    /// not written again.
    pub(crate) fn expect(&self, recorded: Vec<Event>, last_seq: u64, run_dir: &Path) {
        let mut inner = lock(&self.inner);
        inner.expected = recorded.into();
        inner.resume_last_seq = last_seq;
        inner.resume_path = run_dir.to_owned();
    }

    /// Whether recorded events are still being reproduced.
    pub(crate) fn catching_up(&self) -> bool {
        !lock(&self.inner).expected.is_empty()
    }

    /// The `seq` the next event emitted live will have.
    pub(crate) fn next_seq(&self) -> u64 {
        let inner = lock(&self.inner);
        match inner.expected.front() {
            Some(recorded) => recorded.seq,
            None => inner.seq.max(inner.resume_last_seq) + 1,
        }
    }

    pub(crate) fn set_turn(&self, turn: u32) {
        lock(&self.inner).turn = turn;
    }

    pub(crate) fn redactor(&self) -> Arc<Redactor> {
        Arc::clone(&lock(&self.inner).redactor)
    }

    /// Emits one event. Errors of sinks (and resume divergences) stop the run.
    pub(crate) fn emit(&self, payload: impl Into<Payload>) -> Result<()> {
        let payload = payload.into();
        let (kind, mut data) = (payload.kind(), payload.to_data()?);
        let mut inner = lock(&self.inner);
        if let Some(failure) = &inner.failure {
            return Err(Error::Resume {
                path: inner.resume_path.clone(),
                message: failure.clone(),
            });
        }
        inner.redactor.redact_value(&mut data);
        if inner.expected.is_empty() {
            inner.seq = inner.seq.max(inner.resume_last_seq);
        }
        inner.seq += 1;
        let event = Event {
            ts: now_rfc3339(),
            run_id: inner.run_id.clone(),
            seq: inner.seq,
            turn: inner.turn,
            kind,
            data,
        };
        if let Some(recorded) = inner.expected.pop_front() {
            inner.seq = recorded.seq;
            let (got, want) = (comparable(&event), comparable(&recorded));
            if got != want {
                let message = format!(
                    "event seq {} differs from the record: recorded {want}, re-run gave {got}",
                    event.seq
                );
                inner.failure = Some(message.clone());
                return Err(Error::Resume { path: inner.resume_path.clone(), message });
            }
            return Ok(());
        }
        for sink in &inner.sinks {
            sink.record(&event)?;
        }
        Ok(())
    }

    /// Emits from a context that cannot return an error (the approver): the failure is kept
    /// and returned by the next `emit`.
    pub(crate) fn emit_or_keep(&self, payload: impl Into<Payload>) {
        if let Err(error) = self.emit(payload) {
            let mut inner = lock(&self.inner);
            if inner.failure.is_none() {
                inner.failure = Some(error.to_string());
            }
        }
    }

    pub(crate) fn flush(&self) -> Result<()> {
        let inner = lock(&self.inner);
        for sink in &inner.sinks {
            sink.flush()?;
        }
        Ok(())
    }
}

/// The current time as RFC 3339 in UTC with milliseconds (`2026-02-03T12:34:56.789Z`).
pub(crate) fn now_rfc3339() -> String {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, time) = crate::rundir::civil(since.as_secs());
    format!("{date}T{time}.{:03}Z", since.subsec_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparison_ignores_the_clock_at_any_depth() {
        let event = |ts: &str, ms: u64| Event {
            ts: ts.into(),
            run_id: "r".into(),
            seq: 1,
            turn: 1,
            kind: EventKind::ActionExecuted,
            data: serde_json::json!({"duration_ms": ms, "result": {"elapsed_ms": ms, "x": 1}}),
        };
        assert_eq!(comparable(&event("a", 1)), comparable(&event("b", 2)));
    }
}
