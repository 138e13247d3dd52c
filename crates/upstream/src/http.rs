//! One HTTP upstream: the client half of Streamable HTTP, in the era the server answered
//! the probe in.
//!
//! Probing follows the spec: a modern request (`server/discover`) first; a result, or a
//! 4xx whose body is a recognised 2026 error, means stateless; any other answer means the
//! handshake era, so mcpx sends `initialize` and keeps the session it mints (and starts a
//! new one when the server forgets it: 404). Replies come as JSON or as an event stream,
//! whose notifications (progress, log messages) go to the request's listener.
//! Only the headers configured for the server are sent, plus the bearer mcpx holds for it
//! (OAuth, from the authorizer in its spec): a caller's credentials never are. A 401 or a
//! 403 `insufficient_scope` goes to the authorizer, and the request is sent once more at
//! most, with a token it got without a person; otherwise it fails with `LoginNeeded`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use http_body_util::BodyExt;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, Request, StatusCode, Uri};
use mcpx_protocol::message::{self, Message, RequestId};
use std::collections::HashMap;

use mcpx_protocol::param_headers::{self, ParamHeader};
use mcpx_protocol::{Era, Revision, RpcError, code, header, meta};
use serde_json::{Value, json};

use crate::caller::{Ask, Caller, Listener, Meter};
use crate::changes::{Changes, TASK_STATUS, is_change};
use crate::client::{self, Body, Client, Response};
use crate::error::UpstreamError;
use crate::handshake::{self, ServerFacts};
use crate::questions::{self, Serving};
use crate::spec::{Authorization, HttpSpec};

pub(crate) struct HttpConn {
    server: String,
    url: String,
    /// `url`, parsed once: each request would parse the text again.
    endpoint: Uri,
    client: Client,
    /// The headers configured for the server (and the credentials its URL carried).
    headers: HeaderMap,
    era: Era,
    revision: Revision,
    /// The handshake-era session the server minted, if it did.
    session: tokio::sync::Mutex<Option<String>>,
    next_id: AtomicI64,
    /// Each listed tool's arguments mirrored into `Mcp-Param-*` headers (2026 only); `None`
    /// until the tools were first listed.
    param_headers: std::sync::Mutex<Option<HashMap<String, Vec<ParamHeader>>>>,
    /// Requests in flight made for a caller, by id: whom each serves and how its caller is
    /// asked. A question on the session's standalone stream names no request of ours, so
    /// it goes where `questions` says among them.
    serving: std::sync::Mutex<std::collections::BTreeMap<i64, Serving>>,
    /// Whether a question was refused as ambiguous yet (logged once per connection).
    warned_ambiguous: AtomicBool,
    /// What the server says changed, from the session's standalone stream.
    pub(crate) changes: Changes,
    /// Longest event-stream line accepted: a server cannot make mcpx buffer without bound.
    max_line: usize,
    /// The listen that feeds `changes` from a 2026 server, once something watches.
    listening: tokio::sync::Mutex<Option<Listening>>,
    /// Our listens waiting for the server's acknowledgement, by request id.
    acks: std::sync::Mutex<HashMap<i64, tokio::sync::oneshot::Sender<()>>>,
    /// Where the bearer comes from, when mcpx logs in to this server.
    auth: Option<Authorization>,
    /// The bearer the last POST carried: the session's GET and DELETE carry it too.
    bearer: std::sync::Mutex<Option<String>>,
}

