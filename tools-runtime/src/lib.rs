//! Sandboxed script execution for skills-agent: permission merging, approvals, timeouts,
//! output truncation, layered confinement and one audit record per execution; long-running
//! confined services (MCP stdio servers) and approval for actions that are not commands.
//!
//! **Platform: Linux only.** The confinement layers are Linux kernel interfaces (Landlock,
//! seccomp, namespaces, cgroups, `prctl`, `/proc`); on any other target the crate stops with a
//! `compile_error!` instead of running commands unconfined.
//!
//! # Design
//!
//! [`Runtime::run`] takes an [`ExecRequest`] through four gates and returns an
//! [`ExecOutcome`]: either the command ran ([`ExecResult`]) or it was refused ([`Refusal`],
//! an observation for the model, never a crash).
//!
//! 1. **Policy.** The skill's `allowed-tools` ([`RuleSet::from_allowed_tools`]) and the user's
//!    [`RuleSet`] each judge the argv by longest command prefix; the strictest decision wins
//!    (`forbidden` > `prompt` > `allow`).
//! 2. **Approval.** The [`ApprovalMode`] says when the async [`Approver`] is asked; a denial or
//!    a silence longer than the approval timeout is a typed refusal.
//! 3. **Paths.** Workspace roots and the cwd are canonicalised; arguments that name paths must
//!    resolve inside the workspace (symlinks followed, hard-linked files refused).
//! 4. **Sandbox.** The command starts through a freshly exec'd helper process
//!    (`tools-runtime-sandbox`), never through `pre_exec` in this multi-threaded process. The
//!    helper joins per-run cgroups (`pids`, `memory`; cgroup v2 where the unified hierarchy
//!    offers the controller, else v1, named in the report), unshares the network, sets rlimits,
//!    drops to the workspace owner when started as root (every capability set emptied; a
//!    root-owned workspace keeps uid 0 with locked securebits behind a read-only host, an IPC
//!    namespace, narrowed Landlock reads and extra seccomp rules, see the README's "Running as
//!    root"), re-arms the parent-death signal, sets `no_new_privs`, applies Landlock (read where
//!    needed, write only the workspace and a private tmp; TCP and signals scoped) and seccomp
//!    (ptrace, `process_vm_*`, io_uring, mount, bpf, kexec, modules, namespaces, x32 syscall
//!    numbers, and non-Unix sockets when the network is off), closes every inherited file
//!    descriptor above stderr, then `execve`s the command. The direct helper also unshares a
//!    PID namespace and forks its init (PID 1; a helper with more than one thread starts
//!    itself again instead), which takes the privilege
//!    drop and the self-confinement, starts the command as its child and reaps every orphan;
//!    the outer helper waits and ends as the command ended (exit code or signal). Each of
//!    helper and init dies with its parent (`PR_SET_PDEATHSIG`), and the kernel kills every
//!    process left in the namespace when its init ends: a SIGKILLed runtime leaves no
//!    descendant of the command behind, daemons in sessions of their own included. With protected paths (skill folder,
//!    `.git/hooks`) the bubblewrap backend builds the filesystem view instead (`--cap-drop
//!    ALL`, user namespace, read-only binds, each parent directory its own mount point so it
//!    cannot be renamed aside) and the helper runs again inside it.
//!
//! The helper reports every [`Layer`] as active, unavailable, failed or not requested in a
//! [`SandboxReport`]. When root privileges cannot be dropped, or the policy needs network or
//! filesystem confinement and no layer provides it, the helper refuses to `execve` (fail
//! closed).
//!
//! The runtime itself keeps the process hygiene: cleared environment plus an allowlist
//! (secret-looking names never pass), stdin at EOF, its own process group, a timeout that
//! kills the whole group and the cgroup (grandchildren included) and still returns partial
//! output, head + tail capture with an elision marker, and output drained under a deadline.
//! The parent-death signal fires when the thread that forked the helper ends, so every helper
//! is forked on one thread that lives as long as the process (`tools-runtime-spawner`). The
//! calling thread does not matter: a `spawn_blocking` thread, a `Handle::block_on` on a
//! short-lived thread or a worker given up by `block_in_place` may end while a service still
//! runs. The child's pipes still belong to the caller's tokio runtime, which must outlive it.
//!
//! # Services
//!
//! [`Runtime::spawn_service`] starts a long-running process, such as an MCP stdio server,
//! through the same helper, layers, process group and per-run cgroups as a command. The
//! [`ServiceRequest`] looks like an [`ExecRequest`] without timeout, output cap, protected
//! paths or skill rules. The start returns once the helper's report lines are read (the
//! [`Service`]'s `report`), so the caller gets stdin and stdout only after the layers are in
//! place, and nothing but the program writes to them. Stderr is drained in the background into
//! an 8 KiB tail ([`Service::stderr_tail`]). No wall-clock timeout applies, and RLIMIT_CPU
//! defaults to [`SERVICE_CPU_SECONDS`].
//!
//! [`Service::shutdown`] and dropping the [`Service`] kill the group and every cgroup member (a
//! `setsid` grandchild too) and remove the private tmp. [`Service::shutdown_after`] first
//! closes stdin and waits a grace period. The start and the stop are audited.
//!
//! A uid-0 service (root-owned workspace) reads only system directories, the workspace and
//! `read_only_paths`, so a node installed under `/root` needs its prefix there; the start says
//! so when the program is out of reach.
//!
//! [`Runtime::authorize`] gives actions that are not commands, whose policy decision the caller
//! already knows (an MCP tool call), the approval step of `run`: the same mode, approver,
//! timeout and refusal kinds, and one audit record.
//!
//! ```no_run
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//! use tools_runtime::{Runtime, RuntimeConfig, SandboxHelper, ServiceRequest};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = Runtime::new(RuntimeConfig::new(SandboxHelper::locate()?));
//! let mut request = ServiceRequest::new("echo", "cat", Vec::new(), "/work/project");
//! request.read_only_paths.push("/opt/node".into());
//! let mut service = runtime.spawn_service(&request).await?;
//! assert!(service.report.is_active(tools_runtime::Layer::Landlock));
//! let mut stdin = service.take_stdin().ok_or("stdin already taken")?;
//! let mut stdout = BufReader::new(service.take_stdout().ok_or("stdout already taken")?);
//! stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await?;
//! let mut answer = String::new();
//! stdout.read_line(&mut answer).await?;
//! service.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Locating the helper
//!
//! [`RuntimeConfig::helper`] names it explicitly. [`SandboxHelper::locate`] looks for
//! `tools-runtime-sandbox` next to the running binary and in its parent directory (cargo's
//! layout for tests and examples); a binary can also serve as its own helper by calling
//! [`run_sandbox_helper_if_requested`] first in `main` and using [`SandboxHelper::current_exe`].
//!
//! # Example
//!
//! A policy refusal is decided before anything is spawned, so it needs no helper binary:
//!
//! ```
//! use tools_runtime::{
//!     Decision, ExecOutcome, ExecRequest, PrefixRule, RefusalKind, RuleSet, Runtime,
//!     RuntimeConfig, SandboxHelper,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = RuntimeConfig::new(SandboxHelper::at("/usr/libexec/tools-runtime-sandbox"));
//! config.policy.rules = RuleSet {
//!     rules: vec![PrefixRule { prefix: vec!["rm".into()], decision: Decision::Forbidden }],
//!     default: Decision::Allow,
//! };
//! let runtime = Runtime::new(config);
//! // The skill's `allowed-tools` says yes; the user's policy says no; the strictest wins.
//! let mut request = ExecRequest::new("rm", vec!["-rf".into(), "build".into()], std::env::temp_dir());
//! request.skill_rules = Some(RuleSet::from_allowed_tools(&["Bash(rm:*)"]));
//! let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! match tokio.block_on(runtime.run(&request))? {
//!     ExecOutcome::Refused(refusal) => assert_eq!(refusal.kind, RefusalKind::PolicyForbidden),
//!     ExecOutcome::Ran(result) => panic!("must not run: {result:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A sandboxed run looks the same with a real helper (see `examples/run.rs` and the tests):
//! `ExecOutcome::Ran(result)` carries the exit status, the captured output and
//! `result.sandbox`, the [`SandboxReport`].

