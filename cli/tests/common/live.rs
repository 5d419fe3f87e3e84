//! What the tests on the embedded local model share: whether they run, and the bundled example
//! task (`examples/task`) they run.

use std::path::{Path, PathBuf};

/// The repository's root.
pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// Whether the tests on the local model run (`SKILLS_AGENT_LOCAL_RUN` set); says why not.
pub(crate) fn local_model_enabled() -> bool {
    if std::env::var_os("SKILLS_AGENT_LOCAL_RUN").is_some() {
        return true;
    }
    eprintln!(
        "skipping: SKILLS_AGENT_LOCAL_RUN is not set (start the model with `cargo xtask \
         local-llm start --size 1.5b` and set SKILLS_AGENT_LOCAL_RUN=1)"
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
