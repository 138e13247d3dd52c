//! [`UpstreamError`]: every way a connection or a request to an upstream can fail, and the
//! JSON-RPC error a caller receives for each.

use std::time::Duration;

use mcpx_protocol::RpcError;

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
    /// The server wants a bearer that mcpx can only get with a person's help: someone
    /// must run `mcpx auth login <server>` (or open the URL an elicitation offers).
    #[error("server {server:?} needs you to log in: run `mcpx auth login {server}`")]
    LoginNeeded { server: String },
    /// Getting a bearer for the server failed for another reason (a refused metadata
    /// document, a token endpoint error, too many step-ups).
    #[error("server {server:?}: authorization failed: {reason}")]
    Auth { server: String, reason: String },
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
    /// What an authorization failure means for a request to `server`.
    pub fn from_oauth(server: &str, e: mcpx_oauth::OAuthError) -> UpstreamError {
        match e {
            mcpx_oauth::OAuthError::LoginNeeded { .. } => UpstreamError::LoginNeeded { server: server.to_owned() },
            other => UpstreamError::Auth { server: server.to_owned(), reason: other.to_string() },
        }
    }

    /// Whether this failure is about credentials, not the server's health: a login fixes
    /// it, so it is no reason to back off from starting the server.
    pub fn is_auth(&self) -> bool {
        matches!(self, UpstreamError::LoginNeeded { .. } | UpstreamError::Auth { .. })
    }

    /// The JSON-RPC error a caller receives for this failure.
    pub fn to_rpc(&self) -> RpcError {
        match self {
            UpstreamError::Rpc(e) => e.clone(),
            UpstreamError::LoginNeeded { server } => RpcError::internal(self.to_string())
                .with_data(serde_json::json!({ "server": server, "login": format!("mcpx auth login {server}") })),
            other => RpcError::internal(other.to_string()),
        }
    }
}
