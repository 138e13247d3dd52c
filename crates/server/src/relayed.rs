//! Relaying one upstream request to the node of the cluster that owns its instance, over
//! HTTP: the relaying node's side (`Link` as the gateway's `cluster::Relay`) and the
//! owner's answer (the route is `api::relayed`).
//!
//! A request whose caller listens (progress, log messages, questions) is answered as a
//! stream, one [`Relayed`] per line: what the upstream says of the request while it
//! runs, then its outcome. An upstream's question goes to the relaying node the same
//! way, under a random id; that node puts it to its caller and sends the caller's answer
//! to the owner's [`ANSWER_PATH`], signed as every node request is, where it is taken
//! only for the question of that id, only from the principal the request was for, and
//! only while the question waits.
//!
//! Trust: an owner speaks for an upstream, of this request only. The relaying node passes
//! its caller nothing but what the caller listens for: progress under the caller's own
//! token, log messages at its level, and questions when it can be asked.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures::stream::FuturesUnordered;
use futures::{StreamExt, TryStreamExt};
use mcpx_gateway::cluster::{Kept, Listening, Node, NodeRequest, RELAYED_PROGRESS_TOKEN};
use mcpx_gateway::{Ask, Gateway, Line, Lines, Listener, Principal};
use mcpx_protocol::RpcError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::cluster::Link;
use crate::reply;
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

/// The media type of an owner's answer to a relayed request whose caller listens.
const NDJSON: &str = "application/x-ndjson";

/// How many of a relayed request's notifications wait to go back to the relaying node;
/// more are dropped (progress and log messages are worth nothing late), never a question
/// or the outcome.
const BACKLOG: usize = 256;

/// Room for the envelope around an upstream message on a line of a listened answer.
const LINE_ENVELOPE: usize = 256;

/// One line of an owner's answer to a relayed request (a JSON object per line): what the
/// caller hears while the request runs, then its outcome, last.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Relayed {
    /// A notification for the caller: progress or a log message.
    Notify(Value),
    /// A question for the caller, to be answered at [`ANSWER_PATH`] under `id`.
    Ask { id: String, method: String, params: Value },
    /// The upstream's result.
    Result(Value),
    /// Why there is none.
    Error(ErrorDetail),
}

impl Relayed {
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

    fn line(&self) -> Bytes {
        let mut bytes = serde_json::to_vec(self).expect("a relayed line serializes");
        bytes.push(b'\n');
        Bytes::from(bytes)
    }
}

/// The questions upstreams asked during requests relayed to this node, each waiting for
/// the caller's answer from the node that relayed it. An entry lives as long as its
/// question waits: answered, or given up when the request ends.
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

/// The owner's answer to a relayed request whose caller listens (`listen`): 200 and one
/// [`Relayed`] per line, what the upstream says of the request while it runs, then its
/// outcome. The request runs while the relaying node reads: when it hangs up, the call
/// ends here as a caller's call ends when its caller goes.
pub fn listened_answer(
    gateway: Arc<Gateway>,
    questions: Arc<Questions>,
    principal: Principal,
    request: NodeRequest,
    listen: &Listening,
) -> Response {
    let (lines, pending) = mpsc::channel::<Relayed>(BACKLOG);
    let notes = lines.clone();
    let ask = listen.asks.is_some().then(|| asker(questions, principal.clone(), lines.clone()));
    let listener = Listener {
        progress_token: listen.progress.then(|| Value::from(RELAYED_PROGRESS_TOKEN)),
        log_level: listen.log_level.clone(),
        notify: Arc::new(move |frame| {
            let _ = notes.try_send(Relayed::Notify(frame));
        }),
        ask,
    };
    let run = tokio::spawn(async move {
        let outcome = match gateway.relayed(principal, request, Some(listener)).await {
            Ok(result) => Relayed::Result(result),
            Err(e) => Relayed::Error(ErrorBody::from(&RpcError::from(e)).error),
        };
        let _ = lines.send(outcome).await;
    });
    let stop = tokio_util::task::AbortOnDropHandle::new(run);
    let body = futures::stream::unfold(Some((pending, stop)), |running| async move {
        let (mut pending, stop) = running?;
        let line = pending.recv().await?;
        // After the outcome, nothing: the stream ends (and so does its task, done).
        let running = matches!(line, Relayed::Notify(_) | Relayed::Ask { .. }).then_some((pending, stop));
        Some((Ok::<_, std::convert::Infallible>(line.line()), running))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, NDJSON)
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| reply::status(StatusCode::INTERNAL_SERVER_ERROR, "the answer could not be built\n"))
}

