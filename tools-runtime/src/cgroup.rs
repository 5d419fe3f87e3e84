//! Per-run cgroup v1 `pids` and `memory` groups, created next to the runtime's own cgroup.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// One per-run cgroup directory in one controller hierarchy.
#[derive(Debug)]
pub(crate) struct RunCgroup {
    pub(crate) directory: PathBuf,
}

/// Why no cgroup could be made for a controller.
pub(crate) type CgroupResult = std::result::Result<RunCgroup, String>;

impl RunCgroup {
    /// Creates `<hierarchy>/<own cgroup>/tools-runtime-<name>` and writes `limits` into it.
    pub(crate) fn create(controller: &str, name: &str, limits: &[(&str, String)]) -> CgroupResult {
        let hierarchy = Path::new("/sys/fs/cgroup").join(controller);
        if !hierarchy.join("cgroup.procs").exists() {
            return Err(format!("no cgroup v1 {controller} hierarchy at {}", hierarchy.display()));
        }
        let own = own_cgroup_path(controller).unwrap_or_default();
        let directory =
            hierarchy.join(own.trim_start_matches('/')).join(format!("tools-runtime-{name}"));
        std::fs::create_dir(&directory)
            .map_err(|error| format!("cannot create {}: {error}", directory.display()))?;
        let cgroup = RunCgroup { directory };
        for (file, value) in limits {
            let path = cgroup.directory.join(file);
            if let Err(error) = std::fs::write(&path, value) {
                cgroup.remove_if_empty();
                return Err(format!("cannot write {}: {error}", path.display()));
            }
        }
        Ok(cgroup)
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

    /// Kills every process in the group (including ones that left the process group).
    pub(crate) fn kill_all(&self) {
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

/// The runtime's own cgroup path in a v1 controller hierarchy, from `/proc/self/cgroup`.
fn own_cgroup_path(controller: &str) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    table.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers.split(',').any(|name| name == controller).then(|| path.to_owned())
    })
}
