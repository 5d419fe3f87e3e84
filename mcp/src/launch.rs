//! Starting a stdio server: what it may see (environment, readable paths) and the confined
//! process it runs in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tools_runtime::EnvPolicy;

use crate::config::ServerConfig;

/// The confined process of a stdio server and how it was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StdioPlan {
    /// The program, resolved to an absolute path when it was found.
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) env: EnvPolicy,
    /// The program's install prefix, the directory of the script argument (and the
    /// `node_modules` they live in), and the table's `read_paths`.
    pub(crate) read_only_paths: Vec<PathBuf>,
}

/// Builds the plan of a stdio server: the program looked up in the caller's `PATH` (from
/// `base_environment`, else the system directories), the environment reduced to the listed
/// names and fixed values, and the paths the server must read besides the workspace.
pub(crate) fn plan_stdio(
    config: &ServerConfig,
    workspace: &Path,
    base_environment: &[(String, String)],
) -> StdioPlan {
    let command = config.command.clone().unwrap_or_default();
    let caller_path = base_environment
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_str())
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    let resolved = resolve_program(&command, caller_path, workspace);
    let mut read_only_paths: Vec<PathBuf> = Vec::new();
    if let Some(program) = &resolved {
        read_only_paths.extend(install_prefix(program));
        // `node_modules/.bin/some-server` is a symlink into its package: the package and the
        // `node_modules` it resolves its dependencies from.
        read_only_paths.extend(script_roots(program));
    }
    // The script the program runs: the first argument that is an absolute path to a file.
    // Later arguments are the server's business (a directory to serve stays unreadable unless
    // it is in the workspace or in `read_paths`: the sandbox, not the server, draws the line).
    if let Some(script) =
        config.args.iter().map(Path::new).find(|path| path.is_absolute() && path.is_file())
    {
        read_only_paths.extend(script_roots(script));
    }
    read_only_paths.extend(config.read_paths.iter().map(|path| workspace.join(path)));
    read_only_paths.sort();
    read_only_paths.dedup();

    let mut env = EnvPolicy::default();
    for name in config.passed_names() {
        if !env.inherit.contains(&name) {
            env.inherit.push(name);
        }
    }
    let fixed: BTreeMap<String, String> = config.fixed_values();
    // The table names these for this server (an API key the server needs): secret-looking
    // names pass here, and only here — skill scripts never get them.
    env.secrets = config
        .passed_names()
        .into_iter()
        .chain(fixed.keys().cloned())
        .filter(|name| tools_runtime::is_secret_name(name))
        .collect();
    env.set.extend(fixed);
    // A program found outside the system directories may run others next to it (node's npm,
    // a venv's python): its bin directory goes first on the server's PATH, unless the table
    // passes or sets PATH itself.
    if let Some(program) = &resolved
        && !env.inherit.iter().any(|name| name == "PATH")
        && !config.fixed_values().contains_key("PATH")
        && let Some(bin) = program.parent()
        && let Some(path) = env.set.get_mut("PATH")
        && !path.split(':').any(|entry| Path::new(entry) == bin)
    {
        *path = format!("{}:{path}", bin.display());
    }

    StdioPlan {
        program: resolved.map_or(command, |program| program.display().to_string()),
        args: config.args.clone(),
        cwd: config.cwd.as_ref().map_or_else(|| workspace.to_path_buf(), |cwd| workspace.join(cwd)),
        env,
        read_only_paths,
    }
}

/// The program as an absolute path: as given when it has a `/` (relative to the workspace),
/// else the first executable file of that name in `path_list`.
fn resolve_program(command: &str, path_list: &str, workspace: &Path) -> Option<PathBuf> {
    if command.contains('/') {
        let path = workspace.join(command);
        return path.is_file().then_some(path);
    }
    path_list
        .split(':')
        .filter(|directory| !directory.is_empty())
        .map(|directory| Path::new(directory).join(command))
        .find(|candidate| candidate.is_file())
}

