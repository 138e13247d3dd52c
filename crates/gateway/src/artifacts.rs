//! Artifacts: what `mcpx_exec` scripts keep with `artifact(name, data)`, owned by the
//! session that made them and reachable as `mcpx://artifacts/<id>` by that session only.
//!
//! Kept under the state dir, one private folder per session (named by a hash of the
//! session, which may be any string), each artifact as its bytes plus a small JSON record.
//! The id is a hash of the content, so storing the same bytes twice keeps one copy. A
//! session's artifacts never count against, or show up for, another session. Blocking
//! file I/O: call from a blocking thread.
//!
//! In a cluster they are kept in its Redis instead (`shared`), under a digest of the
//! session: kept through one node, listed and read through any, and the quota counts the
//! session's artifacts on every node.
//!
//! An id comes from callers (a URI, `/v1/artifacts/{id}`): the store checks it on every
//! operation and never makes a path of it, and it reaches files only relative to folders
//! it opened itself without following links, so no id and no planted link can reach a
//! file outside the store.

use std::ffi::{CStr, CString};
use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::Error;

use crate::config::ArtifactConfig;
use crate::shared::Kept;
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

    /// Keeps `data` for `session`; refused past the session's quota, which counts every
    /// byte the artifact keeps on disk: its data and its record (name and media type).
    pub fn put(
        &self,
        session: &str,
        name: &str,
        mime_type: &str,
        data: &[u8],
        limits: &ArtifactConfig,
    ) -> Result<Artifact, String> {
        let artifact = Artifact::new(name, mime_type, data);
        let record = artifact.record().to_string();
        let needs = artifact.size + record.len() as u64;
        let kept: Vec<Artifact> = self.list(session, limits.max_age);
        let used: u64 = kept.iter().filter(|a| a.id != artifact.id).map(Artifact::footprint).sum();
        if used + needs > limits.quota_bytes {
            return Err(over_quota(name, needs, used, limits.quota_bytes));
        }
        let shown = self.root.join(session_folder(session));
        let dir = Dir::root(&self.root, true)
            .and_then(|root| root.child(&session_folder(session), true))
            .map_err(|e| format!("cannot create {}: {e}", shown.display()))?;
        dir.write_private(&artifact.id, data)
            .and_then(|_| dir.write_private(&format!("{}.json", artifact.id), record.as_bytes()))
            .map_err(|e| format!("cannot store artifact {name:?} in {}: {e}", shown.display()))?;
        Ok(artifact)
    }

    /// The session's artifacts, oldest first.
    pub fn list(&self, session: &str, max_age: Duration) -> Vec<Artifact> {
        let Some(dir) = self.session_dir(session) else { return Vec::new() };
        let mut found: Vec<Artifact> = dir
            .names()
            .iter()
            .filter_map(|name| name.strip_suffix(".json"))
            .filter_map(|id| record(&dir, id))
            .filter(|a| !a.expired(max_age))
            .collect();
        found.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
        found
    }

    /// One of the session's artifacts with its bytes; `None` for another session's, or
    /// for an id that is not one of ours.
    pub fn get(&self, session: &str, id: &str, max_age: Duration) -> Option<(Artifact, Vec<u8>)> {
        if !is_id(id) {
            return None;
        }
        let dir = self.session_dir(session)?;
        let artifact = record(&dir, id).filter(|a| !a.expired(max_age))?;
        let data = dir.read(id).ok()?;
        Some((artifact, data))
    }

    /// Deletes one of the session's artifacts; false when it had none by that id. An id
    /// that is not one of ours touches nothing, and the data goes only with its record.
    pub fn remove(&self, session: &str, id: &str) -> bool {
        if !is_id(id) {
            return false;
        }
        let Some(dir) = self.session_dir(session) else { return false };
        if dir.unlink(&format!("{id}.json")).is_err() {
            return false;
        }
        let _ = dir.unlink(id);
        true
    }

    /// Deletes every artifact older than `max_age`, in every session.
    pub fn sweep(&self, max_age: Duration) {
        let Ok(root) = Dir::root(&self.root, false) else { return };
        for folder in root.names().into_iter().filter(|n| is_id(n)) {
            let Ok(dir) = root.child(&folder, false) else { continue };
            for id in dir.names().iter().filter_map(|n| n.strip_suffix(".json")).filter(|id| is_id(id)) {
                if record(&dir, id).is_none_or(|a| a.expired(max_age)) {
                    let _ = dir.unlink(id);
                    let _ = dir.unlink(&format!("{id}.json"));
                }
            }
            drop(dir);
            root.remove_dir(&folder); // only succeeds once empty
        }
    }

    /// The session's folder, opened without following a link; `None` when it has none.
    fn session_dir(&self, session: &str) -> Option<Dir> {
        Dir::root(&self.root, false).ok()?.child(&session_folder(session), false).ok()
    }
}

