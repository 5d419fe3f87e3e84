//! Long-running confined processes (an MCP stdio server) and approval for non-script actions.
//!
//! A service starts like a command of [`Runtime::run`]: the same helper, the same layers, its
//! own process group and per-run cgroups. What differs is supervision: stdin and stdout stay
//! open for the caller (JSON-RPC goes over them), stderr is drained in the background into a
//! bounded tail, and there is no wall-clock timeout: the service runs until
//! [`Service::shutdown`] or until the [`Service`] is dropped, which kill the process group and
//! every member of its cgroups and remove its private tmp.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::task::JoinHandle;

use crate::audit::{AuditRecord, AuditSink};
use crate::environment::EnvPolicy;
use crate::error::{Error, Result};
use crate::exec::{Limits, Refusal, RefusalKind};
use crate::output::TailBuffer;
use crate::paths::{canonical_roots, checked_cwd};
use crate::policy::{ApprovalRequest, Decision, MergedDecision, RuleMatch};
use crate::report::SandboxReport;
use crate::runtime::{AuditOnDrop, Launch, Runtime, conclude_helper_reports, refusal_kind};
use crate::spec::{HelperPlan, RefusalCause};
use crate::supervise::{ReportCollector, RunResources, drain};

/// Bytes of a service's stderr kept (the most recent ones).
const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// How long a service's start waits for the helper's report lines. The helper writes them
/// right after applying its layers (milliseconds; the uid-0 walk of `/etc` is the slowest part).
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);

/// CPU seconds (`RLIMIT_CPU`) of a service whose request sets no limits: it lives for a whole
/// session, so the per-command default (60 s) would kill it sooner or later.
pub const SERVICE_CPU_SECONDS: u64 = 24 * 60 * 60;

/// A long-running confined process whose stdin/stdout stay open (an MCP stdio server).
#[derive(Debug, Clone)]
pub struct ServiceRequest {
    /// For reports and audit records (the records' `call_id`), e.g. `"mcp server everything"`.
    pub name: String,
    /// The program: a path, or a name looked up in the service's `PATH`.
    pub program: String,
    /// Its arguments (not checked against the workspace: a service is told what to serve, the
    /// sandbox decides what it can reach).
    pub args: Vec<String>,
    /// Working directory; relative paths are taken from the first workspace root.
    pub cwd: PathBuf,
    /// The only writable places besides a private tmp.
    pub workspace_roots: Vec<PathBuf>,
    /// Extra readable hierarchies (the server's install directory, node's prefix). Needed when
    /// the service runs as uid 0 (a root-owned workspace), whose reads are narrowed to system
    /// directories, the workspace and these.
    pub read_only_paths: Vec<PathBuf>,
    /// The environment policy (same as [`ExecRequest::env`](crate::ExecRequest::env)).
    pub env: EnvPolicy,
    /// The environment `env.inherit` copies from (`None`: the runtime's own).
    pub base_environment: Option<Vec<(String, String)>>,
    /// Whether the service may use the network.
    pub allow_network: bool,
    /// Limits (`None`: the runtime's, with `cpu_seconds` raised to [`SERVICE_CPU_SECONDS`]).
    pub limits: Option<Limits>,
    /// Refuse to start unless Landlock or bubblewrap confines the filesystem.
    pub require_filesystem_confinement: bool,
}

impl ServiceRequest {
    /// A request with defaults like [`ExecRequest::new`](crate::ExecRequest::new): cwd = the
    /// workspace, no network, the runtime's limits (CPU raised for a long life), filesystem
    /// confinement required.
    pub fn new(
        name: impl Into<String>,
        program: impl Into<String>,
        args: Vec<String>,
        workspace: impl Into<PathBuf>,
    ) -> ServiceRequest {
        let workspace = workspace.into();
        ServiceRequest {
            name: name.into(),
            program: program.into(),
            args,
            cwd: workspace.clone(),
            workspace_roots: vec![workspace],
            read_only_paths: Vec::new(),
            env: EnvPolicy::default(),
            base_environment: None,
            allow_network: false,
            limits: None,
            require_filesystem_confinement: true,
        }
    }

    /// The command line, program first.
    pub fn argv(&self) -> Vec<String> {
        std::iter::once(self.program.clone()).chain(self.args.iter().cloned()).collect()
    }
}

