//! The mcpx core: from an admitted request to the upstream instance that answers it.
//!
//! A front end hands the [`Gateway`] a [`CallContext`] (who is asking, in which revision)
//! and a method with its params; the gateway picks the instance from the server's scope
//! and the caller's identity, talks to it through the [`Pool`], and returns the result
//! unshaped: the front end shapes it for the caller's revision. Nothing here knows about
//! HTTP or stdio framing. `pipeline` is the request path in order, in one place.

mod admission;
mod artifacts;
mod ask;
mod asking;
pub mod cluster;
pub mod config;
pub mod context;
mod eras;
pub mod error;
pub mod exec;
mod held;
pub mod identity;
mod instances;
pub mod invocation;
pub mod journal;
mod listings;
mod login;
pub mod memory;
pub mod metrics;
pub mod naming;
mod otlp;
pub mod outbox;
mod page;
mod pipeline;
mod placement;
pub mod places;
pub mod policy;
pub mod pool;
mod prompts;
pub mod provenance;
mod redact;
mod resources;
mod roots;
pub mod scope;
mod search;
pub mod settings;
mod shared;
mod task_runner;
mod tasks;
pub mod tools;
pub mod traces;
pub mod uri;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use mcpx_protocol::shape::Cacheability;
use mcpx_protocol::{RpcError, meta};
use serde_json::{Value, json};

/// The names of mcpx's own tools: answered in `tools` and `exec`, named in the journal.
pub const SEARCH: &str = "mcpx_search";
pub const CALL: &str = "mcpx_call";
pub const EXEC: &str = "mcpx_exec";

pub use artifacts::Artifact;
pub use ask::caller_can_answer;
pub use config::Config;
pub use context::CallContext;
pub use error::Error;
pub use identity::{Identity, Principal, Session, SessionKey, Transport};
pub use mcpx_upstream::lines::{Edges, Line, Lines};
pub use mcpx_upstream::{Ask, LOG_LEVELS, Listener};
pub use pool::{InstanceInfo, Lease, Pool, PoolError};
pub use scope::{InstanceKey, Owner, Scope};
pub use settings::Settings;
pub use watch::{Interest, Watch};

use instances::{Instances, Pick};

/// Most pages of `tools/list` mcpx follows from one upstream before it stops.
const MAX_LIST_PAGES: usize = 100;

/// A result as mcpx built it, before it is shaped for the caller's revision.
#[derive(Debug)]
pub struct Answer {
    pub result: Value,
    pub cache: Cacheability,
}

impl Answer {
    fn uncached(result: Value) -> Answer {
        Answer { result, cache: Cacheability::PRIVATE_UNCACHED }
    }
}

/// Every second: stops idle, exited, orphaned and reconfigured instances, gives memory back
/// after a large reap, and sweeps held requests, expired tasks and (every minute) expired artifacts. Ends
/// when the gateway is dropped.
async fn reap(gateway: std::sync::Weak<Gateway>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut tick_count: u64 = 0;
    let mut stopped_since_give_back = 0;
    loop {
        tick.tick().await;
        let Some(gateway) = gateway.upgrade() else { return };
        let config = gateway.settings.config();
        stopped_since_give_back += gateway
            .instances
            .pool
            .reap(config.pool.idle_timeout, |server| config.server(server).map(|s| s.definition.clone()));
        // Once a large reap's instances are all gone, their memory goes back to the system.
        if stopped_since_give_back >= memory::GIVE_BACK_AFTER_STOPPED && gateway.instances.pool.stopping() == 0 {
            let stopped = std::mem::take(&mut stopped_since_give_back);
            tokio::task::spawn_blocking(move || memory::give_back_freed(stopped));
        }
        gateway.parking.sweep();
        gateway.tasks.sweep();
        if tick_count.is_multiple_of(60) {
            gateway.sweep_artifacts();
        }
        tick_count += 1;
    }
}

