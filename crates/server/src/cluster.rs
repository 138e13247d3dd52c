//! This node and the others of its cluster, over HTTP: forwarding a request to the node
//! that owns its instance, proving to that node that the request comes from a node,
//! and legacy session ids that say (opaquely) which node holds the session.
//!
//! Trust: a forwarded request carries the caller's principal as the first node resolved
//! it, under an HMAC made with a key derived from `cluster.secret` over the sending node,
//! the node it is for, the time, a random nonce, the method, the path, the principal,
//! every header the owner reads and a digest of the body. Admission checks it before
//! anything else; a request that carries the node headers without a valid signature is
//! refused, so a caller's own headers are never taken for a node's. A node takes each
//! signed request once (it remembers the nonces it accepted for as long as their time
//! is in the window) and only when signed for itself: a request seen on the wire
//! between two nodes cannot be sent again, to its node or to another. What this must
//! never do: forward the caller's credentials (only the principal they proved goes on),
//! or forward a request that was itself forwarded.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use mcpx_gateway::Principal;
use mcpx_gateway::cluster::{Kept, Node};
use mcpx_protocol::RpcError;
use sha2::{Digest, Sha256};

use crate::reply;

/// The node a forwarded request comes from.
pub const NODE_HEADER: &str = "x-mcpx-node";
const TIME_HEADER: &str = "x-mcpx-node-time";
const PRINCIPAL_HEADER: &str = "x-mcpx-node-principal";
const SIGNATURE_HEADER: &str = "x-mcpx-node-signature";
/// 128 random bits per forwarded request: the signature is never the same twice.
const NONCE_HEADER: &str = "x-mcpx-node-nonce";
/// The SHA-256 of the body, hex: signed with the head, checked once the body is read.
const BODY_HEADER: &str = "x-mcpx-node-body";

/// How far a forwarded request's time may be from this node's clock. Nodes keep their
/// clocks in step (NTP); a captured request can be replayed within this window only.
pub const SIGNATURE_WINDOW: Duration = Duration::from_secs(60);

/// How long a node waits to connect to another: a dead owner fails the request fast.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The caller's headers a forwarded request keeps: what the owner reads to answer it.
/// Never `Authorization` or cookies: the caller's credential stops at the first node.
const FORWARDED_HEADERS: [&str; 10] = [
    "accept",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "last-event-id",
    "x-mcpx-session",
    "traceparent",
    "tracestate",
];

/// The owner's response headers the caller gets back.
const RETURNED_HEADERS: [&str; 4] = ["content-type", "mcp-session-id", "x-accel-buffering", "cache-control"];

/// A request whose head another node of the cluster signed, its body not read yet.
pub struct Vouched {
    forwarded: Forwarded,
    principal: Principal,
    /// The SHA-256 of the body signed, hex.
    body: String,
    nonce: String,
    forget_at: u64,
}

/// A request admission found signed by another node of the cluster.
#[derive(Clone, Debug)]
pub struct Forwarded {
    pub from: String,
}

type HmacSha256 = Hmac<Sha256>;

/// This node as the others know it, and the keys it shares with them.
pub struct Link {
    pub node: String,
    pub url: String,
    auth_key: [u8; 32],
    seal_key: [u8; 32],
    mac_key: [u8; 32],
    client: mcpx_http::Client,
    /// The nonces of the signed requests accepted whose time is still in the window.
    seen: Mutex<Seen>,
}

/// Accepted nonces, each until its request's time leaves [`SIGNATURE_WINDOW`]. Only
/// validly signed requests are remembered, so it holds at most what the other nodes
/// forwarded here in two windows.
#[derive(Default)]
struct Seen {
    nonces: HashSet<String>,
    /// In the order accepted, with when each may be forgotten (unix seconds).
    expiring: VecDeque<(u64, String)>,
}

