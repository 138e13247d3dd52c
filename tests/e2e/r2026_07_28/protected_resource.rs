//! mcpx as an OAuth protected resource (`http.oauth`): callers bring access tokens from
//! a real authorization server (oidc-provider), and the real SDK clients find it from
//! mcpx's protected resource metadata. Every token mcpx must not accept is refused with
//! the challenge the spec prescribes; an accepted token's subject is a principal of its
//! own, which no static token holder and no other issuer's subject can reach; and the
//! token itself never leaves mcpx.

use mcpx_e2e::authorization::{AuthorizationServer, Credentials, Signer, python_sdk, ts_sdk};
use mcpx_e2e::client::{Raw, base_url, plain};
use mcpx_e2e::python::HttpServer;
use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, fakemcp, tag};
use serde_json::{Value, json};

const ALICE_SECRET: &str = "alice-secret-0123456789abcdef";
const BOB_SECRET: &str = "bob-secret-0123456789abcdef01";
/// The static token of the holder named `alice`, like the OAuth client `alice`.
const STATIC_ALICE: &str = "static-alice-token-0123456789";

fn authorization_server() -> AuthorizationServer {
    AuthorizationServer::start(&[("alice", ALICE_SECRET), ("bob", BOB_SECRET)])
}

/// A daemon accepting `issuer`'s tokens (and `extra` in `http`), serving `servers`.
fn daemon(issuer: &str, servers: &[(&str, Value)], http: Value) -> Daemon {
    let mut cfg = config(servers);
    // A generous timeout: the machine running the tests may be busy, and a slow answer
    // from the authorization server would read as a refused token.
    cfg["http"] = json!({"oauth": {"issuers": [issuer], "requestTimeout": "30s"}});
    if let (Some(target), Value::Object(extra)) = (cfg["http"].as_object_mut(), http) {
        for (key, value) in extra {
            match (target.get_mut(&key), value) {
                (Some(Value::Object(into)), Value::Object(from)) => into.extend(from),
                (_, value) => {
                    target.insert(key, value);
                }
            }
        }
    }
    Daemon::start(&cfg)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The parameters of a `WWW-Authenticate: Bearer` challenge.
#[track_caller]
fn challenge(reply: &mcpx_e2e::Reply) -> Vec<(String, String)> {
    let header = reply.header("www-authenticate").unwrap_or_else(|| panic!("no WWW-Authenticate: {reply}"));
    let params = header.strip_prefix("Bearer ").unwrap_or_else(|| panic!("not a Bearer challenge: {header}"));
    params
        .split(", ")
        .map(|p| {
            let (name, value) = p.split_once('=').unwrap_or_else(|| panic!("a bad parameter in {header}"));
            (name.to_owned(), value.trim_matches('"').to_owned())
        })
        .collect()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// The metadata URL a challenge must name for mcpx at `url`.
fn metadata_url(url: &str) -> String {
    format!("{}/.well-known/oauth-protected-resource/mcp", base_url(url))
}

/// A `tools/list` with `authorization` (if any); every frame is checked against the schema.
fn list_tools(url: &str, authorization: Option<&str>) -> mcpx_e2e::Reply {
    let request = Modern::tools_list();
    match authorization {
        Some(value) => request.header("Authorization", value).send(url),
        None => request.without_header("Authorization").send(url),
    }
}

#[test]
fn the_metadata_is_public_and_names_the_resource_and_its_authorization_server() {
    let server = authorization_server();
    let daemon = daemon(&server.issuer, &[], json!({"oauth": {"scopesSupported": ["mcp:tools"]}}));
    let url = daemon.url();
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let reply = plain("GET", &format!("{}{path}", base_url(url)), &[], None);
        assert_eq!(reply.status, 200, "{path}: {reply}");
        let metadata = reply.json();
        assert_eq!(metadata["resource"], url, "{metadata}");
        assert_eq!(metadata["authorization_servers"], json!([server.issuer]), "{metadata}");
        assert_eq!(metadata["scopes_supported"], json!(["mcp:tools"]), "{metadata}");
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]), "{metadata}");
    }
    // Still behind admission: a foreign page cannot read it, nor a rebound host name.
    let metadata = format!("{}/.well-known/oauth-protected-resource", base_url(url));
    let foreign = plain("GET", &metadata, &[("Origin", "https://evil.example")], None);
    assert_eq!(foreign.status, 403, "{foreign}");
    let rebound = plain("GET", &metadata, &[("Host", "evil.example")], None);
    assert_eq!(rebound.status, 403, "{rebound}");
    // A loopback page (a browser-based client) may read it.
    let local = plain("GET", &metadata, &[("Origin", "http://localhost:6274")], None);
    assert_eq!(local.status, 200, "{local}");
    assert_eq!(local.header("access-control-allow-origin"), Some("*"), "{local}");
}

