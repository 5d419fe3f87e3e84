//! Per-run cgroups for the `pids` and `memory` limits: cgroup v2 where the unified hierarchy
//! offers the controller, a cgroup v1 controller hierarchy otherwise.
//!
//! Where they go is decided once per process ([`CgroupHost::get`]) from
//! `/proc/self/mountinfo` and `/proc/self/cgroup`, for each controller on its own (a hybrid host
//! may have `pids` on one and `memory` on the other):
//!
//! * **v2** when a cgroup2 mount (`/sys/fs/cgroup` itself on a v2-only host, preferred;
//!   `/sys/fs/cgroup/unified` on a hybrid one) lists the controller in the runtime's own
//!   cgroup's `cgroup.controllers`, and it is (or can be) enabled in that cgroup's
//!   `cgroup.subtree_control`. Per-run cgroups are children of the runtime's own cgroup, one
//!   directory carrying every v2 limit. The kernel lets a cgroup that holds processes enable
//!   controllers for its children only at the root of the hierarchy; anywhere else (a systemd
//!   unit with `Delegate=yes`, a container's own cgroup) the runtime, if it is the only process
//!   in its cgroup, first moves itself into a leaf child named `tools-runtime`, as systemd's
//!   delegation rules ask.
//! * **v1** when the controller has a hierarchy of its own: per-run cgroups are children of the
//!   runtime's own cgroup in it.
//!
//! This module never moves a process other than the runtime's own, and never limits the runtime
//! itself.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::report::CgroupVersion;
use crate::root_mode::unescape_mountinfo;

/// A controller the runtime limits per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    Pids,
    Memory,
}

impl Controller {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// Where the per-run cgroups of one controller are created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placement {
    pub(crate) version: CgroupVersion,
    /// The runtime's own cgroup directory in that hierarchy: per-run cgroups are its children.
    pub(crate) parent: PathBuf,
}

/// Where each controller's per-run cgroups go on this host, or why nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupHost {
    pub(crate) pids: Result<Placement, String>,
    pub(crate) memory: Result<Placement, String>,
}

impl CgroupHost {
    /// This process's placements, detected (and a v2 subtree prepared) on first use.
    pub(crate) fn get() -> &'static CgroupHost {
        static HOST: OnceLock<CgroupHost> = OnceLock::new();
        HOST.get_or_init(|| {
            let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
            let hierarchies =
                Hierarchies::parse(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"));
            CgroupHost::detect(&hierarchies)
        })
    }

    /// Chooses, per controller, v2 when the unified hierarchy offers it, else v1, else nothing.
    pub(crate) fn detect(hierarchies: &Hierarchies) -> CgroupHost {
        let placement = |controller: Controller| {
            let v2 = match &hierarchies.unified {
                Some(own) => prepare_v2(own, controller),
                None => Err("no cgroup2 mount".to_owned()),
            };
            v2.or_else(|v2_reason| {
                v1_placement(hierarchies, controller)
                    .map_err(|v1_reason| format!("cgroup v2: {v2_reason}; cgroup v1: {v1_reason}"))
            })
        };
        CgroupHost { pids: placement(Controller::Pids), memory: placement(Controller::Memory) }
    }

    pub(crate) fn placement(&self, controller: Controller) -> &Result<Placement, String> {
        match controller {
            Controller::Pids => &self.pids,
            Controller::Memory => &self.memory,
        }
    }
}

/// The runtime's own cgroup directory in each mounted hierarchy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hierarchies {
    /// In the cgroup2 mount (`/sys/fs/cgroup` preferred).
    pub(crate) unified: Option<PathBuf>,
    /// In each cgroup v1 mount, with the controllers it carries.
    pub(crate) v1: Vec<(Vec<String>, PathBuf)>,
}

