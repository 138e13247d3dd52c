//! MCP over a stream of lines, as the stdio transport frames it: one JSON-RPC message per
//! line. Serves the stdio of `mcpx serve --no-daemon`, and every `mcpx serve` relayed to
//! the daemon over its unix socket: `GET /v1/stdio` ([`upgrade`]) turns that connection
//! into the stream.
//!
//! Both eras on one stream: a request carrying the 2026-07-28 `_meta` is admitted on its
//! own, with nothing carried over from earlier requests; `initialize` settles a
//! handshake-era revision for this stream. Requests run concurrently and their replies are
//! written as they finish; `notifications/cancelled` stops one in flight. The stream is a
//! process: its identity (session, cwd, pid) comes from the transport ([`transport`]), and
//! a `_meta` session key still wins over it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use hyper_util::rt::TokioIo;
use mcpx_gateway::{Edges, Line, Lines};
use mcpx_gateway::{Gateway, Principal, Transport};
use mcpx_protocol::dropped::Dropped;
use mcpx_protocol::message::{error_response, result_response};
use mcpx_protocol::{Message, RequestId, RpcError, meta};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::caller::{self, Caller, SESSION_HEADER};
use crate::dispatch::{self, Notify};
use crate::front::Front;
use crate::legacy::{self, Negotiated};
use crate::socket::{self, Peer};
use crate::{listen, modern};

/// The header in which `mcpx serve` names its own pid, checked against the socket's
/// credentials.
pub const PID_HEADER: &str = "x-mcpx-pid";
/// The `Upgrade` protocol name of a relayed stdio stream.
pub const STDIO_PROTOCOL: &str = "mcpx-stdio";

/// Replies waiting to be written; a slow reader holds up at most this many.
const OUTBOX: usize = 1024;
/// After the reader ends, how long requests already running get to finish and be answered
/// (a client that pipes in a request and closes its end still gets the reply). Open
/// listens are not waited for: they end at once with their result.
const EOF_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

type InFlight = Arc<Mutex<HashMap<RequestId, AbortHandle>>>;

/// The stdio front end's identity step: the transport of process `pid`'s stdio, working
/// in `cwd`, in the session it names (`$MCPX_SESSION_ID`, relayed as `X-Mcpx-Session`)
/// or else in its own. Over the socket the pid is the kernel's word, and the cwd the
/// daemon's own reading of it.
pub fn transport(label: Option<&str>, pid: u32, cwd: Option<PathBuf>) -> Transport {
    Transport {
        session: caller::session(label, Some(pid)),
        cwd,
        pid: Some(pid),
        principal: Principal::Local,
        stdio: true,
    }
}

/// `GET /v1/stdio`: `mcpx serve` turns this connection into its stdio relay. Only over
/// the unix socket, and only for the process the kernel says is connected. The stream
/// counts as use of the daemon while it is open, and ends when the daemon stops.
pub async fn upgrade(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let Peer::Local { pid: Some(peer_pid), .. } = peer else {
        return (StatusCode::FORBIDDEN, "stdio relay is served on the unix socket only\n").into_response();
    };
    let claimed = headers.get(PID_HEADER).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u32>().ok());
    if claimed != Some(peer_pid) {
        tracing::warn!(peer_pid, ?claimed, "refused a stdio relay whose pid claim does not match its credentials");
        return (StatusCode::FORBIDDEN, "the X-Mcpx-Pid claim does not match the connected process\n").into_response();
    }
    let label = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    let transport = transport(label, peer_pid, socket::cwd_of(peer_pid));
    let upgraded = hyper::upgrade::on(request);
    let stream_front = front.clone();
    front.life.hold_stream(transport.clone(), move |end| async move {
        let io = match upgraded.await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(e) => return tracing::warn!("stdio relay upgrade failed: {e}"),
        };
        let (reader, writer) = tokio::io::split(io);
        serve_lines(stream_front.gateway.clone(), transport, reader, writer, end).await;
        stream_front.life.touch();
    });
    (
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, HeaderValue::from_static("upgrade")),
            (header::UPGRADE, HeaderValue::from_static(STDIO_PROTOCOL)),
        ],
    )
        .into_response()
}