#[test]
fn a_caller_without_a_token_is_challenged_toward_the_metadata() {
    let server = authorization_server();
    let daemon = daemon(&server.issuer, &[], json!({"oauth": {"requiredScopes": {"mcp": ["mcp:tools"]}}}));
    let url = daemon.url();
    let refused = list_tools(url, None);
    assert_eq!(refused.status, 401, "{refused}");
    let params = challenge(&refused);
    assert_eq!(param(&params, "resource_metadata"), Some(metadata_url(url).as_str()), "{params:?}");
    assert_eq!(param(&params, "scope"), Some("mcp:tools"), "{params:?}");
    assert_eq!(param(&params, "error"), None, "no token was presented: {params:?}");
    // The /v1 API too, and a route that does not exist.
    for path in ["/v1/status", "/nowhere"] {
        let reply = plain("GET", &format!("{}{path}", base_url(url)), &[], None);
        assert_eq!(reply.status, 401, "{path}: {reply}");
    }
    // A token from the server passes.
    let token = server.token("alice", url, "mcp:tools");
    let listed = list_tools(url, Some(&bearer(&token)));
    assert_eq!(listed.status, 200, "{listed}");
    assert!(listed.result()["tools"].is_array(), "{listed}");
}

#[test]
fn tokens_mcpx_must_not_accept_are_refused_as_invalid() {
    let server = authorization_server();
    let other_server = authorization_server();
    let daemon = daemon(&server.issuer, &[], json!({}));
    let url = daemon.url();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let none = {
        use base64::Engine;
        let part = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        let claims = json!({"iss": server.issuer, "sub": "alice", "aud": url, "exp": now + 300});
        format!("{}.{}.", part(json!({"alg": "none", "typ": "at+jwt"})), part(claims))
    };
    let refused = [
        ("a token for another resource", server.token("alice", "http://127.0.0.1:9/other/mcp", "mcp:tools")),
        ("another issuer's token", other_server.token("alice", url, "mcp:tools")),
        ("an expired token", server.forge(Signer::Issuer, url, json!({"sub": "alice", "exp": now - 3600}))),
        ("a token not yet valid", server.forge(Signer::Issuer, url, json!({"sub": "alice", "nbf": now + 3600}))),
        ("a key the issuer never published", server.forge(Signer::Stranger, url, json!({"sub": "alice"}))),
        ("alg none", none),
        ("a token without an audience", server.forge(Signer::Issuer, url, json!({"sub": "alice", "aud": null}))),
        ("not a JWT", "opaque-0123456789abcdef".to_owned()),
    ];
    for (what, token) in &refused {
        let reply = list_tools(url, Some(&bearer(token)));
        assert_eq!(reply.status, 401, "{what}: {reply}");
        let params = challenge(&reply);
        assert_eq!(param(&params, "error"), Some("invalid_token"), "{what}: {params:?}");
        assert_eq!(param(&params, "resource_metadata"), Some(metadata_url(url).as_str()), "{what}: {params:?}");
        assert!(!reply.body.contains(token.as_str()), "{what}: the refusal repeats the token");
    }
    // The same key and claims, but valid: what made each one fail was the one change.
    let valid = server.forge(Signer::Issuer, url, json!({"sub": "alice"}));
    assert_eq!(list_tools(url, Some(&bearer(&valid))).status, 200);
    let log = daemon.stderr();
    for (what, token) in &refused {
        assert!(!log.contains(token.as_str()), "{what}: the token reached the daemon's log");
    }
}