impl Artifact {
    /// A new artifact of `data`: its id is a digest of the bytes, its time now.
    fn new(name: &str, mime_type: &str, data: &[u8]) -> Artifact {
        let digest = Sha256::digest(data);
        let id: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        // Whole seconds, as the record keeps them.
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        let created = SystemTime::UNIX_EPOCH + Duration::from_secs(now);
        Artifact { id, name: name.to_owned(), mime_type: mime_type.to_owned(), size: data.len() as u64, created }
    }

    /// The bytes the artifact keeps on disk, as the quota counts them.
    fn footprint(&self) -> u64 {
        self.size + self.record().to_string().len() as u64
    }
}

fn over_quota(name: &str, needs: u64, used: u64, quota: u64) -> String {
    format!(
        "artifact {name:?} ({needs} bytes with its name and media type) would take this session past its quota: {used} of {quota} bytes are in use (setting artifacts.quotaBytes)"
    )
}

/// The record of artifact `id` in `dir`, if `id` is one of ours and the record is sound.
fn record(dir: &Dir, id: &str) -> Option<Artifact> {
    if !is_id(id) {
        return None;
    }
    let bytes = dir.read(&format!("{id}.json")).ok()?;
    Artifact::from_record(id, &serde_json::from_slice(&bytes).ok()?)
}

/// A session's folder name: a hash of the session, which may be any string.
fn session_folder(session: &str) -> String {
    let digest = Sha256::digest(session.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// An open directory of the store. Everything in it is reached relative to the open
/// descriptor, by a single name component, never following a symbolic link: a link
/// planted in place of the store, a session folder or an artifact file is refused, not
/// followed somewhere else.
struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// The store's root: a directory this user owns that no one else may write to
    /// (created private when `create`).
    fn root(path: &Path, create: bool) -> std::io::Result<Dir> {
        if create {
            private_dir(path)?;
        }
        let dir = Dir { fd: open_dir(rustix::fs::CWD, &c_path(path.as_os_str().as_bytes())?)? };
        let meta = rustix::fs::fstat(&dir.fd)?;
        if meta.st_uid != rustix::process::geteuid().as_raw() || meta.st_mode & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("{} is not a private directory of this user", path.display()),
            ));
        }
        Ok(dir)
    }

    /// The folder `name` in this one (created private when `create`).
    fn child(&self, name: &str, create: bool) -> std::io::Result<Dir> {
        let name = component(name)?;
        if create {
            match rustix::fs::mkdirat(&self.fd, &name, Mode::RWXU) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Dir { fd: open_dir(&self.fd, &name)? })
    }

    /// The whole of the regular file `name`.
    fn read(&self, name: &str) -> std::io::Result<Vec<u8>> {
        let name = component(name)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let mut file = fs::File::from(rustix::fs::openat(&self.fd, &name, flags, Mode::empty())?);
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a regular file"));
        }
        let mut data = Vec::new();
        file.read_to_end(&mut data)?;
        Ok(data)
    }

    /// Writes a file readable by its owner only, atomically (a reader sees all or
    /// nothing); a write that fails (a full disk) leaves nothing behind.
    fn write_private(&self, name: &str, data: &[u8]) -> std::io::Result<()> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let target = component(name)?;
        let temporary = component(&format!(".{name}.{}.{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)))?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut file = fs::File::from(rustix::fs::openat(&self.fd, &temporary, flags, Mode::RUSR | Mode::WUSR)?);
        let written = file
            .write_all(data)
            .and_then(|_| file.sync_data())
            .and_then(|_| Ok(rustix::fs::renameat(&self.fd, &temporary, &self.fd, &target)?));
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, &temporary, AtFlags::empty());
        }
        written
    }

    /// Removes the file `name` (a link itself, never what it points at).
    fn unlink(&self, name: &str) -> std::io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, &component(name)?, AtFlags::empty())?)
    }

    /// Removes the folder `name` if it is empty.
    fn remove_dir(&self, name: &str) {
        if let Ok(name) = component(name) {
            let _ = rustix::fs::unlinkat(&self.fd, &name, AtFlags::REMOVEDIR);
        }
    }

    /// The names in this folder (those that are UTF-8; ours all are).
    fn names(&self) -> Vec<String> {
        // A listing reads through a descriptor of its own: a copy of this one, from its start.
        let Some(mut entries) = self.fd.try_clone().ok().and_then(|copy| rustix::fs::Dir::new(copy).ok()) else {
            return Vec::new();
        };
        entries.rewind();
        entries
            .map_while(Result::ok)
            .filter_map(|entry| entry.file_name().to_str().ok().map(str::to_owned))
            .filter(|name| name != "." && name != "..")
            .collect()
    }
}

