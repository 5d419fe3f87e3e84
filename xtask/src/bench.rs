//! `cargo xtask bench`: the bench's front (the `bench` crate does the work).
//!
//! * `cargo xtask bench [--out DIR] [--strategy NAME]... [--scenario TEXT[,TEXT]...]` runs the scripted
//!   scenarios (this binary is the sandbox helper) with a progress bar and writes
//!   `results.json`, `report.md` and `report.html` into DIR (default `target/bench/`).
//! * `--live [--model SPEC] [--timeout SECS]` runs the same tasks on a real model (`local` by
//!   default, started when needed, as `skills-agent --model` reads it), each run cancelled
//!   after SECS (default 600); the checks are the same, the scenarios that expect a budget or
//!   a stuck loop are left out.
//! * `--live --nats URL [--model SPEC]` has a fleet's workers make the live runs
//!   (`skills-agent worker --nats URL --skills examples/skills`, here or on other machines)
//!   and scores their records alike ([`crate::fleet_bench`]).
//! * `cargo xtask bench --trajectories FILE [--format openai-chat]` scores other agents'
//!   recorded runs and prints one JSON line on stdout.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use skills_agent_models::specs::{ModelSpec, connect};

const USAGE: &str = "usage: cargo xtask bench [--out DIR] [--strategy NAME]... [--scenario TEXT[,TEXT]...] [--live [--model SPEC] [--timeout SECS | --nats URL]]
       cargo xtask bench --trajectories FILE [--format openai-chat]";

/// A live run's model and time limit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Live {
    spec: String,
    timeout_secs: u64,
    /// A fleet whose workers make the runs.
    nats: Option<String>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    /// Run the scenarios (scripted, or on a live model) and write the report into `out`.
    Suite { out: PathBuf, strategies: Vec<String>, filter: Option<String>, live: Option<Live> },
    /// Score recorded trajectories in `format`.
    Trajectories { file: PathBuf, format: String },
}

