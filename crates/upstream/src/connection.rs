//! [`Upstream`]: one live connection to one upstream instance, whichever its transport
//! (a stdio child mcpx launched, or an HTTP server), in whichever era it answered in.
//!
//! Everything a caller's request needs on the way out is added here, once for both
//! transports: the stateless envelope for a 2026 upstream (version, the caller's
//! capabilities as far as mcpx relays them, mcpx's client info, the log level asked for),
//! or for a handshake-era upstream, none of it (it negotiated once in `initialize`).

use std::sync::Arc;

use mcpx_protocol::{Era, meta};
use serde_json::Value;

use crate::caller::{Caller, Listener};
use crate::error::UpstreamError;
use crate::handshake::{self, ServerFacts};
use crate::http::HttpConn;
use crate::pipe::Inner as Pipe;
use crate::spec::Spec;

/// The client capabilities mcpx can honour on a caller's behalf: the questions it relays
/// to the caller (elicitation, sampling, roots), each only if the caller declared it.
const RELAYED_CAPABILITIES: [&str; 3] = ["elicitation", "sampling", "roots"];

/// The caller's capabilities as a stateless upstream is told them. Nothing mcpx does not
/// relay is declared: not `experimental` or `extensions` entries (mcpx does not speak
/// them, so an upstream relying on one would fail mid-call), not anything unknown — but
/// the tasks extension, whose tasks mcpx relays (`gateway::tasks`).
fn relayed_capabilities(caller: &Value) -> Value {
    let mut relayed: serde_json::Map<String, Value> = RELAYED_CAPABILITIES
        .iter()
        .filter_map(|name| caller.get(*name).filter(|c| c.is_object()).map(|c| ((*name).to_owned(), c.clone())))
        .collect();
    if meta::declares_tasks(caller) {
        relayed.insert("extensions".into(), serde_json::json!({ meta::TASKS_EXTENSION: {} }));
    }
    Value::Object(relayed)
}

