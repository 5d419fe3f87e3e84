//! The sandbox helper: a freshly exec'd, single-threaded process that confines itself and then
//! `execve`s the command.
//!
//! The layers are applied here, never in `pre_exec` of the runtime: the runtime is a
//! multi-threaded tokio process, and between `fork` and `exec` only async-signal-safe calls are
//! allowed there. The helper is its own program (the `tools-runtime-sandbox` binary, or any
//! binary that calls [`run_sandbox_helper_if_requested`] first thing in `main`), so it can
//! allocate, read `/proc`, build BPF programs and report errors freely.
//!
//! Order matters: join the cgroups and unshare the network and the PID namespace while still
//! root, set rlimits, drop to the unprivileged uid/gid (which clears every capability), re-arm
//! the parent-death signal (a credential change clears it), set `no_new_privs`, then Landlock,
//! then seccomp last (it denies syscalls the earlier steps need). Everything goes through safe
//! wrappers (`nix`, `landlock`, `seccompiler`) but one `fork` ([`fork_init`] says why it is
//! sound).
//!
//! The direct backend runs in two processes, because the first child after
//! `unshare(CLONE_NEWPID)` is the namespace's PID 1: the outer helper applies the namespace
//! layers and forks the init ([`Stage::InsidePidNamespace`]; a multi-threaded helper starts
//! its binary again instead), which applies the rest, writes the report line, starts the
//! command (PID 2) and reaps until it ends. The init cannot die by its own signal (PID 1
//! ignores it), so it writes how the command ended on a pipe and the outer helper ends the same
//! way. Where no PID namespace can be made, the outer helper does it all and `execve`s the
//! command itself, as before.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use nix::libc;
use nix::sys::resource::{Resource, setrlimit};
use nix::unistd::{Gid, Uid};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::report::{Backend, Layer, LayerStatus, SandboxReport};
use crate::root_mode;
use crate::spec::{
    HELPER_MODE_ARGUMENT, HelperPlan, HelperReport, REPORT_LINE_PREFIX, RefusalCause, Stage,
};

/// Exit status of the helper when it could not run the command (bad plan, failed `execve`).
const HELPER_FAILURE_EXIT: u8 = 127;

