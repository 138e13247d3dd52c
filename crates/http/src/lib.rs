//! The HTTP client mcpx sends with: to its HTTP upstreams (pooled keep-alive connections,
//! HTTP/1.1, or HTTP/2 where TLS negotiates it), to authorization servers, to the other
//! nodes of a cluster and to a traces collector; TLS checked against the platform's roots.
//!
//! hyper's pooled client, with only what mcpx needs on top: no proxy, no cookie store, no
//! per-request URL parsing, and the redirects each use allows ([`Redirects`]). A request is
//! made by a function, so the common case (no redirect) builds it once and a redirect builds
//! it again rather than every request keeping a copy. Redirects follow the rules browsers
//! follow: 307 and 308 keep the method and body (Starlette, under FastMCP and the Python SDK,
//! answers `/mcp/` with a 307 to `/mcp`); 301 and 302 turn a POST into a GET, 303 anything
//! into a GET, without the body. Credentials never follow a redirect to another origin:
//! once a hop leaves the first request's scheme, host and port, `Authorization`, `Cookie`
//! and `Proxy-Authorization` are left off every request after it. A redirect from https
//! into the clear, or to anything but HTTP, fails the request (its body and headers would
//! follow it). Where a request may go at all, first or redirected, is its client's
//! [`Egress`]: checked where each connection is made.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::header::{HeaderMap, HeaderValue};
use hyper_util::client::legacy::Client as Pool;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub mod egress;
pub use egress::{Allowed, Egress};

pub use hyper::body::Incoming;
pub use hyper::header;
pub use hyper::{Method, Request, StatusCode, Uri};
pub use url::Url;

/// What a server answers: its head, and a body read as it arrives.
pub type Response = hyper::Response<Incoming>;

/// A request's body: the whole message, written before it is sent.
pub type Body = Full<Bytes>;

/// How long an idle pooled connection is kept.
const IDLE_FOR: Duration = Duration::from_secs(90);

/// Which redirects a client follows.
#[derive(Clone, Copy)]
pub struct Redirects {
    /// How many one request follows.
    pub most: usize,
    /// Past `most`: the request fails (`true`), or the last redirect is the answer.
    pub fail_past_most: bool,
    /// Whether a hop to this location is followed; a redirect to one it refuses is the
    /// answer.
    pub to: fn(&url::Url) -> bool,
}

impl Redirects {
    /// What an MCP endpoint needs: up to 10, as browsers follow them; more fails.
    pub const FOLLOW: Redirects = Redirects { most: 10, fail_past_most: true, to: anywhere };
    /// None: a redirect is the answer.
    pub const NONE: Redirects = Redirects { most: 0, fail_past_most: false, to: anywhere };
}

fn anywhere(_: &url::Url) -> bool {
    true
}

#[derive(Clone)]
pub struct Client {
    pool: Pool<hyper_rustls::HttpsConnector<egress::Guarded>, Body>,
    redirects: Redirects,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("redirects", &self.redirects.most).finish_non_exhaustive()
    }
}

/// The TLS settings every client shares (the platform's roots are read once).
fn tls() -> &'static rustls::ClientConfig {
    static TLS: OnceLock<rustls::ClientConfig> = OnceLock::new();
    TLS.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .expect("the platform verifier builds with the ring provider");
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth()
    })
}

impl Client {
    /// A client with a pool of connections of its own, following `redirects`, sending
    /// only where `egress` allows; `connect_timeout` bounds each connection's TCP connect.
    pub fn new(redirects: Redirects, connect_timeout: Option<Duration>, egress: Egress) -> Client {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        // Requests are small writes answered at once: Nagle's delay would stall each one.
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(connect_timeout);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls().clone())
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(egress::Guarded { tcp, egress: Arc::new(egress) });
        let pool = Pool::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_FOR)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Client { pool, redirects }
    }

    /// Sends the request `make` builds, following redirects as the client allows (see the
    /// module's comment); each redirect builds it again, then points it at the new location.
    pub async fn send(&self, make: impl Fn() -> Request<Body>) -> Result<Response, String> {
        let mut request = make();
        let endpoint = request.uri().clone();
        let mut at = None::<Uri>;
        let mut method = request.method().clone();
        let mut left_origin = false;
        let mut followed = 0;
        loop {
            let response = match self.pool.request(request).await {
                Ok(response) => response,
                // A redirect is named: it is where the request went, not where it was sent.
                Err(e) => match &at {
                    Some(to) => return Err(format!("after a redirect to {to}: {}", with_causes(&e))),
                    None => return Err(with_causes(&e)),
                },
            };
            // Past the most it follows, a client that does not fail takes any answer as it is.
            if followed == self.redirects.most && !self.redirects.fail_past_most {
                return Ok(response);
            }
            let location = response.headers().get(header::LOCATION);
            let from = at.as_ref().unwrap_or(&endpoint);
            let Some(next) = redirect(&method, from, response.status(), location)? else { return Ok(response) };
            if !(self.redirects.to)(&next.url) {
                return Ok(response);
            }
            if followed == self.redirects.most {
                return Err(format!("more than {} redirects", self.redirects.most));
            }
            left_origin |= Origin::of(&next.uri) != Origin::of(&endpoint);
            request = make();
            *request.uri_mut() = next.uri.clone();
            if next.method != *request.method() {
                *request.method_mut() = next.method.clone();
                *request.body_mut() = Body::default();
                request.headers_mut().remove(header::CONTENT_TYPE);
                request.headers_mut().remove(header::CONTENT_LENGTH);
            }
            if left_origin {
                strip_credentials(request.headers_mut());
            }
            method = next.method;
            at = Some(next.uri);
            followed += 1;
        }
    }
}

