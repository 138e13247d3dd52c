//! Which node of a cluster owns an instance key: leases in a shared Redis.
//!
//! With `cluster` configured, a key that must live in one place (see [`Cluster::clusters`])
//! is served only by the node holding its lease. A lease is one Redis string,
//! `"<fence> <node> <url> <tag>"` (the tag: an HMAC of the node and URL under a key
//! from `cluster.secret`, so that only a node can name where requests go; a lease
//! without a valid tag is refused, never followed), set with a ttl (`cluster.leaseTtl`)
//! by a script that also
//! increments the key's fencing counter, so no two leases of a key ever carry the same
//! number. The owner renews each lease every third of the ttl by compare-and-renew (only
//! the exact value it wrote), releases it by compare-and-delete once its instance is gone,
//! and stops an instance whose lease it finds lost. A node also counts down each lease on
//! its own clock from when it sent the command that set it: once the lease may have run
//! out in Redis (a node cut off from Redis cannot tell whether another node took the key),
//! it serves nothing more through that instance and stops it. A key never has two live
//! owners.
//!
//! What this must never do: wait on Redis for a key this node already owns (those calls
//! go on while Redis is down), or wait longer than `cluster.redisTimeout` for anything.
//! It knows nothing of HTTP: the front end forwards a request to the owner it names.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use hmac::{Hmac, Mac};
use mcpx_upstream::Listener;
use redis::aio::ConnectionManager;
use sha2::{Digest, Sha256};

use crate::config::{ClusterConfig, GlobalPlacement};
use crate::pool::Pool;
use crate::scope::{InstanceKey, Owner};

/// Another node, as a lease names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    /// Its base URL: requests go to `<url>/mcp`.
    pub url: String,
}

/// What another node keeps for a caller, so that the caller's request must go there.
/// It names the request's subject in the caller's error when that node cannot be
/// reached: the error names the node by its id, never by its URL (an address inside
/// the cluster, which the node's log has).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kept {
    /// The instance of this server that serves the caller.
    Instance(String),
    /// What a first round of a call to this server left in one node's memory (a call
    /// held open, a login being waited for).
    Round(String),
    /// A task's record.
    Task,
    /// A legacy HTTP session.
    Session,
    /// A background call (`/v1/ask/begin`).
    Call,
}

impl Kept {
    /// The caller's error when `node`, which keeps this, cannot be reached or answers
    /// with no HTTP response.
    pub fn unreachable(&self, node: &str) -> String {
        let (what, then) = match self {
            Kept::Instance(server) => (
                format!("server {server:?}: the cluster node that owns this caller's instance ({node:?})"),
                "if that node is gone, the instance moves to a live node within cluster.leaseTtl: send the request again",
            ),
            Kept::Round(server) => (
                format!("server {server:?}: the cluster node that holds this call's first round ({node:?})"),
                "if that node is gone, so is what it held: make the call again",
            ),
            Kept::Task => {
                (format!("the cluster node that keeps this task ({node:?})"), "if that node is gone, so is the task")
            }
            Kept::Session => (
                format!("the cluster node that holds this session ({node:?})"),
                "if that node is gone, so is the session: initialize a new one",
            ),
            Kept::Call => (
                format!("the cluster node that runs this background call ({node:?})"),
                "if that node is gone, so is the call",
            ),
        };
        format!("{what} is unreachable; {then}")
    }
}

/// A request for one server that reached a node which cannot send it to the owner of its
/// instance whole (a script's `call()` inside `mcpx_exec`, a handshake-era session's
/// call, a caller on the node's own socket): the node relays just the upstream request to
/// the owner. It carries the key this node resolved for the caller and what of the
/// caller the owner's upstream is told; the caller's principal travels beside it, signed
/// by the sending node, its credentials never. What the caller hears while it runs
/// (progress, log messages, questions) goes back through the sending node, as far as
/// `listen` says the caller listens.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRequest {
    pub server: String,
    /// One of [`RELAYED`].
    pub method: String,
    /// The upstream's params, names already mapped, without `_meta`.
    pub params: serde_json::Value,
    /// The caller's `_meta`, less what mcpx owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
    /// The instance the request is for, as the sending node keyed it.
    pub owner: Owner,
    /// The caller's session, if it has one (but a local process's, whose pid means
    /// nothing on the owner's machine): what the owner's upstream is told of it (its
    /// invocation context's `sessionId`) is the same as where the caller landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<crate::identity::Session>,
    pub call_id: String,
    /// Where the caller works, for an instance keyed by a directory it named (its roots):
    /// where the owner starts that instance, as it would start where the caller landed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<std::path::PathBuf>,
    /// What the caller's host attested over its stdio, where the upstream gets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<serde_json::Map<String, serde_json::Value>>,
    /// What the caller hears while the request runs, when it listens: the owner sends it
    /// back before the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<Listening>,
}

