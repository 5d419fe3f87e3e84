//! Criterion benchmark: a sandboxed run of a trivial script against a bare
//! `std::process::Command` spawn of the same script, per backend and (direct backend) per
//! workspace owner, in the same run; and a service (`cat`): start + one line + shutdown, and one
//! line through a running service.
//!
//! `cargo bench -p tools-runtime --bench overhead`; figures go into `tools-runtime/BENCHMARKS.md`.

// A benchmark's setup failing should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tools_runtime::{
    ApprovalMode, BackendChoice, ExecOutcome, ExecRequest, Runtime, RuntimeConfig, SandboxHelper,
    Service, ServiceRequest,
};

/// A workspace with the script, owned by `nobody` (`user_owned`) or by root, mode 0700 as
/// `mktemp -d` makes it (commands then run as uid 0 without capabilities).
fn workspace(user_owned: bool) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let directory = tempfile::Builder::new().prefix("tools-runtime-bench-").tempdir().unwrap();
    let mode = if user_owned { 0o755 } else { 0o700 };
    std::fs::set_permissions(directory.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    let script = directory.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho ok\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    if user_owned && nix::unistd::geteuid().is_root() {
        let (uid, gid) = tools_runtime::DEFAULT_SANDBOX_USER;
        std::os::unix::fs::chown(directory.path(), Some(uid), Some(gid)).unwrap();
    }
    directory
}

fn runtime(backend: BackendChoice) -> Runtime {
    let mut config =
        RuntimeConfig::new(SandboxHelper::at(env!("CARGO_BIN_EXE_tools-runtime-sandbox")));
    config.backend = backend;
    config.policy.approval_mode = ApprovalMode::Never;
    Runtime::new(config)
}

fn request(workspace: &Path, protected: bool) -> ExecRequest {
    let mut request = ExecRequest::new("./script.sh", Vec::new(), workspace);
    if protected {
        // The bubblewrap backend is what protected paths select.
        request.protected_paths = vec!["script.sh".into()];
    }
    request
}

fn overhead(criterion: &mut Criterion) {
    let user_owned = workspace(true);
    let root_owned = workspace(false);
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut group = criterion.benchmark_group("trivial_script");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    group.bench_function("bare_std_process_command", |bencher| {
        bencher.iter(|| {
            let output = std::process::Command::new("./script.sh")
                .current_dir(user_owned.path())
                .output()
                .unwrap();
            assert_eq!(output.stdout, b"ok\n");
            black_box(output)
        });
    });

    let cases = [
        ("sandboxed_direct", BackendChoice::Direct, false, user_owned.path()),
        ("sandboxed_direct_root_owned_workspace", BackendChoice::Direct, false, root_owned.path()),
        ("sandboxed_bubblewrap", BackendChoice::Bubblewrap, true, user_owned.path()),
    ];
    for (name, backend, protected, workspace) in cases {
        let runtime = runtime(backend);
        let request = request(workspace, protected);
        match tokio.block_on(runtime.run(&request)).unwrap() {
            ExecOutcome::Ran(result) => assert_eq!(result.stdout, "ok\n", "{name}: {result:?}"),
            ExecOutcome::Refused(refusal) => {
                eprintln!("skipping {name}: {}", refusal.message);
                continue;
            }
        }
        group.bench_function(name, |bencher| {
            bencher.iter(|| black_box(tokio.block_on(runtime.run(&request)).unwrap()));
        });
    }
    group.finish();
}

/// Sends one line through a service's pipes and reads it back.
async fn echo(
    stdin: &mut tokio::process::ChildStdin,
    stdout: &mut BufReader<tokio::process::ChildStdout>,
) {
    stdin.write_all(b"ping\n").await.unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).await.unwrap();
    assert_eq!(line, "ping\n");
}

async fn start(runtime: &Runtime, request: &ServiceRequest) -> Option<Service> {
    match runtime.spawn_service(request).await {
        Ok(service) => Some(service),
        Err(error) => {
            eprintln!("skipping {}: {error}", request.name);
            None
        }
    }
}

fn services(criterion: &mut Criterion) {
    let user_owned = workspace(true);
    let root_owned = workspace(false);
    let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let runtime = runtime(BackendChoice::Direct);
    let mut group = criterion.benchmark_group("service");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for (name, workspace) in
        [("user_owned_workspace", user_owned.path()), ("root_owned_workspace", root_owned.path())]
    {
        let request = ServiceRequest::new(name, "cat", Vec::new(), workspace);
        let Some(service) = tokio.block_on(start(&runtime, &request)) else { continue };
        tokio.block_on(service.shutdown());
        group.bench_function(format!("start_echo_shutdown_{name}"), |bencher| {
            bencher.iter(|| {
                tokio.block_on(async {
                    let mut service = start(&runtime, &request).await.unwrap();
                    let mut stdin = service.take_stdin().unwrap();
                    let mut stdout = BufReader::new(service.take_stdout().unwrap());
                    echo(&mut stdin, &mut stdout).await;
                    service.shutdown().await;
                });
            });
        });
        let mut service = tokio.block_on(start(&runtime, &request)).unwrap();
        let mut stdin = service.take_stdin().unwrap();
        let mut stdout = BufReader::new(service.take_stdout().unwrap());
        group.bench_function(format!("echo_through_running_service_{name}"), |bencher| {
            bencher.iter(|| tokio.block_on(echo(&mut stdin, &mut stdout)));
        });
        tokio.block_on(service.shutdown());
    }
    group.finish();
}

criterion_group!(benches, overhead, services);
criterion_main!(benches);