/// A running confined service: its pipes, the tail of its stderr, and the layers that confine
/// it. Dropping it kills everything it started, like [`Service::shutdown`] without waiting.
#[derive(Debug)]
pub struct Service {
    /// Which layers confine the service, read from the helper before the pipes were handed out.
    pub report: SandboxReport,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Arc<Mutex<TailBuffer>>,
    stderr_task: Option<JoinHandle<()>>,
    /// `None` once stopped.
    resources: Option<RunResources>,
    audit: Option<Arc<dyn AuditSink>>,
    record: AuditRecord,
    started: Instant,
    drain_timeout: Duration,
}

impl Service {
    /// The service's stdin (the requests); `None` once taken.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The service's stdout (the responses); `None` once taken.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The last few KiB of its stderr (drained in the background, so a chatty service never
    /// blocks on a full pipe), with a marker when earlier bytes were dropped.
    pub fn stderr_tail(&self) -> String {
        match self.stderr.lock() {
            Ok(buffer) => buffer.text(),
            Err(poisoned) => poisoned.into_inner().text(),
        }
    }

    /// The service's pid (also its process group), while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// How the service ended, or `None` while it runs. What it started may still run; it is
    /// killed at [`Service::shutdown`] or drop.
    pub async fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process group and every member of the service's cgroups (grandchildren that
    /// left the group included), waits for the service, removes its cgroups and private tmp,
    /// and writes the `service_stopped` audit record.
    pub async fn shutdown(mut self) {
        self.stdin = None;
        self.stdout = None;
        let Some((resources, exited_before)) = self.kill_everything() else { return };
        let status = self.child.wait().await.ok();
        resources.release().await;
        if let Some(mut task) = self.stderr_task.take()
            && tokio::time::timeout(self.drain_timeout, &mut task).await.is_err()
        {
            task.abort();
        }
        self.write_stop_record(exited_before.or(status));
    }

    /// Closes the service's stdin (if it was not taken; a caller that took it closes it by
    /// dropping it first), gives the service up to `grace` to exit by itself, as the MCP stdio
    /// transport asks, then [`Service::shutdown`]s what is left.
    pub async fn shutdown_after(mut self, grace: Duration) {
        self.stdin = None;
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        self.shutdown().await;
    }

    /// Takes the run's resources (`None` once stopped) and kills the group, every cgroup member
    /// and the service itself; returns the resources and how the service had ended by itself,
    /// if it had (then its group id is no longer trusted, see `leader_reaped`).
    fn kill_everything(&mut self) -> Option<(RunResources, Option<ExitStatus>)> {
        let mut resources = self.resources.take()?;
        let exited_before = self.child.try_wait().ok().flatten();
        if exited_before.is_some() {
            resources.leader_reaped();
        }
        resources.kill_everything();
        let _ = self.child.start_kill();
        Some((resources, exited_before))
    }

    fn write_stop_record(&mut self, status: Option<ExitStatus>) {
        use std::os::unix::process::ExitStatusExt;
        let Some(audit) = &self.audit else { return };
        let mut record = self.record.clone();
        record.outcome = "service_stopped".to_owned();
        record.duration_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        record.exit_code = status.and_then(|status| status.code());
        record.signal = status.and_then(|status| status.signal());
        if let Ok(buffer) = self.stderr.lock() {
            record.stderr_total_bytes = buffer.total_bytes();
        }
        // Shutdown and drop have nobody to report a failed write to.
        let _ = audit.record(&record);
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let Some((resources, exited_before)) = self.kill_everything() else { return };
        if let Some(task) = self.stderr_task.take() {
            task.abort();
        }
        self.write_stop_record(exited_before);
        // The killed processes take a moment to leave their cgroups; only then can the cgroups
        // be removed. On a tokio runtime that waiting happens in a task; without one, whatever
        // is empty already is removed now.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(resources.release());
            }
            Err(_) => drop(resources),
        }
    }
}

