//! The built-in tools: a to-do list and a schedule kept in the workspace, in
//! `.skills-agent/store.json`. The `todo` and `schedule` actions (when
//! [`GuardConfig::builtin_tools`](crate::GuardConfig) is on) and the `/todo`, `/schedule` and
//! `/view` slash commands use them. Deterministic, no model; the store is rewritten whole
//! through a temporary file and a rename, so a crash leaves the old or the new list.
//!
//! Commands (the text after the tool name):
//! - `todo list` · `todo add TEXT` · `todo done N` · `todo remove N`
//! - `schedule list` · `schedule add WHEN :: WHAT` · `schedule remove N`
//! - `view` (both lists)

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Execution;
use crate::state::ObservationStatus;

/// The store's path inside the workspace.
pub const STORE_PATH: &str = ".skills-agent/store.json";
/// Items one list may hold.
const MAX_ITEMS: usize = 500;
/// Characters one item may hold.
const MAX_TEXT: usize = 500;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Store {
    next_id: u32,
    todos: Vec<TodoItem>,
    schedule: Vec<ScheduleItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TodoItem {
    id: u32,
    text: String,
    done: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ScheduleItem {
    id: u32,
    when: String,
    what: String,
}

/// A slash command read from a user's input: `/todo add milk` → `("todo", "add milk")`.
/// `None` when the input is not one of the built-in commands (`/view`, `/todo`, `/schedule`).
pub fn parse_slash(input: &str) -> Option<(&'static str, String)> {
    let rest = input.trim().strip_prefix('/')?;
    let (name, command) = match rest.split_once(char::is_whitespace) {
        Some((name, command)) => (name, command.trim()),
        None => (rest, ""),
    };
    let tool = match name {
        "todo" => "todo",
        "schedule" => "schedule",
        "view" => "view",
        _ => return None,
    };
    let command = if command.is_empty() { "list" } else { command };
    Some((tool, command.to_owned()))
}

/// Runs `tool` (`todo`, `schedule`, `view`) with `command` over the store in `workspace`.
pub(crate) fn run(workspace: &Path, tool: &str, command: &str) -> Execution {
    let path = workspace.join(STORE_PATH);
    let mut store = match read(&path) {
        Ok(store) => store,
        Err(message) => return failure(message),
    };
    let before = store.clone();
    let outcome = match tool {
        "todo" => todo(&mut store, command),
        "schedule" => schedule(&mut store, command),
        "view" => Ok(view(&store)),
        other => Err(format!("there is no built-in tool `{other}`; known: todo, schedule, view")),
    };
    let text = match outcome {
        Ok(text) => text,
        Err(message) => return failure(message),
    };
    if store != before
        && let Err(message) = write(&path, &store)
    {
        return failure(message);
    }
    Execution {
        status: ObservationStatus::Ok,
        result: json!({"tool": tool, "command": command, "todos": store.todos.len(), "schedule": store.schedule.len()}),
        content: text,
    }
}

fn failure(message: String) -> Execution {
    Execution {
        status: ObservationStatus::Failed,
        result: json!({"error": message}),
        content: message,
    }
}

fn read(path: &Path) -> Result<Store, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
            format!("the store {} is not readable JSON ({error}); fix or delete it", path.display())
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
        Err(error) => Err(format!("cannot read the store {}: {error}", path.display())),
    }
}

fn write(path: &Path, store: &Store) -> Result<(), String> {
    let fail = |path: &PathBuf, error: std::io::Error| {
        format!("cannot write the store {}: {error}", path.display())
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| fail(&parent.to_owned(), error))?;
    }
    let bytes = serde_json::to_vec_pretty(store).map_err(|error| error.to_string())?;
    let temporary = path.with_extension("json.partial");
    std::fs::write(&temporary, bytes).map_err(|error| fail(&temporary, error))?;
    std::fs::rename(&temporary, path).map_err(|error| fail(&path.to_owned(), error))
}

