//! Real agent hosts in the handshake era: Gemini CLI, Qwen Code, Codex and opencode
//! (pinned by scripts/deps.sh) run their own CLIs against mcpx, over `mcpx serve` and
//! over `/mcp`, each with its model endpoint on a local stand-in model that asks for one
//! `mcpx_call`: the call reaches fakemcp through mcpx and its result reaches the model
//! and the host's output. `codex mcp list` prints its config without connecting, so
//! Codex is proven by its turns alone.

use mcpx_e2e::hosts::{Host, Link, Transport, assert_host_calls_through_mcpx, assert_host_lists_mcpx};

/// The host opened a handshake-era session asking for `revision`.
#[track_caller]
fn assert_handshake(link: &Link, revision: &str) {
    assert_eq!(link.methods().first().map(String::as_str), Some("initialize"), "{}", link.transcript());
    assert_eq!(link.revision().as_deref(), Some(revision), "{}", link.transcript());
}

macro_rules! host_tests {
    ($host:expr, $revision:expr, $list_serve:ident, $list_http:ident, $call_serve:ident, $call_http:ident) => {
        #[test]
        fn $list_serve() {
            assert_handshake(&assert_host_lists_mcpx($host, Transport::Serve), $revision);
        }

        #[test]
        fn $list_http() {
            assert_handshake(&assert_host_lists_mcpx($host, Transport::Http), $revision);
        }

        #[test]
        fn $call_serve() {
            assert_handshake(&assert_host_calls_through_mcpx($host, Transport::Serve), $revision);
        }

        #[test]
        fn $call_http() {
            assert_handshake(&assert_host_calls_through_mcpx($host, Transport::Http), $revision);
        }
    };
}

host_tests!(
    Host::GeminiCli,
    "2025-06-18",
    gemini_cli_mcp_list_shows_mcpx_connected_over_mcpx_serve,
    gemini_cli_mcp_list_shows_mcpx_connected_over_http,
    gemini_cli_turn_calls_an_upstream_tool_through_mcpx_serve,
    gemini_cli_turn_calls_an_upstream_tool_through_http
);

host_tests!(
    Host::QwenCode,
    "2025-11-25",
    qwen_code_mcp_list_shows_mcpx_connected_over_mcpx_serve,
    qwen_code_mcp_list_shows_mcpx_connected_over_http,
    qwen_code_turn_calls_an_upstream_tool_through_mcpx_serve,
    qwen_code_turn_calls_an_upstream_tool_through_http
);

host_tests!(
    Host::Opencode,
    "2025-11-25",
    opencode_mcp_list_shows_mcpx_connected_over_mcpx_serve,
    opencode_mcp_list_shows_mcpx_connected_over_http,
    opencode_turn_calls_an_upstream_tool_through_mcpx_serve,
    opencode_turn_calls_an_upstream_tool_through_http
);

#[test]
fn codex_turn_calls_an_upstream_tool_through_mcpx_serve() {
    assert_handshake(&assert_host_calls_through_mcpx(Host::Codex, Transport::Serve), "2025-06-18");
}

#[test]
fn codex_turn_calls_an_upstream_tool_through_http() {
    assert_handshake(&assert_host_calls_through_mcpx(Host::Codex, Transport::Http), "2025-06-18");
}
