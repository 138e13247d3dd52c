//! A real third-party client in the handshake era: the MCP Inspector CLI
//! (`@modelcontextprotocol/inspector@2.12.0 --cli --protocol-era legacy`, on Node 22, pinned
//! by scripts/deps.sh) listing and calling tools through mcpx, over Streamable HTTP to the
//! daemon and over stdio through `mcpx serve`. A tap between it and mcpx shows the
//! 2025-11-25 handshake it ran.

use serde_json::{Value, json};

use mcpx_e2e::Daemon;
use mcpx_e2e::node::{
    Inspector, Target, assert_echoed, assert_http_legacy, assert_stdio_legacy, echo_gateway_config, mcpx_serve,
    tap_command, unique,
};
use mcpx_e2e::tap::{HttpTap, StdioTap};

#[track_caller]
fn assert_gateway_tools(tools: &[String]) {
    assert!(
        tools.iter().any(|t| t == "mcpx_search") && tools.iter().any(|t| t == "mcpx_call"),
        "gateway tools missing: {tools:?}"
    );
}

fn echo_args(value: &str) -> Vec<(&'static str, Value)> {
    vec![("server", json!("fake")), ("tool", json!("echo")), ("arguments", json!({"v": value}))]
}

#[test]
fn inspector_cli_legacy_lists_the_gateway_tools_over_http() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let tools = Inspector::new().list_tools("legacy", &Target::Url(tap.url()), &[]);
    assert_gateway_tools(&tools);
    let requests = tap.requests();
    let first = requests.iter().find(|r| r.rpc_method().is_some());
    assert_eq!(first.and_then(|r| r.rpc_method()), Some("initialize"), "{}", tap.transcript());
    let list = requests
        .iter()
        .find(|r| r.rpc_method() == Some("tools/list"))
        .unwrap_or_else(|| panic!("no tools/list went through:\n{}", tap.transcript()));
    assert!(list.header("mcp-session-id").is_some(), "{}", tap.transcript());
    assert_eq!(list.header("mcp-protocol-version"), Some("2025-11-25"));
}

#[test]
fn inspector_cli_legacy_calls_mcpx_call_over_http() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let value = unique("inspector-legacy-http");
    let result = Inspector::new().call_tool("legacy", &Target::Url(tap.url()), &[], "mcpx_call", &echo_args(&value));
    assert_echoed(&result, &value);
    assert_http_legacy(&tap);
}

/// The Inspector launches `mcpx serve` with `-e MCPX_STATE_DIR=<the test's state dir>`, so
/// it joins the test's daemon; one run lists the tools, another calls through `mcpx_call`.
#[test]
fn inspector_cli_legacy_lists_and_calls_over_stdio_through_mcpx_serve() {
    let daemon = Daemon::start(&echo_gateway_config());
    let inspector = Inspector::new();
    let env = [("MCPX_STATE_DIR", daemon.state_dir())];

    let listing = StdioTap::new();
    let tools = inspector.list_tools("legacy", &Target::Command(tap_command(&listing, &mcpx_serve())), &env);
    assert_gateway_tools(&tools);
    assert_stdio_legacy(&listing);

    let calling = StdioTap::new();
    let value = unique("inspector-legacy-stdio");
    let result = inspector.call_tool(
        "legacy",
        &Target::Command(tap_command(&calling, &mcpx_serve())),
        &env,
        "mcpx_call",
        &echo_args(&value),
    );
    assert_echoed(&result, &value);
    assert_stdio_legacy(&calling);
    assert_eq!(daemon.home().daemons(), vec![daemon.pid()]);
}
