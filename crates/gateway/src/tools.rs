//! Tools mcpx publishes: the gateway tools (`mcpx_search`, `mcpx_call`) and, for servers
//! named in `expose`, the upstream tools themselves under `<server>__<tool>`.

use mcpx_protocol::RpcError;
use serde_json::{Map, Value, json};

use crate::config::{Config, ExposePrefix};

pub const SEARCH: &str = "mcpx_search";
pub const CALL: &str = "mcpx_call";

/// The gateway's own tool definitions.
pub fn gateway_tools() -> Vec<Value> {
    vec![
        json!({
            "name": SEARCH,
            "title": "Search upstream tools",
            "description": "Find tools offered by the MCP servers behind mcpx. Every word of the query must appear in the server name, tool name or description; an empty query lists every tool. Returns each match's server, tool, description and input schema; call one with mcpx_call.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words to look for; empty lists everything." }
                }
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false }
        }),
        json!({
            "name": CALL,
            "title": "Call an upstream tool",
            "description": "Call a tool of one of the MCP servers behind mcpx, as found with mcpx_search. The result is the upstream tool's result, unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "server": { "type": "string", "description": "The server's name, as mcpx_search reports it." },
                    "tool": { "type": "string", "description": "The tool's name on that server." },
                    "arguments": { "type": "object", "description": "The tool's arguments.", "additionalProperties": true }
                },
                "required": ["server", "tool"]
            }
        }),
    ]
}

/// The arguments of an `mcpx_call`.
pub struct CallArgs {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
}

impl CallArgs {
    pub fn read(arguments: &Value) -> Result<CallArgs, RpcError> {
        let field = |name: &str| match arguments.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(RpcError::invalid_params(format!("{CALL}: \"{name}\" must be a non-empty string"))),
        };
        let tool_arguments = match arguments.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(RpcError::invalid_params(format!("{CALL}: \"arguments\" must be an object"))),
        };
        Ok(CallArgs { server: field("server")?, tool: field("tool")?, arguments: tool_arguments })
    }
}

/// Whether a tool matches a search: every word of the query appears somewhere in
/// "server tool description", case-insensitively.
pub fn matches(query: &str, server: &str, tool: &Value) -> bool {
    let haystack = format!(
        "{server} {} {}",
        tool.get("name").and_then(Value::as_str).unwrap_or_default(),
        tool.get("description").and_then(Value::as_str).unwrap_or_default()
    )
    .to_lowercase();
    query.split_whitespace().all(|word| haystack.contains(&word.to_lowercase()))
}

/// How exposed tool names are built: `<server>__<tool>` unless `exposePrefix` says not to.
pub fn exposed_name(config: &Config, server: &str, tool: &str) -> String {
    let prefixed = match config.expose_prefix {
        ExposePrefix::Always => true,
        ExposePrefix::Conditional => config.expose.len() > 1,
        ExposePrefix::Never => false,
    };
    if prefixed { format!("{server}__{tool}") } else { tool.to_owned() }
}

/// A tool result mcpx builds itself: structured content plus its JSON text, as the spec
/// recommends for clients that only read text.
pub fn structured_result(value: Value) -> Value {
    json!({
        "content": [{ "type": "text", "text": value.to_string() }],
        "structuredContent": value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_word_must_match() {
        let tool = json!({"name": "get_current_time", "description": "Get the time in a timezone"});
        assert!(matches("", "time", &tool));
        assert!(matches("TIME zone", "time", &tool));
        assert!(!matches("time weather", "time", &tool));
    }

    #[test]
    fn call_arguments_are_checked() {
        assert!(CallArgs::read(&json!({"server": "a"})).is_err());
        assert!(CallArgs::read(&json!({"server": "a", "tool": "b", "arguments": [1]})).is_err());
        let args = CallArgs::read(&json!({"server": "a", "tool": "b"})).unwrap();
        assert_eq!(args.arguments, json!({}));
    }
}
