//! `cargo xtask outside`: the crates people pick alone, used from a project outside the
//! workspace, the way a newcomer would.
//!
//! A throwaway Cargo project is written in the system's temp folder (its own `[workspace]`, so
//! cargo never mistakes it for a member of ours). It depends on [`PICKED`] by path, once with
//! their default features and once with `default-features = false`; every ```` ```rust ````
//! block of each crate's README (not `no_run`, `ignore` or `compile_fail`) becomes one of its
//! examples, and each example is built and run. A README example that needs the workspace (a
//! private helper, a file under `examples/`) fails here, where a doctest inside the workspace
//! would pass.
//!
//! The workspace's `Cargo.lock` is copied in, so the project resolves the same versions (cargo
//! drops what it does not need), and the build shares the workspace's target folder under
//! `outside-check/`, so a rerun compiles only what changed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::package::{cargo, cargo_status_in};

/// The crates checked, by package name and the folder of their README.
pub const PICKED: [(&str, &str); 3] = [
    ("stream-json", "stream-json"),
    ("skills-agent-registry", "skill-registry"),
    ("model-adapter", "model-adapter"),
];

/// What the README examples use besides the picked crates (the crates' own dev-dependencies:
/// a temp folder for skill-registry's, a tokio runtime for model-adapter's).
pub const EXAMPLE_DEPENDENCIES: &str = r#"serde_json = "1"
tempfile = "3"
tokio = { version = "1", default-features = false, features = ["rt"] }
"#;

const USAGE: &str = "usage: cargo xtask outside";

/// Runs `outside`.
pub fn run(arguments: &[String]) -> Result<()> {
    if !arguments.is_empty() {
        bail!("{USAGE}");
    }
    let metadata = cargo(&["metadata", "--format-version", "1", "--no-deps"])?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).context("cannot parse `cargo metadata`")?;
    let text = |key: &str| {
        metadata[key]
            .as_str()
            .map(PathBuf::from)
            .with_context(|| format!("`cargo metadata` has no {key}"))
    };
    let (root, target) = (text("workspace_root")?, text("target_directory")?.join("outside-check"));

    let mut examples = Vec::new();
    for (name, folder) in PICKED {
        let path = root.join(folder).join("README.md");
        let readme = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let blocks = readme_examples(&readme);
        if blocks.is_empty() {
            bail!("{}: no runnable ```rust example", path.display());
        }
        for (number, block) in blocks.into_iter().enumerate() {
            examples.push((format!("{}_{}", name.replace('-', "_"), number + 1), block));
        }
    }

    let project = std::env::temp_dir().join(format!("skills-agent-outside-{}", std::process::id()));
    let outcome: Result<()> = (|| {
        for (build, minimal) in [("default features", false), ("default-features = false", true)] {
            write_project(&project, &root, minimal, &examples)?;
            for (example, _) in &examples {
                let manifest = project.join("Cargo.toml");
                let manifest = manifest.to_str().context("temp folder path is not UTF-8")?;
                let target = target.to_str().context("target folder path is not UTF-8")?;
                let arguments = [
                    "run",
                    "-q",
                    "--manifest-path",
                    manifest,
                    "--target-dir",
                    target,
                    "--example",
                    example,
                ];
                cargo_status_in(&project, &arguments)
                    .with_context(|| format!("README example {example} ({build})"))?;
                println!("outside: {example} ({build}): ran");
            }
        }
        Ok(())
    })();
    // Kept on failure, to look at; named in the error.
    match outcome {
        Ok(()) => {
            std::fs::remove_dir_all(&project).ok();
            println!("outside: ok ({} examples, two builds)", examples.len());
            Ok(())
        }
        Err(error) => Err(error.context(format!("the project is kept in {}", project.display()))),
    }
}

/// Writes the throwaway project: `Cargo.toml` with the picked crates by path (`minimal`: without
/// their default features), the workspace's `Cargo.lock`, and one example per README block.
fn write_project(
    project: &Path,
    root: &Path,
    minimal: bool,
    examples: &[(String, String)],
) -> Result<()> {
    let examples_folder = project.join("examples");
    std::fs::create_dir_all(&examples_folder)
        .with_context(|| format!("cannot create {}", examples_folder.display()))?;
    std::fs::create_dir_all(project.join("src"))?;
    std::fs::write(project.join("src/lib.rs"), "")?;
    let mut manifest = String::from(
        "[package]\nname = \"outside-check\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         # not a member of any workspace above it\n[workspace]\n\n[dependencies]\n",
    );
    for (name, folder) in PICKED {
        let path = root.join(folder);
        let path = path.to_str().context("workspace path is not UTF-8")?;
        let path = toml::Value::String(path.to_owned());
        let features = if minimal { ", default-features = false" } else { "" };
        manifest.push_str(&format!("{name} = {{ path = {path}{features} }}\n"));
    }
    manifest.push_str(EXAMPLE_DEPENDENCIES);
    std::fs::write(project.join("Cargo.toml"), manifest)?;
    let lock = root.join("Cargo.lock");
    std::fs::copy(&lock, project.join("Cargo.lock"))
        .with_context(|| format!("cannot copy {}", lock.display()))?;
    for (example, code) in examples {
        std::fs::write(examples_folder.join(format!("{example}.rs")), code)?;
    }
    Ok(())
}

/// The README's runnable Rust examples, as rustdoc would run them: each ```` ```rust ```` block
/// (also ```` ```rust,should_panic ```` and the like, but not `no_run`, `ignore`,
/// `compile_fail` or another language), its hidden `# ` lines shown, wrapped in `fn main` when
/// it has none.
pub fn readme_examples(readme: &str) -> Vec<String> {
    let mut examples = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        let trimmed = line.trim_start();
        match current.as_mut() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let attributes: Vec<&str> = info.split(',').map(str::trim).collect();
                    let rust = attributes.first() == Some(&"rust");
                    let skipped = attributes
                        .iter()
                        .any(|attribute| ["no_run", "ignore", "compile_fail"].contains(attribute));
                    // A block that is not run is still skipped over to its end.
                    current = Some(if rust && !skipped { String::new() } else { "\u{0}".into() });
                }
            }
            Some(code) if trimmed.starts_with("```") => {
                if !code.starts_with('\u{0}') {
                    let code = std::mem::take(code);
                    examples.push(if code.contains("fn main(") {
                        code
                    } else {
                        format!("fn main() {{\n{code}}}\n")
                    });
                }
                current = None;
            }
            Some(code) if code.starts_with('\u{0}') => {}
            Some(code) => {
                let shown = match trimmed {
                    "#" => "",
                    hidden if hidden.starts_with("# ") => &hidden[2..],
                    _ => line,
                };
                code.push_str(shown);
                code.push('\n');
            }
        }
    }
    examples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runnable_rust_blocks_are_taken_as_rustdoc_runs_them() {
        let readme = "# Title\n\n```sh\ncargo add x\n```\n\n```rust\nfn main() {\n    x::go();\n}\n```\n\n\
                      ```rust,no_run\nserve();\n```\n\n```rust\n# use x::y;\n#\nlet a = y();\n```\n";
        let examples = readme_examples(readme);
        assert_eq!(
            examples,
            ["fn main() {\n    x::go();\n}\n", "fn main() {\nuse x::y;\n\nlet a = y();\n}\n"]
        );
    }

    #[test]
    fn the_picked_readmes_each_have_a_runnable_example() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask is in the workspace");
        for (name, folder) in PICKED {
            let readme =
                std::fs::read_to_string(root.join(folder).join("README.md")).expect("README");
            assert!(!readme_examples(&readme).is_empty(), "{name}");
        }
    }
}
