//! The `skills-agent` command line as a library: configuration files and the commands.
//! `src/main.rs` is a thin front over [`cli::main`]. Model specs and the embedded local model
//! are the `skills-agent-models` crate's (shared with `cargo xtask`).

mod chat;
pub mod cli;
pub mod config;
mod faults;
mod fleet;
mod launch;
mod mcp_tools;
mod runs;
mod serve;
