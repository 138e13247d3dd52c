//! The processes under test: finding their binaries, starting them in a private scratch
//! directory, and stopping every one of them, however a run ends.
//!
//! Every process the bench starts is owned by a guard whose drop stops it (the stdio ones
//! by closing stdin, the daemon by SIGTERM, escalating to SIGKILL), and a daemon's stop
//! also makes sure the upstreams it started went with it. Nothing here may signal a
//! process the bench did not start, or leave one running.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rustix::process::{Pid, Signal};
use serde_json::Value;

use crate::memory;

/// How long a daemon may take to write `daemon.json`.
const DAEMON_START: Duration = Duration::from_secs(15);
/// How long a peer gateway may take to listen.
const PEER_START: Duration = Duration::from_secs(60);
/// How long a process gets to exit on its own (stdin closed) or after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(10);
/// The name the bench gives fakemcp in every mcpx config it writes.
pub const UPSTREAM: &str = "fake";

/// The programs under test.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub mcpx: PathBuf,
    pub fakemcp: PathBuf,
    /// The peer gateways' programs, when given (`--mcp-proxy`, `--fastmcp`).
    pub mcp_proxy: Option<PathBuf>,
    pub fastmcp: Option<PathBuf>,
}

impl Binaries {
    /// The given paths, else `mcpx` and `fakemcp` next to this executable (so
    /// `target/release/mcpx-bench` measures `target/release/mcpx`).
    pub fn locate(mcpx: Option<PathBuf>, fakemcp: Option<PathBuf>) -> anyhow::Result<Binaries> {
        let here = std::env::current_exe().context("finding this executable")?;
        let dir = here.parent().context("this executable has no directory")?.to_owned();
        let pick = |flag: Option<PathBuf>, name: &str| -> anyhow::Result<PathBuf> {
            let path = flag.unwrap_or_else(|| dir.join(name));
            let path = std::path::absolute(&path).with_context(|| format!("resolving {}", path.display()))?;
            if !path.is_file() {
                bail!(
                    "{} does not exist; build it (cargo build --release -p mcpx -p fakemcp) or pass --{name}",
                    path.display()
                );
            }
            Ok(path)
        };
        Ok(Binaries { mcpx: pick(mcpx, "mcpx")?, fakemcp: pick(fakemcp, "fakemcp")?, mcp_proxy: None, fastmcp: None })
    }

    /// True when either binary comes from a debug build, whose figures mean little.
    pub fn debug_build(&self) -> bool {
        [&self.mcpx, &self.fakemcp].iter().any(|path| path.components().any(|c| c.as_os_str() == "debug"))
    }

    /// An mcpx config with fakemcp as the one global-scope server.
    pub fn mcpx_config(&self) -> Value {
        serde_json::json!({"mcpServers": {UPSTREAM: {"command": self.fakemcp}}})
    }
}

