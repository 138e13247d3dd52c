//! A handshake-era session over HTTP: `initialize` outside any session opens one (its id
//! goes back in `Mcp-Session-Id`); `POST` carries frames or a batch inside it; `GET` is its
//! standalone stream; `DELETE` ends it (see `session` for the other ways it ends).

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use mcpx_gateway::Transport;
use mcpx_protocol::message::result_response;
use mcpx_protocol::{Era, Revision, RpcError};
use serde_json::Value;

use crate::caller::Caller;
use crate::dispatch;
use crate::front::Front;
use crate::legacy::{self, Negotiated, Reply};
use crate::reply::{self, Format};
use crate::session::Session;

/// The header that names a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The HTTP session front end's identity step: the transport admission found, and the
/// session itself as who is asking (`Session::Http`, a kind no label can name).
fn caller(front: &Front, base: &Transport, session: &Session) -> Caller {
    let transport = Transport { session: Some(session.identity()), ..base.clone() };
    Caller::new(front.gateway.clone(), transport)
}

/// `initialize` outside any session: negotiate and mint a session for the transport's
/// principal.
pub fn initialize(
    front: &Front,
    base: &Transport,
    headers: &HeaderMap,
    format: Format,
    id: &Value,
    params: &Value,
) -> Response {
    let owner = &base.principal;
    let negotiated = Negotiated::from_initialize(params);
    let revision = negotiated.revision;
    let http = front.gateway.settings().config().http.clone();
    let session = match front.sessions.open(&front.gateway, negotiated, owner, &http, front.new_session_id()) {
        Ok(session) => session,
        Err(full) => {
            let e = RpcError::internal(full.message());
            return reply::error(StatusCode::SERVICE_UNAVAILABLE, format, Some(id), &e);
        }
    };
    tracing::debug!(session = session.id, %revision, "legacy HTTP session opened");
    let result = legacy::initialize_result(&front.gateway, revision, owner);
    if front.gateway.traces_on() {
        let caller = caller(front, base, &session).with_trace_headers(headers);
        dispatch::traced(&caller, revision, id, "initialize", params, Ok(&result));
    }
    let mut response = reply::frame(StatusCode::OK, format, &result_response(id, result));
    response
        .headers_mut()
        .insert(SESSION_HEADER, HeaderValue::from_str(&session.id).expect("hex or base64url is a valid header value"));
    response
}

/// A frame, or a batch of frames, inside an open session (`POST`).
pub async fn post(
    front: &Front,
    base: &Transport,
    headers: &HeaderMap,
    format: Format,
    session: Session,
    body: Value,
) -> Response {
    if let Some(v) = headers.get("mcp-protocol-version") {
        let known = v.to_str().ok().and_then(Revision::parse).is_some_and(|r| r.era() == Era::Legacy);
        if !known {
            let e = RpcError::invalid_request(format!("unsupported MCP-Protocol-Version {v:?} for this session"));
            return reply::error(StatusCode::BAD_REQUEST, format, None, &e);
        }
    }
    let caller = caller(front, base, &session).with_trace_headers(headers);
    let negotiated = &session.negotiated;
    match body {
        Value::Array(frames) if negotiated.revision.allows_batches() && !frames.is_empty() => {
            match legacy::answer_batch(&caller, negotiated, frames).await {
                Some(replies) => reply::frame(StatusCode::OK, format, &replies),
                None => reply::accepted(),
            }
        }
        Value::Array(_) => {
            reply::error(StatusCode::BAD_REQUEST, format, None, &legacy::batch_refused(negotiated.revision))
        }
        // A request from a caller that takes an event stream: notifications about it go
        // there. A handshake-era disconnect is not a cancellation, so the work runs on.
        single if format.allows_stream() && single.get("id").is_some() && single.get("method").is_some() => {
            let negotiated = negotiated.clone();
            let max_notes = front.gateway.settings().config().limits.max_buffered_notifications;
            reply::streamed(false, format, max_notes, move |notify| async move {
                match legacy::answer(&caller, &negotiated, single, Some(&notify)).await {
                    Reply::Frame(f) | Reply::Invalid(f) => f,
                    Reply::Nothing => Value::Null,
                }
            })
            .await
        }
        single => match legacy::answer(&caller, negotiated, single, None).await {
            Reply::Frame(frame) => reply::frame(StatusCode::OK, format.single(), &frame),
            Reply::Invalid(frame) => reply::frame(StatusCode::BAD_REQUEST, format.single(), &frame),
            Reply::Nothing => reply::accepted(),
        },
    }
}

/// The session's standalone stream (`GET`; gone in 2026-07-28): the list changes of every
/// upstream instance the session reaches, and updates to the resources it subscribed to,
/// as they happen, until the client closes it or the daemon stops.
pub async fn standalone(front: &Front, base: &Transport, session: Session) -> Response {
    let caller = caller(front, base, &session);
    let watch = match legacy::changes(&caller, &session.negotiated).await {
        Ok(watch) => watch,
        Err(e) => return reply::error(StatusCode::INTERNAL_SERVER_ERROR, Format::Json, None, &e),
    };
    let gateway = caller.gateway;
    let changes = futures::stream::unfold(watch, move |mut watch| {
        let gateway = gateway.clone();
        async move {
            let change = tokio::select! {
                change = watch.changes.recv() => change,
                _ = gateway.closing() => None,
            };
            Some((change?, watch))
        }
    });
    reply::open_stream(changes)
}

/// `DELETE`: ends the session.
pub fn end(front: &Front, session: &Session) -> Response {
    front.sessions.end(&front.gateway, &session.id);
    StatusCode::NO_CONTENT.into_response()
}
