//! The `/v1` API, for the CLI and scripts: status, tool listing, tool calls, scripts
//! (`/v1/exec`) and their artifacts, tasks (`/v1/tasks`: calls run as tasks), stop, and `GET /v1/stdio`, the upgrade `mcpx serve`
//! uses to relay its stdio over the unix socket (served by `stdio::upgrade`).
//! Documented in `docs/api/openapi.json`.
//!
//! A `/v1` caller names its session with `X-Mcpx-Session` (a label, like the `_meta` key);
//! over the socket the daemon adds the peer's pid and cwd, over TCP they are unknown.

use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use mcpx_gateway::cluster::Kept;
use mcpx_gateway::{CallContext, Gateway, Identity, journal, policy};
use mcpx_protocol::shape::Cacheability;
use mcpx_protocol::shape::shape_result;
use mcpx_protocol::{Revision, RpcError, code};
use serde_json::{Value, json};

use crate::admission::Admitted;
use crate::caller;
use crate::front::Front;
use crate::reach::{Reach, Routes};
use crate::stdio;
use crate::v1;

pub use crate::caller::SESSION_HEADER;
pub use crate::stdio::{PID_HEADER, STDIO_PROTOCOL};

/// The `/v1` routes, each with who may use it (`reach`): a caller's own calls, tasks,
/// questions, artifacts and records are its own; stopping the daemon is the owner's and
/// `http.admins`'; the relay routes are another node's.
pub fn routes() -> Routes {
    use Reach::{Caller as Own, Daemon, Node};
    Routes::new()
        .route("/v1/status", Own, get(status))
        .route("/v1/tools", Own, get(tools))
        .route("/v1/call", Own, post(call))
        .route("/v1/exec", Own, post(exec))
        .route("/v1/artifacts", Own, get(artifact_list))
        .route("/v1/artifacts/{id}", Own, get(artifact_get).delete(artifact_remove))
        .route("/v1/stop", Daemon, post(stop))
        .route("/v1/ask", Own, get(ask_list))
        .route("/v1/ask/answer", Own, post(ask_answer))
        .route("/v1/ask/abandon", Own, post(ask_abandon))
        .route("/v1/ask/begin", Own, post(ask_begin))
        .route("/v1/ask/poll", Own, get(ask_poll))
        .route("/v1/stdio", Own, get(stdio::upgrade))
        .route("/v1/auth", Own, get(auth_list))
        // A shared credential's login is the owner's and `http.admins'` (the gateway
        // checks, by server); a `"credentials": "user"` one is the caller's own.
        .route("/v1/auth/login", Own, post(auth_login))
        .route("/v1/auth/wait", Own, post(auth_wait))
        .route("/v1/auth/logout", Own, post(auth_logout))
        .route("/v1/tasks", Own, get(task_list).post(task_start))
        .route("/v1/tasks/{id}", Own, get(task_get))
        .route("/v1/tasks/{id}/cancel", Own, post(task_cancel))
        .route("/v1/log", Own, get(log))
        .route("/v1/stats", Own, get(stats))
        .route("/v1/cluster/relay", Node, post(relayed))
        .route("/v1/cluster/relay/answer", Node, post(relay_answer))
}

/// Who a `/v1` caller is, resolved once: its transport as admission found it (token on TCP,
/// pid and cwd over the socket) and the session it names. Its request carries no `_meta`.
pub(crate) struct Caller(pub Identity);

impl FromRequestParts<Arc<Front>> for Caller {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, front: &Arc<Front>) -> Result<Caller, Response> {
        let Some(Admitted(mut transport)) = parts.extensions.get::<Admitted>().cloned() else {
            return Err((StatusCode::INTERNAL_SERVER_ERROR, "the request was not admitted\n").into_response());
        };
        front.life.touch();
        let label = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
        transport.session = caller::session(label, transport.pid);
        Ok(Caller(front.gateway.identity(&Value::Null, &transport)))
    }
}

/// A node's leases and takeovers, each shown to whoever may see its instance.
fn cluster_status(
    status: mcpx_gateway::cluster::ClusterStatus,
    principal: &mcpx_gateway::Principal,
    sees: impl Fn(&str) -> bool,
) -> v1::ClusterStatus {
    v1::ClusterStatus {
        node: status.node,
        url: status.url,
        lease_ttl_ms: status.lease_ttl.as_millis() as u64,
        leases: status
            .leases
            .into_iter()
            .filter(|(key, _)| sees(&key.server) && key.owner.is_visible_to(principal))
            .map(|(key, fence)| v1::LeaseStatus { server: key.server, key: key.owner.to_string(), fence })
            .collect(),
        recovered: status
            .recovered
            .into_iter()
            .filter(|r| sees(&r.key.server) && r.key.owner.is_visible_to(principal))
            .map(|r| v1::RecoveredStatus {
                server: r.key.server,
                key: r.key.owner.to_string(),
                previous_owner: r.previous,
                fence: r.fence,
            })
            .collect(),
        redis_error: status.redis_error,
    }
}

async fn status(State(front): State<Arc<Front>>, Caller(caller): Caller) -> Json<v1::Status> {
    Json(status_of(&front, &caller))
}

