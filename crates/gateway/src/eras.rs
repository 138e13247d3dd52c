//! The era each server definition answered in, remembered across daemon restarts, so a
//! restarted daemon reaches a handshake-era server without first waiting out a probe.
//!
//! Kept in the state dir as `eras.json`, keyed by a SHA-256 of the definition (a definition
//! holds the server's environment, which may carry secrets; its hash does not). Written
//! atomically whenever an era is learnt or forgotten. A file that cannot be read is ignored:
//! the cost is one probe per server.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use mcpx_protocol::Era;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

#[derive(Default)]
pub struct Eras {
    known: Mutex<HashMap<String, Era>>,
    file: Mutex<Option<PathBuf>>,
}

impl Eras {
    /// Remembers eras in `file` from now on, starting from what it already holds.
    pub fn keep_in(&self, file: PathBuf) {
        let stored: Map<String, Value> =
            std::fs::read(&file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default();
        let mut known = self.known.lock().expect("eras lock");
        for (key, era) in stored {
            match era.as_str() {
                Some("modern") => known.insert(key, Era::Modern),
                Some("legacy") => known.insert(key, Era::Legacy),
                _ => None,
            };
        }
        *self.file.lock().expect("eras lock") = Some(file);
    }

    pub fn get(&self, definition: &str) -> Option<Era> {
        self.known.lock().expect("eras lock").get(&key(definition)).copied()
    }

    pub fn learn(&self, definition: &str, era: Era) {
        let changed = self.known.lock().expect("eras lock").insert(key(definition), era) != Some(era);
        if changed {
            self.save();
        }
    }

    pub fn forget(&self, definition: &str) {
        if self.known.lock().expect("eras lock").remove(&key(definition)).is_some() {
            self.save();
        }
    }

    fn save(&self) {
        let Some(file) = self.file.lock().expect("eras lock").clone() else { return };
        let snapshot: Map<String, Value> = self
            .known
            .lock()
            .expect("eras lock")
            .iter()
            .map(|(k, era)| (k.clone(), Value::from(if *era == Era::Modern { "modern" } else { "legacy" })))
            .collect();
        let tmp = file.with_extension("json.tmp");
        let written =
            std::fs::write(&tmp, Value::Object(snapshot).to_string()).and_then(|()| std::fs::rename(&tmp, &file));
        if let Err(e) = written {
            tracing::warn!("cannot remember upstream eras in {}: {e}", file.display());
        }
    }
}

fn key(definition: &str) -> String {
    Sha256::digest(definition.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras_survive_in_the_file_and_name_no_definition() {
        let file = std::env::temp_dir().join(format!("mcpx-eras-{}.json", std::process::id()));
        let first = Eras::default();
        first.keep_in(file.clone());
        first.learn("command=secret-token-123", Era::Legacy);
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("secret"), "{text}");
        let second = Eras::default();
        second.keep_in(file.clone());
        assert_eq!(second.get("command=secret-token-123"), Some(Era::Legacy));
        second.forget("command=secret-token-123");
        let third = Eras::default();
        third.keep_in(file.clone());
        assert_eq!(third.get("command=secret-token-123"), None);
        std::fs::remove_file(file).unwrap();
    }
}
