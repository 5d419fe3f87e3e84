//! What a run is allowed to do and how it asks: budgets, guardrail settings, context limits and
//! the model settings. The whole `AgentConfig` is recorded in `run_started`, so a replay runs
//! under exactly the settings of the original run.

use serde::{Deserialize, Serialize};

/// Limits checked at the head of every turn; nothing runs after one is hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budgets {
    /// Decide turns (one model call each).
    pub max_turns: u32,
    /// Actions other than `final_answer` that the model asked for (refused ones included).
    pub max_tool_calls: u32,
    /// Scripts actually started.
    pub max_script_runs: u32,
    /// Characters of the packed context (system, transcript and the turn's state note).
    pub max_context_chars: usize,
    /// Wall-clock limit of the run in milliseconds (`None`: no limit). Not applied on replay.
    pub max_duration_ms: Option<u64>,
    /// `plan-execute-think`: a round's batch that has run this long (from its first step)
    /// stops before its next step and the round goes to think (seed 003: 60 s). `None`: no
    /// limit. On replay the record says where a round stopped.
    pub round_timeout_ms: Option<u64>,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            max_turns: 12,
            max_tool_calls: 30,
            max_script_runs: 6,
            max_context_chars: 48_000,
            max_duration_ms: Some(15 * 60 * 1000),
            round_timeout_ms: Some(60_000),
        }
    }
}

/// How the model is asked for its one action per turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecideMode {
    /// Native tool calls: each allowed action is a tool of the turn, with the turn's enums
    /// (OpenAI, Anthropic, vLLM…). `tool_choice` is `required`.
    Tools,
    /// One JSON document `{"thought"?, "action": {"type", "args"}, "plan"?, "plan_update"?}`
    /// constrained by the turn's JSON Schema (`response_format = json_schema`; llama.cpp turns
    /// it into a grammar).
    Json,
}

/// Consecutive failures of one kind tolerated before the run degrades (`stuck`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryCaps {
    /// Model calls that failed after model-adapter's own retries.
    pub model_error: u32,
    /// Answers that were not one valid action.
    pub invalid_action: u32,
    /// Actions refused by a guardrail, the policy or the approver.
    pub refused: u32,
    /// Scripts that exited non-zero, were killed, or could not be read.
    pub failed: u32,
    /// Scripts that timed out.
    pub timeout: u32,
}

impl Default for RetryCaps {
    fn default() -> RetryCaps {
        RetryCaps { model_error: 2, invalid_action: 3, refused: 3, failed: 3, timeout: 2 }
    }
}

/// Guardrail settings (seed 002 §5.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardConfig {
    /// Skill bodies loaded by one `select_skills` (more is refused: "select in batches").
    pub max_bodies_per_turn: usize,
    /// Skills the user named explicitly: these may be selected even with
    /// `disable-model-invocation: true`. A task that mentions `/NAME` or `$NAME` names it too.
    pub user_named_skills: Vec<String>,
    /// The same failing action this many times in a row ends the run as `stuck`.
    pub stuck_repeats: u32,
    /// Per-kind caps of consecutive failures.
    pub retry_caps: RetryCaps,
    /// Offer `ask_user`: the run may stop with outcome `needs_input` and a question, and
    /// continue with the answer (`Agent::send`). Off by default: a batch run has no one to ask.
    pub ask_user: bool,
    /// Offer the built-in `todo` and `schedule` tools over the workspace store
    /// (`.skills-agent/store.json`, also what the `/todo`, `/schedule`, `/view` commands use).
    pub builtin_tools: bool,
}

impl Default for GuardConfig {
    fn default() -> GuardConfig {
        GuardConfig {
            max_bodies_per_turn: 2,
            user_named_skills: Vec::new(),
            stuck_repeats: 3,
            retry_caps: RetryCaps::default(),
            ask_user: false,
            builtin_tools: false,
        }
    }
}

/// Context packing and compaction settings (seed 002 §7.2–7.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// Compaction starts when the packed context passes this share of `max_context_chars`.
    pub compact_at: f64,
    /// The most recent observations kept whole by compaction.
    pub keep_recent_observations: usize,
    /// Observation text longer than this is stored in `observations/` by SHA-256 and shown to
    /// the model as head + tail with the reference.
    pub inline_observation_chars: usize,
    /// Characters of an old observation kept by compaction (its first line, then the reference).
    pub compacted_observation_chars: usize,
    /// After deterministic compaction, ask the model once (no tools, counted) to summarise the
    /// compacted observations.
    pub summarize_with_model: bool,
    /// Characters of the skill catalog shown to the model.
    pub catalog_chars: usize,
}

