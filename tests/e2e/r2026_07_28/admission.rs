//! Admission over TCP, the step every request takes before any route: what a web page in
//! the user's browser can make the daemon do (nothing: foreign `Origin`, rebinding `Host`
//! and CORS "simple requests" are refused on every route and method), what a flood of
//! slow connections can cost (a slot, never the service), and which config changes need
//! a restart instead of applying half.

use std::collections::BTreeSet;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::process::free_port;
use mcpx_e2e::schema::{self, MODERN};
use mcpx_e2e::socket::{read_body, read_head};
use mcpx_e2e::{Daemon, Modern, Whoami, alive, config, fakemcp, paths, poll, processes_with, tag};
use serde_json::{Value, json};

const TOKEN: &str = "ci-token-0123456789abcdef";
/// Every method a page could send (OPTIONS is a CORS preflight, HEAD a GET's twin).
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];

/// An answer read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: String,
}

/// One request over a fresh TCP connection, exactly as given (no header added but
/// `Content-Length` and `Connection: close`), read to the end.
#[track_caller]
fn raw(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the daemon");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a read timeout");
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    // The daemon may answer and close before reading the body; the answer is still there.
    let _ = stream.write_all(request.as_bytes());
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no HTTP answer: {text:?}"));
    Answer { status, body: body.to_owned() }
}

/// Checks a refusal's body: on `/mcp` a JSON-RPC error of the 2026 schema, elsewhere the
/// `/v1` error object.
#[track_caller]
fn assert_refusal_body(method: &str, path: &str, answer: &Answer) {
    if method == "HEAD" {
        return;
    }
    let body: Value = serde_json::from_str(&answer.body)
        .unwrap_or_else(|e| panic!("{method} {path}: the refusal is not JSON ({e}): {answer:?}"));
    if path == "/mcp" {
        schema::assert_frame(MODERN, None, &body);
    } else {
        assert!(body["error"]["message"].is_string(), "{method} {path}: {body}");
    }
}

/// Every path the daemon routes: those `docs/api/openapi.json` documents, the literal
/// paths given to `.route(` in the front end's source (so `/mcp`, and any route added
/// later whether documented or not), and two it does not route (the fallback).
fn every_path() -> BTreeSet<String> {
    let root = paths::repo_root();
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("docs/api/openapi.json")).expect("openapi.json"))
            .expect("openapi.json is JSON");
    let mut found: BTreeSet<String> =
        doc["paths"].as_object().expect("openapi.json has paths").keys().cloned().collect();
    found.extend(paths::routed_paths());
    assert!(found.contains("/mcp") && found.contains("/v1/stop"), "reading the routes found too few: {found:?}");
    found.extend(["/nope".to_owned(), "/v1/nope".to_owned()]);
    found.into_iter().map(|p| p.replace("{id}", "x")).collect()
}

/// A body that would run a tool on whichever route reads it.
fn acting_body(path: &str, tag_server: &str) -> String {
    if path == "/mcp" {
        return Modern::mcpx_call(tag_server, "whoami", json!({})).frame().to_string();
    }
    json!({
        "server": tag_server, "tool": "whoami", "arguments": {},
        "script": format!("return await tools.{tag_server}.whoami({{}})"),
        "id": "x", "responses": {},
    })
    .to_string()
}

