//! Supervision of one run: the host resources it holds, output draining, the helper's report
//! lines, and the bubblewrap command line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use crate::cgroup::{CgroupHost, Controller, RunCgroup};
use crate::error::{Error, Result};
use crate::exec::Limits;
use crate::output::{HeadTailBuffer, TailBuffer};
use crate::report::{Backend, CgroupVersion, Layer};
use crate::spec::{CgroupJoin, HelperReport, REPORT_LINE_PREFIX};

/// What one run holds on the host: its private tmp, its cgroups and its process group.
///
/// [`RunResources::release`] kills what is left and removes everything; if the run's future is
/// dropped midway (a caller's own timeout), `Drop` does the same without waiting.
#[derive(Debug)]
pub(crate) struct RunResources {
    pub(crate) private_tmp: PathBuf,
    /// The per-run cgroup directories: one per v1 controller, one for every v2 controller.
    pub(crate) cgroups: Vec<RunCgroup>,
    /// The cgroups that carry the `pids` and the `memory` limit, for the helper to join.
    pub(crate) pids: Option<CgroupJoin>,
    pub(crate) memory: Option<CgroupJoin>,
    pub(crate) cgroup_unavailable: Vec<(Layer, String)>,
    pub(crate) group: Option<Pid>,
    released: bool,
}

impl RunResources {
    pub(crate) fn new(private_tmp: PathBuf, run_name: &str, limits: &Limits) -> RunResources {
        let mut resources = RunResources {
            private_tmp,
            cgroups: Vec::new(),
            pids: None,
            memory: None,
            cgroup_unavailable: Vec::new(),
            group: None,
            released: false,
        };
        let host = CgroupHost::get();
        let pids_max = limits.pids.to_string();
        let memory_max = limits.memory_bytes.to_string();
        for (layer, controller) in
            [(Layer::CgroupPids, Controller::Pids), (Layer::CgroupMemory, Controller::Memory)]
        {
            let placement = match host.placement(controller) {
                Ok(placement) => placement,
                Err(reason) => {
                    resources.cgroup_unavailable.push((layer, reason.clone()));
                    continue;
                }
            };
            // Under v2 every limit goes into one directory; under v1 each hierarchy has its own.
            let existing = resources.cgroups.iter().position(|cgroup| {
                cgroup.version == CgroupVersion::V2
                    && placement.version == CgroupVersion::V2
                    && cgroup.directory.parent() == Some(placement.parent.as_path())
            });
            let index = match existing {
                Some(index) => index,
                None => match RunCgroup::create(placement, run_name) {
                    Ok(cgroup) => {
                        resources.cgroups.push(cgroup);
                        resources.cgroups.len() - 1
                    }
                    Err(reason) => {
                        resources.cgroup_unavailable.push((layer, reason));
                        continue;
                    }
                },
            };
            let cgroup = &resources.cgroups[index];
            let limit = match (controller, cgroup.version) {
                (Controller::Pids, CgroupVersion::V1 | CgroupVersion::V2) => {
                    cgroup.write("pids.max", &pids_max)
                }
                (Controller::Memory, CgroupVersion::V1) => {
                    let limit = cgroup.write("memory.limit_in_bytes", &memory_max);
                    // Swap counts too where the kernel accounts it; a missing file is fine.
                    let _ = cgroup.write("memory.memsw.limit_in_bytes", &memory_max);
                    limit
                }
                (Controller::Memory, CgroupVersion::V2) => {
                    let limit = cgroup.write("memory.max", &memory_max);
                    // No swap beyond the limit, where the kernel accounts swap.
                    let _ = cgroup.write("memory.swap.max", "0");
                    limit
                }
            };
            match limit {
                Ok(()) => {
                    let join = CgroupJoin { procs: cgroup.procs_file(), version: cgroup.version };
                    match controller {
                        Controller::Pids => resources.pids = Some(join),
                        Controller::Memory => resources.memory = Some(join),
                    }
                }
                Err(reason) => resources.cgroup_unavailable.push((layer, reason)),
            }
        }
        // A directory that carries no limit is of no use.
        let joined: Vec<PathBuf> = [&resources.pids, &resources.memory]
            .into_iter()
            .flatten()
            .map(|join| join.procs.clone())
            .collect();
        resources.cgroups.retain(|cgroup| {
            let used = joined.contains(&cgroup.procs_file());
            if !used {
                cgroup.remove_if_empty();
            }
            used
        });
        resources
    }