/// Puts an upstream's question during a relayed request to the relaying node (on the
/// request's answer, `lines`) and waits for its caller's answer, for as long as the
/// request lasts.
fn asker(questions: Arc<Questions>, principal: Principal, lines: mpsc::Sender<Relayed>) -> Ask {
    Arc::new(move |method, params| {
        let (questions, principal, lines) = (questions.clone(), principal.clone(), lines.clone());
        Box::pin(async move {
            let gone = || RpcError::internal("the request this question is about has ended");
            let (pending, answered) = questions.open(principal);
            let asked = Relayed::Ask { id: pending.id.clone(), method, params };
            lines.send(asked).await.map_err(|_| gone())?;
            tokio::select! {
                answer = answered => answer.map_err(|_| gone())?,
                () = lines.closed() => Err(gone()),
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
        listener: Option<&'a Listener>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, mcpx_gateway::Error>> + Send + 'a>> {
        Box::pin(async move {
            let kept = Kept::Instance(request.server.clone());
            let unreachable = |e: String| {
                tracing::warn!(node = node.id, url = node.url, ?kept, "relaying to another node failed: {e}");
                mcpx_gateway::Error::Internal(kept.unreachable(&node.id))
            };
            let body = Bytes::from(serde_json::to_vec(request).expect("a node request serializes"));
            let listened = request.listen.is_some();
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            let accept = if listened { NDJSON } else { "application/json" };
            headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
            let answer = Link::send(self, node, Method::POST, RELAY_PATH, &headers, principal, body)
                .await
                .map_err(unreachable)?;
            let status = answer.status();
            if listened && status.is_success() {
                let outcome =
                    self.read_listened(node, principal, answer, limit, listener).await.map_err(unreachable)?;
                return Result::from(outcome).map_err(mcpx_gateway::Error::Relayed);
            }
            let body = mcpx_http::body(answer, limit).await.map_err(unreachable)?;
            if status.is_success() {
                return serde_json::from_slice(&body).map_err(|e| unreachable(format!("an unreadable answer: {e}")));
            }
            match serde_json::from_slice::<ErrorBody>(&body) {
                Ok(ErrorBody { error }) => Err(mcpx_gateway::Error::Relayed(rpc_error(error))),
                Err(_) => Err(unreachable(format!("answered {status}: {}", String::from_utf8_lossy(&body)))),
            }
        })
    }
}

impl Link {
    /// Reads an owner's listened answer (see [`listened_answer`]) up to its outcome,
    /// passing what the caller listens for to `listener` and answering the owner's
    /// questions with the caller's answers: the outcome, or why the answer was not one.
    async fn read_listened(
        &self,
        node: &Node,
        principal: &Principal,
        answer: mcpx_http::Response,
        limit: usize,
        listener: Option<&Listener>,
    ) -> Result<RelayOutcome, String> {
        use http_body_util::BodyExt;
        let body = answer.into_body().into_data_stream().map_err(std::io::Error::other);
        let reader = tokio_util::io::StreamReader::new(body);
        let mut lines = tokio_util::codec::FramedRead::new(reader, Lines::new(limit + LINE_ENVELOPE));
        // The questions being put to the caller, each until its answer is sent.
        let mut answering = FuturesUnordered::new();
        loop {
            let line = tokio::select! {
                line = lines.next() => line,
                Some(()) = answering.next(), if !answering.is_empty() => continue,
            };
            let Some(line) = line else { break };
            let line = match line.map_err(|e| e.to_string())? {
                Line::Text(line) => line,
                Line::TooLong(_) => return Err(format!("a line of its answer over {limit} bytes")),
                Line::NotUtf8 => return Err("a line of its answer that is not UTF-8".into()),
            };
            match serde_json::from_str::<Relayed>(&line).map_err(|e| format!("an unreadable line: {e}"))? {
                Relayed::Notify(frame) => {
                    let heard = listener.and_then(|l| Relayed::notification(frame, l).map(|frame| (l, frame)));
                    if let Some((listener, frame)) = heard {
                        (listener.notify)(frame);
                    }
                }
                Relayed::Ask { id, method, params } => {
                    let ask = listener.and_then(|l| l.ask.clone());
                    answering.push(self.answer_question(node, principal, ask, id, method, params));
                }
                Relayed::Result(result) => return Ok(RelayOutcome::Result(result)),
                Relayed::Error(error) => return Ok(RelayOutcome::Error(error)),
            }
        }
        Err("its answer ended before the outcome".into())
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