#[test]
fn every_route_refuses_a_foreign_origin_and_a_rebinding_host_on_every_method_and_nothing_happens() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let port = daemon.state()["port"].as_u64().expect("daemon.json has the port") as u16;
    let own_host = format!("127.0.0.1:{port}");
    let rebound = format!("evil.example:{port}");
    let mcp_headers: Vec<(String, String)> = Modern::mcpx_call("shared", "whoami", json!({})).headers();

    let paths = every_path();
    for path in &paths {
        let body = acting_body(path, "shared");
        for method in METHODS {
            for (attack, extra, host) in [
                ("a foreign Origin", Some(("Origin", "http://evil.example")), own_host.as_str()),
                ("an opaque Origin", Some(("Origin", "null")), own_host.as_str()),
                // What a browser sends for an <img> another site's page embeds: no Origin.
                ("a cross-site fetch", Some(("Sec-Fetch-Site", "cross-site")), own_host.as_str()),
                ("a rebinding Host", None, rebound.as_str()),
            ] {
                let mut headers: Vec<(&str, &str)> =
                    mcp_headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                headers.push(("Host", host));
                headers.extend(extra);
                let answer = raw(port, method, path, &headers, &body);
                assert_eq!(answer.status, 403, "{method} {path} with {attack} must be refused:\n{answer:?}");
                assert_refusal_body(method, path, &answer);
            }
        }
    }

    assert!(alive(daemon.pid()), "a refused POST /v1/stop stopped the daemon");
    assert!(daemon.home().instance_keys("shared").is_empty(), "a refused request started an instance");
    assert!(processes_with(&tag).is_empty(), "a refused request started the upstream");

    // The control: the same request from loopback callers (IPv6 included, with or without
    // a loopback Origin) runs the tool, once each: none of the refused ones ever did.
    let body = acting_body("/v1/call", "shared");
    let controls = [
        (own_host.clone(), None),
        (format!("[::1]:{port}"), None),
        ("[::1]".to_owned(), Some(format!("http://[::1]:{port}"))),
        (format!("localhost:{port}"), Some("http://localhost:5173".to_owned())),
        (own_host.clone(), Some(format!("http://127.0.0.1:{port}"))),
    ];
    for (n, (host, origin)) in controls.iter().enumerate() {
        let mut headers = vec![("Host", host.as_str()), ("Content-Type", "application/json")];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        let answer = raw(port, "POST", "/v1/call", &headers, &body);
        assert_eq!(answer.status, 200, "Host {host}, Origin {origin:?} must be served:\n{answer:?}");
        let ran =
            Whoami::from_structured(&serde_json::from_str::<Value>(&answer.body).expect("JSON")["structuredContent"]);
        assert_eq!(ran.calls, n as u64 + 1, "only the loopback calls reached the upstream");
    }
    let mcp =
        Modern::mcpx_call("shared", "whoami", json!({})).header("Host", &format!("[::1]:{port}")).send(daemon.url());
    assert_eq!(Whoami::of(&mcp).calls, controls.len() as u64 + 1);
}

#[test]
fn a_v1_call_that_is_not_json_is_415_and_runs_no_tool() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let port = daemon.state()["port"].as_u64().expect("port") as u16;
    let host = format!("127.0.0.1:{port}");
    let body = acting_body("/v1/call", "shared");
    // The three types a page may send cross-site without a preflight, and none at all.
    for content_type in
        [Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data; boundary=x"), None]
    {
        for path in ["/v1/call", "/v1/exec", "/v1/ask/begin", "/v1/stop", "/v1/artifacts/x"] {
            let method = if path.starts_with("/v1/artifacts") { "DELETE" } else { "POST" };
            let mut headers = vec![("Host", host.as_str())];
            if let Some(content_type) = content_type {
                headers.push(("Content-Type", content_type));
            }
            let answer = raw(port, method, path, &headers, &body);
            assert_eq!(answer.status, 415, "{method} {path} as {content_type:?} must be refused:\n{answer:?}");
            assert_refusal_body(method, path, &answer);
        }
    }
    assert!(alive(daemon.pid()), "a refused POST /v1/stop stopped the daemon");
    assert!(processes_with(&tag).is_empty(), "a refused call started the upstream");

    let answer = raw(port, "POST", "/v1/call", &[("Host", &host), ("Content-Type", "application/json")], &body);
    assert_eq!(answer.status, 200, "{answer:?}");
    let ran = Whoami::from_structured(&serde_json::from_str::<Value>(&answer.body).expect("JSON")["structuredContent"]);
    assert_eq!(ran.calls, 1, "no refused request reached the upstream");
    // The CLI sends JSON on every /v1 request, a body or not: `mcpx stop` still works.
    daemon.home().cli(&["stop"]).assert_code(0);
}

#[test]
fn the_bearer_scheme_is_accepted_in_any_case() {
    let tag = tag();
    let mut cfg = config(&[("shared", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"tokens": {"ci": TOKEN}});
    let daemon = Daemon::start(&cfg);
    let status_url = format!("{}/v1/status", base_url(daemon.url()));
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let authorization = format!("{scheme} {TOKEN}");
        let v1 = plain("GET", &status_url, &[("Authorization", &authorization)], None);
        assert_eq!(v1.status, 200, "{authorization}: {v1}");
        let mcp =
            Modern::mcpx_call("shared", "whoami", json!({})).header("Authorization", &authorization).send(daemon.url());
        Whoami::of(&mcp);
    }
    for wrong in [format!("Basic {TOKEN}"), format!("Bearer{TOKEN}"), TOKEN.to_owned()] {
        let v1 = plain("GET", &status_url, &[("Authorization", &wrong)], None);
        assert_eq!(v1.status, 401, "{wrong}: {v1}");
    }
}

