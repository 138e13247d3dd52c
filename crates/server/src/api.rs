//! The `/v1` API, for the CLI and scripts: status, tool listing, tool calls, stop, and
//! `GET /v1/stdio`, the upgrade `mcpx serve` uses to relay its stdio over the unix socket.
//! Documented in `docs/api/openapi.json`.
//!
//! A `/v1` caller names its session with `X-Mcpx-Session` (a label, like the `_meta` key);
//! over the socket the daemon adds the peer's pid and cwd, over TCP they are unknown.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Json;
use axum::Router;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::TokioIo;
use mcpx_gateway::{CallContext, Gateway, Transport};
use mcpx_protocol::shape::shape_result;
use mcpx_protocol::shape::Cacheability;
use mcpx_protocol::{Revision, RpcError, code};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::http::{Front, admit_peer};
use crate::socket::{self, Peer};
use crate::stdio;

pub const SESSION_HEADER: &str = "x-mcpx-session";
pub const PID_HEADER: &str = "x-mcpx-pid";
/// The `Upgrade` protocol name of a relayed stdio stream.
pub const STDIO_PROTOCOL: &str = "mcpx-stdio";

/// What the daemon knows about itself, and how to ask it to stop.
pub struct Daemon {
    pub url: String,
    pub socket: Option<PathBuf>,
    pub started: SystemTime,
    pub stop: Arc<Notify>,
    last_activity: Mutex<Instant>,
    streams: AtomicUsize,
}

impl Daemon {
    pub fn new(url: String, socket: Option<PathBuf>) -> Daemon {
        Daemon {
            url,
            socket,
            started: SystemTime::now(),
            stop: Arc::new(Notify::new()),
            last_activity: Mutex::new(Instant::now()),
            streams: AtomicUsize::new(0),
        }
    }

    pub fn touch(&self) {
        *self.last_activity.lock().expect("activity lock") = Instant::now();
    }

    /// How long nobody has used the daemon; `None` while a relayed stdio stream is open.
    pub fn idle_for(&self) -> Option<Duration> {
        (self.streams.load(Ordering::Acquire) == 0).then(|| self.last_activity.lock().expect("activity lock").elapsed())
    }
}

pub fn routes() -> Router<Arc<Front>> {
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/tools", get(tools))
        .route("/v1/call", post(call))
        .route("/v1/stop", post(stop))
        .route("/v1/stdio", get(stdio_upgrade))
}

/// Admits a `/v1` caller: token on TCP, pid and cwd over the socket, session label.
fn caller(front: &Front, peer: &Peer, headers: &HeaderMap) -> Result<Transport, Response> {
    front.daemon.touch();
    let mut transport = admit_peer(&front.gateway, peer, headers)?;
    let named = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).filter(|s| !s.is_empty());
    transport.session = named.map(str::to_owned).or_else(|| transport.pid.map(|pid| format!("mcp-{pid}")));
    Ok(transport)
}