    /// SIGKILL to the process group and to every member of the cgroups (which also catches
    /// processes that left the group with `setsid`).
    pub(crate) fn kill_everything(&self) {
        if let Some(group) = self.group {
            let _ = killpg(group, Signal::SIGKILL);
        }
        for cgroup in &self.cgroups {
            cgroup.kill_all();
        }
    }

    /// The process group's leader was reaped long ago (a service that ended by itself): once
    /// its last member is gone the kernel may hand the group id to an unrelated process, so
    /// leave the killing to the cgroups when there are any (every descendant is in them).
    pub(crate) fn leader_reaped(&mut self) {
        if !self.cgroups.is_empty() {
            self.group = None;
        }
    }

    pub(crate) async fn release(mut self) {
        self.kill_everything();
        for cgroup in std::mem::take(&mut self.cgroups) {
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
        for cgroup in &self.cgroups {
            cgroup.remove_if_empty();
        }
        let _ = std::fs::remove_dir_all(&self.private_tmp);
    }
}

pub(crate) fn likely_denied(exit_code: Option<i32>, signal: Option<i32>, stderr: &str) -> bool {
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

/// Where a drained pipe's bytes go: the head + tail capture of a run, the tail of a service.
pub(crate) trait OutputSink: Send + 'static {
    /// Appends a chunk.
    fn push(&mut self, bytes: &[u8]);
}

impl OutputSink for HeadTailBuffer {
    fn push(&mut self, bytes: &[u8]) {
        HeadTailBuffer::push(self, bytes);
    }
}

impl OutputSink for TailBuffer {
    fn push(&mut self, bytes: &[u8]) {
        TailBuffer::push(self, bytes);
    }
}

/// Collects the helper's report lines from the start of its stderr.
#[derive(Debug)]
pub(crate) struct ReportCollector {
    /// The reports read so far.
    pub(crate) reports: Arc<Mutex<Vec<HelperReport>>>,
    /// How many report lines are still to come (one per helper stage; counted down as they
    /// arrive).
    pub(crate) expected: usize,
    /// Dropped once the report lines are over (all arrived, something else came, or the pipe
    /// closed): a service's start waits for that.
    pub(crate) complete: Option<tokio::sync::oneshot::Sender<()>>,
}

impl ReportCollector {
    pub(crate) fn new(backend: Backend) -> ReportCollector {
        // One report line per helper stage: the direct helper, or outside and inside bwrap.
        let expected = match backend {
            Backend::Direct => 1,
            Backend::Bubblewrap => 2,
        };
        ReportCollector { reports: Arc::new(Mutex::new(Vec::new())), expected, complete: None }
    }

    /// The reports read so far.
    pub(crate) fn reports(reports: &Mutex<Vec<HelperReport>>) -> Vec<HelperReport> {
        reports.lock().map(|reports| reports.clone()).unwrap_or_default()
    }
}

/// Reads a pipe into its sink; on stderr, first peels off the helper's report lines.
///
/// `reports` also says how many lines the helper stages write (one per stage): once that many
/// arrived, everything after is the command's, so a command cannot append a forged report of
/// its own (claiming layers, or a refusal that would hide that it ran).
pub(crate) async fn drain<R: tokio::io::AsyncRead + Unpin, S: OutputSink>(
    mut pipe: R,
    buffer: Arc<Mutex<S>>,
    mut reports: Option<ReportCollector>,
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
        if let (Some(prefix_bytes), Some(collector)) = (pending.as_mut(), reports.as_mut()) {
            prefix_bytes.extend_from_slice(bytes);
            match peel_report_lines(prefix_bytes, &collector.reports, &mut collector.expected) {
                Peeled::NeedMore => continue,
                Peeled::Rest(rest) => {
                    owned = rest;
                    bytes = &owned;
                    pending = None;
                    // The report lines are over: whoever waits for them may go on.
                    reports = None;
                }
            }
        }
        if let Ok(mut buffer) = buffer.lock() {
            buffer.push(bytes);
        }
    }
    drop(reports);
    if let (Some(rest), Ok(mut buffer)) = (pending, buffer.lock()) {
        buffer.push(&rest);
    }
}

