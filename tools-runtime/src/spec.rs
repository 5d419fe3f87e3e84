//! The plan the runtime hands to the sandbox helper: one JSON argument, one report line back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::report::{CgroupVersion, Layer, SandboxReport};

/// The first argument that switches a binary into sandbox-helper mode.
pub const HELPER_MODE_ARGUMENT: &str = "--tools-runtime-sandbox-helper";

/// The prefix of the report line the helper writes to stderr just before `execve`.
///
/// It starts with a control byte so no ordinary text is mistaken for it; it is only honoured
/// at the very start of the stream, before the command has run.
pub(crate) const REPORT_LINE_PREFIX: &[u8] = b"\x01tools-runtime-sandbox-report ";

/// Resource limits applied with `setrlimit` (soft = hard, CPU hard = soft + 1 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    /// CPU seconds (`RLIMIT_CPU`); the command gets `SIGXCPU` when it runs out.
    pub cpu_seconds: u64,
    /// Address space in bytes (`RLIMIT_AS`).
    pub address_space_bytes: u64,
    /// Largest file the command may write, in bytes (`RLIMIT_FSIZE`); `SIGXFSZ` beyond it.
    pub file_size_bytes: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Processes of the sandbox user (`RLIMIT_NPROC`; ignored by the kernel for root).
    pub processes: u64,
}

/// A per-run cgroup for the helper to join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CgroupJoin {
    /// Its `cgroup.procs` file.
    pub(crate) procs: PathBuf,
    pub(crate) version: CgroupVersion,
}

/// Landlock rules: hierarchies readable (and executable), hierarchies writable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LandlockPlan {
    /// For uid-0 runs the narrowed roots and, of `/etc` and the like, each entry whose whole
    /// subtree any user may read (walked and cached by the runtime, `read_set`).
    pub(crate) readable: Vec<PathBuf>,
    pub(crate) writable: Vec<PathBuf>,
    /// Also deny TCP bind/connect (Landlock ABI 4+) because the network is off.
    pub(crate) deny_tcp: bool,
}

/// Which part of the confinement this helper invocation applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Stage {
    /// Direct backend: every layer, then `execve` of the command.
    Everything,
    /// Bubblewrap backend, outside bwrap: process layers and privilege drop, then `execve(bwrap)`.
    OutsideBubblewrap,
    /// Bubblewrap backend, inside bwrap: Landlock and seccomp, then `execve` of the command.
    InsideBubblewrap,
    /// Direct backend, the init (PID 1) of the command's PID namespace, started by the
    /// `Everything` stage once the namespace exists: rlimits, privilege drop and the
    /// self-confinement, then the command as its child, reaped with every orphan until it exits.
    InsidePidNamespace,
}

/// What the outer helper hands its PID namespace's init ([`Stage::InsidePidNamespace`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PidNamespaceInit {
    /// The layers the outer helper applied (cgroups, namespaces), continued by the init.
    pub(crate) report: SandboxReport,
    /// The inherited descriptor on which the init writes how the command ended (`exit N` or
    /// `signal N`), so the outer helper can end the same way (an init cannot die by its own
    /// signal).
    pub(crate) status_descriptor: i32,
}

/// Everything the helper needs, serialised as its second argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HelperPlan {
    pub(crate) stage: Stage,
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    /// The command's environment. The helper itself starts with an empty one: it runs as root
    /// until the privilege drop, and the dynamic loader would honour `LD_PRELOAD` or
    /// `LD_LIBRARY_PATH` meant for the command before `main`.
    pub(crate) environment: BTreeMap<String, String>,
    pub(crate) cwd: PathBuf,
    /// The runtime's pid (for the PID namespace's init, the outer helper's, read through
    /// `/proc` since `getppid` says 0 there): the helper checks it is still the parent after
    /// `PR_SET_PDEATHSIG`.
    pub(crate) parent_pid: i32,
    /// The per-run cgroups that carry the `pids` and `memory` limits, to join (one and the
    /// same directory for both under cgroup v2).
    pub(crate) cgroup_pids: Option<CgroupJoin>,
    pub(crate) cgroup_memory: Option<CgroupJoin>,
    /// Why a cgroup layer has no cgroup (the runtime's detection), for the helper's report.
    #[serde(default)]
    pub(crate) cgroup_unavailable: BTreeMap<Layer, String>,
    pub(crate) rlimits: Rlimits,
    /// Drop to this uid/gid (only when the helper runs as root).
    pub(crate) run_as: Option<(u32, u32)>,
    /// The command keeps uid 0 (a root-owned workspace) with every capability set emptied and
    /// the securebits locked; the helper adds the read-only mount view, the IPC namespace and
    /// the uid-0 seccomp rules, and refuses to run when one of them is missing.
    #[serde(default)]
    pub(crate) root_without_capabilities: bool,
    /// Paths inside the workspace bound read-only in the uid-0 mount view (the bubblewrap
    /// backend's protected paths, done by the direct helper), canonical and existing.
    #[serde(default)]
    pub(crate) read_only_binds: Vec<PathBuf>,
    /// The network is off: unshare it (direct backend) and filter sockets with seccomp.
    pub(crate) deny_network: bool,
    pub(crate) landlock: LandlockPlan,
    /// Refuse to run the command unless a filesystem layer (Landlock or bubblewrap) is active.
    pub(crate) require_filesystem_confinement: bool,
    /// Refuse (cause `program`) unless the command's user can execute the program, checked
    /// after every layer (services: an `execve` failure after the report would only show as an
    /// early exit).
    #[serde(default)]
    pub(crate) check_program: bool,
    /// Bubblewrap backend: the bwrap argv (program first) that precedes `-- helper ...`.
    pub(crate) bubblewrap_argv: Vec<String>,
    /// The helper's own path, re-executed by bwrap for the inner stage and, when the helper is
    /// multi-threaded (so cannot fork), by the direct helper as its PID namespace's init.
    pub(crate) helper_program: PathBuf,
    /// Set only for [`Stage::InsidePidNamespace`].
    #[serde(default)]
    pub(crate) pid_namespace_init: Option<PidNamespaceInit>,
}

/// The line the helper writes before `execve`: its layers, or why it refused to run the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HelperReport {
    pub(crate) report: SandboxReport,
    /// Set when the helper refused to run the command (fail closed); the command never ran.
    pub(crate) refused: Option<String>,
    /// Why it refused.
    #[serde(default)]
    pub(crate) cause: RefusalCause,
}

/// What a helper refusal is about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RefusalCause {
    /// A layer the policy or the mechanism relies on is missing (fail closed).
    #[default]
    Sandbox,
    /// The command's user cannot enter the working directory.
    WorkingDirectory,
    /// The command's user cannot find or execute the program (only with `check_program`).
    Program,
}