impl Runtime {
    /// Starts a service through the sandbox helper, with the same layers as
    /// [`Runtime::run`]: clean environment, cgroups, rlimits, Landlock or bubblewrap, seccomp,
    /// no network unless allowed, its own process group; as root it runs as the workspace
    /// owner, or as uid 0 without capabilities in a root-owned workspace (reads narrowed to
    /// system directories, the workspace and `read_only_paths`). Returns once the helper
    /// reported its layers and `execve`d the program; stdin and stdout are then the caller's.
    ///
    /// No command policy or approval applies here: the caller decides whether the service may
    /// start (its configuration is the user's) and gates each action with
    /// [`Runtime::authorize`]. The start is audited (`service_started`, or the refusal), and so
    /// is the stop (`service_stopped`).
    ///
    /// A refused start is [`Error::ServiceRefused`] (the sandbox cannot provide a layer the
    /// request needs, the cwd is outside the workspace or cannot be entered, a uid-0 service
    /// cannot read its program); a program that is missing, or that the service's user cannot
    /// reach or execute (checked by the helper after every layer), or a helper that stopped
    /// early is [`Error::ServiceStart`]; both say what to change. A program that still fails
    /// at `execve` (a broken interpreter line, a library it cannot load) shows up as an early
    /// exit ([`Service::try_exit`]) with the reason in [`Service::stderr_tail`].
    ///
    /// Call it on a tokio runtime that outlives the service (its pipes are registered there).
    /// The calling thread does not matter: the helper is forked on a thread that lives as long as
    /// the process, so its parent-death signal kills the service only when this process dies.
    pub async fn spawn_service(&self, request: &ServiceRequest) -> Result<Service> {
        let record =
            AuditRecord::new(request.name.clone(), None, request.argv(), request.cwd.clone());
        let mut pending = AuditOnDrop { audit: self.audit.as_ref(), record, finished: false };
        let started = self.start_service(request, &mut pending.record).await;
        pending.finished = true;
        let mut record = pending.record.clone();
        match &started {
            Ok(service) => {
                record.outcome = "service_started".to_owned();
                record.sandbox = Some(service.report.clone());
            }
            Err(Error::ServiceRefused { refusal, .. }) => {
                record.outcome = refusal.kind.as_str().to_owned();
                record.refusal = Some(refusal.message.clone());
                record.sandbox = refusal.sandbox.clone();
            }
            Err(error) => {
                record.outcome = "error".to_owned();
                record.refusal = Some(error.to_string());
            }
        }
        if let Some(audit) = &self.audit {
            // An unaudited service must not run: a failed write stops it (dropped below).
            audit.record(&record)?;
        }
        let mut service = started?;
        service.audit = self.audit.clone();
        service.record = record;
        Ok(service)
    }

