//! The HTTP client every HTTP upstream shares: pooled keep-alive connections (HTTP/1.1, or
//! HTTP/2 where TLS negotiates it), TLS checked against the platform's roots, and the
//! redirects a server may answer an endpoint with.
//!
//! hyper's pooled client, with only what an MCP endpoint needs on top: no proxy, no cookie
//! store, no per-request URL parsing. A request is made by a function, so the common case
//! (no redirect) builds it once and a redirect builds it again rather than every request
//! keeping a copy. Redirects follow the rules browsers and reqwest follow: 307 and 308 keep
//! the method and body (Starlette, under FastMCP and the Python SDK, answers `/mcp/` with a
//! 307 to `/mcp`); 301 and 302 turn a POST into a GET, 303 anything into a GET, without the
//! body; at most [`MAX_REDIRECTS`]. Credentials never follow a redirect to another origin:
//! once a hop leaves the endpoint's scheme, host and port, `Authorization`, `Cookie` and
//! `Proxy-Authorization` are left off every request after it; and a redirect from https
//! into the clear fails the request (its body and headers would follow it).

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::client::legacy::Client as Pool;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// What an upstream answers: its head, and a body read as it arrives.
pub(crate) type Response = hyper::Response<hyper::body::Incoming>;

/// A request's body: the whole message, written before it is sent.
pub(crate) type Body = Full<Bytes>;

/// How many redirects one request follows before it fails.
pub(crate) const MAX_REDIRECTS: usize = 10;

/// How long an idle pooled connection is kept.
const IDLE_FOR: std::time::Duration = std::time::Duration::from_secs(90);

pub(crate) struct Client {
    pool: Pool<hyper_rustls::HttpsConnector<HttpConnector>, Body>,
}

/// The client, built on first use (the TLS roots are read then).
pub(crate) fn shared() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(Client::new)
}

impl Client {
    fn new() -> Client {
        // reqwest (OAuth, traces) takes the process's provider; this client names its own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .expect("the platform verifier builds with the ring provider");
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        // Requests are small writes answered at once: Nagle's delay would stall each one.
        tcp.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(tcp);
        let pool = Pool::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE_FOR)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Client { pool }
    }

    /// Sends the request `make` builds, following redirects (see the module's comment); each
    /// redirect builds it again, then points it at the new location.
    pub(crate) async fn send(&self, make: impl Fn() -> Request<Body>) -> Result<Response, String> {
        let mut request = make();
        let endpoint = request.uri().clone();
        let mut method = request.method().clone();
        let mut left_origin = false;
        for _ in 0..=MAX_REDIRECTS {
            let at = request.uri().clone();
            let response = self.pool.request(request).await.map_err(|e| with_causes(&e))?;
            let location = response.headers().get(header::LOCATION);
            let Some(next) = redirect(&method, &at, response.status(), location)? else { return Ok(response) };
            left_origin |= Origin::of(&next.uri) != Origin::of(&endpoint);
            request = make();
            *request.uri_mut() = next.uri;
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
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }
}

/// Where a redirect leads, and with which method.
struct Next {
    uri: Uri,
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
    Ok(Some(Next { uri, method }))
}

/// `url` as the URI a request goes to: without its fragment or credentials (see
/// [`basic_credentials`]).
pub(crate) fn uri_of(url: &url::Url) -> Result<Uri, String> {
    let mut url = url.clone();
    url.set_fragment(None);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.as_str().parse::<Uri>().map_err(|e| e.to_string())
}

/// The `Authorization: Basic` value that credentials in `url` (`user:password@host`) stand
/// for, as browsers and reqwest send them.
pub(crate) fn basic_credentials(url: &url::Url) -> Option<HeaderValue> {
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
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
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
}
