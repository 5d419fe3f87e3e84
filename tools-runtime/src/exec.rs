//! The request and result types of one execution: what to run, and what came of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::environment::EnvPolicy;
use crate::policy::RuleSet;
use crate::report::SandboxReport;
use crate::spec::Rlimits;

/// Resource limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Per-process rlimits.
    pub rlimits: Rlimits,
    /// Memory of the whole run (cgroup `memory.limit_in_bytes`).
    pub memory_bytes: u64,
    /// Processes of the whole run (cgroup `pids.max`).
    pub pids: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            rlimits: Rlimits {
                cpu_seconds: 60,
                address_space_bytes: 4 << 30,
                file_size_bytes: 1 << 30,
                open_files: 1024,
                processes: 1024,
            },
            memory_bytes: 1 << 30,
            pids: 256,
        }
    }
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// Call id (ties the audit record to the agent's action).
    pub call_id: String,
    /// The skill the command belongs to.
    pub skill: Option<String>,
    /// The skill's `allowed-tools` as rules (`None`: the skill does not restrict commands).
    pub skill_rules: Option<RuleSet>,
    /// The program (a path, or a name looked up in the command's `PATH`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Working directory; relative paths are taken from the first workspace root.
    pub cwd: PathBuf,
    /// Workspace roots: the only writable places besides the private tmp.
    pub workspace_roots: Vec<PathBuf>,
    /// Paths inside the workspace that stay read-only (skill folder, `.git/hooks`).
    pub protected_paths: Vec<PathBuf>,
    /// Hierarchies outside the workspace the command may read (and name in arguments): a skill
    /// folder elsewhere, a toolchain. Needed for uid-0 runs (a root-owned workspace), whose
    /// reads are narrowed to system directories; unprivileged runs read everything their user
    /// may read anyway.
    pub read_only_paths: Vec<PathBuf>,
    /// The environment policy.
    pub env: EnvPolicy,
    /// The environment `env.inherit` copies from (`None`: the runtime's own).
    pub base_environment: Option<Vec<(String, String)>>,
    /// Wall-clock limit; the whole process group is killed when it passes.
    pub timeout: Duration,
    /// Bytes kept per stream (head + tail).
    pub max_output_bytes: usize,
    /// Whether the command may use the network.
    pub allow_network: bool,
    /// Limits for this run (`None`: the runtime's).
    pub limits: Option<Limits>,
    /// Refuse to run unless Landlock or bubblewrap confines the filesystem.
    pub require_filesystem_confinement: bool,
}

impl ExecRequest {
    /// A request with defaults: cwd = the workspace, 30 s timeout, 1 MiB per stream, no
    /// network, filesystem confinement required.
    pub fn new(
        program: impl Into<String>,
        args: Vec<String>,
        workspace: impl Into<PathBuf>,
    ) -> ExecRequest {
        let workspace = workspace.into();
        ExecRequest {
            call_id: String::new(),
            skill: None,
            skill_rules: None,
            program: program.into(),
            args,
            cwd: workspace.clone(),
            workspace_roots: vec![workspace],
            protected_paths: Vec::new(),
            read_only_paths: Vec::new(),
            env: EnvPolicy::default(),
            base_environment: None,
            timeout: Duration::from_secs(30),
            max_output_bytes: 1 << 20,
            allow_network: false,
            limits: None,
            require_filesystem_confinement: true,
        }
    }

