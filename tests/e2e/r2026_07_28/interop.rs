//! A real third-party client and a real third-party upstream: the Python `mcp` SDK's
//! `Client` talks to the daemon, which runs `mcp-server-time` as its upstream.

use mcpx_e2e::Daemon;
use mcpx_e2e::python::{assert_berlin_time, berlin_call, sdk_client, time_gateway_config};

/// In `auto` mode the SDK probes with `server/discover`; a dual-era gateway answers it, so
/// the client settles on 2026-07-28 and never sends `initialize`.
#[test]
fn python_sdk_client_in_auto_mode_settles_on_2026_07_28_and_calls_a_real_upstream() {
    let daemon = Daemon::start(&time_gateway_config());
    let out = sdk_client(daemon.url(), "auto", "mcpx_call", &berlin_call());
    assert_eq!(out["era"], "modern", "{out}");
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    // The SDK learns serverInfo from the DiscoverResult's _meta; a pinned client never asks.
    assert!(out["serverInfo"]["name"].is_string(), "server/discover must carry serverInfo in _meta: {out}");
    assert_berlin_time(&out);
}

#[test]
fn python_sdk_client_pinned_to_2026_07_28_calls_a_real_upstream_through_mcpx_call() {
    let daemon = Daemon::start(&time_gateway_config());
    let out = sdk_client(daemon.url(), "2026-07-28", "mcpx_call", &berlin_call());
    assert_eq!(out["era"], "modern", "{out}");
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_berlin_time(&out);
}
