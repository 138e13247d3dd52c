//! OAuth access tokens callers bring (`http.oauth`): who a token says the caller is, and
//! with which scopes, or why it is refused. Admission asks; nothing else does.
//!
//! A JWT is checked here, against its issuer's published keys: its algorithm must be on
//! the allow-list (never `none`), its `iss` exactly one of the configured issuers, its
//! `aud` must name mcpx's resource URL, `exp` and `nbf` hold within the leeway. An opaque
//! token is asked about at the introspection endpoint (RFC 7662), when one is configured.
//!
//! What this must never do: keep or log a token (outcomes are cached by a digest), fetch
//! anything from an issuer that is not configured (a token's `iss` is compared before
//! any fetch), let a flood of made-up key ids hammer an authorization server (refetches
//! are spaced by `jwksMinRefetch`), or make a request wait on a slow one for longer than
//! `requestTimeout`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use mcpx_gateway::Principal;
use mcpx_gateway::config::OAuthResourceConfig;
use mcpx_http::{Client, Method, Redirects, Request, Response, Uri, header};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// What a valid token grants: who the caller is, and the scopes the token carries.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    pub principal: Principal,
    pub scopes: Vec<String>,
}

/// Why a token was refused, for the log (never the token itself).
pub type Refusal = String;

/// Largest document read from an authorization server (metadata, keys, introspection).
const MOST_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Validates access tokens; one per daemon, its caches shared by every request.
#[derive(Default)]
pub struct Verifier {
    /// Signing keys by issuer (and `jwksUrl`, so a changed setting fetches anew).
    keys: Mutex<HashMap<String, Keys>>,
    /// When each issuer's keys were last fetched, or tried to be; keyed like `keys`.
    attempts: Mutex<HashMap<String, Instant>>,
    /// One fetch of keys at a time: concurrent requests naming an unknown key wait for
    /// the one fetch instead of each making their own.
    fetching: tokio::sync::Mutex<()>,
    outcomes: Mutex<Outcomes>,
}

struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// Outcomes by digest of (token, config), oldest first for eviction.
#[derive(Default)]
struct Outcomes {
    by_digest: HashMap<[u8; 32], (Result<Grant, Refusal>, Instant)>,
    order: VecDeque<[u8; 32]>,
}

