//! Change notifications: what an upstream says changed on its side (lists, subscribed
//! resources), as opposed to what it says about one request. Both transports hand them on
//! untagged, for the gateway to tag for each of its own watchers.

use serde_json::Value;

/// Notifications that say something changed on the server, as opposed to notifications
/// about one request.
pub const CHANGE_NOTIFICATIONS: [&str; 4] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
];

pub(crate) fn is_change(method: &str) -> bool {
    CHANGE_NOTIFICATIONS.contains(&method)
}

/// A change notification without the upstream's subscription tag (mcpx tags it again for
/// each of its own watchers).
pub(crate) fn untagged_change(method: &str, mut params: Value) -> Value {
    if let Some(Value::Object(m)) = params.get_mut("_meta") {
        m.remove(mcpx_protocol::meta::SUBSCRIPTION_ID);
        if m.is_empty() {
            params.as_object_mut().map(|p| p.remove("_meta"));
        }
    }
    mcpx_protocol::message::notification(method, params)
}
