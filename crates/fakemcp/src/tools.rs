//! The tools fakemcp offers, and what each one does when called.
//!
//! Each tool exists to make one gateway behaviour observable from a test: identity and
//! pooling (`whoami`), pass-through of arguments and `_meta` (`echo`, `meta`), error
//! results (`fail`), concurrency (`slow`), supervision (`crash`), the launch
//! environment (`env`) and a caller that does not read its stream (`flood`). The result shapes are what the gateway's tests assert on, so they
//! change only together with those tests.

use std::thread;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::era::Era;
use crate::instance::Instance;
use crate::wire::{INVALID_PARAMS, RpcError};

/// The `tools` array of a `tools/list` result, in a fixed order.
pub fn catalogue() -> Value {
    let no_arguments = json!({"type": "object", "properties": {}, "additionalProperties": false});
    json!([
        {
            "name": "whoami",
            "description": "Identify this server process: instance id, pid, tools/call count, cwd and the era of the request.",
            "inputSchema": no_arguments,
        },
        {
            "name": "echo",
            "description": "Return the arguments exactly as received.",
            "inputSchema": {"type": "object", "additionalProperties": true},
        },
        {
            "name": "fail",
            "description": "Return a tool error result (isError: true) carrying the given message.",
            "inputSchema": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
            },
        },
        {
            "name": "slow",
            "description": "Sleep for ms milliseconds, then answer.",
            "inputSchema": {
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0}},
                "required": ["ms"],
            },
        },
        {
            "name": "crash",
            "description": "Exit the server process immediately with status 3, without answering.",
            "inputSchema": no_arguments,
        },
        {
            "name": "changed",
            "description": "Announce notifications/tools/list_changed on this connection (unasked, as a handshake-era server does), then answer. With add, list a tool by that name from then on (before announcing).",
            "inputSchema": {
                "type": "object",
                "properties": {"add": {"type": "string"}},
            },
        },
        {
            "name": "meta",
            "description": "Return the request's params._meta exactly as it arrived (null if absent); over HTTP, a request's traceparent/tracestate headers are added under fakemcp.dev/traceHeaders.",
            "inputSchema": no_arguments,
        },
        {
            "name": "env",
            "description": "Return the value of one environment variable of the server process (null if unset).",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        {
            "name": "flood",
            "description": "Send count progress notifications for this request (to its progressToken) as fast as the pipe takes them, then answer.",
            "inputSchema": {
                "type": "object",
                "properties": {"count": {"type": "integer", "minimum": 0}},
                "required": ["count"],
            },
        },
    ])
}

/// Runs one `tools/call`. The returned body has no era envelope; the caller adds it.
pub fn call(instance: &Instance, era: Era, params: &Value) -> Result<Value, RpcError> {
    let calls = instance.count_tool_call();
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call: params.name must be a string"))?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => {
            return Err(RpcError::new(INVALID_PARAMS, format!("tools/call {name}: arguments must be an object")));
        }
    };
    match name {
        "whoami" => Ok(structured(json!({
            "instance": instance.id,
            "pid": instance.pid,
            "calls": calls,
            "toolLists": instance.tool_lists(),
            "cwd": std::env::current_dir().ok().map(|cwd| cwd.to_string_lossy().into_owned()),
            "era": era.label(),
        }))),
        "echo" => Ok(structured(Value::Object(arguments))),
        "fail" => {
            let message = match arguments.get("message") {
                None | Some(Value::Null) => "fakemcp: fail was called",
                Some(Value::String(message)) => message,
                Some(_) => return Err(bad_argument(name, "message must be a string")),
            };
            Ok(json!({"content": [text(message)], "isError": true}))
        }
        "slow" => {
            let ms = arguments
                .get("ms")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad_argument(name, "ms must be a non-negative integer"))?;
            thread::sleep(Duration::from_millis(ms));
            Ok(structured(json!({"sleptMs": ms})))
        }
        "crash" => {
            eprintln!("fakemcp {}: crash was called, exiting with status 3", instance.id);
            // _exit skips Rust's exit-time stdout flush, which could wait on a writer
            // thread; the point is to vanish mid-request like a real crash.
            unsafe { libc::_exit(3) }
        }
        "meta" => Ok(structured(json!({"meta": params.get("_meta").cloned()}))),
        // The notification itself is sent by the server loop, which owns the output.
        "changed" => Ok(structured(json!({"announced": "notifications/tools/list_changed"}))),
        // Sent by the server loop too, before the answer.
        "flood" => Ok(structured(json!({"sent": arguments.get("count").and_then(Value::as_u64).unwrap_or(0)}))),
        "env" => {
            let variable = arguments
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad_argument(name, "name must be a string"))?;
            let value = std::env::var_os(variable).map(|v| v.to_string_lossy().into_owned());
            Ok(structured(json!({"name": variable, "value": value})))
        }
        unknown => Err(RpcError::new(INVALID_PARAMS, format!("unknown tool: {unknown}"))),
    }
}

/// A successful result whose text block is the structured content serialized as JSON, so
/// clients that only read `content` see the same data.
fn structured(content: Value) -> Value {
    let serialized = content.to_string();
    json!({"content": [text(&serialized)], "structuredContent": content})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn bad_argument(tool: &str, problem: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("tools/call {tool}: {problem}"))
}
