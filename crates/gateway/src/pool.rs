//! The pool: `InstanceKey → Instance`. The one place that owns upstream processes.
//!
//! It starts instances lazily, never two for one key (concurrent first callers wait for
//! the same start), reuses them, replaces one that died, stops idle ones, stops a
//! per-call instance when its call ends and a session's when the session ends, caps
//! instances per server and in all (at a cap, the least recently used idle instance is
//! stopped to make room; only when every one is busy does the caller get a clear error),
//! backs off a server that keeps failing to start or crashing soon after it started,
//! and on shutdown stops every instance it ever started and waits until they are gone.

use crate::metrics::PoolCounters;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpx_upstream::{Spec, Upstream, UpstreamError};
use tokio::sync::OnceCell;
use tokio_util::task::TaskTracker;

use crate::identity::SessionKey;
use crate::listings::Listings;
use crate::scope::{InstanceKey, Owner};

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error(
        "server {server:?} already runs {limit} instances (pool.maxInstancesPerServer); wait for one to go idle or raise the limit"
    )]
    Full { server: String, limit: usize },
    #[error(
        "mcpx already runs {limit} instances in all (pool.maxInstances); wait for one to go idle or raise the limit"
    )]
    FullTotal { limit: usize },
    #[error(
        "{last_error} (server {server:?} {} {failures} times in a row; mcpx tries again in {}ms)",
        if *after_start { "exited soon after starting" } else { "failed to start" },
        retry_in.as_millis()
    )]
    BackingOff { server: String, failures: u32, retry_in: Duration, last_error: String, after_start: bool },
    #[error("mcpx is shutting down")]
    ShuttingDown,
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
}

#[derive(Clone, Default)]
pub struct Pool {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    slots: Mutex<HashMap<InstanceKey, Arc<Slot>>>,
    /// The era each server answered in last, by definition, so a restart skips the probe.
    eras: crate::eras::Eras,
    stopping: TaskTracker,
    closed: AtomicBool,
    /// Servers whose last starts failed, by definition: no new start before `next`.
    failing: Mutex<HashMap<String, Failing>>,
    /// Starts, crashes and reaps per server, for `/metrics`.
    counters: crate::metrics::PoolCounters,
}

