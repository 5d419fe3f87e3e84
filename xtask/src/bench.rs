//! `cargo xtask bench`: the bench's front (the `bench` crate does the work).
//!
//! * `cargo xtask bench --trajectories FILE [--format openai-chat]` scores other agents'
//!   recorded runs and prints one JSON line on stdout.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask bench --trajectories FILE [--format openai-chat]";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    /// Score recorded trajectories in `format`.
    Trajectories { file: PathBuf, format: String },
}

/// Runs `bench <arguments>`.
pub fn run(arguments: &[String]) -> Result<()> {
    match parse(arguments)? {
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
    let mut rest = arguments.iter();
    while let Some(argument) = rest.next() {
        match argument.as_str() {
            "--trajectories" => trajectories = Some(PathBuf::from(rest.next().context(USAGE)?)),
            "--format" => format = Some(rest.next().context(USAGE)?.clone()),
            other => bail!("unexpected argument `{other}`\n{USAGE}"),
        }
    }
    match (trajectories, format) {
        (Some(file), format) => Ok(Command::Trajectories {
            file,
            format: format.unwrap_or_else(|| bench::trajectories::OPENAI_CHAT.to_owned()),
        }),
        (None, _) => bail!("{USAGE}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
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
        assert!(parse(&args("--trajectories t.json --live")).is_err());
    }
}
