//! `--http ADDR`: the same server over Streamable HTTP at `/mcp`, for tests and benchmarks
//! that need an HTTP upstream.
//!
//! Every message goes through the same [`Server`] a stdin line does, so the tools and the
//! era rules are the stdio ones; this module only decides which server a message goes to
//! and carries the answer back. A legacy `initialize` outside a session opens one, with a
//! server of its own, named by the `Mcp-Session-Id` of the reply (`DELETE` ends it);
//! everything else outside a session, 2026-07-28 requests first of all, goes to one shared
//! server that never opens a session, so it answers legacy requests "not initialized".
//!
//! Each request is answered on its own response, as JSON. Requests on different
//! connections may reuse ids, so each one reaches its server under an id minted here and
//! gets its own back. What a server sends that answers no request (notifications, its own
//! requests) has nowhere to go, since there is no event stream, and is dropped. It must
//! never hold a lock across an await, and it does not check the `MCP-*` headers: fakemcp
//! is the upstream in these tests, not the thing under test.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming as Body};
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::era::Era;
use crate::instance::Instance;
use crate::server::{Behaviour, Server};
use crate::wire::{self, Incoming, Output};

/// The one path MCP is served on.
const PATH: &str = "/mcp";
const SESSION_HEADER: &str = "mcp-session-id";
/// Larger request bodies get 413 (the stdio side has no limit but memory).
const MAX_BODY_BYTES: usize = 16 << 20;

type Reply = Response<Full<Bytes>>;