/// Serves one stream until its reader ends, or `end` is cancelled (the daemon stops),
/// whichever comes first; requests still running then get [`EOF_GRACE`] to finish.
pub async fn serve_lines<R, W>(
    gateway: Arc<Gateway>,
    transport: Transport,
    reader: R,
    writer: W,
    end: CancellationToken,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max_line = gateway.settings().config().limits.max_line_bytes;
    let (outbox, replies) = mpsc::channel::<Value>(OUTBOX);
    let writer = tokio::spawn(write_lines(writer, replies));
    let mut stream = Stream {
        caller: Caller::new(gateway, transport),
        negotiated: None,
        outbox,
        in_flight: InFlight::default(),
        tasks: TaskTracker::new(),
        listens: Default::default(),
        changes: None,
    };
    let mut lines = FramedRead::new(reader, Lines::new(max_line));
    let mut ending = std::pin::pin!(end.cancelled_owned());
    loop {
        let line = tokio::select! {
            biased;
            line = lines.next() => line,
            _ = &mut ending => break,
        };
        match line {
            None => break,
            Some(Ok(Line::Text(line))) if line.trim().is_empty() => {}
            Some(Ok(Line::Text(line))) => stream.frame(&line).await,
            // A bad line gets its error and the stream goes on: nothing accepted is lost.
            Some(Ok(Line::TooLong(edges))) => stream.too_long(&edges, max_line).await,
            Some(Ok(Line::NotUtf8)) => stream.refuse(None, &RpcError::parse_error("the line is not UTF-8")).await,
            Some(Err(e)) => {
                tracing::debug!("stdio stream ended: {e}");
                break;
            }
        }
    }
    if let Some(changes) = stream.changes.take() {
        changes.abort();
    }
    stream.end_listens().await;
    stream.tasks.close();
    if tokio::time::timeout(EOF_GRACE, stream.tasks.wait()).await.is_err() {
        for (_, task) in stream.in_flight.lock().expect("in-flight lock").drain() {
            task.abort();
        }
    }
    // A session mcpx derived from this stream (a process that named none) ends with it:
    // its instances stop once the calls still holding them let go. If the process is
    // still there (its daemon connection broke), it starts afresh, as after a restart.
    stream.caller.gateway.end_session(&stream.caller.transport);
    drop(stream);
    let _ = writer.await;
}

struct Stream {
    /// The gateway and this stream's transport.
    caller: Caller,
    /// Set by `initialize`: the handshake-era revision of this stream.
    negotiated: Option<Negotiated>,
    outbox: mpsc::Sender<Value>,
    in_flight: InFlight,
    /// Every request and batch task, so the end of the stream can wait for them.
    tasks: TaskTracker,
    /// Ids of open listens, which end with a result when cancelled.
    listens: std::collections::HashSet<RequestId>,
    /// A handshake-era session's list changes and resource updates, relayed from its
    /// `notifications/initialized` until the stream ends.
    changes: Option<AbortHandle>,
}

impl Stream {
    /// Notifications about a request go out on the stream as they come; when the client
    /// is not reading, they are dropped rather than held (the reply itself never is).
    fn notify(&self) -> Notify {
        let outbox = self.outbox.clone();
        Arc::new(move |frame| {
            let _ = outbox.try_send(frame);
        })
    }

    async fn send(&self, frame: Value) {
        let _ = self.outbox.send(frame).await;
    }

    /// An error answer: the one way this front end turns an error into its frame.
    async fn refuse(&self, id: Option<&Value>, e: &RpcError) {
        self.send(error_response(id, e)).await
    }

    /// A line over `limits.maxLineBytes`, dropped unread. Whoever waits on it is told at
    /// once, when the line's edges show who: a request is refused under its own id, and
    /// the client's answer to a question an upstream asked fails that question.
    async fn too_long(&self, edges: &Edges, max_line: usize) {
        let e = RpcError::invalid_request(format!("message longer than limits.maxLineBytes ({max_line} bytes)"));
        match edges.read() {
            Some(Dropped::Response(id)) => {
                if let Some(negotiated) = &self.negotiated {
                    let e = RpcError::internal(format!("the caller's answer was dropped unread: {}", e.message));
                    negotiated.questions.answer(&id, Err(e));
                }
            }
            Some(Dropped::Request(id)) => self.refuse(Some(&id.to_value()), &e).await,
            Some(Dropped::Unidentified) | None => self.refuse(None, &e).await,
        }
    }