/// An answer read off a connection that may carry another request: its status and
/// headers (names in lower case); its body is read and dropped.
struct Reused {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Reused {
    fn says_close(&self) -> bool {
        self.headers.iter().any(|(name, value)| name == "connection" && value.eq_ignore_ascii_case("close"))
    }
}

/// A token holder's `GET /v1/status`, as written on the wire.
fn status_request(port: u16) -> String {
    format!("GET /v1/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n")
}

/// A connection to the daemon's TCP port, written through `get_mut`, read through the
/// buffer so that nothing of a next answer is lost between two.
fn connect(port: u16) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a read timeout");
    stream.set_nodelay(true).expect("no delay");
    BufReader::new(stream)
}

/// Reads one answer (an interim `100 Continue` included) off `connection`, body and all.
#[track_caller]
fn answer_on(connection: &mut BufReader<TcpStream>) -> Reused {
    let (status, headers) = read_head(connection).unwrap_or_else(|e| panic!("no answer on the connection: {e}"));
    read_body(connection, status, &headers);
    Reused { status, headers }
}

/// A refusal answered before the request's body arrived (no token, a foreign page, a
/// route that does not exist, a body over `http.maxBodyBytes`) leaves the connection
/// either usable for the next request or closed with `Connection: close` said: a client's
/// next request (an SDK retrying with its new token, say) never goes out on a connection
/// about to close under it. A body already on its way is read out and the connection
/// kept; a client that waits for `100 Continue` is not asked for a body nobody will read.
#[test]
fn a_request_refused_before_its_body_arrives_leaves_its_connection_usable_or_says_it_closes() {
    let tag = tag();
    let mut cfg = config(&[("shared", fakemcp("global", &tag, &[]))]);
    const LIMIT: usize = 100;
    cfg["http"] = json!({"tokens": {"ci": TOKEN}, "maxBodyBytes": LIMIT});
    let daemon = Daemon::start(&cfg);
    let port = daemon.state()["port"].as_u64().expect("port") as u16;
    let body = acting_body("/mcp", "shared");
    assert!(body.len() > LIMIT, "the body must be over http.maxBodyBytes for the 413s");
    let next = status_request(port);
    let holder = format!("Authorization: Bearer {TOKEN}\r\n");
    let refusals = [
        ("/mcp", String::new(), 401),
        ("/v1/call", "Authorization: Bearer not-the-token\r\n".to_owned(), 401),
        ("/v1/call", format!("{holder}Origin: https://evil.example\r\n"), 403),
        ("/v1/nowhere", holder.clone(), 404),
        ("/mcp", holder.clone(), 413),
        ("/v1/call", holder.clone(), 413),
    ];
    for (path, extra, refused) in refusals {
        for expect in [false, true] {
            let what = format!("POST {path} (expect 100-continue: {expect})");
            let mut stream = connect(port);
            let continues = if expect { "Expect: 100-continue\r\n" } else { "" };
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\n{extra}{continues}Content-Length: {}\r\n\r\n",
                body.len()
            );
            // The head, then the body in a write of its own, as clients send them; a client
            // that expects `100 Continue` sends the body only when asked.
            stream.get_mut().write_all(head.as_bytes()).expect("the head");
            let first = if expect { Some(answer_on(&mut stream)) } else { None };
            let unsent = first.as_ref().is_some_and(|interim| interim.status != 100);
            let answer = match first {
                Some(refusal) if unsent => refusal,
                _ => {
                    stream.get_mut().write_all(body.as_bytes()).expect("the body");
                    answer_on(&mut stream)
                }
            };
            assert_eq!(answer.status, refused, "{what}");
            if answer.says_close() {
                continue;
            }
            assert!(!unsent, "{what}: a body never asked for cannot be read out, so the answer must say it closes");
            stream.get_mut().write_all(next.as_bytes()).expect("the next request");
            assert_eq!(answer_on(&mut stream).status, 200, "{what}: the next request on the connection");
        }
    }
    // A body too big to read out is not waited for: the 413 comes at once, saying it closes.
    let mut stream = connect(port);
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{holder}Content-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        64 * 1024 * 1024
    );
    stream.get_mut().write_all(head.as_bytes()).expect("the head");
    let answer = answer_on(&mut stream);
    assert!(answer.status == 413 && answer.says_close(), "a 64 MiB body: {} {:?}", answer.status, answer.headers);
    assert!(processes_with(&tag).is_empty(), "a refused request ran");
}