/// The daemon's status as `caller` may see it (`/v1/status`, and the start of `/ui/state`).
/// A server the caller's `clients` entry leaves out is absent, as from every listing:
/// its name, failures, instances and leases. The daemon's owner sees every server.
pub(crate) fn status_of(front: &Front, caller: &Identity) -> v1::Status {
    let config = front.gateway.settings().config();
    let access = policy::Access::of(&config, caller);
    let sees = |server: &str| matches!(caller.principal, mcpx_gateway::Principal::Local) || access.server(server);
    let failing = front.gateway.failing();
    let servers: Vec<v1::ServerStatus> = config
        .mcp_servers
        .iter()
        .filter(|(name, _)| sees(name))
        .map(|(name, s)| v1::ServerStatus {
            name: name.clone(),
            scope: s.scope.as_str().to_owned(),
            // A server that keeps failing to start, or crashing soon after it started: how
            // often, why, and when mcpx starts it again.
            failing: failing.iter().find(|f| &f.server == name).map(|f| v1::Failing {
                failures: f.failures,
                last_error: f.last_error.clone(),
                retry_in_ms: f.retry_in().as_millis() as u64,
                crash_loop: f.after_start,
            }),
        })
        .collect();
    let instances: Vec<v1::InstanceStatus> = front
        .gateway
        .instances()
        .into_iter()
        // A token holder sees the shared instances and its own, not other holders' sessions.
        .filter(|i| sees(&i.key.server) && i.key.owner.is_visible_to(&caller.principal))
        .map(|i| v1::InstanceStatus {
            server: i.key.server.clone(),
            key: i.key.owner.to_string(),
            pid: i.pid,
            age_ms: i.age.as_millis() as u64,
            idle_ms: i.idle.as_millis() as u64,
            in_use: i.in_use,
        })
        .collect();
    let started = front.life.started.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    // Where the daemon keeps its socket and config, and what every caller's journal lost,
    // are the daemon's own: the owner's and `http.admins'`, not any token holder's.
    let daemons = policy::acts_for_daemon(&config, &caller.principal);
    v1::Status {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        url: front.life.url.clone(),
        socket: front.life.socket.as_ref().filter(|_| daemons).map(|p| p.display().to_string()),
        config: front.gateway.settings().path().filter(|_| daemons).map(|p| p.display().to_string()),
        started_at: started,
        uptime_ms: front.life.started.elapsed().map(|d| d.as_millis() as u64).unwrap_or(0),
        servers,
        instances,
        journal_dropped: front.gateway.journal().filter(|_| daemons).map(|j| j.dropped()),
        workers: tokio::runtime::Handle::current().metrics().num_workers(),
        cluster: front.gateway.cluster().map(|c| cluster_status(c.status(), &caller.principal, sees)),
    }
}

async fn tools(State(front): State<Arc<Front>>, Caller(caller): Caller, Query(q): Query<v1::ToolsQuery>) -> Response {
    let params = json!({ "name": mcpx_gateway::tools::SEARCH, "arguments": { "query": q.query } });
    match call_tool(&front.gateway, &caller, params).await {
        Ok(result) => Json(tool_list(result.get("structuredContent").cloned().unwrap_or(result))).into_response(),
        Err(e) => error(&e),
    }
}