    async fn start_service(
        &self,
        request: &ServiceRequest,
        record: &mut AuditRecord,
    ) -> Result<Service> {
        if request.program.is_empty() {
            return Err(Error::InvalidRequest(format!(
                "service `{}`: the program is empty",
                request.name
            )));
        }
        if request.workspace_roots.is_empty() {
            return Err(Error::InvalidRequest(format!(
                "service `{}`: no workspace root",
                request.name
            )));
        }
        let refuse = |kind: RefusalKind, message: String, sandbox: Option<SandboxReport>| {
            Error::ServiceRefused {
                name: request.name.clone(),
                refusal: Refusal { kind, message, sandbox },
            }
        };
        let outside = |violation: crate::paths::PathViolation| {
            refuse(
                RefusalKind::PathOutsideWorkspace,
                format!("{}: {}", violation.path, violation.reason),
                None,
            )
        };
        let roots = canonical_roots(&request.workspace_roots).map_err(outside)?;
        let cwd = checked_cwd(&request.cwd, &roots).map_err(outside)?;
        let limits = request.limits.unwrap_or_else(|| {
            let mut limits = self.config().limits;
            limits.rlimits.cpu_seconds = limits.rlimits.cpu_seconds.max(SERVICE_CPU_SECONDS);
            limits
        });
        let launch = Launch {
            program: &request.program,
            args: &request.args,
            roots: &roots,
            cwd: &cwd,
            protected_paths: &[],
            read_only_paths: &request.read_only_paths,
            env: &request.env,
            base_environment: request.base_environment.as_deref(),
            allow_network: request.allow_network,
            limits,
            require_filesystem_confinement: request.require_filesystem_confinement,
        };
        let mut prepared = self
            .prepare_launch(&launch)?
            .map_err(|refusal| Error::ServiceRefused { name: request.name.clone(), refusal })?;
        record.withheld_environment = prepared.withheld_environment.clone();
        prepared.plan.check_program = true;
        if let Err(error) = check_program(&request.name, &prepared.plan) {
            prepared.resources.release().await;
            return Err(error);
        }
        let started = Instant::now();
        let mut child = match self.spawn_helper(&mut prepared, Stdio::piped()).await {
            Ok(child) => child,
            Err(error) => {
                prepared.resources.release().await;
                return Err(error);
            }
        };
        let stderr = Arc::new(Mutex::new(TailBuffer::new(STDERR_TAIL_BYTES)));
        let (complete, reports_over) = tokio::sync::oneshot::channel();
        let mut collector = ReportCollector::new(prepared.backend);
        collector.complete = Some(complete);
        let expected_reports = collector.expected;
        let reports = Arc::clone(&collector.reports);
        let stderr_task = child
            .stderr
            .take()
            .map(|pipe| tokio::spawn(drain(pipe, Arc::clone(&stderr), Some(collector))));
        // The collector is dropped (never sent on) when the report lines are over.
        let waited = tokio::time::timeout(REPORT_TIMEOUT, reports_over).await;

        let mut report = prepared.report.clone();
        let helper_reports = ReportCollector::reports(&reports);
        let helper_refusal =
            conclude_helper_reports(&mut report, prepared.backend, &helper_reports);
        let argv = short_command_line(&request.argv());
        enum Failure {
            Refused(String, RefusalCause),
            Silent,
            StoppedEarly,
        }
        let failure = match (waited, helper_refusal) {
            (_, Some((reason, cause))) => Some(Failure::Refused(reason, cause)),
            (Err(_), None) => Some(Failure::Silent),
            (Ok(_), None) if helper_reports.len() < expected_reports => Some(Failure::StoppedEarly),
            (Ok(_), None) => None,
        };
        let Some(failure) = failure else {
            return Ok(Service {
                report,
                stdin: child.stdin.take(),
                stdout: child.stdout.take(),
                child,
                stderr,
                stderr_task,
                resources: Some(prepared.resources),
                audit: None,
                record: record.clone(),
                started,
                drain_timeout: self.config().drain_timeout,
            });
        };
        prepared.resources.kill_everything();
        let _ = child.start_kill();
        let _ = child.wait().await;
        prepared.resources.release().await;
        if let Some(mut task) = stderr_task
            && tokio::time::timeout(self.config().drain_timeout, &mut task).await.is_err()
        {
            task.abort();
        }
        let tail = stderr.lock().map(|buffer| buffer.text()).unwrap_or_default();
        Err(match failure {
            Failure::Refused(reason, RefusalCause::Program) => Error::ServiceStart {
                name: request.name.clone(),
                reason: format!("the sandbox cannot start `{argv}`: {reason}"),
            },
            Failure::Refused(reason, cause) => refuse(
                refusal_kind(cause),
                format!("refusing to start `{argv}`: {reason}"),
                Some(report),
            ),
            Failure::Silent => Error::ServiceStart {
                name: request.name.clone(),
                reason: format!(
                    "the sandbox helper {} sent no report within {} s; stderr: {}",
                    self.config().helper.program.display(),
                    REPORT_TIMEOUT.as_secs(),
                    tail.trim()
                ),
            },
            Failure::StoppedEarly => Error::ServiceStart {
                name: request.name.clone(),
                reason: format!(
                    "the sandbox helper {} stopped before starting `{argv}` (is it the \
                     tools-runtime-sandbox binary of this version?); stderr: {}",
                    self.config().helper.program.display(),
                    tail.trim()
                ),
            },
        })
    }

