//! `cargo xtask features`: the library crates with TLS features build without their defaults
//! (plain http, no jsonschema in model-adapter) and with `tls-ring` alone, and neither build
//! brings `aws-lc-sys` (the default TLS provider's C library, which needs a C compiler and, on
//! some platforms, cmake). Prints each build's dependency count, as the crates' READMEs give it
//! (`cargo tree -e normal --prefix none | sort -u | wc -l`).

use std::collections::BTreeSet;

use anyhow::{Result, bail};

use crate::package::{cargo, cargo_status};

/// The crates with `tls-aws-lc` (default) and `tls-ring` features.
pub const CRATES: [&str; 3] = ["model-adapter", "skills-agent-mcp", "skills-agent-core"];

/// The builds checked: a name and cargo's feature flags.
pub const BUILDS: [(&str, &[&str]); 3] = [
    ("default", &[]),
    ("--no-default-features", &["--no-default-features"]),
    ("tls-ring", &["--no-default-features", "--features", "tls-ring"]),
];

/// The native library the lean builds must not bring.
pub const NATIVE: &str = "aws-lc-sys";

const USAGE: &str = "usage: cargo xtask features";

/// Runs `features`.
pub fn run(arguments: &[String]) -> Result<()> {
    if !arguments.is_empty() {
        bail!("{USAGE}");
    }
    let mut problems = Vec::new();
    for krate in CRATES {
        for (build, flags) in BUILDS {
            let mut tree = vec!["tree", "-p", krate, "-e", "normal", "--prefix", "none"];
            tree.extend(flags);
            let listing = cargo(&tree)?;
            let dependencies = distinct_lines(&listing);
            println!("features: {krate} ({build}): {} dependencies", dependencies.len());
            if flags.is_empty() {
                continue;
            }
            if let Some(native) = dependencies.iter().find(|line| brings(line, NATIVE)) {
                problems.push(format!("{krate} ({build}) brings {native}"));
            }
            let mut check = vec!["check", "-q", "-p", krate];
            check.extend(flags);
            cargo_status(&check)?;
        }
    }
    if !problems.is_empty() {
        bail!("lean builds with a C dependency:\n  {}", problems.join("\n  "));
    }
    println!("features: ok");
    Ok(())
}

/// The distinct non-empty lines of a `cargo tree --prefix none` listing (what `sort -u`
/// keeps).
pub fn distinct_lines(listing: &str) -> BTreeSet<&str> {
    listing.lines().filter(|line| !line.trim().is_empty()).collect()
}

/// Whether a `cargo tree` line (`name vX.Y.Z …`) is the package `name`.
pub fn brings(line: &str, name: &str) -> bool {
    line.split_whitespace().next() == Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_their_package_exactly() {
        let listing =
            "reqwest v0.13.5\naws-lc-sys v0.47.0\naws-lc-rs v1.19.0 (*)\n\nreqwest v0.13.5\n";
        let lines = distinct_lines(listing);
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().any(|line| brings(line, NATIVE)));
        assert!(!brings("aws-lc-rs v1.19.0 (*)", NATIVE));
        assert!(!brings("aws-lc-sys-extra v1.0.0", NATIVE));
    }
}
