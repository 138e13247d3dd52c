//! A real agent host in the 2026-07-28 era: Claude Code (`@anthropic-ai/claude-code`,
//! pinned by scripts/deps.sh) runs its own CLI against mcpx, over `mcpx serve` and over
//! `/mcp`, with its model endpoint (`ANTHROPIC_BASE_URL`) on a local stand-in model that
//! asks for one `mcpx_call`. It probes with `server/discover`, then stays stateless.

use mcpx_e2e::hosts::{Host, Transport, assert_host_calls_through_mcpx, assert_host_lists_mcpx};

#[track_caller]
fn assert_modern(link: &mcpx_e2e::hosts::Link) {
    let methods = link.methods();
    assert_eq!(methods.first().map(String::as_str), Some("server/discover"), "{}", link.transcript());
    assert!(!methods.iter().any(|m| m == "initialize"), "Claude Code sent initialize:\n{}", link.transcript());
    assert_eq!(link.revision().as_deref(), Some("2026-07-28"), "{}", link.transcript());
}

#[test]
fn claude_code_mcp_list_shows_mcpx_connected_over_mcpx_serve() {
    let link = assert_host_lists_mcpx(Host::ClaudeCode, Transport::Serve);
    assert_modern(&link);
}

#[test]
fn claude_code_mcp_list_shows_mcpx_connected_over_http() {
    let link = assert_host_lists_mcpx(Host::ClaudeCode, Transport::Http);
    assert_modern(&link);
}

#[test]
fn claude_code_turn_calls_an_upstream_tool_through_mcpx_serve() {
    let link = assert_host_calls_through_mcpx(Host::ClaudeCode, Transport::Serve);
    assert_modern(&link);
}

#[test]
fn claude_code_turn_calls_an_upstream_tool_through_http() {
    let link = assert_host_calls_through_mcpx(Host::ClaudeCode, Transport::Http);
    assert_modern(&link);
}
