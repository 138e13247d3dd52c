//! What a request means in the handshake era (2025-03-26, 2025-06-18, 2025-11-25):
//! `initialize` negotiates the revision and capabilities once, and they hold for the
//! connection (stdio) or the session (HTTP, named by `Mcp-Session-Id`); every frame after it
//! is answered under them, batches in 2025-03-26 only.
//!
//! Transport-free: the front ends (`http::legacy`, `stdio`) hand it frames and a
//! [`Caller`], and write what it answers. It never imports them.

use futures::StreamExt;
use mcpx_gateway::{Gateway, Principal, Watch};
use mcpx_protocol::message::error_response;
use mcpx_protocol::{Era, Message, RequestId, Revision, RpcError};
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::dispatch::{self, Notify};
use crate::questions::Questions;

/// What `initialize` settled for a connection or session.
#[derive(Clone, Debug)]
pub struct Negotiated {
    pub revision: Revision,
    pub capabilities: Value,
    /// Questions from upstreams this caller has open.
    pub questions: std::sync::Arc<Questions>,
    /// This caller's requests in flight, so `notifications/cancelled` can stop them.
    pub in_flight: std::sync::Arc<InFlight>,
    /// The resources this caller subscribed to: its change stream delivers their updates.
    pub interest: mcpx_gateway::Interest,
    /// The least severe log level this caller wants, set by `logging/setLevel`.
    pub log_level: std::sync::Arc<LogLevel>,
}

/// A session's log threshold, shared by the clones of its [`Negotiated`].
///
/// Until the caller sets one, it gets every level (`debug`): the spec leaves the choice
/// to the server, and a caller that never asks has hosts that show what they get.
#[derive(Debug, Default)]
pub struct LogLevel(std::sync::atomic::AtomicUsize);

