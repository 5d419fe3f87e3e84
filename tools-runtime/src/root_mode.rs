//! uid-0 runs: a command in a root-owned workspace keeps uid 0 with no capabilities.
//!
//! Root owns the workspace, so the command runs as root's uid to read and write it, but with
//! every capability set emptied and the securebits locked (no capability comes back through
//! `execve`, set-uid or file capabilities). uid 0 still owns every root-owned file and process,
//! so the owner checks that stopped `nobody` no longer do; this module adds what closes them:
//!
//! * a private mount namespace in which every host mount outside the workspace and the private
//!   tmp is read-only (`chmod`, `chown`, `utimes` and xattrs are not Landlock rights), the
//!   workspace roots bound onto themselves (links and renames out of them cross mounts);
//! * a private IPC namespace (System V IPC and POSIX message queues are owner-checked);
//! * narrowed Landlock read roots, of which `/etc` and the like only with what any user may
//!   read ([`world_readable_rules`]);
//! * seccomp rules ([`add_root_seccomp_rules`]): no `socket(AF_UNIX, …)` (path sockets such
//!   as `docker.sock` are owner-checked and Landlock does not govern `connect`), no set-uid or
//!   set-gid mode bits, no `prlimit`/`setpriority`/scheduler/`ioprio` call aimed at another
//!   process.
//!
//! Signals and ptrace-style access (`/proc/<pid>/environ`, `mem`) to host processes are
//! stopped by Landlock's scoping (ABI 6) and ptrace restrictions, which do not depend on uids
//! or capabilities; the helper refuses a uid-0 run when any of these layers is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use nix::libc;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

use crate::report::{Layer, LayerStatus, SandboxReport};

/// Entries the world-readable walk looks at per root before it stops descending (what it has
/// not seen stays unreadable).
const WALK_BUDGET: usize = 16_384;

/// The securebits a uid-0 command runs with, locked: uid 0 gets no capabilities from
/// `execve`, uid changes do not touch capabilities, `PR_SET_KEEPCAPS` and ambient raises are
/// refused.
pub(crate) fn locked_securebits() -> rustix::thread::CapabilitiesSecureBits {
    use rustix::thread::CapabilitiesSecureBits as Bits;
    Bits::NO_ROOT
        | Bits::NO_ROOT_LOCKED
        | Bits::NO_SETUID_FIXUP
        | Bits::NO_SETUID_FIXUP_LOCKED
        | Bits::KEEP_CAPS_LOCKED
        | Bits::NO_CAP_AMBIENT_RAISE
        | Bits::NO_CAP_AMBIENT_RAISE_LOCKED
}

/// Unshares the IPC and mount namespaces (still root) and makes the host read-only around the
/// writable roots; `read_only` paths inside them are bound read-only, every directory between
/// a writable root and one of them a mount point of its own (a mount point cannot be renamed).
pub(crate) fn isolate_mounts_and_ipc(
    writable: &[PathBuf],
    read_only: &[PathBuf],
    report: &mut SandboxReport,
) {
    match unshare(CloneFlags::CLONE_NEWIPC) {
        Ok(()) => report.set(Layer::IpcNamespace, LayerStatus::Active, None),
        Err(error) => report.set(
            Layer::IpcNamespace,
            LayerStatus::Failed,
            Some(format!("unshare(CLONE_NEWIPC): {error}")),
        ),
    }
    // A link planted in the workspace would hand uid 0 the linked root file: only root may
    // plant one in a root-owned workspace, and other users only while the kernel keeps them
    // from linking files they could not write (`fs.protected_hardlinks`).
    let protected_hardlinks = std::fs::read_to_string("/proc/sys/fs/protected_hardlinks");
    if protected_hardlinks.ok().as_deref().map(str::trim) != Some("1") {
        report.set(
            Layer::ReadOnlyMounts,
            LayerStatus::Failed,
            Some(
                "fs.protected_hardlinks is not 1: any user could link a root-owned file into \
                 the workspace"
                    .to_owned(),
            ),
        );
        return;
    }
    match read_only_host(writable, read_only) {
        Ok(note) => report.set(Layer::ReadOnlyMounts, LayerStatus::Active, Some(note)),
        Err(reason) => report.set(Layer::ReadOnlyMounts, LayerStatus::Failed, Some(reason)),
    }
}

