//! Modern Streamable HTTP: who is asking (session names in `_meta`, hot
//! `transport.sessionMetaKeys`), and what malformed or hostile requests get back.

use mcpx_e2e::client::{self, ACCEPT_BOTH, Raw};
use mcpx_e2e::schema::MODERN;
use mcpx_e2e::{Daemon, Modern, Reply, Whoami, assert_serving, config, fakemcp, poll, processes_with, tag};
use serde_json::{Value, json};
use std::time::Duration;

/// The session-scoped upstream every identity test asks `whoami`.
const SERVER: &str = "browser";

fn session_gateway(tag: &str) -> Value {
    config(&[(SERVER, fakemcp("session", tag, &[]))])
}

/// `mcpx_call browser whoami`, to be given its identity `_meta`.
fn whoami() -> Modern {
    Modern::mcpx_call(SERVER, "whoami", json!({}))
}

#[track_caller]
fn ask(daemon: &Daemon, request: Modern) -> Whoami {
    Whoami::of(&request.send(daemon.url()))
}

/// Asserts that every call reached a process of its own (a fresh instance each time).
#[track_caller]
fn assert_all_fresh(answers: &[Whoami], why: &str) {
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a.calls, 1, "{why}: call {i} reached an instance that had served others: {answers:?}");
        for b in &answers[i + 1..] {
            assert_ne!(a.instance, b.instance, "{why}: two calls shared an instance: {answers:?}");
        }
    }
}

// ---- who is asking -------------------------------------------------------------------

#[test]
fn client_named_session_is_kept_across_requests() {
    let tag = tag();
    let daemon = Daemon::start(&session_gateway(&tag));
    let a1 = ask(&daemon, whoami().session("a"));
    let b1 = ask(&daemon, whoami().session("b"));
    let a2 = ask(&daemon, whoami().session("a"));
    let b2 = ask(&daemon, whoami().session("b"));
    let a3 = ask(&daemon, whoami().session("a"));

    assert_ne!(a1.instance, b1.instance, "sessions a and b shared an instance");
    for (a, calls) in [(&a1, 1), (&a2, 2), (&a3, 3)] {
        assert_eq!((a.instance.as_str(), a.calls), (a1.instance.as_str(), calls), "session a moved: {a:?}");
    }
    assert_eq!((b2.instance.as_str(), b2.calls), (b1.instance.as_str(), 2), "session b moved: {b2:?}");
    assert_eq!(a1.era, "modern", "the daemon probes server/discover first, so a dual-era upstream is spoken to modern");
    let mut pids = vec![a1.pid, b1.pid];
    pids.sort_unstable();
    assert_eq!(processes_with(&tag), pids, "exactly one upstream process per named session");
}

/// A modern request that names no session shares nothing: a session-scoped server gets a
/// fresh instance for each, which ends with its call.
#[test]
fn unnamed_requests_are_their_own_scope() {
    let tag = tag();
    let daemon = Daemon::start(&session_gateway(&tag));
    let named = ask(&daemon, whoami().session("a"));
    let unnamed: Vec<Whoami> = (0..3).map(|_| ask(&daemon, whoami())).collect();
    assert_all_fresh(&unnamed, "unnamed requests");
    assert!(unnamed.iter().all(|u| u.instance != named.instance), "an unnamed request joined session a");
    assert_eq!(ask(&daemon, whoami().session("a")).instance, named.instance);
    let log = daemon.stderr();
    let warnings = log.lines().filter(|l| l.contains("cannot be honoured") && l.contains(SERVER)).count();
    assert_eq!(warnings, 1, "a session scope without a session must be logged once, naming the server:\n{log}");
    let left = poll(Duration::from_secs(5), || {
        let live = processes_with(&tag);
        (live == [named.pid]).then_some(())
    });
    assert!(
        left.is_some(),
        "per-call instances must stop when their call ends; live {:?}, session a is {}",
        processes_with(&tag),
        named.pid
    );
}

