//! [`V1Client`]: the `/v1` API from the caller's side, one method per JSON route, over a
//! connection the caller opened itself. It never opens one: the CLI checks who listens on
//! the daemon's socket before it sends a byte, and hands over only a checked connection.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{
    AbandonRequest, Abandoned, AnswerRequest, ArtifactList, AskQuery, AuthList, AuthServerRequest, CallOutcome,
    CallRequest, CallStatus, ExecRequest, Log, LogQuery, LoggedOut, LoginProgress, LoginStarted, LoginWait,
    PollOutcome, PollQuery, Question, QuestionList, Running, Stats, StatsQuery, Status, Stopping, TaskList, TaskQuery,
    TaskStarted, ToolList, ToolsQuery, Waiting,
};
use crate::caller::SESSION_HEADER;

/// What a path segment or query value keeps as it is: RFC 3986's unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// Why a `/v1` request did not bring what it asked for.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Http(#[from] hyper::Error),
    #[error(transparent)]
    Request(#[from] hyper::http::Error),
    /// The daemon said no: the message of its error body, or its status when it gave none.
    #[error("{message}")]
    Refused { status: u16, message: String },
    #[error("the daemon's answer to {route} is not what /v1 describes: {source}")]
    Unreadable { route: String, source: serde_json::Error },
}

/// A `/v1` caller over one connection (HTTP/1.1, kept alive between its requests). Meant
/// for one command's few requests: the daemon closes a connection idle for
/// `http.headerReadTimeout`.
pub struct V1Client {
    sender: SendRequest<Full<Bytes>>,
    session: Option<String>,
}

