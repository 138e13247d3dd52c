//! When an upstream needs an answer from its caller: the 2026-07-28 `input_required`
//! round trip, relayed between a stateless caller and a stateless upstream.
//!
//! The caller never sees the upstream's `requestState`. mcpx hands it a state of its own,
//! integrity-protected (HMAC-SHA256 with a key that never leaves the daemon; in a cluster,
//! a key every node derives from `cluster.secret`, so any node can open it), that binds
//! the server and instance the question came from, the caller's session, an expiry and a
//! digest of the original request, and carries the upstream's state inside. On the retry
//! mcpx checks all of it: a state that was tampered with, has expired, comes from another
//! session or belongs to another request is refused with -32602; a good one sends the
//! retry to the same instance with the upstream's own state.
//!
//! A handshake-era caller cannot take `input_required`; for it the gateway asks each
//! question as a real request on the caller's session and retries on its behalf.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::cluster::Node;
use crate::context::CallContext;
use crate::scope::{InstanceKey, Owner};

/// The methods that may answer `input_required`.
pub const METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// Most rounds of questions mcpx answers for one handshake-era caller's request.
pub const MAX_ROUNDS: usize = 8;

/// Whether a caller with these capabilities can be asked a question of this kind.
pub fn caller_can_answer(capabilities: &Value, method: &str) -> bool {
    let needed = match method {
        "sampling/createMessage" => "sampling",
        "elicitation/create" => "elicitation",
        "roots/list" => "roots",
        _ => return false,
    };
    capabilities.get(needed).is_some_and(|c| !c.is_null())
}

pub fn is_input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}

/// Fields of a retry that are not part of the original request.
const RETRY_FIELDS: [&str; 3] = ["_meta", "inputResponses", "requestState"];

pub struct Asks {
    /// This daemon's own key, random at each start.
    key: [u8; 32],
    /// In a cluster: the key every node shares, and this node (named in what it seals, so
    /// a retry that needs what only this node holds comes back here).
    cluster: std::sync::OnceLock<([u8; 32], Node)>,
}

/// Where a retry goes, from the state mcpx gave the caller.
#[derive(Debug, PartialEq)]
pub struct Resume {
    /// The instance that asked; `None` for a question mcpx asked itself (roots).
    pub instance: Option<Owner>,
    pub upstream_state: Option<Value>,
    /// The call id of the first round: every round of one logical call carries it.
    pub call_id: String,
    /// The cluster node that sealed the state; `None` outside a cluster.
    pub node: Option<Node>,
}

/// Who put a question to the caller: an instance of a server, or mcpx itself on the
/// server's behalf (its roots question), which no instance asked.
#[derive(Clone, Copy)]
pub struct Asker<'a> {
    pub server: &'a str,
    pub instance: Option<&'a Owner>,
}

impl<'a> Asker<'a> {
    pub fn instance(key: &'a InstanceKey) -> Asker<'a> {
        Asker { server: &key.server, instance: Some(&key.owner) }
    }

    pub fn gateway(server: &'a str) -> Asker<'a> {
        Asker { server, instance: None }
    }
}

impl Default for Asks {
    fn default() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source is available");
        Asks { key, cluster: std::sync::OnceLock::new() }
    }
}

impl Asks {
    /// Seals and opens with `key`, shared by every node of this node's cluster, from now on.
    pub fn join_cluster(&self, key: [u8; 32], node: Node) {
        let _ = self.cluster.set((key, node));
    }

    fn key(&self) -> &[u8; 32] {
        self.cluster.get().map_or(&self.key, |(key, _)| key)
    }

    /// This node, for what it seals: its id and URL encrypted under the cluster's key
    /// (the caller holds what is sealed, and must not learn an address inside the
    /// cluster), covered by the seal's tag like the rest.
    fn node(&self) -> Option<Value> {
        self.cluster.get().map(|(key, node)| {
            let mut nonce = [0u8; 16];
            getrandom::fill(&mut nonce).expect("the OS random source is available");
            let plain = format!("{}\n{}", node.id, node.url);
            let mut sealed = nonce.to_vec();
            sealed.extend(node_stream(key, &nonce, plain.len()).iter().zip(plain.as_bytes()).map(|(k, p)| k ^ p));
            Value::String(B64.encode(sealed))
        })
    }

