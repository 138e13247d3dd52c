//! A real third-party client in the 2026-07-28 era: the TypeScript SDK v2 `Client`
//! (`@modelcontextprotocol/client`, pinned by scripts/deps.sh), pinned to 2026-07-28 or in
//! `auto` mode, over Streamable HTTP to the daemon and over stdio through `mcpx serve`.
//! A tap between the client and mcpx shows what it really sent; fakemcp's `echo`, reached
//! through `mcpx_call`, round-trips a value unique to the test.

use std::ffi::OsStr;

use mcpx_e2e::Daemon;
use mcpx_e2e::node::{
    Target, assert_echoed, assert_http_modern, assert_stdio_modern, echo_call, echo_gateway_config, mcpx_serve,
    tap_command, ts_sdk_client, unique,
};
use mcpx_e2e::tap::{HttpTap, StdioTap};
use serde_json::Value;

/// The SDK's report: modern era at 2026-07-28, mcpx's serverInfo, the gateway tools, and
/// `value` echoed back.
#[track_caller]
fn assert_modern_echo(out: &Value, value: &str) {
    assert_eq!(out["era"], "modern", "{out}");
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(out["serverInfo"]["name"], "mcpx", "{out}");
    let tools: Vec<&str> =
        out["tools"].as_array().unwrap_or_else(|| panic!("no tools: {out}")).iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"mcpx_search") && tools.contains(&"mcpx_call"), "gateway tools missing: {out}");
    assert_echoed(&out["result"], value);
}

/// `versionNegotiation: {mode: {pin: "2026-07-28"}}`: the SDK's `server/discover` must offer
/// that revision; it lists the tools and calls through `mcpx_call` without `initialize`.
#[test]
fn ts_sdk_client_pinned_to_2026_07_28_over_http_echoes_through_mcpx_call() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let value = unique("ts-sdk-pinned-http");
    let out = ts_sdk_client(&Target::Url(tap.url()), &[], "2026-07-28", "mcpx_call", &echo_call("fake", &value));
    assert_modern_echo(&out, &value);
    assert_http_modern(&tap);
    assert!(
        tap.requests().iter().any(|r| r.rpc_method() == Some("server/discover")),
        "a pinned client discovers first:\n{}",
        tap.transcript()
    );
}

/// `auto` probes with `server/discover`; mcpx answers it, so the SDK settles on 2026-07-28.
#[test]
fn ts_sdk_client_in_auto_mode_over_http_settles_on_2026_07_28() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let value = unique("ts-sdk-auto-http");
    let out = ts_sdk_client(&Target::Url(tap.url()), &[], "auto", "mcpx_call", &echo_call("fake", &value));
    assert_modern_echo(&out, &value);
    assert_http_modern(&tap);
}

/// The SDK launches `mcpx serve` (with the test's `MCPX_STATE_DIR`, so it joins the test's
/// daemon rather than starting one) and speaks 2026-07-28 to it over stdio.
#[test]
fn ts_sdk_client_pinned_to_2026_07_28_over_stdio_through_mcpx_serve() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = StdioTap::new();
    let value = unique("ts-sdk-pinned-stdio");
    let out = ts_sdk_client(
        &Target::Command(tap_command(&tap, &mcpx_serve())),
        &[("MCPX_STATE_DIR", daemon.state_dir().as_os_str())],
        "2026-07-28",
        "mcpx_call",
        &echo_call("fake", &value),
    );
    assert_modern_echo(&out, &value);
    assert_stdio_modern(&tap);
    // The call went through this test's daemon: it runs the upstream, and no other
    // daemon was started for the state dir.
    assert_eq!(daemon.home().daemons(), vec![daemon.pid()]);
    assert!(!daemon.home().instances("fake").is_empty(), "the daemon never started fake: {}", daemon.home().status());
}

/// In `auto` mode over stdio the SDK probes on a short-lived sibling `mcpx serve`, then
/// launches the one it keeps; both join the test's daemon and the SDK settles on
/// 2026-07-28.
#[test]
fn ts_sdk_client_in_auto_mode_over_stdio_settles_on_2026_07_28() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = StdioTap::new();
    let value = unique("ts-sdk-auto-stdio");
    let out = ts_sdk_client(
        &Target::Command(tap_command(&tap, &mcpx_serve())),
        &[("MCPX_STATE_DIR", OsStr::new(daemon.state_dir()))],
        "auto",
        "mcpx_call",
        &echo_call("fake", &value),
    );
    assert_modern_echo(&out, &value);
    assert_stdio_modern(&tap);
    assert_eq!(daemon.home().daemons(), vec![daemon.pid()]);
}
