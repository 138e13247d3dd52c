//! Which protocol era a request belongs to, and the rules that differ between eras.
//!
//! Legacy (2025-11-25 and earlier) traffic lives in a session opened by `initialize`.
//! Modern (2026-07-28) requests are stateless: each one names its protocol version and
//! client capabilities in `params._meta`, and each result names its `resultType` and the
//! server. This module decides the era and applies the modern envelope; it never keeps
//! state between requests.

use clap::ValueEnum;
use serde_json::{Map, Value, json};

use crate::instance::Instance;
use crate::wire::{INVALID_PARAMS, RpcError, UNSUPPORTED_PROTOCOL_VERSION};

pub const MODERN_VERSION: &str = "2026-07-28";
/// Legacy versions an `initialize` may ask for; the last one is the counter-offer.
pub const LEGACY_VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];

pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// The era one request is handled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Legacy,
    Modern,
}

impl Era {
    pub fn label(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// Which eras this process speaks (`--era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EraMode {
    /// Dual-era: modern `_meta` means stateless handling, otherwise legacy session rules.
    Both,
    /// A 2025-11-25 server that has never heard of modern `_meta`.
    Legacy,
    /// A 2026-07-28 server that refuses `initialize`.
    Modern,
}

impl EraMode {
    pub fn label(self) -> &'static str {
        match self {
            EraMode::Both => "both",
            EraMode::Legacy => "legacy",
            EraMode::Modern => "modern",
        }
    }

    /// The era whose rules apply to a message with these `params`.
    pub fn era_of(self, params: &Value) -> Era {
        match self {
            EraMode::Legacy => Era::Legacy,
            EraMode::Modern => Era::Modern,
            EraMode::Both if names_protocol_version(params) => Era::Modern,
            EraMode::Both => Era::Legacy,
        }
    }
}

/// Whether `params._meta` carries the modern protocol-version key, the marker of a
/// stateless 2026-07-28 request (its value is checked later, by `check_modern_request`).
pub fn names_protocol_version(params: &Value) -> bool {
    meta(params).is_some_and(|meta| meta.contains_key(PROTOCOL_VERSION_KEY))
}

/// `params._meta`, when it is an object.
pub fn meta(params: &Value) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

/// Checks the `_meta` every modern request must carry: both required keys present
/// (-32602 naming the missing one), then a version this server implements (-32022).
pub fn check_modern_request(params: &Value) -> Result<(), RpcError> {
    let empty = Map::new();
    let meta = meta(params).unwrap_or(&empty);
    let missing = |key: &str| RpcError::new(INVALID_PARAMS, format!("missing required _meta key \"{key}\""));
    let version = meta.get(PROTOCOL_VERSION_KEY).ok_or_else(|| missing(PROTOCOL_VERSION_KEY))?;
    let capabilities = meta.get(CLIENT_CAPABILITIES_KEY).ok_or_else(|| missing(CLIENT_CAPABILITIES_KEY))?;
    if !capabilities.is_object() {
        return Err(RpcError::new(INVALID_PARAMS, format!("_meta \"{CLIENT_CAPABILITIES_KEY}\" must be an object")));
    }
    let Some(version) = version.as_str() else {
        return Err(RpcError::new(INVALID_PARAMS, format!("_meta \"{PROTOCOL_VERSION_KEY}\" must be a string")));
    };
    if version != MODERN_VERSION {
        return Err(unsupported_version(json!(version)));
    }
    Ok(())
}

/// -32022 listing what this server speaks; `requested` is whatever the client asked for.
pub fn unsupported_version(requested: Value) -> RpcError {
    RpcError::new(UNSUPPORTED_PROTOCOL_VERSION, "unsupported protocol version")
        .with_data(json!({"supported": [MODERN_VERSION], "requested": requested}))
}

/// Wraps a result body in the modern envelope: `resultType` first, then the body, then
/// `_meta` naming this server.
pub fn complete(body: Value, instance: &Instance) -> Value {
    with_result_type("complete", body, instance)
}

/// The modern interim answer of a multi round-trip request: `body` holds `inputRequests`
/// and/or `requestState`. It never carries caching hints.
pub fn input_required(body: Value, instance: &Instance) -> Value {
    with_result_type("input_required", body, instance)
}

/// The modern answer that hands the client a task (the tasks extension): `body` is the
/// task's own fields.
pub fn task(body: Value, instance: &Instance) -> Value {
    with_result_type("task", body, instance)
}

fn with_result_type(result_type: &str, body: Value, instance: &Instance) -> Value {
    let mut result = Map::new();
    result.insert("resultType".into(), result_type.into());
    if let Value::Object(body) = body {
        result.extend(body);
    }
    let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(SERVER_INFO_KEY.into(), instance.server_info());
    }
    Value::Object(result)
}