fn read_only_host(writable: &[PathBuf], read_only: &[PathBuf]) -> Result<String, String> {
    let none = None::<&str>;
    unshare(CloneFlags::CLONE_NEWNS).map_err(|error| format!("unshare(CLONE_NEWNS): {error}"))?;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|error| format!("cannot make / private: {error}"))?;
    let bind = |path: &Path| {
        mount(Some(path), path, none, MsFlags::MS_BIND | MsFlags::MS_REC, none)
            .map_err(|error| format!("cannot bind {} onto itself: {error}", path.display()))
    };
    for path in writable {
        bind(path)?;
    }
    let ancestors: BTreeSet<&Path> = read_only
        .iter()
        .flat_map(|path| {
            path.ancestors().skip(1).filter(|ancestor| {
                writable.iter().any(|root| *ancestor != root && ancestor.starts_with(root))
            })
        })
        .collect();
    for ancestor in &ancestors {
        bind(ancestor)?;
    }
    for path in read_only {
        bind(path)?;
        remount_read_only(path, MsFlags::empty())?;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|error| format!("cannot read /proc/self/mountinfo: {error}"))?;
    let (mut remounted, mut unreachable) = (0_usize, 0_usize);
    for (mount_point, flags) in mountinfo.lines().filter_map(parse_mountinfo_line) {
        if writable.iter().any(|root| mount_point.starts_with(root)) {
            continue;
        }
        match remount_read_only(&mount_point, flags) {
            Ok(()) => remounted += 1,
            // Hidden under a later mount: nothing can reach it by path.
            Err(_) if !mount_point.exists() || !is_mount_point(&mount_point) => unreachable += 1,
            Err(reason) => return Err(reason),
        }
    }
    let mut note = format!("{remounted} host mounts read-only");
    if unreachable > 0 {
        note.push_str(&format!(", {unreachable} hidden"));
    }
    if !read_only.is_empty() {
        let paths: Vec<String> = read_only.iter().map(|path| path.display().to_string()).collect();
        note.push_str(&format!("; protected: {}", paths.join(", ")));
    }
    Ok(note)
}

fn remount_read_only(path: &Path, flags: MsFlags) -> Result<(), String> {
    let none = None::<&str>;
    let flags = flags | MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
    mount(none, path, none, flags, none)
        .map_err(|error| format!("cannot remount {} read-only: {error}", path.display()))
}

fn is_mount_point(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(path), path.parent().map(std::fs::metadata)) {
        (Ok(own), Some(Ok(parent))) => own.dev() != parent.dev() || own.ino() == parent.ino(),
        (Ok(_), None) => true,
        (Ok(_), Some(Err(_))) | (Err(_), _) => false,
    }
}