impl Verifier {
    /// Who `token` says the caller is, for mcpx at `resource`. Never waits longer than
    /// `requestTimeout` in all.
    pub async fn authenticate(
        &self,
        oauth: &OAuthResourceConfig,
        resource: &str,
        token: &str,
    ) -> Result<Grant, Refusal> {
        let digest = outcome_key(oauth, resource, token);
        if let Some(outcome) = self.cached(&digest) {
            return outcome;
        }
        let outcome = match tokio::time::timeout(oauth.request_timeout, self.validate(oauth, resource, token)).await {
            Ok(Ok((grant, expires))) => Ok((grant, expires)),
            Ok(Err(why)) => Err(why),
            Err(_) => Err(format!(
                "the authorization server did not answer within {:?} (http.oauth.requestTimeout)",
                oauth.request_timeout
            )),
        };
        let now = Instant::now();
        let (outcome, until) = match outcome {
            Ok((grant, expires)) => {
                let until = now + oauth.cache_lifetime;
                (Ok(grant), expires.map_or(until, |at| until.min(at)))
            }
            // A refusal is kept no longer than keys are spaced, so a token refused for a
            // key the issuer has just published passes once the keys are fetched again.
            Err(why) => (Err(why), now + oauth.cache_lifetime.min(oauth.jwks_min_refetch)),
        };
        self.remember(digest, outcome.clone(), until, oauth.cache_entries);
        outcome
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Result<Grant, Refusal>> {
        let outcomes = self.outcomes.lock().expect("outcome cache lock");
        let (outcome, until) = outcomes.by_digest.get(digest)?;
        (Instant::now() < *until).then(|| outcome.clone())
    }

    fn remember(&self, digest: [u8; 32], outcome: Result<Grant, Refusal>, until: Instant, most: usize) {
        if most == 0 {
            return;
        }
        let mut outcomes = self.outcomes.lock().expect("outcome cache lock");
        if outcomes.by_digest.insert(digest, (outcome, until)).is_none() {
            outcomes.order.push_back(digest);
        }
        while outcomes.by_digest.len() > most {
            let Some(oldest) = outcomes.order.pop_front() else { break };
            outcomes.by_digest.remove(&oldest);
        }
    }

    /// The grant and when it stops being valid (as an `Instant`), or why not.
    async fn validate(
        &self,
        oauth: &OAuthResourceConfig,
        resource: &str,
        token: &str,
    ) -> Result<(Grant, Option<Instant>), Refusal> {
        match jsonwebtoken::decode_header(token) {
            Ok(header) => self.validate_jwt(oauth, resource, token, header).await,
            Err(_) if looks_like_jwt(token) => Err(jwt_header_refusal(token)),
            Err(_) => match &oauth.introspection {
                Some(_) => introspect(oauth, resource, token).await,
                None => Err("not a JWT, and no introspection endpoint is configured (http.oauth.introspection)".into()),
            },
        }
    }

    async fn validate_jwt(
        &self,
        oauth: &OAuthResourceConfig,
        resource: &str,
        token: &str,
        header: jsonwebtoken::Header,
    ) -> Result<(Grant, Option<Instant>), Refusal> {
        let alg = algorithm_name(header.alg);
        if !oauth.algorithms.contains(&alg) {
            return Err(format!("algorithm {alg} is not in http.oauth.algorithms"));
        }
        // The issuer is read before the signature is checked, only to pick whose keys to
        // check it with: an issuer not configured is refused without any fetch.
        let unverified: Map<String, Value> = token
            .split('.')
            .nth(1)
            .and_then(|payload| URL_SAFE_NO_PAD.decode(payload).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or("the token's claims are not a JSON object")?;
        let issuer = unverified.get("iss").and_then(Value::as_str).ok_or("the token names no issuer (iss)")?;
        let Some(issuer) = oauth.issuers.iter().find(|configured| *configured == issuer) else {
            return Err(format!("issuer {issuer:?} is not one of http.oauth.issuers"));
        };
        let key = match header.alg {
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
                let secret = oauth.hmac_secret.as_deref().ok_or("HS* tokens need http.oauth.hmacSecret")?;
                DecodingKey::from_secret(secret.as_bytes()).map_err(|e| format!("http.oauth.hmacSecret: {e}"))?
            }
            _ => self.key_for(oauth, issuer, header.kid.as_deref(), &alg).await?,
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = oauth.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[issuer]);
        validation.set_audience(&[resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|e| format!("the token is not valid for {resource}: {e}"))?
            .claims;
        let grant = grant_from(oauth, issuer, &claims)?;
        Ok((grant, claims.get("exp").and_then(Value::as_u64).map(instant_at)))
    }

    /// The issuer's key named `kid` (or its only key, when the token names none). An
    /// unknown kid fetches the keys again, and so do keys older than `jwksLifetime`; any
    /// fetch (failed ones too) at most once per `jwksMinRefetch` per issuer.
    async fn key_for(
        &self,
        oauth: &OAuthResourceConfig,
        issuer: &str,
        kid: Option<&str>,
        alg: &str,
    ) -> Result<DecodingKey, Refusal> {
        let source = format!("{issuer} {:?}", oauth.jwks_url);
        let mut looked_again = false;
        loop {
            let (found, fresh) = {
                let keys = self.keys.lock().expect("key cache lock");
                match keys.get(&source) {
                    Some(k) => (pick(&k.set, kid), k.fetched.elapsed() < oauth.jwks_lifetime),
                    None => (None, false),
                }
            };
            if let Some(jwk) = &found
                && fresh
            {
                return decoding_key(jwk, alg);
            }
            let last = self.attempts.lock().expect("attempt lock").get(&source).copied();
            let may_fetch = !looked_again && last.is_none_or(|at| at.elapsed() >= oauth.jwks_min_refetch);
            if !may_fetch {
                // Keys past their lifetime are still the best known until a fetch may run.
                return match found {
                    Some(jwk) => decoding_key(&jwk, alg),
                    None => Err(match kid {
                        Some(kid) => format!("issuer {issuer:?} publishes no key {kid:?}"),
                        None => format!("the token names no key id (kid), and issuer {issuer:?} has not one key"),
                    }),
                };
            }
            let _one_fetch = self.fetching.lock().await;
            looked_again = true;
            // Another request may have fetched while this one waited: look again first.
            if self.attempts.lock().expect("attempt lock").get(&source).copied() != last {
                continue;
            }
            self.attempts.lock().expect("attempt lock").insert(source.clone(), Instant::now());
            match fetch_keys(oauth, issuer).await {
                Ok(set) => {
                    let keys = Keys { set, fetched: Instant::now() };
                    self.keys.lock().expect("key cache lock").insert(source.clone(), keys);
                }
                Err(why) if found.is_none() => return Err(why),
                Err(why) => tracing::warn!("keeping issuer {issuer:?}'s keys past their lifetime: {why}"),
            }
        }
    }
}

fn pick(set: &JwkSet, kid: Option<&str>) -> Option<jsonwebtoken::jwk::Jwk> {
    match kid {
        Some(kid) => set.find(kid).cloned(),
        None => match set.keys.as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        },
    }
}

/// The key as a verifier, if it may verify `alg`: a key published for encryption, or
/// for another algorithm, is refused.
fn decoding_key(jwk: &jsonwebtoken::jwk::Jwk, alg: &str) -> Result<DecodingKey, Refusal> {
    if jwk.common.public_key_use.as_ref().is_some_and(|u| *u != PublicKeyUse::Signature) {
        return Err("the token's key is not published for signatures".into());
    }
    if let Some(key_alg) = &jwk.common.key_algorithm
        && format!("{key_alg:?}") != alg
    {
        return Err(format!("the token's key is published for {key_alg:?}, not {alg}"));
    }
    DecodingKey::from_jwk(jwk).map_err(|e| format!("the issuer's key cannot verify: {e}"))
}

/// Who and which scopes, from validated claims (a JWT's, or an introspection answer).
fn grant_from(oauth: &OAuthResourceConfig, issuer: &str, claims: &Map<String, Value>) -> Result<Grant, Refusal> {
    let claim = &oauth.principal_claim;
    let name = |value: Option<&Value>| match value {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let issuer = issuer.to_owned();
    // A client acting for itself (client_credentials) may name no subject, only its
    // `client_id`: it is then a client, a principal of its own kind, so that no client
    // registered as "alice" is ever the user alice.
    let principal = match (name(claims.get(claim)), claim == "sub") {
        (Some(subject), _) => Principal::OAuth { issuer, subject },
        (None, true) if let Some(client) = name(claims.get("client_id")) => Principal::OAuthClient { issuer, client },
        _ => return Err(format!("the token has no {claim:?} claim to name the caller (http.oauth.principalClaim)")),
    };
    let scopes = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => {
            s.split_ascii_whitespace().map(str::to_owned).collect()
        }
        (None, Some(Value::Array(list))) => list.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    Ok(Grant { principal, scopes })
}

/// RFC 7662: asks the configured endpoint about an opaque token.
async fn introspect(
    oauth: &OAuthResourceConfig,
    resource: &str,
    token: &str,
) -> Result<(Grant, Option<Instant>), Refusal> {
    let introspection = oauth.introspection.as_ref().ok_or("no introspection endpoint")?;
    let form = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    let body = format!("token={}&token_type_hint=access_token", form(token));
    // RFC 6749 §2.3.1: the client's id and secret are form-encoded before Basic.
    let credentials = format!("{}:{}", form(&introspection.client_id), form(&introspection.client_secret));
    let basic = base64::engine::general_purpose::STANDARD.encode(credentials);
    let headers = [
        (header::CONTENT_TYPE, "application/x-www-form-urlencoded".to_owned()),
        (header::ACCEPT, "application/json".to_owned()),
        (header::AUTHORIZATION, format!("Basic {basic}")),
    ];
    let response = send(oauth, Method::POST, &introspection.endpoint, &headers, body.into())
        .await
        .map_err(|e| format!("introspection failed: {e}"))?;
    let answer = read_json(oauth, response, "the introspection endpoint").await?;
    let claims = answer.as_object().ok_or("the introspection answer is not a JSON object")?;
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err("the introspection endpoint says the token is not active".into());
    }
    let issuer = introspection.issuer(oauth);
    if let Some(iss) = claims.get("iss")
        && iss.as_str() != Some(issuer)
    {
        return Err(format!("the introspection answer names issuer {iss}, not {issuer:?}"));
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(aud)) => aud == resource,
        Some(Value::Array(list)) => list.iter().any(|a| a.as_str() == Some(resource)),
        _ => false,
    };
    if !audience_ok {
        return Err(format!("the token's audience does not include {resource}"));
    }
    let exp = claims.get("exp").and_then(Value::as_u64);
    if exp.is_some_and(|exp| exp.saturating_add(oauth.leeway.as_secs()) < unix_now()) {
        return Err("the token has expired".into());
    }
    Ok((grant_from(oauth, issuer, claims)?, exp.map(instant_at)))
}

