//! The wire: how a line on stdin (or an HTTP body) becomes a JSON-RPC message, and how
//! replies go out.
//!
//! Over stdio: one message per line in both directions, serialized compactly so no message
//! contains a raw newline. stdout carries nothing but JSON-RPC; this module is the only
//! code that may write to it, and it writes each message as one whole line under a lock so
//! concurrent tool calls never interleave their replies. Over HTTP the same messages are
//! handed to the HTTP front end instead (`Output::routed`), which answers each request on
//! its own response. Replies, notifications and fakemcp's own requests to a legacy client
//! all go out through [`Output`].

use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// 2026-07-28 `MissingRequiredClientCapabilityError`; `data.requiredCapabilities` is a
/// `ClientCapabilities` object.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// 2026-07-28 `UnsupportedProtocolVersionError`; `data` is `{supported, requested}`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// 2025-11-25 resource not found (retired in 2026-07-28, which uses -32602).
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A JSON-RPC error object, before it is wrapped in a response envelope.
#[derive(Debug, Clone, PartialEq)]
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

    /// Reads the `error` member of a response; a malformed one still yields an error.
    fn from_json(error: &Value) -> Self {
        RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR),
            message: error.get("message").and_then(Value::as_str).unwrap_or("(no message)").to_owned(),
            data: error.get("data").cloned(),
        }
    }

    fn to_json(&self) -> Value {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(data) = &self.data {
            error.insert("data".into(), data.clone());
        }
        Value::Object(error)
    }
}

/// What one line of input turned out to be.
#[derive(Debug)]
pub enum Incoming {
    /// Has an `id`, so it must be answered (unless a flag says to play dead).
    Request { id: Value, method: String, params: Value },
    /// No `id`: never answered.
    Notification { method: String, params: Value },
    /// A response to a request fakemcp sent (only `--fixture conformance` sends any).
    Response { id: Value, outcome: Result<Value, RpcError> },
}

/// A line that could not be taken as a message: answer `error` to `id` (null when the id
/// was unreadable).
#[derive(Debug)]
pub struct Rejected {
    pub id: Value,
    pub error: RpcError,
}

impl Rejected {
    fn new(id: Option<Value>, code: i64, message: impl Into<String>) -> Box<Self> {
        Box::new(Rejected { id: id.unwrap_or(Value::Null), error: RpcError::new(code, message) })
    }
}

/// Reads one line.
pub fn parse(line: &[u8]) -> Result<Incoming, Box<Rejected>> {
    let message: Value =
        serde_json::from_slice(line).map_err(|e| Rejected::new(None, PARSE_ERROR, format!("parse error: {e}")))?;
    classify(message)
}

/// Reads one message already parsed as JSON (an HTTP body).
pub fn classify(message: Value) -> Result<Incoming, Box<Rejected>> {
    let Value::Object(mut message) = message else {
        // Batches were removed from MCP in 2025-06-18; anything but an object is invalid.
        return Err(Rejected::new(None, INVALID_REQUEST, "invalid request: expected a JSON object"));
    };
    let id = message.remove("id");
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Rejected::new(id, INVALID_REQUEST, "invalid request: jsonrpc must be \"2.0\""));
    }
    let method = match message.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => {
            return Err(Rejected::new(id, INVALID_REQUEST, "invalid request: method must be a string"));
        }
        None if message.contains_key("result") || message.contains_key("error") => {
            let outcome = match message.remove("error") {
                Some(error) => Err(RpcError::from_json(&error)),
                None => Ok(message.remove("result").unwrap_or(Value::Null)),
            };
            return Ok(Incoming::Response { id: id.unwrap_or(Value::Null), outcome });
        }
        None => {
            return Err(Rejected::new(id, INVALID_REQUEST, "invalid request: no method"));
        }
    };
    let params = message.remove("params").unwrap_or(Value::Null);
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// The JSON-RPC response answering `id` with a result or an error.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}),
    }
}

/// Where outgoing messages go. Cheap to clone; every clone sends to the same place.
#[derive(Clone)]
pub struct Output {
    sink: Arc<Sink>,
}

enum Sink {
    /// stdio: one line per message, written whole under the lock.
    Stdout(Mutex<io::Stdout>),
    /// HTTP: each message goes to the front end, which finds the request it answers.
    Routed(Box<dyn Fn(Value) + Send + Sync>),
}

impl Output {
    /// Messages go to stdout.
    pub fn new() -> Self {
        Output { sink: Arc::new(Sink::Stdout(Mutex::new(io::stdout()))) }
    }

    /// Messages go to `route` (it runs on whichever thread answers).
    pub fn routed(route: impl Fn(Value) + Send + Sync + 'static) -> Self {
        Output { sink: Arc::new(Sink::Routed(Box::new(route))) }
    }

    /// Answers request `id` with a result or an error.
    pub fn reply(&self, id: &Value, outcome: Result<Value, RpcError>) {
        self.send(response(id, outcome));
    }

    /// Sends an unsolicited notification without params.
    pub fn notify(&self, method: &str) {
        self.send(json!({"jsonrpc": "2.0", "method": method}));
    }

    /// Sends a notification with params.
    pub fn notify_with(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request of fakemcp's own to the client (legacy sessions only).
    pub fn request(&self, id: &Value, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Takes the stdout lock and keeps it, so a caller about to exit cannot cut a line
    /// that another thread is halfway through writing. None when output is routed.
    pub fn hold(&self) -> Option<MutexGuard<'_, io::Stdout>> {
        match &*self.sink {
            Sink::Stdout(stdout) => Some(stdout.lock().unwrap_or_else(|poisoned| poisoned.into_inner())),
            Sink::Routed(_) => None,
        }
    }

    fn send(&self, message: Value) {
        let stdout = match &*self.sink {
            Sink::Routed(route) => return route(message),
            Sink::Stdout(stdout) => stdout,
        };
        let mut line = serde_json::to_vec(&message).expect("a serde_json::Value always serializes");
        line.push(b'\n');
        let mut stdout = stdout.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // A failed write means the client stopped reading; it will also close our stdin,
        // and that EOF is what ends the process, so there is nothing more to do here.
        if let Err(e) = stdout.write_all(&line).and_then(|()| stdout.flush()) {
            eprintln!("fakemcp: writing to stdout failed: {e}");
        }
    }
}
