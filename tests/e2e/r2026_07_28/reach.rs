//! Who may act on the daemon as a whole, and who may read what. A route that acts on the
//! daemon as a whole (stop, every caller's counters at `/metrics`) answers only the
//! daemon's owner and the callers `http.admins` names: a token holder allowed no servers,
//! a holder with no `clients` entry, and an OAuth subject without scopes are refused 403
//! and nothing happens; the admin is served. Every `/v1` route is walked, as
//! `docs/api/openapi.json` lists them with their reach (`x-mcpx-reach`). What a plain
//! holder needs (its own calls, tasks, questions and artifacts) keeps working.
//!
//! Reading: every route but `/mcp` needs `/v1`'s OAuth scopes, `/ui/state` and
//! `/metrics` included; a client limited to one server never sees another named in any
//! reading route's body.

use std::time::Duration;

use mcpx_e2e::authorization::AuthorizationServer;
use mcpx_e2e::client::{PlainReply, base_url, plain};
use mcpx_e2e::{Daemon, Whoami, alive, config, fakemcp, paths, poll, tag, wait_for_exit};
use serde_json::{Value, json};

const GUEST: &str = "reach-guest-0123456789abcdef";
const HOLDER: &str = "reach-holder-0123456789abcde";
const BOSS: &str = "reach-boss-0123456789abcdefg";
const ALICE_SECRET: &str = "alice-secret-0123456789abcdef";
/// What a refusal for a daemon-wide route says.
const DAEMON_WIDE: &str = "acts on the daemon as a whole";

