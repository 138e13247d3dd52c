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
        std::thread::sleep(Duration::from_millis(500));
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
