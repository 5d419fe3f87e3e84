//! The `skills-agent` binary from the outside: every subcommand, exit codes, `--json` shapes,
//! configuration precedence and errors, scripted (`mock:`) runs with real scripts in the
//! sandbox, replay checks on recorded and tampered runs, resume, and approvals with no terminal.
//!
//! Every command runs with a private HOME, config and cache directory and no provider keys, so
//! nothing on this machine leaks in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// A workspace with one skill (`counter`, a shell script that counts its arguments and appends
/// to `runs.log`), a private home, and helpers to run the binary in it.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    env: Vec<(String, String)>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workspace = root.join("workspace");
        let home = root.join("home");
        let skill = workspace.join(".agents/skills/counter");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: counter\ndescription: Counts the arguments it is given. Use to count \
             words.\n---\nRun `scripts/count.sh WORD...`; it prints `count: N`.\n",
        )
        .unwrap();
        let script = skill.join("scripts/count.sh");
        std::fs::write(&script, "#!/bin/sh\necho \"count: $#\"\necho run >> runs.log\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fixture { _dir: dir, root, workspace, home, env: Vec::new() }
    }

    fn set_env(&mut self, name: &str, value: &str) {
        self.env.push((name.to_owned(), value.to_owned()));
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skills-agent"));
        command
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("SKILLS_AGENT_CACHE", self.home.join("cache"))
            .stdin(Stdio::null());
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Writes a `mock:` answers file into the workspace and returns its spec.
    fn answers(&self, name: &str, answers: &Value) -> String {
        std::fs::write(self.workspace.join(name), answers.to_string()).unwrap();
        format!("mock:{name}")
    }

    fn runs_dir(&self) -> PathBuf {
        self.workspace.join(".agent/runs")
    }

    /// The only run directory.
    fn run_dir(&self) -> PathBuf {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.runs_dir())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs.remove(0)
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_code(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

fn json_line(output: &Output) -> Value {
    let stdout = text(&output.stdout);
    assert_eq!(stdout.lines().count(), 1, "one JSON line expected: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

fn select(names: &[&str]) -> Value {
    json!({"tool_calls": [{"name": "select_skills", "arguments": {"names": names}}]})
}

fn count(words: &[&str]) -> Value {
    json!({"tool_calls": [{"name": "run_script", "arguments":
        {"skill": "counter", "script": "scripts/count.sh", "args": words}}]})
}

fn answer(content: &str) -> Value {
    json!({"tool_calls": [{"name": "final_answer", "arguments": {"content": content}}]})
}

/// The scripted happy path: select, run the script, answer.
fn happy(fixture: &Fixture) -> String {
    fixture.answers(
        "answers.json",
        &json!([select(&["counter"]), count(&["a", "b", "c"]), answer("There are 3 words.")]),
    )
}

fn events(run_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn help_version_and_usage_errors() {
    let fixture = Fixture::new();
    let help = fixture.run(&["--help"]);
    assert_code(&help, 0);
    for command in ["run", "resume", "replay", "runs", "skills", "model"] {
        assert!(text(&help.stdout).contains(command), "{command} missing from --help");
    }
    assert_code(&fixture.run(&["--version"]), 0);
    assert_code(&fixture.run(&[]), 2);
    assert_code(&fixture.run(&["fly"]), 2);
    assert_code(&fixture.run(&["run", "--max-turns", "many", "task"]), 2);
    assert_code(&fixture.run(&["run", "--strategy", "nope", "task"]), 2);
    let empty = fixture.run(&["run", "--model", "mock:x.json", "  "]);
    assert_code(&empty, 2);
    assert!(text(&empty.stderr).contains("the task is empty"), "{}", text(&empty.stderr));
    let spec = fixture.run(&["run", "--model", "gemini:pro", "task"]);
    assert_code(&spec, 2);
    assert!(text(&spec.stderr).contains("unknown model spec `gemini:pro`"));
    let missing = fixture.run(&["run", "--model", "mock:nowhere.json", "task"]);
    assert_code(&missing, 2);
    assert!(text(&missing.stderr).contains("nowhere.json"), "{}", text(&missing.stderr));
    let keyless = fixture.run(&["run", "--model", "openai:gpt-4.1", "task"]);
    assert_code(&keyless, 2);
    assert!(text(&keyless.stderr).contains("OPENAI_API_KEY"), "{}", text(&keyless.stderr));
    let workspace = fixture.run(&["run", "--workspace", "/no/such/dir", "task"]);
    assert_code(&workspace, 2);
    assert!(text(&workspace.stderr).contains("/no/such/dir"));
}

#[test]
fn a_mock_run_runs_the_script_in_the_sandbox_and_prints_the_answer() {
    let fixture = Fixture::new();
    let spec = happy(&fixture);
    let output = fixture.run(&["run", "--model", &spec, "How many words in a b c?"]);
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "There are 3 words.\n");
    let console = text(&output.stderr);
    for expected in ["turn 1/", "select_skills counter", "run_script counter/scripts/count.sh"] {
        assert!(console.contains(expected), "console lacks {expected:?}:\n{console}");
    }
    assert!(console.contains("run directory: "), "{console}");
    assert!(!console.contains('\u{1b}'), "no colours without a terminal:\n{console}");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("runs.log")).unwrap(), "run\n");
    let run_dir = fixture.run_dir();
    for file in ["events.jsonl", "state.json", "final.md", "inputs/request.txt"] {
        assert!(run_dir.join(file).is_file(), "{file} missing in {}", run_dir.display());
    }
    assert_eq!(
        std::fs::read_to_string(run_dir.join("inputs/request.txt")).unwrap(),
        "How many words in a b c?"
    );
    let events = events(&run_dir);
    let executed = events
        .iter()
        .find(|event| event["type"] == "action_executed" && event["turn"] == 2)
        .unwrap();
    assert_eq!(executed["data"]["status"], "ok", "{executed}");
}

#[test]
fn json_prints_one_result_line_and_quiet_prints_only_the_answer() {
    let fixture = Fixture::new();
    let spec = happy(&fixture);
    let output = fixture.run(&["run", "--json", "--model", &spec, "Count a b c"]);
    assert_code(&output, 0);
    let result = json_line(&output);
    let keys: Vec<&str> = result.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "final_text",
            "grounded",
            "model_calls",
            "outcome",
            "reasoning_metrics",
            "run_dir",
            "run_id",
            "script_runs",
            "tool_calls",
            "turns",
            "usage"
        ]
    );
    assert_eq!(result["outcome"], "completed");
    assert_eq!(result["final_text"], "There are 3 words.");
    assert_eq!(
        (&result["turns"], &result["model_calls"], &result["tool_calls"], &result["script_runs"]),
        (&json!(3), &json!(3), &json!(2), &json!(1))
    );
    assert!(
        result["usage"]["prompt_tokens"].is_u64() && result["usage"]["completion_tokens"].is_u64()
    );
    assert!(result["reasoning_metrics"].is_object());
    assert_eq!(result["grounded"], json!(true));
    assert!(Path::new(result["run_dir"].as_str().unwrap()).join("events.jsonl").is_file());

    let spec = happy(&fixture);
    let quiet = fixture.run(&["run", "--quiet", "--model", &spec, "Count a b c"]);
    assert_code(&quiet, 0);
    assert_eq!(text(&quiet.stdout), "There are 3 words.\n");
    assert_eq!(text(&quiet.stderr), "");
}

