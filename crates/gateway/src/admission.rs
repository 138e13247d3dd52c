//! How many requests one client may have in flight (`limits.maxCallsPerClient`), and how
//! many it may send per second (`limits.rate`, `clients.<client>.limits.rate`).
//!
//! A client is the name of the token it authenticated with, else its session (named, or
//! implied by its transport), else its stdio process. A request over the limit is refused
//! at once with a clear error, never queued: an agent that floods mcpx slows only itself.
//! Unnamed requests (a 2026 HTTP request without a session) belong to no client and are
//! bounded by the instance limits and `timeouts.request` instead; for the rate they count
//! as the local user's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::error::Error;
use crate::identity::{Identity, Principal};
use crate::policy::{Access, Rates};

#[derive(Default)]
pub struct Admission {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    rates: Rates,
}

/// One admitted request; the count goes down when it is dropped.
#[derive(Debug)]
pub struct Ticket {
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
    client: String,
}

impl Admission {
    /// Admits one more request of `identity`'s client under `config`'s limits, or says
    /// why not.
    pub fn enter(&self, identity: &Identity, config: &Config) -> Result<Option<Ticket>, Error> {
        self.within_rate(identity, config)?;
        let limit = config.limits.max_calls_per_client;
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

    /// Takes one request from the client's token bucket, when a rate applies to it.
    fn within_rate(&self, identity: &Identity, config: &Config) -> Result<(), Error> {
        let Some((setting, rate)) = Access::of(config, identity).rate(identity) else { return Ok(()) };
        let client = client_of(identity).unwrap_or_else(|| "the local user".to_owned());
        if self.rates.take(&client, rate, std::time::Instant::now()) {
            return Ok(());
        }
        Err(Error::Rate {
            message: format!(
                "{client} is over its rate of {} requests per second, {} at most at once ({setting}); try again shortly",
                rate.per_second, rate.burst
            ),
            setting,
            per_second: rate.per_second,
            burst: rate.burst,
        })
    }
}

fn client_of(identity: &Identity) -> Option<String> {
    match &identity.principal {
        Principal::Token(name) => return Some(format!("client {name:?}")),
        // Its own wording, so no token's name can count against an OAuth subject's limit.
        Principal::OAuth { issuer, subject } => return Some(format!("OAuth subject {subject:?} of {issuer:?}")),
        Principal::OAuthClient { issuer, client } => return Some(format!("OAuth client {client:?} of {issuer:?}")),
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
    use crate::config::{LimitConfig, RateConfig};
    use crate::identity::{Session, Source, Transport};

    fn session(name: &str) -> Identity {
        let transport = Transport { session: Some(Session::Named(name.into())), ..Transport::default() };
        Identity { source: Source::Transport, ..Identity::resolve(None, &[], &transport) }
    }

    #[test]
    fn a_client_over_its_limit_is_refused_and_others_are_not() {
        let admission = Admission::default();
        let two =
            Config { limits: LimitConfig { max_calls_per_client: 2, ..Default::default() }, ..Default::default() };
        let a1 = admission.enter(&session("a"), &two).unwrap();
        let _a2 = admission.enter(&session("a"), &two).unwrap();
        assert!(admission.enter(&session("a"), &two).unwrap_err().to_string().contains("limits.maxCallsPerClient"));
        assert!(admission.enter(&session("b"), &two).is_ok());
        drop(a1);
        assert!(admission.enter(&session("a"), &two).is_ok());
        let unnamed = Identity::resolve(None, &[], &Transport::default());
        assert!(admission.enter(&unnamed, &two).unwrap().is_none());
    }

    #[test]
    fn a_client_over_its_rate_is_refused_at_once_naming_the_setting() {
        let admission = Admission::default();
        let rate = Some(RateConfig { per_second: 0.001, burst: 2 });
        let config = Config { limits: LimitConfig { rate, ..Default::default() }, ..Default::default() };
        for _ in 0..2 {
            drop(admission.enter(&session("a"), &config).unwrap());
        }
        let refused = admission.enter(&session("a"), &config).unwrap_err();
        assert_eq!(refused.refusal(), Some("limit"));
        assert!(refused.to_string().contains("limits.rate"), "{refused}");
        assert!(admission.enter(&session("b"), &config).is_ok());
    }
}
