//! Relaying one upstream request to the node of the cluster that owns its instance, over
//! HTTP: the relaying node's side (`Link` as the gateway's `cluster::Relay`) and the
//! owner's answer (the route is `api::relayed`).
//!
//! A request whose caller listens (progress, log messages, questions) is answered as a
//! stream of JSON-RPC messages, one per line (`reply::lines`): each notification the
//! upstream sends for the request, each question it asks (a request, under a random id),
//! then the response. The relaying node puts each question to its caller and sends the
//! caller's answer to the owner's [`ANSWER_PATH`], signed as every node request is, where
//! it is taken only for the question of that id, only from the principal the request was
//! for, and only while the question waits.
//!
//! Trust: an owner speaks for an upstream, of this request only. The relaying node passes
//! its caller nothing but what the caller listens for: progress under the caller's own
//! token, log messages at its level, and questions when it can be asked.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures::stream::FuturesUnordered;
use futures::{StreamExt, TryStreamExt};
use mcpx_gateway::cluster::{Kept, Listening, Node, NodeRequest, RELAYED_PROGRESS_TOKEN, Subscribed, Watching};
use mcpx_gateway::{Ask, Gateway, Line, Lines, Listener, Principal};
use mcpx_protocol::{RequestId, RpcError, message};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::Link;
use crate::dispatch::Notify;
use crate::reply::{self, NDJSON};
use crate::v1::{ErrorBody, ErrorDetail, RelayAnswer, RelayOutcome, rpc_error};

/// Where a node relays a request for one server to the node that owns its instance
/// (`NodeRequest`; the route is `api::relayed`); only a node may send there.
pub const RELAY_PATH: &str = "/v1/cluster/relay";

/// Where a node sends its caller's answer to a question an upstream asked during a
/// request it relayed ([`RelayAnswer`]; the route is `api::relay_answer`); only a node may
/// send there.
pub const ANSWER_PATH: &str = "/v1/cluster/relay/answer";

/// The largest body a node takes at [`RELAY_PATH`] and [`ANSWER_PATH`]: a relayed request
/// carries what a script or a session's caller sent, bound for an upstream, which no
/// request body bounds (a script builds its calls' arguments), so the upstream message
/// limit, as for the same call sent where the caller landed; at least
/// `http.maxBodyBytes`. An answer is one upstream message too.
pub fn body_limit(config: &mcpx_gateway::config::Config) -> usize {
    config.http.max_body_bytes.max(config.limits.max_line_bytes)
}

/// The id of the owner's response on a listened answer.
const RESPONSE_ID: &str = "relayed";

/// One line of an owner's listened answer, as the relaying node reads it.
#[derive(Debug)]
enum Relayed {
    /// A notification for the caller: progress or a log message.
    Notify(Value),
    /// A question for the caller, to be answered at [`ANSWER_PATH`] under `id`.
    Ask { id: String, method: String, params: Value },
    /// The outcome, last.
    Outcome(RelayOutcome),
}

impl Relayed {
    /// What a line's message is; `None` for one that is none of them.
    fn of(mut frame: Value) -> Option<Relayed> {
        let method = frame.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, frame.get("id")) {
            (Some(method), Some(id)) => {
                let id = id.as_str()?.to_owned();
                let params =
                    frame.get_mut("params").map(Value::take).unwrap_or_else(|| Value::Object(Default::default()));
                Some(Relayed::Ask { id, method, params })
            }
            (Some(_), None) => Some(Relayed::Notify(frame)),
            (None, Some(_)) => {
                if let Some(result) = frame.get_mut("result") {
                    return Some(Relayed::Outcome(RelayOutcome::Result(result.take())));
                }
                let error = serde_json::from_value::<ErrorDetail>(frame.get_mut("error")?.take()).ok()?;
                Some(Relayed::Outcome(RelayOutcome::Error(error)))
            }
            (None, None) => None,
        }
    }

    /// What of a notification the owner sent goes on to the caller `listener`, as the
    /// caller's own: progress under its token, a log message at a level it listens to;
    /// nothing else (an owner speaks for an upstream, and only of this request).
    fn notification(mut frame: Value, listener: &Listener) -> Option<Value> {
        if frame.get("id").is_some() {
            return None;
        }
        match frame.get("method")?.as_str()? {
            "notifications/progress" => {
                let token = listener.progress_token.clone()?;
                *frame.get_mut("params")?.get_mut("progressToken")? = token;
            }
            "notifications/message" => {
                let level = frame.pointer("/params/level")?.as_str()?;
                if !listener.wants_log(level) {
                    return None;
                }
            }
            _ => return None,
        }
        Some(frame)
    }
}

