//! The HTTP client for authorization requests: its own pool, separate from the one that
//! talks MCP, with short timeouts, few redirects (none to a URL in the clear) and a bound on
//! what it reads, since every URL it fetches came from a server mcpx does not trust. For
//! the same reason each is made for one MCP server ([`Http::toward`]): the endpoints its
//! metadata names may be where that server is, or public, and never mcpx itself
//! (`mcpx_http::egress`).

use std::time::Duration;

use bytes::Bytes;
use mcpx_http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use mcpx_http::{Allowed, Body, Client, Egress, Method, Redirects, Request, Response, Uri};
use serde_json::Value;
use url::Url;

use crate::error::OAuthError;

/// Largest metadata or token response read.
const MAX_BODY: usize = 1024 * 1024;

/// How long one request may take, from connecting to its answer's last byte.
const TIMEOUT: Duration = Duration::from_secs(20);

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many redirects one request follows; the next is its answer.
const MOST_REDIRECTS: usize = 3;

#[derive(Clone)]
pub struct Http {
    client: Client,
    timeout: Duration,
}

/// A form POST's answer: its status and JSON body (`Null` when it was not JSON).
pub struct Posted {
    pub status: u16,
    pub body: Value,
}

impl Http {
    /// For the logins of the MCP server at `server`: its metadata's endpoints may lead
    /// where it is, to public addresses, or to `allow` (`egress.allow`).
    pub fn toward(server: &Url, allow: std::sync::Arc<[Allowed]>) -> Http {
        Http::with_timeout(TIMEOUT, Egress::toward(server).allowing(allow))
    }

    fn with_timeout(timeout: Duration, egress: Egress) -> Http {
        // Never into the clear: a 307 would repeat a token request's body there.
        let redirects = Redirects { most: MOST_REDIRECTS, fail_past_most: false, to: secure_enough };
        Http { client: Client::new(redirects, Some(CONNECT_TIMEOUT), egress), timeout }
    }

    /// A JSON document at `url`; `None` when the server has none there (any non-2xx, or
    /// not JSON).
    pub async fn get_json(&self, url: &Url) -> Result<Option<Value>, OAuthError> {
        let headers = [(ACCEPT, "application/json"), (HeaderName::from_static("mcp-protocol-version"), "2025-11-25")];
        let (status, body) = self.fetch(Method::GET, url.as_str(), headers, Bytes::new()).await?;
        if !(200..300).contains(&status) {
            return Ok(None);
        }
        Ok(serde_json::from_slice::<Value>(&body).ok().filter(Value::is_object))
    }