/// A private temporary directory for one scenario: config, state dir, logs. Removed on drop.
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    pub fn new(label: &str) -> anyhow::Result<Scratch> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("mcpx-bench-{}-{}-{label}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Scratch { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where a process's stderr goes: `<scratch>/<role>.log`.
    fn log(&self, role: &str) -> PathBuf {
        self.path.join(format!("{}.log", role.replace(' ', "-")))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A process the bench started. Dropping it stops it.
pub struct Process {
    pub role: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    pub fn spawn(role: &str, command: &mut Command, scratch: &Scratch) -> anyhow::Result<Process> {
        let log = scratch.log(role);
        let stderr = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = command
            .stderr(stderr)
            .current_dir(scratch.path())
            .env_remove("MCPX_CONFIG")
            .spawn()
            .with_context(|| format!("starting {role} ({:?})", command.get_program()))?;
        Ok(Process { role: role.to_owned(), child, log })
    }

    /// A stdio MCP server: stdin and stdout are pipes to the bench.
    pub fn spawn_stdio(role: &str, command: &mut Command, scratch: &Scratch) -> anyhow::Result<Process> {
        Process::spawn(role, command.stdin(Stdio::piped()).stdout(Stdio::piped()), scratch)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The pipes of a stdio process; the caller closes stdin (by dropping it) to end it.
    pub fn take_stdio(&mut self) -> anyhow::Result<(ChildStdin, ChildStdout)> {
        Ok((
            self.child.stdin.take().context("stdin was already taken")?,
            self.child.stdout.take().context("stdout was already taken")?,
        ))
    }

    pub fn peak_rss_kib(&self) -> Option<u64> {
        memory::peak_rss_kib(self.pid())
    }

    /// The end of what the process wrote to stderr, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)) | Err(_))
    }

    /// Waits for the process to exit by itself (a stdio server whose stdin is closed),
    /// then SIGTERM, then SIGKILL. Returns false when it needed SIGKILL.
    pub fn stop(&mut self) -> bool {
        if wait_until(EXIT_GRACE, || self.exited()) {
            return true;
        }
        self.terminate()
    }

    /// SIGTERM, then SIGKILL if it does not exit in time. Returns false when it needed SIGKILL.
    pub fn terminate(&mut self) -> bool {
        if self.exited() {
            return true;
        }
        signal(self.pid(), Signal::TERM);
        if wait_until(EXIT_GRACE, || self.exited()) {
            return true;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.exited() {
            // Unwinding from an error: the pipes may still be open, so do not wait for EOF.
            self.child.stdin.take();
            self.terminate();
        }
    }
}

/// A running `mcpx daemon` with its own state dir, and the upstreams it started.
pub struct Daemon {
    process: Process,
    state_dir: PathBuf,
    pub addr: SocketAddr,
}

impl Daemon {
    /// Starts `mcpx daemon --port 0` with `config`, waiting until it is listening.
    pub fn start(binaries: &Binaries, scratch: &Scratch, config: &Value) -> anyhow::Result<Daemon> {
        let mut daemon = Daemon::launch(binaries, scratch, config, 0)?;
        let record = daemon.state_dir.join("daemon.json");
        let deadline = Instant::now() + DAEMON_START;
        let url = loop {
            if daemon.process.exited() {
                bail!("mcpx daemon exited before listening:\n{}", daemon.process.log_tail());
            }
            let state: Option<Value> =
                std::fs::read_to_string(&record).ok().and_then(|text| serde_json::from_str(&text).ok());
            if let Some(url) = state.as_ref().and_then(|s| s["url"].as_str()) {
                break url.to_owned();
            }
            if Instant::now() > deadline {
                bail!(
                    "mcpx daemon did not write {} within {DAEMON_START:?}:\n{}",
                    record.display(),
                    daemon.process.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        daemon.addr = loopback_address(&url)?;
        Ok(daemon)
    }

    /// Starts `mcpx daemon --port PORT` with `config` and returns at once, before it
    /// listens. Its address is `127.0.0.1:PORT` (unknown while PORT is 0).
    pub fn launch(binaries: &Binaries, scratch: &Scratch, config: &Value, port: u16) -> anyhow::Result<Daemon> {
        let config_path = scratch.path().join("mcpx.json");
        std::fs::write(&config_path, serde_json::to_vec_pretty(config)?)
            .with_context(|| format!("writing {}", config_path.display()))?;
        let state_dir = scratch.path().join("state");
        let mut command = Command::new(&binaries.mcpx);
        command
            .arg("daemon")
            .arg("--config")
            .arg(&config_path)
            .args(["--port", &port.to_string()])
            .env("MCPX_STATE_DIR", &state_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let process = Process::spawn("mcpx daemon", &mut command, scratch)?;
        Ok(Daemon { process, state_dir, addr: SocketAddr::from(([127, 0, 0, 1], port)) })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The running daemon's own process.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// The processes the daemon started (its upstream instances), by pid.
    pub fn upstreams(&self) -> Vec<u32> {
        children_of(self.pid())
    }

    /// Peak RSS of the daemon and of each upstream it runs, labelled by role.
    pub fn peak_rss(&self) -> Vec<(String, Option<u64>)> {
        let mut figures = vec![("mcpx daemon".to_owned(), self.process.peak_rss_kib())];
        for pid in self.upstreams() {
            figures.push(("fakemcp (daemon's)".to_owned(), memory::peak_rss_kib(pid)));
        }
        figures
    }

    /// SIGTERM and wait; then checks that no upstream it started, and no second daemon an
    /// `mcpx serve` may have started in its state dir, outlived it.
    pub fn stop(self) -> anyhow::Result<()> {
        let stopped = self.halt();
        if let Some(log) = stopped.needed_sigkill {
            bail!("mcpx daemon needed SIGKILL:\n{log}");
        }
        if !stopped.outlived.is_empty() {
            bail!("processes outlived the daemon and were killed: {:?}", stopped.outlived);
        }
        Ok(())
    }

    /// As [`Daemon::stop`], reporting instead of failing: what needed killing.
    pub fn halt(mut self) -> Stopped {
        let upstreams = self.upstreams();
        let clean = self.process.terminate();
        let mut left = Vec::new();
        for pid in upstreams {
            if !wait_until(EXIT_GRACE, || !alive(pid)) {
                signal(pid, Signal::KILL);
                left.push(pid);
            }
        }
        // A relay that lost its daemon starts a detached one; it is ours to stop too.
        if let Some(pid) = recorded_daemon(&self.state_dir).filter(|&pid| alive(pid)) {
            signal(pid, Signal::TERM);
            left.push(pid);
        }
        Stopped { needed_sigkill: (!clean).then(|| self.process.log_tail()), outlived: left }
    }
}

/// What stopping a daemon took.
pub struct Stopped {
    /// The end of its log, when it had to be killed.
    pub needed_sigkill: Option<String>,
    /// Processes that outlived it (killed since).
    pub outlived: Vec<u32>,
}

/// A contender that is an HTTP server process of its own (`fakemcp --http`, `mcp-proxy`,
/// `fastmcp`), with the stdio upstream it may have started.
pub struct HttpServer {
    process: Process,
    pub addr: SocketAddr,
}

impl HttpServer {
    /// `fakemcp --http 127.0.0.1:0`: waits for the URL it prints once listening.
    pub fn fakemcp(binaries: &Binaries, scratch: &Scratch, role: &str) -> anyhow::Result<HttpServer> {
        let mut command = Command::new(&binaries.fakemcp);
        command.args(["--http", "127.0.0.1:0"]).stdin(Stdio::null()).stdout(Stdio::piped());
        let mut process = Process::spawn(role, &mut command, scratch)?;
        let stdout = process.child.stdout.take().context("fakemcp's stdout")?;
        let (sender, line) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut url = String::new();
            let _ = BufReader::new(stdout).read_line(&mut url);
            let _ = sender.send(url);
        });
        let url = line
            .recv_timeout(DAEMON_START)
            .with_context(|| format!("{role} printed no URL within {DAEMON_START:?}:\n{}", process.log_tail()))?;
        let addr = loopback_address(url.trim())?;
        Ok(HttpServer { process, addr })
    }

    /// Starts `command`, which is to listen on `port` of 127.0.0.1, and waits (up to a
    /// minute: Python peers import a lot) until it accepts connections.
    pub fn spawn(role: &str, command: &mut Command, scratch: &Scratch, port: u16) -> anyhow::Result<HttpServer> {
        command.stdin(Stdio::null()).stdout(Stdio::null());
        let mut process = Process::spawn(role, command, scratch)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let up = wait_until(PEER_START, || process.exited() || TcpStream::connect(addr).is_ok());
        if !up || process.exited() {
            bail!("{role} did not listen on {addr} within {PEER_START:?}:\n{}", process.log_tail());
        }
        Ok(HttpServer { process, addr })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Peak RSS of the server and of each process it started.
    pub fn peak_rss(&self) -> Vec<(String, Option<u64>)> {
        let mut figures = vec![(self.process.role.clone(), self.process.peak_rss_kib())];
        for pid in children_of(self.pid()) {
            figures.push((format!("fakemcp ({}'s)", self.process.role), memory::peak_rss_kib(pid)));
        }
        figures
    }

    /// SIGTERM and wait; then checks that what it started went with it.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let children = children_of(self.pid());
        let clean = self.process.terminate();
        let mut left = Vec::new();
        for pid in children {
            if !wait_until(EXIT_GRACE, || !alive(pid)) {
                signal(pid, Signal::KILL);
                left.push(pid);
            }
        }
        if !clean {
            bail!("{} needed SIGKILL:\n{}", self.process.role, self.process.log_tail());
        }
        if !left.is_empty() {
            bail!("processes outlived {} and were killed: {left:?}", self.process.role);
        }
        Ok(())
    }
}

/// A loopback port nobody listens on right now (the kernel's pick; a race with another
/// program taking it in between is possible, and shows as a failed start).
pub fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// `http://127.0.0.1:PORT/mcp` → its socket address, refusing anything but loopback: the
/// bench must never send load to another machine.
fn loopback_address(url: &str) -> anyhow::Result<SocketAddr> {
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .with_context(|| format!("unexpected daemon url {url}"))?;
    let addr: SocketAddr = authority.parse().with_context(|| format!("unexpected daemon address in {url}"))?;
    if !addr.ip().is_loopback() {
        bail!("the daemon listens on {addr}, not on loopback; the bench only loads loopback");
    }
    Ok(addr)
}

/// The pid in a state dir's `daemon.json`, if one is there (a clean stop removes it).
fn recorded_daemon(state_dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(state_dir.join("daemon.json")).ok()?;
    let record: Value = serde_json::from_str(&text).ok()?;
    record["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok())
}

/// Live processes other than this one whose working directory is `dir` or below it:
/// what a scenario started there (each runs its processes in its scratch directory, and
/// their children inherit it) and is still running.
pub fn processes_in(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let me = std::process::id();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me && alive(pid))
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir)))
        .collect()
}

/// How many files `pid` has open (entries of `/proc/<pid>/fd`), or None when it is gone.
pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Pids whose parent is `parent`, from `/proc/<pid>/stat`.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent_of(pid) == Some(parent))
        .collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is still a live process (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Signals a process the bench started (or that a daemon it started spawned); one that is
/// already gone is no error.
pub(crate) fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_daemon_urls_are_accepted() {
        assert_eq!(loopback_address("http://127.0.0.1:7750/mcp").unwrap(), "127.0.0.1:7750".parse().unwrap());
        assert_eq!(loopback_address("http://[::1]:7750/mcp").unwrap(), "[::1]:7750".parse().unwrap());
        assert!(loopback_address("http://10.0.0.5:7750/mcp").is_err());
        assert!(loopback_address("https://127.0.0.1:7750/mcp").is_err());
    }

    #[test]
    fn the_parent_of_this_process_is_found() {
        let me = std::process::id();
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(children_of(me).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!alive(child.id()));
    }
}
