//! A handshake-era caller cancels with `notifications/cancelled` (for it, a disconnect is
//! not a cancellation): the request stops at once and gets no answer.

use std::time::{Duration, Instant};

use mcpx_e2e::client::{LegacySession, http};
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::json;

#[test]
fn notifications_cancelled_stops_a_request_in_the_session() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &t, &[]))]));
    let session = LegacySession::open(daemon.url());
    let (url, id, revision) = (daemon.url().to_owned(), session.id().to_owned(), session.revision().to_owned());
    let post = |body: serde_json::Value| {
        http()
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .header("Mcp-Session-Id", &id)
            .header("MCP-Protocol-Version", &revision)
            .body(body.to_string())
            .send()
            .expect("POST in the session")
    };
    let slow = json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {
        "name": "mcpx_call", "arguments": {"server": "f", "tool": "slow", "arguments": {"ms": 20000}}}});
    let started = Instant::now();
    let call = std::thread::scope(|scope| {
        let call = scope.spawn(|| post(slow));
        assert!(daemon.home().wait_in_use("f", 1, Duration::from_secs(20)), "the slow call never started");
        let cancel = post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "slow-1", "reason": "the user gave up"}}));
        assert_eq!(cancel.status(), 202);
        call.join().unwrap()
    });
    assert!(started.elapsed() < Duration::from_secs(10), "the cancelled call ran on for {:?}", started.elapsed());
    // Cancelled: no JSON-RPC answer is sent for it.
    assert_eq!(call.status(), 202, "a cancelled request got an answer");
    // The session and the instance serve on.
    assert_eq!(session.mcpx_call("f", "echo", json!({"after": "cancel"})).structured()["after"], "cancel");
}

/// A handshake-era caller that takes an event stream and drops its connection before the
/// answer has not cancelled anything: the call runs on at the upstream to its end, and
/// no `notifications/cancelled` is sent for it. (A 2026 caller closing its stream does
/// cancel: `a_modern_caller_closing_its_stream_cancels_the_call_at_server_everything`.)
#[test]
fn a_dropped_connection_does_not_cancel_a_handshake_era_request() {
    let t = tag();
    let tap = mcpx_e2e::tap::StdioTap::new();
    let daemon = Daemon::start(&config(&[("f", mcpx_e2e::upstreams::tapped(&tap, &fakemcp("global", &t, &[])))]));
    let session = LegacySession::open(daemon.url());
    let impatient = reqwest::blocking::Client::builder().timeout(Duration::from_millis(400)).build().unwrap();
    let slow = json!({"jsonrpc": "2.0", "id": "slow-2", "method": "tools/call", "params": {
        "name": "mcpx_call", "arguments": {"server": "f", "tool": "slow", "arguments": {"ms": 1500}}}});
    let gave_up = impatient
        .post(daemon.url())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", session.id())
        .header("MCP-Protocol-Version", session.revision())
        .body(slow.to_string())
        .send();
    assert!(gave_up.is_err(), "the slow call answered within 400 ms: {gave_up:?}");
    let is_slow = |f: &serde_json::Value| f["params"]["name"] == "slow";
    let answered = mcpx_e2e::process::poll(Duration::from_secs(10), || {
        mcpx_e2e::upstreams::upstream_exchange(&tap, "tools/call", is_slow)
            .and_then(|(request, response)| response.map(|r| (request, r)))
    });
    let (request, response) = answered.expect("the upstream never finished the call its caller walked away from");
    assert!(response.get("result").is_some(), "{response}");
    let cancelled = tap
        .sent()
        .into_iter()
        .any(|f| f["method"] == "notifications/cancelled" && f["params"]["requestId"] == request["id"]);
    assert!(!cancelled, "a dropped connection cancelled a handshake-era request:\n{}", tap.transcript());
    // The session serves on.
    assert_eq!(session.mcpx_call("f", "echo", json!({"after": "drop"})).structured()["after"], "drop");
}
