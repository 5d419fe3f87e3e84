//! Sessions from the outside: `skills-agent chat` driven through a real pseudo-terminal
//! (tasks, a question and its answer, a slash command while the question is pending, Ctrl-C
//! stopping a running script but not the session, Ctrl-D leaving, `chat --resume`), and,
//! without a terminal, `run --ask-user` ending with exit code 4 and `resume --answer`
//! continuing the same run directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::needless_pass_by_value)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rexpect::session::{PtySession, spawn_command};
use serde_json::{Value, json};

/// A workspace with skills `counter` (counts its arguments) and `sleeper` (sleeps 60 s), and
/// a private home.
struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let workspace = root.join("workspace");
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        for (name, description, script) in [
            ("counter", "Counts the arguments it is given.", "echo \"count: $#\""),
            ("sleeper", "Waits a long time.", "sleep 60\necho woke"),
        ] {
            let skill = workspace.join(".agents/skills").join(name);
            std::fs::create_dir_all(skill.join("scripts")).unwrap();
            std::fs::write(
                skill.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: {description}\n---\nRun the script.\n"),
            )
            .unwrap();
            let path = skill.join("scripts/run.sh");
            std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Fixture { _dir: dir, workspace, home }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skills-agent"));
        command
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("TERM", "xterm")
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("SKILLS_AGENT_CACHE", self.home.join("cache"));
        command
    }

    fn output(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    fn answers(&self, name: &str, answers: &Value) -> String {
        std::fs::write(self.workspace.join(name), answers.to_string()).unwrap();
        format!("mock:{name}")
    }

    fn run_dir(&self) -> PathBuf {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(self.workspace.join(".agent/runs"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs.remove(0)
    }

    fn chat(&self, args: &[&str]) -> PtySession {
        spawn_command(self.command(args), Some(60_000)).unwrap()
    }
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": arguments}]})
}

fn run_script(skill: &str, args: &[&str]) -> Value {
    call("run_script", json!({"skill": skill, "script": "scripts/run.sh", "args": args}))
}

fn events(run_dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn inputs(run_dir: &Path) -> Vec<(String, String)> {
    events(run_dir)
        .iter()
        .filter(|event| event["type"] == "user_input")
        .map(|event| {
            (
                event["data"]["kind"].as_str().unwrap().to_owned(),
                event["data"]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
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

#[test]
fn a_chat_session_asks_answers_runs_commands_and_survives_ctrl_c() {
    let fixture = Fixture::new();
    let model = fixture.answers(
        "answers.json",
        &json!([
            call("ask_user", json!({"question": "Which words shall I count?"})),
            call("select_skills", json!({"names": ["counter"]})),
            run_script("counter", &["alpha", "beta"]),
            call("final_answer", json!({"content": "You gave 2 words."})),
            call("select_skills", json!({"names": ["sleeper"]})),
            run_script("sleeper", &[]),
        ]),
    );
    let mut chat = fixture.chat(&["chat", "--model", &model, "--approval", "never"]);
    chat.exp_string("strategy react").unwrap();
    chat.exp_string("task> ").unwrap();
    chat.send_line("Count my words").unwrap();
    chat.exp_string("Which words shall I count?").unwrap();
    chat.exp_string("answer> ").unwrap();
    // A slash command while the question is pending: no model call, the question stays.
    chat.send_line("/todo add buy milk").unwrap();
    chat.exp_string("added to-do #1: buy milk").unwrap();
    chat.exp_string("still waits for your answer").unwrap();
    chat.exp_string("answer> ").unwrap();
    chat.send_line("/frobnicate").unwrap();
    chat.exp_string("unknown command `/frobnicate`").unwrap();
    chat.exp_string("answer> ").unwrap();
    chat.send_line("alpha beta").unwrap();
    chat.exp_string("You gave 2 words.").unwrap();
    chat.exp_string("task> ").unwrap();
    // Ctrl-C while a 60 s script runs stops that task, not the session.
    chat.send_line("Wait for a while").unwrap();
    chat.exp_string("select_skills sleeper").unwrap();
    chat.send_control('c').unwrap();
    chat.exp_string("cancelling this task").unwrap();
    chat.exp_string("task> ").unwrap();
    chat.send_line("/view").unwrap();
    chat.exp_string("[ ] #1 buy milk").unwrap();
    chat.exp_string("task> ").unwrap();
    chat.send_control('d').unwrap();
    chat.exp_string("session saved in").unwrap();
    chat.exp_eof().unwrap();
    let status = chat.process().wait().unwrap();
    assert!(matches!(status, rexpect::process::WaitStatus::Exited(_, 0)), "{status:?}");

    let run_dir = fixture.run_dir();
    assert_eq!(
        inputs(&run_dir),
        [
            ("command".to_owned(), "/todo add buy milk".to_owned()),
            ("answer".to_owned(), "alpha beta".to_owned()),
            ("task".to_owned(), "Wait for a while".to_owned()),
            ("command".to_owned(), "/view".to_owned()),
        ]
    );
    let outcomes: Vec<Value> = events(&run_dir)
        .iter()
        .filter(|event| event["type"] == "run_finished")
        .map(|event| event["data"]["outcome"].clone())
        .collect();
    assert_eq!(
        outcomes,
        [
            json!("needs_input"),
            json!("needs_input"),
            json!("completed"),
            json!("cancelled"),
            json!("completed")
        ]
    );
    // The whole session replays from its record.
    let replay = fixture.output(&["replay", "--check", run_dir.to_str().unwrap()]);
    assert_code(&replay, 0);
    assert!(text(&replay.stdout).contains("reproduced exactly"), "{}", text(&replay.stdout));

    // `chat --resume` reopens the session: the transcript and the store go on.
    let model = fixture
        .answers("more.json", &json!([call("final_answer", json!({"content": "Still here."}))]));
    let dir = run_dir.to_str().unwrap();
    let mut chat = fixture.chat(&["chat", "--model", &model, "--resume", dir]);
    chat.exp_string("task> ").unwrap();
    chat.send_line("Are you there?").unwrap();
    chat.exp_string("Still here.").unwrap();
    chat.exp_string("task> ").unwrap();
    chat.send_line("/exit").unwrap();
    chat.exp_eof().unwrap();
    assert_eq!(inputs(&run_dir).len(), 5);
}

#[test]
fn without_a_terminal_a_question_exits_4_and_resume_answers_it() {
    let fixture = Fixture::new();
    let first = fixture
        .answers("first.json", &json!([call("ask_user", json!({"question": "Which words?"}))]));
    let output =
        fixture.output(&["run", "--model", &first, "--ask-user", "--json", "Count my words"]);
    assert_code(&output, 4);
    let line: Value = serde_json::from_str(text(&output.stdout).trim()).unwrap();
    assert_eq!(
        (line["outcome"].clone(), line["final_text"].clone()),
        (json!("needs_input"), json!("Which words?"))
    );
    let run_dir = fixture.run_dir();
    let dir = run_dir.to_str().unwrap();
    assert!(text(&output.stderr).contains(&format!("skills-agent resume {dir} --answer")));
    // Without --answer, resume says what the run waits for.
    let output = fixture.output(&["resume", dir]);
    assert_code(&output, 2);
    assert!(
        text(&output.stderr).contains("waits for an answer to: Which words?"),
        "{}",
        text(&output.stderr)
    );
    let output = fixture.output(&["resume", dir, "--answer", "  "]);
    assert_code(&output, 2);
    // A copy written by a build from before record formats were numbered is refused before any
    // model is prepared (the mock file named here does not exist).
    let old = fixture.home.join("old-format");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::copy(run_dir.join("state.json"), old.join("state.json")).unwrap();
    let mut lines = events(&run_dir);
    lines[0]["data"].as_object_mut().unwrap().remove("record_format");
    let record: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(old.join("events.jsonl"), record).unwrap();
    let old = old.to_str().unwrap();
    let output = fixture.output(&["resume", old, "--answer", "x", "--model", "mock:/no/such"]);
    assert_code(&output, 2);
    let stderr = text(&output.stderr);
    assert!(stderr.contains("written in record format 0"), "{stderr}");
    assert!(stderr.contains(&format!("`skills-agent replay {old}` still shows it")), "{stderr}");
    let rest = fixture.answers(
        "rest.json",
        &json!([
            call("select_skills", json!({"names": ["counter"]})),
            run_script("counter", &["one", "two", "three"]),
            call("final_answer", json!({"content": "3 words."})),
        ]),
    );
    let output = fixture.output(&[
        "resume",
        dir,
        "--answer",
        "one two three",
        "--model",
        &rest,
        "--approval",
        "never",
    ]);
    assert_code(&output, 0);
    assert_eq!(text(&output.stdout), "3 words.\n");
    assert_eq!(inputs(&run_dir), [("answer".to_owned(), "one two three".to_owned())]);
    let observation = events(&run_dir)
        .into_iter()
        .find(|event| {
            event["type"] == "observation_recorded"
                && event["data"]["content"].as_str().unwrap_or("").contains("count:")
        })
        .unwrap();
    assert!(observation["data"]["content"].as_str().unwrap().contains("count: 3"));
    // The finished run takes no second answer without a terminal; chat needs a terminal.
    let output = fixture.output(&["resume", dir, "--answer", "again", "--model", &rest]);
    assert_code(&output, 2);
    assert!(text(&output.stderr).contains("asks no question"), "{}", text(&output.stderr));
    let output = fixture.output(&["chat", "--model", &rest]);
    assert_code(&output, 2);
    assert!(text(&output.stderr).contains("chat needs a terminal"), "{}", text(&output.stderr));
}
