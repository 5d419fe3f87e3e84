//! Tidy checks: the workspace's shape rules from SPEC.md and STYLE.md, enforced by a test.
//!
//! * Dependency direction: each workspace crate may depend only on the workspace crates listed
//!   for it in [`ALLOWED`]; no arrow points upward (a leaf never imports `skills-agent-core`).
//! * Every member inherits the workspace lints and takes every dependency version from
//!   `[workspace.dependencies]` (`foo.workspace = true`).
//! * Every `.rs` file starts with a `//!` line saying what it is for.
//! * Inside the crates of [`LAYERED`], no modules import each other in a circle: each crate's
//!   top-level modules form layers, a module only using the ones below it.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Workspace crates (package names) and the workspace crates each may depend on.
///
/// The table is SPEC.md's "may depend on" column. `bench` and the CLI sit above `skills-agent-core`
/// and may also name the crates below it directly; nothing may depend on them or on `xtask`.
pub const ALLOWED: &[(&str, &[&str])] = &[
    ("stream-json", &[]),
    ("skills-agent-registry", &[]),
    ("skill-loader", &["skills-agent-registry"]),
    ("tools-runtime", &[]),
    ("model-adapter", &["stream-json"]),
    // The MCP client (issue 14): starts stdio servers through tools-runtime's confinement.
    ("skills-agent-mcp", &["tools-runtime"]),
    // Model specs and the local-model launcher, shared by the CLI and xtask.
    (
        "skills-agent-models",
        &[
            "skills-agent-core",
            "stream-json",
            "skills-agent-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
        ],
    ),
    (
        "skills-agent-core",
        &["stream-json", "skills-agent-registry", "skill-loader", "tools-runtime", "model-adapter"],
    ),
    // Runs across machines on NATS JetStream (issue 23): the engine side, over agent-core.
    ("skills-agent-fleet", &["skills-agent-core"]),
    (
        "skills-agent",
        &[
            "skills-agent-core",
            "skills-agent-fleet",
            "skills-agent-mcp",
            "skills-agent-models",
            "stream-json",
            "skills-agent-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
        ],
    ),
    (
        "bench",
        &[
            "skills-agent-core",
            "stream-json",
            "skills-agent-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
        ],
    ),
    (
        "xtask",
        &[
            "skills-agent-core",
            "stream-json",
            "skills-agent-registry",
            "skill-loader",
            "tools-runtime",
            "model-adapter",
            "bench",
            "skills-agent",
            "skills-agent-fleet",
            "skills-agent-models",
        ],
    ),
];

/// The crates whose top-level modules must form layers (no import circles), by folder.
pub const LAYERED: &[&str] = &["agent-core", "cli"];

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
    for folder in LAYERED {
        violations.extend(check_module_layers(root, folder)?);
    }
    Ok(violations)
}

/// Crates whose `unsafe_code` lint is "deny" rather than the workspace's "forbid", so that one
/// item may `#[allow]` it and say why: the sandbox helper's `fork` (`tools-runtime/src/helper.rs`).
/// Their `[lints]` must otherwise equal the workspace's.
const UNSAFE_DENIED: &[&str] = &["tools-runtime"];

