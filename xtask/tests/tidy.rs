//! The tidy checks: the real workspace passes them, and each rule catches its violation.

#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

use std::fs;
use std::path::Path;

use xtask::tidy;

#[test]
fn workspace_is_tidy() {
    let root = tidy::workspace_root();
    let violations = tidy::check(&root).expect("workspace manifests are readable");
    let rendered: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(rendered.is_empty(), "tidy violations:\n{}", rendered.join("\n"));
}

fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn fake_workspace(stream_json_deps: &str) -> tempdir::Dir {
    let dir = tempdir::Dir::new();
    write(dir.path(), "Cargo.toml", "[workspace]\nmembers = [\"stream-json\", \"agent-core\"]\n");
    write(
        dir.path(),
        "stream-json/Cargo.toml",
        &format!(
            "[package]\nname = \"stream-json\"\n[dependencies]\n{stream_json_deps}\n[lints]\nworkspace = true\n"
        ),
    );
    write(
        dir.path(),
        "agent-core/Cargo.toml",
        "[package]\nname = \"skills-agent-core\"\n[dependencies]\nstream-json.workspace = true\n\
         [lints]\nworkspace = true\n",
    );
    write(dir.path(), "stream-json/src/lib.rs", "//! A leaf.\n");
    write(dir.path(), "agent-core/src/lib.rs", "//! The hub.\n");
    dir
}

#[test]
fn allowed_direction_passes() {
    let dir = fake_workspace("serde.workspace = true");
    assert_eq!(tidy::check(dir.path()).unwrap(), vec![]);
}

#[test]
fn upward_dependency_is_reported() {
    let dir = fake_workspace("skills-agent-core.workspace = true");
    let violations = tidy::check_manifests(dir.path()).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].path, Path::new("stream-json/Cargo.toml"));
    assert!(violations[0].message.contains("against the allowed direction"), "{violations:?}");
}

#[test]
fn upward_dev_dependency_and_rename_are_reported() {
    let dir = fake_workspace(
        "[dev-dependencies]\ncore = { package = \"skills-agent-core\", workspace = true }",
    );
    let violations = tidy::check_manifests(dir.path()).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].message.contains("[dev-dependencies]"), "{violations:?}");
}

#[test]
fn pinned_version_and_missing_lints_are_reported() {
    let dir = fake_workspace("serde = \"1\"");
    write(dir.path(), "agent-core/Cargo.toml", "[package]\nname = \"skills-agent-core\"\n");
    let messages: Vec<String> =
        tidy::check_manifests(dir.path()).unwrap().into_iter().map(|v| v.message).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("`serde` does not use `workspace = true`")));
    assert!(messages.iter().any(|m| m.contains("[lints] workspace = true")));
}

#[test]
fn unknown_crate_is_reported() {
    let dir = fake_workspace("");
    write(dir.path(), "Cargo.toml", "[workspace]\nmembers = [\"stream-json\", \"mystery\"]\n");
    write(
        dir.path(),
        "mystery/Cargo.toml",
        "[package]\nname = \"mystery\"\n[lints]\nworkspace = true\n",
    );
    let violations = tidy::check_manifests(dir.path()).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].message.contains("not in the dependency table"));
}

#[test]
fn missing_file_header_is_reported() {
    let dir = fake_workspace("");
    write(dir.path(), "stream-json/src/bad.rs", "// a plain comment\nfn f() {}\n");
    write(dir.path(), "stream-json/target/debug/generated.rs", "fn ignored() {}\n");
    let violations = tidy::check_file_headers(dir.path()).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].path, Path::new("stream-json/src/bad.rs"));
}

#[test]
fn module_circles_are_reported() {
    let dir = fake_workspace("");
    write(dir.path(), "agent-core/src/lib.rs", "//! The hub.\nmod a;\nmod b;\nmod c;\n");
    // a → b and c (a group), b → a (a path); c names a only in a comment and a string.
    write(dir.path(), "agent-core/src/a.rs", "//! A.\nuse crate::{b::Thing, c};\n");
    write(dir.path(), "agent-core/src/b.rs", "//! B.\nfn f() -> crate::a::X { todo() }\n");
    write(
        dir.path(),
        "agent-core/src/c.rs",
        "//! C.\n// crate::a is only a comment\nconst S: &str = \"crate::a\";\n",
    );
    let violations = tidy::check_module_layers(dir.path(), "agent-core").unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].message.contains("(a → b → a)"), "{violations:?}");
    // Submodules belong to their module: c/inner.rs using a puts c in the circle; its
    // `super::` is c, not the crate.
    write(dir.path(), "agent-core/src/c/inner.rs", "//! Inner.\nuse crate::a;\nuse super::S;\n");
    let violations = tidy::check_module_layers(dir.path(), "agent-core").unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].message.contains("(a → b → c → a)"), "{violations:?}");
    // At the top level `super::` is the crate: b → c through it, a no longer uses c.
    write(dir.path(), "agent-core/src/c/inner.rs", "//! Inner.\n");
    write(dir.path(), "agent-core/src/a.rs", "//! A.\n");
    write(dir.path(), "agent-core/src/b.rs", "//! B.\nuse super::c;\n");
    assert_eq!(tidy::check_module_layers(dir.path(), "agent-core").unwrap(), vec![]);
    write(dir.path(), "agent-core/src/c.rs", "//! C.\nuse super::b::Thing;\n");
    let violations = tidy::check_module_layers(dir.path(), "agent-core").unwrap();
    assert!(violations[0].message.contains("(b → c → b)"), "{violations:?}");
}

/// A temporary directory removed on drop (std only, so the tidy tests stay dependency-free).
mod tempdir {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new() -> Dir {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let unique = NEXT.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("xtask-tidy-{}-{unique}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn only_the_sandbox_crate_may_deny_unsafe_code_instead_of_forbidding_it() {
    let dir = tempdir::Dir::new();
    let lints = "[workspace.lints.rust]\nunsafe_code = \"forbid\"\nmissing_docs = \"warn\"\n";
    write(
        dir.path(),
        "Cargo.toml",
        &format!("[workspace]\nmembers = [\"tools-runtime\", \"stream-json\"]\n{lints}"),
    );
    let own = |name: &str, rest: &str| {
        format!(
            "[package]\nname = \"{name}\"\n[lints.rust]\nunsafe_code = \"deny\"\n\
             missing_docs = \"warn\"\n{rest}"
        )
    };
    write(dir.path(), "tools-runtime/Cargo.toml", &own("tools-runtime", ""));
    write(dir.path(), "stream-json/Cargo.toml", &own("stream-json", ""));
    let violations = tidy::check_manifests(dir.path()).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].path, Path::new("stream-json/Cargo.toml"));
    assert!(violations[0].message.contains("[lints] workspace = true"), "{violations:?}");

    // The exception holds only while the rest of its lints are the workspace's.
    write(
        dir.path(),
        "tools-runtime/Cargo.toml",
        &own("tools-runtime", "unreachable_pub = \"allow\"\n"),
    );
    let violations = tidy::check_manifests(dir.path()).unwrap();
    assert!(
        violations.iter().any(|v| v.path == Path::new("tools-runtime/Cargo.toml")
            && v.message.contains("only `unsafe_code = \"deny\"`")),
        "{violations:?}"
    );
}
