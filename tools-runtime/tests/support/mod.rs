//! Shared fixture for the integration tests: a workspace owned by the sandbox user, a runtime
//! wired to the real helper binary and a JSONL audit log, and independent probes of the layers
//! this machine can provide.

// Test helpers: a failed setup step should stop the test loudly, like in a #[test] body.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tools_runtime::{
    AuditRecord, ExecOutcome, ExecRequest, ExecResult, JsonlAuditLog, Layer, LayerStatus, Refusal,
    Runtime, RuntimeConfig, SandboxHelper,
};

/// A scratch area: `base/workspace` (the sandbox's workspace), `base/outside` (a world-writable
/// directory outside it, so only the sandbox can stop writes there), and an audit log.
pub struct Fixture {
    pub base: tempfile::TempDir,
    pub workspace: PathBuf,
    pub outside: PathBuf,
    pub audit_path: PathBuf,
    pub audit: Arc<JsonlAuditLog>,
    pub owner: Owner,
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Who owns the workspace of a test run: the attack suite runs once for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// root, mode 0700, as `mktemp -d` makes it: commands run as uid 0 without capabilities.
    Root,
    /// `nobody` (65534): commands run as that user.
    User,
}

impl Owner {
    /// Whether commands in this workspace run as uid 0 without capabilities (only when the
    /// tests run as root; otherwise every workspace belongs to the unprivileged test user).
    pub fn runs_as_uid0(self) -> bool {
        is_root() && self == Owner::Root
    }

    /// The uid commands run as.
    pub fn command_uid(self) -> u32 {
        match (is_root(), self) {
            (true, Owner::Root) => 0,
            (true, Owner::User) => tools_runtime::DEFAULT_SANDBOX_USER.0,
            (false, _) => nix::unistd::geteuid().as_raw(),
        }
    }
}

/// Generates, for each named `async fn NAME(owner: Owner)`, a module `NAME` with the tests
/// `root_owned_workspace` and `user_owned_workspace`.
#[macro_export]
macro_rules! for_both_owners {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn root_owned_workspace() {
                    super::$name(super::Owner::Root).await;
                }

                #[tokio::test]
                async fn user_owned_workspace() {
                    super::$name(super::Owner::User).await;
                }
            }
        )*
    };
}

impl Fixture {
    /// A workspace owned by `nobody` (when root).
    pub fn new() -> Fixture {
        Fixture::owned_by(Owner::User)
    }

    pub fn owned_by(owner: Owner) -> Fixture {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::Builder::new().prefix("tools-runtime-test-").tempdir().unwrap();
        let workspace = base.path().join("workspace");
        let outside = base.path().join("outside");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(workspace.join("data.txt"), "data\n").unwrap();
        let audit_path = base.path().join("audit.jsonl");
        let audit = Arc::new(JsonlAuditLog::open(&audit_path).unwrap());
        let fixture = Fixture { base, workspace, outside, audit_path, audit, owner };
        match owner {
            Owner::Root => {
                std::fs::set_permissions(&fixture.workspace, std::fs::Permissions::from_mode(0o700))
                    .unwrap()
            }
            Owner::User => {
                fixture.give_to_owner(&["", "data.txt"]);
            }
        }
        fixture
    }

    /// Chowns workspace entries (relative paths, "" for the root) to the workspace's owner.
    pub fn give_to_owner(&self, paths: &[&str]) {
        if !is_root() || self.owner == Owner::Root {
            return;
        }
        let (uid, gid) = tools_runtime::DEFAULT_SANDBOX_USER;
        for path in paths {
            let path =
                if path.is_empty() { self.workspace.clone() } else { self.workspace.join(path) };
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
        }
    }

