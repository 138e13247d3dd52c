//! `logging/setLevel` in the handshake era: the level a session sets is the least severe
//! message it hears from any upstream, and what a stateless upstream is asked for in
//! `_meta`. Before any setLevel a session hears every level.

use mcpx_e2e::client::LegacySession;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use mcpx_e2e::{Daemon, Home};
use serde_json::{Value, json};

const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// A handshake-era upstream (which logs whatever mcpx's shared session with it allows)
/// and a stateless one (which logs only at the level a request asks for), both serving
/// the conformance fixture's `test_logging_levels` (one info, one error message).
fn both_eras(t: &str) -> Value {
    config(&[
        ("legacy", fakemcp("global", t, &["--era", "legacy", "--fixture", "conformance"])),
        ("stateless", fakemcp("global", t, &["--fixture", "conformance"])),
    ])
}

/// The levels of the log messages among `frames`, in order.
fn levels(frames: &[Value]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| f["method"] == "notifications/message")
        .map(|f| f["params"]["level"].as_str().expect("a log message names its level").to_owned())
        .collect()
}

#[test]
fn a_session_at_error_hears_only_errors_and_stateless_upstreams_are_asked_for_error() {
    let daemon = Daemon::start(&both_eras(&tag()));
    let session = LegacySession::open(daemon.url());

    // Until the session sets a level, it hears every level, and a stateless upstream is
    // asked for all of them.
    for server in ["legacy", "stateless"] {
        let reply = session.mcpx_call(server, "test_logging_levels", json!({}));
        reply.result();
        assert_eq!(levels(&reply.frames), ["info", "error"], "{server}, before setLevel:\n{reply}");
    }
    let meta = session.mcpx_call("stateless", "meta", json!({})).structured()["meta"].clone();
    assert_eq!(meta[LOG_LEVEL], "debug", "{meta}");

    assert_eq!(session.request("logging/setLevel", json!({"level": "error"})).result(), &json!({}));
    for server in ["legacy", "stateless"] {
        let reply = session.mcpx_call(server, "test_logging_levels", json!({}));
        reply.result();
        assert_eq!(levels(&reply.frames), ["error"], "{server}, at error:\n{reply}");
    }
    let meta = session.mcpx_call("stateless", "meta", json!({})).structured()["meta"].clone();
    assert_eq!(meta[LOG_LEVEL], "error", "the stateless upstream is asked for the session's level: {meta}");

    // The level is the session's own: another session still hears everything.
    let other = LegacySession::open(daemon.url());
    let reply = other.mcpx_call("legacy", "test_logging_levels", json!({}));
    assert_eq!(levels(&reply.frames), ["info", "error"], "{reply}");

    // A level that is not one is refused, and the session keeps its level.
    let refused = session.request("logging/setLevel", json!({"level": "loud"}));
    assert_eq!(refused.error_code(), -32602, "{refused}");
    let reply = session.mcpx_call("legacy", "test_logging_levels", json!({}));
    assert_eq!(levels(&reply.frames), ["error"], "{reply}");
}

#[test]
fn a_stdio_connection_at_error_hears_only_errors() {
    let t = tag();
    let home = Home::new(&both_eras(&t));
    let mut serve = home.serve().arg("--no-daemon").start();
    serve.initialize(mcpx_e2e::schema::LEGACY);
    let call = |server: &str| json!({"name": "mcpx_call", "arguments": {"server": server, "tool": "test_logging_levels", "arguments": {}}});

    assert_eq!(serve.legacy_request("logging/setLevel", json!({"level": "error"})).result(), &json!({}));
    for server in ["legacy", "stateless"] {
        let answer = serve.legacy_request("tools/call", call(server));
        answer.result();
        assert_eq!(levels(&answer.notifications), ["error"], "{server}: {:?}", answer.notifications);
    }
    // Lowered again, the connection hears info too.
    serve.legacy_request("logging/setLevel", json!({"level": "info"})).result();
    let answer = serve.legacy_request("tools/call", call("legacy"));
    assert_eq!(levels(&answer.notifications), ["info", "error"], "{:?}", answer.notifications);
}
