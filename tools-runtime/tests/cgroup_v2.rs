//! A uid-0 run where `/sys/fs/cgroup` is cgroup2 only, as on most current distributions and
//! container hosts: the run example started in a mount namespace of its own in which the
//! host's cgroup mounts are replaced by one cgroup2 mount at `/sys/fs/cgroup`.
//!
//! The kernel has one cgroup2 hierarchy, so this shows the runtime the host's real one: where it
//! offers `pids` the run must go through cgroup v2 and say so; where `pids` is bound to a v1
//! hierarchy (a hybrid host, whose v1 mounts this view hides) no pids limit can be applied and
//! the uid-0 run must be refused, naming the layer and both versions.

mod support;

use std::process::Command;

use support::{Fixture, MachineLayers, Owner, is_root, run_example};

/// The controllers the cgroup2 hierarchy offers at its root (read through the host's mount).
fn unified_root_controllers() -> Option<String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount_point = mountinfo.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let separator = fields.iter().position(|field| *field == "-")?;
        (fields.get(separator + 1) == Some(&"cgroup2") && fields.get(3) == Some(&"/"))
            .then(|| fields[4].to_owned())
    })?;
    std::fs::read_to_string(format!("{mount_point}/cgroup.controllers")).ok()
}

#[test]
fn a_uid0_run_on_a_cgroup2_only_host_goes_through_v2_or_is_refused_without_a_pids_limit() {
    let machine = MachineLayers::probe();
    let unshare_works = Command::new("unshare").args(["--mount", "true"]).status();
    if !is_root()
        || !machine.can_confine_for(Owner::Root)
        || !unshare_works.is_ok_and(|s| s.success())
    {
        eprintln!("not root, or no uid-0 sandbox, or no mount namespace here: not checked");
        return;
    }
    let Some(controllers) = unified_root_controllers() else {
        eprintln!("no cgroup2 hierarchy here: not checked");
        return;
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let fixture = Fixture::owned_by(Owner::Root);
    // In the namespace: drop every cgroup mount, mount cgroup2 at /sys/fs/cgroup, then run.
    let script = "umount -R /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup && \
                  exec \"$@\"";
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c", script, "sh"])
        .arg(run_example())
        .arg("--workspace")
        .arg(&fixture.workspace)
        .args(["--", "sh", "-c", "echo ran"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let line: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let offers_pids = controllers.split_whitespace().any(|name| name == "pids");
    if offers_pids && own.lines().any(|line| line == "0::/") {
        // The runtime sits in the root cgroup: v2 must carry the pids limit.
        assert_eq!(line["stdout"], "ran\n", "{line}");
        assert_eq!(line["sandbox"]["layers"]["cgroup_pids"], "active", "{line}");
        assert_eq!(line["sandbox"]["cgroup_versions"]["pids"], "v2", "{line}");
        let note = line["sandbox"]["notes"]["cgroup_pids"].as_str().unwrap_or_default();
        assert_eq!(note, "cgroup v2 under /sys/fs/cgroup", "{line}");
    } else if offers_pids {
        // Elsewhere in the hierarchy it depends on delegation: either way, never without one.
        let ran_with_v2 = line["sandbox"]["cgroup_versions"]["pids"] == "v2";
        let refused = line["refused"]["kind"] == "sandbox_unavailable";
        assert!(ran_with_v2 || refused, "{line}");
    } else {
        // Hybrid host: pids is bound to a v1 hierarchy, which this view does not mount.
        assert_eq!(line["refused"]["kind"], "sandbox_unavailable", "{line}");
        let message = line["refused"]["message"].as_str().unwrap_or_default();
        let expected = format!(
            "needs the cgroup_pids layer, which is Unavailable: cgroup v2: /sys/fs/cgroup does \
             not offer pids (cgroup.controllers: {:?}); cgroup v1: no pids hierarchy mounted",
            controllers.trim()
        );
        assert!(message.contains(&expected), "{message}");
        assert_eq!(line["refused"]["sandbox"]["layers"]["cgroup_pids"], "unavailable");
    }
}

#[test]
fn a_uid0_run_on_this_host_names_the_cgroup_version_behind_each_limit() {
    let machine = MachineLayers::probe();
    if !machine.can_confine_for(Owner::Root) {
        eprintln!("no uid-0 sandbox here: not checked");
        return;
    }
    let fixture = Fixture::owned_by(Owner::Root);
    let output = Command::new(run_example())
        .arg("--workspace")
        .arg(&fixture.workspace)
        .args(["--", "true"])
        .output()
        .unwrap();
    let line: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(line["exit_code"], 0, "{line}");
    let offered = unified_root_controllers().unwrap_or_default();
    for (layer, controller) in [("cgroup_pids", "pids"), ("cgroup_memory", "memory")] {
        if line["sandbox"]["layers"][layer] != "active" {
            continue;
        }
        // v2 wherever the unified hierarchy offers the controller, v1 otherwise.
        let version = line["sandbox"]["cgroup_versions"][controller].as_str().unwrap_or_default();
        let expected =
            if offered.split_whitespace().any(|name| name == controller) { "v2" } else { "v1" };
        assert_eq!(version, expected, "{line}");
        let note = line["sandbox"]["notes"][layer].as_str().unwrap_or_default();
        assert!(note.starts_with(&format!("cgroup {expected} under /sys/fs/cgroup")), "{line}");
        assert!(
            !note.contains("tools-runtime-"),
            "the run's own directory is no part of it: {line}"
        );
    }
}