/// The issuer's signing keys: from `jwksUrl`, else from the `jwks_uri` of its metadata.
async fn fetch_keys(oauth: &OAuthResourceConfig, issuer: &str) -> Result<JwkSet, Refusal> {
    let jwks_uri = match &oauth.jwks_url {
        Some(url) => url.clone(),
        None => discover_jwks_uri(oauth, issuer).await?,
    };
    let response = get(oauth, &jwks_uri).await?;
    let keys = read_json(oauth, response, "the issuer's key set").await?;
    serde_json::from_value(keys).map_err(|e| format!("issuer {issuer:?} publishes keys mcpx cannot read: {e}"))
}

/// The `jwks_uri` from the issuer's metadata: RFC 8414 first, then OpenID discovery,
/// in the order the MCP authorization spec gives. The metadata must name the issuer
/// exactly (RFC 8414 §3.3), or it is another server's.
async fn discover_jwks_uri(oauth: &OAuthResourceConfig, issuer: &str) -> Result<String, Refusal> {
    let mut tried = Vec::new();
    for url in metadata_urls(issuer) {
        let response = match get(oauth, &url).await {
            Ok(response) if response.status().is_success() => response,
            Ok(response) => {
                tried.push(format!("{url}: {}", response.status()));
                continue;
            }
            Err(why) => {
                tried.push(why);
                continue;
            }
        };
        let metadata = read_json(oauth, response, "the issuer's metadata").await?;
        if metadata.get("issuer").and_then(Value::as_str) != Some(issuer) {
            return Err(format!("the metadata at {url} is not issuer {issuer:?}'s"));
        }
        let jwks_uri = metadata
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the metadata at {url} has no jwks_uri"))?;
        // Keys read in the clear could be swapped for a forger's: https, loopback, or
        // where the configured issuer itself is.
        if !(jwks_uri.starts_with("https://") || is_loopback_url(jwks_uri) || same_origin(jwks_uri, issuer)) {
            return Err(format!("the metadata at {url} names keys at {jwks_uri:?}, which is not an https URL"));
        }
        return Ok(jwks_uri.to_owned());
    }
    Err(format!("no metadata for issuer {issuer:?} ({})", tried.join("; ")))
}

