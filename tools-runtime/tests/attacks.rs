//! The attack suite: real processes try to escape the sandbox; every attempt must be blocked and
//! show up in the audit record.
//!
//! Each attack is an `async fn NAME(owner: Owner)` run twice by `for_both_owners!` (bottom of
//! the file): in a root-owned `mktemp -d`-like workspace and in one owned by `nobody`.

// The attacks are test bodies called by the generated `#[tokio::test]`s, so clippy does not
// see them as tests: a failed setup step should stop them loudly all the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde::Deserialize;
use support::{Fixture, MachineLayers, Owner, assert_layer, is_root, ran, refused};
use tools_runtime::{
    Backend, BackendChoice, ExecOutcome, Layer, LayerStatus, Limits, RefusalKind, Rlimits,
};

async fn every_layer_this_machine_offers_is_active(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    let outcome = fixture.runtime().run(&fixture.request("layers", &["true"])).await.unwrap();
    if !machine.can_confine_for(owner) {
        let refusal = refused(outcome);
        assert_eq!(refusal.kind, RefusalKind::SandboxUnavailable, "fail closed: {machine:?}");
        return;
    }
    let result = ran(outcome);
    assert_eq!(result.exit_code, Some(0));
    let active = LayerStatus::Active;
    let uid0_only = if owner.runs_as_uid0() { active } else { LayerStatus::NotRequested };
    let expected: BTreeMap<Layer, LayerStatus> = BTreeMap::from([
        (Layer::ProcessGroup, active),
        (Layer::CleanEnvironment, active),
        (Layer::ParentDeathSignal, active),
        (Layer::Rlimits, active),
        (Layer::CgroupPids, MachineLayers::status(machine.cgroup_pids)),
        (Layer::CgroupMemory, MachineLayers::status(machine.cgroup_memory)),
        (Layer::DropPrivileges, active),
        (Layer::NoNewPrivileges, active),
        (Layer::NetworkNamespace, MachineLayers::status(machine.network_namespace)),
        (Layer::PidNamespace, MachineLayers::status(machine.pid_namespace)),
        (Layer::ReadOnlyMounts, uid0_only),
        (Layer::IpcNamespace, uid0_only),
        (Layer::Landlock, MachineLayers::status(machine.landlock)),
        (Layer::Seccomp, MachineLayers::status(machine.seccomp)),
        (Layer::SeccompSocketFilter, MachineLayers::status(machine.seccomp)),
        (Layer::SeccompRootFilter, uid0_only),
        (Layer::Bubblewrap, LayerStatus::NotRequested),
    ]);
    assert_eq!(result.sandbox.layers, expected);
    assert_eq!(result.sandbox.backend, Backend::Direct);
    assert_eq!(fixture.audit_record("layers").sandbox, Some(result.sandbox));
}

#[derive(Debug, Deserialize)]
struct EscapeAttempt {
    name: String,
    #[serde(default)]
    cwd: Option<String>,
    argv: Vec<String>,
    expect: String,
    #[serde(default)]
    must_not_exist: Vec<String>,
    #[serde(default)]
    must_keep: BTreeMap<String, String>,
    /// What differs, and why, when the command runs as uid 0 in a root-owned workspace.
    #[serde(default)]
    root_owned: Option<RootOwnedExpectation>,
}

#[derive(Debug, Deserialize)]
struct RootOwnedExpectation {
    expect: String,
    /// The `must_keep` files are expected to change.
    altered: bool,
    #[allow(dead_code)]
    why: String,
}

/// What happened to one attempt, compared as a whole against what must happen.
#[derive(Debug, PartialEq, Eq)]
struct EscapeVerdict {
    name: String,
    outcome: String,
    audited_outcome: String,
    escaped_files: Vec<String>,
    altered_files: Vec<String>,
}

async fn filesystem_escapes_are_blocked_and_audited(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    std::os::unix::fs::symlink(&fixture.outside, fixture.workspace.join("escape-link")).unwrap();
    let victim = fixture.outside.join("victim");
    std::fs::write(&victim, "victim\n").unwrap();
    std::fs::hard_link(&victim, fixture.workspace.join("planted-hardlink")).unwrap();
    let attempts: Vec<EscapeAttempt> =
        serde_json::from_str(include_str!("data/escape_attempts.json")).unwrap();
    let runtime = fixture.runtime();
    let mut verdicts = Vec::new();
    let mut expected = Vec::new();
    for (index, attempt) in attempts.iter().enumerate() {
        let call_id = format!("escape-{index}");
        let argv: Vec<String> =
            attempt.argv.iter().map(|argument| fixture.expand(argument)).collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut request = fixture.request(&call_id, &argv);
        if let Some(cwd) = &attempt.cwd {
            request.cwd = fixture.expand(cwd).into();
        }
        let outcome = runtime.run(&request).await.unwrap();
        let root_owned = attempt.root_owned.as_ref().filter(|_| owner.runs_as_uid0());
        let expect = root_owned.map_or(attempt.expect.as_str(), |root| root.expect.as_str());
        let outcome = match outcome {
            ExecOutcome::Ran(result) if result.exit_code != Some(0) => "ran_and_failed".to_owned(),
            ExecOutcome::Ran(_) if expect == "ran_and_succeeded" => expect.to_owned(),
            ExecOutcome::Ran(result) => format!("ran_and_succeeded: {result:?}"),
            ExecOutcome::Refused(refusal) => format!("{:?}", refusal.kind).to_lowercase(),
        };
        let escaped_files = attempt
            .must_not_exist
            .iter()
            .map(|path| fixture.expand(path))
            .filter(|path| std::path::Path::new(path).exists())
            .collect();
        let altered_files = attempt
            .must_keep
            .iter()
            .filter(|(path, content)| {
                std::fs::read_to_string(fixture.expand(path)).ok().as_ref() != Some(*content)
            })
            .map(|(path, _)| fixture.expand(path))
            .collect();
        // An attempt that is allowed to alter the victim must not spoil the next one.
        std::fs::write(&victim, "victim\n").unwrap();
        let audited_outcome = fixture.audit_record(&call_id).outcome;
        verdicts.push(EscapeVerdict {
            name: attempt.name.clone(),
            outcome,
            audited_outcome,
            escaped_files,
            altered_files,
        });
        let expected_outcome = match expect {
            "path_outside_workspace" => "pathoutsideworkspace",
            other => other,
        };
        let expected_altered = match root_owned {
            Some(root) if root.altered => {
                attempt.must_keep.keys().map(|path| fixture.expand(path)).collect()
            }
            Some(_) | None => Vec::new(),
        };
        expected.push(EscapeVerdict {
            name: attempt.name.clone(),
            outcome: expected_outcome.to_owned(),
            audited_outcome: match expect {
                "ran_and_failed" | "ran_and_succeeded" => "ran".to_owned(),
                other => other.to_owned(),
            },
            escaped_files: Vec::new(),
            altered_files: expected_altered,
        });
    }
    if !machine.can_confine_for(owner) || !is_root() {
        // Without Landlock the runs are refused (fail closed); without root the hard-link
        // victim belongs to the test user, so only the path checks can be asserted.
        eprintln!("partial assertions: {machine:?}");
        return;
    }
    assert_eq!(verdicts, expected);
}

