//! The invocation context: on every request mcpx sends a stdio upstream it launched on a
//! caller's behalf, `_meta["dev.mcpx/invocation"] = {version, sessionId?, callId, scope,
//! clientId?}`, built from mcpx's own state. No caller can put a value into it, HTTP
//! upstreams never get it, and concurrent callers sharing an instance each get their own.

use std::collections::BTreeSet;

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::python::HttpServer;
use mcpx_e2e::{Daemon, LegacySession, Modern, config, fakemcp, tag};
use serde_json::{Map, Value, json};

const CONTEXT: &str = "dev.mcpx/invocation";
const TOKEN_CI: &str = "ci-token-0123456789abcdef";
const TOKEN_BOT: &str = "bot-token-0123456789abcdef";

/// What a caller might try to smuggle to the upstream.
fn forged() -> Map<String, Value> {
    let forged = json!({
        "dev.mcpx/invocation": {
            "version": 1, "sessionId": "forged-session", "callId": "forged-call",
            "scope": "forged-scope", "clientId": "forged-client"
        },
        "dev.mcpx/trace": "forged-trace",
        "com.example/keep": "kept",
    });
    forged.as_object().expect("an object").clone()
}

const FORGED_VALUES: [&str; 6] =
    ["forged-session", "forged-call", "forged-scope", "forged-client", "forged-trace", "qwen-forged"];

/// The `_meta` the upstream received, from a `meta` tool result (fakemcp's or the Python
/// server's, as structured content or as JSON text).
#[track_caller]
fn received_meta(result: &Value) -> Map<String, Value> {
    assert_ne!(result["isError"], json!(true), "the meta call failed: {result}");
    let body = match &result["structuredContent"] {
        Value::Object(_) => result["structuredContent"].clone(),
        _ => {
            let text =
                result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a meta result without text: {result}"));
            serde_json::from_str(text).unwrap_or_else(|e| panic!("the meta result is not JSON ({e}): {result}"))
        }
    };
    match &body["meta"] {
        Value::Object(meta) => meta.clone(),
        Value::Null => Map::new(),
        other => panic!("meta is not an object: {other}"),
    }
}

/// The context in what the upstream received; asserts it is the only `dev.mcpx/` key and
/// that nothing a caller forged arrived anywhere.
#[track_caller]
fn context_of(meta: &Map<String, Value>) -> Map<String, Value> {
    assert_no_forgery(meta);
    let mcpx_keys: Vec<&String> = meta.keys().filter(|k| k.starts_with("dev.mcpx/")).collect();
    assert_eq!(mcpx_keys, [CONTEXT], "the upstream must see exactly one dev.mcpx/ key: {meta:?}");
    let context = meta[CONTEXT].as_object().unwrap_or_else(|| panic!("the context is not an object: {meta:?}")).clone();
    assert_eq!(context["version"], 1, "{context:?}");
    let call_id = context["callId"].as_str().unwrap_or_default();
    assert!(!call_id.is_empty(), "the context has no callId: {context:?}");
    context
}

#[track_caller]
fn assert_no_forgery(meta: &Map<String, Value>) {
    let text = Value::Object(meta.clone()).to_string();
    for value in FORGED_VALUES {
        assert!(!text.contains(value), "a caller-supplied value ({value}) reached the upstream: {text}");
    }
    assert!(!meta.contains_key("qwen-code/invocation"), "a host context key reached the upstream: {text}");
}

fn forged_call(server: &str, tool: &str) -> Modern {
    forged().into_iter().fold(Modern::mcpx_call(server, tool, json!({})), |m, (k, v)| m.meta(&k, v))
}

#[test]
fn a_callers_own_invocation_context_and_dev_mcpx_keys_never_reach_the_upstream() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("session", &tag, &[]))]));
    let url = daemon.url();

    // Modern HTTP, session named by _meta, plus a host context key over HTTP.
    let reply = forged_call("f", "meta")
        .session("a")
        .meta("qwen-code/invocation", json!({"version": 1, "sessionId": "qwen-forged", "promptId": "p"}))
        .send(url);
    let meta = received_meta(reply.result());
    let context = context_of(&meta);
    assert_eq!(context["sessionId"], "a", "{context:?}");
    assert_eq!(context["scope"], "session:a", "{context:?}");
    assert!(context.get("clientId").is_none(), "{context:?}");
    assert_eq!(
        meta.get("com.example/keep"),
        Some(&json!("kept")),
        "a caller's own foreign _meta keys are the upstream's business and pass: {meta:?}"
    );

    // Legacy HTTP session.
    let legacy = LegacySession::open(url);
    let mut params = json!({"name": "mcpx_call", "arguments": {"server": "f", "tool": "meta", "arguments": {}}});
    params["_meta"] = Value::Object(forged());
    let reply = legacy.request("tools/call", params);
    let context = context_of(&received_meta(reply.result()));
    // An opaque value, never the Mcp-Session-Id that admits requests to the session.
    let session = context["sessionId"].as_str().unwrap_or_default();
    assert!(session.starts_with("mcpx-") && !session.contains(legacy.id()), "{context:?}");
    let scope = context["scope"].as_str().unwrap_or_default();
    assert!(scope.starts_with("http-session:") && !scope.contains(legacy.id()), "{context:?}");

    // stdio, through mcpx serve.
    let mut client = daemon.home().serve().session("s").start();
    let answer = client.request(&forged_call("f", "meta").frame());
    let context = context_of(&received_meta(answer.result()));
    assert_eq!(context["sessionId"], "s", "{context:?}");
    assert_eq!(context["scope"], "session:s", "{context:?}");
}