/// Where an issuer's metadata may be: `/.well-known/oauth-authorization-server` and
/// `/.well-known/openid-configuration` inserted before the issuer's path, then the
/// OpenID one appended to it.
fn metadata_urls(issuer: &str) -> Vec<String> {
    let (origin, path) = match issuer.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
            (format!("{scheme}://{authority}"), path.trim_end_matches('/').to_owned())
        }
        None => (issuer.to_owned(), String::new()),
    };
    let suffix = if path.is_empty() { String::new() } else { format!("/{path}") };
    let mut urls = vec![
        format!("{origin}/.well-known/oauth-authorization-server{suffix}"),
        format!("{origin}/.well-known/openid-configuration{suffix}"),
    ];
    if !suffix.is_empty() {
        urls.push(format!("{origin}{suffix}/.well-known/openid-configuration"));
    }
    urls
}

/// `scheme://authority` of a URL.
fn origin_of(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    Some((scheme, rest.split(['/', '?', '#']).next().unwrap_or_default()))
}

fn same_origin(a: &str, b: &str) -> bool {
    origin_of(a)
        .is_some_and(|a| origin_of(b).is_some_and(|b| a.0.eq_ignore_ascii_case(b.0) && a.1.eq_ignore_ascii_case(b.1)))
}

/// `http://` to `localhost` or a loopback address.
fn is_loopback_url(url: &str) -> bool {
    let Some(("http", authority)) = origin_of(url) else { return false };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

async fn get(oauth: &OAuthResourceConfig, url: &str) -> Result<Response, Refusal> {
    let headers = [(header::ACCEPT, "application/json".to_owned())];
    send(oauth, Method::GET, url, &headers, Bytes::new()).await.map_err(|e| format!("GET {url} failed: {e}"))
}

/// One request to an authorization server, answered within `requestTimeout`.
async fn send(
    oauth: &OAuthResourceConfig,
    method: Method,
    url: &str,
    headers: &[(header::HeaderName, String)],
    body: Bytes,
) -> Result<Response, String> {
    let uri = url.parse::<Uri>().map_err(|e| e.to_string())?;
    let make = || {
        let mut request = Request::new(mcpx_http::Body::new(body.clone()));
        *request.method_mut() = method.clone();
        *request.uri_mut() = uri.clone();
        for (name, value) in headers {
            if let Ok(value) = header::HeaderValue::from_str(value) {
                request.headers_mut().insert(name.clone(), value);
            }
        }
        request
    };
    match tokio::time::timeout(oauth.request_timeout, client(oauth).send(make)).await {
        Ok(sent) => sent,
        Err(_) => Err(format!("no answer within {:?}", oauth.request_timeout)),
    }
}

/// A JSON document of at most [`MOST_DOCUMENT_BYTES`] from a successful response, read
/// within `requestTimeout`.
async fn read_json(oauth: &OAuthResourceConfig, response: Response, what: &str) -> Result<Value, Refusal> {
    if !response.status().is_success() {
        return Err(format!("{what} answered {}", response.status()));
    }
    let body = match tokio::time::timeout(oauth.request_timeout, mcpx_http::body(response, MOST_DOCUMENT_BYTES)).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) if e.starts_with("an answer larger") => {
            return Err(format!("{what} is larger than {MOST_DOCUMENT_BYTES} bytes"));
        }
        Ok(Err(e)) => return Err(format!("reading {what} failed: {e}")),
        Err(_) => return Err(format!("reading {what} failed: not read within {:?}", oauth.request_timeout)),
    };
    serde_json::from_slice(&body).map_err(|e| format!("{what} is not JSON: {e}"))
}