pub struct Gateway {
    settings: Settings,
    instances: Instances,
    asks: ask::Asks,
    admission: admission::Admission,
    parking: held::Parking,
    tasks: tasks::Tasks,
    /// Orders tasks by creation, for `tasks/list`.
    task_seq: std::sync::atomic::AtomicU64,
    /// The gateway itself, for work that outlives a request (a call run as a task).
    me: std::sync::OnceLock<std::sync::Weak<Gateway>>,
    artifacts: std::sync::OnceLock<Arc<artifacts::Store>>,
    running_scripts: exec::Running,
    engines: mcpx_exec::Engines,
    reaper: std::sync::OnceLock<tokio::task::AbortHandle>,
    /// The call journal, once the daemon opened it in its state dir.
    journal: std::sync::OnceLock<journal::Journal>,
    metrics: metrics::Metrics,
    /// Where spans go, once the daemon starts exporting them.
    traces: traces::Traces,
    /// Becomes true when the gateway shuts down, so long-lived streams can end properly.
    closing: tokio::sync::watch::Sender<bool>,
    /// How a script's call reaches an instance another node of the cluster owns.
    relay: std::sync::OnceLock<Arc<dyn cluster::Relay>>,
}

impl Gateway {
    /// A gateway on these settings. Starts the idle reaper on the current tokio runtime.
    pub fn new(settings: Settings) -> Arc<Gateway> {
        let gateway = Arc::new(Gateway {
            settings,
            instances: Instances::default(),
            asks: ask::Asks::default(),
            admission: Default::default(),
            parking: held::Parking::default(),
            tasks: tasks::Tasks::default(),
            task_seq: Default::default(),
            me: Default::default(),
            artifacts: Default::default(),
            running_scripts: Default::default(),
            engines: Default::default(),
            reaper: Default::default(),
            journal: Default::default(),
            metrics: Default::default(),
            traces: Default::default(),
            closing: tokio::sync::watch::channel(false).0,
            relay: Default::default(),
        });
        // Spawned only once the gateway exists: a worker may run the task at once, and a
        // reaper that found nothing to upgrade would end for good.
        let _ = gateway.me.set(Arc::downgrade(&gateway));
        let reaper = tokio::spawn(reap(Arc::downgrade(&gateway)));
        let _ = gateway.reaper.set(reaper.abort_handle());
        gateway
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Who is asking, per the session keys in force right now (a hot setting).
    pub fn identity(&self, params: &Value, transport: &Transport) -> Identity {
        let config = self.settings.config();
        Identity::resolve(meta::of(params), &config.transport.session_meta_keys, transport)
    }

    /// Built once: every 2026-07-28 result carries it.
    pub fn server_info() -> &'static Value {
        static SERVER_INFO: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
            || json!({ "name": "mcpx", "title": "mcpx MCP gateway", "version": env!("CARGO_PKG_VERSION") }),
        );
        &SERVER_INFO
    }

    /// What mcpx serves, in both eras. Resources, prompts and completions are relayed from
    /// upstreams that offer them; with no upstream, those lists are simply empty.
    ///
    /// Only what mcpx delivers is declared: list changes of tools, prompts and resources
    /// (on a handshake-era session's standalone stream or stdio, and to 2026 callers
    /// through `subscriptions/listen`), and resource updates (`resources/subscribe` in the
    /// handshake era, `resourceSubscriptions` on a listen in 2026). A client that reads
    /// these can skip re-listing until told.
    pub fn capabilities(&self) -> Value {
        json!({
            "tools": { "listChanged": true },
            "resources": { "subscribe": true, "listChanged": true },
            "prompts": { "listChanged": true },
            "completions": {},
            "logging": {},
        })
    }

    /// What mcpx serves a handshake-era caller speaking `revision`: 2025-11-25 adds tasks,
    /// which mcpx relays or runs itself for any tool call (`tasks`).
    pub fn legacy_capabilities(&self, revision: mcpx_protocol::Revision) -> Value {
        let mut capabilities = self.capabilities();
        if revision == mcpx_protocol::Revision::V2025_11_25 {
            capabilities["tasks"] = tasks::legacy_capability();
        }
        capabilities
    }

    /// What the servers are, as `principal` may know them: a server its `clients` entry
    /// leaves out is not named.
    pub fn instructions(&self, principal: &Principal) -> String {
        let config = self.settings.config();
        if config.mcp_servers.is_empty() {
            let file = self.settings.path().map(|p| p.display().to_string());
            return format!(
                "mcpx has no upstream servers configured yet. Add them under \"mcpServers\" in {} (see examples/mcpx.json); the daemon picks up the change without a restart.",
                file.unwrap_or_else(|| "a config file (--config, $MCPX_CONFIG, or ~/.config/mcpx/config.json)".into())
            );
        }
        let names = policy::Access::of_principal(&config, principal).servers();
        if names.is_empty() {
            return "mcpx offers this caller no MCP servers.".to_owned();
        }
        format!(
            "mcpx fronts these MCP servers: {}. Find their tools with {} and call them with {}, or run a script that calls several with {}.",
            names.join(", "),
            SEARCH,
            CALL,
            EXEC
        )
    }

    /// The `server/discover` result body.
    pub fn discover(&self, supported_versions: &[&str], principal: &Principal) -> Answer {
        // 2026 only: the tasks extension, whose tasks mcpx relays (`tasks`).
        let mut capabilities = self.capabilities();
        capabilities["extensions"] = json!({ meta::TASKS_EXTENSION: {} });
        Answer {
            result: json!({
                "supportedVersions": supported_versions,
                "capabilities": capabilities,
                "instructions": self.instructions(principal),
            }),
            cache: Cacheability { ttl_ms: 0, private: false },
        }
    }

    /// The session `transport` implies has ended (a legacy HTTP session closed or expired,
    /// a stdio stream closed): its `session`-scoped instances stop once the calls holding
    /// them finish. A named session does not end this way: anyone may name it again, so
    /// its instances keep the idle rule (`pool.idleTimeout`).
    pub fn end_session(&self, transport: &Transport) {
        if !matches!(transport.session, Some(Session::Process(_) | Session::Http(_))) {
            return;
        }
        let Some(key) = Identity::resolve(None, &[], transport).session_key() else { return };
        self.instances.relayed.end(&key.to_string(), None);
        self.instances.pool.retire_session(&key);
    }

    /// Remembers the era each server answered in across restarts, in `file`.
    pub fn remember_eras_in(&self, file: std::path::PathBuf) {
        self.instances.pool.remember_eras_in(file);
    }

    /// Journals calls in the SQLite file `file` (`journal.enabled`), opening what an
    /// earlier run left there; retention follows the config as it changes.
    pub fn keep_journal_in(self: &Arc<Self>, file: std::path::PathBuf) -> Result<(), rusqlite::Error> {
        let config = self.settings.config();
        if !config.journal.enabled {
            return Ok(());
        }
        let gateway = Arc::downgrade(self);
        let retention = move || gateway.upgrade().map(|g| g.settings.config().journal.clone());
        let _ = self.journal.set(journal::Journal::open(&file, config.journal.queue, retention)?);
        Ok(())
    }

    /// Whether spans are exported.
    pub fn traces_on(&self) -> bool {
        self.traces.on()
    }

    /// The span of a request its front end answered itself (the handshake: `initialize`,
    /// `ping`, `logging/setLevel`, `server/discover`), opened and ended at once, so that
    /// the handshake shows in the caller's trace too.
    pub fn trace_answered(&self, ctx: &CallContext, method: &str, params: &Value, outcome: Result<&Value, &RpcError>) {
        let Some(span) = self.traces.answering(ctx, method, params) else { return };
        let relayed;
        span.end(
            ctx,
            match outcome {
                Ok(result) => Ok(result),
                Err(e) => {
                    relayed = Error::Relayed(e.clone());
                    Err(&relayed)
                }
            },
        );
    }

    /// Exports a span per request and per upstream request to `endpoint` from now on
    /// (`telemetry.otlpEndpoint`, or the `OTEL_EXPORTER_OTLP_*` environment), in batches
    /// from a task on the current runtime.
    pub fn export_traces(&self, endpoint: &traces::Endpoint) -> Result<(), traces::ExportError> {
        self.traces.export(endpoint)
    }

    /// Whether spans are exported (otherwise a front end need not read trace headers).
    pub fn exports_traces(&self) -> bool {
        self.traces.on()
    }

    /// The request counters `/metrics` renders.
    pub fn metrics(&self) -> &metrics::Metrics {
        &self.metrics
    }

    /// The pool's starts, crashes and reaps per server.
    pub fn pool_counters(&self) -> &metrics::PoolCounters {
        self.instances.pool.counters()
    }

    /// `mcpx_exec` scripts running now.
    pub fn scripts_running(&self) -> usize {
        self.running_scripts.now()
    }

    /// Spans dropped because the trace export queue was full (`None`: traces are off).
    pub fn trace_spans_dropped(&self) -> Option<u64> {
        self.traces.dropped()
    }

    /// Requests finished: counted for `/metrics`, and journaled when the journal is kept.
    pub(crate) fn finished(&self, record: journal::Record) {
        let config = self.settings.config();
        self.metrics.observe(&record, &config);
        self.keep_record(record, &config);
    }

    /// A question put to a caller, answered: journaled when the journal is kept. Not a
    /// request mcpx answered, so not counted with them for `/metrics`.
    pub(crate) fn answered_question(&self, record: journal::Record) {
        self.keep_record(record, &self.settings.config());
    }

    /// Hands `record` to the journal, when it is kept. Turning the journal off takes
    /// effect at once; on, at the next start (it opens then).
    fn keep_record(&self, record: journal::Record, config: &config::Config) {
        if let Some(journal) = self.journal.get().filter(|_| config.journal.enabled) {
            journal.record(record);
        }
    }

    /// How the journal keeps a call's arguments, when it keeps records at all (then a
    /// call's sizes are measured too; when it does not, nothing walks the call's JSON).
    pub(crate) fn journal_keeps(&self) -> Option<journal::Keep> {
        let config = self.settings.config();
        self.journal.get().filter(|_| config.journal.enabled).map(|_| journal::Keep::of(&config.journal))
    }

    /// The call journal, when it is kept.
    pub fn journal(&self) -> Option<&journal::Journal> {
        self.journal.get()
    }

    pub fn instances(&self) -> Vec<InstanceInfo> {
        self.instances.pool.instances()
    }

    /// Servers that keep failing to start (`mcpx status`).
    pub fn failing(&self) -> Vec<pool::Failing> {
        self.instances.pool.failing()
    }

    /// Resolves when the gateway begins to shut down.
    pub async fn closing(&self) {
        let mut closing = self.closing.subscribe();
        let _ = closing.wait_for(|c| *c).await;
    }

    /// Makes this gateway one node of a cluster: an instance key another node owns is
    /// never started here (the front end forwards such a request first: [`Gateway::placement`];
    /// a script's call goes to the owner through `relay`; any other lease inside a request
    /// it did not forward fails naming the owner, and a listing goes through this node's
    /// lister), and its leases are kept until it stops.
    pub fn join_cluster(self: &Arc<Self>, cluster: cluster::Cluster, relay: Arc<dyn cluster::Relay>) {
        let _ = self.relay.set(relay);
        let cluster = Arc::new(cluster);
        self.asks.join_cluster(cluster.state_key(), cluster.me());
        self.instances.scoper.join_cluster(cluster.node());
        if let Some(authorizer) = self.instances.oauth.get() {
            let store = Arc::new(shared::Credentials(cluster.clone()));
            authorizer.join_cluster(store, cluster.credentials_key());
        }
        self.keep_task_records(cluster.clone());
        if self.instances.cluster.set(cluster.clone()).is_ok() {
            tokio::spawn(cluster::keep_leases(cluster, Arc::downgrade(self)));
        }
    }

    /// This node's cluster, when it is one.
    pub fn cluster(&self) -> Option<&cluster::Cluster> {
        self.instances.cluster.get().map(|c| &**c)
    }

    /// Stops every upstream instance and waits until they are gone.
    pub async fn shutdown(&self) {
        self.closing.send_replace(true);
        if let Some(reaper) = self.reaper.get() {
            reaper.abort();
        }
        self.instances.pool.shutdown().await;
        if let Some(cluster) = self.instances.cluster.get() {
            cluster.release_all().await;
        }
        self.traces.flush().await;
        if let Some(journal) = self.journal.get() {
            // The writer gathers records for a moment before it writes them.
            journal.flush().await;
        }
    }

    /// One list from each of `servers` that offers `capability`, gathered concurrently:
    /// the items tagged with their server, and how long the combination may be cached.
    /// A server that fails to answer is left out (and logged), not fatal to the list.
    async fn gather(
        &self,
        ctx: &CallContext,
        servers: &[String],
        capability: &str,
        method: &str,
        field: &str,
    ) -> (Vec<(String, Value)>, Cacheability) {
        let config = self.settings.config();
        let lists = join_all(servers.iter().map(|server| async move {
            let Some(lease) = self.lister_of(ctx, server, capability).await? else {
                return Ok((listings::Listed::default(), None));
            };
            let (items, cache) = listed(self, ctx, &lease, method, field).await?;
            Ok::<_, Error>((items, Some(cache)))
        }))
        .await;
        let mut items = Vec::new();
        let mut cache = Cacheability { ttl_ms: u64::MAX, private: false };
        for (server, list) in servers.iter().zip(lists) {
            match list {
                Ok((listed, upstream_cache)) => {
                    let scoped = config.server(server).is_some_and(|s| s.scope != Scope::Global);
                    // A list that depends on who asks must never be shared or reused.
                    cache = cache.min(if scoped {
                        Cacheability::PRIVATE_UNCACHED
                    } else {
                        upstream_cache.unwrap_or(cache)
                    });
                    items.extend(listed.iter().map(|item| (server.clone(), item.clone())));
                }
                Err(e) => tracing::warn!(server, method, "left out of the list: {e}"),
            }
        }
        if cache.ttl_ms == u64::MAX {
            cache.ttl_ms = 0;
        }
        (items, cache)
    }

    /// The first of `servers`, in their order, whose list has an item a search wants,
    /// the searches tried in turn: the server, the item, and the lease on the instance
    /// that listed it. A request for the item is sent on that lease (see
    /// [`Gateway::forward`]), so a per-call instance is not stopped and started again
    /// between the listing and the request; but not on a lister (a server's shared one,
    /// or this node's stand-in for an instance another node owns), which answers listings
    /// only: the request then leases its instance itself. Every server is leased and
    /// listed at once, as for [`Gateway::gather`]; one that fails to answer is passed over
    /// (and logged).
    async fn find_listed(
        &self,
        ctx: &CallContext,
        servers: &[String],
        capability: &str,
        searches: &[Search<'_>],
    ) -> Option<(String, Value, Option<Lease>)> {
        let leases = join_all(servers.iter().map(|server| self.lister_of(ctx, server, capability))).await;
        let mut leases: Vec<(&String, Lease)> = servers
            .iter()
            .zip(leases)
            .filter_map(|(server, lease)| {
                lease
                    .inspect_err(|e| tracing::warn!(server, capability, "left out of the search: {e}"))
                    .ok()?
                    .map(|l| (server, l))
            })
            .collect();
        for search in searches {
            let lists =
                join_all(leases.iter().map(|(_, lease)| listed(self, ctx, lease, search.method, search.field))).await;
            let mut hit = None;
            for (at, ((server, _), list)) in leases.iter().zip(lists).enumerate() {
                match list {
                    Ok((items, _)) => {
                        if let Some(item) = items.iter().find(|item| (search.wanted)(server, item)) {
                            hit = Some((at, item.clone()));
                            break;
                        }
                    }
                    Err(e) => tracing::warn!(server, method = search.method, "left out of the search: {e}"),
                }
            }
            if let Some((at, item)) = hit {
                let (server, lease) = leases.swap_remove(at);
                return Some((server.clone(), item, (!lease.key().is_lister()).then_some(lease)));
            }
        }
        None
    }

    /// The instance that lists `server` for this caller, if the server offers `capability`.
    async fn lister_of(&self, ctx: &CallContext, server: &str, capability: &str) -> Result<Option<Lease>, Error> {
        let lease = self.lease_for_listing(ctx, server).await?;
        Ok(lease.upstream().facts().capabilities.get(capability).is_some().then_some(lease))
    }

    /// The instance of `server` that answers this caller.
    async fn lease(&self, ctx: &CallContext, server: &str) -> Result<Lease, Error> {
        self.lease_at(ctx, server, None).await
    }

    /// The instance of `server` that lists its tools, prompts or resources for this caller:
    /// its own, or the server's shared lister for a caller whose scope degraded to `call`
    /// and who has nothing else to key on (see [`scope::Scoper::listing_key`]), so a host
    /// fanning out listings does not start and stop a process for each. Send it listings
    /// only: never a call or a read.
    pub(crate) async fn lease_for_listing(&self, ctx: &CallContext, server: &str) -> Result<Lease, Error> {
        self.instances.lease(&self.settings.config(), ctx, server, Pick::Listing).await
    }

    /// The instance of `server` for this caller, or at `instance_key` when a retry names
    /// the instance that asked it a question.
    async fn lease_at(&self, ctx: &CallContext, server: &str, owner: Option<Owner>) -> Result<Lease, Error> {
        self.instances.lease(&self.settings.config(), ctx, server, owner.map_or(Pick::Caller, Pick::At)).await
    }
}

