//! `cargo xtask package`: every publishable crate of the workspace packaged in dependency order,
//! the files each package would ship checked, and `cargo publish --dry-run` for the leaves.
//!
//! * The crates are the workspace members without `publish = false`, ordered so that each comes
//!   after the workspace crates it depends on (from `cargo metadata`).
//! * `cargo package --list` gives each package's files; a file that should not ship fails the
//!   check ([`unwanted`]: build output such as `target/`, benchmark and fuzzing output, test
//!   leftovers, files over [`MAX_FILE_BYTES`]).
//! * One `cargo package --no-verify` packages them all: cargo resolves the in-workspace
//!   dependencies against the packages it has just made, as it will against crates.io once they
//!   are published in this order (packaging a dependent crate alone fails while its workspace
//!   dependencies are not on crates.io).
//! * `cargo publish --dry-run` (which also builds the packaged sources) runs for the leaves, the
//!   crates with no workspace dependency: only they resolve against crates.io as it is today.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The largest file a package may ship; larger ones are data that belongs elsewhere.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

const USAGE: &str = "usage: cargo xtask package [--no-dry-run]";

/// A publishable workspace crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    /// The package name.
    pub name: String,
    /// The folder holding its `Cargo.toml`.
    pub directory: PathBuf,
    /// The publishable workspace crates it depends on (normal and build dependencies).
    pub workspace_dependencies: BTreeSet<String>,
}

/// Runs `package [--no-dry-run]`.
pub fn run(arguments: &[String]) -> Result<()> {
    let dry_run = match arguments {
        [] => true,
        [flag] if flag == "--no-dry-run" => false,
        _ => bail!("{USAGE}"),
    };
    let metadata = cargo(&["metadata", "--format-version", "1", "--no-deps"])?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).context("cannot parse `cargo metadata`")?;
    let crates = dependency_order(publishable_crates(&metadata)?)?;
    let names: Vec<&str> = crates.iter().map(|krate| krate.name.as_str()).collect();
    println!("package: {} crates in order: {}", names.len(), names.join(", "));

    let mut problems = Vec::new();
    for krate in &crates {
        let list = cargo(&["package", "--list", "--allow-dirty", "-p", &krate.name])?;
        for file in list.lines().filter(|line| !line.is_empty()) {
            // Files cargo generates (Cargo.lock, .cargo_vcs_info.json) are not on disk: size 0.
            let size = std::fs::metadata(krate.directory.join(file)).map_or(0, |meta| meta.len());
            if let Some(reason) = unwanted(file, size) {
                problems.push(format!("{}: {file}: {reason}", krate.name));
            }
        }
    }
    if !problems.is_empty() {
        bail!("files that should not be packaged:\n  {}", problems.join("\n  "));
    }

    let mut package = vec!["package", "--no-verify", "--allow-dirty"];
    for name in &names {
        package.extend(["-p", name]);
    }
    cargo_status(&package)?;

    if dry_run {
        for leaf in crates.iter().filter(|krate| krate.workspace_dependencies.is_empty()) {
            cargo_status(&["publish", "--dry-run", "--allow-dirty", "-p", &leaf.name])?;
        }
    }
    println!("package: ok");
    Ok(())
}

/// Whether a packaged file (path relative to the package, `/`-separated) should not ship, and
/// why: build output, benchmark or fuzzing output, test and editor leftovers, or a file over
/// [`MAX_FILE_BYTES`].
pub fn unwanted(path: &str, size: u64) -> Option<&'static str> {
    let components: Vec<&str> = path.split('/').collect();
    let name = components.last().copied().unwrap_or(path);
    if components.contains(&"target") {
        return Some("build output (`target/`)");
    }
    if components.iter().any(|component| matches!(*component, ".criterion" | "criterion")) {
        return Some("benchmark output (criterion)");
    }
    let in_fuzz = |folder: &str| components.windows(2).any(|pair| pair == ["fuzz", folder]);
    if in_fuzz("corpus") || in_fuzz("artifacts") || in_fuzz("coverage") {
        return Some("fuzzing output");
    }
    let leftover_suffixes =
        [".profraw", ".profdata", ".snap.new", ".pending-snap", ".log", ".tmp", ".swp"];
    if leftover_suffixes.iter().any(|suffix| name.ends_with(suffix))
        || name.ends_with('~')
        || name == ".DS_Store"
        || components.first() == Some(&".agent")
    {
        return Some("test or editor leftover");
    }
    if size > MAX_FILE_BYTES {
        return Some("larger than 1 MiB");
    }
    None
}

