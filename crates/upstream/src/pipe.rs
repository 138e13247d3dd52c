//! A stdio upstream's connection: one JSON-RPC message per line over the child's pipes,
//! the era probe and handshake over them, and request-id remapping.
//!
//! Callers' ids never reach the upstream: each request gets the next id of this
//! connection, so any number of callers can share one instance without collisions.
//! A request whose caller goes away (its future is dropped, or it times out) is
//! cancelled upstream with `notifications/cancelled`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::StreamExt;
use mcpx_protocol::dropped::Dropped;
use mcpx_protocol::message::{self, Message, RequestId};
use mcpx_protocol::{Era, RpcError, code, meta};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::oneshot;
use tokio_util::codec::FramedRead;

use crate::caller::{Ask, Caller, Listener};
use crate::changes::{Changes, TASK_STATUS, is_change};
use crate::error::{LostLine, UpstreamError};
use crate::handshake::{self, ServerFacts};
use crate::lines::{Edges, Line, Lines};
use crate::questions::{self, Serving};
use crate::spec::{StdioSpec, Timeouts};
use crate::stdio;

type Reply = Result<Value, UpstreamError>;

/// Change notifications kept for a watcher that is behind; older ones are dropped (a
/// watcher that missed a list change re-lists anyway).
const CHANGE_BACKLOG: usize = 64;

pub(crate) struct Inner {
    server: String,
    timeouts: Timeouts,
    pid: u32,
    pgid: rustix::process::Pid,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    child: tokio::sync::Mutex<Option<Child>>,
    pending: Mutex<HashMap<i64, Pending>>,
    /// Who hears about each request in flight, by request id. mcpx's progress token for
    /// request `id` is `mcpx-<id>`.
    listeners: Mutex<HashMap<i64, Listener>>,
    next_id: AtomicI64,
    alive: AtomicBool,
    /// Set once mcpx began stopping the instance, so its exit is not reported as a crash.
    stopping: AtomicBool,
    /// What the server says changed (list_changed, resources/updated), for whoever watches.
    pub(crate) changes: Changes,
    /// Whether mcpx has asked a stateless server for its changes (one listen per instance).
    listening: AtomicBool,
    /// Becomes true when the connection is gone (the process exited or was stopped).
    gone: tokio::sync::watch::Sender<bool>,
    /// How the process ended, once it has.
    exit: Mutex<Option<String>>,
    /// Whether a question was refused as ambiguous yet (logged once per instance).
    warned_ambiguous: AtomicBool,
}

/// A request waiting for its answer.
struct Pending {
    reply: oneshot::Sender<Reply>,
    /// A `subscriptions/listen`, which stays open for the instance's life and is never
    /// answered with a large result: not a candidate owner of a line lost for its length.
    listen: bool,
    /// Whom the request serves, and how its caller is asked: where the upstream's
    /// questions may go while it is in flight.
    serving: Serving,
}

impl Inner {
    /// Launches the server and makes the connection: probes the era (unless `era_hint`
    /// says which one this server spoke last time) and completes the handshake.
    pub(crate) async fn spawn(
        spec: &StdioSpec,
        era_hint: Option<Era>,
    ) -> Result<(Arc<Inner>, ServerFacts), UpstreamError> {
        let spawned = stdio::spawn(spec)?;
        let inner = Arc::new(Inner {
            server: spec.server.clone(),
            timeouts: spec.timeouts,
            pid: spawned.pgid.as_raw_pid() as u32,
            pgid: spawned.pgid,
            stdin: tokio::sync::Mutex::new(Some(spawned.stdin)),
            child: tokio::sync::Mutex::new(Some(spawned.child)),
            pending: Mutex::new(HashMap::new()),
            listeners: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            alive: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            changes: Changes::new(CHANGE_BACKLOG, true),
            listening: AtomicBool::new(false),
            gone: tokio::sync::watch::channel(false).0,
            exit: Mutex::new(None),
            warned_ambiguous: AtomicBool::new(false),
        });
        tokio::spawn(read_stdout(Arc::downgrade(&inner), spawned.stdout, spec.max_line_bytes));
        tokio::spawn(read_stderr(spec.server.clone(), spawned.stderr, spec.max_line_bytes));
        match inner.connect(era_hint).await {
            Ok(facts) => Ok((inner, facts)),
            Err(e) => {
                inner.shutdown().await;
                Err(e)
            }
        }
    }