/// `mcpx_search`'s answer as the `/v1` listing. A tool an upstream listed with a name,
/// title or description that is not a string is left out (and logged), not fatal to the
/// listing of every other tool.
fn tool_list(mut found: Value) -> v1::ToolList {
    let mut take = |field: &str| found.get_mut(field).map(Value::take).unwrap_or_default();
    let (query, listed, unavailable) = (take("query"), take("tools"), take("unavailable"));
    let tools = match listed {
        Value::Array(listed) => listed
            .into_iter()
            .filter_map(|tool| match serde_json::from_value::<v1::ToolEntry>(tool) {
                Ok(tool) => Some(tool),
                Err(e) => {
                    tracing::warn!("/v1/tools leaves out a tool it cannot list: {e}");
                    None
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    v1::ToolList {
        query: query.as_str().unwrap_or_default().to_owned(),
        tools,
        unavailable: serde_json::from_value(unavailable).ok().flatten(),
    }
}

async fn call(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    v1::Body(call): v1::Body<v1::CallRequest>,
) -> Response {
    let call = json!(call);
    let params = call_params(&call, None);
    match onward.elsewhere(&front, &caller, &params).await {
        Ok(Some((node, kept))) => onward.forward(&front, &node, &kept, &caller, "/v1/call", &call).await,
        Ok(None) => continue_call(&front, &caller, call, None).await,
        Err(e) => error(&e),
    }
}

/// A request another node of the cluster relays to this one, the owner of its instance,
/// for a caller of its own (`NodeRequest`). Only a node may send it: anyone else is
/// refused, whatever it names.
async fn relayed(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    body: axum::body::Body,
) -> Response {
    let request = match node_body::<mcpx_gateway::cluster::NodeRequest>(&front, &onward, body).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    if request.method == "resources/subscribe" {
        return crate::relayed::subscription_answer(front.gateway.clone(), caller.principal, request);
    }
    if let Some(listen) = request.listen.clone() {
        let (gateway, questions) = (front.gateway.clone(), front.relayed_questions.clone());
        return crate::relayed::listened_answer(gateway, questions, caller.principal, request, listen);
    }
    match front.gateway.relayed(caller.principal, request, None).await {
        Ok(result) => Json(result).into_response(),
        Err(e) => error(&RpcError::from(e)),
    }
}

/// A caller's answer to a question an upstream asked during a request another node
/// relayed here, sent by that node: taken for the question of its id, only when the
/// request was for the principal the node vouches for, and only while the question waits.
async fn relay_answer(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    body: axum::body::Body,
) -> Response {
    let answer = match node_body::<v1::RelayAnswer>(&front, &onward, body).await {
        Ok(answer) => answer,
        Err(refused) => return refused,
    };
    if front.relayed_questions.answer(&answer.id, &caller.principal, answer.outcome.into()) {
        return StatusCode::NO_CONTENT.into_response();
    }
    let e = RpcError::invalid_params("no question of this id waits for this caller's answer");
    (StatusCode::NOT_FOUND, Json(v1::ErrorBody::from(&e))).into_response()
}

/// The body of a request only another node of the cluster may send (a relayed request, an
/// answer to a question): anyone else is refused (403) before the body is read at all,
/// whatever its size and whatever it names.
async fn node_body<T: serde::de::DeserializeOwned>(
    front: &Front,
    onward: &Onward,
    body: axum::body::Body,
) -> Result<T, Response> {
    if !onward.forwarded {
        let e = RpcError::invalid_request("only another node of this daemon's cluster may send this request");
        return Err((StatusCode::FORBIDDEN, Json(v1::ErrorBody::from(&e))).into_response());
    }
    // Admission read a node's body already, within what a relayed request may carry.
    let limit = crate::relayed::body_limit(&front.gateway.settings().config());
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        let e = RpcError::invalid_request("a relayed request over limits.maxLineBytes (or http.maxBodyBytes)");
        return Err((StatusCode::PAYLOAD_TOO_LARGE, Json(v1::ErrorBody::from(&e))).into_response());
    };
    serde_json::from_slice::<T>(&body)
        .map_err(|e| error(&RpcError::invalid_params(format!("not a node's request of this route: {e}"))))
}

/// A `/v1` request as it came, and whether it may go on to another node of the cluster:
/// a tool call whose instance another node owns (or whose first round another node
/// holds) is sent there whole, as `/mcp` requests are. A forwarded one goes no further.
struct Onward {
    headers: axum::http::HeaderMap,
    forwarded: bool,
}

impl FromRequestParts<Arc<Front>> for Onward {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _front: &Arc<Front>) -> Result<Onward, Response> {
        let forwarded = parts.extensions.get::<crate::cluster::Forwarded>().is_some();
        Ok(Onward { headers: parts.headers.clone(), forwarded })
    }
}

impl Onward {
    /// The other node that answers the tool call `params` for `caller`, if one does.
    async fn elsewhere(
        &self,
        front: &Front,
        caller: &Identity,
        params: &Value,
    ) -> Result<Option<(mcpx_gateway::cluster::Node, Kept)>, RpcError> {
        // What the socket told this node about a local caller (its pid and cwd) cannot
        // travel with the request: such a caller is answered here.
        let local = caller.pid.is_some() || caller.cwd.is_some();
        if self.forwarded || local || front.cluster.is_none() {
            return Ok(None);
        }
        let ctx = CallContext::new(caller.clone(), Revision::LATEST_MODERN, Value::Null);
        front.gateway.placement(&ctx, "tools/call", params).await.map_err(RpcError::from)
    }

    /// Sends the request (`body` at `target`) to `node` for `caller`, and relays its answer.
    async fn forward(
        &self,
        front: &Front,
        node: &mcpx_gateway::cluster::Node,
        kept: &Kept,
        caller: &Identity,
        target: &str,
        body: &Value,
    ) -> Response {
        let body = axum::body::Bytes::from(body.to_string());
        self.send(front, node, kept, caller, axum::http::Method::POST, target, body).await
    }

    /// Sends the request as `method` at `target` with `body` to `node` (which keeps
    /// `kept`) for `caller`.
    #[allow(clippy::too_many_arguments)]
    async fn send(
        &self,
        front: &Front,
        node: &mcpx_gateway::cluster::Node,
        kept: &Kept,
        caller: &Identity,
        method: axum::http::Method,
        target: &str,
        body: axum::body::Bytes,
    ) -> Response {
        let link = front.cluster.as_ref().expect("only a node of a cluster forwards");
        link.forward(node, kept, method, target, &self.headers, &caller.principal, body)
            .await
            .unwrap_or_else(|e| error(&e))
    }

    /// The other node that keeps what `id` names (a task, a begun call), read from the id
    /// by `node_of`; `None` when this node does, for a forwarded request, and for a caller
    /// on this node's socket (what the socket told this node cannot travel).
    fn keeper(
        &self,
        front: &Front,
        caller: &Identity,
        node_of: impl FnOnce() -> Option<mcpx_gateway::cluster::Node>,
    ) -> Option<mcpx_gateway::cluster::Node> {
        let link = front.cluster.as_ref()?;
        let local = caller.pid.is_some() || caller.cwd.is_some();
        if self.forwarded || local {
            return None;
        }
        node_of().filter(|node| node.id != link.node)
    }
}

/// Runs an `mcpx_exec` script (`{script, timeoutMs?}`) for a `/v1` caller: its tool result.
async fn exec(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(script): v1::Body<v1::ExecRequest>,
) -> Response {
    let params = json!({ "name": mcpx_gateway::exec::EXEC, "arguments": script });
    match call_tool(&front.gateway, &caller, params).await {
        Ok(mut result) => {
            plain(&mut result);
            Json(result).into_response()
        }
        Err(e) => error(&e),
    }
}

/// The artifacts of the caller's session.
async fn artifact_list(State(front): State<Arc<Front>>, Caller(caller): Caller) -> Json<v1::ArtifactList> {
    let listed = front.gateway.artifacts_of(&caller).await.iter().map(v1::ArtifactEntry::from).collect();
    Json(v1::ArtifactList { artifacts: listed })
}

/// One of the session's artifacts, as its bytes with its media type.
async fn artifact_get(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    match front.gateway.artifact(&caller, &id).await {
        Some((artifact, data)) => {
            let media = HeaderValue::from_str(&artifact.mime_type)
                .unwrap_or(HeaderValue::from_static("application/octet-stream"));
            ([(header::CONTENT_TYPE, media)], data).into_response()
        }
        None => no_artifact(&id),
    }
}

async fn artifact_remove(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    if front.gateway.remove_artifact(&caller, &id).await {
        StatusCode::NO_CONTENT.into_response()
    } else {
        no_artifact(&id)
    }
}

/// The journal's records this caller may read, newest first.
async fn log(State(front): State<Arc<Front>>, Caller(caller): Caller, Query(q): Query<v1::LogQuery>) -> Response {
    let mut filter = match journal_filter(&front, &caller, q.since.as_deref()) {
        Ok(filter) => filter,
        Err(e) => return error(&e),
    };
    filter.server = q.server;
    filter.tool = q.tool;
    filter.session = q.session;
    filter.errors_only = q.errors;
    filter.after_id = q.after;
    let query = journal::Query { filter, limit: q.limit.unwrap_or(100).clamp(1, 10_000) };
    let read = read_journal(&front, move |j| j.read(&query)).await;
    match read {
        Ok((records, dropped)) => {
            let records = records.into_iter().map(log_record).collect();
            Json(v1::Log { records, dropped }).into_response()
        }
        Err(e) => error(&e),
    }
}

/// Calls, errors and durations per group, over the records this caller may read.
async fn stats(State(front): State<Arc<Front>>, Caller(caller): Caller, Query(q): Query<v1::StatsQuery>) -> Response {
    let by_name = q.by.unwrap_or_else(|| "server".into());
    let Some(by) = journal::GroupBy::parse(&by_name) else {
        let message = format!("\"by\" must be server, tool, client, session or instance, not {by_name:?}");
        return error(&RpcError::invalid_params(message));
    };
    let filter = match journal_filter(&front, &caller, q.since.as_deref()) {
        Ok(filter) => filter,
        Err(e) => return error(&e),
    };
    match read_journal(&front, move |j| j.stats(&filter, by)).await {
        Ok((stats, dropped)) => {
            let groups = stats.into_iter().map(stats_group).collect();
            Json(v1::Stats { by: by_name, groups, dropped }).into_response()
        }
        Err(e) => error(&e),
    }
}

pub(crate) fn stats_group(s: journal::Stat) -> v1::StatsGroup {
    v1::StatsGroup {
        key: s.key,
        calls: s.calls,
        errors: s.errors,
        error_rate: s.error_rate,
        p50_ms: s.p50_ms,
        p95_ms: s.p95_ms,
        p99_ms: s.p99_ms,
    }
}

/// What the caller may see (its principal's records; the owner and `http.admins`,
/// everyone's) since when.
pub(crate) fn journal_filter(
    front: &Front,
    caller: &Identity,
    since: Option<&str>,
) -> Result<journal::Filter, RpcError> {
    let admin = policy::acts_for_daemon(&front.gateway.settings().config(), &caller.principal);
    let mut filter = if admin { journal::Filter::default() } else { journal::Filter::visible_to(&caller.principal) };
    if let Some(since) = since {
        let ago = journal::parse_duration(since).map_err(|e| RpcError::invalid_params(format!("\"since\": {e}")))?;
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        filter.since_ms = Some(now.saturating_sub(ago).as_millis() as i64);
    }
    Ok(filter)
}

/// Runs a read of the journal off the runtime; with the count of dropped records.
pub(crate) async fn read_journal<T: Send + 'static>(
    front: &Arc<Front>,
    read: impl FnOnce(&journal::Journal) -> Result<T, journal::StoreError> + Send + 'static,
) -> Result<(T, u64), RpcError> {
    let gateway = front.gateway.clone();
    let read = tokio::task::spawn_blocking(move || {
        let journal = gateway.journal().ok_or_else(|| "the journal is off (journal.enabled)".to_owned())?;
        read(journal).map(|found| (found, journal.dropped())).map_err(|e| format!("cannot read the journal: {e}"))
    });
    match read.await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(message)) => Err(RpcError::new(code::INTERNAL_ERROR, message)),
        Err(e) => Err(RpcError::new(code::INTERNAL_ERROR, format!("cannot read the journal: {e}"))),
    }
}

