//! mcpx as the OAuth client of an HTTP upstream that asks for it: the person's login (CLI
//! and -32042), and the boundaries around it — a redirect with another `state` or a wrong
//! `iss` is refused, tokens stay in a 0600 file and out of status and logs, the bearer goes
//! to its own server only, only the daemon's owner may log a shared credential in, and an
//! access token about to expire is refreshed before it is used. In a cluster, a login
//! through one node serves every node, a refresh token is spent by one node only, and a
//! credential planted in Redis is never used.
//!
//! The upstream is [`Protected`]: a small MCP server (2026-07-28) that is also its own
//! authorization server (metadata, registration, an `/authorize` that answers at once with
//! a redirect, a token endpoint with refresh tokens, revocation) and writes down what it
//! was sent. The conformance suite's scenario servers check the protocol itself (see
//! scripts/conformance-client.sh); this one lets a test see what each side received.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_e2e::client::{Raw, Reply, next_id};
use mcpx_e2e::{Daemon, Modern};
use serde_json::{Value, json};

const TOKEN: &str = "ci-token-0123456789abcdef-xyz";

#[derive(Default)]
struct Seen {
    /// The `Authorization` header of each MCP request (`None`: none).
    mcp: Vec<Option<String>>,
    /// The `grant_type` of each token request.
    grants: Vec<String>,
    issued: Vec<String>,
    refresh: Vec<String>,
    /// Refresh tokens used once: each is good once (rotation).
    spent: Vec<String>,
    /// Refresh requests with a token already spent.
    reused: usize,
    revoked: Vec<String>,
    /// Access tokens no longer accepted (the server withdrew them).
    withdrawn: Vec<String>,
    /// Whether metadata and token requests are answered slowly (1.2 s and 1 s).
    slow: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Asks for OAuth, answers the redirect with the right `iss`.
    Protected,
    /// Asks for OAuth, answers the redirect with another issuer's `iss`.
    WrongIss,
    /// Asks for OAuth and refuses every refresh (the grant was revoked).
    RefuseRefresh,
    /// Asks for nothing: an unrelated server that writes down what reaches it.
    Open,
}

struct Protected {
    base: String,
    seen: Arc<Mutex<Seen>>,
}

impl Protected {
    /// Starts the server; `first_expiry` is the first access token's `expires_in`.
    fn start(mode: Mode, first_expiry: u64) -> Protected {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (b, s) = (base.clone(), seen.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (b, s) = (b.clone(), s.clone());
                std::thread::spawn(move || serve(stream, mode, &b, &s, first_expiry));
            }
        });
        Protected { base, seen }
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap())
    }
}

fn serve(mut stream: TcpStream, mode: Mode, base: &str, seen: &Mutex<Seen>, first_expiry: u64) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let length: usize = header("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).into_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let slow = seen.lock().unwrap().slow;
    match (slow, path) {
        (true, p) if p.starts_with("/.well-known/") => std::thread::sleep(Duration::from_millis(1200)),
        (true, "/token") => std::thread::sleep(Duration::from_millis(1000)),
        _ => {}
    }
    let form = |text: &str, key: &str| {
        text.split('&').find_map(|p| p.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| decode(v)))
    };
    match (method.as_str(), path) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") if mode != Mode::Open => json_reply(
            &mut stream,
            200,
            json!({ "resource": format!("{base}/mcp"), "authorization_servers": [base] }),
            "",
        ),
        ("GET", "/.well-known/oauth-authorization-server") if mode != Mode::Open => json_reply(
            &mut stream,
            200,
            json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "revocation_endpoint": format!("{base}/revoke"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "authorization_response_iss_parameter_supported": true,
            }),
            "",
        ),
        ("POST", "/register") => json_reply(
            &mut stream,
            201,
            json!({ "client_id": "mini-client", "token_endpoint_auth_method": "none" }),
            "",
        ),
        ("GET", "/authorize") => {
            let redirect = form(query, "redirect_uri").unwrap_or_default();
            let state = form(query, "state").unwrap_or_default();
            let iss = if mode == Mode::WrongIss { "https://evil.example.com".to_owned() } else { base.to_owned() };
            let location = format!("{redirect}?code=the-code&state={}&iss={}", encode(&state), encode(&iss));
            respond(&mut stream, 302, "text/plain", &format!("Location: {location}\r\n"), "")
        }
        ("POST", "/token") => {
            let mut seen = seen.lock().unwrap();
            let grant = form(&body, "grant_type").unwrap_or_default();
            seen.grants.push(grant.clone());
            let n = seen.issued.len() + 1;
            let (access, refresh) = (format!("at-{n}-secret"), format!("rt-{n}-secret"));
            let presented = form(&body, "refresh_token").unwrap_or_default();
            let known_refresh = seen.refresh.contains(&presented);
            let spent = seen.spent.contains(&presented);
            if grant == "refresh_token" {
                seen.reused += usize::from(spent);
                seen.spent.push(presented);
            }
            if grant == "refresh_token" && (!known_refresh || spent || mode == Mode::RefuseRefresh) {
                return json_reply(&mut stream, 400, json!({ "error": "invalid_grant" }), "");
            }
            seen.issued.push(access.clone());
            seen.refresh.push(refresh.clone());
            let expires_in = if n == 1 { first_expiry } else { 3600 };
            drop(seen);
            json_reply(
                &mut stream,
                200,
                json!({ "access_token": access, "token_type": "Bearer", "expires_in": expires_in, "refresh_token": refresh }),
                "",
            )
        }
        ("POST", "/revoke") => {
            seen.lock().unwrap().revoked.push(form(&body, "token").unwrap_or_default());
            json_reply(&mut stream, 200, json!({}), "")
        }
        ("POST", "/mcp") => {
            let auth = header("authorization");
            let valid = {
                let mut seen = seen.lock().unwrap();
                seen.mcp.push(auth.clone());
                auth.as_deref()
                    .and_then(|a| a.strip_prefix("Bearer "))
                    .is_some_and(|t| seen.issued.iter().any(|i| i == t) && !seen.withdrawn.iter().any(|w| w == t))
            };
            if mode != Mode::Open && !valid {
                let challenge = format!(
                    "WWW-Authenticate: Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"\r\n"
                );
                return json_reply(&mut stream, 401, json!({ "error": "invalid_token" }), &challenge);
            }
            let frame: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let result = match frame["method"].as_str().unwrap_or_default() {
                "server/discover" => json!({
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": { "tools": {} },
                    "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "mini", "version": "1" } },
                }),
                "tools/list" => json!({ "tools": [{ "name": "whoami", "inputSchema": { "type": "object" } }] }),
                "tools/call" => json!({ "content": [{ "type": "text", "text": "ok" }] }),
                other => {
                    let error = json!({ "code": -32601, "message": format!("no {other}") });
                    return json_reply(
                        &mut stream,
                        200,
                        json!({ "jsonrpc": "2.0", "id": frame["id"], "error": error }),
                        "",
                    );
                }
            };
            json_reply(&mut stream, 200, json!({ "jsonrpc": "2.0", "id": frame["id"], "result": result }), "")
        }
        _ => respond(&mut stream, 404, "text/plain", "", "not found"),
    }
}

