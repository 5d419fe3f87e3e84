//! Repository automation for the skills-agent workspace, as a library so the tidy checks run
//! under `cargo test --workspace` as well as from `cargo xtask tidy`.

pub mod bench;
pub mod local_llm;
pub mod tidy;
