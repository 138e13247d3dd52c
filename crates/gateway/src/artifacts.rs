//! Artifacts: what `mcpx_exec` scripts keep with `artifact(name, data)`, owned by the
//! session that made them and reachable as `mcpx://artifacts/<id>` by that session only.
//!
//! Kept under the state dir, one private folder per session (named by a hash of the
//! session, which may be any string), each artifact as its bytes plus a small JSON record.
//! The id is a hash of the content, so storing the same bytes twice keeps one copy. A
//! session's artifacts never count against, or show up for, another session. Blocking
//! file I/O: call from a blocking thread.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use mcpx_protocol::RpcError;

use crate::config::ArtifactConfig;
use crate::{Gateway, Identity};

/// Where every artifact URI starts.
pub const PREFIX: &str = "mcpx://artifacts/";

#[derive(Clone, Debug, PartialEq)]
pub struct Artifact {
    pub id: String,
    pub name: String,
    pub mime_type: String,
    pub size: u64,
    pub created: SystemTime,
}

impl Artifact {
    pub fn uri(&self) -> String {
        format!("{PREFIX}{}", self.id)
    }

    /// The artifact as a `resources/list` entry (and a `resource_link` without its type).
    pub fn listing(&self) -> Value {
        json!({ "uri": self.uri(), "name": self.name, "mimeType": self.mime_type, "size": self.size })
    }

    fn record(&self) -> Value {
        let created = self.created.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        json!({ "name": self.name, "mimeType": self.mime_type, "size": self.size, "created": created })
    }

    fn from_record(id: &str, record: &Value) -> Option<Artifact> {
        Some(Artifact {
            id: id.to_owned(),
            name: record.get("name")?.as_str()?.to_owned(),
            mime_type: record.get("mimeType")?.as_str()?.to_owned(),
            size: record.get("size")?.as_u64()?,
            created: SystemTime::UNIX_EPOCH + Duration::from_secs(record.get("created")?.as_u64()?),
        })
    }

    fn expired(&self, max_age: Duration) -> bool {
        self.created.elapsed().is_ok_and(|age| age > max_age)
    }
}

/// The id in an artifact URI, if `uri` is one (and the id could be one of ours).
pub fn id_of(uri: &str) -> Option<&str> {
    uri.strip_prefix(PREFIX).filter(|id| is_id(id))
}

/// Whether `id` could name one of ours: 32 lowercase hex digits (so never a path).
fn is_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

pub struct Store {
    root: PathBuf,
}

impl Store {
    pub fn new(root: PathBuf) -> Store {
        Store { root }
    }

    /// Keeps `data` for `session`; refused past the session's quota.
    pub fn put(&self, session: &str, name: &str, mime_type: &str, data: &[u8], limits: &ArtifactConfig) -> Result<Artifact, String> {
        let dir = self.session_dir(session);
        let digest = Sha256::digest(data);
        let id: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let kept: Vec<Artifact> = self.list(session, limits.max_age);
        let used: u64 = kept.iter().filter(|a| a.id != id).map(|a| a.size).sum();
        if used + data.len() as u64 > limits.quota_bytes {
            return Err(format!(
                "artifact {name:?} ({} bytes) would take this session past its quota: {used} of {} bytes are in use (setting artifacts.quotaBytes)",
                data.len(),
                limits.quota_bytes
            ));
        }
        // Whole seconds, as the record keeps them.
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        let created = SystemTime::UNIX_EPOCH + Duration::from_secs(now);
        let artifact = Artifact { id, name: name.to_owned(), mime_type: mime_type.to_owned(), size: data.len() as u64, created };
        private_dir(&self.root).and_then(|_| private_dir(&dir)).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        write_private(&dir, &artifact.id, data)
            .and_then(|_| write_private(&dir, &format!("{}.json", artifact.id), artifact.record().to_string().as_bytes()))
            .map_err(|e| format!("cannot store artifact {name:?} in {}: {e}", dir.display()))?;
        Ok(artifact)
    }