fn json_reply(stream: &mut TcpStream, status: u16, value: Value, extra: &str) {
    respond(stream, status, "application/json", extra, &value.to_string());
}

fn respond(stream: &mut TcpStream, status: u16, kind: &str, extra: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
        body.len()
    );
}

fn decode(text: &str) -> String {
    let bytes = text.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// What a person's browser does with a login URL: follows the redirects to mcpx's
/// callback; the status and page it lands on.
fn open_in_browser(url: &str) -> (u16, String) {
    let response = reqwest::blocking::get(url).unwrap_or_else(|e| panic!("opening {url}: {e}"));
    (response.status().as_u16(), response.text().unwrap_or_default())
}

fn query_param(url: &str, key: &str) -> String {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    query
        .split('&')
        .find_map(|p| p.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| decode(v)))
        .unwrap_or_else(|| panic!("{url} has no {key}"))
}

fn config(servers: Value) -> Value {
    json!({ "mcpServers": servers })
}

/// Begins a login over the owner's socket; the login's id and URL.
fn begin(daemon: &Daemon, server: &str) -> (String, String) {
    let reply = daemon.home().v1("POST", "/v1/auth/login", Some(&json!({ "server": server })));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    (body["id"].as_str().unwrap().to_owned(), body["url"].as_str().unwrap().to_owned())
}

fn wait(daemon: &Daemon, id: &str) -> Value {
    let reply = daemon.home().v1("POST", "/v1/auth/wait", Some(&json!({ "id": id, "waitMs": 10000 })));
    assert_eq!(reply.status, 200, "{}", reply.body);
    serde_json::from_str(&reply.body).unwrap()
}

#[test]
fn the_owner_logs_in_with_the_cli_and_the_bearer_reaches_only_its_own_server() {
    let docs = Protected::start(Mode::Protected, 3600);
    let other = Protected::start(Mode::Open, 3600);
    let daemon = Daemon::start_with_env(
        &config(json!({ "docs": { "url": docs.url() }, "other": { "url": other.url() } })),
        &[("MCPX_LOG", "debug")],
    );
    // Before the login: a plain error that says what to run, and no URL.
    let before = Modern::mcpx_call("docs", "whoami", json!({})).send(daemon.url());
    let text = before.to_string();
    assert!(text.contains("mcpx auth login docs"), "{before}");
    assert!(!text.contains("/authorize"), "a caller that cannot open URLs gets none: {before}");

    let mut login = daemon.home().mcpx();
    login.args(["auth", "login", "docs", "--no-open"]).env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    let mut child = login.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let url = loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "mcpx auth login printed no URL");
        if line.starts_with("http") {
            break line.trim().to_owned();
        }
    };
    assert_eq!(query_param(&url, "code_challenge_method"), "S256");
    assert_eq!(query_param(&url, "resource"), docs.url());
    let (status, page) = open_in_browser(&url);
    assert_eq!(status, 200, "{page}");
    let status = child.wait().unwrap();
    assert!(status.success(), "mcpx auth login exited {status}");

    let called = Modern::mcpx_call("docs", "whoami", json!({})).send(daemon.url());
    assert_eq!(called.structured_or_text(), "ok", "{called}");
    let called = Modern::mcpx_call("other", "whoami", json!({})).send(daemon.url());
    assert_eq!(called.structured_or_text(), "ok", "{called}");
    assert!(docs.seen(|s| s.mcp.iter().any(|a| a.as_deref() == Some("Bearer at-1-secret"))));
    assert!(other.seen(|s| s.mcp.iter().all(Option::is_none)), "another upstream got an Authorization header");

    // The store is private, and no token shows in status, auth ls or the log.
    let dir = daemon.state_dir().join("oauth");
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    let file = dir.join("tokens.json");
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    assert!(std::fs::read_to_string(&file).unwrap().contains("at-1-secret"));
    let ls = daemon.home().cli(&["auth", "ls", "--json"]);
    ls.assert_code(0);
    let docs_entry = ls.json()["servers"].as_array().unwrap().iter().find(|s| s["server"] == "docs").cloned().unwrap();
    assert_eq!(docs_entry["state"], "loggedIn", "{ls}");
    assert_eq!(docs_entry["issuer"], json!(docs.base), "{ls}");
    let shown = [
        ls.stdout.clone(),
        daemon.home().cli(&["status", "--json"]).stdout,
        daemon.home().cli(&["auth", "ls"]).stdout,
        daemon.stderr(),
    ];
    for text in shown {
        for secret in ["at-1-secret", "rt-1-secret"] {
            assert!(!text.contains(secret), "{secret} showed in:\n{text}");
        }
    }

    // Logging out revokes at the server and forgets.
    let out = daemon.home().cli(&["auth", "logout", "docs", "--json"]);
    out.assert_code(0);
    assert_eq!(out.json()["revoked"], true, "{out}");
    assert!(docs.seen(|s| s.revoked.contains(&"rt-1-secret".to_owned())));
    assert!(!std::fs::read_to_string(&file).unwrap().contains("at-1-secret"));
}