#[test]
fn opencode_session_id_alone_names_a_session() {
    let daemon = Daemon::start(&session_gateway(&tag()));
    let first = ask(&daemon, whoami().meta("ai.opencode/sessionID", json!("ses_1")));
    let second = ask(&daemon, whoami().meta("ai.opencode/sessionID", json!("ses_1")));
    let other = ask(&daemon, whoami().meta("ai.opencode/sessionID", json!("ses_2")));
    assert_eq!((second.instance.as_str(), second.calls), (first.instance.as_str(), 2));
    assert_ne!(other.instance, first.instance);
}

/// `dev.mcpx/session` comes first in the default `transport.sessionMetaKeys`.
#[test]
fn mcpx_session_key_beats_opencode_session_id() {
    let daemon = Daemon::start(&session_gateway(&tag()));
    let mcpx = ask(&daemon, whoami().session("s"));
    let opencode = ask(&daemon, whoami().meta("ai.opencode/sessionID", json!("s-oc")));
    let both = ask(&daemon, whoami().session("s").meta("ai.opencode/sessionID", json!("s-oc")));
    assert_ne!(mcpx.instance, opencode.instance);
    assert_eq!((both.instance.as_str(), both.calls), (mcpx.instance.as_str(), 2), "dev.mcpx/session must win");
}

/// An empty or non-string value counts as absent: alone it names nothing (own scope),
/// and the next listed key is used instead. Keys outside the list are ignored.
#[test]
fn empty_or_non_string_session_values_count_as_absent() {
    let daemon = Daemon::start(&session_gateway(&tag()));
    let empty: Vec<Whoami> = (0..2).map(|_| ask(&daemon, whoami().session(""))).collect();
    assert_all_fresh(&empty, "dev.mcpx/session = \"\"");
    let numeric: Vec<Whoami> = (0..2).map(|_| ask(&daemon, whoami().meta("dev.mcpx/session", json!(42)))).collect();
    assert_all_fresh(&numeric, "dev.mcpx/session = 42");
    let unlisted: Vec<Whoami> = (0..2).map(|_| ask(&daemon, whoami().meta("x.test/sid", json!("u")))).collect();
    assert_all_fresh(&unlisted, "a key outside transport.sessionMetaKeys");

    let oc = ask(&daemon, whoami().meta("ai.opencode/sessionID", json!("oc")));
    let after_empty = ask(&daemon, whoami().session("").meta("ai.opencode/sessionID", json!("oc")));
    let after_number =
        ask(&daemon, whoami().meta("dev.mcpx/session", json!(7)).meta("ai.opencode/sessionID", json!("oc")));
    assert_eq!(
        [after_empty.instance.as_str(), after_number.instance.as_str()],
        [oc.instance.as_str(), oc.instance.as_str()],
        "an absent-counting dev.mcpx/session must fall through to ai.opencode/sessionID"
    );
    assert_eq!(after_number.calls, 3);
}

/// `transport.sessionMetaKeys` is hot: rewriting the config file (write + rename, as
/// editors do) changes which key names a session for the next request, without a restart;
/// running instances of unchanged servers survive the reload.
#[test]
fn session_meta_keys_change_applies_to_the_next_request_without_restart() {
    let tag = tag();
    let mut cfg = session_gateway(&tag);
    let daemon = Daemon::start(&cfg);
    let pid = daemon.pid();

    let ignored: Vec<Whoami> = (0..2).map(|_| ask(&daemon, whoami().meta("x.test/sid", json!("s1")))).collect();
    assert_all_fresh(&ignored, "x.test/sid before it is configured");
    let d1 = ask(&daemon, whoami().session("d1"));

    cfg["transport"] = json!({"sessionMetaKeys": ["x.test/sid"]});
    daemon.rewrite_config(&cfg);
    let s1 = ask(&daemon, whoami().meta("x.test/sid", json!("s1")));
    let s2 = ask(&daemon, whoami().meta("x.test/sid", json!("s1")));
    assert_eq!((s2.instance.as_str(), s2.calls), (s1.instance.as_str(), 2), "x.test/sid must name a session now");
    let dropped: Vec<Whoami> = (0..2).map(|_| ask(&daemon, whoami().session("d1"))).collect();
    assert_all_fresh(&dropped, "dev.mcpx/session after it was removed from the list");
    assert!(dropped.iter().all(|d| d.instance != d1.instance), "dev.mcpx/session still reached session d1");

    cfg["transport"] = json!({"sessionMetaKeys": ["dev.mcpx/session"]});
    daemon.rewrite_config(&cfg);
    let back = ask(&daemon, whoami().session("d1"));
    assert_eq!(
        (back.instance.as_str(), back.calls),
        (d1.instance.as_str(), 2),
        "session d1's instance should have survived two reloads that left its server unchanged"
    );
    assert_eq!(daemon.pid(), pid);
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "the daemon restarted or died");
}