/// A response's whole body; more than `limit` bytes is an error.
pub async fn body(response: Response, limit: usize) -> Result<Bytes, String> {
    match Limited::new(response.into_body(), limit).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(format!("an answer larger than {limit} bytes")),
        Err(e) => Err(with_causes(e.as_ref())),
    }
}

/// Where a redirect leads, and with which method.
struct Next {
    uri: Uri,
    url: url::Url,
    method: Method,
}

/// The request an answer of `status` to a `method` request at `at` asks for; `None` when
/// it is not a redirect to follow.
fn redirect(
    method: &Method,
    at: &Uri,
    status: StatusCode,
    location: Option<&HeaderValue>,
) -> Result<Option<Next>, String> {
    let method = match status {
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => method.clone(),
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND if *method == Method::POST => Method::GET,
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND => method.clone(),
        StatusCode::SEE_OTHER if *method == Method::HEAD => Method::HEAD,
        StatusCode::SEE_OTHER => Method::GET,
        _ => return Ok(None),
    };
    // A redirect without a usable location is the answer as it stands.
    let Some(location) = location.and_then(|l| l.to_str().ok()) else {
        return Ok(None);
    };
    let Ok(base) = url::Url::parse(&at.to_string()) else { return Ok(None) };
    let Ok(mut next) = base.join(location) else { return Ok(None) };
    if !matches!(next.scheme(), "http" | "https") {
        return Err(format!("a redirect to {location:?}, which is not HTTP"));
    }
    // What was sent over TLS is never sent again in the clear.
    if base.scheme() == "https" && next.scheme() == "http" {
        return Err(format!("a redirect from https to {location:?}, in the clear"));
    }
    next.set_fragment(None);
    let uri = uri_of(&next).map_err(|e| format!("a redirect to {location:?}: {e}"))?;
    Ok(Some(Next { uri, url: next, method }))
}

/// `url` as the URI a request goes to: without its fragment or credentials (see
/// [`basic_credentials`]).
pub fn uri_of(url: &url::Url) -> Result<Uri, String> {
    let mut url = url.clone();
    url.set_fragment(None);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.as_str().parse::<Uri>().map_err(|e| e.to_string())
}