/// A server definition that keeps failing to start, or keeps exiting on its own within
/// `STABLE_AFTER` of a start that worked (a crash loop): starts are spaced out
/// exponentially (`BACKOFF_FIRST`, doubling up to `BACKOFF_MAX`; for a crash loop from
/// its second exit on) so such a server costs one spawn per interval, never a busy loop.
/// A successful start forgets failed starts; only an instance that stays up
/// `STABLE_AFTER` forgets early exits.
#[derive(Clone, Debug)]
pub struct Failing {
    pub server: String,
    pub failures: u32,
    pub last_error: String,
    /// The last failure was an exit soon after a start that worked.
    pub after_start: bool,
    next: Instant,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// An instance that exits on its own sooner than this after it started counts as a
/// failed start; one that lives longer shows its server can run.
const STABLE_AFTER: Duration = Duration::from_secs(5);

impl Failing {
    pub fn retry_in(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }
}

struct Slot {
    key: InstanceKey,
    /// Tells one start of a key from the next.
    serial: u64,
    /// The server definition this instance was started from.
    definition: String,
    upstream: OnceCell<Upstream>,
    leases: AtomicUsize,
    last_used: Mutex<Instant>,
    started: Instant,
    retired: AtomicBool,
    /// The lists this instance answered, kept while they are fresh: this instance's own.
    listings: Listings,
    /// In a cluster, the fencing token of the lease under which this node runs the
    /// instance (a lost lease stops the instance, so it never changes).
    fence: std::sync::OnceLock<u64>,
}

/// A caller's hold on an instance. While any lease is held the instance is not reaped;
/// when the last lease on a per-call or retired instance goes, the instance is stopped.
pub struct Lease {
    pool: Arc<Inner>,
    slot: Arc<Slot>,
    /// This lease's acquire started the instance (of concurrent first callers, one does).
    started_it: bool,
}

/// One live instance, for status displays.
#[derive(Clone, Debug)]
pub struct InstanceInfo {
    pub key: InstanceKey,
    pub pid: Option<u32>,
    pub age: Duration,
    pub idle: Duration,
    pub in_use: usize,
}

impl Pool {
    /// The instance for `key`, started from `spec` if none runs. `definition` identifies
    /// the server's config: an instance started from another definition is replaced.
    /// `spec` is only called when an instance has to be started.
    pub async fn acquire(
        &self,
        key: &InstanceKey,
        definition: &str,
        spec: impl Fn() -> Result<Spec, PoolError>,
        max_per_server: usize,
        max_total: usize,
    ) -> Result<Lease, PoolError> {
        // One retry: an instance found dead is replaced once, then the error stands.
        for _ in 0..2 {
            let mut lease = self.inner.lease(key, definition, max_per_server, max_total)?;
            let mut started_it = false;
            let started = lease
                .slot
                .upstream
                // Boxed: starting an instance is a future of KiBs that every call's future
                // would otherwise carry (and copy), though only the first call starts one.
                .get_or_try_init(|| {
                    Box::pin(async {
                        self.inner.check_backoff(definition)?;
                        let spec = spec()?;
                        let hint = self.inner.eras.get(definition);
                        tracing::info!(instance = %key, "starting instance");
                        match Upstream::connect(&spec, hint).await {
                            // The server may have changed eras since (an upgrade): probe afresh once.
                            Err(e) if hint.is_some() && !matches!(e, UpstreamError::Spawn { .. }) && !e.is_auth() => {
                                tracing::info!(instance = %key, "the remembered era failed ({e}); probing again");
                                self.inner.eras.forget(definition);
                                Upstream::connect(&spec, None).await
                            }
                            outcome => outcome,
                        }
                        .map_err(PoolError::from)
                        .inspect(|upstream| {
                            started_it = true;
                            // Learnt once per start, not per lease: the key is a SHA-256.
                            self.inner.eras.learn(definition, upstream.facts().era);
                            self.inner.started(definition);
                            PoolCounters::count(&self.inner.counters.starts, &key.server);
                            self.inner.watch_early_exit(&key.server, definition, upstream.clone());
                        })
                        .inspect_err(|e| self.inner.failed(&key.server, definition, e))
                    })
                })
                .await;
            match started {
                Ok(upstream) if upstream.is_alive() => {
                    lease.started_it = started_it;
                    return Ok(lease);
                }
                Ok(_) => {
                    tracing::info!(instance = %key, "instance had exited; starting a fresh one");
                    self.inner.retire(&lease.slot);
                }
                Err(e) => return Err(e),
            }
        }
        Err(PoolError::Upstream(UpstreamError::Exited { server: key.server.clone(), status: None }))
    }

    /// The instance running at `key`, with its serial, without leasing it: for a watcher
    /// that must neither start an instance nor keep one from being reaped.
    pub fn running(&self, key: &InstanceKey) -> Option<(u64, Upstream)> {
        let slots = self.inner.slots.lock().expect("pool lock");
        let slot = slots.get(key).filter(|s| !s.retired.load(Ordering::Acquire))?;
        let upstream = slot.upstream.get().filter(|u| u.is_alive())?;
        Some((slot.serial, upstream.clone()))
    }

    /// Whether the pool has a slot for `key` (running, starting, or with calls on it).
    pub fn holds(&self, key: &InstanceKey) -> bool {
        self.inner.slots.lock().expect("pool lock").contains_key(key)
    }

    /// Takes the instance at `key` out of service: it stops once the calls holding it
    /// finish (this node no longer owns the key in its cluster).
    pub fn retire_key(&self, key: &InstanceKey) {
        let removed = self.inner.slots.lock().expect("pool lock").remove(key);
        if let Some(slot) = removed {
            self.inner.retire_removed(slot);
        }
    }

    /// Stops the instance at `key` now, whatever holds it: its calls, tasks and streams
    /// fail or end (another node of the cluster may serve the key by now).
    pub fn evict_key(&self, key: &InstanceKey) {
        let removed = self.inner.slots.lock().expect("pool lock").remove(key);
        if let Some(slot) = removed {
            slot.retired.store(true, Ordering::SeqCst);
            self.inner.stop(slot);
        }
    }

    /// Starts, crashes and reaps per server.
    pub fn counters(&self) -> &PoolCounters {
        &self.inner.counters
    }

    /// Remembers each server's era in `file` (across restarts), starting from its contents.
    pub fn remember_eras_in(&self, file: std::path::PathBuf) {
        self.inner.eras.keep_in(file);
    }