/// Runs the sandbox helper when this process was started in helper mode, and returns its exit
/// code; returns `None` for a normal start.
///
/// Call it first thing in `main` of any binary that should double as the helper (see
/// [`SandboxHelper::current_exe`](crate::SandboxHelper::current_exe)):
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = tools_runtime::run_sandbox_helper_if_requested() {
///         return code;
///     }
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn run_sandbox_helper_if_requested() -> Option<ExitCode> {
    let mut arguments = std::env::args_os().skip(1);
    if arguments.next()? != HELPER_MODE_ARGUMENT {
        return None;
    }
    Some(sandbox_helper_main(arguments.next().as_deref()))
}

/// The helper's `main`: parses the plan, confines itself, `execve`s. Returns only on failure.
pub fn sandbox_helper_main(plan_argument: Option<&OsStr>) -> ExitCode {
    let plan: HelperPlan =
        match plan_argument.and_then(|argument| argument.to_str()).map(serde_json::from_str) {
            Some(Ok(plan)) => plan,
            Some(Err(error)) => return fail(&format!("invalid sandbox plan: {error}")),
            None => return fail("missing sandbox plan argument"),
        };
    run_plan(&plan, None)
}

/// Applies the plan's stage and runs the command. `forked_status` is the status pipe of a PID
/// namespace's init forked from the outer helper (an exec'd init reopens the descriptor its
/// plan names).
fn run_plan(plan: &HelperPlan, forked_status: Option<std::fs::File>) -> ExitCode {
    let backend = match plan.stage {
        Stage::Everything | Stage::InsidePidNamespace => Backend::Direct,
        Stage::OutsideBubblewrap | Stage::InsideBubblewrap => Backend::Bubblewrap,
    };
    let mut report = SandboxReport::new(backend);
    let mut status_file: Option<std::fs::File> = None;
    match (plan.stage, &plan.pid_namespace_init) {
        (Stage::Everything, _) => {
            apply_namespace_layers(plan, &mut report);
            if report.is_active(Layer::PidNamespace) {
                return match start_pid_namespace_init(plan, &report) {
                    Ok(code) => code,
                    Err(reason) => refuse(report, reason),
                };
            }
            apply_credential_layers(plan, &mut report);
            apply_self_confinement(plan, &mut report);
        }
        (Stage::InsidePidNamespace, Some(init)) => {
            report = init.report.clone();
            arm_parent_death_signal(plan, &mut report);
            // A forked init holds the close-on-exec writing end itself; an exec'd one reopens
            // it through `/proc` (a new, close-on-exec descriptor this process owns), and the
            // inherited one goes with the other inherited descriptors.
            let path = format!("/proc/self/fd/{}", init.status_descriptor);
            match forked_status
                .map_or_else(|| std::fs::OpenOptions::new().write(true).open(&path), Ok)
            {
                Ok(file) => status_file = Some(file),
                Err(error) => {
                    let reason = format!("cannot open the pid namespace's status pipe: {error}");
                    return refuse(report, reason);
                }
            }
            apply_credential_layers(plan, &mut report);
            apply_self_confinement(plan, &mut report);
        }
        (Stage::InsidePidNamespace, None) => {
            return fail("the pid namespace's init needs its parent's report");
        }
        (Stage::OutsideBubblewrap, _) => {
            apply_namespace_layers(plan, &mut report);
            apply_credential_layers(plan, &mut report);
        }
        (Stage::InsideBubblewrap, _) => {
            report.set(Layer::Bubblewrap, LayerStatus::Active, None);
            let note = "bubblewrap --unshare-pid --die-with-parent".to_owned();
            report.set(Layer::PidNamespace, LayerStatus::Active, Some(note));
            apply_self_confinement(plan, &mut report);
        }
    }
    let status_descriptor = status_file.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    // Last step before the report: whatever descriptor the runtime's process inherited without
    // close-on-exec (a log file, a socket) must not reach the command, past every layer.
    let (refused, cause) = match fail_closed_reason(plan, &report) {
        Some(reason) => (Some(reason), RefusalCause::Sandbox),
        None => match working_directory_refusal(&plan.cwd) {
            Some(reason) => (Some(reason), RefusalCause::WorkingDirectory),
            None => match program_refusal(plan) {
                Some(reason) => (Some(reason), RefusalCause::Program),
                None => {
                    (close_inherited_descriptors(status_descriptor).err(), RefusalCause::Sandbox)
                }
            },
        },
    };
    let line = HelperReport { report, refused: refused.clone(), cause };
    if let Err(error) = write_report_line(&line) {
        return fail(&format!("cannot write the sandbox report: {error}"));
    }
    if refused.is_some() {
        return ExitCode::from(HELPER_FAILURE_EXIT);
    }
    let error = match plan.stage {
        Stage::Everything | Stage::InsideBubblewrap => std::process::Command::new(&plan.program)
            .args(&plan.args)
            .env_clear()
            .envs(&plan.environment)
            .current_dir(&plan.cwd)
            .exec(),
        Stage::OutsideBubblewrap => exec_bubblewrap(plan),
        Stage::InsidePidNamespace => match run_as_pid_namespace_init(plan, status_file) {
            Ok(code) => return code,
            Err(error) => error,
        },
    };
    fail(&format!("cannot execute {}: {error}", plan.program.display()))
}

/// Writes a report line that refuses to run the command, and fails.
fn refuse(report: SandboxReport, reason: String) -> ExitCode {
    let line = HelperReport { report, refused: Some(reason), cause: RefusalCause::Sandbox };
    if let Err(error) = write_report_line(&line) {
        return fail(&format!("cannot write the sandbox report: {error}"));
    }
    ExitCode::from(HELPER_FAILURE_EXIT)
}

/// The outer helper, once the PID namespace exists: starts the namespace's init (its first
/// child is PID 1), waits for it, and ends as the command ended — with its exit code, or killed
/// by its signal (which the init, being PID 1, cannot do to itself). While it waits, its
/// parent-death signal still ties it to the runtime, and the init's ties the init to it: when
/// the runtime dies, the chain ends with the init, and the kernel kills everything left in the
/// namespace.
///
/// The init is this process forked ([`fork_init`]) when it is single-threaded, as a helper
/// started first thing in `main` is; otherwise the helper binary started again.
fn start_pid_namespace_init(plan: &HelperPlan, report: &SandboxReport) -> Result<ExitCode, String> {
    use nix::fcntl::OFlag;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let (status_reader, status_writer) = nix::unistd::pipe2(OFlag::O_CLOEXEC)
        .map_err(|error| format!("cannot make the pid namespace's status pipe: {error}"))?;
    let mut init_plan = plan.clone();
    init_plan.stage = Stage::InsidePidNamespace;
    init_plan.parent_pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    init_plan.pid_namespace_init = Some(crate::spec::PidNamespaceInit {
        report: report.clone(),
        status_descriptor: status_writer.as_raw_fd(),
    });
    let init = if single_threaded() {
        match fork_init()? {
            Some(pid) => pid,
            // The init: every layer left, the command, how it ended on the pipe.
            None => {
                drop(status_reader);
                return Ok(run_plan(&init_plan, Some(std::fs::File::from(status_writer))));
            }
        }
    } else {
        exec_init(plan, &init_plan, &status_writer)?
    };
    drop(status_writer);
    let mut status = String::new();
    // End of file when the init exits (or dies): whatever it wrote before is the command's end.
    let _ = std::fs::File::from(status_reader).read_to_string(&mut status);
    let (init_code, init_signal) = wait_for_init(init)?;
    let signal = match CommandEnd::parse(&status) {
        Some(CommandEnd::Exited(code)) => return Ok(ExitCode::from(code)),
        Some(CommandEnd::Signalled(signal)) => signal,
        None => match (init_code, init_signal) {
            (Some(code), _) => return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1))),
            (None, Some(signal)) => signal,
            (None, None) => return Ok(ExitCode::from(HELPER_FAILURE_EXIT)),
        },
    };
    // Core dumps stay off for this root process too.
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    if let Ok(signal) = nix::sys::signal::Signal::try_from(signal) {
        let _ = nix::sys::signal::raise(signal);
    }
    // A signal whose default is to be ignored: the shell's convention.
    Ok(ExitCode::from(u8::try_from(128 + signal).unwrap_or(HELPER_FAILURE_EXIT)))
}

/// Waits for the init, forked or started, to end: its exit code, or the signal that killed it.
fn wait_for_init(pid: nix::unistd::Pid) -> Result<(Option<i32>, Option<i32>), String> {
    use nix::sys::wait::{WaitStatus, waitpid};
    loop {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => return Ok((Some(code), None)),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Ok((None, Some(signal as i32))),
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(format!("cannot wait for the init: {error}")),
        }
    }
}

/// Whether this process has one thread (`Threads:` of `/proc/self/status`), so that a fork
/// leaves no lock held by a thread the child does not have.
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status.lines().any(|line| line.strip_prefix("Threads:").is_some_and(|n| n.trim() == "1"))
    })
}

/// Forks this process as the PID namespace's init: one `fork` instead of starting the helper
/// binary again (an `execve` of a large binary and its loading, 2–3 ms a run here). The init's
/// pid in the parent, `None` in the init.
///
/// The one `unsafe` of the crate. `fork` is unsafe because the child of a multi-threaded
/// process may only make async-signal-safe calls (another thread may have held a lock, the
/// allocator's among them, when it was copied). The helper calls this only when it has a
/// single thread ([`single_threaded`]), as a freshly exec'd helper does: its child is an
/// ordinary copy of it and may allocate, read `/proc` and build filters as the helper itself
/// does.
#[allow(unsafe_code)]
fn fork_init() -> Result<Option<nix::unistd::Pid>, String> {
    // SAFETY: the process is single-threaded (checked by the caller), so the child's memory
    // holds no lock another thread owned, and the child continues as an ordinary process.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { child }) => Ok(Some(child)),
        Ok(nix::unistd::ForkResult::Child) => Ok(None),
        Err(error) => Err(format!("cannot fork the pid namespace's init: {error}")),
    }
}

