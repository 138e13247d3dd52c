//! Admission: the one step every request passes before any handler runs, whatever its
//! path or method, so a route added later is covered without anyone remembering to.
//! `daemon::router` wraps the whole router in it (the fallback included).
//!
//! In order, each refusal answered at once:
//!
//! 0. **A node of the cluster**: a request carrying `X-Mcpx-Node` must be signed with the
//!    cluster's key for this node, and taken once (`cluster::Link::verify`, over its
//!    body too); it is then admitted as the principal the forwarding node resolved,
//!    with no other check (no browser can sign); unsigned, replayed, or on a daemon in
//!    no cluster, it is refused (401).
//! 1. **Origin** (any listener): a present `Origin` must be a loopback origin or one of
//!    `http.allowedHosts` (403). A page on another site is refused before it can act.
//!    So is a request the browser marks `Sec-Fetch-Site: cross-site`: it covers what
//!    browsers send without an Origin (an `<img>`'s GET).
//! 2. **Host** (TCP): a present `Host` must name a loopback host, the address mcpx
//!    listens on (`http.host`, or the address the caller connected to when that is
//!    `0.0.0.0` or `::`), or one of `http.allowedHosts` (403). DNS rebinding points
//!    an attacker's name at the daemon, and the browser then sends that name as `Host` and
//!    no foreign `Origin` for "same-origin" requests; this applies however mcpx listens,
//!    since any port a browser can reach can be rebound. Over the unix socket no browser
//!    can connect, and clients name no real host there.
//! 3. **Authentication** (TCP, when `http.tokens` or `http.oauth` is set): a bearer token
//!    that is one of `http.tokens`, or an access token `bearer` validates (401 with a
//!    challenge naming the protected resource metadata), carrying the scopes the route
//!    requires (403 `insufficient_scope`; `/mcp` its own, every other path `/v1`'s:
//!    `/ui/state` and `/metrics` reveal what `/v1` does), [`admit_peer`]. The metadata itself
//!    (`resource_metadata`) is public while `http.oauth` is set: a client reads it to
//!    learn where to get a token.
//! 4. **Content type** (`/v1`): every method but `GET`, `HEAD` and `OPTIONS` needs
//!    `Content-Type: application/json` (415), body or not, so no CORS "simple request"
//!    (a form, `text/plain`, no preflight) can drive a state-changing route.
//!
//! It never reads the body (but a signed node request's, to check it against its
//! signature) and never resolves an identity: handlers do that after it,
//! from the [`Admitted`] transport it leaves in the request's extensions (the peer's pid
//! and cwd over the socket, the token's principal over TCP). A caller's token goes no
//! further than this step: only the principal it names does.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use mcpx_gateway::config::{Config, HttpConfig, OAuthResourceConfig};
use mcpx_gateway::{Principal, Transport};
use mcpx_protocol::RpcError;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::cluster;
use crate::front::Front;
use crate::listener::LocalAddr;
use crate::relayed;
use crate::reply::{self, Format};
use crate::resource_metadata;
use crate::socket::{self, Peer};

/// What admission learnt about the caller, for the handlers: its transport before the
/// request is read.
#[derive(Clone, Debug)]
pub struct Admitted(pub Transport);

/// The admission middleware (see the module documentation).
pub async fn admit(State(front): State<Arc<Front>>, mut request: Request, next: Next) -> Response {
    if request.headers().contains_key(cluster::NODE_HEADER) {
        return admit_node(&front, request, next).await;
    }
    let peer = request.extensions().get::<ConnectInfo<Peer>>().map(|ConnectInfo(peer)| peer.clone());
    // Owned, not the settings' guard: validating a token may wait on the network.
    let config: Arc<Config> = Arc::clone(&front.gateway.settings().config());
    let (method, path, headers) = (request.method(), request.uri().path(), request.headers());
    // A request that reached us without its connection's peer is treated as TCP: the
    // strictest case.
    let tcp = !matches!(peer, Some(Peer::Local { .. }));
    let local = request.extensions().get::<LocalAddr>().map(|LocalAddr(addr)| addr.ip());
    if let Err(why) = check_browser(headers, tcp.then_some(local), &config.http) {
        return refuse(path, StatusCode::FORBIDDEN, &why);
    }
    let Some(peer) = peer else {
        return refuse(path, StatusCode::INTERNAL_SERVER_ERROR, "the connection's peer is unknown");
    };
    if config.http.oauth.is_some() && resource_metadata::is_metadata(path) {
        return next.run(request).await;
    }
    let transport = match admit_peer(&front, &config, &peer, path, headers).await {
        Ok(transport) => transport,
        Err(refusal) => return *refusal,
    };
    if needs_json(method, path) && !is_json(headers) {
        let why =
            format!("{method} {path} takes Content-Type: application/json (send {{}} when there is nothing to say)");
        return refuse(path, StatusCode::UNSUPPORTED_MEDIA_TYPE, &why);
    }
    request.extensions_mut().insert(Admitted(transport));
    // A `/v1` handler reads its body whole (`/mcp` reads its own within the limit): a
    // body that grows past http.maxBodyBytes fails there, as 413.
    if request.uri().path().starts_with("/v1/") {
        let limit = config.http.max_body_bytes;
        request = request.map(|body| axum::body::Body::new(http_body_util::Limited::new(body, limit)));
    }
    next.run(request).await
}

