//! How many requests one client may have in flight: `limits.maxCallsPerClient`.
//!
//! A client is the name of the token it authenticated with, else its session (named, or
//! implied by its transport), else its stdio process. A request over the limit is refused
//! at once with a clear error, never queued: an agent that floods mcpx slows only itself.
//! Unnamed requests (a 2026 HTTP request without a session) belong to no client and are
//! bounded by the instance limits and `timeouts.request` instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::Error;

use crate::identity::{Identity, Principal};

#[derive(Default)]
pub struct Admission {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

/// One admitted request; the count goes down when it is dropped.
#[derive(Debug)]
pub struct Ticket {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    client: String,
}

impl Admission {
    /// Admits one more request of `identity`'s client, or says why not.
    pub fn enter(&self, identity: &Identity, limit: usize) -> Result<Option<Ticket>, Error> {
        let Some(client) = client_of(identity) else { return Ok(None) };
        let mut in_flight = self.in_flight.lock().expect("admission lock");
        let count = in_flight.entry(client.clone()).or_default();
        if *count >= limit {
            return Err(Error::Limit {
                message: format!(
                    "{client} already has {limit} requests in flight (limits.maxCallsPerClient); wait for one to finish"
                ),
                setting: "limits.maxCallsPerClient",
                limit,
            });
        }
        *count += 1;
        Ok(Some(Ticket { in_flight: self.in_flight.clone(), client }))
    }
}

fn client_of(identity: &Identity) -> Option<String> {
    match &identity.principal {
        Principal::Token(name) => return Some(format!("client {name:?}")),
        // Its own wording, so no token's name can count against an OAuth subject's limit.
        Principal::OAuth { issuer, subject } => return Some(format!("OAuth subject {subject:?} of {issuer:?}")),
        Principal::Local => {}
    }
    if let Some(session) = identity.session_key() {
        return Some(format!("session {:?}", session.to_string()));
    }
    identity.pid.map(|pid| format!("process {pid}"))
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().expect("admission lock");
        if let Some(count) = in_flight.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Session, Source, Transport};

    fn session(name: &str) -> Identity {
        let transport = Transport { session: Some(Session::Named(name.into())), ..Transport::default() };
        Identity { source: Source::Transport, ..Identity::resolve(None, &[], &transport) }
    }

    #[test]
    fn a_client_over_its_limit_is_refused_and_others_are_not() {
        let admission = Admission::default();
        let a1 = admission.enter(&session("a"), 2).unwrap();
        let _a2 = admission.enter(&session("a"), 2).unwrap();
        assert!(admission.enter(&session("a"), 2).unwrap_err().to_string().contains("limits.maxCallsPerClient"));
        assert!(admission.enter(&session("b"), 2).is_ok());
        drop(a1);
        assert!(admission.enter(&session("a"), 2).is_ok());
        let unnamed = Identity::resolve(None, &[], &Transport::default());
        assert!(admission.enter(&unnamed, 1).unwrap().is_none());
    }
}
