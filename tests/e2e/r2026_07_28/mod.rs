//! MCP 2026-07-28 (stateless era), plus daemon behaviour observed through modern requests.

mod access;
mod ask;
mod api;
mod cli;
mod clashes;
mod eras;
mod fakemcp_http;
mod gateway_tools;
mod http_upstream;
mod git_scopes;
mod interop;
mod interop_inspector;
mod interop_ts_sdk;
mod invocation;
mod invocation_paths;
mod lifecycle;
mod pages;
mod roots;
mod scopes;
mod serve;
mod stdio_lines;
mod transport;
mod upstream;
mod questions;
mod questions_real_peers;
mod real_upstreams;
