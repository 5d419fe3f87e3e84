//! `index`: indexes skill roots and prints the skills, the shadowed ones and every diagnostic.
//!
//! ```text
//! cargo run -q -p skills-agent-registry --example index -- [--strict] [--json] ROOT...
//! ```
//!
//! The roots are extra roots in priority order (the first wins a name collision). With `--json`
//! the output is one JSON object:
//! `{"skills":[…],"shadowed":[…],"diagnostics":[{"path","line","rule","severity","message"}],…}`.
//! Exit status: 0 when every root could be read (even when skills have errors), 1 when a root
//! is missing or unreadable, 2 on a usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use skills_agent_registry::{IndexConfig, Mode, RootStatus, SkillIndex, extra_roots};

const USAGE: &str = "usage: index [--strict] [--json] ROOT...";

fn main() -> ExitCode {
    let mut strict = false;
    let mut json = false;
    let mut roots = Vec::new();
    for argument in std::env::args_os().skip(1) {
        match argument.to_str() {
            Some("--strict") => strict = true,
            Some("--json") => json = true,
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Some(flag) if flag.starts_with("--") => {
                eprintln!("index: unknown option {flag}\n{USAGE}");
                return ExitCode::from(2);
            }
            _ => roots.push(PathBuf::from(argument)),
        }
    }
    if roots.is_empty() {
        eprintln!("index: no ROOT given\n{USAGE}");
        return ExitCode::from(2);
    }
    let config = IndexConfig {
        mode: if strict { Mode::Strict } else { Mode::Lenient },
        ..IndexConfig::default()
    };
    let index = match SkillIndex::build(&extra_roots(roots), &config) {
        Ok(index) => index,
        Err(error) => {
            eprintln!("index: {error}");
            return ExitCode::from(2);
        }
    };
    if json {
        match serde_json::to_string_pretty(&index) {
            Ok(text) => println!("{text}"),
            Err(error) => {
                eprintln!("index: cannot render JSON: {error}");
                return ExitCode::from(2);
            }
        }
    } else {
        print_human(&index);
    }
    let mut root_failed = false;
    for root in &index.roots {
        match &root.status {
            RootStatus::Missing => {
                eprintln!("index: skill root {} does not exist", root.path.display());
                root_failed = true;
            }
            RootStatus::Unreadable { message } => {
                eprintln!("index: {message}");
                root_failed = true;
            }
            RootStatus::Scanned | RootStatus::AlreadyScanned => {}
        }
    }
    if root_failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

fn print_human(index: &SkillIndex) {
    println!("skills ({}):", index.skills.len());
    for skill in &index.skills {
        let description: String =
            skill.description.split_whitespace().collect::<Vec<_>>().join(" ");
        let short: String = description.chars().take(100).collect();
        let ellipsis = if short.len() < description.len() { "…" } else { "" };
        println!("  {}  [{}] {}", skill.name, skill.source.kind.as_str(), skill.path.display());
        println!("      {short}{ellipsis}");
    }
    if !index.shadowed.is_empty() {
        println!("shadowed ({}):", index.shadowed.len());
        for shadowed in &index.shadowed {
            println!(
                "  {}  {}  (by {})",
                shadowed.skill.name,
                shadowed.skill.path.display(),
                shadowed.shadowed_by.display()
            );
        }
    }
    if !index.diagnostics.is_empty() {
        println!("diagnostics ({}):", index.diagnostics.len());
        for diagnostic in &index.diagnostics {
            println!("  {diagnostic}");
        }
    }
    println!(
        "{} directories, {} SKILL.md files, {} bytes read",
        index.stats.directories_scanned,
        index.stats.skill_files_read,
        index.stats.frontmatter_bytes_read
    );
}