/// 50 calls at once from 5 sessions (three over HTTP, two through `mcpx serve`, each
/// pipelining its ten requests on one stream) through one global instance: each upstream
/// request carries its own caller's session and a call id of its own.
#[test]
fn concurrent_calls_from_five_sessions_through_one_global_instance_each_carry_their_own_context() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("g", fakemcp("global", &tag, &[]))]));
    let url = daemon.url().to_owned();
    let home = daemon.home();
    let mut serves = [home.serve().session("s3").start(), home.serve().session("s4").start()];

    let seen: Vec<(String, Map<String, Value>)> = std::thread::scope(|scope| {
        let http: Vec<_> = (0..30)
            .map(|i| {
                let url = url.clone();
                scope.spawn(move || {
                    let session = format!("s{}", i % 3);
                    let reply = Modern::mcpx_call("g", "meta", json!({})).session(&session).send(&url);
                    (session, context_of(&received_meta(reply.result())))
                })
            })
            .collect();
        let mut seen = Vec::new();
        for (n, serve) in serves.iter_mut().enumerate() {
            let frames: Vec<Value> = (0..10)
                .map(|_| {
                    let frame = Modern::mcpx_call("g", "meta", json!({})).frame();
                    serve.send(&frame);
                    frame
                })
                .collect();
            for frame in frames {
                let answer = serve.answer(&frame["id"], mcpx_e2e::serve::ANSWER_TIMEOUT);
                seen.push((format!("s{}", n + 3), context_of(&received_meta(answer.result()))));
            }
        }
        seen.extend(http.into_iter().map(|h| h.join().expect("an HTTP caller thread")));
        seen
    });

    assert_eq!(seen.len(), 50);
    let mut call_ids = BTreeSet::new();
    for (session, context) in &seen {
        assert_eq!(
            context["sessionId"],
            session.as_str(),
            "a call of session {session} reached the upstream with another caller's context: {context:?}"
        );
        assert_eq!(context["scope"], "global", "{context:?}");
        call_ids.insert(context["callId"].as_str().unwrap().to_owned());
    }
    assert_eq!(call_ids.len(), 50, "every admitted call must have its own callId");
    assert_eq!(home.instance_keys("g"), ["global"], "all 50 went through one instance");
}

/// A pass-through tool (`expose`), called directly, carries the context too.
#[test]
fn an_exposed_tool_call_carries_the_context() {
    let tag = tag();
    let mut cfg = config(&[("f", fakemcp("session", &tag, &[]))]);
    cfg["expose"] = json!(["f"]);
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();

    let direct = forged()
        .into_iter()
        .fold(Modern::tools_call("f__meta", json!({})), |m, (k, v)| m.meta(&k, v))
        .session("x")
        .send(url);
    let context = context_of(&received_meta(direct.result()));
    assert_eq!(context["sessionId"], "x", "{context:?}");
    assert_eq!(context["scope"], "session:x", "{context:?}");

    let legacy = LegacySession::open(url);
    let reply = legacy.tools_call("f__meta", json!({}));
    let context = context_of(&received_meta(reply.result()));
    let session = context["sessionId"].as_str().unwrap_or_default();
    assert!(session.starts_with("mcpx-") && !session.contains(legacy.id()), "{context:?}");

    let mut client = daemon.home().serve().session("y").start();
    let answer = client.request(&Modern::tools_call("f__meta", json!({})).frame());
    let context = context_of(&received_meta(answer.result()));
    assert_eq!(context["sessionId"], "y", "{context:?}");
    assert_eq!(context["scope"], "session:y", "{context:?}");
}