/// A `subscriptions/listen` request kept open (and opened again when the server ends it)
/// until dropped.
pub(crate) struct Listening(tokio::task::JoinHandle<()>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long a 2026 server's listen that ended waits before it is opened again.
const RELISTEN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// How long opening a listen waits for the server to acknowledge it.
const ACK_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const METHOD: HeaderName = HeaderName::from_static("mcp-method");
const NAME: HeaderName = HeaderName::from_static("mcp-name");
const SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
const LAST_EVENT: HeaderName = HeaderName::from_static("last-event-id");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// One reply, read to the end of the answer to our request.
enum Outcome {
    Answer(Result<Value, RpcError>),
    /// The server forgot the session (legacy): start a new one and try again.
    SessionGone,
}

fn body_of(frame: &Value) -> Vec<u8> {
    serde_json::to_vec(frame).expect("a JSON value always serializes")
}

impl HttpConn {
    pub(crate) async fn connect(
        spec: &HttpSpec,
        era_hint: Option<Era>,
    ) -> Result<(Arc<HttpConn>, ServerFacts), UpstreamError> {
        let mut headers = HeaderMap::new();
        for (name, value) in &spec.headers {
            let bad = |what: &str| UpstreamError::Handshake {
                server: spec.server.clone(),
                reason: format!("header {name:?}: invalid {what}"),
            };
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad("name"))?;
            headers.insert(name, HeaderValue::from_str(value).map_err(|_| bad("value"))?);
        }
        let bad_url = |e: String| UpstreamError::Handshake {
            server: spec.server.clone(),
            reason: format!("url {:?}: {e}", spec.url),
        };
        let url = url::Url::parse(&spec.url).map_err(|e| bad_url(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad_url("not an http or https URL".into()));
        }
        let endpoint = client::uri_of(&url).map_err(bad_url)?;
        if let Some(basic) = client::basic_credentials(&url)
            && !headers.contains_key(AUTHORIZATION)
        {
            headers.insert(AUTHORIZATION, basic);
        }
        // A configured Authorization header (or credentials in the URL) is the user's choice
        // of credential: mcpx does not log in over it.
        let chosen_credential = headers.contains_key(AUTHORIZATION);
        let mut conn = HttpConn {
            server: spec.server.clone(),
            url: spec.url.clone(),
            endpoint,
            client: client::toward(&url, &spec.allow),
            headers,
            era: Era::Modern,
            revision: Revision::LATEST_MODERN,
            session: tokio::sync::Mutex::new(None),
            next_id: AtomicI64::new(1),
            param_headers: std::sync::Mutex::new(None),
            serving: Default::default(),
            warned_ambiguous: AtomicBool::new(false),
            changes: Changes::new(64, false),
            max_line: spec.max_line_bytes,
            listening: Default::default(),
            acks: Default::default(),
            auth: spec.auth.clone().filter(|_| !chosen_credential),
            bearer: Default::default(),
        };
        if era_hint != Some(Era::Legacy) {
            let within = if era_hint == Some(Era::Modern) { spec.timeouts.handshake } else { spec.timeouts.probe };
            // A -32022 naming a revision mcpx speaks earns one more probe, never a fallback.
            for _ in 0..2 {
                let params = json!({ "_meta": handshake::modern_envelope() });
                let probe = tokio::time::timeout(within, conn.post_once("server/discover", params, None)).await;
                match probe {
                    Ok(Ok(Outcome::Answer(Ok(result)))) => match handshake::modern_facts(&result) {
                        Some(facts) => return Ok((Arc::new(conn), facts)),
                        None => break,
                    },
                    Ok(Ok(Outcome::Answer(Err(e)))) if e.code == code::UNSUPPORTED_PROTOCOL_VERSION => {
                        if handshake::supported_modern(&e).is_none() {
                            let reason = format!("the server speaks none of mcpx's 2026 revisions: {e}");
                            return Err(UpstreamError::Handshake { server: conn.server.clone(), reason });
                        }
                    }
                    // A 2026 error about our request still says the server is stateless.
                    Ok(Ok(Outcome::Answer(Err(e))))
                        if matches!(e.code, code::HEADER_MISMATCH | code::MISSING_REQUIRED_CLIENT_CAPABILITY) =>
                    {
                        return Err(UpstreamError::Handshake {
                            server: conn.server.clone(),
                            reason: format!("server/discover was refused: {e}"),
                        });
                    }
                    Ok(Err(e @ UpstreamError::Unreachable { .. })) => return Err(e),
                    Ok(Err(e)) if e.is_auth() => return Err(e),
                    _ => break,
                }
            }
        }
        conn.era = Era::Legacy;
        let facts = conn.initialize().await?;
        conn.revision = facts.revision;
        let conn = Arc::new(conn);
        tokio::spawn(standalone_stream(Arc::downgrade(&conn)));
        Ok((conn, facts))
    }

    /// Opens a handshake-era session: `initialize`, then `notifications/initialized`.
    async fn initialize(&self) -> Result<ServerFacts, UpstreamError> {
        *self.session.lock().await = None;
        let outcome = self.post_once("initialize", handshake::initialize_params(), None).await?;
        let result = match outcome {
            Outcome::Answer(Ok(result)) => result,
            Outcome::Answer(Err(e)) => {
                return Err(UpstreamError::Handshake {
                    server: self.server.clone(),
                    reason: format!("initialize was refused: {e}"),
                });
            }
            Outcome::SessionGone => {
                return Err(UpstreamError::Handshake {
                    server: self.server.clone(),
                    reason: "initialize answered 404".into(),
                });
            }
        };
        let facts = handshake::legacy_facts(&self.server, &result)?;
        let note = message::notification("notifications/initialized", Value::Null);
        self.send(body_of(&note), "notifications/initialized", None, Some(facts.revision)).await?;
        Ok(facts)
    }

    /// Sends a request (on `caller`'s behalf, when it serves one) and reads its answer,
    /// starting a new session once if the server forgot ours.
    pub(crate) async fn call(
        &self,
        method: &str,
        params: Value,
        caller: Option<Caller>,
        listener: Option<Listener>,
    ) -> Result<Value, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.call_as(id, method, params, caller, listener).await
    }

    async fn call_as(
        &self,
        id: i64,
        method: &str,
        mut params: Value,
        caller: Option<Caller>,
        listener: Option<Listener>,
    ) -> Result<Value, UpstreamError> {
        if let Some(Value::Object(m)) = params.get_mut("_meta") {
            m.remove(meta::PROGRESS_TOKEN);
        }
        if listener.as_ref().is_some_and(|l| l.progress_token.is_some()) {
            meta::of_mut(&mut params).insert(meta::PROGRESS_TOKEN.into(), format!("mcpx-{id}").into());
        }
        if method == "tools/call"
            && self.era == Era::Modern
            && self.param_headers.lock().expect("headers lock").is_none()
        {
            // The headers a call needs come from the tool's listing: list once first.
            // Boxed, as every rare step of a call is: held inline, its future would make
            // every call's future larger, and that is copied when it is boxed below `Upstream`.
            let list = json!({ "_meta": handshake::modern_envelope() });
            let _ = Box::pin(self.post_once("tools/list", list, None)).await;
        }
        let meter = caller.as_ref().and_then(|c| c.meter.clone());
        let serving = Serving { caller, ask: listener.as_ref().and_then(|l| l.ask.clone()) };
        let _serving = serving.is_for_someone().then(|| ServingGuard::register(self, id, serving));
        for attempt in 0..2 {
            match self.exchange(id, method, &params, listener.as_ref(), meter.as_deref()).await? {
                Outcome::Answer(answer) => return answer.map_err(UpstreamError::Rpc),
                Outcome::SessionGone if attempt == 0 && self.era == Era::Legacy => {
                    tracing::info!(server = self.server, "the server ended our session; starting a new one");
                    Box::pin(self.initialize()).await?;
                }
                Outcome::SessionGone => break,
            }
        }
        Err(self.broken("the server answered 404 for its own session twice"))
    }

    /// Keeps a `subscriptions/listen` with `notifications` open on a 2026 server; what it
    /// delivers goes to `changes`. The server may end it at any time: it is opened again.
    /// Returns once the server acknowledged the listen (or did not within a few seconds),
    /// so what happens after it is heard.
    pub(crate) async fn listen(self: &Arc<Self>, notifications: Value) -> Listening {
        let conn = Arc::downgrade(self);
        let first = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (acked_tx, acked) = tokio::sync::oneshot::channel();
        self.acks.lock().expect("acks lock").insert(first, acked_tx);
        let listening = Listening(tokio::spawn(async move {
            let mut id = first;
            loop {
                let Some(live) = conn.upgrade() else { return };
                let params = json!({ "notifications": notifications, "_meta": handshake::modern_envelope() });
                if let Err(e) = live.call_as(id, "subscriptions/listen", params, None, None).await {
                    tracing::debug!(server = live.server, "listen ended: {e}");
                }
                live.acks.lock().expect("acks lock").remove(&id);
                id = live.next_id.fetch_add(1, Ordering::Relaxed);
                drop(live);
                tokio::time::sleep(RELISTEN_AFTER).await;
            }
        }));
        let _ = tokio::time::timeout(ACK_WITHIN, acked).await;
        listening
    }

    /// Asks a 2026 server for every kind of list change, once per connection.
    pub(crate) async fn listen_once(self: &Arc<Self>) {
        let mut listening = self.listening.lock().await;
        if listening.is_none() {
            let all = json!({ "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true });
            *listening = Some(self.listen(all).await);
        }
    }

    /// Ends a handshake-era session politely.
    pub(crate) async fn shutdown(&self) {
        self.listening.lock().await.take();
        let Some(session) = self.session.lock().await.take() else { return };
        let session = HeaderValue::from_str(&session).ok();
        let bearer = self.bearer_header();
        let make = || self.session_request(Method::DELETE, session.as_ref(), bearer.as_ref());
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), self.client.send(make)).await;
    }

    async fn post_once(
        &self,
        method: &str,
        params: Value,
        listener: Option<&Listener>,
    ) -> Result<Outcome, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.exchange(id, method, &params, listener, None).await
    }

    /// One POST of request `id` and its answer, their sizes told to `meter`.
    async fn exchange(
        &self,
        id: i64,
        method: &str,
        params: &Value,
        listener: Option<&Listener>,
        meter: Option<&dyn Meter>,
    ) -> Result<Outcome, UpstreamError> {
        let body = message::request_bytes(&RequestId::Number(id), method, params);
        let size = body.len();
        let revision = (self.era == Era::Legacy).then_some(self.revision);
        let response = self.send(body, method, Some(params), revision).await?;
        if let Some(meter) = meter {
            meter.sent(size);
        }
        let outcome = self.read_reply(id, method, response, listener, meter).await?;
        match outcome {
            Outcome::Answer(Ok(mut result)) if method == "tools/list" && self.era == Era::Modern => {
                self.learn_param_headers(&mut result);
                Ok(Outcome::Answer(Ok(result)))
            }
            other => Ok(other),
        }
    }

    /// Drops listed tools whose `x-mcp-header` annotations break the rules, as a client
    /// must, and remembers which arguments the others mirror into headers.
    fn learn_param_headers(&self, result: &mut Value) {
        let Some(Value::Array(tools)) = result.get_mut("tools") else { return };
        let mut known = self.param_headers.lock().expect("headers lock");
        let map = known.get_or_insert_with(HashMap::new);
        tools.retain(|tool| {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            match param_headers::of_tool(tool.get("inputSchema").unwrap_or(&Value::Null)) {
                Ok(headers) => {
                    map.insert(name.to_owned(), headers);
                    true
                }
                Err(reason) => {
                    tracing::warn!(server = self.server, tool = name, "left out of the tool list: {reason}");
                    false
                }
            }
        });
    }

    async fn read_reply(
        &self,
        id: i64,
        method: &str,
        response: Response,
        listener: Option<&Listener>,
        meter: Option<&dyn Meter>,
    ) -> Result<Outcome, UpstreamError> {
        let status = response.status();
        if status == StatusCode::NOT_FOUND && self.session.lock().await.is_some() {
            return Ok(Outcome::SessionGone);
        }
        if method == "initialize" {
            let minted = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
            *self.session.lock().await = minted;
        }
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        if is_stream && status.is_success() {
            // Boxed: see `call_as`.
            return Box::pin(self.read_stream(id, response, listener, meter)).await;
        }
        let bytes = match response.into_body().collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => return Err(self.broken(format!("reading the reply: {e}"))),
        };
        // The answer as a response, its envelope read without a tree; anything else is
        // parsed whole, only to say what it is.
        let answer = match message::response_of(&bytes) {
            Some((_, outcome)) => Some(outcome),
            None => match serde_json::from_slice::<Value>(&bytes).ok().map(Message::classify) {
                Some(Ok(Message::Response { outcome, .. })) => Some(outcome),
                _ => None,
            },
        };
        match answer {
            Some(outcome) => {
                if let Some(meter) = meter {
                    meter.received(bytes.len());
                }
                Ok(Outcome::Answer(outcome))
            }
            None => Err(self.broken(format!("HTTP {status}: {}", excerpt(&bytes)))),
        }
    }

    /// Sends one POST, with the server's bearer when mcpx holds one. A 401 (or a 403
    /// `insufficient_scope`) goes to the authorizer, which may get a new token without a
    /// person (refresh, client credentials): then the request is sent once more, never
    /// more. Otherwise the request fails with [`UpstreamError::LoginNeeded`].
    async fn send(
        &self,
        body: Vec<u8>,
        method: &str,
        params: Option<&Value>,
        legacy: Option<Revision>,
    ) -> Result<Response, UpstreamError> {
        match &self.auth {
            None => self.post(body.into(), method, params, legacy, None).await,
            // Boxed: see `call_as`.
            Some(auth) => Box::pin(self.send_authorized(auth, body, method, params, legacy)).await,
        }
    }

    /// [`send`](Self::send) to a server mcpx holds a token for, or may get one.
    async fn send_authorized(
        &self,
        auth: &Authorization,
        body: Vec<u8>,
        method: &str,
        params: Option<&Value>,
        legacy: Option<Revision>,
    ) -> Result<Response, UpstreamError> {
        let bearer = auth.authorizer.bearer(&auth.target).await;
        self.remember_bearer(bearer.as_deref());
        let body = Bytes::from(body);
        let response = self.post(body.clone(), method, params, legacy, bearer.as_deref()).await?;
        let Some((status, challenges)) = auth_challenge(&response) else {
            if bearer.is_some() && response.status().is_success() {
                auth.authorizer.succeeded(&auth.target);
            }
            return Ok(response);
        };
        let server = &self.server;
        let retry = auth
            .authorizer
            .challenged(&auth.target, status, challenges.iter().map(String::as_str), bearer.as_deref())
            .await
            .map_err(|e| UpstreamError::from_oauth(server, e))?;
        self.remember_bearer(Some(&retry));
        let response = self.post(body, method, params, legacy, Some(&retry)).await?;
        match auth_challenge(&response) {
            None => {
                auth.authorizer.succeeded(&auth.target);
                Ok(response)
            }
            // Still refused: let the authorizer learn what it asks for (scopes, step-ups), once.
            Some((status, challenges)) => {
                let again = auth
                    .authorizer
                    .challenged(&auth.target, status, challenges.iter().map(String::as_str), Some(&retry))
                    .await;
                Err(match again {
                    Err(e) => UpstreamError::from_oauth(server, e),
                    Ok(_) => UpstreamError::LoginNeeded { server: server.clone() },
                })
            }
        }
    }

    fn remember_bearer(&self, bearer: Option<&str>) {
        *self.bearer.lock().expect("bearer lock") = bearer.map(str::to_owned);
    }

    /// The bearer of the last POST, for the session's GET and DELETE.
    fn bearer_header(&self) -> Option<HeaderValue> {
        bearer_value(self.bearer.lock().expect("bearer lock").as_deref()?)
    }

    /// Sends one POST of `body` (following redirects; see `client`).
    async fn post(
        &self,
        body: Bytes,
        method: &str,
        params: Option<&Value>,
        legacy: Option<Revision>,
        bearer: Option<&str>,
    ) -> Result<Response, UpstreamError> {
        let bearer = match bearer {
            Some(bearer) => Some(bearer_value(bearer).ok_or_else(|| UpstreamError::Auth {
                server: self.server.clone(),
                reason: "the access token is not a header value".into(),
            })?),
            None => None,
        };
        let session = match legacy {
            Some(_) => self.session.lock().await.as_deref().and_then(|s| HeaderValue::from_str(s).ok()),
            None => None,
        };
        let make = || self.post_request(&body, method, params, legacy, bearer.as_ref(), session.as_ref());
        self.client.send(make).await.map_err(|reason| self.unreachable(reason))
    }

    /// The POST of `body`: the configured headers, then those its era and method call for.
    /// Header names and fixed values are constants: each one given as text is parsed and
    /// checked.
    fn post_request(
        &self,
        body: &Bytes,
        method: &str,
        params: Option<&Value>,
        legacy: Option<Revision>,
        bearer: Option<&HeaderValue>,
        session: Option<&HeaderValue>,
    ) -> Request<Body> {
        let mut request = Request::new(Body::new(body.clone()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.endpoint.clone();
        let headers = request.headers_mut();
        if !self.headers.is_empty() {
            *headers = self.headers.clone();
        }
        headers.entry(CONTENT_TYPE).or_insert(HeaderValue::from_static("application/json"));
        headers.entry(ACCEPT).or_insert(HeaderValue::from_static("application/json, text/event-stream"));
        if let Some(bearer) = bearer {
            headers.insert(AUTHORIZATION, bearer.clone());
        }
        // The request's trace context goes in headers too, for what traces HTTP; only a
        // well-formed one (mcpx writes its own there while it exports traces).
        let meta = params.and_then(|p| p.get("_meta"));
        if let Some(traceparent) = meta.and_then(|m| m.get("traceparent")).and_then(Value::as_str)
            && is_traceparent(traceparent)
            && let Ok(traceparent) = HeaderValue::from_str(traceparent)
        {
            headers.insert(TRACEPARENT, traceparent);
            if let Some(state) = meta.and_then(|m| m.get("tracestate")).and_then(Value::as_str)
                && state.len() <= 512
                && state.bytes().all(|b| (0x20..0x7f).contains(&b))
                && let Ok(state) = HeaderValue::from_str(state)
            {
                headers.insert(TRACESTATE, state);
            }
        }
        match legacy {
            Some(revision) => {
                if method != "initialize" {
                    headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(revision.as_str()));
                }
                if let Some(session) = session {
                    headers.insert(SESSION, session.clone());
                }
            }
            None => {
                headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(Revision::LATEST_MODERN.as_str()));
                if let Ok(method) = HeaderValue::from_str(method) {
                    headers.insert(METHOD, method);
                }
                let named = match method {
                    "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
                    "resources/read" => params.and_then(|p| p.get("uri")),
                    _ => None,
                };
                if let Some(name) = named.and_then(Value::as_str) {
                    if let Ok(value) = HeaderValue::try_from(header::encode(name)) {
                        headers.insert(NAME, value);
                    }
                    if method == "tools/call" {
                        let arguments = params.and_then(|p| p.get("arguments")).unwrap_or(&Value::Null);
                        let known = self.param_headers.lock().expect("headers lock");
                        for mirrored in known.as_ref().and_then(|m| m.get(name)).into_iter().flatten() {
                            if let Some(value) = param_headers::value(arguments, &mirrored.path)
                                && let Ok(name) = HeaderName::try_from(format!("mcp-param-{}", mirrored.name))
                                && let Ok(value) = HeaderValue::try_from(value)
                            {
                                headers.insert(name, value);
                            }
                        }
                    }
                }
            }
        }
        request
    }

    /// A bodiless request of the session's (its GET stream, its DELETE): the configured
    /// headers, the session's id and the bearer of the last POST.
    fn session_request(
        &self,
        method: Method,
        session: Option<&HeaderValue>,
        bearer: Option<&HeaderValue>,
    ) -> Request<Body> {
        let mut request = Request::new(Body::default());
        *request.method_mut() = method;
        *request.uri_mut() = self.endpoint.clone();
        let headers = request.headers_mut();
        if !self.headers.is_empty() {
            *headers = self.headers.clone();
        }
        if let Some(bearer) = bearer {
            headers.insert(AUTHORIZATION, bearer.clone());
        }
        if let Some(session) = session {
            headers.insert(SESSION, session.clone());
        }
        request
    }

    /// Reads an event stream up to the answer to request `id`, passing notifications on.
    /// A handshake-era stream that ends early after naming its events is resumed, as the
    /// 2025-11-25 transport allows: after the `retry` delay, a GET with `Last-Event-ID`.
    async fn read_stream(
        &self,
        id: i64,
        response: Response,
        listener: Option<&Listener>,
        meter: Option<&dyn Meter>,
    ) -> Result<Outcome, UpstreamError> {
        let mut response = response;
        let mut resume = Resume { last_event: None, retry: DEFAULT_RETRY };
        for _ in 0..=MAX_RESUMES {
            if let Some(answer) = self.read_events(id, response, listener, &mut resume, meter).await? {
                return Ok(Outcome::Answer(answer));
            }
            let Some(last_event) = resume.last_event.clone().filter(|_| self.era == Era::Legacy) else {
                break;
            };
            tokio::time::sleep(resume.retry).await;
            let session = self.session.lock().await.clone();
            response = self.get_stream(session, Some(last_event)).await?;
            if !response.status().is_success() {
                return Err(self.broken(format!("resuming the event stream answered HTTP {}", response.status())));
            }
        }
        Err(self.broken("the event stream ended before the answer"))
    }

    /// Reads one response's events; `None` when it ends without the answer.
    async fn read_events(
        &self,
        id: i64,
        response: Response,
        listener: Option<&Listener>,
        resume: &mut Resume,
        meter: Option<&dyn Meter>,
    ) -> Result<Option<Result<Value, RpcError>>, UpstreamError> {
        let mut events = Events::new(response, self.max_line);
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| self.broken(format!("the event stream broke: {e}")))?;
            if let Some(event_id) = event.id {
                resume.last_event = Some(event_id);
            }
            if let Some(ms) = event.retry {
                resume.retry = std::time::Duration::from_millis(ms.min(MAX_RETRY_MS));
            }
            if event.data.is_empty() {
                continue;
            }
            if let Some(answer) = self.event(id, &event.data, listener).await {
                if let Some(meter) = meter {
                    meter.received(event.data.len());
                }
                return Ok(Some(answer));
            }
        }
        Ok(None)
    }

    /// One event: the answer to request `id`, or something to pass on or refuse.
    async fn event(&self, id: i64, data: &str, listener: Option<&Listener>) -> Option<Result<Value, RpcError>> {
        let frame = Message::parse(data.as_bytes()).and_then(Message::classify).ok()?;
        match frame {
            Message::Response { id: RequestId::Number(n), outcome } if n == id => Some(outcome),
            Message::Notification { method, params } if method == "notifications/subscriptions/acknowledged" => {
                let listen = params["_meta"][meta::SUBSCRIPTION_ID].as_i64();
                if let Some(acked) = listen.and_then(|id| self.acks.lock().expect("acks lock").remove(&id)) {
                    let _ = acked.send(());
                }
                None
            }
            // A change on a listen's stream (or any other): whoever watches hears of it.
            Message::Notification { method, params } if is_change(&method) => {
                self.changes.announce(&method, params);
                None
            }
            // A task's status, on whichever stream: whoever follows that task hears it.
            Message::Notification { method, params } if method == TASK_STATUS => {
                self.changes.announce_status(params);
                None
            }
            Message::Notification { method, mut params } => {
                let listener = listener?;
                match method.as_str() {
                    "notifications/progress" => {
                        params[meta::PROGRESS_TOKEN] = listener.progress_token.clone()?;
                        (listener.notify)(message::notification(&method, params));
                    }
                    "notifications/message"
                        if listener.wants_log(params.get("level").and_then(Value::as_str).unwrap_or("info")) =>
                    {
                        (listener.notify)(message::notification(&method, params));
                    }
                    _ => {}
                }
                None
            }
            // A question on our request's stream is for our caller, when it can be asked;
            // otherwise it is refused, so the server does not wait forever.
            Message::Request { id, method, mut params } => {
                // The stream says which request it serves; mcpx's keys are not the caller's to see.
                let _ = questions::take_call_id(&mut params);
                let outcome = match listener.and_then(|l| l.ask.clone()) {
                    Some(ask) if method != "ping" => ask(method.clone(), params).await,
                    _ if method == "ping" => Ok(json!({})),
                    _ => Err(RpcError::method_not_found(&method)),
                };
                let reply = match outcome {
                    Ok(result) => message::result_response(&id.to_value(), result),
                    Err(e) => message::error_response(Some(&id.to_value()), &e),
                };
                let revision = (self.era == Era::Legacy).then_some(self.revision);
                let _ = self.send(body_of(&reply), "", None, revision).await;
                None
            }
            Message::Response { .. } => None,
        }
    }

    /// A handshake-era GET for an event stream of the session, picked up after
    /// `last_event` when it names one.
    async fn get_stream(&self, session: Option<String>, last_event: Option<String>) -> Result<Response, UpstreamError> {
        let session = session.and_then(|s| HeaderValue::from_str(&s).ok());
        let last_event = last_event.and_then(|e| HeaderValue::from_str(&e).ok());
        let bearer = self.bearer_header();
        let make = || {
            let mut request = self.session_request(Method::GET, session.as_ref(), bearer.as_ref());
            let headers = request.headers_mut();
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
            headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(self.revision.as_str()));
            if let Some(last_event) = &last_event {
                headers.insert(LAST_EVENT, last_event.clone());
            }
            request
        };
        self.client.send(make).await.map_err(|reason| self.unreachable(reason))
    }

    fn broken(&self, detail: impl Into<String>) -> UpstreamError {
        UpstreamError::Protocol { server: self.server.clone(), url: self.url.clone(), detail: detail.into() }
    }

    fn unreachable(&self, reason: String) -> UpstreamError {
        UpstreamError::Unreachable { server: self.server.clone(), url: self.url.clone(), reason }
    }
}