async fn protected_paths_inside_the_workspace_stay_read_only(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::with_protected_tree(owner);
    let runtime = fixture.runtime();
    let script = "echo pwned > skill/SKILL.md; echo pwned > skill/scripts/new.sh; \
                  echo pwned > .git/hooks/pre-commit; rm -f skill/SKILL.md; \
                  mount -o remount,rw {workspace}/skill; echo ok > allowed.txt";
    let script = fixture.expand(script);
    let mut request = fixture.request("protected", &["sh", "-c", &script]);
    request.protected_paths = vec!["skill".into(), ".git/hooks".into()];
    let outcome = runtime.run(&request).await.unwrap();
    if !fixture.protects_paths(&machine) {
        let refusal = refused(outcome);
        assert_eq!(refusal.kind, RefusalKind::SandboxUnavailable);
        assert_eq!(fixture.audit_record("protected").outcome, "sandbox_unavailable");
        return;
    }
    let result = ran(outcome);
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join("skill/SKILL.md")).unwrap(),
        "---\nname: skill\n---\n"
    );
    assert!(!fixture.workspace.join("skill/scripts/new.sh").exists());
    assert_eq!(
        std::fs::read_to_string(fixture.workspace.join(".git/hooks/pre-commit")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("allowed.txt")).unwrap(), "ok\n");
    assert!(result.stderr.contains("Read-only file system"), "{}", result.stderr);
    // A uid-0 run's helper binds the protected paths read-only itself (it is root until the
    // drop); otherwise bubblewrap does.
    let (backend, filesystem_view) = match owner.runs_as_uid0() {
        true => (Backend::Direct, Layer::ReadOnlyMounts),
        false => (Backend::Bubblewrap, Layer::Bubblewrap),
    };
    assert_eq!(result.sandbox.backend, backend);
    let record = fixture.audit_record("protected");
    assert_layer(&record, filesystem_view, LayerStatus::Active);
    assert_layer(&record, Layer::Landlock, MachineLayers::status(machine.landlock));
    assert_layer(&record, Layer::DropPrivileges, LayerStatus::Active);
    assert_layer(&record, Layer::NetworkNamespace, LayerStatus::Active);
    assert_layer(&record, Layer::Seccomp, MachineLayers::status(machine.seccomp));
}

async fn protected_paths_are_refused_by_the_direct_backend_and_a_missing_bwrap(owner: Owner) {
    let fixture = Fixture::with_protected_tree(owner);
    let mut config = fixture.config();
    config.backend = BackendChoice::Direct;
    let mut request = fixture.request("direct-protected", &["true"]);
    request.protected_paths = vec!["skill".into()];
    let outcome = fixture.runtime_with(config).run(&request).await.unwrap();
    if owner.runs_as_uid0() {
        // The uid-0 helper binds protected paths read-only without bubblewrap.
        let result = ran(outcome);
        assert_eq!(result.exit_code, Some(0), "{result:?}");
        let note = result.sandbox.notes.get(&Layer::ReadOnlyMounts).cloned().unwrap_or_default();
        assert!(note.contains(&format!("protected: {}", fixture.canonical("skill"))), "{note}");
        return;
    }
    let refusal = refused(outcome);
    assert_eq!(refusal.kind, RefusalKind::SandboxUnavailable);

    let mut config = fixture.config();
    config.backend = BackendChoice::Bubblewrap;
    config.bubblewrap_program = "/nonexistent/bwrap".into();
    request.call_id = "missing-bwrap".to_owned();
    let refusal = refused(fixture.runtime_with(config).run(&request).await.unwrap());
    assert_eq!(refusal.kind, RefusalKind::SandboxUnavailable);
    assert_eq!(fixture.audit_record("direct-protected").outcome, "sandbox_unavailable");
    assert_eq!(fixture.audit_record("missing-bwrap").outcome, "sandbox_unavailable");
}

async fn network_is_blocked_for_tcp_udp_and_dns_on_both_backends(owner: Owner) {
    let machine = MachineLayers::probe();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let tcp_port = tcp.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let fixture = Fixture::with_protected_tree(owner);
    let runtime = fixture.runtime();
    let attacks = [
        vec![
            "bash".to_owned(),
            "-c".to_owned(),
            format!("echo hi > /dev/tcp/127.0.0.1/{tcp_port}"),
        ],
        vec![
            "curl".to_owned(),
            "-sS".to_owned(),
            "--max-time".to_owned(),
            "2".to_owned(),
            format!("http://127.0.0.1:{tcp_port}/"),
        ],
        vec![
            "python3".to_owned(),
            "-c".to_owned(),
            format!(
                "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
                 .sendto(b'hi', ('127.0.0.1', {udp_port}))"
            ),
        ],
        vec![
            "python3".to_owned(),
            "-c".to_owned(),
            "import socket; print(socket.getaddrinfo('example.com', 80))".to_owned(),
        ],
    ];
    let backends = [("direct", Vec::new()), ("bubblewrap", vec!["skill".into()])];
    for (backend, protected) in &backends {
        if *backend == "bubblewrap" && !fixture.protects_paths(&machine) {
            continue;
        }
        for (index, attack) in attacks.iter().enumerate() {
            let call_id = format!("net-{backend}-{index}");
            let argv: Vec<&str> = attack.iter().map(String::as_str).collect();
            let mut request = fixture.request(&call_id, &argv);
            request.protected_paths.clone_from(protected);
            let result = ran(runtime.run(&request).await.unwrap());
            assert_ne!(result.exit_code, Some(0), "{call_id} {attack:?}: {result:?}");
            let record = fixture.audit_record(&call_id);
            assert_eq!(record.exit_code, result.exit_code);
            assert_layer(&record, Layer::NetworkNamespace, LayerStatus::Active);
            assert_layer(
                &record,
                Layer::SeccompSocketFilter,
                MachineLayers::status(machine.seccomp),
            );
        }
    }
    assert_eq!(tcp.accept().unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    let mut buffer = [0_u8; 16];
    assert_eq!(udp.recv_from(&mut buffer).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);

    // The same TCP attack with the network allowed reaches the listener: the listener works.
    let mut request = fixture.request(
        "net-allowed",
        &["bash", "-c", &format!("echo hi > /dev/tcp/127.0.0.1/{tcp_port}")],
    );
    request.allow_network = true;
    let result = ran(runtime.run(&request).await.unwrap());
    assert_eq!(result.exit_code, Some(0), "{result:?}");
    assert!(tcp.accept().is_ok());
    let record = fixture.audit_record("net-allowed");
    assert_layer(&record, Layer::NetworkNamespace, LayerStatus::NotRequested);
}

fn limits(change: impl FnOnce(&mut Limits)) -> Limits {
    let mut limits = Limits::default();
    change(&mut limits);
    limits
}

async fn a_fork_bomb_run_as_root_is_bounded(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    let script = "import os, signal\n\
                  count = 0\n\
                  for _ in range(200):\n\
                  \x20   try:\n\
                  \x20       pid = os.fork()\n\
                  \x20   except OSError as error:\n\
                  \x20       print('fork failed:', error.strerror)\n\
                  \x20       break\n\
                  \x20   if pid == 0:\n\
                  \x20       signal.pause()\n\
                  \x20       os._exit(0)\n\
                  \x20   count += 1\n\
                  print('children', count)\n";
    let mut request = fixture.request("fork-bomb", &["python3", "-c", script]);
    request.limits = Some(limits(|limits| {
        limits.pids = 24;
        limits.rlimits.processes = 48;
    }));
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert!(
        result.stdout.starts_with("fork failed: Resource temporarily unavailable\n"),
        "{result:?}"
    );
    let children: u64 = result
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("children "))
        .and_then(|count| count.parse().ok())
        .unwrap();
    assert!(children < 48, "{children} children");
    let record = fixture.audit_record("fork-bomb");
    assert_layer(&record, Layer::CgroupPids, MachineLayers::status(machine.cgroup_pids));
    assert_layer(&record, Layer::DropPrivileges, LayerStatus::Active);
    if machine.cgroup_pids {
        assert!(children < 24, "{children} children");
    }
}

