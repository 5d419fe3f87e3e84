//! Stable command-line face of the runtime: run one command sandboxed, print the result as JSON.
//!
//! ```text
//! run --workspace DIR [--allow-net] [--timeout-ms N] [--max-output-bytes N] -- PROGRAM [ARGS]...
//! ```
//!
//! Prints one JSON line: the `ExecResult` when the command ran, `{"refused": {...}}` when it was
//! refused. Exit code 0 whatever the command did; 2 on usage errors (an empty PROGRAM and
//! `--max-output-bytes` below 2 included); 1 only when the runtime itself failed (audit or
//! spawn error). The example doubles as its own sandbox helper.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tools_runtime::{ExecOutcome, ExecRequest, Runtime, RuntimeConfig, SandboxHelper};

const USAGE: &str = "usage: run --workspace DIR [--allow-net] [--timeout-ms N] \
                     [--max-output-bytes N] -- PROGRAM [ARGS]...";

struct Arguments {
    workspace: PathBuf,
    allow_network: bool,
    timeout: Duration,
    max_output_bytes: usize,
    program: String,
    args: Vec<String>,
}

fn parse(mut raw: impl Iterator<Item = String>) -> Result<Arguments, String> {
    let mut workspace = None;
    let mut allow_network = false;
    let mut timeout = Duration::from_secs(30);
    let mut max_output_bytes = 1 << 20;
    let mut command = Vec::new();
    while let Some(argument) = raw.next() {
        match argument.as_str() {
            "--workspace" => workspace = Some(PathBuf::from(value(&mut raw, "--workspace")?)),
            "--allow-net" => allow_network = true,
            "--timeout-ms" => {
                let millis = number(&value(&mut raw, "--timeout-ms")?, "--timeout-ms")?;
                timeout = Duration::from_millis(millis);
            }
            "--max-output-bytes" => {
                let bytes = number(&value(&mut raw, "--max-output-bytes")?, "--max-output-bytes")?;
                max_output_bytes = usize::try_from(bytes).map_err(|error| error.to_string())?;
            }
            "--" => {
                command.extend(raw.by_ref());
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let workspace = workspace.ok_or("--workspace is required")?;
    let mut command = command.into_iter();
    let program = command.next().filter(|program| !program.is_empty());
    let program = program.ok_or("missing PROGRAM after --")?;
    if max_output_bytes < 2 {
        return Err("--max-output-bytes must be at least 2".to_owned());
    }
    Ok(Arguments {
        workspace,
        allow_network,
        timeout,
        max_output_bytes,
        program,
        args: command.collect(),
    })
}

fn value(raw: &mut impl Iterator<Item = String>, flag: &str) -> Result<String, String> {
    raw.next().ok_or_else(|| format!("{flag} needs a value"))
}

fn number(text: &str, flag: &str) -> Result<u64, String> {
    text.parse().map_err(|_| format!("{flag} needs a number, got `{text}`"))
}

fn main() -> ExitCode {
    if let Some(code) = tools_runtime::run_sandbox_helper_if_requested() {
        return code;
    }
    let arguments = match parse(std::env::args().skip(1)) {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("run: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(arguments) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("run: {message}");
            ExitCode::from(1)
        }
    }
}

fn run(arguments: Arguments) -> Result<String, Box<dyn std::error::Error>> {
    let helper = SandboxHelper::current_exe()?;
    let mut config = RuntimeConfig::new(helper);
    // The command line is the user's explicit request: network access needs no further approval.
    config.policy.approval_mode = tools_runtime::ApprovalMode::Never;
    let runtime = Runtime::new(config);
    let mut request = ExecRequest::new(arguments.program, arguments.args, arguments.workspace);
    request.call_id = "cli".to_owned();
    request.allow_network = arguments.allow_network;
    request.timeout = arguments.timeout;
    request.max_output_bytes = arguments.max_output_bytes;
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let outcome = tokio.block_on(runtime.run(&request))?;
    let line = match outcome {
        ExecOutcome::Ran(result) => serde_json::to_string(&result)?,
        ExecOutcome::Refused(refusal) => {
            serde_json::to_string(&serde_json::json!({ "refused": refusal }))?
        }
    };
    Ok(line)
}
