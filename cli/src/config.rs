//! `skills-agent.toml` and `~/.config/skills-agent/config.toml`: the settings a run starts from.
//!
//! Precedence, lowest first: built-in defaults, the user file, the workspace file, environment
//! variables (`SKILLS_AGENT_*`), command-line flags. Each file is checked on its own, so an
//! unknown key or a bad value is reported with the file, the line and the key. Relative paths
//! in a file are relative to the folder the file is in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Deserialize;
use skills_agent_core::{
    AgentConfig, Budgets, ContextConfig, DecideMode, ExternalToolSettings, GuardConfig,
    ModelSettings, SafeConfig, ScriptSettings,
};
use skills_agent_models::{ModelSize, ModelSpec};

/// The workspace file's name.
pub const WORKSPACE_FILE: &str = "skills-agent.toml";

/// When scripts need the user's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Approval {
    /// Never ask: allowed commands run, commands needing approval are refused.
    Never,
    /// Ask for commands the policy marks `prompt` and for risky runs (network).
    AskForRisky,
    /// Ask for every command that is not forbidden.
    Always,
}

impl Approval {
    /// The tools-runtime mode.
    pub fn mode(self) -> tools_runtime::ApprovalMode {
        match self {
            Approval::Never => tools_runtime::ApprovalMode::Never,
            Approval::AskForRisky => tools_runtime::ApprovalMode::AskForRisky,
            Approval::Always => tools_runtime::ApprovalMode::AlwaysAsk,
        }
    }
}

/// Everything a config file may say.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Model spec (`local`, `local:0.5b`, `openai:MODEL`, `anthropic:MODEL`, `mock:FILE`, `replay:DIR`).
    pub model: Option<String>,
    /// Loop strategy.
    pub strategy: Option<String>,
    /// `tools` or `json` (default: json for the local model, tools otherwise).
    pub decide: Option<DecideMode>,
    /// Extra skill roots (highest priority first), searched after the project and user roots
    /// and before the builtin one.
    #[serde(default)]
    pub skills: Vec<PathBuf>,
    /// Where run directories go (default `.agent/runs` under the workspace).
    pub runs_dir: Option<PathBuf>,
    /// Approval mode.
    pub approval: Option<Approval>,
    /// `max_tokens` of every model call.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Names of environment variables whose values are redacted (besides secret-looking ones).
    #[serde(default)]
    pub redact_env: Vec<String>,
    /// Budgets (`max_turns`, `max_tool_calls`, `max_script_runs`, `max_context_chars`, `max_duration_ms`).
    pub budgets: Option<toml::Table>,
    /// Script settings (`timeout_ms`, `max_output_bytes`, `allow_network`).
    pub scripts: Option<toml::Table>,
    /// Context settings.
    pub context: Option<toml::Table>,
    /// Guardrail settings.
    pub guard: Option<toml::Table>,
    /// The `safe` strategy's peers and collaboration timeout.
    pub safe: Option<toml::Table>,
    /// MCP servers, `[mcp_servers.NAME]` (Codex's shape, see `skills_agent_mcp::ServerConfig`).
    pub mcp_servers: Option<toml::Table>,
    /// How MCP tools are offered and called (`timeout_ms`, `catalog_max_tools`,
    /// `catalog_chars`).
    pub mcp: Option<toml::Table>,
}

/// [`Settings`] with the nested tables typed: only for checking a file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Checked {
    model: Option<String>,
    strategy: Option<String>,
    decide: Option<DecideMode>,
    #[serde(default)]
    skills: Vec<PathBuf>,
    runs_dir: Option<PathBuf>,
    approval: Option<Approval>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    #[serde(default)]
    redact_env: Vec<String>,
    budgets: Option<Budgets>,
    scripts: Option<ScriptSettings>,
    context: Option<ContextConfig>,
    guard: Option<GuardConfig>,
    safe: Option<SafeConfig>,
    mcp_servers: Option<BTreeMap<String, skills_agent_mcp::ServerConfig>>,
    mcp: Option<ExternalToolSettings>,
}