impl Hierarchies {
    /// From the text of `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub(crate) fn parse(mountinfo: &str, proc_cgroup: &str) -> Hierarchies {
        // `hierarchy-id:controllers:path`; v2 is `0::path`.
        let own_paths: Vec<(Vec<&str>, &str)> = proc_cgroup
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ':');
                let _id = fields.next()?;
                let controllers = fields.next()?;
                let path = fields.next()?;
                let controllers = controllers.split(',').filter(|name| !name.is_empty()).collect();
                Some((controllers, path))
            })
            .collect();
        let own_v2 = own_paths.iter().find(|(controllers, _)| controllers.is_empty());
        let mut hierarchies = Hierarchies::default();
        let mut unified = Vec::new();
        for line in mountinfo.lines() {
            let Some(mount) = CgroupMount::parse(line) else { continue };
            match mount.filesystem.as_str() {
                "cgroup2" => {
                    let own = own_v2.map(|(_, path)| *path).unwrap_or("/");
                    if let Some(directory) = mount.directory_of(own) {
                        unified.push((mount.mount_point, directory));
                    }
                }
                "cgroup" => {
                    let controllers: Vec<String> = mount
                        .super_options
                        .split(',')
                        .filter(|option| *option != "rw" && *option != "ro")
                        .map(str::to_owned)
                        .collect();
                    let own = own_paths
                        .iter()
                        .find(|(names, _)| {
                            names.iter().any(|name| controllers.iter().any(|c| c == name))
                        })
                        .map(|(_, path)| *path)
                        .unwrap_or("/");
                    if let Some(directory) = mount.directory_of(own) {
                        hierarchies.v1.push((controllers, directory));
                    }
                }
                _ => {}
            }
        }
        let preferred = unified
            .iter()
            .position(|(mount_point, _)| mount_point == Path::new("/sys/fs/cgroup"))
            .unwrap_or(0);
        hierarchies.unified = (preferred < unified.len()).then(|| unified.swap_remove(preferred).1);
        hierarchies
    }
}

/// One cgroup mount from `/proc/self/mountinfo`.
struct CgroupMount {
    /// The cgroup path the mount shows at its mount point (`/` unless a subtree is bound).
    root: String,
    mount_point: PathBuf,
    filesystem: String,
    super_options: String,
}

impl CgroupMount {
    fn parse(line: &str) -> Option<CgroupMount> {
        let fields: Vec<&str> = line.split(' ').collect();
        let separator = fields.iter().position(|field| *field == "-")?;
        let filesystem = *fields.get(separator + 1)?;
        if filesystem != "cgroup" && filesystem != "cgroup2" {
            return None;
        }
        Some(CgroupMount {
            root: unescape_mountinfo(fields.get(3)?),
            mount_point: PathBuf::from(unescape_mountinfo(fields.get(4)?)),
            filesystem: filesystem.to_owned(),
            super_options: (*fields.get(separator + 3)?).to_owned(),
        })
    }

    /// Where the cgroup `path` is under this mount, if the mount shows it.
    fn directory_of(&self, path: &str) -> Option<PathBuf> {
        let relative = Path::new(path).strip_prefix(&self.root).ok()?;
        // `join("")` would add a trailing slash to every path shown in notes.
        Some(match relative.as_os_str().is_empty() {
            true => self.mount_point.clone(),
            false => self.mount_point.join(relative),
        })
    }
}

fn v1_placement(hierarchies: &Hierarchies, controller: Controller) -> Result<Placement, String> {
    let name = controller.name();
    let (_, directory) = hierarchies
        .v1
        .iter()
        .find(|(controllers, _)| controllers.iter().any(|c| c == name))
        .ok_or_else(|| format!("no {name} hierarchy mounted"))?;
    if !directory.join("cgroup.procs").exists() {
        return Err(format!("no cgroup.procs in {}", directory.display()));
    }
    Ok(Placement { version: CgroupVersion::V1, parent: directory.clone() })
}