pub(crate) fn log_record(r: journal::Record) -> v1::LogRecord {
    v1::LogRecord {
        id: r.id,
        time_ms: r.time_ms,
        client: r.caller.client,
        session: r.caller.session,
        transport: r.caller.transport.to_owned(),
        revision: r.caller.revision,
        server: r.server,
        instance: r.instance,
        method: r.method,
        name: r.name,
        in_script: r.in_script,
        duration_ms: r.duration_us as f64 / 1000.0,
        outcome: r.outcome.as_str().to_owned(),
        code: r.code,
        bytes_in: r.bytes_in,
        bytes_out: r.bytes_out,
        arguments: r.arguments,
    }
}

fn no_artifact(id: &str) -> Response {
    let e = RpcError::invalid_params(format!("this session has no artifact {id:?}")).with_data(json!({ "id": id }));
    (StatusCode::NOT_FOUND, Json(v1::ErrorBody::from(&e))).into_response()
}

/// Runs an `mcpx_call` for a `/v1` caller: its result (200), or the questions it raised,
/// kept for the caller to answer later (202).
async fn continue_call(front: &Front, caller: &Identity, call: Value, answers: Option<(Value, Value)>) -> Response {
    let (status, body) = run_call(front, caller, call, answers).await;
    (status, Json(body)).into_response()
}

