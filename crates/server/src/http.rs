//! Streamable HTTP at `/mcp`, both eras on one endpoint.
//!
//! Every request first passes `admission` (Origin, Host, token, content type), for every
//! route. Then, before any JSON is read, a body over `http.maxBodyBytes` is refused from
//! its `Content-Length` (413) or while reading. Then each request's era is decided:
//!
//! 1. `Mcp-Session-Id` present → legacy session traffic (unknown id → 404);
//! 2. modern markers (the `_meta` version, or a non-legacy `MCP-Protocol-Version`) → modern;
//! 3. `initialize` → opens a legacy session;
//! 4. anything else → 400: legacy traffic needs a session.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Extension, Router};
use mcpx_gateway::{Gateway, Principal, Transport};
use mcpx_protocol::revision::is_legacy_version_string;
use mcpx_protocol::{Message, RpcError, meta};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::admission::{self, Admitted};
use crate::api::{self, Daemon};
use crate::legacy::{self, SESSION_HEADER};
use crate::modern;
use crate::reply::{self, Format};
use crate::session::Sessions;
use crate::socket::{self, Peer};

/// What the HTTP front ends share across requests.
pub struct Front {
    pub gateway: Arc<Gateway>,
    pub sessions: Sessions,
    pub daemon: Daemon,
    /// Questions waiting for `/v1` callers.
    pub pending: crate::pending::Pending,
}

/// The router for both listeners: `/mcp`, and the `/v1` API (see `api`), every route
/// and the fallback behind `admission`. Serve it with `listener::serve`, which gives each
/// request its `ConnectInfo<Peer>`.
pub fn router(front: Arc<Front>) -> Router {
    Router::new()
        .route("/mcp", any(mcp))
        .merge(api::routes())
        // The limit is ours (a hot setting), enforced in `read_body`.
        .layer(DefaultBodyLimit::disable())
        // Last, so it wraps every route above (and the fallback): add routes before it.
        .layer(axum::middleware::from_fn_with_state(front.clone(), admission::admit))
        .with_state(front)
}

async fn mcp(
    State(front): State<Arc<Front>>,
    Extension(Admitted(base)): Extension<Admitted>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    front.daemon.touch();
    let idle = front.gateway.settings().config().http.session_idle_timeout;
    let session_id = headers.get(SESSION_HEADER).map(|v| v.to_str().unwrap_or_default().to_owned());
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
        Method::POST => post(&front, &base, &headers, session, body).await,
        Method::DELETE => match session {
            Some(session) => {
                front.sessions.end(&front.gateway, &session.id);
                StatusCode::NO_CONTENT.into_response()
            }
            None => not_allowed(),
        },
        // A handshake-era session's standalone stream; gone in 2026-07-28.
        Method::GET => match session {
            Some(session) if Format::from_headers(&headers).allows_stream() => standalone(&front, &base, session).await,
            Some(_) => reply::status(StatusCode::NOT_ACCEPTABLE, "the standalone stream is text/event-stream\n"),
            None => not_allowed(),
        },
        _ => not_allowed(),
    }
}

/// The standalone stream of a handshake-era session (GET): the list changes of every
/// upstream instance the session reaches, and updates to the resources it subscribed to,
/// as they happen, until the client closes it or the daemon stops.
async fn standalone(front: &Front, base: &Transport, session: crate::session::Session) -> Response {
    let gateway = front.gateway.clone();
    let transport = Transport { session: Some(session.identity()), ..base.clone() };
    let identity = gateway.identity(&Value::Null, &transport);
    let negotiated = &session.negotiated;
    let ctx = mcpx_gateway::CallContext::new(identity, negotiated.revision, negotiated.capabilities.clone());
    let watch = match gateway.watch_session(&ctx, negotiated.interest.clone()).await {
        Ok(watch) => watch,
        Err(e) => return reply::error(StatusCode::INTERNAL_SERVER_ERROR, Format::Json, None, &e.into()),
    };
    let events = futures::stream::unfold(Some(watch), move |state| {
        let gateway = gateway.clone();
        async move {
            let mut watch = state?;
            let next = tokio::select! {
                change = watch.changes.recv() => change,
                _ = gateway.closing() => None,
                _ = tokio::time::sleep(crate::listen::KEEP_ALIVE) => {
                    return Some((Ok::<_, std::convert::Infallible>(": keep-alive\n\n".to_owned()), Some(watch)));
                }
            };
            let change = next?;
            Some((Ok(reply::event(&change.to_string())), Some(watch)))
        }
    });
    reply::event_stream(Body::from_stream(events))
}