/// The client for the configured issuers, JWKS and introspection endpoints: a JWKS URL an
/// issuer's metadata names may be where one of them is, or public (`mcpx_http::egress`).
fn client(oauth: &OAuthResourceConfig) -> Client {
    static CLIENTS: OnceLock<std::sync::Mutex<std::collections::HashMap<Vec<String>, Client>>> = OnceLock::new();
    let configured =
        oauth.issuers.iter().chain(&oauth.jwks_url).chain(oauth.introspection.as_ref().map(|i| &i.endpoint));
    let anchors: Vec<String> = configured.cloned().collect();
    let mut clients = CLIENTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let client = clients.entry(anchors).or_insert_with_key(|anchors| {
        let urls = anchors.iter().filter_map(|a| mcpx_http::Url::parse(a).ok());
        let egress = urls.fold(mcpx_http::Egress::default(), |egress, url| egress.and_toward(&url));
        // An authorization server's documents are where it says they are.
        Client::new(Redirects::NONE, None, egress)
    });
    client.clone()
}

/// Three dot-separated parts: meant as a JWT, so never sent to introspection.
fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// Why a JWT's header was refused: `alg: none` (and any other unknown algorithm) fails to
/// parse as a header, so say which.
fn jwt_header_refusal(token: &str) -> Refusal {
    let alg = token
        .split('.')
        .next()
        .and_then(|h| URL_SAFE_NO_PAD.decode(h).ok())
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|header| header.get("alg").cloned());
    match alg {
        Some(alg) => format!("algorithm {alg} is not one mcpx verifies"),
        None => "the token's header is not a JWT header".into(),
    }
}

/// The algorithm as JWS names it (`RS256`, `EdDSA`): its `Debug` form.
fn algorithm_name(alg: Algorithm) -> String {
    format!("{alg:?}")
}