/// Starts the helper binary again as the PID namespace's init, passing it the writing end of
/// the status pipe (the only descriptor it inherits; the reading end stays close-on-exec).
fn exec_init(
    plan: &HelperPlan,
    init_plan: &HelperPlan,
    status_writer: &std::os::fd::OwnedFd,
) -> Result<nix::unistd::Pid, String> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(status_writer, FcntlArg::F_SETFD(FdFlag::empty()))
        .map_err(|error| format!("cannot pass the status pipe to the pid namespace: {error}"))?;
    let plan_json = serde_json::to_string(init_plan)
        .map_err(|error| format!("cannot encode the pid namespace's plan: {error}"))?;
    let child = std::process::Command::new(&plan.helper_program)
        .arg(HELPER_MODE_ARGUMENT)
        .arg(plan_json)
        .env_clear()
        .spawn()
        .map_err(|error| {
            format!(
                "cannot start the pid namespace's init {}: {error}",
                plan.helper_program.display()
            )
        })?;
    // Waited for by pid, as a forked init is (dropping the handle neither waits nor kills).
    Ok(nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX)))
}

/// How the command ended, as the init tells the outer helper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommandEnd {
    Exited(u8),
    Signalled(i32),
}

impl CommandEnd {
    fn parse(text: &str) -> Option<CommandEnd> {
        let (kind, number) = text.trim().split_once(' ')?;
        match kind {
            "exit" => number.parse().ok().map(CommandEnd::Exited),
            "signal" => number.parse().ok().map(CommandEnd::Signalled),
            _ => None,
        }
    }

    fn render(self) -> String {
        match self {
            CommandEnd::Exited(code) => format!("exit {code}\n"),
            CommandEnd::Signalled(signal) => format!("signal {signal}\n"),
        }
    }
}

/// The PID namespace's init, every layer in place: starts the command as its only child (PID
/// 2), reaps it and every orphan re-parented to it, and when the command has ended, writes how
/// on the status descriptor and exits — the kernel then kills whatever the command left
/// behind. Returns an error only when the command could not be started.
fn run_as_pid_namespace_init(
    plan: &HelperPlan,
    status_file: Option<std::fs::File>,
) -> Result<ExitCode, std::io::Error> {
    use nix::sys::wait::{WaitStatus, waitpid};
    let command = std::process::Command::new(&plan.program)
        .args(&plan.args)
        .env_clear()
        .envs(&plan.environment)
        .current_dir(&plan.cwd)
        .spawn()?;
    let command_pid = nix::unistd::Pid::from_raw(i32::try_from(command.id()).unwrap_or(i32::MAX));
    let end = loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == command_pid => {
                break CommandEnd::Exited(u8::try_from(code).unwrap_or(u8::MAX));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == command_pid => {
                break CommandEnd::Signalled(signal as i32);
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            // No child left without having seen the command's end: nothing to report.
            Err(_) => break CommandEnd::Exited(HELPER_FAILURE_EXIT),
        }
    };
    if let Some(mut file) = status_file {
        // Nobody to tell if this fails: the outer helper then ends as this process does.
        let _ = file.write_all(end.render().as_bytes());
    }
    let code = match end {
        CommandEnd::Exited(code) => code,
        CommandEnd::Signalled(signal) => u8::try_from(128 + signal).unwrap_or(HELPER_FAILURE_EXIT),
    };
    Ok(ExitCode::from(code))
}

/// Why the command's user (the helper, after every layer) cannot enter `cwd`: which directory
/// on the way stops it, its owner and mode, and what to do. `None` when it can.
fn working_directory_refusal(cwd: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let error = std::env::set_current_dir(cwd).err()?;
    let mut prefixes: Vec<&Path> = cwd.ancestors().collect();
    prefixes.reverse();
    let blocker = prefixes
        .into_iter()
        .find(|prefix| std::env::set_current_dir(prefix).is_err())
        .unwrap_or(cwd);
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    let detail = match std::fs::metadata(blocker) {
        Ok(metadata) => format!(
            "{} (owner uid {}, gid {}, mode {:o})",
            blocker.display(),
            metadata.uid(),
            metadata.gid(),
            metadata.mode() & 0o7777
        ),
        Err(_) => blocker.display().to_string(),
    };
    Some(format!(
        "the command's user (uid {uid}, gid {gid}) cannot enter the working directory {}: {error} \
         at {detail}; make the workspace and every directory above it enterable by uid {uid} \
         (e.g. chown the workspace to that user, chmod o+x the directory), or keep the \
         runtime's default of running as the workspace owner",
        cwd.display()
    ))
}

/// Why the command's user (the helper, after every layer, in the working directory) cannot
/// execute the program, looked up in the plan's `PATH` as `execve` will; `None` when it can, or
/// when the plan does not ask (`check_program`) or bwrap runs next.
fn program_refusal(plan: &HelperPlan) -> Option<String> {
    if !plan.check_program || plan.stage == Stage::OutsideBubblewrap {
        return None;
    }
    let uid = nix::unistd::geteuid();
    let search_path = plan.environment.get("PATH").map(String::as_str).unwrap_or_default();
    let candidates: Vec<PathBuf> = if plan.program.components().count() > 1 {
        vec![plan.program.clone()]
    } else {
        std::env::split_paths(search_path).map(|directory| directory.join(&plan.program)).collect()
    };
    let mut blocked = None;
    for candidate in &candidates {
        match std::fs::metadata(candidate) {
            Ok(metadata) if metadata.is_file() => {
                return nix::unistd::access(candidate, nix::unistd::AccessFlags::X_OK).err().map(
                    |error| {
                        format!(
                            "uid {uid} cannot execute {}: {error}; make it executable by that \
                             user, or install the program where it can (a system directory)",
                            candidate.display()
                        )
                    },
                );
            }
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                blocked.get_or_insert_with(|| (candidate.clone(), error));
            }
        }
    }
    Some(match blocked {
        Some((candidate, error)) => format!(
            "uid {uid} cannot reach {}: {error}; make it and every directory above it readable \
             by that user (or list its install directory in read_only_paths), or install the \
             program in a system directory",
            candidate.display()
        ),
        None => format!(
            "program `{}` not found for uid {uid} (PATH {search_path:?})",
            plan.program.display()
        ),
    })
}