/// The questions upstreams asked during requests relayed to this node, each waiting for
/// the caller's answer from the node that relayed it. An entry lives as long as its
/// question waits: answered, expired, or given up when the request ends.
#[derive(Default)]
pub struct Questions(Mutex<HashMap<String, Waiting>>);

struct Waiting {
    /// Whom the request was for: only an answer vouched for them is taken.
    principal: Principal,
    answer: oneshot::Sender<Result<Value, RpcError>>,
}

/// A question's place in [`Questions`], given up when dropped.
struct Pending {
    questions: Arc<Questions>,
    id: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.questions.0.lock().expect("questions lock").remove(&self.id);
    }
}

impl Questions {
    fn open(self: &Arc<Self>, principal: Principal) -> (Pending, oneshot::Receiver<Result<Value, RpcError>>) {
        let id = crate::cluster::new_nonce();
        let (answer, answered) = oneshot::channel();
        self.0.lock().expect("questions lock").insert(id.clone(), Waiting { principal, answer });
        (Pending { questions: self.clone(), id }, answered)
    }

    /// Hands `principal`'s answer to the question `id`; false when no such question waits
    /// for that principal (answered already, given up, never asked, or someone else's).
    pub fn answer(&self, id: &str, principal: &Principal, outcome: Result<Value, RpcError>) -> bool {
        let mut waiting = self.0.lock().expect("questions lock");
        if waiting.get(id).is_none_or(|w| w.principal != *principal) {
            return false;
        }
        let waiting = waiting.remove(id).expect("present");
        waiting.answer.send(outcome).is_ok()
    }
}

/// The owner's answer to a relayed request whose caller listens (`listen`): 200 and, one
/// JSON-RPC message per line, what the upstream says of the request while it runs (at
/// most `limits.maxBufferedNotifications` waiting, the oldest progress or log message
/// dropped first, never a question), then its response. The request runs while the
/// relaying node reads: when it hangs up, the call ends here, its questions with it, as
/// a caller's call ends when its caller goes.
pub fn listened_answer(
    gateway: Arc<Gateway>,
    questions: Arc<Questions>,
    principal: Principal,
    request: NodeRequest,
    listen: Listening,
) -> Response {
    let config = gateway.settings().config();
    let (max_notes, expiry) = (config.limits.max_buffered_notifications, config.timeouts.request);
    reply::lines(max_notes, move |notify| async move {
        let ended = CancellationToken::new();
        let _ends = ended.clone().drop_guard();
        let ask = listen.asks.is_some().then(|| asker(questions, principal.clone(), notify.clone(), expiry, ended));
        let listener = Listener {
            progress_token: listen.progress.then(|| Value::from(RELAYED_PROGRESS_TOKEN)),
            log_level: listen.log_level,
            notify,
            ask,
        };
        let outcome = gateway.relayed(principal, request, Some(listener)).await;
        crate::dispatch::response(&Value::from(RESPONSE_ID), outcome.map_err(RpcError::from))
    })
}

/// The owner's answer to a relayed `resources/subscribe`: 200 and, one JSON-RPC message
/// per line, its response, then each update of the resource the instance sends, until the
/// instance ends (the answer ends with it) or the relaying node hangs up (the
/// subscription ends with it).
pub fn subscription_answer(gateway: Arc<Gateway>, principal: Principal, request: NodeRequest) -> Response {
    let max_notes = gateway.settings().config().limits.max_buffered_notifications;
    reply::lines(max_notes, move |notify| async move {
        let id = Value::from(RESPONSE_ID);
        match gateway.relayed_subscription(principal, request, notify.clone()).await {
            Ok((answer, watching)) => {
                notify(crate::dispatch::response(&id, Ok(answer)));
                watching.await;
                Value::Null
            }
            Err(e) => crate::dispatch::response(&id, Err(RpcError::from(e))),
        }
    })
}

