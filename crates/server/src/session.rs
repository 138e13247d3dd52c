//! Handshake-era HTTP sessions: minted by `initialize`, named by `Mcp-Session-Id`, ended by
//! `DELETE`, by going unused (`http.sessionIdleTimeout`) or by being evicted to make room.
//! A session is who is asking: `Session::Http(<id>)`, a kind of session no label can name.
//! However it ends, the gateway is told, so the session's instances stop with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use mcpx_gateway::config::HttpConfig;
use mcpx_gateway::{Gateway, Principal, Transport};
use tokio::task::AbortHandle;

use crate::legacy::Negotiated;

/// How often idle sessions are looked for: an expired session's instances stop within
/// about this long of `http.sessionIdleTimeout`.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    /// Who opened it: only the same principal may use it.
    pub owner: Principal,
    pub negotiated: Negotiated,
    pub opened: Instant,
}

impl Session {
    /// The identity's session for this HTTP session.
    pub fn identity(&self) -> mcpx_gateway::Session {
        mcpx_gateway::Session::Http(self.id.clone())
    }

    /// Tells the gateway this session is over: its instances stop once their calls finish.
    fn ended(&self, gateway: &Gateway) {
        let transport =
            Transport { session: Some(self.identity()), principal: self.owner.clone(), ..Transport::default() };
        gateway.end_session(&transport);
    }
}

/// Each session boxed: the table keeps spare slots (up to half of it when it has just
/// grown), and a slot is then a pointer and a time, not a whole session.
type Open = Mutex<HashMap<String, (Arc<Session>, Instant)>>;

#[derive(Default)]
pub struct Sessions {
    open: Arc<Open>,
    /// Ends sessions that went unused, started with the first session.
    sweeper: OnceLock<AbortHandle>,
}

impl Drop for Sessions {
    fn drop(&mut self) {
        if let Some(sweeper) = self.sweeper.get() {
            sweeper.abort();
        }
    }
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
    pub fn open(
        &self,
        gateway: &Arc<Gateway>,
        negotiated: Negotiated,
        owner: &Principal,
        limits: &HttpConfig,
        id: String,
    ) -> Result<Session, Full> {
        self.sweep_from(gateway);
        let mut open = self.open.lock().expect("sessions lock");
        let mut ended = expire(&mut open, limits.session_idle_timeout);
        let opened = make_room(&mut open, owner, limits, &mut ended).map(|()| {
            let session = Session { id, owner: owner.clone(), negotiated, opened: Instant::now() };
            open.insert(session.id.clone(), (Arc::new(session.clone()), Instant::now()));
            session
        });
        drop(open);
        for session in ended {
            session.ended(gateway);
        }
        opened
    }

    /// Sessions open now (`/metrics`).
    pub fn count(&self) -> usize {
        self.open.lock().expect("sessions lock").len()
    }

    /// The sessions open now with how long each went unused, oldest first (the status
    /// page; it never shows an id, which admits requests to its session).
    pub fn list(&self) -> Vec<(Session, Duration)> {
        let open = self.open.lock().expect("sessions lock");
        let mut listed: Vec<(Session, Duration)> =
            open.values().map(|(s, used)| (Session::clone(s), used.elapsed())).collect();
        listed.sort_by_key(|(s, _)| s.opened);
        listed
    }

    /// The live session with this id, opened by `owner`, marked as used now. Another
    /// principal presenting the id finds nothing, as if it did not exist; nor does anyone
    /// find a session idle past `idle_timeout` (the sweeper ends it).
    pub fn get(&self, id: &str, owner: &Principal, idle_timeout: Duration) -> Option<Session> {
        let mut open = self.open.lock().expect("sessions lock");
        let (session, used) = open.get_mut(id).filter(|(s, _)| s.owner == *owner)?;
        if used.elapsed() >= idle_timeout {
            return None;
        }
        *used = Instant::now();
        Some(Session::clone(session))
    }

    /// Ends the session with this id (`DELETE`); false if there was none.
    pub fn end(&self, gateway: &Gateway, id: &str) -> bool {
        let removed = self.open.lock().expect("sessions lock").remove(id);
        let Some((session, _)) = removed else { return false };
        session.ended(gateway);
        true
    }

    /// Starts, once, the task that ends sessions idle past `http.sessionIdleTimeout` (a
    /// hot setting, read each time) so their instances stop then, not at the next
    /// `initialize`. It ends with the gateway or with these sessions.
    fn sweep_from(&self, gateway: &Arc<Gateway>) {
        self.sweeper.get_or_init(|| {
            let (open, gateway) = (Arc::downgrade(&self.open), Arc::downgrade(gateway));
            tokio::spawn(sweep(open, gateway)).abort_handle()
        });
    }
}

async fn sweep(open: Weak<Open>, gateway: Weak<Gateway>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tick.tick().await;
        let (Some(open), Some(gateway)) = (open.upgrade(), gateway.upgrade()) else { return };
        let timeout = gateway.settings().config().http.session_idle_timeout;
        let ended = expire(&mut open.lock().expect("sessions lock"), timeout);
        for session in ended {
            tracing::debug!("a legacy HTTP session went unused for http.sessionIdleTimeout and ended");
            session.ended(&gateway);
        }
    }
}

/// Takes out the sessions idle for `timeout` or longer.
fn expire(open: &mut HashMap<String, (Arc<Session>, Instant)>, timeout: Duration) -> Vec<Session> {
    let idle: Vec<String> =
        open.iter().filter(|(_, (_, used))| used.elapsed() >= timeout).map(|(id, _)| id.clone()).collect();
    idle.iter().filter_map(|id| open.remove(id)).map(|(session, _)| Arc::unwrap_or_clone(session)).collect()
}

/// Room for one more session of `owner`, by evicting one of its idle sessions (into
/// `ended`) where a limit is reached.
fn make_room(
    open: &mut HashMap<String, (Arc<Session>, Instant)>,
    owner: &Principal,
    limits: &HttpConfig,
    ended: &mut Vec<Session>,
) -> Result<(), Full> {
    let owned = open.values().filter(|(s, _)| s.owner == *owner).count();
    if !matches!(owner, Principal::Local) && owned >= limits.max_sessions_per_client {
        ended.push(evict_idle(open, owner).ok_or(Full::Client(limits.max_sessions_per_client))?);
    }
    if open.len() >= limits.max_sessions {
        ended.push(evict_idle(open, owner).ok_or(Full::All(limits.max_sessions))?);
    }
    Ok(())
}

/// Ends `owner`'s least recently used session that has no request in flight.
fn evict_idle(open: &mut HashMap<String, (Arc<Session>, Instant)>, owner: &Principal) -> Option<Session> {
    let oldest = open
        .iter()
        .filter(|(_, (s, _))| s.owner == *owner && s.negotiated.in_flight.is_empty())
        .min_by_key(|(_, (_, used))| *used)
        .map(|(id, _)| id.clone())?;
    tracing::info!("ended the least recently used idle legacy session of a client to make room for a new one");
    open.remove(&oldest).map(|(session, _)| Arc::unwrap_or_clone(session))
}

/// 128 random bits as hex: visible ASCII, as the transport requires, and unguessable,
/// because a session id selects another caller's instances.
pub fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
