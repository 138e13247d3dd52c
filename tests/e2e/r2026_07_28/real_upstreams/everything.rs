//! `@modelcontextprotocol/server-everything` (2025-11-25 only, stdio) behind mcpx, exposed
//! as `everything`, called by a 2026-07-28 caller: tools, resources (text and binary),
//! templates, prompts, completions, progress and cancellation. A stdio tap in front of
//! the server shows what really crossed the upstream connection.

use std::time::{Duration, Instant};

use mcpx_e2e::schema::MODERN;
use mcpx_e2e::tap::StdioTap;
use mcpx_e2e::upstreams::{RawPost, base64_decode, everything_tapped, field_of_each, first_text, upstream_exchange};
use mcpx_e2e::{Daemon, Modern, poll, tag};
use serde_json::{Value, json};

fn everything_config(tap: &StdioTap) -> Value {
    json!({"mcpServers": {"everything": everything_tapped(tap, &tag())}, "expose": ["everything"]})
}

/// The upstream's own answer to its first `method` request, as the tap saw it.
#[track_caller]
fn upstream_result(tap: &StdioTap, method: &str) -> Value {
    let (request, _) = upstream_exchange(tap, method, |_| true)
        .unwrap_or_else(|| panic!("mcpx never sent {method} upstream:\n{}", tap.transcript()));
    // The tap logs the server's answer as it relays it: it may land a moment after mcpx
    // already used it.
    let response = poll(Duration::from_secs(5), || upstream_exchange(tap, method, |_| true).and_then(|(_, r)| r))
        .unwrap_or_else(|| panic!("no upstream answer to {request}"));
    response["result"].clone()
}

/// The elements of `list` whose `field` starts with `prefix`.
fn with_prefix<'a>(result: &'a Value, list: &str, field: &str, prefix: &str) -> Vec<&'a Value> {
    result[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list}: {result}"))
        .iter()
        .filter(|item| item[field].as_str().is_some_and(|v| v.starts_with(prefix)))
        .collect()
}

#[test]
fn server_everything_is_reached_in_its_handshake_era_and_its_list_changed_is_tolerated() {
    let tap = StdioTap::new();
    let daemon = Daemon::start(&everything_config(&tap));
    let list = Modern::tools_list().send(daemon.url());
    assert!(list.result()["tools"].as_array().unwrap().iter().any(|t| t["name"] == "everything__echo"), "{list}");

    // mcpx probed with server/discover, which this server does not know, then shook hands.
    let sent = tap.sent();
    let methods: Vec<&str> = sent.iter().filter_map(|f| f["method"].as_str()).collect();
    assert_eq!(methods.first().copied(), Some("server/discover"), "the probe comes first:\n{}", tap.transcript());
    let init = methods
        .iter()
        .position(|m| *m == "initialize")
        .unwrap_or_else(|| panic!("no initialize after the refused probe:\n{}", tap.transcript()));
    assert_eq!(methods.get(init + 1).copied(), Some("notifications/initialized"), "{}", tap.transcript());
    let (_, discover) = upstream_exchange(&tap, "server/discover", |_| true).unwrap();
    assert_eq!(discover.expect("the server answers the probe")["error"]["code"], -32601, "{}", tap.transcript());
    // It announced a list change right after initialize, unasked; mcpx went on regardless.
    let received = tap.received();
    let announced = received
        .iter()
        .position(|f| f["method"] == "notifications/tools/list_changed")
        .unwrap_or_else(|| panic!("the server sent no list_changed:\n{}", tap.transcript()));
    let (init_request, _) = upstream_exchange(&tap, "initialize", |_| true).unwrap();
    let answered = received
        .iter()
        .position(|f| f["id"] == init_request["id"] && f.get("result").is_some())
        .expect("initialize was answered");
    assert!(answered < announced, "{}", tap.transcript());
    let echo = Modern::tools_call("everything__echo", json!({"message": "after list_changed"})).send(daemon.url());
    assert_eq!(first_text(echo.result()), "Echo: after list_changed", "{echo}");
}

