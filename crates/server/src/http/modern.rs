//! A 2026-07-28 request over HTTP: no session. The transport's share of admission (steps
//! 1, 3 and 5 of `modern`: the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
//! headers), then the answer inline or as an event stream, and `subscriptions/listen` as
//! a long-lived event stream.

use axum::http::HeaderMap;
use axum::response::Response;
use mcpx_gateway::Transport;
use mcpx_protocol::{Message, RpcError, header};
use serde_json::Value;

use crate::caller::Caller;
use crate::dispatch;
use crate::front::Front;
use crate::listen;
use crate::modern::{self, Admitted};
use crate::reply::{self, Format};

/// The HTTP modern front end's identity step: the transport admission found (token on
/// TCP, pid and cwd over the socket), no session of its own, and the request's
/// `Mcp-Param-*` headers. Who is asking is that plus what the request's `_meta` names.
fn caller(front: &Front, transport: &Transport, headers: &HeaderMap) -> Caller {
    Caller::new(front.gateway.clone(), transport.clone())
        .with_param_headers(param_headers(headers))
        .with_trace_headers(headers)
}

/// Answers one 2026 message.
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
            return reply::refusal(format, Some(&id.to_value()), &e);
        }
    };
    let Some(header_version) = header_text(headers, "mcp-protocol-version") else {
        let e = RpcError::header_mismatch("the MCP-Protocol-Version header is required");
        return reply::refusal(format, Some(&id), &e);
    };
    let admitted = match modern::admit(&method, &params, Some(header_version), || {
        check_mirrored_headers(headers, &method, &params)
    }) {
        Ok(admitted) => admitted,
        Err(e) => return reply::refusal(format, Some(&id), &e),
    };
    let caller = caller(front, transport, headers);
    // The answer's future is boxed where it is made (the listen's too): KiBs, which an
    // `await` here would build and then move into this future, and every layer above would
    // move again.
    if method == "subscriptions/listen" {
        return Box::pin(listen(caller, admitted, id, params)).await;
    }
    // A caller that takes an event stream gets the request's notifications there, before
    // the response; closing that stream cancels the request. (A request with nothing to
    // report is answered inline: closing its connection drops, so cancels, it too.)
    if format.allows_stream() && dispatch::may_notify(&params) {
        let max_notes = front.gateway.settings().config().limits.max_buffered_notifications;
        return reply::streamed(true, format, max_notes, move |notify| async move {
            dispatch::response(&id, modern::answer(&caller, admitted, &id, &method, params, Some(&notify)).await)
        })
        .await;
    }
    reply::outcome(format, &id, Box::pin(modern::answer(&caller, admitted, &id, &method, params, None)).await)
}

/// A `subscriptions/listen`: a long-lived event stream. The caller closing it ends the
/// listen (and releases what it watched).
async fn listen(caller: Caller, admitted: Admitted, id: Value, params: Value) -> Response {
    match modern::listen(&caller, admitted, &params).await {
        Ok(watch) => reply::open_stream(listen::frames(caller.gateway, id, watch)),
        Err(e) => reply::answer(Format::Json, &dispatch::response(&id, Err(e))),
    }
}

/// `Mcp-Method` must name the body's method; `Mcp-Name` must carry the body's tool or
/// prompt name, resource URI or task id, for the methods that have one.
fn check_mirrored_headers(headers: &HeaderMap, method: &str, params: &Value) -> Result<(), RpcError> {
    match header_text(headers, "mcp-method") {
        Some(m) if m == method => {}
        Some(m) => return Err(RpcError::header_mismatch(format!("Mcp-Method {m:?} does not match method {method:?}"))),
        None => return Err(RpcError::header_mismatch("the Mcp-Method header is required")),
    }
    let named_field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
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
