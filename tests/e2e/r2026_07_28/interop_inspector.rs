//! A real third-party client in the 2026-07-28 era: the MCP Inspector CLI
//! (`@modelcontextprotocol/inspector@2.12.0 --cli --protocol-era modern`, on Node 22, pinned
//! by scripts/deps.sh) listing and calling tools through mcpx, over Streamable HTTP to the
//! daemon and over stdio through `mcpx serve`. The Inspector prints only results, so a tap
//! between it and mcpx shows the era it spoke.

use serde_json::{Value, json};

use mcpx_e2e::Daemon;
use mcpx_e2e::node::{
    Inspector, Target, assert_echoed, assert_http_modern, assert_stdio_modern, echo_gateway_config, mcpx_serve,
    rpc_methods, tap_command, unique,
};
use mcpx_e2e::tap::{HttpTap, StdioTap};

#[track_caller]
fn assert_gateway_tools(tools: &[String]) {
    assert!(
        tools.iter().any(|t| t == "mcpx_search") && tools.iter().any(|t| t == "mcpx_call"),
        "gateway tools missing: {tools:?}"
    );
}

/// `mcpx_call` arguments for `--tool-arg`: fakemcp's `echo` with `{"v": value}`.
fn echo_args(value: &str) -> Vec<(&'static str, Value)> {
    vec![("server", json!("fake")), ("tool", json!("echo")), ("arguments", json!({"v": value}))]
}

#[test]
fn inspector_cli_modern_lists_the_gateway_tools_over_http() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let tools = Inspector::new().list_tools("modern", &Target::Url(tap.url()), &[]);
    assert_gateway_tools(&tools);
    let requests = tap.requests();
    let bodies: Vec<Value> = requests.iter().map(|r| r.body.clone()).collect();
    let methods = rpc_methods(&bodies);
    assert_eq!(methods.first().map(String::as_str), Some("server/discover"), "{}", tap.transcript());
    assert!(!methods.iter().any(|m| m == "initialize"), "{}", tap.transcript());
    let list = requests
        .iter()
        .find(|r| r.rpc_method() == Some("tools/list"))
        .unwrap_or_else(|| panic!("no tools/list went through:\n{}", tap.transcript()));
    assert_eq!(list.header("mcp-protocol-version"), Some("2026-07-28"));
}

#[test]
fn inspector_cli_modern_calls_mcpx_call_over_http() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let value = unique("inspector-modern-http");
    let result = Inspector::new().call_tool("modern", &Target::Url(tap.url()), &[], "mcpx_call", &echo_args(&value));
    assert_echoed(&result, &value);
    assert_http_modern(&tap);
}

/// `--protocol-era auto` discovers first; mcpx answers, so the Inspector stays modern.
#[test]
fn inspector_cli_auto_settles_on_2026_07_28_over_http() {
    let daemon = Daemon::start(&echo_gateway_config());
    let tap = HttpTap::start(daemon.url());
    let value = unique("inspector-auto-http");
    let result = Inspector::new().call_tool("auto", &Target::Url(tap.url()), &[], "mcpx_call", &echo_args(&value));
    assert_echoed(&result, &value);
    assert_http_modern(&tap);
}

/// The Inspector launches `mcpx serve` with `-e MCPX_STATE_DIR=<the test's state dir>`, so
/// it joins the test's daemon; one run lists the tools, another calls through `mcpx_call`.
#[test]
fn inspector_cli_modern_lists_and_calls_over_stdio_through_mcpx_serve() {
    let daemon = Daemon::start(&echo_gateway_config());
    let inspector = Inspector::new();
    let env = [("MCPX_STATE_DIR", daemon.state_dir())];

    let listing = StdioTap::new();
    let tools = inspector.list_tools("modern", &Target::Command(tap_command(&listing, &mcpx_serve())), &env);
    assert_gateway_tools(&tools);
    let sent = listing.sent();
    assert!(!rpc_methods(&sent).iter().any(|m| m == "initialize"), "{}", listing.transcript());

    let calling = StdioTap::new();
    let value = unique("inspector-modern-stdio");
    let result = inspector.call_tool(
        "modern",
        &Target::Command(tap_command(&calling, &mcpx_serve())),
        &env,
        "mcpx_call",
        &echo_args(&value),
    );
    assert_echoed(&result, &value);
    assert_stdio_modern(&calling);
    assert_eq!(daemon.home().daemons(), vec![daemon.pid()]);
}
