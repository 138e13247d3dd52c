//! The step every front end shares once a request is admitted: ask the gateway, shape the
//! outcome for the caller's revision.

use mcpx_gateway::{Answer, CallContext, Gateway};
use mcpx_protocol::RpcError;
use mcpx_protocol::shape::{shape_error, shape_result};
use serde_json::Value;

pub async fn answer(gateway: &Gateway, ctx: &CallContext, method: &str, params: Value) -> Result<Value, RpcError> {
    let outcome = gateway.handle(ctx, method, params).await;
    shaped(outcome, ctx, method)
}

pub fn shaped(outcome: Result<Answer, RpcError>, ctx: &CallContext, method: &str) -> Result<Value, RpcError> {
    let Answer { mut result, cache } = outcome.map_err(|e| shape_error(e, ctx.revision))?;
    shape_result(&mut result, method, ctx.revision, &Gateway::server_info(), cache);
    Ok(result)
}
