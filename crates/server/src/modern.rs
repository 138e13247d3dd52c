//! A 2026-07-28 request: self-contained, admitted in the order the transport spec gives
//! (Streamable HTTP, 2026-07-28), so each mistake gets the code a conformant client expects:
//!
//! 1. `MCP-Protocol-Version` header present (HTTP only)               else 400 / -32020
//! 2. `_meta` protocolVersion and clientCapabilities present          else 400 / -32602
//! 3. header equals `_meta` version (HTTP only)                       else 400 / -32020
//! 4. version supported                                               else 400 / -32022
//! 5. `Mcp-Method` (and `Mcp-Name`) mirror the body (HTTP only)       else 400 / -32020
//! 6. method known in this era                                        else 404 / -32601
//!
//! No context carries from one request to the next: version, capabilities and session
//! are read from each request anew.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use mcpx_gateway::{CallContext, Gateway, Transport};
use mcpx_protocol::meta::ModernEnvelope;
use mcpx_protocol::{Era, Message, Revision, RpcError, header};
use serde_json::Value;

use crate::dispatch::{self, Notify};
use crate::http::Front;
use crate::reply::{self, Format};

/// Methods a 2026-07-28 caller may send to mcpx. Handshake-era methods (`initialize`,
/// `ping`, `logging/setLevel`, `resources/subscribe`…) are unknown in this era.
const METHODS: [&str; 10] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "subscriptions/listen",
];

/// A request that passed admission.
pub struct Admitted {
    pub revision: Revision,
    pub capabilities: Value,
}

/// Why a request was not admitted: the HTTP status and the JSON-RPC error.
pub type Refusal = (StatusCode, RpcError);

/// Steps 2-6 for any transport. `header_version` is the HTTP version header (step 3);
/// `mirrored` checks the HTTP mirror headers (step 5); stdio has neither.
pub fn admit(
    method: &str,
    params: &Value,
    header_version: Option<&str>,
    mirrored: impl FnOnce() -> Result<(), RpcError>,
) -> Result<Admitted, Refusal> {
    let bad = |e| (StatusCode::BAD_REQUEST, e);
    let envelope = ModernEnvelope::read(params).map_err(bad)?;
    if let Some(header_version) = header_version.filter(|v| *v != envelope.version) {
        return Err(bad(RpcError::header_mismatch(format!(
            "MCP-Protocol-Version {header_version:?} does not match _meta version {:?}",
            envelope.version
        ))));
    }
    let Some(revision) = envelope.revision() else {
        return Err(bad(RpcError::unsupported_version(&envelope.version, &supported_versions())));
    };
    mirrored().map_err(bad)?;
    if !METHODS.contains(&method) {
        return Err((StatusCode::NOT_FOUND, RpcError::method_not_found(method)));
    }
    Ok(Admitted { revision, capabilities: envelope.capabilities })
}

/// Answers an admitted request for the caller that `transport` describes.
/// `param_headers` are the `Mcp-Param-*` headers of an HTTP request.
pub async fn answer(
    gateway: &Gateway,
    transport: &Transport,
    admitted: Admitted,
    method: &str,
    params: Value,
    notify: Option<&Notify>,
    param_headers: Option<Vec<(String, String)>>,
) -> Result<Value, RpcError> {
    let identity = gateway.identity(&params, transport);
    let listener = dispatch::listener(&params, notify, None, None)?;
    let ctx = CallContext::new(identity, admitted.revision, admitted.capabilities)
        .with_listener(listener)
        .with_param_headers(param_headers);
    if method == "server/discover" {
        dispatch::shaped(Ok(gateway.discover(&supported_versions())), &ctx, method)
    } else {
        dispatch::answer(gateway, &ctx, method, params).await
    }
}

fn supported_versions() -> Vec<&'static str> {
    Revision::of_era(Era::Modern).map(Revision::as_str).collect()
}

/// A modern request over HTTP: no session; who is asking is what the request names plus
/// what the transport knows (`transport`).
pub async fn handle(
    front: &Front,
    transport: &Transport,
    headers: &HeaderMap,
    format: Format,
    frame: Message,
) -> Response {
    let (id, method, params) = match frame {
        Message::Request { id, method, params } => (id.to_value(), method, params),
        // No client→server notification is defined over HTTP in this era; accept and drop.
        Message::Notification { .. } => return reply::accepted(),
        Message::Response { id, .. } => {
            let e = RpcError::invalid_request("a 2026-07-28 client never sends responses");
            return reply::error(StatusCode::BAD_REQUEST, format, Some(&id.to_value()), &e);
        }
    };
    let Some(header_version) = header_text(headers, "mcp-protocol-version") else {
        let e = RpcError::header_mismatch("the MCP-Protocol-Version header is required");
        return reply::error(StatusCode::BAD_REQUEST, format, Some(&id), &e);
    };
    let admitted =
        match admit(&method, &params, Some(header_version), || check_mirrored_headers(headers, &method, &params)) {
            Ok(admitted) => admitted,
            Err((status, e)) => return reply::error(status, format, Some(&id), &e),
        };
    let frame_of = |id: &Value, outcome: Result<Value, RpcError>| match outcome {
        Ok(result) => mcpx_protocol::message::result_response(id, result),
        Err(e) => mcpx_protocol::message::error_response(Some(id), &e),
    };
    if method == "subscriptions/listen" {
        return crate::http::listen(front, transport, admitted, id, params).await;
    }
    let param_headers = Some(param_headers(headers));
    // A caller that takes an event stream gets the request's notifications there, before
    // the response; closing that stream cancels the request. (A request with nothing to
    // report is answered inline: closing its connection drops, so cancels, it too.)
    if format.allows_stream() && dispatch::may_notify(&params) {
        let gateway = front.gateway.clone();
        let transport = transport.clone();
        let max_notes = gateway.settings().config().limits.max_buffered_notifications;
        return reply::streamed(true, format, max_notes, move |notify| async move {
            frame_of(&id, answer(&gateway, &transport, admitted, &method, params, Some(&notify), param_headers).await)
        })
        .await;
    }
    let frame = frame_of(&id, answer(&front.gateway, transport, admitted, &method, params, None, param_headers).await);
    reply::frame(reply::status_for(&frame), format, &frame)
}

/// `Mcp-Method` must name the body's method; `Mcp-Name` must carry the body's tool or
/// prompt name, or resource URI, for the methods that have one.
fn check_mirrored_headers(headers: &HeaderMap, method: &str, params: &Value) -> Result<(), RpcError> {
    match header_text(headers, "mcp-method") {
        Some(m) if m == method => {}
        Some(m) => return Err(RpcError::header_mismatch(format!("Mcp-Method {m:?} does not match method {method:?}"))),
        None => return Err(RpcError::header_mismatch("the Mcp-Method header is required")),
    }
    let named_field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return Ok(()),
    };
    let body_name = params.get(named_field).and_then(Value::as_str);
    let header_name = header_text(headers, "mcp-name")
        .ok_or_else(|| RpcError::header_mismatch(format!("the Mcp-Name header is required for {method}")))?;
    let decoded = header::decode(header_name)
        .ok_or_else(|| RpcError::header_mismatch("Mcp-Name is not valid base64 of UTF-8"))?;
    if body_name != Some(decoded.as_str()) {
        return Err(RpcError::header_mismatch(format!(
            "Mcp-Name {decoded:?} does not match params.{named_field} {body_name:?}"
        )));
    }
    Ok(())
}

/// The `Mcp-Param-*` headers: the name after the prefix, and the value as sent.
fn param_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            let suffix = name.as_str().strip_prefix("mcp-param-")?;
            Some((suffix.to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