/// Closes every descriptor above stderr but `keep` (the PID namespace init's status pipe, which
/// is close-on-exec). `/proc/self/fd` lists them, including any numbered above the lowered
/// `RLIMIT_NOFILE`; an unreadable list is a refusal, not a guess.
fn close_inherited_descriptors(keep: Option<i32>) -> Result<(), String> {
    let descriptors: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .and_then(|entries| {
            entries
                .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().parse().ok()))
                .collect::<std::io::Result<Vec<Option<i32>>>>()
        })
        .map_err(|error| format!("cannot list inherited file descriptors: {error}"))?
        .into_iter()
        .flatten()
        .filter(|descriptor| *descriptor > 2 && Some(*descriptor) != keep)
        .collect();
    for descriptor in descriptors {
        match nix::unistd::close(descriptor) {
            // EBADF: the directory stream that listed them, already closed.
            Ok(()) | Err(nix::errno::Errno::EBADF) => {}
            Err(error) => {
                return Err(format!(
                    "cannot close inherited file descriptor {descriptor}: {error}"
                ));
            }
        }
    }
    Ok(())
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "tools-runtime-sandbox: {message}");
    ExitCode::from(HELPER_FAILURE_EXIT)
}

fn write_report_line(line: &HelperReport) -> std::io::Result<()> {
    let mut bytes = REPORT_LINE_PREFIX.to_vec();
    bytes.extend(serde_json::to_vec(line).map_err(std::io::Error::other)?);
    bytes.push(b'\n');
    let mut stderr = std::io::stderr().lock();
    stderr.write_all(&bytes)?;
    stderr.flush()
}

fn exec_bubblewrap(plan: &HelperPlan) -> std::io::Error {
    let mut inner = plan.clone();
    inner.stage = Stage::InsideBubblewrap;
    let inner_json = match serde_json::to_string(&inner) {
        Ok(json) => json,
        Err(error) => return std::io::Error::other(error),
    };
    let Some((bwrap, bwrap_args)) = plan.bubblewrap_argv.split_first() else {
        return std::io::Error::other("empty bubblewrap command line");
    };
    std::process::Command::new(bwrap)
        .args(bwrap_args)
        .env_clear()
        .arg("--")
        .arg(&plan.helper_program)
        .arg(HELPER_MODE_ARGUMENT)
        .arg(inner_json)
        .exec()
}

/// Why the command must not run: root privileges could not be dropped, or a confinement the
/// policy demands has no active layer.
fn fail_closed_reason(plan: &HelperPlan, report: &SandboxReport) -> Option<String> {
    let drops_privileges = match plan.stage {
        Stage::Everything | Stage::OutsideBubblewrap | Stage::InsidePidNamespace => {
            plan.run_as.is_some()
        }
        Stage::InsideBubblewrap => false,
    };
    if drops_privileges && !report.is_active(Layer::DropPrivileges) {
        let detail = report.notes.get(&Layer::DropPrivileges).cloned().unwrap_or_default();
        return Some(format!("refusing to run as root: {detail}"));
    }
    if plan.stage == Stage::OutsideBubblewrap {
        // The inner stage checks the filesystem and network layers it applies.
        return None;
    }
    if plan.root_without_capabilities {
        // uid 0 owns every root-owned file and process: each of these closes a door that the
        // owner checks no longer close (RLIMIT_NPROC does not count for uid 0 either).
        let needed = [
            Layer::DropPrivileges,
            Layer::NoNewPrivileges,
            Layer::ReadOnlyMounts,
            Layer::IpcNamespace,
            Layer::Landlock,
            Layer::Seccomp,
            Layer::SeccompRootFilter,
            Layer::CgroupPids,
        ];
        if let Some(layer) = needed.into_iter().find(|layer| !report.is_active(*layer)) {
            let detail = report.notes.get(&layer).map(|note| format!(": {note}"));
            return Some(format!(
                "a command in a root-owned workspace runs as uid 0 without capabilities and \
                 needs the {} layer, which is {:?}{}; chown the workspace to an unprivileged \
                 user to run the command as that user instead",
                layer.name(),
                report.status(layer),
                detail.unwrap_or_default()
            ));
        }
    }
    let filesystem_confined =
        report.is_active(Layer::Landlock) || report.is_active(Layer::Bubblewrap);
    if plan.require_filesystem_confinement && !filesystem_confined {
        return Some(
            "filesystem confinement is required but neither landlock nor bubblewrap is active"
                .to_owned(),
        );
    }
    let network_confined =
        report.is_active(Layer::NetworkNamespace) || report.is_active(Layer::SeccompSocketFilter);
    if plan.deny_network && !network_confined {
        return Some(
            "network is denied but neither a network namespace nor the seccomp socket filter \
             is active"
                .to_owned(),
        );
    }
    None
}

/// Parent-death signal, cgroups, network and PID namespaces (direct backend), and for uid-0 runs
/// the mount and IPC namespaces: what the outer helper does before its PID namespace's init
/// (which inherits all of it) starts.
fn apply_namespace_layers(plan: &HelperPlan, report: &mut SandboxReport) {
    arm_parent_death_signal(plan, report);
    for (layer, join) in
        [(Layer::CgroupPids, &plan.cgroup_pids), (Layer::CgroupMemory, &plan.cgroup_memory)]
    {
        let Some(join) = join else {
            let reason = plan.cgroup_unavailable.get(&layer).cloned();
            let reason = reason.unwrap_or_else(|| "no writable cgroup hierarchy".to_owned());
            report.set(layer, LayerStatus::Unavailable, Some(reason));
            continue;
        };
        // The note names the hierarchy the run's cgroup was made under, not the run's own
        // directory: a report is recorded (agent-core's events), and a name that changes from
        // run to run would make two runs of the same work differ.
        let run_directory = join.procs.parent().unwrap_or(&join.procs);
        let hierarchy = run_directory.parent().unwrap_or(run_directory).display();
        match std::fs::write(&join.procs, std::process::id().to_string()) {
            Ok(()) => {
                let note = format!("cgroup {} under {hierarchy}", join.version.name());
                report.set(layer, LayerStatus::Active, Some(note));
                report.cgroup_versions.set(layer, join.version);
            }
            Err(error) => report.set(
                layer,
                LayerStatus::Failed,
                Some(format!("cannot join {}: {error}", join.procs.display())),
            ),
        }
    }
    if plan.deny_network && plan.stage == Stage::Everything {
        unshare_network(report);
    }
    if plan.stage == Stage::Everything {
        unshare_pids(report);
    }
    if plan.root_without_capabilities && nix::unistd::geteuid().is_root() {
        root_mode::isolate_mounts_and_ipc(&plan.landlock.writable, &plan.read_only_binds, report);
    }
}