#[test]
fn server_everything_tools_are_listed_unchanged_and_called_by_a_modern_caller() {
    let tap = StdioTap::new();
    let daemon = Daemon::start(&everything_config(&tap));
    let url = daemon.url();

    let list = Modern::tools_list().send(url);
    let relayed = with_prefix(list.result(), "tools", "name", "everything__");
    let upstream = upstream_result(&tap, "tools/list");
    let originals = upstream["tools"].as_array().expect("the upstream lists tools");
    assert!(originals.len() >= 10, "server-everything lists its tools: {upstream}");
    assert_eq!(relayed.len(), originals.len(), "every tool is exposed:\n{list}");
    for (original, relayed) in originals.iter().zip(&relayed) {
        let mut expected = original.clone();
        expected["name"] = json!(format!("everything__{}", original["name"].as_str().unwrap()));
        assert_eq!(**relayed, expected, "a tool must reach the caller as the upstream listed it, only renamed");
    }
    let structured = relayed
        .iter()
        .find(|t| t["name"] == "everything__get-structured-content")
        .expect("get-structured-content is listed");
    assert_eq!(structured["execution"], json!({"taskSupport": "forbidden"}));
    assert_eq!(structured["outputSchema"]["required"], json!(["temperature", "conditions", "humidity"]));

    let echo = Modern::tools_call("everything__echo", json!({"message": "héllo → mcpx ✓"})).send(url);
    assert_eq!(first_text(echo.result()), "Echo: héllo → mcpx ✓", "{echo}");
    let sum = Modern::mcpx_call("everything", "get-sum", json!({"a": 19, "b": 23})).send(url);
    assert_eq!(first_text(sum.result()), "The sum of 19 and 23 is 42.", "{sum}");
    let weather = Modern::tools_call("everything__get-structured-content", json!({"location": "Chicago"})).send(url);
    let weather_data = &weather.result()["structuredContent"];
    assert!(
        weather_data["temperature"].is_number()
            && weather_data["conditions"].is_string()
            && weather_data["humidity"].is_number(),
        "structuredContent is relayed: {weather}"
    );
    // A tool the server does not have: its own error result comes back as it sent it.
    let missing = Modern::tools_call("everything__no-such-tool", json!({})).send(url);
    assert_eq!(missing.result()["isError"], true, "{missing}");
    assert!(
        first_text_any(missing.result()).contains("no-such-tool"),
        "the upstream's message names the tool: {missing}"
    );
}

