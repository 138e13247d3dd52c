//! `subscriptions/listen`: which changes a 2026-07-28 caller hears about, fanned in from
//! every upstream instance its identity reaches.
//!
//! A caller asks for kinds of change (tools, prompts, resources lists) and for updates to
//! resources by URI; mcpx acknowledges what it can deliver and relays each upstream's
//! notifications of those kinds until the caller stops listening. The caller's instances
//! are held (not reaped) while it listens. When one of them exits, nothing of its
//! connection survives: mcpx starts the caller's instance again (after a pause that
//! grows while it keeps exiting) and opens the same subscriptions on it.
//!
//! A handshake-era session's change stream is not asked for: clients open it as they
//! connect. Besides list changes and resource updates it carries the status changes of
//! the session's tasks (`notifications/tasks/status`, from `tasks`). So it must never start an instance or keep one from being reaped. It hears the
//! instances its session reaches that are running: those up when it opens, and each one a
//! call of the session starts later, joined before that call is sent.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::outbox;
use mcpx_upstream::Upstream;
use serde_json::{Map, Value, json};

use crate::{CallContext, Gateway, InstanceKey, Lease, Session, naming};

const KINDS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    ("resourcesListChanged", "notifications/resources/list_changed"),
];

const RESOURCE_UPDATED: &str = "notifications/resources/updated";

/// The first pause before reopening a watched instance that exited, doubled (up to
/// [`REOPEN_MAX`]) each time it exits again soon after starting.
const REOPEN_FIRST: Duration = Duration::from_millis(250);
const REOPEN_MAX: Duration = Duration::from_secs(30);

/// One open listen. Dropping it stops relaying and releases the instances.
pub struct Watch {
    /// The filter mcpx honours: the subset of what was asked that it can deliver (taken
    /// by the acknowledgement, which says it once).
    pub honored: Value,
    /// Change notifications, untagged (the front end tags them with the listen's id).
    pub changes: outbox::Receiver,
    /// Where the status pushes of the tasks the listen asked for go (into `changes`);
    /// held only while it has some, so a listen with nothing to hear still ends.
    tasks_tx: Option<outbox::Sender>,
    _relays: Vec<Relay>,
    _session: Option<Arc<SessionStream>>,
}

struct Relay(tokio::task::JoinHandle<()>);

impl Drop for Relay {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The public URIs a handshake-era session subscribed to with `resources/subscribe`, as
/// they are now: its change stream delivers updates to these.
pub type Interest = Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>;

/// What one server's relay delivers: the change kinds, and its resources by their own
/// URI with the public URI the caller subscribed to (or, for a handshake-era session,
/// whatever its [`Interest`] names when an update arrives).
#[derive(Clone)]
struct Wanted {
    kinds: Vec<&'static str>,
    resources: BTreeMap<String, String>,
    interest: Option<Interest>,
}

impl Wanted {
    fn is_empty(&self) -> bool {
        self.kinds.is_empty() && self.resources.is_empty() && self.interest.is_none()
    }
}

/// The open change streams of handshake-era sessions, by the key of each instance their
/// calls reach.
#[derive(Default)]
pub(crate) struct SessionStreams {
    open: AtomicUsize,
    by_key: Mutex<HashMap<InstanceKey, Vec<Weak<SessionStream>>>>,
}

/// One session's change stream: what it hears from each server, and the instances it has
/// joined, by serial.
pub(crate) struct SessionStream {
    gateway: Weak<Gateway>,
    /// The session it is (its owner key): what a relayed subscription of the session
    /// delivers to.
    session: String,
    /// By server; a list, as the few servers a session reaches do not need a map's node.
    wanted: Vec<(String, Wanted)>,
    keys: Vec<InstanceKey>,
    tx: outbox::Sender,
    joined: Mutex<HashMap<u64, Option<tokio::task::AbortHandle>>>,
}

impl SessionStreams {
    /// The open session streams that follow the instance `key`.
    fn following(&self, key: &InstanceKey) -> Vec<Arc<SessionStream>> {
        let by_key = self.by_key.lock().expect("session streams lock");
        by_key.get(key).map(|streams| streams.iter().filter_map(Weak::upgrade).collect()).unwrap_or_default()
    }