    /// A request to run `relative_path` of a skill (the `run_script(skill_ref, relative_path,
    /// args)` action): the path must stay inside the skill folder (no absolute path, no `..`,
    /// no symlink leading out) and name a file. The script runs with the workspace as cwd, and
    /// the skill folder is protected (read-only) when it lies inside the workspace, and readable
    /// ([`ExecRequest::read_only_paths`]) when it lies outside.
    pub fn for_skill_script(
        skill: &str,
        skill_directory: &Path,
        relative_path: &str,
        args: Vec<String>,
        workspace: impl Into<PathBuf>,
    ) -> std::result::Result<ExecRequest, Refusal> {
        let outside = |reason: &str| Refusal {
            kind: RefusalKind::PathOutsideWorkspace,
            message: format!("script `{relative_path}` of skill `{skill}`: {reason}"),
            sandbox: None,
        };
        let relative = Path::new(relative_path);
        let escapes = relative.is_absolute()
            || relative.components().any(|component| {
                matches!(
                    component,
                    std::path::Component::ParentDir | std::path::Component::Prefix(_)
                )
            });
        if relative_path.is_empty() || escapes {
            return Err(outside("the path must be relative and stay inside the skill folder"));
        }
        let skill_root = skill_directory
            .canonicalize()
            .map_err(|error| outside(&format!("cannot resolve the skill folder: {error}")))?;
        let script = skill_root
            .join(relative)
            .canonicalize()
            .map_err(|error| outside(&format!("cannot resolve the script: {error}")))?;
        if !script.starts_with(&skill_root) {
            return Err(outside("the path resolves outside the skill folder"));
        }
        if !script.is_file() {
            return Err(outside("not a regular file"));
        }
        let workspace = workspace.into();
        let mut request = ExecRequest::new(script.display().to_string(), args, &workspace);
        request.skill = Some(skill.to_owned());
        if workspace.canonicalize().is_ok_and(|workspace| skill_root.starts_with(workspace)) {
            request.protected_paths.push(skill_root);
        } else {
            request.read_only_paths.push(skill_root);
        }
        Ok(request)
    }

    /// The command line, program first.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.clone()).chain(self.args.iter().cloned()).collect()
    }
}

/// The result of a command that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecResult {
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Signal number, when a signal killed it.
    pub signal: Option<i32>,
    /// Whether the timeout fired (the whole group was killed; output is partial).
    pub timed_out: bool,
    /// Stdout: head, elision marker, tail.
    pub stdout: String,
    /// Stderr: head, elision marker, tail.
    pub stderr: String,
    /// Whether stdout was truncated.
    pub stdout_truncated: bool,
    /// Whether stderr was truncated.
    pub stderr_truncated: bool,
    /// Bytes written to stdout.
    pub stdout_total_bytes: u64,
    /// Bytes of stdout kept.
    pub stdout_retained_bytes: u64,
    /// Bytes written to stderr.
    pub stderr_total_bytes: u64,
    /// Bytes of stderr kept.
    pub stderr_retained_bytes: u64,
    /// Wall-clock run time in milliseconds.
    pub duration_ms: u64,
    /// Whether the failure looks like the sandbox said no (permission, read-only fs, network,
    /// a resource-limit signal).
    pub likely_denied: bool,
    /// Which layers protected the run.
    pub sandbox: SandboxReport,
}

/// Why a command was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RefusalKind {
    /// The merged policy forbids the command.
    PolicyForbidden,
    /// The policy says prompt but the approval mode is `never` (or no approver is set).
    ApprovalUnavailable,
    /// The approver said no.
    ApprovalDenied,
    /// The approver did not answer in time.
    ApprovalTimedOut,
    /// The cwd or an argument resolves outside the workspace.
    PathOutsideWorkspace,
    /// The policy demands a confinement no layer here can enforce (fail closed).
    SandboxUnavailable,
    /// The user the command runs as cannot enter the working directory (the message names the
    /// directory that stops it, the user, and what to change).
    WorkspaceInaccessible,
}

impl RefusalKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RefusalKind::PolicyForbidden => "policy_forbidden",
            RefusalKind::ApprovalUnavailable => "approval_unavailable",
            RefusalKind::ApprovalDenied => "approval_denied",
            RefusalKind::ApprovalTimedOut => "approval_timed_out",
            RefusalKind::PathOutsideWorkspace => "path_outside_workspace",
            RefusalKind::SandboxUnavailable => "sandbox_unavailable",
            RefusalKind::WorkspaceInaccessible => "workspace_inaccessible",
        }
    }
}

/// A command that was not run, as an observation for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The kind of refusal.
    pub kind: RefusalKind,
    /// What to tell the model.
    pub message: String,
    /// The sandbox report, when the helper refused (fail closed).
    pub sandbox: Option<SandboxReport>,
}

/// What [`Runtime::run`](crate::Runtime::run) returns: the command ran, or it was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecOutcome {
    /// The command ran (whatever its exit status).
    Ran(ExecResult),
    /// The command was not run.
    Refused(Refusal),
}