    /// The node a sealed payload names (see [`Asks::node`]); `None` outside a cluster.
    /// The payload's tag was checked: nobody but a node of the cluster wrote it.
    fn node_in(&self, payload: &Value) -> Option<Node> {
        let (key, _) = self.cluster.get()?;
        let sealed = B64.decode(payload["node"].as_str()?).ok()?;
        let (nonce, cipher) = sealed.split_at_checked(16)?;
        let plain: Vec<u8> = node_stream(key, nonce, cipher.len()).iter().zip(cipher).map(|(k, c)| k ^ c).collect();
        let (id, url) = std::str::from_utf8(&plain).ok()?.split_once('\n')?;
        Some(Node { id: id.to_owned(), url: url.to_owned() })
    }

    /// The state the caller gets for a question from `asker` about `params`.
    pub fn seal(
        &self,
        asker: Asker<'_>,
        ctx: &CallContext,
        method: &str,
        params: &Value,
        upstream_state: Option<Value>,
        lifetime: Duration,
    ) -> String {
        let payload = json!({
            "v": 1,
            "server": asker.server,
            "instance": asker.instance,
            "owner": ctx.identity.owner_key(),
            "expires": now_ms() + lifetime.as_millis() as u64,
            "request": digest(method, params),
            "call": ctx.call_id,
            "state": upstream_state,
            "node": self.node(),
        });
        let body = B64.encode(payload.to_string());
        let tag = B64.encode(self.mac(body.as_bytes()));
        format!("{body}.{tag}")
    }

    /// Checks a state the caller sent back with its retry of `params` to `server`.
    pub fn open(
        &self,
        state: &str,
        server: &str,
        ctx: &CallContext,
        method: &str,
        params: &Value,
    ) -> Result<Resume, Error> {
        self.checked(state, server, ctx, Some((method, params)))
    }

    /// Where a retry to `server` carrying `state` goes on, for a node deciding which node
    /// answers it: every check but the request's (the request as the caller sent it is not
    /// yet the one sent upstream). The node that answers opens it fully.
    pub fn route(&self, state: &str, server: &str, ctx: &CallContext) -> Option<Resume> {
        self.checked(state, server, ctx, None).ok()
    }