    /// Joins the instance `lease` just started to every open session stream that reaches
    /// it. Called once per start, not per lease: a stream that opens later finds the
    /// instance running (`Pool::running`), and one instance stays joined for its life.
    pub(crate) async fn join(&self, lease: &Lease) {
        if self.open.load(Ordering::Acquire) == 0 {
            return;
        }
        for stream in self.following(lease.key()) {
            stream.join(&lease.key().server, lease.serial(), lease.upstream()).await;
        }
    }
}

impl SessionStream {
    /// Relays the changes of one instance of `server` until it ends or the stream closes.
    /// Holds the connection, not a lease: the instance is reaped as if nobody listened.
    async fn join(self: &Arc<Self>, server: &str, serial: u64, upstream: &Upstream) {
        let Some((_, wanted)) = self.wanted.iter().find(|(name, _)| name == server) else { return };
        if self.joined.lock().expect("joined lock").insert(serial, None).is_some() {
            return;
        }
        let mut changes = upstream.changes().await;
        let (gateway, server, wanted, tx, upstream) =
            (self.gateway.clone(), server.to_owned(), wanted.clone(), self.tx.clone(), upstream.clone());
        let stream = Arc::downgrade(self);
        let relay = tokio::spawn(async move {
            pass_on(&gateway, &server, &wanted, &upstream, &mut changes, &tx).await;
            if let Some(stream) = stream.upgrade() {
                stream.joined.lock().expect("joined lock").remove(&serial);
            }
        });
        if let Some(slot) = self.joined.lock().expect("joined lock").get_mut(&serial) {
            *slot = Some(relay.abort_handle());
        }
    }
}

impl Drop for SessionStream {
    fn drop(&mut self) {
        for relay in self.joined.get_mut().expect("joined lock").values().flatten() {
            relay.abort();
        }
        let Some(gateway) = self.gateway.upgrade() else { return };
        let streams = &gateway.instances.streams;
        let mut by_key = streams.by_key.lock().expect("session streams lock");
        for key in &self.keys {
            if let Some(list) = by_key.get_mut(key) {
                list.retain(|w| w.strong_count() > 0);
                if list.is_empty() {
                    by_key.remove(key);
                }
            }
        }
        streams.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Gateway {
    /// The change stream of a handshake-era session: the list changes of the instances it
    /// reaches, and updates to the resources it subscribed to (as `interest` says). It
    /// starts no instance and holds none (see the module's top comment).
    pub async fn watch_session(self: &Arc<Self>, ctx: &CallContext, interest: Interest) -> Result<Watch, Error> {
        let config = self.settings.config();
        let (mut wanted, mut keys) = (Vec::new(), Vec::new());
        for (server, server_config) in &config.mcp_servers {
            let key = self.instances.scoper.key(server, server_config.scope, &ctx.identity, &ctx.call_id);
            // A per-call instance is its call's alone.
            if key.is_per_call() {
                continue;
            }
            let kinds = KINDS
                .iter()
                .map(|(_, method)| *method)
                .filter(|m| *m != "notifications/tools/list_changed" || config.expose.contains(server))
                .collect();
            wanted
                .push((server.clone(), Wanted { kinds, resources: BTreeMap::new(), interest: Some(interest.clone()) }));
            keys.push(key);
        }
        let (tx, changes) = outbox::channel(config.limits.max_buffered_notifications.max(1));
        // The session's tasks tell it when their status changes (2025-11-25).
        self.tasks.tell(ctx.identity.owner_key(), tx.clone());
        let session = ctx.identity.owner_key();
        let stream = Arc::new(SessionStream {
            gateway: Arc::downgrade(self),
            session,
            wanted,
            keys,
            tx,
            joined: Mutex::default(),
        });
        {
            let mut by_key = self.instances.streams.by_key.lock().expect("session streams lock");
            for key in &stream.keys {
                by_key.entry(key.clone()).or_default().push(Arc::downgrade(&stream));
            }
            self.instances.streams.open.fetch_add(1, Ordering::AcqRel);
        }
        // Registered first, so an instance starting meanwhile is joined by its lease if
        // not here (a serial is joined once).
        for key in &stream.keys {
            if let Some((serial, upstream)) = self.instances.pool.running(key) {
                stream.join(&key.server, serial, &upstream).await;
            }
        }
        Ok(Watch {
            honored: Value::Object(Map::new()),
            changes,
            tasks_tx: None,
            _relays: Vec::new(),
            _session: Some(stream),
        })
    }

    /// A 2026-07-28 `subscriptions/listen`.
    pub async fn watch(self: &Arc<Self>, ctx: &CallContext, params: &Value) -> Result<Watch, Error> {
        let filter = match params.get("notifications") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(f)) => f.clone(),
            Some(_) => {
                return Err(Error::params("subscriptions/listen: \"notifications\" must be an object"));
            }
        };
        let resource_uris: Vec<String> = match filter.get("resourceSubscriptions") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(uris)) if uris.iter().all(Value::is_string) => {
                uris.iter().filter_map(Value::as_str).map(str::to_owned).collect()
            }
            Some(_) => {
                return Err(Error::params("subscriptions/listen: \"resourceSubscriptions\" must be an array of URIs"));
            }
        };
        let wanted_kinds: Vec<&'static str> = KINDS
            .iter()
            .filter(|(flag, _)| filter.get(*flag) == Some(&Value::Bool(true)))
            .map(|(_, method)| *method)
            .collect();
        // Status pushes of the caller's own tasks (the tasks extension).
        let task_ids: Vec<String> = match filter.get("taskIds") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(ids)) if ids.iter().all(Value::is_string) => {
                ids.iter().filter_map(Value::as_str).map(str::to_owned).collect()
            }
            Some(_) => return Err(Error::params("subscriptions/listen: \"taskIds\" must be an array of task ids")),
        };
        if filter.contains_key("taskIds") && !mcpx_protocol::meta::declares_tasks(&ctx.client_capabilities) {
            let required = json!({ "extensions": { mcpx_protocol::meta::TASKS_EXTENSION: {} } });
            return Err(Error::Relayed(mcpx_protocol::RpcError::missing_capability(required)));
        }
        let mut watch = self.open_watch(ctx, wanted_kinds, resource_uris, None).await?;
        let honored = match &watch.tasks_tx {
            Some(tx) if !task_ids.is_empty() => self.listen_to_tasks(ctx, &task_ids, tx),
            _ => Vec::new(),
        };
        if filter.contains_key("taskIds") {
            watch.honored["taskIds"] = json!(honored);
        }
        if honored.is_empty() {
            watch.tasks_tx = None;
        }
        Ok(watch)
    }

    /// Relays `wanted_kinds` of change and updates to `resource_uris` (and, for a session,
    /// to what its `interest` names) from every instance the caller reaches.
    async fn open_watch(
        self: &Arc<Self>,
        ctx: &CallContext,
        wanted_kinds: Vec<&'static str>,
        resource_uris: Vec<String>,
        interest: Option<Interest>,
    ) -> Result<Watch, Error> {
        let mut honored: Map<String, Value> = KINDS
            .iter()
            .filter(|(_, m)| wanted_kinds.contains(m))
            .map(|(flag, _)| (flag.to_string(), json!(true)))
            .collect();

        let config = self.settings.config();
        let mut by_server: BTreeMap<String, Wanted> = BTreeMap::new();
        // Only servers the caller may use: the others' changes are none of its business.
        for server in &crate::policy::Access::of(&config, &ctx.identity).servers() {
            // Only exposed servers' tools are listed by mcpx, so only their tool changes matter.
            let kinds = wanted_kinds
                .iter()
                .copied()
                .filter(|m| *m != "notifications/tools/list_changed" || config.expose.contains(server))
                .collect();
            by_server.insert(server.clone(), Wanted { kinds, resources: BTreeMap::new(), interest: interest.clone() });
        }
        for uri in &resource_uris {
            // A URI nothing serves is not honoured; one without a sure normal form is
            // refused, saying why, as a read of it is.
            let owner = match self.visible_resource_owner(ctx, uri).await {
                Ok(found) => Some((found.server, found.original)),
                Err(e @ Error::Params { .. }) => return Err(e),
                Err(_) => None,
            };
            if let Some((server, original)) = owner
                && let Some(wanted) = by_server.get_mut(&server)
            {
                wanted.resources.insert(original, uri.clone());
            }
        }

        let (tx, rx) = outbox::channel(config.limits.max_buffered_notifications.max(1));
        let mut relays = Vec::new();
        let mut subscribed = Vec::new();
        for (server, wanted) in by_server {
            if wanted.is_empty() {
                continue;
            }
            let lease = match self.lease(ctx, &server).await {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::warn!(server, "not watched for changes: {}", e);
                    continue;
                }
            };
            let Some(opened) = open(&lease, &server, &wanted).await else { continue };
            subscribed.extend(opened.subscribed.iter().cloned());
            let relay = relay(self.clone(), ctx.clone(), server, wanted, lease, opened, tx.clone());
            relays.push(Relay(tokio::spawn(relay)));
        }
        if !resource_uris.is_empty() {
            // Acknowledged in the order asked, only those an upstream took.
            let taken: Vec<Value> = resource_uris.iter().filter(|u| subscribed.contains(u)).map(|u| json!(u)).collect();
            honored.insert("resourceSubscriptions".into(), taken.into());
        }
        Ok(Watch { honored: Value::Object(honored), changes: rx, tasks_tx: Some(tx), _relays: relays, _session: None })
    }
}