/// The cache key: the token and everything its outcome depends on, hashed together, so
/// a config change never reuses an outcome and the cache never holds a token.
fn outcome_key(oauth: &OAuthResourceConfig, resource: &str, token: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in [format!("{oauth:?}").as_str(), resource, token] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().into()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The `Instant` of a Unix time, for cache lifetimes (a time passed is now). A time
/// too far ahead for the clock (a token's `exp` may say anything) is a year from now:
/// cache lifetimes are shorter.
fn instant_at(unix: u64) -> Instant {
    let now = Instant::now();
    let ahead = Duration::from_secs(unix.saturating_sub(unix_now()).min(366 * 24 * 3600));
    now.checked_add(ahead).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn oauth() -> OAuthResourceConfig {
        OAuthResourceConfig { issuers: vec!["https://as.example".into()], ..OAuthResourceConfig::default() }
    }

    fn unsigned(header: Value, claims: Value) -> String {
        let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
        format!("{}.{}.", part(&header), part(&claims))
    }

    #[tokio::test]
    async fn alg_none_is_refused_without_any_fetch() {
        let token = unsigned(json!({"alg": "none"}), json!({"iss": "https://as.example", "sub": "a"}));
        let why = Verifier::default().authenticate(&oauth(), "http://127.0.0.1:7750/mcp", &token).await.unwrap_err();
        assert!(why.contains("\"none\""), "{why}");
    }

    #[tokio::test]
    async fn an_issuer_not_configured_is_refused_before_anything_is_fetched() {
        // The token's issuer is unreachable on purpose: a fetch would fail differently.
        let token = unsigned(
            json!({"alg": "RS256", "kid": "k"}),
            json!({"iss": "https://evil.example", "sub": "a", "aud": "x", "exp": 4_000_000_000u64}),
        );
        let why = Verifier::default().authenticate(&oauth(), "x", &token).await.unwrap_err();
        assert!(why.contains("not one of http.oauth.issuers"), "{why}");
    }

    #[tokio::test]
    async fn an_hs256_token_is_refused_unless_configured_and_its_claims_are_checked() {
        let secret = "0123456789abcdef0123456789abcdef";
        let claims = |aud: &str, exp: u64| json!({"iss": "https://as.example", "sub": "alice", "aud": aud, "exp": exp, "scope": "a b"});
        let sign = |claims: &Value| {
            let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap();
            jsonwebtoken::encode(&jsonwebtoken::Header::new(Algorithm::HS256), claims, &key).unwrap()
        };
        let resource = "http://127.0.0.1:7750/mcp";
        let good = sign(&claims(resource, unix_now() + 300));
        let why = Verifier::default().authenticate(&oauth(), resource, &good).await.unwrap_err();
        assert!(why.contains("HS256 is not in"), "{why}");

        let hs = OAuthResourceConfig { algorithms: vec!["HS256".into()], hmac_secret: Some(secret.into()), ..oauth() };
        let verifier = Verifier::default();
        let grant = verifier.authenticate(&hs, resource, &good).await.unwrap();
        let alice = Principal::OAuth { issuer: "https://as.example".into(), subject: "alice".into() };
        assert_eq!(grant, Grant { principal: alice, scopes: vec!["a".into(), "b".into()] });
        for bad in [sign(&claims("http://other/mcp", unix_now() + 300)), sign(&claims(resource, unix_now() - 120))] {
            assert!(verifier.authenticate(&hs, resource, &bad).await.is_err());
        }
        // Within the leeway, an expired token still passes.
        assert!(verifier.authenticate(&hs, resource, &sign(&claims(resource, unix_now() - 5))).await.is_ok());

        // No subject, only a client_id: a client of its own kind, never the subject alice.
        let mut unnamed = claims(resource, unix_now() + 300);
        unnamed.as_object_mut().unwrap().remove("sub");
        unnamed["client_id"] = "alice".into();
        let grant = verifier.authenticate(&hs, resource, &sign(&unnamed)).await.unwrap();
        let client = Principal::OAuthClient { issuer: "https://as.example".into(), client: "alice".into() };
        assert_eq!(grant.principal, client);
        unnamed.as_object_mut().unwrap().remove("client_id");
        let why = verifier.authenticate(&hs, resource, &sign(&unnamed)).await.unwrap_err();
        assert!(why.contains("no \"sub\" claim"), "{why}");
    }

    /// A local stand-in for an authorization server's key endpoint: answers every
    /// request with `keys` after `delay`, and counts the requests.
    async fn key_server(keys: Value, delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let hits = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let (keys, counted) = (keys.clone(), counted.clone());
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                axum::Json(keys)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, hits)
    }

    fn token_with_kid(kid: &str) -> String {
        let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let claims = json!({"iss": "https://as.example", "sub": "a", "aud": "r", "exp": unix_now() + 300});
        format!("{}.{}.c2ln", part(json!({"alg": "ES256", "kid": kid})), part(claims))
    }

    #[tokio::test]
    async fn a_flood_of_unknown_key_ids_fetches_the_keys_once() {
        let (url, hits) = key_server(json!({"keys": []}), Duration::ZERO).await;
        let config = OAuthResourceConfig { jwks_url: Some(url), ..oauth() };
        let verifier = Verifier::default();
        for n in 0..20 {
            let why = verifier.authenticate(&config, "r", &token_with_kid(&format!("kid-{n}"))).await.unwrap_err();
            assert!(why.contains("publishes no key"), "{why}");
        }
        assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1, "jwksMinRefetch spaces the fetches");
    }

    #[tokio::test]
    async fn a_silent_authorization_server_cannot_hold_a_request_past_the_timeout() {
        let (url, _) = key_server(json!({"keys": []}), Duration::from_secs(3600)).await;
        let config =
            OAuthResourceConfig { jwks_url: Some(url), request_timeout: Duration::from_millis(200), ..oauth() };
        let started = Instant::now();
        let why = Verifier::default().authenticate(&config, "r", &token_with_kid("k")).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "waited {:?}", started.elapsed());
        assert!(why.contains("requestTimeout") || why.contains("failed"), "{why}");
    }

    #[tokio::test]
    async fn an_exp_at_the_end_of_time_is_no_panic() {
        let secret = "0123456789abcdef0123456789abcdef";
        let hs = OAuthResourceConfig { algorithms: vec!["HS256".into()], hmac_secret: Some(secret.into()), ..oauth() };
        let claims = json!({"iss": "https://as.example", "sub": "a", "aud": "r", "exp": u64::MAX, "nbf": 0});
        let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap();
        let token = jsonwebtoken::encode(&jsonwebtoken::Header::new(Algorithm::HS256), &claims, &key).unwrap();
        assert!(Verifier::default().authenticate(&hs, "r", &token).await.is_ok());
        assert!(instant_at(u64::MAX) > Instant::now());
    }

    #[tokio::test]
    async fn keys_published_in_the_clear_are_not_fetched() {
        // Keys fetched over plain HTTP could be swapped on the way for the forger's own.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let metadata = json!({ "issuer": issuer, "jwks_uri": "http://keys.invalid/jwks" });
        let app = axum::Router::new().fallback(move || {
            let metadata = metadata.clone();
            async move { axum::Json(metadata) }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        let config = OAuthResourceConfig { issuers: vec![issuer.clone()], ..OAuthResourceConfig::default() };
        let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let claims = json!({"iss": issuer, "sub": "a", "aud": "r", "exp": unix_now() + 300});
        let token = format!("{}.{}.c2ln", part(json!({"alg": "ES256", "kid": "k"})), part(claims));
        let why = Verifier::default().authenticate(&config, "r", &token).await.unwrap_err();
        assert!(why.contains("https"), "{why}");
        for loopback in ["http://127.0.0.1:9/jwks", "http://localhost/jwks", "http://[::1]:9/jwks"] {
            assert!(is_loopback_url(loopback), "{loopback}");
        }
        for elsewhere in ["http://127.0.0.1.evil.example/jwks", "http://localhost@evil.example/", "https://127.0.0.1/"]
        {
            assert!(!is_loopback_url(elsewhere), "{elsewhere}");
        }
    }

    #[test]
    fn the_cache_is_bounded_and_keyed_by_a_digest() {
        let verifier = Verifier::default();
        let config = oauth();
        let until = Instant::now() + Duration::from_secs(60);
        for n in 0..10 {
            let key = outcome_key(&config, "r", &format!("token-{n}"));
            verifier.remember(key, Err("no".into()), until, 4);
        }
        assert_eq!(verifier.outcomes.lock().unwrap().by_digest.len(), 4);
        assert!(verifier.cached(&outcome_key(&config, "r", "token-9")).is_some());
        assert!(verifier.cached(&outcome_key(&config, "r", "token-0")).is_none(), "the oldest went first");
        assert_ne!(outcome_key(&config, "r", "t"), outcome_key(&config, "r2", "t"), "another resource");
    }

    #[test]
    fn metadata_is_looked_up_the_rfc_8414_way_then_the_openid_way() {
        assert_eq!(
            metadata_urls("https://as.example"),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example/tenant/1/"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant/1",
                "https://as.example/.well-known/openid-configuration/tenant/1",
                "https://as.example/tenant/1/.well-known/openid-configuration"
            ]
        );
    }
}
