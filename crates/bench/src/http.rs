//! An MCP client over Streamable HTTP: one keep-alive HTTP/1.1 connection per client, one
//! request in flight on it at a time.
//!
//! A 2026-07-28 request carries the headers that era requires (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`) next to the same body a stdio client would send; a 2025-11-25
//! one carries `MCP-Protocol-Version`, and the `Mcp-Session-Id` of a session opened on the
//! connection first, or none (for a `--stateless` server). Both
//! ask for JSON or SSE; the bench accepts only a JSON answer, which is what a server gives
//! when it has nothing to stream.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::mcp::{EchoCall, Era, LEGACY_VERSION, MODERN_VERSION};

/// The endpoint path every contender serves MCP on.
pub const MCP_PATH: &str = "/mcp";

pub struct HttpClient {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
    /// The 2025-11-25 session opened on this connection, if any.
    session: Option<HeaderValue>,
}

impl HttpClient {
    /// Opens the client's one connection to `addr`.
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<HttpClient> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
        // Requests are small and sequential per connection: send each at once.
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .with_context(|| format!("HTTP handshake with {addr}"))?;
        // The connection task ends when the sender is dropped or the server closes.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(HttpClient { sender, host: HeaderValue::from_str(&addr.to_string())?, session: None })
    }

    /// Opens a 2025-11-25 session (`initialize`, then `notifications/initialized`); the
    /// calls that follow on this connection carry its `Mcp-Session-Id`.
    pub async fn open_session(&mut self) -> anyhow::Result<()> {
        let (initialize, initialized) = Era::Legacy.handshake().context("the 2025-11-25 era has a handshake")?;
        let request = self.legacy_request().body(Full::new(Bytes::from(initialize.to_string())))?;
        let (head, body) = self.round_trip(request).await?;
        if head.status != StatusCode::OK {
            bail!("initialize: HTTP {}: {}", head.status, String::from_utf8_lossy(&body));
        }
        let session = head.headers.get("mcp-session-id").cloned();
        self.session = Some(session.context("initialize was answered without an Mcp-Session-Id")?);
        let request = self.legacy_request().body(Full::new(Bytes::from(initialized.to_string())))?;
        let (status, _, body) = self.exchange(request).await?;
        if status != StatusCode::ACCEPTED {
            bail!("notifications/initialized: HTTP {status}: {}", String::from_utf8_lossy(&body));
        }
        Ok(())
    }

    /// The `Mcp-Session-Id` of the 2025-11-25 session opened on this connection.
    pub fn session(&self) -> Option<String> {
        self.session.as_ref().and_then(|s| s.to_str().ok()).map(str::to_owned)
    }

    /// A POST to `/mcp` with the headers every request carries (host, content type, and
    /// JSON or SSE accepted).
    fn post(&self) -> hyper::http::request::Builder {
        Request::post(MCP_PATH)
            .header(HOST, self.host.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"))
    }

    /// A 2025-11-25 POST to `/mcp`, in this connection's session if it has one.
    fn legacy_request(&self) -> hyper::http::request::Builder {
        let request = self.post().header("MCP-Protocol-Version", HeaderValue::from_static(LEGACY_VERSION));
        match &self.session {
            Some(session) => request.header("Mcp-Session-Id", session.clone()),
            None => request,
        }
    }

    /// Sends `call` as request `id` and waits for its answer. Err when the connection
    /// failed; Ok(Err) is a wrong answer (status, content type or body).
    pub async fn call(&mut self, call: &EchoCall, id: u64) -> anyhow::Result<anyhow::Result<()>> {
        let request = match call.era {
            Era::Modern => self
                .post()
                .header("MCP-Protocol-Version", HeaderValue::from_static(MODERN_VERSION))
                .header("Mcp-Method", HeaderValue::from_static("tools/call"))
                .header("Mcp-Name", HeaderValue::from_static(call.name)),
            Era::Legacy => self.legacy_request(),
        };
        let (status, json, body) = self.exchange(request.body(Full::new(Bytes::from(call.request(id))))?).await?;
        Ok(check(status, json, &body).and_then(|reply| call.check(&reply, id)))
    }

    /// A 2026-07-28 request `body` (one JSON-RPC request for `method`) to `/mcp`; its JSON answer.
    pub async fn modern(&mut self, method: &'static str, body: String) -> anyhow::Result<serde_json::Value> {
        self.modern_named(method, None, body).await
    }

    /// As [`HttpClient::modern`], with the `Mcp-Name` header the methods that name a tool,
    /// prompt or resource need (plain text: the bench only names ASCII things).
    pub async fn modern_named(
        &mut self,
        method: &'static str,
        name: Option<&str>,
        body: String,
    ) -> anyhow::Result<serde_json::Value> {
        let mut request = self
            .post()
            .header("MCP-Protocol-Version", HeaderValue::from_static(MODERN_VERSION))
            .header("Mcp-Method", HeaderValue::from_static(method));
        if let Some(name) = name {
            request = request.header("Mcp-Name", HeaderValue::from_str(name)?);
        }
        let request = request.body(Full::new(Bytes::from(body)))?;
        let (status, json, body) = self.exchange(request).await?;
        check(status, json, &body)
    }

    /// `GET path` (the daemon's `/v1` API); its JSON answer.
    pub async fn get(&mut self, path: &str) -> anyhow::Result<serde_json::Value> {
        let request = Request::get(path).header(HOST, self.host.clone()).body(Full::new(Bytes::new()))?;
        let (status, json, body) = self.exchange(request).await?;
        check(status, json, &body)
    }

    /// The status, whether the answer is JSON, and its body.
    async fn exchange(&mut self, request: Request<Full<Bytes>>) -> anyhow::Result<(StatusCode, bool, Bytes)> {
        let (head, body) = self.round_trip(request).await?;
        let json = head
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        Ok((head.status, json, body))
    }

    /// Sends `request` on this connection and reads the whole answer.
    async fn round_trip(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> anyhow::Result<(hyper::http::response::Parts, Bytes)> {
        self.sender.ready().await.context("the connection closed")?;
        let response = self.sender.send_request(request).await.context("sending the request")?;
        let (head, body) = response.into_parts();
        let body = body.collect().await.context("reading the answer")?.to_bytes();
        Ok((head, body))
    }
}

fn check(status: StatusCode, json: bool, body: &[u8]) -> anyhow::Result<serde_json::Value> {
    if status != StatusCode::OK {
        bail!("HTTP {status}: {}", String::from_utf8_lossy(body));
    }
    if !json {
        bail!("the answer is not application/json: {}", String::from_utf8_lossy(body));
    }
    serde_json::from_slice(body).context("the answer is not JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_200_is_an_answer() {
        assert!(check(StatusCode::OK, true, br#"{"id":1}"#).is_ok());
        assert!(check(StatusCode::NOT_FOUND, true, br#"{"id":1}"#).is_err());
        assert!(check(StatusCode::OK, false, b"event: message\n").is_err());
        assert!(check(StatusCode::OK, true, b"not json").is_err());
    }
}