impl Seen {
    /// Whether `nonce` is new (it is remembered until `forget_at`).
    fn first(&mut self, nonce: &str, now: u64, forget_at: u64) -> bool {
        while self.expiring.front().is_some_and(|(at, _)| *at < now) {
            if let Some((_, old)) = self.expiring.pop_front() {
                self.nonces.remove(&old);
            }
        }
        if !self.nonces.insert(nonce.to_owned()) {
            return false;
        }
        self.expiring.push_back((forget_at, nonce.to_owned()));
        true
    }
}

impl Link {
    pub fn new(node: String, url: String, secret: &str) -> Link {
        // Nodes are where the cluster's registry says, each proving the shared secret:
        // anywhere on the network but this node itself.
        let egress = mcpx_http::Egress::trusting();
        let client = mcpx_http::Client::new(mcpx_http::Redirects::NONE, Some(CONNECT_TIMEOUT), egress);
        Link {
            node,
            url,
            auth_key: derive(secret, "mcpx node-to-node requests"),
            seal_key: derive(secret, "mcpx session id sealing"),
            mac_key: derive(secret, "mcpx session id integrity"),
            client,
            seen: Mutex::default(),
        }
    }

    /// A legacy session id that names this node: see [`Link::mint_node_id`].
    pub fn mint_session_id(&self) -> String {
        self.mint_node_id()
    }

    /// The node a session id minted by some node of this cluster names; `None` for an
    /// id no node of this cluster minted (or one altered).
    pub fn session_node(&self, id: &str) -> Option<Node> {
        self.node_of_id(id)
    }

    /// An id of something only this node holds (a legacy session, a background call):
    /// 128 random bits, then this node's id and URL encrypted under them, then a tag.
    /// Opaque to the caller, unforgeable, and readable by every node of the cluster.
    pub fn mint_node_id(&self) -> String {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        let plain = format!("{}\n{}", self.node, self.url);
        let mut sealed = nonce.to_vec();
        sealed.extend(self.keystream(&nonce, plain.len()).iter().zip(plain.as_bytes()).map(|(k, p)| k ^ p));
        let tag = self.tag(&sealed);
        sealed.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(sealed)
    }

    /// The node an id [`Link::mint_node_id`] minted on some node of this cluster names;
    /// `None` for an id no node of this cluster minted (or one altered).
    pub fn node_of_id(&self, id: &str) -> Option<Node> {
        let bytes = URL_SAFE_NO_PAD.decode(id).ok()?;
        if bytes.len() < 16 + 16 + 3 {
            return None;
        }
        let (sealed, tag) = bytes.split_at(bytes.len() - 16);
        let expected = self.tag(sealed);
        if !constant_eq(&expected, tag) {
            return None;
        }
        let (nonce, cipher) = sealed.split_at(16);
        let plain: Vec<u8> = self.keystream(nonce, cipher.len()).iter().zip(cipher).map(|(k, c)| k ^ c).collect();
        let (node, url) = std::str::from_utf8(&plain).ok()?.split_once('\n')?;
        Some(Node { id: node.to_owned(), url: url.to_owned() })
    }

