//! `skills-agent chat`: an interactive session over one run directory. Each line is a task, the
//! answer to the question the agent asked, or a slash command (`/todo`, `/schedule`, `/view`
//! run without the model; `/help`, `/exit`). Ctrl-C cancels the task in progress, not the
//! session; Ctrl-D or `/exit` leaves. `chat --resume RUN_DIR` (or `resume RUN_DIR` in a
//! terminal) reopens a session.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use skills_agent_core::{CancellationToken, Outcome};

use crate::launch::{ChatArgs, Prepared, exit_code, prepare_chat, usage};
use crate::runs::{finished, pending_question, run_events};

const HELP: &str = "Type a task and press Enter. When the agent asks a question, your next line \
is the answer.\n  /todo [list | add TEXT | done N | undo N | remove N]   your to-do list\n  \
/schedule [list | add WHEN :: WHAT | remove N]        your schedule\n  /view    both lists\n  \
/help    this text\n  /exit    leave (Ctrl-D too)\nCtrl-C stops the task in progress; the session \
goes on.";

fn history_file() -> Option<PathBuf> {
    let cache = skills_agent_models::local_model::cache_dir().ok()?;
    std::fs::create_dir_all(&cache).ok()?;
    Some(cache.join("chat-history.txt"))
}

/// Runs the session.
pub(crate) async fn chat(args: ChatArgs) -> Result<u8> {
    if !std::io::stdin().is_terminal() {
        return Err(usage(
            "chat needs a terminal on stdin; without one use `skills-agent run` (and `resume \
             RUN_DIR --answer TEXT` when it asks a question)",
        ));
    }
    let mut args = args;
    if let Some(dir) = args.resume.clone() {
        // The session goes on with the settings it began with (flags given win, and say so).
        args.common = crate::runs::resume_args(&dir, args.common)?;
    }
    let current = Arc::new(Mutex::new(CancellationToken::new()));
    let prepared = prepare_chat(&args, Arc::clone(&current)).await?;
    if let Some(dir) = args.resume_dir()
        && let Err(error) = crate::launch::refuse_changed_skills(&prepared, dir)
    {
        prepared.shutdown().await;
        return Err(error);
    }
    let handle = tokio::runtime::Handle::current();
    let mut run_dir = args.resume_dir().map(Path::to_owned);
    let json = args.json();
    tokio::task::spawn_blocking(move || session(prepared, &current, &handle, &mut run_dir, json))
        .await
        .context("the chat session stopped unexpectedly")?
}

fn session(
    mut prepared: Prepared,
    current: &Mutex<CancellationToken>,
    handle: &tokio::runtime::Handle,
    run_dir: &mut Option<PathBuf>,
    json: bool,
) -> Result<u8> {
    let mut editor = DefaultEditor::new().context("cannot start the line editor")?;
    let history = history_file();
    if let Some(history) = &history {
        let _ = editor.load_history(history);
    }
    let mut last_outcome = Outcome::Completed;
    let mut pending = None;
    if let Some(dir) = run_dir.as_deref() {
        let events = run_events(dir).map_err(usage)?;
        if !finished(dir, &events).map_err(usage)? {
            eprintln!("resuming the interrupted work of {} first", dir.display());
            let token = CancellationToken::new();
            *current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = token.clone();
            prepared.agent.set_cancellation(token);
            let result = handle.block_on(prepared.agent.resume(dir))?;
            print_answer(&result.final_text, json, &result);
        }
        pending = pending_question(dir);
    }
    eprintln!(
        "skills-agent chat · strategy {} · model {} · /help for commands, Ctrl-D to leave",
        prepared.strategy, prepared.model
    );
    if let Some(question) = &pending {
        eprintln!("the agent asked: {question}");
    }
    loop {
        let prompt = if pending.is_some() { "answer> " } else { "task> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                eprintln!("(nothing is running; Ctrl-D or /exit leaves)");
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(error).context("cannot read the next line"),
        };
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(text);
        match text {
            "/exit" | "/quit" => break,
            "/help" => {
                eprintln!("{HELP}");
                continue;
            }
            _ => {}
        }
        if text.starts_with('/') && skills_agent_core::parse_slash(text).is_none() {
            eprintln!("unknown command `{text}`; /help lists them");
            continue;
        }
        let token = CancellationToken::new();
        *current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = token.clone();
        prepared.agent.set_cancellation(token);
        let outcome = match run_dir.as_deref() {
            None => handle.block_on(prepared.agent.run(text)),
            Some(dir) => handle.block_on(prepared.agent.send(dir, text)),
        };
        match outcome {
            Ok(result) => {
                if run_dir.is_none() {
                    run_dir.clone_from(&result.run_dir);
                }
                print_answer(&result.final_text, json, &result);
                pending = (result.outcome == Outcome::NeedsInput)
                    .then(|| run_dir.as_deref().and_then(pending_question))
                    .flatten();
                last_outcome = result.outcome;
            }
            Err(error) => eprintln!("skills-agent: {error:#}"),
        }
    }
    if let Some(history) = &history {
        let _ = editor.save_history(history);
    }
    if let Some(dir) = run_dir.as_deref() {
        eprintln!(
            "session saved in {} (`skills-agent chat --resume {}` goes on)",
            dir.display(),
            dir.display()
        );
    }
    Ok(if last_outcome == Outcome::NeedsInput { exit_code(last_outcome) } else { 0 })
}

fn print_answer(text: &str, json: bool, result: &skills_agent_core::RunResult) {
    let mut stdout = std::io::stdout().lock();
    let line = if json {
        serde_json::json!({
            "run_id": result.run_id,
            "run_dir": result.run_dir,
            "outcome": result.outcome,
            "final_text": result.final_text,
            "turns": result.turns,
            "model_calls": result.model_calls,
            "tool_calls": result.tool_calls,
            "script_runs": result.script_runs,
            "reasoning_metrics": result.reasoning_metrics,
            "grounded": result.grounded,
        })
        .to_string()
    } else {
        text.to_owned()
    };
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}