async fn a_200_megabyte_flood_is_counted_and_truncated(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut request = fixture.request("flood", &["head", "-c", "200000000", "/dev/zero"]);
    request.max_output_bytes = 64 * 1024;
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stdout_total_bytes, 200_000_000);
    assert_eq!(result.stdout_retained_bytes, 64 * 1024);
    assert!(result.stdout_truncated);
    assert!(result.stdout.contains("[... 199934464 bytes (0 lines) omitted ...]"));
    let record = fixture.audit_record("flood");
    assert!(record.stdout_truncated);
    assert_eq!(record.stdout_total_bytes, 200_000_000);
}

async fn head_and_tail_are_kept_with_an_exact_elision_marker(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut request = fixture.request("seq", &["seq", "1", "100000"]);
    request.max_output_bytes = 1000;
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    let full: String = (1..=100_000).map(|number| format!("{number}\n")).collect();
    let middle = &full[500..full.len() - 500];
    let expected = format!(
        "{}\n[... {} bytes ({} lines) omitted ...]\n{}",
        &full[..500],
        middle.len(),
        middle.matches('\n').count(),
        &full[full.len() - 500..]
    );
    assert_eq!(result.stdout, expected);
    assert_eq!(result.stdout_total_bytes, full.len() as u64);
    assert!(fixture.audit_record("seq").stdout_truncated);
}

async fn invalid_utf8_and_output_without_newline_survive(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let request = fixture.request("bytes", &["printf", "\\377\\376abc"]);
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert_eq!(result.stdout, "\u{FFFD}\u{FFFD}abc");
    assert_eq!(result.stdout_total_bytes, 5);
    assert!(!result.stdout_truncated);
    assert_eq!(fixture.audit_record("bytes").exit_code, Some(0));
}

async fn a_timeout_kills_grandchildren_holding_the_pipe_and_keeps_partial_output(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    // The command has a PID namespace of its own, where `$!` is not the host's pid: the
    // detached grandchild reads its host pid from `/proc` (the host's) before it sleeps, and
    // the command waits for that before it sleeps too.
    let script = "echo started; (sleep 30; echo late) & \
                  setsid sh -c 'read -r pid rest < /proc/self/stat; echo $pid > detached.pid; \
                  exec sleep 30' & \
                  while [ ! -s detached.pid ]; do sleep 0.01; done; echo $! ; sleep 30";
    let mut request = fixture.request("timeout", &["sh", "-c", script]);
    request.timeout = Duration::from_millis(2000);
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert!(result.timed_out);
    assert_eq!(result.signal, Some(9));
    assert!(result.stdout.starts_with("started\n"), "{result:?}");
    assert!(result.duration_ms < 20_000, "the drain deadline bounds the wait: {result:?}");
    let detached: i32 = std::fs::read_to_string(fixture.workspace.join("detached.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let state = std::fs::read_to_string(format!("/proc/{detached}/stat")).unwrap_or_default();
    let state = state.rsplit(')').next().unwrap_or("").split_whitespace().next().unwrap_or("gone");
    if MachineLayers::probe().cgroup_pids {
        assert!(matches!(state, "gone" | "Z" | "X"), "detached grandchild still running: {state}");
    } else {
        // Only the per-run cgroup reaches a process that left the group with setsid.
        eprintln!("no cgroup here: the setsid grandchild escaped the process group ({state})");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(detached),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let record = fixture.audit_record("timeout");
    assert!(record.timed_out);
}

async fn a_timeout_with_protected_paths_kills_everything_inside(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::with_protected_tree(owner);
    // A sleep length no other test uses, so the leftover check below sees only this run.
    let script = "echo started; setsid sleep 37 & sleep 37";
    let mut request = fixture.request("timeout-bwrap", &["sh", "-c", script]);
    request.protected_paths = vec!["skill".into()];
    request.timeout = Duration::from_millis(2000);
    let outcome = fixture.runtime().run(&request).await.unwrap();
    if !fixture.protects_paths(&machine) {
        assert_eq!(refused(outcome).kind, RefusalKind::SandboxUnavailable);
        return;
    }
    let result = ran(outcome);
    assert!(result.timed_out);
    assert!(result.stdout.starts_with("started\n"), "{result:?}");
    assert!(result.duration_ms < 20_000, "the drain deadline bounds the wait: {result:?}");
    // Pids inside bwrap's pid namespace mean nothing here: look for the sleeps from the host.
    // Only processes that *are* `sleep 37` count: the other owner's test runs in parallel, and
    // its helper carries the script in its plan argument while it is still uid 0 (a
    // `pgrep -f "sleep 37"` matched it once in CI).
    let uid = owner.command_uid();
    let leftover_pids: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &i32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|argv| argv == b"sleep\x0037\x00")
        })
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .is_ok_and(|status| status.contains(&format!("\nUid:\t{uid}\t")))
        })
        .collect();
    assert_eq!(leftover_pids, Vec::<i32>::new());
    assert!(fixture.audit_record("timeout-bwrap").timed_out);
}