/// Keeps whom a request serves registered while the request is in flight.
struct ServingGuard<'a> {
    conn: &'a HttpConn,
    id: i64,
}

impl<'a> ServingGuard<'a> {
    fn register(conn: &'a HttpConn, id: i64, serving: Serving) -> ServingGuard<'a> {
        conn.serving.lock().expect("serving lock").insert(id, serving);
        ServingGuard { conn, id }
    }
}

impl Drop for ServingGuard<'_> {
    fn drop(&mut self) {
        self.conn.serving.lock().expect("serving lock").remove(&self.id);
    }
}

/// The handshake-era session's standalone stream (GET): what the server sends outside any
/// request. Questions go to the caller they are for, by the rule stdio follows (see
/// `questions`), and are refused otherwise; change notifications go to `changes`. A server that
/// offers no such stream (405) is left alone; one that drops it is reconnected with
/// backoff for as long as the connection lives.
async fn standalone_stream(conn: std::sync::Weak<HttpConn>) {
    let mut backoff = std::time::Duration::from_millis(250);
    loop {
        let Some(live) = conn.upgrade() else { return };
        let Some(session) = live.session.lock().await.clone() else { return };
        match live.get_stream(Some(session), None).await {
            Ok(response) if response.status().is_success() => {
                live.changes.set_hearing(true);
                drop(live);
                let opened = std::time::Instant::now();
                read_standalone(&conn, response).await;
                if let Some(live) = conn.upgrade() {
                    live.changes.set_hearing(false);
                }
                // A stream that lasted is reconnected soon; one dropped at once, ever later.
                backoff = if opened.elapsed() > std::time::Duration::from_secs(30) {
                    std::time::Duration::from_millis(500)
                } else {
                    (backoff * 2).min(std::time::Duration::from_secs(30))
                };
            }
            // 405: the server offers no standalone stream; anything else: it is gone.
            Ok(_) | Err(_) => return,
        }
        tokio::time::sleep(backoff).await;
    }
}