/// The settings after merging files, environment and flags, with the nested tables read.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The flat settings.
    pub settings: Settings,
    /// Budgets.
    pub budgets: Budgets,
    /// Script settings.
    pub scripts: ScriptSettings,
    /// Context settings.
    pub context: ContextConfig,
    /// Guardrails.
    pub guard: GuardConfig,
    /// The `safe` strategy's settings.
    pub safe: SafeConfig,
    /// The MCP servers, by name (validated).
    pub mcp_servers: BTreeMap<String, skills_agent_mcp::ServerConfig>,
    /// How their tools are offered and called.
    pub external_tools: ExternalToolSettings,
    /// Files read, in order of increasing precedence.
    pub files: Vec<PathBuf>,
}

/// What the command line sets for new work (`run`, `chat`), above every other source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOverrides {
    /// `--strategy`.
    pub strategy: Option<String>,
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// `--max-tool-calls`.
    pub max_tool_calls: Option<u32>,
    /// `--max-script-runs`.
    pub max_script_runs: Option<u32>,
    /// `--max-context-chars`.
    pub max_context_chars: Option<usize>,
}

impl Resolved {
    /// The agent's configuration: these settings with the command line's `overrides` on top
    /// (`None` for a resume, which takes no run flags), `ask_user` when the model may ask, for
    /// the model `spec` (the local model's context and answer lengths, its decide mode) named
    /// `model`. Without a `max_context_chars` from a file or a flag, the local model's context
    /// fits its server slot.
    pub fn agent_config(
        &self,
        overrides: Option<&RunOverrides>,
        ask_user: bool,
        spec: &ModelSpec,
        model: &str,
    ) -> AgentConfig {
        let settings = &self.settings;
        let mut budgets = self.budgets.clone();
        let context_set =
            settings.budgets.as_ref().is_some_and(|table| table.contains_key("max_context_chars"));
        if let Some(run) = overrides {
            budgets.max_turns = run.max_turns.unwrap_or(budgets.max_turns);
            budgets.max_tool_calls = run.max_tool_calls.unwrap_or(budgets.max_tool_calls);
            budgets.max_script_runs = run.max_script_runs.unwrap_or(budgets.max_script_runs);
            if let Some(chars) = run.max_context_chars {
                budgets.max_context_chars = chars;
            } else if !context_set {
                // The local server gives each of its two slots n_ctx / 2 tokens.
                if let ModelSpec::Local(size) = spec {
                    budgets.max_context_chars = match size {
                        ModelSize::B1_5 => 22_000,
                        ModelSize::B0_5 => 11_000,
                    };
                }
            }
        }
        let mut guard = self.guard.clone();
        guard.ask_user |= ask_user;
        AgentConfig {
            strategy: overrides
                .and_then(|run| run.strategy.clone())
                .or(settings.strategy.clone())
                .unwrap_or_else(|| "react".to_owned()),
            decide: settings.decide.unwrap_or_else(|| spec.decide_mode()),
            model: ModelSettings {
                model: model.to_owned(),
                temperature: settings.temperature.or(Some(0.0)),
                max_tokens: settings.max_tokens.unwrap_or(match spec {
                    ModelSpec::Local(_) => 512,
                    _ => 2_048,
                }),
            },
            budgets,
            guard,
            context: self.context.clone(),
            scripts: self.scripts.clone(),
            safe: self.safe.clone(),
            tools: self.external_tools.clone(),
        }
    }
}

/// Line (1-based) of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|byte| *byte == b'\n').count() + 1
}

/// Reads and checks one file; `None` when it does not exist.
fn read_file(path: &Path) -> Result<Option<(Settings, toml::Table)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => bail!("cannot read config file {}: {error}", path.display()),
    };
    let located = |error: toml::de::Error| {
        let Some(span) = error.span() else {
            return anyhow::anyhow!("{}: {}", path.display(), error.message());
        };
        let line = line_of(&text, span.start);
        // A bad value's span is the value: name the key written before it on its line.
        let key = text
            .lines()
            .nth(line - 1)
            .and_then(|written| written.split_once('='))
            .map(|(key, _)| key.trim())
            .filter(|key| !key.is_empty() && !error.message().contains(&format!("`{key}`")));
        match key {
            Some(key) => anyhow::anyhow!("{}:{line}: `{key}`: {}", path.display(), error.message()),
            None => anyhow::anyhow!("{}:{line}: {}", path.display(), error.message()),
        }
    };
    let table: toml::Table = toml::from_str(&text).map_err(located)?;
    // Nested tables are checked against their real types, so errors carry this file's lines.
    toml::from_str::<Checked>(&text).map_err(located)?;
    let mut settings: Settings = toml::from_str(&text).map_err(located)?;
    let base = path.parent().unwrap_or(Path::new("."));
    settings.skills = settings.skills.iter().map(|skill| base.join(skill)).collect();
    settings.runs_dir = settings.runs_dir.map(|dir| base.join(dir));
    Ok(Some((settings, table)))
}

