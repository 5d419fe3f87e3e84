//! The sandbox report: which confinement layer protected a run, and which could not.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One confinement layer of the sandbox.
///
/// The order of the variants is the order in which the layers are listed in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Layer {
    /// The command runs in its own process group, killed as a whole on timeout or exit.
    ProcessGroup,
    /// The environment is cleared down to an allowlist; secrets are never inherited.
    CleanEnvironment,
    /// The command is killed when the runtime dies (`PR_SET_PDEATHSIG`).
    ParentDeathSignal,
    /// Resource limits: CPU time, address space, file size, open files, processes, core = 0.
    Rlimits,
    /// A per-run cgroup `pids` limit (v2 or v1: [`SandboxReport::cgroup_versions`]).
    CgroupPids,
    /// A per-run cgroup `memory` limit (v2 or v1: [`SandboxReport::cgroup_versions`]).
    CgroupMemory,
    /// The command runs with no capabilities: as an unprivileged uid/gid, or as uid 0 with every
    /// capability set emptied and the securebits locked (a root-owned workspace).
    DropPrivileges,
    /// `PR_SET_NO_NEW_PRIVS`: no set-uid or file-capability escalation through `execve`.
    NoNewPrivileges,
    /// A fresh network namespace with no route to the host's network.
    NetworkNamespace,
    /// A fresh PID namespace whose init is the helper's reaper: when the command exits, or the
    /// runtime dies (parent-death signals down the chain), the kernel kills every process left
    /// in it, daemons that left the process group included.
    PidNamespace,
    /// A private mount namespace in which every mount outside the workspace and the private tmp
    /// is read-only (uid-0 runs): `chmod`, `chown`, `utimes` and xattrs, which Landlock does not
    /// govern, cannot touch a root-owned host file; links and renames out of the workspace
    /// cross mounts (`EXDEV`).
    ReadOnlyMounts,
    /// A private IPC namespace (uid-0 runs): the host's System V IPC objects and POSIX message
    /// queues, which uid 0 would own, are out of reach.
    IpcNamespace,
    /// Landlock: read where needed, write only the workspace and a private tmp.
    Landlock,
    /// seccomp: ptrace, process_vm_*, io_uring, mount, bpf, kexec, modules, namespaces denied.
    Seccomp,
    /// seccomp socket filter: only `AF_UNIX` sockets may be created.
    SeccompSocketFilter,
    /// seccomp rules for a uid-0 command: no `socket(AF_UNIX, …)` (Landlock does not govern
    /// `connect` to a root-owned socket such as `/var/run/docker.sock`; `socketpair` stays), no
    /// set-uid or set-gid mode bits, `prlimit`/`setpriority`/scheduler/`ioprio` calls on itself
    /// only, `openat2` answered `ENOSYS`.
    SeccompRootFilter,
    /// bubblewrap: read-only root, writable workspace, read-only protected paths inside it.
    Bubblewrap,
}

impl Layer {
    /// Every layer, in report order.
    pub const ALL: [Layer; 17] = [
        Layer::ProcessGroup,
        Layer::CleanEnvironment,
        Layer::ParentDeathSignal,
        Layer::Rlimits,
        Layer::CgroupPids,
        Layer::CgroupMemory,
        Layer::DropPrivileges,
        Layer::NoNewPrivileges,
        Layer::NetworkNamespace,
        Layer::PidNamespace,
        Layer::ReadOnlyMounts,
        Layer::IpcNamespace,
        Layer::Landlock,
        Layer::Seccomp,
        Layer::SeccompSocketFilter,
        Layer::SeccompRootFilter,
        Layer::Bubblewrap,
    ];

    /// The layer's name in reports (`snake_case`).
    pub fn name(self) -> &'static str {
        match self {
            Layer::ProcessGroup => "process_group",
            Layer::CleanEnvironment => "clean_environment",
            Layer::ParentDeathSignal => "parent_death_signal",
            Layer::Rlimits => "rlimits",
            Layer::CgroupPids => "cgroup_pids",
            Layer::CgroupMemory => "cgroup_memory",
            Layer::DropPrivileges => "drop_privileges",
            Layer::NoNewPrivileges => "no_new_privileges",
            Layer::NetworkNamespace => "network_namespace",
            Layer::PidNamespace => "pid_namespace",
            Layer::ReadOnlyMounts => "read_only_mounts",
            Layer::IpcNamespace => "ipc_namespace",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::SeccompSocketFilter => "seccomp_socket_filter",
            Layer::SeccompRootFilter => "seccomp_root_filter",
            Layer::Bubblewrap => "bubblewrap",
        }
    }
}

/// What happened to one layer in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LayerStatus {
    /// The layer was applied and is enforced for the command.
    Active,
    /// The machine cannot provide the layer (kernel feature missing, not writable, not installed).
    Unavailable,
    /// The layer was attempted and failed.
    Failed,
    /// The layer was not asked for by this run's policy (e.g. network allowed, other backend).
    NotRequested,
}

