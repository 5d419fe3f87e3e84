//! `cargo xtask bench`: the bench's front (the `bench` crate does the work).
//!
//! * `cargo xtask bench [--out DIR] [--strategy NAME]... [--scenario TEXT]` runs the scripted
//!   scenarios (this binary is the sandbox helper) with a progress bar and writes
//!   `results.json`, `report.md` and `report.html` into DIR (default `target/bench/`).
//! * `cargo xtask bench --trajectories FILE [--format openai-chat]` scores other agents'
//!   recorded runs and prints one JSON line on stdout.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask bench [--out DIR] [--strategy NAME]... [--scenario TEXT]
       cargo xtask bench --trajectories FILE [--format openai-chat]";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    /// Run the scripted scenarios and write the report into `out`.
    Scripted { out: PathBuf, strategies: Vec<String>, filter: Option<String> },
    /// Score recorded trajectories in `format`.
    Trajectories { file: PathBuf, format: String },
}

/// Runs `bench <arguments>`.
pub fn run(arguments: &[String]) -> Result<()> {
    match parse(arguments)? {
        Command::Scripted { out, strategies, filter } => {
            let mut config = bench::suite::SuiteConfig::new(&out);
            config.strategies = strategies;
            config.filter = filter;
            let (results, written) = bench::run_scripted_suite(&config)?;
            for summary in &results.strategies {
                eprintln!(
                    "bench: {}: {}/{} succeeded, {} model calls, silent-call rate {:.1}%",
                    summary.strategy,
                    summary.successes,
                    summary.runs,
                    summary.model_calls,
                    summary.reasoning.silent_call_rate * 100.0
                );
            }
            if let Some(ratio) = results.batchable.react_over_plan_execute_think {
                eprintln!(
                    "bench: batchable scenarios: react makes {ratio:.2}x the model calls of plan-execute-think"
                );
            }
            for path in [&written.results, &written.markdown, &written.html] {
                println!("{}", path.display());
            }
            let failed = results.runs.iter().filter(|run| !run.success).count();
            if failed > 0 {
                bail!("{failed} runs failed their checks (see {})", written.markdown.display());
            }
        }
        Command::Trajectories { file, format } => {
            let score = bench::trajectories::score_file(&file, &format)?;
            println!("{}", serde_json::to_string(&score)?);
        }
    }
    Ok(())
}

fn parse(arguments: &[String]) -> Result<Command> {
    let mut trajectories = None;
    let mut format = None;
    let mut out = None;
    let mut strategies = Vec::new();
    let mut filter = None;
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        match argument.as_str() {
            "--trajectories" => trajectories = Some(PathBuf::from(rest.next().context(USAGE)?)),
            "--format" => format = Some(rest.next().context(USAGE)?.clone()),
            "--out" => out = Some(PathBuf::from(rest.next().context(USAGE)?)),
            "--strategy" => strategies.push(rest.next().context(USAGE)?.clone()),
            "--scenario" => filter = Some(rest.next().context(USAGE)?.clone()),
            other => bail!("unexpected argument `{other}`\n{USAGE}"),
        }
    }
    match trajectories {
        Some(file) if out.is_none() && strategies.is_empty() && filter.is_none() => {
            Ok(Command::Trajectories {
                file,
                format: format.unwrap_or_else(|| bench::trajectories::OPENAI_CHAT.to_owned()),
            })
        }
        Some(_) => bail!("--trajectories takes only --format\n{USAGE}"),
        None if format.is_some() => bail!("--format goes with --trajectories\n{USAGE}"),
        None => Ok(Command::Scripted {
            out: out.unwrap_or_else(|| crate::tidy::workspace_root().join("target/bench")),
            strategies,
            filter,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_scripted_suite_defaults_to_target_bench() {
        let default = crate::tidy::workspace_root().join("target/bench");
        assert_eq!(
            parse(&args("")).ok(),
            Some(Command::Scripted { out: default, strategies: Vec::new(), filter: None })
        );
        assert_eq!(
            parse(&args("--out o --strategy react --strategy safe --scenario batch")).ok(),
            Some(Command::Scripted {
                out: PathBuf::from("o"),
                strategies: vec!["react".to_owned(), "safe".to_owned()],
                filter: Some("batch".to_owned()),
            })
        );
        assert!(parse(&args("--out")).is_err());
    }

    #[test]
    fn trajectories_default_to_the_openai_chat_format_and_bad_arguments_are_refused() {
        let trajectories = |file: &str, format: &str| Command::Trajectories {
            file: PathBuf::from(file),
            format: format.to_owned(),
        };
        assert_eq!(
            parse(&args("--trajectories t.json")).ok(),
            Some(trajectories("t.json", "openai-chat"))
        );
        assert_eq!(
            parse(&args("--format x --trajectories t.json")).ok(),
            Some(trajectories("t.json", "x"))
        );
        assert!(parse(&args("--trajectories")).is_err());
        assert!(parse(&args("--trajectories t.json --out x")).is_err());
        assert!(parse(&args("--format openai-chat")).is_err());
        assert!(parse(&args("--trajectories t.json --live")).is_err());
    }
}
