//! What making a connection says and what the answers mean, for both transports: the
//! era probe (`server/discover` with the stateless envelope), `initialize` for a
//! handshake-era upstream, and the [`ServerFacts`] read from either answer. How each
//! transport runs the exchange (timeouts, a late discover answer) is its own: `pipe` for
//! stdio, `http` for HTTP.

use mcpx_protocol::{Era, Revision, meta};
use serde_json::{Value, json};

use crate::error::UpstreamError;

/// What the upstream told mcpx about itself when the connection was made.
#[derive(Clone, Debug)]
pub struct ServerFacts {
    pub era: Era,
    pub revision: Revision,
    pub capabilities: Value,
    pub server_info: Option<Value>,
    pub instructions: Option<String>,
}

pub(crate) fn client_info() -> Value {
    // Built once: a copy costs less than building (and hashing) it for every request.
    static CLIENT_INFO: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    CLIENT_INFO.get_or_init(|| json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") })).clone()
}

/// The 2026 revision a -32022 error says the server speaks and mcpx speaks too.
pub(crate) fn supported_modern(e: &mcpx_protocol::RpcError) -> Option<Revision> {
    e.data
        .as_ref()?
        .get("supported")?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().and_then(Revision::parse))
        .filter(|r| r.era() == Era::Modern)
        .max()
}

/// The `_meta` of mcpx's own stateless requests (the probe): no capabilities.
pub(crate) fn modern_envelope() -> Value {
    json!({
        meta::PROTOCOL_VERSION: Revision::LATEST_MODERN.as_str(),
        meta::CLIENT_CAPABILITIES: {},
        meta::CLIENT_INFO: client_info(),
    })
}

/// A handshake-era upstream negotiates once per instance, which callers share, so mcpx
/// declares the questions it can relay to some caller (sampling, elicitation, roots);
/// per call, it declines one for a caller that did not declare it. Nothing else is
/// declared: no `experimental` or extension capabilities, which mcpx does not speak.
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": Revision::LATEST_LEGACY.as_str(),
        "capabilities": { "sampling": {}, "elicitation": {}, "roots": {} },
        "clientInfo": client_info(),
    })
}

/// Reads a `DiscoverResult` that offers a stateless revision mcpx speaks.
pub(crate) fn modern_facts(result: &Value) -> Option<ServerFacts> {
    let offered = result.get("supportedVersions")?.as_array()?;
    let revision =
        offered.iter().filter_map(|v| v.as_str().and_then(Revision::parse)).filter(|r| r.era() == Era::Modern).max()?;
    Some(ServerFacts {
        era: Era::Modern,
        revision,
        capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        server_info: result.get("_meta").and_then(|m| m.get(meta::SERVER_INFO)).cloned(),
        instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
    })
}

/// Reads an `InitializeResult`, refusing a revision mcpx does not speak.
pub(crate) fn legacy_facts(server: &str, result: &Value) -> Result<ServerFacts, UpstreamError> {
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
    let revision =
        Revision::parse(version).filter(|r| r.era() == Era::Legacy).ok_or_else(|| UpstreamError::Handshake {
            server: server.to_owned(),
            reason: format!("initialize answered with protocolVersion {version:?}, which mcpx does not speak"),
        })?;
    Ok(ServerFacts {
        era: Era::Legacy,
        revision,
        capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        server_info: result.get("serverInfo").cloned(),
        instructions: result.get("instructions").and_then(Value::as_str).map(str::to_owned),
    })
}
