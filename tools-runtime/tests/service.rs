//! Services: long-running confined processes whose stdin/stdout stay open (MCP stdio servers),
//! and `Runtime::authorize` for actions that are not scripts. Real processes throughout; each
//! service test runs in a root-owned and in a user-owned workspace (`for_both_owners!`).

// Test bodies called by the generated `#[tokio::test]`s: a failed setup step stops them loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use support::{Fixture, MachineLayers, Owner};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tools_runtime::{
    ApprovalAnswer, ApprovalMode, ApprovalRequest, Approver, BackendChoice, Decision, Error,
    ExecOutcome, Layer, RefusalKind, Service, ServiceRequest,
};

/// A shell service: runs each line it reads as a command and answers `rc=N output` on one line.
const SHELL_SERVICE: &str = r#"while IFS= read -r line; do
  out=$(sh -c "$line" 2>&1); rc=$?
  printf 'rc=%s %s\n' "$rc" "$(printf %s "$out" | tr '\n' ' ')"
done"#;

/// A node program speaking line-delimited JSON-RPC, like an MCP stdio server.
const NODE_SERVICE: &str = r#"
const fs = require('fs');
const rl = require('readline').createInterface({ input: process.stdin });
console.error('node service ready');
const methods = {
  echo: (params) => ({ echo: params, pid: process.pid }),
  read: (params) => ({ text: fs.readFileSync(params.path, 'utf8') }),
  write: (params) => { fs.writeFileSync(params.path, params.text); return {}; },
};
rl.on('line', (line) => {
  const request = JSON.parse(line);
  let answer;
  try {
    answer = { jsonrpc: '2.0', id: request.id, result: methods[request.method](request.params) };
  } catch (error) {
    answer = { jsonrpc: '2.0', id: request.id, error: { code: -32000, message: error.code || String(error) } };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
});
"#;

struct Pipes {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Pipes {
    fn of(service: &mut Service) -> Pipes {
        Pipes {
            stdin: service.take_stdin().unwrap(),
            stdout: BufReader::new(service.take_stdout().unwrap()),
        }
    }

    async fn read_line(&mut self) -> String {
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(30), self.stdout.read_line(&mut answer))
            .await
            .expect("the service answers within 30 s")
            .unwrap();
        answer
    }

    /// Writes `line` and reads one line back.
    async fn ask(&mut self, line: &str) -> String {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        self.read_line().await
    }
}

/// Whether the machine can confine a service in this workspace; prints why not when it cannot.
fn can_confine(owner: Owner) -> bool {
    let machine = MachineLayers::probe();
    let can = machine.can_confine_for(owner);
    if !can {
        eprintln!("skipped: this machine cannot confine a service for {owner:?}: {machine:?}");
    }
    can
}

fn shell_service(fixture: &Fixture) -> ServiceRequest {
    ServiceRequest::new("shell", "sh", vec!["-c".into(), SHELL_SERVICE.into()], &fixture.workspace)
}

/// Whether `pid` is gone (no such process, or a zombie nobody reaped yet).
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
    }
}

/// The host's pid of the process numbered `inner` in the PID namespace of the service whose
/// helper is `service`: the command runs in a namespace of its own, where `$!` and
/// `process.pid` count from 1.
fn host_pid(service: u32, inner: u32) -> u32 {
    let namespace = std::fs::read_link(format!("/proc/{service}/ns/pid_for_children")).unwrap();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok().as_ref() != Some(&namespace) {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let nspid = status.lines().find_map(|line| line.strip_prefix("NSpid:")).unwrap_or("");
        if nspid.split_whitespace().last() == Some(inner.to_string().as_str()) {
            return pid;
        }
    }
    panic!("no process {inner} in the pid namespace of service {service}")
}