    /// The session's artifacts, oldest first.
    pub fn list(&self, session: &str, max_age: Duration) -> Vec<Artifact> {
        let Ok(entries) = fs::read_dir(self.session_dir(session)) else { return Vec::new() };
        let mut found: Vec<Artifact> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_owned))
            .filter_map(|id| self.record(session, &id))
            .filter(|a| !a.expired(max_age))
            .collect();
        found.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
        found
    }

    /// One of the session's artifacts with its bytes; `None` for another session's.
    pub fn get(&self, session: &str, id: &str, max_age: Duration) -> Option<(Artifact, Vec<u8>)> {
        let artifact = self.record(session, id).filter(|a| !a.expired(max_age))?;
        let data = fs::read(self.session_dir(session).join(id)).ok()?;
        Some((artifact, data))
    }

    /// Deletes one of the session's artifacts; false when it had none by that id.
    pub fn remove(&self, session: &str, id: &str) -> bool {
        let dir = self.session_dir(session);
        let found = fs::remove_file(dir.join(format!("{id}.json"))).is_ok();
        let _ = fs::remove_file(dir.join(id));
        found
    }

    /// Deletes every artifact older than `max_age`, in every session.
    pub fn sweep(&self, max_age: Duration) {
        let Ok(sessions) = fs::read_dir(&self.root) else { return };
        for dir in sessions.filter_map(Result::ok).map(|e| e.path()) {
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for record in entries.filter_map(Result::ok).map(|e| e.path()) {
                let Some(id) = record.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".json")) else { continue };
                let artifact = fs::read(&record).ok().and_then(|b| serde_json::from_slice(&b).ok()).and_then(|r| Artifact::from_record(id, &r));
                if artifact.is_none_or(|a| a.expired(max_age)) {
                    let _ = fs::remove_file(dir.join(id));
                    let _ = fs::remove_file(&record);
                }
            }
            let _ = fs::remove_dir(&dir); // only succeeds once empty
        }
    }

    fn record(&self, session: &str, id: &str) -> Option<Artifact> {
        if !is_id(id) {
            return None;
        }
        let bytes = fs::read(self.session_dir(session).join(format!("{id}.json"))).ok()?;
        Artifact::from_record(id, &serde_json::from_slice(&bytes).ok()?)
    }

    fn session_dir(&self, session: &str) -> PathBuf {
        let digest = Sha256::digest(session.as_bytes());
        self.root.join(digest[..16].iter().map(|b| format!("{b:02x}")).collect::<String>())
    }
}

impl Gateway {
    /// Keeps artifacts under `dir` from now on; without it, `artifact()` fails.
    pub fn keep_artifacts_in(&self, dir: PathBuf) {
        let _ = self.artifacts.set(std::sync::Arc::new(Store::new(dir)));
    }

    pub(crate) fn keeps_artifacts(&self) -> bool {
        self.artifacts.get().is_some()
    }

    /// Stores an artifact for the caller's session.
    pub(crate) async fn keep_artifact(&self, identity: &Identity, name: &str, mime_type: &str, data: Vec<u8>) -> Result<Artifact, RpcError> {
        let (store, session) = self.artifact_store(identity)?;
        let limits = self.settings.config().artifacts.clone();
        let (name, mime_type) = (name.to_owned(), mime_type.to_owned());
        blocking(move || store.put(&session, &name, &mime_type, &data, &limits)).await?.map_err(RpcError::invalid_params)
    }

    /// The caller's artifacts; none for a caller with no session.
    pub async fn artifacts_of(&self, identity: &Identity) -> Vec<Artifact> {
        let Ok((store, session)) = self.artifact_store(identity) else { return Vec::new() };
        let max_age = self.settings.config().artifacts.max_age;
        blocking(move || store.list(&session, max_age)).await.unwrap_or_default()
    }

    /// One of the caller's artifacts with its bytes; `None` when the caller has none by that id.
    pub async fn artifact(&self, identity: &Identity, id: &str) -> Option<(Artifact, Vec<u8>)> {
        let (store, session) = self.artifact_store(identity).ok()?;
        let (max_age, id) = (self.settings.config().artifacts.max_age, id.to_owned());
        blocking(move || store.get(&session, &id, max_age)).await.ok().flatten()
    }

