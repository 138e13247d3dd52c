//! The `/v1` API as types: each route's request and response bodies, written once and
//! used by both ends, the daemon's handlers (`api`) and the CLI (through [`V1Client`]).
//!
//! Field names are the wire's, exactly as `docs/api/openapi.json` documents them; a test
//! here checks an example of every type against that document, so renaming a field on
//! either side fails it. What an upstream owns (a tool's result, its input schema, the
//! questions it asks and the answers to them) stays `serde_json::Value`, passed through
//! untouched, as everywhere in mcpx.

mod client;

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use mcpx_protocol::RpcError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use client::{ClientError, V1Client};

/// `GET /v1/status`: the daemon, its servers and their live instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub pid: u32,
    pub version: String,
    pub url: String,
    pub socket: Option<String>,
    pub config: Option<String>,
    /// Unix seconds.
    pub started_at: u64,
    pub uptime_ms: u64,
    /// Threads the daemon serves on (the `workers` setting); 0 from a daemon that does not say.
    #[serde(default)]
    pub workers: usize,
    pub servers: Vec<ServerStatus>,
    pub instances: Vec<InstanceStatus>,
    /// Journal records dropped since the daemon started because the journal's queue was
    /// full; absent when the daemon keeps no journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_dropped: Option<u64>,
    /// This node of its cluster; absent when the daemon runs alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
}

/// A node's share of its cluster (`docs/cluster.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub node: String,
    /// Where the other nodes reach this one.
    pub url: String,
    pub lease_ttl_ms: u64,
    /// The instance keys this node owns, with each lease's fencing token.
    pub leases: Vec<LeaseStatus>,
    /// Keys this node took over from an owner that went away without releasing them:
    /// their upstreams started afresh here, without what the old instance held.
    pub recovered: Vec<RecoveredStatus>,
    /// Why the cluster's Redis cannot be used, while that lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_error: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseStatus {
    pub server: String,
    pub key: String,
    pub fence: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveredStatus {
    pub server: String,
    pub key: String,
    pub previous_owner: String,
    pub fence: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStatus {
    pub name: String,
    pub scope: String,
    /// Present while the server keeps failing to start, or crashing soon after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<Failing>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failing {
    pub failures: u32,
    pub last_error: String,
    pub retry_in_ms: u64,
    /// The failures are exits soon after starting, not failed starts.
    pub crash_loop: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    pub server: String,
    pub key: String,
    pub pid: Option<u32>,
    pub age_ms: u64,
    pub idle_ms: u64,
    pub in_use: usize,
}

/// `GET /v1/tools?query=`: words to look for; empty lists every tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsQuery {
    #[serde(default)]
    pub query: String,
}

/// The answer to `GET /v1/tools`: what `mcpx_search` finds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    #[serde(default)]
    pub query: String,
    pub tools: Vec<ToolEntry>,
    /// Servers whose tools could not be listed; absent when every one could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<Vec<Unavailable>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEntry {
    pub server: String,
    pub tool: String,
    /// How a script calls the tool: `tools.<server>.<tool>(args)`, or `call(…)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub js: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unavailable {
    pub server: String,
    pub error: String,
}

/// `POST /v1/call`, and `POST /v1/ask/begin`: a tool of an upstream server and its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    pub server: String,
    pub tool: String,
    /// The tool's own arguments; absent or null is `{}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
}

/// `POST /v1/exec`: an `mcpx_exec` script.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecRequest {
    /// The body of an async function.
    pub script: String,
    /// Lowers `exec.timeout` for this script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// What a call (`/v1/call`, `/v1/exec`, `/v1/ask/answer`) came to.
#[derive(Clone, Debug, PartialEq)]
pub enum CallOutcome {
    /// 200: the tool's result as the upstream gave it (`content`, `structuredContent`,
    /// `isError`), `isError: true` included.
    Done(Value),
    /// 202: an upstream asked a question; the call waits for this session's answer.
    Waiting(Waiting),
}

/// A call in progress, as its `status` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Running,
    InputRequired,
}

/// 202 from a call: the question it waits on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    /// Always `input_required`.
    pub status: CallStatus,
    pub question: Question,
}

impl Waiting {
    pub fn on(question: Question) -> Waiting {
        Waiting { status: CallStatus::InputRequired, question }
    }
}

/// A question an upstream asked during a call, waiting for the caller's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: String,
    pub server: String,
    pub tool: String,
    /// The upstream's questions by key: `{method, params}`.
    pub input_requests: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// The CLI command that answers it.
    pub answer: String,
}

/// `GET /v1/ask?id=`: one question (with `id`), else all of this session's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AskQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `GET /v1/ask` without `id`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuestionList {
    pub questions: Vec<Question>,
}