/// A request that says it comes from another node of the cluster: admitted only under a
/// valid signature, as the principal that node vouches for. The head's signature is
/// checked before the body is read (a body is read only for a request a node signed),
/// then the body against the digest signed. Anything else carrying the node headers is
/// refused (401), whoever sent it: a caller cannot pass for a node. A signed request
/// needs no browser checks: no page can sign.
async fn admit_node(front: &Front, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let Some(link) = &front.cluster else {
        return refuse(
            &path,
            StatusCode::UNAUTHORIZED,
            "node-to-node requests are refused: this daemon is in no cluster",
        );
    };
    let (parts, body) = request.into_parts();
    let target = parts.uri.path_and_query().map_or(path.as_str(), |t| t.as_str());
    let refused = |why: String| {
        tracing::warn!("refused a request carrying node-to-node headers: {why}");
        refuse(&path, StatusCode::UNAUTHORIZED, &format!("not a node of this cluster: {why}"))
    };
    // The head first: a body is read only for a request another node signed.
    let vouched = match link.verify(&parts.method, target, &parts.headers) {
        Ok(vouched) => vouched,
        Err(why) => return refused(why),
    };
    let limit = match path.as_str() {
        relayed::RELAY_PATH | relayed::ANSWER_PATH => relayed::body_limit(&front.gateway.settings().config()),
        _ => front.gateway.settings().config().http.max_body_bytes,
    };
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        let why = match path.as_str() {
            relayed::RELAY_PATH | relayed::ANSWER_PATH => {
                "a relayed request over limits.maxLineBytes (or http.maxBodyBytes)"
            }
            _ => "request body exceeds http.maxBodyBytes",
        };
        return refuse(&path, StatusCode::PAYLOAD_TOO_LARGE, why);
    };
    let (forwarded, principal) = match link.accept(vouched, &body) {
        Ok(accepted) => accepted,
        Err(why) => return refused(why),
    };
    let mut request = Request::from_parts(parts, axum::body::Body::from(body));
    request.extensions_mut().insert(Admitted(Transport { principal, ..Transport::default() }));
    request.extensions_mut().insert(forwarded);
    next.run(request).await
}

/// What the transport says about a caller before the request is read: over the unix
/// socket, the peer's pid and the cwd the daemon reads for it; over TCP, when tokens or
/// OAuth are configured, the principal of the token presented (none → 401).
async fn admit_peer(
    front: &Front,
    config: &Config,
    peer: &Peer,
    path: &str,
    headers: &HeaderMap,
) -> Result<Transport, Box<Response>> {
    if let Peer::Local { pid, .. } = peer {
        return Ok(Transport { cwd: pid.and_then(socket::cwd_of), pid: *pid, ..Transport::default() });
    }
    let (tokens, oauth) = (&config.http.tokens, config.http.oauth.as_ref());
    if tokens.is_empty() && oauth.is_none() {
        return Ok(Transport::default());
    }
    // The scheme is case-insensitive (RFC 6750 §2.1, RFC 9110 §11.1).
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    // Every configured token is compared, so the time taken says nothing about which
    // one (if any) matched.
    let matched = presented.and_then(|p| {
        tokens.iter().fold(None, |found, (name, t)| {
            let equal = secrets_equal(t.as_bytes(), p.as_bytes());
            found.or(equal.then_some(name))
        })
    });
    if let Some(name) = matched {
        return Ok(Transport { principal: Principal::Token(name.clone()), ..Transport::default() });
    }
    let Some(oauth) = oauth else {
        let mut response = reply::status(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return Err(Box::new(response));
    };
    let resource = resource_metadata::resource_url(oauth, &front.life.url);
    let required = required_scopes(oauth, path);
    let challenged = |status: StatusCode, error: Option<&str>, why: &str| {
        let scopes = if required.is_empty() { oauth.scopes_supported() } else { required.to_vec() };
        let mut response = refuse(path, status, why);
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, resource_metadata::challenge(&resource, error, &scopes));
        Box::new(response)
    };
    let Some(token) = presented else {
        return Err(challenged(StatusCode::UNAUTHORIZED, None, "an access token is required (Authorization: Bearer)"));
    };
    let grant = match front.bearer.authenticate(oauth, &resource, token).await {
        Ok(grant) => grant,
        Err(why) => {
            // The reason, never the token; the caller learns only that it was refused.
            tracing::info!(path, "access token refused: {why}");
            return Err(challenged(StatusCode::UNAUTHORIZED, Some("invalid_token"), "the access token is not valid"));
        }
    };
    if let Some(missing) = required.iter().find(|scope| !grant.scopes.contains(scope)) {
        let why = format!("the access token lacks scope {missing:?}");
        return Err(challenged(StatusCode::FORBIDDEN, Some("insufficient_scope"), &why));
    }
    Ok(Transport { principal: grant.principal, ..Transport::default() })
}