/// Every operation `docs/api/openapi.json` documents, with its reach, and `/metrics`
/// (every caller's counters: the daemon's) and `/ui/state` (the caller's own view),
/// which the `/v1` description does not list.
fn operations() -> Vec<(String, String, String)> {
    let path = paths::repo_root().join("docs/api/openapi.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("openapi.json")).expect("JSON");
    let mut found: Vec<(String, String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("a path item") {
            let reach = operation["x-mcpx-reach"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} documents no x-mcpx-reach"))
                .to_owned();
            found.push((method.to_ascii_uppercase(), path.replace("{id}", "x"), reach));
        }
    }
    found.push(("GET".into(), "/metrics".into(), "daemon".into()));
    found.push(("GET".into(), "/ui/state".into(), "caller".into()));
    assert!(found.iter().any(|(m, p, r)| m == "POST" && p == "/v1/stop" && r == "daemon"), "{found:?}");
    // Every path the daemon routes is among them (a route added later is walked too).
    for routed in paths::routed_paths().into_iter().filter(|p| p.starts_with("/v1")) {
        let routed = routed.replace("{id}", "x");
        assert!(found.iter().any(|(_, p, _)| *p == routed), "{routed} is routed but not walked");
    }
    // Stop last: the admin's ends the daemon.
    found.sort_by_key(|(method, path, _)| (method == "POST" && path == "/v1/stop", path.clone()));
    found
}

/// `method path` as the holder of `authorization`, with `{}` as the body of anything but a GET.
fn request(daemon: &Daemon, method: &str, path: &str, authorization: &str) -> PlainReply {
    let url = format!("{}{path}", base_url(daemon.url()));
    let body = (method != "GET").then_some("{}");
    plain(method, &url, &[("Authorization", authorization)], body)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[test]
fn a_plain_holder_is_refused_every_daemon_wide_route_and_an_admin_is_served() {
    let t = tag();
    let mut cfg = config(&[("alpha", fakemcp("global", &t, &[]))]);
    // An HTTP server whose credential (shared, the default) every caller uses.
    cfg["mcpServers"]["web"] = json!({"url": "http://127.0.0.1:9/mcp"});
    cfg["http"] = json!({"tokens": {"guest": GUEST, "holder": HOLDER, "boss": BOSS}, "admins": ["token:boss"]});
    // The guest may use no server at all; the holder has no entry (every server).
    cfg["clients"] = json!({"token:guest": {"servers": []}});
    let mut daemon = Daemon::start(&cfg);
    let operations = operations();

    for (who, token) in [("a guest allowed no servers", GUEST), ("a holder without a clients entry", HOLDER)] {
        for (method, path, reach) in &operations {
            let reply = request(&daemon, method, path, &bearer(token));
            if reach == "daemon" {
                assert_eq!(reply.status, 403, "{method} {path} must refuse {who}: {reply}");
                let message = reply.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
                assert!(
                    message.contains(path.as_str()) && message.contains("owner") && message.contains("http.admins"),
                    "{method} {path}: the refusal must name the route and who it needs: {message}"
                );
            } else {
                assert!(
                    !reply.body.contains(DAEMON_WIDE),
                    "{method} {path} is the caller's own, refused {who}: {reply}"
                );
            }
        }
    }
    // Logging a shared credential out (or in) is daemon-wide too, decided by the server named.
    let logout = |token: &str| {
        let url = format!("{}/v1/auth/logout", base_url(daemon.url()));
        plain("POST", &url, &[("Authorization", &bearer(token))], Some(r#"{"server": "web"}"#))
    };
    let refused = logout(HOLDER);
    assert!(refused.status >= 400, "a plain holder logged out the shared credential: {refused}");
    assert!(refused.body.contains("owner") && refused.body.contains("http.admins"), "{refused}");
    let served = logout(BOSS);
    assert_eq!(served.status, 200, "the admin may log the shared credential out: {served}");
    // Nothing happened: the daemon still serves, the same process.
    let status = request(&daemon, "GET", "/v1/status", &bearer(HOLDER));
    assert_eq!(status.status, 200, "{status}");
    assert_eq!(status.json()["pid"].as_u64(), Some(u64::from(daemon.pid())), "{status}");
    assert!(alive(daemon.pid()), "a refused POST /v1/stop stopped the daemon");

    // The admin is served on every daemon-wide route; its stop, last, ends the daemon.
    for (method, path, _) in operations.iter().filter(|(_, _, reach)| reach == "daemon") {
        let reply = request(&daemon, method, path, &bearer(BOSS));
        assert!(reply.status < 300, "{method} {path} must serve the admin: {reply}");
    }
    assert!(wait_for_exit(daemon.pid(), Duration::from_secs(20)), "the admin's POST /v1/stop did not stop the daemon");
    let _ = daemon.stop();
}

#[test]
fn a_plain_holder_keeps_its_own_calls_tasks_questions_and_artifacts() {
    let t = tag();
    let mut cfg = config(&[
        ("alpha", fakemcp("global", &t, &[])),
        ("asks", fakemcp("global", &t, &["--fixture", "conformance"])),
    ]);
    cfg["http"] = json!({"tokens": {"holder": HOLDER}});
    let daemon = Daemon::start(&cfg);
    let holder = bearer(HOLDER);
    let send = |method: &str, path: &str, body: Option<Value>| {
        let url = format!("{}{path}", base_url(daemon.url()));
        let body = body.map(|b| b.to_string());
        plain(method, &url, &[("Authorization", &holder), ("X-Mcpx-Session", "work")], body.as_deref())
    };

    let called = send("POST", "/v1/call", Some(json!({"server": "alpha", "tool": "whoami", "arguments": {}})));
    assert_eq!(called.status, 200, "{called}");
    Whoami::from_structured(&called.json()["structuredContent"]);

    let slow = json!({"server": "alpha", "tool": "slow", "arguments": {"ms": 600_000}});
    let task = send("POST", "/v1/tasks", Some(slow));
    assert_eq!(task.status, 202, "{task}");
    let id = task.json()["taskId"].as_str().unwrap_or_else(|| panic!("no task: {task}")).to_owned();
    assert_eq!(send("GET", &format!("/v1/tasks/{id}"), None).status, 200);
    assert!(send("GET", "/v1/tasks", None).body.contains(&id));
    let cancelled = send("POST", &format!("/v1/tasks/{id}/cancel"), Some(json!({})));
    assert_eq!(cancelled.status, 200, "{cancelled}");

    let asked = json!({"server": "asks", "tool": "test_input_required_result_elicitation", "arguments": {}});
    let waiting = send("POST", "/v1/call", Some(asked));
    assert_eq!(waiting.status, 202, "{waiting}");
    let question = waiting.json()["question"].clone();
    let id = question["id"].as_str().unwrap_or_else(|| panic!("{waiting}")).to_owned();
    let key = question["inputRequests"].as_object().and_then(|asked| asked.keys().next().cloned());
    let key = key.unwrap_or_else(|| panic!("no question asked: {waiting}"));
    assert!(send("GET", "/v1/ask", None).body.contains(&id));
    let answer = json!({"id": id, "responses": { key: {"action": "accept", "content": {"name": "Grace"}} }});
    let answered = send("POST", "/v1/ask/answer", Some(answer));
    assert!(answered.status == 200 && answered.body.contains("Grace"), "{answered}");

    let kept = send("POST", "/v1/exec", Some(json!({"script": "return await artifact('a.txt', 'kept')"})));
    let uri = kept.json()["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let artifact = uri.strip_prefix("mcpx://artifacts/").unwrap_or_else(|| panic!("no artifact: {kept}")).to_owned();
    assert!(send("GET", "/v1/artifacts", None).body.contains(&artifact));
    assert_eq!(send("GET", &format!("/v1/artifacts/{artifact}"), None).body, "kept");
    assert_eq!(send("DELETE", &format!("/v1/artifacts/{artifact}"), Some(json!({}))).status, 204);

    for path in ["/v1/status", "/v1/tools", "/v1/log", "/v1/stats", "/v1/auth", "/ui/state"] {
        let reply = send("GET", path, None);
        assert_eq!(reply.status, 200, "{path}: {reply}");
    }
    let own = poll(Duration::from_secs(10), || send("GET", "/v1/log", None).body.contains("whoami").then_some(()));
    assert!(own.is_some(), "the holder reads its own records: {}", send("GET", "/v1/log", None));
}

fn authorization_server() -> AuthorizationServer {
    AuthorizationServer::start(&[("alice", ALICE_SECRET)])
}

/// A daemon taking `issuer`'s tokens, with `oauth` added to `http.oauth`.
fn oauth_daemon(issuer: &str, servers: &[(&str, Value)], oauth: Value) -> Daemon {
    let mut cfg = config(servers);
    cfg["http"] = json!({"oauth": {"issuers": [issuer], "requestTimeout": "30s"}});
    if let (Some(into), Value::Object(extra)) = (cfg["http"]["oauth"].as_object_mut(), oauth) {
        into.extend(extra);
    }
    Daemon::start(&cfg)
}

#[test]
fn an_oauth_subject_without_scopes_cannot_stop_the_daemon_nor_read_every_callers_counters() {
    let server = authorization_server();
    let daemon = oauth_daemon(&server.issuer, &[("alpha", fakemcp("global", &tag(), &[]))], json!({}));
    let token = bearer(&server.token("alice", daemon.url(), ""));
    for (method, path) in [("POST", "/v1/stop"), ("GET", "/metrics")] {
        let reply = request(&daemon, method, path, &token);
        assert_eq!(reply.status, 403, "{method} {path}: {reply}");
        assert!(reply.body.contains(DAEMON_WIDE), "{method} {path}: {reply}");
    }
    // Its own view is still served; and the daemon still runs.
    let state = request(&daemon, "GET", "/ui/state", &token);
    assert_eq!(state.status, 200, "{state}");
    assert_eq!(state.json()["pid"].as_u64(), Some(u64::from(daemon.pid())));
    assert!(alive(daemon.pid()));
}

#[test]
fn a_token_without_the_v1_scopes_is_refused_ui_state_and_metrics_as_v1_status() {
    let server = authorization_server();
    let required = json!({"requiredScopes": {"mcp": ["mcp:tools"], "v1": ["mcp:admin"]}});
    let daemon = oauth_daemon(&server.issuer, &[("alpha", fakemcp("global", &tag(), &[]))], required);
    let tools_only = bearer(&server.token("alice", daemon.url(), "mcp:tools"));
    for path in ["/v1/status", "/ui/state", "/metrics", "/ui"] {
        let reply = request(&daemon, "GET", path, &tools_only);
        assert_eq!(reply.status, 403, "{path} without the /v1 scopes: {reply}");
        let challenge = reply.header("www-authenticate").unwrap_or_default();
        assert!(challenge.contains("insufficient_scope") && challenge.contains("mcp:admin"), "{path}: {reply}");
    }
    // With them, the caller's own view is served (and /metrics stays the owner's and admins').
    let v1 = bearer(&server.token("alice", daemon.url(), "mcp:admin"));
    for path in ["/v1/status", "/ui/state"] {
        let reply = request(&daemon, "GET", path, &v1);
        assert_eq!(reply.status, 200, "{path}: {reply}");
    }
    let metrics = request(&daemon, "GET", "/metrics", &v1);
    assert!(metrics.status == 403 && metrics.body.contains(DAEMON_WIDE), "{metrics}");
}

#[test]
fn a_client_limited_to_one_server_never_sees_another_named_in_any_reading_route() {
    let t = tag();
    let mut cfg = config(&[("alpha", fakemcp("global", &t, &[])), ("zhiddenbeta", fakemcp("global", &t, &[]))]);
    // An HTTP server: `/v1/auth` names those.
    cfg["mcpServers"]["zhiddenweb"] = json!({"url": "http://127.0.0.1:9/mcp"});
    cfg["http"] = json!({"tokens": {"limited": GUEST, "boss": BOSS}, "admins": ["token:boss"]});
    cfg["clients"] = json!({"token:limited": {"servers": ["alpha"]}});
    let daemon = Daemon::start(&cfg);
    let home = daemon.home();
    // Everyone else's use of the hidden servers: the owner's and another holder's.
    let beta = json!({"server": "zhiddenbeta", "tool": "whoami", "arguments": {}});
    assert_eq!(home.v1("POST", "/v1/call", Some(&beta)).status, 200);
    let url = format!("{}/v1/call", base_url(daemon.url()));
    let by_boss = plain("POST", &url, &[("Authorization", &bearer(BOSS))], Some(&beta.to_string()));
    assert_eq!(by_boss.status, 200, "{by_boss}");
    // The limited client's own use of its server.
    let alpha = json!({"server": "alpha", "tool": "whoami", "arguments": {}}).to_string();
    let own = plain("POST", &url, &[("Authorization", &bearer(GUEST))], Some(&alpha));
    assert_eq!(own.status, 200, "{own}");

    let reading = [
        "/v1/status",
        "/v1/tools",
        "/v1/auth",
        "/v1/tasks",
        "/v1/log",
        "/v1/stats",
        "/v1/stats?by=tool",
        "/v1/stats?by=instance",
        "/v1/stats?by=client",
        "/v1/artifacts",
        "/v1/ask",
        "/ui/state",
        "/metrics",
    ];
    // The control: the admin sees the hidden servers named where they are.
    let admin_sees = |path: &str| request(&daemon, "GET", path, &bearer(BOSS)).body;
    assert!(admin_sees("/v1/auth").contains("zhiddenweb"), "{}", admin_sees("/v1/auth"));
    assert!(admin_sees("/metrics").contains("zhiddenbeta"), "{}", admin_sees("/metrics"));
    // The journal writes behind the calls: wait until it holds all three.
    let journaled = poll(Duration::from_secs(10), || {
        let log = request(&daemon, "GET", "/v1/log", &bearer(BOSS)).json();
        (log["records"].as_array().map_or(0, Vec::len) >= 3).then_some(log)
    });
    let log = journaled.unwrap_or_else(|| panic!("the journal did not keep the calls: {}", admin_sees("/v1/log")));
    assert!(log.to_string().contains("zhiddenbeta"), "{log}");
    for path in reading {
        let reply = request(&daemon, "GET", path, &bearer(GUEST));
        assert!(reply.status == 200 || (path == "/metrics" && reply.status == 403), "{path}: {reply}");
        for hidden in ["zhiddenbeta", "zhiddenweb"] {
            assert!(!reply.body.contains(hidden), "{path} names {hidden} to a client limited to alpha: {reply}");
        }
    }
    assert!(request(&daemon, "GET", "/v1/log", &bearer(GUEST)).body.contains("alpha"), "its own records are read");
    // Where the daemon keeps its socket and config is the daemon's: the admin reads it,
    // a plain holder does not.
    let status = |token: &str| request(&daemon, "GET", "/v1/status", &bearer(token)).json();
    let (admins, guests) = (status(BOSS), status(GUEST));
    assert!(admins["socket"].is_string() && admins["config"].is_string(), "{admins}");
    for field in ["socket", "config", "journalDropped"] {
        assert!(guests[field].is_null(), "/v1/status shows a plain holder {field}: {guests}");
    }
}