/// What is open on one instance for one listen.
struct Opened {
    changes: tokio::sync::broadcast::Receiver<Value>,
    _resources: Option<mcpx_upstream::ResourceWatch>,
    /// The public URIs the instance took subscriptions for.
    subscribed: Vec<String>,
}

/// Opens what `wanted` asks on the leased instance. `None` when it can deliver nothing.
async fn open(lease: &Lease, server: &str, wanted: &Wanted) -> Option<Opened> {
    let upstream: &Upstream = lease.upstream();
    let changes = upstream.changes().await;
    let originals: Vec<String> = wanted.resources.keys().cloned().collect();
    let resources = match upstream.watch_resources(&originals).await {
        Ok(watch) => watch,
        Err(e) => {
            tracing::warn!(server, "resource subscriptions refused: {e}");
            None
        }
    };
    let subscribed = if resources.is_some() { wanted.resources.values().cloned().collect() } else { Vec::new() };
    if wanted.kinds.is_empty() && subscribed.is_empty() && wanted.interest.is_none() {
        return None;
    }
    Some(Opened { changes, _resources: resources, subscribed })
}

/// Relays one server's changes to the listen until it ends; when the instance exits,
/// starts the caller's instance again and opens the same subscriptions on it.
///
/// An async block rather than an `async fn`: the task lives as long as the listen, and an
/// `async fn`'s future held its arguments twice (as passed, and moved into its body),
/// about 650 bytes more per relay.
#[allow(clippy::manual_async_fn)]
fn relay(
    gateway: Arc<Gateway>,
    ctx: CallContext,
    server: String,
    wanted: Wanted,
    mut lease: Lease,
    mut opened: Opened,
    tx: outbox::Sender,
) -> impl Future<Output = ()> + Send + 'static {
    async move {
        let mut pause = REOPEN_FIRST;
        let weak = Arc::downgrade(&gateway);
        loop {
            let started = Instant::now();
            let upstream = lease.upstream().clone();
            if let Stopped::ListenerGone = pass_on(&weak, &server, &wanted, &upstream, &mut opened.changes, &tx).await {
                return;
            }
            drop(opened);
            drop(lease);
            if started.elapsed() > REOPEN_MAX {
                pause = REOPEN_FIRST;
            }
            // Boxed: a relay spends its life in `pass_on`, and reopening (a lease, the
            // subscriptions) is a future several times larger that would otherwise size every
            // relay's task while it waits.
            match Box::pin(reopen(&gateway, &ctx, &server, &wanted, &tx, &mut pause)).await {
                Some((l, o)) => (lease, opened) = (l, o),
                None => return,
            }
        }
    }
}

