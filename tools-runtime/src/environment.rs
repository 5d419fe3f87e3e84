//! The command's environment: cleared, then an allowlist; secrets are never inherited.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::SYSTEM_PROGRAM_DIRECTORIES;

/// Which variables the command sees.
///
/// The environment starts empty. Variables named in `inherit` are copied from the base
/// environment (the runtime's own, unless the request supplies one) unless their name looks
/// like a secret; `set` adds fixed values. `HOME` and `TMPDIR` always point at the run's
/// private tmp directory, and `PATH` defaults to the system directories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPolicy {
    /// Names copied from the base environment (secret-looking names are dropped anyway).
    pub inherit: Vec<String>,
    /// Fixed values (secret-looking names are dropped here too: pass secrets through files).
    pub set: BTreeMap<String, String>,
}

impl Default for EnvPolicy {
    fn default() -> EnvPolicy {
        let inherit = ["LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"].map(str::to_owned).to_vec();
        let set = BTreeMap::from([("PATH".to_owned(), SYSTEM_PROGRAM_DIRECTORIES.join(":"))]);
        EnvPolicy { inherit, set }
    }
}

/// Whether a variable name looks like it carries a secret.
///
/// Matches `*KEY*`, `*SECRET*`, `*TOKEN*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`,
/// `*COOKIE*` (case-insensitive) and well-known provider prefixes (`OPENAI_`, `AWS_`, …).
pub fn is_secret_name(name: &str) -> bool {
    const MARKERS: [&str; 7] =
        ["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "COOKIE"];
    const PROVIDER_PREFIXES: [&str; 10] = [
        "OPENAI_",
        "ANTHROPIC_",
        "AWS_",
        "AZURE_",
        "GOOGLE_",
        "GEMINI_",
        "HF_",
        "HUGGING",
        "GITHUB_",
        "DEEPSEEK_",
    ];
    let upper = name.to_ascii_uppercase();
    MARKERS.iter().any(|marker| upper.contains(marker))
        || PROVIDER_PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
}

/// Builds the command's environment from `base` under `policy`; `private_tmp` becomes
/// `HOME` and `TMPDIR`. Returns the variables and the names that were withheld as secrets.
pub(crate) fn build_environment(
    policy: &EnvPolicy,
    base: &[(String, String)],
    private_tmp: &str,
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut environment = BTreeMap::new();
    let mut withheld = Vec::new();
    for (name, value) in base {
        if !policy.inherit.contains(name) {
            continue;
        }
        if is_secret_name(name) {
            withheld.push(name.clone());
        } else {
            environment.insert(name.clone(), value.clone());
        }
    }
    for (name, value) in &policy.set {
        if is_secret_name(name) {
            withheld.push(name.clone());
        } else {
            environment.insert(name.clone(), value.clone());
        }
    }
    environment.insert("HOME".to_owned(), private_tmp.to_owned());
    environment.insert("TMPDIR".to_owned(), private_tmp.to_owned());
    withheld.sort();
    withheld.dedup();
    (environment, withheld)
}