/// Puts an upstream's question during a relayed request to the relaying node (a request
/// on the request's answer, through `notify`) and waits for its caller's answer: at most
/// `expiry`, as a caller on this node is waited for, and no longer than the request
/// lasts (`ended`).
fn asker(
    questions: Arc<Questions>,
    principal: Principal,
    notify: Notify,
    expiry: Duration,
    ended: CancellationToken,
) -> Ask {
    Arc::new(move |method, params| {
        let (pending, answered) = questions.open(principal.clone());
        notify(message::request(&RequestId::String(pending.id.clone()), &method, params));
        let ended = ended.clone();
        Box::pin(async move {
            let _pending = pending;
            tokio::select! {
                answer = tokio::time::timeout(expiry, answered) => match answer {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(_)) => Err(RpcError::internal("the question was given up")),
                    Err(_) => Err(RpcError::internal(format!("the caller did not answer {method} within {expiry:?}"))),
                },
                () = ended.cancelled() => Err(RpcError::internal("the request this question is about has ended")),
            }
        })
    })
}

impl mcpx_gateway::cluster::Relay for Link {
    fn send<'a>(
        &'a self,
        node: &'a Node,
        principal: &'a Principal,
        request: &'a NodeRequest,
        limit: usize,
        patience: Duration,
        listener: Option<&'a Listener>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, mcpx_gateway::Error>> + Send + 'a>> {
        Box::pin(async move {
            let unreachable = &unreachable(node, &request.server, "relaying to another node");
            let silent = || {
                mcpx_gateway::Error::internal(format!(
                    "cluster node {:?}, which serves the instance, did not answer within {patience:?}",
                    node.id
                ))
            };
            let deadline = Instant::now() + patience;
            let accept = if request.listen.is_some() { NDJSON } else { "application/json" };
            let sent = self.post_relay(node, principal, request, accept);
            let answer = tokio::time::timeout_at(deadline, sent).await.map_err(|_| silent())?.map_err(unreachable)?;
            let status = answer.status();
            let lines =
                answer.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(NDJSON.as_bytes()));
            if status.is_success() && lines {
                let outcome = self.read_listened(node, principal, answer, limit, deadline, listener).await;
                return match outcome {
                    Ok(outcome) => Result::from(outcome).map_err(mcpx_gateway::Error::Relayed),
                    Err(Unanswered::Silent) => Err(silent()),
                    Err(Unanswered::Broken(e)) => Err(unreachable(e)),
                };
            }
            let body = tokio::time::timeout_at(deadline, mcpx_http::body(answer, limit));
            let body = body.await.map_err(|_| silent())?.map_err(unreachable)?;
            if status.is_success() {
                return serde_json::from_slice(&body).map_err(|e| unreachable(format!("an unreadable answer: {e}")));
            }
            Err(refused(status, &body).unwrap_or_else(unreachable))
        })
    }

    fn watch<'a>(
        &'a self,
        node: &'a Node,
        principal: &'a Principal,
        request: &'a NodeRequest,
        limit: usize,
        patience: Duration,
        deliver: Arc<dyn Fn(Value) + Send + Sync>,
    ) -> Pin<Box<dyn Future<Output = Result<Subscribed, mcpx_gateway::Error>> + Send + 'a>> {
        Box::pin(async move {
            let unreachable = &unreachable(node, &request.server, "subscribing through another node");
            let sent = self.post_relay(node, principal, request, NDJSON);
            let silent = || unreachable(format!("no answer within {patience:?}"));
            let deadline = Instant::now() + patience;
            let answer = tokio::time::timeout_at(deadline, sent).await.map_err(|_| silent())?.map_err(unreachable)?;
            let status = answer.status();
            if !status.is_success() {
                let body = mcpx_http::body(answer, limit).await.map_err(unreachable)?;
                return Err(refused(status, &body).unwrap_or_else(unreachable));
            }
            let mut lines = frames(answer, limit);
            // The response first: what comes before it (nothing, from this release) is not
            // an update of this subscription.
            let first = async {
                while let Some(frame) = lines.next().await {
                    if let Some(Relayed::Outcome(outcome)) = Relayed::of(frame?) {
                        return Ok(outcome);
                    }
                }
                Err("its answer ended before the response".to_owned())
            };
            let outcome = tokio::time::timeout_at(deadline, first).await.map_err(|_| silent())?.map_err(unreachable)?;
            let answer = Result::from(outcome).map_err(mcpx_gateway::Error::Relayed)?;
            let updates = async move {
                // Only notifications of updates: nothing else of the owner's reaches the session.
                while let Some(Ok(frame)) = lines.next().await {
                    if let Some(Relayed::Notify(frame)) = Relayed::of(frame)
                        && frame["method"] == "notifications/resources/updated"
                    {
                        deliver(frame);
                    }
                }
            };
            Ok((answer, Box::pin(updates) as Watching))
        })
    }
}