/// One list of each server to look through for an item ([`Gateway::find_listed`]).
struct Search<'a> {
    method: &'a str,
    field: &'a str,
    /// Whether an item of the server's list is the one looked for.
    wanted: &'a (dyn Fn(&str, &Value) -> bool + Sync),
}

/// What a name or URI a caller sent stands for: the server, the name or URI upstream, and
/// the lease on the instance that listed it, when finding it took a listing.
pub(crate) struct Found {
    server: String,
    original: String,
    lease: Option<Lease>,
}

/// Whom a request sent upstream for `ctx` serves: an upstream's question during it may
/// go to this caller, and to no other.
fn caller_of(ctx: &CallContext) -> mcpx_upstream::Caller {
    mcpx_upstream::Caller {
        key: ctx.caller_key().into(),
        call_id: ctx.call_id.as_str().into(),
        meter: Some(ctx.reached.clone()),
    }
}

/// Every item of an upstream list, as the instance keeps it while it is fresh (see
/// [`listings`]), else listed anew (and kept if the server allows).
async fn listed(
    gateway: &Gateway,
    ctx: &CallContext,
    lease: &Lease,
    method: &str,
    field: &str,
) -> Result<(listings::Listed, Cacheability), Error> {
    // Read before listing: a change heard while the list is on its way makes it stale.
    let changes = lease.upstream().list_changes(method);
    if let Some(fresh) = lease.listings().fresh(method, changes, std::time::Instant::now()) {
        return Ok(fresh);
    }
    let listed_at = std::time::Instant::now();
    let (items, cache) = list_all(gateway, ctx, lease, method, field).await?;
    let items = Arc::new(items);
    let modern = lease.upstream().facts().era == mcpx_protocol::Era::Modern;
    lease.listings().keep(method, &items, cache, changes, modern, listed_at);
    Ok((items, cache))
}

