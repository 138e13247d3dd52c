//! The identity step: what a front end's transport knows about a caller becomes, once per
//! request, who is asking and the request's `CallContext`.
//!
//! Each front end describes its caller in one function: `http::legacy` (the handshake-era
//! session), `http::modern` (a 2026 request and its `Mcp-Param-*` headers), `stdio::transport`
//! (a process's stdio, relayed or in-process), and the `/v1` extractor in `api`. The era code
//! below the front ends takes that [`Caller`] and asks it for a context with
//! [`Caller::context`], once per request; nothing else in this crate resolves an identity
//! for `/mcp` or stdio. Nothing here reads a frame or picks an instance.

use std::sync::Arc;

use mcpx_gateway::traces::TraceHeaders;
use mcpx_gateway::{CallContext, Gateway, Listener, Session, Transport};
use mcpx_protocol::Revision;
use serde_json::Value;

/// The header that names a caller's session on `/v1` and on a relayed stdio stream (a
/// label, like the `_meta` key; `mcpx serve` sends its `$MCPX_SESSION_ID` in it).
pub const SESSION_HEADER: &str = "x-mcpx-session";

/// The session a caller's transport implies: the label it names (`$MCPX_SESSION_ID`,
/// `X-Mcpx-Session`), else the process it is (a session no label can name), else none.
/// An empty label names nothing.
pub fn session(label: Option<&str>, pid: Option<u32>) -> Option<Session> {
    match label.filter(|label| !label.is_empty()) {
        Some(label) => Some(Session::Named(label.to_owned())),
        None => pid.map(Session::Process),
    }
}

/// One caller as its front end knows it, and the gateway that answers it.
#[derive(Clone)]
pub struct Caller {
    pub gateway: Arc<Gateway>,
    pub transport: Transport,
    /// The `Mcp-Param-*` headers of a 2026 HTTP request (name after the prefix, raw
    /// value); `None` on a transport without headers.
    pub param_headers: Option<Vec<(String, String)>>,
    /// The `traceparent` and `tracestate` headers of the HTTP request, as sent: a parent
    /// for the request's span when its `_meta` names none (read only while tracing).
    pub trace_headers: Option<TraceHeaders>,
}

impl Caller {
    pub fn new(gateway: Arc<Gateway>, transport: Transport) -> Caller {
        Caller { gateway, transport, param_headers: None, trace_headers: None }
    }

    pub fn with_param_headers(mut self, headers: Vec<(String, String)>) -> Caller {
        self.param_headers = Some(headers);
        self
    }

    /// The trace context of the HTTP request, when it has a `traceparent` header and
    /// spans are exported (without them it is not read).
    pub fn with_trace_headers(mut self, headers: &axum::http::HeaderMap) -> Caller {
        if !self.gateway.exports_traces() {
            return self;
        }
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        self.trace_headers = text(mcpx_gateway::traces::TRACEPARENT)
            .map(|traceparent| TraceHeaders { traceparent, tracestate: text(mcpx_gateway::traces::TRACESTATE) });
        self
    }

    /// The context of one request: who is asking (the transport, and the session its
    /// `_meta` may name), in which revision and with which capabilities, and who hears
    /// about it while it runs.
    pub fn context(
        &self,
        params: &Value,
        revision: Revision,
        capabilities: Value,
        listener: Option<Listener>,
    ) -> CallContext {
        let identity = self.gateway.identity(params, &self.transport);
        CallContext::new(identity, revision, capabilities)
            .with_listener(listener)
            .with_param_headers(self.param_headers.clone())
            .with_trace_headers(self.trace_headers.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_session_wins_over_the_process_and_an_empty_label_names_nothing() {
        assert_eq!(session(Some("work"), Some(7)), Some(Session::Named("work".into())));
        assert_eq!(session(Some(""), Some(7)), Some(Session::Process(7)));
        assert_eq!(session(None, Some(7)), Some(Session::Process(7)));
        assert_eq!(session(None, None), None);
        assert_eq!(session(Some(""), None), None);
    }
}
