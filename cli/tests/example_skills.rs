//! The bundled example skills and task: strict-valid skills, their own Python tests, and the
//! example task's `expected:` answer as the csv-summary script computes it.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};
use pretty_assertions::assert_eq;
use skills_agent_registry::{IndexConfig, Mode, RootStatus, SkillIndex, extra_roots};

const SKILLS: [&str; 3] = ["csv-summary", "file-finder", "unit-converter"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn examples() -> PathBuf {
    repo_root().join("examples")
}

/// Runs `command`; `None` (with the reason printed) when `python3` is not installed.
fn output_unless_no_python(command: &mut Command) -> Result<Option<Output>> {
    // No `__pycache__` folders in the source tree.
    command.env("PYTHONDONTWRITEBYTECODE", "1");
    match command.output() {
        Ok(output) => Ok(Some(output)),
        Err(error) if error.kind() == ErrorKind::NotFound => {
            eprintln!("skipped: python3 is not installed ({error}); the example skills need it");
            Ok(None)
        }
        Err(error) => Err(error).with_context(|| format!("cannot run {command:?}")),
    }
}

fn describe(output: &Output) -> String {
    format!(
        "exit status: {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn example_skills_index_in_strict_mode_without_diagnostics() -> Result<()> {
    let strict = IndexConfig { mode: Mode::Strict, ..IndexConfig::default() };
    let index = SkillIndex::build(&extra_roots([examples().join("skills")]), &strict)?;
    assert_eq!(index.diagnostics, vec![]);
    assert!(
        index.roots.iter().all(|root| matches!(root.status, RootStatus::Scanned)),
        "{:?}",
        index.roots
    );
    let names: Vec<&str> = index.skills.iter().map(|skill| skill.name.as_str()).collect();
    assert_eq!(names, SKILLS.to_vec());
    assert_eq!(index.shadowed.len(), 0);
    Ok(())
}

/// `python3 -m unittest discover` on `examples/skill-tests/<skill>/`: it must run tests and pass.
fn skill_tests_pass(skill: &str) -> Result<()> {
    let tests = examples().join("skill-tests").join(skill);
    let Some(output) = output_unless_no_python(
        Command::new("python3")
            .args(["-m", "unittest", "discover", "-s"])
            .arg(&tests)
            .current_dir(repo_root()),
    )?
    else {
        return Ok(());
    };
    let report = describe(&output);
    if !output.status.success() {
        bail!("the tests of {skill} failed\n{report}");
    }
    // unittest reports on stderr: `Ran 21 tests in 6.5s` … `OK`; zero tests also exit 0.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let ran = stderr
        .lines()
        .find_map(|line| line.strip_prefix("Ran ")?.split_whitespace().next()?.parse::<u32>().ok())
        .with_context(|| format!("no `Ran N tests` line for {skill}\n{report}"))?;
    assert!(ran > 0, "{skill} has no tests\n{report}");
    println!("{skill}: {ran} tests passed");
    Ok(())
}

#[test]
fn csv_summary_tests_pass() -> Result<()> {
    skill_tests_pass("csv-summary")
}

#[test]
fn file_finder_tests_pass() -> Result<()> {
    skill_tests_pass("file-finder")
}

#[test]
fn unit_converter_tests_pass() -> Result<()> {
    skill_tests_pass("unit-converter")
}

/// The value of the `key: value` line of TASK.md.
fn task_field(task: &str, key: &str) -> Result<String> {
    let prefix = format!("{key}:");
    let values: Vec<&str> =
        task.lines().filter_map(|line| line.strip_prefix(&prefix)).map(str::trim).collect();
    match values.as_slice() {
        [value] if !value.is_empty() => Ok((*value).to_owned()),
        _ => bail!("examples/task/TASK.md needs exactly one non-empty `{prefix}` line"),
    }
}

#[test]
fn csv_summary_computes_the_expected_answer_of_the_example_task() -> Result<()> {
    let task_folder = examples().join("task");
    let task = std::fs::read_to_string(task_folder.join("TASK.md"))?;
    let question = task_field(&task, "task")?;
    let expected = task_field(&task, "expected")?;
    assert!(question.contains("sales.csv"), "the task names its file: {question}");
    // Run as the agent runs it: the script itself (executable, `#!/usr/bin/env python3`), in
    // the task's workspace, with the file name from the task.
    let script = examples().join("skills/csv-summary/scripts/csv_summary.py");
    assert!(script.is_file(), "{} is missing", script.display());
    let Some(output) =
        output_unless_no_python(Command::new(&script).arg("sales.csv").current_dir(&task_folder))?
    else {
        return Ok(());
    };
    let report = describe(&output);
    assert!(output.status.success(), "{report}");
    let stdout = String::from_utf8(output.stdout)?;
    assert!(
        stdout.lines().any(|line| line == format!("amount sum: {expected}")),
        "`amount sum: {expected}` (the expected answer of TASK.md) is not in the output\n{stdout}"
    );
    Ok(())
}
