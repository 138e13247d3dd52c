//! Legacy Streamable HTTP: sessions opened by `initialize`, identity per session, and the
//! status codes a session-less or unknown-session request gets.

use mcpx_e2e::client::{self, ACCEPT_BOTH, Raw};
use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::{Daemon, LegacySession, Whoami, assert_serving, config, fakemcp, processes_with, tag};
use serde_json::json;

/// Two legacy HTTP sessions are two clients: a session-scoped server gives each its own
/// instance, and each session keeps reaching its own instance across calls.
#[test]
fn http_mcp_clients_do_not_share_scoped_instances() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("browser", fakemcp("session", &tag, &[]))]));
    let a = LegacySession::open(daemon.url());
    let b = LegacySession::open(daemon.url());
    assert_ne!(a.id(), b.id(), "two initializes must mint two session ids");

    let whoami = |s: &LegacySession| Whoami::of(&s.mcpx_call("browser", "whoami", json!({})));
    let a1 = whoami(&a);
    let b1 = whoami(&b);
    let a2 = whoami(&a);
    let b2 = whoami(&b);
    let a3 = whoami(&a);

    assert_ne!(a1.instance, b1.instance, "two sessions shared one session-scoped instance");
    assert_eq!((a2.instance.as_str(), a3.instance.as_str()), (a1.instance.as_str(), a1.instance.as_str()));
    assert_eq!(b2.instance, b1.instance, "session b lost its instance");
    assert_eq!([a1.calls, a2.calls, a3.calls], [1, 2, 3], "session a's calls were not all served by one instance");
    assert_eq!([b1.calls, b2.calls], [1, 2], "session b's calls were not all served by one instance");
    let mut pids = vec![a1.pid, b1.pid];
    pids.sort_unstable();
    assert_eq!(processes_with(&tag), pids, "exactly one upstream process per session");
}

#[test]
fn an_unknown_session_id_is_404() {
    let daemon = Daemon::start(&config(&[]));
    let frame = json!({"jsonrpc": "2.0", "id": client::next_id(), "method": "tools/list", "params": {}});
    let reply = Raw {
        http_method: "POST",
        url: daemon.url(),
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), ACCEPT_BOTH.into()),
            ("Mcp-Session-Id".into(), "no-such-session-4f3c2a".into()),
            ("MCP-Protocol-Version".into(), LEGACY.into()),
        ],
        body: Some(frame.to_string().into_bytes()),
        revision: LEGACY,
        method: Some("tools/list"),
    }
    .send();
    assert_eq!(reply.status, 404, "an unknown Mcp-Session-Id must get 404:\n{reply}");
    assert_serving(daemon.url());
}

/// `DELETE` ends a session: the id is unknown afterwards, and other sessions carry on.
#[test]
fn a_deleted_session_is_gone() {
    let daemon = Daemon::start(&config(&[]));
    let doomed = LegacySession::open(daemon.url());
    let other = LegacySession::open(daemon.url());
    let before = doomed.request("tools/list", json!({}));
    before.result();

    let deleted = doomed.delete();
    assert!((200..300).contains(&deleted.status), "DELETE of a live session must succeed:\n{deleted}");
    let after = doomed.request("tools/list", json!({}));
    assert_eq!(after.status, 404, "a deleted session must be unknown (404):\n{after}");
    let still = other.request("tools/list", json!({}));
    assert!(still.result()["tools"].is_array(), "another session must be unaffected:\n{still}");
}

/// `initialize` answers each handshake revision as asked, and counter-offers its newest
/// one for a revision it does not know. Frames are checked against each revision's schema.
#[test]
fn initialize_agrees_to_each_handshake_revision_and_counter_offers_for_unknown_ones() {
    let daemon = Daemon::start(&config(&[]));
    for revision in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let session = LegacySession::open_with(daemon.url(), revision);
        let tools = session.request("tools/list", json!({}));
        let names: Vec<&str> =
            tools.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(names.contains(&"mcpx_call") && names.contains(&"mcpx_search"), "{revision}:\n{tools}");
        assert!(
            tools.result().get("resultType").is_none(),
            "a {revision} result must not carry the 2026 field resultType:\n{tools}"
        );
    }
    let offer = client::initialize(daemon.url(), "2024-01-01");
    assert_eq!(offer.result()["protocolVersion"], json!(LEGACY), "expected a counter-offer of {LEGACY}:\n{offer}");
}

/// A POST that is neither in a session, nor modern, nor `initialize` has no era: 400.
#[test]
fn a_request_outside_any_session_is_400() {
    let daemon = Daemon::start(&config(&[]));
    let frame = json!({"jsonrpc": "2.0", "id": client::next_id(), "method": "tools/list", "params": {}});
    let reply = Raw {
        http_method: "POST",
        url: daemon.url(),
        headers: vec![("Content-Type".into(), "application/json".into()), ("Accept".into(), ACCEPT_BOTH.into())],
        body: Some(frame.to_string().into_bytes()),
        revision: LEGACY,
        method: Some("tools/list"),
    }
    .send();
    assert_eq!(reply.status, 400, "a session-less legacy request must get 400:\n{reply}");
    assert_serving(daemon.url());
}

/// `ping` works inside a session and answers an empty result.
#[test]
fn ping_in_a_session_answers_an_empty_result() {
    let daemon = Daemon::start(&config(&[]));
    let session = LegacySession::open(daemon.url());
    let pong = session.request("ping", json!({}));
    assert_eq!(pong.result(), &json!({}), "ping must answer {{}}:\n{pong}");
}

/// Inside a session the `MCP-Protocol-Version` header must name the negotiated revision;
/// an unsupported one is 400.
#[test]
fn an_unsupported_protocol_version_header_in_a_session_is_400() {
    let daemon = Daemon::start(&config(&[]));
    let session = LegacySession::open(daemon.url());
    let reply = session.request_with("tools/list", json!({}), &[("MCP-Protocol-Version", "1999-01-01")]);
    assert_eq!(reply.status, 400, "{reply}");
    assert!(session.request("tools/list", json!({})).result()["tools"].is_array(), "the session must survive");
}

/// Inside a session, too, replies are JSON or SSE as `Accept` allows.
#[test]
fn replies_in_a_session_follow_the_accept_header() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let session = LegacySession::open(daemon.url());
    let args = json!({"server": "up", "tool": "echo", "arguments": {"via": "sse"}});
    let sse = session.request_with(
        "tools/call",
        json!({"name": "mcpx_call", "arguments": args}),
        &[("Accept", "text/event-stream")],
    );
    assert!(sse.content_type().starts_with("text/event-stream"), "expected SSE:\n{sse}");
    assert_eq!(sse.structured(), &json!({"via": "sse"}));
    assert!(sse.result().get("resultType").is_none(), "a 2025-11-25 result carries no resultType:\n{sse}");
    let plain = session.mcpx_call("up", "echo", json!({"via": "json"}));
    assert!(plain.content_type().starts_with("application/json"), "{plain}");
    assert_eq!(plain.structured(), &json!({"via": "json"}));
}