/// The workspace's `[workspace.lints]` with `rust.unsafe_code = "deny"`.
fn lints_with_unsafe_denied(root_manifest: &toml::Value) -> Option<toml::Value> {
    let mut lints = root_manifest.get("workspace")?.get("lints")?.clone();
    let rust = lints.get_mut("rust")?.as_table_mut()?;
    rust.insert("unsafe_code".to_owned(), toml::Value::String("deny".to_owned()));
    Some(lints)
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
            match lints_with_unsafe_denied(&root_manifest) {
                Some(allowed) if UNSAFE_DENIED.contains(&name.as_str()) => {
                    if manifest.get("lints") != Some(&allowed) {
                        report(
                            "its own [lints] must be the workspace's with only `unsafe_code = \
                             \"deny\"` in place of \"forbid\""
                                .to_owned(),
                        );
                    }
                }
                _ => report("missing `[lints] workspace = true`".to_owned()),
            }
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

/// Checks that the top-level modules of the crate in `folder` import each other in no circle.
///
/// A module is a file `src/NAME.rs` with its folder `src/NAME/`; it uses another when its code
/// names `crate::OTHER` (in a path or a `use crate::{…}` group) or, at the top level,
/// `super::OTHER`. Comments are not code. A crate whose folder does not exist has nothing to
/// check.
pub fn check_module_layers(root: &Path, folder: &str) -> Result<Vec<Violation>> {
    let src = root.join(folder).join("src");
    if !src.is_dir() {
        return Ok(Vec::new());
    }
    let mut modules: Vec<(String, Vec<String>)> = Vec::new();
    let entries = fs::read_dir(&src).with_context(|| format!("cannot list {}", src.display()))?;
    for entry in entries {
        let path = entry.with_context(|| format!("cannot list {}", src.display()))?.path();
        let Some(name) = path.file_stem().and_then(|stem| stem.to_str()).map(str::to_owned) else {
            continue;
        };
        if path.extension().is_some_and(|extension| extension == "rs")
            && !matches!(name.as_str(), "lib" | "main")
        {
            let mut used = used_modules(&code_of(&fs::read_to_string(&path)?), true);
            let mut nested = Vec::new();
            let folder = src.join(&name);
            if folder.is_dir() {
                collect_rust_files(&folder, &folder, &mut nested)?;
            }
            for file in nested {
                // In a submodule, `super::` is its parent, not the crate.
                used.extend(used_modules(&code_of(&fs::read_to_string(folder.join(file))?), false));
            }
            modules.push((name, used));
        }
    }
    modules.sort();
    let names: Vec<&str> = modules.iter().map(|(name, _)| name.as_str()).collect();
    let uses: Vec<Vec<usize>> = modules
        .iter()
        .map(|(name, used)| {
            let mut used: Vec<usize> = used
                .iter()
                .filter(|used| *used != name)
                .filter_map(|used| names.iter().position(|known| known == used))
                .collect();
            used.sort_unstable();
            used.dedup();
            used
        })
        .collect();
    let mut violations = Vec::new();
    for circle in circles(&uses) {
        let mut path: Vec<&str> = circle.iter().map(|&index| names[index]).collect();
        path.push(names[circle[0]]);
        violations.push(Violation {
            path: Path::new(folder).join("src"),
            message: format!(
                "modules import each other in a circle ({}): move what they share into a module \
                 below them",
                path.join(" → ")
            ),
        });
    }
    Ok(violations)
}

/// The text of `source` without its comments (line comments, doc comments, block comments).
fn code_of(source: &str) -> String {
    let mut code = String::with_capacity(source.len());
    let mut rest = source;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else if rest.starts_with('"') {
            // A string literal is not code either (it may hold `crate::` or `//`).
            let mut chars = rest.char_indices().skip(1);
            let mut end = rest.len();
            while let Some((index, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        end = index + 1;
                        break;
                    }
                    _ => {}
                }
            }
            code.push_str("\"\"");
            rest = &rest[end..];
        } else {
            let next = rest.find(['/', '"']).map_or(rest.len(), |index| index.max(1));
            code.push_str(&rest[..next]);
            rest = &rest[next..];
        }
    }
    code
}

/// The module names `code` reaches through `crate::NAME` (and `super::NAME` with
/// `top_level`), including every first name of a `crate::{…}` group.
fn used_modules(code: &str, top_level: bool) -> Vec<String> {
    let identifier = |text: &str| -> String {
        text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut used = Vec::new();
    let prefixes: &[&str] = if top_level { &["crate::", "super::"] } else { &["crate::"] };
    for prefix in prefixes {
        for (index, _) in code.match_indices(prefix) {
            let before = code[..index].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let after = code[index + prefix.len()..].trim_start();
            if let Some(group) = after.strip_prefix('{') {
                let mut depth = 0usize;
                let mut start = true;
                for (offset, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && !c.is_whitespace() => {
                            used.push(identifier(&group[offset..]));
                            start = false;
                        }
                        _ => {}
                    }
                }
            } else {
                used.push(identifier(after));
            }
        }
    }
    used.retain(|name| !name.is_empty());
    used
}

/// The circles of a directed graph (`edges[node]` = the nodes it uses): each strongly
/// connected component of more than one node, smallest node first, in order of first node.
fn circles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let reaches = |from: usize| -> Vec<bool> {
        let mut seen = vec![false; edges.len()];
        let mut stack = vec![from];
        while let Some(node) = stack.pop() {
            for &next in &edges[node] {
                if !seen[next] {
                    seen[next] = true;
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reach: Vec<Vec<bool>> = (0..edges.len()).map(reaches).collect();
    let mut taken = vec![false; edges.len()];
    let mut found = Vec::new();
    for node in 0..edges.len() {
        if taken[node] || !reach[node][node] {
            continue;
        }
        let component: Vec<usize> =
            (0..edges.len()).filter(|&other| reach[node][other] && reach[other][node]).collect();
        if component.len() > 1 {
            component.iter().for_each(|&member| taken[member] = true);
            found.push(component);
        }
    }
    found
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
