//! The daemon's accept loop, for TCP and the unix socket alike: how many connections may
//! be open, how long a caller may take to send a request, and what a flood of half-sent
//! requests can cost (a slot, never the daemon).
//!
//! - `http.maxConnections` bounds the connections open at once (both listeners together),
//!   under what the open-file limit leaves ([`fd_budget`]). At the limit a new connection
//!   closes the **oldest one that has no request in flight** (still sending its headers, or
//!   idle between requests) and is served: a flood of slow connections keeps evicting
//!   itself, while a caller that sends its request at once gets through. When every
//!   connection has a request in flight, the new one is answered 503 and closed. Accepting
//!   never stops: a caller left in the kernel's backlog would wait for nothing.
//! - `http.headerReadTimeout` closes a connection that does not finish its request's
//!   headers in time, or sits idle that long between requests.
//! - `http.bodyReadTimeout` closes a connection whose request body has not arrived that
//!   long after its headers, without an answer (the handler may be mid-read; nothing it
//!   could say would be read by a client that stopped sending).
//! - A request answered before its body was read whole (refused at admission, unrouted,
//!   over `http.maxBodyBytes`) is answered at once, and the rest of its body is read out
//!   and dropped behind the answer, up to [`READ_OUT`] and within `http.bodyReadTimeout`;
//!   its connection then serves the next request. A body announced bigger, or one its
//!   client holds back until `100 Continue` (nobody should ask for it), is not read: the
//!   answer says `Connection: close`. (A chunked body that turns out bigger, or stalls,
//!   closes the connection once it does.) Without this the connection closed after the
//!   answer without saying so, and a client's next request (an SDK retrying with the token
//!   it just got) went out on it and was lost; or the unread bytes reset the connection and
//!   the answer was lost with them. Once answered, the request no longer counts as in
//!   flight, so a caller without a token who announces a body and never sends it holds an
//!   evictable place, as a slow header does. One place per connection suffices for the
//!   body: HTTP/1 serves one request at a time.
//!
//! Each request carries `ConnectInfo<Peer>`, as the handlers and `admission` expect. A
//! relayed stdio stream (`GET /v1/stdio`, socket only) stops counting once upgraded.
//! This module never decides who may do what: `admission` does.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use mcpx_gateway::Gateway;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, UnixListener};
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::socket::Peer;

/// File descriptors kept for everything but connections: the listeners, the state dir's
/// files, the runtime, HTTP upstreams.
const RESERVED_FDS: u64 = 64;
/// Pipes the daemon holds per live stdio instance (stdin, stdout, stderr).
const FDS_PER_INSTANCE: u64 = 3;
/// How long a connection refused at the limit is given to take its 503.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);
/// How long to wait before accepting again after the system refused an accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// The most of a body left unread by its answer that is read out (and dropped) to keep
/// its connection; past it, the connection closes.
const READ_OUT: u64 = 1024 * 1024;

/// A listener the daemon serves.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

type Stream = Either<tokio::net::TcpStream, tokio::net::UnixStream>;

/// The address a TCP caller connected to (the daemon's side of the connection), attached
/// to each of its requests beside `ConnectInfo<Peer>`: what "the address mcpx listens on"
/// means when it listens on all of them.
#[derive(Clone, Copy, Debug)]
pub struct LocalAddr(pub std::net::SocketAddr);

impl Listener {
    async fn accept(&self) -> std::io::Result<(Stream, Peer, Option<LocalAddr>)> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, addr)| {
                // A streamed answer goes out in several writes (its head, then each event or
                // line). With Nagle's algorithm on, each write after the first waits for the
                // caller's ACK of the one before, which the caller delays (40 ms on Linux) as
                // it has nothing to send: a relayed call took 44 ms instead of half a
                // millisecond. A failure only leaves Nagle on.
                let _ = s.set_nodelay(true);
                let local = s.local_addr().ok().map(LocalAddr);
                (Either::Left(s), Peer::Tcp(addr), local)
            }),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| {
                let peer = Peer::of_unix(&s);
                (Either::Right(s), peer, None)
            }),
        }
    }
}

/// Raises the soft open-file limit to the hard one and returns how many connections fit
/// beside `max_instances` stdio upstreams: the cap `http.maxConnections` is clamped to.
/// Logs when it clamps, naming the limit to raise.
pub fn fd_budget(max_connections: usize, max_instances: usize) -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    // No limit (None) is RLIM_INFINITY, the largest count.
    let (mut soft, hard) = (limit.current.unwrap_or(u64::MAX), limit.maximum.unwrap_or(u64::MAX));
    if soft < hard && setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum }).is_ok() {
        soft = hard;
    }
    let budget = connections_within(soft, max_instances);
    if budget < max_connections {
        tracing::warn!(
            "the open-file limit is {} and up to {max_instances} upstream instances need {} of them: \
             http.maxConnections ({max_connections}) is clamped to {budget}; raise the hard limit (ulimit -Hn) to allow more",
            soft,
            RESERVED_FDS + FDS_PER_INSTANCE * max_instances as u64,
        );
    }
    budget.min(max_connections)
}