trait Text {
    fn structured_or_text(&self) -> String;
}

impl Text for Reply {
    fn structured_or_text(&self) -> String {
        self.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned()
    }
}

#[test]
fn a_redirect_with_another_state_is_refused_and_leaves_the_login_as_it_was() {
    let docs = Protected::start(Mode::Protected, 3600);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let (id, url) = begin(&daemon, "docs");
    let redirect = query_param(&url, "redirect_uri");
    // A page in the browser (or an old tab) sends a code with a state mcpx did not mint.
    let forged = reqwest::blocking::get(format!("{redirect}?code=attacker-code&state=forged")).unwrap();
    assert_eq!(forged.status().as_u16(), 400);
    let no_state = reqwest::blocking::get(format!("{redirect}?code=attacker-code")).unwrap();
    assert_eq!(no_state.status().as_u16(), 400);
    assert!(docs.seen(|s| s.grants.is_empty()), "a forged redirect reached the token endpoint");
    assert_eq!(wait_briefly(&daemon, &id)["status"], "pending");
    // The real one still completes, once.
    let (status, page) = open_in_browser(&url);
    assert_eq!(status, 200, "{page}");
    assert_eq!(wait(&daemon, &id)["status"], "done");
    assert_eq!(docs.seen(|s| s.grants.clone()), ["authorization_code"]);
    assert!(reqwest::blocking::get(format!("{redirect}?code=the-code&state=x")).is_err(), "the listener is closed");
}

fn wait_briefly(daemon: &Daemon, id: &str) -> Value {
    let reply = daemon.home().v1("POST", "/v1/auth/wait", Some(&json!({ "id": id, "waitMs": 0 })));
    serde_json::from_str(&reply.body).unwrap()
}

#[test]
fn a_redirect_naming_another_issuer_is_refused_before_the_code_is_used() {
    let docs = Protected::start(Mode::WrongIss, 3600);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let (id, url) = begin(&daemon, "docs");
    let (status, page) = open_in_browser(&url);
    assert_eq!(status, 400, "{page}");
    let done = wait(&daemon, &id);
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error"].as_str().unwrap().contains("iss"), "{done}");
    assert!(docs.seen(|s| s.grants.is_empty()), "the code went to the token endpoint");
}

#[test]
fn a_token_holder_cannot_begin_a_shared_login_and_the_owner_gets_a_url() {
    let docs = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({ "docs": { "url": docs.url() } }));
    config["http"] = json!({ "tokens": { "ci": TOKEN } });
    let daemon = Daemon::start(&config);
    let bearer = format!("Bearer {TOKEN}");
    // A 2025-11-25 caller that can open URLs, admitted by a token: no URL, only the error.
    let session = open_with_url_elicitation(daemon.url(), &[("Authorization", &bearer)]);
    let reply = session.mcpx_call("docs", "whoami", json!({}));
    assert!(
        reply.content_type() != "text/event-stream" || !reply.to_string().contains("elicitation/create"),
        "{reply}"
    );
    let text = reply.to_string();
    assert_ne!(reply.error_code(), -32042, "{reply}");
    assert!(text.contains("mcpx auth login docs"), "{reply}");
    assert!(!text.contains("/authorize"), "a token holder got a login URL: {reply}");
    // Nor through /v1.
    let v1 = mcpx_e2e::client::plain(
        "POST",
        &daemon.url().replace("/mcp", "/v1/auth/login"),
        &[("Authorization", &bearer)],
        Some(r#"{"server":"docs"}"#),
    );
    assert_eq!(v1.status, 400, "{v1}");
    assert!(!v1.body.contains("/authorize"), "{v1}");
    // The owner (the unix socket) can.
    let (_, url) = begin(&daemon, "docs");
    assert!(url.starts_with(&format!("{}/authorize?", docs.base)), "{url}");
}

#[test]
fn a_token_holder_cannot_watch_the_owners_login() {
    let docs = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({ "docs": { "url": docs.url() } }));
    config["http"] = json!({ "tokens": { "ci": TOKEN } });
    let daemon = Daemon::start(&config);
    let (id, _) = begin(&daemon, "docs");
    // The login's id is the elicitationId a caller is shown: it is no key to the login.
    let watch = mcpx_e2e::client::plain(
        "POST",
        &daemon.url().replace("/mcp", "/v1/auth/wait"),
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        Some(&json!({ "id": id, "waitMs": 0 }).to_string()),
    );
    assert_eq!(watch.status, 400, "{watch}");
    assert!(!watch.body.contains("pending"), "{watch}");
    assert_eq!(wait_briefly(&daemon, &id)["status"], "pending", "the owner still can");
}