async fn read_standalone(conn: &std::sync::Weak<HttpConn>, response: Response) {
    let Some(max_line) = conn.upgrade().map(|c| c.max_line) else { return };
    let mut events = Events::new(response, max_line);
    while let Some(Ok(event)) = events.next().await {
        let Some(live) = conn.upgrade() else { return };
        if !event.data.is_empty() {
            live.standalone_event(&event.data);
        }
    }
}

/// One server-sent event: its data, and the `id` and `retry` fields that came with it.
struct Event {
    data: String,
    id: Option<String>,
    retry: Option<u64>,
}

/// A body's chunks as they arrive.
type Chunks = std::pin::Pin<Box<dyn futures::Stream<Item = Result<Bytes, hyper::Error>> + Send>>;

/// The events of an event-stream response, read as they arrive.
struct Events {
    body: Chunks,
    buffer: BytesMut,
    pending: Event,
    max_line: usize,
}

impl Events {
    fn new(response: Response, max_line: usize) -> Events {
        Events::of(Box::pin(response.into_body().into_data_stream()), max_line)
    }

    /// The events of a body that arrives as these chunks.
    fn of(body: Chunks, max_line: usize) -> Events {
        Events { body, buffer: BytesMut::new(), pending: Event::empty(), max_line }
    }