/// Starts the caller's instance of `server` again after `pause` (doubled each failed
/// try) and opens `wanted` on it; `None` once nobody listens or the daemon is closing.
async fn reopen(
    gateway: &Arc<Gateway>,
    ctx: &CallContext,
    server: &str,
    wanted: &Wanted,
    tx: &outbox::Sender,
    pause: &mut Duration,
) -> Option<(Lease, Opened)> {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(*pause) => {}
            _ = tx.closed() => return None,
            _ = gateway.closing() => return None,
        }
        *pause = (*pause * 2).min(REOPEN_MAX);
        let reopened = match gateway.lease(ctx, server).await {
            Ok(l) => open(&l, server, wanted).await.map(|o| (l, o)),
            Err(e) => {
                tracing::warn!(server, "cannot reopen a watched instance: {}", e);
                None
            }
        };
        if reopened.is_some() {
            tracing::info!(server, "a watched instance exited; its subscriptions are open again on a new one");
            return reopened;
        }
    }
}

/// Subscriptions of handshake-era sessions to resources of instances other nodes own
/// (see [`Gateway::subscribe_elsewhere`]), by session (its owner key), then public URI:
/// each the task that opens, then passes on, the owner's stream of updates. An entry is
/// made before that task starts, so ending a session or a subscription ends one still
/// being opened, and the limit counts it.
#[derive(Default)]
pub(crate) struct RelayedSubscriptions {
    by_session: Mutex<HashMap<String, HashMap<String, Subscription>>>,
    next: std::sync::atomic::AtomicU64,
}

