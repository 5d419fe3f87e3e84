//! `skills-agent`: run agents on Agent Skills. The binary is also its own sandbox helper.

use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(code) = tools_runtime::run_sandbox_helper_if_requested() {
        return code;
    }
    skills_agent::cli::main()
}