    async fn frame(&mut self, line: &str) {
        let frame = match Message::parse(line.as_bytes()) {
            Ok(frame) => frame,
            Err(invalid) => return self.refuse(None, &invalid.error).await,
        };
        if let Value::Array(frames) = frame {
            return self.batch(frames).await;
        }
        match Message::classify(frame) {
            Err(invalid) => self.refuse(invalid.id.as_ref(), &invalid.error).await,
            Ok(Message::Request { id, method, params }) => self.request(id, method, params).await,
            Ok(Message::Notification { method, params }) => self.notification(&method, &params),
            // The answer to a question an upstream asked this client.
            Ok(Message::Response { id, outcome }) => {
                if let Some(negotiated) = &self.negotiated {
                    negotiated.questions.answer(&id, outcome);
                }
            }
        }
    }

    async fn request(&mut self, id: RequestId, method: String, params: Value) {
        let id_value = id.to_value();
        if self.in_flight.lock().expect("in-flight lock").contains_key(&id) {
            let e = RpcError::invalid_request(format!("request id {id_value} is already in flight"));
            return self.refuse(Some(&id_value), &e).await;
        }
        if meta::has_modern_marker(&params) {
            let admitted = match modern::admit(&method, &params, None, || Ok(())) {
                Ok(admitted) => admitted,
                Err(e) => return self.refuse(Some(&id_value), &e).await,
            };
            if method == "subscriptions/listen" {
                return self.listen(id, admitted, params).await;
            }
            let (caller, notify) = (self.caller.clone(), self.notify());
            return self.spawn(id, async move {
                dispatch::response(
                    &id_value,
                    modern::answer(&caller, admitted, &id_value, &method, params, Some(&notify)).await,
                )
            });
        }
        if method == "initialize" && self.negotiated.is_none() {
            let negotiated = Negotiated::from_initialize(&params);
            let result =
                legacy::initialize_result(&self.caller.gateway, negotiated.revision, &self.caller.transport.principal);
            dispatch::traced(&self.caller, negotiated.revision, &id_value, &method, &params, Ok(&result));
            self.negotiated = Some(negotiated);
            return self.send(result_response(&id_value, result)).await;
        }
        let Some(negotiated) = self.negotiated.clone() else {
            let e = RpcError::invalid_request(
                "send initialize first (2025-11-25), or carry the 2026-07-28 _meta on every request",
            );
            return self.refuse(Some(&id_value), &e).await;
        };
        let (caller, notify) = (self.caller.clone(), self.notify());
        let frame = mcpx_protocol::message::request(&id, &method, params);
        self.spawn(id, async move {
            match legacy::answer(&caller, &negotiated, frame, Some(&notify)).await {
                legacy::Reply::Frame(f) | legacy::Reply::Invalid(f) => f,
                legacy::Reply::Nothing => Value::Null,
            }
        });
    }

    async fn batch(&mut self, frames: Vec<Value>) {
        let negotiated = match &self.negotiated {
            Some(n) if n.revision.allows_batches() && !frames.is_empty() => n.clone(),
            Some(n) => return self.refuse(None, &legacy::batch_refused(n.revision)).await,
            None => {
                let e = RpcError::invalid_request("JSON-RPC batches are accepted only after a 2025-03-26 initialize");
                return self.refuse(None, &e).await;
            }
        };
        let (caller, outbox) = (self.caller.clone(), self.outbox.clone());
        self.tasks.spawn(async move {
            if let Some(replies) = legacy::answer_batch(&caller, &negotiated, frames).await {
                let _ = outbox.send(replies).await;
            }
        });
    }

