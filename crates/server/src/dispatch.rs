//! The step every front end shares once a request is admitted: ask the gateway, shape the
//! outcome for the caller's revision. Also how a front end offers the caller's transport
//! for notifications about one request (progress).

use std::sync::Arc;

use mcpx_gateway::{Answer, CallContext, Gateway, Progress};
use mcpx_protocol::message::notification;
use mcpx_protocol::shape::{shape_error, shape_result};
use mcpx_protocol::{RequestId, RpcError, meta};
use serde_json::Value;

/// Sends one notification frame to the caller of a request (its SSE stream, its stdio).
pub type Notify = Arc<dyn Fn(Value) + Send + Sync>;

pub async fn answer(gateway: &Gateway, ctx: &CallContext, method: &str, params: Value) -> Result<Value, RpcError> {
    let outcome = gateway.handle(ctx, method, params).await;
    shaped(outcome, ctx, method)
}

pub fn shaped(outcome: Result<Answer, RpcError>, ctx: &CallContext, method: &str) -> Result<Value, RpcError> {
    let Answer { mut result, cache } = outcome.map_err(|e| shape_error(e, ctx.revision))?;
    shape_result(&mut result, method, ctx.revision, &Gateway::server_info(), cache);
    Ok(result)
}

/// The caller's progress token, when it sent one (a string or an integer).
pub fn progress_token(params: &Value) -> Option<Value> {
    let token = meta::of(params)?.get(meta::PROGRESS_TOKEN)?;
    RequestId::from_value(token).map(|_| token.clone())
}

/// Progress for a request whose caller can receive notifications through `notify`.
pub fn progress(params: &Value, notify: Option<&Notify>) -> Option<Progress> {
    let (token, notify) = (progress_token(params)?, notify?.clone());
    Some(Progress { token, notify: Arc::new(move |params| notify(notification("notifications/progress", params))) })
}
