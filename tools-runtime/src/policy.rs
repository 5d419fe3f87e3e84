//! Permission merging and approval: command-prefix rules, strictest decision wins.
//!
//! A run's effective decision is the strictest of the skill's `allowed-tools` rules and the
//! user's policy (`forbidden` > `prompt` > `allow`). Within one rule set the longest matching
//! prefix decides; a command no rule matches gets the set's default. The approval mode then
//! says whether a `prompt` (or every command) goes to the approval callback.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What a policy says about a command. Ordered from most to least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run without asking.
    Allow,
    /// Ask the approver first.
    Prompt,
    /// Never run.
    Forbidden,
}

/// One rule: commands whose argv starts with `prefix` get `decision`.
///
/// The first prefix element matches the program as given or, for `forbidden` and `prompt`
/// rules, its file name: `["rm"]` catches `rm`, `/usr/bin/rm` and `./rm` alike. An `allow`
/// rule matches the file name only in the system program directories ([`SYSTEM_PROGRAM_DIRECTORIES`]):
/// `["git"]` allows `git` and `/usr/bin/git`, never `./git` or `/work/ws/git`, which could be
/// any program the command copied there (`cp /bin/sh git`). An empty prefix matches every
/// command. Prefix rules judge the command line, not what a shell or interpreter in it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixRule {
    /// The argv prefix.
    pub prefix: Vec<String>,
    /// The decision for matching commands.
    pub decision: Decision,
}

/// A set of prefix rules with a default for commands no rule matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSet {
    /// The rules; the longest matching prefix wins, ties go to the stricter decision.
    pub rules: Vec<PrefixRule>,
    /// The decision when no rule matches.
    pub default: Decision,
}

/// The decision of one rule set for one command, and the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleMatch {
    /// The decision.
    pub decision: Decision,
    /// The matching prefix, or `None` when the default applied.
    pub prefix: Option<Vec<String>>,
}

impl RuleSet {
    /// A rule set that allows everything.
    pub fn allow_all() -> RuleSet {
        RuleSet { rules: Vec::new(), default: Decision::Allow }
    }

    /// The rule set of a skill's `allowed-tools` entries: listed commands are allowed, the rest
    /// forbidden.
    ///
    /// `Bash` (or `Bash(*)`) allows every command; `Bash(git status:*)` or `Bash(git status)`
    /// allows commands starting with `git status`; entries naming other tools (`Read`, `Write`)
    /// say nothing about commands and are ignored.
    pub fn from_allowed_tools<S: AsRef<str>>(entries: &[S]) -> RuleSet {
        let mut rules = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            let prefix = if entry == "Bash" {
                Some(Vec::new())
            } else if let Some(inner) =
                entry.strip_prefix("Bash(").and_then(|rest| rest.strip_suffix(')'))
            {
                let inner = inner.trim();
                let inner = inner.strip_suffix(":*").unwrap_or(inner).trim();
                let inner = inner.strip_suffix('*').unwrap_or(inner).trim();
                Some(inner.split_whitespace().map(str::to_owned).collect())
            } else {
                None
            };
            if let Some(prefix) = prefix {
                rules.push(PrefixRule { prefix, decision: Decision::Allow });
            }
        }
        RuleSet { rules, default: Decision::Forbidden }
    }

    /// The decision for `argv` (program first).
    pub fn evaluate(&self, argv: &[String]) -> RuleMatch {
        let mut best: Option<&PrefixRule> = None;
        for rule in &self.rules {
            if !prefix_matches(rule, argv) {
                continue;
            }
            let better = match best {
                None => true,
                Some(current) => {
                    rule.prefix.len() > current.prefix.len()
                        || (rule.prefix.len() == current.prefix.len()
                            && rule.decision > current.decision)
                }
            };
            if better {
                best = Some(rule);
            }
        }
        match best {
            Some(rule) => RuleMatch { decision: rule.decision, prefix: Some(rule.prefix.clone()) },
            None => RuleMatch { decision: self.default, prefix: None },
        }
    }
}