#[test]
fn a_session_listing_a_server_that_needs_a_login_gets_minus_32042_with_its_url() {
    // A listing cannot stop to ask: the caller that can open URLs is handed the login's.
    let docs = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({ "docs": { "url": docs.url() } }));
    config["expose"] = json!(["docs"]);
    let daemon = Daemon::start(&config);
    let session = open_with_url_elicitation(daemon.url(), &[]);
    let list = || session.raw(json!({ "jsonrpc": "2.0", "id": next_id(), "method": "tools/list" }), Some("tools/list"));
    let reply = list();
    assert_eq!(reply.error_code(), -32042, "{reply}");
    let elicitation = &reply.error()["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url");
    let url = elicitation["url"].as_str().unwrap();
    let (status, page) = open_in_browser(url);
    assert_eq!(status, 200, "{page}");
    let again = list();
    let names: Vec<&str> =
        again.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"docs__whoami"), "{again}");
}

/// A 2025-11-25 session whose client declared URL-mode elicitation.
struct UrlCapable {
    url: String,
    headers: Vec<(String, String)>,
}

fn open_with_url_elicitation(url: &str, extra: &[(&str, &str)]) -> UrlCapable {
    let mut headers: Vec<(String, String)> = vec![
        ("Content-Type".into(), "application/json".into()),
        ("Accept".into(), "application/json, text/event-stream".into()),
    ];
    headers.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    let init = json!({
        "jsonrpc": "2.0", "id": next_id(), "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": { "elicitation": { "form": {}, "url": {} } },
            "clientInfo": { "name": "mcpx-e2e", "version": "0" },
        },
    });
    let reply = Raw {
        http_method: "POST",
        url,
        headers: headers.clone(),
        body: Some(init.to_string().into_bytes()),
        revision: "2025-11-25",
        method: Some("initialize"),
    }
    .send();
    let id = reply.header("mcp-session-id").unwrap_or_else(|| panic!("no session: {reply}")).to_owned();
    headers.push(("Mcp-Session-Id".into(), id));
    headers.push(("MCP-Protocol-Version".into(), "2025-11-25".into()));
    let session = UrlCapable { url: url.to_owned(), headers };
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    session.raw(note, None);
    session
}

impl UrlCapable {
    fn raw(&self, frame: Value, method: Option<&str>) -> Reply {
        Raw {
            http_method: "POST",
            url: &self.url,
            headers: self.headers.clone(),
            body: Some(frame.to_string().into_bytes()),
            revision: "2025-11-25",
            method,
        }
        .send()
    }

    fn mcpx_call(&self, server: &str, tool: &str, arguments: Value) -> Reply {
        let params =
            json!({ "name": "mcpx_call", "arguments": { "server": server, "tool": tool, "arguments": arguments } });
        self.raw(
            json!({ "jsonrpc": "2.0", "id": next_id(), "method": "tools/call", "params": params }),
            Some("tools/call"),
        )
    }
}

#[test]
fn an_access_token_about_to_expire_is_refreshed_before_it_is_used() {
    // The first token expires in 30 s, inside oauth.refreshBefore (60 s by default).
    let docs = Protected::start(Mode::Protected, 30);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let (id, url) = begin(&daemon, "docs");
    assert_eq!(open_in_browser(&url).0, 200);
    assert_eq!(wait(&daemon, &id)["status"], "done");
    // (Beginning the login sent one unauthenticated probe for the server's challenge.)
    let before = docs.seen(|s| s.mcp.len());
    let called = Modern::mcpx_call("docs", "whoami", json!({})).send(daemon.url());
    assert_eq!(called.structured_or_text(), "ok", "{called}");
    assert_eq!(docs.seen(|s| s.grants.clone()), ["authorization_code", "refresh_token"]);
    // Every MCP request carried the refreshed token: none was refused first.
    let sent = docs.seen(|s| s.mcp[before..].to_vec());
    assert!(!sent.is_empty() && sent.iter().all(|a| a.as_deref() == Some("Bearer at-2-secret")), "{sent:?}");
}

#[test]
fn a_login_not_completed_in_time_is_dropped_and_the_cli_says_so() {
    let docs = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({ "docs": { "url": docs.url() } }));
    config["oauth"] = json!({ "loginTimeout": "1s" });
    let daemon = Daemon::start(&config);
    let (id, url) = begin(&daemon, "docs");
    assert_eq!(wait(&daemon, &id)["status"], "expired");
    let redirect = query_param(&url, "redirect_uri");
    assert!(reqwest::blocking::get(format!("{redirect}?code=c&state=s")).is_err(), "its listener is closed");
    let run = daemon.home().cli(&["auth", "login", "docs", "--no-open"]);
    run.assert_code(124);
    assert!(run.stderr.contains("not completed in time"), "{run}");
    assert!(docs.seen(|s| s.grants.is_empty()));
}