/// Serves `/mcp` on `addr` until the process is signalled. Writes the endpoint's URL as
/// one line on stdout once it listens (`--http 127.0.0.1:0` takes a free port).
pub fn serve(addr: SocketAddr, behaviour: Behaviour, instance: Arc<Instance>, fixture: bool) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_io().build()?;
    runtime.block_on(async move {
        let listener = TcpListener::bind(addr).await?;
        let url = format!("http://{}{PATH}", listener.local_addr()?);
        eprintln!("fakemcp {}: serving {url}", instance.id);
        {
            use std::io::Write;
            let mut stdout = io::stdout().lock();
            writeln!(stdout, "{url}")?;
            stdout.flush()?;
        }
        let front = Arc::new(Front::new(behaviour, instance, fixture));
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                // Out of descriptors and the like: the next accept may work again.
                Err(e) => {
                    eprintln!("fakemcp: accepting a connection failed: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let front = Arc::clone(&front);
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let front = Arc::clone(&front);
                    async move { Ok::<_, std::convert::Infallible>(front.answer(request).await) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    })
}

/// The servers behind the endpoint, and the requests waiting for their answers.
struct Front {
    behaviour: Behaviour,
    instance: Arc<Instance>,
    /// Whether each server also serves the conformance fixture (`--fixture conformance`).
    fixture: bool,
    /// Where every server's output goes: to [`Waiting::deliver`].
    out: Output,
    waiting: Arc<Waiting>,
    /// Everything outside a session.
    stateless: Arc<Mutex<Server>>,
    /// Legacy sessions by `Mcp-Session-Id`.
    sessions: Mutex<HashMap<String, Arc<Mutex<Server>>>>,
}

/// Requests sent to a server and not answered yet, by the id minted for them.
#[derive(Default)]
struct Waiting {
    next: AtomicU64,
    replies: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
}

impl Waiting {
    /// Mints an id for one request; its answer arrives on the receiver. The ticket
    /// forgets the request when dropped (answered, or the client went away).
    fn register(self: &Arc<Self>) -> (Ticket, oneshot::Receiver<Value>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (sender, receiver) = oneshot::channel();
        lock(&self.replies).insert(id, sender);
        (Ticket { id, waiting: Arc::clone(self) }, receiver)
    }

    /// A message a server sent: the answer to a waiting request, or dropped.
    fn deliver(&self, message: Value) {
        let answers = message.get("method").is_none();
        let Some(id) = message.get("id").and_then(Value::as_u64).filter(|_| answers) else {
            return;
        };
        if let Some(sender) = lock(&self.replies).remove(&id) {
            let _ = sender.send(message);
        }
    }
}

struct Ticket {
    id: u64,
    waiting: Arc<Waiting>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        lock(&self.waiting.replies).remove(&self.id);
    }
}

impl Front {
    fn new(behaviour: Behaviour, instance: Arc<Instance>, fixture: bool) -> Front {
        let waiting = Arc::new(Waiting::default());
        let out = Output::routed({
            let waiting = Arc::clone(&waiting);
            move |message| waiting.deliver(message)
        });
        let fixture_of = |out: &Output| fixture.then(|| conformance(&instance, out)).flatten();
        let stateless =
            Arc::new(Mutex::new(Server::new(behaviour, Arc::clone(&instance), out.clone(), fixture_of(&out))));
        Front { behaviour, instance, fixture, out, waiting, stateless, sessions: Mutex::default() }
    }

    async fn answer(&self, request: Request<Body>) -> Reply {
        if request.uri().path() != PATH {
            return status(StatusCode::NOT_FOUND);
        }
        let session = request.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let trace = trace_headers(request.headers());
        match *request.method() {
            Method::POST => {}
            Method::DELETE => return self.end_session(session),
            // No event streams here: GET is not offered.
            _ => {
                let mut reply = status(StatusCode::METHOD_NOT_ALLOWED);
                reply.headers_mut().insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
                return reply;
            }
        }
        let body = match Limited::new(request.into_body(), MAX_BODY_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => return status(StatusCode::PAYLOAD_TOO_LARGE),
        };
        let incoming = match wire::parse(&body) {
            Ok(incoming) => incoming,
            Err(rejected) => {
                return json_reply(StatusCode::BAD_REQUEST, &wire::response(&rejected.id, Err(rejected.error)));
            }
        };
        let server = match &session {
            Some(name) => match lock(&self.sessions).get(name) {
                Some(server) => Arc::clone(server),
                None => return status(StatusCode::NOT_FOUND),
            },
            None => Arc::clone(&self.stateless),
        };
        let Incoming::Request { id, method, mut params } = incoming else {
            lock(&server).handle(incoming);
            return status(StatusCode::ACCEPTED);
        };
        if let Some(trace) = trace {
            with_trace_headers(&mut params, trace);
        }
        let opens_session =
            session.is_none() && method == "initialize" && self.behaviour.era_mode.era_of(&params) == Era::Legacy;
        let server = if opens_session { Arc::new(Mutex::new(self.new_server())) } else { server };

        let (ticket, answer) = self.waiting.register();
        lock(&server).handle(Incoming::Request { id: json!(ticket.id), method, params });
        // A server playing dead (--silent-unknown) never answers: neither does this.
        let Ok(mut message) = answer.await else {
            return status(StatusCode::INTERNAL_SERVER_ERROR);
        };
        drop(ticket);
        message["id"] = id;
        let mut reply = json_reply(StatusCode::OK, &message);
        if opens_session && message.get("result").is_some() {
            let name = self.mint_session_id();
            reply
                .headers_mut()
                .insert(SESSION_HEADER, HeaderValue::from_str(&name).expect("a hex session id is a valid header"));
            lock(&self.sessions).insert(name, server);
        }
        reply
    }

    fn end_session(&self, session: Option<String>) -> Reply {
        let Some(name) = session else {
            return status(StatusCode::BAD_REQUEST);
        };
        match lock(&self.sessions).remove(&name) {
            Some(_) => status(StatusCode::OK),
            None => status(StatusCode::NOT_FOUND),
        }
    }

    fn new_server(&self) -> Server {
        let fixture = self.fixture.then(|| conformance(&self.instance, &self.out)).flatten();
        Server::new(self.behaviour, Arc::clone(&self.instance), self.out.clone(), fixture)
    }

    /// 32 hex characters; unguessable enough for a test server, and never reused.
    fn mint_session_id(&self) -> String {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            // Unique within this process is all a session name needs here.
            bytes[..8].copy_from_slice(&self.waiting.next.fetch_add(1, Ordering::Relaxed).to_be_bytes());
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Where a request's W3C trace context headers are shown to the `meta` tool: a key of
/// fakemcp's own in `params._meta`, so a test sees what reached fakemcp in headers too.
pub const TRACE_HEADERS_META: &str = "fakemcp.dev/traceHeaders";

/// The `traceparent` and `tracestate` headers of a request, when it has either.
fn trace_headers(headers: &hyper::HeaderMap) -> Option<Value> {
    let found: serde_json::Map<String, Value> = ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|name| Some((name.to_owned(), Value::from(headers.get(name)?.to_str().ok()?))))
        .collect();
    (!found.is_empty()).then_some(Value::Object(found))
}

fn with_trace_headers(params: &mut Value, trace: Value) {
    if !params.is_object() {
        return;
    }
    let meta = params.as_object_mut().expect("an object").entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(TRACE_HEADERS_META.to_owned(), trace);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn status(code: StatusCode) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::new()));
    *reply.status_mut() = code;
    reply
}

fn json_reply(code: StatusCode, message: &Value) -> Reply {
    let body = serde_json::to_vec(message).expect("a serde_json::Value always serializes");
    let mut reply = Response::new(Full::new(Bytes::from(body)));
    *reply.status_mut() = code;
    reply.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// The conformance fixture for one server (each session's tasks are its own).
fn conformance(instance: &Arc<Instance>, out: &Output) -> Option<Arc<crate::conformance::Fixture>> {
    match crate::conformance::Fixture::new(Arc::clone(instance), out.clone()) {
        Ok(fixture) => Some(Arc::new(fixture)),
        Err(e) => {
            eprintln!("fakemcp: cannot draw a random requestState key: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reaches_the_request_it_answers_and_nothing_else_does() {
        let waiting = Arc::new(Waiting::default());
        let (first, mut first_answer) = waiting.register();
        let (second, mut second_answer) = waiting.register();
        waiting.deliver(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        waiting.deliver(json!({"jsonrpc": "2.0", "id": second.id, "method": "roots/list"}));
        waiting.deliver(json!({"jsonrpc": "2.0", "id": second.id, "result": {"n": 2}}));
        assert!(first_answer.try_recv().is_err(), "the first request is still waiting");
        assert_eq!(second_answer.try_recv().unwrap()["result"]["n"], 2);
        drop(first);
        assert!(lock(&waiting.replies).is_empty(), "a dropped ticket forgets its request");
        drop(second);
    }
}