/// Opens the directory `name` relative to `at` without following a link.
fn open_dir(at: impl AsFd, name: &CStr) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(at, name, flags, Mode::empty())?)
}

/// `name` as one path component: never empty, `.`, `..`, or holding a `/` or a NUL.
fn component(name: &str) -> std::io::Result<CString> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{name:?} is not a file name")));
    }
    c_path(name.as_bytes())
}

fn c_path(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in a file name"))
}

impl Gateway {
    /// Keeps artifacts under `dir` from now on; without it, `artifact()` fails.
    pub fn keep_artifacts_in(&self, dir: PathBuf) {
        let _ = self.artifacts.set(std::sync::Arc::new(Store::new(dir)));
    }

    pub(crate) fn keeps_artifacts(&self) -> bool {
        self.artifacts.get().is_some() || self.instances.cluster.get().is_some()
    }

    /// Stores an artifact for the caller's session.
    pub(crate) async fn keep_artifact(
        &self,
        identity: &Identity,
        name: &str,
        mime_type: &str,
        data: Vec<u8>,
    ) -> Result<Artifact, Error> {
        let limits = self.settings.config().artifacts.clone();
        if let Some(cluster) = self.instances.cluster.get() {
            let session = artifact_session(identity)?;
            let artifact = Artifact::new(name, mime_type, &data);
            let (record, needs) = (artifact.record().to_string(), artifact.footprint());
            let kept = cluster
                .put_artifact(&session, &artifact.id, &record, &data, needs, limits.quota_bytes, limits.max_age)
                .await
                .map_err(|e| Error::internal(e.to_string()))?;
            return match kept {
                Kept::Yes => Ok(artifact),
                Kept::OverQuota(used) => Err(Error::params(over_quota(name, needs, used, limits.quota_bytes))),
            };
        }
        let (store, session) = self.artifact_store(identity)?;
        let (name, mime_type) = (name.to_owned(), mime_type.to_owned());
        blocking(move || store.put(&session, &name, &mime_type, &data, &limits)).await?.map_err(Error::params)
    }

    /// The caller's artifacts, oldest first; none for a caller with no session.
    pub async fn artifacts_of(&self, identity: &Identity) -> Vec<Artifact> {
        let max_age = self.settings.config().artifacts.max_age;
        if let Some(cluster) = self.instances.cluster.get() {
            let Ok(session) = artifact_session(identity) else { return Vec::new() };
            let records = match cluster.artifact_records(&session).await {
                Ok(records) => records,
                Err(e) => {
                    tracing::warn!("cannot list the session's artifacts: {e}");
                    return Vec::new();
                }
            };
            let mut found: Vec<Artifact> = records
                .iter()
                .filter(|(id, _)| is_id(id))
                .filter_map(|(id, record)| Artifact::from_record(id, &serde_json::from_str(record).ok()?))
                .filter(|a| !a.expired(max_age))
                .collect();
            found.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
            return found;
        }
        let Ok((store, session)) = self.artifact_store(identity) else { return Vec::new() };
        blocking(move || store.list(&session, max_age)).await.unwrap_or_default()
    }

