//! Hostile input at the front ends: every class of bad input in docs/reliability.md gets a
//! precise JSON-RPC error or HTTP status, never a panic or a hang, and the daemon goes on
//! serving everyone else.

use std::time::Duration;

use mcpx_e2e::client::next_id;
use mcpx_e2e::home::Home;
use mcpx_e2e::{Daemon, LegacySession, Modern, assert_serving, config, fakemcp, tag};
use serde_json::{Value, json};

fn gateway() -> Daemon {
    Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]))
}

/// A frame with the modern `_meta` envelope, as bytes.
fn modern_frame(id: Value, method: Value, params: Value) -> String {
    let mut params = params;
    if let Some(p) = params.as_object_mut() {
        let meta = p.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("io.modelcontextprotocol/protocolVersion").or_insert(json!("2026-07-28"));
            meta.entry("io.modelcontextprotocol/clientCapabilities").or_insert(json!({}));
        }
    }
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

#[test]
fn deep_nesting_and_bodies_that_are_not_utf8_are_400_parse_error() {
    let daemon = gateway();
    let url = daemon.url();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    Modern::discover().raw_body(deep).send(url).assert_error(400, -32700);
    // Valid JSON, but nested deeper than mcpx reads (128 levels) inside params.
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{"x":{}1{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    Modern::discover().raw_body(nested).send(url).assert_error(400, -32700);
    let mut not_utf8 = br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"x":""#.to_vec();
    not_utf8.extend_from_slice(b"\xff\xfe\xc3\x28");
    not_utf8.extend_from_slice(br#""}}"#);
    Modern::discover().raw_body(not_utf8).send(url).assert_error(400, -32700);
    assert_serving(url);
}

#[test]
fn a_huge_string_under_the_body_limit_is_relayed_whole() {
    let daemon = gateway();
    let big = "é".repeat(1_500_000); // 3 MB of two-byte characters, under the 4 MiB default
    let reply = Modern::mcpx_call("up", "echo", json!({"big": big})).send(daemon.url());
    assert_eq!(reply.structured()["big"].as_str().map(str::len), Some(3_000_000), "status {}", reply.status);
    assert_serving(daemon.url());
}

#[test]
fn ids_of_every_json_type_are_echoed_or_refused_as_invalid_requests() {
    let daemon = gateway();
    for id in [json!(""), json!("x y"), json!(0), json!(-1), json!(i64::MAX), json!(i64::MIN)] {
        let reply = Modern::discover()
            .raw_body(modern_frame(id.clone(), json!("server/discover"), json!({})))
            .send(daemon.url());
        assert_eq!(reply.status, 200, "id {id}:\n{reply}");
        assert_eq!(reply.frame()["id"], id, "id {id}:\n{reply}");
        assert!(reply.result()["supportedVersions"].is_array(), "id {id}:\n{reply}");
    }
    // Not ids: null, fractions, integers beyond 64-bit signed, booleans, objects, arrays.
    for id in [json!(null), json!(1.5), json!(9_223_372_036_854_775_808u64), json!(true), json!({"a": 1}), json!([1])] {
        let reply = Modern::discover()
            .raw_body(modern_frame(id.clone(), json!("server/discover"), json!({})))
            .send(daemon.url());
        reply.assert_error(400, -32600);
        assert!(reply.frame().get("id").is_none(), "an unreadable id {id} is not echoed:\n{reply}");
    }
    assert_serving(daemon.url());
}

#[test]
fn wrong_types_in_the_fields_mcpx_reads_are_precise_errors() {
    let daemon = gateway();
    let url = daemon.url();
    let envelope = |id: u64, method: &str, params: Value| modern_frame(json!(id), json!(method), params);
    let cases: Vec<(&str, &str, String, u16, i64)> = vec![
        (
            "jsonrpc is a number",
            "server/discover",
            json!({"jsonrpc": 2, "id": 1, "method": "server/discover"}).to_string(),
            400,
            -32600,
        ),
        ("method is a number", "server/discover", modern_frame(json!(1), json!(7), json!({})), 400, -32600),
        (
            "params is an array",
            "server/discover",
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": [1]}).to_string(),
            400,
            -32600,
        ),
        (
            "params is a string",
            "server/discover",
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": "x"}).to_string(),
            400,
            -32600,
        ),
        (
            "_meta is a string",
            "server/discover",
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": "x"}}).to_string(),
            400,
            -32602,
        ),
        (
            "protocolVersion is a number",
            "server/discover",
            envelope(1, "server/discover", json!({"_meta": {"io.modelcontextprotocol/protocolVersion": 2026}})),
            400,
            -32602,
        ),
        (
            "clientCapabilities is an array",
            "server/discover",
            envelope(1, "server/discover", json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": []}})),
            400,
            -32602,
        ),
        ("tools/list cursor is a number", "tools/list", envelope(1, "tools/list", json!({"cursor": 5})), 200, -32602),
        (
            "mcpx_call arguments is an array",
            "tools/call",
            envelope(1, "tools/call", json!({"name": "mcpx_call", "arguments": []})),
            200,
            -32602,
        ),
        (
            "mcpx_call server is a number",
            "tools/call",
            envelope(1, "tools/call", json!({"name": "mcpx_call", "arguments": {"server": 1, "tool": "echo"}})),
            200,
            -32602,
        ),
        (
            "mcpx_call tool is null",
            "tools/call",
            envelope(1, "tools/call", json!({"name": "mcpx_call", "arguments": {"server": "up", "tool": null}})),
            200,
            -32602,
        ),
        (
            "mcpx_search query is an object",
            "tools/call",
            envelope(1, "tools/call", json!({"name": "mcpx_search", "arguments": {"query": {}}})),
            200,
            -32602,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, method, body, status, code) in cases {
        let mut request = Modern::new(method, json!({})).raw_body(body);
        if method == "tools/call" {
            request = request.header("Mcp-Name", if what.contains("search") { "mcpx_search" } else { "mcpx_call" });
        }
        let reply = request.send(url);
        let code_got = reply.frame().get("error").map(|e| e["code"].as_i64().unwrap_or_default());
        if (reply.status, code_got) != (status, Some(code)) {
            wrong.push(format!("{what}: expected {status} {code}, got:\n{reply}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert_serving(url);
}

#[test]
fn a_response_posted_by_a_modern_caller_is_400_invalid_request() {
    let daemon = gateway();
    let body = json!({"jsonrpc": "2.0", "id": 5, "result": {}}).to_string();
    let reply = Modern::discover().raw_body(body).send(daemon.url());
    reply.assert_error(400, -32600);
    assert_serving(daemon.url());
}

/// A legacy session may answer questions mcpx asked it; a response to none is accepted
/// and dropped, and the session goes on.
#[test]
fn a_response_to_no_question_in_a_legacy_session_is_dropped_and_the_session_goes_on() {
    let daemon = gateway();
    let session = LegacySession::open(daemon.url());
    let stray = mcpx_e2e::client::Raw {
        http_method: "POST",
        url: daemon.url(),
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), mcpx_e2e::client::ACCEPT_BOTH.into()),
            ("Mcp-Session-Id".into(), session.id().into()),
            ("MCP-Protocol-Version".into(), session.revision().into()),
        ],
        body: Some(json!({"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}).to_string().into_bytes()),
        revision: "2025-11-25",
        method: None,
    }
    .send();
    assert_eq!(stray.status, 202, "{stray}");
    let echoed = session.mcpx_call("up", "echo", json!({"after": "stray"}));
    assert_eq!(echoed.structured()["after"], "stray", "{echoed}");
}

/// Two requests with one id in flight on one connection: the second is refused (the id
/// would make cancellation and answers ambiguous); the first is answered.
#[test]
fn a_duplicate_id_in_flight_on_stdio_is_refused_and_the_first_is_answered() {
    let home = Home::new(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let mut serve = home.serve().arg("--no-daemon").start();
    let slow = Modern::mcpx_call("up", "slow", json!({"ms": 1500})).frame();
    let mut again = Modern::mcpx_call("up", "echo", json!({"second": true})).frame();
    again["id"] = slow["id"].clone();
    serve.send(&slow);
    serve.send(&again);
    let first = serve.next_frame(Duration::from_secs(30)).expect("an answer");
    assert_eq!(first["error"]["code"], -32600, "{first}");
    assert!(first["error"]["message"].as_str().unwrap_or_default().contains("already in flight"), "{first}");
    let second = serve.next_frame(Duration::from_secs(30)).expect("the slow call's answer");
    assert_eq!(second["id"], slow["id"]);
    assert_eq!(second["result"]["structuredContent"]["sleptMs"], 1500, "{second}");
}

#[test]
fn a_duplicate_id_in_flight_in_a_legacy_session_is_refused_and_the_first_is_answered() {
    let daemon = gateway();
    let session = LegacySession::open(daemon.url());
    let id = json!(next_id());
    let frame = |tool: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "mcpx_call", "arguments": {"server": "up", "tool": tool, "arguments": arguments}}})
    };
    let slow = frame("slow", json!({"ms": 1500}));
    let url = daemon.url().to_owned();
    let (sid, revision) = (session.id().to_owned(), session.revision().to_owned());
    let post = move |frame: Value| {
        mcpx_e2e::client::Raw {
            http_method: "POST",
            url: &url,
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("Accept".into(), mcpx_e2e::client::ACCEPT_BOTH.into()),
                ("Mcp-Session-Id".into(), sid.clone()),
                ("MCP-Protocol-Version".into(), revision.clone()),
            ],
            body: Some(frame.to_string().into_bytes()),
            revision: "2025-11-25",
            method: Some("tools/call"),
        }
        .send()
    };
    let first = std::thread::spawn({
        let post = post.clone();
        move || post(slow)
    });
    assert!(daemon.home().wait_in_use("up", 1, Duration::from_secs(20)), "the slow call never started");
    let second = post(frame("echo", json!({"second": true})));
    assert_eq!(second.error_code(), -32600, "{second}");
    let first = first.join().expect("the first request");
    assert_eq!(first.structured()["sleptMs"], 1500, "{first}");
}
