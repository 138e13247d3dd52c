//! Whom a request serves and who hears about it while it runs: the opaque [`Caller`] a
//! gateway request carries, and its [`Listener`] (progress, log messages, questions).
//! Who the caller is, is the gateway's business; this crate only keeps them apart.

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub key: Arc<str>,
    pub call_id: Arc<str>,
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