fn split(command: &str) -> (&str, &str) {
    let command = command.trim();
    match command.split_once(char::is_whitespace) {
        Some((verb, rest)) => (verb, rest.trim()),
        None => (command, ""),
    }
}

fn text_arg(rest: &str, usage: &str) -> Result<String, String> {
    if rest.is_empty() {
        return Err(format!("missing text: {usage}"));
    }
    if rest.chars().count() > MAX_TEXT {
        return Err(format!("the text is longer than {MAX_TEXT} characters"));
    }
    Ok(rest.replace(['\n', '\r'], " "))
}

fn id_arg(rest: &str, verb: &str, tool: &str) -> Result<u32, String> {
    rest.trim_start_matches('#').parse().map_err(|_| {
        format!("`{tool} {verb}` needs an item number (see `{tool} list`), got `{rest}`")
    })
}

fn todo(store: &mut Store, command: &str) -> Result<String, String> {
    let (verb, rest) = split(command);
    match verb {
        "" | "list" => Ok(todo_list(store)),
        "add" => {
            let text = text_arg(rest, "todo add TEXT")?;
            if store.todos.len() >= MAX_ITEMS {
                return Err(format!("the to-do list is full ({MAX_ITEMS} items)"));
            }
            store.next_id += 1;
            let id = store.next_id;
            store.todos.push(TodoItem { id, text: text.clone(), done: false });
            Ok(format!("added to-do #{id}: {text}"))
        }
        "done" | "undo" => {
            let id = id_arg(rest, verb, "todo")?;
            let item = store
                .todos
                .iter_mut()
                .find(|item| item.id == id)
                .ok_or_else(|| format!("there is no to-do #{id} (see `todo list`)"))?;
            item.done = verb == "done";
            Ok(format!(
                "to-do #{id} marked {}: {}",
                if item.done { "done" } else { "open" },
                item.text
            ))
        }
        "remove" => {
            let id = id_arg(rest, verb, "todo")?;
            let at = store
                .todos
                .iter()
                .position(|item| item.id == id)
                .ok_or_else(|| format!("there is no to-do #{id} (see `todo list`)"))?;
            let item = store.todos.remove(at);
            Ok(format!("removed to-do #{id}: {}", item.text))
        }
        other => Err(format!(
            "unknown todo command `{other}`; use: list, add TEXT, done N, undo N, remove N"
        )),
    }
}

fn schedule(store: &mut Store, command: &str) -> Result<String, String> {
    let (verb, rest) = split(command);
    match verb {
        "" | "list" => Ok(schedule_list(store)),
        "add" => {
            let usage =
                "schedule add WHEN :: WHAT (e.g. `schedule add 2026-11-24 09:00 :: stand-up`)";
            let Some((when, what)) = rest.split_once("::") else {
                return Err(format!("missing `::` between when and what: {usage}"));
            };
            let when = text_arg(when.trim(), usage)?;
            let what = text_arg(what.trim(), usage)?;
            if store.schedule.len() >= MAX_ITEMS {
                return Err(format!("the schedule is full ({MAX_ITEMS} entries)"));
            }
            store.next_id += 1;
            let id = store.next_id;
            store.schedule.push(ScheduleItem { id, when: when.clone(), what: what.clone() });
            // Kept in order of `when` as written (ISO dates sort correctly), then of entry.
            store.schedule.sort_by(|a, b| a.when.cmp(&b.when).then(a.id.cmp(&b.id)));
            Ok(format!("scheduled #{id}: {when} — {what}"))
        }
        "remove" => {
            let id = id_arg(rest, verb, "schedule")?;
            let at =
                store.schedule.iter().position(|item| item.id == id).ok_or_else(|| {
                    format!("there is no schedule entry #{id} (see `schedule list`)")
                })?;
            let item = store.schedule.remove(at);
            Ok(format!("removed schedule entry #{id}: {} — {}", item.when, item.what))
        }
        other => Err(format!(
            "unknown schedule command `{other}`; use: list, add WHEN :: WHAT, remove N"
        )),
    }
}