async fn cpu_spin_is_stopped_by_the_cpu_limit(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut request = fixture.request("cpu", &["sh", "-c", "while :; do :; done"]);
    request.limits = Some(limits(|limits| limits.rlimits.cpu_seconds = 1));
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert!(!result.timed_out);
    assert_eq!(result.signal, Some(nix::libc::SIGXCPU), "{result:?}");
    assert!(result.likely_denied);
    assert_eq!(fixture.audit_record("cpu").signal, Some(nix::libc::SIGXCPU));
}

async fn a_memory_bomb_hits_the_address_space_limit(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let script = "b = b'x' * (1024 * 1024 * 1024); print('allocated')";
    let mut request = fixture.request("memory-as", &["python3", "-c", script]);
    request.limits = Some(limits(|limits| limits.rlimits.address_space_bytes = 256 << 20));
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert_eq!(result.exit_code, Some(1));
    assert!(result.stderr.contains("MemoryError"), "{result:?}");
    assert_eq!(fixture.audit_record("memory-as").exit_code, Some(1));
}

async fn a_memory_bomb_hits_the_cgroup_memory_limit(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    let script = "b = b'x' * (400 * 1024 * 1024); print('allocated')";
    let mut request = fixture.request("memory-cgroup", &["python3", "-c", script]);
    request.limits = Some(limits(|limits| limits.memory_bytes = 64 << 20));
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    let record = fixture.audit_record("memory-cgroup");
    assert_layer(&record, Layer::CgroupMemory, MachineLayers::status(machine.cgroup_memory));
    if machine.cgroup_memory {
        assert_eq!(result.signal, Some(9), "{result:?}");
        assert!(!result.stdout.contains("allocated"));
        assert_eq!(record.signal, Some(9));
    }
}

async fn a_disk_fill_stops_at_the_file_size_limit(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut request = fixture.request("disk", &["sh", "-c", "head -c 100000000 /dev/zero > big"]);
    request.limits = Some(limits(|limits| limits.rlimits.file_size_bytes = 8 << 20));
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert_ne!(result.exit_code, Some(0), "{result:?}");
    let size = std::fs::metadata(fixture.workspace.join("big")).unwrap().len();
    assert_eq!(size, 8 << 20);
    assert_ne!(fixture.audit_record("disk").exit_code, Some(0));
}

async fn planted_secrets_never_reach_the_command(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut request = fixture.request("env", &["env"]);
    request.base_environment = Some(vec![
        ("FOO_API_KEY".to_owned(), "planted-secret".to_owned()),
        ("OPENAI_ORG".to_owned(), "planted-org".to_owned()),
        ("GH_TOKEN".to_owned(), "planted-token".to_owned()),
        ("SAFE_VAR".to_owned(), "ok".to_owned()),
        ("NOT_LISTED".to_owned(), "not-inherited".to_owned()),
    ]);
    request.env.inherit =
        ["FOO_API_KEY", "OPENAI_ORG", "GH_TOKEN", "SAFE_VAR"].map(str::to_owned).to_vec();
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    let mut lines: Vec<&str> = result.stdout.lines().collect();
    lines.sort_unstable();
    let private_tmp =
        lines.iter().find_map(|line| line.strip_prefix("TMPDIR=")).unwrap().to_owned();
    assert!(private_tmp.contains("tools-runtime-"), "{private_tmp}");
    let home = format!("HOME={private_tmp}");
    let tmpdir = format!("TMPDIR={private_tmp}");
    assert_eq!(
        lines,
        vec![
            home.as_str(),
            "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
            "SAFE_VAR=ok",
            tmpdir.as_str(),
        ]
    );
    assert_eq!(
        fixture.audit_record("env").withheld_environment,
        vec!["FOO_API_KEY", "GH_TOKEN", "OPENAI_ORG"]
    );
}

async fn the_command_has_no_privileges_and_cannot_mount(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let script = "grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd|CapAmb):' /proc/self/status; \
                  mkdir -p m; mount -t tmpfs none m && echo mounted; \
                  unshare -r true && echo unshared; echo done; \
                  python3 -c 'import ctypes; print(\"securebits\", ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))'";
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("privileges", &["sh", "-c", script]))
        .await
        .unwrap());
    // uid 0 keeps no capability through execve: NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off and
    // NO_CAP_AMBIENT_RAISE, each locked (0xef).
    let securebits = if owner.runs_as_uid0() { 0xef } else { 0 };
    assert_eq!(
        result.stdout,
        format!(
            "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n\
             CapAmb:\t0000000000000000\n\
             NoNewPrivs:\t1\ndone\nsecurebits {securebits}\n"
        )
    );
    let record = fixture.audit_record("privileges");
    assert_layer(&record, Layer::NoNewPrivileges, LayerStatus::Active);
    assert_layer(&record, Layer::DropPrivileges, LayerStatus::Active);
}

async fn host_processes_cannot_be_killed_or_traced(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut host = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = host.id().to_string();
    let script = format!(
        "kill -9 {pid} && echo killed; \
         python3 -c 'import ctypes; print(\"ptrace\", ctypes.CDLL(None).ptrace(16, {pid}, 0, 0))'"
    );
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("kill-host", &["sh", "-c", &script]))
        .await
        .unwrap());
    assert_eq!(result.stdout, "ptrace -1\n");
    assert!(host.try_wait().unwrap().is_none(), "the host process survived");
    host.kill().unwrap();
    host.wait().unwrap();
    assert_eq!(fixture.audit_record("kill-host").exit_code, Some(0));
}

async fn a_command_reading_stdin_gets_end_of_file(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let script = "read line; echo \"read=$?\"; cat; echo done";
    let result =
        ran(fixture.runtime().run(&fixture.request("stdin", &["sh", "-c", script])).await.unwrap());
    assert_eq!(result.stdout, "read=1\ndone\n");
    assert!(!result.timed_out);
    assert_eq!(fixture.audit_record("stdin").exit_code, Some(0));
}

async fn resource_limits_are_reported_by_the_kernel(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut request = fixture.request(
        "rlimits",
        &["bash", "-c", "ulimit -c; ulimit -t; ulimit -f; ulimit -n; ulimit -u"],
    );
    request.limits = Some(Limits {
        rlimits: Rlimits {
            cpu_seconds: 7,
            address_space_bytes: 2 << 30,
            file_size_bytes: 1 << 20,
            open_files: 100,
            processes: 50,
        },
        memory_bytes: 1 << 30,
        pids: 64,
    });
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert_eq!(result.stdout, "0\n7\n1024\n100\n50\n");
    assert_layer(&fixture.audit_record("rlimits"), Layer::Rlimits, LayerStatus::Active);
}