    /// One of the caller's artifacts with its bytes; `None` when the caller has none by that id.
    pub async fn artifact(&self, identity: &Identity, id: &str) -> Option<(Artifact, Vec<u8>)> {
        let max_age = self.settings.config().artifacts.max_age;
        if let Some(cluster) = self.instances.cluster.get() {
            let session = artifact_session(identity).ok().filter(|_| is_id(id))?;
            let (record, data) = match cluster.artifact(&session, id).await {
                Ok(found) => found?,
                Err(e) => {
                    tracing::warn!("cannot read an artifact: {e}");
                    return None;
                }
            };
            let artifact = Artifact::from_record(id, &serde_json::from_str(&record).ok()?)?;
            return (!artifact.expired(max_age)).then_some((artifact, data));
        }
        let (store, session) = self.artifact_store(identity).ok()?;
        let id = id.to_owned();
        blocking(move || store.get(&session, &id, max_age)).await.ok().flatten()
    }

    /// Deletes one of the caller's artifacts; false when it had none by that id.
    pub async fn remove_artifact(&self, identity: &Identity, id: &str) -> bool {
        if let Some(cluster) = self.instances.cluster.get() {
            let Some(session) = artifact_session(identity).ok().filter(|_| is_id(id)) else { return false };
            return cluster.remove_artifact(&session, id).await.unwrap_or(false);
        }
        let Ok((store, session)) = self.artifact_store(identity) else { return false };
        let id = id.to_owned();
        blocking(move || store.remove(&session, &id)).await.unwrap_or(false)
    }

    /// Deletes expired artifacts (the reaper calls this now and then). In a cluster Redis
    /// expires them.
    pub(crate) fn sweep_artifacts(&self) {
        if let Some(store) = self.artifacts.get().cloned() {
            let max_age = self.settings.config().artifacts.max_age;
            tokio::task::spawn_blocking(move || store.sweep(max_age));
        }
    }

    fn artifact_store(&self, identity: &Identity) -> Result<(std::sync::Arc<Store>, String), Error> {
        let store = self
            .artifacts
            .get()
            .cloned()
            .ok_or_else(|| Error::internal("this mcpx keeps no artifacts (it has no state dir)"))?;
        Ok((store, artifact_session(identity)?))
    }
}

