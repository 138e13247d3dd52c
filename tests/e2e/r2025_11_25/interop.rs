//! A real third-party client in the handshake era: the Python `mcp` SDK in legacy mode.

use mcpx_e2e::Daemon;
use mcpx_e2e::python::{assert_berlin_time, berlin_call, sdk_client, time_gateway_config};

/// The Python SDK's `Client(mode="legacy")` initializes a 2025-11-25 session, lists the
/// gateway tools and reaches a real `mcp-server-time` through `mcpx_call`.
#[test]
fn python_sdk_client_in_legacy_mode_calls_a_real_upstream_through_mcpx_call() {
    let daemon = Daemon::start(&time_gateway_config());
    let out = sdk_client(daemon.url(), "legacy", "mcpx_call", &berlin_call());
    assert_eq!(out["era"], "legacy", "{out}");
    assert_eq!(out["protocolVersion"], "2025-11-25", "{out}");
    assert_berlin_time(&out);
}