impl V1Client {
    /// A client over `io`, naming `session` (`X-Mcpx-Session`) on each request if given.
    pub async fn handshake<I>(io: I, session: Option<String>) -> Result<V1Client, ClientError>
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) = http1::handshake(TokioIo::new(io)).await?;
        // The connection's own errors reach the request that is waiting on it.
        tokio::spawn(connection);
        Ok(V1Client { sender, session })
    }

    pub async fn status(&mut self) -> Result<Status, ClientError> {
        self.send(Method::GET, "/v1/status".into(), None).await?.json(StatusCode::OK)
    }

    pub async fn tools(&mut self, query: &ToolsQuery) -> Result<ToolList, ClientError> {
        self.send(Method::GET, with_query("/v1/tools", query), None).await?.json(StatusCode::OK)
    }

    pub async fn log(&mut self, query: &LogQuery) -> Result<Log, ClientError> {
        self.send(Method::GET, with_query("/v1/log", query), None).await?.json(StatusCode::OK)
    }

    pub async fn stats(&mut self, query: &StatsQuery) -> Result<Stats, ClientError> {
        self.send(Method::GET, with_query("/v1/stats", query), None).await?.json(StatusCode::OK)
    }

    pub async fn call(&mut self, call: &CallRequest) -> Result<CallOutcome, ClientError> {
        self.send(Method::POST, "/v1/call".into(), Some(json(call))).await?.call_outcome()
    }

    pub async fn exec(&mut self, script: &ExecRequest) -> Result<CallOutcome, ClientError> {
        self.send(Method::POST, "/v1/exec".into(), Some(json(script))).await?.call_outcome()
    }

    pub async fn artifacts(&mut self) -> Result<ArtifactList, ClientError> {
        self.send(Method::GET, "/v1/artifacts".into(), None).await?.json(StatusCode::OK)
    }

    /// An artifact's bytes, as they were kept.
    pub async fn artifact(&mut self, id: &str) -> Result<Bytes, ClientError> {
        let answer = self.send(Method::GET, artifact_path(id), None).await?;
        answer.expect(StatusCode::OK)?;
        Ok(answer.body)
    }

    pub async fn remove_artifact(&mut self, id: &str) -> Result<(), ClientError> {
        self.send(Method::DELETE, artifact_path(id), None).await?.expect(StatusCode::NO_CONTENT)
    }

    pub async fn stop(&mut self) -> Result<Stopping, ClientError> {
        self.send(Method::POST, "/v1/stop".into(), None).await?.json(StatusCode::ACCEPTED)
    }

    /// The questions waiting for this session.
    pub async fn questions(&mut self) -> Result<QuestionList, ClientError> {
        self.send(Method::GET, with_query("/v1/ask", &AskQuery::default()), None).await?.json(StatusCode::OK)
    }

    pub async fn question(&mut self, id: &str) -> Result<Question, ClientError> {
        let query = AskQuery { id: Some(id.to_owned()) };
        self.send(Method::GET, with_query("/v1/ask", &query), None).await?.json(StatusCode::OK)
    }

    pub async fn answer(&mut self, answer: &AnswerRequest) -> Result<CallOutcome, ClientError> {
        self.send(Method::POST, "/v1/ask/answer".into(), Some(json(answer))).await?.call_outcome()
    }

    pub async fn abandon(&mut self, abandon: &AbandonRequest) -> Result<Abandoned, ClientError> {
        self.send(Method::POST, "/v1/ask/abandon".into(), Some(json(abandon))).await?.json(StatusCode::OK)
    }

    /// Starts a call in the background; poll for its outcome.
    pub async fn begin(&mut self, call: &CallRequest) -> Result<Running, ClientError> {
        self.send(Method::POST, "/v1/ask/begin".into(), Some(json(call))).await?.json(StatusCode::ACCEPTED)
    }

    pub async fn poll(&mut self, query: &PollQuery) -> Result<PollOutcome, ClientError> {
        let answer = self.send(Method::GET, with_query("/v1/ask/poll", query), None).await?;
        if answer.status == StatusCode::ACCEPTED
            && let Ok(running @ Running { status: CallStatus::Running, .. }) = serde_json::from_slice(&answer.body)
        {
            return Ok(PollOutcome::Running(running));
        }
        Ok(match answer.call_outcome()? {
            CallOutcome::Done(result) => PollOutcome::Done(result),
            CallOutcome::Waiting(waiting) => PollOutcome::Waiting(waiting),
        })
    }

    /// Runs a call as a task: the task, or the call's result when it answered at once.
    pub async fn start_task(&mut self, call: &CallRequest) -> Result<TaskStarted, ClientError> {
        let answer = self.send(Method::POST, "/v1/tasks".into(), Some(json(call))).await?;
        if answer.status == StatusCode::ACCEPTED {
            return answer.json(StatusCode::ACCEPTED).map(TaskStarted::Task);
        }
        answer.json(StatusCode::OK).map(TaskStarted::Done)
    }

    /// This session's tasks.
    pub async fn tasks(&mut self) -> Result<TaskList, ClientError> {
        self.send(Method::GET, "/v1/tasks".into(), None).await?.json(StatusCode::OK)
    }

    /// One of this session's tasks, after waiting up to `query.wait_ms` for it to end.
    pub async fn task(&mut self, id: &str, query: &TaskQuery) -> Result<Value, ClientError> {
        self.send(Method::GET, with_query(&task_path(id), query), None).await?.json(StatusCode::OK)
    }

    pub async fn cancel_task(&mut self, id: &str) -> Result<Value, ClientError> {
        let path = format!("{}/cancel", task_path(id));
        self.send(Method::POST, path, None).await?.json(StatusCode::OK)
    }

    /// Each HTTP server's login state.
    pub async fn auth_list(&mut self) -> Result<AuthList, ClientError> {
        self.send(Method::GET, "/v1/auth".into(), None).await?.json(StatusCode::OK)
    }

    /// Begins a login of a server: the URL a person opens.
    pub async fn auth_login(&mut self, server: &str) -> Result<LoginStarted, ClientError> {
        let body = AuthServerRequest { server: server.to_owned() };
        self.send(Method::POST, "/v1/auth/login".into(), Some(json(&body))).await?.json(StatusCode::OK)
    }

    /// Where a login stands, after waiting a while for it to end.
    pub async fn auth_wait(&mut self, wait: &LoginWait) -> Result<LoginProgress, ClientError> {
        self.send(Method::POST, "/v1/auth/wait".into(), Some(json(wait))).await?.json(StatusCode::OK)
    }

    pub async fn auth_logout(&mut self, server: &str) -> Result<LoggedOut, ClientError> {
        let body = AuthServerRequest { server: server.to_owned() };
        self.send(Method::POST, "/v1/auth/logout".into(), Some(json(&body))).await?.json(StatusCode::OK)
    }

    async fn send(&mut self, method: Method, path: String, body: Option<Vec<u8>>) -> Result<Answer, ClientError> {
        let mut request = Request::builder().method(method).uri(&path).header("host", "mcpx");
        if let Some(session) = &self.session {
            request = request.header(SESSION_HEADER, session);
        }
        // Every method but GET needs it (admission), with or without a body; GET ignores it.
        let request = request
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        Ok(Answer { path, status, body: response.into_body().collect().await?.to_bytes() })
    }
}

