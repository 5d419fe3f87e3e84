//! The skills-agent orchestrator: one model decision per turn, turned into a validated,
//! sandboxed, audited action over Agent Skills.
//!
//! # Design
//!
//! A run is a loop of turns. Each turn the runtime derives from the run state which actions
//! are possible now (the *action space*: skills not yet selected, ranked by relevance; scripts
//! and files of selected skills only; no second select straight after a select; only
//! `final_answer` after an identical successful script run repeats) and asks the model once —
//! as native tool calls with the turn's enums, or as one JSON document under the turn's JSON
//! Schema (`response_format`, which llama.cpp turns into a grammar). The answer streams:
//! `action_planned` is emitted as soon as the action's name is parsed and the final answer's
//! text arrives as `assistant_delta` events (through `stream-json`). The action is then checked
//! by the guardrails (select before use, hidden skills, bodies per turn, budgets) — a grammar
//! narrows, it does not authorise — executed through `skill-loader` or `tools-runtime`, and
//! its result becomes an observation the model sees next turn. Refusals and failures are
//! observations with a typed status, never crashes.
//!
//! Budgets (`max_turns`, `max_tool_calls`, `max_script_runs`, `max_context_chars`,
//! `max_duration_ms`) are checked at the head of every turn. When one is hit, or the same
//! failing action repeats, the run ends with a degraded answer (done so far, blocker, next
//! steps) from one no-tools model call, or a deterministic text if that call fails: **the user
//! always gets a final text**.
//!
//! The context keeps a stable prefix (system + catalog, request, an append-only transcript)
//! with a per-turn note at the end, so prompt caches serve it; compaction, the only rewrite,
//! shortens old observations to their first line and id, and `recall_observation` brings them
//! back.
//!
//! External tools (MCP servers, through the [`ExternalTools`] trait the CLI implements) are
//! actions too: listed beside the skill catalog (by name only when the list is long, with
//! `describe_tools` loading their descriptions on demand), called through `call_tool` or as
//! functions of their own, checked against their input schema and the policy, approved through
//! tools-runtime, counted, timed out, recorded and replayed like every other action.
//!
//! Every step is an [`Event`] (`{ts, run_id, seq, turn, type, data}`) sent to the sinks: the
//! run directory's `events.jsonl` (the source of truth), a [`BroadcastSink`], a
//! [`ConsoleSink`], a [`MemorySink`]. Secrets are redacted where text enters the run.
//! [`replay_check`] re-runs a recorded run from its own events and compares;
//! [`Agent::resume`] continues an interrupted one without redoing what the record shows done.
//!
//! # Example
//!
//! A whole run on a scripted model: select the skill, answer.
//!
//! ```
//! use std::sync::Arc;
//! use skills_agent_core::{Agent, MemorySink, Outcome};
//! use model_adapter::{MockModel, MockReply};
//! use serde_json::json;
//! use skills_agent_registry::{RootKind, SkillRoot};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let skills = tempfile::tempdir()?;
//! std::fs::create_dir(skills.path().join("greeter"))?;
//! std::fs::write(
//!     skills.path().join("greeter/SKILL.md"),
//!     "---\nname: greeter\ndescription: Greets people by name.\n---\nSay hello warmly.\n",
//! )?;
//! let model = Arc::new(MockModel::new(vec![
//!     MockReply::tool_call("select_skills", &json!({"names": ["greeter"], "thought": "greeting task"})),
//!     MockReply::tool_call("final_answer", &json!({"content": "Hello, Ada!"})),
//! ]));
//! let events = Arc::new(MemorySink::new());
//! let agent = Agent::builder()
//!     .model(model)
//!     .skill_roots(vec![SkillRoot::new(RootKind::Project, skills.path())])
//!     .workspace(skills.path())
//!     .sink(events.clone())
//!     .build()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let result = runtime.block_on(agent.run("Greet Ada"))?;
//! assert_eq!(result.outcome, Outcome::Completed);
//! assert_eq!(result.final_text, "Hello, Ada!");
//! assert_eq!((result.turns, result.model_calls, result.tool_calls), (2, 2, 1));
//! assert_eq!(events.events().last().map(|event| event.kind.as_str()), Some("run_finished"));
//! # Ok(())
//! # }
//! ```

// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}

mod action;
mod agent;
mod budget;
mod config;
mod console;
mod context;
mod error;
mod event;
mod exec;
mod external;
mod focus;
mod grounding;
mod guard;
mod metrics;
mod plan;
mod rank;
mod reasoning;
mod replay;
mod run;
mod rundir;
mod session;
mod space;
mod state;
mod strategy;
mod usage;

pub use action::Action;
pub use agent::{Agent, AgentBuilder};
pub use budget::Outcome;
pub use config::{
    AgentConfig, Budgets, ContextConfig, DecideMode, ExternalToolSettings, GuardConfig,
    ModelSettings, PeerAgent, RetryCaps, SafeConfig, ScriptSettings,
};
pub use console::{ConsoleOptions, ConsoleSink};
pub use error::{Error, Result};
pub use event::payload;
pub use event::{
    BroadcastSink, Event, EventKind, EventSink, JsonlSink, MemorySink, Payload, comparable,
    last_finished, read_complete_events, read_events,
};
pub use exec::builtin::{STORE_PATH, parse_slash};
pub use external::{ExternalBlob, ExternalOutcome, ExternalTool, ExternalTools};
pub use metrics::{ReasoningMetrics, TurnReasoning, reasoning_text_chars};
pub use rank::rank_skills;
pub use replay::{
    BudgetUse, Compliance, Divergence, ReplayReport, TurnSummary, compliance, replay_check, turns,
};
pub use rundir::{Redactor, StoredText, is_sha256_hex, is_valid_run_id};
pub use session::{
    RECORD_FORMAT, RecordedRoot, RunOrigin, RunResult, RunStart, RunUsage, record_format_mismatch,
};
pub use state::{
    ActionRecord, Counters, ObservationStatus, Plan, PlanStep, PlanUpdate, RunState, SelectedSkill,
    SkillEntry, StepChange, StepStatus,
};
pub use strategy::STRATEGIES;
pub use tokio_util::sync::CancellationToken;
pub use usage::ScriptUsage;