fn first_text_any(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn server_everything_resources_prompts_and_completions_reach_a_modern_caller() {
    let tap = StdioTap::new();
    let daemon = Daemon::start(&everything_config(&tap));
    let url = daemon.url();
    const PREFIX: &str = "mcpx://everything/";

    // Resources: every one listed as mcpx://everything/<its uri>, its other fields kept.
    let list = Modern::new("resources/list", json!({})).send(url);
    let relayed = with_prefix(list.result(), "resources", "uri", PREFIX);
    let upstream = upstream_result(&tap, "resources/list");
    let originals = upstream["resources"].as_array().unwrap();
    assert!(originals.len() >= 5, "{upstream}");
    assert_eq!(relayed.len(), originals.len(), "{list}");
    for (original, relayed) in originals.iter().zip(&relayed) {
        let mut expected = original.clone();
        expected["uri"] = json!(format!("{PREFIX}{}", original["uri"].as_str().unwrap()));
        assert_eq!(**relayed, expected);
    }

    // A static text resource.
    let features = format!("{PREFIX}demo://resource/static/document/features.md");
    assert!(field_of_each(list.result(), "resources", "uri").contains(&features.as_str()));
    let read = Modern::new("resources/read", json!({"uri": features})).send(url);
    let content = &read.result()["contents"][0];
    assert_eq!(content["uri"], features, "{read}");
    assert_eq!(content["mimeType"], "text/markdown", "{read}");
    assert!(content["text"].as_str().unwrap_or_default().starts_with("# Everything Server - Features"), "{read}");

    // Templates, and a text and a binary resource made from them.
    let templates = Modern::new("resources/templates/list", json!({})).send(url);
    let mut uri_templates = field_of_each(templates.result(), "resourceTemplates", "uriTemplate");
    uri_templates.sort_unstable();
    assert_eq!(
        uri_templates,
        [
            "mcpx://everything/demo://resource/dynamic/blob/{resourceId}",
            "mcpx://everything/demo://resource/dynamic/text/{resourceId}",
        ],
        "{templates}"
    );
    let text_uri = format!("{PREFIX}demo://resource/dynamic/text/7");
    let read = Modern::new("resources/read", json!({"uri": text_uri})).send(url);
    let content = &read.result()["contents"][0];
    assert_eq!(content["uri"], text_uri, "{read}");
    assert!(
        content["text"].as_str().unwrap_or_default().starts_with("Resource 7: This is a plaintext resource"),
        "{read}"
    );
    let blob_uri = format!("{PREFIX}demo://resource/dynamic/blob/7");
    let read = Modern::new("resources/read", json!({"uri": blob_uri})).send(url);
    let content = &read.result()["contents"][0];
    assert_eq!(content["uri"], blob_uri, "{read}");
    assert!(content.get("text").is_none(), "a binary resource stays a blob: {read}");
    let bytes = base64_decode(content["blob"].as_str().unwrap_or_else(|| panic!("no blob: {read}")));
    assert!(
        String::from_utf8_lossy(&bytes).starts_with("Resource 7: This is a base64 blob"),
        "the blob decodes to what the server encoded: {read}"
    );
    // A resource nobody has: -32602 naming the URI the caller asked for.
    let missing = format!("{PREFIX}demo://resource/no/such/thing");
    let reply = Modern::new("resources/read", json!({"uri": missing})).send(url);
    let error = reply.assert_error(200, -32602);
    assert_eq!(error["data"]["uri"], missing, "{reply}");

    // Prompts.
    let prompts = Modern::new("prompts/list", json!({})).send(url);
    let relayed = with_prefix(prompts.result(), "prompts", "name", "everything__");
    let upstream = upstream_result(&tap, "prompts/list");
    let originals = upstream["prompts"].as_array().unwrap();
    assert_eq!(relayed.len(), originals.len(), "{prompts}");
    for (original, relayed) in originals.iter().zip(&relayed) {
        let mut expected = original.clone();
        expected["name"] = json!(format!("everything__{}", original["name"].as_str().unwrap()));
        assert_eq!(**relayed, expected);
    }
    let got = Modern::new(
        "prompts/get",
        json!({"name": "everything__args-prompt", "arguments": {"city": "Paris", "state": "Texas"}}),
    )
    .send(url);
    assert_eq!(got.result()["messages"][0]["content"]["text"], "What's weather in Paris, Texas?", "{got}");
    let simple = Modern::new("prompts/get", json!({"name": "everything__simple-prompt"})).send(url);
    assert_eq!(
        simple.result()["messages"][0]["content"]["text"],
        "This is a simple prompt without arguments.",
        "{simple}"
    );

    // Completions, routed to the owner of the prompt or template.
    let complete = |reference: Value, argument: Value, context: Option<Value>| {
        let mut params = json!({"ref": reference, "argument": argument});
        if let Some(context) = context {
            params["context"] = context;
        }
        Modern::new("completion/complete", params).send(url)
    };
    let department = complete(
        json!({"type": "ref/prompt", "name": "everything__completable-prompt"}),
        json!({"name": "department", "value": "E"}),
        None,
    );
    assert_eq!(department.result()["completion"]["values"], json!(["Engineering"]), "{department}");
    let members = complete(
        json!({"type": "ref/prompt", "name": "everything__completable-prompt"}),
        json!({"name": "name", "value": ""}),
        Some(json!({"arguments": {"department": "Engineering"}})),
    );
    assert_eq!(
        members.result()["completion"]["values"],
        json!(["Alice", "Bob", "Charlie"]),
        "the context reaches the server: {members}"
    );
    let template = complete(
        json!({"type": "ref/resource", "uri": "mcpx://everything/demo://resource/dynamic/text/{resourceId}"}),
        json!({"name": "resourceId", "value": "1"}),
        None,
    );
    assert_eq!(template.result()["completion"]["values"], json!(["1"]), "{template}");
    // The server was asked about its own names, not mcpx's.
    let (request, _) = upstream_exchange(&tap, "completion/complete", |f| f["params"]["ref"]["type"] == "ref/resource")
        .expect("the template completion went upstream");
    assert_eq!(request["params"]["ref"]["uri"], "demo://resource/dynamic/text/{resourceId}", "{request}");
}

#[test]
fn progress_of_a_long_call_reaches_a_modern_caller_under_its_own_token_before_the_result() {
    let tap = StdioTap::new();
    let daemon = Daemon::start(&everything_config(&tap));
    let token = json!("caller's token ✓");
    let reply = Modern::tools_call("everything__trigger-long-running-operation", json!({"duration": 0.6, "steps": 3}))
        .meta("progressToken", token.clone())
        .send(daemon.url());
    assert!(reply.content_type().starts_with("text/event-stream"), "progress needs an SSE reply:\n{reply}");
    assert_eq!(
        first_text(reply.result()),
        "Long running operation completed. Duration: 0.6 seconds, Steps: 3.",
        "{reply}"
    );
    let last = reply.frames.len() - 1;
    assert!(reply.frames[last].get("result").is_some(), "the result comes last:\n{reply}");
    let progress = &reply.frames[..last];
    assert_eq!(progress.len(), 3, "three progress notifications, then the result:\n{reply}");
    for (step, note) in progress.iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress", "{note}");
        assert_eq!(note["params"]["progressToken"], token, "{note}");
        assert_eq!(note["params"]["progress"], json!(step + 1), "{note}");
        assert_eq!(note["params"]["total"], 3, "{note}");
    }
    // Upstream, the token was mcpx's own, not the caller's.
    let (request, _) =
        upstream_exchange(&tap, "tools/call", |f| f["params"]["name"] == "trigger-long-running-operation")
            .expect("the call went upstream");
    let upstream_token = &request["params"]["_meta"]["progressToken"];
    assert!(!upstream_token.is_null(), "mcpx asked the upstream for progress: {request}");
    assert_ne!(*upstream_token, token, "the caller's token must be remapped: {request}");
}