fn todo_list(store: &Store) -> String {
    if store.todos.is_empty() {
        return "the to-do list is empty".to_owned();
    }
    let open = store.todos.iter().filter(|item| !item.done).count();
    let mut text = format!("to-do list ({open} open, {} done):", store.todos.len() - open);
    for item in &store.todos {
        let mark = if item.done { "x" } else { " " };
        let _ = write!(text, "\n[{mark}] #{} {}", item.id, item.text);
    }
    text
}

fn schedule_list(store: &Store) -> String {
    if store.schedule.is_empty() {
        return "the schedule is empty".to_owned();
    }
    let mut text = format!("schedule ({} entries):", store.schedule.len());
    for item in &store.schedule {
        let _ = write!(text, "\n#{} {} — {}", item.id, item.when, item.what);
    }
    text
}

fn view(store: &Store) -> String {
    format!("{}\n{}", todo_list(store), schedule_list(store))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_ok(workspace: &Path, tool: &str, command: &str) -> String {
        let execution = run(workspace, tool, command);
        assert_eq!(execution.status, ObservationStatus::Ok, "{}", execution.content);
        execution.content
    }

    #[test]
    fn slash_commands_are_read_and_others_are_not() {
        assert_eq!(parse_slash("/todo add milk "), Some(("todo", "add milk".to_owned())));
        assert_eq!(parse_slash("  /view"), Some(("view", "list".to_owned())));
        assert_eq!(parse_slash("/schedule"), Some(("schedule", "list".to_owned())));
        assert_eq!(parse_slash("/unknown x"), None);
        assert_eq!(parse_slash("todo add"), None);
        assert_eq!(parse_slash("/"), None);
    }

    #[test]
    fn lists_persist_in_the_workspace() {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path();
        assert_eq!(run_ok(root, "todo", "list"), "the to-do list is empty");
        assert_eq!(run_ok(root, "todo", "add buy milk"), "added to-do #1: buy milk");
        assert_eq!(run_ok(root, "todo", "add call\nBob"), "added to-do #2: call Bob");
        assert_eq!(run_ok(root, "todo", "done #1"), "to-do #1 marked done: buy milk");
        assert_eq!(
            run_ok(root, "schedule", "add 2026-11-24 09:00 :: stand-up"),
            "scheduled #3: 2026-11-24 09:00 — stand-up"
        );
        run_ok(root, "schedule", "add 2026-11-23 :: review");
        assert_eq!(
            run_ok(root, "view", ""),
            "to-do list (1 open, 1 done):\n[x] #1 buy milk\n[ ] #2 call Bob\n\
             schedule (2 entries):\n#4 2026-11-23 — review\n#3 2026-11-24 09:00 — stand-up"
        );
        assert_eq!(run_ok(root, "todo", "remove 2"), "removed to-do #2: call Bob");
        assert!(root.join(STORE_PATH).is_file());
    }

    #[test]
    fn bad_commands_fail_with_what_to_do() {
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path();
        for (tool, command, expected) in [
            ("todo", "done 9", "there is no to-do #9"),
            ("todo", "done x", "needs an item number"),
            ("todo", "add", "missing text"),
            ("todo", "frobnicate", "unknown todo command `frobnicate`"),
            ("schedule", "add tomorrow lunch", "missing `::`"),
            ("schedule", "add :: lunch", "missing text"),
            ("calendar", "list", "no built-in tool `calendar`"),
        ] {
            let execution = run(root, tool, command);
            assert_eq!(execution.status, ObservationStatus::Failed);
            assert!(
                execution.content.contains(expected),
                "{tool} {command}: {}",
                execution.content
            );
        }
        assert!(!root.join(STORE_PATH).exists(), "failed commands write nothing");
        std::fs::create_dir_all(root.join(".skills-agent")).unwrap();
        std::fs::write(root.join(STORE_PATH), b"{not json").unwrap();
        let execution = run(root, "todo", "list");
        assert_eq!(execution.status, ObservationStatus::Failed);
        assert!(execution.content.contains("fix or delete it"), "{}", execution.content);
    }
}
