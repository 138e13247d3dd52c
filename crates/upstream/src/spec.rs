//! How to reach one upstream instance: what the gateway hands this crate to launch a stdio
//! child or talk to an HTTP server, with the time limits of each step.

use std::path::PathBuf;
use std::time::Duration;

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
    /// Where its bearer comes from, when mcpx logs in to it (OAuth); `None` when a
    /// configured `Authorization` header (or nothing) is all it gets.
    pub auth: Option<Authorization>,
    /// Where its redirects may lead beyond public addresses and its own kind of place
    /// (`egress.allow`).
    pub allow: std::sync::Arc<[mcpx_http::Allowed]>,
}

/// The authorizer and which of its credentials serves this instance.
#[derive(Clone)]
pub struct Authorization {
    pub authorizer: mcpx_oauth::Authorizer,
    pub target: mcpx_oauth::Target,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization").field("key", &self.target.key).finish_non_exhaustive()
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
    /// Enter `cwd` only if no symlink lies on its path. Set for a directory a caller other
    /// than the daemon's owner named: it was checked against its grants in resolved form,
    /// and someone who may write inside the grant could otherwise swap a name on that path
    /// for a link out of it between the check and the start.
    pub cwd_without_symlinks: bool,
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