#[test]
fn a_token_without_the_scope_a_route_requires_is_refused_with_insufficient_scope() {
    let server = authorization_server();
    let required = json!({"oauth": {"requiredScopes": {"mcp": ["mcp:tools"], "v1": ["mcp:admin"]}}});
    let daemon = daemon(&server.issuer, &[], required);
    let url = daemon.url();
    let admin_only = server.token("alice", url, "mcp:admin");
    let refused = list_tools(url, Some(&bearer(&admin_only)));
    assert_eq!(refused.status, 403, "{refused}");
    let params = challenge(&refused);
    assert_eq!(param(&params, "error"), Some("insufficient_scope"), "{params:?}");
    assert_eq!(param(&params, "scope"), Some("mcp:tools"), "{params:?}");
    assert_eq!(param(&params, "resource_metadata"), Some(metadata_url(url).as_str()), "{params:?}");

    let tools_only = server.token("alice", url, "mcp:tools");
    assert_eq!(list_tools(url, Some(&bearer(&tools_only))).status, 200);
    let status = format!("{}/v1/status", base_url(url));
    let v1 = plain("GET", &status, &[("Authorization", &bearer(&tools_only))], None);
    assert_eq!(v1.status, 403, "{v1}");
    assert!(v1.header("www-authenticate").is_some_and(|c| c.contains("scope=\"mcp:admin\"")), "{v1}");
    assert_eq!(plain("GET", &status, &[("Authorization", &bearer(&admin_only))], None).status, 200);
}

#[test]
fn an_oauth_subject_named_like_a_static_token_reaches_none_of_that_holders_state() {
    let server = authorization_server();
    let tag = tag();
    let servers = [("browser", fakemcp("session", &tag, &[])), ("desk", fakemcp("user", &tag, &[]))];
    let daemon = daemon(&server.issuer, &servers, json!({"tokens": {"alice": STATIC_ALICE}}));
    let url = daemon.url();
    let oauth_alice = bearer(&server.token("alice", url, "mcp:tools"));
    let static_alice = bearer(STATIC_ALICE);
    let whoami = |server: &str, authorization: &str| {
        Whoami::of(
            &Modern::mcpx_call(server, "whoami", json!({}))
                .session("work")
                .header("Authorization", authorization)
                .send(url),
        )
    };
    let holder_browser = whoami("browser", &static_alice);
    let holder_desk = whoami("desk", &static_alice);
    assert_ne!(whoami("browser", &oauth_alice).instance, holder_browser.instance, "session work was shared");
    assert_ne!(whoami("desk", &oauth_alice).instance, holder_desk.instance, "the user instance was shared");
    assert_eq!(whoami("browser", &static_alice).instance, holder_browser.instance, "the holder keeps its own");

    // Nor its legacy HTTP session, whose id it somehow learnt.
    let holders_session = LegacySession::open_as(url, "2025-11-25", &[("Authorization", &static_alice)]);
    let hijack = Raw {
        http_method: "POST",
        url,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), "application/json, text/event-stream".into()),
            ("MCP-Protocol-Version".into(), "2025-11-25".into()),
            ("Mcp-Session-Id".into(), holders_session.id().to_owned()),
            ("Authorization".into(), oauth_alice.clone()),
        ],
        body: Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string().into_bytes()),
        revision: "2025-11-25",
        method: Some("tools/list"),
    }
    .send();
    assert_eq!(hijack.status, 404, "the OAuth alice used the holder's session: {hijack}");
    assert_eq!(holders_session.request("tools/list", json!({})).status, 200, "the holder keeps its session");

    // Nor its artifacts, nor its status.
    let script = "return { uri: await artifact('secret.txt', 'the holder\\'s') };";
    let kept = Modern::tools_call("mcpx_exec", json!({ "script": script }))
        .session("work")
        .header("Authorization", &static_alice)
        .send(url);
    let uri = kept.structured()["uri"].as_str().unwrap_or_else(|| panic!("an artifact: {kept}")).to_owned();
    let read = Modern::new("resources/read", json!({"uri": uri}))
        .session("work")
        .header("Authorization", &oauth_alice)
        .send(url);
    assert!(read.frame().get("error").is_some(), "the OAuth alice read the holder's artifact: {read}");
    let status = plain("GET", &format!("{}/v1/status", base_url(url)), &[("Authorization", &oauth_alice)], None);
    let pids: Vec<u64> =
        status.json()["instances"].as_array().unwrap().iter().filter_map(|i| i["pid"].as_u64()).collect();
    assert!(
        !pids.contains(&u64::from(holder_browser.pid)) && !pids.contains(&u64::from(holder_desk.pid)),
        "the OAuth alice sees the holder's instances: {status}"
    );
}

