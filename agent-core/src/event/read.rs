//! The one reader of records: `events.jsonl` as [`Event`]s, in order, each line checked
//! (an event envelope, `seq` increasing); [`Event::payload`] then types an event's `data`.
//! Replay, resume, `serve`, `runs` and the bench all read through here.

use std::io::BufRead;
use std::path::Path;

use crate::error::{Error, Result};
use crate::event::{Event, EventKind, Payload, RunFinished};

/// Reads every event of an `events.jsonl` file.
///
/// # Errors
///
/// [`Error::Recording`] naming the line that is not an event.
pub fn read_events(path: &Path) -> Result<Vec<Event>> {
    Ok(read_lines(path, false)?.0)
}

/// Reads the complete events of an `events.jsonl` that may still be written: a last line
/// without its newline (a write in progress, or torn by a crash) is left out.
///
/// # Errors
///
/// [`Error::Recording`] naming a complete line that is not an event.
pub fn read_complete_events(path: &Path) -> Result<Vec<Event>> {
    Ok(read_lines(path, true)?.0)
}

/// The events, the byte length of the valid lines, and where the last valid line starts (a
/// torn last line is left out when `tolerate_torn_tail`, else an error).
pub(crate) fn read_lines(path: &Path, tolerate_torn_tail: bool) -> Result<(Vec<Event>, u64, u64)> {
    let file = std::fs::File::open(path).map_err(|error| Error::io(path, error))?;
    let mut reader = std::io::BufReader::new(file);
    let mut events = Vec::new();
    let mut valid = 0u64;
    let mut last_start = 0u64;
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line).map_err(|error| Error::io(path, error))?;
        if read == 0 {
            break;
        }
        number += 1;
        let complete = line.ends_with(b"\n");
        match serde_json::from_slice::<Event>(&line) {
            Ok(event) if complete => {
                if let Some(previous) = events.last().map(|event: &Event| event.seq)
                    && event.seq <= previous
                {
                    return Err(Error::Recording {
                        path: path.to_owned(),
                        message: format!(
                            "line {number}: seq {} does not follow {previous}",
                            event.seq
                        ),
                    });
                }
                events.push(event);
                last_start = valid;
                valid += read as u64;
            }
            Ok(_) | Err(_) if tolerate_torn_tail && !complete => break,
            Ok(_) => {
                return Err(Error::Recording {
                    path: path.to_owned(),
                    message: format!("line {number}: the last line has no newline (a torn write)"),
                });
            }
            Err(error) => {
                return Err(Error::Recording {
                    path: path.to_owned(),
                    message: format!("line {number}: not an event: {error}"),
                });
            }
        }
    }
    Ok((events, valid, last_start))
}

/// The last `run_finished` of a record (how its last finished piece of work ended), typed;
/// `None` when no piece of work finished or its data is not a `run_finished`.
pub fn last_finished(events: &[Event]) -> Option<RunFinished> {
    let event = events.iter().rev().find(|event| event.kind == EventKind::RunFinished)?;
    match event.payload() {
        Ok(Payload::RunFinished(finished)) => Some(finished),
        _ => None,
    }
}