/// The workspace members that may be published, from `cargo metadata --no-deps` JSON, with
/// their workspace dependencies among them (dev-dependencies left out: cargo strips those
/// without a version when publishing).
pub fn publishable_crates(metadata: &serde_json::Value) -> Result<Vec<Crate>> {
    let packages = metadata["packages"].as_array().context("`cargo metadata` lists no packages")?;
    // `publish = false` shows as an empty registry list.
    let publishable = |package: &serde_json::Value| {
        package["publish"].as_array().is_none_or(|registries| !registries.is_empty())
    };
    let names: BTreeSet<&str> = packages
        .iter()
        .filter(|package| publishable(package))
        .filter_map(|package| package["name"].as_str())
        .collect();
    let mut crates = Vec::new();
    for package in packages.iter().filter(|package| publishable(package)) {
        let name = package["name"].as_str().context("a package without a name")?;
        let manifest = package["manifest_path"].as_str().context("a package without a manifest")?;
        let directory = Path::new(manifest).parent().unwrap_or(Path::new(".")).to_path_buf();
        let dependencies = package["dependencies"].as_array().map_or(&[][..], Vec::as_slice);
        let workspace_dependencies = dependencies
            .iter()
            .filter(|dependency| dependency["kind"].as_str() != Some("dev"))
            .filter_map(|dependency| dependency["name"].as_str())
            .filter(|dependency| names.contains(dependency))
            .map(str::to_owned)
            .collect();
        crates.push(Crate { name: name.to_owned(), directory, workspace_dependencies });
    }
    Ok(crates)
}

/// Orders crates so each comes after its workspace dependencies; ties by name.
///
/// # Errors
///
/// When the dependencies form a cycle (no order exists).
pub fn dependency_order(mut pending: Vec<Crate>) -> Result<Vec<Crate>> {
    pending.sort_by(|left, right| left.name.cmp(&right.name));
    let mut ordered: Vec<Crate> = Vec::with_capacity(pending.len());
    while !pending.is_empty() {
        let done: BTreeSet<&str> = ordered.iter().map(|krate| krate.name.as_str()).collect();
        let ready = pending.iter().position(|krate| {
            krate.workspace_dependencies.iter().all(|dependency| done.contains(dependency.as_str()))
        });
        let Some(ready) = ready else {
            let names: Vec<&str> = pending.iter().map(|krate| krate.name.as_str()).collect();
            bail!("workspace dependencies form a cycle among: {}", names.join(", "));
        };
        ordered.push(pending.remove(ready));
    }
    Ok(ordered)
}

/// The cargo running this xtask (`$CARGO`), else `cargo` from `PATH`.
fn cargo_command() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs cargo with `arguments`, stderr passed through, and returns its stdout.
pub(crate) fn cargo(arguments: &[&str]) -> Result<String> {
    let output = cargo_command()
        .args(arguments)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run cargo {}", arguments.join(" ")))?;
    if !output.status.success() {
        bail!("cargo {} failed ({})", arguments.join(" "), output.status);
    }
    String::from_utf8(output.stdout).context("cargo printed something that is not UTF-8")
}

/// Runs cargo with `arguments`, its output passed through.
pub(crate) fn cargo_status(arguments: &[&str]) -> Result<()> {
    cargo_status_in(Path::new("."), arguments)
}

