//! A running `mcpx daemon`, owned by one test.
//!
//! Each test starts its own daemon on an ephemeral port with its own state directory and
//! config file in a fresh temporary directory, so tests run in parallel without seeing
//! each other. The guard kills the daemon if the test forgets to (or panics before) it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::home::{Home, pretty, tail};
use crate::process::{poll, signal};

/// How long a daemon may take to write `daemon.json`.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long `stop()` waits for the daemon to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long `rewrite_config` waits for the daemon to log that it picked the change up.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(5);
/// What the daemon logs (at info) when it applies a changed config file.
const RELOADED: &str = "config reloaded";

pub struct Daemon {
    child: Option<Child>,
    /// Extra environment the daemon was started with (kept for `restart`).
    env: Vec<(String, String)>,
    /// The soft open-file limit the daemon starts under, when a test sets one.
    open_files: Option<u64>,
    /// The port it listens on: 0, any free one, unless a restart keeps the last one.
    port: u16,
    stderr_path: PathBuf,
    state: Value,
    /// Declared last: dropped after the child is stopped.
    home: Home,
}

impl Daemon {
    /// Starts `mcpx daemon --config <file> --port 0` with `config` as the file's content,
    /// and waits until it is listening (its `daemon.json` exists).
    #[track_caller]
    pub fn start(config: &Value) -> Daemon {
        Daemon::start_with_env(config, &[])
    }

    /// As [`Daemon::start`], with extra environment variables for the daemon.
    #[track_caller]
    pub fn start_with_env(config: &Value, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_in(Home::new(config), env)
    }

    /// As [`Daemon::start_with_env`], in a home the test prepared (its state dir on a
    /// file system of its own, say).
    #[track_caller]
    pub fn start_in(home: Home, env: &[(&str, &str)]) -> Daemon {
        let stderr_path = home.root().join("daemon.stderr");
        let mut daemon = Daemon {
            child: None,
            env: env.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect(),
            open_files: None,
            port: 0,
            stderr_path,
            state: Value::Null,
            home,
        };
        daemon.spawn();
        daemon
    }

    /// As [`Daemon::start`], under a soft open-file limit of `soft` (the hard limit is
    /// left as it is), as a login shell's default of 1024 would start it.
    #[track_caller]
    pub fn start_with_open_file_limit(config: &Value, soft: u64) -> Daemon {
        let mut daemon = Daemon {
            child: None,
            env: Vec::new(),
            open_files: Some(soft),
            port: 0,
            stderr_path: PathBuf::new(),
            state: Value::Null,
            home: Home::new(config),
        };
        daemon.stderr_path = daemon.home.root().join("daemon.stderr");
        daemon.spawn();
        daemon
    }

    /// Starts the daemon process in this home and waits for its `daemon.json`.
    #[track_caller]
    fn spawn(&mut self) {
        let stdout_path = self.home.root().join("daemon.stdout");
        let mut command = self.home.mcpx();
        command
            .arg("daemon")
            .arg("--config")
            .arg(self.home.config_path())
            .args(["--port", &self.port.to_string()])
            .stdout(File::create(&stdout_path).expect("create the daemon's stdout file"))
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.stderr_path)
                    .expect("open the daemon's stderr file"),
            );
        for (name, value) in &self.env {
            command.env(name, value);
        }
        if let Some(soft) = self.open_files {
            // SAFETY: getrlimit/setrlimit are async-signal-safe and touch only the struct.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                    if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    limit.rlim_cur = soft.min(limit.rlim_max);
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start mcpx daemon: {e}"));
        let pid = child.id();
        self.child = Some(child);

        let state_file = self.state_file();
        let state = poll(START_TIMEOUT, || {
            if let Ok(Some(status)) = self.child.as_mut().expect("child").try_wait() {
                panic!("the daemon exited with {status} before listening; stderr:\n{}", self.stderr());
            }
            let text = std::fs::read_to_string(&state_file).ok()?;
            let state: Value = serde_json::from_str(&text).ok()?;
            // After a SIGKILL the old record is still there: wait for this daemon's own.
            (state["url"].is_string() && state["pid"] == pid).then_some(state)
        });
        self.state = state.unwrap_or_else(|| {
            panic!(
                "the daemon did not write {} within {START_TIMEOUT:?}; stderr:\n{}",
                state_file.display(),
                self.stderr()
            )
        });
    }

    /// Starts a new daemon for the same home (config, state dir and environment) after
    /// this one was stopped or killed; waits until it is listening.
    #[track_caller]
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart() needs the daemon stopped or killed first");
        self.spawn();
    }

    /// As [`Daemon::restart`], on the port the last one listened on: the same URL, as a
    /// restarted pod keeps its address.
    #[track_caller]
    pub fn restart_on_its_port(&mut self) {
        let port = self.url().rsplit(':').next().and_then(|p| p.trim_end_matches("/mcp").parse().ok());
        self.port = port.expect("the daemon's URL names its port");
        self.restart();
    }

    /// SIGKILLs the daemon (no cleanup of its own) and reaps it.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the daemon was already stopped");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The home the daemon runs for: its state dir, config, CLI and `/v1` over the socket.
    /// Whether the daemon was started and not stopped or killed since.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn home(&self) -> &Home {
        &self.home
    }

    pub fn state_dir(&self) -> &Path {
        self.home.state_dir()
    }

    /// The `/mcp` endpoint, from `daemon.json`.
    pub fn url(&self) -> &str {
        self.state["url"].as_str().expect("daemon.json has a url")
    }

    /// `daemon.json` as it was when the daemon came up.
    pub fn state(&self) -> &Value {
        &self.state
    }

    /// `<MCPX_STATE_DIR>/daemon.json`.
    pub fn state_file(&self) -> PathBuf {
        self.home.state_dir().join("daemon.json")
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon was stopped").id()
    }

    pub fn config_path(&self) -> &Path {
        self.home.config_path()
    }

    /// Everything the daemon has logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Replaces the config file the way editors do (write a temporary file, rename it over
    /// the old one), then waits until the daemon logs that it reloaded, so the next request
    /// is the first after the change. Returns whether that log line appeared in time (it
    /// does not when the new file means the same config).
    pub fn rewrite_config(&self, config: &Value) -> bool {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let before = self.stderr().matches(RELOADED).count();
        let dir = self.config_path().parent().expect("the config file has a directory");
        let temp = dir.join(format!(".mcpx.json.{}.tmp", NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::write(&temp, pretty(config)).expect("write the new config");
        std::fs::rename(&temp, self.config_path()).expect("rename the new config into place");
        poll(RELOAD_TIMEOUT, || (self.stderr().matches(RELOADED).count() > before).then_some(())).is_some()
    }

    /// Sends SIGTERM and waits for the daemon to exit; returns its exit status. Panics
    /// (after killing it) when it does not exit in time.
    #[track_caller]
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the daemon was already stopped");
        signal(child.id(), libc::SIGTERM);
        match poll(STOP_TIMEOUT, || child.try_wait().ok().flatten()) {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the daemon did not exit within {STOP_TIMEOUT:?} of SIGTERM; stderr:\n{}", self.stderr());
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), libc::SIGTERM);
            if poll(Duration::from_secs(5), || child.try_wait().ok().flatten()).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            eprintln!("---- mcpx daemon stderr (last 80 lines) ----\n{}\n----", tail(&self.stderr(), 80));
        }
    }
}
