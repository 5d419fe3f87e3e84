//! Audit records: one JSON line per execution, refused or run.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::policy::MergedDecision;
use crate::report::SandboxReport;

/// One execution as the audit log sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The call id of the execution.
    pub call_id: String,
    /// The skill the command belongs to, if any.
    pub skill: Option<String>,
    /// The command line (program first).
    pub argv: Vec<String>,
    /// The working directory as requested.
    pub cwd: PathBuf,
    /// The merged policy decision (absent when the request was refused before evaluation).
    pub decision: Option<MergedDecision>,
    /// Who approved (`"policy"` when no approval was needed, the approver's name otherwise).
    pub approver: Option<String>,
    /// `"ran"`, the refusal kind (`"policy_forbidden"`, `"approval_denied"`, …), `"error"`
    /// when the runtime itself failed (helper missing, spawn error), or `"abandoned"` when the
    /// caller dropped the run before it finished. A non-script action let through by
    /// [`Runtime::authorize`](crate::Runtime::authorize) is `"authorized"`; a service
    /// ([`Runtime::spawn_service`](crate::Runtime::spawn_service)) writes `"service_started"`
    /// when it starts and `"service_stopped"` (with its duration and exit status) when it is
    /// shut down or dropped.
    pub outcome: String,
    /// The refusal or error message.
    pub refusal: Option<String>,
    /// Environment variables withheld as secrets.
    pub withheld_environment: Vec<String>,
    /// The sandbox report (absent when the command never reached the sandbox).
    pub sandbox: Option<SandboxReport>,
    /// Time spent waiting for approval, in milliseconds.
    pub approval_ms: u64,
    /// Time the command ran, in milliseconds.
    pub duration_ms: u64,
    /// Exit code, when the command exited.
    pub exit_code: Option<i32>,
    /// Signal, when the command was killed by one.
    pub signal: Option<i32>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Whether stdout was truncated.
    pub stdout_truncated: bool,
    /// Whether stderr was truncated.
    pub stderr_truncated: bool,
    /// Total bytes the command wrote to stdout.
    pub stdout_total_bytes: u64,
    /// Total bytes the command wrote to stderr.
    pub stderr_total_bytes: u64,
    /// Whether the failure looks like a sandbox denial.
    pub likely_denied: bool,
}

impl AuditRecord {
    /// A record of one action with every outcome field empty.
    pub(crate) fn new(
        call_id: String,
        skill: Option<String>,
        argv: Vec<String>,
        cwd: PathBuf,
    ) -> AuditRecord {
        AuditRecord {
            call_id,
            skill,
            argv,
            cwd,
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
        }
    }
}

/// Where audit records go.
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    /// Stores one record.
    fn record(&self, record: &AuditRecord) -> Result<()>;
}

/// Appends records as JSON lines to a file.
#[derive(Debug)]
pub struct JsonlAuditLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl JsonlAuditLog {
    /// Opens (creating or appending to) the JSONL file at `path`.
    pub fn open(path: impl Into<PathBuf>) -> Result<JsonlAuditLog> {
        let path = path.into();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| Error::Audit { path: path.clone(), source })?;
        Ok(JsonlAuditLog { path, file: Mutex::new(file) })
    }

    /// The file the records go to.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl AuditSink for JsonlAuditLog {
    fn record(&self, record: &AuditRecord) -> Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        file.write_all(&line).map_err(|source| Error::Audit { path: self.path.clone(), source })
    }
}