#[test]
fn each_subject_has_one_user_instance_across_connections_and_sdks() {
    let server = authorization_server();
    let tag = tag();
    // The scope the challenge names is the one the SDKs ask for.
    let required = json!({"oauth": {"requiredScopes": {"mcp": ["mcp:tools"]}}});
    let daemon = daemon(&server.issuer, &[("desk", fakemcp("user", &tag, &[]))], required);
    let url = daemon.url();
    let call = json!({"server": "desk", "tool": "whoami", "arguments": {}});
    let instance = |out: &Value| Whoami::from_structured(&out["result"]["structuredContent"]).instance;

    // The SDKs' own client-credentials providers: each discovers the authorization server
    // from mcpx's metadata after a 401, and gets its own token for mcpx.
    let alice = Credentials::Client { id: "alice", secret: ALICE_SECRET, issuer: &server.issuer };
    let by_python = python_sdk(url, "2026-07-28", &alice, "mcpx_call", &call);
    let by_ts = ts_sdk(url, "2026-07-28", &alice, "mcpx_call", &call);
    assert_eq!(instance(&by_python), instance(&by_ts), "one subject, two connections, two instances");
    // A token given to the SDK's transport as a header works the same.
    let token = server.token("alice", url, "mcp:tools");
    let by_header = python_sdk(url, "legacy", &Credentials::Bearer(&token), "mcpx_call", &call);
    assert_eq!(instance(&by_header), instance(&by_python));

    let bob = Credentials::Client { id: "bob", secret: BOB_SECRET, issuer: &server.issuer };
    let bobs = ts_sdk(url, "legacy", &bob, "mcpx_call", &call);
    assert_ne!(instance(&bobs), instance(&by_python), "two subjects shared a user instance");
}

#[test]
fn the_same_subject_at_two_issuers_is_two_principals() {
    let (first, second) = (authorization_server(), authorization_server());
    let tag = tag();
    let issuers = json!({"oauth": {"issuers": [first.issuer, second.issuer]}});
    let daemon = daemon(&first.issuer, &[("desk", fakemcp("user", &tag, &[]))], issuers);
    let url = daemon.url();
    let desk = |token: &str| {
        Whoami::of(&Modern::mcpx_call("desk", "whoami", json!({})).header("Authorization", &bearer(token)).send(url))
    };
    let at_first = desk(&first.token("alice", url, "mcp:tools"));
    let at_second = desk(&second.token("alice", url, "mcp:tools"));
    assert_ne!(at_first.instance, at_second.instance, "two issuers' alice shared a user instance");
    assert_eq!(desk(&first.token("alice", url, "mcp:tools")).instance, at_first.instance, "a new token, same alice");
}

