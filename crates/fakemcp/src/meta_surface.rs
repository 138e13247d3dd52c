//! Resources, prompts and completions that reveal what reached this server, as the `meta`
//! tool does for tool calls: every answer carries the request's `params._meta` as JSON
//! text, so a test can see exactly what a gateway forwarded on each path.

use serde_json::{Value, json};

use crate::wire::{INVALID_PARAMS, RpcError};

pub const URI: &str = "fake://meta";

/// The answer to `method`, if it is one of this surface's.
pub fn answer(method: &str, params: &Value, modern: bool) -> Option<Result<Value, RpcError>> {
    let meta = params.get("_meta").cloned().unwrap_or(Value::Null).to_string();
    let cached = |mut body: Value| {
        if modern {
            body["ttlMs"] = json!(0);
            body["cacheScope"] = json!("public");
        }
        body
    };
    Some(Ok(match method {
        "resources/list" => cached(json!({"resources": [
            {"uri": URI, "name": "meta", "mimeType": "application/json",
             "description": "The _meta this read arrived with."}
        ]})),
        "resources/templates/list" => cached(json!({"resourceTemplates": []})),
        "resources/read" => match params.get("uri").and_then(Value::as_str) {
            Some(URI) => cached(json!({"contents": [{"uri": URI, "mimeType": "application/json", "text": meta}]})),
            other => {
                let uri = other.unwrap_or_default();
                return Some(Err(
                    RpcError::new(INVALID_PARAMS, format!("no resource {uri}")).with_data(json!({"uri": uri}))
                ));
            }
        },
        "prompts/list" => cached(json!({"prompts": [
            {"name": "meta", "description": "A message holding the _meta this request arrived with."}
        ]})),
        "prompts/get" => match params.get("name").and_then(Value::as_str) {
            Some("meta") => json!({"messages": [{"role": "user", "content": {"type": "text", "text": meta}}]}),
            other => {
                let name = other.unwrap_or_default();
                return Some(Err(RpcError::new(INVALID_PARAMS, format!("no prompt {name}"))));
            }
        },
        "completion/complete" => json!({"completion": {"values": [meta], "hasMore": false}}),
        _ => return None,
    }))
}

/// What this surface adds to the server's capabilities.
pub fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "resources": {}, "prompts": {}, "completions": {}})
}
