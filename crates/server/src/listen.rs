//! `subscriptions/listen` on the wire: the acknowledgement first, then every change the
//! caller asked for, each tagged with the listen request's id as `subscriptionId`, until
//! the caller stops listening (closes its stream; on stdio, cancels the request) or the
//! daemon stops, which ends the listen with a normal result so the caller can listen again.

use std::sync::Arc;

use mcpx_gateway::{Gateway, Watch};
use mcpx_protocol::message::{notification, result_response};
use mcpx_protocol::meta;
use serde_json::{Value, json};

/// The acknowledgement, which takes what the watch honours: it is said once, and a listen
/// that kept it would hold it for as long as it lives.
pub fn acknowledgement(id: &Value, watch: &mut Watch) -> Value {
    let honored = std::mem::take(&mut watch.honored);
    notification(
        "notifications/subscriptions/acknowledged",
        json!({ "_meta": { meta::SUBSCRIPTION_ID: id }, "notifications": honored }),
    )
}

/// A change, tagged for the listen it is delivered on.
pub fn tagged(id: &Value, mut change: Value) -> Value {
    if let Some(params) = change.get_mut("params").filter(|p| p.is_object()) {
        meta::of_mut(params).insert(meta::SUBSCRIPTION_ID.into(), id.clone());
    } else {
        change["params"] = json!({ "_meta": { meta::SUBSCRIPTION_ID: id } });
    }
    change
}

/// The result that ends a listen gracefully.
pub fn ended(id: &Value) -> Value {
    result_response(
        id,
        json!({
            "resultType": "complete",
            "_meta": { meta::SUBSCRIPTION_ID: id, meta::SERVER_INFO: Gateway::server_info().clone() },
        }),
    )
}

/// What a listen produces next.
pub enum Next {
    Frame(Value),
    /// Nothing more will come (the daemon is stopping, or every upstream watched is
    /// gone): this is the last frame.
    End(Value),
}

/// The next thing to send on a listen, waiting as long as it takes.
pub async fn next(gateway: &Arc<Gateway>, id: &Value, watch: &mut Watch) -> Next {
    tokio::select! {
        change = watch.changes.recv() => match change {
            Some(change) => Next::Frame(tagged(id, change)),
            None => Next::End(ended(id)),
        },
        _ = gateway.closing() => Next::End(ended(id)),
    }
}

/// Every frame of a listen, the acknowledgement first and the end last.
///
/// Everything is kept in the stream's state and borrowed, not moved into each step's
/// future: the stream lives as long as the listen, and a step holding its own copy of the
/// watch (and of the gateway and id) beside the state's made every listen larger.
pub fn frames(gateway: Arc<Gateway>, id: Value, mut watch: Watch) -> impl futures::Stream<Item = Value> + Send {
    let first = acknowledgement(&id, &mut watch);
    futures::stream::unfold(Some((Some(first), watch, gateway, id)), |mut state| async move {
        let (first, watch, gateway, id) = state.as_mut()?;
        if let Some(ack) = first.take() {
            return Some((ack, state));
        }
        match next(gateway, id, watch).await {
            Next::Frame(frame) => Some((frame, state)),
            Next::End(last) => Some((last, None)),
        }
    })
}