impl LogLevel {
    /// The level in force, one of [`mcpx_gateway::LOG_LEVELS`].
    pub fn get(&self) -> &'static str {
        mcpx_gateway::LOG_LEVELS[self.0.load(std::sync::atomic::Ordering::Relaxed)]
    }

    /// Sets the level; an unknown one is -32602 and changes nothing.
    fn set(&self, level: Option<&str>) -> Result<(), RpcError> {
        let rank =
            level.and_then(|l| mcpx_gateway::LOG_LEVELS.iter().position(|known| *known == l)).ok_or_else(|| {
                RpcError::invalid_params(format!("level must be one of {}", mcpx_gateway::LOG_LEVELS.join(", ")))
            })?;
        self.0.store(rank, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

/// Requests of one handshake-era session in flight, by id.
#[derive(Debug, Default)]
pub struct InFlight {
    requests: std::sync::Mutex<std::collections::HashMap<String, tokio::sync::oneshot::Sender<()>>>,
}

impl InFlight {
    /// Resolves when the request with this id is cancelled. `None` when a request with
    /// this id is in flight already: answers and cancellation would be ambiguous.
    fn register(&self, id: &Value) -> Option<impl Future<Output = ()> + use<>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        match self.requests.lock().expect("in-flight lock").entry(id.to_string()) {
            std::collections::hash_map::Entry::Occupied(_) => return None,
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert(tx),
        };
        Some(async move {
            if rx.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    /// Whether no request of the session is in flight.
    pub fn is_empty(&self) -> bool {
        self.requests.lock().expect("in-flight lock").is_empty()
    }

    /// How many of the session's requests are in flight (the status page).
    pub fn count(&self) -> usize {
        self.requests.lock().expect("in-flight lock").len()
    }

    fn done(&self, id: &Value) {
        self.requests.lock().expect("in-flight lock").remove(&id.to_string());
    }

    fn cancel(&self, id: &RequestId) {
        if let Some(tx) = self.requests.lock().expect("in-flight lock").remove(&id.to_value().to_string()) {
            let _ = tx.send(());
        }
    }
}

impl Negotiated {
    /// Answers the revision asked for when mcpx speaks it; otherwise counter-offers the
    /// newest handshake-era revision.
    pub fn from_initialize(params: &Value) -> Negotiated {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let revision =
            asked.and_then(Revision::parse).filter(|r| r.era() == Era::Legacy).unwrap_or(Revision::LATEST_LEGACY);
        let capabilities = params.get("capabilities").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}));
        Negotiated {
            revision,
            capabilities,
            questions: Default::default(),
            in_flight: Default::default(),
            interest: Default::default(),
            log_level: Default::default(),
        }
    }
}

pub fn initialize_result(gateway: &Gateway, revision: Revision, principal: &Principal) -> Value {
    json!({
        "protocolVersion": revision.as_str(),
        "capabilities": gateway.legacy_capabilities(revision),
        "serverInfo": Gateway::server_info().clone(),
        "instructions": gateway.instructions(principal),
    })
}

/// What one frame after `initialize` gets back.
pub enum Reply {
    /// The response to a request.
    Frame(Value),
    /// The frame was not JSON-RPC: an error response the transport may flag (HTTP 400).
    Invalid(Value),
    /// Notifications and responses get nothing.
    Nothing,
}

impl Reply {
    fn into_frame(self) -> Option<Value> {
        match self {
            Reply::Frame(f) | Reply::Invalid(f) => Some(f),
            Reply::Nothing => None,
        }
    }
}

/// The reply to one frame after `initialize`, for `caller`.
pub async fn answer(caller: &Caller, negotiated: &Negotiated, frame: Value, notify: Option<&Notify>) -> Reply {
    let (id, method, params) = match Message::classify(frame) {
        Ok(Message::Request { id, method, params }) => (id.to_value(), method, params),
        Ok(Message::Response { id, outcome }) => {
            if !negotiated.questions.answer(&id, outcome) {
                tracing::debug!(?id, "a response to no open question");
            }
            return Reply::Nothing;
        }
        Ok(Message::Notification { method, params }) => {
            if method == "notifications/cancelled"
                && let Some(id) = params.get("requestId").and_then(RequestId::from_value)
            {
                negotiated.in_flight.cancel(&id);
            }
            return Reply::Nothing;
        }
        Err(invalid) => return Reply::Invalid(error_response(invalid.id.as_ref(), &invalid.error)),
    };
    let params_uri = params.get("uri").and_then(Value::as_str).map(str::to_owned);
    let answered_here = match method.as_str() {
        "initialize" => Some(Err(RpcError::invalid_request("already initialized"))),
        "ping" => Some(Ok(json!({}))),
        // The session's level from now on: stateless upstreams are asked for it in `_meta`,
        // and what any upstream sends below it stops here. A handshake-era upstream is not
        // told: its instance may serve other callers with other levels.
        "logging/setLevel" => {
            Some(negotiated.log_level.set(params.get("level").and_then(Value::as_str)).map(|()| json!({})))
        }
        _ => None,
    };
    let outcome = match answered_here {
        Some(outcome) => {
            dispatch::traced(caller, negotiated.revision, &id, &method, &params, outcome.as_ref());
            outcome
        }
        None => {
            let expiry = caller.gateway.settings().config().timeouts.request;
            let ask = notify.map(|n| negotiated.questions.asker(n.clone(), negotiated.capabilities.clone(), expiry));
            match dispatch::listener(&params, notify, ask, Some(negotiated.log_level.get())) {
                Ok(listener) => {
                    let ctx = caller
                        .context(&params, negotiated.revision, negotiated.capabilities.clone(), listener)
                        .with_request_id(&id, caller.gateway.traces_on());
                    // The caller may cancel this request with notifications/cancelled: then
                    // the work stops (and its upstream request is cancelled) and no answer
                    // is sent, as the spec asks.
                    let Some(cancelled) = negotiated.in_flight.register(&id) else {
                        let e =
                            RpcError::invalid_request(format!("request id {id} is already in flight in this session"));
                        return Reply::Frame(error_response(Some(&id), &e));
                    };
                    tokio::select! {
                        outcome = dispatch::answer(&caller.gateway, &ctx, &method, params) => {
                            negotiated.in_flight.done(&id);
                            outcome
                        }
                        _ = cancelled => return Reply::Nothing,
                    }
                }
                Err(e) => Err(e),
            }
        }
    };
    if outcome.is_ok()
        && let Some(uri) =
            params_uri.filter(|_| matches!(method.as_str(), "resources/subscribe" | "resources/unsubscribe"))
    {
        let mut interest = negotiated.interest.lock().expect("interest lock");
        if method == "resources/subscribe" {
            interest.insert(uri)
        } else {
            interest.remove(&uri)
        };
    }
    Reply::Frame(dispatch::response(&id, outcome))
}

/// Answers a batch (2025-03-26 only): the replies in order, `None` when there are none.
/// At most `limits.batchConcurrency` entries run at once. A batch longer than
/// `limits.maxBatch` is refused whole before any entry runs: every request in it gets the
/// same error under its own id (an error without an id is not valid in 2025-03-26, and a
/// client could not match it to its requests, which would wait for their timeouts).
pub async fn answer_batch(caller: &Caller, negotiated: &Negotiated, frames: Vec<Value>) -> Option<Value> {
    let limits = caller.gateway.settings().config().limits.clone();
    if frames.len() > limits.max_batch {
        let e = RpcError::invalid_request(format!(
            "a batch of {} entries is more than limits.maxBatch ({}); send fewer at a time",
            frames.len(),
            limits.max_batch
        ))
        .with_data(json!({ "limit": limits.max_batch, "setting": "limits.maxBatch" }));
        let refusals: Vec<Value> = frames
            .iter()
            .filter(|f| f.get("method").is_some())
            .filter_map(|f| f.get("id").and_then(RequestId::from_value))
            .map(|id| error_response(Some(&id.to_value()), &e))
            .collect();
        return (!refusals.is_empty()).then_some(Value::Array(refusals));
    }
    let replies: Vec<Value> = futures::stream::iter(frames.into_iter().map(|f| answer(caller, negotiated, f, None)))
        .buffered(limits.batch_concurrency.max(1))
        .collect::<Vec<Reply>>()
        .await
        .into_iter()
        .filter_map(Reply::into_frame)
        .collect();
    (!replies.is_empty()).then_some(Value::Array(replies))
}

pub fn batch_refused(revision: Revision) -> RpcError {
    RpcError::invalid_request(format!(
        "JSON-RPC batches are part of 2025-03-26 only; this connection speaks {revision}"
    ))
}

/// What the session's standalone stream carries (HTTP `GET`; on stdio, after
/// `notifications/initialized`): the list changes of the instances the session reaches,
/// and updates to the resources it subscribed to. It starts no instance and keeps none
/// from being reaped.
pub async fn changes(caller: &Caller, negotiated: &Negotiated) -> Result<Watch, RpcError> {
    let ctx = caller.context(&Value::Null, negotiated.revision, negotiated.capabilities.clone(), None);
    caller.gateway.watch_session(&ctx, negotiated.interest.clone()).await.map_err(RpcError::from)
}