/// What the caller gets when `doing` (a relayed request to `node` for an instance of
/// `server`) failed for the reason it is given, which is logged, not told.
fn unreachable<'a>(node: &'a Node, server: &str, doing: &'static str) -> impl Fn(String) -> mcpx_gateway::Error + 'a {
    let kept = Kept::Instance(server.to_owned());
    move |e| {
        tracing::warn!(node = node.id, url = node.url, ?kept, "{doing} failed: {e}");
        mcpx_gateway::Error::Internal(kept.unreachable(&node.id))
    }
}

/// The error an owner answered a relayed request with (its status, `body`); what the
/// answer was instead when it is none.
fn refused(status: StatusCode, body: &[u8]) -> Result<mcpx_gateway::Error, String> {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => Ok(mcpx_gateway::Error::Relayed(rpc_error(error))),
        Err(_) => Err(format!("answered {status}: {}", String::from_utf8_lossy(body))),
    }
}

/// The JSON messages of an owner's answer, one per line: each at most twice `limit` bytes
/// (one upstream message as the owner wrote it again: room for the line's envelope, and
/// for numbers written longer than the upstream wrote them); an error ends them.
fn frames(
    answer: mcpx_http::Response,
    limit: usize,
) -> impl futures::Stream<Item = Result<Value, String>> + Send + Unpin {
    use http_body_util::BodyExt;
    let body = answer.into_body().into_data_stream().map_err(std::io::Error::other);
    let reader = tokio_util::io::StreamReader::new(body);
    let lines = tokio_util::codec::FramedRead::new(reader, Lines::new(limit.saturating_mul(2)));
    lines.map(move |line| match line.map_err(|e| e.to_string())? {
        Line::Text(line) => serde_json::from_str::<Value>(&line).map_err(|e| format!("an unreadable line: {e}")),
        Line::TooLong(_) => Err(format!("a line of its answer over {limit} bytes")),
        Line::NotUtf8 => Err("a line of its answer that is not UTF-8".into()),
    })
}

/// Why a listened answer gave no outcome.
enum Unanswered {
    /// The owner said nothing more by the deadline.
    Silent,
    /// The answer broke off, or was not one.
    Broken(String),
}

impl Link {
    /// Sends `request` to `node`'s relay route, signed for `principal`, accepting `accept`:
    /// the owner's answer as it starts, or why none came.
    async fn post_relay(
        &self,
        node: &Node,
        principal: &Principal,
        request: &NodeRequest,
        accept: &'static str,
    ) -> Result<mcpx_http::Response, String> {
        let body = Bytes::from(serde_json::to_vec(request).expect("a node request serializes"));
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
        Link::send(self, node, Method::POST, RELAY_PATH, &headers, principal, body).await
    }

    /// Reads an owner's listened answer (see [`listened_answer`]) up to its outcome,
    /// passing what the caller listens for to `listener` and answering the owner's
    /// questions with the caller's answers. The owner has until `deadline`, which moves on
    /// by the time its questions wait for the caller.
    async fn read_listened(
        &self,
        node: &Node,
        principal: &Principal,
        answer: mcpx_http::Response,
        limit: usize,
        mut deadline: Instant,
        listener: Option<&Listener>,
    ) -> Result<RelayOutcome, Unanswered> {
        let mut lines = frames(answer, limit);
        // The questions being put to the caller, each until its answer is sent; while any
        // is, the owner's time does not run.
        let mut answering = FuturesUnordered::new();
        let mut asking_since = None;
        loop {
            let line = tokio::select! {
                line = lines.next() => line,
                Some(()) = answering.next(), if !answering.is_empty() => {
                    if let (true, Some(since)) = (answering.is_empty(), asking_since.take()) {
                        deadline += Instant::now().saturating_duration_since(since);
                    }
                    continue;
                }
                () = tokio::time::sleep_until(deadline), if answering.is_empty() => return Err(Unanswered::Silent),
            };
            let Some(frame) = line else { break };
            let frame = frame.map_err(Unanswered::Broken)?;
            match Relayed::of(frame.clone()) {
                Some(Relayed::Notify(frame)) => {
                    let heard = listener.and_then(|l| Relayed::notification(frame, l).map(|frame| (l, frame)));
                    if let Some((listener, frame)) = heard {
                        (listener.notify)(frame);
                    }
                }
                Some(Relayed::Ask { id, method, params }) => {
                    asking_since.get_or_insert_with(Instant::now);
                    let ask = listener.and_then(|l| l.ask.clone());
                    answering.push(self.answer_question(node, principal, ask, id, method, params));
                }
                Some(Relayed::Outcome(outcome)) => return Ok(outcome),
                None => return Err(Unanswered::Broken(format!("a line that is no JSON-RPC message: {frame}"))),
            }
        }
        Err(Unanswered::Broken("its answer ended before the outcome".into()))
    }