/// What the caller of a relayed request listens for while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Listening {
    /// Its progress notifications (the caller sent a progress token, which stays with the
    /// node it landed on: the owner's notifications carry [`RELAYED_PROGRESS_TOKEN`]).
    #[serde(default)]
    pub progress: bool,
    /// Log messages from this level up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
    /// The caller's capabilities, when it can be asked questions (sampling, elicitation,
    /// roots): a handshake-era session's. The owner then runs the request as that
    /// session's, putting each question to the caller through the relaying node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asks: Option<serde_json::Value>,
}

/// The progress token an owner's notifications for a relayed request carry; the relaying
/// node puts its caller's own in its place.
pub const RELAYED_PROGRESS_TOKEN: &str = "relayed";

impl Listening {
    /// What a caller with `listener` and `capabilities` listens for.
    pub fn of(listener: &Listener, capabilities: &serde_json::Value) -> Listening {
        Listening {
            progress: listener.progress_token.is_some(),
            log_level: listener.log_level.clone(),
            asks: listener.ask.is_some().then(|| capabilities.clone()),
        }
    }
}

/// The methods a node relays to the owner of their instance as a [`NodeRequest`]: those
/// answered by one result. A legacy session's `resources/subscribe` is relayed apart, as
/// a stream of updates ([`Relay::watch`]).
pub const RELAYED: [&str; 4] = ["tools/call", "prompts/get", "resources/read", "completion/complete"];

/// How a node sends a [`NodeRequest`] to another node: the front end, which speaks HTTP to
/// the other nodes, provides it when it joins the cluster. The answer is the upstream's
/// result (at most `limit` bytes of it), or the error the owner answered, or why the
/// owner could not be reached or did not answer within `patience` (not counting the time
/// `listener`'s caller takes to answer the owner's questions).
pub trait Relay: Send + Sync {
    fn send<'a>(
        &'a self,
        node: &'a Node,
        principal: &'a crate::Principal,
        request: &'a NodeRequest,
        limit: usize,
        patience: Duration,
        listener: Option<&'a Listener>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<serde_json::Value, crate::Error>> + Send + 'a>>;

    /// Subscribes a caller to a resource of an instance `node` owns (`request` is its
    /// `resources/subscribe`): the owner's answer (within `patience`), and what hands
    /// `deliver` each update the owner sends for it, for as long as the owner keeps it up
    /// (until its instance ends) or it runs.
    fn watch<'a>(
        &'a self,
        node: &'a Node,
        principal: &'a crate::Principal,
        request: &'a NodeRequest,
        limit: usize,
        patience: Duration,
        deliver: Arc<dyn Fn(serde_json::Value) + Send + Sync>,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Subscribed, crate::Error>> + Send + 'a>>;
}

/// A relayed subscription's updates, passed on while it runs (see [`Relay::watch`]).
pub type Watching = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// The owner's answer to a relayed subscription, and its updates to come.
pub type Subscribed = (serde_json::Value, Watching);

/// Who serves a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This node: it holds the lease (or just took it), under this fencing token.
    Mine { fence: u64 },
    /// Another node holds the lease.
    Elsewhere(Node),
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "the cluster's Redis is unreachable ({0}): only instances this node already owns can be used until it is back"
    )]
    Unreachable(String),
    #[error("the cluster's Redis answered something unexpected: {0}")]
    Protocol(String),
}

/// A lease this node holds.
struct Held {
    key: InstanceKey,
    /// The exact value written: renewal and release compare against it.
    value: String,
    fence: u64,
    /// Until when this node may serve the key: a lease's ttl from when the command that set
    /// it was sent, less a tenth for the clocks' drift (Redis counts from when it ran it,
    /// later).
    until: Instant,
    /// Renewal ticks in a row that found no instance for the key in the pool.
    absent: u8,
}

/// A key whose previous owner went away without releasing it: its upstream's state is
/// gone. Shown once in the log and kept for `/v1/status`.
#[derive(Clone, Debug)]
pub struct Recovered {
    pub key: InstanceKey,
    pub previous: String,
    pub fence: u64,
    pub at: SystemTime,
}

