//! `[mcp_servers.NAME]` tables: the configuration of one server, in the shape Codex users know.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Startup timeout (initialize + the first `tools/list`) when the table does not set one.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Per-call timeout when neither the call nor the table sets one.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[mcp_servers.NAME]` table of `skills-agent.toml` (Codex's shape).
///
/// Exactly one of `command` (a stdio server, started confined through tools-runtime) and `url`
/// (a streamable HTTP server) is set; [`ServerConfig::validate`] says what is wrong otherwise.
///
/// ```toml
/// [mcp_servers.files]
/// command = "npx-installed/bin/mcp-server-filesystem"   # or "node" with args
/// args = ["."]
/// env_vars = ["LANG"]            # names passed through from the caller's environment
/// tool_timeout_ms = 30000
/// disabled_tools = ["move_file"]
/// tools = { write_file = "prompt" }
///
/// [mcp_servers.docs]
/// url = "https://mcp.example.com/mcp"
/// bearer_token_env_var = "DOCS_MCP_TOKEN"
/// ```
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The program of a stdio server (a path, or a name looked up in `PATH`).
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables the server sees: a list of names passed through from the caller's
    /// environment, or a table `NAME = "value"` of fixed values.
    #[serde(default)]
    pub env: EnvSpec,
    /// Codex's pass-through list of names (also accepted, added to `env`'s names).
    #[serde(default)]
    pub env_vars: Vec<String>,
    /// Working directory; relative to the workspace (default: the workspace).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// The variable holding the bearer token sent to an HTTP server.
    #[serde(default)]
    pub bearer_token_env_var: Option<String>,
    /// `false` keeps the server configured but not started.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Only these tools are offered (default: all).
    #[serde(default)]
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered (applied after `enabled_tools`).
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// Time for the handshake and the first tool listing, in milliseconds (default 10 000).
    #[serde(default)]
    pub startup_timeout_ms: Option<u64>,
    /// Time for one tool call, in milliseconds (default 60 000).
    #[serde(default)]
    pub tool_timeout_ms: Option<u64>,
    /// Whether a stdio server may use the network (default `false`).
    #[serde(default)]
    pub network: bool,
    /// Extra hierarchies a stdio server may read (its install directory and the program's
    /// prefix are added on their own).
    #[serde(default)]
    pub read_paths: Vec<PathBuf>,
    /// The default rule for the server's tools (default `allow`: the server is confined and
    /// the user configured it).
    #[serde(default)]
    pub approval: ToolRule,
    /// Per-tool rules, by the tool's name on the server.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolRule>,
}

fn default_true() -> bool {
    true
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            command: None,
            args: Vec::new(),
            env: EnvSpec::default(),
            env_vars: Vec::new(),
            cwd: None,
            url: None,
            bearer_token_env_var: None,
            enabled: true,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            startup_timeout_ms: None,
            tool_timeout_ms: None,
            network: false,
            read_paths: Vec::new(),
            approval: ToolRule::default(),
            tools: BTreeMap::new(),
        }
    }
}

/// The `env` key: names passed through, or fixed values.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum EnvSpec {
    /// `env = ["LANG", "NODE_OPTIONS"]`: copied from the caller's environment.
    Names(Vec<String>),
    /// `env = { NODE_ENV = "production" }`: fixed values.
    Values(BTreeMap<String, String>),
}

impl Default for EnvSpec {
    fn default() -> EnvSpec {
        EnvSpec::Names(Vec::new())
    }
}

/// What happens when the model calls a tool: run it, ask first, or never.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ToolRule {
    /// Call without asking.
    #[default]
    Allow,
    /// Ask the approver first.
    Prompt,
    /// Never call (the tool is still listed, so the model learns why).
    Forbid,
}

impl ToolRule {
    /// The matching tools-runtime decision.
    pub fn decision(self) -> tools_runtime::Decision {
        match self {
            ToolRule::Allow => tools_runtime::Decision::Allow,
            ToolRule::Prompt => tools_runtime::Decision::Prompt,
            ToolRule::Forbid => tools_runtime::Decision::Forbidden,
        }
    }
}

impl ServerConfig {
    /// Whether this is a stdio server (`command`) rather than an HTTP one (`url`).
    pub fn is_stdio(&self) -> bool {
        self.command.is_some()
    }