async fn post(
    front: &Front,
    base: &Transport,
    headers: &HeaderMap,
    session: Option<crate::session::Session>,
    body: Body,
) -> Response {
    let format = Format::from_headers(headers);
    let body = match read_body(front, headers, body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return refusal,
    };
    let frame = match Message::parse(&body) {
        Ok(frame) => frame,
        Err(invalid) => return reply::error(StatusCode::BAD_REQUEST, format, None, &invalid.error),
    };
    if let Some(session) = session {
        return legacy::in_session(front, base, headers, format, session, frame).await;
    }
    if frame.is_array() {
        let e = RpcError::invalid_request("JSON-RPC batches are accepted only inside a 2025-03-26 session");
        return reply::error(StatusCode::BAD_REQUEST, format, None, &e);
    }
    let message = match Message::classify(frame) {
        Ok(message) => message,
        Err(invalid) => return reply::error(StatusCode::BAD_REQUEST, format, invalid.id.as_ref(), &invalid.error),
    };
    if is_modern(headers, &message) {
        return modern::handle(front, base, headers, format, message).await;
    }
    match message {
        Message::Request { id, method, params } if method == "initialize" => {
            legacy::initialize(front, &base.principal, format, &id.to_value(), &params)
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
    if let Some(declared) = declared.filter(|n| *n > limit as u64) {
        // A body that is on its way already is read and dropped (up to a bound, within
        // http.bodyReadTimeout) before the answer: closing a connection with unread bytes
        // resets it, and the client could lose the 413 before reading it.
        if declared <= DRAIN_BEFORE_REFUSAL {
            let _ = axum::body::to_bytes(body, DRAIN_BEFORE_REFUSAL as usize).await;
        }
        return Err(too_large());
    }
    axum::body::to_bytes(body, limit).await.map_err(|_| too_large())
}

/// The most of a refused body mcpx reads (and drops) so its client gets the 413.
const DRAIN_BEFORE_REFUSAL: u64 = 1024 * 1024;

/// What the transport says about a caller before the request is read: over the unix
/// socket, the peer's pid and the cwd the daemon reads for it; over TCP, when tokens are
/// configured, the name of the token presented (none → 401).
pub fn admit_peer(gateway: &Gateway, peer: &Peer, headers: &HeaderMap) -> Result<Transport, Box<Response>> {
    match peer {
        Peer::Local { pid, .. } => {
            Ok(Transport { cwd: pid.and_then(socket::cwd_of), pid: *pid, ..Transport::default() })
        }
        Peer::Tcp(_) => {
            let tokens = gateway.settings().config().http.tokens.clone();
            if tokens.is_empty() {
                return Ok(Transport::default());
            }
            // The scheme is case-insensitive (RFC 6750 §2.1, RFC 9110 §11.1).
            let presented = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim_start().split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token.trim());
            // Every configured token is compared, so the time taken says nothing about which
            // one (if any) matched.
            let matched = presented.and_then(|p| {
                tokens.iter().fold(None, |found, (name, t)| {
                    let equal = secrets_equal(t.as_bytes(), p.as_bytes());
                    found.or(equal.then_some(name))
                })
            });
            match matched {
                Some(name) => Ok(Transport { principal: Principal::Token(name.clone()), ..Transport::default() }),
                None => {
                    let mut response = reply::status(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
                    Err(Box::new(response))
                }
            }
        }
    }
}

/// Compares secrets without leaking, through timing, how much of a guess was right or
/// how long the secret is: both sides are hashed first, and the digests (always 32
/// bytes) are compared whole, without stopping at the first difference.
fn secrets_equal(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn not_allowed() -> Response {
    let mut response = reply::status(StatusCode::METHOD_NOT_ALLOWED, "use POST\n");
    response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST, DELETE"));
    response
}

/// A 2026 `subscriptions/listen` over HTTP: a long-lived event stream. The caller closing
/// it ends the listen (and releases what it watched).
pub async fn listen(
    front: &Front,
    transport: &Transport,
    admitted: modern::Admitted,
    id: Value,
    params: Value,
) -> Response {
    let gateway = front.gateway.clone();
    let identity = gateway.identity(&params, transport);
    let ctx = mcpx_gateway::CallContext::new(identity, admitted.revision, admitted.capabilities);
    let watch = match gateway.watch(&ctx, &params).await {
        Ok(watch) => watch,
        Err(e) => return reply::error(StatusCode::OK, Format::Json, Some(&id), &e.into()),
    };
    let first = crate::listen::acknowledgement(&id, &watch);
    let events = futures::stream::unfold(Some((Some(first), watch)), move |state| {
        let (gateway, id) = (gateway.clone(), id.clone());
        async move {
            let (first, mut watch) = state?;
            let (text, next_state) = match first {
                Some(ack) => (reply::event(&ack.to_string()), Some((None, watch))),
                None => match crate::listen::next(&gateway, &id, &mut watch, Some(crate::listen::KEEP_ALIVE)).await {
                    crate::listen::Next::Frame(frame) => (reply::event(&frame.to_string()), Some((None, watch))),
                    crate::listen::Next::KeepAlive => (": keep-alive\n\n".to_owned(), Some((None, watch))),
                    crate::listen::Next::End(frame) => (reply::event(&frame.to_string()), None),
                },
            };
            Some((Ok::<_, std::convert::Infallible>(text), next_state))
        }
    });
    reply::event_stream(Body::from_stream(events))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_whole_secret_is_equal() {
        assert!(secrets_equal(b"s3cret-token", b"s3cret-token"));
        for guess in [&b""[..], b"s3cret", b"s3cret-token ", b"s3cret-tokeN", b"s3cret-token-and-more"] {
            assert!(!secrets_equal(b"s3cret-token", guess), "{}", String::from_utf8_lossy(guess));
        }
    }
}
