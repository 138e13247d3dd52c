//! Settings: the config file, found the documented way, kept current while the daemon runs.
//!
//! The daemon watches the file's directory (editors and tools replace a file by writing a
//! new one and renaming it over the old, which a watch on the file itself would lose) and
//! re-reads the file on every change. A file that does not parse is refused with its
//! path, line and reason, and the last good config stays in force.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use notify::{RecursiveMode, Watcher};

use crate::config::{Config, ConfigError};

pub struct Settings {
    path: Option<PathBuf>,
    current: Arc<RwLock<Arc<Config>>>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Settings {
    /// Settings from `path` (watched for changes), or the defaults when there is none.
    pub fn load(path: Option<PathBuf>) -> Result<Settings, ConfigError> {
        let Some(path) = path else {
            return Ok(Settings { path: None, current: Arc::new(RwLock::new(Arc::new(Config::default()))), _watcher: None });
        };
        let path = std::path::absolute(&path).unwrap_or(path);
        let current = Arc::new(RwLock::new(Arc::new(Config::load(&path)?)));
        let watcher = watch(&path, current.clone());
        Ok(Settings { path: Some(path), current, _watcher: watcher })
    }

    /// The config in force now. Cheap: read it per request for hot settings.
    pub fn config(&self) -> Arc<Config> {
        self.current.read().expect("settings lock").clone()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// Finds the config file: `--config`, `$MCPX_CONFIG`, `.mcpx.json` in the cwd or a parent,
/// then `$XDG_CONFIG_HOME/mcpx/config.json` (default `~/.config`). `None`: run empty.
pub fn find_config(flag: Option<PathBuf>, cwd: &Path) -> Option<PathBuf> {
    if flag.is_some() {
        return flag;
    }
    if let Some(p) = std::env::var_os("MCPX_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = cwd.ancestors().map(|d| d.join(".mcpx.json")).find(|p| p.is_file()) {
        return Some(p);
    }
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config_home.join("mcpx/config.json")).filter(|p| p.is_file())
}

fn watch(path: &Path, current: Arc<RwLock<Arc<Config>>>) -> Option<notify::RecommendedWatcher> {
    let dir = path.parent()?.to_owned();
    let file = path.to_owned();
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if !event.paths.iter().any(|p| p.file_name() == file.file_name()) {
            return;
        }
        match Config::load(&file) {
            Ok(config) => {
                let mut slot = current.write().expect("settings lock");
                if **slot != config {
                    *slot = Arc::new(config);
                    tracing::info!(path = %file.display(), "config reloaded");
                }
            }
            // A rename-over briefly leaves no file; the next event brings the new one.
            Err(ConfigError::Read { .. }) => {}
            Err(e) => tracing::error!("config not applied, keeping the last good one: {e}"),
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
    Some(watcher)
}