    fn checked(
        &self,
        state: &str,
        server: &str,
        ctx: &CallContext,
        request: Option<(&str, &Value)>,
    ) -> Result<Resume, Error> {
        let refuse = |why: &str| Error::params(format!("requestState refused: {why}"));
        let (body, tag) = state.split_once('.').ok_or_else(|| refuse("not a state mcpx issued"))?;
        let tag = B64.decode(tag).map_err(|_| refuse("not a state mcpx issued"))?;
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key()).expect("HMAC takes any key length");
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).map_err(|_| refuse("it was altered"))?;
        let payload: Value = B64
            .decode(body)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| refuse("not a state mcpx issued"))?;
        if payload["expires"].as_u64().is_none_or(|t| t < now_ms()) {
            return Err(refuse("it expired; send the request again without it"));
        }
        if payload["server"] != server {
            return Err(refuse("it belongs to another server"));
        }
        if payload["owner"] != ctx.identity.owner_key() {
            return Err(refuse("it belongs to another session"));
        }
        if request.is_some_and(|(method, params)| payload["request"] != digest(method, params)) {
            return Err(refuse("it belongs to another request"));
        }
        let instance =
            serde_json::from_value(payload["instance"].clone()).map_err(|_| refuse("not a state mcpx issued"))?;
        let upstream_state = Some(payload["state"].clone()).filter(|s| !s.is_null());
        let call_id = payload["call"].as_str().ok_or_else(|| refuse("not a state mcpx issued"))?.to_owned();
        let node = self.node_in(&payload);
        Ok(Resume { instance, upstream_state, call_id, node })
    }

    /// The task id a caller gets for a task `instance` of `server` runs for it, good until
    /// `expires_ms` (ms since the epoch). Sealed like a `requestState`, but of another kind,
    /// so neither passes for the other.
    pub fn seal_task(&self, server: &str, instance: &Owner, ctx: &CallContext, expires_ms: u64) -> String {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        let payload = json!({
            "v": 1,
            "kind": "task",
            "server": server,
            "instance": instance,
            "owner": ctx.identity.owner_key(),
            "expires": expires_ms,
            "n": B64.encode(nonce),
            "node": self.node(),
        });
        let body = B64.encode(payload.to_string());
        let tag = B64.encode(self.mac(body.as_bytes()));
        format!("{body}.{tag}")
    }

    /// Whether `id` is a task id mcpx issued to this caller that has not expired, and for
    /// which server and instance. One answer (`None`) for every other case, so a caller
    /// learns nothing of another's tasks.
    pub fn open_task(&self, id: &str, ctx: &CallContext) -> Option<(String, Owner)> {
        self.opened_task(id, ctx).map(|(server, instance, _)| (server, instance))
    }

    /// The cluster node that keeps the record of task `id` (the node that sealed it), when
    /// the id is this caller's; `None` outside a cluster and for every id [`Asks::open_task`]
    /// refuses.
    pub fn task_node(&self, id: &str, ctx: &CallContext) -> Option<Node> {
        self.opened_task(id, ctx).and_then(|(_, _, node)| node)
    }

    fn opened_task(&self, id: &str, ctx: &CallContext) -> Option<(String, Owner, Option<Node>)> {
        let (body, tag) = id.split_once('.')?;
        let tag = B64.decode(tag).ok()?;
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key()).expect("HMAC takes any key length");
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).ok()?;
        let payload: Value = serde_json::from_slice(&B64.decode(body).ok()?).ok()?;
        let fresh = payload["expires"].as_u64().is_some_and(|t| t >= now_ms());
        if payload["kind"] != "task" || !fresh || payload["owner"] != ctx.identity.owner_key() {
            return None;
        }
        let instance = serde_json::from_value(payload["instance"].clone()).ok()?;
        let node = self.node_in(&payload);
        Some((payload["server"].as_str()?.to_owned(), instance, node))
    }

    /// The `nextCursor` of the caller's `tasks/list` whose next page starts at the task
    /// created `seq`-th: sealed like a task id, of a kind of its own, so it says nothing
    /// of other callers' tasks and only its caller can page on with it.
    pub fn seal_cursor(&self, ctx: &CallContext, seq: u64) -> String {
        let payload = json!({ "v": 1, "kind": "tasks/list", "owner": ctx.identity.owner_key(), "from": seq });
        let body = B64.encode(payload.to_string());
        let tag = B64.encode(self.mac(body.as_bytes()));
        format!("{body}.{tag}")
    }

    /// Where a `tasks/list` cursor this caller got starts; `None` for any other string.
    pub fn open_cursor(&self, cursor: &str, ctx: &CallContext) -> Option<u64> {
        let (body, tag) = cursor.split_once('.')?;
        let tag = B64.decode(tag).ok()?;
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key()).expect("HMAC takes any key length");
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).ok()?;
        let payload: Value = serde_json::from_slice(&B64.decode(body).ok()?).ok()?;
        if payload["kind"] != "tasks/list" || payload["owner"] != ctx.identity.owner_key() {
            return None;
        }
        payload["from"].as_u64()
    }

    fn mac(&self, data: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key()).expect("HMAC takes any key length");
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
}

/// `len` bytes of keystream for sealing a node under the cluster's `key` with `nonce`:
/// HMAC-SHA256 blocks under a key of this purpose only.
fn node_stream(key: &[u8; 32], nonce: &[u8], len: usize) -> Vec<u8> {
    let mut purpose = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    purpose.update(b"mcpx sealed node");
    let stream_key = purpose.finalize().into_bytes();
    let mut out = Vec::with_capacity(len + 32);
    let mut counter: u32 = 0;
    while out.len() < len {
        let mut mac = Hmac::<Sha256>::new_from_slice(&stream_key).expect("HMAC takes any key length");
        mac.update(nonce);
        mac.update(&counter.to_be_bytes());
        out.extend_from_slice(&mac.finalize().into_bytes());
        counter += 1;
    }
    out.truncate(len);
    out
}