/// Callers without a token who announce a body and never send it are refused at once, and
/// while the daemon waits for the body to read out, their connections are no busier than
/// a slow header: at `http.maxConnections` they make room for a caller with a token.
#[test]
fn callers_without_a_token_who_announce_a_body_and_never_send_it_cannot_take_every_connection() {
    const MAX: usize = 16;
    let mut cfg = config(&[]);
    cfg["http"] = json!({"tokens": {"ci": TOKEN}, "maxConnections": MAX, "bodyReadTimeout": "10m"});
    let daemon = Daemon::start(&cfg);
    let port = daemon.state()["port"].as_u64().expect("port") as u16;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
    );
    let mut silent = Vec::new();
    for _ in 0..MAX {
        let mut stream = connect(port);
        stream.get_mut().write_all(head.as_bytes()).expect("the head");
        let answer = answer_on(&mut stream);
        assert!(answer.status == 401 && !answer.says_close(), "{} {:?}", answer.status, answer.headers);
        silent.push(stream);
    }
    // Every place is taken by a connection whose body the daemon still waits for.
    let mut stream = connect(port);
    stream.get_mut().write_all(status_request(port).as_bytes()).expect("the request");
    assert_eq!(answer_on(&mut stream).status, 200, "callers that never send their body kept a token holder out");
    drop(silent);
}

/// Raises this test process's soft open-file limit to its hard one, so it can hold a
/// flood of connections; panics if even that is too few.
fn allow_open_files(needed: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(limit.rlim_cur >= needed, "this test needs {needed} open files; the hard limit is {}", limit.rlim_cur);
}

#[test]
fn a_normal_caller_is_served_while_2000_slow_connections_are_open() {
    const SLOW: usize = 2000;
    allow_open_files(SLOW as u64 + 256);
    let tag = tag();
    // Under the 1024 files a login shell usually allows, the flood alone is more.
    let daemon = Daemon::start_with_open_file_limit(&config(&[("shared", fakemcp("global", &tag, &[]))]), 1024);
    let port = daemon.state()["port"].as_u64().expect("port") as u16;

    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect a slow caller");
        stream.write_all(b"POST /mcp HTT").expect("half a request line");
        slow.push(stream);
    }
    let started = Instant::now();
    let answer = Modern::mcpx_call("shared", "whoami", json!({})).send(daemon.url());
    Whoami::of(&answer);
    assert!(started.elapsed() < Duration::from_secs(20), "served, but only after {:?}", started.elapsed());
    let v1 = plain("GET", &format!("{}/v1/status", base_url(daemon.url())), &[], None);
    assert_eq!(v1.status, 200, "{v1}");
    let log = daemon.stderr();
    assert!(!log.contains("Too many open files"), "the daemon ran out of files:\n{log}");
    drop(slow);
}

/// Sends `request` and waits for the daemon to close the connection; returns how long it
/// took and what it wrote first (nothing when it closed without an answer).
fn until_closed(port: u16, request: &[u8], patience: Duration) -> (Duration, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(patience)).expect("a read timeout");
    let started = Instant::now();
    stream.write_all(request).expect("send the first part");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (started.elapsed(), got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (started.elapsed(), got),
            Err(e) => panic!(
                "the daemon kept the connection open for {:?} ({e}); it sent {:?}",
                started.elapsed(),
                String::from_utf8_lossy(&got)
            ),
        }
    }
}

