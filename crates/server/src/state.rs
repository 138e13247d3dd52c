//! The daemon's private state dir and the record it keeps there, so clients and people
//! can find a running daemon: `daemon.json` with pid, endpoint, config path, version and
//! start time, written atomically (temp file + rename) and removed on a clean stop.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub const RECORD_FILE: &str = "daemon.json";

/// `$MCPX_STATE_DIR`, else `$XDG_RUNTIME_DIR/mcpx`, else `$XDG_STATE_HOME/mcpx`, else
/// `~/.local/state/mcpx`. With none of them (no `HOME` either) there is no private place
/// to name, and this refuses rather than fall back to a shared folder such as `/tmp`,
/// where another user could be there first.
pub fn state_dir() -> std::io::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("MCPX_STATE_DIR") {
        return Ok(dir);
    }
    if let Some(dir) = var("XDG_RUNTIME_DIR") {
        return Ok(dir.join("mcpx"));
    }
    match var("XDG_STATE_HOME").or_else(|| var("HOME").map(|home| home.join(".local/state"))) {
        Some(state_home) => Ok(state_home.join("mcpx")),
        None => Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no private state dir to use: set MCPX_STATE_DIR, XDG_RUNTIME_DIR or HOME (mcpx does not fall back to a shared folder such as /tmp)",
        )),
    }
}

/// Creates the state dir readable by its owner only. An existing dir that another user
/// owns, or that others may write to (a shared dir such as `/tmp` named as the state dir),
/// is refused rather than taken over: its socket and records could be replaced by anyone.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    if std::fs::metadata(dir).is_ok() {
        check_private_dir(dir)?;
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Whether `dir` (followed if it is a link: what counts is the folder it names) belongs
/// to this user and no one else may write to it. A client checks this before it trusts
/// the socket in it; the daemon before it makes it its own.
pub fn check_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir)?;
    let uid = rustix::process::geteuid().as_raw();
    let refuse = |why: String| Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why));
    if !meta.is_dir() {
        return refuse(format!("{} is not a directory", dir.display()));
    }
    if meta.uid() != uid {
        return refuse(format!(
            "{} belongs to uid {}, not to this user ({uid}); use a private state dir",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!(
            "{} is writable by others (mode {:o}); name a private directory (mcpx makes it 0700), not a shared one",
            dir.display(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

pub const LOCK_FILE: &str = "daemon.lock";

/// Held for the daemon's whole life: one daemon per state dir. The kernel releases it when
/// the process dies however it dies, so a stale socket or record is recognised by a free
/// lock.
pub struct DaemonLock {
    _file: std::fs::File,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("a daemon already runs for {dir}{}", running.as_ref().map(|r| format!(" (pid {}, {})", r["pid"], r["url"].as_str().unwrap_or("?"))).unwrap_or_default())]
    Running { dir: PathBuf, running: Option<Value> },
    #[error("locking {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

impl DaemonLock {
    pub fn acquire(dir: &Path) -> Result<DaemonLock, LockError> {
        use rustix::fs::{FlockOperation, flock};
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| LockError::Io { path: path.clone(), source })?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(LockError::Running { dir: dir.to_owned(), running: read_record(dir) });
            }
            Err(e) => return Err(LockError::Io { path, source: e.into() }),
        }
        Ok(DaemonLock { _file: file })
    }
}

/// The record of the daemon running for `dir`, if one was written.
pub fn read_record(dir: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(RECORD_FILE)).ok()?).ok()
}

pub struct Record {
    pub url: String,
    pub port: u16,
    pub socket: PathBuf,
    pub config: Option<PathBuf>,
}

impl Record {
    fn to_json(&self) -> Value {
        let started =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        json!({
            "pid": std::process::id(),
            "url": self.url,
            "port": self.port,
            "socket": self.socket.display().to_string(),
            "config": self.config.as_ref().map(|p| p.display().to_string()),
            "version": env!("CARGO_PKG_VERSION"),
            "startedAt": started,
        })
    }