    /// The next event (with data, or naming an `id` or `retry`); `None` at the end.
    async fn next(&mut self) -> Option<Result<Event, String>> {
        loop {
            while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let raw = self.buffer.split_to(end + 1);
                let line = String::from_utf8_lossy(&raw);
                let line = line.trim_end_matches(['\n', '\r']);
                let field = |name: &str| line.strip_prefix(name).map(|rest| rest.strip_prefix(' ').unwrap_or(rest));
                if let Some(rest) = field("data:") {
                    if !self.pending.data.is_empty() {
                        self.pending.data.push('\n');
                    }
                    self.pending.data.push_str(rest);
                } else if let Some(id) = field("id:") {
                    self.pending.id = Some(id.to_owned());
                } else if let Some(ms) = field("retry:") {
                    self.pending.retry = ms.trim().parse().ok();
                } else if line.is_empty() && !self.pending.is_empty() {
                    return Some(Ok(std::mem::replace(&mut self.pending, Event::empty())));
                }
            }
            if self.buffer.len() > self.max_line || self.pending.data.len() > self.max_line {
                return Some(Err(format!("an event longer than limits.maxLineBytes ({} bytes)", self.max_line)));
            }
            match self.body.next().await? {
                Ok(chunk) => self.buffer.extend_from_slice(&chunk),
                Err(e) => return Some(Err(e.to_string())),
            }
        }
    }
}

