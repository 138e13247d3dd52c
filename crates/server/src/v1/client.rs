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
    AbandonRequest, Abandoned, AnswerRequest, ArtifactList, AskQuery, CallOutcome, CallRequest, CallStatus,
    ExecRequest, PollOutcome, PollQuery, Question, QuestionList, Running, Status, Stopping, ToolList, ToolsQuery,
    Waiting,
};
use crate::api::SESSION_HEADER;

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
    use super::*;

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
