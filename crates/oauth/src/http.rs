//! The HTTP client for authorization requests: its own, separate from the one that talks
//! MCP, with short timeouts, few redirects (none to a URL in the clear) and a bound on what it reads, since every URL it
//! fetches came from a server mcpx does not trust.

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use url::Url;

use crate::error::OAuthError;

/// Largest metadata or token response read.
const MAX_BODY: usize = 1024 * 1024;

#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
}

/// A form POST's answer: its status and JSON body (`Null` when it was not JSON).
pub struct Posted {
    pub status: u16,
    pub body: Value,
}

impl Default for Http {
    fn default() -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(20))
            .connect_timeout(Duration::from_secs(10))
            // Never into the clear: a 307 would repeat a token request's body there.
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                if attempt.previous().len() >= 3 || !secure_enough(attempt.url()) {
                    attempt.stop()
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .expect("the HTTP client builds with the ring provider installed");
        Http { client }
    }
}

impl Http {
    /// A JSON document at `url`; `None` when the server has none there (any non-2xx, or
    /// not JSON).
    pub async fn get_json(&self, url: &Url) -> Result<Option<Value>, OAuthError> {
        let response = self
            .client
            .get(url.clone())
            .header(ACCEPT, "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .map_err(|e| unreachable(url.as_str(), e))?;
        if !response.status().is_success() {
            return Ok(None);
        }
        let body = read(url.as_str(), response).await?;
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
        let mut request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json");
        if let Some((id, secret)) = basic {
            use base64::Engine as _;
            let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", enc(id), enc(secret)));
            let mut value = HeaderValue::from_str(&format!("Basic {pair}"))
                .map_err(|_| OAuthError::Config("the client credentials cannot travel in a header".into()))?;
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        self.finish(url, request.body(body)).await
    }

    pub async fn post_json(&self, url: &str, body: &Value) -> Result<Posted, OAuthError> {
        let request = self.client.post(url).header(ACCEPT, "application/json").json(body);
        self.finish(url, request).await
    }

    async fn finish(&self, url: &str, request: reqwest::RequestBuilder) -> Result<Posted, OAuthError> {
        let response = request.send().await.map_err(|e| unreachable(url, e))?;
        let status = response.status().as_u16();
        let body = read(url, response).await?;
        Ok(Posted { status, body: serde_json::from_slice(&body).unwrap_or(Value::Null) })
    }

    /// A plain request to a resource server (the probe for its challenge).
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

async fn read(url: &str, mut response: reqwest::Response) -> Result<Vec<u8>, OAuthError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| unreachable(url, e))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(OAuthError::Http {
                url: url.to_owned(),
                reason: format!("answer larger than {MAX_BODY} bytes"),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn unreachable(url: &str, e: reqwest::Error) -> OAuthError {
    // reqwest's message may repeat the URL, never a body: no secret travels in either.
    OAuthError::Http { url: url.to_owned(), reason: e.without_url().to_string() }
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
        let posted = Http::default().post_form(&url, &[("code", "c")], None).await.unwrap();
        assert_eq!(posted.status, 307, "the redirect was not followed");
        let got = Http::default().get_json(&Url::parse(&url).unwrap()).await.unwrap();
        assert_eq!(got, None);
    }
}