// ---- replies ---------------------------------------------------------------------------

#[test]
fn server_discover_names_versions_capabilities_and_caching() {
    let daemon = Daemon::start(&config(&[]));
    let reply = Modern::discover().send(daemon.url());
    let result = reply.result();
    assert_eq!(result["resultType"], "complete", "{reply}");
    assert!(result["supportedVersions"].as_array().is_some_and(|v| v.contains(&json!(MODERN))), "{reply}");
    assert!(result["capabilities"]["tools"].is_object(), "a gateway serves tools:\n{reply}");
    assert!(result["ttlMs"].as_u64().is_some(), "{reply}");
    assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"].is_string(), "{reply}");
}

/// Replies are JSON when `Accept` allows it, SSE when it asks only for an event stream; the
/// SSE frames are schema-checked like any other.
#[test]
fn replies_follow_the_accept_header() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let json_reply = Modern::mcpx_call("up", "echo", json!({"k": 1})).send(daemon.url());
    assert!(json_reply.content_type().starts_with("application/json"), "{json_reply}");
    assert_eq!(json_reply.structured(), &json!({"k": 1}));

    let request = Modern::mcpx_call("up", "echo", json!({"k": 2})).header("Accept", "text/event-stream");
    let sse = request.send(daemon.url());
    assert!(sse.content_type().starts_with("text/event-stream"), "expected SSE:\n{sse}");
    assert_eq!(sse.structured(), &json!({"k": 2}));
    assert_eq!(sse.frame()["id"], request.frame()["id"], "the SSE response must answer the request's id");
}

/// `Mcp-Name` may carry `=?base64?…?=`; the daemon decodes it before comparing.
#[test]
fn a_base64_encoded_mcp_name_header_is_decoded() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let reply = Modern::mcpx_call("up", "echo", json!({"x": true}))
        .header("Mcp-Name", "=?base64?bWNweF9jYWxs?=")
        .send(daemon.url());
    assert_eq!(reply.structured(), &json!({"x": true}));
}

// ---- bad input -------------------------------------------------------------------------

