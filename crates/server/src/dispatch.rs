//! The step every front end shares once a request is admitted: ask the gateway, shape the
//! outcome for the caller's revision, and turn it into the response frame. Also how a
//! front end offers the caller's transport for notifications about one request (progress).

use std::sync::Arc;

use mcpx_gateway::{Answer, Ask, CallContext, Gateway, LOG_LEVELS, Listener};
use mcpx_protocol::message::{error_response, result_response};
use mcpx_protocol::shape::{shape_error, shape_result};
use mcpx_protocol::{RequestId, Revision, RpcError, meta};
use serde_json::Value;

use crate::caller::Caller;

/// Sends one notification frame to the caller of a request (its SSE stream, its stdio).
pub type Notify = Arc<dyn Fn(Value) + Send + Sync>;

pub async fn answer(gateway: &Gateway, ctx: &CallContext, method: &str, params: Value) -> Result<Value, RpcError> {
    let outcome = gateway.handle(ctx, method, params).await.map_err(RpcError::from);
    shaped(outcome, ctx, method)
}

pub fn shaped(outcome: Result<Answer, RpcError>, ctx: &CallContext, method: &str) -> Result<Value, RpcError> {
    let Answer { mut result, cache } = outcome.map_err(|e| shape_error(e, ctx.revision))?;
    shape_result(&mut result, method, ctx.revision, Gateway::server_info(), cache);
    Ok(result)
}

/// The span of a request the front end answered itself (`initialize`, `ping`,
/// `logging/setLevel`, `server/discover`), when spans are exported: its context is made
/// only then.
pub fn traced(
    caller: &Caller,
    revision: Revision,
    id: &Value,
    method: &str,
    params: &Value,
    outcome: Result<&Value, &RpcError>,
) {
    if caller.gateway.traces_on() {
        let ctx = caller.context(params, revision, Value::Null, None).with_request_id(id, true);
        caller.gateway.trace_answered(&ctx, method, params, outcome);
    }
}

/// The response frame to request `id`: its result, or its error. Every front end answers
/// a request it ran through this.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => result_response(id, result),
        Err(e) => error_response(Some(id), &e),
    }
}

/// The caller's progress token, when it sent one (a string or an integer).
pub fn progress_token(params: &Value) -> Option<Value> {
    let token = meta::of(params)?.get(meta::PROGRESS_TOKEN)?;
    RequestId::from_value(token).map(|_| token.clone())
}

/// Whether a 2026 request can have anything to say before its response: a progress
/// token or a log level in its `_meta`. Without either it is answered as one frame,
/// without the machinery of a stream.
pub fn may_notify(params: &Value) -> bool {
    meta::of(params).is_some_and(|m| m.contains_key(meta::PROGRESS_TOKEN) || m.contains_key(meta::LOG_LEVEL))
}

/// Who hears about a request while it runs, when its caller can receive notifications
/// through `notify`: progress if it sent a token; log messages at the level a 2026 caller
/// names in `_meta` (none without it), or at its session's level (`session_level`) for a
/// handshake-era caller, which can also be asked questions (`ask`). A level that is not a
/// log level is -32602.
pub fn listener(
    params: &Value,
    notify: Option<&Notify>,
    ask: Option<Ask>,
    session_level: Option<&str>,
) -> Result<Option<Listener>, RpcError> {
    let log_level = match session_level {
        Some(level) => Some(level.to_owned()),
        None => match meta::of(params).and_then(|m| m.get(meta::LOG_LEVEL)) {
            None => None,
            Some(Value::String(level)) if LOG_LEVELS.contains(&level.as_str()) => Some(level.clone()),
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "_meta[{:?}] must be one of {}, not {other}",
                    meta::LOG_LEVEL,
                    LOG_LEVELS.join(", ")
                )));
            }
        },
    };
    let Some(notify) = notify else { return Ok(None) };
    let progress_token = progress_token(params);
    if progress_token.is_none() && log_level.is_none() && ask.is_none() {
        return Ok(None);
    }
    Ok(Some(Listener { progress_token, log_level, notify: notify.clone(), ask }))
}
