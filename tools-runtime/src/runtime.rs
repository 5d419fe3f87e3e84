//! The runtime: policy and approval, path checks, then the sandboxed run with timeout, capture
//! and audit.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::audit::{AuditRecord, AuditSink};
use crate::environment::{EnvPolicy, build_environment};
use crate::error::{Error, Result};
use crate::exec::{ExecOutcome, ExecRequest, ExecResult, Limits, Refusal, RefusalKind};
use crate::output::{CapturedText, HeadTailBuffer};
use crate::paths::{PathViolation, canonical_roots, check_arguments, checked_cwd};
use crate::policy::{
    ApprovalAnswer, ApprovalRequest, Approver, Decision, MergedDecision, UserPolicy,
    merge_decisions, needs_approval,
};
use crate::read_set::WorldReadableCache;
use crate::report::{Backend, Layer, LayerStatus, SandboxReport};
use crate::root_mode::narrowed_readable_roots;
use crate::spec::{
    HELPER_MODE_ARGUMENT, HelperPlan, HelperReport, LandlockPlan, RefusalCause, Stage,
};
use crate::supervise::{
    ReportCollector, RunResources, bubblewrap_argv, create_private_tmp, drain, find_program,
    likely_denied, protected_paths,
};

/// The default `sandbox_user` (`nobody:nogroup`): who commands run as when the runtime runs as
/// root and `run_as_workspace_owner` is off.
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
    /// uid/gid for commands when the runtime runs as root and `run_as_workspace_owner` is off.
    /// The workspace must be writable by this user.
    pub sandbox_user: (u32, u32),
    /// When running as root, run the command as the owner of the first workspace root: a
    /// non-root owner as that user; root itself as uid 0 with no capabilities, locked
    /// securebits, a read-only host, an IPC namespace, narrowed reads (`uid0_readable_roots`)
    /// and the uid-0 seccomp rules (see the crate docs). Off: always `sandbox_user`.
    pub run_as_workspace_owner: bool,
    /// Hierarchies the command may read and execute (Landlock) when it runs as an unprivileged
    /// user.
    pub readable_roots: Vec<PathBuf>,
    /// Hierarchies a uid-0 command may read and execute besides its workspace, private tmp and
    /// the request's `read_only_paths`; the directories of its `PATH` are added unless they
    /// are (under) `/root`, `/home`, `/etc`, `/var`, `/run`, `/tmp` and the like.
    pub uid0_readable_roots: Vec<PathBuf>,
    /// Hierarchies of which a uid-0 command may read only what any user may read (`/etc`
    /// without `shadow`, `gshadow`, `ssl/private`, ...): walked once per process and walked
    /// again after any change that could widen or narrow it (inotify on every entry, and the
    /// mount table).
    pub uid0_world_readable_roots: Vec<PathBuf>,
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
            uid0_readable_roots: [
                "/usr",
                "/bin",
                "/sbin",
                "/lib",
                "/lib32",
                "/lib64",
                "/libx32",
                "/proc",
                "/sys/devices/system/cpu",
                "/dev/null",
                "/dev/zero",
                "/dev/full",
                "/dev/random",
                "/dev/urandom",
            ]
            .map(PathBuf::from)
            .to_vec(),
            uid0_world_readable_roots: vec![PathBuf::from("/etc")],
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