/// Connections that fit in `open_files` beside the reserve and the instances' pipes (at
/// least a few, so the daemon stays reachable).
fn connections_within(open_files: u64, max_instances: usize) -> usize {
    let reserved = RESERVED_FDS + FDS_PER_INSTANCE * max_instances as u64;
    usize::try_from(open_files.saturating_sub(reserved)).unwrap_or(usize::MAX).max(8)
}

/// The connections open on all listeners, oldest first.
pub struct Connections {
    /// The most that fit in the open-file limit (`fd_budget`); `http.maxConnections`,
    /// read per accept, may ask for fewer.
    budget: usize,
    open: Mutex<BTreeMap<u64, Slot>>,
    next: AtomicU64,
}

struct Slot {
    in_flight: Arc<AtomicUsize>,
    close: CancellationToken,
}

/// One open connection's place in `Connections`; dropping it frees the place.
struct Open {
    id: u64,
    in_flight: Arc<AtomicUsize>,
    close: CancellationToken,
    connections: Arc<Connections>,
}

impl Connections {
    pub fn new(budget: usize) -> Arc<Connections> {
        Arc::new(Connections { budget, open: Mutex::new(BTreeMap::new()), next: AtomicU64::new(0) })
    }

    /// A place for a new connection, making room by closing the oldest connection with no
    /// request in flight; `None` when every one has a request in flight.
    fn admit(self: &Arc<Self>, max: usize) -> Option<Open> {
        let mut open = self.open.lock().expect("connections lock");
        while open.len() >= max.min(self.budget) {
            let idle = open.iter().find(|(_, slot)| slot.in_flight.load(Ordering::Acquire) == 0).map(|(id, _)| *id)?;
            if let Some(slot) = open.remove(&idle) {
                slot.close.cancel();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Slot { in_flight: Arc::default(), close: CancellationToken::new() };
        let place =
            Open { id, in_flight: slot.in_flight.clone(), close: slot.close.clone(), connections: self.clone() };
        open.insert(id, slot);
        Some(place)
    }

    /// How many connections are open now.
    pub fn count(&self) -> usize {
        self.open.lock().expect("connections lock").len()
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.connections.open.lock().expect("connections lock").remove(&self.id);
    }
}

/// Serves `app` on `listener` until `stop` is cancelled, then closes the listener (a
/// client connecting meanwhile is refused at once, not left in the backlog), lets each
/// connection finish the request it is serving and waits for them all.
pub async fn serve(
    listener: Listener,
    app: Router,
    gateway: Arc<Gateway>,
    connections: Arc<Connections>,
    stop: CancellationToken,
) {
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.cancelled() => break,
        };
        let (stream, peer, local) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, say: the connections that hold them end in time.
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let http = gateway.settings().config().http.clone();
        let Some(place) = connections.admit(http.max_connections) else {
            tracker.spawn(refuse(stream));
            continue;
        };
        let service = PerConnection {
            app: TowerToHyperService::new(app.clone()),
            peer,
            local,
            body_timeout: http.body_read_timeout,
            in_flight: place.in_flight.clone(),
            close: place.close.clone(),
            unread: Arc::default(),
        };
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(http.header_read_timeout);
        let stop = stop.clone();
        tracker.spawn(async move {
            // Built here, not captured: a captured connection would be held twice in the
            // task (the capture, and the pinned copy), the first of them dead weight for as
            // long as the connection lives.
            let connection = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            let mut connection = std::pin::pin!(connection);
            let mut stopping = false;
            loop {
                tokio::select! {
                    _ = connection.as_mut() => break,
                    // Evicted, or its body stalled: closing is the answer.
                    _ = place.close.cancelled() => break,
                    _ = stop.cancelled(), if !stopping => {
                        stopping = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(place);
        });
    }
    drop(listener);
    tracker.close();
    tracker.wait().await;
}

/// At the limit with every connection busy: 503, then close, without reading anything.
async fn refuse(mut stream: Stream) {
    const ANSWER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 57\r\nconnection: close\r\n\r\nevery connection allowed by http.maxConnections is busy\r\n";
    let _ = tokio::time::timeout(REFUSAL_WRITE, async {
        let _ = stream.write_all(ANSWER).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// The service one connection runs: the router, with the connection's peer attached to
/// each request, its body on a deadline and read out if its answer left it unread, and
/// the request counted while in flight.
#[derive(Clone)]
struct PerConnection {
    app: TowerToHyperService<Router>,
    peer: Peer,
    local: Option<LocalAddr>,
    body_timeout: Duration,
    in_flight: Arc<AtomicUsize>,
    close: CancellationToken,
    /// The body of the request being served, when it was dropped before its end.
    unread: Unread,
}

type Unread = Arc<Mutex<Option<Incoming>>>;

impl Service<Request<Incoming>> for PerConnection {
    type Response = Response<Counted>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Counted>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let busy = InFlight::start(&self.in_flight);
        let deadline = tokio::time::Instant::now() + self.body_timeout;
        // A client waiting for `100 Continue` sends no body unless asked: reading one out
        // would ask for a body nobody reads.
        let awaits_continue = request.headers().get(hyper::header::EXPECT).is_some();
        let (close, unread) = (self.close.clone(), self.unread.clone());
        let mut request = request
            .map(|body| Body::new(Timed { body: Some(body), deadline, sleep: None, close, unread, ended: false }));
        request.extensions_mut().insert(ConnectInfo(self.peer.clone()));
        if let Some(local) = self.local {
            request.extensions_mut().insert(local);
        }
        let answer = self.app.call(request);
        let (close, unread) = (self.close.clone(), self.unread.clone());
        Box::pin(async move {
            let mut response = answer.await?;
            let left = unread.lock().expect("unread body lock").take();
            if let Some(body) = left {
                if awaits_continue || body.size_hint().lower() > READ_OUT {
                    response
                        .headers_mut()
                        .insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
                } else {
                    // hyper goes on reading the body for as long as someone takes it,
                    // and keeps the connection once it is read whole.
                    tokio::spawn(read_out(body, deadline));
                }
            }
            if close.is_cancelled() {
                // Its body timed out (or the connection was evicted): the handler's answer
                // is about a request that never arrived whole. The connection closes
                // without it.
                std::future::pending::<()>().await;
            }
            Ok(response.map(|body| Counted { body, _busy: busy }))
        })
    }
}

/// Reads `body` to its end and drops it, as long as that is at most [`READ_OUT`] bytes and
/// it arrives by `deadline`. A body that stops short leaves its connection to close.
async fn read_out(mut body: Incoming, deadline: tokio::time::Instant) {
    let mut read = 0u64;
    let _ = tokio::time::timeout_at(deadline, async {
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |data| data.len() as u64);
            if read > READ_OUT {
                return;
            }
        }
    })
    .await;
}

/// A request counted as in flight from its headers until its response is written (or
/// the connection is gone).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn start(count: &Arc<AtomicUsize>) -> InFlight {
        count.fetch_add(1, Ordering::AcqRel);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted until it is written whole.
pub struct Counted {
    body: Body,
    _busy: InFlight,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must arrive by `deadline`; past it the connection is closed.
/// Dropped before its end, it goes back to its connection (`unread`) to be read out.
struct Timed {
    /// Taken only when dropped.
    body: Option<Incoming>,
    deadline: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    close: CancellationToken,
    unread: Unread,
    /// Read to its end, or failed: nothing is left to read out.
    ended: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within http.bodyReadTimeout")]
struct BodyTimedOut;

impl hyper::body::Body for Timed {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let Some(body) = this.body.as_mut() else { return Poll::Ready(None) };
        if let Poll::Ready(frame) = Pin::new(body).poll_frame(cx) {
            this.ended |= !matches!(frame, Some(Ok(_)));
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.as_mut().poll(cx).is_ready() {
            this.ended = true;
            this.close.cancel();
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map(Incoming::size_hint).unwrap_or_default()
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        if let Some(body) = self.body.take().filter(|body| !self.ended && !body.is_end_stream()) {
            *self.unread.lock().expect("unread body lock") = Some(body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idle(connections: &Arc<Connections>) -> Open {
        connections.admit(usize::MAX).expect("room")
    }

    #[test]
    fn at_the_limit_the_oldest_idle_connection_makes_room() {
        let connections = Connections::new(3);
        let (a, b, c) = (idle(&connections), idle(&connections), idle(&connections));
        let _busy_a = InFlight::start(&a.in_flight);
        let d = connections.admit(10).expect("b has no request in flight: it makes room");
        assert!(!a.close.is_cancelled() && b.close.is_cancelled() && !c.close.is_cancelled());
        assert_eq!(connections.count(), 3);
        let _busy_c = InFlight::start(&c.in_flight);
        let _busy_d = InFlight::start(&d.in_flight);
        assert!(connections.admit(10).is_none(), "every connection is busy: the new one is refused");
        drop(b);
        assert_eq!(connections.count(), 3, "an evicted connection's place is already free");
    }

    #[tokio::test]
    async fn an_accepted_tcp_connection_sends_each_write_at_once() {
        let listener = Listener::Tcp(TcpListener::bind("127.0.0.1:0").await.expect("bind"));
        let Listener::Tcp(tcp) = &listener else { unreachable!() };
        let addr = tcp.local_addr().expect("address");
        let _caller = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (stream, _, _) = listener.accept().await.expect("accept");
        let Either::Left(tcp) = stream else { panic!("a TCP listener accepts TCP") };
        assert!(tcp.nodelay().expect("read TCP_NODELAY"), "Nagle's algorithm would hold back a streamed answer");
    }

    #[test]
    fn the_hot_setting_may_ask_for_fewer_than_the_budget() {
        let connections = Connections::new(100);
        let first = idle(&connections);
        let _second = connections.admit(1).expect("room made");
        assert!(first.close.is_cancelled());
    }

    #[test]
    fn connections_fit_beside_the_instances_pipes() {
        assert_eq!(connections_within(1024, 256), 1024 - 64 - 768);
        assert_eq!(connections_within(1_048_576, 256), 1_048_576 - 64 - 768);
        assert_eq!(connections_within(100, 256), 8, "a few, whatever the limit");
    }
}