/// A 2026 caller cancels by closing its response stream: mcpx tells the upstream in its
/// own era's way (`notifications/cancelled` naming the upstream request), at once, and
/// serves on.
#[test]
fn a_modern_caller_closing_its_stream_cancels_the_call_at_server_everything() {
    let tap = StdioTap::new();
    let daemon = Daemon::start(&everything_config(&tap));
    let request = Modern::tools_call("everything__trigger-long-running-operation", json!({"duration": 8, "steps": 16}))
        .meta("progressToken", json!("cancel-me"));
    let mut post = RawPost::send(daemon.url(), MODERN, &request.headers(), &request.frame());
    assert_eq!(post.status(), 200, "{:?}", post.head);
    let first = post.read_until(Duration::from_secs(10), |f| f["method"] == "notifications/progress");
    assert_eq!(first["params"]["progressToken"], "cancel-me", "{first}");
    let closed = Instant::now();
    drop(post);

    let (call, _) = upstream_exchange(&tap, "tools/call", |f| f["params"]["name"] == "trigger-long-running-operation")
        .expect("the call went upstream");
    let cancelled = poll(Duration::from_secs(5), || {
        tap.sent()
            .into_iter()
            .find(|f| f["method"] == "notifications/cancelled" && f["params"]["requestId"] == call["id"])
    });
    let cancelled = cancelled.unwrap_or_else(|| {
        panic!(
            "no notifications/cancelled for upstream request {} within 5 s of the caller leaving:\n{}",
            call["id"],
            tap.transcript()
        )
    });
    assert!(
        closed.elapsed() < Duration::from_secs(5),
        "the cancellation must not wait for the 8 s operation: {:?}",
        closed.elapsed()
    );
    assert!(cancelled.get("id").is_none(), "a notification, not a request: {cancelled}");

    // The daemon and the same upstream instance serve on.
    let echo = Modern::tools_call("everything__echo", json!({"message": "still here"})).send(daemon.url());
    assert_eq!(first_text(echo.result()), "Echo: still here", "{echo}");
    let initializes = tap.sent().iter().filter(|f| f["method"] == "initialize").count();
    assert_eq!(initializes, 1, "the instance was kept, not restarted:\n{}", tap.transcript());
}

/// server-everything (the TypeScript SDK) writes an answer's id last. An answer over
/// `limits.maxLineBytes` is dropped unread, but the end of its line still names the call
/// it answers: that call fails at once, naming the setting, and a call in flight beside
/// it is answered.
#[test]
fn an_over_long_answer_with_its_id_last_fails_only_its_own_call() {
    let tap = StdioTap::new();
    let mut cfg = everything_config(&tap);
    cfg["limits"] = json!({"maxLineBytes": 65536});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let (long, echo) = std::thread::scope(|s| {
        let long = s.spawn(|| {
            Modern::tools_call("everything__trigger-long-running-operation", json!({"duration": 2, "steps": 2}))
                .send(url)
        });
        // Wait until the first call is in flight on the instance.
        assert!(daemon.home().wait_in_use("everything", 1, Duration::from_secs(20)), "the first call never started");
        let started = Instant::now();
        let echo = Modern::tools_call("everything__echo", json!({"message": "x".repeat(100_000)})).send(url);
        assert!(started.elapsed() < Duration::from_secs(2), "the call failed after {:?}", started.elapsed());
        (long.join().unwrap(), echo)
    });
    let error = echo.assert_error(200, -32603);
    assert_eq!(
        error["message"],
        r#"server "everything" wrote a line longer than limits.maxLineBytes (65536 bytes), which mcpx dropped unread: it was the answer to this request"#
    );
    assert!(first_text(long.result()).starts_with("Long running operation completed"), "{long}");
    let small = Modern::tools_call("everything__echo", json!({"message": "small"})).send(url);
    assert_eq!(first_text(small.result()), "Echo: small", "{small}");
}
