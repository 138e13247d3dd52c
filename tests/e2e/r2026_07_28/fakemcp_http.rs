//! fakemcp over Streamable HTTP (`fakemcp --http`): the same tools as over stdio, in both
//! eras, and an mcpx daemon reaching it through a `url` server in both caller eras.

use mcpx_e2e::{Daemon, FakeHttp, LegacySession, Modern, Whoami, config};
use serde_json::{Value, json};

fn arguments() -> Value {
    json!({"text": "over http", "n": 7, "nested": {"list": [1, 2]}})
}

#[test]
fn fakemcp_over_http_answers_modern_requests_and_legacy_sessions_with_its_stdio_tools() {
    let fake = FakeHttp::start(&[]);

    let list = Modern::tools_list().send(&fake.url);
    let names: Vec<&str> = list.result()["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {list}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo") && names.contains(&"whoami"), "{list}");
    let echo = Modern::tools_call("echo", arguments()).send(&fake.url);
    assert_eq!(echo.status, 200, "{echo}");
    assert_eq!(echo.structured(), &arguments(), "{echo}");
    let modern = Whoami::of(&Modern::tools_call("whoami", json!({})).send(&fake.url));
    assert_eq!(modern.era, "modern");

    // A handshake-era request outside a session is refused; inside one it is answered,
    // by the same process.
    let outside = Modern::tools_list()
        .without_meta("io.modelcontextprotocol/protocolVersion")
        .without_meta("io.modelcontextprotocol/clientCapabilities")
        .send(&fake.url);
    assert!(outside.frame().get("error").is_some(), "{outside}");
    let session = LegacySession::open(&fake.url);
    let legacy = Whoami::of(&session.tools_call("whoami", json!({})));
    assert_eq!(legacy.era, "legacy");
    assert_eq!(legacy.instance, modern.instance);
    assert_eq!(legacy.calls, modern.calls + 1);
    let echo = session.tools_call("echo", arguments());
    assert_eq!(echo.structured(), &arguments(), "{echo}");

    // DELETE ends the session: its id is then unknown.
    assert_eq!(session.delete().status, 200);
    let after = session.request("tools/list", json!({}));
    assert_eq!(after.status, 404, "{after}");
}

#[test]
fn a_daemon_answers_tools_calls_through_a_url_server_that_is_fakemcp_over_http() {
    let fake = FakeHttp::start(&[]);
    let direct = Whoami::of(&Modern::tools_call("whoami", json!({})).send(&fake.url));
    let daemon = Daemon::start(&config(&[("fake", json!({"url": fake.url}))]));

    let echo = Modern::mcpx_call("fake", "echo", arguments()).send(daemon.url());
    assert_eq!(echo.structured(), &arguments(), "{echo}");
    let through = Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(through.instance, direct.instance, "mcpx reached the fakemcp that listens on {}", fake.url);
    assert_eq!(through.era, "modern", "fakemcp answers server/discover, so mcpx speaks 2026 to it");
    assert!(through.calls > direct.calls);

    let session = LegacySession::open(daemon.url());
    let echo = session.mcpx_call("fake", "echo", arguments());
    assert_eq!(echo.structured(), &arguments(), "{echo}");
}

#[test]
fn a_daemon_falls_back_to_a_session_with_a_handshake_era_fakemcp_over_http() {
    let fake = FakeHttp::start(&["--era", "legacy"]);
    let daemon = Daemon::start(&config(&[("fake", json!({"url": fake.url}))]));

    let echo = Modern::mcpx_call("fake", "echo", arguments()).send(daemon.url());
    assert_eq!(echo.structured(), &arguments(), "{echo}");
    let first = Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(first.era, "legacy", "mcpx opened a session after server/discover was refused");
    let second = Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(second.instance, first.instance);
    assert_eq!(second.calls, first.calls + 1);
}
