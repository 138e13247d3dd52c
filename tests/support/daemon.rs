//! A running `mcpx daemon`, owned by one test.
//!
//! Each test starts its own daemon on an ephemeral port with its own state directory and
//! config file in a fresh temporary directory, so tests run in parallel without seeing
//! each other. The guard kills the daemon if the test forgets to (or panics before) it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::paths;
use crate::process::{TempDir, poll};

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
    dir: TempDir,
    config_path: PathBuf,
    stderr_path: PathBuf,
    state: Value,
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
        let dir = TempDir::new();
        let config_dir = dir.path().join("config");
        let state_dir = dir.path().join("state");
        for d in [&config_dir, &state_dir] {
            std::fs::create_dir_all(d)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", d.display()));
        }
        let config_path = config_dir.join("mcpx.json");
        std::fs::write(&config_path, pretty(config)).expect("write the config file");
        let stderr_path = dir.path().join("daemon.stderr");
        let stdout_path = dir.path().join("daemon.stdout");

        let mut command = Command::new(paths::mcpx());
        command
            .arg("daemon")
            .arg("--config")
            .arg(&config_path)
            .args(["--port", "0"])
            .current_dir(dir.path())
            .env("MCPX_STATE_DIR", &state_dir)
            .env_remove("MCPX_CONFIG")
            .stdin(Stdio::null())
            .stdout(File::create(&stdout_path).expect("create the daemon's stdout file"))
            .stderr(File::create(&stderr_path).expect("create the daemon's stderr file"));
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", paths::mcpx().display()));

        let mut daemon = Daemon {
            child: Some(child),
            dir,
            config_path,
            stderr_path,
            state: Value::Null,
        };
        let state_file = daemon.state_file();
        let state = poll(START_TIMEOUT, || {
            if let Ok(Some(status)) = daemon.child.as_mut().expect("child").try_wait() {
                panic!(
                    "the daemon exited with {status} before listening; stderr:\n{}",
                    daemon.stderr()
                );
            }
            let text = std::fs::read_to_string(&state_file).ok()?;
            let state: Value = serde_json::from_str(&text).ok()?;
            state["url"].is_string().then_some(state)
        });
        daemon.state = state.unwrap_or_else(|| {
            panic!(
                "the daemon did not write {} within {START_TIMEOUT:?}; stderr:\n{}",
                state_file.display(),
                daemon.stderr()
            )
        });
        daemon
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
        self.dir.path().join("state").join("daemon.json")
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon was stopped").id()
    }

    pub fn config_path(&self) -> &Path {
        &self.config_path
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
        let dir = self
            .config_path
            .parent()
            .expect("the config file has a directory");
        let temp = dir.join(format!(
            ".mcpx.json.{}.tmp",
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&temp, pretty(config)).expect("write the new config");
        std::fs::rename(&temp, &self.config_path).expect("rename the new config into place");
        poll(RELOAD_TIMEOUT, || {
            (self.stderr().matches(RELOADED).count() > before).then_some(())
        })
        .is_some()
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
                panic!(
                    "the daemon did not exit within {STOP_TIMEOUT:?} of SIGTERM; stderr:\n{}",
                    self.stderr()
                );
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
            let log = self.stderr();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(80)..];
            eprintln!(
                "---- mcpx daemon stderr (last {} lines) ----\n{}\n----",
                tail.len(),
                tail.join("\n")
            );
        }
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child we spawned and have not reaped, so the pid is still ours.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

fn pretty(config: &Value) -> String {
    serde_json::to_string_pretty(config).expect("a JSON value serializes")
}
