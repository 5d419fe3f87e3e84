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
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

impl Fixture {
    pub fn new() -> Fixture {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::Builder::new().prefix("tools-runtime-test-").tempdir().unwrap();
        let workspace = base.path().join("workspace");
        let outside = base.path().join("outside");
        std::fs::create_dir(&workspace).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(workspace.join("data.txt"), "data\n").unwrap();
        if is_root() {
            let (uid, gid) = tools_runtime::DEFAULT_SANDBOX_USER;
            for path in [&workspace, &workspace.join("data.txt")] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
            }
        }
        let audit_path = base.path().join("audit.jsonl");
        let audit = Arc::new(JsonlAuditLog::open(&audit_path).unwrap());
        Fixture { base, workspace, outside, audit_path, audit }
    }

    /// A fixture whose workspace holds a skill folder and `.git/hooks`, for protected paths.
    pub fn with_protected_tree() -> Fixture {
        let fixture = Fixture::new();
        for directory in ["skill/scripts", ".git/hooks"] {
            std::fs::create_dir_all(fixture.workspace.join(directory)).unwrap();
        }
        std::fs::write(fixture.workspace.join("skill/SKILL.md"), "---\nname: skill\n---\n")
            .unwrap();
        std::fs::write(fixture.workspace.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        if is_root() {
            let (uid, gid) = tools_runtime::DEFAULT_SANDBOX_USER;
            for path in [
                "skill",
                "skill/scripts",
                "skill/SKILL.md",
                ".git",
                ".git/hooks",
                ".git/hooks/pre-commit",
            ] {
                std::os::unix::fs::chown(fixture.workspace.join(path), Some(uid), Some(gid))
                    .unwrap();
            }
        }
        fixture
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
}

/// Asserts `layer` has `status` in `result`'s report and the audit record agrees.
pub fn assert_layer(record: &AuditRecord, layer: Layer, status: LayerStatus) {
    let sandbox = record.sandbox.as_ref().expect("the audit record has a sandbox report");
    assert_eq!(sandbox.status(layer), status, "{layer:?} in {sandbox:?}");
}