impl Default for ContextConfig {
    fn default() -> ContextConfig {
        ContextConfig {
            compact_at: 0.8,
            keep_recent_observations: 3,
            inline_observation_chars: 4_000,
            compacted_observation_chars: 160,
            summarize_with_model: false,
            catalog_chars: 6_000,
        }
    }
}

/// The model name and sampling settings sent with every call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSettings {
    /// The provider's model name.
    pub model: String,
    /// Sampling temperature (`Some(0.0)` by default: runs should be reproducible).
    pub temperature: Option<f32>,
    /// `max_tokens` of every call (small models run away without it).
    pub max_tokens: u32,
}

impl Default for ModelSettings {
    fn default() -> ModelSettings {
        ModelSettings { model: "default".to_owned(), temperature: Some(0.0), max_tokens: 768 }
    }
}

/// Script execution settings passed to tools-runtime for every `run_script`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScriptSettings {
    /// Timeout of one script in milliseconds.
    pub timeout_ms: u64,
    /// Output kept per stream (head + tail).
    pub max_output_bytes: usize,
    /// Whether scripts may use the network.
    pub allow_network: bool,
}

impl Default for ScriptSettings {
    fn default() -> ScriptSettings {
        ScriptSettings { timeout_ms: 60_000, max_output_bytes: 256 * 1024, allow_network: false }
    }
}

/// Another agent of a `safe` run, which plan steps may ask for help (`request_collaboration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerAgent {
    /// Its id on the bus (lowercase letters, digits, `-`, `_`; not `main`, which is the
    /// requester).
    pub id: String,
    /// What it is good at: its system prompt, and what the planner reads about it.
    pub role: String,
}

/// Settings of the `safe` strategy (seed 004).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SafeConfig {
    /// The peer agents on the run's bus (none: plans have function steps only).
    pub peers: Vec<PeerAgent>,
    /// How long a requester waits for a collaboration response, in milliseconds; the peer's
    /// model call is cut at that deadline and the step fails `timeout`.
    pub collaboration_timeout_ms: u64,
    /// Skills that are SOPs besides those whose name or description says so (`workflow`,
    /// `sop`, `procedure`, `runbook`, `playbook`, `checklist`).
    pub sop_skills: Vec<String>,
    /// SOP candidates offered to the model at most (best description match first).
    pub max_sop_candidates: usize,
}

impl Default for SafeConfig {
    fn default() -> SafeConfig {
        SafeConfig {
            peers: Vec::new(),
            collaboration_timeout_ms: 120_000,
            sop_skills: Vec::new(),
            max_sop_candidates: 3,
        }
    }
}

impl SafeConfig {
    fn is_default(&self) -> bool {
        *self == SafeConfig::default()
    }
}

/// How external (MCP) tools are offered and called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExternalToolSettings {
    /// Timeout of one call in milliseconds, for tools whose server sets none.
    pub timeout_ms: u64,
    /// With more tools than this on offer, the catalog names them (by server) and
    /// `describe_tools` loads their descriptions and schemas on demand.
    pub catalog_max_tools: usize,
    /// The same when the tools' catalog lines would take more characters than this.
    pub catalog_chars: usize,
}

impl Default for ExternalToolSettings {
    fn default() -> ExternalToolSettings {
        ExternalToolSettings { timeout_ms: 60_000, catalog_max_tools: 12, catalog_chars: 3_000 }
    }
}

impl ExternalToolSettings {
    fn is_default(&self) -> bool {
        *self == ExternalToolSettings::default()
    }
}

/// Everything that decides how a run behaves; recorded in `run_started`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// The loop strategy (`react`).
    pub strategy: String,
    /// How the model is asked.
    pub decide: DecideMode,
    /// Model name and sampling.
    pub model: ModelSettings,
    /// Limits.
    pub budgets: Budgets,
    /// Guardrails.
    pub guard: GuardConfig,
    /// Context packing.
    pub context: ContextConfig,
    /// Script execution.
    pub scripts: ScriptSettings,
    /// The `safe` strategy: peer agents, collaboration timeout, SOPs (left out of
    /// `run_started` when it has its defaults).
    #[serde(skip_serializing_if = "SafeConfig::is_default")]
    pub safe: SafeConfig,
    /// External (MCP) tools: call timeout and catalog size (left out of `run_started` when
    /// it has its defaults).
    #[serde(skip_serializing_if = "ExternalToolSettings::is_default")]
    pub tools: ExternalToolSettings,
}

impl Default for AgentConfig {
    fn default() -> AgentConfig {
        AgentConfig {
            strategy: "react".to_owned(),
            decide: DecideMode::Tools,
            model: ModelSettings::default(),
            budgets: Budgets::default(),
            guard: GuardConfig::default(),
            context: ContextConfig::default(),
            scripts: ScriptSettings::default(),
            safe: SafeConfig::default(),
            tools: ExternalToolSettings::default(),
        }
    }
}