/// One relayed subscription: its serial (which a replacement does not share), and its task.
type Subscription = (u64, tokio::task::AbortHandle);

impl RelayedSubscriptions {
    /// Starts `task` (given its serial) as `session`'s subscription to `uri`, in place of
    /// one it held; `None`, starting nothing, when this node holds `most` others.
    fn start<F>(&self, session: &str, uri: &str, most: usize, task: impl FnOnce(u64) -> F) -> Option<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut by_session = self.by_session.lock().expect("relayed subscriptions lock");
        let held: usize = by_session.values().map(HashMap::len).sum();
        let replacing = by_session.get(session).is_some_and(|s| s.contains_key(uri));
        if held - usize::from(replacing) >= most {
            return None;
        }
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        // Spawned under the lock: the task cannot forget its entry before it is made.
        let running = tokio::spawn(task(serial)).abort_handle();
        let mine = by_session.entry(session.to_owned()).or_default();
        if let Some((_, replaced)) = mine.insert(uri.to_owned(), (serial, running)) {
            replaced.abort();
        }
        Some(())
    }

    /// Ends `session`'s subscription to `uri`, or all of them.
    pub(crate) fn end(&self, session: &str, uri: Option<&str>) {
        let mut by_session = self.by_session.lock().expect("relayed subscriptions lock");
        let Some(held) = by_session.get_mut(session) else { return };
        match uri {
            Some(uri) => {
                if let Some((_, task)) = held.remove(uri) {
                    task.abort();
                }
            }
            None => held.drain().for_each(|(_, (_, task))| task.abort()),
        }
        if held.is_empty() {
            by_session.remove(session);
        }
    }

    /// Forgets `session`'s subscription to `uri` if it is still the one `serial` names.
    fn forget(&self, session: &str, uri: &str, serial: u64) {
        let mut by_session = self.by_session.lock().expect("relayed subscriptions lock");
        let Some(held) = by_session.get_mut(session) else { return };
        if held.get(uri).is_some_and(|(s, _)| *s == serial) {
            held.remove(uri);
        }
        if held.is_empty() {
            by_session.remove(session);
        }
    }
}