    /// A fixture whose workspace holds a skill folder and `.git/hooks`, for protected paths.
    pub fn with_protected_tree(owner: Owner) -> Fixture {
        let fixture = Fixture::owned_by(owner);
        for directory in ["skill/scripts", ".git/hooks"] {
            std::fs::create_dir_all(fixture.workspace.join(directory)).unwrap();
        }
        std::fs::write(fixture.workspace.join("skill/SKILL.md"), "---\nname: skill\n---\n")
            .unwrap();
        std::fs::write(fixture.workspace.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        fixture.give_to_owner(&[
            "skill",
            "skill/scripts",
            "skill/SKILL.md",
            ".git",
            ".git/hooks",
            ".git/hooks/pre-commit",
        ]);
        fixture
    }

    /// The canonical path of a workspace entry, as reports name it.
    pub fn canonical(&self, relative: &str) -> String {
        self.workspace.join(relative).canonicalize().unwrap().display().to_string()
    }

    /// Whether protected paths can be served: bubblewrap, or the uid-0 helper's own mounts.
    pub fn protects_paths(&self, machine: &MachineLayers) -> bool {
        machine.bubblewrap || self.owner.runs_as_uid0()
    }

    pub fn config(&self) -> RuntimeConfig {
        let mut config = RuntimeConfig::new(helper());
        config.policy.approval_mode = tools_runtime::ApprovalMode::Never;
        config
    }

    pub fn runtime(&self) -> Runtime {
        self.runtime_with(self.config())
    }

    pub fn runtime_with(&self, config: RuntimeConfig) -> Runtime {
        Runtime::new(config).with_audit(self.audit.clone())
    }

    /// A request for `argv` in the workspace with a short timeout.
    pub fn request(&self, call_id: &str, argv: &[&str]) -> ExecRequest {
        let mut request = ExecRequest::new(
            argv[0],
            argv[1..].iter().map(|argument| (*argument).to_owned()).collect(),
            &self.workspace,
        );
        request.call_id = call_id.to_owned();
        request.timeout = std::time::Duration::from_secs(20);
        request
    }

    /// Replaces `{workspace}`, `{outside}`, `{home}` in a fixture string.
    pub fn expand(&self, text: &str) -> String {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
        text.replace("{workspace}", &self.workspace.display().to_string())
            .replace("{outside}", &self.outside.display().to_string())
            .replace("{home}", &home)
    }

    /// Every audit record written so far.
    pub fn audit_records(&self) -> Vec<AuditRecord> {
        std::fs::read_to_string(&self.audit_path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The one audit record of `call_id`.
    pub fn audit_record(&self, call_id: &str) -> AuditRecord {
        let records: Vec<AuditRecord> =
            self.audit_records().into_iter().filter(|record| record.call_id == call_id).collect();
        assert_eq!(records.len(), 1, "exactly one audit record for {call_id}");
        records.into_iter().next().unwrap()
    }
}

/// The example binary cargo builds next to the test binaries (`target/<profile>/examples/run`).
pub fn run_example() -> PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    let profile_directory = test_binary.parent().unwrap().parent().unwrap();
    let example = profile_directory.join("examples").join("run");
    assert!(example.is_file(), "cargo test builds the example at {}", example.display());
    example
}

pub fn helper() -> SandboxHelper {
    SandboxHelper::at(env!("CARGO_BIN_EXE_tools-runtime-sandbox"))
}

pub fn ran(outcome: ExecOutcome) -> ExecResult {
    match outcome {
        ExecOutcome::Ran(result) => result,
        ExecOutcome::Refused(refusal) => panic!("expected the command to run, got {refusal:?}"),
    }
}

pub fn refused(outcome: ExecOutcome) -> Refusal {
    match outcome {
        ExecOutcome::Refused(refusal) => refusal,
        ExecOutcome::Ran(result) => panic!("expected a refusal, the command ran: {result:?}"),
    }
}

/// What this machine offers, probed without the crate under test.
#[derive(Debug, Clone, Copy)]
pub struct MachineLayers {
    pub root: bool,
    pub landlock: bool,
    pub seccomp: bool,
    pub network_namespace: bool,
    pub pid_namespace: bool,
    pub cgroup_pids: bool,
    pub cgroup_memory: bool,
    pub bubblewrap: bool,
}

impl MachineLayers {
    pub fn probe() -> MachineLayers {
        use landlock::{ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};
        let landlock = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|ruleset| ruleset.create())
            .is_ok();
        let seccomp = std::fs::read_to_string("/proc/self/status")
            .map(|status| status.contains("\nSeccomp:"))
            .unwrap_or(false);
        let network_namespace = std::process::Command::new("unshare")
            .args(["-Urn", "true"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let pid_namespace = std::process::Command::new("unshare")
            .args(["-Urpf", "true"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let root = is_root();
        let cgroup = |controller: &str| {
            root && Path::new("/sys/fs/cgroup").join(controller).join("cgroup.procs").exists()
        };
        let bubblewrap = std::process::Command::new("bwrap")
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        MachineLayers {
            root,
            landlock,
            seccomp,
            network_namespace,
            pid_namespace: root || pid_namespace,
            cgroup_pids: cgroup("pids"),
            cgroup_memory: cgroup("memory"),
            bubblewrap,
        }
    }

    pub fn status(available: bool) -> LayerStatus {
        if available { LayerStatus::Active } else { LayerStatus::Unavailable }
    }

    /// Whether the filesystem and network confinement the default policy demands is possible.
    pub fn can_confine(&self) -> bool {
        self.landlock && (self.network_namespace || self.seccomp)
    }

    /// [`MachineLayers::can_confine`], plus what a uid-0 run relies on (seccomp for its rules,
    /// a pids cgroup because `RLIMIT_NPROC` does not count for uid 0).
    pub fn can_confine_for(&self, owner: Owner) -> bool {
        self.can_confine() && (!owner.runs_as_uid0() || (self.seccomp && self.cgroup_pids))
    }
}

/// Asserts `layer` has `status` in `result`'s report and the audit record agrees.
pub fn assert_layer(record: &AuditRecord, layer: Layer, status: LayerStatus) {
    let sandbox = record.sandbox.as_ref().expect("the audit record has a sandbox report");
    assert_eq!(sandbox.status(layer), status, "{layer:?} in {sandbox:?}");
}
