//! The `skills-agent` command line as a library: configuration files, model specs, the
//! embedded local model, and the commands. `src/main.rs` is a thin front over [`cli::main`].
//!
//! Other programs (`cargo xtask local-llm`) use [`local_model`] to install and start the
//! embedded model.

mod chat;
pub mod cli;
pub mod config;
mod launch;
pub mod local_model;
mod mcp_tools;
pub mod models;
mod runs;
mod serve;