    /// Deletes one of the caller's artifacts; false when it had none by that id.
    pub async fn remove_artifact(&self, identity: &Identity, id: &str) -> bool {
        let Ok((store, session)) = self.artifact_store(identity) else { return false };
        let id = id.to_owned();
        blocking(move || store.remove(&session, &id)).await.unwrap_or(false)
    }

    /// Deletes expired artifacts (the reaper calls this now and then).
    pub(crate) fn sweep_artifacts(&self) {
        if let Some(store) = self.artifacts.get().cloned() {
            let max_age = self.settings.config().artifacts.max_age;
            tokio::task::spawn_blocking(move || store.sweep(max_age));
        }
    }

    fn artifact_store(&self, identity: &Identity) -> Result<(std::sync::Arc<Store>, String), RpcError> {
        let store = self.artifacts.get().cloned().ok_or_else(|| RpcError::internal("this mcpx keeps no artifacts (it has no state dir)"))?;
        let session = identity.session_key().ok_or_else(|| {
            RpcError::invalid_params(
                "artifacts belong to a session and this caller has none: name one in _meta (see transport.sessionMetaKeys) or use a stdio or legacy HTTP session",
            )
        })?;
        Ok((store, session))
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, RpcError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| RpcError::internal(format!("artifact store: {e}")))
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// Writes a file readable by its owner only, atomically (a reader sees all or nothing);
/// a write that fails (a full disk) leaves nothing behind.
fn write_private(dir: &Path, name: &str, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = dir.join(format!(".{name}.{}", std::process::id()));
    let written = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| file.write_all(data).and_then(|_| file.sync_data()))
        .and_then(|_| fs::rename(&temporary, dir.join(name)));
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (Store, PathBuf) {
        let root = std::env::temp_dir().join(format!("mcpx-artifacts-{}", crate::context::new_call_id()));
        (Store::new(root.clone()), root)
    }

    #[test]
    fn a_session_sees_only_its_own_artifacts() {
        let (store, root) = store();
        let limits = ArtifactConfig::default();
        let a = store.put("alice", "notes.txt", "text/plain", b"hello", &limits).unwrap();
        assert!(id_of(&a.uri()).is_some());
        assert_eq!(store.list("alice", limits.max_age), vec![a.clone()]);
        assert!(store.list("bob", limits.max_age).is_empty());
        assert_eq!(store.get("alice", &a.id, limits.max_age).unwrap().1, b"hello");
        assert!(store.get("bob", &a.id, limits.max_age).is_none());
        assert!(!store.remove("bob", &a.id));
        assert!(store.remove("alice", &a.id));
        assert!(store.list("alice", limits.max_age).is_empty());
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn the_quota_counts_one_session_and_old_artifacts_go() {
        let (store, root) = store();
        let limits = ArtifactConfig { quota_bytes: 10, max_age: Duration::from_secs(3600) };
        store.put("alice", "a", "text/plain", b"123456", &limits).unwrap();
        let refused = store.put("alice", "b", "text/plain", b"abcdef", &limits).unwrap_err();
        assert!(refused.contains("artifacts.quotaBytes"), "{refused}");
        store.put("bob", "b", "text/plain", b"abcdef", &limits).unwrap();
        // Records keep whole seconds, so every artifact is older than zero.
        store.sweep(Duration::ZERO);
        assert!(store.list("alice", Duration::from_secs(3600)).is_empty());
        assert!(store.list("bob", Duration::from_secs(3600)).is_empty());
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn only_our_ids_are_artifact_uris() {
        assert!(id_of("mcpx://artifacts/0123456789abcdef0123456789abcdef").is_some());
        assert!(id_of("mcpx://artifacts/../../etc/passwd").is_none());
        assert!(id_of("mcpx://artifacts/0123456789ABCDEF0123456789ABCDEF").is_none());
    }
}