    /// Writes the record atomically: readers see the old file or the whole new one.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join(RECORD_FILE);
        let tmp = dir.join(format!(".{RECORD_FILE}.{}", std::process::id()));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(serde_json::to_string_pretty(&self.to_json()).expect("a JSON value serializes").as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }
}

/// Removes the record and the socket if they are still ours.
pub fn remove_record(dir: &Path) {
    let ours = read_record(dir).is_some_and(|v| v["pid"] == std::process::id());
    if ours {
        let _ = std::fs::remove_file(dir.join(RECORD_FILE));
        let _ = std::fs::remove_file(dir.join(crate::socket::SOCKET_FILE));
    }
}

/// The environment variable every process a daemon starts inherits: `<state dir>#<pid>`.
/// It lets the next daemon for the same state dir find what a killed daemon left behind.
pub const OWNER_ENV: &str = "MCPX_OWNER";

pub fn owner_tag(dir: &Path) -> String {
    format!("{}#{}", dir.display(), std::process::id())
}

/// Kills the process groups of processes a previous daemon for `dir` started and left
/// behind (it was killed before it could stop them). Call with the daemon lock held: no
/// other live daemon can own `dir`, so every such process is an orphan. Returns how many
/// processes were found.
pub fn reap_orphans(dir: &Path) -> usize {
    use rustix::process::{Pid, Signal, getpgid, kill_process, kill_process_group};
    let (dir, ours) = (dir.display().to_string(), owner_tag(dir));
    let Ok(entries) = std::fs::read_dir("/proc") else { return 0 };
    let mut found = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()).and_then(Pid::from_raw) else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let owned = environ
            .split(|b| *b == 0)
            .filter_map(|v| std::str::from_utf8(v).ok())
            .filter_map(|v| v.strip_prefix(OWNER_ENV)?.strip_prefix('='))
            .any(|tag| tag != ours && owner_dir(tag) == Some(dir.as_str()));
        if owned {
            found += 1;
            // A vanished process yields ESRCH, and there is nothing left to do.
            if let Ok(group) = getpgid(Some(pid))
                && group.as_raw_pid() > 1
            {
                let _ = kill_process_group(group, Signal::KILL);
            }
            let _ = kill_process(pid, Signal::KILL);
        }
    }
    found
}

/// The state dir an owner tag (`<dir>#<pid>`) names, exactly: split at the last `#`,
/// since a dir may hold `#` and a pid never does. A daemon for `/x/st` must not take the
/// processes of one for `/x/st#b` as its own.
fn owner_dir(tag: &str) -> Option<&str> {
    let (dir, pid) = tag.rsplit_once('#')?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_tag_names_its_state_dir_exactly() {
        assert_eq!(owner_dir("/x/st#123"), Some("/x/st"));
        assert_eq!(owner_dir("/x/st#b#123"), Some("/x/st#b"), "a state dir with a # in it");
        assert_ne!(owner_dir("/x/st#b#123"), Some("/x/st"), "another daemon's dir that starts like ours");
        assert_eq!(owner_dir("/x/st#"), None);
        assert_eq!(owner_dir("/x/st#12a"), None);
        assert_eq!(owner_dir("/x/st"), None);
    }

    #[test]
    fn a_state_dir_others_may_write_to_is_refused_and_a_new_one_is_private() {
        let base = std::env::temp_dir().join(format!("mcpx-state-test-{}", std::process::id()));
        let shared = base.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = ensure_private_dir(&shared).unwrap_err();
        assert!(e.to_string().contains("writable by others"), "{e}");
        assert_eq!(std::fs::metadata(&shared).unwrap().permissions().mode() & 0o7777, 0o1777, "left as it was");
        let private = base.join("private/mcpx");
        ensure_private_dir(&private).unwrap();
        assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o700);
        ensure_private_dir(&private).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