    /// Makes the connection: which era does this upstream speak? As the stdio transport
    /// says, `server/discover` with the stateless envelope goes first. A discover result
    /// means stateless; any other answer, or none within the probe timeout, means handshake
    /// era, so mcpx sends `initialize`. A discover answer that arrives after the timeout
    /// but before the `initialize` answer still wins: a slow dual-era server that already
    /// took the modern path must not be forced back.
    async fn connect(self: &Arc<Self>, era_hint: Option<Era>) -> Result<ServerFacts, UpstreamError> {
        if era_hint == Some(Era::Legacy) {
            return self.initialize().await;
        }
        let probe_timeout = if era_hint == Some(Era::Modern) { self.timeouts.handshake } else { self.timeouts.probe };
        let envelope = json!({ "_meta": handshake::modern_envelope() });
        let mut discover = self.start("server/discover", envelope, None, None).await?;
        let answer = tokio::time::timeout(probe_timeout, &mut discover.reply).await;
        match answer {
            Ok(Ok(reply)) => {
                discover.done = true;
                match reply {
                    Ok(result) => match handshake::modern_facts(&result) {
                        Some(facts) => Ok(facts),
                        None => self.initialize().await,
                    },
                    // A recognised 2026 refusal means a 2026 server: never fall back to initialize.
                    Err(UpstreamError::Rpc(e)) if e.code == code::UNSUPPORTED_PROTOCOL_VERSION => {
                        if handshake::supported_modern(&e).is_none() {
                            return Err(UpstreamError::Handshake {
                                server: self.server.clone(),
                                reason: format!("the server speaks none of mcpx's 2026 revisions: {e}"),
                            });
                        }
                        let envelope = json!({ "_meta": handshake::modern_envelope() });
                        let again = self.request_within("server/discover", envelope, self.timeouts.handshake).await?;
                        handshake::modern_facts(&again).ok_or_else(|| UpstreamError::Handshake {
                            server: self.server.clone(),
                            reason: "server/discover answered without a revision mcpx speaks".into(),
                        })
                    }
                    Err(UpstreamError::Rpc(e)) => {
                        tracing::debug!(server = self.server, code = e.code, "discover refused; trying initialize");
                        self.initialize().await
                    }
                    Err(e) => Err(e),
                }
            }
            Ok(Err(_)) => Err(UpstreamError::Exited { server: self.server.clone(), status: None }),
            Err(_) => {
                tracing::debug!(
                    server = self.server,
                    "no answer to server/discover within {probe_timeout:?}; trying initialize"
                );
                let init = self.initialize();
                tokio::pin!(init);
                // The late discover answer first: a server that took the modern path answers
                // the probe and then refuses `initialize` (-32022), and both answers can be
                // ready at once; an unbiased select would pick the refusal half the time.
                tokio::select! {
                    biased;
                    Ok(Ok(late)) = &mut discover.reply => {
                        discover.done = true;
                        match handshake::modern_facts(&late) {
                            Some(facts) => Ok(facts),
                            None => init.await,
                        }
                    }
                    facts = &mut init => facts,
                }
            }
        }
    }