/// Rlimits, privilege drop, and the parent-death signal again (a credential change clears it).
fn apply_credential_layers(plan: &HelperPlan, report: &mut SandboxReport) {
    apply_rlimits(plan, report);
    drop_privileges(plan, report);
    // A credential change clears the parent-death signal: arm it again.
    arm_parent_death_signal(plan, report);
}

fn arm_parent_death_signal(plan: &HelperPlan, report: &mut SandboxReport) {
    match nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL) {
        Ok(()) if parent_pid(plan) == Some(plan.parent_pid) => {
            report.set(Layer::ParentDeathSignal, LayerStatus::Active, None);
        }
        Ok(()) => {
            // The runtime died before the signal was armed: nobody waits for this command.
            std::process::exit(i32::from(HELPER_FAILURE_EXIT));
        }
        Err(error) => report.set(
            Layer::ParentDeathSignal,
            LayerStatus::Failed,
            Some(format!("prctl(PR_SET_PDEATHSIG): {error}")),
        ),
    }
}

/// The parent's pid as the runtime sees it. Inside a PID namespace `getppid` says 0 (the
/// parent is outside), but `/proc` — the host's, mounted in the host's namespace — still
/// names it.
fn parent_pid(plan: &HelperPlan) -> Option<i32> {
    if plan.stage != Stage::InsidePidNamespace {
        return Some(nix::unistd::getppid().as_raw());
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("PPid:"))?;
    line.trim().parse().ok()
}

/// A new PID namespace for the helper's next child, the command's init. As root directly;
/// otherwise inside the user namespace made for the network namespace, or a new one.
fn unshare_pids(report: &mut SandboxReport) {
    use nix::sched::{CloneFlags, unshare};
    let in_own_user_namespace = report.is_active(Layer::NetworkNamespace);
    let result = if nix::unistd::geteuid().is_root() || in_own_user_namespace {
        unshare(CloneFlags::CLONE_NEWPID).map_err(|error| format!("unshare(CLONE_NEWPID): {error}"))
    } else {
        enter_user_namespace(CloneFlags::CLONE_NEWPID, "CLONE_NEWPID")
    };
    match result {
        Ok(()) => report.set(Layer::PidNamespace, LayerStatus::Active, None),
        Err(reason) => report.set(Layer::PidNamespace, LayerStatus::Unavailable, Some(reason)),
    }
}

/// Unprivileged: a user namespace (mapping only this uid and gid) gives the right to create
/// the other namespaces in `flags`.
fn enter_user_namespace(flags: nix::sched::CloneFlags, name: &str) -> Result<(), String> {
    use nix::sched::{CloneFlags, unshare};
    let euid = nix::unistd::geteuid();
    let egid = nix::unistd::getegid();
    unshare(CloneFlags::CLONE_NEWUSER | flags)
        .map_err(|error| format!("unshare(CLONE_NEWUSER | {name}): {error}"))
        .and_then(|()| {
            std::fs::write("/proc/self/setgroups", "deny")
                .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{euid} {euid} 1")))
                .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{egid} {egid} 1")))
                .map_err(|error| format!("user namespace id maps: {error}"))
        })
}

fn unshare_network(report: &mut SandboxReport) {
    use nix::sched::{CloneFlags, unshare};
    let result = if nix::unistd::geteuid().is_root() {
        unshare(CloneFlags::CLONE_NEWNET).map_err(|error| format!("unshare(CLONE_NEWNET): {error}"))
    } else {
        enter_user_namespace(CloneFlags::CLONE_NEWNET, "CLONE_NEWNET")
    };
    match result {
        Ok(()) => record_network_namespace(report),
        Err(reason) => report.set(Layer::NetworkNamespace, LayerStatus::Unavailable, Some(reason)),
    }
}

/// Checks from the inside that the only network interface is loopback.
fn record_network_namespace(report: &mut SandboxReport) {
    match std::fs::read_to_string("/proc/net/dev") {
        Ok(table) => {
            let interfaces: Vec<&str> = table
                .lines()
                .skip(2)
                .filter_map(|line| line.split(':').next())
                .map(str::trim)
                .collect();
            if interfaces.iter().all(|name| *name == "lo") {
                report.set(Layer::NetworkNamespace, LayerStatus::Active, None);
            } else {
                report.set(
                    Layer::NetworkNamespace,
                    LayerStatus::Failed,
                    Some(format!("host interfaces visible: {}", interfaces.join(", "))),
                );
            }
        }
        Err(error) => report.set(
            Layer::NetworkNamespace,
            LayerStatus::Failed,
            Some(format!("cannot read /proc/net/dev: {error}")),
        ),
    }
}

