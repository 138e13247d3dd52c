//! Settings: the config file, found the documented way, kept current while the daemon runs.
//!
//! The daemon watches the file's directory (editors and tools replace a file by writing a
//! new one and renaming it over the old, which a watch on the file itself would lose) and
//! re-reads the file once per burst of changes (writes, creation, renames, removal: never
//! mere reads, which its own re-read would cause), applying it only when its bytes differ
//! from the last ones read. A file that does not parse is refused with its
//! path, line and reason, and the last good config stays in force. So is a file that
//! changes what is fixed at start (where the daemon listens, see [`needs_restart`]): the
//! listener could not follow it, and code reading the new value would disagree with it.
//!
//! The file is only one the user chose: `--config`, `$MCPX_CONFIG`, or the user's config
//! dir. Never one found from the cwd: a cloned repository's file would run its commands
//! as the user, in a daemon every agent shares. A file someone else may have written
//! (`crate::provenance`) is refused, at start and at every reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};

use crate::config::{Config, ConfigError};

pub struct Settings {
    path: Option<PathBuf>,
    /// Swapped whole by the watcher; readers never wait for it, nor it for them.
    current: Arc<ArcSwap<Config>>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Settings {
    /// Settings from `path` (watched for changes), or the defaults when there is none.
    pub fn load(path: Option<PathBuf>) -> Result<Settings, ConfigError> {
        let Some(path) = path else {
            return Ok(Settings {
                path: None,
                current: Arc::new(ArcSwap::from_pointee(Config::default())),
                _watcher: None,
            });
        };
        let path = std::path::absolute(&path).unwrap_or(path);
        // The bytes parsed are the ones the watcher compares a change with.
        let bytes = ConfigError::read_trusted(&path)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| ConfigError::Read {
            path: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        let current = Arc::new(ArcSwap::from_pointee(Config::parse(text, &path)?));
        let watcher = watch(&path, current.clone(), bytes);
        Ok(Settings { path: Some(path), current, _watcher: watcher })
    }

    /// The config in force now. Cheap (no lock, and no shared counter touched while few
    /// are held at once): read it per request for hot settings. The handle keeps this
    /// config alive; keep it for a request, not for good (clone the `Arc` inside for that).
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.current.load()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// Finds the config file the user chose: `--config`, `$MCPX_CONFIG`, then
/// `$XDG_CONFIG_HOME/mcpx/config.json` (default `~/.config`). `None`: run empty. Takes no
/// cwd on purpose: where a command runs never chooses what the daemon runs. So a relative
/// `$MCPX_CONFIG` is refused: set once, it is read from every directory a command runs in,
/// and would let a cloned repository holding a file of that name choose after all. (A
/// relative `--config` is typed where it is meant.)
pub fn find_config(flag: Option<PathBuf>) -> Result<Option<PathBuf>, ConfigError> {
    if flag.is_some() {
        return Ok(flag);
    }
    if let Some(p) = std::env::var_os("MCPX_CONFIG").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(p);
        if path.is_relative() {
            return Err(ConfigError::Rule {
                path,
                message: "$MCPX_CONFIG must be an absolute path: a relative one would be found from whatever directory a command runs in".into(),
            });
        }
        return Ok(Some(path));
    }
    Ok(user_config_file().filter(|p| p.is_file()))
}

/// Where the user's own config is, found or not: `$XDG_CONFIG_HOME/mcpx/config.json`, else
/// `$HOME/.config/mcpx/config.json`. A relative `$XDG_CONFIG_HOME` or `$HOME` is ignored
/// (as the XDG base directory spec says), since it would be found from the cwd.
pub fn user_config_file() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let config_home = absolute("XDG_CONFIG_HOME").or_else(|| absolute("HOME").map(|h| h.join(".config")))?;
    Some(config_home.join("mcpx/config.json"))
}

/// What to tell a user whose cwd (or a folder above it) holds a `.mcpx.json`, which
/// mcpx no longer reads; `None` when there is none.
pub fn ignored_project_config(cwd: &Path) -> Option<String> {
    let found = cwd.ancestors().map(|d| d.join(".mcpx.json")).find(|p| p.is_file())?;
    Some(format!(
        "ignoring {}: mcpx does not read a project's .mcpx.json (a cloned repository could run its commands as you); to use it, check it and pass --config {} or set MCPX_CONFIG",
        found.display(),
        found.display()
    ))
}

/// Why `next` cannot replace `running` while the daemon runs, if it cannot: the daemon
/// binds `http.host` and `http.port` once, at start, so a change to either needs a
/// restart; and while it listens beyond loopback, dropping `http.tokens` would open it to
/// anyone who can reach the port.
pub fn needs_restart(running: &Config, next: &Config) -> Option<String> {
    const RESTART: &str = "the listener is bound at start; restart the daemon (`mcpx stop`, then start it) to apply it";
    let (was, now) = (&running.http, &next.http);
    if was.host != now.host {
        return Some(format!("\"http.host\" changed from {:?} to {:?}: {RESTART}", was.host, now.host));
    }
    if was.port != now.port {
        return Some(format!("\"http.port\" changed from {} to {}: {RESTART}", was.port, now.port));
    }
    let loopback = was.host.parse::<std::net::IpAddr>().map_or(was.host == "localhost", |ip| ip.is_loopback());
    let authenticates = |http: &crate::config::HttpConfig| !http.tokens.is_empty() || http.oauth.is_some();
    if !loopback && authenticates(was) && !authenticates(now) {
        return Some(format!(
            "\"http.tokens\" would become empty and \"http.oauth\" absent while the daemon listens beyond loopback on {:?}: refused; to stop requiring tokens, set \"http.host\" to a loopback address and restart the daemon",
            was.host
        ));
    }
    None
}

/// How long the file must stay quiet before a reload: one save is a burst of events
/// (create, writes, close, rename), and reading mid-burst could catch half a file.
const SETTLE: Duration = Duration::from_millis(50);
/// A file that never goes quiet (a process appending without pause) is still re-read
/// this often, so a change is never held back for good.
const MOST_DELAY: Duration = Duration::from_millis(500);

fn watch(path: &Path, current: Arc<ArcSwap<Config>>, loaded: Vec<u8>) -> Option<notify::RecommendedWatcher> {
    let dir = path.parent()?.to_owned();
    let file = path.to_owned();
    let name = file.file_name()?.to_owned();
    let (changed, bursts) = mpsc::channel::<()>();
    let since_loaded = changed.clone();
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        // A dropped event queue names no path: the file may have changed unseen.
        let names_file = event.paths.iter().any(|p| p.file_name() == Some(&name));
        if event.need_rescan() || (names_file && is_change(&event.kind)) {
            let _ = changed.send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("cannot watch {}: {e}; config changes need a restart", dir.display());
            return None;
        }
    };
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::warn!("cannot watch {}: {e}; config changes need a restart", dir.display());
        return None;
    }
    // A change between the first read and the watch would go unseen: compare once now.
    let _ = since_loaded.send(());
    drop(since_loaded);
    let reloader = std::thread::Builder::new()
        .name("mcpx-config-watch".into())
        .spawn(move || reload_on_change(&file, &current, &bursts, loaded));
    if let Err(e) = reloader {
        tracing::warn!("cannot watch {}: {e}; config changes need a restart", dir.display());
        return None;
    }
    Some(watcher)
}