/// Makes `controller` available to children of the runtime's own v2 cgroup `own`: enabled in
/// its `cgroup.subtree_control` already, or enabled now (after the runtime moved itself into
/// a leaf when `own` holds it and is not the root).
pub(crate) fn prepare_v2(own: &Path, controller: Controller) -> Result<Placement, String> {
    let name = controller.name();
    let read = |file: &str| {
        let path = own.join(file);
        std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
    };
    let lists = |text: &str| text.split_whitespace().any(|word| word == name);
    let available = read("cgroup.controllers")?;
    if !lists(&available) {
        return Err(format!(
            "{} does not offer {name} (cgroup.controllers: {:?})",
            own.display(),
            available.trim()
        ));
    }
    let placement = Placement { version: CgroupVersion::V2, parent: own.to_path_buf() };
    if lists(&read("cgroup.subtree_control")?) {
        return Ok(placement);
    }
    let subtree_control = own.join("cgroup.subtree_control");
    let enable = || std::fs::write(&subtree_control, format!("+{name}"));
    let describe = |error: std::io::Error| {
        format!("cannot enable {name} in {}: {error}", subtree_control.display())
    };
    match enable() {
        Ok(()) => Ok(placement),
        // No internal processes: `own` holds processes (the runtime among them).
        Err(error) if error.raw_os_error() == Some(nix::libc::EBUSY) => {
            move_runtime_into_leaf(own)?;
            enable().map(|()| placement).map_err(describe)
        }
        Err(error) => Err(describe(error)),
    }
}

/// Moves the runtime into `<own>/tools-runtime` when it is the only process in `own`, so `own`
/// may enable controllers for its children.
fn move_runtime_into_leaf(own: &Path) -> Result<(), String> {
    let procs = own.join("cgroup.procs");
    let members = std::fs::read_to_string(&procs)
        .map_err(|error| format!("cannot read {}: {error}", procs.display()))?;
    let me = std::process::id().to_string();
    let others: Vec<&str> = members.lines().filter(|pid| *pid != me).collect();
    if !others.is_empty() {
        return Err(format!(
            "{} holds other processes ({}), so its children cannot have controllers; start the \
             runtime in a cgroup of its own (systemd: a unit with Delegate=yes)",
            own.display(),
            others.join(" ")
        ));
    }
    let leaf = own.join("tools-runtime");
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(format!("cannot create {}: {error}", leaf.display())),
    }
    let leaf_procs = leaf.join("cgroup.procs");
    std::fs::write(&leaf_procs, &me)
        .map_err(|error| format!("cannot move the runtime into {}: {error}", leaf_procs.display()))
}

/// One per-run cgroup directory.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    pub(crate) directory: PathBuf,
    pub(crate) version: CgroupVersion,
}

/// Why no cgroup could be made.
pub(crate) type CgroupResult = std::result::Result<RunCgroup, String>;

impl RunCgroup {
    /// Creates `<parent>/tools-runtime-<name>`.
    pub(crate) fn create(placement: &Placement, name: &str) -> CgroupResult {
        let directory = placement.parent.join(format!("tools-runtime-{name}"));
        std::fs::create_dir(&directory)
            .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
        Ok(RunCgroup { directory, version: placement.version })
    }

    /// Writes `value` into the group's `file`.
    pub(crate) fn write(&self, file: &str, value: &str) -> std::result::Result<(), String> {
        let path = self.directory.join(file);
        std::fs::write(&path, value)
            .map_err(|error| format!("cannot write {}: {error}", path.display()))
    }

    /// The `cgroup.procs` file the helper writes its pid into.
    pub(crate) fn procs_file(&self) -> PathBuf {
        self.directory.join("cgroup.procs")
    }

    fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .map(|text| text.lines().filter_map(|line| line.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Kills every process in the group (including ones that left the process group): v2's
    /// `cgroup.kill` where the kernel has it (5.14), else a SIGKILL to each listed member.
    pub(crate) fn kill_all(&self) {
        if self.version == CgroupVersion::V2 && self.write("cgroup.kill", "1").is_ok() {
            return;
        }
        for pid in self.members() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }

    /// Kills the members until the group is empty (bounded), then removes the directory.
    pub(crate) async fn kill_and_remove(self) {
        for _ in 0..200 {
            self.kill_all();
            if self.members().is_empty() && std::fs::remove_dir(&self.directory).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Removes the directory if the kernel lets it (only an empty cgroup can be removed).
    pub(crate) fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.directory);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTINFO: &str = "\
24 1 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
25 24 0:23 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
26 24 0:24 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
27 24 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
28 24 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn a_hybrid_host_shows_its_unified_mount_and_each_v1_hierarchy_at_the_own_cgroup() {
        let proc_cgroup = "4:memory:/agent/run\n8:pids:/\n2:cpu,cpuacct:/x\n0::/agent.service\n";
        let hierarchies = Hierarchies::parse(HYBRID_MOUNTINFO, proc_cgroup);
        let strings = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect();
        assert_eq!(
            hierarchies,
            Hierarchies {
                unified: Some(PathBuf::from("/sys/fs/cgroup/unified/agent.service")),
                v1: vec![
                    (strings(&["memory"]), PathBuf::from("/sys/fs/cgroup/memory/agent/run")),
                    (strings(&["pids"]), PathBuf::from("/sys/fs/cgroup/pids")),
                    (strings(&["cpu", "cpuacct"]), PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/x")),
                ],
            }
        );
    }

    #[test]
    fn a_v2_only_host_prefers_sys_fs_cgroup_and_maps_a_namespaced_root() {
        // A container with its own cgroup namespace: the mount shows the container's cgroup at
        // its root, and /proc/self/cgroup says `/` relative to it. A second cgroup2 mount
        // elsewhere comes first in the table but is not preferred.
        let mountinfo = "\
30 20 0:40 / /tmp/private-cgroup2 rw - cgroup2 cgroup2 rw
31 20 0:40 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
";
        let hierarchies = Hierarchies::parse(mountinfo, "0::/\n");
        assert_eq!(
            hierarchies,
            Hierarchies { unified: Some(PathBuf::from("/sys/fs/cgroup")), v1: Vec::new() }
        );
        // A mount of a subtree that does not contain the runtime's cgroup shows nothing of it.
        let bound = "31 20 0:40 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(Hierarchies::parse(bound, "0::/agent\n").unified, None);
    }

    /// The host's cgroup2 hierarchy as this process sees it, when it can make cgroups there.
    fn writable_unified() -> Option<PathBuf> {
        let read = |path: &str| std::fs::read_to_string(path).unwrap();
        let hierarchies =
            Hierarchies::parse(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"));
        let unified = hierarchies.unified.filter(|_| nix::unistd::geteuid().is_root());
        if unified.is_none() {
            eprintln!("no cgroup2 hierarchy this test may write: the v2 path is not exercised");
        }
        unified
    }

    #[test]
    fn a_per_run_v2_cgroup_takes_a_process_kills_it_with_cgroup_kill_and_goes() {
        use std::os::unix::process::ExitStatusExt;
        let Some(own) = writable_unified() else { return };
        let placement = Placement { version: CgroupVersion::V2, parent: own.clone() };
        let name = format!("test-{}", std::process::id());
        let cgroup = RunCgroup::create(&placement, &name).unwrap();
        assert_eq!(cgroup.directory, own.join(format!("tools-runtime-{name}")));
        // A real process joins the group, as the helper does.
        let mut child = std::process::Command::new("sleep").arg("300").spawn().unwrap();
        std::fs::write(cgroup.procs_file(), child.id().to_string()).unwrap();
        let membership = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
        let v2_line = membership.lines().find(|line| line.starts_with("0::")).unwrap();
        assert!(v2_line.ends_with(&format!("/tools-runtime-{name}")), "{membership}");
        assert_eq!(cgroup.members(), vec![i32::try_from(child.id()).unwrap()]);
        cgroup.kill_all();
        assert_eq!(child.wait().unwrap().signal(), Some(9));
        let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let directory = cgroup.directory.clone();
        tokio.block_on(cgroup.kill_and_remove());
        assert!(!directory.exists());
    }

    #[test]
    fn a_v2_hierarchy_without_the_controller_is_not_chosen_and_says_what_it_offers() {
        let Some(own) = writable_unified() else { return };
        let offered = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap();
        for controller in [Controller::Pids, Controller::Memory] {
            if offered.split_whitespace().any(|name| name == controller.name()) {
                eprintln!("{} is offered by cgroup v2 here: not checked", controller.name());
                continue;
            }
            assert_eq!(
                prepare_v2(&own, controller),
                Err(format!(
                    "{} does not offer {} (cgroup.controllers: {:?})",
                    own.display(),
                    controller.name(),
                    offered.trim()
                ))
            );
        }
    }
}