    /// POSTs a form; `basic` adds HTTP Basic client authentication (RFC 6749 §2.3.1:
    /// both halves form-urlencoded first).
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> Result<Posted, OAuthError> {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let mut headers = vec![(CONTENT_TYPE, "application/x-www-form-urlencoded".to_owned())];
        headers.push((ACCEPT, "application/json".to_owned()));
        if let Some((id, secret)) = basic {
            use base64::Engine as _;
            let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", enc(id), enc(secret)));
            headers.push((AUTHORIZATION, format!("Basic {pair}")));
        }
        let headers = headers.iter().map(|(name, value)| (name.clone(), value.as_str()));
        let (status, body) = self.fetch(Method::POST, url, headers, body.into()).await?;
        Ok(Posted { status, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
    }

    pub async fn post_json(&self, url: &str, body: &Value) -> Result<Posted, OAuthError> {
        let headers = [(CONTENT_TYPE, "application/json"), (ACCEPT, "application/json")];
        let body = serde_json::to_vec(body).expect("a JSON value serializes");
        let (status, body) = self.fetch(Method::POST, url, headers, body.into()).await?;
        Ok(Posted { status, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
    }

    /// A plain POST to a resource server (the probe for its challenge): its answer's head.
    pub async fn probe(&self, url: &Url, body: &'static str) -> Result<Response, OAuthError> {
        let headers = [(CONTENT_TYPE, "application/json"), (ACCEPT, "application/json, text/event-stream")];
        let uri = uri(url.as_str())?;
        let make = || request(Method::POST, &uri, headers.clone(), Bytes::from_static(body.as_bytes()));
        match tokio::time::timeout(self.timeout, self.client.send(make)).await {
            Ok(sent) => sent.map_err(|reason| unreachable(url.as_str(), reason)),
            Err(_) => Err(unreachable(url.as_str(), format!("no answer within {:?}", self.timeout))),
        }
    }

    /// One request and its whole answer (at most [`MAX_BODY`]), within the timeout.
    async fn fetch<'a>(
        &self,
        method: Method,
        url: &str,
        headers: impl IntoIterator<Item = (HeaderName, &'a str)> + Clone,
        body: Bytes,
    ) -> Result<(u16, Bytes), OAuthError> {
        let uri = uri(url)?;
        let make = || request(method.clone(), &uri, headers.clone(), body.clone());
        let exchange = async {
            let response = self.client.send(make).await?;
            let status = response.status().as_u16();
            Ok::<_, String>((status, mcpx_http::body(response, MAX_BODY).await?))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(done) => done.map_err(|reason| unreachable(url, reason)),
            Err(_) => Err(unreachable(url, format!("no answer within {:?}", self.timeout))),
        }
    }
}

fn uri(url: &str) -> Result<Uri, OAuthError> {
    let parsed = Url::parse(url).map_err(|e| unreachable(url, format!("not a URL: {e}")))?;
    mcpx_http::uri_of(&parsed).map_err(|e| unreachable(url, format!("not a URL: {e}")))
}

fn request<'a>(
    method: Method,
    uri: &Uri,
    headers: impl IntoIterator<Item = (HeaderName, &'a str)>,
    body: Bytes,
) -> Request<Body> {
    let mut request = Request::new(Body::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = uri.clone();
    for (name, value) in headers {
        if let Ok(mut value) = HeaderValue::from_str(value) {
            value.set_sensitive(name == AUTHORIZATION);
            request.headers_mut().insert(name, value);
        }
    }
    request
}

fn unreachable(url: &str, reason: String) -> OAuthError {
    // The client's message names neither the URL's secrets nor a body.
    OAuthError::Http { url: url.to_owned(), reason }
}

/// Only `https`, or `http` to a loopback host: tokens and codes never cross a network in
/// the clear.
pub fn secure_enough(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]" | "::1")),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client for a server at `url`, which the test's loopback servers are beside.
    fn near(url: &str) -> Http {
        Http::toward(&Url::parse(url).unwrap(), std::sync::Arc::from([]))
    }

    /// A loopback server that answers every request with a 307 to `location`.
    async fn redirecting(location: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let reply = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        url
    }

    #[tokio::test]
    async fn a_redirect_into_the_clear_is_not_followed() {
        // A 307 repeats the body: the code, the verifier, a refresh token, a client secret.
        let url = redirecting("http://elsewhere.invalid/token").await;
        let posted = near(&url).post_form(&url, &[("code", "c")], None).await.unwrap();
        assert_eq!(posted.status, 307, "the redirect was not followed");
        let got = near(&url).get_json(&Url::parse(&url).unwrap()).await.unwrap();
        assert_eq!(got, None);
    }

    /// A loopback server that answers each request (one per connection) with what
    /// `answer` makes of its path and body, counting them; its base URL and the count.
    async fn serving(answer: fn(&str, &str) -> String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = count.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut read = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = stream.read(&mut chunk).await.unwrap();
                    read.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&read).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                            .map_or(0, |n| n.trim().parse().unwrap());
                        if body.len() >= length || n == 0 {
                            break (head.to_owned(), body.to_owned());
                        }
                    }
                };
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                let _ = stream.write_all(answer(&path, &body).as_bytes()).await;
            }
        });
        (base, count)
    }

    fn reply(status: &str, headers: &str, body: &str) -> String {
        format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    }

    #[tokio::test]
    async fn a_307_to_a_loopback_url_is_followed_with_the_token_request_and_its_body() {
        let (base, _) = serving(|path, body| match path {
            "/token" => reply("307 Temporary Redirect", "Location: /moved/token\r\n", ""),
            _ => reply("200 OK", "Content-Type: application/json\r\n", &format!(r#"{{"at":"{path}","got":"{body}"}}"#)),
        })
        .await;
        let posted = near(&base).post_form(&format!("{base}/token"), &[("code", "c")], None).await.unwrap();
        assert_eq!(posted.status, 200);
        assert_eq!(posted.body, serde_json::json!({ "at": "/moved/token", "got": "code=c" }));
    }

    #[tokio::test]
    async fn three_redirects_are_followed_and_the_fourth_is_the_answer() {
        let (base, count) = serving(|_, _| reply("302 Found", "Location: /again\r\n", "")).await;
        let got = near(&base).get_json(&Url::parse(&format!("{base}/first")).unwrap()).await.unwrap();
        assert_eq!(got, None, "a redirect is not a document");
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 4, "the first request and three redirects");
    }

    #[tokio::test]
    async fn a_server_that_never_answers_fails_the_request_at_the_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        // Accepts, reads nothing, answers nothing, and keeps every connection open.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let http = Http::with_timeout(Duration::from_millis(300), Egress::toward(&Url::parse(&url).unwrap()));
        let failed = http.post_form(&url, &[("code", "c")], None).await.err().expect("no answer is an error");
        assert!(
            matches!(&failed, OAuthError::Http { reason, .. } if reason.contains("no answer within")),
            "{failed:?}"
        );
        let failed = http.get_json(&Url::parse(&url).unwrap()).await.expect_err("no answer is an error");
        assert!(matches!(&failed, OAuthError::Http { reason, .. } if reason.contains("no answer within")));
    }

    #[tokio::test]
    async fn an_answer_larger_than_the_bound_is_refused() {
        let (base, _) = serving(|_, _| reply("200 OK", "", &"x".repeat(MAX_BODY + 1))).await;
        let failed = near(&base).post_form(&format!("{base}/token"), &[], None).await.err().expect("refused");
        assert!(matches!(&failed, OAuthError::Http { reason, .. } if reason.contains("larger than")), "{failed:?}");
    }
}