async fn run_call(
    front: &Front,
    caller: &Identity,
    call: Value,
    answers: Option<(Value, Value)>,
) -> (StatusCode, Value) {
    let params = call_params(&call, answers);
    match call_tool(&front.gateway, caller, params).await {
        Ok(result) if result["resultType"] == "input_required" => {
            let (lifetime, max) = {
                let config = front.gateway.settings().config();
                (config.timeouts.input_required, config.limits.pending_questions)
            };
            let cluster = front.gateway.cluster();
            match front.pending.store(cluster, caller, &call, &result, lifetime, max).await {
                Ok(question) => (StatusCode::ACCEPTED, json!(v1::Waiting::on(question.view()))),
                Err(e) => error_parts(&e),
            }
        }
        Ok(mut result) => {
            plain(&mut result);
            (StatusCode::OK, result)
        }
        Err(e) => error_parts(&e),
    }
}

/// The `mcpx_call` params of a `/v1` call, with a retry's answers and state.
fn call_params(call: &Value, answers: Option<(Value, Value)>) -> Value {
    let mut params = json!({ "name": mcpx_gateway::tools::CALL, "arguments": call });
    if let Some((responses, state)) = answers {
        params["inputResponses"] = responses;
        params["requestState"] = state;
    }
    params
}

/// Starts a call in the background (`{server, tool, arguments}`), for a caller that polls
/// for its outcome rather than holding a request open.
async fn ask_begin(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(call): v1::Body<v1::CallRequest>,
) -> Response {
    let call = json!(call);
    let config = front.gateway.settings().config();
    // In a cluster the id names this node (sealed), so a poll through any node comes here.
    let id = front.cluster.as_ref().map(|link| link.mint_node_id());
    let (id, outcome) =
        match front.pending.begin(&caller, config.timeouts.input_required, config.limits.pending_questions, id) {
            Ok(begun) => begun,
            Err(e) => return error(&e),
        };
    let runner = front.clone();
    tokio::spawn(async move {
        let (status, body) = run_call(&runner, &caller, call, None).await;
        let _ = outcome.send(Some((status.as_u16(), body)));
    });
    let poll = format!("/v1/ask/poll?call={id}");
    (StatusCode::ACCEPTED, Json(v1::Running::call(id, Some(poll)))).into_response()
}

/// Waits (long-poll, `waitMs`, at most a minute) for a begun call's outcome: its result
/// (200), a question (202, `input_required`), or still running (202, `running`).
async fn ask_poll(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    uri: axum::http::Uri,
    Query(q): Query<v1::PollQuery>,
) -> Response {
    let Some(id) = q.call else {
        return error(&RpcError::invalid_params("name the call to poll: ?call=<id>"));
    };
    // The node that began the call holds it: it answers, and checks whose it is.
    let link = front.cluster.as_ref();
    if let Some(node) = onward.keeper(&front, &caller, || link.and_then(|link| link.node_of_id(&id))) {
        let target = uri.path_and_query().map_or(uri.path(), |t| t.as_str());
        let kept = Kept::Call;
        return onward.send(&front, &node, &kept, &caller, axum::http::Method::GET, target, Default::default()).await;
    }
    let Some(mut outcome) = front.pending.call(&id, &caller) else {
        return error(&RpcError::invalid_params(format!("no call {id:?} runs for this session")));
    };
    let wait = std::time::Duration::from_millis(q.wait_ms.unwrap_or(25_000).min(60_000));
    let done = tokio::time::timeout(wait, outcome.wait_for(Option::is_some)).await;
    match done {
        Ok(Ok(finished)) => {
            let (status, body) = finished.clone().expect("waited for an outcome");
            front.pending.finish(&id);
            (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), Json(body)).into_response()
        }
        _ => (StatusCode::ACCEPTED, Json(v1::Running::call(id, None))).into_response(),
    }
}