fn apply_rlimits(plan: &HelperPlan, report: &mut SandboxReport) {
    let limits = plan.rlimits;
    let settings = [
        (Resource::RLIMIT_CORE, 0, 0),
        (Resource::RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds.saturating_add(1)),
        (Resource::RLIMIT_AS, limits.address_space_bytes, limits.address_space_bytes),
        (Resource::RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        (Resource::RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (Resource::RLIMIT_NPROC, limits.processes, limits.processes),
    ];
    let failures: Vec<String> = settings
        .iter()
        .filter_map(|(resource, soft, hard)| {
            setrlimit(*resource, *soft, *hard).err().map(|error| format!("{resource:?}: {error}"))
        })
        .collect();
    if failures.is_empty() {
        report.set(Layer::Rlimits, LayerStatus::Active, None);
    } else {
        report.set(Layer::Rlimits, LayerStatus::Failed, Some(failures.join("; ")));
    }
}

/// As root: to the planned uid/gid with every capability set emptied. Otherwise: shed the
/// capabilities a fresh user namespace (made for the network namespace) handed over.
fn drop_privileges(plan: &HelperPlan, report: &mut SandboxReport) {
    let euid = nix::unistd::geteuid();
    let result = match plan.run_as {
        Some((0, gid)) if euid.is_root() && plan.root_without_capabilities => {
            drop_to_root_without_capabilities(Gid::from_raw(gid))
        }
        Some((uid, gid)) if euid.is_root() => {
            let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(gid));
            clear_bounding_and_ambient_capabilities()
                .map_err(nix::errno::Errno::from_raw)
                .and_then(|()| nix::unistd::setgroups(&[gid]))
                .and_then(|()| nix::unistd::setresgid(gid, gid, gid))
                .and_then(|()| nix::unistd::setresuid(uid, uid, uid))
                .map_err(|error| format!("cannot drop to uid {uid} gid {gid}: {error}"))
        }
        // Not root: only the capabilities a fresh user namespace handed us are left to shed.
        Some(_) | None if effective_capabilities() != Some(0) => {
            clear_all_capabilities().map_err(|errno| {
                format!("cannot clear capabilities: {}", nix::errno::Errno::from_raw(errno))
            })
        }
        Some(_) | None => Ok(()),
    };
    if let Err(reason) = result {
        report.set(Layer::DropPrivileges, LayerStatus::Failed, Some(reason));
        return;
    }
    if plan.root_without_capabilities {
        record_root_without_capabilities(report);
        return;
    }
    let capabilities = effective_capabilities();
    let euid = nix::unistd::geteuid();
    match capabilities {
        Some(0) if !euid.is_root() => report.set(
            Layer::DropPrivileges,
            LayerStatus::Active,
            Some(format!("uid {euid} gid {}", nix::unistd::getegid())),
        ),
        Some(capabilities) => report.set(
            Layer::DropPrivileges,
            LayerStatus::Unavailable,
            Some(format!("still uid {euid} with effective capabilities {capabilities:#x}")),
        ),
        None => report.set(
            Layer::DropPrivileges,
            LayerStatus::Failed,
            Some("cannot read CapEff from /proc/self/status".to_owned()),
        ),
    }
}

/// uid 0 stays, every capability goes: bounding and ambient sets emptied and the securebits
/// locked while `CAP_SETPCAP` is held, groups reduced to `gid`, then the permitted, effective
/// and inheritable sets emptied.
fn drop_to_root_without_capabilities(gid: Gid) -> Result<(), String> {
    let errno = |error: rustix::io::Errno| nix::errno::Errno::from_raw(error.raw_os_error());
    clear_bounding_and_ambient_capabilities().map_err(|error| {
        format!("cannot empty the bounding set: {}", nix::errno::Errno::from_raw(error))
    })?;
    rustix::thread::set_capabilities_secure_bits(root_mode::locked_securebits())
        .map_err(|error| format!("cannot lock the securebits: {}", errno(error)))?;
    nix::unistd::setgroups(&[gid])
        .and_then(|()| nix::unistd::setresgid(gid, gid, gid))
        .and_then(|()| nix::unistd::setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0)))
        .map_err(|error| format!("cannot set uid 0 gid {gid}: {error}"))?;
    clear_all_capabilities().map_err(|error| {
        format!("cannot clear capabilities: {}", nix::errno::Errno::from_raw(error))
    })
}

/// Checks from `/proc/self/status` and the securebits that the uid-0 drop holds.
fn record_root_without_capabilities(report: &mut SandboxReport) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let sets = ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"];
    let non_empty: Vec<&str> = sets
        .iter()
        .filter(|set| {
            let value = status.lines().find_map(|line| line.strip_prefix(**set));
            value.and_then(|value| u64::from_str_radix(value.trim(), 16).ok()) != Some(0)
        })
        .copied()
        .collect();
    let securebits = rustix::thread::capabilities_secure_bits().ok();
    let locked = root_mode::locked_securebits();
    match (non_empty.is_empty(), securebits) {
        (true, Some(bits)) if bits.contains(locked) => report.set(
            Layer::DropPrivileges,
            LayerStatus::Active,
            Some(format!(
                "uid 0 gid {} without capabilities, securebits {:#x} locked",
                nix::unistd::getegid(),
                bits.bits()
            )),
        ),
        (_, bits) => report.set(
            Layer::DropPrivileges,
            LayerStatus::Failed,
            Some(format!(
                "uid 0 keeps capabilities in {} or securebits {:?} are not locked",
                non_empty.join(" "),
                bits.map(|bits| bits.bits())
            )),
        ),
    }
}

/// Empties the bounding and ambient sets while `CAP_SETPCAP` is still held, so not even a
/// set-uid-root or file-capability binary can hand capabilities back (belt to `no_new_privs`).
fn clear_bounding_and_ambient_capabilities() -> Result<(), i32> {
    use rustix::thread::{
        CapabilitySet, clear_ambient_capability_set, remove_capability_from_bounding_set,
    };
    for bit in 0..64 {
        let Some(capability) = CapabilitySet::from_bits(1 << bit) else { continue };
        match remove_capability_from_bounding_set(capability) {
            // EINVAL: a capability this kernel does not know.
            Ok(()) | Err(rustix::io::Errno::INVAL) => {}
            Err(error) => return Err(error.raw_os_error()),
        }
    }
    clear_ambient_capability_set().map_err(|error| error.raw_os_error())
}

/// Empties the bounding, ambient, effective, permitted and inheritable sets.
fn clear_all_capabilities() -> Result<(), i32> {
    use rustix::thread::{CapabilitySet, CapabilitySets, set_capabilities};
    clear_bounding_and_ambient_capabilities()?;
    let empty = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, empty).map_err(|error| error.raw_os_error())
}

fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("CapEff:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// `no_new_privs`, Landlock, seccomp; inside bubblewrap, also records its network namespace.
fn apply_self_confinement(plan: &HelperPlan, report: &mut SandboxReport) {
    if plan.stage == Stage::InsideBubblewrap {
        if plan.deny_network {
            record_network_namespace(report);
        }
        report.set(Layer::DropPrivileges, drop_status_inside_bubblewrap(), None);
    }
    match nix::sys::prctl::set_no_new_privs() {
        Ok(()) => report.set(Layer::NoNewPrivileges, LayerStatus::Active, None),
        Err(error) => report.set(
            Layer::NoNewPrivileges,
            LayerStatus::Failed,
            Some(format!("prctl(PR_SET_NO_NEW_PRIVS): {error}")),
        ),
    }
    apply_landlock(plan, report);
    apply_seccomp(plan, report);
}

fn drop_status_inside_bubblewrap() -> LayerStatus {
    match effective_capabilities() {
        Some(0) => LayerStatus::Active,
        Some(_) | None => LayerStatus::Failed,
    }
}

fn apply_landlock(plan: &HelperPlan, report: &mut SandboxReport) {
    let abi = ABI::V6;
    let status = (|| -> Result<RulesetStatus, landlock::RulesetError> {
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?
            .scope(Scope::from_all(abi))?;
        if plan.landlock.deny_tcp {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        let read = AccessFs::from_read(abi);
        let readable: Vec<PathBuf> =
            plan.landlock.readable.iter().filter(|path| path.exists()).cloned().collect();
        let created = ruleset
            .create()?
            .add_rules(path_beneath_rules(&readable, read))?
            .add_rules(path_beneath_rules(&plan.landlock.writable, AccessFs::from_all(abi)))?
            .add_rules(path_beneath_rules(
                ["/dev/null", "/dev/zero", "/dev/full"].map(Path::new),
                AccessFs::from_file(abi),
            ))?;
        Ok(created.restrict_self()?.ruleset)
    })();
    match status {
        Ok(RulesetStatus::FullyEnforced) => report.set(Layer::Landlock, LayerStatus::Active, None),
        // Signal scoping (ABI 6) is what keeps a uid-0 command from killing root's processes.
        Ok(RulesetStatus::PartiallyEnforced) if plan.root_without_capabilities => report.set(
            Layer::Landlock,
            LayerStatus::Unavailable,
            Some(
                "partially enforced: a uid-0 command needs landlock ABI 6 (signal and \
                 abstract-socket scoping)"
                    .to_owned(),
            ),
        ),
        Ok(RulesetStatus::PartiallyEnforced) => report.set(
            Layer::Landlock,
            LayerStatus::Active,
            Some("partially enforced: the kernel lacks some landlock access rights".to_owned()),
        ),
        Ok(RulesetStatus::NotEnforced) => report.set(
            Layer::Landlock,
            LayerStatus::Unavailable,
            Some("the kernel does not enforce landlock".to_owned()),
        ),
        Err(error) => {
            report.set(Layer::Landlock, LayerStatus::Failed, Some(format!("landlock: {error}")));
        }
    }
}

fn apply_seccomp(plan: &HelperPlan, report: &mut SandboxReport) {
    let arch = match TargetArch::try_from(std::env::consts::ARCH) {
        Ok(arch) => arch,
        Err(error) => {
            let note = Some(format!("unsupported architecture: {error}"));
            report.set(Layer::Seccomp, LayerStatus::Unavailable, note.clone());
            if plan.deny_network {
                report.set(Layer::SeccompSocketFilter, LayerStatus::Unavailable, note.clone());
            }
            if plan.root_without_capabilities {
                report.set(Layer::SeccompRootFilter, LayerStatus::Unavailable, note);
            }
            return;
        }
    };
    let result = build_seccomp_filters(plan.deny_network, plan.root_without_capabilities, arch)
        .and_then(|filters| {
            filters.iter().try_for_each(|filter| seccompiler::apply_filter(filter))
        });
    match result {
        Ok(()) => {
            report.set(Layer::Seccomp, LayerStatus::Active, None);
            if plan.deny_network {
                report.set(Layer::SeccompSocketFilter, LayerStatus::Active, None);
            }
            if plan.root_without_capabilities {
                report.set(Layer::SeccompRootFilter, LayerStatus::Active, None);
            }
        }
        Err(error) => {
            let note = Some(format!("seccomp: {error}"));
            report.set(Layer::Seccomp, LayerStatus::Failed, note.clone());
            if plan.deny_network {
                report.set(Layer::SeccompSocketFilter, LayerStatus::Failed, note.clone());
            }
            if plan.root_without_capabilities {
                report.set(Layer::SeccompRootFilter, LayerStatus::Failed, note);
            }
        }
    }
}

/// Syscalls denied with `EPERM`, unconditionally.
const DENIED_SYSCALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
];

/// Two filters: `EPERM` for the deny list (plus non-`AF_UNIX` sockets, namespace-creating
/// `clone` and the terminal-injecting `ioctl`s), and `ENOSYS` for `clone3`, whose flags seccomp cannot inspect (libc then falls back
/// to `clone`, which the first filter checks); on x86_64 a third one for the x32 numbers.
fn build_seccomp_filters(
    deny_network: bool,
    root_without_capabilities: bool,
    arch: TargetArch,
) -> Result<Vec<BpfProgram>, seccompiler::Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED_SYSCALLS.iter().map(|syscall| (*syscall, Vec::new())).collect();
    let namespace_flags = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];
    let clone_rules = namespace_flags
        .iter()
        .map(|flag| {
            let flag = u64::from(flag.unsigned_abs());
            SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)
                .and_then(|condition| SeccompRule::new(vec![condition]))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    // Typing into the terminal of the runtime's session (`TIOCSTI`, CVE-2017-5226 for
    // bubblewrap) or `TIOCLINUX` selection pastes would run keystrokes outside the sandbox.
    let terminal_rules = [libc::TIOCSTI, libc::TIOCLINUX]
        .into_iter()
        .map(|request| {
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
                .and_then(|condition| SeccompRule::new(vec![condition]))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_ioctl, terminal_rules);
    if deny_network {
        let unix = u64::from(libc::AF_UNIX.unsigned_abs());
        let not_unix = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, unix)?;
        rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![not_unix])?]);
    }
    let mut enosys_rules = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    if root_without_capabilities {
        root_mode::add_root_seccomp_rules(&mut rules, deny_network)?;
        // `openat2` hides its mode in a structure seccomp cannot read; libc falls back.
        enosys_rules.insert(libc::SYS_openat2, Vec::new());
    }
    let eperm = SeccompAction::Errno(libc::EPERM.unsigned_abs());
    let main = SeccompFilter::new(rules, SeccompAction::Allow, eperm, arch)?;
    let enosys = SeccompAction::Errno(libc::ENOSYS.unsigned_abs());
    let clone3 = SeccompFilter::new(enosys_rules, SeccompAction::Allow, enosys, arch)?;
    let mut filters: Vec<BpfProgram> = vec![main.try_into()?, clone3.try_into()?];
    if arch == TargetArch::x86_64 {
        filters.push(x32_filter());
    }
    Ok(filters)
}

