//! The runtime: policy and approval, path checks, then the sandboxed run with timeout, capture
//! and audit.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::audit::{AuditRecord, AuditSink};
use crate::cgroup::RunCgroup;
use crate::environment::{EnvPolicy, build_environment};
use crate::error::{Error, Result};
use crate::output::{CapturedText, HeadTailBuffer};
use crate::paths::{PathViolation, canonical_roots, check_arguments, checked_cwd};
use crate::policy::{
    ApprovalAnswer, ApprovalRequest, Approver, Decision, MergedDecision, RuleSet, UserPolicy,
    merge_decisions, needs_approval,
};
use crate::report::{Backend, Layer, LayerStatus, SandboxReport};
use crate::spec::{
    HELPER_MODE_ARGUMENT, HelperPlan, HelperReport, LandlockPlan, REPORT_LINE_PREFIX, Rlimits,
    Stage,
};

/// The uid and gid commands run as when the runtime runs as root (`nobody:nogroup`).
pub const DEFAULT_SANDBOX_USER: (u32, u32) = (65534, 65534);

/// Where the sandbox helper binary is.
///
/// The helper is a program that runs [`run_sandbox_helper_if_requested`](crate::run_sandbox_helper_if_requested)
/// first: the crate's `tools-runtime-sandbox` binary, or any binary of yours that opts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxHelper {
    /// The helper's path.
    pub program: PathBuf,
}

impl SandboxHelper {
    /// The name of the crate's helper binary.
    pub const BINARY_NAME: &'static str = "tools-runtime-sandbox";

    /// A helper at an explicit path.
    pub fn at(program: impl Into<PathBuf>) -> SandboxHelper {
        SandboxHelper { program: program.into() }
    }

    /// The running binary itself, which must call
    /// [`run_sandbox_helper_if_requested`](crate::run_sandbox_helper_if_requested) first in `main`.
    pub fn current_exe() -> Result<SandboxHelper> {
        std::env::current_exe()
            .map(SandboxHelper::at)
            .map_err(|_| Error::HelperNotFound { searched: vec![PathBuf::from("/proc/self/exe")] })
    }

    /// Finds `tools-runtime-sandbox` next to the running binary, then in its parent directory
    /// (where cargo puts binaries when the running one is a test or example in `deps/` or
    /// `examples/`).
    pub fn locate() -> Result<SandboxHelper> {
        let exe = std::env::current_exe().map_err(|_| Error::HelperNotFound {
            searched: vec![PathBuf::from("/proc/self/exe")],
        })?;
        let mut searched = Vec::new();
        let mut directory = exe.parent();
        for _ in 0..2 {
            let Some(current) = directory else { break };
            let candidate = current.join(SandboxHelper::BINARY_NAME);
            if candidate.is_file() {
                return Ok(SandboxHelper::at(candidate));
            }
            searched.push(candidate);
            directory = current.parent();
        }
        Err(Error::HelperNotFound { searched })
    }
}

/// Which backend builds the filesystem view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendChoice {
    /// bubblewrap when the request has protected paths (and bwrap is installed), else direct.
    Auto,
    /// Always the direct backend (Landlock); protected paths are then refused.
    Direct,
    /// Always bubblewrap; refused when bwrap is missing.
    Bubblewrap,
}

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

/// Settings of a [`Runtime`].
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The sandbox helper.
    pub helper: SandboxHelper,
    /// The backend.
    pub backend: BackendChoice,
    /// The bubblewrap program (looked up in `PATH` when relative).
    pub bubblewrap_program: PathBuf,
    /// The user's policy and approval settings.
    pub policy: UserPolicy,
    /// uid/gid for commands when the runtime runs as root (and the workspace owner is not
    /// used, see `run_as_workspace_owner`). The workspace must be writable by this user.
    pub sandbox_user: (u32, u32),
    /// When running as root and the first workspace root belongs to a non-root user, run the
    /// command as that user (so it can write its own workspace) instead of `sandbox_user`.
    pub run_as_workspace_owner: bool,
    /// Hierarchies the command may read and execute (Landlock).
    pub readable_roots: Vec<PathBuf>,
    /// Places outside the workspace that arguments may name (read-only system directories and
    /// devices); any other path argument outside the workspace is refused before spawn.
    pub argument_read_roots: Vec<PathBuf>,
    /// Default limits (a request may override them).
    pub limits: Limits,
    /// Where private tmp directories are created.
    pub private_tmp_parent: PathBuf,
    /// How long to keep reading output after the command ended or was killed.
    pub drain_timeout: Duration,
}