/// The questions waiting for this caller (`?id=` for one).
async fn ask_list(State(front): State<Arc<Front>>, Caller(caller): Caller, Query(q): Query<v1::AskQuery>) -> Response {
    let mine = match front.pending.of(front.gateway.cluster(), &caller).await {
        Ok(mine) => mine,
        Err(e) => return error(&e),
    };
    match q.id {
        Some(id) => match mine.iter().find(|question| question.id == id) {
            Some(question) => Json(question.view()).into_response(),
            None => error(&no_such_question(&id)),
        },
        None => Json(v1::QuestionList { questions: mine.iter().map(|q| q.view()).collect() }).into_response(),
    }
}

/// Answers a waiting question (`{id, responses: {key: answer}}`) and carries the call on.
/// In a cluster, the answer goes on at the node the call's retry belongs to (the owner of
/// the instance that asked, or the node holding the call), which takes the question.
async fn ask_answer(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    v1::Body(answer): v1::Body<v1::AnswerRequest>,
) -> Response {
    let cluster = front.gateway.cluster();
    if cluster.is_some() && !onward.forwarded {
        let mine = match front.pending.of(cluster, &caller).await {
            Ok(mine) => mine,
            Err(e) => return error(&e),
        };
        let Some(question) = mine.into_iter().find(|q| q.id == answer.id) else {
            return error(&no_such_question(&answer.id));
        };
        let responses = Value::Object(answer.responses.clone());
        let params = call_params(&question.call, Some((responses, question.request_state)));
        match onward.elsewhere(&front, &caller, &params).await {
            Ok(Some((node, kept))) => {
                return onward.forward(&front, &node, &kept, &caller, "/v1/ask/answer", &json!(answer)).await;
            }
            Ok(None) => {}
            Err(e) => return error(&e),
        }
    }
    let question = match front.pending.take(cluster, &answer.id, &caller).await {
        Ok(Some(question)) => question,
        Ok(None) => return error(&no_such_question(&answer.id)),
        Err(e) => return error(&e),
    };
    continue_call(&front, &caller, question.call, Some((answer.responses.into(), question.request_state))).await
}

/// Gives up on a waiting question; the held upstream call is cancelled when it expires.
async fn ask_abandon(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(abandon): v1::Body<v1::AbandonRequest>,
) -> Response {
    match front.pending.take(front.gateway.cluster(), &abandon.id, &caller).await {
        Ok(Some(_)) => Json(v1::Abandoned { abandoned: abandon.id }).into_response(),
        Ok(None) => error(&no_such_question(&abandon.id)),
        Err(e) => error(&e),
    }
}

fn no_such_question(id: &str) -> RpcError {
    RpcError::invalid_params(format!(
        "no question {id:?} waits for this session (answered, abandoned, expired, or another session's)"
    ))
}

async fn stop(State(front): State<Arc<Front>>, _: Caller) -> (StatusCode, Json<v1::Stopping>) {
    front.life.request_stop();
    (StatusCode::ACCEPTED, Json(v1::Stopping { stopping: true, pid: std::process::id() }))
}

/// The credential of each HTTP server the caller may use: never a token. A server its
/// `clients` entry leaves out is not named.
async fn auth_list(State(front): State<Arc<Front>>, Caller(caller): Caller) -> Json<v1::AuthList> {
    let servers = front
        .gateway
        .auth_status(&caller.principal)
        .await
        .into_iter()
        .map(|s| v1::AuthEntry {
            server: s.server,
            state: match s.state {
                mcpx_oauth::AuthState::LoggedIn => "loggedIn",
                mcpx_oauth::AuthState::NeedsLogin => "needsLogin",
                mcpx_oauth::AuthState::NotRequired => "notRequired",
            }
            .into(),
            expires_at: s.expires_at,
            scopes: s.scopes,
            issuer: s.issuer,
        })
        .collect();
    Json(v1::AuthList { servers })
}

/// Begins a login: only the daemon's owner and `http.admins` may log in a shared credential (`login`).
async fn auth_login(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(request): v1::Body<v1::AuthServerRequest>,
) -> Response {
    match front.gateway.begin_login(&request.server, &caller.principal).await {
        Ok(login) => Json(v1::LoginStarted {
            id: login.id,
            server: login.server,
            url: login.url,
            expires_in_ms: login.expires_in.as_millis() as u64,
        })
        .into_response(),
        Err(e) => error(&RpcError::from(e)),
    }
}

