//! Whom a request serves and who hears about it while it runs: the opaque [`Caller`] a
//! gateway request carries, and its [`Listener`] (progress, log messages, questions).
//! Who the caller is, is the gateway's business; this crate only keeps them apart.

use std::fmt::Debug;
use std::pin::Pin;
use std::sync::Arc;

use mcpx_protocol::RpcError;
use serde_json::Value;

/// Who hears about one request while it runs: its caller's progress token (when the caller
/// asked for progress), the least severe log level it wants (when it wants log messages),
/// and where those notifications go, as whole JSON-RPC frames.
#[derive(Clone)]
pub struct Listener {
    pub progress_token: Option<Value>,
    pub log_level: Option<String>,
    pub notify: Arc<dyn Fn(Value) + Send + Sync>,
    /// How to put a question from a handshake-era upstream (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) to the caller, when the caller can be asked.
    pub ask: Option<Ask>,
}

/// Whom a request sent on a caller's behalf serves: the caller (`key`: requests with the
/// same key come from the same caller, who may be asked about any of them) and the call
/// (`call_id`, which mcpx tells the servers it launched as `_meta["dev.mcpx/invocation"]
/// .callId`). mcpx's own requests (the era probe, listings) serve no caller and carry none.
/// The connection uses it to decide whom a question from a handshake-era upstream is for.
/// Two callers are the same when their keys and calls are; how they are metered is not
/// part of who they are.
#[derive(Clone, Debug)]
pub struct Caller {
    pub key: Arc<str>,
    pub call_id: Arc<str>,
    /// Told the size of each message of the call as it crossed the wire, when someone
    /// accounts for them (the gateway's journal).
    pub meter: Option<Arc<dyn Meter>>,
}

impl PartialEq for Caller {
    fn eq(&self, other: &Caller) -> bool {
        self.key == other.key && self.call_id == other.call_id
    }
}

impl Eq for Caller {}

/// Counts the bytes of a call's messages: each request as it was written to the server,
/// and each response as the server wrote it (a stdio line without its newline, an HTTP
/// body, or the `data` of the event that carried the response). Notifications and
/// questions on the way are not counted.
pub trait Meter: Send + Sync + Debug {
    fn sent(&self, bytes: usize);
    fn received(&self, bytes: usize);
}

/// Puts a server→client request (method, params) to a caller and resolves to its answer.
pub type Ask =
    Arc<dyn Fn(String, Value) -> Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>> + Send + Sync>;

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
