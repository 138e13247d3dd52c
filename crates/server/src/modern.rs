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
//!
//! Transport-free: steps 1, 3 and 5 are the HTTP front end's to check (`http::modern`),
//! and the HTTP status of a refusal is `reply`'s to decide. It never imports a front end.

use mcpx_gateway::Watch;
use mcpx_protocol::meta::ModernEnvelope;
use mcpx_protocol::{Era, Revision, RpcError};
use serde_json::Value;

use crate::caller::Caller;
use crate::dispatch::{self, Notify};

/// Methods a 2026-07-28 caller may send to mcpx, the tasks extension's included.
/// Handshake-era methods (`initialize`, `ping`, `logging/setLevel`, `resources/subscribe`,
/// `tasks/result`, `tasks/list`…) are unknown in this era.
const METHODS: [&str; 13] = [
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
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// A request that passed admission.
pub struct Admitted {
    pub revision: Revision,
    pub capabilities: Value,
}

/// Steps 2-6 for any transport. `header_version` is the HTTP version header (step 3);
/// `mirrored` checks the HTTP mirror headers (step 5); stdio has neither. A refusal is
/// the JSON-RPC error alone: its HTTP status follows from its code (`reply::refusal_status`).
pub fn admit(
    method: &str,
    params: &Value,
    header_version: Option<&str>,
    mirrored: impl FnOnce() -> Result<(), RpcError>,
) -> Result<Admitted, RpcError> {
    let envelope = ModernEnvelope::read(params)?;
    if let Some(header_version) = header_version.filter(|v| *v != envelope.version) {
        return Err(RpcError::header_mismatch(format!(
            "MCP-Protocol-Version {header_version:?} does not match _meta version {:?}",
            envelope.version
        )));
    }
    let Some(revision) = envelope.revision() else {
        return Err(RpcError::unsupported_version(&envelope.version, &supported_versions()));
    };
    mirrored()?;
    if !METHODS.contains(&method) {
        return Err(RpcError::method_not_found(method));
    }
    Ok(Admitted { revision, capabilities: envelope.capabilities })
}

/// Answers an admitted request (the caller's `id` for it) for `caller`.
pub async fn answer(
    caller: &Caller,
    admitted: Admitted,
    id: &Value,
    method: &str,
    params: Value,
    notify: Option<&Notify>,
) -> Result<Value, RpcError> {
    let listener = dispatch::listener(&params, notify, None, None)?;
    let ctx = caller
        .context(&params, admitted.revision, admitted.capabilities, listener)
        .with_request_id(id, caller.gateway.traces_on());
    if method == "server/discover" {
        let discovered = caller.gateway.discover(&supported_versions(), &caller.transport.principal);
        let outcome = dispatch::shaped(Ok(discovered), &ctx, method);
        caller.gateway.trace_answered(&ctx, method, &params, outcome.as_ref());
        outcome
    } else {
        dispatch::answer(&caller.gateway, &ctx, method, params).await
    }
}

/// Opens an admitted `subscriptions/listen` for `caller`: what it watches, until the
/// front end stops reading it (see `listen` for the frames it sends).
pub async fn listen(caller: &Caller, admitted: Admitted, params: &Value) -> Result<Watch, RpcError> {
    let ctx = caller.context(params, admitted.revision, admitted.capabilities, None);
    caller.gateway.watch(&ctx, params).await.map_err(RpcError::from)
}

fn supported_versions() -> Vec<&'static str> {
    Revision::of_era(Era::Modern).map(Revision::as_str).collect()
}