/// Directories whose programs an `allow` rule may name by file name alone (the default `PATH`).
pub const SYSTEM_PROGRAM_DIRECTORIES: [&str; 6] =
    ["/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"];

fn prefix_matches(rule: &PrefixRule, argv: &[String]) -> bool {
    if rule.prefix.len() > argv.len() {
        return false;
    }
    rule.prefix.iter().zip(argv).enumerate().all(|(index, (wanted, given))| {
        if index > 0 || wanted == given {
            return wanted == given;
        }
        let path = std::path::Path::new(given);
        let same_name = path.file_name().and_then(|name| name.to_str()) == Some(wanted.as_str());
        let in_system_directory = path
            .parent()
            .and_then(|directory| directory.to_str())
            .is_some_and(|directory| SYSTEM_PROGRAM_DIRECTORIES.contains(&directory));
        same_name && (rule.decision != Decision::Allow || in_system_directory)
    })
}

/// The merged decision for one command: the skill's and the user's views, strictest wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedDecision {
    /// The effective decision.
    pub decision: Decision,
    /// The skill's `allowed-tools` verdict (`None` when the skill does not restrict commands).
    pub skill: Option<RuleMatch>,
    /// The user policy's verdict.
    pub user: RuleMatch,
}

/// Merges the skill's rules (if any) with the user's: the effective decision is the strictest.
pub fn merge_decisions(skill: Option<&RuleSet>, user: &RuleSet, argv: &[String]) -> MergedDecision {
    let skill = skill.map(|rules| rules.evaluate(argv));
    let user = user.evaluate(argv);
    let decision = skill.as_ref().map_or(user.decision, |skill| skill.decision.max(user.decision));
    MergedDecision { decision, skill, user }
}

/// When the approval callback is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Never ask: `allow` runs, `prompt` is refused (nobody is there to answer).
    Never,
    /// Ask for `prompt` decisions and for risky runs (network allowed).
    AskForRisky,
    /// Ask for every command that is not forbidden.
    AlwaysAsk,
}

/// What the approver is asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call id of the execution.
    pub call_id: String,
    /// The skill the command belongs to, if any.
    pub skill: Option<String>,
    /// The full command line.
    pub argv: Vec<String>,
    /// The working directory (canonical).
    pub cwd: std::path::PathBuf,
    /// Whether the command asks for network access.
    pub allow_network: bool,
    /// Why approval is needed.
    pub reason: String,
}

/// The approver's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run it.
    Approved,
    /// Do not run it, with an optional reason for the model.
    Denied {
        /// Why not.
        reason: Option<String>,
    },
}

/// The approval callback: a human prompt, a UI, or a scripted policy.
#[async_trait]
pub trait Approver: Send + Sync + std::fmt::Debug {
    /// A short name for audit records (e.g. `"console"`, `"auto-deny"`).
    fn name(&self) -> String;

    /// Answers one approval request. The runtime stops waiting after its approval timeout.
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer;
}

/// Policy settings of a runtime: the user's rules, the approval mode and its timeout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserPolicy {
    /// The user's command rules.
    pub rules: RuleSet,
    /// When to ask.
    pub approval_mode: ApprovalMode,
    /// How long to wait for the approver before treating the silence as a denial.
    pub approval_timeout: Duration,
}

impl Default for UserPolicy {
    fn default() -> UserPolicy {
        UserPolicy {
            rules: RuleSet::allow_all(),
            approval_mode: ApprovalMode::AskForRisky,
            approval_timeout: Duration::from_secs(60),
        }
    }
}

/// Whether a merged decision needs the approver under `mode`.
pub(crate) fn needs_approval(mode: ApprovalMode, decision: Decision, risky: bool) -> bool {
    match (mode, decision) {
        (_, Decision::Forbidden) => false,
        (ApprovalMode::Never, Decision::Allow | Decision::Prompt) => false,
        (ApprovalMode::AskForRisky, Decision::Allow) => risky,
        (ApprovalMode::AskForRisky, Decision::Prompt) => true,
        (ApprovalMode::AlwaysAsk, Decision::Allow | Decision::Prompt) => true,
    }
}