    async fn initialize(self: &Arc<Self>) -> Result<ServerFacts, UpstreamError> {
        let failed = |reason: String| UpstreamError::Handshake { server: self.server.clone(), reason };
        let result =
            match self.request_within("initialize", handshake::initialize_params(), self.timeouts.handshake).await {
                Ok(result) => result,
                Err(UpstreamError::Rpc(e)) if e.code == code::UNSUPPORTED_PROTOCOL_VERSION => {
                    return Err(failed(format!("the server speaks none of mcpx's revisions: {e}")));
                }
                Err(UpstreamError::Rpc(e)) => return Err(failed(format!("initialize was refused: {e}"))),
                Err(e) => return Err(e),
            };
        let facts = handshake::legacy_facts(&self.server, &result)?;
        self.notify("notifications/initialized", Value::Null).await?;
        Ok(facts)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Resolves once the connection is gone: the process exited, or was stopped.
    pub(crate) async fn ended(&self) {
        let mut gone = self.gone.subscribe();
        let _ = gone.wait_for(|g| *g).await;
    }

    /// Asks a stateless server for updates to `uris` on a listen of their own, open until
    /// the returned request is dropped (which cancels it).
    pub(crate) async fn listen_to_resources(
        self: &Arc<Self>,
        envelope: Value,
        uris: &[String],
    ) -> Result<Waiting, UpstreamError> {
        let mut params = serde_json::json!({ "notifications": { "resourceSubscriptions": uris } });
        params["_meta"] = envelope;
        self.start("subscriptions/listen", params, None, None).await
    }

    /// How the process ended, when it ended on its own rather than being stopped by mcpx:
    /// its exit status, if known. None while it runs.
    pub(crate) fn crash(&self) -> Option<String> {
        if self.is_alive() || self.stopping.load(Ordering::Acquire) {
            return None;
        }
        Some(self.exit.lock().expect("exit lock").clone().unwrap_or_else(|| "no exit status".into()))
    }

    /// False once the process has exited or its stdout closed.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Asks a stateless server for every kind of list change, once per instance: the
    /// listen stays open for the life of the connection and feeds `changes`. A
    /// handshake-era server sends its list changes unasked.
    pub(crate) fn listen_once(self: &Arc<Self>, envelope: Value) {
        if self.listening.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.clone();
        tokio::spawn(async move {
            let mut params = serde_json::json!({ "notifications": {
                "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
            }});
            params["_meta"] = envelope;
            if let Ok(mut waiting) = inner.start("subscriptions/listen", params, None, None).await {
                let _ = (&mut waiting.reply).await;
                waiting.done = true;
            }
        });
    }

    /// Sends a request and waits for its answer, relaying notifications about it to
    /// `listener`, the connection's request timeout at most.
    pub(crate) async fn call(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        caller: Option<Caller>,
        listener: Option<Listener>,
    ) -> Reply {
        let mut waiting = self.start(method, params, caller, listener).await?;
        self.wait(method, &mut waiting, self.timeouts.request).await
    }

    async fn request_within(self: &Arc<Self>, method: &str, params: Value, within: std::time::Duration) -> Reply {
        let mut waiting = self.start(method, params, None, None).await?;
        self.wait(method, &mut waiting, within).await
    }

    async fn wait(&self, method: &str, waiting: &mut Waiting, within: std::time::Duration) -> Reply {
        match tokio::time::timeout(within, &mut waiting.reply).await {
            Ok(Ok(reply)) => {
                waiting.done = true;
                reply
            }
            Ok(Err(_)) => Err(self.exited().await),
            Err(_) => Err(UpstreamError::Timeout { server: self.server.clone(), method: method.into(), after: within }),
        }
    }

    /// Writes a request (made for `caller`, when it serves one) and returns the handle its
    /// answer arrives on. Dropping the handle before the answer cancels the request upstream.
    async fn start(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        caller: Option<Caller>,
        listener: Option<Listener>,
    ) -> Result<Waiting, UpstreamError> {
        if !self.alive.load(Ordering::Acquire) {
            return Err(self.exited().await);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // A token the caller sent belongs to the caller's connection, not this one.
        if let Some(Value::Object(m)) = params.get_mut("_meta") {
            m.remove(meta::PROGRESS_TOKEN);
        }
        let serving = Serving { caller, ask: listener.as_ref().and_then(|l| l.ask.clone()) };
        if let Some(listener) = listener {
            if listener.progress_token.is_some() {
                meta::of_mut(&mut params).insert(meta::PROGRESS_TOKEN.into(), progress_token(id).into());
            }
            self.listeners.lock().expect("listeners lock").insert(id, listener);
        }
        let meter = serving.caller.as_ref().and_then(|c| c.meter.clone());
        let (tx, rx) = oneshot::channel();
        let pending = Pending { reply: tx, listen: method == "subscriptions/listen", serving };
        self.pending.lock().expect("pending lock").insert(id, pending);
        let waiting = Waiting { inner: self.clone(), id, reply: rx, done: false };
        let sent = self.write(&message::request(&RequestId::Number(id), method, params)).await?;
        if let Some(meter) = meter {
            meter.sent(sent);
        }
        Ok(waiting)
    }

    async fn notify(&self, method: &str, params: Value) -> Result<(), UpstreamError> {
        self.write(&message::notification(method, params)).await.map(drop)
    }

    /// Writes one frame as a line; returns its size without the newline.
    async fn write(&self, frame: &Value) -> Result<usize, UpstreamError> {
        let mut line = serde_json::to_vec(frame).expect("a JSON value always serializes");
        let size = line.len();
        line.push(b'\n');
        let written = match self.stdin.lock().await.as_mut() {
            Some(pipe) => pipe.write_all(&line).await.is_ok() && pipe.flush().await.is_ok(),
            None => false,
        };
        if !written {
            return Err(self.exited().await);
        }
        Ok(size)
    }

    /// The error for a connection found dead, with how the process ended: a write can
    /// fail a moment before the reader sees the end, so this waits for it (briefly).
    async fn exited(&self) -> UpstreamError {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), self.ended()).await;
        UpstreamError::Exited { server: self.server.clone(), status: self.exit.lock().expect("exit lock").clone() }
    }