/// Resource subscriptions on one instance, open while this lives.
pub struct ResourceWatch(#[allow(dead_code)] Held);

/// Kept for what dropping them does.
#[allow(dead_code)]
enum Held {
    Stdio(crate::pipe::Waiting),
    Http(crate::http::Listening),
    /// Handshake-era subscriptions, which stay for the instance's life.
    Subscribed,
}

/// A connection to one running upstream instance. Cheap to clone; all clones share it.
#[derive(Clone)]
pub struct Upstream {
    link: Link,
    facts: Arc<ServerFacts>,
    request_timeout: std::time::Duration,
    server: String,
}

#[derive(Clone)]
enum Link {
    Stdio(Arc<Pipe>),
    Http(Arc<HttpConn>),
}

impl Upstream {
    /// Starts (stdio) or reaches (HTTP) the server and makes the connection: probes the
    /// era, unless `era_hint` says which one this server spoke last time, and completes
    /// the handshake.
    pub async fn connect(spec: &Spec, era_hint: Option<Era>) -> Result<Upstream, UpstreamError> {
        let (link, facts, timeouts, server) = match spec {
            Spec::Stdio(s) => {
                let (pipe, facts) = Pipe::spawn(s, era_hint).await?;
                (Link::Stdio(pipe), facts, s.timeouts, s.server.clone())
            }
            Spec::Http(s) => {
                let (conn, facts) = HttpConn::connect(s, era_hint).await?;
                (Link::Http(conn), facts, s.timeouts, s.server.clone())
            }
        };
        Ok(Upstream { link, facts: Arc::new(facts), request_timeout: timeouts.request, server })
    }

    pub fn facts(&self) -> &ServerFacts {
        &self.facts
    }

    /// The process id of a stdio instance.
    pub fn pid(&self) -> Option<u32> {
        match &self.link {
            Link::Stdio(pipe) => Some(pipe.pid()),
            Link::Http(_) => None,
        }
    }

    /// False once a stdio instance has exited. An HTTP server is reached anew per request.
    pub fn is_alive(&self) -> bool {
        match &self.link {
            Link::Stdio(pipe) => pipe.is_alive(),
            Link::Http(_) => true,
        }
    }

    /// How a stdio instance ended on its own (not stopped by mcpx): its exit status, if
    /// known. None while it runs, once mcpx stopped it, and for an HTTP server.
    pub fn crash(&self) -> Option<String> {
        match &self.link {
            Link::Stdio(pipe) => pipe.crash(),
            Link::Http(_) => None,
        }
    }

    /// Sends a request that serves no caller (a listing, a subscription), in the era this
    /// upstream speaks. `client_capabilities` are forwarded to a stateless upstream as the
    /// spec asks, as far as mcpx relays them (`relayed_capabilities`); a handshake-era
    /// upstream negotiated its capabilities in `initialize`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        client_capabilities: &Value,
    ) -> Result<Value, UpstreamError> {
        self.request_reporting(method, params, client_capabilities, None, None).await
    }

    /// As [`Upstream::request`], on behalf of `caller` (whom a handshake-era upstream's
    /// question during the request may be for), relaying what the upstream says about this
    /// request while it runs (progress, log messages) to `listener`. The upstream sees a
    /// progress token of mcpx's own, unique on this connection.
    pub async fn request_reporting(
        &self,
        method: &str,
        mut params: Value,
        client_capabilities: &Value,
        caller: Option<Caller>,
        listener: Option<Listener>,
    ) -> Result<Value, UpstreamError> {
        match self.facts.era {
            Era::Modern => {
                let m = meta::of_mut(&mut params);
                m.insert(meta::PROTOCOL_VERSION.into(), self.facts.revision.as_str().into());
                m.insert(meta::CLIENT_CAPABILITIES.into(), relayed_capabilities(client_capabilities));
                m.insert(meta::CLIENT_INFO.into(), handshake::client_info());
                // A stateless server logs only for requests that ask.
                if let Some(level) = listener.as_ref().and_then(|l| l.log_level.clone()) {
                    m.insert(meta::LOG_LEVEL.into(), level.into());
                }
            }
            Era::Legacy => {
                if let Some(Value::Object(m)) = params.get_mut("_meta") {
                    meta::strip_modern_envelope(m);
                    if m.is_empty() {
                        params.as_object_mut().map(|p| p.remove("_meta"));
                    }
                }
            }
        }
        match &self.link {
            Link::Stdio(pipe) => pipe.call(method, params, caller, listener).await,
            // Boxed: the HTTP client's futures would make every call's future (stdio ones too)
            // KiBs larger. The call alone is boxed, so it is built and moved once.
            Link::Http(conn) => {
                match tokio::time::timeout(self.request_timeout, Box::pin(conn.call(method, params, caller, listener)))
                    .await
                {
                    Ok(answer) => answer,
                    Err(_) => Err(UpstreamError::Timeout {
                        server: self.server.clone(),
                        method: method.into(),
                        after: self.request_timeout,
                    }),
                }
            }
        }
    }

    /// What the server says changed from now on (list_changed, resources/updated), as
    /// notification frames. A 2026 server is asked with a listen of its own, kept open
    /// for the connection's life.
    pub async fn changes(&self) -> tokio::sync::broadcast::Receiver<Value> {
        match &self.link {
            Link::Stdio(pipe) => {
                let receiver = pipe.changes.subscribe();
                if self.facts.era == Era::Modern {
                    pipe.listen_once(handshake::modern_envelope());
                }
                receiver
            }
            Link::Http(conn) => {
                let receiver = conn.changes.subscribe();
                if self.facts.era == Era::Modern {
                    conn.listen_once().await;
                }
                receiver
            }
        }
    }

    /// The task statuses the server announces from now on (`notifications/tasks/status`,
    /// its params, under the server's own task ids), unasked or on any request's stream.
    pub fn task_statuses(&self) -> tokio::sync::broadcast::Receiver<Value> {
        match &self.link {
            Link::Stdio(pipe) => pipe.changes.task_statuses(),
            Link::Http(conn) => conn.changes.task_statuses(),
        }
    }

    /// How many changes of the list `method` reads (`tools/list`, `prompts/list`,
    /// `resources/list`, `resources/templates/list`) this connection heard so far: a
    /// listing taken at one count is out of date at another. `None` when changes may go
    /// unheard: a handshake-era server over HTTP with no standalone stream open (one over
    /// stdio is always heard; a 2026 server's lists are kept for the time it says, and
    /// any change heard meanwhile counts), or a method that reads no list.
    pub fn list_changes(&self, method: &str) -> Option<u64> {
        let changes = match &self.link {
            Link::Stdio(pipe) => &pipe.changes,
            Link::Http(conn) => &conn.changes,
        };
        let heard = self.facts.era == Era::Modern || changes.hearing();
        changes.count(method).filter(|_| heard)
    }

    /// Resolves once this connection is gone (a stdio instance exited or was stopped);
    /// never for an HTTP server, which is reached anew per request.
    pub async fn ended(&self) {
        match &self.link {
            Link::Stdio(pipe) => pipe.ended().await,
            Link::Http(_) => std::future::pending().await,
        }
    }

    /// Asks the server to report changes to `uris` (its own URIs) on [`Upstream::changes`]
    /// as `notifications/resources/updated`, for as long as the returned watch lives.
    /// `Ok(None)` when the server does not offer subscriptions. A handshake-era subscription stays for the instance's life: another watcher on the
    /// same instance may share it, and unwanted updates are only filtered out.
    pub async fn watch_resources(&self, uris: &[String]) -> Result<Option<ResourceWatch>, UpstreamError> {
        if uris.is_empty() || self.facts.capabilities["resources"]["subscribe"] != Value::Bool(true) {
            return Ok(None);
        }
        match (&self.link, self.facts.era) {
            (Link::Stdio(pipe), Era::Modern) => {
                let listen = pipe.listen_to_resources(handshake::modern_envelope(), uris).await?;
                Ok(Some(ResourceWatch(Held::Stdio(listen))))
            }
            (Link::Http(conn), Era::Modern) => {
                let listening = conn.listen(serde_json::json!({ "resourceSubscriptions": uris })).await;
                Ok(Some(ResourceWatch(Held::Http(listening))))
            }
            (_, Era::Legacy) => {
                for uri in uris {
                    self.request("resources/subscribe", serde_json::json!({ "uri": uri }), &Value::Null).await?;
                }
                Ok(Some(ResourceWatch(Held::Subscribed)))
            }
        }
    }

    /// Stops the instance: for stdio, close stdin, wait, SIGTERM, wait, SIGKILL (to its
    /// group); for HTTP, end the session if there is one.
    pub async fn shutdown(&self) {
        match &self.link {
            Link::Stdio(pipe) => pipe.shutdown().await,
            Link::Http(conn) => conn.shutdown().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::relayed_capabilities;
    use serde_json::json;

    #[test]
    fn only_the_questions_mcpx_relays_are_declared_upstream() {
        let caller = json!({
            "sampling": {}, "roots": {"listChanged": true}, "elicitation": null,
            "experimental": {"x": {}}, "extensions": {"com.example/ext": {}}, "tasks": {}
        });
        assert_eq!(relayed_capabilities(&caller), json!({"sampling": {}, "roots": {"listChanged": true}}));
        assert_eq!(relayed_capabilities(&serde_json::Value::Null), json!({}));
    }

    #[test]
    fn the_tasks_extension_is_relayed_alone_among_extensions() {
        let caller = json!({"extensions": {"com.example/ext": {}, "io.modelcontextprotocol/tasks": {"x": 1}}});
        assert_eq!(relayed_capabilities(&caller), json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
    }
}
