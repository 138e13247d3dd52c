//! JSON-RPC error codes MCP uses, and the error value mcpx puts on the wire.

use serde_json::{Map, Value, json};

/// Error codes, by the name the spec gives them.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// 2026-07-28: HTTP headers absent, malformed, or disagreeing with the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: the request needs a client capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// 2026-07-28: the requested protocol version is not implemented.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// Handshake era only: resource not found (2026-07-28 uses -32602).
    pub const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;
}

/// A JSON-RPC error object: `code`, `message`, optional `data`.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        RpcError::new(code::PARSE_ERROR, format!("parse error: {detail}"))
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(code::INVALID_REQUEST, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(code::METHOD_NOT_FOUND, format!("method not found: {method}"))
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(code::INVALID_PARAMS, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(code::INTERNAL_ERROR, message)
    }

    pub fn header_mismatch(message: impl Into<String>) -> Self {
        RpcError::new(code::HEADER_MISMATCH, message)
    }

    pub fn unsupported_version(requested: &str, supported: &[&str]) -> Self {
        RpcError::new(code::UNSUPPORTED_PROTOCOL_VERSION, format!("unsupported protocol version {requested:?}"))
            .with_data(json!({ "supported": supported, "requested": requested }))
    }

    pub fn missing_capability(required: Value) -> Self {
        RpcError::new(
            code::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "the request needs a client capability it did not declare",
        )
        .with_data(json!({ "requiredCapabilities": required }))
    }

    /// Reads an error object received from a peer; `None` when it is not one.
    pub fn from_value(v: &Value) -> Option<Self> {
        let obj = v.as_object()?;
        Some(RpcError {
            code: obj.get("code")?.as_i64()?,
            message: obj.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
            data: obj.get("data").cloned(),
        })
    }

    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), self.code.into());
        obj.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            obj.insert("data".into(), data.clone());
        }
        Value::Object(obj)
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_version_names_both_sides() {
        let e = RpcError::unsupported_version("v999", &["2026-07-28"]);
        assert_eq!(e.code, -32022);
        assert_eq!(e.to_value()["data"], json!({"supported": ["2026-07-28"], "requested": "v999"}));
    }

    #[test]
    fn an_error_survives_a_round_trip() {
        let e = RpcError::invalid_params("nope").with_data(json!({"uri": "x"}));
        assert_eq!(RpcError::from_value(&e.to_value()), Some(e));
        assert_eq!(RpcError::from_value(&json!({"message": "no code"})), None);
    }
}