/// Runs `bench <arguments>`.
pub fn run(arguments: &[String]) -> Result<()> {
    match parse(arguments)? {
        Command::Suite { out, strategies, filter, live } => {
            let mut config = bench::suite::SuiteConfig::new(&out);
            config.strategies = strategies;
            config.filter = filter;
            let (results, written) = match &live {
                None => bench::run_scripted_suite(&config)?,
                Some(Live { spec, nats: Some(url), .. }) => {
                    crate::fleet_bench::run_suite(&config, url, spec)?
                }
                Some(Live { spec, timeout_secs, nats: None }) => {
                    let parsed = ModelSpec::parse(spec)?;
                    let env: Vec<(String, String)> = std::env::vars().collect();
                    let connected = connect(&parsed, &env, &config.examples.join("task"))?;
                    let model = bench::suite::LiveModel {
                        provider: connected.provider,
                        name: connected.name,
                        decide: parsed.decide_mode(),
                        timeout: Duration::from_secs(*timeout_secs),
                        secrets: connected.secrets,
                    };
                    bench::run_live_suite(&config, &model, spec)?
                }
            };
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
            for path in [&written.results, &written.markdown, &written.html, &written.svg] {
                println!("{}", path.display());
            }
            let failed = results.runs.iter().filter(|run| !run.success).count();
            // A live model may fail checks; a scripted run that fails one is a broken bench.
            if failed > 0 && live.is_none() {
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
    let mut live = false;
    let mut spec = None;
    let mut timeout = None;
    let mut nats = None;
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        match argument.as_str() {
            "--trajectories" => trajectories = Some(PathBuf::from(rest.next().context(USAGE)?)),
            "--format" => format = Some(rest.next().context(USAGE)?.clone()),
            "--out" => out = Some(PathBuf::from(rest.next().context(USAGE)?)),
            "--strategy" => strategies.push(rest.next().context(USAGE)?.clone()),
            "--scenario" => filter = Some(rest.next().context(USAGE)?.clone()),
            "--live" => live = true,
            "--model" => spec = Some(rest.next().context(USAGE)?.clone()),
            "--nats" => nats = Some(rest.next().context(USAGE)?.clone()),
            "--timeout" => {
                let value = rest.next().context(USAGE)?;
                timeout = Some(value.parse::<u64>().ok().filter(|secs| *secs > 0).with_context(
                    || format!("--timeout takes whole seconds, got `{value}`\n{USAGE}"),
                )?);
            }
            other => bail!("unexpected argument `{other}`\n{USAGE}"),
        }
    }
    if !live && (spec.is_some() || timeout.is_some() || nats.is_some()) {
        bail!("--model, --timeout and --nats go with --live\n{USAGE}");
    }
    if nats.is_some() && timeout.is_some() {
        bail!(
            "--timeout does not go with --nats: a fleet's runs end by the workers' budgets \
             (max_duration_ms)\n{USAGE}"
        );
    }
    let live = live.then(|| Live {
        spec: spec.unwrap_or_else(|| "local".to_owned()),
        timeout_secs: timeout.unwrap_or(600),
        nats,
    });
    match trajectories {
        Some(file)
            if out.is_none() && strategies.is_empty() && filter.is_none() && live.is_none() =>
        {
            Ok(Command::Trajectories {
                file,
                format: format.unwrap_or_else(|| bench::trajectories::OPENAI_CHAT.to_owned()),
            })
        }
        Some(_) => bail!("--trajectories takes only --format\n{USAGE}"),
        None if format.is_some() => bail!("--format goes with --trajectories\n{USAGE}"),
        None => Ok(Command::Suite {
            out: out.unwrap_or_else(|| crate::tidy::workspace_root().join("target/bench")),
            strategies,
            filter,
            live,
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
    fn the_suite_defaults_to_target_bench_scripted_and_live_to_the_local_model() {
        let default = crate::tidy::workspace_root().join("target/bench");
        assert_eq!(
            parse(&args("")).ok(),
            Some(Command::Suite {
                out: default.clone(),
                strategies: Vec::new(),
                filter: None,
                live: None
            })
        );
        assert_eq!(
            parse(&args("--out o --strategy react --strategy safe --scenario batch")).ok(),
            Some(Command::Suite {
                out: PathBuf::from("o"),
                strategies: vec!["react".to_owned(), "safe".to_owned()],
                filter: Some("batch".to_owned()),
                live: None,
            })
        );
        assert!(parse(&args("--out")).is_err());
        let live = |spec: &str, timeout_secs| {
            Some(Live { spec: spec.to_owned(), timeout_secs, nats: None })
        };
        assert_eq!(
            parse(&args("--live")).ok(),
            Some(Command::Suite {
                out: default.clone(),
                strategies: Vec::new(),
                filter: None,
                live: live("local", 600)
            })
        );
        assert_eq!(
            parse(&args("--live --model local:0.5b --timeout 90")).ok(),
            Some(Command::Suite {
                out: default,
                strategies: Vec::new(),
                filter: None,
                live: live("local:0.5b", 90)
            })
        );
        assert_eq!(
            parse(&args("--live --nats nats://127.0.0.1:4222")).ok(),
            Some(Command::Suite {
                out: crate::tidy::workspace_root().join("target/bench"),
                strategies: Vec::new(),
                filter: None,
                live: Some(Live {
                    spec: "local".to_owned(),
                    timeout_secs: 600,
                    nats: Some("nats://127.0.0.1:4222".to_owned())
                }),
            })
        );
        assert!(parse(&args("--nats nats://127.0.0.1:4222")).is_err());
        assert!(parse(&args("--live --nats nats://127.0.0.1:4222 --timeout 60")).is_err());
        assert!(parse(&args("--model local")).is_err());
        assert!(parse(&args("--live --timeout 0")).is_err());
        assert!(parse(&args("--live --trajectories t.json")).is_err());
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