/// A response, read whole.
struct Answer {
    path: String,
    status: StatusCode,
    body: Bytes,
}

impl Answer {
    fn expect(&self, status: StatusCode) -> Result<(), ClientError> {
        if self.status == status { Ok(()) } else { Err(self.refused()) }
    }

    fn json<T: DeserializeOwned>(&self, status: StatusCode) -> Result<T, ClientError> {
        self.expect(status)?;
        serde_json::from_slice(&self.body)
            .map_err(|source| ClientError::Unreadable { route: self.path.clone(), source })
    }

    /// 200 with the tool's result, or 202 with the question the call waits on.
    fn call_outcome(&self) -> Result<CallOutcome, ClientError> {
        if self.status == StatusCode::ACCEPTED
            && let Ok(waiting @ Waiting { status: CallStatus::InputRequired, .. }) = serde_json::from_slice(&self.body)
        {
            return Ok(CallOutcome::Waiting(waiting));
        }
        self.json(StatusCode::OK).map(CallOutcome::Done)
    }

    fn refused(&self) -> ClientError {
        #[derive(serde::Deserialize)]
        struct Refusal {
            error: Message,
        }
        #[derive(serde::Deserialize)]
        struct Message {
            message: String,
        }
        let status = self.status.as_u16();
        let message = match serde_json::from_slice::<Refusal>(&self.body) {
            Ok(refusal) => refusal.error.message,
            Err(_) => format!("the daemon answered {status}"),
        };
        ClientError::Refused { status, message }
    }
}

fn json(body: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(body).expect("a /v1 request body serialises")
}

fn task_path(id: &str) -> String {
    format!("/v1/tasks/{}", utf8_percent_encode(id, UNRESERVED))
}

fn artifact_path(id: &str) -> String {
    format!("/v1/artifacts/{}", utf8_percent_encode(id, UNRESERVED))
}