impl Gateway {
    /// A handshake-era session's `resources/subscribe` of a resource whose instance
    /// another node owns (`elsewhere`): a stream from that node of the instance's updates
    /// to `original` (the resource's own URI), delivered to the session's change stream
    /// as updates of an instance of its own would be (as its interest says, under the
    /// public URI), until the session unsubscribes or ends, or that node ends it (the
    /// instance ended). Only for the transport's own session (a legacy HTTP session, a
    /// stdio process), which ends with its connection: a session a request names by label
    /// is refused, as before. At most `cluster.maxRelayedSubscriptions` on this node.
    pub(crate) async fn subscribe_elsewhere(
        self: &Arc<Self>,
        ctx: &CallContext,
        elsewhere: crate::error::Elsewhere,
        public: &str,
        original: &str,
    ) -> Result<Value, Error> {
        let own_session = matches!(ctx.identity.session, Some(Session::Http(_) | Session::Process(_)))
            && ctx.identity.source == crate::identity::Source::Transport;
        let (true, Some(relay)) = (own_session, self.relay.get().cloned()) else {
            return Err(Error::Elsewhere(Box::new(elsewhere)));
        };
        let session = ctx.identity.owner_key();
        let most = self.settings.config().cluster.as_ref().map_or(0, |c| c.max_relayed_subscriptions);
        let crate::error::Elsewhere { node, url, key } = elsewhere;
        let node = crate::cluster::Node { id: node, url };
        let params = json!({ "uri": original });
        let request = crate::placement::node_request(ctx, key.clone(), "resources/subscribe", params, None);
        let (limit, patience) = self.relay_bounds();
        let deliver = self.deliverer(session.clone(), key);
        let principal = ctx.identity.principal.clone();
        let (answered, answer) = tokio::sync::oneshot::channel();
        let (gateway, who, what) = (Arc::downgrade(self), session.clone(), public.to_owned());
        let task = move |serial| async move {
            match relay.watch(&node, &principal, &request, limit, patience, deliver).await {
                Ok((result, watching)) => {
                    if answered.send(Ok(result)).is_ok() {
                        watching.await;
                    }
                }
                Err(e) => drop(answered.send(Err(e))),
            }
            // Ended by its owner (the instance ended), or never opened: gone, unless
            // replaced meanwhile.
            if let Some(gateway) = gateway.upgrade() {
                gateway.instances.relayed.forget(&who, &what, serial);
            }
        };
        if self.instances.relayed.start(&session, public, most, task).is_none() {
            return Err(Error::params(format!(
                "resources/subscribe: this node holds {most} subscriptions to resources other cluster nodes serve already (cluster.maxRelayedSubscriptions)"
            )));
        }
        answer.await.unwrap_or_else(|_| {
            Err(Error::internal("resources/subscribe: the subscription ended before the owner answered (the session unsubscribed or ended)"))
        })
    }