impl RuntimeConfig {
    /// Defaults around `helper`: auto backend, allow-all user rules asking for risky runs,
    /// `nobody` as the sandbox user, read access everywhere, write only the workspace.
    pub fn new(helper: SandboxHelper) -> RuntimeConfig {
        RuntimeConfig {
            helper,
            backend: BackendChoice::Auto,
            bubblewrap_program: PathBuf::from("bwrap"),
            policy: UserPolicy::default(),
            sandbox_user: DEFAULT_SANDBOX_USER,
            run_as_workspace_owner: true,
            readable_roots: vec![PathBuf::from("/")],
            argument_read_roots: [
                "/usr",
                "/bin",
                "/sbin",
                "/lib",
                "/lib64",
                "/opt",
                "/dev/null",
                "/dev/zero",
                "/dev/random",
                "/dev/urandom",
            ]
            .map(PathBuf::from)
            .to_vec(),
            limits: Limits::default(),
            private_tmp_parent: std::env::temp_dir(),
            drain_timeout: Duration::from_millis(500),
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
    /// the skill folder is protected (read-only) when it lies inside the workspace.
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
        }
        Ok(request)
    }

    fn argv(&self) -> Vec<String> {
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
}

impl RefusalKind {
    fn as_str(self) -> &'static str {
        match self {
            RefusalKind::PolicyForbidden => "policy_forbidden",
            RefusalKind::ApprovalUnavailable => "approval_unavailable",
            RefusalKind::ApprovalDenied => "approval_denied",
            RefusalKind::ApprovalTimedOut => "approval_timed_out",
            RefusalKind::PathOutsideWorkspace => "path_outside_workspace",
            RefusalKind::SandboxUnavailable => "sandbox_unavailable",
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

/// What [`Runtime::run`] returns: the command ran, or it was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecOutcome {
    /// The command ran (whatever its exit status).
    Ran(ExecResult),
    /// The command was not run.
    Refused(Refusal),
}

/// Runs commands under policy, approval, sandbox and audit.
#[derive(Debug, Clone)]
pub struct Runtime {
    config: RuntimeConfig,
    approver: Option<Arc<dyn Approver>>,
    audit: Option<Arc<dyn AuditSink>>,
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Runtime {
    /// A runtime with no approver (prompts are refused) and no audit sink.
    pub fn new(config: RuntimeConfig) -> Runtime {
        Runtime { config, approver: None, audit: None }
    }

    /// Sets the approval callback.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Runtime {
        self.approver = Some(approver);
        self
    }

