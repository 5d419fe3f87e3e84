//! `cargo xtask <command>`: the front door for repository automation.

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  bench [--out DIR] [--strategy NAME]... [--scenario TEXT] [--live [--model SPEC] [--timeout SECS | --nats URL]]
                                run the scenarios per strategy (scripted, or on a real model,
                                `local` by default; with --nats, by a fleet's workers); write
                                results.json, report.md and report.html into DIR (default
                                target/bench/)
  bench --trajectories FILE [--format openai-chat]
                                score other agents' recorded runs (OpenAI chat messages): one JSON
                                line with the silent-call rate, reasoned calls, success rate
  package [--no-dry-run]        package every publishable crate in dependency order (`cargo
                                package --no-verify`), fail on files that should not ship
                                (`target/`, test output, > 1 MiB); `cargo publish --dry-run` for
                                the crates with no workspace dependency
  features                      model-adapter, skills-agent-mcp and skills-agent-core build without their
                                default features and with `tls-ring` alone, with no aws-lc-sys;
                                print each build's dependency count
  outside                       a throwaway project outside the workspace depends on stream-json,
                                skills-agent-registry and model-adapter by path (default features, then
                                none) and builds and runs every README example of theirs
  model-bench [--url URL] [--repeat N] [--requests DIR]
                                replay the recorded requests of the main job
                                (models/benches/requests/) against the running 1.5B model and
                                print each call's wall time against the server's own time
  tidy                          check dependency direction and `//!` file headers across the workspace
  local-llm start|stop|status [--size 0.5b|1.5b]
                                run a real local model (llama.cpp + Qwen2.5-Coder, default 0.5B) on
                                127.0.0.1; `start` prints its URL for SKILLS_AGENT_LLM_URL";

fn main() -> ExitCode {
    // The bench runs scripts through the sandbox with this binary as the helper.
    if let Some(code) = bench::run_sandbox_helper_if_requested() {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tidy") => {
            let root = xtask::tidy::workspace_root();
            match xtask::tidy::check(&root) {
                Ok(violations) if violations.is_empty() => {
                    println!("tidy: ok");
                    ExitCode::SUCCESS
                }
                Ok(violations) => {
                    for violation in &violations {
                        eprintln!("tidy: {violation}");
                    }
                    ExitCode::FAILURE
                }
                Err(error) => {
                    eprintln!("tidy: {}", xtask::describe(&error));
                    ExitCode::FAILURE
                }
            }
        }
        Some("bench") => outcome("bench", xtask::bench::run(&args[1..])),
        Some("package") => outcome("package", xtask::package::run(&args[1..])),
        Some("features") => outcome("features", xtask::features::run(&args[1..])),
        Some("outside") => outcome("outside", xtask::outside::run(&args[1..])),
        Some("model-bench") => outcome("model-bench", xtask::model_bench::run(&args[1..])),
        Some("local-llm") => outcome("local-llm", xtask::local_llm::run(&args[1..])),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Success, or the command's name and its error on stderr and failure.
fn outcome(command: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{command}: {}", xtask::describe(&error));
            ExitCode::FAILURE
        }
    }
}
