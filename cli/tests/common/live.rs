//! What the tests on the embedded local model share: whether they run, and the bundled example
//! task (`examples/task`) they run.

use std::path::{Path, PathBuf};

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Whether the tests on the local model run: `SKILLS_AGENT_LOCAL_RUN` is set (CI), or the 1.5B
/// that `skills-agent model start` (the README's main job) started is running — the binary
/// under test finds it the same way; says which, or why not.
#[allow(dead_code)] // not every test file that includes this module needs the model
pub(crate) fn local_model_enabled() -> bool {
    if std::env::var_os("SKILLS_AGENT_LOCAL_RUN").is_some() {
        return true;
    }
    let size = skills_agent_models::ModelSize::B1_5;
    let running = skills_agent_models::cache_dir()
        .ok()
        .and_then(|cache| skills_agent_models::LocalModel::new(size, cache).running());
    if let Some(state) = running {
        eprintln!("using the running 1.5b model at {} (skills-agent model status)", state.url());
        return true;
    }
    eprintln!(
        "skipping: no 1.5b model is running (start it with `skills-agent model start`, or set \
         SKILLS_AGENT_LOCAL_RUN=1 to let the binary start it)"
    );
    false
}

/// Whether the tests that stop the local model's server run: only when `SKILLS_AGENT_LOCAL_RUN`
/// is set (CI), never on a model someone started for their own use; says why not.
#[allow(dead_code)] // not every test file that includes this module stops the server
pub(crate) fn server_may_be_stopped() -> bool {
    if std::env::var_os("SKILLS_AGENT_LOCAL_RUN").is_some() {
        return true;
    }
    eprintln!(
        "skipping: this test kills the local model's server; it runs when \
         SKILLS_AGENT_LOCAL_RUN=1 (CI sets it after starting the 1.5B)"
    );
    false
}

/// The `task:` and `expected:` lines of the example's TASK.md.
pub(crate) fn example_task() -> (String, String) {
    let text = std::fs::read_to_string(repo().join("examples/task/TASK.md")).unwrap();
    let line = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .map(|value| value.trim().to_owned())
            .unwrap_or_else(|| panic!("TASK.md has no `{key}` line"))
    };
    (line("task:"), line("expected:"))
}

/// A copy of the example task's workspace in `dir/task`, to run it elsewhere.
pub(crate) fn example_workspace(dir: &Path) -> PathBuf {
    let workspace = dir.join("task");
    std::fs::create_dir(&workspace).unwrap();
    for name in ["sales.csv", "TASK.md"] {
        std::fs::copy(repo().join("examples/task").join(name), workspace.join(name)).unwrap();
    }
    workspace
}
