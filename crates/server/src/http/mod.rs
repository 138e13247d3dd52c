//! Streamable HTTP at `/mcp`, both eras on one endpoint.
//!
//! Every request first passes `admission` (Origin, Host, token, content type), for every
//! route. Then, before any JSON is read, a body over `http.maxBodyBytes` is refused from
//! its `Content-Length` (413) or while reading. Then each request's era is decided:
//!
//! 1. `Mcp-Session-Id` present → legacy session traffic (unknown id → 404), `legacy`;
//! 2. modern markers (the `_meta` version, or a non-legacy `MCP-Protocol-Version`) →
//!    `modern`;
//! 3. `initialize` → opens a legacy session;
//! 4. anything else → 400: legacy traffic needs a session.
//!
//! What a request means in its era is the era modules' (`crate::legacy`,
//! `crate::modern`); this module and its two children only carry it over HTTP.

mod legacy;
mod modern;

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::{any, get};
use mcpx_gateway::cluster::{Kept, Node};
use mcpx_gateway::{CallContext, Transport};
use mcpx_protocol::revision::is_legacy_version_string;
use mcpx_protocol::{Message, Revision, RpcError, message, meta};

use crate::admission::Admitted;
use crate::cluster::Forwarded;
use crate::dispatch;
use crate::front::Front;
use crate::reach::{Reach, Routes};
use crate::reply::{self, Format};
use crate::resource_metadata;
use crate::session::Session;

pub use legacy::SESSION_HEADER;

/// The `/mcp` route, the protected resource metadata that describes it, and `/metrics`; `daemon`
/// puts them behind admission with the others.
/// `/metrics` counts every caller's requests by server and tool: the daemon's owner's and
/// `http.admins'` only.
pub fn routes() -> Routes {
    // Literal paths, so that the tests walking every route find them (`resource_metadata::PATH`).
    Routes::new()
        .route("/mcp", Reach::Caller, any(mcp))
        .route("/.well-known/oauth-protected-resource", Reach::Caller, get(resource_metadata::document))
        .route("/.well-known/oauth-protected-resource/{*resource}", Reach::Caller, get(resource_metadata::document))
        .route("/metrics", Reach::Daemon, get(crate::metrics::render))
}

async fn mcp(
    State(front): State<Arc<Front>>,
    Extension(Admitted(base)): Extension<Admitted>,
    forwarded: Option<Extension<Forwarded>>,
    request: axum::extract::Request,
) -> Response {
    // Taken apart, not extracted piece by piece: extracting the headers copies them.
    let (axum::http::request::Parts { method, uri, headers, .. }, body) = request.into_parts();
    front.life.touch();
    let idle = front.gateway.settings().config().http.session_idle_timeout;
    let session_id = headers.get(SESSION_HEADER).map(|v| v.to_str().unwrap_or_default().to_owned());
    // In a cluster, a session another node minted is that node's: the request goes there.
    let to = Onward { front: &front, principal: &base.principal, method: &method, uri: &uri, headers: &headers };
    let elsewhere = session_id.as_deref().and_then(|id| to.session_node(id)).filter(|_| forwarded.is_none());
    if let Some(node) = elsewhere {
        return match read_body(&front, &headers, body).await {
            Ok(body) => to.forward(&node, &Kept::Session, body).await,
            Err(refusal) => refusal,
        };
    }
    let session = match &session_id {
        Some(id) => match front.sessions.get(id, &base.principal, idle) {
            Some(session) => Some(session),
            None => {
                let e = RpcError::invalid_request("unknown or ended session; send initialize without Mcp-Session-Id");
                return reply::error(StatusCode::NOT_FOUND, Format::Json, None, &e);
            }
        },
        None => None,
    };
    match method {
        Method::POST => post(&front, &base, &headers, session, body, forwarded.is_none().then_some(to)).await,
        Method::DELETE => match session {
            Some(session) => legacy::end(&front, &session),
            None => not_allowed(),
        },
        // A handshake-era session's standalone stream; gone in 2026-07-28.
        Method::GET => match session {
            Some(session) if Format::from_headers(&headers).allows_stream() => {
                legacy::standalone(&front, &base, session).await
            }
            Some(_) => reply::status(StatusCode::NOT_ACCEPTABLE, "the standalone stream is text/event-stream\n"),
            None => not_allowed(),
        },
        _ => not_allowed(),
    }
}

/// Where a request can go on from this node: the owner of what it is for, in a cluster.
/// `None` for a request another node forwarded here (it goes no further).
async fn post(
    front: &Front,
    base: &Transport,
    headers: &HeaderMap,
    session: Option<Session>,
    body: Body,
    onward: Option<Onward<'_>>,
) -> Response {
    let format = Format::from_headers(headers);
    let body = match read_body(front, headers, body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal,
    };
    // Without a session, one message, its envelope read without a tree; anything else
    // (a batch, an invalid message) is parsed whole, to be answered as it deserves.
    if session.is_none()
        && let Some(message) = message::read(&body)
    {
        return without_session(front, base, headers, format, message, onward, body).await;
    }
    let frame = match Message::parse(&body) {
        Ok(frame) => frame,
        Err(invalid) => return reply::error(StatusCode::BAD_REQUEST, format, None, &invalid.error),
    };
    // Boxed, as is the answer in `modern::handle`: each is the whole request's future, KiBs
    // that every layer above (this handler, axum's and hyper's) would otherwise move by value.
    if let Some(session) = session {
        return Box::pin(legacy::post(front, base, headers, format, session, frame)).await;
    }
    if frame.is_array() {
        let e = RpcError::invalid_request("JSON-RPC batches are accepted only inside a 2025-03-26 session");
        return reply::error(StatusCode::BAD_REQUEST, format, None, &e);
    }
    let message = match Message::classify(frame) {
        Ok(message) => message,
        Err(invalid) => return reply::error(StatusCode::BAD_REQUEST, format, invalid.id.as_ref(), &invalid.error),
    };
    without_session(front, base, headers, format, message, onward, body).await
}