    /// Sets where audit records go.
    pub fn with_audit(mut self, audit: Arc<dyn AuditSink>) -> Runtime {
        self.audit = Some(audit);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Runs `request`: policy, approval, path checks, sandboxed run, audit record.
    ///
    /// `Err` is reserved for failures of the runtime itself (helper missing, audit log not
    /// writable); a refused or failing command is an `Ok` outcome for the model to see.
    pub async fn run(&self, request: &ExecRequest) -> Result<ExecOutcome> {
        if request.program.is_empty() {
            return Err(Error::InvalidRequest("the program is empty".to_owned()));
        }
        if request.max_output_bytes < 2 {
            return Err(Error::InvalidRequest("max_output_bytes must be at least 2".to_owned()));
        }
        if request.workspace_roots.is_empty() {
            return Err(Error::InvalidRequest("no workspace root".to_owned()));
        }
        let mut record = AuditRecord {
            call_id: request.call_id.clone(),
            skill: request.skill.clone(),
            argv: request.argv(),
            cwd: request.cwd.clone(),
            decision: None,
            approver: None,
            outcome: String::new(),
            refusal: None,
            withheld_environment: Vec::new(),
            sandbox: None,
            approval_ms: 0,
            duration_ms: 0,
            exit_code: None,
            signal: None,
            timed_out: false,
            stdout_truncated: false,
            stderr_truncated: false,
            stdout_total_bytes: 0,
            stderr_total_bytes: 0,
            likely_denied: false,
        };
        let outcome = match self.decide_and_run(request, &mut record).await {
            Ok(outcome) => outcome,
            Err(error) => {
                // The runtime failed (helper missing, spawn error): audited all the same.
                record.outcome = "error".to_owned();
                record.refusal = Some(error.to_string());
                if let Some(audit) = &self.audit {
                    audit.record(&record)?;
                }
                return Err(error);
            }
        };
        match &outcome {
            ExecOutcome::Ran(result) => {
                record.outcome = "ran".to_owned();
                record.sandbox = Some(result.sandbox.clone());
                record.duration_ms = result.duration_ms;
                record.exit_code = result.exit_code;
                record.signal = result.signal;
                record.timed_out = result.timed_out;
                record.stdout_truncated = result.stdout_truncated;
                record.stderr_truncated = result.stderr_truncated;
                record.stdout_total_bytes = result.stdout_total_bytes;
                record.stderr_total_bytes = result.stderr_total_bytes;
                record.likely_denied = result.likely_denied;
            }
            ExecOutcome::Refused(refusal) => {
                record.outcome = refusal.kind.as_str().to_owned();
                record.refusal = Some(refusal.message.clone());
                record.sandbox = refusal.sandbox.clone();
            }
        }
        if let Some(audit) = &self.audit {
            audit.record(&record)?;
        }
        Ok(outcome)
    }

    async fn decide_and_run(
        &self,
        request: &ExecRequest,
        record: &mut AuditRecord,
    ) -> Result<ExecOutcome> {
        let argv = request.argv();
        let merged =
            merge_decisions(request.skill_rules.as_ref(), &self.config.policy.rules, &argv);
        record.decision = Some(merged.clone());
        if merged.decision == Decision::Forbidden {
            return Ok(refused(
                RefusalKind::PolicyForbidden,
                format!("policy forbids `{}` ({})", argv.join(" "), describe_rules(&merged)),
            ));
        }
        let roots = match canonical_roots(&request.workspace_roots) {
            Ok(roots) => roots,
            Err(violation) => return Ok(path_refusal(&violation)),
        };
        let cwd = match checked_cwd(&request.cwd, &roots) {
            Ok(cwd) => cwd,
            Err(violation) => return Ok(path_refusal(&violation)),
        };
        if let Err(violation) =
            check_arguments(&request.args, &cwd, &roots, &self.config.argument_read_roots)
        {
            return Ok(path_refusal(&violation));
        }
        let mode = self.config.policy.approval_mode;
        if needs_approval(mode, merged.decision, request.allow_network) {
            let started = Instant::now();
            let answer = self.ask_approver(request, &cwd, &merged).await;
            record.approval_ms = millis(started.elapsed());
            match answer {
                Ok(name) => record.approver = Some(name),
                Err(refusal) => {
                    record.approver = self.approver.as_ref().map(|approver| approver.name());
                    return Ok(ExecOutcome::Refused(refusal));
                }
            }
        } else if merged.decision == Decision::Prompt {
            return Ok(refused(
                RefusalKind::ApprovalUnavailable,
                format!("`{}` needs approval but the approval mode is `never`", argv.join(" ")),
            ));
        } else {
            record.approver = Some("policy".to_owned());
        }
        self.run_sandboxed(request, &roots, &cwd, record).await
    }

    async fn ask_approver(
        &self,
        request: &ExecRequest,
        cwd: &Path,
        merged: &MergedDecision,
    ) -> std::result::Result<String, Refusal> {
        let argv = request.argv();
        let Some(approver) = &self.approver else {
            return Err(Refusal {
                kind: RefusalKind::ApprovalUnavailable,
                message: format!("`{}` needs approval but no approver is set", argv.join(" ")),
                sandbox: None,
            });
        };
        let reason = match (merged.decision, request.allow_network) {
            (Decision::Prompt, _) => format!("policy says prompt ({})", describe_rules(merged)),
            (Decision::Allow | Decision::Forbidden, true) => {
                "the command asks for network access".to_owned()
            }
            (Decision::Allow | Decision::Forbidden, false) => {
                "the approval mode asks for every command".to_owned()
            }
        };
        let approval = ApprovalRequest {
            call_id: request.call_id.clone(),
            skill: request.skill.clone(),
            argv: argv.clone(),
            cwd: cwd.to_path_buf(),
            allow_network: request.allow_network,
            reason,
        };
        let timeout = self.config.policy.approval_timeout;
        match tokio::time::timeout(timeout, approver.approve(&approval)).await {
            Ok(ApprovalAnswer::Approved) => Ok(approver.name()),
            Ok(ApprovalAnswer::Denied { reason }) => Err(Refusal {
                kind: RefusalKind::ApprovalDenied,
                message: format!(
                    "{} denied `{}`{}",
                    approver.name(),
                    argv.join(" "),
                    reason.map(|reason| format!(": {reason}")).unwrap_or_default()
                ),
                sandbox: None,
            }),
            Err(_) => Err(Refusal {
                kind: RefusalKind::ApprovalTimedOut,
                message: format!(
                    "no approval for `{}` within {} ms",
                    argv.join(" "),
                    timeout.as_millis()
                ),
                sandbox: None,
            }),
        }
    }

    fn sandbox_user_for(&self, roots: &[PathBuf]) -> (u32, u32) {
        use std::os::unix::fs::MetadataExt;
        let owner = roots.first().and_then(|root| std::fs::metadata(root).ok());
        match owner {
            Some(metadata) if self.config.run_as_workspace_owner && metadata.uid() != 0 => {
                (metadata.uid(), metadata.gid())
            }
            Some(_) | None => self.config.sandbox_user,
        }
    }

    fn choose_backend(
        &self,
        request: &ExecRequest,
    ) -> std::result::Result<(Backend, Option<PathBuf>), String> {
        let bubblewrap = find_program(&self.config.bubblewrap_program);
        match (self.config.backend, request.protected_paths.is_empty(), bubblewrap) {
            (BackendChoice::Direct, true, _) => Ok((Backend::Direct, None)),
            (BackendChoice::Direct, false, _) => {
                Err("protected paths inside the workspace need the bubblewrap backend".to_owned())
            }
            (BackendChoice::Auto, true, _) => Ok((Backend::Direct, None)),
            (BackendChoice::Auto | BackendChoice::Bubblewrap, _, Some(bwrap)) => {
                Ok((Backend::Bubblewrap, Some(bwrap)))
            }
            (BackendChoice::Auto | BackendChoice::Bubblewrap, _, None) => Err(format!(
                "bubblewrap ({}) is not installed",
                self.config.bubblewrap_program.display()
            )),
        }
    }

    async fn run_sandboxed(
        &self,
        request: &ExecRequest,
        roots: &[PathBuf],
        cwd: &Path,
        record: &mut AuditRecord,
    ) -> Result<ExecOutcome> {
        let (backend, bubblewrap) = match self.choose_backend(request) {
            Ok(choice) => choice,
            Err(reason) => return Ok(refused(RefusalKind::SandboxUnavailable, reason)),
        };
        let limits = request.limits.unwrap_or(self.config.limits);
        let is_root = nix::unistd::geteuid().is_root();
        let run_as = is_root.then(|| self.sandbox_user_for(roots));
        // Unpredictable, so nobody can plant the private tmp or the cgroup before the run.
        let random = {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new().build_hasher().finish()
        };
        let run_name = format!(
            "{}-{}-{random:016x}",
            std::process::id(),
            RUN_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let private_tmp = self.config.private_tmp_parent.join(format!("tools-runtime-{run_name}"));
        create_private_tmp(&private_tmp, run_as)?;
        let mut resources = RunResources::new(private_tmp, &run_name, &limits);
        let outcome = self
            .supervise(
                request,
                roots,
                cwd,
                record,
                backend,
                bubblewrap,
                limits,
                run_as,
                &mut resources,
            )
            .await;
        resources.release().await;
        outcome
    }

    #[allow(clippy::too_many_arguments)]
    async fn supervise(
        &self,
        request: &ExecRequest,
        roots: &[PathBuf],
        cwd: &Path,
        record: &mut AuditRecord,
        backend: Backend,
        bubblewrap: Option<PathBuf>,
        limits: Limits,
        run_as: Option<(u32, u32)>,
        resources: &mut RunResources,
    ) -> Result<ExecOutcome> {
        let private_tmp = resources.private_tmp.clone();
        let mut report = SandboxReport::new(backend);
        report.set(Layer::ProcessGroup, LayerStatus::Active, None);
        let base_environment =
            request.base_environment.clone().unwrap_or_else(|| std::env::vars().collect());
        let (environment, withheld) =
            build_environment(&request.env, &base_environment, &private_tmp.display().to_string());
        report.set(
            Layer::CleanEnvironment,
            LayerStatus::Active,
            (!withheld.is_empty()).then(|| format!("withheld: {}", withheld.join(", "))),
        );
        record.withheld_environment = withheld;

        for (layer, reason) in &resources.cgroup_unavailable {
            report.set(*layer, LayerStatus::Unavailable, Some(reason.clone()));
        }
        let mut writable: Vec<PathBuf> = roots.to_vec();
        writable.push(private_tmp.clone());
        let mut plan = HelperPlan {
            stage: Stage::Everything,
            program: PathBuf::from(&request.program),
            args: request.args.clone(),
            cwd: cwd.to_path_buf(),
            parent_pid: i32::try_from(std::process::id()).unwrap_or(0),
            cgroup_pids_procs: resources.pids.as_ref().map(RunCgroup::procs_file),
            cgroup_memory_procs: resources.memory.as_ref().map(RunCgroup::procs_file),
            rlimits: limits.rlimits,
            run_as,
            deny_network: !request.allow_network,
            landlock: LandlockPlan {
                readable: self.config.readable_roots.clone(),
                writable: writable.clone(),
                deny_tcp: !request.allow_network,
            },
            require_filesystem_confinement: request.require_filesystem_confinement,
            bubblewrap_argv: Vec::new(),
            helper_program: self.config.helper.program.clone(),
        };
        if let Some(bwrap) = &bubblewrap {
            plan.stage = Stage::OutsideBubblewrap;
            let protected = protected_paths(&request.protected_paths, roots);
            for path in &protected.missing {
                report.notes.insert(
                    Layer::Bubblewrap,
                    format!("protected path {} does not exist", path.display()),
                );
            }
            plan.bubblewrap_argv =
                bubblewrap_argv(bwrap, &writable, &protected.existing, cwd, request.allow_network);
        }
        let plan_json = serde_json::to_string(&plan)?;

        let started = Instant::now();
        let mut command = tokio::process::Command::new(&self.config.helper.program);
        command
            .arg(HELPER_MODE_ARGUMENT)
            .arg(plan_json)
            .env_clear()
            .envs(&environment)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let spawned = command.spawn();
        let mut child = spawned
            .map_err(|source| Error::Spawn { path: self.config.helper.program.clone(), source })?;
        resources.group = child.id().and_then(|pid| i32::try_from(pid).ok()).map(Pid::from_raw);
        let stdout_buffer = Arc::new(Mutex::new(HeadTailBuffer::new(request.max_output_bytes)));
        let stderr_buffer = Arc::new(Mutex::new(HeadTailBuffer::new(request.max_output_bytes)));
        let helper_reports = Arc::new(Mutex::new(Vec::new()));
        let stdout_task = child
            .stdout
            .take()
            .map(|stdout| tokio::spawn(drain(stdout, Arc::clone(&stdout_buffer), None)));
        let stderr_task = child.stderr.take().map(|stderr| {
            tokio::spawn(drain(
                stderr,
                Arc::clone(&stderr_buffer),
                Some(Arc::clone(&helper_reports)),
            ))
        });

        let (status, timed_out) = match tokio::time::timeout(request.timeout, child.wait()).await {
            Ok(Ok(status)) => (status, false),
            Ok(Err(source)) => {
                return Err(Error::Supervise { program: request.program.clone(), source });
            }
            Err(_) => {
                resources.kill_everything();
                let status = child.wait().await.map_err(|source| Error::Supervise {
                    program: request.program.clone(),
                    source,
                })?;
                (status, true)
            }
        };
        // Whatever the command left running (background jobs, daemons) dies with the run.
        resources.kill_everything();
        let drain_deadline = tokio::time::Instant::now() + self.config.drain_timeout;
        for mut task in [stdout_task, stderr_task].into_iter().flatten() {
            if tokio::time::timeout_at(drain_deadline, &mut task).await.is_err() {
                // Something outside the group still holds the pipe: keep what was read.
                task.abort();
            }
        }
        let duration = started.elapsed();

        let helper_reports =
            helper_reports.lock().map(|reports| reports.clone()).unwrap_or_default();
        let mut refusal = None;
        for helper_report in &helper_reports {
            report.merge_from(&helper_report.report);
            if let Some(reason) = &helper_report.refused {
                refusal = Some(reason.clone());
            }
        }
        if helper_reports.is_empty() {
            report
                .notes
                .insert(Layer::ProcessGroup, "the sandbox helper sent no report".to_owned());
        }
        if backend == Backend::Bubblewrap
            && !helper_reports.iter().any(|line| line.report.is_active(Layer::Bubblewrap))
        {
            report.layers.insert(Layer::Bubblewrap, LayerStatus::Failed);
        }
        if let Some(reason) = refusal {
            return Ok(ExecOutcome::Refused(Refusal {
                kind: RefusalKind::SandboxUnavailable,
                message: format!("refusing to run `{}`: {reason}", request.argv().join(" ")),
                sandbox: Some(report),
            }));
        }
        let stdout = finish(&stdout_buffer);
        let stderr = finish(&stderr_buffer);
        let signal = status.signal();
        let likely_denied = likely_denied(status.code(), signal, &stderr.text);
        Ok(ExecOutcome::Ran(ExecResult {
            exit_code: status.code(),
            signal,
            timed_out,
            stdout_truncated: stdout.truncated,
            stderr_truncated: stderr.truncated,
            stdout_total_bytes: stdout.total_bytes,
            stdout_retained_bytes: stdout.retained_bytes,
            stderr_total_bytes: stderr.total_bytes,
            stderr_retained_bytes: stderr.retained_bytes,
            stdout: stdout.text,
            stderr: stderr.text,
            duration_ms: millis(duration),
            likely_denied,
            sandbox: report,
        }))
    }
}

fn refused(kind: RefusalKind, message: String) -> ExecOutcome {
    ExecOutcome::Refused(Refusal { kind, message, sandbox: None })
}

fn path_refusal(violation: &PathViolation) -> ExecOutcome {
    refused(RefusalKind::PathOutsideWorkspace, format!("{}: {}", violation.path, violation.reason))
}

fn describe_rules(merged: &MergedDecision) -> String {
    let describe = |name: &str, rule: &crate::policy::RuleMatch| match &rule.prefix {
        Some(prefix) => format!("{name} rule `{}` says {:?}", prefix.join(" "), rule.decision),
        None => format!("{name} default says {:?}", rule.decision),
    };
    let mut parts = vec![describe("user", &merged.user)];
    if let Some(skill) = &merged.skill {
        parts.insert(0, describe("skill", skill));
    }
    parts.join(", ").to_lowercase()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn finish(buffer: &Mutex<HeadTailBuffer>) -> CapturedText {
    match buffer.lock() {
        Ok(buffer) => buffer.finish(),
        Err(poisoned) => poisoned.into_inner().finish(),
    }
}

/// What one run holds on the host: its private tmp, its cgroups and its process group.
///
/// [`RunResources::release`] kills what is left and removes everything; if the run's future is
/// dropped midway (a caller's own timeout), `Drop` does the same without waiting.
#[derive(Debug)]
struct RunResources {
    private_tmp: PathBuf,
    pids: Option<RunCgroup>,
    memory: Option<RunCgroup>,
    cgroup_unavailable: Vec<(Layer, String)>,
    group: Option<Pid>,
    released: bool,
}

impl RunResources {
    fn new(private_tmp: PathBuf, run_name: &str, limits: &Limits) -> RunResources {
        let mut cgroup_unavailable = Vec::new();
        let pids = RunCgroup::create("pids", run_name, &[("pids.max", limits.pids.to_string())])
            .map_err(|reason| cgroup_unavailable.push((Layer::CgroupPids, reason)))
            .ok();
        let memory_limit = limits.memory_bytes.to_string();
        let memory = RunCgroup::create(
            "memory",
            run_name,
            &[("memory.limit_in_bytes", memory_limit.clone())],
        )
        .map_err(|reason| cgroup_unavailable.push((Layer::CgroupMemory, reason)))
        .ok();
        if let Some(memory) = &memory {
            // Swap counts too where the kernel accounts it; a missing file is fine.
            let _ =
                std::fs::write(memory.directory.join("memory.memsw.limit_in_bytes"), &memory_limit);
        }
        RunResources { private_tmp, pids, memory, cgroup_unavailable, group: None, released: false }
    }

    /// SIGKILL to the process group and to every member of the cgroups (which also catches
    /// processes that left the group with `setsid`).
    fn kill_everything(&self) {
        if let Some(group) = self.group {
            let _ = killpg(group, Signal::SIGKILL);
        }
        for cgroup in [&self.pids, &self.memory].into_iter().flatten() {
            cgroup.kill_all();
        }
    }

    async fn release(mut self) {
        self.kill_everything();
        for cgroup in [self.pids.take(), self.memory.take()].into_iter().flatten() {
            cgroup.kill_and_remove().await;
        }
        let _ = std::fs::remove_dir_all(&self.private_tmp);
        self.released = true;
    }
}

impl Drop for RunResources {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.kill_everything();
        for cgroup in [self.pids.take(), self.memory.take()].into_iter().flatten() {
            cgroup.remove_if_empty();
        }
        let _ = std::fs::remove_dir_all(&self.private_tmp);
    }
}

fn likely_denied(exit_code: Option<i32>, signal: Option<i32>, stderr: &str) -> bool {
    const DENIAL_SIGNALS: [i32; 3] = [nix::libc::SIGSYS, nix::libc::SIGXCPU, nix::libc::SIGXFSZ];
    const DENIAL_TEXT: [&str; 7] = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
        "Network is unreachable",
        "Address family not supported",
        "Resource temporarily unavailable",
        "Cannot allocate memory",
    ];
    if signal.is_some_and(|signal| DENIAL_SIGNALS.contains(&signal)) {
        return true;
    }
    exit_code.is_some_and(|code| code != 0) && DENIAL_TEXT.iter().any(|text| stderr.contains(text))
}

/// Reads a pipe into its buffer; on stderr, first peels off the helper's report lines.
async fn drain<R: tokio::io::AsyncRead + Unpin>(
    mut pipe: R,
    buffer: Arc<Mutex<HeadTailBuffer>>,
    reports: Option<Arc<Mutex<Vec<HelperReport>>>>,
) {
    let mut chunk = vec![0_u8; 64 * 1024];
    // Bytes seen while still at the start of the stream, where report lines may be.
    let mut pending: Option<Vec<u8>> = reports.as_ref().map(|_| Vec::new());
    loop {
        let read = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let mut bytes = &chunk[..read];
        let owned;
        if let (Some(prefix_bytes), Some(reports)) = (pending.as_mut(), reports.as_ref()) {
            prefix_bytes.extend_from_slice(bytes);
            match peel_report_lines(prefix_bytes, reports) {
                Peeled::NeedMore => continue,
                Peeled::Rest(rest) => {
                    owned = rest;
                    bytes = &owned;
                    pending = None;
                }
            }
        }
        if let Ok(mut buffer) = buffer.lock() {
            buffer.push(bytes);
        }
    }
    if let (Some(rest), Ok(mut buffer)) = (pending, buffer.lock()) {
        buffer.push(&rest);
    }
}

enum Peeled {
    NeedMore,
    Rest(Vec<u8>),
}

fn peel_report_lines(bytes: &mut Vec<u8>, reports: &Mutex<Vec<HelperReport>>) -> Peeled {
    loop {
        let compared = bytes.len().min(REPORT_LINE_PREFIX.len());
        if bytes[..compared] != REPORT_LINE_PREFIX[..compared] {
            return Peeled::Rest(std::mem::take(bytes));
        }
        if bytes.len() < REPORT_LINE_PREFIX.len() {
            return Peeled::NeedMore;
        }
        let Some(newline) = bytes.iter().position(|byte| *byte == b'\n') else {
            return Peeled::NeedMore;
        };
        let line = &bytes[REPORT_LINE_PREFIX.len()..newline];
        if let (Ok(report), Ok(mut reports)) =
            (serde_json::from_slice::<HelperReport>(line), reports.lock())
        {
            reports.push(report);
        }
        bytes.drain(..=newline);
        if bytes.is_empty() {
            return Peeled::NeedMore;
        }
    }
}

fn create_private_tmp(path: &Path, run_as: Option<(u32, u32)>) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, chown};
    let error = |source| Error::PrivateTmp { path: path.to_path_buf(), source };
    std::fs::DirBuilder::new().mode(0o700).create(path).map_err(error)?;
    if let Some((uid, gid)) = run_as {
        chown(path, Some(uid), Some(gid)).map_err(error)?;
    }
    Ok(())
}

fn find_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(program))
        .find(|candidate| candidate.is_file())
}