#[test]
fn a_budget_hit_ends_degraded_with_exit_3_and_still_a_final_text() {
    let fixture = Fixture::new();
    // The degraded answer is one more (no-tools) call: its text is the user's answer.
    let spec = fixture.answers(
        "answers.json",
        &json!([select(&["counter"]), {"text": "Done so far: selected counter. Blocker: out of turns."}]),
    );
    let output = fixture.run(&["run", "--json", "--max-turns", "1", "--model", &spec, "Count"]);
    assert_code(&output, 3);
    let result = json_line(&output);
    assert_eq!(result["outcome"], "max_turns");
    assert!(result["final_text"].as_str().unwrap().contains("Blocker: out of turns"), "{result}");

    // When the model cannot even give the degraded answer, the text is the fallback one.
    let spec = fixture.answers("short.json", &json!([select(&["counter"])]));
    let output = fixture.run(&["run", "--json", "--max-turns", "1", "--model", &spec, "Count"]);
    assert_code(&output, 3);
    assert!(!json_line(&output)["final_text"].as_str().unwrap().trim().is_empty());
}

#[test]
fn config_precedence_is_flags_then_environment_then_workspace_then_user() {
    let mut fixture = Fixture::new();
    let user = fixture.home.join(".config/skills-agent");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("config.toml"), "[budgets]\nmax_turns = 1\nmax_tool_calls = 9\n")
        .unwrap();
    let started = |fixture: &Fixture, flags: &[&str]| -> Value {
        let spec = happy(fixture);
        let _ = std::fs::remove_dir_all(fixture.runs_dir());
        let mut args = vec!["run", "--quiet", "--model", spec.as_str()];
        args.extend_from_slice(flags);
        args.push("Count a b c");
        let output = fixture.run(&args);
        assert!(matches!(output.status.code(), Some(0 | 3)), "{}", text(&output.stderr));
        let events = events(&fixture.run_dir());
        events[0]["data"]["config"]["budgets"].clone()
    };
    let budgets = started(&fixture, &[]);
    assert_eq!((&budgets["max_turns"], &budgets["max_tool_calls"]), (&json!(1), &json!(9)));

    std::fs::write(fixture.workspace.join("skills-agent.toml"), "[budgets]\nmax_turns = 4\n")
        .unwrap();
    let budgets = started(&fixture, &[]);
    assert_eq!((&budgets["max_turns"], &budgets["max_tool_calls"]), (&json!(4), &json!(9)));

    fixture.set_env("SKILLS_AGENT_MAX_TURNS", "6");
    assert_eq!(started(&fixture, &[])["max_turns"], 6);
    assert_eq!(started(&fixture, &["--max-turns", "8"])["max_turns"], 8);
}

#[test]
fn config_errors_name_the_file_the_line_and_the_key() {
    let mut fixture = Fixture::new();
    let file = fixture.workspace.join("skills-agent.toml");
    let spec = happy(&fixture);
    for (contents, line, key) in [
        ("model = \"local\"\n\nmodle = \"x\"\n", 3, "modle"),
        ("[budgets]\nmax_turns = 3\nmax_turnz = 4\n", 3, "max_turnz"),
        ("approval = \"sometimes\"\n", 1, "sometimes"),
        ("[budgets]\nmax_turns = \"ten\"\n", 2, "max_turns"),
        ("model = \n", 1, ""),
    ] {
        std::fs::write(&file, contents).unwrap();
        let output = fixture.run(&["run", "--model", &spec, "task"]);
        assert_code(&output, 2);
        let stderr = text(&output.stderr);
        let place = format!("{}:{line}", file.display());
        assert!(stderr.contains(&place) && stderr.contains(key), "{contents:?}: {stderr}");
    }
    std::fs::remove_file(&file).unwrap();
    fixture.set_env("SKILLS_AGENT_MAX_TURNS", "-3");
    let output = fixture.run(&["run", "--model", &spec, "task"]);
    assert_code(&output, 2);
    assert!(text(&output.stderr).contains("SKILLS_AGENT_MAX_TURNS"), "{}", text(&output.stderr));
}

