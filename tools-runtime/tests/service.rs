//! Services: long-running confined processes whose stdin/stdout stay open (MCP stdio servers),
//! and `Runtime::authorize` for actions that are not scripts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod support;

use std::time::Duration;

use support::{Fixture, MachineLayers, Owner};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tools_runtime::{Service, ServiceRequest};

/// Writes `line` to the service and reads one line back.
async fn round_trip(
    stdin: &mut tokio::process::ChildStdin,
    stdout: &mut BufReader<tokio::process::ChildStdout>,
    line: &str,
) -> String {
    stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut answer))
        .await
        .expect("the service answers within 20 s")
        .unwrap();
    answer
}

fn pipes(
    service: &mut Service,
) -> (tokio::process::ChildStdin, BufReader<tokio::process::ChildStdout>) {
    (service.take_stdin().unwrap(), BufReader::new(service.take_stdout().unwrap()))
}

async fn a_service_echoes_lines_both_ways(owner: Owner) {
    let machine = MachineLayers::probe();
    if !machine.can_confine_for(owner) {
        eprintln!("skipped: this machine cannot confine ({machine:?})");
        return;
    }
    let fixture = Fixture::owned_by(owner);
    let request = ServiceRequest::new("echo", "cat", Vec::new(), &fixture.workspace);
    let mut service = fixture.runtime().spawn_service(&request).await.unwrap();
    let (mut stdin, mut stdout) = pipes(&mut service);
    assert_eq!(round_trip(&mut stdin, &mut stdout, "hello").await, "hello\n");
    assert_eq!(
        round_trip(&mut stdin, &mut stdout, "{\"jsonrpc\":\"2.0\"}").await,
        "{\"jsonrpc\":\"2.0\"}\n"
    );
    assert!(service.try_exit().await.is_none());
    service.shutdown().await;
}

for_both_owners!(a_service_echoes_lines_both_ways);
