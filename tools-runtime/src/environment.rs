//! The command's environment: cleared, then an allowlist; secrets are never inherited.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::SYSTEM_PROGRAM_DIRECTORIES;

/// Which variables the command sees.
///
/// The environment starts empty. Variables named in `inherit` are copied from the base
/// environment (the runtime's own, unless the request supplies one) unless their name looks
/// like a secret; `set` adds fixed values (secret-looking names dropped too). A secret-looking
/// name passes only when it is also in `secrets`: the user named it for this one command (an
/// MCP server's API key). `HOME` and `TMPDIR` always point at the run's private tmp
/// directory, and `PATH` defaults to the system directories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvPolicy {
    /// Names copied from the base environment (secret-looking names are dropped anyway).
    pub inherit: Vec<String>,
    /// Fixed values (secret-looking names are dropped here too: pass secrets through files).
    pub set: BTreeMap<String, String>,
    /// Secret-looking names in `inherit` or `set` that pass anyway, because the user listed
    /// them explicitly for this command. Empty by default: scripts never get secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Default for EnvPolicy {
    fn default() -> EnvPolicy {
        let inherit = ["LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"].map(str::to_owned).to_vec();
        let set = BTreeMap::from([("PATH".to_owned(), SYSTEM_PROGRAM_DIRECTORIES.join(":"))]);
        EnvPolicy { inherit, set, secrets: Vec::new() }
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
        if is_secret_name(name) && !policy.secrets.contains(name) {
            withheld.push(name.clone());
        } else {
            environment.insert(name.clone(), value.clone());
        }
    }
    for (name, value) in &policy.set {
        if is_secret_name(name) && !policy.secrets.contains(name) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Vec<(String, String)> {
        [("LANG", "C"), ("GITHUB_TOKEN", "ghp_x"), ("API_KEY", "k")]
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .to_vec()
    }

    #[test]
    fn secret_names_are_withheld_unless_listed_as_secrets() {
        let mut policy = EnvPolicy::default();
        policy.inherit.extend(["GITHUB_TOKEN".to_owned(), "API_KEY".to_owned()]);
        policy.set.insert("OPENAI_API_KEY".to_owned(), "sk".to_owned());
        let (environment, withheld) = build_environment(&policy, &base(), "/tmp/private");
        assert_eq!(withheld, ["API_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY"]);
        assert_eq!(environment.get("LANG").map(String::as_str), Some("C"));
        assert!(!environment.contains_key("GITHUB_TOKEN"));

        policy.secrets = vec!["GITHUB_TOKEN".to_owned(), "OPENAI_API_KEY".to_owned()];
        let (environment, withheld) = build_environment(&policy, &base(), "/tmp/private");
        assert_eq!(withheld, ["API_KEY"]);
        assert_eq!(environment.get("GITHUB_TOKEN").map(String::as_str), Some("ghp_x"));
        assert_eq!(environment.get("OPENAI_API_KEY").map(String::as_str), Some("sk"));
        assert_eq!(environment.get("HOME").map(String::as_str), Some("/tmp/private"));
    }
}
