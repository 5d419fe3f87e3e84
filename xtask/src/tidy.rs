//! Tidy checks: the workspace's shape rules from SPEC.md and STYLE.md, enforced by a test.
//!
//! * Dependency direction: each workspace crate may depend only on the workspace crates listed
//!   for it in [`ALLOWED`]; no arrow points upward (a leaf never imports `agent-core`).
//! * Every member inherits the workspace lints and takes every dependency version from
//!   `[workspace.dependencies]` (`foo.workspace = true`).
//! * Every `.rs` file starts with a `//!` line saying what it is for.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Workspace crates (package names) and the workspace crates each may depend on.
///
/// The table is SPEC.md's "may depend on" column. `bench` and the CLI sit above `agent-core`
/// and may also name the crates below it directly; nothing may depend on them or on `xtask`.
pub const ALLOWED: &[(&str, &[&str])] = &[
    ("stream-json", &[]),
    ("skill-registry", &[]),
    ("skill-loader", &["skill-registry"]),
    ("tools-runtime", &[]),
    ("model-adapter", &["stream-json"]),
    // The MCP client (issue 14): starts stdio servers through tools-runtime's confinement.
    ("skills-agent-mcp", &["tools-runtime"]),
    (
        "agent-core",
        &["stream-json", "skill-registry", "skill-loader", "tools-runtime", "model-adapter"],
    ),
    (
        "skills-agent",
        &[
            "agent-core",
            "skills-agent-mcp",
            "stream-json",
            "skill-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
        ],
    ),
    (
        "bench",
        &[
            "agent-core",
            "stream-json",
            "skill-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
        ],
    ),
    (
        "xtask",
        &[
            "agent-core",
            "stream-json",
            "skill-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
            "bench",
            "skills-agent",
        ],
    ),
];

/// One broken rule, with the file it was found in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The file that breaks the rule, relative to the workspace root.
    pub path: PathBuf,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// The workspace root, found from this crate's manifest directory.
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// Runs every tidy check on the workspace at `root` and returns what is broken.
///
/// An `Err` means the workspace could not be read at all (a missing or malformed manifest).
pub fn check(root: &Path) -> Result<Vec<Violation>> {
    let mut violations = check_manifests(root)?;
    violations.extend(check_file_headers(root)?);
    Ok(violations)
}

/// Checks every member manifest: dependency direction, inherited lints, inherited versions.
pub fn check_manifests(root: &Path) -> Result<Vec<Violation>> {
    let root_manifest = read_toml(&root.join("Cargo.toml"))?;
    let members: Vec<String> = root_manifest
        .get("workspace")
        .and_then(|workspace| workspace.get("members"))
        .and_then(toml::Value::as_array)
        .context("root Cargo.toml has no [workspace] members list")?
        .iter()
        .filter_map(|member| member.as_str().map(str::to_owned))
        .collect();

    let mut manifests = Vec::new();
    for member in &members {
        let relative = PathBuf::from(member).join("Cargo.toml");
        let manifest = read_toml(&root.join(&relative))?;
        let name = manifest
            .get("package")
            .and_then(|package| package.get("name"))
            .and_then(toml::Value::as_str)
            .with_context(|| format!("{} has no package name", relative.display()))?
            .to_owned();
        manifests.push((relative, name, manifest));
    }
    let workspace_crates: Vec<&str> = manifests.iter().map(|(_, name, _)| name.as_str()).collect();

    let mut violations = Vec::new();
    for (relative, name, manifest) in &manifests {
        let mut report = |message: String| {
            violations.push(Violation { path: relative.clone(), message });
        };
        let allowed = match ALLOWED.iter().find(|(crate_name, _)| crate_name == name) {
            Some((_, allowed)) => *allowed,
            None => {
                report(format!(
                    "crate `{name}` is not in the dependency table; add it to `ALLOWED` in \
                     xtask/src/tidy.rs with the crates SPEC.md lets it depend on"
                ));
                &[]
            }
        };
        let lints_inherited = manifest
            .get("lints")
            .and_then(|lints| lints.get("workspace"))
            .and_then(toml::Value::as_bool)
            == Some(true);
        if !lints_inherited {
            report("missing `[lints] workspace = true`".to_owned());
        }
        for (table_name, dependency, spec) in dependency_entries(manifest) {
            let inherits_version = spec
                .as_table()
                .and_then(|table| table.get("workspace"))
                .and_then(toml::Value::as_bool)
                == Some(true);
            if !inherits_version {
                report(format!(
                    "[{table_name}] `{dependency}` does not use `workspace = true`; put its \
                     version in the root [workspace.dependencies]"
                ));
            }
            let is_workspace_crate = workspace_crates.contains(&dependency.as_str());
            if is_workspace_crate && !allowed.contains(&dependency.as_str()) {
                report(format!(
                    "[{table_name}] `{name}` depends on `{dependency}`, against the allowed \
                     direction (allowed: {allowed:?}); move the shared code down instead"
                ));
            }
        }
    }
    Ok(violations)
}

/// Every dependency of a manifest as (table name, dependency name, spec), including
/// dev-, build- and target-specific tables.
fn dependency_entries(manifest: &toml::Value) -> Vec<(String, String, toml::Value)> {
    const TABLES: [&str; 3] = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut entries = Vec::new();
    let mut collect = |prefix: &str, holder: &toml::Value| {
        for table_name in TABLES {
            let Some(table) = holder.get(table_name).and_then(toml::Value::as_table) else {
                continue;
            };
            for (dependency, spec) in table {
                // `package = "..."` renames: the real crate name is what the direction rule is about.
                let real_name = spec
                    .get("package")
                    .and_then(toml::Value::as_str)
                    .unwrap_or(dependency.as_str())
                    .to_owned();
                entries.push((format!("{prefix}{table_name}"), real_name, spec.clone()));
            }
        }
    };
    collect("", manifest);
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for (target, holder) in targets {
            collect(&format!("target.{target}."), holder);
        }
    }
    entries
}

/// Checks that every `.rs` file in the workspace starts with a `//!` line.
pub fn check_file_headers(root: &Path) -> Result<Vec<Violation>> {
    let mut files = Vec::new();
    collect_rust_files(root, root, &mut files)?;
    files.sort();
    let mut violations = Vec::new();
    for relative in files {
        let text = fs::read_to_string(root.join(&relative))
            .with_context(|| format!("cannot read {}", relative.display()))?;
        let first_line = text.trim_start_matches('\u{feff}').lines().next().unwrap_or("");
        if !first_line.starts_with("//!") {
            violations.push(Violation {
                path: relative,
                message: "the file does not start with a `//!` line saying what it is for"
                    .to_owned(),
            });
        }
    }
    Ok(violations)
}

fn collect_rust_files(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = entry.path();
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            // Cargo marks every build directory (whatever CARGO_TARGET_DIR names it) with
            // CACHEDIR.TAG.
            let skipped = file_name.starts_with('.')
                || matches!(&*file_name, "target" | "corpus" | "artifacts" | "node_modules")
                || path.join("CACHEDIR.TAG").is_file();
            if !skipped {
                collect_rust_files(root, &path, files)?;
            }
        } else if file_type.is_file() && file_name.ends_with(".rs") {
            let relative = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            files.push(relative);
        }
    }
    Ok(())
}

fn read_toml(path: &Path) -> Result<toml::Value> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    match toml::from_str(&text) {
        Ok(value) => Ok(value),
        Err(error) => bail!("{} is not valid TOML: {error}", path.display()),
    }
}