async fn commands_run_as_the_workspace_owner_never_with_capabilities(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let runtime = fixture.runtime();
    let result = ran(runtime.run(&fixture.request("uid-nobody", &["id", "-u"])).await.unwrap());
    if !is_root() {
        // Not started as root: the command keeps the caller's own unprivileged uid.
        assert_eq!(result.stdout, format!("{}\n", nix::unistd::geteuid()));
        return;
    }
    if owner == Owner::Root {
        assert_eq!(result.stdout, "0\n");
        let record = fixture.audit_record("uid-nobody");
        assert_eq!(
            record.sandbox.unwrap().notes.get(&Layer::DropPrivileges).map(String::as_str),
            Some("uid 0 gid 0 without capabilities, securebits 0xef locked")
        );
        return;
    }
    assert_eq!(result.stdout, "65534\n");
    std::os::unix::fs::chown(&fixture.workspace, Some(1234), Some(1234)).unwrap();
    let result = ran(runtime.run(&fixture.request("uid-owner", &["id", "-u"])).await.unwrap());
    let result_group =
        ran(runtime.run(&fixture.request("gid-owner", &["id", "-g"])).await.unwrap());
    assert_eq!((result.stdout.as_str(), result_group.stdout.as_str()), ("1234\n", "1234\n"));
    let record = fixture.audit_record("uid-owner");
    assert_eq!(
        record.sandbox.unwrap().notes.get(&Layer::DropPrivileges).map(String::as_str),
        Some("uid 1234 gid 1234")
    );
}

#[cfg(target_arch = "x86_64")]
async fn dangerous_syscalls_fail_with_eperm(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    // x86_64 numbers: io_uring_setup, bpf, kexec_load, init_module, process_vm_readv,
    // perf_event_open, userfaultfd, keyctl, unshare, setns, mount, fsconfig, mount_setattr.
    let script = "import ctypes\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  for number in [425, 321, 246, 175, 310, 298, 323, 250, 272, 308, 165, 431, 442]:\n\
                  \x20   result = libc.syscall(number, 0, 0, 0, 0, 0)\n\
                  \x20   print(number, result, ctypes.get_errno())\n";
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("syscalls", &["python3", "-c", script]))
        .await
        .unwrap());
    let expected: String = [425, 321, 246, 175, 310, 298, 323, 250, 272, 308, 165, 431, 442]
        .iter()
        .map(|number| format!("{number} -1 1\n"))
        .collect();
    assert_eq!(result.stdout, expected, "{result:?}");
    assert_layer(
        &fixture.audit_record("syscalls"),
        Layer::Seccomp,
        MachineLayers::status(machine.seccomp),
    );
}

async fn a_missing_program_exits_127_with_the_helper_saying_why(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let request = fixture.request("missing-program", &["no-such-program-anywhere"]);
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    assert_eq!(result.exit_code, Some(127));
    assert!(
        result
            .stderr
            .starts_with("tools-runtime-sandbox: cannot execute no-such-program-anywhere:"),
        "{result:?}"
    );
    assert_eq!(fixture.audit_record("missing-program").exit_code, Some(127));
}

async fn a_writable_descriptor_inherited_by_the_runtime_does_not_reach_the_command(owner: Owner) {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::AsRawFd;
    let fixture = Fixture::owned_by(owner);
    // A file the sandbox user could never open, held open for writing by the runtime's process
    // without close-on-exec (as a careless embedding program or its own parent might leave it).
    let victim = fixture.base.path().join("victim.log");
    std::fs::write(&victim, "victim\n").unwrap();
    let file = std::fs::OpenOptions::new().append(true).open(&victim).unwrap();
    fcntl(&file, FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
    let script = format!(
        "import os\ntry:\n    os.write({}, b'pwned\\n')\n    print('wrote')\nexcept OSError as error:\n    print('blocked', error.errno)\n",
        file.as_raw_fd()
    );
    let outcome =
        fixture.runtime().run(&fixture.request("inherited-fd", &["python3", "-c", &script])).await;
    drop(file);
    let result = ran(outcome.unwrap());
    assert_eq!(result.stdout, "blocked 9\n", "{result:?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim\n");
    assert_eq!(fixture.audit_record("inherited-fd").outcome, "ran");
}

async fn a_command_cannot_forge_a_helper_report_line(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let forged = serde_json::json!({
        "report": tools_runtime::SandboxReport::new(Backend::Direct),
        "refused": "forged by the command",
    });
    let script =
        format!("printf '\\001tools-runtime-sandbox-report %s\\n' '{forged}' >&2; echo ran");
    let outcome =
        fixture.runtime().run(&fixture.request("forged-report", &["sh", "-c", &script])).await;
    let result = ran(outcome.unwrap());
    assert_eq!(result.stdout, "ran\n");
    assert!(result.stderr.contains("forged by the command"), "{result:?}");
    let record = fixture.audit_record("forged-report");
    assert_eq!((record.outcome.as_str(), record.exit_code), ("ran", Some(0)));
    assert_eq!(record.sandbox, Some(result.sandbox));
}

async fn renaming_the_parent_of_a_protected_path_does_not_replace_it(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::with_protected_tree(owner);
    std::fs::create_dir_all(fixture.workspace.join("skills/skill")).unwrap();
    std::fs::write(fixture.workspace.join("skills/skill/SKILL.md"), "genuine\n").unwrap();
    fixture.give_to_owner(&["skills", "skills/skill", "skills/skill/SKILL.md"]);
    let script = "mv .git .git-old; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit; \
                  mv skills skills-old; mkdir -p skills/skill; echo evil > skills/skill/SKILL.md";
    let mut request = fixture.request("rename-parent", &["sh", "-c", script]);
    request.protected_paths = vec!["skills/skill".into(), ".git/hooks".into()];
    let outcome = fixture.runtime().run(&request).await.unwrap();
    if !fixture.protects_paths(&machine) {
        assert_eq!(refused(outcome).kind, RefusalKind::SandboxUnavailable);
        return;
    }
    let result = ran(outcome);
    let read = |path: &str| std::fs::read_to_string(fixture.workspace.join(path)).ok();
    assert_eq!(
        (read(".git/hooks/pre-commit"), read("skills/skill/SKILL.md")),
        (Some("#!/bin/sh\n".to_owned()), Some("genuine\n".to_owned())),
        "{result:?}"
    );
    assert_eq!(fixture.audit_record("rename-parent").outcome, "ran");
}

async fn a_protected_path_that_does_not_exist_yet_cannot_be_created(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::with_protected_tree(owner);
    std::fs::remove_dir_all(fixture.workspace.join(".git/hooks")).unwrap();
    let script = "mkdir .git/hooks; echo evil > .git/hooks/pre-commit; echo ok > allowed.txt";
    let mut request = fixture.request("missing-protected", &["sh", "-c", script]);
    request.protected_paths = vec![".git/hooks".into()];
    let outcome = fixture.runtime().run(&request).await.unwrap();
    if !fixture.protects_paths(&machine) {
        assert_eq!(refused(outcome).kind, RefusalKind::SandboxUnavailable);
        return;
    }
    let result = ran(outcome);
    assert!(!fixture.workspace.join(".git/hooks").exists(), "{result:?}");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("allowed.txt")).unwrap(), "ok\n");
    assert_eq!(fixture.audit_record("missing-protected").outcome, "ran");
}