/// The sandbox backend a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Backend {
    /// The helper applies every layer itself (Landlock for the filesystem).
    Direct,
    /// bubblewrap builds the filesystem view; the helper adds Landlock and seccomp inside it.
    Bubblewrap,
}

/// Which cgroup interface a per-run cgroup limit went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CgroupVersion {
    /// A controller hierarchy of its own (`/sys/fs/cgroup/pids`, `/sys/fs/cgroup/memory`).
    V1,
    /// The unified hierarchy (`/sys/fs/cgroup` itself, or `/sys/fs/cgroup/unified` on a hybrid
    /// host), in a child of the runtime's own cgroup.
    V2,
}

impl CgroupVersion {
    /// `"v1"` or `"v2"`.
    pub fn name(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        }
    }
}

/// The layers that protected one run, with a reason for each layer that is not active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// The backend used.
    pub backend: Backend,
    /// Every layer and its status.
    pub layers: BTreeMap<Layer, LayerStatus>,
    /// Why a layer is unavailable or failed, or a detail about an active one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<Layer, String>,
    /// Which cgroup version enforced each active cgroup layer.
    #[serde(default, skip_serializing_if = "CgroupVersions::is_empty")]
    pub cgroup_versions: CgroupVersions,
}

/// The cgroup version behind each cgroup layer of a run (`None`: that layer is not active).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupVersions {
    /// Behind [`Layer::CgroupPids`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<CgroupVersion>,
    /// Behind [`Layer::CgroupMemory`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<CgroupVersion>,
}

impl CgroupVersions {
    /// Whether no cgroup layer is active.
    pub fn is_empty(&self) -> bool {
        self.pids.is_none() && self.memory.is_none()
    }

    /// The version behind `layer` (`None` for a layer that is not a cgroup or not active).
    pub fn get(&self, layer: Layer) -> Option<CgroupVersion> {
        let mut versions = *self;
        versions.slot(layer).and_then(|slot| *slot)
    }

    /// Records `version` behind `layer` (ignored for a layer that is not a cgroup).
    pub(crate) fn set(&mut self, layer: Layer, version: CgroupVersion) {
        if let Some(slot) = self.slot(layer) {
            *slot = Some(version);
        }
    }

    /// Where the version behind `layer` is kept (`None` for a layer that is not a cgroup).
    fn slot(&mut self, layer: Layer) -> Option<&mut Option<CgroupVersion>> {
        match layer {
            Layer::CgroupPids => Some(&mut self.pids),
            Layer::CgroupMemory => Some(&mut self.memory),
            Layer::ProcessGroup
            | Layer::CleanEnvironment
            | Layer::ParentDeathSignal
            | Layer::Rlimits
            | Layer::DropPrivileges
            | Layer::NoNewPrivileges
            | Layer::NetworkNamespace
            | Layer::PidNamespace
            | Layer::ReadOnlyMounts
            | Layer::IpcNamespace
            | Layer::Landlock
            | Layer::Seccomp
            | Layer::SeccompSocketFilter
            | Layer::SeccompRootFilter
            | Layer::Bubblewrap => None,
        }
    }
}

impl SandboxReport {
    /// A report for `backend` with every layer `NotRequested`.
    pub fn new(backend: Backend) -> SandboxReport {
        let layers = Layer::ALL.iter().map(|layer| (*layer, LayerStatus::NotRequested)).collect();
        SandboxReport {
            backend,
            layers,
            notes: BTreeMap::new(),
            cgroup_versions: CgroupVersions::default(),
        }
    }

    /// Records `status` for `layer`, with an optional note.
    pub fn set(&mut self, layer: Layer, status: LayerStatus, note: Option<String>) {
        self.layers.insert(layer, status);
        match note {
            Some(note) => {
                self.notes.insert(layer, note);
            }
            None => {
                self.notes.remove(&layer);
            }
        }
    }

    /// The status of `layer` (`NotRequested` when absent).
    pub fn status(&self, layer: Layer) -> LayerStatus {
        self.layers.get(&layer).copied().unwrap_or(LayerStatus::NotRequested)
    }

    /// Whether `layer` is active.
    pub fn is_active(&self, layer: Layer) -> bool {
        self.status(layer) == LayerStatus::Active
    }

    /// Copies every layer the helper reported into this report (the helper's word wins).
    pub(crate) fn merge_from(&mut self, other: &SandboxReport) {
        for (layer, status) in &other.layers {
            if *status != LayerStatus::NotRequested {
                self.layers.insert(*layer, *status);
            }
        }
        for (layer, note) in &other.notes {
            self.notes.insert(*layer, note.clone());
        }
        self.cgroup_versions.pids = other.cgroup_versions.pids.or(self.cgroup_versions.pids);
        self.cgroup_versions.memory = other.cgroup_versions.memory.or(self.cgroup_versions.memory);
    }
}
