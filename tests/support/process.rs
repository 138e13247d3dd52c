//! Finding the processes a test started, and waiting for things to become true.
//!
//! Upstreams are launched as `fakemcp --tag <tag>` with a tag unique to the test, so a
//! test can count its own upstream processes in `/proc` while other tests run beside it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A string no other test (or earlier run) uses, for `fakemcp --tag`.
pub fn tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("mcpx-e2e-{}-{n}-{nanos:08x}", std::process::id())
}

/// Live processes one of whose command-line arguments is exactly `tag`. Zombies (already
/// dead, not yet reaped) have an empty command line and are not counted.
pub fn processes_with(tag: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            cmdline.split(|b| *b == 0).any(|arg| arg == tag.as_bytes()).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Polls `probe` every 20 ms until it returns `Some`, or gives `None` after `timeout`.
pub fn poll<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no process carries `tag`; returns the ones still alive after `timeout`.
pub fn wait_until_gone(tag: &str, timeout: Duration) -> Vec<u32> {
    poll(timeout, || processes_with(tag).is_empty().then_some(())).map_or_else(|| processes_with(tag), |()| Vec::new())
}

/// A directory removed on drop (kept when `MCPX_E2E_KEEP` is set, for post-mortems).
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new() -> TempDir {
        let path = std::env::temp_dir().join(tag());
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("MCPX_E2E_KEEP").is_some() {
            eprintln!("keeping {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Whether `pid` is a live process (a zombie, dead but not yet reaped, is not).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may contain spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Sends `signal` to `pid`. Only for processes this test started (directly or through
/// the product), found by their tag, their state dir or their child handle.
pub fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; a stale pid at worst gets ESRCH.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// Waits until `pid` is no longer alive; whether it went within `timeout`.
pub fn wait_for_exit(pid: u32, timeout: Duration) -> bool {
    poll(timeout, || (!alive(pid)).then_some(())).is_some()
}

/// Live `mcpx daemon` processes whose environment names `state_dir` as `MCPX_STATE_DIR`:
/// the daemons serving that directory, however they were started.
pub fn daemons_for(state_dir: &Path) -> Vec<u32> {
    let wanted = {
        let mut v = b"MCPX_STATE_DIR=".to_vec();
        v.extend_from_slice(state_dir.as_os_str().as_encoded_bytes());
        v
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let is_daemon =
                args.first().is_some_and(|a| a.ends_with(b"mcpx")) && args.get(1).is_some_and(|a| *a == b"daemon");
            if !is_daemon || !alive(pid) {
                return None;
            }
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ.split(|b| *b == 0).any(|var| var == wanted.as_slice()).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// A free TCP port on the loopback interface (free when this returns; a test binds it
/// soon after, so a collision is unlikely and shows up as a start failure, not a wrong
/// result).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("a local address").port()
}

/// The one JSON line a client program prints, after checking that it succeeded; panics
/// with its output (naming it `what`) otherwise.
#[track_caller]
pub fn json_line(output: &std::process::Output, what: &str) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed with {}:\n{stderr}\nstdout: {stdout}", output.status);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what} printed no JSON ({e}): {stdout}\nstderr:\n{stderr}"))
}