    fn keystream(&self, nonce: &[u8], len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 32);
        let mut counter: u32 = 0;
        while out.len() < len {
            let mut mac = HmacSha256::new_from_slice(&self.seal_key).expect("any key length");
            mac.update(nonce);
            mac.update(&counter.to_be_bytes());
            out.extend_from_slice(&mac.finalize().into_bytes());
            counter += 1;
        }
        out.truncate(len);
        out
    }

    fn tag(&self, sealed: &[u8]) -> [u8; 16] {
        let mut mac = HmacSha256::new_from_slice(&self.mac_key).expect("any key length");
        mac.update(sealed);
        let full = mac.finalize().into_bytes();
        full[..16].try_into().expect("16 of 32 bytes")
    }

    /// The signature of a request from node `from` to node `to`: over the node headers
    /// (`signed`: time, nonce, principal, the body's digest), the method and target, and
    /// every header the owner reads (those forwarded, in a fixed order). The body is in
    /// it through its digest, so that a head can be checked before its body is read.
    fn signature(
        &self,
        from: &str,
        to: &str,
        signed: [&str; 4],
        method: &str,
        target: &str,
        headers: &HeaderMap,
    ) -> String {
        let mut mac = HmacSha256::new_from_slice(&self.auth_key).expect("any key length");
        for part in [from, to].into_iter().chain(signed).chain([method, target]) {
            mac.update(part.as_bytes());
            mac.update(b"\n");
        }
        let mut names: Vec<&str> = headers.keys().map(HeaderName::as_str).filter(|n| is_forwarded(n)).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            for value in headers.get_all(name) {
                mac.update(name.as_bytes());
                mac.update(b":");
                mac.update(value.as_bytes());
                mac.update(b"\n");
            }
        }
        hex(&mac.finalize().into_bytes())
    }

    /// Checks the head of a request carrying the node headers, before its body is read:
    /// the node that sent it, the principal it vouches for and the body it signed, or
    /// why it is refused. [`Link::accept`] then checks the body.
    pub fn verify(&self, method: &Method, target: &str, headers: &HeaderMap) -> Result<Vouched, String> {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let (node, time, nonce, principal, body) =
            (text(NODE_HEADER), text(TIME_HEADER), text(NONCE_HEADER), text(PRINCIPAL_HEADER), text(BODY_HEADER));
        let expected =
            self.signature(node, &self.node, [time, nonce, principal, body], method.as_str(), target, headers);
        if !constant_eq(expected.as_bytes(), text(SIGNATURE_HEADER).as_bytes()) {
            return Err("the node-to-node signature does not match (or the request was signed for another node)".into());
        }
        let sent = time.parse::<u64>().map_err(|_| "the node-to-node time is not a number".to_owned())?;
        let now = unix_now();
        if now.abs_diff(sent) > SIGNATURE_WINDOW.as_secs() {
            return Err(format!("the node-to-node request is {}s from this node's clock", now.abs_diff(sent)));
        }
        if nonce.is_empty() {
            return Err("the node-to-node request has no nonce".into());
        }
        let principal = URL_SAFE_NO_PAD
            .decode(principal)
            .ok()
            .and_then(|json| serde_json::from_slice::<Principal>(&json).ok())
            .ok_or_else(|| "the forwarded principal is unreadable".to_owned())?;
        Ok(Vouched {
            forwarded: Forwarded { from: node.to_owned() },
            principal,
            body: body.to_owned(),
            nonce: nonce.to_owned(),
            forget_at: sent.saturating_add(SIGNATURE_WINDOW.as_secs()),
        })
    }

    /// Takes a request whose head [`Link::verify`] found signed, once its body is read:
    /// the body must be the one signed, and the request never taken before.
    pub fn accept(&self, vouched: Vouched, body: &[u8]) -> Result<(Forwarded, Principal), String> {
        if hex(&Sha256::digest(body)) != vouched.body {
            return Err("the body is not the one the node signed".into());
        }
        if !self.seen.lock().expect("nonces lock").first(&vouched.nonce, unix_now(), vouched.forget_at) {
            return Err("the node-to-node request was accepted once already: a replay".into());
        }
        Ok((vouched.forwarded, vouched.principal))
    }

    /// Sends the caller's request, as it came, to `node` for `principal`, and streams
    /// the owner's answer back as it comes (an event stream stays one). When `node`
    /// cannot be reached, the error (for the caller, in the shape of the route it asked)
    /// names it by its id and says what it keeps (`kept`); its URL and the failure's
    /// detail go to this node's log only.
    #[allow(clippy::too_many_arguments)]
    pub async fn forward(
        &self,
        node: &Node,
        kept: &Kept,
        method: Method,
        target: &str,
        headers: &HeaderMap,
        principal: &Principal,
        body: Bytes,
    ) -> Result<Response, RpcError> {
        let answer = match self.send(node, method, target, headers, principal, body).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(node = node.id, url = node.url, ?kept, "forwarding to another node failed: {e}");
                return Err(RpcError::internal(kept.unreachable(&node.id)));
            }
        };
        let mut response = Response::builder().status(answer.status().as_u16());
        for name in RETURNED_HEADERS {
            if let Some(value) = answer.headers().get(name).and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok()) {
                response = response.header(HeaderName::from_static(name), value);
            }
        }
        Ok(response.body(Body::new(answer.into_body())).unwrap_or_else(|_| {
            reply::status(StatusCode::BAD_GATEWAY, "the owner node's answer could not be relayed\n")
        }))
    }

    /// Sends the caller's request, as it came, to `node` for `principal`, signed: the
    /// node's answer as it starts (its head), or why none came (for this node's log: it
    /// may name the node's URL, which no caller is shown).
    pub async fn send(
        &self,
        node: &Node,
        method: Method,
        target: &str,
        headers: &HeaderMap,
        principal: &Principal,
        body: Bytes,
    ) -> Result<mcpx_http::Response, String> {
        let principal = URL_SAFE_NO_PAD.encode(serde_json::to_vec(principal).expect("a principal serializes"));
        let time = unix_now().to_string();
        let nonce = new_nonce();
        let mut sent: HeaderMap = headers
            .iter()
            .filter(|(name, _)| is_forwarded(name.as_str()))
            .map(|(n, v)| (n.clone(), v.clone()))
            .collect();
        // What the HTTP client would add itself, added here so that it is signed too.
        if !sent.contains_key(header::ACCEPT) {
            sent.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        }
        let digest = hex(&Sha256::digest(&body));
        let signed = [time.as_str(), nonce.as_str(), principal.as_str(), digest.as_str()];
        let signature = self.signature(&self.node, &node.id, signed, method.as_str(), target, &sent);
        let signed = [
            (NODE_HEADER, self.node.as_str()),
            (TIME_HEADER, time.as_str()),
            (NONCE_HEADER, nonce.as_str()),
            (BODY_HEADER, digest.as_str()),
            (PRINCIPAL_HEADER, principal.as_str()),
            (SIGNATURE_HEADER, signature.as_str()),
        ];
        for (name, value) in signed {
            if let Ok(value) = HeaderValue::from_str(value) {
                sent.insert(HeaderName::from_static(name), value);
            }
        }
        let url = format!("{}{target}", node.url.trim_end_matches('/'));
        let uri = url.parse::<axum::http::Uri>().map_err(|e| e.to_string());
        let make = || {
            let mut request = mcpx_http::Request::new(mcpx_http::Body::new(body.clone()));
            *request.method_mut() = method.clone();
            if let Ok(uri) = &uri {
                *request.uri_mut() = uri.clone();
            }
            *request.headers_mut() = sent.clone();
            request
        };
        match &uri {
            Ok(_) => self.client.send(make).await,
            Err(e) => Err(format!("{url}: {e}")),
        }
    }
}

