//! Queries on a run directory: its record, whether its last piece of work finished, and the
//! question it waits to have answered.

use std::path::Path;

use agent_core::{Event, EventKind, read_events, record_format_mismatch};
use serde_json::Value;

/// The recorded events of the run in `run_dir`; an error saying it is no readable run directory.
pub(crate) fn run_events(run_dir: &Path) -> std::result::Result<Vec<Event>, String> {
    read_events(&run_dir.join("events.jsonl"))
        .map_err(|error| format!("{} is not a readable run directory: {error}", run_dir.display()))
}

/// Whether the run in `run_dir` finished its last piece of work (its record ends with
/// `run_finished`); an error when it is no run this build can continue (unreadable, or written
/// in another record format).
pub(crate) fn finished(run_dir: &Path) -> std::result::Result<bool, String> {
    let events = run_events(run_dir)?;
    // Refused here, before a model or MCP server is started for nothing.
    if let Some(mismatch) = record_format_mismatch(&events) {
        return Err(format!(
            "{}: {mismatch}; continue it with the build that wrote it, or start a new run \
             (`skills-agent replay {}` still shows it)",
            run_dir.display(),
            run_dir.display()
        ));
    }
    Ok(events.last().is_some_and(|event| event.kind == EventKind::RunFinished))
}

/// The question the run in `run_dir` waits to have answered (from `state.json`).
pub(crate) fn pending_question(run_dir: &Path) -> Option<String> {
    let state: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("state.json")).ok()?).ok()?;
    state.get("pending_question")?.as_str().map(str::to_owned)
}
