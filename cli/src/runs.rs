//! Queries on a run directory: its record, whether its last piece of work finished, the
//! question it waits to have answered, and the settings a resume takes from it.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde_json::Value;
use skills_agent_core::{Event, EventKind, Payload, read_complete_events, record_format_mismatch};

use crate::config::Approval;
use crate::launch::{CommonArgs, usage};

/// The recorded events of the run in `run_dir` (a torn last line, which a resume cuts off,
/// left out); an error saying it is no readable run directory.
pub(crate) fn run_events(run_dir: &Path) -> std::result::Result<Vec<Event>, String> {
    read_complete_events(&run_dir.join("events.jsonl"))
        .map_err(|error| format!("{} is not a readable run directory: {error}", run_dir.display()))
}

/// Whether the run in `run_dir`, whose record is `events`, finished its last piece of work (its
/// record ends with `run_finished`); an error when it is no run this build can continue
/// (written in another record format).
pub(crate) fn finished(run_dir: &Path, events: &[Event]) -> std::result::Result<bool, String> {
    // Refused here, before a model or MCP server is started for nothing.
    if let Some(mismatch) = record_format_mismatch(events) {
        return Err(format!(
            "{}: {mismatch}; continue it with the build that wrote it, or start a new run \
             (`skills-agent replay {}` still shows it)",
            run_dir.display(),
            run_dir.display()
        ));
    }
    Ok(events.last().is_some_and(|event| event.kind == EventKind::RunFinished))
}

/// The action the run was about to execute, or was executing, when it stopped: its record
/// ends with the action validated and no result. A resume runs it again, so one with effects
/// (a script, an external tool) may apply them twice; `None` for any other ending.
pub(crate) fn unrecorded_call(events: &[Event]) -> Option<String> {
    let last = events.last().filter(|event| event.kind == EventKind::ActionValidated)?;
    let Ok(Payload::ActionValidated(validated)) = last.payload() else {
        return None;
    };
    validated
        .action
        .filter(|action| validated.valid && action.is_call())
        .map(|action| action.summary())
}

/// Whether the run whose record is `events` finished its last piece of work with outcome
/// `error` (the model server died, the model calls kept failing): `resume` continues such a run.
pub(crate) fn ended_in_error(events: &[Event]) -> bool {
    events.last().is_some_and(|event| event.kind == EventKind::RunFinished)
        && skills_agent_core::last_finished(events)
            .is_some_and(|finished| finished.outcome == skills_agent_core::Outcome::Error)
}

/// The question the run in `run_dir` waits to have answered (from `state.json`).
pub(crate) fn pending_question(run_dir: &Path) -> Option<String> {
    let state: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("state.json")).ok()?).ok()?;
    state.get("pending_question")?.as_str().map(str::to_owned)
}

/// The flags a resume of the run in `run_dir` runs with: the ones given, and for the rest what
/// the run began with (`run_started`: model spec, approval, extra skill roots, workspace), so
/// that the run goes on as it started. A flag that differs from the record is used and said
/// on stderr; a recorded workspace or skill root that is gone, or a format-3 record (which
/// does not name its model) resumed without `--model`, is a usage error naming the flag to
/// pass. Also counts the recorded model answers, where a `mock:` model resumes.
pub(crate) fn resume_args(run_dir: &Path, common: CommonArgs) -> anyhow::Result<CommonArgs> {
    let events = run_events(run_dir).map_err(usage)?;
    resume_args_of(run_dir, &events, common)
}

/// [`resume_args`] from the run's record, `events`, read already.
pub(crate) fn resume_args_of(
    run_dir: &Path,
    events: &[Event],
    mut common: CommonArgs,
) -> anyhow::Result<CommonArgs> {
    let Some(Ok(Payload::RunStarted(start))) = events.first().map(Event::payload) else {
        return Err(usage(format!(
            "{}: the record does not start with run_started",
            run_dir.display()
        )));
    };
    let quiet = common.quiet || common.json;
    let say = |text: String| {
        if !quiet {
            eprintln!("skills-agent: {text}");
        }
    };
    // A `mock:` file of the recorded spec holds every answer of the run, the recorded ones
    // first; another one given now holds the answers from here on.
    let mut same_model = false;
    match &start.origin {
        Some(origin) => {
            match &common.model {
                Some(model) if *model != origin.model => say(format!(
                    "resuming with --model {model} instead of the recorded {}",
                    origin.model
                )),
                Some(_) => same_model = true,
                None => {
                    common.model = Some(origin.model.clone());
                    same_model = true;
                }
            }
            let recorded = Approval::from_str(&origin.approval, true).ok();
            match (common.approval, recorded) {
                (Some(given), Some(recorded)) if given != recorded => say(format!(
                    "resuming with --approval {} instead of the recorded {}",
                    approval_name(given),
                    origin.approval
                )),
                (None, recorded) => common.approval = recorded,
                _ => {}
            }
        }
        None if common.model.is_none() => {
            return Err(usage(format!(
                "{}: the record (format {}) does not name the model, skill roots or approval \
                 the run began with; resume it with them given: --model SPEC, and --skills DIR \
                 and --approval MODE if the run used them",
                run_dir.display(),
                start.record_format
            )));
        }
        None => say(format!(
            "resuming a record of format {} with the flags given (it does not name its model, \
             skill roots or approval)",
            start.record_format
        )),
    }
    let recorded = PathBuf::from(&start.workspace);
    match &common.workspace {
        Some(given) => {
            if given.canonicalize().ok().as_deref() != Some(recorded.as_path()) {
                say(format!(
                    "resuming in --workspace {} instead of the recorded {}",
                    given.display(),
                    recorded.display()
                ));
            }
        }
        None if recorded.is_dir() => common.workspace = Some(recorded),
        None => {
            return Err(usage(format!(
                "{}: the run's workspace {} is gone; pass --workspace DIR to resume it in another \
                 folder",
                run_dir.display(),
                recorded.display()
            )));
        }
    }
    if !common.skills.is_empty() && !start.skill_roots.is_empty() {
        say("resuming with the --skills given in addition to the recorded skill roots".to_owned());
    }
    for root in start.skill_roots.iter().filter(|root| root.kind == "extra") {
        let path = PathBuf::from(&root.path);
        if common.skills.contains(&path) {
            continue;
        }
        if !path.is_dir() {
            return Err(usage(format!(
                "{}: the run's skill root {} is gone; restore it, or pass --skills DIR with the \
                 same skills",
                run_dir.display(),
                path.display()
            )));
        }
        common.skills.push(path);
    }
    if common.runs_dir.is_none() {
        common.runs_dir =
            run_dir.canonicalize().ok().and_then(|dir| dir.parent().map(Path::to_owned));
    }
    if same_model {
        common.answered =
            events.iter().filter(|event| event.kind == EventKind::ModelResponse).count();
    }
    Ok(common)
}

/// The flag's spelling of an approval mode.
fn approval_name(approval: Approval) -> String {
    approval.to_possible_value().map(|value| value.get_name().to_owned()).unwrap_or_default()
}