#[test]
fn with_credentials_user_each_token_holder_logs_in_for_itself_only() {
    const OTHER: &str = "other-token-0123456789abcdef";
    let docs = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({ "docs": { "url": docs.url(), "credentials": "user", "scope": "session" } }));
    config["http"] = json!({ "tokens": { "ci": TOKEN, "other": OTHER } });
    let daemon = Daemon::start(&config);
    let ci = format!("Bearer {TOKEN}");
    let other = format!("Bearer {OTHER}");
    // A token holder may log its own credential in: it is asked to, mid-call.
    let first = modern_call(json!({})).session("s").header("Authorization", &ci).send(daemon.url());
    assert_eq!(first.result()["resultType"], "input_required", "{first}");
    let url = first.result()["inputRequests"]["dev.mcpx/login"]["params"]["url"].as_str().unwrap().to_owned();
    assert_eq!(open_in_browser(&url).0, 200);
    let answered = json!({
        "inputResponses": { "dev.mcpx/login": { "action": "accept" } },
        "requestState": first.result()["requestState"],
    });
    let done = modern_call(answered).session("s").header("Authorization", &ci).send(daemon.url());
    assert_eq!(done.structured_or_text(), "ok", "{done}");
    // Another token holder is not logged in by it, even naming the same session.
    let theirs = modern_call(json!({})).session("s").header("Authorization", &other).send(daemon.url());
    assert_eq!(theirs.result()["resultType"], "input_required", "the other holder rode on ci's login: {theirs}");
    let tokens = std::fs::read_to_string(daemon.state_dir().join("oauth/tokens.json")).unwrap();
    let stored: Value = serde_json::from_str(&tokens).unwrap();
    let keys: Vec<&String> = stored["tokens"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["docs\u{0}@\"ci\""], "{tokens}");
}

#[test]
fn callers_logging_in_for_themselves_cannot_use_up_the_owners_logins() {
    let docs = Protected::start(Mode::Protected, 3600);
    let shared = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({
        "docs": { "url": docs.url(), "credentials": "user", "scope": "user" },
        "shared": { "url": shared.url() },
    }));
    let tokens: Vec<String> = (0..20).map(|n| format!("holder-{n:02}-0123456789abcdef")).collect();
    config["http"] =
        json!({ "tokens": tokens.iter().map(|t| (t.clone(), json!(t))).collect::<serde_json::Map<_, _>>() });
    let daemon = Daemon::start(&config);
    // Each holder begins its own login and leaves it open: every login slot is taken.
    let mut refused = 0;
    for token in &tokens {
        let begun = mcpx_e2e::client::plain(
            "POST",
            &daemon.url().replace("/mcp", "/v1/auth/login"),
            &[("Authorization", &format!("Bearer {token}"))],
            Some(r#"{"server":"docs"}"#),
        );
        refused += usize::from(begun.status != 200);
    }
    assert!(refused > 0, "the logins under way are bounded");
    // The owner can still log the shared credential in.
    let (_, url) = begin(&daemon, "shared");
    assert!(url.starts_with(&format!("{}/authorize?", shared.base)), "{url}");
}

#[test]
fn a_refresh_the_server_refuses_means_a_login_is_needed_again() {
    let docs = Protected::start(Mode::RefuseRefresh, 30);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let (id, url) = begin(&daemon, "docs");
    assert_eq!(open_in_browser(&url).0, 200);
    assert_eq!(wait(&daemon, &id)["status"], "done");
    let called = Modern::mcpx_call("docs", "whoami", json!({})).send(daemon.url());
    assert!(called.to_string().contains("mcpx auth login docs"), "{called}");
    assert_eq!(docs.seen(|s| s.grants.clone()), ["authorization_code", "refresh_token"]);
    let ls = daemon.home().cli(&["auth", "ls", "--json"]);
    assert_eq!(ls.json()["servers"][0]["state"], "needsLogin", "{ls}");
}

#[test]
fn a_pinned_redirect_port_is_the_one_in_the_redirect_uri() {
    let docs = Protected::start(Mode::Protected, 3600);
    let port = mcpx_e2e::process::free_port();
    let mut config = config(json!({ "docs": { "url": docs.url() } }));
    config["oauth"] = json!({ "redirectPort": port });
    let daemon = Daemon::start(&config);
    let (id, url) = begin(&daemon, "docs");
    assert_eq!(query_param(&url, "redirect_uri"), format!("http://127.0.0.1:{port}/callback"));
    assert_eq!(open_in_browser(&url).0, 200);
    assert_eq!(wait(&daemon, &id)["status"], "done");
}

// --- A login asked for mid-call: the call completes without the agent starting over ---------

/// The capabilities of a client that can send its user to a URL.
fn url_capable() -> Value {
    json!({ "elicitation": { "form": {}, "url": {} } })
}

/// A 2025-11-25 session over `mcpx serve` (the daemon's owner) whose client declared
/// URL-mode elicitation, with an `mcpx_call` of `docs`' `whoami` sent on it; its id.
fn serve_calling_docs(daemon: &Daemon) -> (mcpx_e2e::serve::Serve, Value) {
    let mut serve = daemon.home().serve().start();
    let init = json!({
        "jsonrpc": "2.0", "id": next_id(), "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": url_capable(),
                    "clientInfo": { "name": "mcpx-e2e", "version": "0" } },
    });
    serve.request(&init);
    serve.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    let call = mcpx_e2e::serve::legacy_frame(
        "tools/call",
        json!({ "name": "mcpx_call", "arguments": { "server": "docs", "tool": "whoami", "arguments": {} } }),
    );
    serve.send(&call);
    (serve, call["id"].clone())
}

/// The next request mcpx puts to the `mcpx serve` client.
fn next_question(serve: &mut mcpx_e2e::serve::Serve) -> Value {
    let frame = serve.next_frame(std::time::Duration::from_secs(20)).expect("mcpx asked nothing");
    assert!(frame.get("method").is_some() && frame.get("id").is_some(), "not a request: {frame}");
    frame
}

