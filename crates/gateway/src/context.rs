//! One admitted request: who asked, in which revision, with which capabilities, and the
//! call id mcpx minted for it. Travels with the request as a value.

use mcpx_protocol::Revision;
use mcpx_upstream::Listener;
use serde_json::Value;

use crate::identity::Identity;

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
}

impl CallContext {
    pub fn new(identity: Identity, revision: Revision, client_capabilities: Value) -> CallContext {
        CallContext { identity, call_id: new_call_id(), revision, client_capabilities, listener: None }
    }

    pub fn with_listener(mut self, listener: Option<Listener>) -> CallContext {
        self.listener = listener;
        self
    }
}

/// 128 random bits, hex: unguessable, so a call id cannot be used to reach another
/// caller's per-call instance.
pub fn new_call_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