#[test]
fn malformed_json_is_400_parse_error() {
    let daemon = Daemon::start(&config(&[]));
    let reply = Modern::discover().raw_body(r#"{"jsonrpc": "2.0", "id": 1, "method": "#).send(daemon.url());
    reply.assert_error(400, -32700);
    assert_serving(daemon.url());
}

#[test]
fn a_wrong_jsonrpc_version_is_400_invalid_request() {
    let daemon = Daemon::start(&config(&[]));
    let reply = Modern::discover().jsonrpc(json!("1.0")).send(daemon.url());
    reply.assert_error(400, -32600);
    assert_serving(daemon.url());
}

/// Both `_meta` keys are required on every modern request: a missing one is -32602 + 400.
#[test]
fn a_request_missing_required_meta_is_400_invalid_params() {
    let daemon = Daemon::start(&config(&[]));
    let no_caps = Modern::tools_list().without_meta("io.modelcontextprotocol/clientCapabilities").send(daemon.url());
    no_caps.assert_error(400, -32602);
    let no_version = Modern::tools_list().without_meta("io.modelcontextprotocol/protocolVersion").send(daemon.url());
    no_version.assert_error(400, -32602);
    let no_meta = Modern::tools_list()
        .raw_body(json!({"jsonrpc": "2.0", "id": client::next_id(), "method": "tools/list", "params": {}}).to_string())
        .send(daemon.url());
    no_meta.assert_error(400, -32602);
    let no_params = Modern::tools_list()
        .raw_body(json!({"jsonrpc": "2.0", "id": client::next_id(), "method": "tools/list"}).to_string())
        .send(daemon.url());
    no_params.assert_error(400, -32602);
    assert_serving(daemon.url());
}

/// A body over `http.maxBodyBytes` is refused with 413; one under it is served.
#[test]
fn a_body_over_the_configured_limit_is_413() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"maxBodyBytes": 4096});
    let daemon = Daemon::start(&cfg);
    let small = Modern::mcpx_call("up", "echo", json!({"pad": "x".repeat(1000)})).send(daemon.url());
    assert_eq!(small.structured()["pad"].as_str().map(str::len), Some(1000));
    let huge = Modern::mcpx_call("up", "echo", json!({"pad": "x".repeat(64 * 1024)})).send(daemon.url());
    assert_eq!(huge.status, 413, "a 64 KiB body over a 4 KiB limit must get 413:\n{huge}");
    assert_serving(daemon.url());
}

/// The limit holds for the `/v1` API too: a `/v1` body over `http.maxBodyBytes` is 413
/// with the API's error object, and one under it is served.
#[test]
fn a_v1_body_over_the_configured_limit_is_413() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"maxBodyBytes": 4096, "tokens": {"ci": "ci-token-0123456789abcdef"}});
    let daemon = Daemon::start(&cfg);
    let url = format!("{}/v1/call", client::base_url(daemon.url()));
    let headers = [("Authorization", "Bearer ci-token-0123456789abcdef"), ("Content-Type", "application/json")];
    let call = |pad: usize| {
        let body = json!({"server": "up", "tool": "echo", "arguments": {"pad": "x".repeat(pad)}}).to_string();
        client::plain("POST", &url, &headers, Some(&body))
    };
    let small = call(1000);
    assert_eq!(small.status, 200, "{}", small.body);
    let huge = call(64 * 1024);
    let told = &huge.body[..huge.body.len().min(300)];
    assert_eq!(huge.status, 413, "a 64 KiB /v1 body over a 4 KiB limit must get 413: {told}");
    assert!(huge.json()["error"]["message"].as_str().unwrap_or_default().contains("http.maxBodyBytes"), "{told}");
    // The client's pool may send this on the refused request's connection: it must
    // either carry it or have said it closes.
    assert_eq!(call(1000).status, 200, "the daemon serves on");
}

/// Unknown methods, and legacy-only methods sent modern-style, are 404 + -32601.
#[test]
fn an_unknown_method_is_404_method_not_found() {
    let daemon = Daemon::start(&config(&[]));
    for method in ["tools/frobnicate", "ping", "initialize"] {
        let reply = Modern::new(method, json!({})).send(daemon.url());
        assert_eq!(reply.status, 404, "{method} sent modern-style:\n{reply}");
        assert_eq!(reply.error_code(), -32601, "{method} sent modern-style:\n{reply}");
    }
    assert_serving(daemon.url());
}

#[test]
fn an_unsupported_version_is_400_with_the_supported_ones() {
    let daemon = Daemon::start(&config(&[]));
    let reply = Modern::discover().version("v999").send(daemon.url());
    let error = reply.assert_error(400, -32022);
    assert_eq!(error["data"]["requested"], "v999", "{reply}");
    let supported = error["data"]["supported"].as_array().unwrap_or_else(|| panic!("no data.supported:\n{reply}"));
    assert!(supported.contains(&json!(MODERN)), "{reply}");
    assert_serving(daemon.url());
}