/// `POST /v1/ask/answer`: answers by question key (an `ElicitResult`, a
/// `CreateMessageResult` or a `ListRootsResult`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnswerRequest {
    pub id: String,
    pub responses: Map<String, Value>,
}

/// `POST /v1/ask/abandon`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbandonRequest {
    pub id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Abandoned {
    pub abandoned: String,
}

/// 202 from `POST /v1/ask/begin` (with `poll`), or from a poll while the call still runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Running {
    /// Always `running`.
    pub status: CallStatus,
    pub call: String,
    /// Where to poll for the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<String>,
}

impl Running {
    pub fn call(call: String, poll: Option<String>) -> Running {
        Running { status: CallStatus::Running, call, poll }
    }
}

/// `GET /v1/ask/poll?call=&waitMs=`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// How long to wait (default 25 s, at most a minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// `GET /v1/tasks`: the caller's tasks, oldest first. Each is a task as the 2026 tasks
/// extension shapes it (`taskId`, `status`, `statusMessage`, `createdAt`,
/// `lastUpdatedAt`, `ttlMs`, `pollIntervalMs`, and once it ended `result` or `error`),
/// kept as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskList {
    pub tasks: Vec<Value>,
}

/// `GET /v1/tasks/{id}?waitMs=`: how long to wait for the task to end before answering
/// (default 0, at most a minute).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// What `POST /v1/tasks` came to.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskStarted {
    /// 202: the task, to poll (`GET /v1/tasks/{id}`).
    Task(Value),
    /// 200: the call answered at once, without a task (its result, as `/v1/call` gives it).
    Done(Value),
}

/// What a poll found.
#[derive(Clone, Debug, PartialEq)]
pub enum PollOutcome {
    Done(Value),
    Waiting(Waiting),
    Running(Running),
}

/// `GET /v1/log`: which journal records, newest first. A caller sees only its own
/// principal's records, unless it is the daemon's owner (the local user) or in `http.admins`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// A tool's (or prompt's) name, or a resource's URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A session key as mcpx prints it (`session:<label>`, `process:<pid>`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Only calls that did not simply succeed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub errors: bool,
    /// Only records newer than this long ago: `"10m"`, `"1h"`, `"7d"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Only records written after the one with this id (`mcpx log --follow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// At most this many records (default 100, at most 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The answer to `GET /v1/log`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Log {
    pub records: Vec<LogRecord>,
    /// Records dropped since the daemon started because the journal's queue was full.
    pub dropped: u64,
}

/// One journaled request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogRecord {
    /// Its place in the journal: later records have larger ids.
    pub id: i64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
    pub client: Option<String>,
    pub session: Option<String>,
    /// `socket`, `http` or `http-session`.
    pub transport: String,
    pub revision: String,
    pub server: Option<String>,
    pub instance: Option<String>,
    pub method: String,
    pub name: Option<String>,
    /// Made by an `mcpx_exec` script.
    pub in_script: bool,
    pub duration_ms: f64,
    /// `ok`, `tool_error`, `error`, `timeout` or `refused`.
    pub outcome: String,
    /// The JSON-RPC error code, for an error.
    pub code: Option<i64>,
    pub bytes_in: i64,
    pub bytes_out: i64,
    /// As `journal.arguments` kept them; absent by default.
    pub arguments: Option<String>,
}

/// `GET /v1/stats`: how to group, and since when.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsQuery {
    /// `server` (default), `tool`, `client` or `session`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// The answer to `GET /v1/stats`: one entry per group, busiest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub by: String,
    pub groups: Vec<StatsGroup>,
    pub dropped: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsGroup {
    /// The server, `server.tool`, client or session; null where records had none.
    pub key: Option<String>,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

/// `GET /v1/artifacts`: the session's artifacts, oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArtifactList {
    pub artifacts: Vec<ArtifactEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactEntry {
    pub uri: String,
    pub name: String,
    pub mime_type: String,
    pub size: u64,
}

impl From<&mcpx_gateway::Artifact> for ArtifactEntry {
    fn from(a: &mcpx_gateway::Artifact) -> ArtifactEntry {
        ArtifactEntry { uri: a.uri(), name: a.name.clone(), mime_type: a.mime_type.clone(), size: a.size }
    }
}

/// 202 from `POST /v1/stop`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stopping {
    pub stopping: bool,
    pub pid: u32,
}

/// `POST /v1/auth/login` and `POST /v1/auth/logout`: which server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthServerRequest {
    pub server: String,
}