enum Peeled {
    NeedMore,
    Rest(Vec<u8>),
}

fn peel_report_lines(
    bytes: &mut Vec<u8>,
    reports: &Mutex<Vec<HelperReport>>,
    remaining: &mut usize,
) -> Peeled {
    loop {
        if *remaining == 0 {
            return Peeled::Rest(std::mem::take(bytes));
        }
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
        *remaining = remaining.saturating_sub(1);
        bytes.drain(..=newline);
        // The last line ends the reports at once (a service's start waits for exactly that);
        // otherwise wait for the next line.
        if bytes.is_empty() && *remaining > 0 {
            return Peeled::NeedMore;
        }
    }
}

pub(crate) fn create_private_tmp(path: &Path, run_as: Option<(u32, u32)>) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, chown};
    let error = |source| Error::PrivateTmp { path: path.to_path_buf(), source };
    std::fs::DirBuilder::new().mode(0o700).create(path).map_err(error)?;
    if let Some((uid, gid)) = run_as {
        chown(path, Some(uid), Some(gid)).map_err(error)?;
    }
    Ok(())
}

pub(crate) fn find_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(program))
        .find(|candidate| candidate.is_file())
}

pub(crate) struct ProtectedPaths {
    /// Canonical paths to bind read-only.
    pub(crate) existing: Vec<PathBuf>,
    /// What the report should say about paths that do not exist.
    pub(crate) notes: Vec<String>,
}

/// Resolves the protected paths (relative ones against the first root).
///
/// A path that does not exist yet would otherwise be created by the command (a new
/// `.git/hooks/pre-commit`): its nearest existing ancestor inside a workspace root is
/// protected instead. Only when nothing of it exists below the root itself is it left
/// unprotected, with a note.
pub(crate) fn protected_paths(paths: &[PathBuf], roots: &[PathBuf]) -> ProtectedPaths {
    let mut protected = ProtectedPaths { existing: Vec::new(), notes: Vec::new() };
    for path in paths {
        let joined = match roots.first() {
            Some(root) if path.is_relative() => root.join(path),
            Some(_) | None => path.clone(),
        };
        if let Ok(canonical) = joined.canonicalize() {
            protected.existing.push(canonical);
            continue;
        }
        let ancestor = joined
            .ancestors()
            .skip(1)
            .find_map(|ancestor| ancestor.canonicalize().ok())
            .filter(|ancestor| roots.iter().any(|root| strictly_inside(ancestor, root)));
        match ancestor {
            Some(ancestor) => {
                protected.notes.push(format!(
                    "protected path {} does not exist: {} is read-only instead",
                    joined.display(),
                    ancestor.display()
                ));
                protected.existing.push(ancestor);
            }
            None => protected.notes.push(format!(
                "protected path {} does not exist and has no parent inside the workspace to protect",
                joined.display()
            )),
        }
    }
    protected
}

fn strictly_inside(path: &Path, root: &Path) -> bool {
    path != root && path.starts_with(root)
}

pub(crate) fn bubblewrap_argv(
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
    // Every directory between a writable root and a protected path becomes a mount point of
    // its own: the kernel refuses to rename a mount point (EBUSY), so the command cannot move
    // `.git` aside and put a fresh `.git/hooks` in its place. Parents sort before children.
    let ancestors: std::collections::BTreeSet<&Path> = protected
        .iter()
        .flat_map(|path| {
            path.ancestors()
                .skip(1)
                .filter(|ancestor| writable.iter().any(|root| strictly_inside(ancestor, root)))
        })
        .collect();
    for path in ancestors {
        let path = path.display().to_string();
        argv.extend(["--bind".to_owned(), path.clone(), path]);
    }
    let protected: std::collections::BTreeSet<&PathBuf> = protected.iter().collect();
    for path in protected {
        let path = path.display().to_string();
        argv.extend(["--ro-bind".to_owned(), path.clone(), path]);
    }
    argv.extend(["--chdir".to_owned(), cwd.display().to_string()]);
    argv
}