#[test]
fn replay_prints_turns_and_check_passes_on_the_record_and_fails_on_a_tampered_copy() {
    let fixture = Fixture::new();
    let spec = happy(&fixture);
    assert_code(&fixture.run(&["run", "--quiet", "--model", &spec, "Count a b c"]), 0);
    let run_dir = fixture.run_dir();
    let run_dir_arg = run_dir.to_str().unwrap();

    let turns = fixture.run(&["replay", run_dir_arg]);
    assert_code(&turns, 0);
    let printed = text(&turns.stdout);
    for expected in ["turn 1", "select_skills counter", "turn 3", "outcome: completed", "3 words"] {
        assert!(printed.contains(expected), "{expected:?} missing:\n{printed}");
    }
    let listed = json_line(&fixture.run(&["replay", "--json", run_dir_arg]));
    assert_eq!(listed["turns"].as_array().unwrap().len(), 3, "{listed}");

    let check = fixture.run(&["replay", "--check", run_dir_arg]);
    assert_code(&check, 0);
    assert!(text(&check.stdout).contains("reproduced exactly"), "{}", text(&check.stdout));
    assert!(text(&check.stdout).contains("compliance score: 1.00"));
    let report = json_line(&fixture.run(&["replay", "--check", "--json", run_dir_arg]));
    assert_eq!(report["divergence"], Value::Null, "{report}");

    // The script's recorded output changed: the re-run feeds the model a different observation.
    let tampered = fixture.root.join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    for entry in std::fs::read_dir(&run_dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), tampered.join(entry.file_name())).unwrap();
        }
    }
    let log = std::fs::read_to_string(tampered.join("events.jsonl")).unwrap();
    assert!(log.contains("count: 3"));
    std::fs::write(tampered.join("events.jsonl"), log.replace("count: 3", "count: 4")).unwrap();
    let check = fixture.run(&["replay", "--check", tampered.to_str().unwrap()]);
    assert_code(&check, 1);
    assert!(text(&check.stdout).contains("DIVERGED"), "{}", text(&check.stdout));

    let missing = fixture.run(&["replay", fixture.root.join("nothing").to_str().unwrap()]);
    assert_code(&missing, 2);
    assert!(
        text(&missing.stderr).contains("nothing is not a readable run directory"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn a_replay_model_re_runs_a_recorded_run() {
    let fixture = Fixture::new();
    let spec = happy(&fixture);
    assert_code(&fixture.run(&["run", "--quiet", "--model", &spec, "Count a b c"]), 0);
    let recorded = fixture.run_dir();
    let spec = format!("replay:{}", recorded.display());
    let output = fixture.run(&["run", "--json", "--model", &spec, "Count a b c"]);
    assert_code(&output, 0);
    assert_eq!(json_line(&output)["final_text"], "There are 3 words.");
}

#[test]
fn runs_list_shows_finished_and_interrupted_runs() {
    let fixture = Fixture::new();
    let empty = fixture.run(&["runs", "list"]);
    assert_code(&empty, 0);
    assert!(text(&empty.stdout).starts_with("no runs in "), "{}", text(&empty.stdout));
    assert_eq!(text(&fixture.run(&["runs", "list", "--json"]).stdout), "[]\n");

    let spec = happy(&fixture);
    assert_code(&fixture.run(&["run", "--quiet", "--model", &spec, "Count a b c"]), 0);
    let listed = fixture.run(&["runs", "list"]);
    assert_code(&listed, 0);
    let line = text(&listed.stdout);
    assert!(
        line.contains("finished") && line.contains("completed") && line.contains("Count a b c")
    );
    let runs = json_line(&fixture.run(&["runs", "list", "--json"]));
    let run = &runs.as_array().unwrap()[0];
    assert_eq!(
        (&run["status"], &run["outcome"], &run["turns"]),
        (&json!("finished"), &json!("completed"), &json!(3))
    );
    assert_eq!(run["model"], "mock");
}

#[test]
fn resume_continues_an_interrupted_run_without_redoing_what_was_done() {
    let fixture = Fixture::new();
    let spec = happy(&fixture);
    assert_code(&fixture.run(&["run", "--quiet", "--model", &spec, "Count a b c"]), 0);
    let run_dir = fixture.run_dir();
    let run_dir_arg = run_dir.to_str().unwrap();
    let finished = fixture.run(&["resume", run_dir_arg, "--model", &spec]);
    assert_code(&finished, 2);
    assert!(text(&finished.stderr).contains("already finished"), "{}", text(&finished.stderr));

    // Cut the record right after turn 2's observation: turn 3 never happened.
    let log = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let kept: Vec<&str> = log.lines().take_while(|line| !line.contains("\"turn\":3")).collect();
    std::fs::write(run_dir.join("events.jsonl"), kept.join("\n") + "\n").unwrap();
    let listed = json_line(&fixture.run(&["runs", "list", "--json"]));
    assert_eq!(listed[0]["status"], "interrupted");

    let rest = fixture.answers("rest.json", &json!([answer("Resumed: 3 words.")]));
    let output = fixture.run(&["resume", run_dir_arg, "--json", "--model", &rest]);
    assert_code(&output, 0);
    assert_eq!(json_line(&output)["final_text"], "Resumed: 3 words.");
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("runs.log")).unwrap(),
        "run\n",
        "the script recorded as run must not run again"
    );
    assert_code(&fixture.run(&["replay", "--check", run_dir_arg]), 0);
}

