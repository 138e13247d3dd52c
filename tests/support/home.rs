//! An mcpx home: a config file and a state dir in a fresh temporary directory, the place
//! one daemon runs for. A test's daemon lives in one ([`crate::Daemon`]), and so does a
//! daemon that `mcpx serve` or a CLI command starts on demand.
//!
//! Every `mcpx` process a test starts runs with `MCPX_STATE_DIR` pointing here and none of
//! the test runner's `MCPX_*` variables, so tests never meet each other's daemons. On
//! drop, every daemon still serving this state dir is stopped (SIGTERM, then SIGKILL),
//! found by the `MCPX_STATE_DIR` in its environment, not by name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::paths;
use crate::process::{TempDir, alive, daemons_for, poll, signal};
use crate::socket::{self, SocketReply};

/// How long a CLI command may run before the test gives up on it.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a daemon gets to stop after SIGTERM on drop, before SIGKILL.
const DROP_GRACE: Duration = Duration::from_secs(10);

pub struct Home {
    dir: TempDir,
    config_path: PathBuf,
    state_dir: PathBuf,
}

impl Home {
    /// A home whose config file holds `config`. The state dir exists (created with the
    /// default umask: the daemon must make it private itself).
    pub fn new(config: &Value) -> Home {
        let home = Home::without_state_dir(config);
        std::fs::create_dir_all(&home.state_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", home.state_dir.display()));
        home
    }

    /// A home whose state dir does not exist yet (the first mcpx process creates it).
    pub fn without_state_dir(config: &Value) -> Home {
        let dir = TempDir::new();
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", config_dir.display()));
        let config_path = config_dir.join("mcpx.json");
        std::fs::write(&config_path, pretty(config)).expect("write the config file");
        let state_dir = dir.path().join("state");
        Home { dir, config_path, state_dir }
    }

    /// A home whose state dir is `state_dir`, which the test chose (and cleans up): two
    /// homes whose state dirs are named alike, say. It is created if missing.
    pub fn with_state_dir(config: &Value, state_dir: PathBuf) -> Home {
        let mut home = Home::without_state_dir(config);
        std::fs::create_dir_all(&state_dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", state_dir.display()));
        home.state_dir = state_dir;
        home
    }

    /// The temporary directory holding everything (not inside any git repository).
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
    }

    /// `<state dir>/mcpx.sock`.
    pub fn socket(&self) -> PathBuf {
        self.state_dir.join("mcpx.sock")
    }

    /// `<state dir>/daemon.json` as it is now, if it exists and parses.
    pub fn record(&self) -> Option<Value> {
        let text = std::fs::read_to_string(self.state_dir.join("daemon.json")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Live `mcpx daemon` processes serving this state dir.
    pub fn daemons(&self) -> Vec<u32> {
        daemons_for(&self.state_dir)
    }

    /// The log of daemons started on demand (`<state dir>/daemon.log`).
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.state_dir.join("daemon.log")).unwrap_or_default()
    }

    /// An `mcpx` command for this home: `MCPX_STATE_DIR` set, the runner's `MCPX_CONFIG`
    /// and `MCPX_SESSION_ID` removed, run from the home's root, stdin closed.
    pub fn mcpx(&self) -> Command {
        let mut command = Command::new(paths::mcpx());
        command
            .current_dir(self.root())
            .env("MCPX_STATE_DIR", &self.state_dir)
            .env_remove("MCPX_CONFIG")
            .env_remove("MCPX_SESSION_ID")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .stdin(Stdio::null());
        command
    }

    /// Runs `mcpx <args>` to completion (at most a minute) and reports what it did.
    #[track_caller]
    pub fn cli(&self, args: &[&str]) -> CliRun {
        let mut command = self.mcpx();
        command.args(args);
        run(command, args)
    }

    /// Runs `mcpx <args>` as [`Home::cli`] does, with these variables set too.
    #[track_caller]
    pub fn cli_with_env(&self, env: &[(&str, &str)], args: &[&str]) -> CliRun {
        let mut command = self.mcpx();
        command.envs(env.iter().copied()).args(args);
        run(command, args)
    }

    /// Runs `mcpx <args>` as [`Home::cli`] does, from the directory `dir`: the daemon reads
    /// the caller's cwd from the socket.
    #[track_caller]
    pub fn cli_in(&self, dir: &Path, args: &[&str]) -> CliRun {
        let mut command = self.mcpx();
        command.current_dir(dir).args(args);
        run(command, args)
    }

    /// One HTTP request to the daemon over its unix socket.
    #[track_caller]
    pub fn v1(&self, method: &str, path: &str, body: Option<&Value>) -> SocketReply {
        self.v1_with(method, path, body, &[])
    }

    /// A `/v1` request over the socket naming its session (`X-Mcpx-Session`).
    pub fn v1_as(&self, method: &str, path: &str, body: Option<&Value>, session: &str) -> SocketReply {
        self.v1_with(method, path, body, &[("X-Mcpx-Session", session.to_owned())])
    }

    fn v1_with(&self, method: &str, path: &str, body: Option<&Value>, extra: &[(&str, String)]) -> SocketReply {
        let body = body.map(Value::to_string);
        let mut headers: Vec<(&str, String)> = extra.to_vec();
        // As the CLI does: the daemon takes only JSON on /v1 routes that act.
        if body.is_some() || !matches!(method, "GET" | "HEAD" | "OPTIONS") {
            headers.push(("Content-Type", "application/json".to_owned()));
        }
        socket::request(&self.socket(), method, path, &headers, body.as_deref().map(str::as_bytes))
    }

    /// `GET /v1/status` over the socket; panics unless it answers 200 with JSON.
    #[track_caller]
    pub fn status(&self) -> Value {
        let reply = self.v1("GET", "/v1/status", None);
        assert_eq!(reply.status, 200, "GET /v1/status over the socket:\n{reply}");
        reply.json()
    }

    /// The instances of `server` in `/v1/status` (`{server, key, pid, ageMs, idleMs, inUse}`).
    #[track_caller]
    pub fn instances(&self, server: &str) -> Vec<Value> {
        let status = self.status();
        status["instances"]
            .as_array()
            .unwrap_or_else(|| panic!("/v1/status has no instances array: {status}"))
            .iter()
            .filter(|i| i["server"] == server)
            .cloned()
            .collect()
    }

    /// Waits until the instances of `server` have `calls` calls in use in total; whether
    /// they did within `timeout`.
    pub fn wait_in_use(&self, server: &str, calls: u64, timeout: Duration) -> bool {
        poll(timeout, || {
            let in_use: u64 = self.instances(server).iter().map(|i| i["inUse"].as_u64().unwrap_or(0)).sum();
            (in_use == calls).then_some(())
        })
        .is_some()
    }

    /// Instance keys of `server` in `/v1/status`, sorted.
    #[track_caller]
    pub fn instance_keys(&self, server: &str) -> Vec<String> {
        let mut keys: Vec<String> =
            self.instances(server).iter().map(|i| i["key"].as_str().unwrap_or_default().to_owned()).collect();
        keys.sort();
        keys
    }

    /// Stops every daemon serving this state dir: SIGTERM, then SIGKILL after a grace.
    pub fn stop_daemons(&self) {
        let daemons = self.daemons();
        for pid in &daemons {
            signal(*pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + DROP_GRACE;
        for pid in daemons {
            let left = deadline.saturating_duration_since(Instant::now());
            if poll(left, || (!alive(pid)).then_some(())).is_none() {
                signal(pid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        self.stop_daemons();
        if std::thread::panicking() {
            let log = self.daemon_log();
            if !log.is_empty() {
                eprintln!("---- on-demand daemon log (last 60 lines) ----\n{}\n----", tail(&log, 60));
            }
        }
    }
}

/// What one CLI command did.
pub struct CliRun {
    pub args: Vec<String>,
    /// The exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl CliRun {
    /// Asserts the exit code, printing the whole run otherwise.
    #[track_caller]
    pub fn assert_code(&self, code: i32) -> &CliRun {
        assert_eq!(self.code, Some(code), "expected exit code {code}:\n{self}");
        self
    }

    /// stdout parsed as JSON (for `--json`).
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{self}"))
    }
}

impl fmt::Display for CliRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "mcpx {} → exit {:?} after {:?}", self.args.join(" "), self.code, self.took)?;
        writeln!(f, "stdout:\n{}", self.stdout)?;
        write!(f, "stderr:\n{}", self.stderr)
    }
}

impl fmt::Debug for CliRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Runs a command with piped output, killing it after [`CLI_TIMEOUT`].
#[track_caller]
fn run(mut command: Command, args: &[&str]) -> CliRun {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", paths::mcpx().display()));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(CLI_TIMEOUT) {
        Ok(output) => output.expect("collect the command's output"),
        Err(_) => {
            signal(pid, libc::SIGKILL);
            panic!("mcpx {} did not finish within {CLI_TIMEOUT:?}", args.join(" "));
        }
    };
    CliRun {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        took: started.elapsed(),
    }
}

pub(crate) fn pretty(config: &Value) -> String {
    serde_json::to_string_pretty(config).expect("a JSON value serializes")
}

pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