#[cfg(not(target_os = "linux"))]
compile_error!(
    "tools-runtime is Linux-only: its sandbox layers (Landlock, seccomp, namespaces, cgroups, \
     prctl, /proc) are Linux kernel interfaces, and it never runs commands unconfined"
);

mod audit;
mod cgroup;
mod environment;
mod error;
mod exec;
mod helper;
mod output;
mod paths;
mod policy;
mod read_set;
mod report;
mod root_mode;
mod runtime;
mod service;
mod spec;
mod supervise;

pub use audit::{AuditRecord, AuditSink, JsonlAuditLog};
pub use environment::{EnvPolicy, is_secret_name};
pub use error::{Error, Result};
pub use exec::{ExecOutcome, ExecRequest, ExecResult, Limits, Refusal, RefusalKind};
pub use helper::{run_sandbox_helper_if_requested, sandbox_helper_main};
pub use output::{CapturedText, HeadTailBuffer};
pub use policy::{
    ApprovalAnswer, ApprovalMode, ApprovalRequest, Approver, Decision, MergedDecision, PrefixRule,
    RuleMatch, RuleSet, SYSTEM_PROGRAM_DIRECTORIES, UserPolicy, merge_decisions,
};
pub use report::{Backend, CgroupVersion, CgroupVersions, Layer, LayerStatus, SandboxReport};
pub use runtime::{BackendChoice, DEFAULT_SANDBOX_USER, Runtime, RuntimeConfig, SandboxHelper};
pub use service::{SERVICE_CPU_SECONDS, Service, ServiceRequest};
pub use spec::{HELPER_MODE_ARGUMENT, Rlimits};

/// The README's Rust examples, compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme_doctest {}