    /// Stops instances idle longer than `idle_timeout`, dead ones, and those whose server
    /// definition is no longer current (`current(server)` gives the definition in force).
    /// Returns how many it took out of service.
    pub fn reap(&self, idle_timeout: Duration, current: impl Fn(&str) -> Option<String>) -> usize {
        let stale: Vec<Arc<Slot>> = {
            let mut slots = self.inner.slots.lock().expect("pool lock");
            // A map keyed by instance keeps the room its busiest moment needed (1,000
            // sessions: 1,000 entries); give it back once most of it stands empty.
            if slots.capacity() > 64 && slots.capacity() > 4 * slots.len() {
                slots.shrink_to_fit();
            }
            slots
                .values()
                .filter(|s| {
                    let idle = s.leases.load(Ordering::Acquire) == 0
                        && s.last_used.lock().expect("slot lock").elapsed() >= idle_timeout;
                    let dead = s.upstream.get().is_some_and(|u| !u.is_alive());
                    let outdated = current(&s.key.server).as_deref() != Some(s.definition.as_str());
                    idle || dead || outdated || owner_gone(&s.key)
                })
                .cloned()
                .collect()
        };
        let count = stale.len();
        for slot in stale {
            let crashed = slot.upstream.get().is_some_and(|u| !u.is_alive());
            let counter = if crashed { &self.inner.counters.crashes } else { &self.inner.counters.reaps };
            PoolCounters::count(counter, &slot.key.server);
            tracing::info!(instance = %slot.key, "stopping an idle, exited, orphaned or reconfigured instance");
            self.inner.retire(&slot);
        }
        count
    }

    /// Takes every instance of the session `key` (one per server) out of service: each
    /// stops once the calls holding it finish, at once if none does. Returns how many it
    /// took.
    pub fn retire_session(&self, key: &SessionKey) -> usize {
        let ended: Vec<Arc<Slot>> = {
            let mut slots = self.inner.slots.lock().expect("pool lock");
            let keys: Vec<InstanceKey> =
                slots.keys().filter(|k| matches!(&k.owner, Owner::Session(s) if s == key)).cloned().collect();
            keys.iter().filter_map(|k| slots.remove(k)).collect()
        };
        let count = ended.len();
        for slot in ended {
            tracing::info!(instance = %slot.key, "stopping the instance of a session that ended");
            self.inner.retire_removed(slot);
        }
        count
    }

    /// Instances still stopping (their process groups not yet gone).
    pub fn stopping(&self) -> usize {
        self.inner.stopping.len()
    }

    /// Servers that keep failing to start (or crashing soon after, twice in a row or more),
    /// and when mcpx tries each again.
    pub fn failing(&self) -> Vec<Failing> {
        let failing = self.inner.failing.lock().expect("pool lock");
        let mut list: Vec<Failing> = failing.values().filter(|f| !f.after_start || f.failures > 1).cloned().collect();
        drop(failing);
        list.sort_by(|a, b| a.server.cmp(&b.server));
        list
    }

    pub fn instances(&self) -> Vec<InstanceInfo> {
        let slots = self.inner.slots.lock().expect("pool lock");
        let mut list: Vec<_> = slots
            .values()
            .map(|s| InstanceInfo {
                key: s.key.clone(),
                pid: s.upstream.get().and_then(Upstream::pid),
                age: s.started.elapsed(),
                idle: s.last_used.lock().expect("slot lock").elapsed(),
                in_use: s.leases.load(Ordering::Acquire),
            })
            .collect();
        list.sort_by_cached_key(|i| (i.key.server.clone(), i.key.owner.to_string()));
        list
    }

    /// Stops every instance and waits until each one's process group is gone. No new
    /// instance starts afterwards.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::Release);
        let all: Vec<_> = self.inner.slots.lock().expect("pool lock").drain().map(|(_, s)| s).collect();
        for slot in all {
            self.inner.stop(slot);
        }
        self.inner.stopping.close();
        self.inner.stopping.wait().await;
    }
}

/// A `pid` instance, or the instance of a process's own session (a CLI call or `mcpx serve`
/// that named no session), outlives its process by at most one reaper tick.
fn owner_gone(key: &InstanceKey) -> bool {
    // Pid 0: a peer the kernel could not map into our pid namespace, so no /proc entry.
    key.process().filter(|pid| *pid != 0).is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
}

impl Inner {
    fn check_backoff(&self, definition: &str) -> Result<(), PoolError> {
        match self.failing.lock().expect("pool lock").get(definition) {
            Some(f) if f.retry_in() > Duration::ZERO => Err(PoolError::BackingOff {
                server: f.server.clone(),
                failures: f.failures,
                retry_in: f.retry_in(),
                last_error: f.last_error.clone(),
                after_start: f.after_start,
            }),
            _ => Ok(()),
        }
    }

