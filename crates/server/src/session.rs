//! Handshake-era HTTP sessions: minted by `initialize`, named by `Mcp-Session-Id`, ended by
//! `DELETE` or by going unused. A session is who is asking: `Session::Http(<id>)`, a kind of
//! session no label can name.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mcpx_gateway::Principal;
use mcpx_gateway::config::HttpConfig;

use crate::legacy::Negotiated;

#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    /// Who opened it: only the same principal may use it.
    pub owner: Principal,
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

/// Why no session could be opened.
#[derive(Debug)]
pub enum Full {
    /// `http.maxSessions` are open, none of them idle.
    All(usize),
    /// This client holds `http.maxSessionsPerClient`, none of them idle.
    Client(usize),
}

impl Full {
    pub fn message(&self) -> String {
        match self {
            Full::All(max) => format!("mcpx has {max} sessions open (http.maxSessions), all busy; try again later"),
            Full::Client(max) => {
                format!("this client holds {max} sessions (http.maxSessionsPerClient), all busy; end one with DELETE")
            }
        }
    }
}

impl Sessions {
    /// Opens a session for `owner`, after ending those idle longer than the timeout.
    /// A token holder at `http.maxSessionsPerClient`, or anyone at `http.maxSessions`,
    /// gets room by ending its own least recently used idle session (one with no request
    /// in flight); only when all of its sessions are busy is it refused. One client
    /// cannot take every session, nor end another client's.
    pub fn open(&self, negotiated: Negotiated, owner: &Principal, limits: &HttpConfig) -> Result<Session, Full> {
        let mut open = self.open.lock().expect("sessions lock");
        open.retain(|_, (_, used)| used.elapsed() < limits.session_idle_timeout);
        let owned = |open: &HashMap<String, (Session, Instant)>| open.values().filter(|(s, _)| s.owner == *owner).count();
        if matches!(owner, Principal::Token(_)) && owned(&open) >= limits.max_sessions_per_client {
            evict_idle(&mut open, owner).ok_or(Full::Client(limits.max_sessions_per_client))?;
        }
        if open.len() >= limits.max_sessions {
            evict_idle(&mut open, owner).ok_or(Full::All(limits.max_sessions))?;
        }
        let session = Session { id: new_session_id(), owner: owner.clone(), negotiated };
        open.insert(session.id.clone(), (session.clone(), Instant::now()));
        Ok(session)
    }

    /// The live session with this id, opened by `owner`, marked as used now. Another
    /// principal presenting the id finds nothing, as if it did not exist.
    pub fn get(&self, id: &str, owner: &Principal, idle_timeout: Duration) -> Option<Session> {
        let mut open = self.open.lock().expect("sessions lock");
        let (session, used) = open.get_mut(id).filter(|(s, _)| s.owner == *owner)?;
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

/// Ends `owner`'s least recently used session that has no request in flight.
fn evict_idle(open: &mut HashMap<String, (Session, Instant)>, owner: &Principal) -> Option<()> {
    let oldest = open
        .iter()
        .filter(|(_, (s, _))| s.owner == *owner && s.negotiated.in_flight.is_empty())
        .min_by_key(|(_, (_, used))| *used)
        .map(|(id, _)| id.clone())?;
    tracing::info!("ended the least recently used idle legacy session of a client to make room for a new one");
    open.remove(&oldest);
    Some(())
}

/// 128 random bits as hex: visible ASCII, as the transport requires, and unguessable,
/// because a session id selects another caller's instances.
fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
