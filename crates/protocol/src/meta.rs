//! The `_meta` keys the protocol reserves, and reading the per-request envelope that a
//! 2026-07-28 request carries in `params._meta`.

use serde_json::{Map, Value};

use crate::error::RpcError;
use crate::revision::Revision;

pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
pub const PROGRESS_TOKEN: &str = "progressToken";
/// The tasks extension's name, in `capabilities.extensions` of either side (2026-07-28).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether a 2026 `ClientCapabilities` object declares the tasks extension.
pub fn declares_tasks(capabilities: &Value) -> bool {
    capabilities.get("extensions").and_then(|e| e.get(TASKS_EXTENSION)).is_some_and(Value::is_object)
}

/// The prefix of every key mcpx owns; callers may never set one.
pub const MCPX_PREFIX: &str = "dev.mcpx/";
/// Where mcpx puts the invocation context it attests to an upstream.
pub const MCPX_INVOCATION: &str = "dev.mcpx/invocation";

/// `params._meta` of a frame's params, if it is an object.
pub fn of(params: &Value) -> Option<&Map<String, Value>> {
    params.get("_meta")?.as_object()
}

/// `params._meta`, created when absent. Replaces a non-object `params` or `_meta`.
pub fn of_mut(params: &mut Value) -> &mut Map<String, Value> {
    if !params.is_object() {
        *params = Value::Object(Map::new());
    }
    let obj = params.as_object_mut().expect("params was just made an object");
    let meta = obj.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("_meta was just made an object")
}

/// Whether a request's `_meta` announces the stateless era.
pub fn has_modern_marker(params: &Value) -> bool {
    of(params).is_some_and(|m| m.contains_key(PROTOCOL_VERSION))
}

/// The envelope every 2026-07-28 request carries.
#[derive(Clone, Debug, PartialEq)]
pub struct ModernEnvelope {
    /// The version string exactly as sent; may name a revision mcpx does not implement.
    pub version: String,
    pub capabilities: Value,
    pub client_info: Option<Value>,
}

impl ModernEnvelope {
    /// Reads the required keys; a missing or mistyped one is -32602, as the spec says.
    pub fn read(params: &Value) -> Result<ModernEnvelope, RpcError> {
        let meta = of(params).ok_or_else(|| RpcError::invalid_params("params._meta is required"))?;
        let version = match meta.get(PROTOCOL_VERSION) {
            Some(Value::String(v)) => v.clone(),
            Some(_) => return Err(RpcError::invalid_params(format!("_meta[{PROTOCOL_VERSION:?}] must be a string"))),
            None => return Err(RpcError::invalid_params(format!("_meta[{PROTOCOL_VERSION:?}] is required"))),
        };
        let capabilities = match meta.get(CLIENT_CAPABILITIES) {
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => {
                return Err(RpcError::invalid_params(format!("_meta[{CLIENT_CAPABILITIES:?}] must be an object")));
            }
            None => return Err(RpcError::invalid_params(format!("_meta[{CLIENT_CAPABILITIES:?}] is required"))),
        };
        Ok(ModernEnvelope { version, capabilities, client_info: meta.get(CLIENT_INFO).cloned() })
    }

    /// The revision named, when mcpx implements it and it is a stateless one.
    pub fn revision(&self) -> Option<Revision> {
        Revision::parse(&self.version).filter(|r| r.era() == crate::Era::Modern)
    }
}

/// Removes every key mcpx owns (`dev.mcpx/…`) from a `_meta` map, so a caller can never
/// pass one through.
pub fn strip_mcpx_keys(meta: &mut Map<String, Value>) {
    meta.retain(|k, _| !k.starts_with(MCPX_PREFIX));
}

/// Removes the stateless envelope keys, for forwarding to a handshake-era upstream that
/// negotiated them once in `initialize`.
pub fn strip_modern_envelope(meta: &mut Map<String, Value>) {
    for key in ENVELOPE_KEYS {
        meta.remove(key);
    }
}

/// The keys of the stateless envelope a 2026-07-28 request carries in `_meta`.
pub const ENVELOPE_KEYS: [&str; 4] = [PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_requires_version_and_capabilities_but_not_client_info() {
        let ok = json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}});
        let env = ModernEnvelope::read(&ok).unwrap();
        assert_eq!(env.revision(), Some(Revision::V2026_07_28));
        assert_eq!(env.client_info, None);
        for bad in [
            json!({}),
            json!({"_meta": {CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {PROTOCOL_VERSION: "2026-07-28"}}),
            json!({"_meta": {PROTOCOL_VERSION: 5, CLIENT_CAPABILITIES: {}}}),
        ] {
            assert_eq!(ModernEnvelope::read(&bad).unwrap_err().code, -32602, "{bad}");
        }
    }

    #[test]
    fn a_legacy_version_is_not_a_modern_revision() {
        let p = json!({"_meta": {PROTOCOL_VERSION: "2025-11-25", CLIENT_CAPABILITIES: {}}});
        assert_eq!(ModernEnvelope::read(&p).unwrap().revision(), None);
    }

    #[test]
    fn mcpx_keys_are_stripped_and_others_kept() {
        let mut m = json!({"dev.mcpx/invocation": 1, "dev.mcpx/session": "a", "progressToken": 3, "x": 1})
            .as_object()
            .unwrap()
            .clone();
        strip_mcpx_keys(&mut m);
        assert_eq!(Value::Object(m), json!({"progressToken": 3, "x": 1}));
    }
}