/// Runs commands under policy, approval, sandbox and audit.
#[derive(Debug, Clone)]
pub struct Runtime {
    config: RuntimeConfig,
    approver: Option<Arc<dyn Approver>>,
    pub(crate) audit: Option<Arc<dyn AuditSink>>,
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
    ///
    /// A caller that drops the future midway (its own timeout) still gets an audit record,
    /// with the outcome `abandoned`; the command and everything it started are killed.
    pub async fn run(&self, request: &ExecRequest) -> Result<ExecOutcome> {
        let record = AuditRecord::new(
            request.call_id.clone(),
            request.skill.clone(),
            request.argv(),
            request.cwd.clone(),
        );
        let mut pending = AuditOnDrop { audit: self.audit.as_ref(), record, finished: false };
        let outcome = match validate(request) {
            Ok(()) => self.decide_and_run(request, &mut pending.record).await,
            Err(error) => Err(error),
        };
        // From here on the record is written below, not by the guard.
        pending.finished = true;
        let record = &mut pending.record;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => {
                // An invalid request or a failure of the runtime (helper missing, spawn error):
                // audited all the same.
                record.outcome = "error".to_owned();
                record.refusal = Some(error.to_string());
                if let Some(audit) = &self.audit {
                    audit.record(record)?;
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
            audit.record(record)?;
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
        let mut argument_read_roots = self.config.argument_read_roots.clone();
        argument_read_roots.extend(request.read_only_paths.iter().cloned());
        if let Err(violation) = check_arguments(&request.args, &cwd, &roots, &argument_read_roots) {
            return Ok(path_refusal(&violation));
        }
        let reason = match (merged.decision, request.allow_network) {
            (Decision::Prompt, _) => format!("policy says prompt ({})", describe_rules(&merged)),
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
            argv,
            cwd: cwd.clone(),
            allow_network: request.allow_network,
            reason,
        };
        let gate = self.approval_gate(merged.decision, &approval).await;
        record.approval_ms = gate.approval_ms;
        record.approver = gate.approver;
        if let Err(refusal) = gate.verdict {
            return Ok(ExecOutcome::Refused(refusal));
        }
        self.run_sandboxed(request, &roots, &cwd, record).await
    }

    /// The approval step of `run` and `authorize`: `forbidden` is refused, the approval mode
    /// says whether the approver is asked (a `prompt` under `never` is refused), the approver
    /// has `approval_timeout` to answer.
    pub(crate) async fn approval_gate(
        &self,
        decision: Decision,
        approval: &ApprovalRequest,
    ) -> ApprovalVerdict {
        let action = approval.argv.join(" ");
        let refusal = |kind: RefusalKind, message: String| ApprovalVerdict {
            verdict: Err(Refusal { kind, message, sandbox: None }),
            approver: None,
            approval_ms: 0,
        };
        if decision == Decision::Forbidden {
            return refusal(RefusalKind::PolicyForbidden, format!("policy forbids `{action}`"));
        }
        let mode = self.config.policy.approval_mode;
        if !needs_approval(mode, decision, approval.allow_network) {
            return match decision {
                Decision::Prompt => refusal(
                    RefusalKind::ApprovalUnavailable,
                    format!("`{action}` needs approval but the approval mode is `never`"),
                ),
                Decision::Allow | Decision::Forbidden => ApprovalVerdict {
                    verdict: Ok(()),
                    approver: Some("policy".to_owned()),
                    approval_ms: 0,
                },
            };
        }
        let Some(approver) = &self.approver else {
            return refusal(
                RefusalKind::ApprovalUnavailable,
                format!("`{action}` needs approval but no approver is set"),
            );
        };
        let started = Instant::now();
        let timeout = self.config.policy.approval_timeout;
        let verdict = match tokio::time::timeout(timeout, approver.approve(approval)).await {
            Ok(ApprovalAnswer::Approved) => Ok(()),
            Ok(ApprovalAnswer::Denied { reason }) => Err(Refusal {
                kind: RefusalKind::ApprovalDenied,
                message: format!(
                    "{} denied `{action}`{}",
                    approver.name(),
                    reason.map(|reason| format!(": {reason}")).unwrap_or_default()
                ),
                sandbox: None,
            }),
            Err(_) => Err(Refusal {
                kind: RefusalKind::ApprovalTimedOut,
                message: format!("no approval for `{action}` within {} ms", timeout.as_millis()),
                sandbox: None,
            }),
        };
        ApprovalVerdict {
            verdict,
            approver: Some(approver.name()),
            approval_ms: millis(started.elapsed()),
        }
    }

    /// Who the command runs as when the runtime is root: the workspace owner (uid 0 without
    /// capabilities when that is root, the `bool`) or `sandbox_user`.
    fn sandbox_user_for(&self, roots: &[PathBuf]) -> ((u32, u32), bool) {
        use std::os::unix::fs::MetadataExt;
        let owner = roots.first().and_then(|root| std::fs::metadata(root).ok());
        match owner {
            Some(metadata) if self.config.run_as_workspace_owner && metadata.uid() == 0 => {
                ((0, 0), true)
            }
            Some(metadata) if self.config.run_as_workspace_owner => {
                ((metadata.uid(), metadata.gid()), false)
            }
            Some(_) | None => (self.config.sandbox_user, false),
        }
    }

    fn choose_backend(
        &self,
        has_protected_paths: bool,
        root_without_capabilities: bool,
    ) -> std::result::Result<(Backend, Option<PathBuf>), String> {
        if root_without_capabilities {
            // The helper is root until the drop and binds protected paths read-only itself.
            return Ok((Backend::Direct, None));
        }
        let bubblewrap = find_program(&self.config.bubblewrap_program);
        match (self.config.backend, has_protected_paths, bubblewrap) {
            (BackendChoice::Direct, false, _) => Ok((Backend::Direct, None)),
            (BackendChoice::Direct, true, _) => {
                Err("protected paths inside the workspace need the bubblewrap backend".to_owned())
            }
            (BackendChoice::Auto, false, _) => Ok((Backend::Direct, None)),
            (BackendChoice::Auto | BackendChoice::Bubblewrap, _, Some(bwrap)) => {
                Ok((Backend::Bubblewrap, Some(bwrap)))
            }
            (BackendChoice::Auto | BackendChoice::Bubblewrap, _, None) => Err(format!(
                "bubblewrap ({}) is not installed",
                self.config.bubblewrap_program.display()
            )),
        }
    }

    /// Holds the host resources of one launch (private tmp, cgroups) and builds the helper's
    /// plan: who the command runs as, which backend, its environment, what it may read and
    /// write. `Ok(Err(refusal))` when no backend can serve the launch.
    pub(crate) fn prepare_launch(
        &self,
        launch: &Launch<'_>,
    ) -> Result<std::result::Result<PreparedLaunch, Refusal>> {
        let is_root = nix::unistd::geteuid().is_root();
        let (run_as, root_without_capabilities) = match is_root {
            true => {
                let (user, root_mode) = self.sandbox_user_for(launch.roots);
                (Some(user), root_mode)
            }
            false => (None, false),
        };
        let (backend, bubblewrap) = match self
            .choose_backend(!launch.protected_paths.is_empty(), root_without_capabilities)
        {
            Ok(choice) => choice,
            Err(message) => {
                return Ok(Err(Refusal {
                    kind: RefusalKind::SandboxUnavailable,
                    message,
                    sandbox: None,
                }));
            }
        };
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
        let resources = RunResources::new(private_tmp.clone(), &run_name, &launch.limits);
        let private_tmp_text = private_tmp.display().to_string();

        let mut report = SandboxReport::new(backend);
        report.set(Layer::ProcessGroup, LayerStatus::Active, None);
        let own_environment: Vec<(String, String)>;
        let base_environment = match launch.base_environment {
            Some(base) => base,
            None => {
                own_environment = std::env::vars().collect();
                &own_environment
            }
        };
        let (environment, withheld) =
            build_environment(launch.env, base_environment, &private_tmp_text);
        report.set(
            Layer::CleanEnvironment,
            LayerStatus::Active,
            (!withheld.is_empty()).then(|| format!("withheld: {}", withheld.join(", "))),
        );
        for (layer, reason) in &resources.cgroup_unavailable {
            report.set(*layer, LayerStatus::Unavailable, Some(reason.clone()));
        }
        let mut writable: Vec<PathBuf> = launch.roots.to_vec();
        writable.push(private_tmp);
        let (readable, read_only_binds) = if root_without_capabilities {
            let protected = protected_paths(launch.protected_paths, launch.roots);
            if !protected.notes.is_empty() {
                report.notes.insert(Layer::ReadOnlyMounts, protected.notes.join("; "));
            }
            let mut readable = narrowed_readable_roots(
                &self.config.uid0_readable_roots,
                environment.get("PATH").map(String::as_str),
                launch.program,
                launch.read_only_paths,
            );
            readable
                .extend(WorldReadableCache::global().rules(&self.config.uid0_world_readable_roots));
            (readable, protected.existing)
        } else {
            (self.config.readable_roots.clone(), Vec::new())
        };
        let mut plan = HelperPlan {
            stage: Stage::Everything,
            program: PathBuf::from(launch.program),
            args: launch.args.to_vec(),
            environment,
            cwd: launch.cwd.to_path_buf(),
            parent_pid: i32::try_from(std::process::id()).unwrap_or(0),
            cgroup_pids: resources.pids.clone(),
            cgroup_memory: resources.memory.clone(),
            cgroup_unavailable: resources.cgroup_unavailable.iter().cloned().collect(),
            rlimits: launch.limits.rlimits,
            run_as,
            root_without_capabilities,
            read_only_binds,
            deny_network: !launch.allow_network,
            landlock: LandlockPlan {
                readable,
                writable: writable.clone(),
                deny_tcp: !launch.allow_network,
            },
            require_filesystem_confinement: launch.require_filesystem_confinement,
            check_program: false,
            bubblewrap_argv: Vec::new(),
            helper_program: self.config.helper.program.clone(),
            pid_namespace_init: None,
        };
        if let Some(bwrap) = &bubblewrap {
            plan.stage = Stage::OutsideBubblewrap;
            let protected = protected_paths(launch.protected_paths, launch.roots);
            if !protected.notes.is_empty() {
                report.notes.insert(Layer::Bubblewrap, protected.notes.join("; "));
            }
            plan.bubblewrap_argv = bubblewrap_argv(
                bwrap,
                &writable,
                &protected.existing,
                launch.cwd,
                launch.allow_network,
            );
        }
        Ok(Ok(PreparedLaunch { resources, backend, report, plan, withheld_environment: withheld }))
    }

    /// Starts the helper with `prepared`'s plan in its own process group, stdout and stderr
    /// piped; the group is recorded in the resources so it dies with them.
    ///
    /// The fork happens on the spawner thread ([`spawn_on_lasting_thread`]), so the helper's
    /// parent-death signal fires when this process dies, not when the calling thread ends.
    pub(crate) async fn spawn_helper(
        &self,
        prepared: &mut PreparedLaunch,
        stdin: Stdio,
    ) -> Result<tokio::process::Child> {
        let plan_json = serde_json::to_string(&prepared.plan)?;
        let mut command = tokio::process::Command::new(&self.config.helper.program);
        command
            .arg(HELPER_MODE_ARGUMENT)
            .arg(plan_json)
            .env_clear()
            .current_dir(&prepared.plan.cwd)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = spawn_on_lasting_thread(command)
            .await
            .map_err(|source| Error::Spawn { path: self.config.helper.program.clone(), source })?;
        prepared.resources.group =
            child.id().and_then(|pid| i32::try_from(pid).ok()).map(Pid::from_raw);
        Ok(child)
    }

    async fn run_sandboxed(
        &self,
        request: &ExecRequest,
        roots: &[PathBuf],
        cwd: &Path,
        record: &mut AuditRecord,
    ) -> Result<ExecOutcome> {
        let launch = Launch {
            program: &request.program,
            args: &request.args,
            roots,
            cwd,
            protected_paths: &request.protected_paths,
            read_only_paths: &request.read_only_paths,
            env: &request.env,
            base_environment: request.base_environment.as_deref(),
            allow_network: request.allow_network,
            limits: request.limits.unwrap_or(self.config.limits),
            require_filesystem_confinement: request.require_filesystem_confinement,
        };
        let mut prepared = match self.prepare_launch(&launch)? {
            Ok(prepared) => prepared,
            Err(refusal) => return Ok(ExecOutcome::Refused(refusal)),
        };
        record.withheld_environment = prepared.withheld_environment.clone();
        let outcome = self.supervise(request, &mut prepared).await;
        prepared.resources.release().await;
        outcome
    }

    async fn supervise(
        &self,
        request: &ExecRequest,
        prepared: &mut PreparedLaunch,
    ) -> Result<ExecOutcome> {
        let started = Instant::now();
        let mut child = self.spawn_helper(prepared, Stdio::null()).await?;
        let resources = &prepared.resources;
        let stdout_buffer = Arc::new(Mutex::new(HeadTailBuffer::new(request.max_output_bytes)));
        let stderr_buffer = Arc::new(Mutex::new(HeadTailBuffer::new(request.max_output_bytes)));
        let collector = ReportCollector::new(prepared.backend);
        let helper_reports = Arc::clone(&collector.reports);
        let stdout_task = child
            .stdout
            .take()
            .map(|stdout| tokio::spawn(drain(stdout, Arc::clone(&stdout_buffer), None)));
        let stderr_task = child
            .stderr
            .take()
            .map(|stderr| tokio::spawn(drain(stderr, Arc::clone(&stderr_buffer), Some(collector))));

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

        let mut report = prepared.report.clone();
        let helper_reports = ReportCollector::reports(&helper_reports);
        if let Some((reason, cause)) =
            conclude_helper_reports(&mut report, prepared.backend, &helper_reports)
        {
            return Ok(ExecOutcome::Refused(Refusal {
                kind: refusal_kind(cause),
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

/// A command to spawn on the spawner thread, the runtime its pipes belong to, and where the
/// child goes.
type SpawnJob = (
    tokio::process::Command,
    tokio::runtime::Handle,
    tokio::sync::oneshot::Sender<std::io::Result<tokio::process::Child>>,
);

/// The spawner thread's queue; `None` when the thread could not be started.
static SPAWNER: std::sync::OnceLock<Option<std::sync::mpsc::Sender<SpawnJob>>> =
    std::sync::OnceLock::new();

/// Spawns `command` on one thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child ends. A tokio worker lives
/// as long as its runtime, but a future can be polled anywhere: in `Handle::block_on` on a
/// short-lived thread, on a `spawn_blocking` thread that the pool reaps after 10 s idle, or a
/// worker that `block_in_place` handed over to the pool. A service started there would be
/// SIGKILLed when that thread goes. Forking on a thread that never ends ties the signal to
/// the process instead. If that thread cannot be created, the calling thread spawns.
async fn spawn_on_lasting_thread(
    mut command: tokio::process::Command,
) -> std::io::Result<tokio::process::Child> {
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("tools-runtime-spawner".to_owned())
            .spawn(move || {
                for (mut command, runtime, reply) in receiver {
                    // The child's pipes and its reaping belong to the caller's runtime. A runtime
                    // shutting down makes tokio panic here: that caller gets an error, and the
                    // thread lives on for the others.
                    let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let _entered = runtime.enter();
                        command.spawn()
                    }))
                    .unwrap_or_else(|_| {
                        Err(std::io::Error::other("the caller's tokio runtime is shutting down"))
                    });
                    // A caller that went away drops the child, which kills it (kill_on_drop).
                    let _ = reply.send(spawned);
                }
            })
            .ok()
            .map(|_| sender)
    });
    let Some(spawner) = spawner else { return command.spawn() };
    let (reply, child) = tokio::sync::oneshot::channel();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return command.spawn() };
    if let Err(std::sync::mpsc::SendError((mut command, _, _))) =
        spawner.send((command, runtime, reply))
    {
        return command.spawn();
    }
    child
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the tools-runtime spawner thread stopped")))
}

/// What the approval step decided, and who decided it (`"policy"` when nobody was asked).
#[derive(Debug)]
pub(crate) struct ApprovalVerdict {
    pub(crate) verdict: std::result::Result<(), Refusal>,
    pub(crate) approver: Option<String>,
    pub(crate) approval_ms: u64,
}

/// What starting a command through the helper needs; shared by `run` and `spawn_service`.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    pub(crate) program: &'a str,
    pub(crate) args: &'a [String],
    /// Canonical workspace roots.
    pub(crate) roots: &'a [PathBuf],
    /// Canonical working directory inside them.
    pub(crate) cwd: &'a Path,
    pub(crate) protected_paths: &'a [PathBuf],
    pub(crate) read_only_paths: &'a [PathBuf],
    pub(crate) env: &'a EnvPolicy,
    pub(crate) base_environment: Option<&'a [(String, String)]>,
    pub(crate) allow_network: bool,
    pub(crate) limits: Limits,
    pub(crate) require_filesystem_confinement: bool,
}

/// A launch whose host resources are held and whose helper plan is built, not yet spawned.
#[derive(Debug)]
pub(crate) struct PreparedLaunch {
    pub(crate) resources: RunResources,
    pub(crate) backend: Backend,
    /// The runtime's side of the report (process group, environment, cgroups).
    pub(crate) report: SandboxReport,
    pub(crate) plan: HelperPlan,
    pub(crate) withheld_environment: Vec<String>,
}

/// Merges the helper's report lines into `report` and returns its refusal, if it refused.
pub(crate) fn conclude_helper_reports(
    report: &mut SandboxReport,
    backend: Backend,
    helper_reports: &[HelperReport],
) -> Option<(String, RefusalCause)> {
    let mut refusal = None;
    for helper_report in helper_reports {
        report.merge_from(&helper_report.report);
        if let Some(reason) = &helper_report.refused {
            refusal = Some((reason.clone(), helper_report.cause));
        }
    }
    if helper_reports.is_empty() {
        report.notes.insert(Layer::ProcessGroup, "the sandbox helper sent no report".to_owned());
    }
    if backend == Backend::Bubblewrap
        && !helper_reports.iter().any(|line| line.report.is_active(Layer::Bubblewrap))
    {
        report.layers.insert(Layer::Bubblewrap, LayerStatus::Failed);
    }
    refusal
}

pub(crate) fn refusal_kind(cause: RefusalCause) -> RefusalKind {
    match cause {
        RefusalCause::Sandbox => RefusalKind::SandboxUnavailable,
        RefusalCause::WorkingDirectory => RefusalKind::WorkspaceInaccessible,
        // Only services ask for the program check, and they report it as a start error; a
        // program out of the sandbox's reach is a confinement matter for anyone else.
        RefusalCause::Program => RefusalKind::SandboxUnavailable,
    }
}

/// Writes the audit record of a run whose future was dropped before it finished.
pub(crate) struct AuditOnDrop<'a> {
    pub(crate) audit: Option<&'a Arc<dyn AuditSink>>,
    pub(crate) record: AuditRecord,
    pub(crate) finished: bool,
}

impl Drop for AuditOnDrop<'_> {
    fn drop(&mut self) {
        if let (Some(audit), false) = (self.audit, self.finished) {
            self.record.outcome = "abandoned".to_owned();
            self.record.refusal = Some("the caller dropped the run before it finished".to_owned());
            // Nobody is left to report a failed write to.
            let _ = audit.record(&self.record);
        }
    }
}

fn validate(request: &ExecRequest) -> Result<()> {
    if request.program.is_empty() {
        return Err(Error::InvalidRequest("the program is empty".to_owned()));
    }
    if request.max_output_bytes < 2 {
        return Err(Error::InvalidRequest("max_output_bytes must be at least 2".to_owned()));
    }
    if request.workspace_roots.is_empty() {
        return Err(Error::InvalidRequest("no workspace root".to_owned()));
    }
    Ok(())
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