/// Whether a caller's header goes on with a forwarded request (and is signed).
fn is_forwarded(name: &str) -> bool {
    FORWARDED_HEADERS.contains(&name) || name.starts_with("mcp-param-")
}

pub(crate) fn new_nonce() -> String {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).expect("the OS random source is available");
    hex(&nonce)
}

/// A 32-byte key for one purpose, from the shared secret.
fn derive(secret: &str, purpose: &str) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(purpose.as_bytes());
    mac.finalize().into_bytes().into()
}

/// Equality that takes as long whichever byte differs.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(secret: &str) -> Link {
        Link::new("node-a".into(), "http://127.0.0.1:7001".into(), secret)
    }

    #[test]
    fn a_session_id_names_its_node_to_the_cluster_only_and_cannot_be_altered() {
        let a = link("0123456789abcdef0123456789abcdef");
        let id = a.mint_session_id();
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
        assert!(!id.contains("node") && !id.contains("7001"));
        assert_ne!(id, a.mint_session_id());
        let node = a.session_node(&id).unwrap();
        assert_eq!((node.id.as_str(), node.url.as_str()), ("node-a", "http://127.0.0.1:7001"));
        // Another cluster's secret reads nothing; nor does any altered byte.
        assert_eq!(link("another secret, another cluster..").session_node(&id), None);
        let mut bytes = URL_SAFE_NO_PAD.decode(&id).unwrap();
        for i in [0, 17, bytes.len() - 1] {
            bytes[i] ^= 1;
            assert_eq!(a.session_node(&URL_SAFE_NO_PAD.encode(&bytes)), None, "byte {i}");
            bytes[i] ^= 1;
        }
        assert_eq!(a.session_node("0123456789abcdef0123456789abcdef"), None);
        // Any id it mints (a background call's) names the node the same way.
        let call = a.mint_node_id();
        assert_eq!(link("0123456789abcdef0123456789abcdef").node_of_id(&call), Some(node));
    }

    #[test]
    fn a_signature_covers_the_principal_the_target_the_headers_and_the_body_and_is_taken_once() {
        let a = link("0123456789abcdef0123456789abcdef");
        let principal = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&Principal::Token("alice".into())).unwrap());
        let time = unix_now().to_string();
        let digest = hex(&Sha256::digest(b"{}"));
        let signed = |to: &str, nonce: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("mcp-param-repo", HeaderValue::from_static("alpha"));
            let sig = a.signature("node-b", to, [&time, nonce, &principal, &digest], "POST", "/mcp", &headers);
            headers.insert(NODE_HEADER, HeaderValue::from_static("node-b"));
            headers.insert(TIME_HEADER, HeaderValue::from_str(&time).unwrap());
            headers.insert(NONCE_HEADER, HeaderValue::from_str(nonce).unwrap());
            headers.insert(PRINCIPAL_HEADER, HeaderValue::from_str(&principal).unwrap());
            headers.insert(BODY_HEADER, HeaderValue::from_str(&digest).unwrap());
            headers.insert(SIGNATURE_HEADER, HeaderValue::from_str(&sig).unwrap());
            headers
        };
        let take = |method: Method, target: &str, headers: &HeaderMap, body: &[u8]| {
            a.verify(&method, target, headers).and_then(|vouched| a.accept(vouched, body))
        };
        let headers = signed("node-a", "n1");
        assert!(take(Method::POST, "/mcp", &headers, b"{\"x\":1}").is_err(), "another body");
        assert!(take(Method::POST, "/v1/call", &headers, b"{}").is_err(), "another target");
        assert!(take(Method::DELETE, "/mcp", &headers, b"{}").is_err(), "another method");
        let mut swapped = headers.clone();
        let bob = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&Principal::Token("bob".into())).unwrap());
        swapped.insert(PRINCIPAL_HEADER, HeaderValue::from_str(&bob).unwrap());
        assert!(take(Method::POST, "/mcp", &swapped, b"{}").is_err(), "another principal");
        let mut added = headers.clone();
        added.insert("mcp-session-id", HeaderValue::from_static("someone-elses"));
        assert!(take(Method::POST, "/mcp", &added, b"{}").is_err(), "a header added");
        let mut changed = headers.clone();
        changed.insert("mcp-param-repo", HeaderValue::from_static("beta"));
        assert!(take(Method::POST, "/mcp", &changed, b"{}").is_err(), "a header changed");
        let other = link("another secret, another cluster..");
        assert!(other.verify(&Method::POST, "/mcp", &headers).is_err(), "another cluster");
        let (from, who) = take(Method::POST, "/mcp", &headers, b"{}").unwrap();
        assert_eq!((from.from.as_str(), who), ("node-b", Principal::Token("alice".into())));
        assert!(take(Method::POST, "/mcp", &headers, b"{}").is_err(), "the same request again");
        assert!(take(Method::POST, "/mcp", &signed("node-c", "n2"), b"{}").is_err(), "signed for another node");
        assert!(take(Method::POST, "/mcp", &signed("node-a", ""), b"{}").is_err(), "no nonce");
    }

    #[test]
    fn a_nonce_is_forgotten_only_after_its_window() {
        let mut seen = Seen::default();
        assert!(seen.first("a", 100, 160));
        assert!(!seen.first("a", 159, 219), "within the window");
        assert!(seen.first("b", 161, 221));
        assert!(seen.first("a", 161, 221), "forgotten once its time left the window");
        assert_eq!(seen.nonces.len(), 2);
    }
}