/// Whether an event can mean new content. Opening, reading and closing the file
/// unwritten cannot, and reading it here causes exactly those: reacting to them made
/// every reload trigger the next, spinning a core once anyone had read the file.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_)) => false,
        _ => true,
    }
}

/// Waits for bursts of changes (until the watcher, and with it the sender, is dropped)
/// and applies each burst once, if the file's bytes differ from the last ones read.
fn reload_on_change(file: &Path, current: &ArcSwap<Config>, bursts: &mpsc::Receiver<()>, mut seen: Vec<u8>) {
    while bursts.recv().is_ok() {
        let first = Instant::now();
        loop {
            match bursts.recv_timeout(SETTLE) {
                Ok(()) if first.elapsed() < MOST_DELAY => continue,
                Ok(()) | Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        // Read from the file whose provenance is checked, so nothing swapped in between
        // the check and the read is applied. Not remembered as seen when refused: the same
        // bytes apply once the file is closed to others.
        let bytes = match ConfigError::read_trusted(file) {
            Ok(bytes) => bytes,
            // A rename-over briefly leaves no file; the next event brings the new one.
            Err(ConfigError::Read { .. }) => continue,
            Err(e) => {
                tracing::error!("config not applied, keeping the last good one: {e}");
                continue;
            }
        };
        if bytes == seen {
            continue;
        }
        apply(file, &bytes, current);
        seen = bytes;
    }
}

/// Puts the config in `bytes` in force, unless it does not parse or needs a restart.
fn apply(file: &Path, bytes: &[u8], current: &ArcSwap<Config>) {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            tracing::error!("config not applied, keeping the last good one: {}: not UTF-8: {e}", file.display());
            return;
        }
    };
    let config = match Config::parse(text, file) {
        Ok(config) => config,
        Err(e) => {
            tracing::error!("config not applied, keeping the last good one: {e}");
            return;
        }
    };
    // This thread is the only writer, so what it compares with is what it replaces.
    let running = current.load();
    if let Some(why) = needs_restart(&running, &config) {
        tracing::error!("config not applied, keeping the last good one: {}: {why}", file.display());
        return;
    }
    if **running != config {
        current.store(Arc::new(config));
        tracing::info!(path = %file.display(), "config reloaded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, Path::new("test.json")).expect("a valid config")
    }

    #[test]
    fn reading_the_file_is_not_a_change_and_writing_it_is() {
        use notify::event::{CreateKind, DataChange, RemoveKind, RenameMode};
        let reads = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(notify::event::MetadataKind::AccessTime)),
        ];
        assert!(reads.iter().all(|kind| !is_change(kind)), "{reads:?}");
        let changes = [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Remove(RemoveKind::File),
        ];
        assert!(changes.iter().all(is_change), "{changes:?}");
    }

    #[test]
    fn a_reload_moving_the_listener_or_opening_it_needs_a_restart() {
        let running = config(r#"{"http": {"host": "0.0.0.0", "tokens": {"ci": "0123456789abcdef"}}}"#);
        let moved = config(r#"{"http": {"host": "0.0.0.0", "port": 9000, "tokens": {"ci": "0123456789abcdef"}}}"#);
        assert!(
            needs_restart(&running, &moved).is_some_and(|why| why.contains("http.port") && why.contains("restart"))
        );
        let loopback = config(r#"{"http": {"host": "127.0.0.1"}}"#);
        assert!(needs_restart(&running, &loopback).is_some_and(|why| why.contains("http.host")));
        let other_token = config(r#"{"http": {"host": "0.0.0.0", "tokens": {"bot": "fedcba9876543210"}}}"#);
        assert_eq!(needs_restart(&running, &other_token), None);
        let mut open = running.clone();
        open.http.tokens.clear();
        assert!(needs_restart(&running, &open).is_some_and(|why| why.contains("http.tokens")));
        // OAuth authenticates too: swapping tokens for it is fine, dropping both is not.
        let oauth = config(
            r#"{"http": {"host": "0.0.0.0", "oauth": {"issuers": ["https://as"], "resource": "https://m/mcp"}}}"#,
        );
        assert_eq!(needs_restart(&running, &oauth), None);
        assert_eq!(needs_restart(&oauth, &running), None);
        let mut open = oauth.clone();
        open.http.oauth = None;
        assert!(needs_restart(&oauth, &open).is_some_and(|why| why.contains("http.oauth")));
    }

    #[test]
    fn a_reload_swaps_the_config_while_a_handle_taken_before_keeps_the_old_one() {
        let file = Path::new("test.json");
        let current = ArcSwap::from_pointee(config(r#"{"pool": {"idleTimeout": "1s"}}"#));
        let before = current.load();
        apply(file, br#"{"pool": {"idleTimeout": "2s"}}"#, &current);
        assert_eq!(current.load().pool.idle_timeout, Duration::from_secs(2));
        assert_eq!(before.pool.idle_timeout, Duration::from_secs(1));
        // Refused: not JSON, or moving the listener. The last good config stays in force.
        apply(file, b"{", &current);
        apply(file, br#"{"http": {"port": 1}, "pool": {"idleTimeout": "3s"}}"#, &current);
        assert_eq!(current.load().pool.idle_timeout, Duration::from_secs(2));
    }
}