    /// Marks the connection dead and fails every request still waiting on it.
    fn fail_all(&self, status: Option<String>) {
        self.alive.store(false, Ordering::Release);
        *self.exit.lock().expect("exit lock") = status.clone();
        self.gone.send_replace(true);
        let pending: Vec<_> = self.pending.lock().expect("pending lock").drain().collect();
        for (_, p) in pending {
            let _ = p.reply.send(Err(UpstreamError::Exited { server: self.server.clone(), status: status.clone() }));
        }
    }

    /// A line longer than `limit` was dropped as it arrived, so whatever it held is lost.
    /// Its edges usually still show whose it was: an answer fails its own request; a
    /// request of the server's is refused, so the server does not wait for an answer that
    /// will never come; a notification is only logged. When the edges show nothing, an
    /// answer may belong to any request in flight: rather than leave one of them waiting
    /// out `timeouts.request`, every one of them fails now with an error naming the limit
    /// (a later answer to any of them is then dropped as an answer to no request). Listens
    /// stay: they are never answered with a large result.
    fn lost_a_line(self: &Arc<Self>, limit: usize, edges: &Edges) {
        let server = &self.server;
        let lost: Vec<_> = match edges.read() {
            Some(Dropped::Response(id)) => {
                let own = match id {
                    RequestId::Number(n) => self.pending.lock().expect("pending lock").remove(&n),
                    RequestId::String(_) => None,
                };
                if own.is_none() {
                    tracing::warn!(server, ?id, "dropped an over-long answer to no request in flight");
                }
                own.into_iter().map(|p| (p, LostLine::Own)).collect()
            }
            Some(Dropped::Request(id)) => {
                tracing::warn!(
                    server,
                    ?id,
                    "refused a request from the upstream longer than limits.maxLineBytes ({limit} bytes)"
                );
                let e = RpcError::invalid_request(format!(
                    "message longer than mcpx's limits.maxLineBytes ({limit} bytes)"
                ));
                let inner = self.clone();
                tokio::spawn(async move { inner.write(&message::error_response(Some(&id.to_value()), &e)).await });
                Vec::new()
            }
            Some(Dropped::Unidentified) => Vec::new(),
            None => {
                let mut pending = self.pending.lock().expect("pending lock");
                let ids: Vec<i64> = pending.iter().filter(|(_, p)| !p.listen).map(|(id, _)| *id).collect();
                let in_flight = ids.len();
                if in_flight > 0 {
                    tracing::warn!(
                        server,
                        in_flight,
                        "a line over limits.maxLineBytes showed no id; the requests in flight fail"
                    );
                }
                ids.into_iter().filter_map(|id| pending.remove(&id)).map(|p| (p, LostLine::OneOf(in_flight))).collect()
            }
        };
        for (p, whose) in lost {
            let _ = p.reply.send(Err(UpstreamError::LineTooLong { server: server.clone(), limit, whose }));
        }
    }