/// What `/v1/status` shows of the cluster.
#[derive(Clone, Debug)]
pub struct ClusterStatus {
    pub node: String,
    pub url: String,
    pub lease_ttl: Duration,
    /// Leases held: the key and its fencing token.
    pub leases: Vec<(InstanceKey, u64)>,
    pub recovered: Vec<Recovered>,
    /// The last Redis failure, while it lasts.
    pub redis_error: Option<String>,
}

type HmacSha256 = Hmac<Sha256>;

/// Most recovered keys kept for the status.
const RECOVERED_KEPT: usize = 100;

/// Takes a free lease (or one this node's previous life left), and notes the node
/// that held the key before. KEYS: lease, fence, last owner. ARGV: node, url, ttl ms,
/// the tag of the node and url.
const CLAIM: &str = r"
local current = redis.call('GET', KEYS[1])
if current then
  local node = string.match(current, '^%d+ (%S+) ')
  if node ~= ARGV[1] then return {0, current, ''} end
end
local fence = redis.call('INCR', KEYS[2])
local value = fence .. ' ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[4]
redis.call('SET', KEYS[1], value, 'PX', ARGV[3])
local previous = redis.call('GET', KEYS[3]) or ''
redis.call('SET', KEYS[3], ARGV[1])
return {1, value, previous}
";

/// Extends a lease only if it still holds the value written. KEYS: lease. ARGV: value, ttl ms.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// Deletes a lease only if it still holds the value written, and the note of its owner
/// (a clean end). KEYS: lease, last owner. ARGV: value.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// The live nodes: a sorted set of `"<node> <url> <tag>"`, each scored with when it
/// lapses (unix ms) unless its node announces itself again.
const NODES_KEY: &str = "mcpx:nodes";

/// Announces a node until ARGV[2] (unix ms), and forgets every node lapsed by ARGV[3].
/// KEYS: the nodes. ARGV: the member, its expiry, now.
const ANNOUNCE: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
return redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
";

/// Keeps a task's record (KEYS[1]) as ARGV[1] for ARGV[2] ms, and its id ARGV[3] in its
/// caller's index (KEYS[2]) scored with when the record lapses (now is ARGV[4]); forgets
/// the index's lapsed ids, and keeps the index as long as its longest-lived task.
const KEEP_TASK: &str = r"
local lapses = tonumber(ARGV[4]) + tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], lapses, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 1
";

/// Who this node is in its cluster, with `${NAME}`s in the config read from the environment.
pub struct Joining {
    pub node: String,
    /// The base URL the other nodes reach this node at.
    pub url: String,
    pub secret: String,
    pub cluster: Cluster,
}

impl Joining {
    /// From the `cluster` section: the node id defaults to the host name, the URL to
    /// `listening` (the base URL this daemon listens on).
    pub fn new(config: &ClusterConfig, listening: &str) -> Result<Joining, String> {
        let expand = |key: &str, value: &str| {
            crate::config::expand_env(value)
                .map_err(|var| format!("cluster.{key}: ${{{var}}} is not set in the daemon's environment"))
        };
        let secret = expand("secret", &config.secret)?;
        if secret.len() < 32 {
            return Err("cluster.secret must be at least 32 characters".into());
        }
        let redis = expand("redis", &config.redis)?;
        let node = match &config.node_id {
            Some(id) => id.clone(),
            None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .ok()
                .filter(|h| !h.is_empty())
                .ok_or("cluster.nodeId is not set and the host name cannot be read")?,
        };
        let url = match &config.url {
            Some(url) => expand("url", url)?,
            None => listening.to_owned(),
        };
        let url = url.trim_end_matches('/').to_owned();
        let config = ClusterConfig { redis, secret: secret.clone(), ..config.clone() };
        let cluster = Cluster::new(&config, node.clone(), url.clone()).map_err(|e| e.to_string())?;
        Ok(Joining { node, url, secret, cluster })
    }
}

