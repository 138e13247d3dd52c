//! The MCP messages the bench sends, and how it decides that a reply is a correct answer.
//!
//! Every measured request is the same `tools/call` of fakemcp's `echo`, either straight to
//! the upstream or wrapped in the gateway tool `mcpx_call`. The request text is built once
//! per client and only the id changes per request, so the client spends the same few
//! nanoseconds on every contender. A reply counts only if it carries the request's id and
//! echoes the arguments back unchanged; anything else is an error, never a sample.

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The stateless protocol revision: version and capabilities travel in every request.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The handshake protocol revision a legacy client negotiates with `initialize`.
pub const LEGACY_VERSION: &str = "2025-11-25";

/// Which protocol era the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Era {
    /// 2026-07-28: no handshake, `_meta` on every request.
    Modern,
    /// 2025-11-25: `initialize` and `notifications/initialized`, then requests.
    Legacy,
}

impl Era {
    pub fn label(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }

    /// The messages a client sends before its first request: a request that must be
    /// answered, then a notification. None for the modern era.
    pub fn handshake(self) -> Option<(Value, Value)> {
        match self {
            Era::Modern => None,
            Era::Legacy => Some((
                json!({
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": LEGACY_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "mcpx-bench", "version": env!("CARGO_PKG_VERSION")},
                    },
                }),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )),
        }
    }
}

/// Who answers the call: the upstream itself, or mcpx relaying to the named server
/// (with `mcpx_call`, or from an `mcpx_exec` script), or an `mcpx_exec` script that
/// returns the arguments itself (what starting the engine costs).
#[derive(Debug, Clone, Copy)]
pub enum Route<'a> {
    Direct,
    Gateway {
        server: &'a str,
    },
    /// mcpx relaying a call of the tool it lists flat (`expose`) under this name: the
    /// tool's own, or `<server>__echo`.
    Exposed {
        name: &'static str,
    },
    Script {
        server: &'a str,
    },
    ScriptAlone,
}

/// The arguments every call sends and expects back. Small, like most tool calls, so the
/// figures show the cost of a hop rather than of copying bytes.
pub fn echo_arguments() -> Value {
    json!({"text": "mcpx-bench", "n": 42, "nested": {"ok": true, "list": [1, 2, 3]}})
}

/// One `tools/call` of `echo`, ready to be sent with any id.
#[derive(Debug, Clone)]
pub struct EchoCall {
    /// The serialized `params` object; the envelope around it is added per request.
    params: String,
    arguments: Value,
    /// The tool name, for HTTP's `Mcp-Name` header.
    pub name: &'static str,
    /// Which era's headers go with it over HTTP.
    pub era: Era,
}

impl EchoCall {
    pub fn new(era: Era, route: Route<'_>) -> EchoCall {
        let arguments = echo_arguments();
        let (name, mut params) = match route {
            Route::Direct => ("echo", json!({"name": "echo", "arguments": arguments})),
            Route::Gateway { server } => (
                "mcpx_call",
                json!({"name": "mcpx_call", "arguments": {"server": server, "tool": "echo", "arguments": arguments}}),
            ),
            Route::Exposed { name } => (name, json!({"name": name, "arguments": arguments})),
            Route::Script { server } => {
                let script = format!("return await call({}, \"echo\", {arguments});", json!(server));
                ("mcpx_exec", json!({"name": "mcpx_exec", "arguments": {"script": script}}))
            }
            Route::ScriptAlone => {
                let script = format!("return {arguments};");
                ("mcpx_exec", json!({"name": "mcpx_exec", "arguments": {"script": script}}))
            }
        };
        if era == Era::Modern {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        EchoCall { params: params.to_string(), arguments, name, era }
    }

    /// The same call with `_meta[key] = value` (a session name, say).
    pub fn with_meta(mut self, key: &str, value: Value) -> EchoCall {
        let mut params: Value = serde_json::from_str(&self.params).expect("params are JSON");
        params["_meta"][key] = value;
        self.params = params.to_string();
        self
    }

    /// The request as one line of JSON (no trailing newline).
    pub fn request(&self, id: u64) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{}}}"#, self.params)
    }

    /// Checks that `reply` answers request `id` with the arguments echoed back.
    pub fn check(&self, reply: &Value, id: u64) -> anyhow::Result<()> {
        check_id(reply, id)?;
        let result = reply.get("result").context("the reply has neither result nor error")?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            bail!("the tool reported an error: {result}");
        }
        if result.get("structuredContent") != Some(&self.arguments) {
            bail!("the reply does not echo the arguments: {result}");
        }
        Ok(())
    }
}

/// A 2026-07-28 `server/discover` request, as one line of JSON.
pub fn discover_request(id: u64) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }},
    })
    .to_string()
}

/// Checks that `reply` is the successful answer to request `id`.
pub fn check_id(reply: &Value, id: u64) -> anyhow::Result<()> {
    if reply.get("id").and_then(Value::as_u64) != Some(id) {
        bail!("expected the answer to request {id}, got {reply}");
    }
    if let Some(error) = reply.get("error") {
        bail!("request {id} failed: {error}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modern_request_carries_version_and_capabilities() {
        let call = EchoCall::new(Era::Modern, Route::Direct);
        let request: Value = serde_json::from_str(&call.request(7)).unwrap();
        assert_eq!(request["id"], 7);
        assert_eq!(request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], MODERN_VERSION);
        assert!(request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].is_object());
    }

    #[test]
    fn a_legacy_request_has_no_meta() {
        let call = EchoCall::new(Era::Legacy, Route::Direct);
        let request: Value = serde_json::from_str(&call.request(1)).unwrap();
        assert!(request["params"].get("_meta").is_none());
    }

    #[test]
    fn through_the_gateway_the_echo_is_wrapped_in_mcpx_call() {
        let call = EchoCall::new(Era::Modern, Route::Gateway { server: "fake" });
        let request: Value = serde_json::from_str(&call.request(1)).unwrap();
        assert_eq!(request["params"]["name"], "mcpx_call");
        assert_eq!(request["params"]["arguments"]["server"], "fake");
        assert_eq!(request["params"]["arguments"]["tool"], "echo");
        assert_eq!(request["params"]["arguments"]["arguments"], echo_arguments());
    }

    #[test]
    fn a_session_name_joins_the_modern_meta() {
        let call = EchoCall::new(Era::Modern, Route::Direct).with_meta("dev.mcpx/session", json!("s-1"));
        let request: Value = serde_json::from_str(&call.request(1)).unwrap();
        assert_eq!(request["params"]["_meta"]["dev.mcpx/session"], "s-1");
        assert_eq!(request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], MODERN_VERSION);
    }

    #[test]
    fn only_an_echo_of_the_arguments_for_the_right_id_counts() {
        let call = EchoCall::new(Era::Modern, Route::Direct);
        let good = json!({"jsonrpc": "2.0", "id": 3, "result": {"structuredContent": echo_arguments()}});
        assert!(call.check(&good, 3).is_ok());
        assert!(call.check(&good, 4).is_err());
        let wrong = json!({"jsonrpc": "2.0", "id": 3, "result": {"structuredContent": {"n": 1}}});
        assert!(call.check(&wrong, 3).is_err());
        let failed = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "x"}});
        assert!(call.check(&failed, 3).is_err());
        let tool_error =
            json!({"jsonrpc": "2.0", "id": 3, "result": {"isError": true, "structuredContent": echo_arguments()}});
        assert!(call.check(&tool_error, 3).is_err());
    }
}