    /// Hands an update another node relayed for `session`'s subscription to the session's
    /// change streams that follow `key` (the instance on that node), as [`pass_on`] would.
    fn deliverer(self: &Arc<Self>, session: String, key: InstanceKey) -> Arc<dyn Fn(Value) + Send + Sync> {
        let gateway = Arc::downgrade(self);
        Arc::new(move |change: Value| {
            let Some(gateway) = gateway.upgrade() else { return };
            if change["method"] != RESOURCE_UPDATED {
                return;
            }
            let config = gateway.settings.config();
            for stream in gateway.instances.streams.following(&key).iter().filter(|s| s.session == session) {
                let Some((_, wanted)) = stream.wanted.iter().find(|(server, _)| *server == key.server) else {
                    continue;
                };
                if let Some(change) = deliverable(&config, &key.server, wanted, change.clone()) {
                    hand_to(&stream.tx, &key.server, change);
                }
            }
        })
    }

    /// Answers a `resources/subscribe` another node relayed here for a session of its own
    /// (`request`, for `principal`): subscribes the instance that node keyed (if
    /// `principal` may use it) to the resource, and returns the answer and what hands
    /// `notify` each of the instance's updates to that resource (or one under it) until
    /// the instance ends. The instance is not held for it: it is reaped as if nobody
    /// listened, as for a session of this node.
    pub async fn relayed_subscription(
        &self,
        principal: crate::Principal,
        request: crate::cluster::NodeRequest,
        notify: Arc<dyn Fn(Value) + Send + Sync>,
    ) -> Result<crate::cluster::Subscribed, Error> {
        if request.method != "resources/subscribe" {
            return Err(Error::NoMethod(request.method));
        }
        let Some(uri) = request.params.get("uri").and_then(Value::as_str) else {
            return Err(Error::params("resources/subscribe: \"uri\" must be a string"));
        };
        let original = crate::resources::relayed_original(&self.settings.config(), &principal, &request.server, uri)?;
        let ctx = crate::placement::relayed_context(&self.settings.config(), principal, &request)?;
        let lease = self.lease_at(&ctx, &request.server, Some(request.owner)).await?;
        let upstream = lease.upstream().clone();
        let mut changes = upstream.changes().await;
        let Some(watch) = upstream.watch_resources(std::slice::from_ref(&original)).await? else {
            return Err(Error::params(format!(
                "resources/subscribe: {:?} does not take resource subscriptions",
                request.server
            )));
        };
        drop(lease);
        let watching = async move {
            let _watch = watch;
            follow(&upstream, &mut changes, std::future::pending(), |change| {
                let uri = change["params"]["uri"].as_str().unwrap_or_default();
                if change["method"] == RESOURCE_UPDATED && is_under(&original, uri) {
                    notify(change);
                }
                true
            })
            .await;
        };
        Ok((json!({}), Box::pin(watching)))
    }
}

/// Why passing on one instance's changes stopped.
enum Stopped {
    InstanceGone,
    ListenerGone,
}

/// Passes on one instance's changes, as `wanted` says, until its connection ends or
/// nobody listens any more.
async fn pass_on(
    gateway: &Weak<Gateway>,
    server: &str,
    wanted: &Wanted,
    upstream: &Upstream,
    changes: &mut tokio::sync::broadcast::Receiver<Value>,
    tx: &outbox::Sender,
) -> Stopped {
    follow(upstream, changes, tx.closed(), |change| {
        let Some(gateway) = gateway.upgrade() else { return false };
        match deliverable(&gateway.settings.config(), server, wanted, change) {
            Some(change) => hand_to(tx, server, change),
            None => true,
        }
    })
    .await
}

/// Hands each change of `upstream` (from `changes`) to `take` until its connection ends,
/// or `gone` resolves or `take` says nobody listens any more.
async fn follow(
    upstream: &Upstream,
    changes: &mut tokio::sync::broadcast::Receiver<Value>,
    gone: impl Future<Output = ()>,
    mut take: impl FnMut(Value) -> bool,
) -> Stopped {
    let ended = upstream.ended();
    tokio::pin!(ended, gone);
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Ok(change) => {
                    if !take(change) {
                        return Stopped::ListenerGone;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return Stopped::InstanceGone,
            },
            _ = &mut ended => return Stopped::InstanceGone,
            _ = &mut gone => return Stopped::ListenerGone,
        }
    }
}