/// Waits (a while) for a login to end: the caller's own (`login`).
async fn auth_wait(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(request): v1::Body<v1::LoginWait>,
) -> Response {
    let within = std::time::Duration::from_millis(request.wait_ms.unwrap_or(25_000).min(60_000));
    match front.gateway.wait_login(&request.id, &caller.principal, within).await {
        Ok(state) => {
            let (status, error) = match state {
                mcpx_oauth::LoginState::Pending => ("pending", None),
                mcpx_oauth::LoginState::Done => ("done", None),
                mcpx_oauth::LoginState::Failed(why) => ("failed", Some(why)),
                mcpx_oauth::LoginState::Expired => ("expired", None),
            };
            Json(v1::LoginProgress { id: request.id, status: status.into(), error }).into_response()
        }
        Err(e) => error(&RpcError::from(e)),
    }
}

/// Forgets a server's credential, revoking it where the server offers revocation.
async fn auth_logout(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(request): v1::Body<v1::AuthServerRequest>,
) -> Response {
    match front.gateway.logout(&request.server, &caller.principal).await {
        Ok(revoked) => Json(v1::LoggedOut { server: request.server, revoked }).into_response(),
        Err(e) => error(&RpcError::from(e)),
    }
}

/// Runs a call (`{server, tool, arguments}`) as a task: 202 with the task, or 200 with the
/// call's result when it answered at once.
async fn task_start(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    v1::Body(call): v1::Body<v1::CallRequest>,
) -> Response {
    let params = json!({ "name": mcpx_gateway::tools::CALL, "arguments": call });
    match front.gateway.start_task(&task_context(&caller), params).await {
        Ok(task) if task["resultType"] == "task" => {
            let mut task = task;
            task.as_object_mut().map(|t| t.remove("resultType"));
            (StatusCode::ACCEPTED, Json(task)).into_response()
        }
        Ok(result) if result["resultType"] == "input_required" => error(&RpcError::invalid_params(
            "the call asked a question before it could run as a task; run it with `mcpx call` to answer",
        )),
        Ok(mut result) => {
            plain(&mut result);
            Json(result).into_response()
        }
        Err(e) => error(&RpcError::from(e)),
    }
}

/// The caller's tasks: the same identity (principal and session) that started them.
///
/// In a cluster, every node's: this node asks each other live node for the caller's
/// tasks there (with the caller's principal, signed as any forwarded request is; that
/// node answers with its own tasks only, as for any forwarded request), and lists those
/// of nodes that are gone from their records in Redis. A live node that cannot be
/// reached, or has not answered within `cluster.leaseTtl`, is left out (its tasks are
/// out of reach too) and logged; one that
/// answers with anything but a listing fails the listing, naming it. A caller on this
/// node's socket, whose pid and cwd cannot travel, is answered with this node's tasks.
async fn task_list(State(front): State<Arc<Front>>, Caller(caller): Caller, onward: Onward) -> Response {
    let ctx = task_context(&caller);
    let mut tasks = front.gateway.tasks_of(&ctx);
    let local = caller.pid.is_some() || caller.cwd.is_some();
    let asking = front.cluster.as_ref().zip(front.gateway.cluster()).filter(|_| !onward.forwarded && !local);
    let Some((link, cluster)) = asking else {
        if onward.forwarded {
            // Asked by another node: and what this node kept before it restarted.
            let forgotten = front.gateway.tasks_left_behind(&ctx, &task_ids(&tasks), true).await;
            tasks.extend(forgotten);
        }
        return Json(v1::TaskList { tasks }).into_response();
    };
    let nodes = match cluster.other_nodes().await {
        Ok(nodes) => nodes,
        Err(e) => return error(&RpcError::internal(e.to_string())),
    };
    let limit = front.gateway.settings().config().http.max_body_bytes;
    // A node silent for a whole lease is as good as gone: it is left out, never waited on.
    let patience = cluster.lease_ttl();
    let (headers, principal) = (&onward.headers, &caller.principal);
    let asks = nodes.iter().map(|node| async move {
        let ask = async {
            let get = axum::http::Method::GET;
            let answer = link.send(node, get, "/v1/tasks", headers, principal, Default::default()).await?;
            let status = answer.status();
            let body = axum::body::to_bytes(axum::body::Body::new(answer.into_body()), limit).await;
            let listed = body.ok().filter(|_| status == StatusCode::OK);
            Ok(listed.and_then(|b| serde_json::from_slice::<v1::TaskList>(&b).ok()).ok_or(status))
        };
        let listed = tokio::time::timeout(patience, ask)
            .await
            .unwrap_or_else(|_| Err(format!("no listing within cluster.leaseTtl ({patience:?})")));
        (node, listed)
    });
    for (node, listed) in futures::future::join_all(asks).await {
        match listed {
            Ok(Ok(theirs)) => tasks.extend(theirs.tasks),
            Ok(Err(status)) => {
                tracing::warn!(node = node.id, url = node.url, %status, "listing tasks: a node answered no listing");
                let e =
                    format!("cluster node {:?} answered no listing of this caller's tasks (HTTP {status})", node.id);
                return error(&RpcError::internal(e));
            }
            Err(e) => {
                tracing::warn!(node = node.id, url = node.url, "listing tasks: a live node is unreachable: {e}");
            }
        }
    }
    // And those whose node is gone, from their records.
    let left = front.gateway.tasks_left_behind(&ctx, &task_ids(&tasks), false).await;
    tasks.extend(left);
    // Oldest first, as one node lists them.
    tasks.sort_by(|a, b| a["createdAt"].as_str().cmp(&b["createdAt"].as_str()));
    Json(v1::TaskList { tasks }).into_response()
}