/// Runs cargo with `arguments` in `folder`, its output passed through.
pub(crate) fn cargo_status_in(folder: &Path, arguments: &[&str]) -> Result<()> {
    let status = cargo_command()
        .args(arguments)
        .current_dir(folder)
        .status()
        .with_context(|| format!("cannot run cargo {}", arguments.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", arguments.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_docs_and_licenses_ship() {
        for path in [
            "src/lib.rs",
            "README.md",
            "LICENSE-MIT",
            "Cargo.toml.orig",
            "tests/data/targets.json",
            "benches/index.rs",
            "builtin/skill-authoring/SKILL.md",
            "fuzz/fuzz_targets/frontmatter.rs",
        ] {
            assert_eq!(unwanted(path, 10_000), None, "{path}");
        }
        assert_eq!(unwanted("tests/data/big.json", MAX_FILE_BYTES), None);
    }

    #[test]
    fn build_benchmark_fuzzing_and_test_output_do_not_ship() {
        for (path, reason) in [
            ("target/criterion/index/report/index.html", "build output (`target/`)"),
            ("target/debug/foo", "build output (`target/`)"),
            ("fuzz/target/x86_64/debug/frontmatter", "build output (`target/`)"),
            (".criterion/parse/base/estimates.json", "benchmark output (criterion)"),
            ("benches/criterion/report.html", "benchmark output (criterion)"),
            ("fuzz/corpus/frontmatter/0a1b", "fuzzing output"),
            ("fuzz/artifacts/frontmatter/crash-1", "fuzzing output"),
            ("default_1234.profraw", "test or editor leftover"),
            ("tests/snapshots/run.snap.new", "test or editor leftover"),
            ("tests/output.log", "test or editor leftover"),
            ("src/lib.rs~", "test or editor leftover"),
            (".agent/notes.md", "test or editor leftover"),
        ] {
            assert_eq!(unwanted(path, 10), Some(reason), "{path}");
        }
        assert_eq!(
            unwanted("tests/data/model.gguf", MAX_FILE_BYTES + 1),
            Some("larger than 1 MiB")
        );
    }

    fn krate(name: &str, dependencies: &[&str]) -> Crate {
        Crate {
            name: name.to_owned(),
            directory: PathBuf::from(name),
            workspace_dependencies: dependencies.iter().map(|&name| name.to_owned()).collect(),
        }
    }

    #[test]
    fn crates_come_after_their_workspace_dependencies() -> Result<()> {
        let crates = vec![
            krate("cli", &["core", "loader"]),
            krate("core", &["registry", "loader"]),
            krate("loader", &["registry"]),
            krate("registry", &[]),
            krate("json", &[]),
        ];
        let order: Vec<String> =
            dependency_order(crates)?.into_iter().map(|krate| krate.name).collect();
        assert_eq!(order, ["json", "registry", "loader", "core", "cli"]);
        let cycle = dependency_order(vec![krate("a", &["b"]), krate("b", &["a"])]);
        assert!(cycle.is_err());
        Ok(())
    }

    #[test]
    fn unpublishable_members_and_dev_dependencies_are_left_out() -> Result<()> {
        let metadata = serde_json::json!({"packages": [
            {"name": "json", "publish": null, "manifest_path": "/w/json/Cargo.toml",
             "dependencies": [{"name": "serde_json", "kind": null}]},
            {"name": "adapter", "publish": null, "manifest_path": "/w/adapter/Cargo.toml",
             "dependencies": [{"name": "json", "kind": null}, {"name": "bench", "kind": "dev"}]},
            {"name": "bench", "publish": [], "manifest_path": "/w/bench/Cargo.toml",
             "dependencies": [{"name": "adapter", "kind": null}]},
        ]});
        let crates = publishable_crates(&metadata)?;
        assert_eq!(
            crates,
            vec![krate("json", &[]), krate("adapter", &["json"])]
                .into_iter()
                .map(|mut krate| {
                    krate.directory = Path::new("/w").join(&krate.name);
                    krate
                })
                .collect::<Vec<_>>()
        );
        Ok(())
    }
}