/// What identifies a request across its retries: the method and its params without the
/// retry fields, in a canonical form (object keys sorted), hashed.
fn digest(method: &str, params: &Value) -> String {
    let mut original = params.clone();
    if let Some(p) = original.as_object_mut() {
        for field in RETRY_FIELDS {
            p.remove(field);
        }
    }
    let canonical = json!([method, canonical(&original)]).to_string();
    Sha256::digest(canonical.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> = m.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(session: Option<&str>) -> CallContext {
        CallContext::local_for_test(session)
    }

    fn asker() -> Owner {
        Owner::Session(ctx(Some("a")).identity.session_key().unwrap())
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_state_returns_the_retry_to_its_instance_with_the_upstream_state() {
        let asks = Asks::default();
        let params = json!({"name": "t", "arguments": {"x": 1, "y": 2}});
        let first = ctx(Some("a"));
        let state = asks.seal(
            Asker { server: "s", instance: Some(&asker()) },
            &first,
            "tools/call",
            &params,
            Some(json!("up")),
            HOUR,
        );
        let retry = json!({"arguments": {"y": 2, "x": 1}, "name": "t", "inputResponses": {}, "requestState": state});
        let resume = asks.open(&state, "s", &ctx(Some("a")), "tools/call", &retry).unwrap();
        let expected =
            Resume { instance: Some(asker()), upstream_state: Some(json!("up")), call_id: first.call_id, node: None };
        assert_eq!(resume, expected);
    }

    #[test]
    fn a_state_returns_to_an_instance_keyed_on_a_directory_whose_name_is_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        let asks = Asks::default();
        let dir = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(b"/srv/caf\xe9"));
        let owner =
            Owner::Cwd(crate::scope::Place { path: dir, node: Some("n1".into()), principal: Default::default() });
        let params = json!({"name": "t", "arguments": {}});
        let first = ctx(Some("a"));
        let state = asks.seal(Asker { server: "s", instance: Some(&owner) }, &first, "tools/call", &params, None, HOUR);
        let resume = asks.open(&state, "s", &ctx(Some("a")), "tools/call", &params).unwrap();
        assert_eq!(resume.instance, Some(owner));
    }

    #[test]
    fn tampered_foreign_expired_or_mismatched_states_are_refused() {
        let asks = Asks::default();
        let params = json!({"name": "t", "arguments": {}});
        let state = asks.seal(
            Asker { server: "s", instance: Some(&asker()) },
            &ctx(Some("a")),
            "tools/call",
            &params,
            None,
            HOUR,
        );
        let open = |state: &str, session, method, params: &Value| asks.open(state, "s", &ctx(session), method, params);
        assert_eq!(open(&format!("{state}-TAMPERED"), Some("a"), "tools/call", &params).unwrap_err().code(), -32602);
        assert!(open(&state, Some("b"), "tools/call", &params).is_err());
        assert!(open(&state, None, "tools/call", &params).is_err());
        assert!(open(&state, Some("a"), "prompts/get", &params).is_err());
        assert!(open(&state, Some("a"), "tools/call", &json!({"name": "t", "arguments": {"x": 1}})).is_err());
        assert!(asks.open(&state, "other", &ctx(Some("a")), "tools/call", &params).is_err());
        let expired = asks.seal(
            Asker { server: "s", instance: Some(&asker()) },
            &ctx(Some("a")),
            "tools/call",
            &params,
            None,
            Duration::ZERO,
        );
        std::thread::sleep(Duration::from_millis(2));
        assert!(open(&expired, Some("a"), "tools/call", &params).is_err());
        assert!(Asks::default().open(&state, "s", &ctx(Some("a")), "tools/call", &params).is_err());
    }

    #[test]
    fn in_a_cluster_every_node_opens_a_state_naming_its_sealer_and_another_cluster_none() {
        let node = |id: &str| Node { id: id.into(), url: format!("http://{id}") };
        let (a, b, foreign) = (Asks::default(), Asks::default(), Asks::default());
        a.join_cluster([7; 32], node("a"));
        b.join_cluster([7; 32], node("b"));
        foreign.join_cluster([8; 32], node("a"));
        let params = json!({"name": "t", "arguments": {}});
        let instance = asker();
        let state = a.seal(
            Asker::instance(&InstanceKey { server: "s".into(), owner: instance.clone() }),
            &ctx(Some("a")),
            "tools/call",
            &params,
            None,
            HOUR,
        );
        let resume = b.open(&state, "s", &ctx(Some("a")), "tools/call", &params).unwrap();
        assert_eq!((resume.instance, resume.node), (Some(instance), Some(node("a"))));
        let readable = String::from_utf8_lossy(&B64.decode(state.split_once('.').unwrap().0).unwrap()).into_owned();
        assert!(!readable.contains("http://a"), "the caller reads no node URL in its state: {readable}");
        assert!(foreign.open(&state, "s", &ctx(Some("a")), "tools/call", &params).is_err());
        assert!(foreign.route(&state, "s", &ctx(Some("a"))).is_none());
        // Routing skips only the request's check: never the session's or the server's.
        assert!(b.route(&state, "s", &ctx(Some("a"))).is_some());
        assert!(b.route(&state, "s", &ctx(Some("b"))).is_none());
        assert!(b.route(&state, "other", &ctx(Some("a"))).is_none());
    }

    #[test]
    fn in_a_cluster_a_task_id_names_its_node_to_its_caller_only() {
        let node = |id: &str| Node { id: id.into(), url: format!("http://{id}") };
        let (a, b, foreign) = (Asks::default(), Asks::default(), Asks::default());
        a.join_cluster([7; 32], node("a"));
        b.join_cluster([7; 32], node("b"));
        foreign.join_cluster([8; 32], node("b"));
        let id = a.seal_task("s", &asker(), &ctx(Some("a")), now_ms() + 3_600_000);
        assert_eq!(b.task_node(&id, &ctx(Some("a"))), Some(node("a")));
        let readable = String::from_utf8_lossy(&B64.decode(id.split_once('.').unwrap().0).unwrap()).into_owned();
        assert!(!readable.contains("http://a"), "the caller reads no node URL in its id: {readable}");
        assert_eq!(b.task_node(&id, &ctx(Some("b"))), None, "another session's");
        assert_eq!(foreign.task_node(&id, &ctx(Some("a"))), None, "another cluster's");
        let (body, tag) = id.split_once('.').unwrap();
        let mut payload: Value = serde_json::from_slice(&B64.decode(body).unwrap()).unwrap();
        payload["node"] = json!({"id": "b", "url": "http://attacker"});
        let moved = format!("{}.{tag}", B64.encode(payload.to_string()));
        assert_eq!(b.task_node(&moved, &ctx(Some("a"))), None, "a node named by someone else");
        let alone = Asks::default();
        let id = alone.seal_task("s", &asker(), &ctx(Some("a")), now_ms() + 3_600_000);
        assert_eq!(alone.task_node(&id, &ctx(Some("a"))), None, "outside a cluster");
    }

    #[test]
    fn a_task_id_opens_for_its_caller_only_and_never_as_a_request_state() {
        let asks = Asks::default();
        let instance = asker();
        let later = now_ms() + 3_600_000;
        let id = asks.seal_task("s", &instance, &ctx(Some("a")), later);
        assert_eq!(asks.open_task(&id, &ctx(Some("a"))), Some(("s".to_owned(), instance.clone())));
        assert_eq!(asks.open_task(&id, &ctx(Some("b"))), None);
        assert_eq!(asks.open_task(&id, &ctx(None)), None);
        assert_eq!(asks.open_task(&format!("{id}x"), &ctx(Some("a"))), None);
        assert_eq!(Asks::default().open_task(&id, &ctx(Some("a"))), None);
        let expired = asks.seal_task("s", &instance, &ctx(Some("a")), now_ms() - 1);
        assert_eq!(asks.open_task(&expired, &ctx(Some("a"))), None);
        // Neither kind passes for the other.
        let params = json!({"name": "t", "arguments": {}});
        assert!(asks.open(&id, "s", &ctx(Some("a")), "tools/call", &params).is_err());
        let asker = Asker { server: "s", instance: Some(&instance) };
        let state = asks.seal(asker, &ctx(Some("a")), "tools/call", &params, None, HOUR);
        assert_eq!(asks.open_task(&state, &ctx(Some("a"))), None);
    }
}