fn merge_tables(base: &mut toml::Table, top: &toml::Table) {
    for (key, value) in top {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(below)), toml::Value::Table(above)) => {
                merge_tables(below, above)
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The user file: `$XDG_CONFIG_HOME/skills-agent/config.toml` or `~/.config/skills-agent/config.toml`.
pub fn user_file() -> Option<PathBuf> {
    if let Some(config) = std::env::var_os("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(config).join("skills-agent").join("config.toml"));
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".config/skills-agent/config.toml"))
}

/// Environment variables that override the files.
const ENV: [(&str, &str); 8] = [
    ("SKILLS_AGENT_MODEL", "model"),
    ("SKILLS_AGENT_STRATEGY", "strategy"),
    ("SKILLS_AGENT_RUNS_DIR", "runs_dir"),
    ("SKILLS_AGENT_APPROVAL", "approval"),
    ("SKILLS_AGENT_MAX_TURNS", "budgets.max_turns"),
    ("SKILLS_AGENT_MAX_TOOL_CALLS", "budgets.max_tool_calls"),
    ("SKILLS_AGENT_MAX_SCRIPT_RUNS", "budgets.max_script_runs"),
    ("SKILLS_AGENT_MAX_CONTEXT_CHARS", "budgets.max_context_chars"),
];