/// x86_64 kernels built with the x32 ABI accept every syscall number again with bit 30 set; the
/// filter must deny those too (`EPERM` from seccomp, where a kernel without x32 says `ENOSYS`).
#[cfg(target_arch = "x86_64")]
async fn x32_syscall_numbers_are_denied_by_seccomp(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    // getpid, socket(AF_INET, SOCK_STREAM), ptrace(PTRACE_TRACEME), with the x32 bit.
    let script = "import ctypes\n\
                  libc = ctypes.CDLL(None, use_errno=True)\n\
                  for number, arguments in [(39, []), (41, [2, 1, 0]), (101, [0, 0, 0, 0])]:\n\
                  \x20   result = libc.syscall(0x40000000 | number, *arguments)\n\
                  \x20   print(number, result, ctypes.get_errno())\n";
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("x32", &["python3", "-c", script]))
        .await
        .unwrap());
    let errno = if machine.seccomp { 1 } else { 38 };
    let expected: String =
        [39, 41, 101].iter().map(|number| format!("{number} -1 {errno}\n")).collect();
    assert_eq!(result.stdout, expected, "{result:?}");
    assert_eq!(fixture.audit_record("x32").outcome, "ran");
}

/// `TIOCSTI` on a terminal of the runtime's session would type commands into the user's shell.
/// stdout is a pipe, so the kernel alone answers `ENOTTY`; the seccomp filter answers first.
async fn terminal_input_injection_is_denied_by_seccomp(owner: Owner) {
    let machine = MachineLayers::probe();
    let fixture = Fixture::owned_by(owner);
    let script = "import fcntl, termios\n\
                  for request in [termios.TIOCSTI, 0x541C]:\n\
                  \x20   try:\n\
                  \x20       fcntl.ioctl(1, request, b'x')\n\
                  \x20       print('accepted')\n\
                  \x20   except OSError as error:\n\
                  \x20       print(error.errno)\n";
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("tiocsti", &["python3", "-c", script]))
        .await
        .unwrap());
    let expected = if machine.seccomp { "1\n1\n" } else { "25\n25\n" };
    assert_eq!(result.stdout, expected, "{result:?}");
    assert_eq!(fixture.audit_record("tiocsti").outcome, "ran");
}

/// `LD_PRELOAD` meant for the command must not reach the helper, which runs as root until the
/// privilege drop: the preloaded library's constructor records the euid it ran as.
async fn a_preload_library_for_the_command_never_runs_in_the_root_helper(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let source = fixture.base.path().join("preload.c");
    let library = fixture.base.path().join("preload.so");
    let marker_directory = fixture.outside.display().to_string();
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n#include <unistd.h>\n\
             __attribute__((constructor)) static void preloaded(void) {{\n\
             char path[512];\n\
             snprintf(path, sizeof path, \"{marker_directory}/preloaded-as-%d\", (int)geteuid());\n\
             FILE *file = fopen(path, \"w\");\n\
             if (file) fclose(file);\n}}\n"
        ),
    )
    .unwrap();
    let compiled = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status();
    if !compiled.is_ok_and(|status| status.success()) {
        eprintln!("no C compiler: the LD_PRELOAD attack needs one to build its library");
        return;
    }
    let mut request = fixture.request("preload", &["true"]);
    request.env.set.insert("LD_PRELOAD".to_owned(), library.display().to_string());
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    let mut markers: Vec<String> = std::fs::read_dir(&fixture.outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    markers.sort();
    // The command loads it too, as asked, but Landlock keeps its marker out of `outside`.
    assert_eq!(markers, Vec::<String>::new(), "{result:?}");
    assert_eq!(fixture.audit_record("preload").outcome, "ran");
}

/// A caller that gives up on a run (its own timeout drops the future) still leaves an audit
/// record.
async fn an_abandoned_run_is_audited(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let request = fixture.request("abandoned", &["sleep", "41"]);
    let runtime = fixture.runtime();
    let run = runtime.run(&request);
    assert!(tokio::time::timeout(Duration::from_millis(300), run).await.is_err());
    let record = fixture.audit_record("abandoned");
    assert_eq!(
        (record.outcome.as_str(), record.refusal.as_deref()),
        ("abandoned", Some("the caller dropped the run before it finished"))
    );
}

/// Removes what a test planted outside its temporary directory, even when an assertion fails.
struct Planted(Vec<std::path::PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for path in self.0.iter().rev() {
            let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir(path));
        }
    }
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Held while a test plants in `/root/.ssh`: the root- and user-owned variants run in parallel,
/// and one removing the directory it created must not pull it from under the other.
static ROOT_SSH: std::sync::Mutex<()> = std::sync::Mutex::new(());

// Each `#[tokio::test]` has its own runtime on its own thread: the variant that waits for the
// lock blocks only itself while the other runs on.
#[allow(clippy::await_holding_lock)]
async fn root_private_files_stay_unreadable(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    if !is_root() {
        eprintln!("not root: there are no root-owned private files to plant");
        return;
    }
    let _root_ssh = ROOT_SSH.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut planted = Planted(Vec::new());
    let ssh = std::path::Path::new("/root/.ssh");
    match std::fs::create_dir(ssh) {
        Ok(()) => {
            set_mode(ssh, 0o700);
            planted.0.push(ssh.to_path_buf());
        }
        // There already, or planted by a concurrent run of this suite in another process.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => panic!("cannot create {}: {error}", ssh.display()),
    }
    let key = ssh.join(format!("id_test-tools-runtime-{}-{owner:?}", std::process::id()));
    std::fs::write(&key, "PLANTED PRIVATE KEY\n").unwrap();
    set_mode(&key, 0o600);
    planted.0.push(key.clone());
    let private_directory = fixture.base.path().join("root-only");
    std::fs::create_dir(&private_directory).unwrap();
    set_mode(&private_directory, 0o700);
    let secret = private_directory.join("secret");
    std::fs::write(&secret, "PLANTED SECRET\n").unwrap();
    set_mode(&secret, 0o600);
    let script = format!(
        "cat {} {} /etc/shadow /etc/gshadow; cat /etc/ssl/private/*; ls /root; \
         ls {}; cat /proc/self/root{}; echo done",
        key.display(),
        secret.display(),
        private_directory.display(),
        key.display()
    );
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("root-secrets", &["sh", "-c", &script]))
        .await
        .unwrap());
    assert_eq!(result.stdout, "done\n", "{result:?}");
    assert!(!result.stderr.contains("PLANTED"), "{result:?}");
    assert_eq!(fixture.audit_record("root-secrets").outcome, "ran");
}