async fn status(State(front): State<Arc<Front>>, ConnectInfo(peer): ConnectInfo<Peer>, headers: HeaderMap) -> Response {
    if let Err(refusal) = caller(&front, &peer, &headers) {
        return refusal;
    }
    let config = front.gateway.settings().config();
    let servers: Vec<Value> = config
        .mcp_servers
        .iter()
        .map(|(name, s)| json!({ "name": name, "scope": s.scope.as_str() }))
        .collect();
    let instances: Vec<Value> = front
        .gateway
        .instances()
        .into_iter()
        .map(|i| {
            json!({
                "server": i.key.server, "key": i.key.key, "pid": i.pid,
                "ageMs": i.age.as_millis() as u64, "idleMs": i.idle.as_millis() as u64, "inUse": i.in_use,
            })
        })
        .collect();
    let started = front.daemon.started.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Json(json!({
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
        "url": front.daemon.url,
        "socket": front.daemon.socket.as_ref().map(|p| p.display().to_string()),
        "config": front.gateway.settings().path().map(|p| p.display().to_string()),
        "startedAt": started,
        "uptimeMs": front.daemon.started.elapsed().map(|d| d.as_millis() as u64).unwrap_or(0),
        "servers": servers,
        "instances": instances,
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct ToolsQuery {
    #[serde(default)]
    query: String,
}

async fn tools(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    Query(q): Query<ToolsQuery>,
) -> Response {
    let transport = match caller(&front, &peer, &headers) {
        Ok(t) => t,
        Err(refusal) => return refusal,
    };
    let params = json!({ "name": mcpx_gateway::tools::SEARCH, "arguments": { "query": q.query } });
    match call_tool(&front.gateway, &transport, params).await {
        Ok(result) => Json(result.get("structuredContent").cloned().unwrap_or(result)).into_response(),
        Err(e) => error(&e),
    }
}

async fn call(
    State(front): State<Arc<Front>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let transport = match caller(&front, &peer, &headers) {
        Ok(t) => t,
        Err(refusal) => return refusal,
    };
    let arguments: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return error(&RpcError::invalid_params("the body must be a JSON object: {server, tool, arguments}")),
        Err(e) => return error(&RpcError::parse_error(e)),
    };
    let params = json!({ "name": mcpx_gateway::tools::CALL, "arguments": arguments });
    match call_tool(&front.gateway, &transport, params).await {
        Ok(result) => Json(result).into_response(),
        Err(e) => error(&e),
    }
}

async fn stop(State(front): State<Arc<Front>>, ConnectInfo(peer): ConnectInfo<Peer>, headers: HeaderMap) -> Response {
    if let Err(refusal) = caller(&front, &peer, &headers) {
        return refusal;
    }
    front.daemon.stop.notify_one();
    (StatusCode::ACCEPTED, Json(json!({ "stopping": true, "pid": std::process::id() }))).into_response()
}

/// `mcpx serve` turns this connection into its stdio relay. Only over the unix socket, and
/// only for the process the kernel says is connected.
async fn stdio_upgrade(
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
    let named = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).filter(|s| !s.is_empty());
    let transport = Transport {
        session: Some(named.map(str::to_owned).unwrap_or_else(|| format!("mcp-{peer_pid}"))),
        cwd: socket::cwd_of(peer_pid),
        pid: Some(peer_pid),
        client: None,
        stdio: true,
    };
    let upgrade = hyper::upgrade::on(request);
    let front = front.clone();
    tokio::spawn(async move {
        let io = match upgrade.await {
            Ok(upgraded) => TokioIo::new(upgraded),
            Err(e) => return tracing::warn!("stdio relay upgrade failed: {e}"),
        };
        front.daemon.streams.fetch_add(1, Ordering::AcqRel);
        let (reader, writer) = tokio::io::split(io);
        stdio::serve_lines(front.gateway.clone(), transport, reader, writer).await;
        front.daemon.streams.fetch_sub(1, Ordering::AcqRel);
        front.daemon.touch();
    });
    (
        StatusCode::SWITCHING_PROTOCOLS,
        [(header::CONNECTION, HeaderValue::from_static("upgrade")), (header::UPGRADE, HeaderValue::from_static(STDIO_PROTOCOL))],
    )
        .into_response()
}

/// A tool call for a `/v1` caller, shaped like a handshake-era result (no protocol fields).
async fn call_tool(gateway: &Gateway, transport: &Transport, params: Value) -> Result<Value, RpcError> {
    let identity = gateway.identity(&params, transport);
    let ctx = CallContext::new(identity, Revision::LATEST_LEGACY, json!({}));
    let mut result = gateway.handle(&ctx, "tools/call", params).await?.result;
    shape_result(&mut result, "tools/call", Revision::LATEST_LEGACY, &Gateway::server_info(), Cacheability::PRIVATE_UNCACHED);
    Ok(result)
}

/// A JSON-RPC error as a `/v1` response: bad arguments are the caller's (400), the rest the
/// upstream's or mcpx's (502).
fn error(e: &RpcError) -> Response {
    let status = match e.code {
        code::INVALID_PARAMS | code::PARSE_ERROR | code::INVALID_REQUEST => StatusCode::BAD_REQUEST,
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_GATEWAY,
    };
    (status, Json(json!({ "error": e.to_value() }))).into_response()
}