impl Event {
    fn empty() -> Event {
        Event { data: String::new(), id: None, retry: None }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty() && self.id.is_none() && self.retry.is_none()
    }
}

impl HttpConn {
    /// Whom a question on the standalone stream is for, among the requests in flight.
    fn whom(&self, method: &str, params: &mut Value) -> Result<Ask, RpcError> {
        let echoed = questions::take_call_id(params);
        let serving = self.serving.lock().expect("serving lock");
        let in_flight: Vec<&Serving> = serving.values().collect();
        questions::asker(&self.server, method, echoed.as_deref(), &in_flight, &self.warned_ambiguous)
    }

    fn standalone_event(self: &Arc<Self>, data: &str) {
        match Message::parse(data.as_bytes()).and_then(Message::classify) {
            Ok(Message::Request { id, method, mut params }) => {
                let ask = if method == "ping" { None } else { Some(self.whom(&method, &mut params)) };
                let conn = self.clone();
                tokio::spawn(async move {
                    let outcome = match ask {
                        None => Ok(json!({})),
                        Some(Ok(ask)) => ask(method.clone(), params).await,
                        Some(Err(refused)) => Err(refused),
                    };
                    let reply = match outcome {
                        Ok(result) => message::result_response(&id.to_value(), result),
                        Err(e) => message::error_response(Some(&id.to_value()), &e),
                    };
                    let _ = conn.send(body_of(&reply), "", None, Some(conn.revision)).await;
                });
            }
            Ok(Message::Notification { method, params }) if is_change(&method) => {
                self.changes.announce(&method, params);
            }
            Ok(Message::Notification { method, params }) if method == TASK_STATUS => {
                self.changes.announce_status(params);
            }
            _ => {}
        }
    }
}