/// A skill root outside the workspace with one skill, `tally` (counts its arguments and
/// appends to `tally.log` in the workspace), and the scripted answers of a run that uses it
/// twice.
fn tally_run(fixture: &Fixture) -> (PathBuf, String) {
    let root = fixture.root.join("extra-skills");
    let skill = root.join("tally");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tally\ndescription: Tallies the words it is given. Use to tally words.\n\
         ---\nRun `scripts/tally.sh WORD...`.\n",
    )
    .unwrap();
    let script = skill.join("scripts/tally.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"tally: $#\"\necho \"$*\" >> tally.log\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tally = |words: &[&str]| {
        json!({"tool_calls": [{"name": "run_script", "arguments":
            {"skill": "tally", "script": "scripts/tally.sh", "args": words}}]})
    };
    let spec = fixture.answers(
        "tally.json",
        &json!([select(&["tally"]), tally(&["a", "b"]), tally(&["c"]), answer("Tallied 2 and 1.")]),
    );
    (root, spec)
}

#[test]
fn resume_goes_on_with_the_recorded_model_skills_and_workspace() {
    let fixture = Fixture::new();
    let (root, spec) = tally_run(&fixture);
    let root_arg = root.to_str().unwrap();
    let run = fixture.run(&["run", "--quiet", "--model", &spec, "--skills", root_arg, "Tally"]);
    assert_code(&run, 0);
    let run_dir = fixture.run_dir();
    let started = &events(&run_dir)[0]["data"];
    assert_eq!(started["record_format"], skills_agent_core::RECORD_FORMAT);
    assert_eq!(started["origin"]["model"], spec);
    assert!(started["skill_hashes"]["tally"].as_str().is_some_and(|hash| hash.len() == 64));
    // Killed inside its second script: the record ends before that script's result.
    let log = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let kept: Vec<&str> = log
        .lines()
        .take_while(|line| !(line.contains("\"turn\":3") && line.contains("action_executed")))
        .collect();
    std::fs::write(run_dir.join("events.jsonl"), kept.join("\n") + "\n").unwrap();
    std::fs::write(fixture.workspace.join("tally.log"), "a b\n").unwrap();

    // Resumed from another folder with no flags: the recorded model (from its next answer),
    // skill root and workspace.
    let run_dir_arg = run_dir.to_str().unwrap();
    let resume = |args: &[&str]| {
        let mut all = vec!["resume", run_dir_arg];
        all.extend_from_slice(args);
        fixture.command(&all).current_dir(&fixture.root).output().unwrap()
    };
    let output = resume(&["--json"]);
    assert_code(&output, 0);
    assert_eq!(json_line(&output)["final_text"], "Tallied 2 and 1.");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("tally.log")).unwrap(), "a b\nc\n");
    assert_code(&fixture.run(&["replay", "--check", run_dir_arg]), 0);

    // Cut again: a flag that differs from the record is used, and said.
    std::fs::write(run_dir.join("events.jsonl"), kept.join("\n") + "\n").unwrap();
    let rest = fixture.answers("rest.json", &json!([tally(&["c"]), answer("Tallied again.")]));
    let output = resume(&["--model", &rest]);
    assert_code(&output, 0);
    let said = text(&output.stderr);
    assert!(
        said.contains(&format!("resuming with --model {rest} instead of the recorded {spec}")),
        "{said}"
    );

    // What the run began with is gone or changed: a usage error naming what and the flag.
    std::fs::write(run_dir.join("events.jsonl"), kept.join("\n") + "\n").unwrap();
    std::fs::write(root.join("tally/scripts/tally.sh"), "#!/bin/sh\necho changed\n").unwrap();
    let changed = resume(&[]);
    assert_code(&changed, 2);
    assert!(text(&changed.stderr).contains("skill `tally`"), "{}", text(&changed.stderr));
    assert!(
        text(&changed.stderr).contains("changed since the run began"),
        "{}",
        text(&changed.stderr)
    );
    std::fs::rename(&root, fixture.root.join("moved")).unwrap();
    let gone = resume(&[]);
    assert_code(&gone, 2);
    let said = text(&gone.stderr);
    assert!(
        said.contains(&format!("skill root {root_arg} is gone")) && said.contains("--skills DIR"),
        "{said}"
    );
}

fn tally(words: &[&str]) -> Value {
    json!({"tool_calls": [{"name": "run_script", "arguments":
        {"skill": "tally", "script": "scripts/tally.sh", "args": words}}]})
}

