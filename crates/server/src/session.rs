//! Handshake-era HTTP sessions: minted by `initialize`, named by `Mcp-Session-Id`, ended by
//! `DELETE` or by going unused. A session is who is asking: `Session::Http(<id>)`, a kind of
//! session no label can name.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::legacy::Negotiated;

#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    pub negotiated: Negotiated,
}

impl Session {
    /// The identity's session for this HTTP session.
    pub fn identity(&self) -> mcpx_gateway::Session {
        mcpx_gateway::Session::Http(self.id.clone())
    }
}

#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<String, (Session, Instant)>>,
}

#[derive(Debug)]
pub struct Full;

impl Sessions {
    /// Opens a session, unless `max` are open already (after ending those idle longer
    /// than `idle_timeout`).
    pub fn open(&self, negotiated: Negotiated, max: usize, idle_timeout: Duration) -> Result<Session, Full> {
        let mut open = self.open.lock().expect("sessions lock");
        open.retain(|_, (_, used)| used.elapsed() < idle_timeout);
        if open.len() >= max {
            return Err(Full);
        }
        let session = Session { id: new_session_id(), negotiated };
        open.insert(session.id.clone(), (session.clone(), Instant::now()));
        Ok(session)
    }

    /// The live session with this id, marked as used now.
    pub fn get(&self, id: &str, idle_timeout: Duration) -> Option<Session> {
        let mut open = self.open.lock().expect("sessions lock");
        let (session, used) = open.get_mut(id)?;
        if used.elapsed() >= idle_timeout {
            open.remove(id);
            return None;
        }
        *used = Instant::now();
        Some(session.clone())
    }

    pub fn end(&self, id: &str) -> bool {
        self.open.lock().expect("sessions lock").remove(id).is_some()
    }
}

/// 128 random bits as hex: visible ASCII, as the transport requires, and unguessable,
/// because a session id selects another caller's instances.
fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
