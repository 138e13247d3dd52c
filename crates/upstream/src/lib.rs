//! The client half of mcpx: one live connection to one upstream MCP server instance.
//!
//! An [`Upstream`] owns a stdio child process (in its own process group) or talks to an
//! HTTP server, speaks the era the server answered the probe in, remaps request ids so
//! many callers can share one instance, and stops a child the way the spec asks (close
//! stdin, wait, SIGTERM, wait, SIGKILL). Who is asking is the gateway's business: a
//! request carries only an opaque [`Caller`], so that a handshake-era upstream's question
//! reaches the caller it is for and no other (`questions`).

mod connection;
mod handshake;
mod http;
pub mod lines;
mod pipe;
mod questions;
mod stdio;

use std::path::PathBuf;
use std::time::Duration;

use mcpx_protocol::{Era, Revision, RpcError};
use serde_json::Value;

pub use connection::{ResourceWatch, Upstream};

/// How to reach one upstream instance.
#[derive(Clone, Debug)]
pub enum Spec {
    Stdio(StdioSpec),
    Http(HttpSpec),
}

/// An HTTP upstream: its endpoint and the headers configured for it (already expanded).
#[derive(Clone, Debug)]
pub struct HttpSpec {
    pub server: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub timeouts: Timeouts,
    /// Longest line of an event stream (and so longest event) accepted from the server.
    pub max_line_bytes: usize,
}

/// Who hears about one request while it runs: its caller's progress token (when the caller
/// asked for progress), the least severe log level it wants (when it wants log messages),
/// and where those notifications go, as whole JSON-RPC frames.
#[derive(Clone)]
pub struct Listener {
    pub progress_token: Option<Value>,
    pub log_level: Option<String>,
    pub notify: std::sync::Arc<dyn Fn(Value) + Send + Sync>,
    /// How to put a question from a handshake-era upstream (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) to the caller, when the caller can be asked.
    pub ask: Option<Ask>,
}

/// Whom a request sent on a caller's behalf serves: the caller (`key`: requests with the
/// same key come from the same caller, who may be asked about any of them) and the call
/// (`call_id`, which mcpx tells the servers it launched as `_meta["dev.mcpx/invocation"]
/// .callId`). mcpx's own requests (the era probe, listings) serve no caller and carry none.
/// The connection uses it to decide whom a question from a handshake-era upstream is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub key: std::sync::Arc<str>,
    pub call_id: std::sync::Arc<str>,
}

/// Puts a server→client request (method, params) to a caller and resolves to its answer.
pub type Ask = std::sync::Arc<
    dyn Fn(String, Value) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>> + Send + Sync,
>;

/// Notifications that say something changed on the server, as opposed to notifications
/// about one request.
pub const CHANGE_NOTIFICATIONS: [&str; 4] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
];

pub(crate) fn is_change(method: &str) -> bool {
    CHANGE_NOTIFICATIONS.contains(&method)
}

/// A change notification without the upstream's subscription tag (mcpx tags it again for
/// each of its own watchers).
pub(crate) fn untagged_change(method: &str, mut params: Value) -> Value {
    if let Some(Value::Object(m)) = params.get_mut("_meta") {
        m.remove(mcpx_protocol::meta::SUBSCRIPTION_ID);
        if m.is_empty() {
            params.as_object_mut().map(|p| p.remove("_meta"));
        }
    }
    mcpx_protocol::message::notification(method, params)
}

/// Log levels, least severe first (RFC 5424, as MCP names them).
pub const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

impl Listener {
    pub fn wants_log(&self, level: &str) -> bool {
        let rank = |l: &str| LOG_LEVELS.iter().position(|x| *x == l);
        match (&self.log_level, rank(level)) {
            (Some(wanted), Some(level)) => rank(wanted).is_some_and(|wanted| level >= wanted),
            _ => false,
        }
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("progress_token", &self.progress_token)
            .field("log_level", &self.log_level)
            .finish_non_exhaustive()
    }
}

/// How to launch one stdio upstream instance.
#[derive(Clone, Debug)]
pub struct StdioSpec {
    /// The server's name in the config, used in logs and errors.
    pub server: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub timeouts: Timeouts,
    /// Longest line accepted from the upstream's stdout.
    pub max_line_bytes: usize,
}

#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// How long the era probe (`server/discover`) may go unanswered before mcpx falls back
    /// to `initialize`.
    pub probe: Duration,
    /// How long `initialize` may take.
    pub handshake: Duration,
    /// How long any one request may take.
    pub request: Duration,
    /// How long each step of the stop sequence waits for the process to exit.
    pub stop_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            probe: Duration::from_secs(5),
            handshake: Duration::from_secs(30),
            request: Duration::from_secs(300),
            stop_grace: Duration::from_secs(2),
        }
    }
}

/// What the upstream told mcpx about itself when the connection was made.
#[derive(Clone, Debug)]
pub struct ServerFacts {
    pub era: Era,
    pub revision: Revision,
    pub capabilities: Value,
    pub server_info: Option<Value>,
    pub instructions: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("server {server:?}: could not start {command:?}: {source}")]
    Spawn { server: String, command: String, source: std::io::Error },
    #[error("server {server:?}: handshake failed: {reason}")]
    Handshake { server: String, reason: String },
    #[error("server {server:?} exited{}", status.as_ref().map(|s| format!(" ({s})")).unwrap_or_default())]
    Exited { server: String, status: Option<String> },
    #[error("server {server:?} at {url} is unreachable: {reason}")]
    Unreachable { server: String, url: String, reason: String },
    #[error("server {server:?} at {url} answered with something that is not MCP: {detail}")]
    Protocol { server: String, url: String, detail: String },
    #[error(
        "server {server:?} wrote a line longer than limits.maxLineBytes ({limit} bytes), which mcpx dropped unread: {whose}"
    )]
    LineTooLong { server: String, limit: usize, whose: LostLine },
    #[error("server {server:?} did not answer {method} within {after:?}")]
    Timeout { server: String, method: String, after: Duration },
    /// The upstream answered with a JSON-RPC error: relayed to the caller as is.
    #[error("{0}")]
    Rpc(RpcError),
}

/// Whose answer a dropped over-long line held, as far as mcpx can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostLine {
    /// Its edges named this request.
    Own,
    /// It showed no id: any one of this many requests in flight (all of which fail).
    OneOf(usize),
}

impl std::fmt::Display for LostLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostLine::Own => f.write_str("it was the answer to this request"),
            LostLine::OneOf(1) => f.write_str("it showed no id, and this was the only request in flight"),
            LostLine::OneOf(n) => write!(
                f,
                "it showed no id, so it may have held the answer to this request or to one of the {} others in flight on the instance, which all fail",
                n - 1
            ),
        }
    }
}

impl UpstreamError {
    /// The JSON-RPC error a caller receives for this failure.
    pub fn to_rpc(&self) -> RpcError {
        match self {
            UpstreamError::Rpc(e) => e.clone(),
            other => RpcError::internal(other.to_string()),
        }
    }
}