#[test]
fn a_session_caller_is_asked_to_open_the_login_and_its_call_then_completes() {
    let docs = Protected::start(Mode::Protected, 3600);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let (mut serve, call) = serve_calling_docs(&daemon);
    let asked = next_question(&mut serve);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let params = &asked["params"];
    assert_eq!(params["mode"], "url", "{asked}");
    assert!(params["message"].as_str().unwrap().contains("mcpx auth login docs"), "{asked}");
    let url = params["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{}/authorize?", docs.base)), "{url}");
    // The person logs in, then the client says so.
    assert_eq!(open_in_browser(url).0, 200);
    serve.send(&json!({ "jsonrpc": "2.0", "id": asked["id"], "result": { "action": "accept" } }));
    let answer = serve.answer(&call, std::time::Duration::from_secs(20));
    assert_eq!(answer.result()["content"][0]["text"], "ok", "{answer}");
    let completed = answer.notifications.iter().find(|n| n["method"] == "notifications/elicitation/complete");
    let completed = completed.unwrap_or_else(|| panic!("no elicitation/complete: {answer}"));
    assert_eq!(completed["params"]["elicitationId"], params["elicitationId"]);
    assert_eq!(docs.seen(|s| s.grants.clone()), ["authorization_code"]);
}

#[test]
fn a_session_caller_that_declines_the_login_gets_an_error_naming_the_command() {
    let docs = Protected::start(Mode::Protected, 3600);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let (mut serve, call) = serve_calling_docs(&daemon);
    let asked = next_question(&mut serve);
    serve.send(&json!({ "jsonrpc": "2.0", "id": asked["id"], "result": { "action": "decline" } }));
    let answer = serve.answer(&call, std::time::Duration::from_secs(20));
    assert!(answer.to_string().contains("mcpx auth login docs"), "{answer}");
    assert!(docs.seen(|s| s.grants.is_empty()), "a declined login reached the token endpoint");
}

/// A 2026 `mcpx_call` of `docs`' `whoami` from a client that can open URLs.
fn modern_call(extra: Value) -> Modern {
    let mut params =
        json!({ "name": "mcpx_call", "arguments": { "server": "docs", "tool": "whoami", "arguments": {} } });
    params.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    Modern::new("tools/call", params).meta("io.modelcontextprotocol/clientCapabilities", url_capable())
}

