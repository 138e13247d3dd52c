//! A real third-party client in the handshake era: the TypeScript SDK v2 `Client`
//! (`@modelcontextprotocol/client`, pinned by scripts/deps.sh) in its default `legacy`
//! mode, over Streamable HTTP to the daemon and over stdio through `mcpx serve`. A tap
//! between the client and mcpx shows the handshake; fakemcp's `echo`, reached through
//! `mcpx_call`, round-trips a value unique to the test.

use mcpx_e2e::Daemon;
use mcpx_e2e::node::{
    Target, assert_echoed, assert_http_legacy, assert_stdio_legacy, echo_call, echo_gateway_config, mcpx_serve,
    tap_command, ts_sdk_client, unique,
};
use mcpx_e2e::tap::{HttpTap, StdioTap};
use serde_json::Value;

#[track_caller]
fn assert_legacy_echo(out: &Value, value: &str) {
    assert_eq!(out["era"], "legacy", "{out}");
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out}");
    assert_eq!(out["serverInfo"]["name"], "mcpx", "{out}");
    let tools: Vec<&str> =
        out["tools"].as_array().unwrap_or_else(|| panic!("no tools: {out}")).iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"mcpx_search") && tools.contains(&"mcpx_call"), "gateway tools missing: {out}");
    assert_echoed(&out["result"], value);
}

/// `initialize` (2025-11-25) on `/mcp`, then `tools/list` and `tools/call` in the session.
#[test]
fn ts_sdk_client_in_legacy_mode_over_http_echoes_through_mcpx_call() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let value = unique("ts-sdk-legacy-http");
    let out = ts_sdk_client(&Target::Url(tap.url()), &[], "legacy", "mcpx_call", &echo_call("fake", &value));
    assert_legacy_echo(&out, &value);
    assert_http_legacy(&tap);
}

/// The SDK launches `mcpx serve` (joining the test's daemon through `MCPX_STATE_DIR`) and
/// runs the 2025-11-25 handshake over stdio.
#[test]
fn ts_sdk_client_in_legacy_mode_over_stdio_through_mcpx_serve() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = StdioTap::new();
    let value = unique("ts-sdk-legacy-stdio");
    let out = ts_sdk_client(
        &Target::Command(tap_command(&tap, &mcpx_serve())),
        &[("MCPX_STATE_DIR", daemon.state_dir().as_os_str())],
        "legacy",
        "mcpx_call",
        &echo_call("fake", &value),
    );
    assert_legacy_echo(&out, &value);
    assert_stdio_legacy(&tap);
    assert_eq!(daemon.home().daemons(), vec![daemon.pid()]);
    assert!(!daemon.home().instances("fake").is_empty(), "the daemon never started fake: {}", daemon.home().status());
}