    /// Puts an owner's question to the caller (`ask`) and sends the owner its answer.
    async fn answer_question(
        &self,
        node: &Node,
        principal: &Principal,
        ask: Option<Ask>,
        id: String,
        method: String,
        params: Value,
    ) {
        let outcome = match ask {
            Some(ask) => ask(method, params).await,
            None => Err(RpcError::new(mcpx_protocol::code::METHOD_NOT_FOUND, "the caller cannot be asked")),
        };
        let answer = RelayAnswer { id, outcome: outcome.into() };
        let body = Bytes::from(serde_json::to_vec(&answer).expect("an answer serializes"));
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match Link::send(self, node, Method::POST, ANSWER_PATH, &headers, principal, body).await {
            Ok(reply) if reply.status().is_success() => {}
            Ok(reply) => tracing::warn!(node = node.id, status = %reply.status(), "the owner did not take an answer"),
            Err(e) => tracing::warn!(node = node.id, url = node.url, "sending an answer to the owner failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an owner sends back of a relayed request reaches the caller only as what the
    /// caller listens for: progress under the caller's own token (none if it sent none),
    /// log messages at its level; no other notification and no request.
    #[test]
    fn an_owners_notification_reaches_the_caller_only_as_what_it_listens_for() {
        let heard = |token: Option<Value>, level: Option<&str>, frame: Value| {
            let listener = Listener {
                progress_token: token,
                log_level: level.map(str::to_owned),
                notify: Arc::new(|_| {}),
                ask: None,
            };
            Relayed::notification(frame, &listener)
        };
        let progress = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": RELAYED_PROGRESS_TOKEN, "progress": 1}});
        let mine = heard(Some(Value::from(7)), None, progress.clone()).unwrap();
        assert_eq!(mine["params"]["progressToken"], 7, "{mine}");
        assert_eq!(heard(None, Some("debug"), progress), None);
        let log = |level: &str| serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": "x"}});
        assert!(heard(None, Some("warning"), log("error")).is_some());
        assert_eq!(heard(None, Some("warning"), log("info")), None);
        assert_eq!(heard(None, None, log("emergency")), None);
        for frame in [
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "notifications/progress",
                "params": {"progressToken": RELAYED_PROGRESS_TOKEN, "progress": 1}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}}),
        ] {
            assert_eq!(heard(Some(Value::from(7)), Some("debug"), frame.clone()), None, "{frame}");
        }
    }

    /// An answer is taken only for a question that waits, only from the principal its
    /// request was for, and only once; a question given up takes none.
    #[tokio::test]
    async fn an_answer_reaches_only_its_own_waiting_question() {
        let questions = Arc::new(Questions::default());
        let (alice, bob) = (Principal::Token("alice".into()), Principal::Token("bob".into()));
        let (pending, answered) = questions.open(alice.clone());
        let id = pending.id.clone();
        assert!(!questions.answer(&id, &bob, Ok(Value::from("bob's"))), "another principal's answer was taken");
        assert!(!questions.answer("not-an-id", &alice, Ok(Value::from("made up"))));
        assert!(questions.answer(&id, &alice, Ok(Value::from("alice's"))));
        assert_eq!(answered.await.unwrap(), Ok(Value::from("alice's")));
        assert!(!questions.answer(&id, &alice, Ok(Value::from("again"))), "a question was answered twice");
        drop(pending);

        let (pending, _answered) = questions.open(alice.clone());
        let id = pending.id.clone();
        drop(pending);
        assert!(!questions.answer(&id, &alice, Ok(Value::Null)), "a given-up question took an answer");
        assert!(questions.0.lock().unwrap().is_empty());
    }
}