    pub(crate) async fn shutdown(&self) {
        self.stopping.store(true, Ordering::Release);
        self.stdin.lock().await.take();
        let child = self.child.lock().await.take();
        if let Some(mut child) = child {
            stdio::stop(&mut child, self.pgid, self.timeouts.stop_grace).await;
        }
        self.fail_all(Some("stopped by mcpx".into()));
    }

    /// Hands an upstream progress notification to the caller whose request it is about,
    /// under the caller's own token. Progress for requests no longer in flight is dropped.
    fn relay_progress(&self, mut params: Value) {
        let Some(id) = params.get(meta::PROGRESS_TOKEN).and_then(Value::as_str).and_then(request_of_token) else {
            return;
        };
        let Some(listener) = self.listeners.lock().expect("listeners lock").get(&id).cloned() else { return };
        let Some(token) = listener.progress_token.clone() else { return };
        params[meta::PROGRESS_TOKEN] = token;
        (listener.notify)(message::notification("notifications/progress", params));
    }

    /// A log message carries no request: it goes to every request in flight on this
    /// connection whose caller asked for messages at its level.
    fn relay_log(&self, params: Value) {
        let level = params.get("level").and_then(Value::as_str).unwrap_or("info");
        let listeners: Vec<Listener> = self.listeners.lock().expect("listeners lock").values().cloned().collect();
        let frame = message::notification("notifications/message", params.clone());
        for listener in listeners.iter().filter(|l| l.wants_log(level)) {
            (listener.notify)(frame.clone());
        }
    }

    /// Answers a request the upstream sent to mcpx: `ping` at once; a question for the
    /// caller (sampling, elicitation, roots) put to the caller it is for (see
    /// `questions`), or refused with the reason, so the upstream never waits forever.
    fn answer(self: &Arc<Self>, id: RequestId, method: String, mut params: Value) {
        let asker = if method == "ping" { None } else { Some(self.whom(&method, &mut params)) };
        let inner = self.clone();
        tokio::spawn(async move {
            let outcome = match asker {
                None => Ok(json!({})),
                Some(Ok(ask)) => ask(method.clone(), params).await,
                Some(Err(refused)) => Err(refused),
            };
            let reply = match outcome {
                Ok(result) => message::result_response(&id.to_value(), result),
                Err(e) => message::error_response(Some(&id.to_value()), &e),
            };
            let _ = inner.write(&reply).await;
        });
    }

    /// Whom a question is for, among the requests in flight on this instance.
    fn whom(&self, method: &str, params: &mut Value) -> Result<Ask, RpcError> {
        let echoed = questions::take_call_id(params);
        let pending = self.pending.lock().expect("pending lock");
        let mut in_flight: Vec<(i64, &Serving)> = pending.iter().map(|(id, p)| (*id, &p.serving)).collect();
        in_flight.sort_unstable_by_key(|(id, _)| *id);
        let in_flight: Vec<&Serving> = in_flight.into_iter().map(|(_, s)| s).collect();
        questions::asker(&self.server, method, echoed.as_deref(), &in_flight, &self.warned_ambiguous)
    }
}

/// A request in flight. Dropped unanswered, it is cancelled upstream.
pub(crate) struct Waiting {
    inner: Arc<Inner>,
    id: i64,
    reply: oneshot::Receiver<Reply>,
    done: bool,
}

fn progress_token(id: i64) -> String {
    format!("mcpx-{id}")
}