/// The ids of the tasks listed.
fn task_ids(tasks: &[Value]) -> std::collections::HashSet<&str> {
    tasks.iter().filter_map(|t| t["taskId"].as_str()).collect()
}

/// One of the caller's tasks (`?waitMs=` waits for it to end); another's is 404, as none.
async fn task_get(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    uri: axum::http::Uri,
    axum::extract::Path(id): axum::extract::Path<String>,
    Query(q): Query<v1::TaskQuery>,
) -> Response {
    let keeper = front.gateway.task_node(&task_context(&caller), &id).await;
    if let Some(node) = onward.keeper(&front, &caller, || keeper) {
        let target = uri.path_and_query().map_or(uri.path(), |t| t.as_str());
        let kept = Kept::Task;
        return onward.send(&front, &node, &kept, &caller, axum::http::Method::GET, target, Default::default()).await;
    }
    let wait = std::time::Duration::from_millis(q.wait_ms.unwrap_or(0).min(60_000));
    match front.gateway.task_now(&task_context(&caller), &id, wait).await {
        Ok(task) => Json(task).into_response(),
        Err(e) => task_error(&RpcError::from(e)),
    }
}

/// Cancels one of the caller's tasks; another's is 404, as none.
async fn task_cancel(
    State(front): State<Arc<Front>>,
    Caller(caller): Caller,
    onward: Onward,
    uri: axum::http::Uri,
    axum::extract::Path(id): axum::extract::Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let keeper = front.gateway.task_node(&task_context(&caller), &id).await;
    if let Some(node) = onward.keeper(&front, &caller, || keeper) {
        let target = uri.path_and_query().map_or(uri.path(), |t| t.as_str());
        return onward.send(&front, &node, &Kept::Task, &caller, axum::http::Method::POST, target, body).await;
    }
    match front.gateway.cancel_task(&task_context(&caller), &id).await {
        Ok(task) => Json(task).into_response(),
        Err(e) => task_error(&RpcError::from(e)),
    }
}

/// A `/v1` caller as the tasks see it: a 2026 caller that declared the tasks extension.
fn task_context(identity: &Identity) -> CallContext {
    let capabilities = json!({
        "elicitation": {}, "sampling": {}, "roots": {},
        "extensions": { mcpx_protocol::meta::TASKS_EXTENSION: {} },
    });
    CallContext::new(identity.clone(), Revision::LATEST_MODERN, capabilities)
}

/// An unknown task (or another caller's, which is the same) is 404.
fn task_error(e: &RpcError) -> Response {
    let (status, body) = error_parts(e);
    let status = if e.code == code::INVALID_PARAMS { StatusCode::NOT_FOUND } else { status };
    (status, Json(body)).into_response()
}

/// A tool call for a `/v1` caller. It runs as a stateless caller that can be asked
/// anything (a person at a shell can fill a form, write a completion, name roots), so an
/// upstream's question comes back as `input_required` instead of failing the call.
async fn call_tool(gateway: &Gateway, identity: &Identity, params: Value) -> Result<Value, RpcError> {
    let identity = identity.clone();
    let capabilities = json!({ "elicitation": {}, "sampling": {}, "roots": {} });
    let ctx = CallContext::new(identity, Revision::LATEST_MODERN, capabilities);
    Ok(gateway.handle(&ctx, "tools/call", params).await?.result)
}

/// A tool result as a `/v1` caller gets it: plain, without the protocol's fields.
fn plain(result: &mut Value) {
    let cache = Cacheability::PRIVATE_UNCACHED;
    shape_result(result, "tools/call", Revision::LATEST_LEGACY, Gateway::server_info(), cache);
}

/// A JSON-RPC error as a `/v1` response: bad arguments are the caller's (400), the rest the
/// upstream's or mcpx's (502).
fn error(e: &RpcError) -> Response {
    let (status, body) = error_parts(e);
    (status, Json(body)).into_response()
}

fn error_parts(e: &RpcError) -> (StatusCode, Value) {
    let status = match e.code {
        code::INVALID_PARAMS | code::PARSE_ERROR | code::INVALID_REQUEST => StatusCode::BAD_REQUEST,
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_GATEWAY,
    };
    (status, json!(v1::ErrorBody::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_listed_with_a_name_that_is_not_a_string_is_left_out_and_the_others_are_kept() {
        let found = json!({
            "query": "x",
            "tools": [
                { "server": "a", "tool": "good", "description": "fine" },
                { "server": "a", "tool": null },
                { "server": "b", "tool": "odd", "title": 7 },
            ],
            "unavailable": [{ "server": "c", "error": "down" }],
        });
        let listing = tool_list(found);
        assert_eq!(listing.query, "x");
        assert_eq!(listing.tools.iter().map(|t| t.tool.as_str()).collect::<Vec<_>>(), ["good"]);
        assert_eq!(listing.unavailable.map(|u| u.len()), Some(1));
    }
}
