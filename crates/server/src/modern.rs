//! A 2026-07-28 request on `/mcp`: self-contained, validated in the order the transport
//! spec gives (PROTOCOL-NOTES §6.3), so each mistake gets the code a conformant client
//! expects:
//!
//! 1. `MCP-Protocol-Version` header present                          else 400 / -32020
//! 2. `_meta` protocolVersion and clientCapabilities present          else 400 / -32602
//! 3. header equals `_meta` version                                   else 400 / -32020
//! 4. version supported                                               else 400 / -32022
//! 5. `Mcp-Method` (and `Mcp-Name`) mirror the body                   else 400 / -32020
//! 6. method known in this era                                        else 404 / -32601
//!
//! No context carries from one request to the next: version, capabilities and session
//! are read from each request anew.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use mcpx_gateway::{CallContext, Transport};
use mcpx_protocol::meta::ModernEnvelope;
use mcpx_protocol::{Era, Message, Revision, RpcError, header};
use serde_json::Value;

use crate::dispatch;
use crate::http::Front;
use crate::reply::{self, Format};

/// Methods a 2026-07-28 caller may send to mcpx. Handshake-era methods (`initialize`,
/// `ping`, `logging/setLevel`, `resources/subscribe`…) are unknown in this era.
const METHODS: [&str; 3] = ["server/discover", "tools/list", "tools/call"];

pub async fn handle(front: &Front, headers: &HeaderMap, format: Format, frame: Message) -> Response {
    let (id, method, params) = match frame {
        Message::Request { id, method, params } => (id, method, params),
        // No client→server notification is defined over HTTP in this era; accept and drop.
        Message::Notification { .. } => return reply::accepted(),
        Message::Response { id, .. } => {
            let e = RpcError::invalid_request("a 2026-07-28 client never sends responses");
            return reply::error(StatusCode::BAD_REQUEST, format, Some(&id.to_value()), &e);
        }
    };
    let id_value = id.to_value();
    let fail = |status: StatusCode, e: RpcError| reply::error(status, format, Some(&id_value), &e);

    let Some(header_version) = header_text(headers, "mcp-protocol-version") else {
        return fail(StatusCode::BAD_REQUEST, RpcError::header_mismatch("the MCP-Protocol-Version header is required"));
    };
    let envelope = match ModernEnvelope::read(&params) {
        Ok(envelope) => envelope,
        Err(e) => return fail(StatusCode::BAD_REQUEST, e),
    };
    if header_version != envelope.version {
        return fail(
            StatusCode::BAD_REQUEST,
            RpcError::header_mismatch(format!(
                "MCP-Protocol-Version {header_version:?} does not match _meta version {:?}",
                envelope.version
            )),
        );
    }
    let Some(revision) = envelope.revision() else {
        let supported: Vec<&str> = Revision::of_era(Era::Modern).map(Revision::as_str).collect();
        return fail(StatusCode::BAD_REQUEST, RpcError::unsupported_version(&envelope.version, &supported));
    };
    if let Err(e) = check_mirrored_headers(headers, &method, &params) {
        return fail(StatusCode::BAD_REQUEST, e);
    }
    if !METHODS.contains(&method.as_str()) {
        return fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method));
    }

    let identity = front.gateway.identity(&params, &Transport::default());
    let ctx = CallContext::new(identity, revision, envelope.capabilities);
    let outcome = if method == "server/discover" {
        let supported: Vec<&str> = Revision::of_era(Era::Modern).map(Revision::as_str).collect();
        dispatch::shaped(Ok(front.gateway.discover(&supported)), &ctx, &method)
    } else {
        dispatch::answer(&front.gateway, &ctx, &method, params).await
    };
    match outcome {
        Ok(result) => reply::frame(StatusCode::OK, format, &mcpx_protocol::message::result_response(&id_value, result)),
        Err(e) => fail(StatusCode::OK, e),
    }
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
    let decoded =
        header::decode(header_name).ok_or_else(|| RpcError::header_mismatch("Mcp-Name is not valid base64 of UTF-8"))?;
    if body_name != Some(decoded.as_str()) {
        return Err(RpcError::header_mismatch(format!(
            "Mcp-Name {decoded:?} does not match params.{named_field} {body_name:?}"
        )));
    }
    Ok(())
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
