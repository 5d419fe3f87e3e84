//! The sandbox helper binary: confines itself as the runtime's plan says, then runs the command.

use std::process::ExitCode;

fn main() -> ExitCode {
    match tools_runtime::run_sandbox_helper_if_requested() {
        Some(code) => code,
        None => {
            eprintln!(
                "tools-runtime-sandbox is started by the tools-runtime library, not by hand \
                 (usage: tools-runtime-sandbox {} PLAN_JSON)",
                tools_runtime::HELPER_MODE_ARGUMENT
            );
            ExitCode::from(2)
        }
    }
}