impl Gateway {
    /// One page of an upstream list, with a client span of its own while traces are exported.
    async fn list_page(
        &self,
        ctx: &CallContext,
        lease: &Lease,
        method: &str,
        mut params: Value,
    ) -> Result<Value, Error> {
        let upstream = lease.upstream();
        let Some(span) = self.traces.sending(ctx, &lease.key().server, upstream, method, &mut params) else {
            return upstream.request(method, params, &ctx.client_capabilities).await.map_err(Error::from);
        };
        let page = Box::pin(upstream.request(method, params, &ctx.client_capabilities)).await.map_err(Error::from);
        span.end(page.as_ref());
        page
    }
}

/// Every item of a paginated upstream list (`tools`, `resources`, …), following
/// `nextCursor`, with the cacheability the upstream declared (none: reuse nothing).
async fn list_all(
    gateway: &Gateway,
    ctx: &CallContext,
    lease: &Lease,
    method: &str,
    field: &str,
) -> Result<(Vec<Value>, Cacheability), Error> {
    let mut items = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut cache = Cacheability { ttl_ms: u64::MAX, private: false };
    for _ in 0..MAX_LIST_PAGES {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let page = gateway.list_page(ctx, lease, method, params).await?;
        if let Some(Value::Array(listed)) = page.get(field) {
            items.extend(listed.iter().cloned());
        }
        cache = cache.min(Cacheability {
            ttl_ms: page.get("ttlMs").and_then(Value::as_u64).unwrap_or(0),
            private: page.get("cacheScope").and_then(Value::as_str) == Some("private"),
        });
        match page.get("nextCursor") {
            Some(Value::String(c)) => cursor = Some(c.clone().into()),
            _ => return Ok((items, cache)),
        }
    }
    tracing::warn!(server = lease.key().server, method, "stopped listing after {MAX_LIST_PAGES} pages");
    Ok((items, cache))
}