#[test]
fn a_callers_access_token_never_reaches_an_upstream() {
    let server = authorization_server();
    let python = HttpServer::python_sdk();
    let tag = tag();
    let servers = [("f", fakemcp("user", &tag, &[])), ("py", json!({"url": python.url()}))];
    let daemon = daemon(&server.issuer, &servers, json!({}));
    let url = daemon.url();
    let token = server.token("alice", url, "mcp:tools");

    let headers = Modern::mcpx_call("py", "headers", json!({})).header("Authorization", &bearer(&token)).send(url);
    let seen = headers.result().to_string();
    assert!(!seen.contains(&token) && !seen.contains("authorization"), "the HTTP upstream saw: {seen}");

    let meta = Modern::mcpx_call("f", "meta", json!({})).header("Authorization", &bearer(&token)).send(url);
    let seen = meta.result().to_string();
    assert!(!seen.contains(&token), "the stdio upstream saw the token: {seen}");
    let context = &meta.structured()["meta"]["dev.mcpx/invocation"];
    assert_eq!(context["clientId"], format!("alice ({})", server.issuer), "{context}");
    assert!(context["scope"].as_str().is_some_and(|s| s.starts_with("user@oauth")), "{context}");
}

#[test]
fn an_opaque_token_is_asked_about_at_the_introspection_endpoint() {
    let carol_secret = "carol-secret-0123456789abcdef";
    let mcpx_secret = "mcpx-secret-0123456789abcdef0";
    let server = AuthorizationServer::start(&[("opaque-carol", carol_secret), ("mcpx", mcpx_secret)]);
    let introspection =
        json!({"endpoint": server.introspection_endpoint, "clientId": "mcpx", "clientSecret": mcpx_secret});
    let tag = tag();
    let servers = [("f", fakemcp("user", &tag, &[]))];
    let daemon = daemon(&server.issuer, &servers, json!({"oauth": {"introspection": introspection}}));
    let url = daemon.url();
    let token = server.token("opaque-carol", url, "mcp:tools");
    assert_ne!(token.split('.').count(), 3, "the server issued a JWT, not an opaque token: {token}");

    let meta = Modern::mcpx_call("f", "meta", json!({})).header("Authorization", &bearer(&token)).send(url);
    let context = &meta.structured()["meta"]["dev.mcpx/invocation"];
    // Its introspection answer names no subject: a client acting for itself.
    assert_eq!(context["clientId"], format!("client opaque-carol ({})", server.issuer), "{meta}");

    let elsewhere = server.token("opaque-carol", "http://127.0.0.1:9/other/mcp", "mcp:tools");
    for (what, token) in
        [("a token for another resource", elsewhere.as_str()), ("an unknown token", "made-up-0123456789")]
    {
        let reply = list_tools(url, Some(&bearer(token)));
        assert_eq!(reply.status, 401, "{what}: {reply}");
        assert_eq!(param(&challenge(&reply), "error"), Some("invalid_token"), "{what}");
    }
}

/// The raw 401 is a JSON-RPC error the schema accepts, whatever the era of the request.
#[test]
fn a_refusal_is_a_valid_frame() {
    let server = authorization_server();
    let daemon = daemon(&server.issuer, &[], json!({}));
    let url = daemon.url();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}}});
    let reply = Raw {
        http_method: "POST",
        url,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), "application/json, text/event-stream".into()),
        ],
        body: Some(initialize.to_string().into_bytes()),
        revision: "2025-11-25",
        method: None,
    }
    .send();
    assert_eq!(reply.status, 401, "{reply}");
    assert_eq!(reply.frames.len(), 1, "{reply}");
}
