//! One admitted request: who asked, in which revision, with which capabilities, and the
//! call id mcpx minted for it. Travels with the request as a value.

use std::sync::Arc;

use mcpx_protocol::Revision;
use mcpx_upstream::Listener;
use serde_json::Value;

use crate::identity::Identity;

/// The trace context that came with a request from outside `_meta`: the `traceparent`
/// and `tracestate` headers of the HTTP request that carried it, as sent (read only when
/// traces are exported, and then parsed like any other: `traces`).
#[derive(Clone, Debug, Default)]
pub struct TraceHeaders {
    pub traceparent: String,
    pub tracestate: Option<String>,
}

/// A request's place in a trace, travelling with its [`CallContext`].
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// The trace context of the HTTP request that carried this one, if it had one.
    pub headers: Option<Arc<TraceHeaders>>,
    /// The span mcpx opened for the request, once opened: the parent of everything mcpx
    /// sends upstream for it (copies of the context made after it opened keep it).
    pub(crate) span: std::sync::OnceLock<opentelemetry::trace::SpanContext>,
    /// The JSON-RPC id the caller gave the request, when it came as a request of its own
    /// (not from `/v1` or a script): the span's `jsonrpc.request.id`.
    pub request_id: Option<Value>,
}

#[derive(Clone, Debug)]
pub struct CallContext {
    pub identity: Identity,
    /// Minted when mcpx admits the request, before it waits for any instance; unique.
    pub call_id: String,
    /// The revision the caller speaks (for a legacy session, the negotiated one).
    pub revision: Revision,
    /// The caller's capabilities for this request (modern) or session (legacy).
    pub client_capabilities: Value,
    /// Who hears about the request while it runs (progress, log messages), when the
    /// caller asked and its transport can carry notifications.
    pub listener: Option<Listener>,
    /// The `Mcp-Param-*` headers a 2026 HTTP request came with (name after the prefix,
    /// raw value), to check against the arguments they mirror; `None` on a transport
    /// without headers.
    pub param_headers: Option<Arc<Vec<(String, String)>>>,
    /// The instance the request reached, once the pool leased it: for the journal.
    pub reached: crate::journal::Reached,
    /// Where the request sits in a trace (used only while traces are exported).
    pub trace: Trace,
    /// Run a tool call as a task mcpx runs, whatever `tasks.after` says (`/v1/tasks`).
    pub as_task: bool,
    /// Relayed here by another node of the cluster: it goes to no further node.
    pub relayed: bool,
}

impl CallContext {
    pub fn new(identity: Identity, revision: Revision, client_capabilities: Value) -> CallContext {
        CallContext {
            identity,
            call_id: new_call_id(),
            revision,
            client_capabilities,
            listener: None,
            param_headers: None,
            reached: Default::default(),
            trace: Default::default(),
            as_task: false,
            relayed: false,
        }
    }

    /// The trace context of the HTTP request that carried this one (`traceparent` and
    /// `tracestate` headers), a parent for its span when its `_meta` names none.
    pub fn with_trace_headers(mut self, headers: Option<TraceHeaders>) -> CallContext {
        self.trace.headers = headers.map(Arc::new);
        self
    }

    /// The caller's JSON-RPC id for the request, kept only when `traced` (spans are
    /// exported: it is a span attribute, and an id may be a long string).
    pub fn with_request_id(mut self, id: &Value, traced: bool) -> CallContext {
        if traced {
            self.trace.request_id = Some(id.clone());
        }
        self
    }

    pub fn with_listener(mut self, listener: Option<Listener>) -> CallContext {
        self.listener = listener;
        self
    }

    pub fn with_param_headers(mut self, headers: Option<Vec<(String, String)>>) -> CallContext {
        self.param_headers = headers.map(Arc::new);
        self
    }

    /// Who the caller is, for deciding which of an instance's requests in flight an
    /// upstream's question may be put to: its client (token name) and session when it has
    /// a session; without one the request is its own scope, so the key is its call id.
    pub fn caller_key(&self) -> String {
        // A session's key names its principal too; no session key begins with "call:".
        match self.identity.session_key() {
            Some(key) => key.to_string(),
            None => format!("call:{}", self.call_id),
        }
    }
}

#[cfg(test)]
impl CallContext {
    /// A 2026 request of the local user, in the named session `session` if one is given.
    pub(crate) fn local_for_test(session: Option<&str>) -> CallContext {
        use crate::identity::{Principal, Session, Source};
        let identity = Identity {
            session: session.map(|s| Session::Named(s.into())),
            cwd: None,
            pid: None,
            principal: Principal::Local,
            source: Source::Unnamed,
            host: None,
        };
        CallContext::new(identity, Revision::V2026_07_28, Value::Object(Default::default()))
    }
}

/// 128 random bits, hex: unguessable, so a call id cannot be used to reach another
/// caller's per-call instance. From the thread's CSPRNG (seeded from the OS): a system
/// call per request cost more than the rest of minting the id.
pub fn new_call_id() -> String {
    let mut bytes = [0u8; 16];
    rand::Rng::fill(&mut rand::rng(), &mut bytes);
    // Minted per request: hex by hand, one allocation (a `format!` per byte made 17).
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(2 * bytes.len());
    for b in bytes {
        id.push(HEX[usize::from(b >> 4)] as char);
        id.push(HEX[usize::from(b & 0xf)] as char);
    }
    id
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_call_id_is_128_random_bits_in_lowercase_hex() {
        let (a, b) = (super::new_call_id(), super::new_call_id());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{a}");
        assert_ne!(a, b);
    }
}