/// The hierarchy a program is installed in: the parent of its `bin` directory (both for the
/// path as found and for its target when it is a symlink, e.g. `~/.nvm/versions/node/v20`).
fn install_prefix(program: &Path) -> Vec<PathBuf> {
    let mut prefixes = Vec::new();
    let canonical = program.canonicalize().ok();
    for path in std::iter::once(program).chain(canonical.as_deref()) {
        let Some(directory) = path.parent() else { continue };
        let prefix = if directory.file_name().is_some_and(|name| name == "bin") {
            directory.parent().unwrap_or(directory)
        } else {
            directory
        };
        if prefix != Path::new("/") {
            prefixes.push(prefix.to_path_buf());
        }
    }
    prefixes
}

/// What a script (or a program file) needs readable: its directory, and the outermost
/// `node_modules` above it (where node resolves the package's dependencies).
fn script_roots(script: &Path) -> Vec<PathBuf> {
    let script = script.canonicalize().unwrap_or_else(|_| script.to_path_buf());
    let mut roots = vec![script.parent().map(Path::to_path_buf).unwrap_or_default()];
    if let Some(modules) =
        script.ancestors().filter(|a| a.file_name().is_some_and(|n| n == "node_modules")).last()
    {
        roots.push(modules.to_path_buf());
    }
    roots.retain(|root| root.as_os_str() != "/" && !root.as_os_str().is_empty());
    roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn plan_passes_only_listed_names_and_finds_read_paths() {
        let base = tempfile::tempdir().unwrap();
        let prefix = base.path().join("node");
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::write(prefix.join("bin/fake-node"), "").unwrap();
        let package = base.path().join("servers/node_modules/@scope/pkg/dist");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("index.js"), "").unwrap();
        let workspace = base.path().join("workspace");
        std::fs::create_dir_all(base.path().join("served")).unwrap();
        std::fs::write(base.path().join("servers/data.txt"), "").unwrap();
        let config = ServerConfig {
            command: Some("fake-node".into()),
            args: vec![
                package.join("index.js").display().to_string(),
                "stdio".into(),
                base.path().join("served").display().to_string(),
                base.path().join("servers/data.txt").display().to_string(),
            ],
            env_vars: vec!["FOO".into()],
            read_paths: vec!["/opt/data".into()],
            cwd: Some("sub".into()),
            ..ServerConfig::default()
        };
        let environment = vec![
            ("PATH".to_owned(), format!("/nowhere:{}", prefix.join("bin").display())),
            ("FOO".to_owned(), "1".to_owned()),
        ];
        let plan = plan_stdio(&config, &workspace, &environment);
        let canonical = |path: &Path| path.canonicalize().unwrap();
        assert_eq!(plan.program, prefix.join("bin/fake-node").display().to_string());
        assert_eq!(plan.cwd, workspace.join("sub"));
        assert!(plan.env.inherit.contains(&"FOO".to_owned()));
        assert!(!plan.env.inherit.contains(&"PATH".to_owned()));
        assert!(plan.env.set["PATH"].starts_with(&format!("{}:", prefix.join("bin").display())));
        let mut expected = vec![
            prefix.clone(),
            canonical(&prefix),
            canonical(&prefix.join("bin")),
            canonical(&package),
            canonical(&base.path().join("servers/node_modules")),
            PathBuf::from("/opt/data"),
        ];
        expected.sort();
        expected.dedup();
        assert_eq!(plan.read_only_paths, expected);
    }

    #[test]
    fn a_missing_program_is_left_for_the_sandbox_to_refuse() {
        let config =
            ServerConfig { command: Some("no-such-program-xyz".into()), ..ServerConfig::default() };
        let plan = plan_stdio(&config, Path::new("/work"), &[]);
        assert_eq!(plan.program, "no-such-program-xyz");
        assert!(plan.read_only_paths.is_empty());
    }
}
