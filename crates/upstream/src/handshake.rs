//! Making the connection: which era does this upstream speak?
//!
//! As the stdio transport says: send `server/discover` with the modern envelope first.
//! A discover result means stateless; any other answer, or none within the probe
//! timeout, means handshake era, so mcpx sends `initialize`. A discover answer that
//! arrives after the timeout but before the `initialize` answer still wins: a slow
//! dual-era server that already took the modern path must not be forced back.

use std::sync::Arc;

use mcpx_protocol::{Era, Revision, code, meta};
use serde_json::{Value, json};

use crate::pipe::Inner;
use crate::{ServerFacts, UpstreamError};

pub(crate) fn client_info() -> Value {
    json!({ "name": "mcpx", "version": env!("CARGO_PKG_VERSION") })
}

pub(crate) async fn connect(inner: &Arc<Inner>, era_hint: Option<Era>) -> Result<ServerFacts, UpstreamError> {
    if era_hint == Some(Era::Legacy) {
        return initialize(inner).await;
    }
    let probe_timeout = if era_hint == Some(Era::Modern) { inner.timeouts.handshake } else { inner.timeouts.probe };
    let envelope = json!({ "_meta": modern_envelope() });
    let mut discover = inner.start("server/discover", envelope, None, None).await?;
    let answer = tokio::time::timeout(probe_timeout, &mut discover.reply).await;
    match answer {
        Ok(Ok(reply)) => {
            discover.done = true;
            match reply {
                Ok(result) => match modern_facts(&result) {
                    Some(facts) => Ok(facts),
                    None => initialize(inner).await,
                },
                // A recognised 2026 refusal means a 2026 server: never fall back to initialize.
                Err(UpstreamError::Rpc(e)) if e.code == code::UNSUPPORTED_PROTOCOL_VERSION => {
                    if supported_modern(&e).is_none() {
                        return Err(UpstreamError::Handshake {
                            server: inner.server.clone(),
                            reason: format!("the server speaks none of mcpx's 2026 revisions: {e}"),
                        });
                    }
                    let envelope = json!({ "_meta": modern_envelope() });
                    let again = inner.request_within("server/discover", envelope, inner.timeouts.handshake).await?;
                    modern_facts(&again).ok_or_else(|| UpstreamError::Handshake {
                        server: inner.server.clone(),
                        reason: "server/discover answered without a revision mcpx speaks".into(),
                    })
                }
                Err(UpstreamError::Rpc(e)) => {
                    tracing::debug!(server = inner.server, code = e.code, "discover refused; trying initialize");
                    initialize(inner).await
                }
                Err(e) => Err(e),
            }
        }
        Ok(Err(_)) => Err(UpstreamError::Exited { server: inner.server.clone(), status: None }),
        Err(_) => {
            tracing::debug!(
                server = inner.server,
                "no answer to server/discover within {probe_timeout:?}; trying initialize"
            );
            let init = initialize(inner);
            tokio::pin!(init);
            // The late discover answer first: a server that took the modern path answers
            // the probe and then refuses `initialize` (-32022), and both answers can be
            // ready at once; an unbiased select would pick the refusal half the time.
            tokio::select! {
                biased;
                Ok(Ok(late)) = &mut discover.reply => {
                    discover.done = true;
                    match modern_facts(&late) {
                        Some(facts) => Ok(facts),
                        None => init.await,
                    }
                }
                facts = &mut init => facts,
            }
        }
    }
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

async fn initialize(inner: &Arc<Inner>) -> Result<ServerFacts, UpstreamError> {
    let failed = |reason: String| UpstreamError::Handshake { server: inner.server.clone(), reason };
    let result = match inner.request_within("initialize", initialize_params(), inner.timeouts.handshake).await {
        Ok(result) => result,
        Err(UpstreamError::Rpc(e)) if e.code == code::UNSUPPORTED_PROTOCOL_VERSION => {
            return Err(failed(format!("the server speaks none of mcpx's revisions: {e}")));
        }
        Err(UpstreamError::Rpc(e)) => return Err(failed(format!("initialize was refused: {e}"))),
        Err(e) => return Err(e),
    };
    let facts = legacy_facts(&inner.server, &result)?;
    inner.notify("notifications/initialized", Value::Null).await?;
    Ok(facts)
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
