//! Handshake-era traffic on `/mcp` (2025-03-26, 2025-06-18, 2025-11-25): `initialize`
//! opens a session, every later request names it with `Mcp-Session-Id`, and the version
//! and capabilities negotiated once hold for the whole session.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures::future::join_all;
use mcpx_gateway::{CallContext, Gateway, Transport};
use mcpx_protocol::message::{error_response, result_response};
use mcpx_protocol::{Era, Message, Revision, RpcError};
use serde_json::{Value, json};

use crate::dispatch;
use crate::http::Front;
use crate::reply::{self, Format};
use crate::session::Session;

pub const SESSION_HEADER: &str = "mcp-session-id";

/// `initialize` outside any session: negotiate the revision and mint a session.
pub fn initialize(front: &Front, format: Format, id: &Value, params: &Value) -> Response {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    // Answer the revision asked for when mcpx speaks it; otherwise counter-offer the newest.
    let revision = asked.and_then(Revision::parse).filter(|r| r.era() == Era::Legacy).unwrap_or(Revision::LATEST_LEGACY);
    let capabilities = params.get("capabilities").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}));
    let http = front.gateway.settings().config().http.clone();
    let Ok(session) = front.sessions.open(revision, capabilities, http.max_sessions, http.session_idle_timeout) else {
        let e = RpcError::internal(format!("mcpx has {} sessions open (http.maxSessions); try again later", http.max_sessions));
        return reply::error(StatusCode::SERVICE_UNAVAILABLE, format, Some(id), &e);
    };
    let result = json!({
        "protocolVersion": revision.as_str(),
        "capabilities": front.gateway.capabilities(),
        "serverInfo": Gateway::server_info(),
        "instructions": front.gateway.instructions(),
    });
    tracing::debug!(session = session.id, revision = %revision, "legacy session opened");
    let mut response = reply::frame(StatusCode::OK, format, &result_response(id, result));
    response.headers_mut().insert(SESSION_HEADER, HeaderValue::from_str(&session.id).expect("hex is a valid header value"));
    response
}

/// A frame, or a batch of frames, inside an open session.
pub async fn in_session(front: &Front, headers: &HeaderMap, format: Format, session: Session, body: Value) -> Response {
    if let Some(v) = headers.get("mcp-protocol-version") {
        let known = v.to_str().ok().and_then(Revision::parse).is_some_and(|r| r.era() == Era::Legacy);
        if !known {
            let e = RpcError::invalid_request(format!("unsupported MCP-Protocol-Version {v:?} for this session"));
            return reply::error(StatusCode::BAD_REQUEST, format, None, &e);
        }
    }
    let frames = match body {
        Value::Array(frames) if session.revision.allows_batches() && !frames.is_empty() => frames,
        Value::Array(_) => {
            let e = RpcError::invalid_request(format!(
                "JSON-RPC batches are part of 2025-03-26 only; this session speaks {}",
                session.revision
            ));
            return reply::error(StatusCode::BAD_REQUEST, format, None, &e);
        }
        single => {
            return match answer(front, &session, single).await {
                Some((status, frame)) => reply::frame(status, format, &frame),
                None => reply::accepted(),
            };
        }
    };
    let replies: Vec<Value> =
        join_all(frames.into_iter().map(|f| answer(front, &session, f))).await.into_iter().flatten().map(|(_, f)| f).collect();
    if replies.is_empty() { reply::accepted() } else { reply::frame(StatusCode::OK, format, &Value::Array(replies)) }
}

/// The reply to one frame of a session; `None` for notifications and responses.
async fn answer(front: &Front, session: &Session, frame: Value) -> Option<(StatusCode, Value)> {
    let (id, method, params) = match Message::classify(frame) {
        Ok(Message::Request { id, method, params }) => (id.to_value(), method, params),
        Ok(_) => return None,
        Err(invalid) => return Some((StatusCode::BAD_REQUEST, error_response(invalid.id.as_ref(), &invalid.error))),
    };
    let outcome = match method.as_str() {
        "initialize" => Err(RpcError::invalid_request("this session is already initialized")),
        "ping" => Ok(json!({})),
        _ => {
            let transport = Transport { session: Some(session.identity_name()), ..Transport::default() };
            let identity = front.gateway.identity(&params, &transport);
            let ctx = CallContext::new(identity, session.revision, session.client_capabilities.clone());
            dispatch::answer(&front.gateway, &ctx, &method, params).await
        }
    };
    Some(match outcome {
        Ok(result) => (StatusCode::OK, result_response(&id, result)),
        Err(e) => (StatusCode::OK, error_response(Some(&id), &e)),
    })
}