    /// A start worked: failed starts are forgotten, a crash loop only once an instance
    /// stays up (see `watch_early_exit`).
    fn started(&self, definition: &str) {
        let mut failing = self.failing.lock().expect("pool lock");
        if failing.get(definition).is_some_and(|f| !f.after_start) {
            failing.remove(definition);
        }
    }

    fn failed(&self, server: &str, definition: &str, error: &PoolError) {
        // A missing login is no fault of the server: backing off would only delay the
        // first call after the login.
        if matches!(error, PoolError::BackingOff { .. } | PoolError::ShuttingDown)
            || matches!(error, PoolError::Upstream(e) if e.is_auth())
        {
            return;
        }
        self.count_failure(server, definition, error.to_string(), false);
    }

    fn count_failure(&self, server: &str, definition: &str, error: String, after_start: bool) {
        let mut failing = self.failing.lock().expect("pool lock");
        let entry = failing.entry(definition.to_owned()).or_insert_with(|| Failing {
            server: server.to_owned(),
            failures: 0,
            last_error: String::new(),
            after_start,
            next: Instant::now(),
        });
        entry.failures += 1;
        entry.after_start = after_start;
        // One early exit may be bad luck (or a caller's doing): the next start is at once.
        // From the second in a row on, it is a crash loop, spaced out like failed starts.
        let steps = if after_start { entry.failures - 1 } else { entry.failures };
        let backoff = match steps {
            0 => Duration::ZERO,
            n => BACKOFF_FIRST.saturating_mul(1 << (n - 1).min(16)).min(BACKOFF_MAX),
        };
        entry.next = Instant::now() + backoff;
        tracing::warn!(
            server,
            failures = entry.failures,
            "{error}; next start in {}ms at the earliest",
            backoff.as_millis()
        );
        entry.last_error = error;
    }

    /// Watches a freshly started instance for `STABLE_AFTER`: exiting on its own within
    /// that time counts as a failed start of its server (so a server that starts and
    /// then crashes, again and again, is backed off like one that cannot start); staying
    /// up ends a crash loop. Stopped by mcpx meanwhile, it counts for neither.
    fn watch_early_exit(self: &Arc<Self>, server: &str, definition: &str, upstream: Upstream) {
        let (pool, server, definition) = (Arc::downgrade(self), server.to_owned(), definition.to_owned());
        let started = Instant::now();
        tokio::spawn(async move {
            let ended = tokio::time::timeout(STABLE_AFTER, upstream.ended()).await.is_ok();
            let Some(pool) = pool.upgrade() else { return };
            match (ended, upstream.crash()) {
                (true, Some(how)) => {
                    let after = started.elapsed().as_millis();
                    let error = format!("server {server:?} exited {after}ms after it started ({how})");
                    pool.count_failure(&server, &definition, error, true);
                }
                (true, None) => {}
                (false, _) => {
                    let mut failing = pool.failing.lock().expect("pool lock");
                    if failing.get(&definition).is_some_and(|f| f.after_start) {
                        tracing::info!(
                            server,
                            "an instance stayed up {}s: the crash loop is over",
                            STABLE_AFTER.as_secs()
                        );
                        failing.remove(&definition);
                    }
                }
            }
        });
    }

    fn lease(
        self: &Arc<Self>,
        key: &InstanceKey,
        definition: &str,
        max: usize,
        max_total: usize,
    ) -> Result<Lease, PoolError> {
        let mut slots = self.slots.lock().expect("pool lock");
        if self.closed.load(Ordering::Acquire) {
            return Err(PoolError::ShuttingDown);
        }
        let reusable = slots.get(key).filter(|s| {
            s.definition == definition
                && !s.retired.load(Ordering::Acquire)
                && s.upstream.get().is_none_or(Upstream::is_alive)
        });
        let slot = match reusable {
            Some(slot) => slot.clone(),
            None => {
                if let Some(old) = slots.remove(key) {
                    self.retire_removed(old);
                }
                let live = slots.keys().filter(|k| k.server == key.server).count();
                if live >= max && !self.make_room(&mut slots, Some(&key.server), "pool.maxInstancesPerServer") {
                    return Err(PoolError::Full { server: key.server.clone(), limit: max });
                }
                if slots.len() >= max_total && !self.make_room(&mut slots, None, "pool.maxInstances") {
                    return Err(PoolError::FullTotal { limit: max_total });
                }
                static SERIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let slot = Arc::new(Slot {
                    key: key.clone(),
                    serial: SERIALS.fetch_add(1, Ordering::Relaxed),
                    definition: definition.to_owned(),
                    upstream: OnceCell::new(),
                    leases: AtomicUsize::new(0),
                    last_used: Mutex::new(Instant::now()),
                    started: Instant::now(),
                    retired: AtomicBool::new(false),
                    listings: Listings::default(),
                    fence: Default::default(),
                });
                slots.insert(key.clone(), slot.clone());
                slot
            }
        };
        slot.leases.fetch_add(1, Ordering::AcqRel);
        Ok(Lease { pool: self.clone(), slot, started_it: false })
    }