#[test]
fn a_stateless_caller_gets_the_login_as_input_required_and_its_retry_completes() {
    let docs = Protected::start(Mode::Protected, 3600);
    let daemon = Daemon::start(&config(json!({ "docs": { "url": docs.url() } })));
    let first = modern_call(json!({})).send(daemon.url());
    let result = first.result();
    assert_eq!(result["resultType"], "input_required", "{first}");
    let question = &result["inputRequests"]["dev.mcpx/login"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    assert_eq!(question["params"]["mode"], "url", "{first}");
    let url = question["params"]["url"].as_str().unwrap();
    assert_eq!(open_in_browser(url).0, 200);
    let retry = modern_call(json!({
        "inputResponses": { "dev.mcpx/login": { "action": "accept" } },
        "requestState": result["requestState"],
    }));
    let done = retry.send(daemon.url());
    assert_eq!(done.structured_or_text(), "ok", "{done}");
    // A retry that did not log in, under another session's name, is refused.
    let stolen = modern_call(json!({
        "inputResponses": { "dev.mcpx/login": { "action": "accept" } },
        "requestState": result["requestState"],
    }))
    .session("someone-else")
    .send(daemon.url());
    assert_eq!(stolen.error_code(), -32602, "{stolen}");
}

#[test]
fn a_stateless_caller_that_accepts_but_never_logs_in_is_told_after_the_login_timeout() {
    let docs = Protected::start(Mode::Protected, 3600);
    let mut config = config(json!({ "docs": { "url": docs.url() } }));
    config["oauth"] = json!({ "loginTimeout": "1s" });
    let daemon = Daemon::start(&config);
    let first = modern_call(json!({})).send(daemon.url());
    assert_eq!(first.result()["resultType"], "input_required", "{first}");
    let retry = modern_call(json!({
        "inputResponses": { "dev.mcpx/login": { "action": "accept" } },
        "requestState": first.result()["requestState"],
    }));
    let reply = retry.send(daemon.url());
    let text = reply.to_string();
    assert!(text.contains("loginTimeout") && text.contains("mcpx auth login docs"), "{reply}");
    assert!(docs.seen(|s| s.grants.is_empty()));
}

/// Every `mcpx:oauth:*` value in the cluster's Redis replaced by `value` (redis-cli).
fn plant(redis: &mcpx_e2e::cluster::Redis, value: &str) -> usize {
    let keys: Vec<String> = redis
        .cli(&["--scan", "--pattern", "mcpx:oauth:*"])
        .lines()
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
    for key in &keys {
        assert_eq!(redis.cli(&["SET", key, value]), "OK");
    }
    keys.len()
}

#[test]
fn in_a_cluster_a_login_through_one_node_serves_every_node_and_each_refresh_token_is_spent_once() {
    // The first token is about to expire (inside oauth.refreshBefore): every node's first
    // call wants it refreshed, at once.
    let docs = Protected::start(Mode::Protected, 30);
    let servers = json!({ "docs": { "url": docs.url(), "scope": "session" } });
    let cluster = mcpx_e2e::cluster::Cluster::start(servers, "3s", json!({}));
    let (id, url) = begin(&cluster.nodes[0], "docs");
    assert_eq!(open_in_browser(&url).0, 200);
    assert_eq!(wait(&cluster.nodes[0], &id)["status"], "done");
    // Every node knows of the login at once.
    for (i, node) in cluster.nodes.iter().enumerate() {
        let ls = node.home().cli(&["auth", "ls", "--json"]);
        assert_eq!(ls.json()["servers"][0]["state"], "loggedIn", "node {i}: {ls}");
    }
    // One session per node, each started where it lands: three instances, three nodes,
    // each sending the bearer it finds.
    let called: Vec<Reply> = std::thread::scope(|scope| {
        let calls: Vec<_> = cluster
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let url = node.url().to_owned();
                scope.spawn(move || Modern::mcpx_call("docs", "whoami", json!({})).session(&format!("s{i}")).send(&url))
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    for (i, reply) in called.iter().enumerate() {
        assert_eq!(reply.structured_or_text(), "ok", "through node {i}: {reply}");
        assert_eq!(cluster.owner_of("docs", &format!("s{i}")), Some(i), "session s{i} lives on node {i}");
    }
    assert_eq!(docs.seen(|s| s.grants.clone()), ["authorization_code", "refresh_token"], "refreshed once");
    assert_eq!(docs.seen(|s| s.reused), 0, "no refresh token was spent twice");
    // Every request carried a token the server issued: none was refused and retried.
    let sent = docs.seen(|s| s.mcp.clone());
    let refused = sent.iter().filter(|a| a.as_deref() != Some("Bearer at-2-secret")).count();
    assert_eq!(refused, 1, "only the login's probe went without the refreshed token: {sent:?}");
    // The credential is in Redis sealed: no token in the clear.
    let keys = cluster.redis.cli(&["--scan", "--pattern", "mcpx:oauth:*"]);
    assert_eq!(keys.lines().count(), 1, "one credential: {keys}");
    assert!(!cluster.redis.cli(&["GET", &keys]).contains("secret"), "a token in the clear in Redis");
    // The login and the refresh each took their generation from one counter in Redis.
    let counter = cluster.redis.cli(&["--scan", "--pattern", "mcpx:oauth-generation:*"]);
    let count: u64 = cluster.redis.cli(&["GET", &counter]).parse().unwrap_or_else(|_| panic!("{counter:?}"));
    assert!(count > 1_700_000_000_000, "the generation counter starts at the time in ms: {count}");

    // Whoever writes to Redis plants a credential of its own: no node uses it (nor the
    // endpoints it names); the next call needs a login again.
    let planted = json!({
        "accessToken": "at-planted", "refreshToken": "rt-planted", "serverUrl": docs.url(),
        "issuer": docs.base, "tokenEndpoint": format!("{}/token", docs.base), "resource": docs.url(),
        "client": { "clientId": "mini-client", "authMethod": "none" },
    });
    assert_eq!(plant(&cluster.redis, &planted.to_string()), 1);
    // (`auth ls` reads Redis at once; a bearer may use what it read within the last second.)
    let ls = cluster.nodes[1].home().cli(&["auth", "ls", "--json"]);
    assert_ne!(ls.json()["servers"][0]["state"], "loggedIn", "{ls}");
    let before = docs.seen(|s| s.mcp.len());
    let after = Modern::mcpx_call("docs", "whoami", json!({})).session("s9").send(cluster.nodes[1].url());
    assert!(after.to_string().contains("mcpx auth login docs"), "{after}");
    let sent = docs.seen(|s| s.mcp[before..].to_vec());
    assert!(sent.iter().all(|a| a.as_deref() != Some("Bearer at-planted")), "{sent:?}");
    assert_eq!(docs.seen(|s| s.grants.len()), 2, "no refresh with a planted token");
}

/// Whoever writes to Redis cannot put a credential set back once a node has seen it go:
/// after a logout through one node, a copy taken before it is ignored by every node that
/// saw the logout, one restarted since included, and the server never sees that set's
/// token again.
#[test]
fn in_a_cluster_a_credential_put_back_in_redis_after_a_logout_is_ignored() {
    let docs = Protected::start(Mode::Protected, 3600);
    let servers = json!({ "docs": { "url": docs.url(), "scope": "session" } });
    let mut cluster = mcpx_e2e::cluster::Cluster::start(servers, "3s", json!({}));
    let (id, url) = begin(&cluster.nodes[0], "docs");
    assert_eq!(open_in_browser(&url).0, 200);
    assert_eq!(wait(&cluster.nodes[0], &id)["status"], "done");
    let call = |cluster: &mcpx_e2e::cluster::Cluster, i: usize| {
        Modern::mcpx_call("docs", "whoami", json!({})).session(&format!("s{i}")).send(cluster.nodes[i].url())
    };
    for i in 0..3 {
        assert_eq!(call(&cluster, i).structured_or_text(), "ok", "through node {i}");
    }
    let redis = |args: &[&str]| cluster.redis.cli(args);
    let key = redis(&["--scan", "--pattern", "mcpx:oauth:*"]);
    assert_eq!(key.lines().count(), 1, "one credential: {key}");
    assert_eq!(redis(&["COPY", &key, "kept-by-the-attacker"]), "1");

    cluster.nodes[1].home().cli(&["auth", "logout", "docs", "--json"]).assert_code(0);
    let state = |cluster: &mcpx_e2e::cluster::Cluster, i: usize| {
        cluster.nodes[i].home().cli(&["auth", "ls", "--json"]).json()["servers"][0]["state"].clone()
    };
    for i in 0..3 {
        assert_ne!(state(&cluster, i), "loggedIn", "node {i} still logged in after the logout");
    }
    cluster.nodes[0].stop();
    cluster.nodes[0].restart();
    assert_eq!(redis(&["COPY", "kept-by-the-attacker", &key, "REPLACE"]), "1");
    for i in 0..3 {
        assert_ne!(state(&cluster, i), "loggedIn", "node {i} took the set put back");
    }
    let before = docs.seen(|s| s.mcp.len());
    for i in 0..3 {
        let reply = call(&cluster, i);
        assert!(reply.to_string().contains("mcpx auth login docs"), "through node {i}: {reply}");
    }
    let sent = docs.seen(|s| s.mcp[before..].to_vec());
    assert!(sent.iter().all(Option::is_none), "a bearer after the logout: {sent:?}");
}

#[test]
fn in_a_cluster_a_slow_authorization_server_never_sees_one_refresh_token_twice() {
    let docs = Protected::start(Mode::Protected, 3600);
    let servers = json!({ "docs": { "url": docs.url(), "scope": "session" } });
    // A refresh turn shorter than finding the authorization server now takes (two
    // metadata requests of 1.2 s), longer than the token request (1 s).
    let cluster = mcpx_e2e::cluster::Cluster::start(servers, "3s", json!({ "oauth": { "refreshLock": "3s" } }));
    let (id, url) = begin(&cluster.nodes[0], "docs");
    assert_eq!(open_in_browser(&url).0, 200);
    assert_eq!(wait(&cluster.nodes[0], &id)["status"], "done");
    let call = |i: usize| {
        let url = cluster.nodes[i].url().to_owned();
        move || Modern::mcpx_call("docs", "whoami", json!({})).session(&format!("s{i}")).send(&url)
    };
    for i in 0..2 {
        assert_eq!(call(i)().structured_or_text(), "ok", "before: through node {i}");
    }
    // The server withdraws the first access token and slows down: both nodes are
    // answered 401 at once, and both want the refresh token spent.
    docs.seen.lock().unwrap().withdrawn.push("at-1-secret".into());
    docs.seen.lock().unwrap().slow = true;
    let called: Vec<Reply> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..2).map(|i| scope.spawn(call(i))).collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    assert_eq!(docs.seen(|s| s.reused), 0, "a refresh token was spent twice");
    for (i, reply) in called.iter().enumerate() {
        assert_eq!(reply.structured_or_text(), "ok", "through node {i}: {reply}");
    }
    assert_eq!(docs.seen(|s| s.grants.clone()), ["authorization_code", "refresh_token"], "refreshed once");
}

/// A daemon that logged in before it joined a cluster keeps its login there, and every
/// node uses it: the node offers it to the cluster as the credential's first set. Offered
/// only while no node of the cluster ever wrote a set of that credential: a daemon that
/// logged in alone and joins after the cluster's login was logged out does not bring a
/// login back.
#[test]
fn a_login_made_before_a_node_joined_the_cluster_serves_every_node_unless_one_was_logged_out() {
    use mcpx_e2e::cluster::{Redis, SECRET};
    let docs = Protected::start(Mode::Protected, 3600);
    let servers = json!({ "docs": { "url": docs.url(), "scope": "session" } });
    // Two daemons log in on their own, before any cluster.
    let alone = || {
        let mut daemon = Daemon::start_in(mcpx_e2e::Home::new(&json!({ "mcpServers": servers })), &[]);
        let (id, url) = begin(&daemon, "docs");
        assert_eq!(open_in_browser(&url).0, 200);
        assert_eq!(wait(&daemon, &id)["status"], "done");
        daemon.stop();
        daemon
    };
    let (mut first, mut late) = (alone(), alone());

    let redis = Redis::start();
    let node = |i: usize| {
        json!({
            "mcpServers": servers,
            "cluster": {"redis": redis.url(), "secret": SECRET, "nodeId": format!("n{i}"), "leaseTtl": "3s"},
        })
    };
    std::fs::write(first.home().config_path(), node(1).to_string()).unwrap();
    first.restart();
    let mut second = Daemon::start_in(mcpx_e2e::Home::new(&node(2)), &[]);
    let keys = |pattern: &str| redis.cli(&["--scan", "--pattern", pattern]).lines().filter(|l| !l.is_empty()).count();
    let offered = mcpx_e2e::poll(Duration::from_secs(10), || (keys("mcpx:oauth:*") == 1).then_some(()));
    assert!(offered.is_some(), "the login made before the cluster never reached Redis");
    let state = |daemon: &Daemon| daemon.home().cli(&["auth", "ls", "--json"]).json()["servers"][0]["state"].clone();
    assert_eq!(state(&second), "loggedIn", "the other node does not see the login");
    let call = |daemon: &Daemon, session: &str| {
        Modern::mcpx_call("docs", "whoami", json!({})).session(session).send(daemon.url())
    };
    assert_eq!(call(&second, "s2").structured_or_text(), "ok", "through the other node");
    assert_eq!(call(&first, "s1").structured_or_text(), "ok", "through the node that logged in");

    // Logged out through node 2; then the daemon that logged in alone joins.
    second.home().cli(&["auth", "logout", "docs", "--json"]).assert_code(0);
    assert_eq!(keys("mcpx:oauth:*"), 0, "the logout left the credential in Redis");
    assert_ne!(state(&first), "loggedIn", "node 1 did not hear of the logout");
    std::fs::write(late.home().config_path(), node(3).to_string()).unwrap();
    late.restart();
    let before = docs.seen(|s| s.mcp.len());
    for (daemon, session) in [(&late, "s3"), (&second, "s4"), (&first, "s5")] {
        let reply = call(daemon, session);
        assert!(reply.to_string().contains("mcpx auth login docs"), "a login came back ({session}): {reply}");
    }
    assert_eq!(keys("mcpx:oauth:*"), 0, "the late daemon's login was put in Redis");
    let sent = docs.seen(|s| s.mcp[before..].to_vec());
    assert!(sent.iter().all(Option::is_none), "a bearer after the logout: {sent:?}");
    for daemon in [&mut first, &mut second, &mut late] {
        daemon.stop();
    }
}