async fn the_agents_environment_and_memory_stay_unreadable(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    // The agent itself (this test process, which holds capabilities when root) and a process
    // of the same uid that holds none, so only Landlock's ptrace restrictions stand between.
    let mut capless = std::process::Command::new("setpriv")
        .args(["--bounding-set=-all", "--inh-caps=-all", "sleep", "43"])
        .env("TOOLS_RUNTIME_PLANTED_SECRET", "agent-secret-value")
        .spawn()
        .unwrap();
    let agent = std::process::id();
    let victim = capless.id();
    let script = format!(
        "for pid in {agent} {victim}; do \
           cat /proc/$pid/environ > /dev/null 2>&1 && echo \"environ $pid readable\"; \
           python3 -c \"open('/proc/$pid/mem', 'rb')\" 2> /dev/null && echo \"mem $pid readable\"; \
           readlink /proc/$pid/fd/0 > /dev/null 2>&1 && echo \"fd $pid readable\"; \
           readlink /proc/$pid/cwd > /dev/null 2>&1 && echo \"cwd $pid readable\"; \
           grep -q . /proc/$pid/cmdline && echo \"cmdline $pid\"; \
         done; grep -a agent-secret-value /proc/*/environ"
    );
    let outcome =
        fixture.runtime().run(&fixture.request("agent-environ", &["sh", "-c", &script])).await;
    capless.kill().unwrap();
    capless.wait().unwrap();
    let result = ran(outcome.unwrap());
    assert_eq!(result.stdout, format!("cmdline {agent}\ncmdline {victim}\n"), "{result:?}");
    assert_eq!(fixture.audit_record("agent-environ").outcome, "ran");
}