/// The scopes an access token needs for `path` (`http.oauth.requiredScopes`): `/mcp`
/// its own; every other path `/v1`'s, since each reveals what `/v1` does (`/ui/state`
/// is `/v1/status` and the journal, `/metrics` every call's counters), and a route added
/// later is covered without anyone remembering to.
fn required_scopes<'a>(oauth: &'a OAuthResourceConfig, path: &str) -> &'a [String] {
    if path == "/mcp" { &oauth.required_scopes.mcp } else { &oauth.required_scopes.v1 }
}

/// Compares secrets without leaking, through timing, how much of a guess was right or
/// how long the secret is: both sides are hashed first, and the digests (always 32
/// bytes) are compared whole, without stopping at the first difference.
fn secrets_equal(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Steps 1 and 2: what a browser could send on behalf of a foreign page. `tcp` holds the
/// address the caller connected to, when known; `None` for the unix socket.
fn check_browser(headers: &HeaderMap, tcp: Option<Option<IpAddr>>, http: &HttpConfig) -> Result<(), String> {
    if headers.get("sec-fetch-site").is_some_and(|site| site.as_bytes().eq_ignore_ascii_case(b"cross-site")) {
        return Err("forbidden: a request another site's page made (Sec-Fetch-Site: cross-site)".into());
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .ok()
            // "null" and other opaque origins have no authority: never a loopback page.
            .and_then(|o| o.split_once("://"))
            .is_some_and(|(_, authority)| host_allowed(authority, http, None));
        if !allowed {
            return Err(format!(
                "forbidden Origin {origin:?}: mcpx accepts browser requests from loopback origins (and http.allowedHosts) only"
            ));
        }
    }
    if let Some(local) = tcp
        && let Some(host) = headers.get(header::HOST)
        && !host.to_str().is_ok_and(|h| host_allowed(h, http, Some(local)))
    {
        return Err(format!(
            "forbidden Host {host:?}: not a loopback name, the address mcpx listens on, or one of http.allowedHosts"
        ));
    }
    Ok(())
}

/// Whether the host of `authority` (`host[:port]`, `[v6][:port]`) is loopback, one of
/// `http.allowedHosts`, or (for `Host`, given the address the caller connected to) the
/// address mcpx listens on. Ports are not compared: a proxy may front mcpx on another port.
fn host_allowed(authority: &str, http: &HttpConfig, listening: Option<Option<IpAddr>>) -> bool {
    let host = host_of(authority);
    if host.is_empty() {
        return false;
    }
    let listening_address = listening.is_some_and(|connected_to| {
        let configured = !is_unspecified(&http.host) && host.eq_ignore_ascii_case(host_of(&http.host));
        let reached = connected_to.is_some_and(|ip| host.parse::<IpAddr>().is_ok_and(|h| h == ip));
        configured || reached
    });
    is_loopback_host(host)
        || listening_address
        || http.allowed_hosts.iter().any(|allowed| host.eq_ignore_ascii_case(host_of(allowed)))
}

fn host_of(authority: &str) -> &str {
    let authority = authority.trim().trim_end_matches('/');
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match authority.rsplit_once(':') {
        // A bare IPv6 address (as `http.host` may be written) has colons but no port.
        Some((host, _)) if !host.contains(':') => host,
        _ => authority,
    }
}

fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `0.0.0.0` and `::` name every address, so no `Host` can be "the listening address".
fn is_unspecified(host: &str) -> bool {
    host_of(host).parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified())
}