#[test]
fn a_record_that_does_not_name_its_model_resumes_only_with_the_model_given() {
    let fixture = Fixture::new();
    let spec = happy(&fixture);
    assert_code(&fixture.run(&["run", "--quiet", "--model", &spec, "Count a b c"]), 0);
    let run_dir = fixture.run_dir();
    // A record of format 3: no origin, roots or hashes; cut before its first turn (format 3
    // re-runs without the turn notes format 7 keeps, so this build's turns would not match).
    let lines: Vec<String> = std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .take_while(|line| !line.contains("\"turn\":1"))
        .map(|line| {
            let mut event: Value = serde_json::from_str(line).unwrap();
            if event["type"] == "run_started" {
                let data = event["data"].as_object_mut().unwrap();
                for key in ["origin", "skill_roots", "skill_hashes"] {
                    data.remove(key);
                }
                data.insert("record_format".to_owned(), json!(3));
            }
            event.to_string()
        })
        .collect();
    std::fs::write(run_dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    let run_dir_arg = run_dir.to_str().unwrap();
    let refused = fixture.run(&["resume", run_dir_arg]);
    assert_code(&refused, 2);
    assert!(text(&refused.stderr).contains("--model SPEC"), "{}", text(&refused.stderr));
    let rest = fixture.answers("rest.json", &json!([answer("Resumed: 3 words.")]));
    let output = fixture.run(&["resume", run_dir_arg, "--json", "--model", &rest]);
    assert_code(&output, 0);
    assert_eq!(json_line(&output)["final_text"], "Resumed: 3 words.");
    assert!(text(&output.stderr).is_empty() || !text(&output.stderr).contains("error"));
}

/// The processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[test]
fn sigterm_stops_the_run_and_leaves_no_script_process_behind() {
    let fixture = Fixture::new();
    let skill = fixture.workspace.join(".agents/skills/counter/scripts/nap.sh");
    // A script whose child (the `sleep`) outlives the shell unless the run stops it.
    std::fs::write(&skill, "#!/bin/sh\nsleep \"$1\"\necho slept\n").unwrap();
    std::fs::set_permissions(&skill, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A figure of its own: the SIGKILL test below runs in the same process (same pid) at the
    // same time, and seeing its `sleep` would send SIGTERM before this CLI could handle it.
    let seconds = format!("{}", 600_000 + std::process::id() % 100_000);
    let nap = json!({"tool_calls": [{"name": "run_script", "arguments":
        {"skill": "counter", "script": "scripts/nap.sh", "args": [seconds]}}]});
    let spec = fixture.answers("nap.json", &json!([select(&["counter"]), nap, answer("Rested.")]));
    let child = fixture
        .command(&["run", "--json", "--model", &spec, "Take a nap"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let marker = format!("sleep {seconds}");
    let started = std::time::Instant::now();
    while processes_with(&marker).is_empty() {
        assert!(started.elapsed().as_secs() < 30, "the script never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    assert_code(&output, 3);
    assert_eq!(json_line(&output)["outcome"], "cancelled");
    assert!(text(&output.stderr).contains("SIGTERM"), "{}", text(&output.stderr));
    assert_eq!(
        processes_with(&marker),
        Vec::<String>::new(),
        "the script's child outlived the run"
    );
    let last = events(&fixture.run_dir()).pop().unwrap();
    assert_eq!(
        (&last["type"], &last["data"]["outcome"]),
        (&json!("run_finished"), &json!("cancelled"))
    );
}

/// Polls `condition` until it holds or `seconds` pass; returns whether it held.
fn poll_for(seconds: u64, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while std::time::Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    condition()
}

/// SIGKILL gives the CLI no chance to clean up: the script, its child and a grandchild in a
/// session of its own still die (the sandbox's PID namespace ends with the helper, which dies
/// with the CLI), checked in `/proc`.
#[test]
fn sigkill_of_the_cli_leaves_no_script_process_behind() {
    let fixture = Fixture::new();
    let skill = fixture.workspace.join(".agents/skills/counter/scripts/nap.sh");
    std::fs::write(&skill, "#!/bin/sh\nsetsid sleep \"$2\" &\nsleep \"$1\"\necho slept\n").unwrap();
    std::fs::set_permissions(&skill, std::fs::Permissions::from_mode(0o755)).unwrap();
    let seconds = format!("{}", 400_000 + std::process::id() % 100_000);
    let detached = format!("{}", 500_000 + std::process::id() % 100_000);
    let nap = json!({"tool_calls": [{"name": "run_script", "arguments":
        {"skill": "counter", "script": "scripts/nap.sh", "args": [seconds, detached]}}]});
    let spec = fixture.answers("nap.json", &json!([select(&["counter"]), nap, answer("Rested.")]));
    let mut child = fixture
        .command(&["run", "--json", "--model", &spec, "Take a nap"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (marker, detached_marker) = (format!("sleep {seconds}"), format!("sleep {detached}"));
    assert!(
        poll_for(30, || !processes_with(&marker).is_empty()
            && !processes_with(&detached_marker).is_empty()),
        "the script never started"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = poll_for(20, || {
        processes_with(&marker).is_empty() && processes_with(&detached_marker).is_empty()
    });
    let left: Vec<String> =
        processes_with(&marker).into_iter().chain(processes_with(&detached_marker)).collect();
    for line in &left {
        let pid = line.split(':').next().unwrap_or_default();
        let _ = Command::new("kill").args(["-KILL", pid]).status();
    }
    assert!(gone, "outlived the SIGKILLed CLI: {left:?}");
}

/// The scripted answers of a run that counts twice; its script appends its arguments to
/// `effects.log` in the workspace, so each run of it shows.
fn count_twice(fixture: &Fixture) -> String {
    let script = fixture.workspace.join(".agents/skills/counter/scripts/count.sh");
    std::fs::write(&script, "#!/bin/sh\necho \"count: $#\"\necho \"$*\" >> effects.log\n").unwrap();
    fixture.answers(
        "answers.json",
        &json!([
            select(&["counter"]),
            count(&["a", "b", "c"]),
            count(&["d"]),
            answer("Counted 3 and 1.")
        ]),
    )
}

fn effects(workspace: &Path) -> String {
    std::fs::read_to_string(workspace.join("effects.log")).unwrap_or_default()
}

fn run_finished(run_dir: &Path) -> usize {
    events(run_dir).iter().filter(|event| event["type"] == "run_finished").count()
}

/// A scripted run with two scripts whose effects are lines in `effects.log`, killed with
/// SIGKILL right after each event in turn (`SKILLS_AGENT_FAULT_KILL_AFTER_SEQ`), then resumed:
/// every resume completes the run with one `run_finished`, each script's effect is there
/// exactly once (a script recorded as executed is never run again, even when the process died
/// before its observation was recorded), and `replay --check` passes on the completed record.
#[test]
fn sigkill_after_every_event_then_resume_completes_the_run_once() {
    let clean = Fixture::new();
    let spec = count_twice(&clean);
    assert_code(&clean.run(&["run", "--quiet", "--model", &spec, "Count twice"]), 0);
    assert_eq!(effects(&clean.workspace), "a b c\nd\n");
    let last_seq = events(&clean.run_dir()).last().unwrap()["seq"].as_u64().unwrap();
    for kill_after in 1..last_seq {
        let mut fixture = Fixture::new();
        let spec = count_twice(&fixture);
        fixture.set_env("SKILLS_AGENT_FAULT_KILL_AFTER_SEQ", &kill_after.to_string());
        let killed = fixture.run(&["run", "--quiet", "--model", &spec, "Count twice"]);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(killed.status.signal(), Some(9), "killed after seq {kill_after}");
        let run_dir = fixture.run_dir();
        let recorded = events(&run_dir);
        assert_eq!(recorded.last().unwrap()["seq"], kill_after, "the record ends at the kill");
        fixture.env.clear();
        let run_dir_arg = run_dir.to_str().unwrap();
        let resumed = fixture.run(&["resume", "--json", run_dir_arg]);
        assert_code(&resumed, 0);
        assert_eq!(json_line(&resumed)["final_text"], "Counted 3 and 1.", "seq {kill_after}");
        assert_eq!(run_finished(&run_dir), 1, "killed after seq {kill_after}");
        assert_eq!(effects(&fixture.workspace), "a b c\nd\n", "killed after seq {kill_after}");
        assert!(!run_dir.join("last_execution.json").exists(), "seq {kill_after}");
        assert_code(&fixture.run(&["replay", "--check", run_dir_arg]), 0);
    }
}

/// A 64 KiB tmpfs (16 pages) mounted for the life of the value; `None` where mounting is not
/// allowed (not root).
struct SmallDisk {
    path: PathBuf,
}

const SMALL_DISK_PAGES: usize = 16;

impl SmallDisk {
    fn mount(path: &Path) -> Option<SmallDisk> {
        std::fs::create_dir_all(path).unwrap();
        let size = format!("size={}k", SMALL_DISK_PAGES * 4);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "skills-agent-test"])
            .arg(path)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then(|| SmallDisk { path: path.to_owned() })
    }

    /// Fills the disk but `pages` free pages.
    fn fill_but(&self, pages: usize) {
        let filler = vec![0u8; (SMALL_DISK_PAGES - pages) * 4096];
        std::fs::write(self.path.join("filler"), filler).unwrap();
    }

    fn free(&self) {
        std::fs::remove_file(self.path.join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// The complete lines of a record cut by a full disk (a torn last line left out): each parses.
fn complete_events(run_dir: &Path) -> Vec<Value> {
    let log = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    let complete = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    complete.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// The runs directory, then the workspace (with the runs directory inside it), on a disk with
/// 0, 1, 2, … free pages: every run stops with one message naming the file it could not write
/// and ENOSPC; a run that never recorded its start leaves no folder; any other keeps a record
/// whose complete lines parse, and once space is freed `resume` completes it to one
/// `run_finished` with a record that replays. A script is run again only when the stop came
/// after it ran but before its result was recorded, and resume says so.
#[test]
fn a_full_disk_stops_the_run_and_resume_completes_it_once_space_is_freed() {
    for place in ["runs directory", "workspace"] {
        let mut stopped_mid_run = 0;
        for free_pages in 0..SMALL_DISK_PAGES {
            let fixture = Fixture::new();
            let spec = count_twice(&fixture);
            let Some(disk) = SmallDisk::mount(&fixture.root.join("small-disk")) else {
                eprintln!("skipped: mounting a tmpfs needs root");
                return;
            };
            disk.fill_but(free_pages);
            let (workspace, runs_dir) = match place {
                "runs directory" => (fixture.workspace.clone(), disk.path.clone()),
                _ => (disk.path.clone(), disk.path.join(".agent/runs")),
            };
            let skills = fixture.workspace.join(".agents/skills");
            let flags = [
                "--workspace",
                workspace.to_str().unwrap(),
                "--runs-dir",
                runs_dir.to_str().unwrap(),
                "--skills",
                skills.to_str().unwrap(),
            ];
            let at = format!("{place}, {free_pages} free pages");
            let output = fixture.run(
                &[&["run", "--quiet", "--model", &spec][..], &flags, &["Count twice"]].concat(),
            );
            if output.status.success() {
                assert_eq!(effects(&workspace), "a b c\nd\n", "{at}");
                break;
            }
            assert_code(&output, 1);
            let stderr = text(&output.stderr);
            assert_eq!(stderr.matches("No space left on device").count(), 1, "{at}: {stderr}");
            assert!(stderr.contains(runs_dir.to_str().unwrap()), "{at}: {stderr}");
            let runs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
                .map(|entries| {
                    entries
                        .map(|entry| entry.unwrap().path())
                        .filter(|path| path.is_dir())
                        .collect()
                })
                .unwrap_or_default();
            let Some(run_dir) = runs.first() else {
                // It could not record its start: nothing to resume, and it says so.
                assert!(stderr.contains("the run did not start, and nothing of it was kept"));
                continue;
            };
            assert_eq!(runs.len(), 1, "{at}");
            let recorded = complete_events(run_dir);
            assert_eq!(recorded[0]["type"], "run_started", "{at}");
            disk.free();
            let run_dir_arg = run_dir.to_str().unwrap();
            let resumed = fixture.run(&["resume", "--quiet", run_dir_arg]);
            if recorded.last().unwrap()["type"] == "run_finished" {
                assert_code(&resumed, 2); // Stopped after its end was recorded (state.json).
                assert!(text(&resumed.stderr).contains("already finished"), "{at}");
                continue;
            }
            stopped_mid_run += 1;
            assert_code(&resumed, 0);
            assert_eq!(text(&resumed.stdout).trim(), "Counted 3 and 1.", "{at}");
            assert_eq!(run_finished(run_dir), 1, "{at}");
            assert_code(&fixture.run(&["replay", "--check", run_dir_arg]), 0);
            let note = text(&resumed.stderr);
            if place == "runs directory" {
                let expected = match ["a b c", "d"].iter().find(|args| {
                    note.contains(&format!("count.sh {args}`, before its result was recorded"))
                }) {
                    Some(&"d") => "a b c\nd\nd\n",
                    Some(_) => "a b c\na b c\nd\n",
                    None => "a b c\nd\n",
                };
                assert_eq!(effects(&workspace), expected, "{at}: {note}");
            }
        }
        assert!(stopped_mid_run >= 3, "{place}: {stopped_mid_run} runs stopped mid-run");
    }
}

/// One streamed Chat Completions answer of a scripted loopback server: a whole event stream,
/// or the start of one after which the server dies (the connection is cut and the port stops
/// listening).
enum Answer {
    Whole(String),
    DiesMidStream(String),
}

/// An OpenAI-compatible server on `127.0.0.1:port` (0: any free port) that answers one request
/// per scripted answer, in order, and stops listening after the last one or when it dies.
/// Returns the port and the thread, which ends when the server does.
fn model_server(port: u16, answers: Vec<Answer>) -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        for answer in answers {
            let (socket, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(socket.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if line == "\r\n" || line.is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut socket = socket;
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            match answer {
                Answer::Whole(events) => {
                    let _ = socket.write_all(format!("{head}{events}").as_bytes());
                }
                Answer::DiesMidStream(events) => {
                    let _ = socket.write_all(format!("{head}{events}").as_bytes());
                    let _ = socket.flush();
                    let _ = socket.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
        }
    });
    (port, thread)
}

/// The event stream of one streamed tool call, the arguments in two pieces.
fn tool_call_stream(name: &str, arguments: &Value) -> String {
    let arguments = arguments.to_string();
    let (first, second) = arguments.split_at(arguments.len() / 2);
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    [
        chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call-1",
                "type": "function", "function": {"name": name, "arguments": first}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": second}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat()
}

/// The model server dies in the middle of an answer (after the run selected its skill and ran
/// its script): the call fails (nothing is retried once part of the answer arrived), later
/// calls find no server, and the run ends with outcome `error`, exit 1, and a complete record.
/// With the server back, `resume` continues the run with a new piece of work and completes it
/// without running the script again; `replay --check` passes on the whole record.
#[test]
fn a_model_server_killed_mid_stream_ends_the_run_and_resume_completes_it() {
    let mut fixture = Fixture::new();
    let answer_stream = tool_call_stream("final_answer", &json!({"content": "There are 3 words."}));
    let (port, first_server) = model_server(
        0,
        vec![
            Answer::Whole(tool_call_stream("select_skills", &json!({"names": ["counter"]}))),
            Answer::Whole(tool_call_stream(
                "run_script",
                &json!({"skill": "counter", "script": "scripts/count.sh", "args": ["a", "b", "c"]}),
            )),
            Answer::DiesMidStream(answer_stream[..answer_stream.len() / 3].to_owned()),
        ],
    );
    fixture.set_env("OPENAI_BASE_URL", &format!("http://127.0.0.1:{port}/v1"));
    let run = fixture.run(&["run", "--json", "--model", "openai:scripted", "Count a b c"]);
    first_server.join().unwrap();
    assert_code(&run, 1);
    assert_eq!(json_line(&run)["outcome"], "error");
    let run_dir = fixture.run_dir();
    let recorded = events(&run_dir);
    assert_eq!(recorded.last().unwrap()["type"], "run_finished");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("runs.log")).unwrap(), "run\n");

    let (_, second_server) = model_server(port, vec![Answer::Whole(answer_stream)]);
    let run_dir_arg = run_dir.to_str().unwrap();
    let resumed = fixture.run(&["resume", "--json", run_dir_arg]);
    second_server.join().unwrap();
    assert_code(&resumed, 0);
    assert_eq!(json_line(&resumed)["final_text"], "There are 3 words.");
    assert!(text(&resumed.stderr).contains("ended with an error"), "{}", text(&resumed.stderr));
    let finished: Vec<Value> = events(&run_dir)
        .into_iter()
        .filter(|event| event["type"] == "run_finished")
        .map(|event| event["data"]["outcome"].clone())
        .collect();
    assert_eq!(finished, vec![json!("error"), json!("completed")]);
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("runs.log")).unwrap(),
        "run\n",
        "the script ran once"
    );
    assert_code(&fixture.run(&["replay", "--check", run_dir_arg]), 0);
}

#[test]
fn approval_without_a_terminal_is_denied_with_a_clear_message() {
    let fixture = Fixture::new();
    let honest = "I cannot tell: the script that counts words was not approved.";
    // After the denial, the model's count comes from nowhere: refused once, then it admits it.
    let spec = fixture.answers(
        "answers.json",
        &json!([
            select(&["counter"]),
            count(&["a", "b", "c"]),
            answer("There are 3 words."),
            answer(honest)
        ]),
    );
    let output =
        fixture.run(&["run", "--json", "--approval", "always", "--model", &spec, "Count a b c"]);
    assert_code(&output, 0);
    let result = json_line(&output);
    assert_eq!((&result["final_text"], &result["grounded"]), (&json!(honest), &json!(true)));
    assert_eq!(result["reasoning_metrics"]["ungrounded_refusals"], json!(1));
    assert!(!fixture.workspace.join("runs.log").exists(), "the denied script must not run");
    let events = events(&fixture.run_dir());
    let kinds: Vec<&str> = events.iter().filter_map(|event| event["type"].as_str()).collect();
    assert!(
        kinds.contains(&"approval_required") && kinds.contains(&"approval_denied"),
        "{kinds:?}"
    );
    let denied = events.iter().find(|event| event["type"] == "approval_denied").unwrap();
    assert!(denied.to_string().contains("no terminal"), "{denied}");
}

#[test]
fn skills_list_show_and_validate() {
    let fixture = Fixture::new();
    let list = fixture.run(&["skills", "list"]);
    assert_code(&list, 0);
    let printed = text(&list.stdout);
    assert!(printed.contains("counter") && printed.contains("project"), "{printed}");
    assert!(printed.contains("skill-authoring"), "the builtin skill is listed: {printed}");

    // A user-level skill of the same name is shadowed by the project's.
    let extra = fixture.root.join("extra/counter");
    std::fs::create_dir_all(&extra).unwrap();
    std::fs::write(
        extra.join("SKILL.md"),
        "---\nname: counter\ndescription: Another.\n---\nBody\n",
    )
    .unwrap();
    let extra_root = fixture.root.join("extra");
    let list = fixture.run(&["skills", "list", "--json", "--skills", extra_root.to_str().unwrap()]);
    assert_code(&list, 0);
    let index: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(index["shadowed"][0]["skill"]["name"], "counter", "{index}");

    let show = fixture.run(&["skills", "show", "counter"]);
    assert_code(&show, 0);
    let printed = text(&show.stdout);
    assert!(
        printed.contains("scripts/count.sh") && printed.contains("prints `count: N`"),
        "{printed}"
    );
    let unknown = fixture.run(&["skills", "show", "nope"]);
    assert_code(&unknown, 1);
    assert!(text(&unknown.stderr).contains("no skill named `nope`"));

    assert_code(&fixture.run(&["skills", "validate", "--strict"]), 0);
    let broken = fixture.workspace.join(".agents/skills/Bad_Name");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("SKILL.md"), "---\nname: Bad_Name\n---\nno description\n").unwrap();
    let validate = fixture.run(&["skills", "validate", "--strict"]);
    assert_code(&validate, 1);
    assert!(text(&validate.stdout).contains("Bad_Name"), "{}", text(&validate.stdout));
    let missing = fixture.run(&["skills", "list", "--skills", "/no/such/root"]);
    assert_code(&missing, 2);
}

#[test]
fn model_status_says_when_nothing_runs() {
    let fixture = Fixture::new();
    let status = fixture.run(&["model", "status", "--size", "0.5b"]);
    assert_code(&status, 1);
    assert_eq!(
        text(&status.stdout),
        "the 0.5b model is not running (`skills-agent model start --size 0.5b` starts it)\n"
    );
    let stop = fixture.run(&["model", "stop"]);
    assert_code(&stop, 0);
    assert!(text(&stop.stderr).contains("was not running"));
    assert_code(&fixture.run(&["model", "start", "--size", "7b"]), 2);
}

#[test]
fn the_plan_execute_think_strategy_runs_from_the_command_line() {
    let fixture = Fixture::new();
    let plan = |steps: Value| {
        json!({"tool_calls": [{"name": "plan_tool_call",
            "arguments": {"reasoning": "next batch", "steps": steps, "complexity": "simple"}}]})
    };
    let think = |summary: &str, done: bool| {
        json!({"tool_calls": [{"name": "think", "arguments": {"internal_analysis": "seen",
            "user_summary": summary, "task_completed": done, "next_steps_preview": ""}}]})
    };
    let spec = fixture.answers(
        "answers.json",
        &json!([
            // A round that only selects has no think: the next plan follows.
            plan(json!([{"tool": "select_skills", "args": {"names": ["counter"]}}])),
            plan(json!([{"tool": "run_script", "args":
                {"skill": "counter", "script": "scripts/count.sh", "args": ["a", "b"]}}])),
            think("There are 2 words.", true),
        ]),
    );
    let output = fixture.run(&[
        "run",
        "--json",
        "--strategy",
        "plan-execute-think",
        "--model",
        &spec,
        "Count a b",
    ]);
    assert_code(&output, 0);
    let result = json_line(&output);
    assert_eq!(
        (&result["final_text"], &result["turns"]),
        (&json!("There are 2 words."), &json!(2))
    );
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("runs.log")).unwrap(), "run\n");
    let run_dir = result["run_dir"].as_str().unwrap();
    assert_code(&fixture.run(&["replay", "--check", run_dir]), 0);
}