#[test]
fn an_http_upstream_and_a_server_with_the_context_turned_off_receive_no_dev_mcpx_key() {
    let tag = tag();
    let python = HttpServer::python_sdk();
    let mut quiet = fakemcp("session", &tag, &[]);
    quiet["invocationContext"] = json!(false);
    let daemon = Daemon::start(&config(&[("py", json!({"url": python.url()})), ("quiet", quiet)]));
    let url = daemon.url();
    let mut client = daemon.home().serve().session("s").start();

    for server in ["py", "quiet"] {
        let over_http = forged_call(server, "meta")
            .session("a")
            .meta("qwen-code/invocation", json!({"version": 1, "sessionId": "qwen-forged", "promptId": "p"}))
            .send(url);
        let over_stdio = client.request(&forged_call(server, "meta").frame());
        for (how, result) in [("HTTP", over_http.result()), ("stdio", over_stdio.result())] {
            let meta = received_meta(result);
            assert_no_forgery(&meta);
            let mcpx_keys: Vec<&String> = meta.keys().filter(|k| k.starts_with("dev.mcpx/")).collect();
            assert!(
                mcpx_keys.is_empty(),
                "{server} (called over {how}) must receive no dev.mcpx/ key, got {mcpx_keys:?}: {meta:?}"
            );
            assert_eq!(
                meta.get("com.example/keep"),
                Some(&json!("kept")),
                "{server} (over {how}) still gets the caller's own keys: {meta:?}"
            );
        }
    }
}

/// A modern HTTP request that names no session has none: a session-scoped server serves it
/// with a per-call instance, and the context says so.
#[test]
fn an_unnamed_modern_request_gets_a_context_without_session_and_a_call_scope() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("session", &tag, &[]))]));
    let reply = Modern::mcpx_call("f", "meta", json!({})).send(daemon.url());
    let context = context_of(&received_meta(reply.result()));
    assert!(context.get("sessionId").is_none(), "mcpx must not invent a session: {context:?}");
    let call_id = context["callId"].as_str().unwrap();
    assert_eq!(
        context["scope"],
        format!("call:{call_id}"),
        "the instance key of an unnamed call is the call: {context:?}"
    );
}

/// `clientId` is the name of the token a TCP caller presented, never the `clientInfo` it
/// reports about itself; callers without a token (the socket) have none.
#[test]
fn the_client_id_is_the_name_of_the_token_presented() {
    let tag = tag();
    let mut cfg = config(&[("f", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"tokens": {"ci": TOKEN_CI, "bot": TOKEN_BOT}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();

    let as_ci =
        Modern::mcpx_call("f", "meta", json!({})).header("Authorization", &format!("Bearer {TOKEN_CI}")).send(url);
    assert_eq!(context_of(&received_meta(as_ci.result()))["clientId"], "ci");

    let bot_claiming_ci = Modern::mcpx_call("f", "meta", json!({}))
        .meta("io.modelcontextprotocol/clientInfo", json!({"name": "ci", "version": "1"}))
        .header("Authorization", &format!("Bearer {TOKEN_BOT}"))
        .send(url);
    assert_eq!(
        context_of(&received_meta(bot_claiming_ci.result()))["clientId"],
        "bot",
        "clientId must come from the token, not from clientInfo"
    );

    let v1 = plain(
        "POST",
        &format!("{}/v1/call", base_url(url)),
        &[("Authorization", &format!("Bearer {TOKEN_CI}"))],
        Some(&json!({"server": "f", "tool": "meta", "arguments": {}}).to_string()),
    );
    assert_eq!(v1.status, 200, "{v1}");
    assert_eq!(context_of(&received_meta(&v1.json()))["clientId"], "ci", "{v1}");

    let mut client = daemon.home().serve().start();
    let answer = client.call("f", "meta", json!({}));
    let context = context_of(&received_meta(answer.result()));
    assert!(context.get("clientId").is_none(), "a socket caller presented no token: {context:?}");
}

/// A Qwen Code host attests its own context to the stdio servers it launches (so to
/// `mcpx serve`); mcpx carries it to its own stdio upstreams inside its context, as `host`,
/// and never as a top-level key.
#[test]
fn a_stdio_hosts_qwen_code_context_travels_inside_the_context_as_host() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &tag, &[]))]));
    let host = json!({"version": 1, "sessionId": "qwen-1", "promptId": "prompt-7"});
    let mut client = daemon.home().serve().session("s").start();
    let answer =
        client.request(&Modern::mcpx_call("f", "meta", json!({})).meta("qwen-code/invocation", host.clone()).frame());
    let meta = received_meta(answer.result());
    assert!(!meta.contains_key("qwen-code/invocation"), "{meta:?}");
    let context = meta[CONTEXT].as_object().expect("a context");
    assert_eq!(context.get("host"), Some(&json!({"qwen-code/invocation": host})), "{context:?}");
    assert_eq!(context["sessionId"], "s");
}