/// Queues `change` for a watcher; false when nobody receives any more. A watcher that
/// does not read is not waited for: past limits.maxBufferedNotifications a change is
/// dropped (one that missed a list change re-lists anyway).
fn hand_to(tx: &outbox::Sender, server: &str, change: Value) -> bool {
    match tx.try_send(change) {
        Ok(()) => true,
        Err(outbox::TrySendError::Full(_)) => {
            tracing::debug!(server, "a watcher is not reading: dropped a change (limits.maxBufferedNotifications)");
            true
        }
        Err(outbox::TrySendError::Closed(_)) => false,
    }
}

/// A change as the caller asked for it, or `None`: list changes of the kinds wanted, and
/// resource updates for a watched URI (or a resource under it), renamed to its public URI.
fn deliverable(config: &crate::Config, server: &str, wanted: &Wanted, mut change: Value) -> Option<Value> {
    let method = change["method"].as_str()?;
    if method != RESOURCE_UPDATED {
        return wanted.kinds.contains(&method).then_some(change);
    }
    let uri = change["params"]["uri"].as_str()?;
    let public = naming::public_uri(config, server, uri);
    let watched = wanted.resources.keys().any(|watched| is_under(watched, uri))
        || wanted
            .interest
            .as_ref()
            .is_some_and(|i| i.lock().expect("interest lock").iter().any(|w| is_under(w, &public)));
    if !watched {
        return None;
    }
    change["params"]["uri"] = public.into();
    Some(change)
}

/// Whether `uri` is the watched resource or one under it (an update may name a part).
fn is_under(watched: &str, uri: &str) -> bool {
    match uri.strip_prefix(watched) {
        Some("") => true,
        Some(rest) => watched.ends_with('/') || rest.starts_with(['/', '#', '?']),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{RelayedSubscriptions, is_under};

    /// A relayed subscription still being opened counts toward the node's limit, and ends
    /// (its task with it) when its session does; a replaced one ends too.
    #[tokio::test]
    async fn a_relayed_subscription_being_opened_counts_and_ends_with_its_session() {
        let subscriptions = RelayedSubscriptions::default();
        let (held, opening) = tokio::sync::oneshot::channel::<()>();
        let waiting = |held| {
            move |_| async move {
                let _held = held;
                std::future::pending::<()>().await
            }
        };
        assert!(subscriptions.start("s", "u1", 2, waiting(held)).is_some());
        assert!(subscriptions.start("t", "u2", 2, |_| std::future::pending()).is_some());
        let over = subscriptions.start("s", "u3", 2, |_| std::future::pending());
        assert!(over.is_none(), "the limit did not count a subscription being opened");
        subscriptions.end("s", None);
        assert!(opening.await.is_err(), "an ended session's subscription still runs");
        assert!(subscriptions.start("s", "u3", 2, |_| std::future::pending()).is_some());

        let (held, replaced) = tokio::sync::oneshot::channel::<()>();
        assert!(subscriptions.start("t", "u4", 9, waiting(held)).is_some());
        assert!(subscriptions.start("t", "u4", 9, |_| std::future::pending()).is_some());
        assert!(replaced.await.is_err(), "a replaced subscription still runs");
    }

    #[test]
    fn an_update_may_name_a_part_of_the_watched_resource() {
        assert!(is_under("file:///a/b", "file:///a/b"));
        assert!(is_under("file:///a/b", "file:///a/b/c.txt"));
        assert!(is_under("file:///a/", "file:///a/c.txt"));
        assert!(!is_under("file:///a/b", "file:///a/bc"));
        assert!(!is_under("file:///a/b", "file:///a"));
    }
}