/// 200 from `POST /v1/auth/login`: a login under way, and the URL a person opens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginStarted {
    pub id: String,
    pub server: String,
    pub url: String,
    /// The login is dropped after this long (`oauth.loginTimeout`).
    pub expires_in_ms: u64,
}

/// `POST /v1/auth/wait`: the login to wait for, and for how long at most this time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginWait {
    pub id: String,
    /// Default 25000; at most 60000. The answer comes sooner when the login ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// 200 from `POST /v1/auth/wait`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoginProgress {
    pub id: String,
    /// `pending`, `done`, `failed` or `expired` (not completed within `oauth.loginTimeout`).
    pub status: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// 200 from `GET /v1/auth`: each HTTP server's shared credential. Never a token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthList {
    pub servers: Vec<AuthEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthEntry {
    pub server: String,
    /// `loggedIn`, `needsLogin` or `notRequired` (as far as mcpx has seen).
    pub state: String,
    /// Unix seconds when the access token expires, when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    pub scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

/// 200 from `POST /v1/auth/logout`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoggedOut {
    pub server: String,
    /// Whether the authorization server revoked the tokens (it offers revocation and
    /// said yes); they are forgotten either way.
    pub revoked: bool,
}

/// The body of every `/v1` error: a JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl From<&RpcError> for ErrorBody {
    fn from(e: &RpcError) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: e.code, message: e.message.clone(), data: e.data.clone() } }
    }
}

/// A request body the daemon reads, and how to describe its shape when one does not fit.
pub trait RequestBody: DeserializeOwned {
    const SHAPE: &'static str;
}

impl RequestBody for CallRequest {
    const SHAPE: &'static str = "a JSON object: {server, tool, arguments}";
}
impl RequestBody for ExecRequest {
    const SHAPE: &'static str = "a JSON object: {script, timeoutMs?}";
}
impl RequestBody for AnswerRequest {
    const SHAPE: &'static str = "{\"id\": …, \"responses\": {key: answer}}";
}
impl RequestBody for AuthServerRequest {
    const SHAPE: &'static str = "{\"server\": …}";
}
impl RequestBody for LoginWait {
    const SHAPE: &'static str = "{\"id\": …, \"waitMs\"?: …}";
}
impl RequestBody for AbandonRequest {
    const SHAPE: &'static str = "{\"id\": …}";
}

/// A caller's answer to a question an owner put to it, sent to the owner's
/// `/v1/cluster/relay/answer` by the node that relayed the request.
#[derive(Debug, Serialize, Deserialize)]
pub struct RelayAnswer {
    pub id: String,
    #[serde(flatten)]
    pub outcome: RelayOutcome,
}

/// What a caller answered: a result, or an error.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RelayOutcome {
    Result(Value),
    Error(ErrorDetail),
}

impl From<Result<Value, RpcError>> for RelayOutcome {
    fn from(outcome: Result<Value, RpcError>) -> RelayOutcome {
        match outcome {
            Ok(result) => RelayOutcome::Result(result),
            Err(e) => RelayOutcome::Error(ErrorBody::from(&e).error),
        }
    }
}

impl From<RelayOutcome> for Result<Value, RpcError> {
    fn from(outcome: RelayOutcome) -> Result<Value, RpcError> {
        match outcome {
            RelayOutcome::Result(result) => Ok(result),
            RelayOutcome::Error(e) => Err(rpc_error(e)),
        }
    }
}

/// The JSON-RPC error a `/v1` error body carries.
pub fn rpc_error(e: ErrorDetail) -> RpcError {
    RpcError { code: e.code, message: e.message, data: e.data }
}

/// A `/v1` request body as the handler takes it. Not JSON: a parse error; JSON of another
/// shape: invalid params naming the shape. Both are 400, in the `/v1` error body.
pub struct Body<T>(pub T);

impl<T: RequestBody, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Body<T>, Response> {
        let bytes = axum::body::Bytes::from_request(request, state).await.map_err(|rejection| {
            if rejection.status() != StatusCode::PAYLOAD_TOO_LARGE {
                return rejection.into_response();
            }
            let error = RpcError::invalid_request("request body exceeds http.maxBodyBytes");
            (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(ErrorBody::from(&error))).into_response()
        })?;
        serde_json::from_slice(&bytes).map(Body).map_err(|e| {
            let error = match e.classify() {
                serde_json::error::Category::Data => {
                    RpcError::invalid_params(format!("the body must be {}: {e}", T::SHAPE))
                }
                _ => RpcError::parse_error(e),
            };
            (StatusCode::BAD_REQUEST, axum::Json(ErrorBody::from(&error))).into_response()
        })
    }
}

#[cfg(test)]
mod tests;