async fn a_root_owned_socket_under_a_root_only_directory_is_out_of_reach(owner: Owner) {
    use std::os::linux::net::SocketAddrExt;
    let fixture = Fixture::owned_by(owner);
    let directory = fixture.base.path().join("root-only-socket");
    std::fs::create_dir(&directory).unwrap();
    set_mode(&directory, 0o700);
    let path = directory.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = format!("tools-runtime-test-{}-{owner:?}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let script = format!(
        "import socket\n\
         for address in ['{}', '\\0{abstract_name}']:\n\
         \x20   try:\n\
         \x20       socket.socket(socket.AF_UNIX).connect(address)\n\
         \x20       print('connected')\n\
         \x20   except OSError as error:\n\
         \x20       print('blocked')\n\
         left, right = socket.socketpair()\n\
         left.send(b'pair')\n\
         print(right.recv(4).decode())\n",
        path.display()
    );
    for allow_network in [false, true] {
        let call_id = format!("unix-socket-{allow_network}");
        let mut request = fixture.request(&call_id, &["python3", "-c", &script]);
        request.allow_network = allow_network;
        let result = ran(fixture.runtime().run(&request).await.unwrap());
        assert_eq!(result.stdout, "blocked\nblocked\npair\n", "{call_id}: {result:?}");
        assert_eq!(fixture.audit_record(&call_id).outcome, "ran");
    }
    assert_eq!(listener.accept().unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    assert_eq!(abstract_listener.accept().unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
}

async fn set_id_bits_and_host_file_modes_cannot_be_set(owner: Owner) {
    use std::os::unix::fs::MetadataExt;
    let fixture = Fixture::owned_by(owner);
    let victim = fixture.outside.join("victim");
    std::fs::write(&victim, "victim\n").unwrap();
    set_mode(&victim, 0o644);
    let before = std::fs::metadata(&victim).unwrap();
    let script = format!(
        "cp /bin/true mine; chmod u+s mine; chmod g+s mine; install -m 4755 /bin/true installed; \
         python3 -c \"import os; os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o6755))\"; \
         chmod 666 {victim}; chown 0:0 {victim}; touch -d 2001-01-01 {victim}; \
         python3 -c \"import os; os.setxattr('{victim}', 'user.planted', b'1')\"; echo done",
        victim = victim.display()
    );
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("set-id", &["sh", "-c", &script]))
        .await
        .unwrap());
    assert!(result.stdout.ends_with("done\n"), "{result:?}");
    // No file of root's (or root's group's) carries a set-uid or set-gid bit.
    let mut special: Vec<String> = std::fs::read_dir(&fixture.workspace)
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| {
            let metadata = entry.metadata().unwrap();
            (metadata.mode() & 0o4000 != 0 && metadata.uid() == 0)
                || (metadata.mode() & 0o2000 != 0 && metadata.gid() == 0)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    special.sort();
    assert_eq!(special, Vec::<String>::new(), "{result:?}");
    let after = std::fs::metadata(&victim).unwrap();
    assert_eq!(
        (after.mode(), after.uid(), after.mtime()),
        (before.mode(), before.uid(), before.mtime()),
        "{result:?}"
    );
    let xattr = std::process::Command::new("getfattr").arg("-d").arg(&victim).output();
    if let Ok(xattr) = xattr {
        assert!(!String::from_utf8_lossy(&xattr.stdout).contains("planted"), "{result:?}");
    }
    assert_eq!(fixture.audit_record("set-id").outcome, "ran");
}

async fn host_processes_cannot_be_reprioritised_or_limited(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let mut host = std::process::Command::new("sleep").arg("44").spawn().unwrap();
    let pid = host.id();
    let observe = |pid: u32| {
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let nice = stat.rsplit(')').next().unwrap().split_whitespace().nth(16).unwrap().to_owned();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let cpus = status.lines().find(|line| line.starts_with("Cpus_allowed_list")).unwrap();
        (limits, nice, cpus.to_owned())
    };
    let before = (observe(pid), observe(std::process::id()));
    let script = format!(
        "prlimit --pid {pid} --nofile=3:3; prlimit --pid {pid} --cpu=1:1; renice -n 19 -p {pid}; \
         taskset -p 1 {pid}; ionice -c 3 -p {pid}; \
         python3 -c 'import os; os.setpriority(os.PRIO_USER, 0, 19)'; echo done"
    );
    let request = fixture.request("reprioritise", &["sh", "-c", &script]);
    let result = ran(fixture.runtime().run(&request).await.unwrap());
    let after = (observe(pid), observe(std::process::id()));
    host.kill().unwrap();
    host.wait().unwrap();
    assert!(result.stdout.ends_with("done\n"), "{result:?}");
    assert_eq!(after, before, "{result:?}");
    assert_eq!(fixture.audit_record("reprioritise").outcome, "ran");
}

async fn capabilities_do_not_come_back_through_set_id_or_file_capability_binaries(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    if !is_root() {
        eprintln!("not root: no set-uid-root or file-capability binary can be planted");
        return;
    }
    let set_uid = fixture.workspace.join("suid-grep");
    let file_capabilities = fixture.workspace.join("fcap-grep");
    for copy in [&set_uid, &file_capabilities] {
        std::fs::copy("/usr/bin/grep", copy).unwrap();
    }
    set_mode(&set_uid, 0o4755);
    let capabilities_set = std::process::Command::new("setcap")
        // Permitted, not effective: a capability-dumb `+ep` binary is refused outright (EPERM)
        // when it cannot get its capabilities; `+p` shows the permitted set does not grow.
        .arg("cap_dac_override,cap_sys_admin,cap_setuid+p")
        .arg(&file_capabilities)
        .status()
        .is_ok_and(|status| status.success());
    assert!(capabilities_set, "setcap is installed and the filesystem keeps file capabilities");
    let script = "./suid-grep -E '^(Uid|CapPrm|CapEff)' /proc/self/status; \
                  ./fcap-grep -E '^(Uid|CapPrm|CapEff)' /proc/self/status";
    let result = ran(fixture
        .runtime()
        .run(&fixture.request("set-id-exec", &["sh", "-c", script]))
        .await
        .unwrap());
    let uid = owner.command_uid();
    let expected = format!(
        "Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
    );
    assert_eq!(result.stdout, expected.repeat(2), "{result:?}");
    assert_eq!(fixture.audit_record("set-id-exec").outcome, "ran");
}

/// A working directory the command's user cannot enter is refused before `execve`, naming the
/// directory that stops it, the user, and what to change (not "cannot execute PROGRAM").
async fn an_unenterable_working_directory_is_reported_with_the_user_and_the_fix(owner: Owner) {
    use std::os::unix::fs::MetadataExt;
    let fixture = Fixture::owned_by(owner);
    if !is_root() {
        eprintln!("not root: the command runs as the test user, who can enter the workspace");
        return;
    }
    let mut config = fixture.config();
    // A root-owned 0700 workspace with the old behaviour (always `nobody`), or a nobody-owned
    // workspace below a directory only root may enter.
    let blocker = match owner {
        Owner::Root => {
            config.run_as_workspace_owner = false;
            fixture.workspace.canonicalize().unwrap()
        }
        Owner::User => {
            set_mode(fixture.base.path(), 0o700);
            fixture.base.path().canonicalize().unwrap()
        }
    };
    let metadata = std::fs::metadata(&blocker).unwrap();
    let workspace = fixture.workspace.canonicalize().unwrap();
    let refusal = refused(
        fixture
            .runtime_with(config)
            .run(&fixture.request("cwd-inaccessible", &["sh", "-c", "echo hi"]))
            .await
            .unwrap(),
    );
    let expected = format!(
        "refusing to run `sh -c echo hi`: the command's user (uid 65534, gid 65534) cannot enter \
         the working directory {}: Permission denied (os error 13) at {} (owner uid {}, gid {}, \
         mode {:o}); make the workspace and every directory above it enterable by uid 65534 \
         (e.g. chown the workspace to that user, chmod o+x the directory), or keep the \
         runtime's default of running as the workspace owner",
        workspace.display(),
        blocker.display(),
        metadata.uid(),
        metadata.gid(),
        metadata.mode() & 0o7777
    );
    assert_eq!(
        (refusal.kind, refusal.message.as_str()),
        (RefusalKind::WorkspaceInaccessible, expected.as_str())
    );
    assert_eq!(fixture.audit_record("cwd-inaccessible").outcome, "workspace_inaccessible");
}

for_both_owners!(
    every_layer_this_machine_offers_is_active,
    filesystem_escapes_are_blocked_and_audited,
    protected_paths_inside_the_workspace_stay_read_only,
    protected_paths_are_refused_by_the_direct_backend_and_a_missing_bwrap,
    network_is_blocked_for_tcp_udp_and_dns_on_both_backends,
    a_fork_bomb_run_as_root_is_bounded,
    a_200_megabyte_flood_is_counted_and_truncated,
    head_and_tail_are_kept_with_an_exact_elision_marker,
    invalid_utf8_and_output_without_newline_survive,
    a_timeout_kills_grandchildren_holding_the_pipe_and_keeps_partial_output,
    a_timeout_with_protected_paths_kills_everything_inside,
    cpu_spin_is_stopped_by_the_cpu_limit,
    a_memory_bomb_hits_the_address_space_limit,
    a_memory_bomb_hits_the_cgroup_memory_limit,
    a_disk_fill_stops_at_the_file_size_limit,
    planted_secrets_never_reach_the_command,
    the_command_has_no_privileges_and_cannot_mount,
    host_processes_cannot_be_killed_or_traced,
    a_command_reading_stdin_gets_end_of_file,
    resource_limits_are_reported_by_the_kernel,
    commands_run_as_the_workspace_owner_never_with_capabilities,
    a_missing_program_exits_127_with_the_helper_saying_why,
    a_writable_descriptor_inherited_by_the_runtime_does_not_reach_the_command,
    a_command_cannot_forge_a_helper_report_line,
    renaming_the_parent_of_a_protected_path_does_not_replace_it,
    a_protected_path_that_does_not_exist_yet_cannot_be_created,
    terminal_input_injection_is_denied_by_seccomp,
    a_preload_library_for_the_command_never_runs_in_the_root_helper,
    an_abandoned_run_is_audited,
    root_private_files_stay_unreadable,
    the_agents_environment_and_memory_stay_unreadable,
    a_root_owned_socket_under_a_root_only_directory_is_out_of_reach,
    set_id_bits_and_host_file_modes_cannot_be_set,
    host_processes_cannot_be_reprioritised_or_limited,
    capabilities_do_not_come_back_through_set_id_or_file_capability_binaries,
    an_unenterable_working_directory_is_reported_with_the_user_and_the_fix,
);

#[cfg(target_arch = "x86_64")]
for_both_owners!(dangerous_syscalls_fail_with_eperm, x32_syscall_numbers_are_denied_by_seccomp);