    /// Applies the approval mode, the approver and its timeout to a non-script action whose
    /// policy decision is already known (an MCP tool call), with the same semantics as a
    /// script's run: `Forbidden` is a `policy_forbidden` refusal; `Prompt` asks the approver
    /// unless the mode is `never` (then `approval_unavailable`); `Allow` asks only under
    /// `always_ask`, or under `ask_for_risky` when `request.allow_network` is set; no
    /// approver, a denial or a silence past the approval timeout are refusals of their kinds.
    /// An empty `request.reason` is filled in with why approval is needed.
    ///
    /// `Ok(())` means go ahead; a refusal is an observation for the model. Each call writes one
    /// audit record (`authorized` or the refusal kind, the decision as the user's rule for
    /// exactly `request.argv`, the approver and the time it took); when that record cannot be
    /// written, the action is refused (`approval_unavailable`): nothing runs unaudited.
    pub async fn authorize(
        &self,
        request: &ApprovalRequest,
        decision: Decision,
    ) -> std::result::Result<(), Refusal> {
        let mut approval = request.clone();
        if approval.reason.is_empty() {
            approval.reason = match (decision, approval.allow_network) {
                (Decision::Prompt, _) => "policy says prompt".to_owned(),
                (Decision::Allow | Decision::Forbidden, true) => {
                    "the action asks for network access".to_owned()
                }
                (Decision::Allow | Decision::Forbidden, false) => {
                    "the approval mode asks for every action".to_owned()
                }
            };
        }
        let gate = self.approval_gate(decision, &approval).await;
        let Some(audit) = &self.audit else { return gate.verdict };
        let mut record = AuditRecord::new(
            approval.call_id.clone(),
            approval.skill.clone(),
            approval.argv.clone(),
            approval.cwd.clone(),
        );
        record.decision = Some(MergedDecision {
            decision,
            skill: None,
            user: RuleMatch { decision, prefix: Some(approval.argv.clone()) },
        });
        record.approver = gate.approver;
        record.approval_ms = gate.approval_ms;
        match &gate.verdict {
            Ok(()) => record.outcome = "authorized".to_owned(),
            Err(refusal) => {
                record.outcome = refusal.kind.as_str().to_owned();
                record.refusal = Some(refusal.message.clone());
            }
        }
        match (audit.record(&record), gate.verdict) {
            (Ok(()), verdict) => verdict,
            (Err(error), Ok(())) => Err(Refusal {
                kind: RefusalKind::ApprovalUnavailable,
                message: format!(
                    "`{}` cannot be audited, so it does not run: {error}",
                    approval.argv.join(" ")
                ),
                sandbox: None,
            }),
            (Err(_), Err(refusal)) => Err(refusal),
        }
    }
}

/// Checks before spawning that the program exists, and that a uid-0 service can read it: an
/// actionable error here beats an `execve` failure inside the sandbox.
fn check_program(name: &str, plan: &HelperPlan) -> Result<()> {
    let program = &plan.program;
    let search_path = plan.environment.get("PATH").map(String::as_str).unwrap_or_default();
    let found = if program.components().count() > 1 {
        let path = plan.cwd.join(program);
        path.is_file().then_some(path)
    } else {
        std::env::split_paths(search_path)
            .map(|directory| plan.cwd.join(directory).join(program))
            .find(|candidate| candidate.is_file())
    };
    let Some(found) = found else {
        return Err(Error::ServiceStart {
            name: name.to_owned(),
            reason: format!(
                "program `{}` not found (cwd {}, PATH {search_path:?}); install it, name it by \
                 absolute path, or pass its directory in the service's PATH",
                program.display(),
                plan.cwd.display()
            ),
        });
    };
    if !plan.root_without_capabilities {
        return Ok(());
    }
    let canonical = found.canonicalize().unwrap_or_else(|_| found.clone());
    let readable = plan
        .landlock
        .readable
        .iter()
        .chain(&plan.landlock.writable)
        .any(|root| within(&canonical, root));
    if readable {
        return Ok(());
    }
    Err(Error::ServiceRefused {
        name: name.to_owned(),
        refusal: Refusal {
            kind: RefusalKind::PathOutsideWorkspace,
            message: format!(
                "program {} ({}) is outside what the service may read: in a root-owned \
                 workspace it runs as uid 0 with reads narrowed to system directories, the \
                 workspace and read_only_paths; add its install directory (e.g. {}) to \
                 read_only_paths, or chown the workspace to an unprivileged user",
                found.display(),
                canonical.display(),
                canonical.parent().and_then(Path::parent).unwrap_or(&canonical).display()
            ),
            sandbox: None,
        },
    })
}

/// The command line for a message, cut after 200 characters (`node -e` carries a whole program).
fn short_command_line(argv: &[String]) -> String {
    const LIMIT: usize = 200;
    let line = argv.join(" ");
    match line.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

fn within(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
        || root.canonicalize().is_ok_and(|canonical_root| path.starts_with(canonical_root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_command_lines_are_cut_in_messages() {
        assert_eq!(short_command_line(&["cat".to_owned()]), "cat");
        let long = vec!["node".to_owned(), "-e".to_owned(), "x".repeat(500)];
        let short = short_command_line(&long);
        assert_eq!(short.chars().count(), 201);
        assert!(short.starts_with("node -e xxx") && short.ends_with('…'));
    }

    #[test]
    fn services_and_requests_can_be_shared_across_tasks() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Service>();
        shareable::<ServiceRequest>();
    }
}