/// The mount point and the per-mount flags of one `/proc/self/mountinfo` line (the flags must
/// be kept on remount: dropping `nosuid` would be a gift).
fn parse_mountinfo_line(line: &str) -> Option<(PathBuf, MsFlags)> {
    let mut fields = line.split(' ');
    let mount_point = fields.nth(4)?;
    let options = fields.next()?;
    let flags = options.split(',').fold(MsFlags::empty(), |flags, option| {
        flags
            | match option {
                "nosuid" => MsFlags::MS_NOSUID,
                "nodev" => MsFlags::MS_NODEV,
                "noexec" => MsFlags::MS_NOEXEC,
                "noatime" => MsFlags::MS_NOATIME,
                "nodiratime" => MsFlags::MS_NODIRATIME,
                "relatime" => MsFlags::MS_RELATIME,
                "strictatime" => MsFlags::MS_STRICTATIME,
                _ => MsFlags::empty(),
            }
    });
    Some((PathBuf::from(unescape_mountinfo(mount_point)), flags))
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
pub(crate) fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escape = bytes.get(index + 1..index + 4).filter(|digits| {
            bytes[index] == b'\\' && digits.iter().all(|digit| (b'0'..=b'7').contains(digit))
        });
        match escape {
            Some(digits) => {
                let value =
                    digits.iter().fold(0_u32, |value, digit| value * 8 + u32::from(digit - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The entries under `roots` a uid-0 command may read: each entry whose whole subtree any user
/// may read (files `o+r`, directories `o+rx`) becomes one rule; a directory with something
/// private in it is split into its public children. Symbolic links get no rule (access through
/// them is checked on their target); sockets, devices and FIFOs none either.
pub(crate) fn world_readable_rules(roots: &[PathBuf]) -> Vec<PathBuf> {
    let unwatched = world_readable_rules_watched(roots, &mut |_| Ok(()));
    unwatched.unwrap_or_default()
}

/// [`world_readable_rules`], calling `watch` on every entry before looking at it (the cache in
/// `read_set` puts an inotify watch there); the first error of `watch` ends the walk.
pub(crate) fn world_readable_rules_watched(
    roots: &[PathBuf],
    watch: &mut dyn FnMut(&Path) -> Result<(), String>,
) -> Result<Vec<PathBuf>, String> {
    let mut rules = Vec::new();
    for root in roots {
        let mut budget = WALK_BUDGET;
        if let Publicity::Whole = walk(root, &mut rules, &mut budget, watch)? {
            rules.push(root.clone());
        }
    }
    Ok(rules)
}

enum Publicity {
    /// Everything beneath may be read by anyone: the caller may cover it with one rule.
    Whole,
    /// Some of it is private; public parts are already in the rules.
    Partial,
}

fn walk(
    path: &Path,
    rules: &mut Vec<PathBuf>,
    budget: &mut usize,
    watch: &mut dyn FnMut(&Path) -> Result<(), String>,
) -> Result<Publicity, String> {
    use std::os::unix::fs::PermissionsExt;
    watch(path)?;
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return Ok(Publicity::Partial) };
    *budget = budget.saturating_sub(1);
    let mode = metadata.permissions().mode();
    let kind = metadata.file_type();
    if kind.is_symlink() {
        return Ok(Publicity::Whole);
    }
    if kind.is_file() {
        return Ok(if mode & 0o004 != 0 { Publicity::Whole } else { Publicity::Partial });
    }
    if !kind.is_dir() || mode & 0o005 != 0o005 || *budget == 0 {
        return Ok(Publicity::Partial);
    }
    let Ok(entries) = std::fs::read_dir(path) else { return Ok(Publicity::Partial) };
    let mut public = Vec::new();
    let mut whole = true;
    for entry in entries {
        let Ok(entry) = entry else {
            whole = false;
            continue;
        };
        let child = entry.path();
        let is_symlink = entry.file_type().is_ok_and(|kind| kind.is_symlink());
        match walk(&child, rules, budget, watch)? {
            Publicity::Whole if !is_symlink => public.push(child),
            Publicity::Whole => {}
            Publicity::Partial => whole = false,
        }
    }
    if whole {
        Ok(Publicity::Whole)
    } else {
        rules.extend(public);
        Ok(Publicity::Partial)
    }
}

/// Adds the uid-0 rules to the `EPERM` filter's map.
pub(crate) fn add_root_seccomp_rules(
    rules: &mut BTreeMap<i64, Vec<SeccompRule>>,
    deny_network: bool,
) -> Result<(), seccompiler::Error> {
    use SeccompCmpArgLen::Dword;
    let rule = |conditions: Vec<SeccompCondition>| {
        SeccompRule::new(conditions).map_err(seccompiler::Error::from)
    };
    let has_bit = |argument: u8, bit: u64| {
        SeccompCondition::new(argument, Dword, SeccompCmpOp::MaskedEq(bit), bit)
            .map_err(seccompiler::Error::from)
    };
    let not_zero = |argument: u8| {
        SeccompCondition::new(argument, Dword, SeccompCmpOp::Ne, 0)
            .map_err(seccompiler::Error::from)
    };
    let special_bits = [u64::from(libc::S_ISUID), u64::from(libc::S_ISGID)];
    // No set-uid or set-gid bit on any file: a root-owned one would be a way back to root
    // for whoever runs it later.
    let mode_rules = |mode_argument: u8| -> Result<Vec<SeccompRule>, seccompiler::Error> {
        special_bits.iter().map(|bit| rule(vec![has_bit(mode_argument, *bit)?])).collect()
    };
    let creating = [libc::O_CREAT, libc::O_TMPFILE].map(|flag| u64::from(flag.unsigned_abs()));
    let open_rules =
        |flags_argument: u8, mode_argument: u8| -> Result<Vec<SeccompRule>, seccompiler::Error> {
            let mut open = Vec::new();
            for flag in creating {
                for bit in special_bits {
                    open.push(rule(vec![
                        has_bit(flags_argument, flag)?,
                        has_bit(mode_argument, bit)?,
                    ])?);
                }
            }
            Ok(open)
        };
    rules.insert(libc::SYS_fchmod, mode_rules(1)?);
    rules.insert(libc::SYS_fchmodat, mode_rules(2)?);
    rules.insert(libc::SYS_fchmodat2, mode_rules(2)?);
    rules.insert(libc::SYS_mknodat, mode_rules(2)?);
    rules.insert(libc::SYS_openat, open_rules(2, 3)?);
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_chmod, mode_rules(1)?);
        rules.insert(libc::SYS_mknod, mode_rules(1)?);
        rules.insert(libc::SYS_creat, mode_rules(1)?);
        rules.insert(libc::SYS_open, open_rules(1, 2)?);
    }
    // Resource and scheduling calls on another process: uid 0 passes their same-owner checks
    // for every root process (lowering the agent's limits would kill it).
    for syscall in [
        libc::SYS_prlimit64,
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        rules.insert(syscall, vec![rule(vec![not_zero(0)?])?]);
    }
    // `PRIO_PROCESS` (0) of itself only: `PRIO_USER` 0 would be every root process.
    rules.insert(libc::SYS_setpriority, vec![rule(vec![not_zero(0)?])?, rule(vec![not_zero(1)?])?]);
    rules.insert(libc::SYS_ioprio_set, vec![rule(vec![not_zero(1)?])?]);
    // Path sockets are owner-checked and Landlock does not govern `connect`: no Unix socket at
    // all (`socketpair` stays). With the network off, no socket at all.
    let unix = u64::from(libc::AF_UNIX.unsigned_abs());
    let socket_rules = if deny_network {
        Vec::new()
    } else {
        let is_unix = SeccompCondition::new(0, Dword, SeccompCmpOp::Eq, unix)
            .map_err(seccompiler::Error::from)?;
        vec![rule(vec![is_unix])?]
    };
    rules.insert(libc::SYS_socket, socket_rules);
    Ok(())
}

/// The hierarchies a uid-0 command may read besides its workspace, private tmp and the
/// request's read-only paths: `system` as given (those that exist), plus the directories of its
/// `PATH` and of an absolute program path unless they are (under) a private place.
pub(crate) fn narrowed_readable_roots(
    system: &[PathBuf],
    search_path: Option<&str>,
    program: &str,
    extra: &[PathBuf],
) -> Vec<PathBuf> {
    const PRIVATE: [&str; 14] = [
        "/root",
        "/home",
        "/etc",
        "/var",
        "/run",
        "/tmp",
        "/dev",
        "/sys",
        "/proc",
        "/boot",
        "/mnt",
        "/media",
        "/srv",
        "/lost+found",
    ];
    let mut roots: Vec<PathBuf> = system.iter().filter(|path| path.exists()).cloned().collect();
    let program_directory =
        Path::new(program).is_absolute().then(|| Path::new(program).parent()).flatten();
    let candidates = search_path
        .into_iter()
        .flat_map(std::env::split_paths)
        .chain(program_directory.map(Path::to_path_buf));
    for candidate in candidates {
        let Ok(canonical) = candidate.canonicalize() else { continue };
        let private = canonical.components().count() < 3
            || PRIVATE.iter().any(|private| canonical.starts_with(private));
        if !private && !roots.iter().any(|root| canonical.starts_with(root)) {
            roots.push(canonical);
        }
    }
    roots.extend(extra.iter().filter_map(|path| path.canonicalize().ok()));
    roots
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_mount_point_and_the_flags_to_keep() {
        let line = "28 27 0:25 / /mnt/with\\040space ro,nosuid,nodev,relatime - tmpfs x ro";
        assert_eq!(
            parse_mountinfo_line(line),
            Some((
                PathBuf::from("/mnt/with space"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_RELATIME
            ))
        );
        assert_eq!(parse_mountinfo_line("garbage"), None);
    }

    #[test]
    fn only_world_readable_subtrees_become_rules() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("etc");
        for directory in ["public", "mixed/private", "mixed/open"] {
            std::fs::create_dir_all(root.join(directory)).unwrap();
        }
        for file in ["public/a", "mixed/open/b", "mixed/c", "mixed/secret", "mixed/private/key"] {
            std::fs::write(root.join(file), "x").unwrap();
        }
        let mode = |path: &str, mode: u32| {
            std::fs::set_permissions(root.join(path), std::fs::Permissions::from_mode(mode))
                .unwrap();
        };
        for (path, bits) in
            [("", 0o755), ("public", 0o755), ("mixed", 0o755), ("mixed/open", 0o755)]
        {
            mode(path, bits);
        }
        for (path, bits) in [("public/a", 0o644), ("mixed/open/b", 0o644), ("mixed/c", 0o644)] {
            mode(path, bits);
        }
        mode("mixed/secret", 0o600);
        mode("mixed/private", 0o700);
        std::os::unix::fs::symlink("/", root.join("public/to-root")).unwrap();
        let mut rules = world_readable_rules(std::slice::from_ref(&root));
        rules.sort();
        let expected: Vec<PathBuf> =
            ["mixed/c", "mixed/open", "public"].iter().map(|path| root.join(path)).collect();
        assert_eq!(rules, expected);
    }

    #[test]
    fn private_places_in_path_are_not_made_readable() {
        let roots = narrowed_readable_roots(
            &[PathBuf::from("/usr")],
            Some("/root/bin:/usr/local/bin:/:/home/user/bin:/opt:/etc"),
            "/root/tool",
            &[],
        );
        assert_eq!(roots, vec![PathBuf::from("/usr")]);
    }
}