async fn wait_until_gone(pids: &[u32]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !pids.iter().all(|pid| is_gone(*pid)) {
        assert!(tokio::time::Instant::now() < deadline, "still alive after 20 s: {pids:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_service_answers_over_stdin_and_stdout(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let request = ServiceRequest::new("echo", "cat", Vec::new(), &fixture.workspace);
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    assert!(service.report.is_active(Layer::Landlock), "{:?}", service.report);
    assert!(service.report.is_active(Layer::ProcessGroup));
    let mut pipes = Pipes::of(&mut service);
    assert_eq!(pipes.ask("hello").await, "hello\n");
    let json = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(pipes.ask(json).await, format!("{json}\n"));
    assert_eq!(service.try_exit().await, None);
    service.shutdown().await;
    let records = fixture.audit_records();
    let outcomes: Vec<&str> = records.iter().map(|record| record.outcome.as_str()).collect();
    assert_eq!(outcomes, ["service_started", "service_stopped"]);
    assert_eq!(records[0].call_id, "echo");
    assert_eq!(records[0].sandbox.as_ref(), Some(&records[1].sandbox.clone().unwrap()));

    // The bubblewrap backend (two helper stages, two report lines) serves a service too.
    if !MachineLayers::probe().bubblewrap || owner.runs_as_uid0() {
        eprintln!("skipped the bubblewrap backend: not installed, or a uid-0 service ({owner:?})");
        return;
    }
    let mut config = fixture.config();
    config.backend = BackendChoice::Bubblewrap;
    let mut service = fixture.runtime_with(config).spawn_service(&request).await.unwrap();
    assert!(service.report.is_active(Layer::Bubblewrap), "{:?}", service.report);
    assert!(service.report.is_active(Layer::Landlock), "{:?}", service.report);
    let mut pipes = Pipes::of(&mut service);
    assert_eq!(pipes.ask("through bwrap").await, "through bwrap\n");
    service.shutdown().await;
}

async fn the_stderr_tail_is_kept_and_an_early_exit_is_seen(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let script = "echo 'starting up' >&2; read line; echo \"bad input: $line\" >&2; exit 3";
    let request =
        ServiceRequest::new("dies", "sh", vec!["-c".into(), script.into()], &fixture.workspace);
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let mut stdin = service.take_stdin().unwrap();
    stdin.write_all(b"garbage\n").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = service.try_exit().await {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "the service did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.code(), Some(3));
    // The drain task may still be reading the last bytes.
    while !service.stderr_tail().contains("bad input") {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", service.stderr_tail());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(service.stderr_tail(), "starting up\nbad input: garbage\n");
    service.shutdown().await;
    let stopped = fixture.audit_records().pop().unwrap();
    assert_eq!((stopped.outcome.as_str(), stopped.exit_code), ("service_stopped", Some(3)));
}

async fn a_service_writes_only_inside_the_workspace(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let mut service = fixture.runtime().spawn_service(&shell_service(&fixture)).await.unwrap();
    let mut pipes = Pipes::of(&mut service);
    assert_eq!(pipes.ask("echo inside > inside.txt").await, "rc=0 \n");
    assert_eq!(std::fs::read_to_string(fixture.workspace.join("inside.txt")).unwrap(), "inside\n");
    let escaped = fixture.outside.join("escaped.txt");
    let answer = pipes.ask(&format!("echo out > {}", escaped.display())).await;
    assert!(answer.starts_with("rc=") && !answer.starts_with("rc=0"), "{answer}");
    assert!(!escaped.exists(), "the service wrote outside the workspace");
    let answer = pipes.ask("echo tmp > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\"").await;
    assert_eq!(answer, "rc=0 tmp\n");
    service.shutdown().await;
}

async fn a_service_has_no_network_unless_allowed(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'");
    for allow_network in [false, true] {
        let mut request = shell_service(&fixture);
        request.allow_network = allow_network;
        let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
        assert_eq!(service.report.is_active(Layer::NetworkNamespace), !allow_network);
        let mut pipes = Pipes::of(&mut service);
        let answer = pipes.ask(&connect).await;
        let accepted = listener.accept().is_ok();
        if allow_network {
            assert!(answer.starts_with("rc=0"), "{answer}");
            assert!(accepted, "the listener saw the connection");
        } else {
            assert!(!answer.starts_with("rc=0"), "{answer}");
            assert!(!accepted, "no connection may arrive without network");
        }
        service.shutdown().await;
    }
}

/// Under uid 0 (a root-owned workspace) reads are narrowed: a world-readable file in a temporary
/// directory outside the workspace stays unreadable unless it is in `read_only_paths`.
async fn a_uid0_service_reads_only_system_workspace_and_read_only_paths(owner: Owner) {
    if !owner.runs_as_uid0() {
        eprintln!("skipped: the service does not run as uid 0 here ({owner:?})");
        return;
    }
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let secret = fixture.outside.join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    let shared = fixture.base.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("readme.txt"), "shared\n").unwrap();
    let mut request = shell_service(&fixture);
    request.read_only_paths = vec![shared.clone()];
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let mut pipes = Pipes::of(&mut service);
    let answer = pipes.ask(&format!("cat {}", secret.display())).await;
    assert!(answer.starts_with("rc=1") && answer.contains("Permission denied"), "{answer}");
    let answer = pipes.ask(&format!("cat {}/readme.txt", shared.display())).await;
    assert_eq!(answer, "rc=0 shared\n");
    let answer = pipes.ask(&format!("echo x > {}/new.txt", shared.display())).await;
    assert!(!answer.starts_with("rc=0"), "read_only_paths stay read-only: {answer}");
    let answer = pipes.ask("cat /root/.bashrc /etc/shadow").await;
    assert!(!answer.starts_with("rc=0"), "{answer}");
    assert_eq!(pipes.ask("cat data.txt").await, "rc=0 data\n");
    service.shutdown().await;
}

/// Starts a service that leaves a background grandchild in its group and one that left the
/// group with `setsid`; returns the service, its pid and the grandchildren's pids, and its
/// private tmp.
async fn service_with_grandchildren(fixture: &Fixture) -> (Service, Vec<u32>, PathBuf) {
    let script = "echo \"$TMPDIR\"; sleep 1000 & echo $!; setsid sleep 1000 & echo $!; exec cat";
    let request =
        ServiceRequest::new("family", "sh", vec!["-c".into(), script.into()], &fixture.workspace);
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let mut stdout = BufReader::new(service.take_stdout().unwrap());
    let mut tmp = String::new();
    stdout.read_line(&mut tmp).await.unwrap();
    let tmp = PathBuf::from(tmp.trim());
    assert!(tmp.is_dir(), "{tmp:?}");
    let helper = service.id().unwrap();
    let mut pids = vec![helper];
    for _ in 0..2 {
        let mut line = String::new();
        stdout.read_line(&mut line).await.unwrap();
        pids.push(host_pid(helper, line.trim().parse().unwrap()));
    }
    assert!(pids.iter().all(|pid| !is_gone(*pid)), "all running: {pids:?}");
    (service, pids, tmp)
}

/// The pids that must die: the setsid escapee only where the cgroups catch it (as root).
fn must_die(pids: &[u32]) -> Vec<u32> {
    let machine = MachineLayers::probe();
    if machine.cgroup_pids || machine.cgroup_memory {
        pids.to_vec()
    } else {
        eprintln!("no cgroups here: the setsid grandchild {} is not checked", pids[2]);
        pids[..2].to_vec()
    }
}

async fn shutdown_kills_the_service_and_its_grandchildren(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let (service, pids, tmp) = service_with_grandchildren(&fixture).await;
    service.shutdown().await;
    wait_until_gone(&must_die(&pids)).await;
    assert!(!tmp.exists(), "the private tmp is removed at shutdown");
}

/// `shutdown_after` lets a service that sees its stdin close exit by itself, and kills one that
/// does not once the grace period is over.
async fn shutdown_after_a_grace_period(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let polite = ServiceRequest::new("polite", "cat", Vec::new(), &fixture.workspace);
    let mut service = fixture.runtime().spawn_service(&polite).await.unwrap();
    drop(service.take_stdin());
    service.shutdown_after(Duration::from_secs(20)).await;
    let stopped = fixture.audit_records().pop().unwrap();
    assert_eq!((stopped.exit_code, stopped.signal), (Some(0), None), "cat exits at EOF");

    let script = "trap '' TERM; exec sleep 1000";
    let stubborn =
        ServiceRequest::new("stubborn", "sh", vec!["-c".into(), script.into()], &fixture.workspace);
    let service = fixture.runtime().spawn_service(&stubborn).await.unwrap();
    service.shutdown_after(Duration::from_millis(100)).await;
    let stopped = fixture.audit_records().pop().unwrap();
    assert_eq!((stopped.exit_code, stopped.signal), (None, Some(9)), "killed after the grace");
}

/// A service that ended by itself leaves nothing behind, even before shutdown: its PID
/// namespace ends with it, and with it the grandchild it left running (shutdown's cgroup kill
/// would catch one too; the process group's id the kernel may hand out again).
async fn a_service_that_ended_leaves_nothing_behind(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let script = "sleep 1000 & echo $!; read -r go; exit 0";
    let request =
        ServiceRequest::new("leaver", "sh", vec!["-c".into(), script.into()], &fixture.workspace);
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let mut stdin = service.take_stdin().unwrap();
    let mut stdout = BufReader::new(service.take_stdout().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).await.unwrap();
    let grandchild = host_pid(service.id().unwrap(), line.trim().parse().unwrap());
    assert!(!is_gone(grandchild), "the grandchild runs while the service does");
    stdin.write_all(b"go\n").await.unwrap();
    stdin.flush().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while service.try_exit().await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the service did not exit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_until_gone(&[grandchild]).await;
    service.shutdown().await;
    let stopped = fixture.audit_records().pop().unwrap();
    assert_eq!((stopped.outcome.as_str(), stopped.exit_code), ("service_stopped", Some(0)));
}

async fn dropping_a_service_kills_it_and_its_grandchildren(owner: Owner) {
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let (service, pids, tmp) = service_with_grandchildren(&fixture).await;
    drop(service);
    wait_until_gone(&must_die(&pids)).await;
    // Removed by a cleanup task once the processes are gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tmp.exists() {
        assert!(tokio::time::Instant::now() < deadline, "{tmp:?} is still there");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopped = fixture.audit_records().pop().unwrap();
    assert_eq!(stopped.outcome, "service_stopped");
}

async fn node_runs_as_a_service(owner: Owner) {
    use std::os::unix::fs::PermissionsExt;
    let Some(node) = find_in_path("node") else {
        eprintln!("skipped: node is not installed (not in PATH)");
        return;
    };
    if !can_confine(owner) {
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let node = node.canonicalize().unwrap();
    let prefix = node.parent().unwrap().parent().unwrap().to_path_buf();
    let mut request = ServiceRequest::new(
        "node echo",
        node.display().to_string(),
        vec!["-e".into(), NODE_SERVICE.into()],
        &fixture.workspace,
    );
    request.read_only_paths = vec![prefix];
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let mut pipes = Pipes::of(&mut service);
    for id in 1..=3 {
        let answer = pipes
            .ask(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo","params":{{"n":{id}}}}}"#))
            .await;
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], id);
        assert_eq!(answer["result"]["echo"]["n"], id);
        // node runs in the service's own PID namespace.
        let inner = u32::try_from(answer["result"]["pid"].as_u64().unwrap()).unwrap();
        host_pid(service.id().unwrap(), inner);
    }
    assert!(service.stderr_tail().contains("node service ready"), "{}", service.stderr_tail());

    // Like a filesystem server told to serve `/`: it reads and writes the workspace, nothing
    // private outside it, and writes nowhere else.
    let private = fixture.outside.join("private.txt");
    std::fs::write(&private, "private\n").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let inside = fixture.workspace.join("node.txt");
    let outside = fixture.outside.join("node.txt");
    let cases = [
        ("read", serde_json::json!({ "path": fixture.workspace.join("data.txt") }), None),
        ("write", serde_json::json!({ "path": inside, "text": "in" }), None),
        // The test's own file: private to the service only when the test runs as root (otherwise the
        // service runs as the test's user, who may read what it wrote).
        ("read", serde_json::json!({ "path": private }), support::is_root().then_some("EACCES")),
        // uid 0 meets the read-only host mounts first, another user the permission check.
        ("write", serde_json::json!({ "path": outside, "text": "out" }), Some("EACCES|EROFS")),
        ("read", serde_json::json!({ "path": "/etc/shadow" }), Some("EACCES")),
    ];
    for (index, (method, params, error)) in cases.into_iter().enumerate() {
        let request = serde_json::json!({ "jsonrpc": "2.0", "id": index, "method": method, "params": params });
        let answer: serde_json::Value =
            serde_json::from_str(&pipes.ask(&request.to_string()).await).unwrap();
        let got = answer["error"]["message"].as_str();
        let expected = error.map(|codes| codes.split('|').any(|code| got == Some(code)));
        assert!(expected.unwrap_or(got.is_none()), "{method} {params}: {answer}");
    }
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "in");
    assert!(!outside.exists());
    service.shutdown().await;
}

/// A node installed outside the system directories (like `~/.nvm`) runs as a uid-0 service only
/// with its prefix in `read_only_paths`; without it the start is refused with that advice.
async fn a_private_node_needs_its_prefix_in_read_only_paths(owner: Owner) {
    let Some(node) = find_in_path("node") else {
        eprintln!("skipped: node is not installed (not in PATH)");
        return;
    };
    if !owner.runs_as_uid0() || !can_confine(owner) {
        eprintln!("skipped: only a uid-0 service has narrowed reads ({owner:?})");
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let prefix = fixture.outside.join("node-prefix");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    let private_node = prefix.join("bin/node");
    std::fs::copy(node.canonicalize().unwrap(), &private_node).unwrap();
    let mut request = ServiceRequest::new(
        "private node",
        private_node.display().to_string(),
        vec!["-e".into(), NODE_SERVICE.into()],
        &fixture.workspace,
    );
    let error = fixture.runtime().spawn_service(&request).await.unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, Error::ServiceRefused { refusal, .. } if refusal.kind == RefusalKind::PathOutsideWorkspace),
        "{error:?}"
    );
    assert!(message.contains("read_only_paths") && message.contains("private node"), "{message}");
    request.read_only_paths = vec![prefix];
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let mut pipes = Pipes::of(&mut service);
    let answer = pipes.ask(r#"{"jsonrpc":"2.0","id":7,"params":"x"}"#).await;
    assert!(answer.contains(r#""id":7"#), "{answer}");
    service.shutdown().await;
}

async fn a_refused_start_says_what_to_change(owner: Owner) {
    let fixture = Fixture::owned_by(owner);
    let runtime = fixture.runtime();

    let request = ServiceRequest::new("ghost", "no-such-server", Vec::new(), &fixture.workspace);
    let error = runtime.spawn_service(&request).await.unwrap_err();
    assert!(matches!(error, Error::ServiceStart { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with("cannot start service `ghost`: program `no-such-server` not found")
    );
    assert!(message.contains("PATH"), "{message}");

    let mut request = ServiceRequest::new("away", "cat", Vec::new(), &fixture.workspace);
    request.cwd = fixture.outside.clone();
    let error = runtime.spawn_service(&request).await.unwrap_err();
    let Error::ServiceRefused { refusal, .. } = &error else { panic!("{error:?}") };
    assert_eq!(refusal.kind, RefusalKind::PathOutsideWorkspace);

    // A backend that cannot be had (outside uid-0 runs, which always use the direct one).
    if !owner.runs_as_uid0() {
        let mut config = fixture.config();
        config.backend = BackendChoice::Bubblewrap;
        config.bubblewrap_program = PathBuf::from("/nonexistent/bwrap");
        let request = ServiceRequest::new("wrapped", "cat", Vec::new(), &fixture.workspace);
        let error = fixture.runtime_with(config).spawn_service(&request).await.unwrap_err();
        let Error::ServiceRefused { refusal, .. } = &error else { panic!("{error:?}") };
        assert_eq!(refusal.kind, RefusalKind::SandboxUnavailable);
        assert!(error.to_string().contains("/nonexistent/bwrap"), "{error}");
    }
    // A program the service's user cannot execute is refused after every layer, before the
    // caller gets the pipes (not an exit status to guess about later).
    if can_confine(owner) {
        let script = fixture.workspace.join("not-executable.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        fixture.give_to_owner(&["not-executable.sh"]);
        let request = ServiceRequest::new(
            "not executable",
            script.display().to_string(),
            Vec::new(),
            &fixture.workspace,
        );
        let error = runtime.spawn_service(&request).await.unwrap_err();
        assert!(matches!(error, Error::ServiceStart { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains("cannot execute") && message.contains("Permission denied"),
            "{message}"
        );
    }
    let outcomes: Vec<String> =
        fixture.audit_records().into_iter().map(|record| record.outcome).collect();
    let mut expected = vec!["error", "path_outside_workspace"];
    if !owner.runs_as_uid0() {
        expected.push("sandbox_unavailable");
    }
    if can_confine(owner) {
        expected.push("error");
    }
    assert_eq!(outcomes, expected);
}

/// A helper refusal (here: the command's user cannot enter the cwd) is a refused start that
/// carries the sandbox report and names the directory that stops it.
async fn a_helper_refusal_is_a_refused_start_with_the_report(owner: Owner) {
    use std::os::unix::fs::PermissionsExt;
    if owner.runs_as_uid0() || !support::is_root() || !can_confine(owner) {
        eprintln!("skipped: needs a service that runs as another user than root's ({owner:?})");
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let locked = fixture.workspace.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut request = ServiceRequest::new("locked out", "cat", Vec::new(), &fixture.workspace);
    request.cwd = PathBuf::from("locked");
    let error = fixture.runtime().spawn_service(&request).await.unwrap_err();
    let Error::ServiceRefused { refusal, .. } = &error else { panic!("{error:?}") };
    assert_eq!(refusal.kind, RefusalKind::WorkspaceInaccessible);
    assert!(refusal.sandbox.as_ref().is_some_and(|report| report.is_active(Layer::Landlock)));
    assert!(error.to_string().contains("cannot enter the working directory"), "{error}");
    assert_eq!(fixture.audit_records().pop().unwrap().outcome, "workspace_inaccessible");
}

/// A service that runs as the owner of a user-owned workspace cannot use a program under a
/// directory only root may enter (a node under `/root/.nvm`): the helper says so at the start.
async fn a_program_the_user_cannot_reach_is_a_start_error(owner: Owner) {
    use std::os::unix::fs::PermissionsExt;
    if owner.runs_as_uid0() || !support::is_root() || !can_confine(owner) {
        eprintln!("skipped: needs a service that runs as another user than root's ({owner:?})");
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let private = fixture.base.path().join("private");
    std::fs::create_dir_all(private.join("bin")).unwrap();
    std::fs::copy("/bin/cat", private.join("bin/cat")).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let program = private.join("bin/cat").display().to_string();
    let request = ServiceRequest::new("hidden", &program, Vec::new(), &fixture.workspace);
    let error = fixture.runtime().spawn_service(&request).await.unwrap_err();
    assert!(matches!(error, Error::ServiceStart { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&format!("cannot reach {program}")), "{message}");
    assert!(message.contains("Permission denied"), "{message}");
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|directory| directory.join(program))
        .find(|path| path.is_file())
}

for_both_owners!(
    a_service_answers_over_stdin_and_stdout,
    the_stderr_tail_is_kept_and_an_early_exit_is_seen,
    a_service_writes_only_inside_the_workspace,
    a_service_has_no_network_unless_allowed,
    a_uid0_service_reads_only_system_workspace_and_read_only_paths,
    shutdown_kills_the_service_and_its_grandchildren,
    dropping_a_service_kills_it_and_its_grandchildren,
    a_service_that_ended_leaves_nothing_behind,
    shutdown_after_a_grace_period,
    node_runs_as_a_service,
    a_private_node_needs_its_prefix_in_read_only_paths,
    a_refused_start_says_what_to_change,
    a_helper_refusal_is_a_refused_start_with_the_report,
    a_program_the_user_cannot_reach_is_a_start_error,
);

/// A service started from a thread that ends right after (a `spawn_blocking` thread, a
/// `Handle::block_on` on a short-lived thread) keeps running: the helper is spawned on a thread
/// that lives as long as the process, so its parent-death signal fires only when the process
/// dies.
#[test]
fn a_service_outlives_the_thread_that_started_it() {
    if !can_confine(Owner::Root) {
        return;
    }
    let tokio =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let fixture = Fixture::owned_by(Owner::Root);
    let runtime = fixture.runtime();
    let request = ServiceRequest::new("orphan", "cat", Vec::new(), &fixture.workspace);
    let handle = tokio.handle().clone();
    let starter = std::thread::spawn(move || handle.block_on(runtime.spawn_service(&request)));
    let mut service = starter.join().unwrap().unwrap();
    tokio.block_on(async {
        let mut pipes = Pipes::of(&mut service);
        assert_eq!(pipes.ask("still here").await, "still here\n");
        assert_eq!(service.try_exit().await, None);
        service.shutdown().await;
    });
}

/// An approver that answers the same way every time (or never) and counts the questions.
#[derive(Debug)]
struct ScriptedApprover {
    answer: Option<ApprovalAnswer>,
    asked: std::sync::Mutex<Vec<ApprovalRequest>>,
}

#[async_trait::async_trait]
impl Approver for ScriptedApprover {
    fn name(&self) -> String {
        "scripted".to_owned()
    }

    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        match &self.answer {
            Some(answer) => answer.clone(),
            None => std::future::pending().await,
        }
    }
}

/// What the approver does in one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ApproverKind {
    Approves,
    Denies,
    Silent,
    Missing,
}

/// The expected outcome of one (decision, mode, network) row: a fixed one, or the approver's.
#[derive(Debug, Clone, Copy)]
enum Row {
    Go,
    Refused(RefusalKind),
    AsksApprover,
}

#[tokio::test]
async fn authorize_applies_mode_approver_and_timeout_like_a_script_run() {
    use ApprovalMode::{AlwaysAsk, AskForRisky, Never};
    use Decision::{Allow, Forbidden, Prompt};
    let rows: [(Decision, ApprovalMode, bool, Row); 18] = [
        (Allow, Never, false, Row::Go),
        (Allow, Never, true, Row::Go),
        (Allow, AskForRisky, false, Row::Go),
        (Allow, AskForRisky, true, Row::AsksApprover),
        (Allow, AlwaysAsk, false, Row::AsksApprover),
        (Allow, AlwaysAsk, true, Row::AsksApprover),
        (Prompt, Never, false, Row::Refused(RefusalKind::ApprovalUnavailable)),
        (Prompt, Never, true, Row::Refused(RefusalKind::ApprovalUnavailable)),
        (Prompt, AskForRisky, false, Row::AsksApprover),
        (Prompt, AskForRisky, true, Row::AsksApprover),
        (Prompt, AlwaysAsk, false, Row::AsksApprover),
        (Prompt, AlwaysAsk, true, Row::AsksApprover),
        (Forbidden, Never, false, Row::Refused(RefusalKind::PolicyForbidden)),
        (Forbidden, Never, true, Row::Refused(RefusalKind::PolicyForbidden)),
        (Forbidden, AskForRisky, false, Row::Refused(RefusalKind::PolicyForbidden)),
        (Forbidden, AskForRisky, true, Row::Refused(RefusalKind::PolicyForbidden)),
        (Forbidden, AlwaysAsk, false, Row::Refused(RefusalKind::PolicyForbidden)),
        (Forbidden, AlwaysAsk, true, Row::Refused(RefusalKind::PolicyForbidden)),
    ];
    let approvers = [
        (ApproverKind::Approves, None),
        (ApproverKind::Denies, Some(RefusalKind::ApprovalDenied)),
        (ApproverKind::Silent, Some(RefusalKind::ApprovalTimedOut)),
        (ApproverKind::Missing, Some(RefusalKind::ApprovalUnavailable)),
    ];
    let fixture = Fixture::new();
    let mut checked = 0;
    for (decision, mode, network, row) in rows {
        for (approver_kind, asked_outcome) in approvers {
            let mut config = fixture.config();
            config.policy.approval_mode = mode;
            config.policy.approval_timeout = Duration::from_millis(200);
            let answer = match approver_kind {
                ApproverKind::Approves => Some(ApprovalAnswer::Approved),
                ApproverKind::Denies => {
                    Some(ApprovalAnswer::Denied { reason: Some("not now".to_owned()) })
                }
                ApproverKind::Silent | ApproverKind::Missing => None,
            };
            let approver =
                Arc::new(ScriptedApprover { answer, asked: std::sync::Mutex::new(Vec::new()) });
            let mut runtime = fixture.runtime_with(config);
            if approver_kind != ApproverKind::Missing {
                runtime = runtime.with_approver(approver.clone());
            }
            let call_id = format!("{decision:?}-{mode:?}-{network}-{approver_kind:?}");
            let request = ApprovalRequest {
                call_id: call_id.clone(),
                skill: None,
                argv: vec!["mcp__files__read_file".to_owned()],
                cwd: fixture.workspace.clone(),
                allow_network: network,
                reason: String::new(),
            };
            let verdict = runtime.authorize(&request, decision).await;
            let expected = match row {
                Row::Go => None,
                Row::Refused(kind) => Some(kind),
                Row::AsksApprover => asked_outcome,
            };
            let got = verdict.as_ref().err().map(|refusal| refusal.kind);
            assert_eq!(got, expected, "{call_id}: {verdict:?}");
            let asked = approver.asked.lock().unwrap().clone();
            let should_ask =
                matches!(row, Row::AsksApprover) && approver_kind != ApproverKind::Missing;
            assert_eq!(asked.len(), usize::from(should_ask), "{call_id}");
            if let Some(question) = asked.first() {
                assert!(!question.reason.is_empty(), "{call_id}: the approver is told why");
                assert_eq!(question.argv, request.argv);
            }
            let record = fixture.audit_record(&call_id);
            let audited = expected.map_or("authorized".to_owned(), |kind| {
                serde_json::to_value(kind).unwrap().as_str().unwrap().to_owned()
            });
            assert_eq!(record.outcome, audited, "{call_id}");
            assert_eq!(record.decision.map(|merged| merged.decision), Some(decision));
            if let Ok(()) = verdict {
                let approver_name = if should_ask { "scripted" } else { "policy" };
                assert_eq!(record.approver.as_deref(), Some(approver_name), "{call_id}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 72);
}

/// `authorize` and `run` agree: the same decision under the same mode and approver gives the
/// same refusal kind, or both go ahead.
#[tokio::test]
async fn authorize_and_a_script_run_agree() {
    if !can_confine(Owner::User) {
        return;
    }
    let fixture = Fixture::new();
    for decision in [Decision::Allow, Decision::Prompt, Decision::Forbidden] {
        for mode in [ApprovalMode::Never, ApprovalMode::AskForRisky, ApprovalMode::AlwaysAsk] {
            let mut config = fixture.config();
            config.policy.approval_mode = mode;
            config.policy.rules = tools_runtime::RuleSet { rules: Vec::new(), default: decision };
            let approver = Arc::new(ScriptedApprover {
                answer: Some(ApprovalAnswer::Denied { reason: None }),
                asked: std::sync::Mutex::new(Vec::new()),
            });
            let runtime = fixture.runtime_with(config).with_approver(approver);
            let run = match runtime.run(&fixture.request("run", &["true"])).await.unwrap() {
                ExecOutcome::Ran(_) => None,
                ExecOutcome::Refused(refusal) => Some(refusal.kind),
            };
            let request = ApprovalRequest {
                call_id: "authorize".to_owned(),
                skill: None,
                argv: vec!["true".to_owned()],
                cwd: fixture.workspace.clone(),
                allow_network: false,
                reason: String::new(),
            };
            let authorized = runtime.authorize(&request, decision).await.err().map(|r| r.kind);
            assert_eq!(authorized, run, "{decision:?} under {mode:?}");
        }
    }
}