/// Loads and merges the user file, the workspace file and the environment (`env`).
pub fn load(workspace: &Path, user: Option<&Path>, env: &[(String, String)]) -> Result<Resolved> {
    let mut merged = toml::Table::new();
    let mut files = Vec::new();
    let mut skills = Vec::new();
    let mut runs_dir = None;
    for path in user.into_iter().map(Path::to_owned).chain([workspace.join(WORKSPACE_FILE)]) {
        if let Some((settings, table)) = read_file(&path)? {
            // Workspace roots come first (higher priority), then the user's.
            skills.splice(0..0, settings.skills.iter().cloned());
            runs_dir = settings.runs_dir.or(runs_dir);
            merge_tables(&mut merged, &table);
            files.push(path);
        }
    }
    for (variable, key) in ENV {
        let Some((_, value)) = env.iter().find(|(name, _)| name == variable) else { continue };
        let parsed = if key.starts_with("budgets.") {
            match value.parse::<i64>() {
                Ok(number) if number >= 0 => toml::Value::Integer(number),
                _ => bail!(
                    "environment variable {variable}: `{value}` is not a non-negative whole number"
                ),
            }
        } else {
            toml::Value::String(value.clone())
        };
        if key == "runs_dir" {
            runs_dir = Some(PathBuf::from(value));
            continue;
        }
        match key.split_once('.') {
            Some((table, field)) => {
                let entry =
                    merged.entry(table).or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let toml::Value::Table(table) = entry {
                    table.insert(field.to_owned(), parsed);
                }
            }
            None => {
                merged.insert(key.to_owned(), parsed);
            }
        }
    }
    let mut settings: Settings =
        Settings::deserialize(toml::Value::Table(merged)).map_err(|error| {
            anyhow::anyhow!("invalid setting from the environment: {}", error.message())
        })?;
    settings.skills = skills;
    settings.runs_dir = runs_dir;
    let nested =
        |table: &Option<toml::Table>| toml::Value::Table(table.clone().unwrap_or_default());
    let budgets = Budgets::deserialize(nested(&settings.budgets))
        .map_err(|error| anyhow::anyhow!("invalid budgets: {}", error.message()))?;
    let scripts = ScriptSettings::deserialize(nested(&settings.scripts))
        .map_err(|error| anyhow::anyhow!("invalid script settings: {}", error.message()))?;
    let context = ContextConfig::deserialize(nested(&settings.context))
        .map_err(|error| anyhow::anyhow!("invalid context settings: {}", error.message()))?;
    let guard = GuardConfig::deserialize(nested(&settings.guard))
        .map_err(|error| anyhow::anyhow!("invalid guard settings: {}", error.message()))?;
    let safe = SafeConfig::deserialize(nested(&settings.safe))
        .map_err(|error| anyhow::anyhow!("invalid safe settings: {}", error.message()))?;
    let mcp_servers = BTreeMap::<String, skills_agent_mcp::ServerConfig>::deserialize(nested(
        &settings.mcp_servers,
    ))
    .map_err(|error| anyhow::anyhow!("invalid [mcp_servers]: {}", error.message()))?;
    for (name, server) in &mcp_servers {
        server.validate(name).map_err(|error| {
            anyhow::anyhow!(
                "[mcp_servers.{name}] in {}: {error}",
                files
                    .iter()
                    .map(|file| file.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )
        })?;
    }
    let external_tools = ExternalToolSettings::deserialize(nested(&settings.mcp))
        .map_err(|error| anyhow::anyhow!("invalid [mcp] settings: {}", error.message()))?;
    Ok(Resolved {
        settings,
        budgets,
        scripts,
        context,
        guard,
        safe,
        mcp_servers,
        external_tools,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn workspace_beats_user_and_environment_beats_both() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            dir.path(),
            "user.toml",
            "model = \"openai:a\"\nstrategy = \"react\"\n[budgets]\nmax_turns = 5\nmax_tool_calls = 7\n",
        );
        write(
            dir.path(),
            WORKSPACE_FILE,
            "model = \"mock:x.json\"\nskills = [\"more\"]\n[budgets]\nmax_turns = 9\n",
        );
        let env = vec![("SKILLS_AGENT_MAX_TOOL_CALLS".to_owned(), "3".to_owned())];
        let resolved = load(dir.path(), Some(&user), &env).unwrap();
        assert_eq!(resolved.settings.model.as_deref(), Some("mock:x.json"));
        assert_eq!(resolved.budgets.max_turns, 9);
        assert_eq!(resolved.budgets.max_tool_calls, 3);
        assert_eq!(resolved.settings.skills, vec![dir.path().join("more")]);
        assert_eq!(resolved.files.len(), 2);
    }

    #[test]
    fn flags_beat_every_file_and_the_local_model_sets_the_context_left_open() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            WORKSPACE_FILE,
            "strategy = \"safe\"\nmax_tokens = 300\n[budgets]\nmax_turns = 9\nmax_script_runs = 2\n",
        );
        let resolved = load(dir.path(), None, &[]).unwrap();
        let local = ModelSpec::Local(ModelSize::B0_5);
        let flags = RunOverrides {
            strategy: Some("react".to_owned()),
            max_turns: Some(4),
            ..RunOverrides::default()
        };
        let config = resolved.agent_config(Some(&flags), true, &local, "qwen");
        assert_eq!(config.strategy, "react");
        assert_eq!((config.budgets.max_turns, config.budgets.max_script_runs), (4, 2));
        // No file or flag named max_context_chars: the 0.5B's server slot decides.
        assert_eq!(config.budgets.max_context_chars, 11_000);
        assert_eq!((config.model.model.as_str(), config.model.max_tokens), ("qwen", 300));
        assert!(config.guard.ask_user);
        // A resume takes no run flags: the files' settings and the defaults stand.
        let remote = ModelSpec::OpenAi("gpt".to_owned());
        let config = resolved.agent_config(None, false, &remote, "gpt");
        assert_eq!((config.strategy.as_str(), config.budgets.max_turns), ("safe", 9));
        assert_eq!(config.budgets.max_context_chars, Budgets::default().max_context_chars);
        assert!(!config.guard.ask_user);
        // A flag's context size beats the local model's.
        let flags = RunOverrides { max_context_chars: Some(5_000), ..RunOverrides::default() };
        let config = resolved.agent_config(Some(&flags), false, &local, "qwen");
        assert_eq!(config.budgets.max_context_chars, 5_000);
    }

    #[test]
    fn unknown_keys_and_bad_values_name_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), WORKSPACE_FILE, "model = \"local\"\n\nmodle = \"x\"\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("skills-agent.toml:3") && error.contains("modle"), "{error}");
        write(dir.path(), WORKSPACE_FILE, "[budgets]\nmax_turns = 3\nmax_turnz = 4\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("skills-agent.toml:3") && error.contains("max_turnz"), "{error}");
        write(dir.path(), WORKSPACE_FILE, "approval = \"sometimes\"\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("skills-agent.toml:1") && error.contains("sometimes"), "{error}");
        write(dir.path(), WORKSPACE_FILE, "[budgets]\nmax_turns = -1\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("skills-agent.toml:2"), "{error}");
        let env = vec![("SKILLS_AGENT_MAX_TURNS".to_owned(), "many".to_owned())];
        std::fs::remove_file(dir.path().join(WORKSPACE_FILE)).unwrap();
        let error = load(dir.path(), None, &env).unwrap_err().to_string();
        assert!(error.contains("SKILLS_AGENT_MAX_TURNS"), "{error}");
    }

    #[test]
    fn mcp_servers_are_read_merged_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let user = write(
            dir.path(),
            "user.toml",
            "[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\n",
        );
        write(
            dir.path(),
            WORKSPACE_FILE,
            "[mcp_servers.files]\ntool_timeout_ms = 5000\ntools = { write_file = \"prompt\" }\n\
             [mcp_servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\n",
        );
        let resolved = load(dir.path(), Some(&user), &[]).unwrap();
        let files = &resolved.mcp_servers["files"];
        assert_eq!(files.command.as_deref(), Some("npx"));
        assert_eq!(files.args, vec!["-y".to_owned(), "server".to_owned()]);
        assert_eq!(files.tool_timeout_ms, Some(5000));
        assert_eq!(files.tools["write_file"], skills_agent_mcp::ToolRule::Prompt);
        assert_eq!(resolved.mcp_servers["docs"].url.as_deref(), Some("http://127.0.0.1:9/mcp"));
        assert_eq!(resolved.external_tools, ExternalToolSettings::default());
        write(dir.path(), WORKSPACE_FILE, "[mcp]\ncatalog_max_tools = 4\ntimeout_ms = 9000\n");
        let resolved = load(dir.path(), None, &[]).unwrap();
        assert_eq!(
            (resolved.external_tools.catalog_max_tools, resolved.external_tools.timeout_ms),
            (4, 9000)
        );
        // Unknown keys name the line; a table with neither command nor url is refused.
        write(dir.path(), WORKSPACE_FILE, "[mcp_servers.x]\ncommand = \"a\"\ncomand = \"b\"\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("skills-agent.toml:3") && error.contains("comand"), "{error}");
        write(dir.path(), WORKSPACE_FILE, "[mcp_servers.x]\nargs = [\"a\"]\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("[mcp_servers.x]"), "{error}");
    }

    #[test]
    fn the_readme_mcp_example_is_a_valid_config() {
        let readme = include_str!("../../README.md");
        let start =
            readme.find("```toml\n[mcp_servers.").expect("README has an [mcp_servers] example");
        let block = &readme[start + "```toml\n".len()..];
        let block = &block[..block.find("```").unwrap()];
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), WORKSPACE_FILE, block);
        let resolved = load(dir.path(), None, &[]).unwrap();
        let names: Vec<&str> = resolved.mcp_servers.keys().map(String::as_str).collect();
        assert_eq!(names, ["docs", "everything", "files"]);
        assert_eq!(resolved.mcp_servers["docs"].approval, skills_agent_mcp::ToolRule::Prompt);
    }

    #[test]
    fn the_safe_peers_and_guard_switches_are_read() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            WORKSPACE_FILE,
            "[guard]\nask_user = true\n[safe]\ncollaboration_timeout_ms = 500\n\
             peers = [{ id = \"reviewer\", role = \"Checks results.\" }]\n",
        );
        let resolved = load(dir.path(), None, &[]).unwrap();
        assert!(resolved.guard.ask_user);
        assert_eq!(resolved.safe.collaboration_timeout_ms, 500);
        assert_eq!(resolved.safe.peers.len(), 1);
        assert_eq!(resolved.safe.peers[0].id, "reviewer");
        write(dir.path(), WORKSPACE_FILE, "[safe]\npeers = [{ id = \"r\", rol = \"x\" }]\n");
        let error = load(dir.path(), None, &[]).unwrap_err().to_string();
        assert!(error.contains("skills-agent.toml:2") && error.contains("rol"), "{error}");
    }
}