    /// At a cap: stops the least recently used instance (of `server`, or of any server)
    /// that nobody is using, so a new one can start. False when every one is busy.
    fn make_room(&self, slots: &mut HashMap<InstanceKey, Arc<Slot>>, server: Option<&str>, setting: &str) -> bool {
        let idle = slots
            .values()
            .filter(|s| server.is_none_or(|server| s.key.server == server))
            .filter(|s| s.leases.load(Ordering::Acquire) == 0 && s.upstream.get().is_some())
            .min_by_key(|s| *s.last_used.lock().expect("slot lock"))
            .cloned();
        let Some(slot) = idle else { return false };
        tracing::info!(instance = %slot.key, "stopping the least recently used idle instance to make room ({setting})");
        slots.remove(&slot.key);
        self.retire_removed(slot);
        true
    }

    /// Takes a slot out of service: it leaves the map now and stops once unused.
    fn retire(&self, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().expect("pool lock");
        if slots.get(&slot.key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(&slot.key);
        }
        drop(slots);
        self.retire_removed(slot.clone());
    }

    fn retire_removed(&self, slot: Arc<Slot>) {
        // SeqCst here and in `Lease::drop`: of a retire and a last lease going at once, at
        // least one must see the other, or a slot out of the map would never stop.
        slot.retired.store(true, Ordering::SeqCst);
        if slot.leases.load(Ordering::SeqCst) == 0 {
            self.stop(slot);
        }
    }

    fn stop(&self, slot: Arc<Slot>) {
        if let Some(upstream) = slot.upstream.get().cloned() {
            self.stopping.spawn(async move { upstream.shutdown().await });
        }
    }
}

impl Lease {
    pub fn upstream(&self) -> &Upstream {
        self.slot.upstream.get().expect("a lease is handed out only once its instance started")
    }

    pub fn key(&self) -> &InstanceKey {
        &self.slot.key
    }

    /// Which start of its key this instance is (see [`Pool::running`]).
    pub fn serial(&self) -> u64 {
        self.slot.serial
    }

    /// The lists this instance answered, kept while they are fresh.
    pub(crate) fn listings(&self) -> &Listings {
        &self.slot.listings
    }

    /// Whether acquiring this lease started its instance.
    pub fn started_it(&self) -> bool {
        self.started_it
    }

    /// Records the fencing token of the cluster lease this instance runs under (the
    /// first one recorded stands).
    pub fn started_under(&self, fence: u64) {
        let _ = self.slot.fence.set(fence);
    }

    /// The fencing token of the cluster lease this instance runs under, in a cluster.
    pub fn fence(&self) -> Option<u64> {
        self.slot.fence.get().copied()
    }

    /// Takes this lease's instance out of service (if it still serves its key): it stops
    /// once the calls holding it finish.
    pub fn retire(&self) {
        let mut slots = self.pool.slots.lock().expect("pool lock");
        if slots.get(&self.slot.key).is_some_and(|s| Arc::ptr_eq(s, &self.slot)) {
            let slot = slots.remove(&self.slot.key).expect("just found");
            drop(slots);
            self.pool.retire_removed(slot);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self.slot.last_used.lock().expect("slot lock") = Instant::now();
        let remaining = self.slot.leases.fetch_sub(1, Ordering::SeqCst) - 1;
        if remaining > 0 {
            return;
        }
        let never_started = self.slot.upstream.get().is_none();
        if self.slot.retired.load(Ordering::SeqCst) {
            self.pool.stop(self.slot.clone());
        } else if self.slot.key.is_per_call() || never_started {
            self.pool.retire(&self.slot);
        }
    }
}