/// `path?key=value&…` for the fields of `query` that are set.
fn with_query(path: &str, query: &impl Serialize) -> String {
    let Ok(Value::Object(fields)) = serde_json::to_value(query) else { return path.to_owned() };
    let pairs: Vec<String> = fields
        .iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{}={}", utf8_percent_encode(key, UNRESERVED), utf8_percent_encode(&text, UNRESERVED))
        })
        .collect();
    if pairs.is_empty() { path.to_owned() } else { format!("{path}?{}", pairs.join("&")) }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use hyper::Response;
    use hyper::body::Incoming;
    use serde_json::{Map, json};

    use super::*;

    /// How the stand-in daemon answers `(method and path, session header, content type)`.
    type Reply = fn(&str, Option<&str>, Option<&str>) -> (u16, Value);

    /// A daemon stand-in on the other end of a socket pair, one connection kept alive.
    async fn client_of(session: Option<&str>, reply: Reply) -> V1Client {
        let (ours, theirs) = tokio::net::UnixStream::pair().expect("a socket pair");
        let service = hyper::service::service_fn(move |request: Request<Incoming>| async move {
            let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let asked = format!("{} {}", request.method(), request.uri());
            let (status, body) = reply(&asked, header(SESSION_HEADER).as_deref(), header("content-type").as_deref());
            let body = if body.is_null() { Bytes::new() } else { Bytes::from(body.to_string()) };
            Ok::<_, Infallible>(Response::builder().status(status).body(Full::new(body)).expect("a response"))
        });
        tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(theirs), service));
        V1Client::handshake(ours, session.map(str::to_owned)).await.expect("a handshake")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
    }

    #[test]
    fn a_call_that_waits_on_a_question_is_waiting_and_a_result_is_done_on_one_connection() {
        runtime().block_on(async {
            let mut client = client_of(Some("s1"), |asked, session, content_type| {
                assert_eq!((session, content_type), (Some("s1"), Some("application/json")), "{asked}");
                match asked {
                    "POST /v1/call" => (
                        202,
                        json!({"status": "input_required", "question": {
                        "id": "q1", "server": "a", "tool": "t", "inputRequests": {}, "expiresInMs": 5,
                        "answer": "mcpx ask answer q1 '<json answers by key>'"}}),
                    ),
                    "POST /v1/ask/answer" => (200, json!({"content": [], "isError": false})),
                    _ => (404, Value::Null),
                }
            })
            .await;
            let call = CallRequest { server: "a".into(), tool: "t".into(), arguments: None };
            let Ok(CallOutcome::Waiting(waiting)) = client.call(&call).await else { panic!("not waiting") };
            assert_eq!(waiting.question.id, "q1");
            let answer = AnswerRequest { id: "q1".into(), responses: Map::new() };
            let done = client.answer(&answer).await.expect("an answer");
            assert_eq!(done, CallOutcome::Done(json!({"content": [], "isError": false})));
        });
    }

    #[test]
    fn a_refusal_says_the_daemon_s_message_or_else_its_status() {
        runtime().block_on(async {
            let mut client = client_of(None, |asked, session, _| {
                assert_eq!(session, None, "{asked}");
                match asked {
                    "GET /v1/ask?id=nope" => {
                        (400, json!({"error": {"code": -32602, "message": "no question \"nope\""}}))
                    }
                    "POST /v1/ask/abandon" => (502, Value::Null),
                    "POST /v1/call" => (202, json!({"status": "running", "call": "c1"})),
                    _ => (404, Value::Null),
                }
            })
            .await;
            let refused = client.question("nope").await.expect_err("refused");
            assert!(matches!(&refused, ClientError::Refused { status: 400, .. }), "{refused:?}");
            assert_eq!(refused.to_string(), "no question \"nope\"");
            let refused = client.abandon(&AbandonRequest { id: "q1".into() }).await.expect_err("refused");
            assert_eq!(refused.to_string(), "the daemon answered 502");
            // A call answers 202 only with a question; anything else is no outcome.
            let call = CallRequest { server: "a".into(), tool: "t".into(), arguments: None };
            let refused = client.call(&call).await.expect_err("no outcome");
            assert_eq!(refused.to_string(), "the daemon answered 202");
        });
    }

    #[test]
    fn a_poll_tells_running_from_waiting_from_done() {
        runtime().block_on(async {
            let mut client = client_of(None, |asked, _, _| match asked {
                "GET /v1/ask/poll?call=c1" => (202, json!({"status": "running", "call": "c1"})),
                "GET /v1/ask/poll?call=c2" => (200, json!({"content": []})),
                _ => (404, Value::Null),
            })
            .await;
            let running = client.poll(&PollQuery { call: Some("c1".into()), wait_ms: None }).await;
            assert!(
                matches!(running, Ok(PollOutcome::Running(Running { ref call, .. })) if call == "c1"),
                "{running:?}"
            );
            let done = client.poll(&PollQuery { call: Some("c2".into()), wait_ms: None }).await;
            assert!(matches!(done, Ok(PollOutcome::Done(_))), "{done:?}");
        });
    }

    #[test]
    fn query_values_and_ids_are_percent_encoded_except_unreserved_characters() {
        assert_eq!(with_query("/v1/tools", &ToolsQuery::default()), "/v1/tools?query=");
        let query = ToolsQuery { query: "git diff/ä~x.y_z-1".into() };
        assert_eq!(with_query("/v1/tools", &query), "/v1/tools?query=git%20diff%2F%C3%A4~x.y_z-1");
        assert_eq!(with_query("/v1/ask", &AskQuery::default()), "/v1/ask");
        let poll = PollQuery { call: Some("a&b".into()), wait_ms: Some(10) };
        assert_eq!(with_query("/v1/ask/poll", &poll), "/v1/ask/poll?call=a%26b&waitMs=10");
        assert_eq!(artifact_path("../x y"), "/v1/artifacts/..%2Fx%20y");
    }
}