fn needs_json(method: &Method, path: &str) -> bool {
    let v1 = path == "/v1" || path.starts_with("/v1/");
    v1 && !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// A refusal in the shape of the route: a JSON-RPC error on `/mcp`, the `/v1` error
/// object elsewhere.
fn refuse(path: &str, status: StatusCode, why: &str) -> Response {
    let e = RpcError::invalid_request(why);
    if path == "/mcp" {
        return reply::error(status, Format::Json, None, &e);
    }
    (status, Json(json!({ "error": e.to_value() }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        pairs.iter().map(|(n, v)| (n.clone(), v.parse().unwrap())).collect()
    }

    #[test]
    fn only_loopback_hosts_pass_by_default() {
        let http = HttpConfig::default();
        for ok in ["localhost", "LocalHost:3000", "127.0.0.1:80", "127.9.9.9", "[::1]:8080", "[::1]"] {
            assert!(host_allowed(ok, &http, Some(None)), "{ok}");
        }
        for bad in ["evil.example.com", "evil.example:7750", "10.0.0.1", "localhost.evil.com", "[::2]:1", ""] {
            assert!(!host_allowed(bad, &http, Some(None)), "{bad}");
        }
    }

    #[test]
    fn the_listening_address_and_allowed_hosts_pass_as_host() {
        let http =
            HttpConfig { host: "192.168.1.5".into(), allowed_hosts: vec!["mcpx.lan".into()], ..HttpConfig::default() };
        assert!(host_allowed("192.168.1.5:7750", &http, Some(None)));
        assert!(!host_allowed("192.168.1.5:7750", &http, None), "an Origin is never the listening address");
        assert!(host_allowed("MCPX.lan:443", &http, Some(None)));
        let any = HttpConfig { host: "0.0.0.0".into(), ..HttpConfig::default() };
        let reached = Some(Some("10.1.2.3".parse().unwrap()));
        assert!(host_allowed("10.1.2.3:7750", &any, reached), "the address the caller connected to");
        assert!(!host_allowed("10.1.2.4:7750", &any, reached));
        assert!(!host_allowed("0.0.0.0:7750", &any, reached));
        assert!(!host_allowed("evil.example", &any, reached));
    }

    #[test]
    fn a_foreign_origin_or_host_is_refused_and_a_local_one_passes() {
        let http = HttpConfig::default();
        let h = headers(&[(header::ORIGIN, "http://evil.example.com")]);
        assert!(check_browser(&h, None, &http).is_err(), "Origin is checked on the socket too");
        assert!(check_browser(&headers(&[(header::ORIGIN, "null")]), Some(None), &http).is_err());
        let h = headers(&[(header::ORIGIN, "http://localhost:5173"), (header::HOST, "127.0.0.1:7750")]);
        assert!(check_browser(&h, Some(None), &http).is_ok());
        let h = headers(&[(header::HOST, "evil.example:7750")]);
        assert!(check_browser(&h, Some(None), &http).is_err());
        assert!(check_browser(&h, None, &http).is_ok(), "the socket's clients name no real host");
        let h = headers(&[
            (header::HOST, "127.0.0.1:7750"),
            (header::HeaderName::from_static("sec-fetch-site"), "cross-site"),
        ]);
        assert!(check_browser(&h, Some(None), &http).is_err());
        let h = headers(&[
            (header::HOST, "127.0.0.1:7750"),
            (header::HeaderName::from_static("sec-fetch-site"), "same-site"),
        ]);
        assert!(check_browser(&h, Some(None), &http).is_ok(), "another loopback port is the same site");
    }

    #[test]
    fn only_the_whole_secret_is_equal() {
        assert!(secrets_equal(b"s3cret-token", b"s3cret-token"));
        for guess in [&b""[..], b"s3cret", b"s3cret-token ", b"s3cret-tokeN", b"s3cret-token-and-more"] {
            assert!(!secrets_equal(b"s3cret-token", guess), "{}", String::from_utf8_lossy(guess));
        }
    }

    #[test]
    fn v1_methods_that_act_need_json() {
        let json = headers(&[(header::CONTENT_TYPE, "Application/JSON; charset=utf-8")]);
        let text = headers(&[(header::CONTENT_TYPE, "text/plain")]);
        assert!(is_json(&json) && !is_json(&text) && !is_json(&HeaderMap::new()));
        assert!(needs_json(&Method::POST, "/v1/call") && needs_json(&Method::DELETE, "/v1/artifacts/x"));
        assert!(needs_json(&Method::PUT, "/v1/anything"));
        assert!(!needs_json(&Method::GET, "/v1/status") && !needs_json(&Method::POST, "/mcp"));
    }
}