    /// A listen runs until the client cancels it or the daemon stops; its frames go out
    /// as they come.
    async fn listen(&mut self, id: RequestId, admitted: modern::Admitted, params: Value) {
        let id_value = id.to_value();
        let mut watch = match modern::listen(&self.caller, admitted, &params).await {
            Ok(watch) => watch,
            Err(e) => return self.refuse(Some(&id_value), &e).await,
        };
        self.send(listen::acknowledgement(&id_value, &mut watch)).await;
        self.listens.insert(id.clone());
        let (gateway, outbox) = (self.caller.gateway.clone(), self.outbox.clone());
        self.spawn(id, async move {
            loop {
                match listen::next(&gateway, &id_value, &mut watch).await {
                    listen::Next::Frame(frame) => {
                        if outbox.send(frame).await.is_err() {
                            return Value::Null;
                        }
                    }
                    listen::Next::End(last) => return last,
                }
            }
        });
    }

    fn notification(&mut self, method: &str, params: &Value) {
        if method == "notifications/initialized" {
            return self.hear_changes();
        }
        if method != "notifications/cancelled" {
            return;
        }
        let Some(id) = params.get("requestId").and_then(RequestId::from_value) else { return };
        if let Some(task) = self.in_flight.lock().expect("in-flight lock").remove(&id) {
            // Dropping the request's future cancels its upstream request too.
            task.abort();
            // A cancelled listen still ends with its result, so the client knows it is over.
            if self.listens.remove(&id) {
                let _ = self.outbox.try_send(listen::ended(&id.to_value()));
            }
        }
    }

    /// Relays what the session's standalone stream would carry over HTTP: the list changes
    /// of the instances this session reaches, and updates to the resources it subscribed
    /// to. Like that stream, it starts no instance and keeps none from being reaped.
    fn hear_changes(&mut self) {
        let Some(negotiated) = self.negotiated.clone().filter(|_| self.changes.is_none()) else { return };
        let (caller, outbox) = (self.caller.clone(), self.outbox.clone());
        let relay = tokio::spawn(async move {
            let mut watch = match legacy::changes(&caller, &negotiated).await {
                Ok(watch) => watch,
                Err(e) => return tracing::warn!("a stdio session hears no list changes: {e}"),
            };
            loop {
                let change = tokio::select! {
                    change = watch.changes.recv() => change,
                    _ = caller.gateway.closing() => None,
                };
                let Some(change) = change else { return };
                if outbox.send(change).await.is_err() {
                    return;
                }
            }
        });
        self.changes = Some(relay.abort_handle());
    }

    /// At the end of input, open listens end at once with the result a cancelled one gets:
    /// a listen never finishes on its own, so waiting `EOF_GRACE` for it would only hold
    /// the stream open, and a client still reading learns that it is over.
    async fn end_listens(&mut self) {
        for id in std::mem::take(&mut self.listens) {
            let running = self.in_flight.lock().expect("in-flight lock").remove(&id);
            if let Some(task) = running {
                task.abort();
                self.send(listen::ended(&id.to_value())).await;
            }
        }
    }

    /// Runs a request in its own task so that others are not held up behind it.
    fn spawn(&self, id: RequestId, reply: impl Future<Output = Value> + Send + 'static) {
        let (outbox, in_flight) = (self.outbox.clone(), self.in_flight.clone());
        let mut registry = self.in_flight.lock().expect("in-flight lock");
        let key = id.clone();
        // Boxed first: the request's future is KiBs, and spawning moves the task's future
        // several times; moved as a box, that is a pointer each time.
        let reply = Box::pin(reply);
        let task = self.tasks.spawn(async move {
            let frame = reply.await;
            in_flight.lock().expect("in-flight lock").remove(&key);
            if !frame.is_null() {
                let _ = outbox.send(frame).await;
            }
        });
        registry.insert(id, task.abort_handle());
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut writer: W, mut replies: mpsc::Receiver<Value>) {
    while let Some(frame) = replies.recv().await {
        if write_line(&mut writer, &frame).await.is_err() {
            return;
        }
        // Write everything already waiting before paying for a flush.
        while let Ok(frame) = replies.try_recv() {
            if write_line(&mut writer, &frame).await.is_err() {
                return;
            }
        }
        if writer.flush().await.is_err() {
            return;
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(writer: &mut W, frame: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(frame).expect("a JSON value serializes");
    line.push(b'\n');
    writer.write_all(&line).await
}