pub struct Cluster {
    node: String,
    url: String,
    ttl: Duration,
    global: GlobalPlacement,
    timeout: Duration,
    pub(crate) redis: ConnectionManager,
    /// Tags the node and URL a lease names, so that a lease no node wrote (someone else
    /// who can write to Redis) never sends a request anywhere.
    tag_key: [u8; 32],
    /// Leases held, by their Redis key.
    held: Mutex<HashMap<String, Held>>,
    /// One claim at a time on this node: two first callers of one key must not both
    /// find it free (the second waits, then finds it held).
    claiming: tokio::sync::Mutex<()>,
    recovered: Mutex<VecDeque<Recovered>>,
    redis_error: Mutex<Option<String>>,
    scripts: Scripts,
    /// Seals what any node must be able to open (`requestState`, task ids): from the secret.
    state_key: [u8; 32],
    /// Seals the OAuth credentials kept in Redis: from the secret.
    credentials_key: [u8; 32],
    /// Signs the tasks' last states kept in Redis: from the secret.
    task_key: [u8; 32],
}

struct Scripts {
    claim: redis::Script,
    renew: redis::Script,
    release: redis::Script,
    announce: redis::Script,
    keep_task: redis::Script,
}

impl Cluster {
    /// A node of the cluster `config` describes, reached by others at `url` (base URL),
    /// sharing `secret` with them. Connects lazily: a Redis that is down does not stop
    /// the daemon from starting.
    pub fn new(config: &ClusterConfig, node: String, url: String) -> Result<Cluster, ClusterError> {
        let client = redis::Client::open(config.redis.as_str()).map_err(|e| ClusterError::Protocol(e.to_string()))?;
        let manager = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.redis_timeout))
            .set_response_timeout(Some(config.redis_timeout))
            .set_number_of_retries(1)
            .set_max_delay(config.redis_timeout);
        let redis = ConnectionManager::new_lazy_with_config(client, manager)
            .map_err(|e| ClusterError::Unreachable(e.to_string()))?;
        Ok(Cluster {
            node,
            url,
            ttl: config.lease_ttl,
            global: config.global,
            timeout: config.redis_timeout,
            redis,
            tag_key: derive(&config.secret, "mcpx lease values"),
            held: Mutex::default(),
            claiming: tokio::sync::Mutex::new(()),
            recovered: Mutex::default(),
            redis_error: Mutex::default(),
            scripts: Scripts {
                claim: redis::Script::new(CLAIM),
                renew: redis::Script::new(RENEW),
                release: redis::Script::new(RELEASE),
                announce: redis::Script::new(ANNOUNCE),
                keep_task: redis::Script::new(KEEP_TASK),
            },
            state_key: derive(&config.secret, "mcpx request state sealing"),
            credentials_key: derive(&config.secret, "mcpx oauth credentials sealing"),
            task_key: derive(&config.secret, "mcpx task records"),
        })
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// How long a lease lasts unrenewed (`cluster.leaseTtl`, as this node runs with it).
    pub fn lease_ttl(&self) -> Duration {
        self.ttl
    }

    /// This node as the others reach it.
    pub fn me(&self) -> Node {
        Node { id: self.node.clone(), url: self.url.clone() }
    }

    /// The key every node of the cluster seals `requestState`s and task ids with.
    pub(crate) fn state_key(&self) -> [u8; 32] {
        self.state_key
    }

    /// The key every node of the cluster seals the OAuth credentials it keeps in Redis with.
    pub(crate) fn credentials_key(&self) -> [u8; 32] {
        self.credentials_key
    }

    /// Whether `key` has one owner in the cluster. A process on this machine (`pid`, its
    /// session, and a directory it works in: a path of this machine, keyed with this
    /// node), one call, and the listing-only `lister` are local by nature; `global` is
    /// local too when `cluster.global` is `per-node`.
    pub fn clusters(&self, key: &InstanceKey) -> bool {
        match &key.owner {
            Owner::Pid(_) | Owner::Call(_) | Owner::Lister(_) => false,
            Owner::Session(session) if session.process().is_some() => false,
            Owner::Cwd(place) | Owner::Repo(place) | Owner::Worktree(place) if place.node.is_some() => false,
            Owner::Everyone => self.global == GlobalPlacement::PerCluster,
            _ => true,
        }
    }

    /// Who serves `key`: this node if it holds the lease (no Redis involved), else
    /// whoever Redis names, taking the lease for this node when it is free.
    pub async fn claim(&self, key: &InstanceKey) -> Result<Claim, ClusterError> {
        let lease = lease_key(key);
        if let Some(fence) = self.fence_of(&lease) {
            return Ok(Claim::Mine { fence });
        }
        // One claim at a time, but never a wait longer than one Redis command's: while
        // Redis is silent, requests must fail at once, not queue.
        let _one = tokio::time::timeout(self.timeout, self.claiming.lock())
            .await
            .map_err(|_| ClusterError::Unreachable(format!("no lease taken within {:?}", self.timeout)))?;
        if let Some(fence) = self.fence_of(&lease) {
            return Ok(Claim::Mine { fence });
        }
        let mut invocation = self.scripts.claim.prepare_invoke();
        invocation
            .key(&lease)
            .key(format!("mcpx:fence:{}", &lease[11..]))
            .key(format!("mcpx:last:{}", &lease[11..]))
            .arg(&self.node)
            .arg(&self.url)
            .arg(self.ttl.as_millis() as u64)
            .arg(self.tag(&self.node, &self.url));
        let mut redis = self.redis.clone();
        let sent = Instant::now();
        let (won, value, previous): (i64, String, String) = self.timed(invocation.invoke_async(&mut redis)).await?;
        let (fence, node, url, tag) = parse_lease(&value).ok_or_else(|| ClusterError::Protocol(value.clone()))?;
        if !constant_eq(self.tag(node, url).as_bytes(), tag.as_bytes()) {
            tracing::error!(instance = %key, node, url, "a lease in Redis was not written by a node of this cluster");
            return Err(ClusterError::Protocol(format!(
                "the lease of this instance names node {node:?}, but no node of this cluster wrote it (its tag does not match cluster.secret): nothing is sent there"
            )));
        }
        if won == 0 {
            return Ok(Claim::Elsewhere(Node { id: node.to_owned(), url: url.to_owned() }));
        }
        if !previous.is_empty() {
            tracing::warn!(
                instance = %key,
                previous_owner = previous,
                fence,
                "took over an instance whose owner went away without releasing it: the upstream's in-memory state is lost and it starts afresh here"
            );
            let mut recovered = self.recovered.lock().expect("cluster lock");
            if recovered.len() == RECOVERED_KEPT {
                recovered.pop_front();
            }
            recovered.push_back(Recovered { key: key.clone(), previous, fence, at: SystemTime::now() });
        }
        let until = self.lasts_from(sent);
        if until <= Instant::now() {
            return Err(ClusterError::Unreachable(format!(
                "Redis answered later than the lease it gave lasts ({:?})",
                self.ttl
            )));
        }
        tracing::debug!(instance = %key, fence, "took the lease");
        let held = Held { key: key.clone(), value, fence, until, absent: 0 };
        self.held.lock().expect("cluster lock").insert(lease, held);
        Ok(Claim::Mine { fence })
    }

    /// The tag of a lease naming `node` at `url`, hex.
    fn tag(&self, node: &str, url: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.tag_key).expect("any key length");
        mac.update(node.as_bytes());
        mac.update(b"\n");
        mac.update(url.as_bytes());
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The fencing token of `lease`, when this node holds it and it cannot have run out in
    /// Redis yet.
    fn fence_of(&self, lease: &str) -> Option<u64> {
        let now = Instant::now();
        self.held.lock().expect("cluster lock").get(lease).filter(|held| held.until > now).map(|held| held.fence)
    }

    /// Until when a lease set by a command sent at `sent` is surely still this node's.
    fn lasts_from(&self, sent: Instant) -> Instant {
        sent + self.ttl - self.ttl / 10
    }

    /// Why Redis did not answer the last command sent to it, while that lasts (the lease
    /// upkeep tries again every third of the ttl and clears it).
    pub(crate) fn redis_down(&self) -> Option<String> {
        self.redis_error.lock().expect("cluster lock").clone()
    }

    /// Runs one Redis command within `cluster.redisTimeout`, noting whether Redis answered.
    pub(crate) async fn timed<T>(
        &self,
        command: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, ClusterError> {
        let outcome = match tokio::time::timeout(self.timeout, command).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e))
                if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() =>
            {
                Err(ClusterError::Unreachable(e.to_string()))
            }
            Ok(Err(e)) => Err(ClusterError::Protocol(e.to_string())),
            Err(_) => Err(ClusterError::Unreachable(format!("no answer within {:?}", self.timeout))),
        };
        let mut last = self.redis_error.lock().expect("cluster lock");
        match &outcome {
            Ok(_) if last.is_some() => {
                tracing::info!("the cluster's Redis answers again");
                *last = None;
            }
            Err(e) if last.is_none() => {
                tracing::warn!("{e}");
                *last = Some(e.to_string());
            }
            _ => {}
        }
        outcome
    }

    /// One round of upkeep: renews each lease whose instance is in `pool`, releases those
    /// whose instance has been gone two rounds in a row, and stops the instance of a lease
    /// found lost (another node took the key after this one could not renew it in time) or
    /// that could not be renewed and would run out before the next round. The leases'
    /// commands go out together, so a Redis that does not answer costs one
    /// `cluster.redisTimeout`, not one per lease.
    pub async fn upkeep(&self, pool: &Pool) {
        // Also whether Redis is back, even for a node that holds no lease: what skips
        // Redis while it is down (reading OAuth credentials) looks at this.
        let round = Instant::now();
        self.announce().await;
        let leases: Vec<(String, InstanceKey, String, bool)> = {
            let mut held = self.held.lock().expect("cluster lock");
            held.iter_mut()
                .map(|(lease, h)| {
                    h.absent = if pool.holds(&h.key) { 0 } else { h.absent.saturating_add(1) };
                    (lease.clone(), h.key.clone(), h.value.clone(), h.absent >= 2)
                })
                .collect()
        };
        let rounds = leases.into_iter().map(|(lease, key, value, gone)| async move {
            if gone {
                let mut invocation = self.scripts.release.prepare_invoke();
                invocation.key(&lease).key(format!("mcpx:last:{}", &lease[11..])).arg(&value);
                let mut redis = self.redis.clone();
                if self.timed(invocation.invoke_async::<i64>(&mut redis)).await.is_ok() {
                    tracing::debug!(instance = %key, "released the lease of a stopped instance");
                    let mut held = self.held.lock().expect("cluster lock");
                    // Unless a claim took the key again meanwhile, under a new value.
                    if held.get(&lease).is_some_and(|h| h.value == value) {
                        held.remove(&lease);
                    }
                }
                return;
            }
            let mut invocation = self.scripts.renew.prepare_invoke();
            invocation.key(&lease).arg(&value).arg(self.ttl.as_millis() as u64);
            let mut redis = self.redis.clone();
            let sent = Instant::now();
            let renewed = self.timed(invocation.invoke_async::<i64>(&mut redis)).await;
            let mut held = self.held.lock().expect("cluster lock");
            let Some(h) = held.get_mut(&lease).filter(|h| h.value == value) else { return };
            match renewed {
                Ok(1) => h.until = self.lasts_from(sent),
                Ok(_) => {
                    tracing::error!(
                        instance = %key,
                        "lost the lease (another node owns the key now): stopping this node's instance"
                    );
                    held.remove(&lease);
                    pool.evict_key(&key);
                }
                // Unreachable: keep serving what this node owns while its lease lasts;
                // beyond that another node may have taken the key. The next round starts
                // an upkeep interval after this one did (or now, if this one ran longer),
                // and its renewal goes out after its announcement: up to two Redis timeouts
                // later.
                Err(_) if h.until <= (round + self.upkeep_every()).max(Instant::now()) + 2 * self.timeout => {
                    tracing::error!(
                        instance = %key,
                        "could not renew the lease before it runs out (Redis unreachable): stopping this node's instance, as another node may take the key"
                    );
                    held.remove(&lease);
                    pool.evict_key(&key);
                }
                Err(_) => {}
            }
        });
        futures::future::join_all(rounds).await;
    }

    /// Tells the other nodes this one is live until a ttl from now (`upkeep` renews it
    /// every third of that).
    async fn announce(&self) {
        let now = unix_ms();
        let mut invocation = self.scripts.announce.prepare_invoke();
        invocation.key(NODES_KEY).arg(self.member()).arg(now + self.ttl.as_millis() as u64).arg(now);
        let mut redis = self.redis.clone();
        let _ = self.timed(invocation.invoke_async::<i64>(&mut redis)).await;
    }

    /// This node as the set of live nodes lists it.
    fn member(&self) -> String {
        format!("{} {} {}", self.node, self.url, self.tag(&self.node, &self.url))
    }

    /// The other live nodes of the cluster: each announced itself within a ttl. An entry
    /// no node wrote (its tag does not match) is left out, and logged: nothing is sent
    /// where it says.
    pub async fn other_nodes(&self) -> Result<Vec<Node>, ClusterError> {
        let mut redis = self.redis.clone();
        let mut command = redis::cmd("ZRANGEBYSCORE");
        command.arg(NODES_KEY).arg(unix_ms()).arg("+inf");
        let members: Vec<String> = self.timed(command.query_async(&mut redis)).await?;
        let mut nodes = Vec::new();
        for member in members {
            let mut parts = member.split(' ');
            let (Some(node), Some(url), Some(tag), None) = (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                tracing::error!(member, "an unreadable entry in the cluster's set of live nodes");
                continue;
            };
            if !constant_eq(self.tag(node, url).as_bytes(), tag.as_bytes()) {
                tracing::error!(
                    node,
                    url,
                    "an entry in the set of live nodes was not written by a node of this cluster"
                );
                continue;
            }
            if node != self.node {
                nodes.push(Node { id: node.to_owned(), url: url.to_owned() });
            }
        }
        Ok(nodes)
    }

    /// Whether `node` is live: it announced itself within a ttl (and has not stopped).
    pub async fn is_live(&self, node: &Node) -> Result<bool, ClusterError> {
        let member = format!("{} {} {}", node.id, node.url, self.tag(&node.id, &node.url));
        let mut redis = self.redis.clone();
        let mut command = redis::cmd("ZSCORE");
        command.arg(NODES_KEY).arg(member);
        let lapses: Option<f64> = self.timed(command.query_async(&mut redis)).await?;
        Ok(lapses.is_some_and(|at| at >= unix_ms() as f64))
    }

    /// Keeps `record` (a task's last state, JSON) as task `id`'s for `ttl`, signed so that
    /// whoever else writes to Redis cannot make a node answer with a record of its own;
    /// and `id` among the tasks of `owner` (the caller it was handed to) for as long, so
    /// that a listing finds it once its node is gone.
    pub(crate) async fn keep_task(
        &self,
        id: &str,
        owner: &str,
        record: &str,
        ttl: Duration,
    ) -> Result<(), ClusterError> {
        let value = format!("{} {record}", self.task_tag(id, record));
        let mut invocation = self.scripts.keep_task.prepare_invoke();
        invocation.key(task_name(id)).key(self.tasks_of_name(owner));
        invocation.arg(value).arg(ttl.as_millis().max(1) as u64).arg(id).arg(unix_ms());
        let mut redis = self.redis.clone();
        self.timed(invocation.invoke_async::<i64>(&mut redis)).await.map(drop)
    }

    /// The ids of the tasks handed to `owner` whose records are kept (see
    /// [`Cluster::keep_task`]), at most `limit` of them. Only ids: whoever writes to Redis
    /// can add any, and each is believed only once opened for the caller and its record
    /// checked.
    pub(crate) async fn task_ids_of(&self, owner: &str, limit: usize) -> Result<Vec<String>, ClusterError> {
        let mut redis = self.redis.clone();
        let mut command = redis::cmd("ZRANGE");
        command.arg(self.tasks_of_name(owner)).arg(unix_ms()).arg("+inf").arg("BYSCORE").arg("LIMIT").arg(0).arg(limit);
        self.timed(command.query_async(&mut redis)).await
    }

    /// Task `id`'s last state as a node kept it (see [`Cluster::keep_task`]), if one did.
    /// A value no node signed counts as none, and is logged.
    pub(crate) async fn kept_task(&self, id: &str) -> Result<Option<String>, ClusterError> {
        let mut redis = self.redis.clone();
        let value: Option<String> = self.timed(redis::cmd("GET").arg(task_name(id)).query_async(&mut redis)).await?;
        let Some((tag, record)) = value.as_deref().and_then(|v| v.split_once(' ')) else { return Ok(None) };
        if !constant_eq(self.task_tag(id, record).as_bytes(), tag.as_bytes()) {
            tracing::error!("a task record in the cluster's Redis was not written by a node of this cluster: ignored");
            return Ok(None);
        }
        Ok(Some(record.to_owned()))
    }

    /// Where the ids of the tasks handed to `owner` are kept: a keyed digest of the owner
    /// (a session or a principal), which stays out of Redis's key space and cannot be
    /// guessed from it.
    fn tasks_of_name(&self, owner: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.task_key).expect("any key length");
        mac.update(b"tasks of\n");
        mac.update(owner.as_bytes());
        hex_name("mcpx:tasks-of:", &mac.finalize().into_bytes())
    }

    fn task_tag(&self, id: &str, record: &str) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.task_key).expect("any key length");
        mac.update(id.as_bytes());
        mac.update(b"\n");
        mac.update(record.as_bytes());
        hex_name("", &mac.finalize().into_bytes())
    }

    /// Releases every lease (the daemon is stopping and its instances are gone).
    pub async fn release_all(&self) {
        let mut redis = self.redis.clone();
        let _ = self.timed(redis::cmd("ZREM").arg(NODES_KEY).arg(self.member()).query_async::<i64>(&mut redis)).await;
        let held: Vec<(String, String)> =
            self.held.lock().expect("cluster lock").drain().map(|(lease, h)| (lease, h.value)).collect();
        for (lease, value) in held {
            let mut invocation = self.scripts.release.prepare_invoke();
            invocation.key(&lease).key(format!("mcpx:last:{}", &lease[11..])).arg(&value);
            let mut redis = self.redis.clone();
            let _ = self.timed(invocation.invoke_async::<i64>(&mut redis)).await;
        }
    }

    pub fn status(&self) -> ClusterStatus {
        let mut leases: Vec<(InstanceKey, u64)> =
            self.held.lock().expect("cluster lock").values().map(|h| (h.key.clone(), h.fence)).collect();
        leases.sort_by_cached_key(|(k, _)| k.to_string());
        ClusterStatus {
            node: self.node.clone(),
            url: self.url.clone(),
            lease_ttl: self.ttl,
            leases,
            recovered: self.recovered.lock().expect("cluster lock").iter().cloned().collect(),
            redis_error: self.redis_error.lock().expect("cluster lock").clone(),
        }
    }

    /// How often leases are renewed: a third of the ttl.
    pub fn upkeep_every(&self) -> Duration {
        self.ttl / 3
    }
}