struct ProtectedPaths {
    existing: Vec<PathBuf>,
    missing: Vec<PathBuf>,
}

fn protected_paths(paths: &[PathBuf], roots: &[PathBuf]) -> ProtectedPaths {
    let mut protected = ProtectedPaths { existing: Vec::new(), missing: Vec::new() };
    for path in paths {
        let joined = match roots.first() {
            Some(root) if path.is_relative() => root.join(path),
            Some(_) | None => path.clone(),
        };
        match joined.canonicalize() {
            Ok(canonical) => protected.existing.push(canonical),
            Err(_) => protected.missing.push(joined),
        }
    }
    protected
}

fn bubblewrap_argv(
    bwrap: &Path,
    writable: &[PathBuf],
    protected: &[PathBuf],
    cwd: &Path,
    allow_network: bool,
) -> Vec<String> {
    let mut argv: Vec<String> = [
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-pid",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    .iter()
    .map(|argument| (*argument).to_owned())
    .collect();
    argv.insert(0, bwrap.display().to_string());
    if !allow_network {
        argv.push("--unshare-net".to_owned());
    }
    for path in writable {
        let path = path.display().to_string();
        argv.extend(["--bind".to_owned(), path.clone(), path]);
    }
    for path in protected {
        let path = path.display().to_string();
        argv.extend(["--ro-bind".to_owned(), path.clone(), path]);
    }
    argv.extend(["--chdir".to_owned(), cwd.display().to_string()]);
    argv
}