/// One message that came without a session: a 2026 request (sent on to its owner, in a
/// cluster, as the `body` it came in), or a handshake-era `initialize`; anything else
/// needs a session.
async fn without_session(
    front: &Front,
    base: &Transport,
    headers: &HeaderMap,
    format: Format,
    message: Message,
    onward: Option<Onward<'_>>,
    body: axum::body::Bytes,
) -> Response {
    if is_modern(headers, &message) {
        // The cluster's steps are boxed, as the answer in `modern::handle` is (see `post`).
        if let (Some(onward), Message::Request { id, method, params }) = (&onward, &message) {
            match Box::pin(onward.owner(base, method, params)).await {
                Ok(Some((node, kept))) => return Box::pin(onward.forward(&node, &kept, body)).await,
                Ok(None) => {}
                Err(e) => return reply::answer(format, &dispatch::response(&id.to_value(), Err(e))),
            }
        }
        return modern::handle(front, base, headers, format, message).await;
    }
    match message {
        Message::Request { id, method, params } if method == "initialize" => {
            legacy::initialize(front, base, headers, format, &id.to_value(), &params)
        }
        Message::Request { id, .. } => {
            let e = RpcError::invalid_request(
                "no session: send initialize first (2025-11-25), or carry the 2026-07-28 _meta on every request",
            );
            reply::error(StatusCode::BAD_REQUEST, format, Some(&id.to_value()), &e)
        }
        _ => {
            let e = RpcError::invalid_request("notifications and responses need an Mcp-Session-Id");
            reply::error(StatusCode::BAD_REQUEST, format, None, &e)
        }
    }
}

/// A request as it came, and the cluster it may go on to.
#[derive(Clone, Copy)]
struct Onward<'a> {
    front: &'a Front,
    principal: &'a mcpx_gateway::Principal,
    method: &'a Method,
    uri: &'a Uri,
    headers: &'a HeaderMap,
}

impl Onward<'_> {
    /// The other node a legacy session id names, when this node is in a cluster.
    fn session_node(&self, id: &str) -> Option<Node> {
        let link = self.front.cluster.as_ref()?;
        link.session_node(id).filter(|node| node.id != link.node)
    }

    /// The other node that owns the instance a 2026 request is for (`Gateway::placement`).
    async fn owner(
        &self,
        base: &Transport,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<Option<(Node, Kept)>, RpcError> {
        if self.front.cluster.is_none() {
            return Ok(None);
        }
        let identity = self.front.gateway.identity(params, base);
        let ctx = CallContext::new(identity, Revision::V2026_07_28, serde_json::Value::Null);
        self.front.gateway.placement(&ctx, method, params).await.map_err(RpcError::from)
    }

    /// Sends the request, as it came, to `node` (which keeps `kept`), and relays its answer.
    async fn forward(&self, node: &Node, kept: &Kept, body: axum::body::Bytes) -> Response {
        let link = self.front.cluster.as_ref().expect("only a node of a cluster forwards");
        let target = self.uri.path_and_query().map_or("/mcp", |t| t.as_str());
        link.forward(node, kept, self.method.clone(), target, self.headers, self.principal, body)
            .await
            .unwrap_or_else(|e| reply::error(StatusCode::BAD_GATEWAY, Format::Json, None, &e))
    }
}

/// Modern markers: the `_meta` version key, or a version header that no handshake-era
/// revision uses.
fn is_modern(headers: &HeaderMap, message: &Message) -> bool {
    let in_meta = match message {
        Message::Request { params, .. } | Message::Notification { params, .. } => meta::has_modern_marker(params),
        Message::Response { .. } => false,
    };
    let in_header =
        headers.get("mcp-protocol-version").is_some_and(|v| v.to_str().map_or(true, |v| !is_legacy_version_string(v)));
    in_meta || in_header
}

async fn read_body(front: &Front, headers: &HeaderMap, body: Body) -> Result<axum::body::Bytes, Response> {
    let limit = front.gateway.settings().config().http.max_body_bytes;
    let too_large = || reply::status(StatusCode::PAYLOAD_TOO_LARGE, "request body exceeds http.maxBodyBytes\n");
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    // Refused unread, its body is read out (or its connection closed) by the listener.
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    axum::body::to_bytes(body, limit).await.map_err(|_| too_large())
}

fn not_allowed() -> Response {
    let mut response = reply::status(StatusCode::METHOD_NOT_ALLOWED, "use POST\n");
    response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST, DELETE"));
    response
}