/// The version header must equal `_meta`'s version; the method and name headers must mirror
/// the body. Each disagreement is 400 + -32020.
#[test]
fn headers_that_disagree_with_the_body_are_400_header_mismatch() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let call = || Modern::mcpx_call("up", "echo", json!({}));
    let cases: Vec<(&str, Modern)> = vec![
        ("version header != _meta version", call().header("MCP-Protocol-Version", "2025-11-25")),
        (
            "_meta version != header",
            call()
                .meta("io.modelcontextprotocol/protocolVersion", json!("2025-11-25"))
                .header("MCP-Protocol-Version", MODERN),
        ),
        ("no MCP-Protocol-Version header", call().without_header("MCP-Protocol-Version")),
        ("no Mcp-Method", call().without_header("Mcp-Method")),
        ("Mcp-Method != method", call().header("Mcp-Method", "tools/list")),
        ("no Mcp-Name on tools/call", call().without_header("Mcp-Name")),
        ("Mcp-Name != params.name", call().header("Mcp-Name", "mcpx_search")),
    ];
    for (what, request) in cases {
        let reply = request.send(daemon.url());
        assert_eq!((reply.status, reply.error_code()), (400, -32020), "{what}:\n{reply}");
    }
    assert_serving(daemon.url());
}

#[test]
fn a_foreign_origin_is_403_and_a_loopback_one_is_served() {
    let daemon = Daemon::start(&config(&[]));
    let evil = Modern::discover().header("Origin", "http://evil.example.com").send(daemon.url());
    assert_eq!(evil.status, 403, "a non-loopback Origin must get 403:\n{evil}");
    let port = daemon.state()["port"].as_u64().unwrap_or_default();
    for origin in [format!("http://localhost:{port}"), format!("http://127.0.0.1:{port}")] {
        let ok = Modern::discover().header("Origin", &origin).send(daemon.url());
        assert_eq!(ok.status, 200, "a loopback Origin {origin} must be served:\n{ok}");
    }
    assert_serving(daemon.url());
}

/// Modern HTTP has no GET stream and no session to DELETE: without a legacy session both
/// are 405.
#[test]
fn get_and_delete_without_a_session_are_405() {
    let daemon = Daemon::start(&config(&[]));
    for http_method in ["GET", "DELETE"] {
        let reply = Raw {
            http_method,
            url: daemon.url(),
            headers: vec![("Accept".into(), ACCEPT_BOTH.into()), ("MCP-Protocol-Version".into(), MODERN.into())],
            body: None,
            revision: MODERN,
            method: None,
        }
        .send();
        assert_eq!(reply.status, 405, "{http_method} without a session:\n{reply}");
    }
    assert_serving(daemon.url());
}

/// All the bad input above, at one daemon in a row: it still serves tools afterwards.
#[test]
fn bad_input_does_not_stop_the_daemon() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"maxBodyBytes": 8192});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let replies: Vec<(&str, Reply, u16)> = vec![
        ("malformed JSON", Modern::discover().raw_body("{").send(url), 400),
        ("jsonrpc 1.0", Modern::discover().jsonrpc(json!("1.0")).send(url), 400),
        (
            "missing _meta key",
            Modern::discover().without_meta("io.modelcontextprotocol/clientCapabilities").send(url),
            400,
        ),
        ("huge body", Modern::mcpx_call("up", "echo", json!({"pad": "x".repeat(100_000)})).send(url), 413),
        ("unknown method", Modern::new("nope/nope", json!({})).send(url), 404),
        ("version v999", Modern::discover().version("v999").send(url), 400),
        ("version mismatch", Modern::discover().header("MCP-Protocol-Version", "2025-11-25").send(url), 400),
        ("foreign Origin", Modern::discover().header("Origin", "http://evil.example.com").send(url), 403),
        ("not JSON at all", Modern::discover().raw_body(vec![0xff, 0xfe, 0x00]).send(url), 400),
        ("a JSON array of nothing", Modern::discover().raw_body("[]").send(url), 400),
    ];
    for (what, reply, status) in &replies {
        assert_eq!(reply.status, *status, "{what}:\n{reply}");
    }
    let echo = Modern::mcpx_call("up", "echo", json!({"still": "here"})).send(url);
    assert_eq!(echo.structured(), &json!({"still": "here"}));
    assert_serving(url);
}