fn request_of_token(token: &str) -> Option<i64> {
    token.strip_prefix("mcpx-")?.parse().ok()
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.inner.listeners.lock().expect("listeners lock").remove(&self.id);
        if self.done || self.inner.pending.lock().expect("pending lock").remove(&self.id).is_none() {
            return;
        }
        let inner = self.inner.clone();
        let params = json!({ "requestId": self.id, "reason": "cancelled by mcpx: the caller went away or the request timed out" });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = inner.notify("notifications/cancelled", params).await;
            });
        }
    }
}

async fn read_stdout(inner: Weak<Inner>, stdout: tokio::process::ChildStdout, max_line: usize) {
    let mut lines = FramedRead::new(stdout, Lines::new(max_line));
    let server = match inner.upgrade() {
        Some(i) => i.server.clone(),
        None => return,
    };
    while let Some(line) = lines.next().await {
        let Some(inner) = inner.upgrade() else { return };
        let line = match line {
            Ok(Line::Text(line)) => line,
            Ok(Line::TooLong(edges)) => {
                tracing::warn!(
                    server,
                    "dropped a line from the upstream longer than limits.maxLineBytes ({max_line} bytes)"
                );
                inner.lost_a_line(max_line, &edges);
                continue;
            }
            Ok(bad) => {
                tracing::warn!(server, "skipping a line from the upstream: {bad:?}");
                continue;
            }
            Err(e) => {
                tracing::warn!(server, "reading the upstream's stdout failed: {e}");
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let frame = match Message::parse(line.as_bytes()).and_then(Message::classify) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::warn!(server, "the upstream wrote something that is not JSON-RPC: {}", e.error.message);
                continue;
            }
        };
        match frame {
            Message::Response { id: RequestId::Number(id), outcome } => {
                let pending = inner.pending.lock().expect("pending lock").remove(&id);
                if let Some(pending) = pending {
                    if let Some(meter) = pending.serving.caller.as_ref().and_then(|c| c.meter.as_ref()) {
                        meter.received(line.len());
                    }
                    let _ = pending.reply.send(outcome.map_err(UpstreamError::Rpc));
                }
            }
            Message::Response { id, .. } => tracing::warn!(server, ?id, "a response to no request of ours"),
            Message::Request { id, method, params } => inner.answer(id, method, params),
            Message::Notification { method, params } if method == "notifications/progress" => {
                inner.relay_progress(params)
            }
            Message::Notification { method, params } if method == "notifications/message" => inner.relay_log(params),
            Message::Notification { method, params } if is_change(&method) => {
                inner.changes.announce(&method, params);
            }
            Message::Notification { method, params } if method == TASK_STATUS => inner.changes.announce_status(params),
            Message::Notification { method, .. } => tracing::debug!(server, method, "upstream notification"),
        }
    }
    if let Some(inner) = inner.upgrade() {
        let status = exit_status(&inner).await;
        if inner.stopping.load(Ordering::Acquire) {
            tracing::debug!(server, pid = inner.pid, "upstream stopped");
        } else {
            tracing::warn!(
                server,
                pid = inner.pid,
                "upstream exited unexpectedly; calls in flight fail, the next call starts a fresh instance"
            );
        }
        inner.fail_all(status);
    }
}

/// How the process ended, once its stdout closed. The kernel may close the pipe a moment
/// before the exit can be collected, so this waits that moment (at most 200 ms); a
/// process that closed its stdout and lives on has no status yet.
async fn exit_status(inner: &Inner) -> Option<String> {
    for _ in 0..20 {
        match inner.child.try_lock() {
            Ok(mut child) => match child.as_mut().map(|c| c.try_wait()) {
                Some(Ok(Some(status))) => return Some(status.to_string()),
                Some(Ok(None)) => {}
                _ => return None,
            },
            // Being stopped by mcpx, which reports that itself.
            Err(_) => return None,
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    None
}

async fn read_stderr(server: String, stderr: tokio::process::ChildStderr, max_line: usize) {
    // Drained to the end whatever it holds: a server must never block on its stderr.
    let mut lines = FramedRead::new(stderr, Lines::new(max_line));
    while let Some(Ok(line)) = lines.next().await {
        if let Line::Text(line) = line {
            tracing::debug!(server, "stderr: {line}");
        }
    }
}
