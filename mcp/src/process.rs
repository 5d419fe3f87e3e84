//! The process of a stdio server: started through tools-runtime's confinement.

use std::path::Path;

use tools_runtime::{Runtime, Service, ServiceRequest};

use crate::launch::StdioPlan;

/// Starts the confined process of server `name`: the environment and readable paths of
/// `plan`, the workspace as its only writable place, the network only when `allow_network`.
pub(crate) async fn spawn(
    runtime: &Runtime,
    name: &str,
    plan: &StdioPlan,
    allow_network: bool,
    base_environment: &[(String, String)],
    workspace: &Path,
) -> Result<Service, String> {
    let mut request = ServiceRequest::new(
        format!("mcp server {name}"),
        plan.program.clone(),
        plan.args.clone(),
        workspace,
    );
    request.cwd = plan.cwd.clone();
    request.read_only_paths = plan.read_only_paths.clone();
    request.env = plan.env.clone();
    request.base_environment = Some(base_environment.to_vec());
    request.allow_network = allow_network;
    runtime.spawn_service(&request).await.map_err(|error| error.to_string())
}
