//! The `run` example's stable command-line interface: one JSON line, exit 0 whatever the
//! command did, 2 on usage errors.

// The descendants test's steps are helpers called by a `#[test]`, so clippy does not see them
// as tests: a failed setup step should stop them loudly all the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use support::{Fixture, MachineLayers, Owner, run_example};

#[test]
fn the_run_example_prints_one_json_line_with_the_stable_fields() {
    let machine = MachineLayers::probe();
    let fixture = Fixture::new();
    let output = Command::new(run_example())
        .arg("--workspace")
        .arg(&fixture.workspace)
        .args(["--timeout-ms", "5000", "--max-output-bytes", "1000", "--"])
        .args(["sh", "-c", "echo hi; echo oops >&2; exit 3"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let line: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    if !machine.can_confine() {
        assert_eq!(line["refused"]["kind"], "sandbox_unavailable");
        return;
    }
    let stable = serde_json::json!({
        "exit_code": 3,
        "signal": null,
        "timed_out": false,
        "stdout": "hi\n",
        "stderr": "oops\n",
        "stdout_truncated": false,
        "landlock": "active",
    });
    let actual = serde_json::json!({
        "exit_code": line["exit_code"],
        "signal": line["signal"],
        "timed_out": line["timed_out"],
        "stdout": line["stdout"],
        "stderr": line["stderr"],
        "stdout_truncated": line["stdout_truncated"],
        "landlock": line["sandbox"]["layers"]["landlock"],
    });
    assert_eq!(actual, stable);
    assert!(line["duration_ms"].is_u64());
}

#[test]
fn the_run_example_refuses_bad_usage_with_exit_code_2() {
    let invalid_requests = [
        &["--workspace", "/tmp", "--max-output-bytes", "1", "--", "true"][..],
        &["--workspace", "/tmp", "--", ""][..],
    ];
    let usage_errors = [&["--timeout-ms", "soon", "--", "true"][..], &["--", "true"][..], &[][..]];
    for arguments in usage_errors.into_iter().chain(invalid_requests) {
        let output = Command::new(run_example()).args(arguments).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{arguments:?}");
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn the_run_example_reports_a_timeout_and_still_exits_0() {
    let machine = MachineLayers::probe();
    let fixture = Fixture::new();
    let output = Command::new(run_example())
        .arg("--workspace")
        .arg(&fixture.workspace)
        .args(["--timeout-ms", "1500", "--", "sh", "-c", "echo started; sleep 30"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let line: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    if machine.can_confine() {
        assert_eq!(
            (&line["timed_out"], &line["stdout"]),
            (&serde_json::json!(true), &serde_json::json!("started\n"))
        );
    }
}

/// The README's example as CI and containers run it: root, a `mktemp -d` workspace (root,
/// 0700); the command runs as uid 0 without capabilities and writes its workspace.
#[test]
fn the_run_example_writes_a_root_owned_private_workspace() {
    use std::os::unix::fs::MetadataExt;
    let machine = MachineLayers::probe();
    let workspace = tempfile::tempdir().unwrap();
    let output = Command::new(run_example())
        .arg("--workspace")
        .arg(workspace.path())
        .args(["--", "sh", "-c", "echo hi > out.txt; cat out.txt; id -u"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let line: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    if !machine.can_confine_for(support::Owner::Root) {
        assert_eq!(line["refused"]["kind"], "sandbox_unavailable", "{line}");
        return;
    }
    let uid = nix::unistd::geteuid().as_raw();
    assert_eq!(
        (&line["exit_code"], &line["stdout"], &line["stderr"]),
        (&serde_json::json!(0), &serde_json::json!(format!("hi\n{uid}\n")), &serde_json::json!("")),
        "{line}"
    );
    let written = std::fs::metadata(workspace.path().join("out.txt")).unwrap();
    assert_eq!(written.uid(), uid);
}

/// The parent-death signal is tied to the runtime process (the helper is forked on a thread
/// that lives as long as it): when the process dies mid-run, the command dies with it.
#[test]
fn a_command_dies_with_the_runtime_process() {
    if !MachineLayers::probe().can_confine() {
        eprintln!("skipped: this machine cannot confine a command");
        return;
    }
    let fixture = Fixture::new();
    let mut runtime_process = Command::new(run_example())
        .arg("--workspace")
        .arg(&fixture.workspace)
        .args(["--timeout-ms", "600000", "--"])
        // `$$` would be the pid inside the command's PID namespace: read the host's.
        .args([
            "sh",
            "-c",
            "read -r pid rest < /proc/self/stat; echo $pid > started.tmp && mv started.tmp \
             started; exec sleep 1000",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = fixture.workspace.join("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(std::time::Instant::now() < deadline, "the command did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid: u32 = std::fs::read_to_string(&started).unwrap().trim().parse().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    runtime_process.kill().unwrap();
    runtime_process.wait().unwrap();
    let gone = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
    };
    while !gone() {
        assert!(std::time::Instant::now() < deadline, "the command {pid} outlived the runtime");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// How long the kernel gets to finish the processes off (or a command to start): a bound,
/// polled, never slept through.
const DESCENDANTS_DEADLINE: Duration = Duration::from_secs(20);

/// Every live process whose command line contains `marker`, but this test's own, as
/// `(pid, arguments)`. Zombies (an empty command line) are dead already.
fn processes_mentioning(marker: &str) -> Vec<(u32, Vec<String>)> {
    let own = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        // A process may end between the listing and the read.
        let Ok(raw) = std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline"))
        else {
            continue;
        };
        let arguments: Vec<String> = raw
            .split(|byte| *byte == 0)
            .filter(|argument| !argument.is_empty())
            .map(|argument| String::from_utf8_lossy(argument).into_owned())
            .collect();
        if pid != own && arguments.iter().any(|argument| argument.contains(marker)) {
            found.push((pid, arguments));
        }
    }
    found
}

/// Polls `condition` until it holds or the deadline passes; returns whether it held.
fn poll_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + DESCENDANTS_DEADLINE;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

fn kill_and_die_with_the_runtime(owner: Owner) {
    let machine = MachineLayers::probe();
    if !machine.can_confine_for(owner) {
        eprintln!("skipped: this machine cannot confine a command for {owner:?}: {machine:?}");
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let marker = format!("faults-{}-{nanos}-{owner:?}", std::process::id());
    let grandchild = format!("{marker}-grandchild");
    // The child starts a grandchild in a session of its own (out of the process group the
    // runtime kills), then both wait far longer than the test.
    let script = format!("setsid sh -c 'sleep 1000; :' {grandchild} & sleep 1000; :");
    let mut runtime = Command::new(run_example())
        .arg("--workspace")
        .arg(&fixture.workspace)
        .args(["--timeout-ms", "600000", "--", "sh", "-c", &script, &marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let grandchild_started = poll_until(|| {
        processes_mentioning(&grandchild).iter().any(|(_, arguments)| {
            arguments.first().map(String::as_str) == Some("sh")
                && arguments.last() == Some(&grandchild)
        })
    });
    assert!(grandchild_started, "the command's grandchild never started");
    let before = processes_mentioning(&marker);
    runtime.kill().unwrap();
    runtime.wait().unwrap();
    let all_gone = poll_until(|| processes_mentioning(&marker).is_empty());
    let survivors = processes_mentioning(&marker);
    for (pid, _) in &survivors {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    assert!(
        all_gone,
        "survived the runtime's SIGKILL: {survivors:?}\n(running before it: {before:?})"
    );
}

/// SIGKILL of the runtime process (nothing of it runs afterwards: no cgroup kill, no process
/// group kill) leaves none of the command's processes behind, not even a grandchild in a
/// session of its own: the helper dies with the runtime, the command's PID namespace init with
/// the helper, and the kernel kills every process left in that namespace. Checked in `/proc`,
/// for a uid-0 and a `nobody` command.
#[test]
fn a_command_and_its_descendants_die_with_the_runtime() {
    for owner in [Owner::User, Owner::Root] {
        kill_and_die_with_the_runtime(owner);
    }
}