/// Renews and releases leases every third of the ttl until the gateway is gone.
pub(crate) async fn keep_leases(cluster: Arc<Cluster>, gateway: Weak<crate::Gateway>) {
    let mut tick = tokio::time::interval(cluster.upkeep_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(gateway) = gateway.upgrade() else { return };
        let pool = gateway.instances.pool.clone();
        drop(gateway);
        cluster.upkeep(&pool).await;
    }
}

/// `mcpx:lease:` and a digest of the key: keys hold paths and principals, which stay out
/// of Redis's key space.
fn lease_key(key: &InstanceKey) -> String {
    digest_name("mcpx:lease:", &serde_json::to_vec(key).expect("an instance key serializes"))
}

/// Where task `id`'s last state is kept: a digest of the id, which is the caller's to hold.
fn task_name(id: &str) -> String {
    digest_name("mcpx:task:", id.as_bytes())
}

/// `prefix` and the SHA-256 of `bytes`, in hex.
fn digest_name(prefix: &str, bytes: &[u8]) -> String {
    hex_name(prefix, &Sha256::digest(bytes))
}

/// `prefix` and `digest` in hex.
fn hex_name(prefix: &str, digest: &[u8]) -> String {
    let mut out = String::with_capacity(prefix.len() + 2 * digest.len());
    out.push_str(prefix);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A 32-byte key for one purpose, from the cluster's secret.
fn derive(secret: &str, purpose: &str) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

/// `"<fence> <node> <url> <tag>"`.
fn parse_lease(value: &str) -> Option<(u64, &str, &str, &str)> {
    let (rest, tag) = value.rsplit_once(' ')?;
    let mut parts = rest.splitn(3, ' ');
    let fence = parts.next()?.parse().ok()?;
    Some((fence, parts.next()?, parts.next()?, tag))
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Equality that takes as long whichever byte differs.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Principal, Session, SessionKey};

    #[test]
    fn a_lease_names_its_fence_node_and_url_and_keys_stay_out_of_redis_key_names() {
        assert_eq!(
            parse_lease("7 node-a http://10.0.0.5:7750 0a1b"),
            Some((7, "node-a", "http://10.0.0.5:7750", "0a1b"))
        );
        assert_eq!(parse_lease("x node-a url tag"), None);
        assert_eq!(parse_lease("7 node-a http://10.0.0.5:7750"), None, "no tag");
        let key = InstanceKey {
            server: "git".into(),
            owner: Owner::Session(SessionKey {
                principal: Principal::Token("alice".into()),
                session: Session::Named("work".into()),
            }),
        };
        let lease = lease_key(&key);
        assert!(lease.starts_with("mcpx:lease:") && lease.len() == 11 + 64, "{lease}");
        assert!(!lease.contains("alice") && !lease.contains("work"));
        let other = InstanceKey { server: "git".into(), owner: Owner::Everyone };
        assert_ne!(lease, lease_key(&other));
    }
}