/// Where a handshake-era event stream can be picked up again.
struct Resume {
    last_event: Option<String>,
    retry: std::time::Duration,
}

/// How long to wait before resuming a stream that named no `retry`.
const DEFAULT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest `retry` a server may ask for; a longer one is cut to this.
const MAX_RETRY_MS: u64 = 30_000;
/// How many times one request's stream is resumed before the call fails.
const MAX_RESUMES: usize = 5;

/// A 401, or a 403 whose challenge says `insufficient_scope`: its status and every
/// `WWW-Authenticate` value. Any other answer is the request's own business.
fn auth_challenge(response: &Response) -> Option<(u16, Vec<String>)> {
    let status = response.status().as_u16();
    if status != 401 && status != 403 {
        return None;
    }
    let challenges: Vec<String> = response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    let step_up =
        mcpx_oauth::challenge::bearer(challenges.iter().map(String::as_str)).is_some_and(|c| c.insufficient_scope());
    (status == 401 || step_up).then_some((status, challenges))
}

/// `Authorization: Bearer <token>`, marked sensitive; `None` when the token cannot be a
/// header value.
fn bearer_value(token: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]);
    if text.trim().is_empty() { "(empty body)".into() } else { text.trim().to_owned() }
}

/// Whether `value` has the form of a W3C `traceparent`: version, trace id, parent id and
/// flags in lowercase hex, dash-separated (what a header may carry, nothing else).
fn is_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    parts.len() == 4 && hex(parts[0], 2) && hex(parts[1], 32) && hex(parts[2], 16) && hex(parts[3], 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event's data, id and retry.
    type Seen = (String, Option<String>, Option<u64>);

    /// Every event of a body sent as `chunks`, and how the stream ended (`None`: cleanly).
    fn events(chunks: &[&str], max_line: usize) -> (Vec<Seen>, Option<String>) {
        let chunks: Vec<Result<Bytes, hyper::Error>> =
            chunks.iter().map(|c| Ok(bytes::Bytes::copy_from_slice(c.as_bytes()))).collect();
        let mut events = Events::of(Box::pin(futures::stream::iter(chunks)), max_line);
        let mut seen = Vec::new();
        futures::executor::block_on(async {
            loop {
                match events.next().await {
                    Some(Ok(e)) => seen.push((e.data, e.id, e.retry)),
                    Some(Err(why)) => return (seen, Some(why)),
                    None => return (seen, None),
                }
            }
        })
    }

    #[test]
    fn an_event_split_anywhere_across_chunks_reads_whole() {
        let body = "event: message\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\n";
        for cut in 1..body.len() {
            let (seen, end) = events(&[&body[..cut], &body[cut..]], 1024);
            assert_eq!(seen, vec![(r#"{"a":1}"#.to_owned(), Some("7".to_owned()), None)], "cut at {cut}");
            assert_eq!(end, None);
        }
    }

    #[test]
    fn data_lines_join_with_newlines_and_one_leading_space_is_dropped() {
        let (seen, _) = events(&["data:a\ndata:  b\ndata: c\n\n"], 1024);
        assert_eq!(seen[0].0, "a\n b\nc");
    }

    #[test]
    fn comments_are_skipped_and_an_event_of_only_an_id_or_retry_is_kept() {
        let (seen, _) = events(&[": keep-alive\n\n", "id: 3\n\n", "retry: 250\n\n", "data: x\n\n"], 1024);
        assert_eq!(
            seen,
            vec![
                (String::new(), Some("3".to_owned()), None),
                (String::new(), None, Some(250)),
                ("x".to_owned(), None, None)
            ]
        );
    }

    #[test]
    fn an_unfinished_event_at_the_end_is_dropped() {
        let (seen, end) = events(&["data: done\n\n", "data: half"], 1024);
        assert_eq!(seen.len(), 1);
        assert_eq!(end, None);
    }

    #[test]
    fn a_line_or_event_over_the_limit_ends_the_stream_naming_the_setting() {
        let (_, end) = events(&[&format!("data: {}", "x".repeat(100))], 64);
        assert!(end.is_some_and(|why| why.contains("limits.maxLineBytes")));
        let many: String = (0..20).map(|_| "data: xxxxxxxx\n").collect();
        let (_, end) = events(&[&many, "\n"], 64);
        assert!(end.is_some_and(|why| why.contains("limits.maxLineBytes")), "data lines add up");
    }
}

#[cfg(test)]
mod trace_header_tests {
    #[test]
    fn only_a_well_formed_traceparent_becomes_a_header() {
        assert!(super::is_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx: y",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf9-00f067aa0ba902b7-01",
        ] {
            assert!(!super::is_traceparent(bad), "{bad}");
        }
    }
}