    /// The startup timeout (`startup_timeout_ms` or 10 s).
    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout_ms.map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_millis)
    }

    /// The per-call timeout (`tool_timeout_ms` or 60 s).
    pub fn tool_timeout(&self) -> Duration {
        self.tool_timeout_ms.map_or(DEFAULT_TOOL_TIMEOUT, Duration::from_millis)
    }

    /// The rule for `tool`: its entry in `tools`, else `approval`.
    pub fn rule_for(&self, tool: &str) -> ToolRule {
        self.tools.get(tool).copied().unwrap_or(self.approval)
    }

    /// Whether `tool` passes `enabled_tools` and `disabled_tools`.
    pub fn offers(&self, tool: &str) -> bool {
        let enabled = self.enabled_tools.as_ref().is_none_or(|list| list.iter().any(|t| t == tool));
        enabled && !self.disabled_tools.iter().any(|t| t == tool)
    }

    /// Names passed through from the caller's environment (`env` names and `env_vars`).
    pub fn passed_names(&self) -> Vec<String> {
        let mut names = match &self.env {
            EnvSpec::Names(names) => names.clone(),
            EnvSpec::Values(_) => Vec::new(),
        };
        names.extend(self.env_vars.iter().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// Fixed values from an `env` table.
    pub fn fixed_values(&self) -> BTreeMap<String, String> {
        match &self.env {
            EnvSpec::Names(_) => BTreeMap::new(),
            EnvSpec::Values(values) => values.clone(),
        }
    }

    /// Checks the table of server `name`: a valid name, exactly one of `command`/`url`, keys
    /// that belong to the transport, valid variable names, non-zero timeouts.
    pub fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let fail = |problem: String| Err(ConfigError { server: name.to_owned(), problem });
        if name.is_empty() || !name.chars().all(is_name_char) || name.contains("__") {
            return fail(
                "the server name may only use letters, digits, `_` and `-`, without `__` \
                 (it becomes part of tool names like mcp__NAME__TOOL)"
                    .to_owned(),
            );
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return fail("set either `command` (stdio) or `url` (HTTP), not both".to_owned());
            }
            (None, None) => {
                return fail(
                    "set `command` (a stdio server started on this machine) or `url` \
                     (a streamable HTTP server)"
                        .to_owned(),
                );
            }
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return fail("`command` is empty".to_owned());
                }
                if self.bearer_token_env_var.is_some() {
                    return fail(
                        "`bearer_token_env_var` is for HTTP servers (`url`); pass variables \
                         to a stdio server with `env` or `env_vars`"
                            .to_owned(),
                    );
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return fail(format!("`url` must start with http:// or https://, got `{url}`"));
                }
                let stdio_only = [
                    (!self.args.is_empty(), "args"),
                    (self.env != EnvSpec::default(), "env"),
                    (!self.env_vars.is_empty(), "env_vars"),
                    (self.cwd.is_some(), "cwd"),
                    (self.network, "network"),
                    (!self.read_paths.is_empty(), "read_paths"),
                ];
                if let Some((_, key)) = stdio_only.iter().find(|(set, _)| *set) {
                    return fail(format!(
                        "`{key}` applies to stdio servers (`command`), not to `url` servers"
                    ));
                }
            }
        }
        let passed = self.passed_names();
        let fixed = self.fixed_values();
        for variable in passed.iter().chain(fixed.keys()).chain(self.bearer_token_env_var.iter()) {
            if variable.is_empty()
                || variable.contains('=')
                || variable.contains('\0')
                || variable.starts_with(|c: char| c.is_ascii_digit())
            {
                return fail(format!("`{variable}` is not a valid environment variable name"));
            }
        }
        if self.startup_timeout_ms == Some(0) {
            return fail("`startup_timeout_ms` must be greater than 0".to_owned());
        }
        if self.tool_timeout_ms == Some(0) {
            return fail("`tool_timeout_ms` must be greater than 0".to_owned());
        }
        Ok(())
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The name the model sees for `tool` of `server`: `mcp__{server}__{tool}`, every character
/// outside `[A-Za-z0-9_-]` replaced by `_`, at most 64 characters. A name that had to change
/// (a replaced character, or cut to 64) ends with a hash of the whole name, so `get.x` and
/// `get_x`, or two long names, stay apart.
pub fn qualified_name(server: &str, tool: &str) -> String {
    const LIMIT: usize = 64;
    let full = format!("mcp__{server}__{tool}");
    let sanitised: String = full.chars().map(|c| if is_name_char(c) { c } else { '_' }).collect();
    if sanitised == full && sanitised.len() <= LIMIT {
        return sanitised;
    }
    // FNV-1a over the unsanitised name: stable across runs and platforms.
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let suffix = format!("_{:08x}", hash & 0xffff_ffff);
    // All characters are ASCII after sanitising, so any byte index is a boundary.
    let keep = sanitised.len().min(LIMIT - suffix.len());
    format!("{}{suffix}", &sanitised[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(text: &str) -> Result<BTreeMap<String, ServerConfig>, toml::de::Error> {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, ServerConfig>,
        }
        toml::from_str::<File>(text).map(|file| file.mcp_servers)
    }

    #[test]
    fn codex_shaped_tables_parse() {
        let servers = parse(
            r#"
            [mcp_servers.files]
            command = "node"
            args = ["server.js", "."]
            env_vars = ["LANG"]
            env = { NODE_ENV = "production" }
            startup_timeout_ms = 20000
            enabled_tools = ["read_file", "write_file"]
            disabled_tools = ["write_file"]
            tools = { read_file = "prompt" }

            [mcp_servers.docs]
            url = "https://mcp.example.com/mcp"
            bearer_token_env_var = "DOCS_TOKEN"
            enabled = false
            approval = "forbid"
            "#,
        )
        .unwrap();
        let files = &servers["files"];
        files.validate("files").unwrap();
        assert!(files.is_stdio());
        assert_eq!(files.passed_names(), vec!["LANG".to_owned()]);
        assert_eq!(files.fixed_values()["NODE_ENV"], "production");
        assert_eq!(files.startup_timeout(), Duration::from_secs(20));
        assert_eq!(files.tool_timeout(), DEFAULT_TOOL_TIMEOUT);
        assert!(files.offers("read_file"));
        assert!(!files.offers("write_file"));
        assert!(!files.offers("move_file"));
        assert_eq!(files.rule_for("read_file"), ToolRule::Prompt);
        assert_eq!(files.rule_for("list"), ToolRule::Allow);
        let docs = &servers["docs"];
        docs.validate("docs").unwrap();
        assert!(!docs.enabled);
        assert_eq!(docs.rule_for("search"), ToolRule::Forbid);
        assert_eq!(ToolRule::Forbid.decision(), tools_runtime::Decision::Forbidden);
    }

    #[test]
    fn env_may_be_a_list_of_names() {
        let servers =
            parse("[mcp_servers.a]\ncommand = \"x\"\nenv = [\"B\", \"A\"]\nenv_vars = [\"A\"]")
                .unwrap();
        assert_eq!(servers["a"].passed_names(), vec!["A".to_owned(), "B".to_owned()]);
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let error = parse("[mcp_servers.a]\ncommand = \"x\"\ntimeout = 3").unwrap_err();
        assert!(error.to_string().contains("unknown field `timeout`"), "{error}");
    }

    #[test]
    fn validation_names_the_problem() {
        let problem =
            |config: ServerConfig, name: &str| config.validate(name).unwrap_err().to_string();
        let stdio = ServerConfig { command: Some("node".into()), ..ServerConfig::default() };
        assert!(problem(stdio.clone(), "bad name").contains("server `bad name`"));
        // `a__b` + tool `c` and `a` + tool `b__c` would both be mcp__a__b__c.
        assert!(problem(stdio.clone(), "a__b").contains("without `__`"));
        assert!(problem(ServerConfig::default(), "a").contains("set `command`"));
        let both = ServerConfig { url: Some("http://x".into()), ..stdio.clone() };
        assert!(problem(both, "a").contains("not both"));
        let http =
            ServerConfig { url: Some("http://127.0.0.1:1/mcp".into()), ..ServerConfig::default() };
        http.validate("a").unwrap();
        let http_args = ServerConfig { args: vec!["x".into()], ..http };
        assert!(problem(http_args, "a").contains("`args` applies to stdio servers"));
        let ftp = ServerConfig { url: Some("ftp://x".into()), ..ServerConfig::default() };
        assert!(problem(ftp, "a").contains("http:// or https://"));
        let token = ServerConfig { bearer_token_env_var: Some("T".into()), ..stdio.clone() };
        assert!(problem(token, "a").contains("for HTTP servers"));
        let zero = ServerConfig { tool_timeout_ms: Some(0), ..stdio.clone() };
        assert!(problem(zero, "a").contains("tool_timeout_ms"));
        let bad_var = ServerConfig { env_vars: vec!["A=B".into()], ..stdio };
        assert!(problem(bad_var, "a").contains("`A=B` is not a valid"));
    }

    proptest::proptest! {
        #[test]
        fn qualified_names_are_always_valid_tool_names(server in "[A-Za-z0-9_-]{1,40}", tool in "\\PC{0,90}") {
            let name = qualified_name(&server, &tool);
            proptest::prop_assert!(name.len() <= 64);
            proptest::prop_assert!(name.chars().all(is_name_char), "{}", name);
            proptest::prop_assert!(name.starts_with("mcp__"));
            proptest::prop_assert_eq!(&name, &qualified_name(&server, &tool));
        }
    }

    #[test]
    fn qualified_names_are_sanitised_and_bounded() {
        assert_eq!(qualified_name("files", "read_file"), "mcp__files__read_file");
        let renamed = qualified_name("fs", "get.sum/x y");
        assert!(renamed.starts_with("mcp__fs__get_sum_x_y_"), "{renamed}");
        assert_ne!(renamed, qualified_name("fs", "get_sum_x_y"));
        assert_ne!(qualified_name("fs", "get.x"), qualified_name("fs", "get_x"));
        assert_eq!(qualified_name("fs", "get_x"), "mcp__fs__get_x");
        let long_a = qualified_name("server", &"a".repeat(80));
        let long_b = qualified_name("server", &format!("{}b", "a".repeat(79)));
        assert_eq!(long_a.len(), 64);
        assert_eq!(long_b.len(), 64);
        assert_ne!(long_a, long_b);
        assert!(long_a.starts_with("mcp__server__aaaa"));
        assert_eq!(long_a, qualified_name("server", &"a".repeat(80)));
    }
}