/// The session whose artifacts a caller's are.
fn artifact_session(identity: &Identity) -> Result<String, Error> {
    identity.session_key().map(|key| key.to_string()).ok_or_else(|| {
        Error::params(
            "artifacts belong to a session and this caller has none: name one in _meta (see transport.sessionMetaKeys) or use a stdio or legacy HTTP session",
        )
    })
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    tokio::task::spawn_blocking(work).await.map_err(|e| Error::internal(format!("artifact store: {e}")))
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
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
        // Room for one small artifact with its record, not two.
        let limits = ArtifactConfig { quota_bytes: 100, max_age: Duration::from_secs(3600) };
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
    fn an_id_that_is_not_ours_reaches_no_file_outside_the_store() {
        let (store, root) = store();
        let limits = ArtifactConfig::default();
        let a = store.put("alice", "notes.txt", "text/plain", b"hello", &limits).unwrap();
        let outside = root.with_extension("outside");
        fs::write(&outside, b"precious").unwrap();
        let folder = root.join(session_folder("alice"));
        let beside = folder.join("0123456789abcdef0123456789abcdef");
        fs::write(&beside, b"no record beside me").unwrap();
        let absolute = outside.display().to_string();
        let climbing = format!("../../{}", outside.file_name().unwrap().to_str().unwrap());
        for id in [absolute.as_str(), climbing.as_str(), "..", ".", "", "a/b", "0123456789abcdef0123456789abcdef"] {
            assert!(!store.remove("alice", id), "{id:?} named an artifact");
            assert!(store.get("alice", id, limits.max_age).is_none(), "{id:?} read a file");
        }
        assert_eq!(fs::read(&outside).unwrap(), b"precious", "a file outside the store was touched");
        assert!(beside.exists(), "a file with no record was deleted while the store said it had none");
        assert!(store.remove("alice", &a.id));
        let _ = fs::remove_file(outside);
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn links_planted_in_the_store_are_never_followed() {
        let (store, root) = store();
        let limits = ArtifactConfig::default();
        let a = store.put("alice", "notes.txt", "text/plain", b"hello", &limits).unwrap();
        let elsewhere = root.with_extension("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::write(elsewhere.join(format!("{}.json", a.id)), a.record().to_string()).unwrap();
        fs::write(elsewhere.join(&a.id), b"secret").unwrap();
        // An artifact file replaced by a link to a file elsewhere is not read through.
        let folder = root.join(session_folder("alice"));
        fs::remove_file(folder.join(&a.id)).unwrap();
        std::os::unix::fs::symlink(elsewhere.join(&a.id), folder.join(&a.id)).unwrap();
        assert!(store.get("alice", &a.id, limits.max_age).is_none(), "read through a linked artifact file");
        // A session folder replaced by a link: nothing there is listed, read or deleted.
        fs::remove_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &folder).unwrap();
        assert!(store.list("alice", limits.max_age).is_empty());
        assert!(store.get("alice", &a.id, limits.max_age).is_none());
        assert!(!store.remove("alice", &a.id));
        assert!(
            store.put("alice", "more.txt", "text/plain", b"more", &limits).is_err(),
            "stored through a linked folder"
        );
        store.sweep(Duration::ZERO);
        assert!(
            elsewhere.join(&a.id).exists() && elsewhere.join(format!("{}.json", a.id)).exists(),
            "deleted through a link"
        );
        // The store's root replaced by a link.
        fs::remove_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &root).unwrap();
        assert!(store.put("bob", "b.txt", "text/plain", b"b", &limits).is_err(), "stored through a linked root");
        assert!(store.list("bob", limits.max_age).is_empty());
        let _ = fs::remove_file(&root);
        let _ = fs::remove_dir_all(elsewhere);
    }

    #[test]
    fn what_is_kept_is_private_and_a_root_others_may_write_to_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let (store, root) = store();
        let limits = ArtifactConfig::default();
        let a = store.put("alice", "notes.txt", "text/plain", b"hello", &limits).unwrap();
        let mode = |path: &Path| fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777;
        let folder = root.join(session_folder("alice"));
        assert_eq!(mode(&folder), 0o700, "a session folder others may enter");
        assert_eq!(mode(&folder.join(&a.id)), 0o600, "an artifact others may read");
        assert_eq!(mode(&folder.join(format!("{}.json", a.id))), 0o600, "a record others may read");
        let mut names = Dir::root(&root, false).unwrap().child(&session_folder("alice"), false).unwrap().names();
        names.sort();
        assert_eq!(names, vec![a.id.clone(), format!("{}.json", a.id)], "a temporary file was left behind");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(store.put("alice", "more.txt", "text/plain", b"more", &limits).is_err(), "stored in a shared root");
        assert!(store.list("alice", limits.max_age).is_empty(), "listed from a shared root");
        assert!(store.get("alice", &a.id, limits.max_age).is_none(), "read from a shared root");
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn the_quota_counts_names_and_media_types() {
        let (store, root) = store();
        let limits = ArtifactConfig { quota_bytes: 4096, max_age: Duration::from_secs(3600) };
        let long = "n".repeat(3000);
        store.put("alice", &long, "text/plain", b"1", &limits).unwrap();
        let refused = store.put("alice", &long, "text/plain", b"2", &limits).unwrap_err();
        assert!(refused.contains("artifacts.quotaBytes"), "{refused}");
        let refused = store.put("bob", "b", &"m".repeat(5000), b"3", &limits).unwrap_err();
        assert!(refused.contains("artifacts.quotaBytes"), "{refused}");
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn only_our_ids_are_artifact_uris() {
        assert!(id_of("mcpx://artifacts/0123456789abcdef0123456789abcdef").is_some());
        assert!(id_of("mcpx://artifacts/../../etc/passwd").is_none());
        assert!(id_of("mcpx://artifacts/0123456789ABCDEF0123456789ABCDEF").is_none());
    }
}