/// The `Authorization: Basic` value that credentials in `url` (`user:password@host`) stand
/// for, as browsers send them.
pub fn basic_credentials(url: &url::Url) -> Option<HeaderValue> {
    use base64::Engine as _;
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
    let pair = format!("{}:{}", decode(url.username()), decode(url.password().unwrap_or_default()));
    let mut value =
        HeaderValue::from_str(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Scheme, host and port: what a credential is for.
#[derive(PartialEq)]
struct Origin {
    scheme: Option<String>,
    host: Option<String>,
    port: Option<u16>,
}

impl Origin {
    fn of(uri: &Uri) -> Origin {
        let scheme = uri.scheme_str().map(str::to_ascii_lowercase);
        let default = match scheme.as_deref() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        };
        Origin { host: uri.host().map(str::to_ascii_lowercase), port: uri.port_u16().or(default), scheme }
    }
}

fn strip_credentials(headers: &mut HeaderMap) {
    for name in [header::AUTHORIZATION, header::COOKIE, header::PROXY_AUTHORIZATION] {
        headers.remove(name);
    }
}

/// An error with what caused it ("client error (Connect): tcp connect error: Connection
/// refused (os error 111)"): hyper's own message alone names only the step that failed.
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Where a `method` request to `http://a.example/mcp/` goes on `status` with `location`.
    fn follow(method: Method, status: u16, location: Option<&str>) -> Result<Option<(Method, String)>, String> {
        let at: Uri = "http://a.example/mcp/".parse().unwrap();
        let location = location.map(|l| HeaderValue::from_str(l).unwrap());
        let next = redirect(&method, &at, StatusCode::from_u16(status).unwrap(), location.as_ref())?;
        Ok(next.map(|n| (n.method, n.uri.to_string())))
    }

    #[test]
    fn a_307_or_308_keeps_the_method_and_a_relative_location_resolves_against_the_request() {
        for status in [307, 308] {
            let next = follow(Method::POST, status, Some("/mcp")).unwrap();
            assert_eq!(next, Some((Method::POST, "http://a.example/mcp".to_owned())), "{status}");
        }
        let next = follow(Method::DELETE, 307, Some("other#frag")).unwrap();
        assert_eq!(next, Some((Method::DELETE, "http://a.example/mcp/other".to_owned())));
    }

    #[test]
    fn a_301_302_or_303_turns_a_post_into_a_get_as_browsers_do() {
        for status in [301, 302, 303] {
            let next = follow(Method::POST, status, Some("https://b.example/x")).unwrap();
            assert_eq!(next, Some((Method::GET, "https://b.example/x".to_owned())), "{status}");
        }
        assert_eq!(follow(Method::GET, 301, Some("/y")).unwrap().unwrap().0, Method::GET);
    }

    #[test]
    fn other_answers_and_redirects_without_a_location_stand_and_other_schemes_fail() {
        assert_eq!(follow(Method::POST, 200, Some("/elsewhere")).unwrap(), None);
        assert_eq!(follow(Method::POST, 304, Some("/elsewhere")).unwrap(), None);
        assert_eq!(follow(Method::POST, 307, None).unwrap(), None);
        assert!(follow(Method::POST, 307, Some("file:///etc/passwd")).is_err());
    }

    #[test]
    fn a_redirect_from_https_into_the_clear_fails() {
        let at: Uri = "https://a.example/mcp".parse().unwrap();
        let location = HeaderValue::from_static("http://a.example/mcp");
        let next = redirect(&Method::POST, &at, StatusCode::TEMPORARY_REDIRECT, Some(&location));
        assert!(next.is_err_and(|e| e.contains("in the clear")));
        let location = HeaderValue::from_static("https://b.example/mcp");
        assert!(redirect(&Method::POST, &at, StatusCode::TEMPORARY_REDIRECT, Some(&location)).unwrap().is_some());
    }

    #[test]
    fn origins_compare_scheme_host_and_port_with_defaults() {
        let of = |s: &str| Origin::of(&s.parse::<Uri>().unwrap());
        assert!(of("http://a.example/mcp") == of("http://A.example:80/other"));
        assert!(of("https://a.example/mcp") == of("https://a.example:443/"));
        assert!(of("http://a.example/mcp") != of("https://a.example/mcp"));
        assert!(of("http://a.example/mcp") != of("http://b.example/mcp"));
        assert!(of("http://a.example/mcp") != of("http://a.example:8080/mcp"));
    }

    #[test]
    fn credentials_in_a_url_become_basic_auth_and_leave_the_uri() {
        let url = url::Url::parse("http://us%40er:p%3Ass@host.example:8080/mcp#frag").unwrap();
        assert_eq!(basic_credentials(&url).unwrap().to_str().unwrap(), "Basic dXNAZXI6cDpzcw==");
        assert_eq!(uri_of(&url).unwrap().to_string(), "http://host.example:8080/mcp");
        assert!(basic_credentials(&url::Url::parse("http://host.example/mcp").unwrap()).is_none());
    }

    /// A loopback server that answers each request (one per connection) with what
    /// `answer` makes of its path and body; its base URL.
    async fn serving(answer: impl Fn(&str, &str) -> String + Send + Sync + 'static) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
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
                let reply = answer(&path, &body);
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        base
    }

    fn reply(status: &str, headers: &str, body: &str) -> String {
        format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    }

    fn post(client: &Client, url: &str, body: &'static str) -> impl Future<Output = Result<Response, String>> {
        let uri: Uri = url.parse().unwrap();
        let make = move || {
            let mut request = Request::new(Body::new(Bytes::from_static(body.as_bytes())));
            *request.method_mut() = Method::POST;
            *request.uri_mut() = uri.clone();
            request
        };
        async move { client.send(make).await }
    }

    #[tokio::test]
    async fn a_307_is_followed_with_the_method_and_body() {
        let base = serving(|path, body| match path {
            "/mcp/" => reply("307 Temporary Redirect", "Location: /mcp\r\n", ""),
            _ => reply("200 OK", "", &format!("{path} got {body}")),
        })
        .await;
        let client = Client::new(Redirects::FOLLOW, None, Egress::trusting());
        let response = post(&client, &format!("{base}/mcp/"), "the body").await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(body(response, 1024).await.unwrap(), "/mcp got the body");
    }

    #[tokio::test]
    async fn past_the_most_redirects_a_request_fails_or_ends_at_the_redirect_as_the_client_says() {
        let base = serving(|_, _| reply("307 Temporary Redirect", "Location: /again\r\n", "")).await;
        let failing = Client::new(Redirects { most: 2, ..Redirects::FOLLOW }, None, Egress::trusting());
        let failed = post(&failing, &format!("{base}/first"), "").await;
        assert_eq!(failed.err().as_deref(), Some("more than 2 redirects"));
        let answering =
            Client::new(Redirects { most: 2, fail_past_most: false, ..Redirects::FOLLOW }, None, Egress::trusting());
        assert_eq!(post(&answering, &format!("{base}/first"), "").await.unwrap().status(), 307);
        let none = Client::new(Redirects::NONE, None, Egress::trusting());
        assert_eq!(post(&none, &format!("{base}/first"), "").await.unwrap().status(), 307);
    }

    #[tokio::test]
    async fn a_client_that_follows_none_takes_even_a_redirect_it_could_not_follow_as_the_answer() {
        let base = serving(|_, _| reply("302 Found", "Location: file:///etc/passwd\r\n", "")).await;
        let none = Client::new(Redirects::NONE, None, Egress::trusting());
        assert_eq!(post(&none, &base, "").await.unwrap().status(), 302);
        let following = Client::new(Redirects::FOLLOW, None, Egress::trusting());
        assert!(post(&following, &base, "").await.is_err_and(|e| e.contains("not HTTP")));
    }

    #[tokio::test]
    async fn a_redirect_to_a_location_the_client_refuses_is_the_answer() {
        let base = serving(|path, _| match path {
            "/first" => reply("307 Temporary Redirect", "Location: http://elsewhere.invalid/token\r\n", ""),
            _ => reply("200 OK", "", "followed"),
        })
        .await;
        let not_elsewhere = |url: &url::Url| url.host_str() != Some("elsewhere.invalid");
        let client = Client::new(Redirects { to: not_elsewhere, ..Redirects::FOLLOW }, None, Egress::trusting());
        assert_eq!(post(&client, &format!("{base}/first"), "secret").await.unwrap().status(), 307);
    }

    #[tokio::test]
    async fn a_redirect_is_followed_only_where_the_clients_egress_allows_checked_on_resolved_names() {
        let base = serving(|path, _| match path {
            "/first" => reply("307 Temporary Redirect", "Location: /second\r\n", ""),
            _ => reply("200 OK", "", "followed"),
        })
        .await;
        let port = base.rsplit(':').next().unwrap();
        // No anchor: a loopback server is reached neither by address nor by a name for it.
        for url in [format!("{base}/first"), format!("http://localhost:{port}/first")] {
            let client = Client::new(Redirects::FOLLOW, None, Egress::default());
            let refused = post(&client, &url, "").await.err().unwrap_or_default();
            assert!(refused.contains("a loopback address") && refused.contains("egress.allow"), "{url}: {refused}");
        }
        // Allowed by name, by address: reached, and so is where it redirects.
        for allowed in ["localhost", "127.0.0.0/8"] {
            let allow: Arc<[Allowed]> = Arc::from(vec![Allowed::parse(allowed).unwrap()]);
            let client = Client::new(Redirects::FOLLOW, None, Egress::default().allowing(allow));
            let response = post(&client, &format!("http://localhost:{port}/first"), "").await.unwrap();
            assert_eq!(body(response, 100).await.unwrap(), "followed", "{allowed}");
        }
        // A redirect to mcpx's own address is refused, naming where it led.
        let own = serving(|_, _| reply("200 OK", "", "mcpx")).await;
        let _listening = egress::listening(own.trim_start_matches("http://").parse().unwrap());
        let location = format!("Location: {own}/v1/stop\r\n");
        let aimed = serving(move |_, _| reply("307 Temporary Redirect", &location, "")).await;
        let client = Client::new(Redirects::FOLLOW, None, Egress::trusting());
        let refused = post(&client, &aimed, "").await.err().unwrap_or_default();
        assert!(refused.starts_with(&format!("after a redirect to {own}/v1/stop: ")), "{refused}");
        assert!(refused.contains("where mcpx itself listens"), "{refused}");
    }

    #[tokio::test]
    async fn a_body_past_its_limit_is_refused() {
        let base = serving(|_, _| reply("200 OK", "", &"x".repeat(2000))).await;
        let client = Client::new(Redirects::NONE, None, Egress::trusting());
        let response = post(&client, &base, "").await.unwrap();
        assert_eq!(body(response, 1999).await.err().as_deref(), Some("an answer larger than 1999 bytes"));
        let response = post(&client, &base, "").await.unwrap();
        assert_eq!(body(response, 2000).await.unwrap().len(), 2000);
    }
}
