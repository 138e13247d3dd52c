//! The standalone stream of a handshake-era HTTP session (GET with `Mcp-Session-Id`): the
//! list changes of the upstream instances the session reaches arrive there, outside any
//! request.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

use mcpx_e2e::client::LegacySession;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use mcpx_e2e::schema;
use serde_json::{Value, json};

#[test]
fn a_sessions_standalone_stream_carries_an_upstreams_list_changes() {
    let t = tag();
    let mut cfg = config(&[("f", fakemcp("session", &t, &["--era", "legacy"]))]);
    cfg["expose"] = json!(["f"]);
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open(daemon.url());

    let response = mcpx_e2e::client::http()
        .get(daemon.url())
        .header("Accept", "text/event-stream")
        .header("Mcp-Session-Id", session.id())
        .header("MCP-Protocol-Version", session.revision())
        .send()
        .expect("GET the standalone stream");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let (events, arrived) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data:") {
                let _ = events.send(serde_json::from_str(data.trim()).expect("an event is JSON"));
            }
        }
    });

    // The upstream announces a change while serving this session's call.
    let reply = session.mcpx_call("f", "changed", json!({}));
    assert_eq!(reply.structured()["announced"], "notifications/tools/list_changed");
    let change = arrived.recv_timeout(Duration::from_secs(10)).expect("the change reached the standalone stream");
    assert_eq!(change["method"], "notifications/tools/list_changed", "{change}");
    schema::spec(schema::LEGACY).assert_valid("ToolListChangedNotification", &change, "a notification on the standalone stream");
}

#[test]
fn a_standalone_stream_needs_a_session_and_an_event_stream() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &t, &[]))]));
    let http = mcpx_e2e::client::http();
    let without = http.get(daemon.url()).header("Accept", "text/event-stream").send().unwrap();
    assert_eq!(without.status(), 405);
    let session = LegacySession::open(daemon.url());
    let json_only = http
        .get(daemon.url())
        .header("Accept", "application/json")
        .header("Mcp-Session-Id", session.id())
        .send()
        .unwrap();
    assert_eq!(json_only.status(), 406);
}