/// On x86_64 the x32 ABI reaches every syscall again under its number with bit 30 set
/// (`__X32_SYSCALL_BIT`), with the same `AUDIT_ARCH_X86_64`: rules keyed by the plain numbers
/// never see those calls. This hand-written filter denies the whole x32 range with `EPERM`
/// (kernels without x32 would say `ENOSYS`; seccomp answers first either way).
fn x32_filter() -> BpfProgram {
    use seccompiler::sock_filter;
    // `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`, from <linux/audit.h>.
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // Offsets in `struct seccomp_data`: `int nr` at 0, `__u32 arch` at 4.
    const NR_OFFSET: u32 = 0;
    const ARCH_OFFSET: u32 = 4;
    let statement = |code: u32, k: u32| sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| sock_filter { code: code as u16, jt, jf, k };
    vec![
        statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, ARCH_OFFSET),
        jump(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        statement(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_KILL_PROCESS),
        statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, NR_OFFSET),
        jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, X32_SYSCALL_BIT, 0, 1),
        statement(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM.unsigned_abs(),
        ),
        statement(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{LandlockPlan, Rlimits};

    fn plan(deny_network: bool, require_filesystem_confinement: bool) -> HelperPlan {
        HelperPlan {
            stage: Stage::Everything,
            program: "true".into(),
            args: Vec::new(),
            environment: BTreeMap::new(),
            cwd: "/".into(),
            parent_pid: 1,
            cgroup_pids: None,
            cgroup_memory: None,
            cgroup_unavailable: BTreeMap::new(),
            rlimits: Rlimits {
                cpu_seconds: 1,
                address_space_bytes: 1,
                file_size_bytes: 1,
                open_files: 1,
                processes: 1,
            },
            run_as: None,
            root_without_capabilities: false,
            read_only_binds: Vec::new(),
            deny_network,
            landlock: LandlockPlan { readable: Vec::new(), writable: Vec::new(), deny_tcp: false },
            require_filesystem_confinement,
            check_program: false,
            bubblewrap_argv: Vec::new(),
            helper_program: "helper".into(),
            pid_namespace_init: None,
        }
    }

    fn report(active: &[Layer]) -> SandboxReport {
        let mut report = SandboxReport::new(Backend::Direct);
        for layer in Layer::ALL {
            let status = if active.contains(&layer) {
                LayerStatus::Active
            } else {
                LayerStatus::Unavailable
            };
            report.set(layer, status, None);
        }
        report
    }

    #[test]
    fn the_helper_fails_closed_only_when_no_layer_enforces_a_demanded_confinement() {
        let cases = [
            (true, true, vec![Layer::Landlock, Layer::NetworkNamespace], None),
            (true, true, vec![Layer::Bubblewrap, Layer::SeccompSocketFilter], None),
            (
                true,
                true,
                vec![Layer::NetworkNamespace, Layer::Seccomp],
                Some(
                    "filesystem confinement is required but neither landlock nor bubblewrap is active",
                ),
            ),
            (
                true,
                true,
                vec![Layer::Landlock, Layer::Seccomp],
                Some(
                    "network is denied but neither a network namespace nor the seccomp socket \
                     filter is active",
                ),
            ),
            (false, false, Vec::new(), None),
        ];
        for (deny_network, require_filesystem, active, expected) in cases {
            let reason =
                fail_closed_reason(&plan(deny_network, require_filesystem), &report(&active));
            assert_eq!(reason.as_deref(), expected, "{active:?}");
        }
    }

    #[test]
    fn the_helper_refuses_to_run_as_root_when_the_privilege_drop_failed() {
        let mut root_plan = plan(false, false);
        root_plan.run_as = Some((65534, 65534));
        let mut failed = report(&[Layer::Landlock]);
        failed.set(Layer::DropPrivileges, LayerStatus::Failed, Some("setresuid: EPERM".to_owned()));
        assert_eq!(
            fail_closed_reason(&root_plan, &failed).as_deref(),
            Some("refusing to run as root: setresuid: EPERM")
        );
        root_plan.stage = Stage::OutsideBubblewrap;
        assert!(fail_closed_reason(&root_plan, &failed).is_some());
        assert_eq!(fail_closed_reason(&root_plan, &report(&[Layer::DropPrivileges])), None);
    }

    #[test]
    fn a_uid0_run_is_refused_when_a_layer_it_relies_on_is_missing() {
        let mut root_plan = plan(true, true);
        root_plan.run_as = Some((0, 0));
        root_plan.root_without_capabilities = true;
        let needed = [
            Layer::DropPrivileges,
            Layer::NoNewPrivileges,
            Layer::NetworkNamespace,
            Layer::ReadOnlyMounts,
            Layer::IpcNamespace,
            Layer::Landlock,
            Layer::Seccomp,
            Layer::SeccompRootFilter,
            Layer::CgroupPids,
        ];
        assert_eq!(fail_closed_reason(&root_plan, &report(&needed)), None);
        for missing in needed.iter().filter(|layer| **layer != Layer::NetworkNamespace) {
            let active: Vec<Layer> =
                needed.iter().copied().filter(|layer| layer != missing).collect();
            let reason = fail_closed_reason(&root_plan, &report(&active)).unwrap_or_default();
            let expected = match missing {
                Layer::DropPrivileges => "refusing to run as root".to_owned(),
                other => format!("needs the {} layer", other.name()),
            };
            assert!(reason.contains(&expected), "{reason}");
        }
    }

    #[test]
    fn the_init_tells_the_outer_helper_how_the_command_ended() {
        for end in [CommandEnd::Exited(0), CommandEnd::Exited(255), CommandEnd::Signalled(9)] {
            assert_eq!(CommandEnd::parse(&end.render()), Some(end));
        }
        // Nothing written (the init died first) or garbage: the init's own status decides.
        for text in ["", "exit", "exit 256", "signal x", "done 1"] {
            assert_eq!(CommandEnd::parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn the_seccomp_filters_compile_for_this_architecture() {
        let arch = TargetArch::try_from(std::env::consts::ARCH);
        if let Ok(arch) = arch {
            for (deny_network, root) in [(false, false), (true, false), (false, true), (true, true)]
            {
                let filters = build_seccomp_filters(deny_network, root, arch);
                let expected = if arch == TargetArch::x86_64 { 3 } else { 2 };
                assert_eq!(filters.map(|filters| filters.len()).ok(), Some(expected));
            }
        }
    }
}