#[test]
fn a_connection_that_sends_half_its_headers_is_closed_after_the_header_read_timeout() {
    let mut cfg = config(&[]);
    cfg["http"] = json!({"headerReadTimeout": "1s"});
    let daemon = Daemon::start(&cfg);
    let port = daemon.state()["port"].as_u64().expect("port") as u16;
    let (after, answer) = until_closed(
        port,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
        Duration::from_secs(15),
    );
    assert!(after >= Duration::from_millis(900), "closed after {after:?}, before the timeout");
    assert!(after < Duration::from_secs(10), "closed only after {after:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
    mcpx_e2e::assert_serving(daemon.url());
}

#[test]
fn a_body_that_stalls_is_cut_after_the_body_read_timeout() {
    let tag = tag();
    let mut cfg = config(&[("shared", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"bodyReadTimeout": "1s"});
    let daemon = Daemon::start(&cfg);
    let port = daemon.state()["port"].as_u64().expect("port") as u16;
    let frame = Modern::mcpx_call("shared", "whoami", json!({})).frame().to_string();
    let mut headers = String::new();
    for (name, value) in Modern::mcpx_call("shared", "whoami", json!({})).headers() {
        headers.push_str(&format!("{name}: {value}\r\n"));
    }
    for path in ["/mcp", "/v1/call"] {
        // Headers whole, then half the body it announced, then nothing.
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Content-Length: {}\r\n\r\n{}",
            frame.len(),
            &frame[..frame.len() / 2]
        );
        let (after, answer) = until_closed(port, request.as_bytes(), Duration::from_secs(15));
        assert!(after >= Duration::from_millis(900), "{path}: closed after {after:?}, before the timeout");
        assert!(after < Duration::from_secs(10), "{path}: closed only after {after:?}");
        assert!(
            answer.is_empty(),
            "{path}: the connection is closed without an answer: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    assert!(processes_with(&tag).is_empty(), "a cut request ran");
    mcpx_e2e::assert_serving(daemon.url());
}

#[test]
fn a_reload_that_moves_the_listener_is_refused_logged_and_the_old_config_stays() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("first", fakemcp("global", &tag, &[]))]));
    let mut moved = config(&[("first", fakemcp("global", &tag, &[])), ("second", fakemcp("global", &tag, &[]))]);
    moved["http"] = json!({"port": free_port()});
    assert!(!daemon.rewrite_config(&moved), "a config moving the listener was applied:\n{}", daemon.stderr());
    let refusal = poll(Duration::from_secs(5), || {
        daemon.stderr().lines().find(|l| l.contains("not applied") && l.contains("http.port")).map(str::to_owned)
    })
    .unwrap_or_else(|| panic!("the refusal is not logged:\n{}", daemon.stderr()));
    assert!(refusal.contains("restart"), "the refusal must name the restart it needs: {refusal}");
    let servers: Vec<Value> = daemon.home().status()["servers"].as_array().cloned().unwrap_or_default();
    assert!(
        servers.iter().all(|s| s["name"] != "second"),
        "a server added in the refused file was picked up: {servers:?}"
    );
    assert!(servers.iter().any(|s| s["name"] == "first"), "{servers:?}");
}

#[test]
fn a_reload_dropping_tokens_while_listening_beyond_loopback_is_refused_and_tokens_stay_required() {
    let tag = tag();
    let mut guarded = config(&[("shared", fakemcp("global", &tag, &[]))]);
    guarded["http"] = json!({"host": "0.0.0.0", "tokens": {"ci": TOKEN}});
    let daemon = Daemon::start(&guarded);
    // Back to loopback and no tokens: valid on its own, but the listener cannot follow.
    let open = config(&[("shared", fakemcp("global", &tag, &[]))]);
    assert!(!daemon.rewrite_config(&open), "a config dropping the tokens was applied:\n{}", daemon.stderr());
    poll(Duration::from_secs(5), || daemon.stderr().contains("not applied").then_some(()))
        .unwrap_or_else(|| panic!("the refusal is not logged:\n{}", daemon.stderr()));
    let status_url = format!("{}/v1/status", base_url(daemon.url()));
    let without = plain("GET", &status_url, &[], None);
    assert_eq!(without.status, 401, "tokens must still be required: {without}");
    let call = Modern::mcpx_call("shared", "whoami", json!({})).send(daemon.url());
    assert_eq!(call.status, 401, "{call}");
    let with = Modern::mcpx_call("shared", "whoami", json!({}))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send(daemon.url());
    Whoami::of(&with);
}
